"""Compare heads: every head coloured by a statistic, heads side by side, which heads link two tokens,
and which heads attend alike."""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import compare, metrics
from attnkit.standard import parse_head
from attnkit.app.pages.shared import labels as choice_labels
from attnkit.app.pages.compare import effect, similarity
from attnkit.app.pages.shared import matrices
from attnkit.charts import heatmaps as hm
from attnkit.i18n import t

CAPTURE = ("pattern", "scores")        # the same capture as the Heatmaps page: one cached run serves both
RANDOM_INDUCTION = choice_labels.RANDOM_INDUCTION
STATS = {**metrics.HEAD_STATS, RANDOM_INDUCTION: choice_labels.RANDOM_INDUCTION_HELP}
SCOPES = similarity.SCOPES
shown = choice_labels.shown(choice_labels.COMPARE_NAMES)


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys cmp_*, URL parameters by field name; the opened heads are ``heads``)."""

    prefix = "cmp"
    stat: str = next(iter(STATS))
    open: list[str] = ui.param([], url="heads")
    scale: str = ui.param(None)
    q: int = -1
    k: int = -1
    scope: str = ui.param(None)
    sim_layer: int = 0
    no_first: bool = False               # position 0 (the attention sink) taken out of the statistics


ctx = ui.page("compare")

cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads
ids = ctx.ids
T = len(ids)
toks = ctx.model.token_texts(ids)
labels = ui.token_labels(toks)
state = Inputs.load(scale=hm.default_scale(T), scope=SCOPES[0] if L * H <= 64 else SCOPES[1])
state.fit("stat", list(STATS), next(iter(STATS)), what=t("Statistic"), because=t("not one of this page's statistics"), fmt=shown)
state.fit("scale", list(hm.SCALES), hm.default_scale(T), what=t("Colour scale"), because=t("not one of the scales"))
state.fit("scope", SCOPES, SCOPES[0] if L * H <= 64 else SCOPES[1], what=t("Compare"),
          because=t("not one of the choices"), fmt=shown)
state.fit("sim_layer", range(L), 0, what=t("Layer"), because=t("the model has {n} layers", n=L), basis=ctx.model_name)
if ui.from_link("cmp_open") and "cmp_open_for" not in st.session_state:
    st.session_state["cmp_open_for"] = state.stat          # the heads the link opened, not the statistic's top two


@ui.budgeted
def prompt_scores(model: str, device: str, ids: tuple, capture: tuple, _ctx, no_first: bool = False) -> dict:
    """head_scores of every head on one prompt, {stat: [L, H] array}; keyed by (model, device, ids, no_first)."""
    tr = ui.trace(_ctx, capture=capture, ids=list(ids))
    per_layer = [metrics.head_scores(tr["pattern", l][0], list(ids), window=cfg.window(l), exclude_first=no_first)
                 for l in range(L)]
    return {k: torch.stack([d[k] for d in per_layer]).double().cpu().numpy() for k in per_layer[0]}  # no [L,H,T,T] copy


@ui.budgeted
def random_induction(model: str, device: str, _weights) -> np.ndarray:
    return metrics.induction_scores(_weights).double().cpu().numpy()


def matrix_csv(values: np.ndarray, layer: int, head: int) -> bytes:
    """One head's whole pattern, a row per query position (built only when the button is clicked)."""
    return ui.csv_bytes(matrices.matrix_rows(values, toks), comments=meta(layer=layer, head=head))


def meta(**extra) -> dict:
    return ui.meta_for(ctx, n_tokens=T if not ctx.all_selected else "various", **extra)


