"""The verification chart: per layer and quantity, attnkit's and HuggingFace's own float32 error
against HuggingFace in float64, and the bound attnkit must stay under (Altair, log scale)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from ..i18n import msg, t
from .axes import discrete_axis


__all__ = ["verify_chart", "LOG_FLOOR", "plotted", "WHO", "SHORT", "DASH"]

#: Errors of exactly 0 cannot sit on a log axis; they are drawn at this floor.
LOG_FLOOR = 1e-16
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")
#: The plotted series: rows of :func:`attnkit.verify.checks` column -> legend name.
WHO = {"attnkit error": "attnkit float32", "HF error": "HuggingFace float32", "allowed": msg("allowed for attnkit"),
       "float64 |Δ|": "attnkit float64"}


def plotted(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`attnkit.verify.checks` in long form (one row per series), with the column the log axis
    draws (0 → LOG_FLOOR)."""
    long = df.melt(id_vars=["run", "layer", "quantity", "ok"], value_vars=list(WHO), var_name="series",
                   value_name="error")
    long["series"] = long["series"].map({k: str(v) for k, v in WHO.items()})
    return long.assign(plotted=long["error"].clip(lower=LOG_FLOOR))


SHORT = {"attention pattern": msg("pattern"), "hidden state (relative)": msg("hidden"),
         "final norm (relative)": msg("norm"), "logits (relative)": msg("logits"),
         "generation step logits (relative)": msg("step logits")}
#: A short horizontal bar (an SVG path in Vega's unit square): the bound, drawn as a dash in the plot and the legend.
DASH = "M-1,-0.22L1,-0.22L1,0.22L-1,0.22Z"


def verify_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Log-scale error per layer and quantity: attnkit's and HF's float32 errors, the bound attnkit must
    stay under, and attnkit's float64 difference (rows of :func:`attnkit.verify.checks`)."""
    title = t("error against HuggingFace in float64") if title is None else title
    long = plotted(df)
    long["where"] = [f"{l} {SHORT.get(q, q)}" if l not in ("final", "generation") else str(SHORT.get(q, q))
                     for l, q in zip(long["layer"], long["quantity"])]
    order = list(dict.fromkeys(long["where"]))
    series = [str(v) for v in WHO.values()]
    shapes = alt.Scale(domain=series, range=["circle", "square", DASH, "cross"])
    colors = alt.Scale(domain=series, range=["#1f77b4", "#ff7f0e", "#555555", "#2ca02c"])
    return alt.Chart(long, title=title).mark_point(size=90, filled=True).encode(
        x=alt.X("where:N", sort=order, axis=discrete_axis(t("layer and quantity"), order, 24, angle=-45)),
        y=alt.Y("plotted:Q", scale=alt.Scale(type="log"), title=t("error (0 drawn at {floor})", floor=f"{LOG_FLOOR:g}"),
                axis=alt.Axis(format="~e")),
        color=alt.Color("series:N", scale=colors, title=t("series"), legend=alt.Legend(labelLimit=0, symbolSize=120)),
        shape=alt.Shape("series:N", scale=shapes, title=t("series")),
        tooltip=[alt.Tooltip("run:N", title=t("run")), alt.Tooltip("layer:N", title=t("layer")),
                 alt.Tooltip("quantity:N", title=t("quantity")), alt.Tooltip("series:N", title=t("series")),
                 alt.Tooltip("error:Q", format=".3e", title=t("error")), alt.Tooltip("ok:N", title=t("passes"))],
    ).properties(width="container", height=320, autosize=FIT_X)
