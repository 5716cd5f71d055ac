"""Circuits: how heads in layers work together — composition scores, path patching into a head's q, k or v,
attribution beside exact patching, and a circuit found and checked with every other edge ablated."""
import functools
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from attnkit import app as ui, examples, patching
from attnkit.app.pages.circuits import costs as app_costs
from attnkit.app.pages.circuits import planted as planted_view
from attnkit.app.pages.shared import pairs as pair_widgets
from attnkit.charts import circuits as circuit_charts
from attnkit.charts import effects as effect_charts
from attnkit.circuits import attribution_patching
from attnkit.circuits import compose
from attnkit.circuits import cost as cost_lib
from attnkit.circuits import discover
from attnkit.circuits import path as path_patching
from attnkit.i18n import t
from attnkit.standard import parse_head

MAX_T = 64                     # tokens of a pair for path patching and discovery on this page


@dataclass
class Inputs(ui.PageState):
    """The page's main inputs (session keys ci_*, URL parameters by field name)."""
    prefix = "ci"
    mode: str = "k"
    rl: list[int] = ui.param(None)                 # the last three receiver layers
    example: str = ui.param(None)                  # the page's preferred example for the model
    clean: str = ui.param("", text=True)
    corrupt: str = ui.param("", text=True)
    more: str = ui.param("", text=True)
    answer: str = ""
    distractor: str = ""
    recv_layer: int = -1                           # the last layer
    recv_head: int = 0
    recv_input: str = ui.param(None)
    source: str = ui.param(None)
    direction: str = ui.param(None)
    share: float = 0.8
    ablation: str = ui.param(None)
    heads_only: bool = False


ctx = ui.page("circuits")
cfg = ctx.model.config
n_layers, n_heads = cfg.n_layers, cfg.n_heads
BOS = ctx.bos_id if ctx.prepend_bos else None      # the sidebar's "Prepend <|endoftext|>", before both prompts
RATE = app_costs.rate(ctx.model_name, ctx.device)  # this machine's speed on the model: estimates before long jobs


def load_state(checks: dict) -> Inputs:
    example = pair_widgets.example_state(ctx, checks, examples.CIRCUITS_PREFERRED)
    loaded = Inputs.load(rl=list(range(1, n_layers))[-min(3, n_layers - 1):] if n_layers > 1 else [],
                         recv_input="k", source=path_patching.SOURCES[0], direction=patching.DIRECTIONS[0],
                         ablation=discover.ABLATIONS[0], **example)
    pair_widgets.fit_example(loaded, example["example"], checks)
    for name, opts in (("mode", ["k", "q", "v"]), ("recv_input", list(path_patching.INPUTS)),
                       ("source", list(path_patching.SOURCES)), ("direction", list(patching.DIRECTIONS)),
                       ("ablation", list(discover.ABLATIONS))):
        loaded.fit(name, opts, opts[0], what=name.replace("_", " ").capitalize(), because=t("not one of the choices"))
    has = t("the model has {L} layers and {H} heads per layer", L=n_layers, H=n_heads)
    loaded.fit_many("rl", range(1, n_layers), [n_layers - 1] if n_layers > 1 else [], what=t("Receiver layers"), because=has)
    loaded.fit("recv_layer", range(1, n_layers), n_layers - 1, what=t("Receiver layer"), because=has, basis=ctx.model_name)
    loaded.fit("recv_head", range(n_heads), 0, what=t("Receiver head"), because=has, basis=ctx.model_name)
    if not 0.5 <= loaded.share <= 1.0:
        loaded.set("share", 0.8)
    return loaded


# jobs (progress, Stop, the last result kept and marked stale), each with its cost (est=) said before it starts
job = functools.partial(app_costs.job, ctx)


# ----------------------------------------------------------------------------- clicks

