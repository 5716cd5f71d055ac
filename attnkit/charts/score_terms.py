"""Charts of "why does this query attend to this key" (Altair, no Streamlit): the query-part × key-part grid,
the largest terms, one side's parts, a whole query row split by kind, and layer 0's token/position split.

Every value drawn is a term of an attention score (or of a contrast of two scores), in the score's own units —
not a share of it: blue negative, white 0, red positive, on a symmetric scale. Parts beyond the largest
``max_parts`` of a side are summed into one "other …" row or column, and the bar charts add one "other …" bar for
the parts they leave out, so every chart still adds up to the score its axis names (:func:`adds_up_to`).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import msg, t
from ..score_terms import KINDS, L0_CELLS, RowTerms, ScoreTerms, part_kind, top_terms
from .axes import CONTENT_WIDTH, discrete_axis
from .effects import _diverging
from .heatmaps import PAD

__all__ = ["grid_frame", "terms_grid", "top_terms_bars", "side_bars", "row_by_kind", "layer0_bars", "adds_up_to",
           "OTHER_QUERY", "OTHER_KEY"]

#: The summed rest of each side (shown in the reader's language).
OTHER_QUERY, OTHER_KEY = msg("other query parts"), msg("other key parts")


def adds_up_to(st: ScoreTerms) -> str:
    """The axis title of a chart of ``st``'s terms: what they are terms of and the number they add up to."""
    return t("term of {what} (the bars add up to {score})", what=_what(st), score=f"{st.score:+.4f}")


