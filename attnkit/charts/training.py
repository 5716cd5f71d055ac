"""Charts for watching attention learn (:mod:`attnkit.training`): curves over steps with the phase change
marked, every head's score over steps, and one head's pattern at a step beside its neighbours (Altair only)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from ..i18n import msg, t
from ..training import LEVEL, SeriesResult
from .axes import CONTENT_WIDTH, colour_legend, integer_axis

__all__ = ["CURVES", "curves_frame", "curves_chart", "head_curves_chart", "pattern_frame", "pattern_strip"]

#: Curves drawn by default: column of SeriesResult.frame() -> title (shown in the reader's language).
CURVES = {
    "induction": msg("best induction score (random repeats)"),
    "previous_token": msg("best previous-token score"),
    "first_token": msg("best first-token score"),
    "entropy": msg("mean attention entropy (normalised)"),
    "icl": msg("ICL score (late − early loss, nats)"),
    "repeat_loss": msg("loss on the repeat (nats)"),
    "k_composition": msg("K-composition prev → induction"),
    "val_loss": msg("validation loss (series.json)"),
}
PAD = alt.AutoSizeParams(type="pad", contains="padding")


def curves_frame(result: SeriesResult, columns=None, titles: dict | None = None) -> pd.DataFrame:
    """Long table step, curve, value (and the induction interval) of the columns asked for."""
    df = result.frame()
    cols = [c for c in (columns or CURVES) if c in df.columns and df[c].notna().any()]
    long = df.melt(id_vars=["step", "induction_lo", "induction_hi"], value_vars=cols, var_name="curve",
                   value_name="value")
    names = {**CURVES, **(titles or {})}
    long["title"] = long["curve"].map(lambda c: str(names.get(c, c)))
    return long.dropna(subset=["value"])


def _marks(result: SeriesResult, titles: dict) -> list:
    """Vertical rules: the phase change (solid) and the steepest ICL drop (dashed), each labelled."""
    rows = []
    if result.phase_change_step is not None:
        rows.append({"step": result.phase_change_step, "what": str(titles.get("phase_change") or t(
            "phase change (induction clears {threshold} at {level})", threshold=result.threshold,
            level=f"{LEVEL:.0%}"))})
    if result.icl_drop is not None:
        rows.append({"step": result.icl_drop[1], "what": str(titles.get("icl_drop") or t("steepest ICL drop (ends)"))})
    return rows


def _one_curve(result: SeriesResult, data: pd.DataFrame, curve: str, width: int, height: int,
               titles: dict) -> alt.Chart:
    part = data[data["curve"] == curve]
    name = str(titles.get(curve, CURVES.get(curve, curve)))
    base = alt.Chart(part).encode(x=alt.X("step:Q", axis=integer_axis(t("step"))))
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title=name, scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("step:Q", title=t("step")), alt.Tooltip("value:Q", format=".3f", title=name)])
    layers = [line]
    if curve == "induction":
        layers.insert(0, base.mark_area(opacity=0.25).encode(y="induction_lo:Q", y2="induction_hi:Q"))
        layers.append(alt.Chart(pd.DataFrame({"y": [result.threshold]})).mark_rule(strokeDash=[2, 2], color="gray")
                      .encode(y="y:Q"))
    marks = _marks(result, titles)
    if marks:
        layers.append(alt.Chart(pd.DataFrame(marks)).mark_rule(color="firebrick").encode(
            x="step:Q", strokeDash=alt.StrokeDash("what:N", title=t("marked step"),
                                                  legend=alt.Legend(orient="bottom", labelLimit=0, titleLimit=0)),
            tooltip=[alt.Tooltip("what:N", title=t("marked step")), alt.Tooltip("step:Q", title=t("step"))]))
    return alt.layer(*layers).properties(width=width, height=height)


def curves_chart(result: SeriesResult, columns=None, width: int = 320, height: int = 160, per_row: int = 2,
                 titles: dict | None = None) -> alt.VConcatChart:
    """One small chart per curve (shared step axis), the induction interval shaded, the threshold dotted, the
    phase change and the steepest ICL drop marked by vertical rules. ``titles``: a curve's axis title (and
    "phase_change", "icl_drop": the rules' labels) in the reader's language."""
    titles = titles or {}
    data = curves_frame(result, columns, titles)
    charts = [_one_curve(result, data, c, width, height, titles) for c in dict.fromkeys(data["curve"])]
    rows = [alt.hconcat(*charts[i:i + per_row]) for i in range(0, len(charts), per_row)]
    return alt.vconcat(*rows).properties(autosize=PAD) if rows else alt.Chart(pd.DataFrame()).mark_point()


def head_curves_chart(result: SeriesResult, stat: str = "induction", width: int = 480, height: int = 220) -> alt.Chart:
    """Every head's ``stat`` over steps (one line per head, coloured by layer)."""
    df = result.head_frame(stat)
    name = str(CURVES.get(stat, stat))
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("step:Q", axis=integer_axis(t("step"))), y=alt.Y("value:Q", title=name), detail="head:N",
        color=alt.Color("layer:O", title=t("layer")),
        tooltip=[alt.Tooltip("head:N", title=t("head")), alt.Tooltip("step:Q", title=t("step")),
                 alt.Tooltip("value:Q", format=".3f", title=name)],
    ).properties(width=width, height=height, autosize=PAD)


def pattern_frame(result: SeriesResult, head: str, step: int, neighbours: int = 1) -> pd.DataFrame:
    """Long table step, query, key, weight of ``head``'s pattern at ``step`` and its neighbours (positions are
    labelled "i token", so the repeated tokens stay apart)."""
    c = result.checkpoints[0]
    labels = [f"{i} {t}" for i, t in enumerate(c.pattern_tokens)]
    rows = []
    for s, p in result.patterns(head, step, neighbours):
        T = p.shape[0]
        rows += [{"step": s, "query": labels[i], "key": labels[j], "qi": i, "kj": j, "weight": float(p[i, j])}
                 for i in range(T) for j in range(i + 1)]
    return pd.DataFrame(rows)


def pattern_strip(result: SeriesResult, head: str, step: int, neighbours: int = 1, size: int = 220,
                  title: str | None = None) -> alt.FacetChart:
    """``head``'s attention pattern on the repeated random tokens at ``step`` (centre) and at up to
    ``neighbours`` checkpoints each side: one heatmap per step, same colour scale."""
    df = pattern_frame(result, head, step, neighbours)
    order = list(dict.fromkeys(df.sort_values("qi")["query"]))
    panels = max(1, df["step"].nunique())
    size = min(size, (CONTENT_WIDTH - 140) // panels - 20)          # every panel beside the legend on the page
    chart = alt.Chart(df).mark_rect().encode(
        x=alt.X("key:O", sort=order, axis=alt.Axis(labels=False, ticks=False, title=t("key"))),
        y=alt.Y("query:O", sort=order, axis=alt.Axis(labels=False, ticks=False, title=t("query"))),
        color=alt.Color("weight:Q", scale=alt.Scale(domain=[0, 1], scheme="blues"), title=t("weight"),
                        legend=colour_legend(t("weight"), (0, 1))),
        tooltip=[alt.Tooltip("step:Q", title=t("step")), alt.Tooltip("query:N", title=t("query")),
                 alt.Tooltip("key:N", title=t("key")), alt.Tooltip("weight:Q", format=".3f", title=t("weight"))],
    ).properties(width=size, height=size)
    title = title or t("{head} at step {step} and its neighbours", head=head, step=step)
    return chart.facet(column=alt.Column("step:O", title=title)).properties(
        autosize=PAD)
