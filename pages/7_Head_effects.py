"""Head effects: which heads carry the answer — activation patching, direct logit attribution,
contributions between positions, and the logit lens, on a clean/corrupted prompt pair."""
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnkit import attribution as AT
from attnkit import compare
from attnkit import examples as EX
from attnkit import patching as P
from attnkit import prompts as PR
from attnkit import app as ui
from attnkit.charts import effects as E

CUSTOM = "Your own"
MAX_SET = 100                 # pairs of an uploaded prompt set used
LENS_MAX_T = E.LENS_MAX_T     # logit-lens positions drawn (as many as fit the page)
GRAPH_MAX_T = 48              # contribution-graph positions drawn
SET_COLUMNS = ("clean", "corrupted", "answer", "distractor")
PER_POSITION_MAX_T = 128      # layer × position maps: L·T patched runs
DIRECTIONS = ["denoise", "noise"]
LP_TARGETS = {"residual stream (entering each layer, and after the last)": "resid", "attention output": "attn", "MLP output": "mlp"}
SET_TARGETS = {"heads (z)": "z", "residual stream": "resid", "attention output": "attn", "MLP output": "mlp"}
SOURCES = ["One prompt pair", "A prompt set (upload)"]


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
    thresh: float = 0.1
    set_target: str = next(iter(SET_TARGETS))
    set_direction: str = DIRECTIONS[0]
    set_pp: bool = False

ctx = ui.page("Head effects", "🎯")
cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads
model = ctx.model
BOS = ctx.bos_id if ctx.prepend_bos else None      # the sidebar's "Prepend <|endoftext|>", before both prompts


def weights():
    return ui.cached_model(ctx.model_name, ctx.device).weights


# ----------------------------------------------------------------------------- cached computations
# Keyed on (model, device, token ids, …); the weights come from the shared model cache.

#: Layer × position maps run when the page opens up to this many patched runs; larger ones wait for a click.
AUTO_RUNS = 600


def patched(slot: str, key: tuple, target: str, per_position: bool, direction: str, label: str, *,
            auto: bool = True) -> P.PatchResult | None:
    """Activation patching as a job (progress, Stop, the last result kept and marked stale): the map of
    ``key`` = (model, device, clean, corrupt, answer, distractor, position), or None until it has run."""
    name, device, clean, corrupt, a, d, pos = key
    pair = P.Pair(list(clean), list(corrupt), a, d, pos)
    w = ui.cached_model(name, device).weights
    return ui.job_result(slot, (*key, target, per_position, direction), label,
                         lambda progress: P.patch(w, pair, target, per_position=per_position, direction=direction,
                                                  progress=progress), auto=auto)


def patched_set(key: tuple, pairs: list, target: str, per_position: bool, direction: str) -> list | None:
    """Every pair of a prompt set patched, as one job whose progress counts the patched runs of all pairs."""
    w = weights()

    def work(progress):
        out = []
        for i, pr in enumerate(pairs):
            out.append(P.patch(w, pr, target, per_position=per_position, direction=direction,
                               progress=lambda d, t, i=i: progress(i * t + d, len(pairs) * t)))
        return out
    return ui.job_result("he_set", (key, target, per_position, direction), f"Patching {len(pairs)} pairs", work)


@st.cache_data(show_spinner=False, max_entries=8)
def example_checks(name: str, device: str, bos: int | None) -> dict:
    return EX.check_examples(ui.cached_model(name, device), bos=bos)


@st.cache_data(show_spinner=False, max_entries=32)
def dla(name: str, device: str, ids: tuple, a: int, d: int, pos: int) -> AT.DLA:
    return AT.direct_logit_attribution(ui.cached_model(name, device).weights, list(ids), a, d, pos)


@st.cache_data(show_spinner=False, max_entries=16)
def vocab(name: str, device: str, ids: tuple, pos: int) -> AT.HeadVocab:
    return AT.head_vocab(ui.cached_model(name, device).weights, list(ids), pos, k=10)


@st.cache_data(show_spinner=False, max_entries=16)
def contrib(name: str, device: str, ids: tuple) -> AT.Contributions:
    return AT.contributions(ui.cached_model(name, device).weights, list(ids))


