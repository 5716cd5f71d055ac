"""Attention heatmaps as Altair charts: one mark per cell for short windows, a PNG image for long ones.

Rows are query positions, columns key positions. Masked cells (a key after the query, which
the causal mask hides) are drawn in a flat grey, distinct from a visible weight of 0.

* :func:`cell_chart` — per-cell rectangles with token labels on both axes and tooltips;
  for at most :data:`MARK_LIMIT` rows/columns (a window of a longer matrix is fine).
* :func:`image_chart` — the whole matrix as one PNG (palette image, one pixel per cell,
  colours from the same scheme), for sequences up to the full context: the browser gets one
  image, not a million marks.
* :func:`grid_chart` — small multiples (a layer's heads, or one head through the layers).
* :func:`densest_block` — where a focus window should start: the block holding the most attention.

Colour scales (:data:`SCALES`): ``linear``, ``sqrt`` and ``log`` (three decades below the top of the
range); :func:`default_scale` picks ``log`` above :data:`MARK_LIMIT` tokens, where a linear scale is
almost all dark, and :func:`scale_note` says in one sentence what a scale does. Every chart here takes
``scale=`` so other pages can offer the same choice.

Sizes are chosen for :data:`CONTENT_WIDTH`, the page's content width at a 1280 px window with the sidebar
open (Streamlit's wide layout); wider windows leave room to spare. Heads are named ``L{layer}H{head}``.
"""
from __future__ import annotations

import base64
import io
import warnings

import altair as alt
import numpy as np
import pandas as pd
import torch
from PIL import Image

from ..attention import causal_mask

from ..i18n import t
from ..weights import head_name
from .axes import CONTENT_WIDTH, colour_legend, discrete_axis, integer_axis
from .colours import ANCHORS, SCHEME_ENDS, SCHEMES, colour_words, lut

__all__ = [
    "MARK_LIMIT", "GRID_MARK_LIMIT", "MASKED_COLOR", "masked_cells", "mask_state", "mask_caption", "window_phrase", "cells_frame", "cell_chart",
    "colour_domain", "to_png", "image_chart", "grid_chart", "block_max", "SCALES", "default_scale", "scale_note",
    "CELL_TEXT_PX", "MIN_TEXT_CELL", "GRID_LABELS_PX", "SCHEME_ENDS", "colour_words", "colour_scale", "shade", "blocks_frame", "densest_block", "head_name", "CONTENT_WIDTH", "grid_panel_size",
    "head_overview_chart", "rank_chart", "distance_chart", "distance_image",
]

MARK_LIMIT = 64          # rows/columns drawn as one mark per cell (64² = 4,096 marks)
GRID_MARK_LIMIT = 24     # per panel in a grid of heads/layers
GRID_IMAGE_PX = 256      # a grid panel's image is at most this many pixels a side
MASKED_COLOR = "#c9c9c9"
TOOLTIP_BLOCKS = 64      # the long-prompt image carries tooltips for at most 64×64 blocks of cells
GRID_TOOLTIP_BLOCKS = 16 # … and a grid panel's image for 16×16
SCALES = ("linear", "sqrt", "log")
LOG_DECADES = 3          # a log scale spans [top/10³, top]; smaller weights take the lowest colour
# Sizes are the plot area's; axes and legends come on top ("pad"). Without this Streamlit fits the
# whole chart, axes and legend included, into the given width, and the cells shrink.
PAD = alt.AutoSizeParams(type="pad", contains="padding")
#: Numbers written in cells: at least this font size, and only in cells at least MIN_TEXT_CELL px wide
#: (a "−0.12" at 11 px is about 31 px); smaller cells show the number in the tooltip only.
CELL_TEXT_PX = 11
MIN_TEXT_CELL = 34


def masked_cells(T: int, S: int | None = None, window: int | None = None) -> np.ndarray:
    """[T, S] bool: True where the model's mask hides key j from query i — the cells drawn grey.

    Read from :func:`attnkit.attention.causal_mask` (the mask the model adds), so a layer's local
    ``window`` (``ModelConfig.window(layer)``: Mistral, Qwen2's sliding layers, GPT-Neo's local layers)
    hides the keys it hides there. A block of it is a slice: ``masked_cells(T)[q0:q0 + R, k0:k0 + C]``."""
    return torch.isinf(causal_mask(T, S, window=window)).numpy()


def mask_state(masked: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray) -> np.ndarray:
    """Each cell's state for tooltips: visible, masked as a future key, or masked by the window."""
    return np.where(~masked, "visible", np.where(k_pos > q_pos, "masked (future key)", "masked (outside the window)"))


def _pad(top: bool) -> dict:
    return {"autosize": PAD} if top else {}


