"""Attention heatmaps as Altair charts: one mark per cell for short windows, a PNG image for long ones.

Rows are query positions, columns key positions. Masked cells (a key after the query, which
the causal mask hides) are drawn in a flat grey, distinct from a visible weight of 0.

* :func:`cell_chart` — per-cell rectangles with token labels on both axes and tooltips;
  for at most :data:`MARK_LIMIT` rows/columns (a window of a longer matrix is fine).
* :func:`image_chart` — the whole matrix as one PNG (palette image, one pixel per cell,
  colours from the same scheme), for sequences up to the full context: the browser gets one
  image, not a million marks.
* :func:`grid_chart` — small multiples (a layer's heads, or one head through the layers).
"""
from __future__ import annotations

import base64
import io

import altair as alt
import numpy as np
import pandas as pd

__all__ = [
    "MARK_LIMIT", "GRID_MARK_LIMIT", "MASKED_COLOR", "causal_masked", "cells_frame", "cell_chart",
    "colour_domain", "to_png", "image_chart", "grid_chart", "block_max",
]

MARK_LIMIT = 64          # rows/columns drawn as one mark per cell (64² = 4,096 marks)
GRID_MARK_LIMIT = 24     # per panel in a grid of heads/layers
GRID_IMAGE_PX = 256      # a grid panel's image is at most this many pixels a side
MASKED_COLOR = "#c9c9c9"
# Sizes are the plot area's; axes and legends come on top ("pad"). Without this Streamlit fits the
# whole chart, axes and legend included, into the given width, and the cells shrink.
PAD = alt.AutoSizeParams(type="pad", contains="padding")
_SCHEME = {"pattern": "viridis", "scores": "redblue"}

# Anchor colours of Vega's schemes, interpolated linearly in RGB for the PNG images.
_VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
            "#b5de2b", "#fde725"]
_REDBLUE = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582",
            "#d6604d", "#b2182b", "#67001f"]   # blue (low) → red (high), like reversed "redblue"


def causal_masked(T: int, S: int | None = None, q0: int = 0, k0: int = 0, rows: int | None = None,
                  cols: int | None = None) -> np.ndarray:
    """[rows, cols] bool: True where key k0+c is after query q0+r (hidden by the causal mask).

    With S > T (a cache of S − T earlier positions) query i sits at absolute position S − T + i.
    """
    S = T if S is None else S
    rows = T - q0 if rows is None else rows
    cols = S - k0 if cols is None else cols
    qi = np.arange(q0, q0 + rows)[:, None] + (S - T)
    kj = np.arange(k0, k0 + cols)[None, :]
    return kj > qi


def _pad(top: bool) -> dict:
    return {"autosize": PAD} if top else {}


def _lut(stops: list[str], n: int = 256) -> np.ndarray:
    rgb = np.array([[int(s[i : i + 2], 16) for i in (1, 3, 5)] for s in stops], dtype=np.float64)
    x = np.linspace(0, 1, len(stops))
    t = np.linspace(0, 1, n)
    return np.stack([np.interp(t, x, rgb[:, c]) for c in range(3)], 1).round().astype(np.uint8)


def colour_domain(values: np.ndarray, masked: np.ndarray | None, kind: str) -> tuple[float, float]:
    """(low, high) of the colour scale from the visible cells: [0, max] for patterns,
    symmetric [−a, a] for scores (so 0 is the neutral colour).

    For patterns, rows with a single visible key (query 0 under the causal mask, always weight 1)
    are left out of the max, so that long prompts are not drawn against a range set by that one
    cell; larger values take the top colour.
    """
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


def _transform(x: np.ndarray, scale: str) -> np.ndarray:
    return np.sqrt(np.clip(x, 0, None)) if scale == "sqrt" else x