@st.cache_data(show_spinner=False, max_entries=16)
def lens(name: str, device: str, ids: tuple, a: int) -> AT.Lens:
    return AT.logit_lens(ui.cached_model(name, device).weights, list(ids), a, k=5)


def decode(t: int) -> str:
    return model.token_strs([t])[0]


# ----------------------------------------------------------------------------- a click opens Heatmaps

def _open_heatmap():
    """on_select of the patching map: put the clicked head and the clean prompt into the Heatmaps page's
    keys (before any widget of this run exists), then switch pages below."""
    ev = st.session_state.get("he_map")
    try:
        cell = ev["selection"]["pick"][0]["cell"]
        layer, head = compare.parse_head(cell)
    except (KeyError, IndexError, TypeError, ValueError):
        return
    st.session_state.update(hm_layer=layer, hm_head=head, hm_view="One head", ak_source="Type",
                            ak_text=st.session_state.get("he_clean", ""), he_goto=(layer, head))


goto = st.session_state.pop("he_goto", None)
if goto is not None:
    try:
        st.switch_page("pages/1_Heatmaps.py")
    except st.errors.StreamlitAPIException:        # this page run on its own, outside the navigation
        st.info(ui.plain(f"Head {compare.head_name(*goto)} and the clean prompt are selected on the Heatmaps page; open "
                         "it from the navigation."), icon="🔥")


# ----------------------------------------------------------------------------- inputs

def _apply_example():
    ex = EX.EXAMPLES.get(st.session_state.get("he_example"))
    if ex:
        st.session_state.update(he_clean=ex["clean"], he_corrupt=ex["corrupt"], he_answer=ex["answer"],
                                he_distractor=ex["distractor"])


CHECKS = example_checks(ctx.model_name, ctx.device, BOS)
first = EX.pick_default(ctx.model_name, CHECKS) or next(iter(EX.EXAMPLES))   # solved by this model, if any is
ex0 = EX.EXAMPLES[first]
state = Inputs.load(example=first, clean=ex0["clean"], corrupt=ex0["corrupt"], answer=ex0["answer"],
                    distractor=ex0["distractor"])
ui.match_choice(state, "example", EX.EXAMPLES, ("clean", "corrupt", "answer", "distractor"), CUSTOM)
for _name, _opts, _default in (("source", SOURCES, SOURCES[0]), ("example", list(EX.EXAMPLES) + [CUSTOM], first),
                               ("direction", DIRECTIONS, "denoise"), ("target", list(LP_TARGETS), None),
                               ("run", ["clean", "corrupted"], "clean"), ("set_target", list(SET_TARGETS), None),
                               ("set_direction", DIRECTIONS, "denoise")):
    state.fit(_name, _opts, _default or _opts[0], what=_name.replace("_", " ").capitalize(),
              because="not one of the choices")

st.caption("Run a **clean** prompt and a **corrupted** one that differ in a detail, and measure the logit difference "
           "logit(answer) − logit(distractor) at one position. Normalised: the corrupted run is 0 and the clean "
           "run 1. The sidebar's prompt is not used here; a click on a head in the patching map opens it on the "
           "Heatmaps page with the clean prompt as the sidebar prompt.")
source = st.radio("Input", SOURCES, key="he_source", horizontal=True)


def _inputs():
    c0, c1 = st.columns([2.1, 3])          # the Example box holds "Indirect object, names swapped (not solved)"
    c0.selectbox("Example", list(EX.EXAMPLES) + [CUSTOM], key="he_example", on_change=_apply_example,
                 format_func=lambda n: CHECKS[n].label() if n in CHECKS else n,
                 help=f"Each example is checked against the loaded model: it is solved when the clean run "
                      f"prefers the answer, the corrupted run does not, and the gap is at least {EX.MARGIN:g} "
                      "logits. Examples the model does not solve are marked.")
    c1.text_input("Clean prompt", key="he_clean", max_chars=4000)
    c1.text_input("Corrupted prompt (same number of tokens)", key="he_corrupt", max_chars=4000)
    c2, c3, c4 = st.columns([1, 1, 2])
    c2.text_input("Answer token", key="he_answer", max_chars=100,
                  help="One token. Without a leading space, ' word' is tried first; the token used is shown.")
    c3.text_input("Distractor token", key="he_distractor", max_chars=100)
    c4.radio("Direction", DIRECTIONS, key="he_direction", horizontal=True,
             help="denoise: run the corrupted prompt and patch one clean activation in (what restores the "
                  "answer?). noise: run the clean prompt and patch one corrupted activation in (what breaks it?).")