def colour_domain(values: np.ndarray, masked: np.ndarray | None, kind: str) -> tuple[float, float]:
    """(low, high) of the colour scale from the visible cells: [0, max] for patterns,
    symmetric [−a, a] for scores (so 0 is the neutral colour).

    For patterns, rows with a single visible key (query 0 under the causal mask, always weight 1)
    are left out of the max, so that long prompts are not drawn against a range set by that one
    cell; larger values take the top colour.
    """
    if values.ndim == 3 and kind == "pattern" and masked is not None and len(values):   # a stack of heads
        doms = [colour_domain(v, m, kind) for v, m in zip(values, np.broadcast_to(masked, values.shape))]
        return 0.0, max(d[1] for d in doms)
    if kind == "pattern" and masked is not None and values.ndim == 2:
        keep = (~masked).sum(-1) > 1
        if keep.any() and not keep.all():
            values, masked = values[keep], masked[keep]
    v = values if masked is None else values[~masked]
    v = v[np.isfinite(v)] if v.size else v
    if v.size == 0:
        return (0.0, 1.0) if kind == "pattern" else (-1.0, 1.0)
    if kind == "pattern":
        hi = float(v.max())
        return 0.0, hi if hi > 0 else 1.0
    a = float(np.abs(v).max())
    return -(a or 1.0), (a or 1.0)


def default_scale(n_tokens: int, kind: str = "pattern") -> str:
    """The colour scale a page starts with: ``log`` for patterns of more than :data:`MARK_LIMIT` tokens
    (most weights are then far below the largest, and a linear scale draws them all in the darkest
    colour), ``linear`` otherwise. Scores (diverging around 0) are always linear."""
    return "log" if kind == "pattern" and n_tokens > MARK_LIMIT else "linear"


def window_phrase(windows: list[int | None]) -> str:
    """How the local windows of the drawn layers hide keys ("" when none has one)."""
    ws = sorted({w for w in windows if w is not None})
    if not ws:
        return ""
    if len(windows) == 1:
        return t(", or a key {w} or more positions back (j ≤ i − {w}), outside the layer's local window of {w}",
                 w=ws[0])
    return t(", or a key outside a layer's local window (windows of {ws} on {n} of these {total} layers)",
             ws=", ".join(map(str, ws)), n=sum(w is not None for w in windows), total=len(windows))


def mask_caption(T: int, kind: str, scale: str, windows: list[int | None]) -> str:
    """The caption under a heatmap (plain text, no Markdown): axes, what grey means (the causal mask and the drawn
    layers' windows), and the colour scale, its colours named from the scheme drawn (:func:`colour_words`)."""
    what = t("weight") if kind == "pattern" else t("pre-softmax score")
    fate = t("; its weight is exactly 0") if kind == "pattern" else \
        t("; its score is replaced by −∞ before the softmax, so no number is shown")
    low, high = colour_words(kind)
    top = (t(" The top colour ({high}) is the largest weight outside row 0 (query 0 can only put its whole weight, "
             "1, on itself); anything larger takes it too. The lowest ({low}) is 0.", high=high, low=low)
           if kind == "pattern" and T > 2 else
           t(" Colours are centred on 0 (white): {low} below, {high} above, out to ± the largest visible score.",
             low=low, high=high) if kind == "scores" else
           t(" Colours run from {low} (0) to {high} (the largest weight).", low=low, high=high))
    return (t("{T} tokens · rows are queries (the position attending), columns keys (the position attended to) · "
              "grey = masked (a future key, hidden by the causal mask{window}{fate}), distinct from a visible "
              "{what} of 0. ", T=T, window=window_phrase(windows), fate=fate, what=what) + scale_note(scale, kind) + top)


def scale_note(scale: str, kind: str = "pattern") -> str:
    """One sentence saying how colours map to values under ``scale``."""
    if kind != "pattern":
        return t("Colours are linear in the score, centred on 0 (white).")
    if scale == "log":
        return t("Colours are logarithmic in the weight over {n} decades: each tenth of the top weight is one step "
                 "down the ramp, and weights below 1/{floor} of the top take the lowest colour.", n=LOG_DECADES,
                 floor=f"{10 ** LOG_DECADES:,}")
    if scale == "sqrt":
        return t("Colours follow the square root of the weight, which spreads the small weights over more colours.")
    return t("Colours are linear in the weight.")


def _log_floor(domain: tuple[float, float]) -> float:
    return max(float(domain[1]), 1e-12) / 10 ** LOG_DECADES


