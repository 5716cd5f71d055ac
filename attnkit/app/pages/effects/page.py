"""Head effects: which heads carry the answer — activation patching, direct logit attribution,
contributions between positions, and the logit lens, on a clean/corrupted prompt pair."""
import dataclasses
from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnkit import app as ui
from attnkit import attribution
from attnkit import patching
from attnkit.app.pages.effects import focus
from attnkit.app.pages.shared import pairs as pair_widgets
from attnkit.app.pages.shared.pairs import word
from attnkit.charts import effects as effect_charts
from attnkit.i18n import msg, t
from attnkit.standard import head_name, parse_head

GRAPH_MAX_T = 48              # contribution-graph positions drawn
PER_POSITION_MAX_T = 128      # layer × position maps: L·T patched runs
AUTO_RUNS = 600               # layer × position maps up to this many patched runs run when the page opens
DIRECTIONS = list(patching.DIRECTIONS)
LP_TARGETS = {msg("residual stream (entering each layer, and after the last)"): "resid", msg("attention output"): "attn", msg("MLP output"): "mlp"}
SET_TARGETS = {msg("heads (z)"): "z", msg("residual stream"): "resid", msg("attention output"): "attn", msg("MLP output"): "mlp"}
SOURCES = [msg("One prompt pair"), msg("A prompt set (upload)")]


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys he_*, URL parameters by field name)."""

    prefix = "he"
    source: str = SOURCES[0]
    example: str = ui.param(None)                 # the first example whose pair the model can take
    clean: str = ui.param("", text=True)
    corrupt: str = ui.param("", text=True)
    answer: str = ""
    distractor: str = ""
    direction: str = DIRECTIONS[0]
    pos: int = -1                                  # the last token of the pair
    target: str = ui.param(next(iter(LP_TARGETS)), key="he_lp_target")
    run: str = ui.param("clean", key="he_dla_run")
    head: str = ""                                 # the head with the largest direct effect
    focus: str = ""                                # a head asked for by another page (Compare heads' effect check)
    built: str = ui.param("", url=False)           # the corrupted prompt built for it, or "@" + the example used
    thresh: float = 0.1
    set_target: str = next(iter(SET_TARGETS))
    set_direction: str = DIRECTIONS[0]
    set_pp: bool = False


ctx = ui.page("effects")
model = ctx.model
n_layers, n_heads = model.config.n_layers, model.config.n_heads
BOS = ctx.bos_id if ctx.prepend_bos else None      # the sidebar's "Prepend <|endoftext|>", before both prompts


@ui.budgeted
def computed(what: str, name: str, device: str, *args):
    """One of the attributions on the loaded model's weights (cached per model, device and arguments)."""
    return ATTRIBUTIONS[what](ui.cached_model(name, device).weights, *args)


ATTRIBUTIONS = {"dla": attribution.direct_logit_attribution, "contrib": attribution.contributions,
                "vocab": lambda w, ids, pos: attribution.head_vocab(w, ids, pos, k=10),
                "lens": lambda w, ids, answer: attribution.logit_lens(w, ids, answer, k=5)}


def decode(t: int) -> str:
    return model.token_strs([t])[0]


def load_state(checks: dict) -> Inputs:
    example = pair_widgets.example_state(ctx, checks)
    loaded = Inputs.load(**example)
    pair_widgets.fit_example(loaded, example["example"], checks)
    for name, opts in (("source", SOURCES), ("direction", DIRECTIONS), ("target", list(LP_TARGETS)),
                       ("run", ["clean", "corrupted"]), ("set_target", list(SET_TARGETS)), ("set_direction", DIRECTIONS)):
        loaded.fit(name, opts, opts[0], what=name.replace("_", " ").capitalize(), because=t("not one of the choices"))
    return loaded