# ============================================================================= one pair
def one_pair():
    _inputs()
    direction = st.session_state["he_direction"]
    try:
        pair = P.make_pair(model, st.session_state["he_clean"], st.session_state["he_corrupt"],
                           st.session_state["he_answer"], st.session_state["he_distractor"], bos=BOS)
    except P.PatchError as e:
        ui.show_error(e if e.table is None else str(e).split(" clean: ")[0])
        if e.table is not None:
            st.caption("The two tokenizations side by side (✗ marks positions that differ):")
            st.dataframe(pd.DataFrame(e.table).assign(same=lambda d: np.where(d["same"], "", "✗")),
                         hide_index=True, width="stretch", height=min(420, 38 + 35 * len(e.table)))
        st.stop()
    T = pair.T
    toks_clean, toks_corrupt = model.token_texts(pair.clean), model.token_texts(pair.corrupt)
    labels = ui.token_labels(toks_clean)
    state.fit("pos", range(T), T - 1, what="Read position", basis=(tuple(pair.clean), tuple(pair.corrupt)),
              meaning=pair.clean.__getitem__, fmt=labels.__getitem__,
              because="the prompt pair changed, so the logits are read at its last token (pick another below)")
    c1, c2 = st.columns([1, 3])
    pos = ui.select(c1, "Read the logits at", range(T), state, "pos", labels.__getitem__,
                    help="The position whose logits give the logit difference (by default the last token).")
    with c2:
        for n in pair.notes:
            st.caption(ui.plain(n))
        differ = [i for i in range(T) if pair.clean[i] != pair.corrupt[i]]
        st.caption(f"{T} tokens; the prompts differ at position(s) "
                   + ui.plain(", ".join(f"{i} ({ui.show_spaces(toks_clean[i])} → {ui.show_spaces(toks_corrupt[i])})"
                                        for i in differ[:8]) or "none") + ".")
    key = (ctx.model_name, ctx.device, tuple(pair.clean), tuple(pair.corrupt), pair.answer, pair.distractor, pos)
    meta = ui.meta_for(ctx, clean=pair_text("he_clean"), corrupted=pair_text("he_corrupt"),
                       answer=pair.answer_token, distractor=pair.distractor_token, position=pos, direction=direction)

    # ------------------------------------------------------------------------- patching: heads
    st.subheader("Which heads carry the answer? (patching each head's z)")
    head_map(key, direction, meta)

    # ------------------------------------------------------------------------- patching: layers × positions
    st.subheader("Where, layer by layer? (residual stream, attention and MLP outputs per position)")
    tname = st.radio("Patched activation", list(LP_TARGETS), key="he_lp_target", horizontal=True)
    target = LP_TARGETS[tname]
    if T > PER_POSITION_MAX_T:
        st.info(f"The prompts have {T} tokens: per-position maps are computed for pairs of at most "
                f"{PER_POSITION_MAX_T} tokens ({L}×{T} patched runs each would take long). The head map above "
                "covers every position; the CLI's --per-position has no limit.", icon="ℹ️")
    else:
        layer_position(key, target, tname, direction, toks_clean, labels, pos, meta)
    attribution_sections(pair, pos, labels, toks_clean, toks_corrupt, T, meta)


