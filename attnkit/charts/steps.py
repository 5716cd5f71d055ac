"""Charts for the step-by-step and verification pages (Altair, no Streamlit)."""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd
import torch

from ..i18n import t
from .axes import colour_legend, discrete_axis, integer_axis

__all__ = ["matrix_frame", "matrix_chart", "weights_chart", "kv_rows_chart", "MAX_CELLS", "visible_count",
           "visible_header", "mask_formula", "mask_row_caption"]

#: Largest matrix drawn one mark per cell (larger ones are windowed by the page).
MAX_CELLS = 64 * 64
#: Fixed-size charts keep their size in Streamlit (its default autosize would shrink them to fit).
PAD = alt.AutoSizeParams(type="pad", contains="padding")
#: Container-wide charts: fill the width, keep the height asked for.
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")


def _fmt(v: float, digits: int) -> str:
    if math.isinf(v):
        return "−∞" if v < 0 else "∞"
    return f"{v:.{digits}f}"


def matrix_frame(M, rows: list[str] | None = None, cols: list[str] | None = None, digits: int = 3) -> pd.DataFrame:
    """Long form of a matrix: row, col, value (None for ±∞), text, plus the row/column order."""
    a = M.detach().double().cpu().numpy() if isinstance(M, torch.Tensor) else np.asarray(M, dtype=float)
    R, C = a.shape
    rows = rows or [str(i) for i in range(R)]
    cols = cols or [str(j) for j in range(C)]
    recs = []
    for i in range(R):
        for j in range(C):
            v = float(a[i, j])
            recs.append({"row": rows[i], "col": cols[j], "i": i, "j": j,
                         "value": v if math.isfinite(v) else None, "text": _fmt(v, digits)})
    return pd.DataFrame(recs)


def matrix_chart(M, rows: list[str] | None = None, cols: list[str] | None = None, title: str = "",
                 digits: int = 3, text: bool = True, scheme: str = "blues", size: int = 36,
                 diverging: bool = False, *, row_title: str | None = None, col_title: str | None = None,
                 value_title: str | None = None, legend: str | None = "right") -> alt.LayerChart:
    """Heatmap of a small matrix with the numbers written in the cells (−∞ cells grey).

    Rows are queries and columns keys unless ``row_title`` / ``col_title`` say what they are (X's columns are
    dimensions); ``value_title`` names the colour (default "value"); ``legend``: "right", "bottom" (a row of
    three squares, for matrices side by side in narrow columns) or None."""
    df = matrix_frame(M, rows, cols, digits)
    R, C = df["i"].max() + 1, df["j"].max() + 1
    if R * C > MAX_CELLS:
        raise ValueError(f"{R}×{C} is too large to draw cell by cell (max {MAX_CELLS} cells)")
    row_order = list(dict.fromkeys(df["row"]))
    col_order = list(dict.fromkeys(df["col"]))
    finite = df["value"].dropna()
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
    if diverging and len(finite):
        m = float(finite.abs().max()) or 1.0
        scale, shown = alt.Scale(scheme="redblue", domain=[-m, m], reverse=True), (-m, m)
    else:
        scale, shown = alt.Scale(scheme=scheme), (lo, hi)
    rt, ct, vt = row_title or t("query"), col_title or t("key"), value_title or t("value")
    side = legend in ("top", "bottom")
    key = colour_legend(vt, shown, n=3 if side else 5, orient=legend) if legend else None
    base = alt.Chart(df, title=str(title)).encode(
        x=alt.X("col:N", sort=col_order, axis=discrete_axis(ct, col_order, size)),
        y=alt.Y("row:N", sort=row_order, axis=discrete_axis(rt, row_order, size, x=False)),
    )
    cells = base.mark_rect(invalid=None).encode(
        color=alt.condition("!isValid(datum.value)", alt.value("#d9d9d9"),
                            alt.Color("value:Q", scale=scale, title=vt, legend=key)),
        tooltip=[alt.Tooltip("row:N", title=rt), alt.Tooltip("col:N", title=ct), alt.Tooltip("text:N", title=vt)],
    )
    layers = [cells]
    if text:
        # white digits on the dark end of the scale
        if diverging:
            cut = f"isValid(datum.value) && abs(datum.value) > {0.6 * max(abs(lo), abs(hi))}"
        else:
            cut = f"isValid(datum.value) && datum.value > {lo + 0.6 * (hi - lo)}"
        layers.append(base.mark_text(fontSize=11).encode(
            text="text:N", color=alt.condition(cut, alt.value("white"), alt.value("black"))))
    return alt.layer(*layers).properties(width=max(120, size * C), height=max(80, size * R), autosize=PAD)