def _keep(values: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """Indices of the ``n`` parts of largest summed size (in their original order) and of the rest."""
    order = np.argsort(-np.abs(values), kind="stable")
    keep = sorted(order[:n].tolist())
    return keep, sorted(order[n:].tolist())


def grid_frame(st: ScoreTerms, max_parts: int = 30) -> pd.DataFrame:
    """Long table of the grid drawn: query, key, value, share of the score, each side's kind; parts past the
    ``max_parts`` largest of a side (by that side's total) summed into "other query parts" / "other key parts"."""
    qk, qr = _keep(st.values.sum(1), max_parts)
    kk, kr = _keep(st.values.sum(0), max_parts)
    other_q, other_k = str(OTHER_QUERY), str(OTHER_KEY)
    rows_q = [(st.query_parts[i], [i]) for i in qk] + ([(other_q, qr)] if qr else [])
    rows_k = [(st.key_parts[j], [j]) for j in kk] + ([(other_k, kr)] if kr else [])
    recs = []
    for qn, qi in rows_q:
        block = st.values[qi]
        for kn, kj in rows_k:
            v = float(block[:, kj].sum())
            recs.append({"query": qn, "key": kn, "value": v, "share": v / st.score if st.score else np.nan,
                         "query_kind": part_kind(qn) if qn != other_q else "other",
                         "key_kind": part_kind(kn) if kn != other_k else "other"})
    return pd.DataFrame(recs)


def _what(st: ScoreTerms) -> str:
    """The score (or contrast) split, as a formula in the reader's language: score(i,j) − score(i,j′)."""
    s = t("score")
    if st.against is not None:
        return f"{s}({st.query},{st.key}) − {s}({st.query},{st.against})"
    return f"{s}({st.query},{st.key})"


def terms_grid(st: ScoreTerms, max_parts: int = 30, *, title: str | None = None) -> alt.Chart:
    """Query part (rows) × key part (columns): each term's value; the tooltip gives both parts, the value and its
    share of the score."""
    d = grid_frame(st, max_parts)
    qs, ks = list(dict.fromkeys(d["query"])), list(dict.fromkeys(d["key"]))
    cell = max(8, min(22, (CONTENT_WIDTH - 260) // max(len(ks), 1)))
    title = title or t("{head}: {what} = {score}, split into query part × key part", head=st.head, what=_what(st),
                       score=f"{st.score:+.4f}")
    tips = [alt.Tooltip("query:N", title=t("query part")), alt.Tooltip("key:N", title=t("key part")),
            alt.Tooltip("value:Q", format="+.4f", title=t("term")),
            alt.Tooltip("share:Q", format="+.1%", title=t("share of the score"))]
    return alt.Chart(d, title=title).mark_rect().encode(
        x=alt.X("key:N", sort=ks, axis=discrete_axis(t("key side (what the key carries)"), ks, cell)),
        y=alt.Y("query:N", sort=qs, axis=discrete_axis(t("query side (what the query reads with)"), qs, cell, x=False)),
        color=_diverging("value", d["value"], t("term")), tooltip=tips,
    ).properties(width=cell * len(ks), height=cell * len(qs), autosize=PAD)


def _bars(d: pd.DataFrame, label: str, axis_title: str, title: str, tips: list) -> alt.Chart:
    """Horizontal bars of ``d`` (columns ``label``, value), one row per label in the frame's order."""
    return alt.Chart(d, title=title).mark_bar().encode(
        y=alt.Y(f"{label}:N", sort=list(d[label]), axis=discrete_axis(None, list(d[label]), 18, x=False, limit=260)),
        x=alt.X("value:Q", title=axis_title),
        color=_diverging("value", d["value"], t("term")), tooltip=tips,
    ).properties(width=CONTENT_WIDTH - 420, height=18 * len(d), autosize=PAD)


def top_terms_bars(st: ScoreTerms, n: int = 15, *, title: str | None = None) -> alt.Chart:
    """The ``n`` largest terms as horizontal bars, labelled "query part × key part", and one bar for the rest."""
    d = top_terms(st, n)
    d["term"] = d["query"] + " × " + d["key"]
    rest = st.values.size - len(d)
    if rest:
        d = pd.concat([d, pd.DataFrame([{"term": t("the other {n} terms", n=f"{rest:,}"), "query": "", "key": "",
                                         "value": st.total - float(d["value"].sum()), "share": np.nan}])],
                      ignore_index=True)
    title = title or t("{head}: the {n} largest of {total} terms of {what} = {score}", head=st.head, n=min(n, st.values.size),
                       total=f"{st.values.size:,}", what=_what(st), score=f"{st.score:+.4f}")
    tips = [alt.Tooltip("query:N", title=t("query part")), alt.Tooltip("key:N", title=t("key part")),
            alt.Tooltip("value:Q", format="+.4f", title=t("term")),
            alt.Tooltip("share:Q", format="+.1%", title=t("share of the score"))]
    return _bars(d, "term", adds_up_to(st), title, tips)


def side_bars(st: ScoreTerms, side: str = "key", n: int = 15) -> alt.Chart:
    """One side's parts (each summed over the other side), the ``n`` largest in size, and one bar for the rest."""
    s = st.key_side if side == "key" else st.query_side
    top = s.reindex(s.abs().sort_values(ascending=False).index[:n])
    d = pd.DataFrame({"part": list(top.index), "value": top.to_numpy(), "kind": [part_kind(p) for p in top.index]})
    if len(s) > len(top):
        d = pd.concat([d, pd.DataFrame([{"part": str(OTHER_KEY if side == "key" else OTHER_QUERY),
                                         "value": float(s.sum() - top.sum()), "kind": "other"}])], ignore_index=True)
    title = (t("{head}: the key side's parts, each summed over the query side ({what})", head=st.head, what=_what(st))
             if side == "key" else
             t("{head}: the query side's parts, each summed over the key side ({what})", head=st.head, what=_what(st)))
    tips = [alt.Tooltip("part:N", title=t("key part") if side == "key" else t("query part")),
            alt.Tooltip("kind:N", title=t("kind")), alt.Tooltip("value:Q", format="+.4f", title=t("term"))]
    return _bars(d, "part", adds_up_to(st), title, tips)


def row_by_kind(row: RowTerms, tokens: list[str] | None = None, side: str = "key") -> alt.LayerChart:
    """Every key the query sees: its score split by the kind of part (embeddings / heads / MLPs / biases) on
    one side, as stacked bars (positive up, negative down), with the model's score as a tick."""
    d = row.frame(side).groupby(["key_pos", "kind"], as_index=False)["value"].sum()
    kinds = {k: t(k) for k in KINDS}
    d["kind"] = d["kind"].map(lambda k: kinds.get(k, k))
    d["token"] = [tokens[int(p)] if tokens is not None else "" for p in d["key_pos"]]
    scores = pd.DataFrame({"key_pos": row.keys, "score": row.scores})
    keys = [str(int(k)) for k in row.keys]
    width = max(200, min(CONTENT_WIDTH - 160, 14 * len(row.keys)))
    title = (t("{head}: query {query}'s score to each key, by the key side's kinds", head=row.head, query=row.query)
             if side == "key" else
             t("{head}: query {query}'s score to each key, by the query side's kinds", head=row.head, query=row.query))
    x = alt.X("key_pos:O", axis=discrete_axis(t("key position"), keys, width / max(len(keys), 1)))
    bars = alt.Chart(d, title=title).mark_bar().encode(
        x=x, y=alt.Y("sum(value):Q", title=t("score")),
        color=alt.Color("kind:N", sort=list(kinds.values()), scale=alt.Scale(domain=list(kinds.values())),
                        title=t("kind of part")),
        tooltip=[alt.Tooltip("key_pos:O", title=t("key position")), alt.Tooltip("token:N", title=t("token")),
                 alt.Tooltip("kind:N", title=t("kind")), alt.Tooltip("sum(value):Q", format="+.4f", title=t("term"))])
    ticks = alt.Chart(scores).mark_tick(color="black", thickness=2).encode(
        x=x, y="score:Q", tooltip=[alt.Tooltip("score:Q", format="+.4f", title=t("the model's score"))])
    return alt.layer(bars, ticks).properties(width=width, height=240, autosize=PAD)


def layer0_bars(cells: dict | pd.DataFrame, *, title: str = "") -> alt.LayerChart:
    """Layer 0's score split into token × token, token × position, position × token, position × position and
    biases: a dict from :func:`~attnkit.score_terms.layer0_split` (the five bars add up to the score, which the
    axis says), or the mean ± std table of :func:`~attnkit.score_terms.layer0_average` (error bars = one std
    over the prompts; the means add up to the mean score)."""
    if isinstance(cells, dict):
        d = pd.DataFrame({"cell": list(cells), "mean": list(cells.values()), "std": 0.0, "n": 1})
        axis = t("term of the score (the bars add up to {score})", score=f"{float(d['mean'].sum()):+.4f}")
    else:
        d = cells.copy()
        axis = t("mean term of the score (the bars add up to {score})", score=f"{float(d['mean'].sum()):+.4f}")
    d["lo"], d["hi"] = d["mean"] - d["std"].fillna(0), d["mean"] + d["std"].fillna(0)
    names = {c: t(c) for c in L0_CELLS}
    d["cell"] = d["cell"].map(lambda c: names.get(c, c))
    order = list(names.values())
    base = alt.Chart(d, title=title or t("layer 0: query side × key side"))
    bars = base.mark_bar().encode(
        y=alt.Y("cell:N", sort=order, axis=discrete_axis(None, order, 24, x=False, limit=200)),
        x=alt.X("mean:Q", title=axis),
        color=_diverging("mean", d["mean"], t("term")),
        tooltip=[alt.Tooltip("cell:N", title=t("cell")), alt.Tooltip("mean:Q", format="+.4f", title=t("term")),
                 alt.Tooltip("std:Q", format=".4f", title=t("std")), alt.Tooltip("n:Q", title=t("prompts"))])
    errs = base.mark_rule().encode(y=alt.Y("cell:N", sort=order, axis=discrete_axis(None, order, 24, x=False, limit=200)),
                                   x=alt.X("lo:Q", title=axis), x2="hi:Q")
    return alt.layer(bars, errs).properties(width=CONTENT_WIDTH - 420, height=24 * len(d), autosize=PAD)