def _edge_clicked():
    """A click on an edge of the circuit graph: its receiver becomes the path-patching receiver; on a head:
    that head opens on Heatmaps with the clean prompt."""
    for edge in ui.clicked("ci_graph", "edge")[:1]:
        try:
            node = path_patching.parse_node(str(edge["receiver"]), cfg, "receiver")
        except (KeyError, patching.PatchError):
            return
        if node[0] in path_patching.INPUTS:
            st.session_state.update(ci_recv_layer=node[1], ci_recv_head=node[2], ci_recv_input=node[0],
                                    ci_sender=str(edge.get("sender")))
        return
    for node in ui.clicked("ci_graph", "node", "node")[:1]:
        try:
            ui.open_head(*parse_head(node), prompt=st.session_state.get("ci_clean", ""))
        except ValueError:                               # an MLP, the embedding or the logits
            pass


# ============================================================================= weights
def weights_section():
    st.subheader(t("How heads compose (from the weights, no prompt)"))
    views = job("ci_weights", (), t("Composition and per-head scores from the weights"), compose.weight_views,
                est=cost_lib.composition_cost(cfg, rate=RATE))
    if views is None:
        return
    (comp, per_head), baseline = views, views[0].baseline
    c1, c2 = st.columns([1, 2])
    mode = c1.radio(t("Composition"), ["k", "q", "v"], key="ci_mode", horizontal=True,
                    format_func=lambda m: {"k": t("K (keys)"), "q": t("Q (queries)"), "v": t("V (values)")}[m])
    receivers = c2.multiselect(t("Receiver layers"), list(range(1, n_layers)), key="ci_rl")
    st.caption(ui.plain(t(
        "Score = {formula}. Random matrices of the same shapes score {mean} on average (99th percentile {q99}, {n} seeded "
        "samples): the colour scale starts there and cells above the 99th percentile are outlined.", formula=compose.FORMULAS[mode],
        mean=f"{baseline['mean']:.3f}", q99=f"{baseline['q99']:.3f}", n=baseline["n"]) + " " + " ".join(map(str, comp.notes))))
    st.caption(t("From the weights alone: a score says how much a later head could read an earlier one's output, not "
                 "that it does on any prompt — a real edge and a decoy's can score alike. Path patching and the "
                 "discovered circuit below measure effects on a prompt pair."))
    if receivers:
        st.altair_chart(circuit_charts.composition_matrix(comp, mode, receiver_layers=receivers), width="content")
    top = pd.DataFrame(comp.top(mode, 12), columns=["sender", "receiver", "score"])
    left, right = st.columns(2)
    left.caption(t("Largest pairs"))
    ui.show_table(top.assign(**{t("× baseline mean"): top["score"] / baseline["mean"]}), on=left, hide_index=True, width="stretch")
    right.caption(t("Per head: {notes}", notes=ui.plain(" · ".join(map(str, per_head.notes)))))
    ui.show_table(per_head.frame().drop(columns=["layer", "index"]), on=right, hide_index=True, width="stretch", height=300)
    ui.download_buttons(comp.frame(), None, f"composition_{mode}", ui.meta_for(ctx, mode=mode), key="ci_comp")


# ============================================================================= a pair
def pair_inputs() -> list:
    st.subheader(t("On a prompt pair"))
    pair_widgets.pair_inputs("ci", CHECKS, more=True)
    pairs = pair_widgets.pairs_from_inputs(ctx.model, "ci", BOS, more=True)
    if pairs[0].T > MAX_T:
        ui.show_error(t("The prompts have {T} tokens; this page takes at most {max} (the CLI `python -m attnkit circuit` "
                        "has no limit).", T=pairs[0].T, max=MAX_T))
        ui.stop()
    pair_widgets.describe_pair(ctx.model, pairs[0])
    return pairs


