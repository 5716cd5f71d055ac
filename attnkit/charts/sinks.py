"""Charts of attention sinks and the cache-eviction lab (Altair, no Streamlit): the loss against the cache's
window, one line per number of sinks kept, with its interval band and the full cache as a rule; the share of each
head's attention on the first tokens as a layer × head map; that share against position; what the sink writes
against the other keys, per head.

Inputs are the tables of :meth:`attnkit.eviction.EvictionLab.to_pandas` and
:meth:`attnkit.sinks.SinkStats.to_pandas` / ``by_position``; every title, axis and legend goes through the
catalog."""
from __future__ import annotations

import altair as alt
import pandas as pd

from ..i18n import t
from .axes import colour_legend, discrete_axis, integer_axis
from .heatmaps import CELL_TEXT_PX, PAD

__all__ = ["loss_chart", "share_heatmap", "share_by_position", "sink_writes"]


def loss_chart(df: pd.DataFrame, full: dict, height: int = 320) -> alt.LayerChart:
    """Loss (nats/token) against the window w (log axis), one line per k (and a dash per mode) with its 95 %
    band; the full cache as a horizontal rule with its own band."""
    data = df[["sinks", "window", "mode", "loss", "low", "high", "delta"]].copy()
    x = alt.X("window:Q", axis=integer_axis(t("window w (most recent keys kept)")), scale=alt.Scale(type="log", nice=False))
    colour = alt.Color("sinks:O", title=t("sinks k (first tokens kept)"), scale=alt.Scale(scheme="tableau10"))
    dash = alt.StrokeDash("mode:N", title=t("positions"))
    tips = [alt.Tooltip("sinks:O", title=t("sinks k (first tokens kept)")),
            alt.Tooltip("window:Q", title=t("window w (most recent keys kept)")), alt.Tooltip("mode:N", title=t("positions")),
            alt.Tooltip("loss:Q", format=".4f", title=t("loss (nats/token)")),
            alt.Tooltip("low:Q", format=".4f", title=t("95 % low")), alt.Tooltip("high:Q", format=".4f", title=t("95 % high")),
            alt.Tooltip("delta:Q", format="+.4f", title=t("change against the full cache"))]
    base = alt.Chart(data)
    band = base.mark_area(opacity=0.15).encode(x=x, y="low:Q", y2="high:Q",
                                                color=alt.Color("sinks:O", legend=None), detail="mode:N")
    line = base.mark_line(point=True).encode(x=x, y=alt.Y("loss:Q", title=t("loss (nats/token)"),
                                                         scale=alt.Scale(zero=False)),
                                             color=colour, strokeDash=dash, tooltip=tips)
    ref = pd.DataFrame([{**full, "what": t("full cache")}])
    rule = alt.Chart(ref).mark_rule(color="black", strokeDash=[6, 4]).encode(
        y="loss:Q", tooltip=[alt.Tooltip("what:N", title=t("reference")), alt.Tooltip("loss:Q", format=".4f", title=t("loss (nats/token)")),
                             alt.Tooltip("low:Q", format=".4f", title=t("95 % low")),
                             alt.Tooltip("high:Q", format=".4f", title=t("95 % high"))])
    label = alt.Chart(ref).mark_text(align="left", dx=4, dy=-6, color="black").encode(
        y="loss:Q", x=alt.value(0), text="what:N")
    title = t("Loss against the cache's window, per number of sinks kept")
    return alt.layer(band, line, rule, label).properties(height=height, title=title)


