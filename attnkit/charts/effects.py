"""Charts of the Head effects page (Altair, no Streamlit): patching maps, attribution bars, the
contribution graph, the logit-lens table and a head's promoted/suppressed tokens.

Diverging values (patching effects, logit attributions) are coloured blue (negative) – white (0) –
red (positive) on a symmetric scale; sizes follow the page's conventions (plot area sized, axes
and legends padded on top, every label drawn).
"""
from __future__ import annotations

import json
import math
import re

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import t
from ..weights import head_name
from .axes import colour_legend, discrete_axis, integer_axis
from .heatmaps import CELL_TEXT_PX, CONTENT_WIDTH, MIN_TEXT_CELL, PAD

__all__ = ["LENS_MAX_T", "row_label", "last_positions", "set_average_charts", "head_map", "layer_pos_map", "layer_bars", "attribution_bars", "contribution_graph", "lens_chart",
           "head_tokens_chart"]


#: Logit-lens positions drawn: cells of at least 24 px beside the row names and the legend.
LENS_MAX_T = (CONTENT_WIDTH - 260) // 24


def _sym(values) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    a = float(np.abs(v).max()) if v.size else 1.0
    return [-(a or 1.0), a or 1.0]


def _diverging(field: str, values, title: str, domain=None):
    dom = domain or _sym(values)
    return alt.Color(f"{field}:Q", title=title, legend=colour_legend(title, dom),
                     scale=alt.Scale(scheme="redblue", reverse=True, domain=dom, domainMid=0, clamp=True))


def row_label(name: str) -> str:
    """A residual-stream row's name (:func:`attnkit.patching.resid_row_name`'s "before L2", "after L3 (final)";
    the logit lens's "embed", "after 2") in the reader's language."""
    if m := re.fullmatch(r"before L(\d+)", name):
        return t("before L{l}", l=m[1])
    if m := re.fullmatch(r"after L(\d+) \(final\)", name):
        return t("after L{l} (final)", l=m[1])
    if m := re.fullmatch(r"after (\d+)", name):
        return t("after {l}", l=m[1])
    return t("embed") if name == "embed" else name


def _extra_tips(d: pd.DataFrame, value: str) -> list:
    names = {"logit_diff": t("logit difference"), "std": t("std")}
    return [alt.Tooltip(f"{c}:Q", format=".4f", title=names[c]) for c in names if c in d and c != value]