def statistic_values():
    """The chosen statistic of every head: (statistic, values [L, H], a note on what they average)."""
    c1, c2 = st.columns([1, 2])
    stat = c1.selectbox(t("Statistic"), list(STATS), key="cmp_stat", format_func=shown)
    c2.caption(str(STATS[stat]))
    no_first = st.checkbox(t("Exclude position 0 (the attention sink)"), key="cmp_no_first")
    if no_first:
        st.caption(t("Position 0 is taken out: query 0 and key 0 are dropped and every other row is renormalised over "
                     "keys j ≥ 1, so a head that parks its attention on the first token is described by what it does "
                     "with the rest; first-token is then undefined. Not applied to induction on random repeats."))
    if stat == RANDOM_INDUCTION:
        with st.spinner(t("Running the repeated-random-token test …")):
            values = random_induction(ctx.model_name, ctx.device, ctx.model.weights)
        note = t("Computed once per model on repeated random tokens (not on your prompt).")
    elif ctx.all_selected:
        per = ui.traces_for_all(ctx, lambda i: prompt_scores(ctx.model_name, ctx.device, tuple(i), ("pattern",), ctx,
                                                             no_first),
                                t("Head statistics over the prompts"))
        if not per:
            ui.show_error(t("None of the prompts has at least 2 tokens: nothing to average."))
            ui.stop()
        means, counts = compare.mean_scores([{k: torch.from_numpy(v) for k, v in d.items()} for d in per])
        values = means[stat].numpy()
        n_used = int(counts[stat].max())
        note = t("Mean over {n} of the {total} prompts (a prompt where the statistic is undefined — e.g. no repeated "
                 "token for duplicate-token — is left out of that mean).", n=n_used, total=len(ctx.prompts))
    else:
        values = prompt_scores(ctx.model_name, ctx.device, tuple(ids), CAPTURE, ctx, no_first)[stat]
        note = t("On the chosen prompt ({n} tokens).", n=T)
    return stat, values, note


def opened_heads(stat: str, values):
    """The frame of the statistic, and the heads opened below: the statistic's top two until the user opens others, plus a head clicked in the overview."""
    df_stat = compare.scores_frame(torch.from_numpy(np.asarray(values)), stat)
    undefined = bool(df_stat[stat].isna().all())
    all_heads = list(df_stat["head"])
    ranked = list(df_stat.sort_values(stat, ascending=False, na_position="last")["head"])
    # the heads opened below follow the chosen statistic: its top two, until the user opens others
    state.fit_many("open", all_heads, [], what=t("Opened heads"), because=t("the model has {n} heads", n=f"{L}×{H}"))
    if (st.session_state.get("cmp_open_for") != stat or "cmp_open" not in st.session_state
            or any(h not in all_heads for h in st.session_state["cmp_open"])):
        st.session_state["cmp_open"] = [] if undefined else ranked[:2]
        st.session_state["cmp_open_for"] = stat
    # a click on a cell (the chart's selection, from the previous interaction) opens that head below
    clicked = [str(h) for h in ui.new_click("cmp_overview", "pick", "head")]
    if clicked:
        opened = [h for h in st.session_state["cmp_open"] if h not in clicked] + [h for h in clicked if h in all_heads]
        st.session_state["cmp_open"] = opened[-4:]
    return df_stat, all_heads, ranked, undefined


def overview(stat: str, note: str, df_stat, undefined: bool):
    """The overview chart: every head coloured by the statistic; a click opens a head below."""
    picked = st.session_state["cmp_open"]
    if undefined:
        st.info(t("“{stat}” is undefined on this prompt (e.g. no token occurs twice), so there is nothing to draw; "
                  "pick another statistic or a longer prompt.", stat=shown(stat)))
    else:
        chart = hm.head_overview_chart(df_stat, stat, selected=picked, select="pick", label=shown(stat))
        st.altair_chart(chart, width="content", on_select="rerun", selection_mode="pick", key="cmp_overview")
        st.caption(note + t(" Click a cell to open that head below; outlined: the heads opened."))
        st.caption(effect.pattern_note())  # internal text: the catalog's
        ui.download_buttons(df_stat, chart, f"head_{stat.replace(' ', '_')}", meta(statistic=stat), key="overview")


