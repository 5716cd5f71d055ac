"""Altair charts for the entropy page: curves against context length, the slope map, the comparison
with the log-length intervention. Inputs are the long tables of :mod:`attnkit.entropy`."""
from __future__ import annotations

import altair as alt
import pandas as pd

from ..i18n import t
from .axes import colour_legend, discrete_axis, integer_axis
from .heatmaps import CELL_TEXT_PX

__all__ = ["curves", "slope_map", "compare", "loss_bins"]


def _small(df: pd.DataFrame, digits: int = 5, drop=("position", "bound")) -> pd.DataFrame:
    """Only the columns drawn, floats rounded (the CSV export keeps everything): a smaller chart spec."""
    out = df.drop(columns=[c for c in drop if c in df.columns])
    for c in out.select_dtypes("float").columns:
        out[c] = out[c].round(digits)
    return out


def _layer_scale(df: pd.DataFrame):
    """Distinct colours for a few layers, a sequential scheme (depth order) for many."""
    return alt.Scale(scheme="tableau10" if df["layer"].nunique() <= 10 else "viridis")


def _x(log_x: bool, df: pd.DataFrame | None = None):
    dom = {} if df is None or df.empty else {"domain": [int(df["n"].min()), int(df["n"].max())], "nice": False}
    return alt.X("n:Q", axis=integer_axis(t("context length n = i + 1 (keys visible to query i)")),
                 scale=alt.Scale(type="log", **dom) if log_x else alt.Scale(zero=False, **dom))


def bound_curves(df: pd.DataFrame) -> pd.DataFrame:
    """(n, bound, curve): one curve per distinct bound — ln n for causal layers, ln min(n, w) for each window w."""
    parts, seen = [], set()
    for _, g in df.drop_duplicates(["layer", "n"]).groupby("layer", sort=True):
        key = tuple(g["bound"].round(9))
        if key not in seen:
            seen.add(key)
            parts.append(g[["n", "bound"]].assign(curve=len(parts)))
    return pd.concat(parts, ignore_index=True) if parts else df[["n", "bound"]].assign(curve=0)


def curves(df: pd.DataFrame, y_title: str, bound: str | None = "", log_x: bool = True,
           band: bool = True, height: int = 320) -> alt.LayerChart:
    """One line per layer (mean over documents), a band of ± 1 std, and the bound as a dashed line
    (``bound``: its name, "" for ln n, None for none)."""
    bound = t("ln(n) (uniform attention)") if bound == "" else bound
    color = alt.Color("layer:O", title=t("layer"), scale=_layer_scale(df))
    spread = (alt.Tooltip("std:Q", format=".4f", title=t("std across docs")) if "std" in df else
              alt.Tooltip("lo:Q", format=".4f", title=t("95 % low")))
    tips = [alt.Tooltip("layer:O", title=t("layer")), alt.Tooltip("position:Q", title=t("position i = n − 1")),
            alt.Tooltip("n:Q"), alt.Tooltip("mean:Q", format=".4f", title=t("mean")), spread,
            alt.Tooltip("docs:Q", title=t("documents"))]
    if "std" not in df:                  # a corpus result: the band is its bootstrap interval
        tips.insert(5, alt.Tooltip("hi:Q", format=".4f", title=t("95 % high")))
    base = alt.Chart(_small(df))
    layers = []
    if band and (df["std"].notna().any() if "std" in df else df["lo"].notna().any()):
        layers.append(base.mark_area(opacity=0.15).encode(
            x=_x(log_x, df), y="lo:Q", y2="hi:Q", color=alt.Color("layer:O", scale=_layer_scale(df), legend=None)))
    layers.append(base.transform_calculate(position="datum.n - 1").mark_line(
        point=alt.OverlayMarkDef(size=12, opacity=0.6)).encode(
        x=_x(log_x, df), y=alt.Y("mean:Q", title=y_title), color=color, tooltip=tips))
    if bound:
        b = bound_curves(df).assign(what=bound)
        layers.append(alt.Chart(b).mark_line(strokeDash=[6, 4], color="black").encode(
            x=_x(log_x, df), y="bound:Q", detail="curve:N", tooltip=[alt.Tooltip("what:N", title=t("curve")), alt.Tooltip("n:Q"),
                                               alt.Tooltip("bound:Q", format=".4f", title=t("bound"))]))
    return alt.layer(*layers).properties(height=height).interactive(bind_y=False)


