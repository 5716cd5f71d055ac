"""The head atlas's charts (Altair, no Streamlit): every head as a point on two statistics, and one head's
queries and keys in 2-D. The atlas's offline HTML file embeds these very specs; the Atlas page and notebooks
draw them from :meth:`attnkit.atlas_result.AtlasResult.chart`."""
from __future__ import annotations


import altair as alt
import pandas as pd

from ..atlas import LABEL_NAMES, LABELS, NO_FIRST, ROLE_NAMES
from ..i18n import t

__all__ = ["VERDICT_COLOURS", "axis_title", "scatter_frame", "scatter", "qk_chart", "SELECT"]

#: One colour a verdict, in LABELS' order: both, pattern only (the warning), effect only, neither.
VERDICT_COLOURS = ["#2ca02c", "#ff7f0e", "#1f77b4", "#c7c7c7"]
#: The name of the scatter's click selection (a page or the HTML file reads the clicked head from it).
SELECT = "pick"


def axis_title(column: str) -> str:
    """A statistic's column (``induction``, ``previous-token (no position 0)``, ``effect``) in the reader's language."""
    if column == "effect":
        return t("effect of removing the head (nats/token)")
    base, no_first = (column[: -len(NO_FIRST)], True) if column.endswith(NO_FIRST) else (column, False)
    name = str(ROLE_NAMES.get(base, base))
    return name + " " + t("(no position 0)") if no_first else name


def scatter_frame(df: pd.DataFrame, role: str) -> pd.DataFrame:
    """The rows of :meth:`AtlasResult.to_pandas` with ``verdict`` = the verdict of ``role``."""
    out = df.copy()
    col = f"verdict: {role}"
    out["verdict"] = out[col] if col in out else "neither"
    return out


def scatter(frame: pd.DataFrame, x: str, y: str, color: str = "verdict") -> alt.Chart:
    """Every head as a point at (x, y); colour by ``verdict`` (of the frame's role) or ``layer``; a click selects
    a head (selection :data:`SELECT`, field ``head``)."""
    pick = alt.selection_point(name=SELECT, fields=["head"], on="click", empty=False)
    if color == "layer":
        colour = alt.Color("layer:O", title=t("layer"), scale=alt.Scale(scheme="viridis"))
    else:
        colour = alt.Color("shown:N", title=t("verdict"), scale=alt.Scale(domain=[str(LABEL_NAMES[v]) for v in LABELS],
                                                                         range=VERDICT_COLOURS))
    data = frame[["head", "layer", x, y, "verdict"] if x != y else ["head", "layer", x, "verdict"]].copy()
    data["shown"] = [str(LABEL_NAMES.get(v, v)) for v in data["verdict"]]     # the verdict in the reader's language
    return alt.Chart(data).mark_circle(size=90, opacity=0.85).encode(
        x=alt.X(f"{x}:Q", title=axis_title(x)),
        y=alt.Y(f"{y}:Q", title=axis_title(y)),
        color=colour,
        size=alt.condition(pick, alt.value(260), alt.value(90)),
        stroke=alt.condition(pick, alt.value("black"), alt.value(None)),
        tooltip=[alt.Tooltip("head:N", title=t("head")), alt.Tooltip(f"{x}:Q", title=axis_title(x), format=".3f"),
                 alt.Tooltip(f"{y}:Q", title=axis_title(y), format=".3f"),
                 alt.Tooltip("shown:N", title=t("verdict"))],
    ).add_params(pick).properties(width=520, height=380)


def qk_chart(points: list[dict], explained: list[float]) -> alt.Chart:
    """One head's queries and keys at sampled positions on the first two principal axes of both together
    (``points``: x, y, kind 'query'|'key', token); the axes' titles give the variance each explains."""
    df = pd.DataFrame(points, columns=["x", "y", "kind", "token"])
    kinds = {"query": t("query"), "key": t("key")}
    df["shown"] = df["kind"].map(kinds)
    ex = list(explained) + [float("nan")] * 2
    return alt.Chart(df).mark_point(filled=True, size=30, opacity=0.6).encode(
        x=alt.X("x:Q", title=t("axis {n} ({share} of the variance)", n=1, share=f"{ex[0]:.0%}")),
        y=alt.Y("y:Q", title=t("axis {n} ({share} of the variance)", n=2, share=f"{ex[1]:.0%}")),
        color=alt.Color("shown:N", title=t("vector"), scale=alt.Scale(domain=[kinds["query"], kinds["key"]],
                                                              range=["#d62728", "#1f77b4"])),
        tooltip=[alt.Tooltip("shown:N", title=t("vector")), alt.Tooltip("token:N", title=t("token"))],
    ).properties(width=300, height=240)
