"""Charts for the ablations page (Altair, no Streamlit). They read the fields of the results of
:mod:`attnkit.ablations` (a :class:`Metric` names its series), never label strings."""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from ..ablations import Unavailable
from ..i18n import status_label, t
from .axes import colour_legend, discrete_axis, integer_axis, title_lines

__all__ = ["layer_metric_frame", "layer_metric_chart", "sweep_frame", "sweep_chart", "head_map_frame",
           "head_map_chart", "position_frame", "position_chart", "evidence_frame", "claims_frame"]

_RUNS = ["baseline", "ablated"]
_RUN_COLOURS = ["#4c78a8", "#e45756"]


def layer_metric_frame(result, metric) -> pd.DataFrame:
    """Long form of one metric of a Result, baseline vs ablated per layer: layer, run, value, in scope."""
    s = result.per_layer[metric.key]
    recs = [{"layer": l, "run": run, "value": v, "in scope": l in result.scope}
            for run in _RUNS for l, v in enumerate(getattr(s, run))]
    return pd.DataFrame(recs, columns=["layer", "run", "value", "in scope"]).astype({"value": float})


def layer_metric_chart(df: pd.DataFrame, metric) -> alt.Chart:
    """Grouped bars (points on a log axis, which has no zero): one pair, baseline and ablated, per layer."""
    data = df.dropna(subset=["value"])
    if metric.log:
        data = data[data["value"] > 0]
    runs = [t("baseline"), t("ablated")]                      # the runs in the reader's language
    data = data.assign(run=data["run"].map(dict(zip(_RUNS, runs))))
    # the metric's name as the chart's title, wrapped to the narrow column by its drawn width (a CJK character
    # is two columns), not as an axis title longer than the axis, which the chart would cut off
    name = str(metric.title) + (" " + t("(log scale)") if metric.log else "")
    base = alt.Chart(data, title=alt.TitleParams(title_lines(name, 200), anchor="start", limit=0))
    mark = base.mark_point(filled=True, size=90) if metric.log else base.mark_bar()
    layers = [str(l) for l in sorted(data["layer"].unique())]
    return mark.encode(
        x=alt.X("layer:O", axis=discrete_axis(t("layer"), layers, 40)),
        xOffset=alt.XOffset("run:N", sort=runs),
        y=alt.Y("value:Q", title=None,
                scale=alt.Scale(type="log") if metric.log else alt.Undefined),
        color=alt.Color("run:N", sort=runs, scale=alt.Scale(domain=runs, range=_RUN_COLOURS), title=t("run")),
        opacity=alt.condition("datum['in scope']", alt.value(1.0), alt.value(0.35)),
        tooltip=[alt.Tooltip("layer:O", title=t("layer")), alt.Tooltip("run:N", title=t("run")),
                 alt.Tooltip("value:Q", format=".4g", title=t("value")),
                 alt.Tooltip("in scope:N", title=t("in scope"))],
    ).properties(height=260)


def _effect_cols(e) -> dict:
    return {"increase": np.nan if e is None else e.delta, "low": np.nan if e is None else e.lo,
            "high": np.nan if e is None else e.hi}


def sweep_frame(sweep) -> pd.DataFrame:
    """A LayerSweep as rows: scope, nats/token, increase with its 95 % interval (low, high), perplexity."""
    return pd.DataFrame([{"scope": r.scope, "nats/token": r.nats, **_effect_cols(r.effect),
                          "perplexity": math.exp(r.nats) if r.nats == r.nats else np.nan} for r in sweep.rows])


def sweep_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Loss change (nats/token) with each layer ablated alone, and all, with 95 % intervals."""
    order = list(df["scope"])
    base = alt.Chart(df, title=alt.TitleParams(title_lines(title, 560), anchor="start", limit=0)).encode(
        x=alt.X("scope:N", sort=order, axis=discrete_axis(None, order, 40)))
    bars = base.mark_bar().encode(
        y=alt.Y("increase:Q", title=t("Δ loss (nats/token), 95 % interval")),
        color=alt.condition("datum.increase > 0", alt.value("#e45756"), alt.value("#4c78a8")),
        tooltip=[alt.Tooltip("scope:N", title=t("scope")), alt.Tooltip("nats/token:Q", format=".4f", title=t("nats/token")),
                 alt.Tooltip("increase:Q", format="+.4f", title=t("increase")),
                 alt.Tooltip("low:Q", format="+.4f", title=t("95 % low")),
                 alt.Tooltip("high:Q", format="+.4f", title=t("95 % high"))])
    whiskers = base.mark_rule(color="black").encode(y="low:Q", y2="high:Q")
    return (bars + whiskers).properties(height=280)


def head_map_frame(head_map) -> pd.DataFrame:
    """A HeadMap as rows: layer, head, name (L{layer}H{head}), increase, low, high."""
    L, H = head_map.increase.shape
    names = head_map.names()
    return pd.DataFrame([{"layer": l, "head": h, "name": names[l][h], "increase": float(head_map.increase[l, h]),
                          "low": float(head_map.lo[l, h]), "high": float(head_map.hi[l, h])}
                         for l in range(L) for h in range(H)])


def _symmetric_limit(values) -> float:
    """The colour domain's half-width: the largest |value|, rounded up to two significant digits."""
    m = float(np.nanmax(np.abs(values))) if len(values) and np.isfinite(values).any() else 0.0
    if m <= 0:
        return 1.0
    step = 10 ** (math.floor(math.log10(m)) - 1)
    return math.ceil(m / step) * step