def shade(values: np.ndarray, domain: tuple[float, float], kind: str = "pattern", scale: str = "linear") -> np.ndarray:
    """Where each value falls on the colour ramp, in [0, 1] (NaN stays NaN): the same mapping as the
    charts' Vega scales (:func:`colour_scale`), for pictures drawn here (PNG)."""
    v = np.asarray(values, dtype=np.float64)
    lo, hi = domain
    if kind != "pattern":
        t = (v - lo) / ((hi - lo) or 1.0)
    elif scale == "log":
        floor = _log_floor(domain)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.log(np.maximum(v, floor) / floor) / np.log(max(hi, 1e-12) / floor)
    elif scale == "sqrt":
        t = np.sqrt(np.clip(v - lo, 0, None)) / (np.sqrt(hi - lo) or 1.0)
    else:
        t = (v - lo) / ((hi - lo) or 1.0)
    return np.where(np.isnan(v), np.nan, np.clip(t, 0.0, 1.0))


def colour_scale(kind: str, domain: tuple[float, float], scale: str = "linear") -> alt.Scale:
    """The Vega colour scale for ``kind`` ('pattern' or 'scores') under ``scale`` ('linear', 'sqrt', 'log').

    A log scale cannot hold 0: charts encode :func:`colour_values` (weights raised to the scale's floor)."""
    if kind != "pattern":
        return alt.Scale(scheme=SCHEMES["scores"], reverse=True, domain=list(domain), domainMid=0, clamp=True)
    if scale == "log":
        return alt.Scale(scheme=SCHEMES["pattern"], type="log", domain=[_log_floor(domain), domain[1]], clamp=True)
    return alt.Scale(scheme=SCHEMES["pattern"], domain=list(domain), type="sqrt" if scale == "sqrt" else "linear",
                     clamp=True)


def colour_values(values: np.ndarray, domain: tuple[float, float], kind: str = "pattern",
                  scale: str = "linear") -> np.ndarray:
    """The numbers a chart's colour channel encodes: the values, raised to the floor under a log scale."""
    v = np.asarray(values, dtype=np.float64)
    return np.maximum(v, _log_floor(domain)) if kind == "pattern" and scale == "log" else v