def to_png(values: np.ndarray, masked: np.ndarray | None, kind: str = "pattern",
           domain: tuple[float, float] | None = None, scale: str = "linear") -> bytes:
    """The matrix as a palette PNG, one pixel per cell; masked cells grey."""
    from PIL import Image

    values = np.asarray(values, dtype=np.float64)
    lo, hi = domain or colour_domain(values, masked, kind)
    if kind == "pattern":
        t = _transform(values - lo, scale) / (_transform(np.array(hi - lo), scale) or 1.0)
        stops = _VIRIDIS
    else:
        t = (values - lo) / ((hi - lo) or 1.0)
        stops = _REDBLUE
    idx = np.clip(np.nan_to_num(t, nan=0.0) * 254 + 0.5, 0, 254).astype(np.uint8)     # 0..254 colours
    if masked is not None:
        idx = np.where(masked, 255, idx).astype(np.uint8)                              # 255 = masked
    pal = _lut(stops, 255)
    grey = np.array([[int(MASKED_COLOR[i : i + 2], 16) for i in (1, 3, 5)]], dtype=np.uint8)
    img = Image.frombytes("P", (idx.shape[1], idx.shape[0]), np.ascontiguousarray(idx).tobytes())
    img.putpalette(np.concatenate([pal, grey]).reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _color(kind: str, domain: tuple[float, float], scale: str, title: str, legend: bool = True):
    if kind == "pattern":
        sc = alt.Scale(scheme="viridis", domain=list(domain), type="sqrt" if scale == "sqrt" else "linear", clamp=True)
    else:
        sc = alt.Scale(scheme="redblue", reverse=True, domain=list(domain), domainMid=0, clamp=True)
    return alt.Color("value:Q", scale=sc, title=title, legend=alt.Legend(gradientLength=160) if legend else None)


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


def cell_chart(values: np.ndarray, q_labels: list[str], k_labels: list[str], *, masked: np.ndarray | None = None,
               q0: int = 0, k0: int = 0, kind: str = "pattern", scale: str = "linear", title: str = "",
               size: int | None = None, domain: tuple[float, float] | None = None, axes: bool = True,
               legend: bool = True, top: bool = True) -> alt.Chart:
    """One rectangle per cell of the [R, C] block starting at (q0, k0); labels are the full label lists."""
    R, C = values.shape
    if R > MARK_LIMIT or C > MARK_LIMIT:
        raise ValueError(f"{R}×{C} cells: draw at most {MARK_LIMIT}×{MARK_LIMIT} as marks, use image_chart beyond")
    domain = domain or colour_domain(np.asarray(values), masked, kind)
    df = cells_frame(values, q_labels, k_labels, masked, q0, k0)[["query", "key", "value", "masked"]]
    df["value"] = df["value"].astype(np.float32)
    df["state"] = np.where(df["masked"], "masked (future key)", "visible")
    q_order = [q_labels[i] for i in range(q0, q0 + R)]
    k_order = [k_labels[j] for j in range(k0, k0 + C)]
    vname = "weight" if kind == "pattern" else "score (pre-softmax)"
    side = size or max(220, min(800, 16 * max(R, C)))
    step = side / max(R, C)
    # every label when the rows are tall enough to hold one (Vega would otherwise drop every other label)
    ax = {"axis": alt.Axis(labelOverlap=step < 11, labelFontSize=10 if step >= 11 else 9)} if axes else {"axis": None}
    return alt.Chart(df, title=title).mark_rect().encode(
        x=alt.X("key:N", sort=k_order, title="key (attended to)", **ax),
        y=alt.Y("query:N", sort=q_order, title="query (attending)", **ax),
        color=alt.condition("datum.masked", alt.value(MASKED_COLOR), _color(kind, domain, scale, vname, legend)),
        tooltip=[alt.Tooltip("query:N", title="query token"), alt.Tooltip("key:N", title="key token"),
                 alt.Tooltip("value:Q", title=vname, format=".4f"), alt.Tooltip("state:N", title="cell")],
    ).properties(width=side * C // max(R, C), height=side * R // max(R, C), **_pad(top))


def image_chart(values: np.ndarray, *, masked: np.ndarray | None = None, kind: str = "pattern",
                scale: str = "linear", title: str = "", size: int = 620, q0: int = 0, k0: int = 0,
                domain: tuple[float, float] | None = None, legend: bool = True, axes: bool = True,
                png: bytes | None = None, top: bool = True) -> alt.LayerChart:
    """The [R, C] matrix as one image, axes in token positions; a colour legend from an invisible layer."""
    R, C = values.shape
    domain = domain or colour_domain(np.asarray(values), masked, kind)
    png = png if png is not None else to_png(values, masked, kind, domain, scale)
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    ax_x = alt.Axis(title="key position") if axes else None
    ax_y = alt.Axis(title="query position") if axes else None
    img = alt.Chart(alt.Data(values=[{"x": k0, "x2": k0 + C, "y": q0, "y2": q0 + R, "url": url}])).mark_image(
        aspect=False).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=[k0, k0 + C], nice=False, zero=False), axis=ax_x),
        x2="x2:Q",
        y=alt.Y("y:Q", scale=alt.Scale(domain=[q0, q0 + R], nice=False, zero=False, reverse=True), axis=ax_y),
        y2="y2:Q",
        url="url:N",
    )
    h = int(size * R / max(R, C))
    w = int(size * C / max(R, C))
    layers = [img]
    if legend:
        vname = "weight" if kind == "pattern" else "score (pre-softmax)"
        key = alt.Chart(alt.Data(values=[{"value": domain[0]}, {"value": domain[1]}])).mark_point(opacity=0).encode(
            color=_color(kind, domain, scale, vname))
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