# ============================================================================= one pair
def one_pair():
    direction = pair_widgets.direction_radio(pair_widgets.pair_inputs("he", CHECKS), "he_direction")
    pair = pair_widgets.pairs_from_inputs(model, "he", BOS)[0]
    T = pair.T
    toks = {"clean": model.token_texts(pair.clean), "corrupted": model.token_texts(pair.corrupt)}
    labels = ui.token_labels(toks["clean"])
    state.fit("pos", range(T), T - 1, what=t("Read position"), basis=(tuple(pair.clean), tuple(pair.corrupt)),
              meaning=pair.clean.__getitem__, fmt=labels.__getitem__,
              because=t("the prompt pair changed, so the logits are read at its last token (pick another below)"))
    c1, c2 = st.columns([1, 3])
    pos = ui.select(c1, t("Read the logits at"), range(T), state, "pos", labels.__getitem__,
                    help=t("The position whose logits give the logit difference (by default the last token)."))
    pair = dataclasses.replace(pair, pos=pos)
    with c2:
        pair_widgets.describe_pair(model, pair)
    meta = ui.meta_for(ctx, clean=st.session_state["he_clean"][:500], corrupted=st.session_state["he_corrupt"][:500],
                       answer=pair.answer_token, distractor=pair.distractor_token, position=pos, direction=direction)
    st.subheader(t("Which heads carry the answer? (patching each head's z)"))
    head_map(pair, direction, meta)
    st.subheader(t("Where, layer by layer? (residual stream, attention and MLP outputs per position)"))
    tname = st.radio(t("Patched activation"), list(LP_TARGETS), key="he_lp_target", horizontal=True, format_func=t)
    if T > PER_POSITION_MAX_T:
        st.info(t("The prompts have {T} tokens: per-position maps are computed for pairs of at most {max} tokens "  # internal text
                  "({L}×{T} patched runs each would take long). The head map above covers every position; the CLI's "
                  "--per-position has no limit.", T=T, max=PER_POSITION_MAX_T, L=n_layers), icon="ℹ️")
    else:
        layer_position(pair, tname, direction, toks["clean"], labels, meta)
    attribution_sections(pair, labels, toks, meta)


def head_map(pair: patching.Pair, direction: str, meta: dict):
    """The map of every head's z patched (a job: progress and Stop while it runs)."""
    zres = pair_widgets.patch_job(ctx, "he_z", pair, "z", False, direction, t("Patching {n} heads", n=n_layers * n_heads))
    if zres is None:
        return
    runs, source = ("corrupted", "clean") if direction == "denoise" else ("clean", "corrupted")
    st.caption(ui.plain(t(
        "Logit difference: clean {clean}, corrupted {corrupt}. {how}: each cell is one run of the {runs} prompt with "
        "that head's z (all positions) taken from the {source} run, started at the head's layer from the cached "
        "residual stream; {n} patched runs in {L} batches.", clean=f"{zres.clean_ld:+.3f}", corrupt=f"{zres.corrupt_ld:+.3f}",
        how=t("Denoising") if direction == "denoise" else t("Noising"), runs=word(runs), source=word(source), n=zres.n_runs, L=n_layers)))
    pair_widgets.gap_warning(zres.clean_ld, zres.corrupt_ld)
    zdf, asked = zres.frame(), focus.focus_head(state, model.config)
    zmap = effect_charts.head_map(zdf, "normalised", select="pick", legend_title=t("normalised"), outline=asked,
                                  title=t("{direction}: normalised logit difference per head", direction=word(direction)))
    st.altair_chart(zmap, width="content", on_select=focus.open_heatmap, selection_mode="pick", key="he_map")
    if asked:
        focus.focus_note(state, zres, asked)
    st.caption(t("Red: the head's activation moves the metric towards the clean run; blue: away. Click a cell to open "
                 "that head's attention pattern on the Heatmaps page (the clean prompt)."))
    ui.download_buttons(zdf, zmap, f"patch_z_{direction}", meta | {"target": "z"}, key="he_z")


def layer_position(pair: patching.Pair, tname: str, direction: str, tokens: list, labels: list, meta: dict):
    target = LP_TARGETS[tname]
    runs = (n_layers + (target == "resid")) * (pair.pos + 1)
    lres = pair_widgets.patch_job(ctx, "he_lp", pair, target, True, direction,
                                  t("Patching {n} activations one position at a time", n=f"{runs:,}"), auto=runs <= AUTO_RUNS)
    if lres is None:
        return st.caption(t("{n} patched runs: press the button to compute this map (progress and Stop shown here).", n=f"{runs:,}"))
    ldf = lres.frame(tokens)
    lmap = effect_charts.layer_pos_map(ldf, labels, "normalised", legend_title=t("normalised"),
                                       title=t("{direction}: {what}, one position at a time", direction=word(direction), what=tname))
    st.altair_chart(lmap, width="content")
    st.caption(ui.plain(t(
        "Each cell: the {what} at one layer and one position patched alone. Positions after the one read ({at}) cannot "
        "matter (the causal mask). For the residual stream, each row adds up everything the earlier layers moved to "
        "each position: information moving between positions shows as the bright cell shifting along the rows; the "
        "last row is the stream after the last block, what the final norm and the unembedding read.", what=tname,
        at=labels[pair.pos])))
    ui.download_buttons(ldf, lmap, f"patch_{target}_{direction}", meta | {"target": target}, key="he_lp")