def to_png(values: np.ndarray, masked: np.ndarray | None, kind: str = "pattern",
           domain: tuple[float, float] | None = None, scale: str = "linear") -> bytes:
    """The matrix as a palette PNG, one pixel per cell; masked cells grey."""
    values = np.asarray(values, dtype=np.float64)
    domain = domain or colour_domain(values, masked, kind)
    t = shade(values, domain, kind, scale)
    stops = ANCHORS[SCHEMES[kind]]
    idx = np.clip(np.nan_to_num(t, nan=0.0) * 254 + 0.5, 0, 254).astype(np.uint8)     # 0..254 colours
    if masked is not None:
        idx = np.where(masked, 255, idx).astype(np.uint8)                              # 255 = masked
    pal = lut(stops, 255)
    grey = np.array([[int(MASKED_COLOR[i : i + 2], 16) for i in (1, 3, 5)]], dtype=np.uint8)
    img = Image.frombytes("P", (idx.shape[1], idx.shape[0]), np.ascontiguousarray(idx).tobytes())
    img.putpalette(np.concatenate([pal, grey]).reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _color(kind: str, domain: tuple[float, float], scale: str, title: str, legend: bool = True, length: int = 160,
           field: str = "colour", orient: str = "right"):
    """The colour channel and its legend: ``length`` px of legend (5 squares, 7 from 220 px on)."""
    log = kind == "pattern" and scale == "log"
    shown = (_log_floor(domain), domain[1]) if log else domain
    lg = colour_legend(title, shown, scale="log" if log else "linear", n=7 if length >= 220 else 5, orient=orient)
    return alt.Color(f"{field}:Q", scale=colour_scale(kind, domain, scale), title=title, legend=lg if legend else None)


def cells_frame(values: np.ndarray, q_labels: list[str], k_labels: list[str], masked: np.ndarray | None,
                q0: int = 0, k0: int = 0) -> pd.DataFrame:
    """Long table of a [R, C] block: query/key labels and positions, value, masked."""
    R, C = values.shape
    qi = np.repeat(np.arange(q0, q0 + R), C)
    kj = np.tile(np.arange(k0, k0 + C), R)
    return pd.DataFrame({
        "query": [q_labels[i] for i in qi], "key": [k_labels[j] for j in kj],
        "query_pos": qi, "key_pos": kj,
        "value": np.asarray(values, dtype=np.float64).reshape(-1),
        "masked": np.zeros(R * C, bool) if masked is None else np.asarray(masked).reshape(-1),
    })


def _name_tooltip(name: str | None) -> list:
    return [alt.Tooltip("head:N", title=t("head"))] if name else []


def cell_chart(values: np.ndarray, q_labels: list[str], k_labels: list[str], *, masked: np.ndarray | None = None,
               q0: int = 0, k0: int = 0, kind: str = "pattern", scale: str = "linear", title: str = "",
               size: int | None = None, domain: tuple[float, float] | None = None, axes: bool = True,
               legend: bool = True, top: bool = True, name: str | None = None, select: str | None = None,
               legend_length: int = 160, legend_orient: str = "right", label_axes: str = "") -> alt.Chart:
    """One rectangle per cell of the [R, C] block starting at (q0, k0); labels are the full label lists.

    ``name``: the head's name (a column ``head`` and a tooltip line); ``select``: the name of a click
    selection on that column (a grid panel that opens its head). Without ``axes``, ``label_axes`` ("x", "y",
    "xy") still writes the token labels, untitled, on those sides (a grid's outer panels)."""
    R, C = values.shape
    if R > MARK_LIMIT or C > MARK_LIMIT:
        raise ValueError(f"{R}×{C} cells: draw at most {MARK_LIMIT}×{MARK_LIMIT} as marks, use image_chart beyond")
    domain = domain or colour_domain(np.asarray(values), masked, kind)
    df = cells_frame(values, q_labels, k_labels, masked, q0, k0)
    df["state"] = mask_state(df["masked"].to_numpy(), df["query_pos"].to_numpy(), df["key_pos"].to_numpy())
    df = df[["query", "key", "value", "masked", "state"]]
    df["value"] = df["value"].astype(np.float32)
    df["colour"] = colour_values(df["value"].to_numpy(), domain, kind, scale).astype(np.float32)
    shown = "value"
    if kind == "scores":          # a masked cell's score is replaced by −∞ before the softmax: no number shown
        shown, df["shown"] = "shown", np.where(df["masked"], np.nan, df["value"]).astype(np.float32)
    if name:
        df["head"] = name
    q_order = [q_labels[i] for i in range(q0, q0 + R)]
    k_order = [k_labels[j] for j in range(k0, k0 + C)]
    vname = t("weight") if kind == "pattern" else t("score (pre-softmax)")
    side = size or max(220, min(800, 16 * max(R, C)))
    step = side / max(R, C)
    # every label Vega is given is drawn (the page's theme would drop overlapping ones); a grid panel without
    # full axes still labels the sides ``label_axes`` names (untitled, small)
    ax_x = discrete_axis(t("key (attended to)"), k_order, step, limit=110) if axes else \
        discrete_axis(None, k_order, step, limit=80) if "x" in label_axes else None
    ax_y = discrete_axis(t("query (attending)"), q_order, step, x=False, limit=110) if axes else \
        discrete_axis(None, q_order, step, x=False, limit=80) if "y" in label_axes else None
    chart = alt.Chart(df, title=title).mark_rect().encode(
        x=alt.X("key:N", sort=k_order, axis=ax_x),
        y=alt.Y("query:N", sort=q_order, axis=ax_y),
        color=alt.condition("datum.masked", alt.value(MASKED_COLOR),
                            _color(kind, domain, scale, vname, legend, legend_length, orient=legend_orient)),
        tooltip=_name_tooltip(name) + [
            alt.Tooltip("query:N", title=t("query token")), alt.Tooltip("key:N", title=t("key token")),
            alt.Tooltip(f"{shown}:Q", title=vname, format=".4f"), alt.Tooltip("state:N", title=t("cell"))],
    ).properties(width=side * C // max(R, C), height=side * R // max(R, C), **_pad(top))
    if select:
        chart = chart.add_params(_param(select, ["head"]))
    return chart


def _param(select, fields: list[str]):
    """A click selection named ``select``, or ``select`` itself when it is one already (shared by panels)."""
    if isinstance(select, alt.Parameter):
        return select
    return alt.selection_point(name=select, fields=fields, on="click", clear=False)


def blocks_frame(values: np.ndarray, masked: np.ndarray | None, q_labels: list[str] | None = None,
                 k_labels: list[str] | None = None, blocks: int = TOOLTIP_BLOCKS, q0: int = 0,
                 k0: int = 0) -> tuple[pd.DataFrame, int]:
    """The [R, C] matrix pooled into k×k blocks (at most ``blocks`` a side): one row per block with any
    visible cell, holding its extent (``x``, ``x2``, ``y``, ``y2`` in positions), its strongest cell
    (``query``, ``key`` labels, ``weight``) and its mean over visible cells. Returns (frame, k).

    This is what the image's tooltips and clicks carry: never one mark per cell for a long prompt."""
    v = np.asarray(values, dtype=np.float64)
    R, C = v.shape
    k = max(1, int(np.ceil(max(R, C) / blocks)))
    r, c = -(-R // k), -(-C // k)
    vis = np.ones((R, C), bool) if masked is None else ~np.asarray(masked)
    pv = np.full((r * k, c * k), -np.inf)
    pv[:R, :C] = np.where(vis, v, -np.inf)
    pm = np.zeros((r * k, c * k), bool)
    pm[:R, :C] = vis
    tiles = pv.reshape(r, k, c, k).transpose(0, 2, 1, 3).reshape(r, c, k * k)
    vt = pm.reshape(r, k, c, k).transpose(0, 2, 1, 3).reshape(r, c, k * k)
    arg = tiles.argmax(-1)
    best = np.take_along_axis(tiles, arg[..., None], -1)[..., 0]
    n = vt.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(vt, tiles, 0.0).sum(-1) / n
    bi, bj = np.nonzero(n > 0)
    qi = bi * k + arg[bi, bj] // k + q0
    kj = bj * k + arg[bi, bj] % k + k0
    ql = q_labels or [str(i) for i in range(q0 + R)]
    kl = k_labels or [str(j) for j in range(k0 + C)]
    df = pd.DataFrame({
        "x": bj * k + k0, "x2": np.minimum(bj * k + k, C) + k0,
        "y": bi * k + q0, "y2": np.minimum(bi * k + k, R) + q0,
        "query": [ql[i] for i in qi], "key": [kl[j] for j in kj],
        "weight": best[bi, bj].astype(np.float32), "mean": mean[bi, bj].astype(np.float32),
    })
    df["queries"] = [f"{a}–{b - 1}" if b - a > 1 else f"{a}" for a, b in zip(df["y"], df["y2"])]
    df["keys"] = [f"{a}–{b - 1}" if b - a > 1 else f"{a}" for a, b in zip(df["x"], df["x2"])]
    return df, k


def image_chart(values: np.ndarray, *, masked: np.ndarray | None = None, kind: str = "pattern",
                scale: str = "linear", title: str = "", size: int = 620, q0: int = 0, k0: int = 0,
                domain: tuple[float, float] | None = None, legend: bool = True, axes: bool = True,
                png: bytes | None = None, top: bool = True, labels: list[str] | None = None,
                name: str | None = None, select: str | None = None, blocks: int = TOOLTIP_BLOCKS,
                tip_values: np.ndarray | None = None, tip_masked: np.ndarray | None = None,
                legend_length: int = 160, window: tuple[int, int, int, int] | None = None,
                label_axes: str = "") -> alt.LayerChart:
    """The [R, C] matrix as one image, axes in token positions; a colour legend from an invisible layer.

    With ``labels`` (the token labels) an invisible layer of at most ``blocks``×``blocks`` rectangles lies
    over the image and carries the tooltips (the strongest cell of each block: query token, key token,
    weight; see :func:`blocks_frame`) and, with ``select``, a click selection (fields ``x``, ``y``: the
    block's first key and query position; ``head``: ``name``). ``tip_values``/``tip_masked``: the full
    matrix the tooltips read when ``values`` is a shrunken picture of it (:func:`block_max`).
    ``window``: (q0, k0, rows, cols) of a focus window, outlined. The image itself has no tooltip. Without
    ``axes``, ``label_axes`` ("x", "y", "xy") still draws untitled position axes on those sides."""
    R, C = values.shape
    domain = domain or colour_domain(np.asarray(values), masked, kind)
    png = png if png is not None else to_png(values, masked, kind, domain, scale)
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    full = np.asarray(values if tip_values is None else tip_values)
    FR, FC = full.shape
    ax_x = integer_axis(t("key position")) if axes else integer_axis(None) if "x" in label_axes else None
    ax_y = integer_axis(t("query position")) if axes else integer_axis(None) if "y" in label_axes else None
    xs = alt.X("x:Q", scale=alt.Scale(domain=[k0, k0 + FC], nice=False, zero=False), axis=ax_x)
    ys = alt.Y("y:Q", scale=alt.Scale(domain=[q0, q0 + FR], nice=False, zero=False, reverse=True), axis=ax_y)
    img = alt.Chart(alt.Data(values=[{"x": k0, "x2": k0 + FC, "y": q0, "y2": q0 + FR, "url": url}])).mark_image(
        aspect=False, smooth=False, tooltip=None).encode(x=xs, x2="x2:Q", y=ys, y2="y2:Q", url="url:N")
    h = int(size * FR / max(FR, FC))
    w = int(size * FC / max(FR, FC))
    layers = [img]
    if labels is not None or select:
        tips, kb = blocks_frame(full, masked if tip_values is None else tip_masked, labels, labels, blocks, q0, k0)
        if name:
            tips["head"] = name
        vname = t("weight") if kind == "pattern" else t("score")
        where = t("strongest cell") if kb > 1 else t("cell")
        tt = _name_tooltip(name) + [
            alt.Tooltip("query:N", title=t("query token ({where})", where=where)),
            alt.Tooltip("key:N", title=t("key token")), alt.Tooltip("weight:Q", title=vname, format=".4f")]
        if kb > 1:
            tt += [alt.Tooltip("queries:N", title=t("block: queries")), alt.Tooltip("keys:N", title=t("block: keys")),
                   alt.Tooltip("mean:Q", title=t("block mean {what}", what=vname), format=".4f")]
        over = alt.Chart(tips).mark_rect(opacity=0, cursor="pointer" if select else "default").encode(
            x=xs, x2="x2:Q", y=ys, y2="y2:Q", tooltip=tt)
        if select:
            over = over.add_params(_param(select, ["head", "x", "y"] if name else ["x", "y"]))
        layers.append(over)
    if window is not None:
        wq, wk, wr, wc = (int(v) for v in window)
        layers.append(alt.Chart(alt.Data(values=[{"x": wk, "x2": wk + wc, "y": wq, "y2": wq + wr}])).mark_rect(
            fill=None, stroke="#ff2d55", strokeWidth=2, tooltip=None).encode(x=xs, x2="x2:Q", y=ys, y2="y2:Q"))
    if legend:
        vname = t("weight") if kind == "pattern" else t("score (pre-softmax)")
        lo = colour_values(np.array(domain), domain, kind, scale)
        key = alt.Chart(alt.Data(values=[{"colour": float(lo[0])}, {"colour": float(lo[1])}])).mark_square(
            opacity=0, tooltip=None).encode(color=_color(kind, domain, scale, vname, length=legend_length))
        layers.append(key)
    return alt.layer(*layers, title=title).properties(width=w, height=h, **_pad(top))


def block_max(values: np.ndarray, masked: np.ndarray | None, px: int) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Shrink [R, C] so neither side exceeds ``px``: each pixel is the max of a k×k block
    (masked only if the whole block is masked). Returns (values, masked, k)."""
    R, C = values.shape
    k = max(1, int(np.ceil(max(R, C) / px)))
    if k == 1:
        return values, masked, 1
    r, c = -(-R // k), -(-C // k)
    v = np.full((r * k, c * k), -np.inf)
    v[:R, :C] = np.where(masked, -np.inf, values) if masked is not None else values
    v = v.reshape(r, k, c, k).max(axis=(1, 3))
    m = ~np.isfinite(v)
    return np.where(m, 0.0, v), (m if masked is not None else None), k


def densest_block(values: np.ndarray, size: int, masked: np.ndarray | None = None,
                  skip_first: bool = True, skip_diagonal: bool = True) -> tuple[int, int, float]:
    """The ``size``×``size`` window (q0, k0) holding the most attention, and that mass as a share of its
    rows' total: where a focus window should start.

    Trivial attention is not counted: key 0 (the first token, which many heads use as a resting place)
    and the diagonal (a token attending to itself). Every window position is scored exactly (summed-area
    table); ties go to the later rows. Returns (q0, k0, share of the rows' attention inside the window,
    trivial cells included)."""
    v = np.array(values, dtype=np.float64)
    R, C = v.shape
    size = max(1, min(size, R, C))
    w = np.where(np.isfinite(v), v, 0.0)
    if masked is not None:
        w = np.where(masked, 0.0, w)
    if skip_first and C > 1:
        w[:, 0] = 0.0
    if skip_diagonal:
        n = min(R, C)
        w[np.arange(n), np.arange(n)] = 0.0
    sat = np.zeros((R + 1, C + 1))
    sat[1:, 1:] = w.cumsum(0).cumsum(1)
    s = size
    mass = sat[s:, s:] - sat[:-s, s:] - sat[s:, :-s] + sat[:-s, :-s]          # [R-s+1, C-s+1]
    flat = mass[::-1].reshape(-1)
    i = int(flat.argmax())
    q0 = R - s - i // mass.shape[1]
    k0 = i % mass.shape[1]
    if mass.max() <= 0:                                                       # nothing but trivial attention
        q0, k0 = R - s, max(0, min(C - s, R - s))
    vv = np.where(np.isfinite(v), v, 0.0)
    rows = vv[q0 : q0 + s]
    tot = float(rows.sum())
    share = float(rows[:, k0 : k0 + s].sum() / tot) if tot > 0 else 0.0
    return int(q0), int(k0), share


#: px a grid keeps for the token labels left of its first column
GRID_LABELS_PX = 80


def grid_panel_size(columns: int, width: int = CONTENT_WIDTH, legend: bool = False, labels: bool = True) -> int:
    """The side of one grid panel so that ``columns`` panels (a shared legend, the first column's labels) fill
    ``width``."""
    gap = 20
    room = width - (90 if legend else 0) - (GRID_LABELS_PX if labels else 0) - gap * (columns - 1) - 10
    return int(max(120, min(440, room // max(columns, 1))))


def grid_chart(mats: list[np.ndarray], titles: list[str], labels: list[str], *, masked,
               kind: str = "pattern", scale: str = "linear", columns: int = 4, shared: bool = False,
               panel: int | None = None, names: list[str] | None = None,
               select: str | None = None) -> tuple[alt.VConcatChart, int]:
    """Small multiples of [T, S] matrices (per-cell marks when short, images when long).

    Each panel has its own colour range unless ``shared``; shared panels get one colour legend. ``names``
    (head names, default the titles) go into every panel's tooltips; ``select`` names a click selection
    (field ``head``) so that a click on a panel can open its head. ``panel``: the side of one panel,
    default :func:`grid_panel_size`. ``masked``: one [T, S] mask for every panel, a list of one per panel
    (panels of layers with different windows), or None. Returns (chart, k) with k the block size of the
    images (1 = one pixel per cell)."""
    T, S = mats[0].shape
    names = names or titles
    panel = panel or grid_panel_size(columns, legend=shared)
    charts, k = [], 1
    select = _param(select, ["head"]) if select else None       # one parameter, every panel
    masks = [masked] * len(mats) if masked is None or np.ndim(masked) == 2 else list(masked)
    shared_dom = colour_domain(np.stack(mats), None if masked is None else np.stack(masks), kind) if shared else None
    last_row = (len(mats) - 1) // columns
    for i, (m, masked, ttl, nm) in enumerate(zip(mats, masks, titles, names)):
        dom = shared_dom or colour_domain(m, masked, kind)
        leg = shared and i == 0                  # one legend for the shared scale
        sides = ("y" if i % columns == 0 else "") + ("x" if i // columns == last_row else "")   # the outer panels
        if T <= GRID_MARK_LIMIT and S <= GRID_MARK_LIMIT:
            c = cell_chart(m, labels, labels, masked=masked, kind=kind, scale=scale, title=ttl, size=panel,
                           domain=dom, axes=False, legend=leg, top=False, name=nm, select=select,
                           legend_length=min(240, panel), label_axes=sides)
        else:
            small, smask, k = block_max(m, masked, GRID_IMAGE_PX)
            c = image_chart(small, masked=smask, kind=kind, scale=scale, title=ttl, size=panel, domain=dom,
                            legend=leg, axes=False, top=False, labels=labels, name=nm, select=select,
                            blocks=GRID_TOOLTIP_BLOCKS, tip_values=m, tip_masked=masked,
                            legend_length=min(240, panel), label_axes=sides)
        charts.append(c)
    with warnings.catch_warnings():          # the one click parameter is meant to be shared by every panel
        warnings.filterwarnings("ignore", message="Automatically deduplicated selection parameter")
        rows = [alt.hconcat(*charts[i : i + columns], spacing=20) for i in range(0, len(charts), columns)]
        chart = alt.vconcat(*rows, spacing=16).resolve_scale(color="shared" if shared else "independent")
    return chart.properties(autosize=PAD), k


# ----------------------------------------------------------------------------- compare-heads charts

def head_overview_chart(df: pd.DataFrame, stat: str, *, text: bool = True, selected: list[str] | None = None,
                        select: str | None = None, label: str | None = None) -> alt.LayerChart:
    """Layer × head grid coloured by ``df[stat]`` (columns head, layer, head_index, stat); selected heads outlined.

    ``select``: the name of a click selection on the cells (field ``head``), for Streamlit's ``on_select``.
    """
    L = int(df["layer"].max()) + 1
    H = int(df["head_index"].max()) + 1
    d = df.copy()
    d["picked"] = d["head"].isin(selected or [])
    cell = max(22, min(46, 640 // max(H, 1)))
    base = alt.Chart(d).encode(
        x=alt.X("head_index:O", axis=discrete_axis(t("head"), [str(h) for h in range(H)], cell)),
        y=alt.Y("layer:O", axis=discrete_axis(t("layer"), [str(l) for l in range(L)], cell, x=False)))
    lo, hi = (float(d[stat].min()), float(d[stat].max())) if d[stat].notna().any() else (0.0, 1.0)
    rect = base.mark_rect().encode(
        color=alt.Color(f"{stat}:Q", scale=alt.Scale(scheme="viridis"), title=label or stat,
                        legend=colour_legend(label or stat, (lo, hi))),
        tooltip=[alt.Tooltip("head:N", title=t("head")), alt.Tooltip(f"{stat}:Q", format=".4f", title=label or stat)])
    if select:
        rect = rect.add_params(alt.selection_point(name=select, fields=["head"], on="click", clear=False))
    outline = base.transform_filter("datum.picked").mark_rect(fill=None, stroke="#ff2d55", strokeWidth=2.5)
    layers = [rect, outline]
    if text and cell >= MIN_TEXT_CELL:
        spread = float(d[stat].max() - d[stat].min()) if d[stat].notna().any() else 1.0
        fmt = ".3f" if spread < 0.05 else ".2f"
        layers.append(base.mark_text(fontSize=CELL_TEXT_PX).encode(
            text=alt.Text(f"{stat}:Q", format=fmt),
            color=alt.condition(f"datum['{stat}'] > {float(d[stat].median()) if d[stat].notna().any() else 0}",
                                alt.value("black"), alt.value("white"))))
    return alt.layer(*layers).properties(width=cell * H, height=cell * L, autosize=PAD)


def rank_chart(df: pd.DataFrame, top: int = 15, title: str = "", width: int = 260) -> alt.Chart:
    """Horizontal bars of the ``top`` heads of a :func:`attnkit.compare.rank_heads_for_pair` table."""
    d = df.head(top)
    return alt.Chart(d, title=title).mark_bar().encode(
        x=alt.X("weight:Q", title=t("attention weight"), scale=alt.Scale(domain=[0, max(1e-9, float(d["weight"].max()))])),
        y=alt.Y("head:N", sort=list(d["head"]), axis=discrete_axis(t("head"), list(d["head"]), 18, x=False)),
        color=alt.Color("layer:O", scale=alt.Scale(scheme="tableau10"), title=t("layer")),
        tooltip=[alt.Tooltip("head:N", title=t("head")), alt.Tooltip("weight:Q", format=".4f", title=t("weight")),
                 alt.Tooltip("rank_in_row:Q", title=t("rank in the row")), alt.Tooltip("top_key:N", title=t("top key"))],
    ).properties(width=width, height=max(160, 18 * len(d)), autosize=PAD)


def distance_chart(dist: np.ndarray, names: list[str], order: list[int], title: str = "") -> alt.Chart:
    """Heads × heads similarity (1 − JS distance) in the given order; bright = alike, as bright = more
    attention on the heatmaps (per-cell marks: meant for ≤ ~64 heads)."""
    D = np.asarray(dist)[np.ix_(order, order)]
    ordered = [names[i] for i in order]
    n = len(order)
    df = pd.DataFrame({"head A": np.repeat(ordered, n), "head B": np.tile(ordered, n),
                       "similarity": 1.0 - D.reshape(-1), "distance": D.reshape(-1)})
    side = max(200, min(640, 14 * n))
    top = float(D.max()) if n > 1 and D.max() > 0 else 1.0       # the colours span the similarities present
    return alt.Chart(df, title=title).mark_rect().encode(
        x=alt.X("head B:N", sort=ordered, axis=discrete_axis(None, ordered, side / n)),
        y=alt.Y("head A:N", sort=ordered, axis=discrete_axis(None, ordered, side / n, x=False)),
        color=alt.Color("similarity:Q", scale=alt.Scale(scheme="viridis", domain=[1 - top, 1]),
                        title=t("1 − JS distance"), legend=colour_legend(t("1 − JS distance"), (1 - top, 1))),
        tooltip=[alt.Tooltip("head A:N", title=t("head A")), alt.Tooltip("head B:N", title=t("head B")),
                 alt.Tooltip("similarity:Q", format=".3f", title=t("1 − JS distance")),
                 alt.Tooltip("distance:Q", format=".3f", title=t("JS distance"))],
    ).properties(width=side, height=side, autosize=PAD)


def distance_image(dist: np.ndarray, order: list[int], title: str = "", size: int = 560) -> alt.LayerChart:
    """Many heads: the ordered distance matrix as an image (axes are positions in the order)."""
    D = np.asarray(dist, dtype=np.float64)[np.ix_(order, order)]
    top = float(D.max()) if D.size > 1 and D.max() > 0 else 1.0
    idx = np.clip((1 - D / top) * 254 + 0.5, 0, 254).astype(np.uint8)    # similar = bright
    img = Image.frombytes("P", (D.shape[1], D.shape[0]), np.ascontiguousarray(idx).tobytes())
    img.putpalette(np.concatenate([lut(ANCHORS[SCHEMES["pattern"]], 255), np.zeros((1, 3), np.uint8)]).reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    n = D.shape[0]
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    pic = alt.Chart(alt.Data(values=[{"x": 0, "x2": n, "y": 0, "y2": n, "url": url}])).mark_image(aspect=False).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=[0, n], nice=False),
                axis=integer_axis(t("position in the similarity order"))),
        x2="x2:Q",
        y=alt.Y("y:Q", scale=alt.Scale(domain=[0, n], nice=False, reverse=True),
                axis=integer_axis(t("position in the similarity order"))),
        y2="y2:Q", url="url:N")
    key = alt.Chart(alt.Data(values=[{"d": 1.0 - top}, {"d": 1.0}])).mark_square(opacity=0).encode(
        color=alt.Color("d:Q", scale=alt.Scale(scheme="viridis", domain=[1.0 - top, 1.0]), title=t("1 − JS distance"),
                        legend=colour_legend(t("1 − JS distance"), (1.0 - top, 1.0))))
    return alt.layer(pic, key, title=title).properties(width=size, height=size, autosize=PAD)