def beside_corpus(stat: str, df_stat):
    """The same statistic over a corpus, with intervals, beside this prompt's values."""
    with st.expander(t("Beside a corpus: the same statistic over many documents, with intervals")):
        corpus = ui.corpus_result("cmp_corpus")
        if corpus is not None:
            try:
                df_c = corpus.head_stat(stat)
            except KeyError as e:
                st.info(str(e).strip("'\""))  # internal text: the corpus module's message
            else:
                here = df_stat.set_index("head")[stat]
                table = (df_c.assign(**{"this prompt": [float(here.get(h, np.nan)) for h in df_c["head"]]})
                         .sort_values(stat, ascending=False)[["head", stat, "lo", "hi", "windows", "this prompt"]]
                         .rename(columns={stat: t("corpus mean"), "lo": t("95 % low"), "hi": t("95 % high"), "head": t("head"),
                                          "this prompt": t("this prompt"), "windows": t("windows")}))
                c_chart = hm.head_overview_chart(df_c, stat, label=shown(stat))
                left, right = st.columns([1, 1])
                left.altair_chart(c_chart, width="content")
                ui.show_table(table, on=right, hide_index=True, width="stretch", height=360)
                st.caption(t("Corpus: {n} documents; intervals: bootstrap over documents. A head whose prompt value "
                             "lies outside its corpus interval behaves unusually here.", n=f"{len(corpus.documents):,}"))
                ui.download_buttons(table, c_chart, f"corpus_head_{stat.replace(' ', '_')}", meta(statistic=stat),
                                    key="corpus")


def side_by_side(stat: str, all_heads: list, ranked: list):
    """The opened heads' patterns side by side, each with its statistics and downloads."""
    st.subheader(t("Heads side by side"))
    picked = st.multiselect(t("Open heads (up to 4)"), all_heads, key="cmp_open", max_selections=4,
                            help=t("Sorted list by “{stat}”: {heads} …", stat=shown(stat), heads=", ".join(ranked[:5])))
    if ctx.all_selected:
        st.caption(t("Heatmaps use the first prompt; pick a single prompt in the sidebar for another."))
    side_scale = st.radio(t("Colour scale"), hm.SCALES, key="cmp_scale", horizontal=True,
                          format_func=choice_labels.shown(choice_labels.SCALE_NAMES), help=t("The same choice as on the Heatmaps page."))
    st.caption(hm.scale_note(side_scale))  # internal text: a sentence from the chart module
    if picked:
        tr = ui.trace(ctx, capture=CAPTURE, ids=ids)
        if T > hm.MARK_LIMIT:
            st.caption(t("{n} tokens: each head is drawn as an image (one pixel per cell, no tooltips); the Heatmaps "
                         "page has a focus window with tokens and tooltips.", n=T))
        cols = st.columns(len(picked))
        room = (hm.CONTENT_WIDTH - 16 * (len(picked) - 1)) // len(picked)     # one column's width
        for col, name in zip(cols, picked):
            l, h = parse_head(name)
            vals = tr["pattern", l][0, h].float().cpu().numpy().copy()       # one head, not a view of its layer
            masked = hm.masked_cells(T, window=cfg.window(l))                # the layer's window included
            with col:
                if T <= hm.MARK_LIMIT:
                    ch = hm.cell_chart(vals, labels, labels, masked=masked, title=name, scale=side_scale,
                                       size=max(160, min(640, room - (100 if len(picked) <= 2 else 12))),
                                       axes=len(picked) <= 2, legend=False)
                else:
                    ch = hm.image_chart(vals, masked=masked, title=name, scale=side_scale,
                                        size=max(160, min(620, room - 12)),
                                        legend=False)
                st.altair_chart(ch, width="content")
                row = {s: float(v[l, h]) for s, v in prompt_scores(ctx.model_name, ctx.device, tuple(ids), CAPTURE,
                                                                   ctx, state.no_first).items()}
                st.caption(" · ".join(f"{shown(s)} {v:.2f}" for s, v in row.items() if np.isfinite(v)))
                effect.effect_button(ctx, name)
                if T <= hm.MARK_LIMIT:
                    ui.download_buttons(matrices.cell_rows(vals, toks, masked), ch, f"pattern_{name}",
                                        meta(layer=l, head=h), key=f"side{name}")
                else:                             # a million cells: the statistics now, the matrix only on request
                    ui.download_buttons(pd.DataFrame([{"layer": l, "head": h, **row}]), ch, f"pattern_{name}",
                            meta(layer=l, head=h), key=f"side{name}")
                    st.download_button(t("Matrix as CSV ({T}×{T})", T=T), lambda v=vals, l=l, h=h: matrix_csv(v, l, h),
                                       file_name=f"pattern_{name}_matrix.csv", mime="text/csv",
                                       key=f"side-matrix-{name}", on_click="ignore")


