"""Circuits: how heads in different layers work together — composition scores from the weights, path
patching into one head's query, key or value, attribution patching beside exact patching, and a circuit
found automatically and checked by running it with every other edge ablated."""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnkit import patching as P
from attnkit import app as ui
from attnkit.charts import circuits as CC
from attnkit.charts import effects as E
from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import compose as CO
from attnkit.circuits import discover as DI
from attnkit.circuits import path as PA

EXAMPLES = {
    # the corrupted prompt swaps the words before "source" and "binary": "kernel" is now followed by
    # "binary", so what changes is what the induction heads' keys match on (the previous-token head's output)
    "A repeated phrase, match swapped": dict(
        clean="Install the kernel source and the module binary. Install the kernel",
        corrupt="Install the module source and the kernel binary. Install the kernel", more="",
        answer=" source", distractor=" binary"),
    # the copied token changed instead: the previous-token head's output is the same in both prompts up to
    # the change, so this pair hardly exercises L2H1 → the induction heads' keys
    "A repeated phrase, copied token changed": dict(
        clean="Install the python package and the kernel source. Install the python package and the kernel",
        corrupt="Install the python package and the kernel binary. Install the python package and the kernel",
        more="", answer=" source", distractor=" binary"),
    "Indirect object, names swapped": dict(
        clean="When Mary and John went to the store, John gave a drink to",
        corrupt="When John and Mary went to the store, Mary gave a drink to", more="",
        answer=" Mary", distractor=" John"),
}
CUSTOM = "Your own"
MAX_T = 64                     # tokens of a pair for path patching and discovery on this page
_EX0 = next(iter(EXAMPLES))


@dataclass
class Inputs(ui.PageState):
    """The page's main inputs (session keys ci_*, URL parameters by field name)."""

    prefix = "ci"
    mode: str = "k"
    rl: list[int] = ui.param(None)                 # the last three receiver layers
    example: str = _EX0
    clean: str = ui.param(EXAMPLES[_EX0]["clean"], text=True)
    corrupt: str = ui.param(EXAMPLES[_EX0]["corrupt"], text=True)
    more: str = ui.param(EXAMPLES[_EX0]["more"], text=True)
    answer: str = EXAMPLES[_EX0]["answer"]
    distractor: str = EXAMPLES[_EX0]["distractor"]
    recv_layer: int = -1                           # the last layer
    recv_head: int = 0
    recv_input: str = ui.param(None)
    source: str = ui.param(None)
    direction: str = ui.param(None)
    share: float = 0.8
    ablation: str = ui.param(None)
    heads_only: bool = False


ctx = ui.page("Circuits", "🕸️")
cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads
model = ctx.model
state = Inputs.load(rl=list(range(1, L))[-min(3, L - 1):] if L > 1 else [], recv_input="k",
                    source=list(PA.SOURCES)[0], direction=list(P.DIRECTIONS)[0], ablation=list(DI.ABLATIONS)[0])
ui.match_choice(state, "example", EXAMPLES, ("clean", "corrupt", "more", "answer", "distractor"), CUSTOM)
for _name, _opts in (("mode", ["k", "q", "v"]), ("example", list(EXAMPLES) + [CUSTOM]),
                     ("recv_input", list(PA.INPUTS)), ("source", list(PA.SOURCES)), ("direction", list(P.DIRECTIONS)),
                     ("ablation", list(DI.ABLATIONS))):
    state.fit(_name, _opts, _opts[0], what=_name.replace("_", " ").capitalize(), because="not one of the choices")
state.fit_many("rl", range(1, L), [L - 1] if L > 1 else [], what="Receiver layers", because=f"the model has {L} layers")
state.fit("recv_layer", range(1, L), L - 1, what="Receiver layer", because=f"the model has {L} layers",
          basis=ctx.model_name)
state.fit("recv_head", range(H), 0, what="Receiver head", because=f"the model has {H} heads per layer",
          basis=ctx.model_name)
if not 0.5 <= state.share <= 1.0:
    state.set("share", 0.8)


# ----------------------------------------------------------------------------- cached computations

# The weight views, path patching, discovery and the exact comparison are jobs (progress, Stop, the last
# result kept and marked stale): exact patching of every edge is minutes on GPT-2 small's shape (32,491
# edges), far more on larger ones.

def _weights():
    return ui.cached_model(ctx.model_name, ctx.device).weights