def attribution_sections(pair: patching.Pair, labels: list, toks: dict, meta: dict):
    st.subheader(t("Direct logit attribution"))
    which = st.radio(t("Run"), ["clean", "corrupted"], key="he_dla_run", horizontal=True, format_func=word)
    ids = pair.clean if which == "clean" else pair.corrupt
    att = computed("dla", ctx.model_name, ctx.device, tuple(ids), pair.answer, pair.distractor, pair.pos)
    dla_charts(att, which, labels[pair.pos], meta | {"run": which})
    head_tokens(att, ids, which, labels[pair.pos], meta | {"run": which})
    st.subheader(t("Contribution graph"))
    if pair.T > attribution.CONTRIB_MAX_T:
        st.info(t("Contributions are computed for prompts of at most {n} tokens.", n=attribution.CONTRIB_MAX_T))
    else:
        contribution_section(ids, toks[which], labels, pair.pos, meta | {"run": which})
    lens_section(pair, ids, toks[which], labels, meta | {"run": which})


def dla_charts(att: attribution.DLA, which: str, at: str, meta: dict):
    st.caption(ui.plain(t(
        "Each part of the final residual stream at {at} (embeddings, every head's z_h·W_O[h], each layer's b_O, each "
        "MLP, the final norm's bias), divided by the final LayerNorm's actual scale (held fixed) and projected on "
        "W_U[answer] − W_U[distractor]. The parts add up to {total}; the model's logit difference is {actual} "
        "(|Δ| = {diff}).", at=at, total=f"{att.total:+.4f}", actual=f"{att.actual:+.4f}",
        diff=f"{abs(att.total - att.actual):.1e}")))
    adf, hdf = att.frame(), att.head_frame()
    left, right = st.columns(2)
    with left:
        bars = effect_charts.attribution_bars(adf, 20, title=t("Top 20 of {n} parts ({run} run)", n=len(adf), run=word(which)), select="part")
        st.altair_chart(bars, width="content", on_select=focus.bar_clicked, selection_mode="part", key="he_bars")
        ui.download_buttons(adf, bars, f"dla_{which}", meta, key="he_dla")
    with right:
        hmap = effect_charts.head_map(hdf, "logit_diff", text=n_layers * n_heads <= 64, legend_title=t("direct effect"),
                                      width=240, title=t("Direct effect of each head"))
        st.altair_chart(hmap, width="content")
        ui.download_buttons(hdf, hmap, f"dla_heads_{which}", meta, key="he_dlah")


