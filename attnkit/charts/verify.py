"""The verification chart: max |Δ| between attnkit and HuggingFace per layer and quantity (Altair)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from ..verify import QUANTITIES

__all__ = ["verify_chart", "LOG_FLOOR", "plotted"]

#: Differences of exactly 0 cannot sit on a log axis; they are drawn at this floor.
LOG_FLOOR = 1e-12
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")


def plotted(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`attnkit.verify.checks` with the column the log axis draws (0 → LOG_FLOOR)."""
    return df.assign(plotted=df["max |Δ|"].clip(lower=LOG_FLOOR))


def verify_chart(df: pd.DataFrame, title: str = "attnkit vs HuggingFace") -> alt.Chart:
    """Log-scale max |Δ| per layer and quantity (rows of :func:`attnkit.verify.checks`), each tolerance dashed."""
    df = plotted(df)
    order = [str(l) for l in sorted({int(x) for x in df["layer"] if x != "final"})] + ["final"]
    colors = alt.Scale(domain=list(QUANTITIES.values()), range=["#1f77b4", "#ff7f0e", "#d62728", "#2ca02c"])
    shape = alt.Shape("run:N", title="device") if df["run"].nunique() > 1 else alt.value("circle")
    points = alt.Chart(df).mark_point(filled=True, size=70).encode(
        x=alt.X("layer:N", sort=order, title="layer", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("plotted:Q", scale=alt.Scale(type="log"), title=f"max |Δ| (0 drawn at {LOG_FLOOR:g})",
                axis=alt.Axis(format="~e")),
        color=alt.Color("quantity:N", scale=colors, title=None),
        shape=shape,
        tooltip=["run:N", "layer:N", "quantity:N", alt.Tooltip("max |Δ|:Q", format=".3e"),
                 alt.Tooltip("tolerance:Q", format=".0e"), "ok:N"],
    )
    # one dashed line per tolerance value, labelled with the quantities it bounds
    tol = (df.drop_duplicates("quantity").groupby("tolerance")["quantity"]
           .apply(lambda q: "tolerance " + ", ".join(q)).reset_index(name="label"))
    tol["label"] = [f"{l} ≤ {t:g}" for l, t in zip(tol["label"], tol["tolerance"])]
    rule_base = alt.Chart(tol).encode(y="tolerance:Q")
    rules = rule_base.mark_rule(strokeDash=[6, 4], color="#555").encode(
        tooltip=[alt.Tooltip("label:N", title="tolerance")])
    labels = rule_base.mark_text(align="left", dx=4, dy=-6, fontSize=10, color="#555").encode(
        text="label:N", x=alt.value(0))
    return alt.layer(rules, labels, points, title=title).properties(width="container", height=320, autosize=FIT_X)
