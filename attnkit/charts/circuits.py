"""Charts of circuits across layers (Altair, no Streamlit): the composition matrix with its random
baseline, the circuit as a graph (heads as nodes by layer), the faithfulness curve, and attribution
patching against exact patching."""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import t
from ..standard import parse_head
from .axes import CONTENT_WIDTH, colour_legend, discrete_axis, integer_axis
from .heatmaps import PAD

__all__ = ["MARK_COLOURS", "composition_matrix", "circuit_graph", "faithfulness_curve", "estimate_vs_exact", "node_xy"]

_INPUT_COLOURS = {"q": "#1f77b4", "k": "#d62728", "v": "#2ca02c", "mlp": "#9467bd", "logits": "#ff7f0e"}


def mark_labels() -> dict[str, str]:
    """found / missed / extra (the marks of :func:`attnkit.calibration.edge_marks`) as shown in legends,
    tooltips and tables."""
    return {"found": t("found (stated and discovered)"), "missed": t("missed (stated, not discovered)"),
            "extra": t("extra (discovered, not stated)")}


def composition_matrix(comp, mode: str = "k", *, title: str | None = None,
                       receiver_layers=None) -> alt.LayerChart:
    """Sender head (rows) × receiver head (columns) ``mode``-composition scores; the colour scale starts
    at the random baseline's mean and cells above its 99th percentile are outlined. ``receiver_layers``
    (optional) keeps only receivers in those layers."""
    H, lab = comp.n_heads, comp.labels
    s = comp.scores[mode]
    ii, jj = np.nonzero(np.isfinite(s))
    if receiver_layers is not None:
        keep = np.isin(jj // H, list(receiver_layers))
        ii, jj = ii[keep], jj[keep]
    b = comp.baseline
    d = pd.DataFrame({"sender": [lab[i] for i in ii], "receiver": [lab[j] for j in jj], "score": s[ii, jj],
                      "sender_layer": ii // H, "receiver_layer": jj // H})
    d["above_baseline"] = d["score"] - b["mean"]
    d["beyond_q99"] = d["score"] > b["q99"]
    senders = [x for x in lab if x in set(d["sender"])]
    receivers = [x for x in lab if x in set(d["receiver"])]
    cell = max(6, min(22, 720 // max(len(receivers), 1)))
    title = title or t("{mode}-composition (sender → receiver); random baseline mean {mean}, 99th percentile {q99}",
                       mode=mode.upper(), mean=f"{b['mean']:.3f}", q99=f"{b['q99']:.3f}")
    base = alt.Chart(d, title=str(title)).encode(
        x=alt.X("receiver:N", sort=receivers, axis=discrete_axis(t("receiver head"), receivers, cell)),
        y=alt.Y("sender:N", sort=senders, axis=discrete_axis(t("sender head"), senders, cell, x=False)))
    tips = [alt.Tooltip("sender:N", title=t("sender")), alt.Tooltip("receiver:N", title=t("receiver")),
            alt.Tooltip("score:Q", format=".4f", title=t("score")),
            alt.Tooltip("above_baseline:Q", format="+.4f", title=t("score − baseline mean")),
            alt.Tooltip("beyond_q99:N", title=t("above the baseline's 99th percentile"))]
    top = float(max(d["score"].max(), b["q99"])) if len(d) else 1.0
    rect = base.mark_rect().encode(
        color=alt.Color("score:Q", title=t("{mode}-composition", mode=mode.upper()),
                        scale=alt.Scale(scheme="viridis", domain=[b["mean"], top], clamp=True),
                        legend=colour_legend(t("{mode}-composition", mode=mode.upper()), (b["mean"], top))),
        tooltip=tips)
    ring = base.transform_filter("datum.beyond_q99").mark_rect(fillOpacity=0, stroke="white", strokeWidth=0.6)
    return alt.layer(rect, ring).properties(width=cell * len(receivers), height=cell * len(senders), autosize=PAD)


def node_xy(name: str, n_layers: int, n_heads: int) -> tuple[float, float]:
    """Where a node sits: heads at (head, layer), MLP{l} right of layer l, embed below, logits above."""
    base = name.split(".")[0]
    if base == "embed":
        return (n_heads - 1) / 2, -1.0
    if base == "logits":
        return (n_heads - 1) / 2, float(n_layers)
    if base.startswith("MLP"):
        return float(n_heads) + 0.5, int(base[3:]) + 0.4
    layer, head = parse_head(base)
    return float(head), float(layer)


#: Colours of a stated circuit's marks (:func:`attnkit.calibration.edge_marks`) on the graph.
MARK_COLOURS = {"found": "#2ca02c", "missed": "#d62728", "extra": "#ff7f0e"}


def _edge_colour(marks, mark_labels: dict | None, mark_title: str):
    """Colour by the receiver's input, or (with ``marks``) by found / missed / extra, shown as ``mark_labels``."""
    legend = dict(orient="bottom", direction="horizontal", labelLimit=0, titleLimit=0, titleOrient="left")
    if marks is None:
        return alt.Color("input:N", title=t("receiver input"), legend=alt.Legend(**legend),
                         scale=alt.Scale(domain=list(_INPUT_COLOURS), range=list(_INPUT_COLOURS.values())))
    labels = mark_labels or {m: m for m in MARK_COLOURS}
    return alt.Color("mark:N", title=str(mark_title), legend=alt.Legend(**legend, columns=1),
                     scale=alt.Scale(domain=[labels[m] for m in MARK_COLOURS], range=list(MARK_COLOURS.values())))


def circuit_graph(edges, n_layers: int, n_heads: int, *, title: str = "", width: int = CONTENT_WIDTH - 100,
                  select_edge: str | None = None, select_node: str | None = None, marks: dict | None = None,
                  mark_labels: dict | None = None, mark_title: str | None = None) -> alt.LayerChart:
    """Edges (sender, receiver, score) drawn from node to node; colour = the receiver's input (q, k, v,
    MLP, logits), width = |score|. Heads are nodes at (head, layer). ``select_edge`` / ``select_node`` name
    click selections (fields sender, receiver / node) for Streamlit's ``on_select``. With ``marks`` ((sender,
    receiver) -> "found" / "missed" / "extra") the colour is the mark instead (missed edges dashed), shown as
    ``mark_labels`` (mark -> text) in the legend and tooltips under ``mark_title``."""
    rows = []
    for s, r, v in edges:
        (x, y), (x2, y2) = node_xy(s, n_layers, n_heads), node_xy(r, n_layers, n_heads)
        kind = r.split(".")[1] if "." in r else ("mlp" if r.startswith("MLP") else "logits")
        mark = (marks or {}).get((s, r), "")
        rows.append({"sender": s, "receiver": r, "score": float(v), "abs_score": abs(float(v)), "input": kind,
                     "mark": (mark_labels or {}).get(mark, mark), "dash": mark == "missed",
                     "x": x, "y": y, "x2": x2, "y2": y2})
    e = pd.DataFrame(rows, columns=["sender", "receiver", "score", "abs_score", "input", "mark", "dash", "x", "y",
                                    "x2", "y2"])
    names = sorted({n.split(".")[0] for n in list(e["sender"]) + list(e["receiver"])})
    nodes = pd.DataFrame([{"node": n, "x": node_xy(n, n_layers, n_heads)[0], "y": node_xy(n, n_layers, n_heads)[1]}
                          for n in names], columns=["node", "x", "y"])
    mark_title = t("stated circuit") if mark_title is None else mark_title
    xs = alt.Scale(domain=[-0.8, n_heads + 1.3], nice=False, zero=False)
    ys = alt.Scale(domain=[-1.5, n_layers + 0.5], nice=False, zero=False)
    # integer ticks at the heads and the layers only (MLPs sit between columns, embed and logits outside)
    ax_x = integer_axis(t("head"), range(n_heads), grid=False)
    ax_y = integer_axis(t("layer"), range(n_layers), grid=False)
    lines = alt.Chart(e, title=str(title)).mark_rule(opacity=0.7).encode(
        x=alt.X("x:Q", scale=xs, axis=ax_x), y=alt.Y("y:Q", scale=ys, axis=ax_y), x2="x2:Q", y2="y2:Q",
        color=_edge_colour(marks, mark_labels, mark_title),
        strokeWidth=alt.StrokeWidth("abs_score:Q", title=t("|score|"), scale=alt.Scale(range=[0.5, 6]),
                                    legend=alt.Legend(orient="bottom", direction="horizontal", titleOrient="left")),
        strokeDash=alt.condition("datum.dash", alt.value([5, 3]), alt.value([1, 0])),
        tooltip=[alt.Tooltip("sender:N", title=t("sender")), alt.Tooltip("receiver:N", title=t("receiver")),
                 alt.Tooltip("score:Q", format="+.4f", title=t("score")), alt.Tooltip("input:N", title=t("input"))]
        + ([alt.Tooltip("mark:N", title=str(mark_title))] if marks is not None else []))
    if select_edge:
        lines = lines.add_params(alt.selection_point(name=select_edge, fields=["sender", "receiver"], on="click",
                                                     clear=False))
    dots = alt.Chart(nodes).mark_circle(size=260, color="#444").encode(
        x=alt.X("x:Q", scale=xs, axis=ax_x), y=alt.Y("y:Q", scale=ys, axis=ax_y),
        tooltip=[alt.Tooltip("node:N", title=t("node"))])
    if select_node:
        dots = dots.add_params(alt.selection_point(name=select_node, fields=["node"], on="click", clear=False))
    text = alt.Chart(nodes).mark_text(dy=-14, fontSize=10).encode(x="x:Q", y="y:Q", text="node:N")
    height = max(240, 70 * (n_layers + 2))
    return alt.layer(lines, dots, text).properties(width=width, height=height, autosize=PAD)


def faithfulness_curve(circuit, *, title: str = "") -> alt.LayerChart:
    """Share of the clean logit difference recovered against the number of edges kept (log scale)."""
    d = circuit.curve_frame()
    d = d[d["edges"] > 0]
    how = {"resample": t("corrupted output"), "mean": t("mean output")}.get(circuit.ablation, circuit.ablation)
    line = alt.Chart(d, title=str(title or t("faithfulness ({how} ablation of every other edge)", how=how))).mark_line(
        point=True).encode(
        x=alt.X("edges:Q", scale=alt.Scale(type="log"), axis=integer_axis(t("edges kept (top by |edge attribution|)"))),
        y=alt.Y("faithfulness:Q", title=t("LD(circuit) / LD(clean)")),
        tooltip=[alt.Tooltip("edges:Q", title=t("edges")), alt.Tooltip("faithfulness:Q", format=".3f", title=t("faithfulness"))])
    target = alt.Chart(pd.DataFrame({"y": [circuit.target]})).mark_rule(strokeDash=[4, 4], color="grey").encode(
        y="y:Q")
    empty = alt.Chart(pd.DataFrame({"y": [circuit.empty_ld / circuit.clean_ld if circuit.clean_ld else 0.0]})
                      ).mark_rule(color="#d62728", strokeDash=[2, 2]).encode(y="y:Q", tooltip=[
                          alt.Tooltip("y:Q", title=t("Every edge ablated"), format=".3f")])
    pick = alt.Chart(pd.DataFrame({"edges": [max(circuit.size, 1)], "faithfulness": [
        circuit.share]})).mark_point(
        size=160, shape="diamond", filled=True, color="#ff7f0e").encode(
        x="edges:Q", y="faithfulness:Q", tooltip=[alt.Tooltip("edges:Q", title=t("edges")),
                                                  alt.Tooltip("faithfulness:Q", format=".3f", title=t("faithfulness"))])
    return alt.layer(line, target, empty, pick).properties(width=560, height=300, autosize=PAD)


def estimate_vs_exact(df: pd.DataFrame, label: str = "name", *, title: str = "") -> alt.Chart:
    """Attribution-patching estimate against exact patching (columns ``estimate``, ``exact``, ``label``)."""
    return alt.Chart(df, title=str(title)).mark_circle(size=30, opacity=0.6).encode(
        x=alt.X("exact:Q", title=t("exact patching")), y=alt.Y("estimate:Q", title=t("attribution patching")),
        tooltip=[c for c in df.columns if df[c].dtype == object] + [
            alt.Tooltip("exact:Q", format="+.4f", title=t("exact patching")),
            alt.Tooltip("estimate:Q", format="+.4f", title=t("attribution patching"))]
    ).properties(width=420, height=420, autosize=PAD)