def weights_chart(df: pd.DataFrame, query: int, title: str = "") -> alt.Chart:
    """The softmax weight of every visible key (bars up to 256 keys, a line beyond)."""
    n = len(df)
    tooltip = [alt.Tooltip("position:Q", title=t("position"))] + (
        [alt.Tooltip("token:N", title=t("token"))] if "token" in df else []) + [
        alt.Tooltip("weight:Q", format=".4f", title=t("weight")), alt.Tooltip("q·k·scale:Q", format=".4f", title=t("q·k·scale"))]
    base = alt.Chart(df[[c for c in ("position", "token", "weight", "q·k·scale") if c in df]], title=str(title))
    x = alt.X("position:Q", scale=alt.Scale(domain=[-0.5, n - 0.5]),
              axis=integer_axis(t("key position (query {query})", query=query)))
    mark = base.mark_bar(size=max(1, min(20, 600 // max(n, 1)))) if n <= 256 else base.mark_area(opacity=0.7)
    return mark.encode(x=x, y=alt.Y("weight:Q", title=t("softmax weight")), tooltip=tooltip).properties(
        width="container", height=180, autosize=FIT_X)


def kv_rows_chart(steps: pd.DataFrame) -> alt.Chart:
    """At each decoding step, which K/V rows the cached run reuses and which it computes."""
    recs, reused, computed = [], t("reused from the cache"), t("computed this step")
    for _, r in steps.iterrows():
        s, L, fed = int(r["step"]), int(r["predicts position"]), int(r["fed (cache)"])
        if L - fed > 0:
            recs.append({"step": s, "from": 0, "to": L - fed, "rows": reused, "range": f"0..{L - fed - 1}"})
        recs.append({"step": s, "from": L - fed, "to": L, "rows": computed, "range": f"{L - fed}..{L - 1}"})
    df = pd.DataFrame(recs)
    return alt.Chart(df, title=t("K/V rows per step (with the cache)")).mark_bar(height=12).encode(
        x=alt.X("from:Q", axis=integer_axis(t("K/V row (position)"))), x2="to:Q",
        y=alt.Y("step:O", axis=discrete_axis(t("step"), [str(s) for s in steps["step"]], 22, x=False)),
        color=alt.Color("rows:N", scale=alt.Scale(domain=[reused, computed], range=["#9ecae1", "#e6550d"]),
                        title=t("K/V rows"), legend=alt.Legend(labelLimit=0)),
        tooltip=[alt.Tooltip("step:O", title=t("step")), alt.Tooltip("rows:N", title=t("rows")),
                 alt.Tooltip("range:N", title=t("range"))],
    ).properties(width="container", height=max(80, 22 * len(steps)), autosize=FIT_X)


# ----------------------------------------------------------------------------- the mask, in words

def visible_count(query: int, window: int | None) -> int:
    """n_vis: the keys query ``query`` sees — itself and the earlier ones, the last ``window`` of them when
    the layer has a local window (attention.causal_mask hides j > query and j ≤ query − window)."""
    return query + 1 if window is None else min(query + 1, window)


def visible_header(query: int, T: int, window: int | None) -> str:
    """"n visible key(s), m masked", with the window's formula when the layer has one."""
    n_vis = visible_count(query, window)
    future = T - query - 1
    if window is None:
        return t("{n} visible key(s), {future} future key(s) masked", n=f"{n_vis:,}", future=f"{future:,}")
    return t("{n} visible key(s) (n_vis = min(query+1, w) = min({q1}, {w}): this layer's local window is w = {w}), "
             "{future} future key(s) and {out} key(s) outside the window masked", n=f"{n_vis:,}", q1=query + 1,
             w=window, future=f"{future:,}", out=f"{query + 1 - n_vis:,}")


def mask_formula(query: int, window: int | None) -> str:
    """M_j, the mask row of query ``query``, as a formula."""
    if window is None:
        return t("M_j = 0 for j ≤ {q}, −∞ for j > {q}", q=query)
    return t("M_j = 0 for {lo} ≤ j ≤ {q}, M_j = −∞ for j > query or j ≤ query − w (j > {q} or j ≤ {out}, w = {w})",
             lo=max(0, query - window + 1), q=query, out=query - window, w=window)


def mask_row_caption(query: int, T: int, window: int | None) -> str:
    """The caption under the mask row around the query."""
    n_vis = visible_count(query, window)
    lo = query + 1 - n_vis
    hidden = []
    if lo > 0:
        hidden.append(t("the {n} key(s) 0..{last} outside the local window of {w}", n=f"{lo:,}", last=lo - 1, w=window))
    if T > query + 1:
        hidden.append(t("the {n} future key(s)", n=f"{T - query - 1:,}"))
    if not hidden:
        return t("The mask row around the query: 0 on keys {lo}..{query}; the query is the last token, so no key lies in "
                 "its future.", lo=lo, query=query)
    return t("The mask row around the query: 0 on keys {lo}..{query}, −∞ on {hidden} (all in the CSV), which softmax "
             "turns into weights of exactly 0.", lo=lo, query=query, hidden=t(" and ").join(hidden))