def weight_views() -> tuple | None:
    """(composition, per-head scores): prompt-free, once per model (25 s on GPT-2 medium's shape)."""
    w = _weights()
    return ui.job_result("ci_weights", (ctx.model_name, ctx.device), "Composition and per-head scores from the weights",
                         lambda progress: CO.weight_views(w, progress=progress))


def path_result(pair: P.Pair, receiver: str, direction: str, source: str) -> PA.PathResult | None:
    w = _weights()
    return ui.job_result("ci_path", (ctx.model_name, ctx.device, _key(pair), receiver, direction, source),
                         f"Patching every sender into {receiver}",
                         lambda progress: PA.path_map(w, pair, receiver, direction, mlps=True, source=source,
                                                      progress=progress))


def found(pairs: list, share: float, ablation: str, mlps: bool) -> DI.Circuit | None:
    w = _weights()
    return ui.job_result("ci_found", (ctx.model_name, ctx.device, tuple(_key(p) for p in pairs), share, ablation, mlps),
                         "Scoring every edge and running circuits",
                         lambda progress: DI.discover(w, pairs, share, ablation=ablation, mlps=mlps, progress=progress))


def versus_exact(pair: P.Pair, mlps: bool):
    w = _weights()
    return ui.job_result("ci_exact_job", (ctx.model_name, ctx.device, _key(pair), mlps),
                         "Exact patching of every head × position and every edge",
                         lambda progress: AP.versus_exact(w, pair, mlps, progress=progress))


# ----------------------------------------------------------------------------- clicks

def _edge_clicked():
    """A click on an edge of the circuit graph: its receiver becomes the path-patching receiver."""
    ev = st.session_state.get("ci_graph")
    try:
        sel = ev["selection"]
        edge = sel.get("edge") or []
        if edge:
            recv = str(edge[0]["receiver"])
            node = PA.parse_node(recv, cfg, "receiver")
            if node[0] in PA.INPUTS:
                st.session_state.update(ci_recv_layer=node[1], ci_recv_head=node[2], ci_recv_input=node[0],
                                        ci_sender=str(edge[0]["sender"]))
            return
        picked = (sel.get("node") or [{}])[0].get("node", "")
        if str(picked).startswith("L"):
            layer, head = (int(x) for x in str(picked)[1:].split("H"))
            st.session_state.update(hm_layer=layer, hm_head=head, hm_view="One head", ak_source="Type",
                                    ak_text=st.session_state.get("ci_clean", ""), ci_goto=(layer, head))
    except (KeyError, IndexError, TypeError, ValueError, P.PatchError):
        return


goto = st.session_state.pop("ci_goto", None)
if goto is not None:
    try:
        st.switch_page("pages/1_Heatmaps.py")
    except st.errors.StreamlitAPIException:        # this page run on its own, outside the navigation
        st.info(ui.plain(f"Head L{goto[0]}H{goto[1]} and the clean prompt are selected on the Heatmaps page; "
                         "open it from the navigation."), icon="🔥")


# ============================================================================= weights
def weights_section():
    st.subheader("How heads compose (from the weights, no prompt)")
    views = weight_views()
    if views is None:
        return
    comp, hs = views
    b = comp.baseline
    c1, c2 = st.columns([1, 2])
    mode = c1.radio("Composition", ["k", "q", "v"], key="ci_mode", horizontal=True,
                    format_func=lambda m: {"k": "K (keys)", "q": "Q (queries)", "v": "V (values)"}[m])
    layers = list(range(1, L))
    rl = c2.multiselect("Receiver layers", layers, key="ci_rl")
    formula = {"k": "‖W_OV(sender)·W_QK(receiver)ᵀ‖ / (‖W_OV‖·‖W_QK‖)",
               "q": "‖W_OV(sender)·W_QK(receiver)‖ / (‖W_OV‖·‖W_QK‖)",
               "v": "‖W_OV(sender)·W_OV(receiver)‖ / (‖W_OV‖·‖W_OV‖)"}[mode]
    st.caption(ui.plain(
        f"Score = {formula}. Random matrices of the same shapes score {b['mean']:.3f} on average (99th "
        f"percentile {b['q99']:.3f}, {b['n']} seeded samples): the colour scale starts there and cells above "
        "the 99th percentile are outlined. " + " ".join(comp.notes)))
    if rl:
        ch = CC.composition_matrix(comp, mode, receiver_layers=rl)
        st.altair_chart(ch, width="content")
    top = pd.DataFrame(comp.top(mode, 12), columns=["sender", "receiver", "score"])
    top["× baseline mean"] = top["score"] / b["mean"]
    left, right = st.columns(2)
    left.caption("Largest pairs")
    left.dataframe(top, hide_index=True, width="stretch")
    right.caption("Per head: " + ui.plain(" · ".join(hs.notes)))
    right.dataframe(hs.frame().drop(columns=["layer", "index"]), hide_index=True, width="stretch", height=300)
    ui.download_buttons(comp.frame(), None, f"composition_{mode}", ui.meta_for(ctx, mode=mode), key="ci_comp")