def head_map(key, direction, meta):
    """The map of every head's z patched (a job: progress and Stop while it runs)."""
    zres = patched("he_z", key, "z", False, direction, f"Patching {L * H} heads")
    if zres is None:
        return
    gap = zres.clean_ld - zres.corrupt_ld
    st.caption(ui.plain(
        f"Logit difference: clean {zres.clean_ld:+.3f}, corrupted {zres.corrupt_ld:+.3f}. "
        f"{'Denoising' if direction == 'denoise' else 'Noising'}: each cell is one run of the "
        f"{'corrupted' if direction == 'denoise' else 'clean'} prompt with that head's z (all positions) "
        f"taken from the {'clean' if direction == 'denoise' else 'corrupted'} run, started at the head's "
        f"layer from the cached residual stream; {zres.n_runs} patched runs in {L} batches."))
    if abs(gap) < 1e-6:
        st.warning("The clean and corrupted runs give the same logit difference: nothing to normalise against "
                   "(the maps show NaN). Pick prompts that differ in what the answer depends on.", icon="⚠️")
    elif (why := EX.Check("", zres.clean_ld, zres.corrupt_ld).warning()) is not None:
        st.warning(ui.plain(why), icon="⚠️")
    zdf = zres.frame()
    zmap = E.head_map(zdf, "normalised", select="pick", legend_title="normalised",
                      title=f"{direction}: normalised logit difference per head")
    st.altair_chart(zmap, width="content", on_select=_open_heatmap, selection_mode="pick", key="he_map")
    st.caption("Red: the head's activation moves the metric towards the clean run; blue: away. "
               "Click a cell to open that head's attention pattern on the Heatmaps page (the clean prompt).")
    ui.download_buttons(zdf, zmap, f"patch_z_{direction}", meta | {"target": "z"}, key="he_z")


def layer_position(key, target, tname, direction, toks_clean, labels, pos, meta):
    runs = (L + (target == "resid")) * (pos + 1)
    lres = patched("he_lp", key, target, True, direction, f"Patching {runs:,} activations one position at a time",
                   auto=runs <= AUTO_RUNS)
    if lres is None:
        st.caption(f"{runs:,} patched runs: press the button to compute this map (progress and Stop shown here).")
        return
    ldf = lres.frame(toks_clean)
    lmap = E.layer_pos_map(ldf, labels, "normalised", legend_title="normalised",
                           title=f"{direction}: {tname}, one position at a time")
    st.altair_chart(lmap, width="content")
    st.caption(ui.plain(
        f"Each cell: the {tname} at one layer and one position patched alone. Positions after the one "
        f"read ({labels[pos]}) cannot matter (the causal mask). For the residual stream, each row adds up "
        "everything the earlier layers moved to each position: information moving between positions shows "
        "as the bright cell shifting along the rows; the last row is the stream after the last block, what "
        "the final norm and the unembedding read."))
    ui.download_buttons(ldf, lmap, f"patch_{target}_{direction}", meta | {"target": target}, key="he_lp")