# ============================================================================= path patching
def path_section(pair: patching.Pair):
    st.subheader(t("Path patching: one sender into one receiver's input"))
    c1, c2, c3, c4, c5 = st.columns(5)
    layer = c1.selectbox(t("Receiver layer"), range(1, n_layers), key="ci_recv_layer")
    head = c2.selectbox(t("Receiver head"), range(n_heads), key="ci_recv_head")
    inp = c3.radio(t("Input"), list(path_patching.INPUTS), key="ci_recv_input", horizontal=True)
    source = c4.radio(t("Sender's output from"), list(path_patching.SOURCES), key="ci_source", horizontal=True,
                      format_func=lambda s: {"pair": t("the other prompt"), "mean": t("its mean over positions")}[s])
    direction = pair_widgets.direction_radio(c5, "ci_direction")
    receiver = path_patching.node_name((inp, layer, head))
    res = job("ci_path", (pair_widgets.pair_key(pair), receiver, direction, source), t("Patching every sender into "
              "{receiver}", receiver=receiver), path_patching.path_map, pair, receiver, direction, mlps=True,
              source=source, est=app_costs.path_cost(cfg, pair.T, receiver, RATE))
    if res is None:
        return
    recv, direction = res.receiver, res.direction          # what was computed (a stale result says so above)
    df = res.frame()
    is_head = df["sender"].str.startswith("L")
    heads = df[is_head].copy()
    heads["layer"], heads["head"] = zip(*map(parse_head, heads["sender"]))
    st.caption(ui.plain(t(
        "Each cell: the {run} run with one sender's output changed for {recv} only (every other reader sees the unchanged "
        "stream); the colour is the change of logit(answer) − logit(distractor). Clean {clean}, corrupted {corrupt}.",
        run=pair_widgets.word("corrupted" if direction == "denoise" else "clean"), recv=recv, clean=f"{res.clean_ld:+.3f}",
        corrupt=f"{res.corrupt_ld:+.3f}") + " " + " ".join(map(str, res.notes[len(pair.notes):]))))
    pair_widgets.gap_warning(res.clean_ld, res.corrupt_ld)
    chart = effect_charts.head_map(heads, "change", legend_title=t("change of LD"), title=t("senders → {recv}", recv=recv))
    st.altair_chart(chart, width="content")
    picked = st.session_state.get("ci_sender")
    if picked in set(df["sender"]):
        row = df[df["sender"] == picked].iloc[0]
        st.info(ui.plain(t("{sender} → {recv}: logit difference {ld} (change {change}, normalised {norm}).", sender=picked, recv=recv,
                           ld=f"{row['logit_diff']:+.4f}", change=f"{row['change']:+.4f}", norm=f"{row['normalised']:+.3f}")), icon="🔗")
    ui.show_table(df[~is_head], hide_index=True, width="content")
    ui.download_buttons(df, chart, f"path_{recv}", ui.meta_for(ctx, receiver=recv, source=source, direction=direction),
                        key="ci_path")


