"""Charts for the ablations page (Altair, no Streamlit): per-layer comparisons, sweeps, the head map."""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

__all__ = ["layer_metric_frame", "layer_metric_chart", "sweep_chart", "head_map_frame", "head_map_chart",
           "position_chart"]

_RUNS = ["baseline", "ablated"]


def layer_metric_frame(per_layer: list[dict], metric: str) -> pd.DataFrame:
    """Long form of one metric, baseline vs ablated per layer: layer, run, value, in scope."""
    recs = []
    for r in per_layer:
        for run in _RUNS:
            key = f"{metric} ({run})"
            if key in r:
                recs.append({"layer": int(r["layer"]), "run": run, "value": r[key], "in scope": bool(r["in scope"])})
    return pd.DataFrame(recs, columns=["layer", "run", "value", "in scope"])


def layer_metric_chart(df: pd.DataFrame, metric: str, log: bool = False) -> alt.Chart:
    """Grouped bars: one pair (baseline, ablated) per layer."""
    data = df.dropna(subset=["value"])
    if log:
        data = data[data["value"] > 0]
    y = alt.Y("value:Q", title=metric + (" (log)" if log else ""),
              scale=alt.Scale(type="log") if log else alt.Undefined)
    # bars need a zero baseline, which a log axis lacks: draw points there
    mark = alt.Chart(data, title=metric).mark_point(filled=True, size=90) if log else \
        alt.Chart(data, title=metric).mark_bar()
    return (
        mark
        .encode(
            x=alt.X("layer:O", title="layer"),
            xOffset=alt.XOffset("run:N", sort=_RUNS),
            y=y,
            color=alt.Color("run:N", sort=_RUNS, scale=alt.Scale(range=["#4c78a8", "#e45756"])),
            opacity=alt.condition("datum['in scope']", alt.value(1.0), alt.value(0.35)),
            tooltip=["layer:O", "run:N", alt.Tooltip("value:Q", format=".4g"), "in scope:N"],
        )
        .properties(height=260)
    )


def sweep_chart(rows: list[dict], kind: str) -> alt.Chart:
    """Loss increase (nats/token) with each layer ablated alone, and all layers."""
    df = pd.DataFrame(rows)
    order = list(df["scope"])
    return (
        alt.Chart(df, title=f"{kind}: loss increase when ablating one layer (and all)")
        .mark_bar()
        .encode(
            x=alt.X("scope:N", sort=order, title=None),
            y=alt.Y("increase:Q", title="Δ loss (nats/token)"),
            color=alt.condition("datum.increase > 0", alt.value("#e45756"), alt.value("#4c78a8")),
            tooltip=["scope:N", alt.Tooltip("nats/token:Q", format=".4f"), alt.Tooltip("increase:Q", format="+.4f"),
                     alt.Tooltip("perplexity:Q", format=".2f")],
        )
        .properties(height=260)
    )


def head_map_frame(increase) -> pd.DataFrame:
    a = np.asarray(increase, dtype=float)
    return pd.DataFrame([{"layer": l, "head": h, "increase": float(a[l, h])}
                         for l in range(a.shape[0]) for h in range(a.shape[1])])


def head_map_chart(df: pd.DataFrame, mode: str) -> alt.Chart:
    """Layer × head map of the loss increase (a diverging scale centred on 0); L·H cells, small."""
    m = float(np.nanmax(np.abs(df["increase"].to_numpy()))) if len(df) else 1.0
    m = m if m > 0 else 1.0
    return (
        alt.Chart(df, title=f"{mode}: loss increase per head (nats/token)")
        .mark_rect()
        .encode(
            x=alt.X("head:O", title="head"),
            y=alt.Y("layer:O", title="layer"),
            color=alt.Color("increase:Q", scale=alt.Scale(scheme="redblue", domain=[m, -m]),
                            title="Δ loss"),
            tooltip=["layer:O", "head:O", alt.Tooltip("increase:Q", format="+.4f")],
        )
        .properties(height=alt.Step(22), width=alt.Step(28))
    )


def position_chart(per_position: list[dict], labels: list[str] | None = None) -> alt.Chart:
    """No mask: relative change of each position's logits once the future is visible."""
    df = pd.DataFrame(per_position)
    if labels is not None and len(labels) == len(df):
        df["token"] = labels
    else:
        df["token"] = df["position"].astype(str)
    return (
        alt.Chart(df, title="Relative logit change per position, mask removed")
        .mark_line(point=True)
        .encode(
            x=alt.X("position:Q", title="position"),
            y=alt.Y("relative logit change:Q", title="‖Δlogits‖ / ‖logits‖"),
            tooltip=["position:Q", "token:N", alt.Tooltip("relative logit change:Q", format=".4g"),
                     alt.Tooltip("top-1 changed:Q", format=".2f"), "texts:Q"],
        )
        .properties(height=240)
    )