def head_map(df: pd.DataFrame, value: str = "normalised", *, title: str = "", select: str | None = None,
             text: bool = True, legend_title: str | None = None, domain=None, width: int = 640,
             outline: str | None = None) -> alt.LayerChart:
    """Layer × head cells coloured by ``df[value]`` (columns layer, head, value); ``select`` names a click
    selection on the field ``cell`` ("L{l}H{h}") for Streamlit's ``on_select``; ``outline``: a head ("L1H3") whose
    cell is outlined. The heads span at most ``width`` px (cells of 18 to 46 px)."""
    d = df.copy()
    d["cell"] = [head_name(int(l), int(h)) for l, h in zip(d["layer"], d["head"])]
    L, H = int(d["layer"].max()) + 1, int(d["head"].max()) + 1
    cell = max(18, min(46, width // max(H, 1)))
    base = alt.Chart(d, title=str(title)).encode(
        x=alt.X("head:O", axis=discrete_axis(t("head"), [str(h) for h in range(H)], cell)),
        y=alt.Y("layer:O", axis=discrete_axis(t("layer"), [str(l) for l in range(L)], cell, x=False)))
    tips = [alt.Tooltip("cell:N", title=t("head")), alt.Tooltip(f"{value}:Q", format=".4f", title=str(legend_title or value))]
    tips += _extra_tips(d, value)
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=_diverging(value, d[value], legend_title or value, domain), tooltip=tips)
    if select:
        rect = rect.add_params(alt.selection_point(name=select, fields=["cell"], on="click", clear=False))
    layers = [rect]
    if outline is not None:
        layers.append(base.transform_filter(alt.datum.cell == outline).mark_rect(
            fill=None, stroke="#ff7f0e", strokeWidth=3))
    if text and cell >= MIN_TEXT_CELL:
        a = _sym(d[value])[1]
        layers.append(base.mark_text(fontSize=CELL_TEXT_PX).encode(
            text=alt.Text(f"{value}:Q", format=".2f"),
            color=alt.condition(f"abs(datum['{value}']) > {0.6 * a}", alt.value("white"), alt.value("black"))))
    return alt.layer(*layers).properties(width=cell * H, height=cell * L, autosize=PAD)


def layer_pos_map(df: pd.DataFrame, labels: list[str], value: str = "normalised", *, title: str = "",
                  legend_title: str | None = None, domain=None) -> alt.LayerChart:
    """Layer × position cells (columns layer, position, value); x labelled with the tokens. A ``row``
    column (the residual map's "before L0" … "after L3 (final)") names the rows instead of ``layer``."""
    d = df.copy()
    d["label"] = [labels[int(p)] for p in d["position"]]
    if "row" in d:
        d["row"] = d["row"].map(row_label)
    L, T = int(d["layer"].max()) + 1, len(labels)
    cw = max(4, min(40, (CONTENT_WIDTH - 240) // max(T, 1)))     # beside the row names and the legend
    ch = max(14, min(30, 360 // max(L, 1)))
    base = alt.Chart(d, title=str(title)).encode(
        x=alt.X("label:N", sort=labels, axis=discrete_axis(t("position (token)"), labels, cw)),
        y=_row_axis(d, ch))
    tips = [alt.Tooltip("row:N" if "row" in d else "layer:O", title=t("layer")), alt.Tooltip("label:N", title=t("position")),
            alt.Tooltip(f"{value}:Q", format=".4f", title=str(legend_title or value))]
    tips += _extra_tips(d, value)
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=_diverging(value, d[value], legend_title or value, domain), tooltip=tips)
    return alt.layer(rect).properties(width=cw * T, height=ch * L, autosize=PAD)


def _row_axis(d: pd.DataFrame, step: float) -> alt.Y:
    """The rows of a per-layer map: ``row`` names in layer order when given, else the layer number."""
    if "row" in d:
        order = list(d.sort_values("layer")["row"].drop_duplicates())
        return alt.Y("row:N", sort=order, axis=discrete_axis(None, order, step, x=False, limit=0))
    layers = [str(l) for l in sorted(d["layer"].unique())]
    return alt.Y("layer:O", axis=discrete_axis(t("layer"), layers, step, x=False))


def layer_bars(df: pd.DataFrame, *, title: str = "") -> alt.LayerChart:
    """Per-layer mean with ± std error bars (columns layer, mean, std) over a prompt set."""
    d = df.copy()
    d["lo"], d["hi"] = d["mean"] - d["std"], d["mean"] + d["std"]
    if "row" in d:
        d["row"] = d["row"].map(row_label)
        order = list(d.sort_values("layer")["row"].drop_duplicates())
        x = alt.X("row:N", sort=order, axis=discrete_axis(None, order, 40, angle=-30, limit=0))
    else:
        x = alt.X("layer:O", axis=discrete_axis(t("layer"), [str(l) for l in d["layer"]], 40))
    base = alt.Chart(d, title=str(title)).encode(x=x)
    bars = base.mark_bar(color="#d6604d").encode(
        y=alt.Y("mean:Q", title=t("normalised logit difference")),
        tooltip=[alt.Tooltip("row:N", title=t("layer")) if "row" in d else alt.Tooltip("layer:O", title=t("layer")),
                 alt.Tooltip("mean:Q", format=".4f", title=t("mean")), alt.Tooltip("std:Q", format=".4f", title=t("std")),
                 alt.Tooltip("n:Q", title=t("pairs"))])
    err = base.mark_errorbar(ticks=True).encode(y=alt.Y("lo:Q", title=""), y2="hi:Q")
    return alt.layer(bars, err).properties(width=max(240, 40 * len(d)), height=240, autosize=PAD)


def attribution_bars(df: pd.DataFrame, top: int = 20, *, title: str = "", select: str | None = None) -> alt.Chart:
    """The ``top`` parts by |logit_diff| (columns part, kind, logit_diff) as horizontal bars."""
    d = df.reindex(df["logit_diff"].abs().sort_values(ascending=False).index).head(top).copy()
    towards = [t("towards the answer"), t("towards the distractor")]
    d["sign"] = np.where(d["logit_diff"] >= 0, *towards)
    bars = alt.Chart(d, title=str(title)).mark_bar().encode(
        x=alt.X("logit_diff:Q", title=t("contribution to logit(answer) − logit(distractor)")),
        y=alt.Y("part:N", sort=list(d["part"]), axis=discrete_axis(None, list(d["part"]), 18, x=False)),
        color=alt.Color("sign:N", scale=alt.Scale(domain=towards, range=["#b2182b", "#2166ac"]), title=t("direction"),
                        legend=alt.Legend(orient="bottom", labelLimit=0)),
        tooltip=[alt.Tooltip("part:N", title=t("part")), alt.Tooltip("kind:N", title=t("kind")),
                 alt.Tooltip("logit_diff:Q", format=".4f", title=t("logit difference"))])
    if select:
        bars = bars.add_params(alt.selection_point(name=select, fields=["part"], on="click", clear=False))
    return bars.properties(width=260, height=max(160, 18 * len(d)), autosize=PAD)   # half the page


def last_positions(df: pd.DataFrame, lo: int, *columns: str) -> pd.DataFrame:
    """The rows of ``df`` whose ``columns[0]`` position is ≥ ``lo``, every position column shifted by −lo."""
    kept = df[df[columns[0]] >= lo]
    return kept.assign(**{c: kept[c] - lo for c in columns})


def contribution_graph(nodes: pd.DataFrame, edges: pd.DataFrame, labels: list[str], *, title: str = "",
                       highlight: int | None = None, last: int | None = None) -> alt.LayerChart:
    """Nodes = (layer, position): the residual stream at a position before a layer (top row: after the
    last). Edges = contributions above the threshold: attention from position j into i (curving
    across), the residual stream itself (straight up). Line width and opacity follow the share.
    ``last``: only the last that many positions are drawn (edges from earlier positions left out)."""
    lo = max(0, len(labels) - last) if last else 0
    if lo:
        nodes, edges = last_positions(nodes, lo, "position"), last_positions(edges, lo, "from_pos", "to_pos")
        labels, highlight = labels[lo:], None if highlight is None else highlight - lo
    T = len(labels)
    L = int(nodes["layer"].max())
    w = max(300, min(CONTENT_WIDTH - 220, 46 * T))            # beside the axis and the legends
    h = max(220, min(640, 46 * L))
    x = alt.X("x:Q", scale=alt.Scale(domain=[-0.5, T - 0.5], nice=False, zero=False),
              axis=alt.Axis(values=list(range(T)), labelExpr=f"{json.dumps(labels)}[datum.value]", labelAngle=-60,
                            title=t("position (token)"), labelOverlap=False, grid=False))
    y = alt.Y("y:Q", scale=alt.Scale(domain=[-0.3, L + 0.3], nice=False, zero=False),
              axis=integer_axis(t("layer (residual stream entering it)"), range(L + 1), grid=False))
    e = edges.copy()
    e["x"], e["x2"] = e["from_pos"], e["to_pos"]
    e["y"], e["y2"] = e["layer"], e["layer"] + 1
    e["from"] = [labels[int(p)] for p in e["from_pos"]]
    e["to"] = [labels[int(p)] for p in e["to_pos"]]
    n = nodes.copy()
    n["x"], n["y"] = n["position"], n["layer"]
    n["label"] = [labels[int(p)] for p in n["position"]]
    n["on_path"] = False if highlight is None else n["position"] == highlight
    kinds = {"attention": t("attention"), "residual": t("residual stream")}
    e["kind"] = e["kind"].map(lambda k: kinds.get(k, k))
    tips = [alt.Tooltip("kind:N", title=t("kind")), alt.Tooltip("layer:Q", title=t("layer")),
            alt.Tooltip("from:N", title=t("from")), alt.Tooltip("to:N", title=t("to")),
            alt.Tooltip("share:Q", format=".3f", title=t("share")), alt.Tooltip("top_head:N", title=t("largest head")),
            alt.Tooltip("top_head_share:Q", title=t("its share"), format=".3f")]
    lines = alt.Chart(e).mark_rule().encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q",
        color=alt.Color("kind:N", scale=alt.Scale(domain=list(kinds.values()), range=["#d6604d", "#9e9e9e"]),
                        title=t("edge"), legend=alt.Legend(labelLimit=0, titleLimit=0)),
        strokeWidth=alt.StrokeWidth("share:Q", scale=alt.Scale(domain=[0, 1], range=[0.5, 7]), title=t("share"),
                                    legend=alt.Legend(titleLimit=0)),
        opacity=alt.Opacity("share:Q", scale=alt.Scale(domain=[0, 1], range=[0.35, 1]), legend=None),
        tooltip=tips)
    dots = alt.Chart(n).mark_circle(size=60, stroke="black", strokeWidth=0.5).encode(
        x=x, y=y, color=alt.condition("datum.on_path", alt.value("#ffbf00"), alt.value("#4c78a8")),
        tooltip=[alt.Tooltip("label:N", title=t("position")), alt.Tooltip("layer:Q", title=t("layer"))])
    return alt.layer(lines, dots, title=str(title)).properties(width=w, height=h, autosize=PAD)


def lens_chart(df: pd.DataFrame, labels: list[str], rows: list[str], *, answer: str | None = None,
               title: str = "", last: int | None = LENS_MAX_T) -> alt.LayerChart:
    """Logit lens, layer × position: each cell names its top token; coloured by the answer's rank
    (1 = top, log scale) when there is an answer, else by the top token's probability. ``last``: only the
    last that many positions are drawn (by default as many as fit the page)."""
    lo = max(0, len(labels) - last) if last else 0
    df, labels = (last_positions(df, lo, "position"), labels[lo:]) if lo else (df, labels)
    d = df.copy()
    d["label"] = [labels[int(p)] for p in d["position"]]
    d["row"] = d["row"].map(row_label)
    rows = [row_label(r) for r in rows]
    T, R = len(labels), len(rows)
    cw = max(24, min(80, (CONTENT_WIDTH - 260) // max(T, 1)))  # ≤ LENS_MAX_T positions fit
    ch = 22
    base = alt.Chart(d, title=str(title)).encode(
        x=alt.X("label:N", sort=labels, axis=discrete_axis(t("position (token)"), labels, cw, angle=-60)),
        y=alt.Y("row:N", sort=rows[::-1], axis=discrete_axis(t("residual stream"), rows[::-1], ch, x=False)))
    tips = [alt.Tooltip("row:N", title=t("residual stream")), alt.Tooltip("label:N", title=t("position")),
            alt.Tooltip("top_token:N", title=t("top token")),
            alt.Tooltip("top_prob:Q", format=".3f", title=t("top token probability")), alt.Tooltip("top_k:N", title=t("top tokens"))]
    if "answer_rank" in d:
        name = t("rank of {answer}", answer=repr(answer)) if answer else t("answer rank")
        top = max(10, int(d["answer_rank"].max()))
        decades = [10 ** k for k in range(int(math.ceil(math.log10(top))) + 1)]
        color = alt.Color("answer_rank:Q", title=name, legend=colour_legend(name, values=decades[::-1], fmt="d"),
                          scale=alt.Scale(type="log", scheme="viridis", reverse=True, domainMin=1))
        tips += [alt.Tooltip("answer_rank:Q", title=t("answer rank")),
                 alt.Tooltip("answer_prob:Q", format=".4f", title=t("answer probability"))]
    else:
        color = alt.Color("top_prob:Q", title=t("top token probability"), scale=alt.Scale(scheme="viridis"),
                          legend=colour_legend(t("top token probability"), (float(d["top_prob"].min()),
                                                                            float(d["top_prob"].max()))))
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(color=color, tooltip=tips)
    dark = "datum.answer_rank > 30" if "answer_rank" in d else "datum.top_prob < 0.5"
    text = base.mark_text(fontSize=CELL_TEXT_PX, limit=cw - 4).encode(
        text="top_token:N", color=alt.condition(dark, alt.value("white"), alt.value("black")))
    return alt.layer(rect, text).properties(width=cw * T, height=ch * R, autosize=PAD)


def head_tokens_chart(df: pd.DataFrame, *, title: str = "") -> alt.Chart:
    """A head's promoted (positive) and suppressed (negative) tokens (columns token, logit, direction)."""
    d = df.copy()
    d["shown"] = [f"'{t}'" for t in d["token"]]
    if d["shown"].duplicated().any():                     # two tokens that look alike: tell them apart by id
        d["shown"] = [f"'{t}' #{i}" for t, i in zip(d["token"], d["token_id"])]
    order = list(d.sort_values("logit", ascending=False)["shown"])
    ways = {"promoted": t("promoted"), "suppressed": t("suppressed")}
    d["way"] = d["direction"].map(lambda w: ways.get(w, w))
    return alt.Chart(d, title=str(title)).mark_bar().encode(
        x=alt.X("logit:Q", title=t("direct effect on the token's logit")),
        y=alt.Y("shown:N", sort=order, axis=discrete_axis(None, order, 16, x=False)),
        color=alt.Color("way:N", scale=alt.Scale(domain=list(ways.values()), range=["#b2182b", "#2166ac"]),
                        title=t("direction")),
        tooltip=[alt.Tooltip("token:N", title=t("token")), alt.Tooltip("token_id:Q", title=t("token id")),
                 alt.Tooltip("way:N", title=t("direction")), alt.Tooltip("logit:Q", format=".4f", title="logit")],
    ).properties(width=360, height=max(160, 16 * len(d)), autosize=PAD)


def set_average_charts(df: pd.DataFrame, dims: tuple, *, n: int, direction: str,
                       what: str) -> tuple[alt.LayerChart, alt.LayerChart | None]:
    """(the mean's chart, the spread's chart or None) of a prompt set's averaged maps (``df``: a
    :meth:`attnkit.patching.SetAverage.frame`, ``dims`` its axes, ``what`` the patched activation): heads → two head maps (the spread on a
    symmetric scale), layer × position → two maps, layers → bars with ± std."""
    spread, mean, std = t("Spread (standard deviation)"), t("mean"), t("std")
    way = str({"denoise": t("denoise"), "noise": t("noise")}.get(direction, direction))
    if "head" in dims:
        top = float(np.nanmax(df["std"])) if np.isfinite(df["std"]).any() else 1.0
        return (head_map(df, "mean", legend_title=mean, title=t("Mean over {n} pairs ({direction})", n=n, direction=way)),
                head_map(df, "std", legend_title=std, title=spread, domain=[-top, top]))
    if "position" in dims:
        labels = [str(i) for i in range(int(df["position"].max()) + 1)]
        return (layer_pos_map(df, labels, "mean", legend_title=mean, title=t("Mean over {n} pairs", n=n)),
                layer_pos_map(df, labels, "std", legend_title=std, title=spread))
    return layer_bars(df, title=t("{what}: mean ± std over {n} pairs ({direction})", what=what, n=n, direction=way)), None