def attribution_sections(pair, pos, labels, toks_clean, toks_corrupt, T, meta):
    # ------------------------------------------------------------------------- attribution
    st.subheader("Direct logit attribution")
    which = st.radio("Run", ["clean", "corrupted"], key="he_dla_run", horizontal=True)
    ids = pair.clean if which == "clean" else pair.corrupt
    att = dla(ctx.model_name, ctx.device, tuple(ids), pair.answer, pair.distractor, pos)
    st.caption(ui.plain(
        f"Each part of the final residual stream at {labels[pos]} (embeddings, every head's z_h·W_O[h], "
        "each layer's b_O, each MLP, the final norm's bias), divided by the final LayerNorm's actual scale "
        f"(held fixed) and projected on W_U[answer] − W_U[distractor]. The parts add up to "
        f"{att.total:+.4f}; the model's logit difference is {att.actual:+.4f} "
        f"(|Δ| = {abs(att.total - att.actual):.1e})."))
    adf = att.frame()
    left, right = st.columns(2)
    with left:
        bars = E.attribution_bars(adf, 20, title=f"Top 20 of {len(adf)} parts ({which} run)", select="part")
        ev = st.altair_chart(bars, width="content", on_select="rerun", selection_mode="part", key="he_bars")
        ui.download_buttons(adf, bars, f"dla_{which}", meta | {"run": which}, key="he_dla")
    with right:
        hdf = pd.DataFrame([{"layer": l, "head": h, "logit_diff": float(att.head_map[l, h])}
                            for l in range(L) for h in range(H)])
        hmap = E.head_map(hdf, "logit_diff", text=L * H <= 64, legend_title="direct effect", width=240,
                          title="Direct effect of each head")
        st.altair_chart(hmap, width="content")
        ui.download_buttons(hdf, hmap, f"dla_heads_{which}", meta | {"run": which}, key="he_dlah")
    # a head's promoted / suppressed tokens: a click on a head's bar, or the select box
    names = [compare.head_name(l, h) for l in range(L) for h in range(H)]
    try:
        clicked = ev["selection"]["part"][0]["part"]
        if clicked in names:                  # a head's bar (the others are embed, L3 mlp, …)
            cl = clicked
            if cl != st.session_state.get("he_last_bar"):
                st.session_state["he_last_bar"] = cl
                st.session_state["he_head"] = cl
    except (KeyError, IndexError, TypeError, AttributeError):
        pass
    best = names[int(np.abs(att.head_map).argmax())]
    state.fit("head", names, best, what="Head for the promoted tokens", basis=(tuple(ids), pos),
              meaning=str, because=f"the {which} run or the read position changed; by default it is the head "
                                   "with the largest direct effect")
    head_name = st.selectbox("Head: the tokens it promotes and suppresses", names, key="he_head",
                             help="Click a head's bar above, or pick one here.")
    hl, hh = compare.parse_head(head_name)
    hv = vocab(ctx.model_name, ctx.device, tuple(ids), pos)
    tdf = hv.frame(hl, hh, decode)
    tch = E.head_tokens_chart(tdf, title=f"Head {head_name} at {labels[pos]}: direct effect on each token's logit")
    st.altair_chart(tch, width="content")
    st.caption("The head's output at this position through the final norm (scale held fixed) and the unembedding: "
               f"the 10 tokens it pushes up most and down most ({which} run). Its effect on the answer − distractor "
               f"difference is {att.head_map[hl, hh]:+.4f}.")
    ui.download_buttons(tdf, tch, f"head_{head_name}_tokens", meta | {"layer": hl, "head": hh, "run": which},
                        key="he_tok")

    # ------------------------------------------------------------------------- contributions
    st.subheader("Contribution graph")
    if T > AT.CONTRIB_MAX_T:
        st.info(f"Contributions are computed for prompts of at most {AT.CONTRIB_MAX_T} tokens.")
    else:
        if not 0.0 <= state.thresh <= 1.0:
            state.set("thresh", 0.1)
        g1, g2 = st.columns([2, 1])
        thr = g1.slider("Show edges carrying at least this share of what is added to a position", 0.0, 1.0,
                        step=0.01, key="he_thresh")
        top = g2.select_slider("Edges drawn (largest shares first)", [20, AT.GRAPH_TOP, 80, 160, 320, "all"],
                               value=AT.GRAPH_TOP, key="he_graph_top",
                               help=f"By default the {AT.GRAPH_TOP} edges with the largest shares are drawn, as the "
                                    "LLM Transparency Tool prunes its graph; the CSV has every edge over the share.")
        con = contrib(ctx.model_name, ctx.device, tuple(ids))
        tk_ = toks_clean if which == "clean" else toks_corrupt
        _, every = AT.graph_edges(con, thr, tk_)
        nodes, edges = AT.graph_edges(con, thr, tk_, top=None if top == "all" else int(top))
        lo = max(0, T - GRAPH_MAX_T)
        if lo:
            st.caption(f"{T} tokens: the last {GRAPH_MAX_T} positions are drawn (the CSV has them all).")
        gn = nodes[nodes["position"] >= lo].assign(position=lambda d: d["position"] - lo)
        ge = edges[(edges["from_pos"] >= lo)].assign(from_pos=lambda d: d["from_pos"] - lo,
                                                     to_pos=lambda d: d["to_pos"] - lo)
        graph = E.contribution_graph(gn, ge, labels[lo:], highlight=pos - lo,
                                     title=f"{len(ge)} of {len(every)} edges ≥ {thr:.2f} ({which} run)")
        st.altair_chart(graph, width="content")
        st.caption("Nodes: the residual stream at a position entering a layer (top row: after the last layer; the "
                   "read position in yellow). Edges: attention moving pattern_ij·v_j·W_O[h] from position j into i "
                   "(summed over heads; the tooltip names the largest head), and the residual stream carried "
                   "straight up; an edge's share is its size relative to everything added to that position in "
                   "that layer, the residual included.")
        ui.download_buttons(every, graph, f"contributions_{which}", meta | {"run": which, "threshold": thr},
                            key="he_graph")

    # ------------------------------------------------------------------------- logit lens
    st.subheader("Logit lens")
    ln = lens(ctx.model_name, ctx.device, tuple(ids), pair.answer)
    ldf = ln.frame(toks_clean if which == "clean" else toks_corrupt, decode)
    lo = max(0, T - LENS_MAX_T)
    shown = ldf[ldf["position"] >= lo].assign(position=lambda d: d["position"] - lo)
    lch = E.lens_chart(shown, labels[lo:], ln.rows, answer=pair.answer_token,
                       title=f"Top token of the residual stream after each layer ({which} run)")
    st.altair_chart(lch, width="content")
    st.caption(ui.plain(
        "Each cell: the residual stream at that position after that layer, read through the final norm and "
        f"the unembedding; the text is its top token, the colour the rank of {pair.answer_token!r} (1 = top). "
        "The top row is the model's own prediction." + (f" The last {LENS_MAX_T} positions are drawn." if lo else "")))
    ui.download_buttons(ldf, lch, f"logit_lens_{which}", meta | {"run": which}, key="he_lens")
    at_pos = ldf[ldf["position"] == pos][["row", "top_k", "answer_rank", "answer_prob"]]
    st.dataframe(at_pos, hide_index=True, width="stretch",
                 column_config={"top_k": st.column_config.TextColumn("top 5 tokens"),
                                "answer_prob": st.column_config.NumberColumn(format="%.4f")})