# ============================================================================= discovery
def discovery_section(pairs: list):
    st.subheader(t("A circuit, found automatically and checked by ablation"))
    c1, c2, c3 = st.columns(3)
    share = c1.slider(t("Share of the clean logit difference to recover"), 0.5, 1.0, step=0.05, key="ci_share")
    ablation = c2.radio(t("Edges outside the circuit"), list(discover.ABLATIONS), key="ci_ablation", horizontal=True,
                        format_func=lambda a: {"resample": t("corrupted output"), "mean": t("mean output")}[a])
    mlps = not c3.checkbox(t("Heads only (no MLP nodes)"), key="ci_heads_only")
    with st.expander(t("More pairs from a file (discovery then runs on every pair)")):
        pset = pair_widgets.prompt_set_upload("ci", ctx.model, BOS)
    if pset is not None:
        pairs = pairs + [p for p in pset.pairs if p.T <= MAX_T]
        st.caption(t("{n} more pair(s) from {name}; pairs over {max} tokens are left out.", n=len(pairs) - 1,
                     name=ui.plain(pset.name), max=MAX_T))
    found = job("ci_found", (tuple(map(pair_widgets.pair_key, pairs)), share, ablation, mlps),
                t("Scoring every edge and running circuits"), discover.discover, pairs, share, ablation=ablation,
                mlps=mlps, est=cost_lib.discovery_cost(cfg, max(p.T for p in pairs), len(pairs), mlps=mlps, rate=RATE))
    if found is None:
        return
    for n in found.notes:
        st.caption(ui.plain(n))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(t("Edges kept"), t("{n} of {all}", n=found.size, all=len(found.ranked)))
    m2.metric("LD(circuit) / LD(clean)", found.share_text())
    m3.metric(t("Clean LD"), f"{found.clean_ld:+.3f}")
    m4.metric(t("Every edge ablated"), f"{found.empty_ld:+.3f}")
    st.caption(ui.plain(t("Heads in the circuit: {heads}", heads=" ".join(found.heads) or t("none"))))
    view = planted_view.compare_section(ctx, found)     # a planted model: its stated circuit beside this one
    curve = circuit_charts.faithfulness_curve(found) if found.solved else None    # not solved: no shares to draw
    if curve is not None:
        st.altair_chart(curve, width="content")
    graph = circuit_charts.circuit_graph(view.edges, n_layers, n_heads, select_edge="edge", select_node="node",
                                         **view.chart_args(),
                                         title=t("The circuit (click an edge: its path patch above; click a head: Heatmaps)"))
    st.altair_chart(graph, width="content", on_select=_edge_clicked, selection_mode=["edge", "node"], key="ci_graph")
    edges = pd.DataFrame(found.edges, columns=["sender", "receiver", "attribution"])
    ui.show_table(edges, hide_index=True, width="stretch", height=260)
    meta = ui.meta_for(ctx, share=found.target, ablation=found.ablation, pairs=found.n_pairs)
    ui.download_buttons(edges, graph, "circuit_edges", meta, key="ci_edges")
    if curve is not None:
        ui.download_buttons(found.curve_frame(), curve, "faithfulness", meta, key="ci_curve")
    st.download_button("JSON", ui.json_bytes(found.to_json()), file_name="circuit.json", mime="application/json",
                       key="ci_json", on_click="ignore")


def exact_section(pair: patching.Pair):
    st.subheader(t("Attribution patching beside exact patching"))
    mlps = not st.session_state.get("ci_heads_only")
    run, top = app_costs.exact_choice(cfg, pair.T, pair.pos, mlps, RATE, "ci_exact")
    if not run:
        st.caption(t("Attribution patching is a first-order estimate (gradient × activation difference, one "
                     "forward and one backward pass); this runs the exact patches it stands for."))
        return
    both = job("ci_exact_job", (pair_widgets.pair_key(pair), mlps, top), t("Exact patching of every head × position "
               "and {edges}", edges=t("every edge") if top is None else t("the top {n} edges", n=top)),
               attribution_patching.versus_exact, pair, mlps, top=top)
    if both is None:
        return
    heads, edges = both
    left, right = st.columns(2)
    left.altair_chart(circuit_charts.estimate_vs_exact(
        heads.frame(), title=t("heads × positions (denoise): Spearman {r}", r=f"{heads.spearman:.3f}")), width="content")
    edf = edges.frame().assign(receiving_ld=edges.receiving_ld)
    right.altair_chart(circuit_charts.estimate_vs_exact(edf, title=t("edges (noise): Spearman {r}", r=f"{edges.spearman:.3f}")),
                       width="content")
    ui.download_buttons(edf, None, "edge_attribution", ui.meta_for(ctx), key="ci_ea")


CHECKS = pair_widgets.example_checks(ctx.model_name, ctx.device, BOS, examples.CIRCUITS_PREFERRED)
state = load_state(CHECKS)
weights_section()
PAIRS = pair_inputs()
path_section(PAIRS[0])
discovery_section(PAIRS)
exact_section(PAIRS[0])