def head_map_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """Layer × head map of the loss change, every cell labelled with its value; a diverging scale centred
    on 0 whose domain covers the largest |value| (red: the loss rises), legend from − (bottom) to + (top)."""
    m = _symmetric_limit(df["increase"].to_numpy())
    n_heads = int(df["head"].max()) + 1 if len(df) else 1
    cell_w = max(44, min(72, 900 // max(n_heads, 1)))
    heads = [str(h) for h in range(n_heads)]
    layers = [str(l) for l in sorted(df["layer"].unique())] if len(df) else ["0"]
    base = alt.Chart(df, title=alt.TitleParams(title_lines(title, 560), anchor="start", limit=0)).encode(
        x=alt.X("head:O", axis=discrete_axis(t("head"), heads, cell_w, angle=0, labelExpr="'H' + datum.value")),
        y=alt.Y("layer:O", axis=discrete_axis(t("layer"), layers, 30, x=False, labelExpr="'L' + datum.value")))
    rect = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=alt.Color("increase:Q", title=t("Δ loss (nats/token)"),
                        scale=alt.Scale(scheme="redblue", domain=[-m, m], reverse=True, clamp=True, nice=False),
                        legend=colour_legend(t("Δ loss (nats/token)"), values=[m, m / 2, 0, -m / 2, -m], fmt="+.2~f")),
        tooltip=[alt.Tooltip("name:N", title=t("head")), alt.Tooltip("increase:Q", format="+.4f", title=t("Δ loss")),
                 alt.Tooltip("low:Q", format="+.4f", title=t("95 % low")),
                 alt.Tooltip("high:Q", format="+.4f", title=t("95 % high"))])
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("increase:Q", format="+.3f"),
        color=alt.condition(f"abs(datum.increase) > {m * 0.55}", alt.value("white"), alt.value("black")))
    return (rect + text).properties(width=alt.Step(cell_w), height=alt.Step(30))


def position_frame(result, labels: list[str] | None = None) -> pd.DataFrame:
    df = pd.DataFrame([vars(p) for p in result.per_position],
                      columns=["position", "relative_change", "top1_changed", "texts"])
    df["token"] = labels if labels is not None and len(labels) == len(df) else df["position"].astype(str)
    return df


def position_chart(df: pd.DataFrame) -> alt.Chart:
    """No mask: relative change of each position's logits once the future is visible."""
    return (
        alt.Chart(df, title=t("Relative logit change per position, mask removed"))
        .mark_line(point=True)
        .encode(
            x=alt.X("position:Q", axis=integer_axis(t("position"))),
            y=alt.Y("relative_change:Q", title="‖Δlogits‖ / ‖logits‖"),
            tooltip=[alt.Tooltip("position:Q", title=t("position")), alt.Tooltip("token:N", title=t("token")),
                     alt.Tooltip("relative_change:Q", format=".4g", title=t("relative change")),
                     alt.Tooltip("top1_changed:Q", format=".2f", title=t("top-1 changed")),
                     alt.Tooltip("texts:Q", title=t("texts"))],
        )
        .properties(height=240)
    )


def evidence_frame(result) -> pd.DataFrame:
    """The mechanism checks of a Result: what, unit, baseline, ablated, expected, holds (headers and words in
    the reader's language)."""
    cols = [t("check"), t("unit"), t("baseline"), t("ablated"), t("expected"), t("holds")]
    holds = {True: t("yes"), False: t("no"), None: t("not measurable")}
    return pd.DataFrame([dict(zip(cols, (str(e.what), str(e.unit), e.baseline, e.ablated, str(e.expect), holds[e.holds])))
                         for e in result.evidence], columns=cols)


def claims_frame(results) -> pd.DataFrame:
    """``check_all``'s list as a table: kind, claim, verdict, effect, measured (or why unavailable)."""
    recs = []
    for r in results:
        if isinstance(r, Unavailable):
            recs.append({"intervention": str(r.label), "claim": "", "verdict": str(status_label("unavailable")),
                         "effect": "", "measured": str(r.reason)})
        else:
            recs.append({"intervention": str(r.label), "claim": str(r.claim), "verdict": str(status_label(r.verdict.status)),
                         "effect": str(r.effect) if r.effect else t("n/a"), "measured": str(r.verdict.text)})
    return pd.DataFrame(recs, columns=["intervention", "claim", "verdict", "effect", "measured"])