def grid_chart(mats: list[np.ndarray], titles: list[str], labels: list[str], *, masked: np.ndarray | None,
               kind: str = "pattern", scale: str = "linear", columns: int = 4, shared: bool = False,
               panel: int = 170) -> tuple[alt.VConcatChart, int]:
    """Small multiples of [T, S] matrices (per-cell marks when short, images when long).

    Each panel has its own colour range unless ``shared``. Returns (chart, k) with k the
    block size of the images (1 = one pixel per cell)."""
    T, S = mats[0].shape
    charts, k = [], 1
    shared_dom = colour_domain(np.stack(mats), None if masked is None else np.broadcast_to(masked, np.stack(mats).shape),
                               kind) if shared else None
    for m, t in zip(mats, titles):
        dom = shared_dom or colour_domain(m, masked, kind)
        if T <= GRID_MARK_LIMIT and S <= GRID_MARK_LIMIT:
            c = cell_chart(m, labels, labels, masked=masked, kind=kind, scale=scale, title=t, size=panel,
                           domain=dom, axes=False, legend=False, top=False)
        else:
            small, smask, k = block_max(m, masked, GRID_IMAGE_PX)
            c = image_chart(small, masked=smask, kind=kind, scale=scale, title=t, size=panel, domain=dom,
                            legend=False, axes=False, top=False)
        charts.append(c)
    rows = [alt.hconcat(*charts[i : i + columns]) for i in range(0, len(charts), columns)]
    chart = alt.vconcat(*rows).resolve_scale(color="shared" if shared else "independent").properties(autosize=PAD)
    return chart, k


# ----------------------------------------------------------------------------- compare-heads charts