def share_heatmap(df: pd.DataFrame, k: int, height: int | None = None) -> alt.LayerChart:
    """Layer × head cells coloured by the mean share of attention on the first k tokens (0–1), the value
    written in each cell; sink heads outlined."""
    col = f"first_{k}" if f"first_{k}" in df else "first_token"
    data = df[["layer", "head", "name", "first_token", col, "write_ratio", "sink"]].copy()
    data = data.rename(columns={col: "share"})
    title = t("share on the first {k} token(s)").format(k=k)
    heads = [str(h) for h in sorted(data["head"].unique())]
    layers = [str(l) for l in sorted(data["layer"].unique())]
    base = alt.Chart(data).encode(x=alt.X("head:O", axis=discrete_axis(t("head"), heads, 24)),
                                  y=alt.Y("layer:O", axis=discrete_axis(t("layer"), layers, 28, x=False)))
    rect = base.mark_rect().encode(
        color=alt.Color("share:Q", title=title, scale=alt.Scale(scheme="blues", domain=[0, 1]),
                        legend=colour_legend(title, (0, 1))),
        stroke=alt.condition("datum.sink", alt.value("#e45756"), alt.value(None)),
        strokeWidth=alt.condition("datum.sink", alt.value(2), alt.value(0)),
        tooltip=[alt.Tooltip("name:N", title=t("head")), alt.Tooltip("share:Q", format=".3f", title=title),
                 alt.Tooltip("first_token:Q", format=".3f", title=t("share on the first token")),
                 alt.Tooltip("write_ratio:Q", format=".3f", title=t("what the sink writes ÷ what the other keys write")),
                 alt.Tooltip("sink:N", title=t("sink head"))])
    text = base.mark_text(fontSize=CELL_TEXT_PX).encode(
        text=alt.Text("share:Q", format=".2f"),
        color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black")))
    n_layers = int(data["layer"].nunique()) if len(data) else 1
    n_heads = int(data["head"].nunique()) if len(data) else 1
    cell = max(28, min(46, 640 // n_heads))          # square cells, as Compare's overview (autosize pad: no squeeze)
    return alt.layer(rect, text).properties(width=cell * n_heads, height=height or cell * n_layers, autosize=PAD,
                                            title=t("Attention on the first tokens, per head"))


def share_by_position(df: pd.DataFrame, heads: list[str] | None = None, height: int = 280) -> alt.Chart:
    """The share on the first k tokens against the context length n = i + 1 (log axis), one line per head
    (``heads``: only these names)."""
    data = df if heads is None else df[df["name"].isin(heads)]
    return alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("n:Q", axis=integer_axis(t("context length n = i + 1 (keys visible to query i)")), scale=alt.Scale(type="log")),
        y=alt.Y("share:Q", title=t("share on the first tokens"), scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("name:N", title=t("head")),
        tooltip=[alt.Tooltip("name:N", title=t("head")), alt.Tooltip("n:Q"),
                 alt.Tooltip("share:Q", format=".3f", title=t("share on the first tokens"))],
    ).properties(height=height)


def sink_writes(df: pd.DataFrame, height: int = 300) -> alt.LayerChart:
    """One point per head: its share of attention on the first token (x) against what the sink writes ÷ what the
    other keys write, ‖v_0 W_O‖ ÷ mean ‖v_j W_O‖ (y, log axis); sink heads in red, a rule at 1 (the sink writes
    as much as any key). A sink is a place to park attention: a sink head's point sits low."""
    data = df[["name", "first_token", "write_sink", "write_rest", "write_ratio", "sink"]].dropna(subset=["write_ratio"])
    data = data[data["write_ratio"] > 0]
    ratio = t("what the sink writes ÷ what the other keys write")
    tips = [alt.Tooltip("name:N", title=t("head")),
            alt.Tooltip("first_token:Q", format=".3f", title=t("share on the first token")),
            alt.Tooltip("write_sink:Q", format=".3f", title=t("write of the sink ‖v₀·W_O‖")),
            alt.Tooltip("write_rest:Q", format=".3f", title=t("mean write of the other keys")),
            alt.Tooltip("write_ratio:Q", format=".3f", title=ratio), alt.Tooltip("sink:N", title=t("sink head"))]
    points = alt.Chart(data).mark_circle(size=70, opacity=0.8).encode(
        x=alt.X("first_token:Q", title=t("share on the first token"), scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("write_ratio:Q", title=t("write ratio: sink ÷ other keys"), scale=alt.Scale(type="log")),
        color=alt.condition("datum.sink", alt.value("#e45756"), alt.value("#4c78a8")), tooltip=tips)
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color="grey", strokeDash=[4, 4]).encode(y="y:Q")
    return alt.layer(points, one).properties(height=height, title=t("What the sink writes, per head"))