def token_pair():
    """Which heads link a query token to a key token."""
    st.subheader(t("Which heads link these two tokens?"))
    if ctx.all_selected:
        st.caption(t("On the first prompt."))
    if T < 2:
        st.info(t("The prompt needs at least two tokens."))
    else:
        q_default = compare.find_token(toks, "it")
        q_default = q_default if q_default else T - 1
        k_default = compare.find_token(toks, "animal", before=q_default + 1)
        k_default = 0 if k_default is None else k_default
        because = t("the prompt changed and that position holds another token")
        state.fit("q", range(1, T), q_default if q_default >= 1 else T - 1, what=t("Query token"), basis=tuple(ids),
                  meaning=ids.__getitem__, fmt=labels.__getitem__, because=because)
        c1, c2 = st.columns(2)
        q = ui.select(c1, t("Query token (attending)"), range(1, T), state, "q", labels.__getitem__)
        state.fit("k", range(0, q + 1), k_default if k_default <= q else 0, what=t("Key token"), basis=tuple(ids),
                  meaning=ids.__getitem__, fmt=labels.__getitem__,
                  because=because if state.k is not None and state.k <= q else t("it must be at or before the query"))
        k = ui.select(c2, t("Key token (attended to, at or before the query)"), range(0, q + 1), state, "k",
                      labels.__getitem__)
        tr = ui.trace(ctx, capture=CAPTURE, ids=ids)
        q_rows = torch.stack([tr["pattern", l][0, :, q : q + 1, :].cpu() for l in range(L)])   # [L, H, 1, T]: row q
        table = compare.rank_heads_for_pair(q_rows, 0, k)
        bars = hm.rank_chart(table, title=t("Weight from {q} to {k}, top {top} of {n} heads", q=labels[q], k=labels[k], top=min(15, L * H), n=L * H))
        left, right = st.columns([1, 1])
        left.altair_chart(bars, width="content")
        left.caption(t("Attention weights (where each head looks from the query), not effects on the output."))
        shown = table.head(20).assign(top_key=[labels[j] for j in table.head(20)["top_key"]])
        ui.show_table(shown, on=right, hide_index=True, width="stretch",
                      column_config={"rank_in_row": st.column_config.NumberColumn(
                          t("rank in row"), help=t("1 = this key gets the most attention from this query in that head")),
                          "top_key": st.column_config.TextColumn(t("most attended key"))})
        ui.download_buttons(table.assign(query_pos=q, query_token=toks[q], key_pos=k, key_token=toks[k]), bars,
                            f"heads_linking_{q}_{k}", meta(), key="pair")


# ----------------------------------------------------------------------------- the page
st.subheader(t("Every head at a glance"))
stat, values, note = statistic_values()
df_stat, all_heads, ranked, undefined = opened_heads(stat, values)
overview(stat, note, df_stat, undefined)
beside_corpus(stat, df_stat)
side_by_side(stat, all_heads, ranked)
token_pair()
similarity.similarity_section(ctx, CAPTURE, meta)
