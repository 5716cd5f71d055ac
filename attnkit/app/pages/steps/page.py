"""Step by step: one head's attention with its real numbers (and layer 0's score split, the seeds' X·Xᵀ measured),
the seeds' examples, the softmax calculator, the next token, the KV cache, W_Q ≠ W_K."""
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import score_terms as terms_lib
from attnkit import steps as head_steps
from attnkit.app.pages.shared.next_token import next_token_table
from attnkit.app.pages.shared.splits import compute, seconds
from attnkit.app.pages.shared import calculator
from attnkit.app.pages.steps import seeds, tabs
from attnkit.charts import score_terms as term_charts
from attnkit.charts import steps as step_charts
from attnkit.i18n import punctuation, t
from attnkit.standard import head_name


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys st_*, URL parameters by field name)."""

    prefix = "st"
    layer: int = 0
    head: int = 0
    query: int = -1          # the last token
    topk: int = 10
    kv_n: int = 8
    kv_len: int = 256
    sym_start: int = 0


ctx = ui.page("steps")

cfg = ctx.model.config
ids = ctx.ids
if not ids:
    ui.show_error(t("The prompt has no tokens."))
    ui.stop()
tokens = ctx.tokens
labels = ui.token_labels(tokens)
T = len(ids)
if ctx.all_selected:
    st.caption(t("All prompts are selected: this page walks through the first one."))

# ----------------------------------------------------------------------------- choices
state = Inputs.load()
state.fit_head(cfg, ctx.model_name)
state.fit("query", range(T), T - 1, what=t("Query token"), basis=tuple(ids), meaning=ids.__getitem__,
          fmt=labels.__getitem__, because=t("the prompt changed, so the last token is the query"))
c1, c2, c3 = st.columns([1, 1, 3])
layer = c1.selectbox(t("Layer"), range(cfg.n_layers), key="st_layer")
head = c2.selectbox(t("Head"), range(cfg.n_heads), key="st_head")
query = ui.select(c3, t("Query token"), range(T), state, "query", labels.__getitem__,
                  help=t("The token whose attention row is computed; it sees itself and every earlier token."))
meta = ui.meta_for(ctx, layer=layer, head=head, query=query)
stem = f"{head_name(layer, head)}q{query}"


@ui.budgeted
def _steps(name: str, device: str, ids: tuple, layer: int, head: int, query: int, _resid) -> head_steps.HeadSteps:
    return head_steps.head_steps(ctx.model.weights, list(ids), layer, head, query, resid_pre=_resid)


def vec_row(name: str, vec: torch.Tensor, n: int = head_steps.COMPACT_DIMS) -> pd.DataFrame:
    vec = vec.detach().float().cpu()
    return pd.DataFrame([{t("vector"): name, **{f"[{j}]": float(vec[j]) for j in range(min(n, vec.numel()))},
                          t("norm"): float(vec.norm()), t("dims"): vec.numel()}])


def fmt(x: float) -> str:
    return "−∞" if x == float("-inf") else f"{x:.4f}"


try:
    resid = ui.trace(ctx, capture=("resid_pre",))["resid_pre", layer][0]
    hs = _steps(ctx.model_name, ctx.device, tuple(ids), layer, head, query, resid)
except Exception as e:                       # never a traceback
    ui.show_error(t("Could not compute the steps: {error}", error=f"{e.__class__.__name__}: {str(e)[:200]}"))
    ui.stop()

tab_head, tab_seed, tab_calc, tab_next, tab_kv, tab_sym = st.tabs(
    [t("One head, one query"), t("Seed examples"), t("Softmax calculator"), t("Next token"), t("KV cache"),
     t("Why W_Q ≠ W_K")])

# ----------------------------------------------------------------------------- one head
def vectors_section(hs, e: int):
    st.subheader(t("1 · x̂ = ln_1(x) for the tokens the query can see"))
    xdf = head_steps.vector_frame(hs, "x_hat", [ui.show_spaces(t) for t in tokens])
    first = ["position", "token"] + [f"x_hat[{j}]" for j in range(min(head_steps.COMPACT_DIMS, cfg.d_model))]
    compact = xdf[first].copy()
    compact["|x̂|"] = hs.x_hat.float().norm(dim=-1).cpu().numpy()
    ui.show_table(compact, hide_index=True, width="stretch", height=min(300, 38 + 35 * len(compact)))

    st.subheader("2 · q = x̂_i·W_Q[h] + b_Q[h];  k_j, v_j = x̂_j·W_K[h] + b_K[h], x̂_j·W_V[h] + b_V[h]")
    if hs.q_pre is not None:              # rotary families: q and k are rotated by their position before q·k
        ui.show_table(vec_row(t("q before rotation (position {query})", query=query), hs.q_pre), hide_index=True, width="stretch")
        st.caption(t("Rotary position embedding: dims (k, k + r/2) of q and every k_j are rotated by the angle "
                     "position·θ_k (r = {r} of {e} dims), so q·k_j depends on the distance i − j.",
                     r=cfg.rotary_dim or e, e=e))
    ui.show_table(vec_row(t("q (position {query}), rotated", query=query) if hs.q_pre is not None
                          else t("q (position {query})", query=query), hs.q),
                  hide_index=True, width="stretch")
    if hs.kv_head is not None:
        st.caption(t("Grouped-query attention: head {head} reads key/value head {kv} (shared by {n} query heads).",
                     head=head, kv=hs.kv_head, n=cfg.group))
    st.caption(t("The first {n} of {e} dimensions and the norm; the full vectors are in the CSVs.",
                 n=head_steps.COMPACT_DIMS, e=e))
    dl = st.columns(4)
    for col, which in zip(dl, ("x_hat", "q", "k", "v")):          # built only when clicked (x̂ can be 1024×768)
        col.download_button(t("{which} (CSV)", which=which), lambda which=which: ui.csv_bytes(
            head_steps.vector_frame(hs, which, tokens).assign(**meta)),
            file_name=f"{stem}_{which}.csv", mime="text/csv", key=f"dl-{which}", on_click="ignore")


def scores_section(hs, e: int, window: int | None):
    st.subheader(t("3 · scores, mask and softmax over the visible keys"))
    st.markdown(  # internal text: numbers and formulas
        f"s_j = q·k_j × {hs.scale:.6g}  (÷ √{e} = ÷ {math.sqrt(e):.4f}"
        + ("" if abs(hs.scale - e ** -0.5) < 1e-12 else punctuation("; ") + t("this checkpoint scales differently"))
        + ")"
        f";  {step_charts.mask_formula(query, window)};  a_j = exp(s_j + M_j) / Σ exp(s + M).")
    n_vis = step_charts.visible_count(query, window)
    if n_vis > 1:
        state.fit("topk", range(1, n_vis + 1), min(10, n_vis), what=t("Keys to list"),
                  because=t("the query sees {n} keys", n=n_vis))
    top_k = st.slider(t("Keys to list (largest weights first)"), 1, n_vis, key="st_topk") if n_vis > 1 else 1
    kdf = head_steps.key_frame(hs, [ui.show_spaces(t) for t in tokens], top_k=top_k)
    ui.show_table(kdf, hide_index=True, width="stretch",
                  column_config={c: st.column_config.NumberColumn(format="%.4f") for c in kdf.columns
                                 if c not in ("position", "token")})
    c_a, c_b = st.columns(2)
    c_a.download_button(t("All visible keys, first 8 dims of k and v (CSV)"),
                        lambda: ui.csv_bytes(head_steps.key_frame(hs, tokens).assign(**meta)),
                        file_name=f"{stem}_keys.csv", mime="text/csv", key="dl-keys", on_click="ignore")
    c_b.download_button(t("Full mask row incl. future keys (CSV)"),
                        lambda: pd.DataFrame({"position": range(T), "token": tokens, "mask": hs.mask_row.cpu().numpy(),
                                              "scores + mask": hs.masked_row.cpu().numpy()}).assign(**meta)
                        .pipe(ui.csv_bytes),
                        file_name=f"{stem}_mask_row.csv", mime="text/csv", key="dl-mask", on_click="ignore")
    around = list(range(max(0, query - 3), min(T, query + 5)))
    ui.show_table(pd.DataFrame({
        t("key"): [labels[j] for j in around],
        t("M (mask)"): [fmt(float(hs.mask_row[j])) for j in around],
        "s + M": [fmt(float(hs.masked_row[j])) for j in around],
        t("weight"): [f"{float(hs.weights[j]):.4f}" if math.isfinite(float(hs.mask_row[j])) else t("0 (exactly)")
                   for j in around],
    }).set_index(t("key")).T, width="stretch")
    st.caption(step_charts.mask_row_caption(query, T, window))  # internal text: numbers
    st.altair_chart(step_charts.weights_chart(head_steps.key_frame(hs, [ui.show_spaces(t) for t in tokens], dims=0),
                                              query, t("softmax weights of query {query}", query=query)), width="stretch")
    m1, m2, m3 = st.columns(3)
    m1.metric(t("Σ weights"), f"{hs.weight_sum:.7f}")
    top = int(hs.weights.argmax())
    m2.metric(t("largest weight"), f"{float(hs.weights[top]):.4f}")
    m3.metric(t("max raw q·k"), f"{float(hs.dots.max()):.4f}")
    st.text(t("largest weight on key {key}", key=labels[top]))


def heads_section(hs, e: int):
    st.subheader(t("4 · z = Σ_j a_j·v_j, and this head's contribution z·W_O[h]"))
    ui.show_table(pd.concat([vec_row("z", hs.z), vec_row(f"z·W_O[{head}]", hs.head_out)]),
                  hide_index=True, width="stretch")

    st.subheader(t("5 · concatenating the heads"))
    st.markdown(
        t("concat(z) = [z_0 | z_1 | … | z_{last}] has {h}·{e} = {n} entries; W_O is {n}×{d}, so "
          "concat(z)·W_O + b_O = Σ_h z_h·W_O[h] + b_O = attn_out.", last=cfg.n_heads - 1, h=cfg.n_heads, e=e,
          n=cfg.n_heads * e, d=cfg.d_model))
    hdf = head_steps.heads_frame(hs)
    hot = hdf["head"] == head                     # by row: the shown frame's headers are translated
    ui.show_table(hdf.style.apply(lambda r: ["background-color: #fff3b0" if hot[r.name] else ""] * len(r),
                                  axis=1), hide_index=True, width="stretch")
    diff = float((hs.sum_of_heads - hs.attn_out).abs().max())
    ui.show_table(pd.concat([vec_row("Σ_h z_h·W_O[h] + b_O", hs.sum_of_heads),
                             vec_row(t("merge: concat(z)·W_O + b_O"), hs.attn_out)]), hide_index=True, width="stretch")
    st.caption(t("max |Σ_h − merge| = {diff} (float32 rounding: the same sum in a different order).", diff=f"{diff:.2e}"))

    with st.expander(t("Check every step against the model's own run")):
        st.write(t("Runs the model with the captures of this layer and compares each number above with them."))
        if st.button(t("Compare with the Trace"), key="st_check"):
            with st.spinner(t("Running the model with captures …")):
                tr = ui.trace(ctx, capture=head_steps.TRACE_CAPTURES, layers=(layer,))
                ui.show_table(head_steps.trace_differences(hs, tr), cells=("step",), hide_index=True, width="stretch",
                              column_config={"max |Δ|": st.column_config.NumberColumn(format="%.2e")})


def layer0_section(ctx: ui.Context, head: int, query: int) -> None:
    """Layer 0's score split into token × token, token × position, position × token, position × position —
    the seeds' X·Xᵀ argument measured — on this prompt and averaged over the sidebar's prompts."""
    st.subheader(t("Layer 0: the seeds' X·Xᵀ, measured"))
    ids, cfg, w = ctx.ids, ctx.model.config, ctx.model.weights
    name, tokens = head_name(0, head), ctx.tokens
    try:
        got = compute(ctx, "st_l0", (tuple(ids), head, query), t("Splitting {head}'s score", head=name),
                      lambda progress: (terms_lib.layer0_top(w, ids, head, query),), seconds(cfg, len(ids), 0, 2))
    except terms_lib.ScoreTermsError as e:
        st.info(ui.plain(str(e)), icon="ℹ️")
        return
    if got is None:
        return
    cells, key = got[0]
    score = sum(cells.values())
    big = max(terms_lib.L0_CELLS[:4], key=lambda c: abs(cells[c]))
    st.text(t("In layer 0 a head reads only X = token embedding + position embedding, so its score is X·Xᵀ seen "
              "through W_Q·W_Kᵀ, in four blocks. {head}'s score from {q} ({qt!r}) to the key it scores highest, "
              "{k} ({kt!r}), is {score}: {big} gives {value} of it, token × token {tt}.", head=name, q=query,
              qt=tokens[query], k=key, kt=tokens[key], score=f"{score:+.3f}", big=big, value=f"{cells[big]:+.3f}",
              tt=f"{cells['token × token']:+.3f}"))
    st.altair_chart(term_charts.layer0_bars(cells, title=t("{head}: query {q} → key {k}", head=name, q=query,
                                                           k=key)), width="content")
    prompts = [p for p in (ctx.encode(text)[0] for text in ctx.prompts) if p]
    if len(prompts) < 2:
        st.caption(t("Upload a prompt set in the sidebar (a file of prompts) to see this split averaged over "
                     "them, with its spread."))
        return
    est = seconds(cfg, max(map(len, prompts)), 0, 2 * len(prompts))
    avg = compute(ctx, "st_l0_avg", (tuple(map(tuple, prompts)), head),
                  t("Layer 0's split over {n} prompts", n=len(prompts)),
                  lambda progress: (terms_lib.layer0_average(w, prompts, head, progress=progress),), est)
    if avg is None:
        return
    df = avg[0]
    st.altair_chart(term_charts.layer0_bars(df, title=t(
        "{head}: mean ± std over {n} prompts (each: its last token → the key it scores highest)", head=name,
        n=len(prompts))), width="content")
    ui.show_table(df, cells=("cell",), hide_index=True, width="stretch")


def one_head_tab(hs):
    e, window = cfg.d_head, cfg.window(layer)
    st.markdown(t("Layer **{layer}**, head **{head}**, query position **{query}**", layer=layer, head=head, query=query)  # internal text
                + f" · {step_charts.visible_header(query, T, window)} · d_model = {cfg.d_model}, d_head = {e}.")
    st.text(t("query token: {token}", token=repr(tokens[query])))
    vectors_section(hs, e)
    scores_section(hs, e, window)
    heads_section(hs, e)


with tab_head:
    one_head_tab(hs)
    layer0_section(ctx, head, query)

with tab_seed:
    seeds.seed_examples()
    seeds.zh_examples(ctx, layer)
with tab_calc:
    calculator.softmax_calculator(d=cfg.d_head)
with tab_next:
    next_token_table(ctx)
with tab_kv:
    tabs.kv_cache(ctx, state)
with tab_sym:
    tabs.symmetry(ctx, state, layer, head, resid, labels)