def head_tokens(att: attribution.DLA, ids: list, which: str, at: str, meta: dict):
    """A head's promoted / suppressed tokens: a click on a head's bar, or the select box."""
    names = [head_name(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    best = focus.focus_head(state, model.config) or names[int(np.abs(att.head_map).argmax())]
    state.fit("head", names, best, what=t("Head for the promoted tokens"), basis=(tuple(ids), att.pos),
              meaning=str, because=t("the {run} run or the read position changed; by default it is the head with the "
                                     "largest direct effect", run=word(which)))
    name = st.selectbox(t("Head: the tokens it promotes and suppresses"), names, key="he_head",
                        help=t("Click a head's bar above, or pick one here."))
    layer, head = parse_head(name)
    tdf = computed("vocab", ctx.model_name, ctx.device, tuple(ids), att.pos).frame(layer, head, decode)
    tch = effect_charts.head_tokens_chart(tdf, title=t("Head {name} at {at}: direct effect on each token's logit", name=name, at=at))
    st.altair_chart(tch, width="content")
    st.caption(t("The head's output at this position through the final norm (scale held fixed) and the unembedding: "  # internal text
                 "the 10 tokens it pushes up most and down most ({run} run). Its effect on the answer − distractor "
                 "difference is {effect}.", run=word(which), effect=f"{att.head_map[layer, head]:+.4f}"))
    ui.download_buttons(tdf, tch, f"head_{name}_tokens", meta | {"layer": layer, "head": head}, key="he_tok")


def contribution_section(ids: list, tokens: list, labels: list, pos: int, meta: dict):
    if not 0.0 <= state.thresh <= 1.0:
        state.set("thresh", 0.1)
    g1, g2 = st.columns([2, 1])
    thr = g1.slider(t("Show edges carrying at least this share of what is added to a position"), 0.0, 1.0,
                    step=0.01, key="he_thresh")
    top = g2.select_slider(t("Edges drawn (largest shares first)"), [20, attribution.GRAPH_TOP, 80, 160, 320, "all"],
                           value=attribution.GRAPH_TOP, key="he_graph_top", format_func=lambda v: t("all") if v == "all" else str(v),
                           help=t("By default the {n} edges with the largest shares are drawn, as the LLM Transparency "
                                  "Tool prunes its graph; the CSV has every edge over the share.", n=attribution.GRAPH_TOP))
    con = computed("contrib", ctx.model_name, ctx.device, tuple(ids))
    _, every = attribution.graph_edges(con, thr, tokens)
    nodes, edges = attribution.graph_edges(con, thr, tokens, top=None if top == "all" else int(top))
    if len(ids) > GRAPH_MAX_T:
        st.caption(t("{n} tokens: the last {last} positions are drawn (the CSV has them all).", n=len(ids), last=GRAPH_MAX_T))
    graph = effect_charts.contribution_graph(nodes, edges, labels, highlight=pos, last=GRAPH_MAX_T,
                                             title=t("{n} of {all} edges ≥ {thr} ({run} run)", n=len(edges), all=len(every), thr=f"{thr:.2f}", run=word(meta["run"])))
    st.altair_chart(graph, width="content")
    st.caption(t("Nodes: the residual stream at a position entering a layer (top row: after the last layer; the read "
                 "position in yellow). Edges: attention moving pattern_ij·v_j·W_O[h] from position j into i (summed over "
                 "heads; the tooltip names the largest head), and the residual stream carried straight up; an edge's "
                 "share is its size relative to everything added to that position in that layer, the residual included."))
    ui.download_buttons(every, graph, f"contributions_{meta['run']}", meta | {"threshold": thr}, key="he_graph")


def lens_section(pair: patching.Pair, ids: list, tokens: list, labels: list, meta: dict):
    st.subheader(t("Logit lens"))
    ln = computed("lens", ctx.model_name, ctx.device, tuple(ids), pair.answer)
    ldf = ln.frame(tokens, decode)
    lch = effect_charts.lens_chart(ldf, labels, ln.rows, answer=pair.answer_token,
                                   title=t("Top token of the residual stream after each layer ({run} run)", run=word(meta["run"])))
    st.altair_chart(lch, width="content")
    cut = " " + t("The last {n} positions are drawn.", n=effect_charts.LENS_MAX_T) if pair.T > effect_charts.LENS_MAX_T else ""
    st.caption(ui.plain(t("Each cell: the residual stream at that position after that layer, read through the final norm "
                          "and the unembedding; the text is its top token, the colour the rank of {answer} (1 = top). The "
                          "top row is the model's own prediction.", answer=repr(pair.answer_token)) + cut))
    ui.download_buttons(ldf, lch, f"logit_lens_{meta['run']}", meta, key="he_lens")
    ui.show_table(ldf[ldf["position"] == pair.pos][["row", "top_k", "answer_rank", "answer_prob"]], cells=("row",),
                  hide_index=True, width="stretch", column_config={"top_k": st.column_config.TextColumn(t("top 5 tokens")),
                                                  "answer_prob": st.column_config.NumberColumn(format="%.4f")})


# ============================================================================= a prompt set
def prompt_set():
    pset = pair_widgets.prompt_set_upload("he", model, BOS)
    if pset is None:
        return
    c1, c2 = st.columns(2)
    tname = c1.selectbox(t("Patched activation"), list(SET_TARGETS), key="he_set_target", format_func=t)
    direction = pair_widgets.direction_radio(c2, "he_set_direction")
    target = SET_TARGETS[tname]
    per_position = target != "z" and len({p.T for p in pset.pairs}) == 1 and st.checkbox(
        t("Per position (all pairs have the same length)"), key="he_set_pp")
    results = pair_widgets.patch_set_job(ctx, "he_set", pset.pairs, target, per_position, direction)
    if results is None:
        return
    avg = patching.average_results(results)
    st.caption(ui.plain(avg.describe()))
    chart, spread = effect_charts.set_average_charts(avg.frame(), avg.dims, n=len(pset.pairs), direction=direction,
                                                     what=tname)
    for col, ch in zip(st.columns(2) if avg.target == "z" else (st, st), (chart, spread)):
        if ch is not None:
            col.altair_chart(ch, width="content")
    meta = ui.meta_for(ctx, prompt_set=pset.name, pairs=len(pset.pairs), target=target, direction=direction)
    ui.download_buttons(avg.frame(), chart, f"patch_set_{target}_{direction}", meta, key="he_set")
    with st.expander(t("Per pair")):
        ui.show_table({"row": pset.rows, "clean_minus_corrupted": avg.gaps}, hide_index=True, width="stretch")


CHECKS = pair_widgets.example_checks(ctx.model_name, ctx.device, BOS)
state = load_state(CHECKS)
st.caption(t("Run a **clean** prompt and a **corrupted** one that differ in a detail, and measure the logit difference "
             "logit(answer) − logit(distractor) at one position. Normalised: the corrupted run is 0 and the clean run 1. "
             "The sidebar's prompt is not used here; a click on a head in the patching map opens it on the Heatmaps "
             "page with the clean prompt as the sidebar prompt."))
if st.radio(t("Input"), SOURCES, key="he_source", horizontal=True, format_func=t) == SOURCES[0]:
    one_pair()
else:
    prompt_set()