def pair_text(key: str) -> str:
    return str(st.session_state.get(key, ""))[:500]


# ============================================================================= a prompt set
def _read_set(name: str, data: bytes):
    """(pairs, row labels, problems) from a CSV/JSONL upload with clean, corrupted, answer, distractor."""
    table = PR.read_upload(name, data)
    if table.kind == "text":
        raise PR.PromptError(f"{name}: upload a .csv or .jsonl with columns {', '.join(SET_COLUMNS)}.")
    cols = {c.lower().strip(): c for c in table.columns}
    if "corrupted" not in cols and "corrupt" in cols:
        cols["corrupted"] = cols["corrupt"]
    missing = [c for c in SET_COLUMNS if c not in cols]
    if missing:
        raise PR.PromptError(f"{name} has no column(s) {', '.join(missing)}; its columns are: "
                             f"{', '.join(table.columns) or 'none'}.")
    pairs, rows, problems = [], [], list(table.warnings)
    for n, r in enumerate(table.rows, 1):
        if len(pairs) >= MAX_SET:
            problems.append(f"{name} has more than {MAX_SET} rows; the first {MAX_SET} usable pairs are used.")
            break
        if not isinstance(r, dict):
            problems.append(f"row {n}: not an object with the four fields")
            continue
        vals = [r.get(cols[c]) for c in SET_COLUMNS]
        if not all(isinstance(v, str) for v in vals):
            problems.append(f"row {n}: a field is missing or not text")
            continue
        try:
            pairs.append(P.make_pair(model, *vals, bos=BOS))
            rows.append(n)
        except P.PatchError as e:
            problems.append(f"row {n}: {str(e).split(' clean: ')[0]}")
    return pairs, rows, problems