def slope_map(df: pd.DataFrame, height: int = 320) -> alt.LayerChart:
    """Layer × head cells coloured by the slope of entropy against ln(i+1) (0 = fixed focus, 1 = uniform)."""
    lim = max(1.0, float(df["slope"].abs().max(skipna=True) or 1.0))
    n_layers, n_heads = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
    base = alt.Chart(df).encode(
        x=alt.X("head:O", axis=discrete_axis(t("head"), [str(h) for h in range(n_heads)], 20)),
        y=alt.Y("layer:O", axis=discrete_axis(t("layer"), [str(l) for l in range(n_layers)], height / n_layers, x=False)))
    rect = base.mark_rect().encode(
        color=alt.Color("slope:Q", title="dH / d ln(i+1)", scale=alt.Scale(scheme="redblue", domain=[-lim, lim],
                                                                         reverse=True),
                        legend=colour_legend("dH / d ln(i+1)", (-lim, lim))),
        tooltip=[alt.Tooltip("layer:O", title=t("layer")), alt.Tooltip("head:O", title=t("head")),
                 alt.Tooltip("slope:Q", format=".3f", title=t("slope")),
                 alt.Tooltip("intercept:Q", format=".3f", title=t("intercept")),
                 alt.Tooltip("r2:Q", format=".3f", title="r²")])
    text = base.mark_text(fontSize=CELL_TEXT_PX).encode(
        text=alt.Text("slope:Q", format=".2f"),
        color=alt.condition(f"abs(datum.slope) > {0.6 * lim}", alt.value("white"), alt.value("black")))
    # the chart fills the page's width (≥ ~800 px): numbers only where a cell has room for "−0.12" at 11 px
    fits = n_heads <= 20 and height / n_layers >= CELL_TEXT_PX + 4
    return alt.layer(*([rect, text] if fits else [rect])).properties(height=height)


def compare(df: pd.DataFrame, y_title: str | None = None, log_x: bool = True, height: int = 320) -> alt.LayerChart:
    """Entropy curves with (dashed) and without (solid) the log-length intervention, one colour per layer."""
    y_title = t("entropy (nats)") if y_title is None else y_title
    color = alt.Color("layer:O", scale=_layer_scale(df), title=t("layer"))
    variants = {"unmodified": t("unmodified"), "log-length": t("log-length")}
    shown = _small(df, drop=("position", "bound", "std", "lo", "hi", "docs"))
    shown["variant"] = shown["variant"].map(lambda v: variants.get(v, v))
    lines = alt.Chart(shown).mark_line().encode(
        x=_x(log_x, df), y=alt.Y("mean:Q", title=y_title), color=color,
        strokeDash=alt.StrokeDash("variant:N", title=t("model"), sort=list(variants.values())),
        tooltip=[alt.Tooltip("variant:N", title=t("model")), alt.Tooltip("layer:O", title=t("layer")),
                 alt.Tooltip("n:Q"), alt.Tooltip("mean:Q", format=".4f", title=t("mean"))])
    b = bound_curves(df)
    bound = alt.Chart(b).mark_line(color="gray", opacity=0.6).encode(
        x=_x(log_x, df), y="bound:Q", detail="curve:N", tooltip=[alt.Tooltip("n:Q"), alt.Tooltip("bound:Q", format=".4f", title="ln n")])
    return alt.layer(bound, lines).properties(height=height).interactive(bind_y=False)


def loss_bins(df: pd.DataFrame, height: int = 260) -> alt.Chart:
    """Change of the next-token loss with the intervention, per bin of context length (bars; red = worse)."""
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("bin:N", sort=alt.SortField("n_from"), axis=discrete_axis(t("context length n (bins)"),
                                                                          list(df["bin"]), 40)),
        y=alt.Y("change:Q", title=t("loss change (nats/token)")),
        color=alt.condition("datum.change > 0", alt.value("#c0392b"), alt.value("#2471a3")),
        tooltip=[alt.Tooltip("bin:N", title=t("bin")), alt.Tooltip("unmodified:Q", format=".4f", title=t("unmodified")),
                 alt.Tooltip("log-length:Q", format=".4f", title=t("log-length")),
                 alt.Tooltip("change:Q", format="+.4f", title=t("change")),
                 alt.Tooltip("tokens:Q", title=t("tokens"))]).properties(height=height)