# ============================================================================= a pair
def _apply_example():
    ex = EXAMPLES.get(st.session_state.get("ci_example"))
    if ex:
        st.session_state.update(ci_clean=ex["clean"], ci_corrupt=ex["corrupt"], ci_more=ex["more"],
                                ci_answer=ex["answer"], ci_distractor=ex["distractor"])


def pair_inputs():
    st.subheader("On a prompt pair")
    c0, c1 = st.columns([1.6, 3])
    c0.selectbox("Example", list(EXAMPLES) + [CUSTOM], key="ci_example", on_change=_apply_example)
    c1.text_input("Clean prompt", key="ci_clean", max_chars=4000)
    c1.text_input("Corrupted prompt (same number of tokens)", key="ci_corrupt", max_chars=4000)
    c1.text_input("Another corrupted prompt (optional: discovery then runs on both pairs)", key="ci_more",
                  max_chars=4000)
    c2, c3 = st.columns(2)
    c2.text_input("Answer token", key="ci_answer", max_chars=100)
    c3.text_input("Distractor token", key="ci_distractor", max_chars=100)
    get = st.session_state.get
    try:
        pairs = [P.make_pair(model, get("ci_clean"), k, get("ci_answer"), get("ci_distractor"))
                 for k in [get("ci_corrupt")] + ([get("ci_more")] if (get("ci_more") or "").strip() else [])]
    except P.PatchError as e:
        ui.show_error(str(e).split(" clean: ")[0])
        st.stop()
    if pairs[0].T > MAX_T:
        ui.show_error(f"The prompts have {pairs[0].T} tokens; this page takes at most {MAX_T} (the CLI "
                      "`python -m attnkit circuit` has no limit).")
        st.stop()
    for n in pairs[0].notes:
        st.caption(ui.plain(n))
    return pairs


def _key(pr: P.Pair) -> tuple:
    return (tuple(pr.clean), tuple(pr.corrupt), pr.answer, pr.distractor, pr.pos)


# ============================================================================= path patching
def path_section(pair: P.Pair):
    st.subheader("Path patching: one sender into one receiver's input")
    c1, c2, c3, c4, c5 = st.columns(5)
    layer = c1.selectbox("Receiver layer", range(1, L), key="ci_recv_layer")
    head = c2.selectbox("Receiver head", range(H), key="ci_recv_head")
    inp = c3.radio("Input", list(PA.INPUTS), key="ci_recv_input", horizontal=True)
    source = c4.radio("Sender's output from", list(PA.SOURCES), key="ci_source", horizontal=True,
                      format_func=lambda s: {"pair": "the other prompt", "mean": "its mean over positions"}[s])
    direction = c5.radio("Direction", list(P.DIRECTIONS), key="ci_direction", horizontal=True)
    res = path_result(pair, f"L{layer}H{head}.{inp}", direction, source)
    if res is None:
        return
    recv, direction = res.receiver, res.direction          # what was computed (a stale result says so above)
    df = res.frame()
    heads = df[df["sender"].str.startswith("L")].copy()
    heads["layer"] = [int(s[1:].split("H")[0]) for s in heads["sender"]]
    heads["head"] = [int(s.split("H")[1]) for s in heads["sender"]]
    st.caption(ui.plain(
        f"Each cell: the {'corrupted' if direction == 'denoise' else 'clean'} run with one sender's output "
        f"changed for {recv} only (every other reader sees the unchanged stream); the colour is the change of "
        f"logit(answer) − logit(distractor). Clean {res.clean_ld:+.3f}, corrupted {res.corrupt_ld:+.3f}. "
        + " ".join(res.notes[len(pair.notes):])))
    ch = E.head_map(heads, "change", legend_title="change of LD", title=f"senders → {recv}")
    st.altair_chart(ch, width="content")
    picked = st.session_state.get("ci_sender")
    if picked in set(df["sender"]):
        row = df[df["sender"] == picked].iloc[0]
        st.info(ui.plain(f"{picked} → {recv}: logit difference {row['logit_diff']:+.4f} (change "
                         f"{row['change']:+.4f}, normalised {row['normalised']:+.3f})."), icon="🔗")
    other = df[~df["sender"].str.startswith("L")]
    st.dataframe(other, hide_index=True, width="content")
    ui.download_buttons(df, ch, f"path_{recv}", ui.meta_for(ctx, receiver=recv, source=source,
                                                            direction=direction), key="ci_path")