def prompt_set():
    up = st.file_uploader(f"Prompt set: .csv or .jsonl with columns {', '.join(SET_COLUMNS)}", type=["csv", "jsonl"],
                          key="he_upload")
    if up is not None:
        st.session_state["he_upload_data"] = (up.name, up.getvalue())
    stored = st.session_state.get("he_upload_data")
    if stored is None:
        st.caption("No file yet. Each row: a clean prompt, a corrupted prompt of the same token length, an answer "
                   "token and a distractor token.")
        return
    name, data = stored
    try:
        pairs, rows, problems = _read_set(name, data)
    except PR.PromptError as e:
        ui.show_error(e)
        return
    for p in problems[:20]:
        st.warning(ui.plain(p), icon="⚠️")
    if len(problems) > 20:
        st.caption(f"… and {len(problems) - 20} more rows skipped.")
    if not pairs:
        ui.show_error("No usable pairs in the file.")
        return
    c1, c2 = st.columns(2)
    tname = c1.selectbox("Patched activation", list(SET_TARGETS), key="he_set_target")
    direction = c2.radio("Direction", DIRECTIONS, key="he_set_direction", horizontal=True)
    target = SET_TARGETS[tname]
    same_len = len({p.T for p in pairs}) == 1
    per_position = target != "z" and same_len and st.checkbox("Per position (all pairs have the same length)",
                                                              key="he_set_pp")
    set_key = (ctx.model_name, ctx.device,
               tuple((tuple(p.clean), tuple(p.corrupt), p.answer, p.distractor, p.pos) for p in pairs))
    results = patched_set(set_key, pairs, target, per_position, direction)
    if results is None:
        return
    maps = [res.normalised for res in results]
    gaps = [res.clean_ld - res.corrupt_ld for res in results]
    stack = np.stack(maps)
    finite = np.isfinite(stack).any(0)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.where(finite, np.nanmean(stack, 0), np.nan)
        std = np.where(finite, np.nanstd(stack, 0), np.nan)
    undefined = int(sum(abs(g) < 1e-6 for g in gaps))
    st.caption(ui.plain(
        f"{len(pairs)} pairs; mean and standard deviation of the normalised logit difference (corrupted 0, "
        f"clean 1) over the pairs" + (f"; {undefined} pair(s) whose clean and corrupted runs agree are "
                                     "left out (nothing to normalise)" if undefined else "") +
        f". Each pair is read at its last position. Clean − corrupted logit difference: mean "
        f"{np.mean(gaps):+.3f}, from {np.min(gaps):+.3f} to {np.max(gaps):+.3f}."))
    meta = ui.meta_for(ctx, prompt_set=name, pairs=len(pairs), target=target, direction=direction)
    idx = np.indices(mean.shape).reshape(mean.ndim, -1)
    dims = ("layer", "head") if target == "z" else ("layer", "position") if per_position else ("layer",)
    df = pd.DataFrame({d: idx[i] for i, d in enumerate(dims)})
    df["mean"], df["std"], df["n"] = mean.reshape(-1), std.reshape(-1), np.isfinite(stack).sum(0).reshape(-1)
    if target == "resid":
        df["row"] = [P.resid_row_name(int(l), L) for l in df["layer"]]
    if target == "z":
        left, right = st.columns(2)
        with left:
            ch = E.head_map(df, "mean", legend_title="mean", title=f"Mean over {len(pairs)} pairs ({direction})")
            st.altair_chart(ch, width="content")
        with right:
            sp = E.head_map(df, "std", legend_title="std", title="Spread (standard deviation)",
                            domain=[-float(np.nanmax(std)) if np.isfinite(std).any() else -1,
                                    float(np.nanmax(std)) if np.isfinite(std).any() else 1])
            st.altair_chart(sp, width="content")
    elif per_position:
        labels = [f"{i}" for i in range(pairs[0].T)]
        ch = E.layer_pos_map(df, labels, "mean", legend_title="mean", title=f"Mean over {len(pairs)} pairs")
        st.altair_chart(ch, width="content")
        sp = E.layer_pos_map(df, labels, "std", legend_title="std", title="Spread (standard deviation)")
        st.altair_chart(sp, width="content")
    else:
        ch = E.layer_bars(df, title=f"{tname}: mean ± std over {len(pairs)} pairs ({direction})")
        st.altair_chart(ch, width="content")
    ui.download_buttons(df, ch, f"patch_set_{target}_{direction}", meta, key="he_set")
    per_pair = pd.DataFrame({"row": rows, "clean_minus_corrupted": gaps})
    with st.expander("Per pair"):
        st.dataframe(per_pair, hide_index=True, width="stretch")


if source == "One prompt pair":
    one_pair()
else:
    prompt_set()
