"""The verification chart: per layer and quantity, attnkit's and HuggingFace's own float32 error
against HuggingFace in float64, and the bound attnkit must stay under (Altair, log scale)."""
from __future__ import annotations

import altair as alt
import pandas as pd


__all__ = ["verify_chart", "LOG_FLOOR", "plotted", "WHO", "SHORT"]

#: Errors of exactly 0 cannot sit on a log axis; they are drawn at this floor.
LOG_FLOOR = 1e-16
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")
#: The plotted series: rows of :func:`attnkit.verify.checks` column -> legend name.
WHO = {"attnkit error": "attnkit float32", "HF error": "HuggingFace float32", "allowed": "allowed for attnkit",
       "float64 |Δ|": "attnkit float64"}


def plotted(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`attnkit.verify.checks` in long form (one row per series), with the column the log axis
    draws (0 → LOG_FLOOR)."""
    long = df.melt(id_vars=["run", "layer", "quantity", "ok"], value_vars=list(WHO), var_name="series",
                   value_name="error")
    long["series"] = long["series"].map(WHO)
    return long.assign(plotted=long["error"].clip(lower=LOG_FLOOR))


SHORT = {"attention pattern": "pattern", "hidden state (relative)": "hidden", "final norm (relative)": "norm",
         "logits (relative)": "logits", "generation step logits (relative)": "step logits"}


def verify_chart(df: pd.DataFrame, title: str = "error against HuggingFace in float64") -> alt.Chart:
    """Log-scale error per layer and quantity: attnkit's and HF's float32 errors, the bound attnkit must
    stay under, and attnkit's float64 difference (rows of :func:`attnkit.verify.checks`)."""
    long = plotted(df)
    long["where"] = [f"{l} {SHORT.get(q, q)}" if l not in ("final", "generation") else SHORT.get(q, q)
                     for l, q in zip(long["layer"], long["quantity"])]
    order = list(dict.fromkeys(long["where"]))
    shapes = alt.Scale(domain=list(WHO.values()), range=["circle", "square", "stroke", "cross"])
    colors = alt.Scale(domain=list(WHO.values()), range=["#1f77b4", "#ff7f0e", "#555555", "#2ca02c"])
    return alt.Chart(long, title=title).mark_point(size=90, filled=True).encode(
        x=alt.X("where:N", sort=order, title="layer and quantity", axis=alt.Axis(labelAngle=-45)),
        y=alt.Y("plotted:Q", scale=alt.Scale(type="log"), title=f"error (0 drawn at {LOG_FLOOR:g})",
                axis=alt.Axis(format="~e")),
        color=alt.Color("series:N", scale=colors, title=None),
        shape=alt.Shape("series:N", scale=shapes, title=None),
        tooltip=["run:N", "layer:N", "quantity:N", "series:N", alt.Tooltip("error:Q", format=".3e"), "ok:N"],
    ).properties(width="container", height=320, autosize=FIT_X)