def head_overview_chart(df: pd.DataFrame, stat: str, *, text: bool = True, selected: list[str] | None = None,
                        select: str | None = None) -> alt.LayerChart:
    """Layer × head grid coloured by ``df[stat]`` (columns head, layer, head_index, stat); selected heads outlined.

    ``select``: the name of a click selection on the cells (field ``head``), for Streamlit's ``on_select``.
    """
    L = int(df["layer"].max()) + 1
    H = int(df["head_index"].max()) + 1
    d = df.copy()
    d["picked"] = d["head"].isin(selected or [])
    cell = max(22, min(46, 640 // max(H, 1)))
    base = alt.Chart(d).encode(
        x=alt.X("head_index:O", title="head"), y=alt.Y("layer:O", title="layer"))
    rect = base.mark_rect().encode(
        color=alt.Color(f"{stat}:Q", scale=alt.Scale(scheme="viridis"), title=stat),
        tooltip=[alt.Tooltip("head:N", title="head (layer.head)"), alt.Tooltip(f"{stat}:Q", format=".4f")])
    if select:
        rect = rect.add_params(alt.selection_point(name=select, fields=["head"], on="click", clear=False))
    outline = base.transform_filter("datum.picked").mark_rect(fill=None, stroke="#ff2d55", strokeWidth=2.5)
    layers = [rect, outline]
    if text and L * H <= 200:
        spread = float(d[stat].max() - d[stat].min()) if d[stat].notna().any() else 1.0
        fmt = ".3f" if spread < 0.05 else ".2f"
        layers.append(base.mark_text(fontSize=9).encode(
            text=alt.Text(f"{stat}:Q", format=fmt),
            color=alt.condition(f"datum['{stat}'] > {float(d[stat].median()) if d[stat].notna().any() else 0}",
                                alt.value("black"), alt.value("white"))))
    return alt.layer(*layers).properties(width=cell * H, height=cell * L, autosize=PAD)


def rank_chart(df: pd.DataFrame, top: int = 15, title: str = "") -> alt.Chart:
    """Horizontal bars of the ``top`` heads of a :func:`attnkit.compare.rank_heads_for_pair` table."""
    d = df.head(top)
    return alt.Chart(d, title=title).mark_bar().encode(
        x=alt.X("weight:Q", title="attention weight", scale=alt.Scale(domain=[0, max(1e-9, float(d["weight"].max()))])),
        y=alt.Y("head:N", sort=list(d["head"]), title="head (layer.head)", axis=alt.Axis(labelOverlap=False)),
        color=alt.Color("layer:O", scale=alt.Scale(scheme="tableau10")),
        tooltip=["head", alt.Tooltip("weight:Q", format=".4f"), "rank_in_row", "top_key"],
    ).properties(width=420, height=max(160, 18 * len(d)), autosize=PAD)


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
        x=alt.X("head B:N", sort=ordered, title=None), y=alt.Y("head A:N", sort=ordered, title=None),
        color=alt.Color("similarity:Q", scale=alt.Scale(scheme="viridis", domain=[1 - top, 1]),
                        title="1 − JS distance"),
        tooltip=["head A", "head B", alt.Tooltip("similarity:Q", format=".3f", title="1 − JS distance"),
                 alt.Tooltip("distance:Q", format=".3f", title="JS distance")],
    ).properties(width=side, height=side, autosize=PAD)


def distance_image(dist: np.ndarray, order: list[int], title: str = "", size: int = 560) -> alt.LayerChart:
    """Many heads: the ordered distance matrix as an image (axes are positions in the order)."""
    D = np.asarray(dist, dtype=np.float64)[np.ix_(order, order)]
    from PIL import Image

    top = float(D.max()) if D.size > 1 and D.max() > 0 else 1.0
    idx = np.clip((1 - D / top) * 254 + 0.5, 0, 254).astype(np.uint8)    # similar = bright
    img = Image.frombytes("P", (D.shape[1], D.shape[0]), np.ascontiguousarray(idx).tobytes())
    img.putpalette(np.concatenate([_lut(_VIRIDIS, 255), np.zeros((1, 3), np.uint8)]).reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    n = D.shape[0]
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    pic = alt.Chart(alt.Data(values=[{"x": 0, "x2": n, "y": 0, "y2": n, "url": url}])).mark_image(aspect=False).encode(
        x=alt.X("x:Q", scale=alt.Scale(domain=[0, n], nice=False), title="position in the similarity order"),
        x2="x2:Q",
        y=alt.Y("y:Q", scale=alt.Scale(domain=[0, n], nice=False, reverse=True), title="position in the similarity order"),
        y2="y2:Q", url="url:N")
    key = alt.Chart(alt.Data(values=[{"d": 1.0 - top}, {"d": 1.0}])).mark_point(opacity=0).encode(
        color=alt.Color("d:Q", scale=alt.Scale(scheme="viridis", domain=[1.0 - top, 1.0]), title="1 − JS distance"))
    return alt.layer(pic, key, title=title).properties(width=size, height=size, autosize=PAD)