# ============================================================================= discovery
def discovery_section(pairs: list):
    st.subheader("A circuit, found automatically and checked by ablation")
    c1, c2, c3 = st.columns(3)
    share = c1.slider("Share of the clean logit difference to recover", 0.5, 1.0, step=0.05, key="ci_share")
    ablation = c2.radio("Edges outside the circuit", list(DI.ABLATIONS), key="ci_ablation", horizontal=True,
                        format_func=lambda a: {"resample": "corrupted output", "mean": "mean output"}[a])
    mlps = not c3.checkbox("Heads only (no MLP nodes)", key="ci_heads_only")
    c = found(pairs, share, ablation, mlps)
    if c is None:
        return
    for n in c.notes:
        st.caption(ui.plain(n))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Edges kept", f"{c.size} of {len(c.ranked)}")
    m2.metric("LD(circuit) / LD(clean)", f"{c.circuit_ld / c.clean_ld:.1%}" if c.clean_ld else "—")
    m3.metric("Clean LD", f"{c.clean_ld:+.3f}")
    m4.metric("Every edge ablated", f"{c.empty_ld:+.3f}")
    st.caption(ui.plain("Heads in the circuit: " + (" ".join(c.heads) or "none")))
    curve = CC.faithfulness_curve(c)
    st.altair_chart(curve, width="content")
    graph = CC.circuit_graph(c.edges, L, H, title="The circuit (click an edge: its path patch above; "
                             "click a head: Heatmaps)", select_edge="edge", select_node="node")
    st.altair_chart(graph, width="content", on_select=_edge_clicked, selection_mode=["edge", "node"],
                    key="ci_graph")
    edges = pd.DataFrame(c.edges, columns=["sender", "receiver", "attribution"])
    st.dataframe(edges, hide_index=True, width="stretch", height=260)
    meta = ui.meta_for(ctx, share=c.target, ablation=c.ablation, pairs=c.n_pairs)
    ui.download_buttons(edges, graph, "circuit_edges", meta, key="ci_edges")
    ui.download_buttons(c.curve_frame(), curve, "faithfulness", meta, key="ci_curve")
    st.download_button("JSON", ui.json_bytes(c.to_json()), file_name="circuit.json", mime="application/json",
                       key="ci_json", on_click="ignore")


def exact_section(pair: P.Pair):
    st.subheader("Attribution patching beside exact patching")
    if not st.checkbox("Run exact patching of every head × position and every edge to compare", key="ci_exact"):
        st.caption("Attribution patching is a first-order estimate (gradient × activation difference, one "
                   "forward and one backward pass); this runs the exact patches it stands for.")
        return
    both = versus_exact(pair, not st.session_state.get("ci_heads_only"))
    if both is None:
        return
    ha, ea = both
    left, right = st.columns(2)
    hdf = ha.frame()
    left.altair_chart(CC.estimate_vs_exact(hdf, title=f"heads × positions (denoise): Spearman {ha.spearman:.3f}"),
                      width="content")
    edf = ea.frame()
    edf["receiving_ld"] = ea.receiving_ld
    right.altair_chart(CC.estimate_vs_exact(edf, title=f"edges (noise): Spearman {ea.spearman:.3f}"),
                       width="content")
    ui.download_buttons(edf, None, "edge_attribution", ui.meta_for(ctx), key="ci_ea")


weights_section()
pairs = pair_inputs()
path_section(pairs[0])
discovery_section(pairs)
exact_section(pairs[0])
