"""Charts of "why does this query attend to this key" (Altair, no Streamlit): the query-part × key-part grid,
the largest terms, one side's parts, a whole query row split by kind, and layer 0's token/position split.

Values are shares of an attention score (or of a contrast of two scores): blue negative, white 0, red
positive, on a symmetric scale. Parts beyond the largest ``max_parts`` of a side are summed into one
"other …" row or column, so every grid still adds up to the score.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..i18n import t
from ..score_terms import KINDS, L0_CELLS, RowTerms, ScoreTerms, part_kind, top_terms
from .effects import _diverging
from .heatmaps import CONTENT_WIDTH, PAD

__all__ = ["grid_frame", "terms_grid", "top_terms_bars", "side_bars", "row_by_kind", "layer0_bars"]

OTHER_QUERY, OTHER_KEY = "other query parts", "other key parts"


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
    rows_q = [(st.query_parts[i], [i]) for i in qk] + ([(OTHER_QUERY, qr)] if qr else [])
    rows_k = [(st.key_parts[j], [j]) for j in kk] + ([(OTHER_KEY, kr)] if kr else [])
    recs = []
    for qn, qi in rows_q:
        block = st.values[qi]
        for kn, kj in rows_k:
            v = float(block[:, kj].sum())
            recs.append({"query": qn, "key": kn, "value": v, "share": v / st.score if st.score else np.nan,
                         "query_kind": part_kind(qn) if qn != OTHER_QUERY else "other",
                         "key_kind": part_kind(kn) if kn != OTHER_KEY else "other"})
    return pd.DataFrame(recs)


def _what(st: ScoreTerms) -> str:
    if st.against is not None:
        return f"score({st.query},{st.key}) − score({st.query},{st.against})"
    return f"score({st.query},{st.key})"


def terms_grid(st: ScoreTerms, max_parts: int = 30, *, title: str | None = None) -> alt.Chart:
    """Query part (rows) × key part (columns): each term's value; the tooltip gives both parts, the value and its
    share of the score."""
    d = grid_frame(st, max_parts)
    qs, ks = list(dict.fromkeys(d["query"])), list(dict.fromkeys(d["key"]))
    cell = max(8, min(22, (CONTENT_WIDTH - 160) // max(len(ks), 1)))
    title = title or f"{st.head}: {_what(st)} = {st.score:+.4f}, split into query part × key part"
    tips = [alt.Tooltip("query:N", title="query part"), alt.Tooltip("key:N", title="key part"),
            alt.Tooltip("value:Q", format="+.4f"), alt.Tooltip("share:Q", format="+.1%", title=t("share of the score"))]
    return alt.Chart(d, title=title).mark_rect().encode(
        x=alt.X("key:N", sort=ks, title="key side (what the key carries)"),
        y=alt.Y("query:N", sort=qs, title="query side (what the query reads with)"),
        color=_diverging("value", d["value"], "term"), tooltip=tips,
    ).properties(width=cell * len(ks), height=cell * len(qs), autosize=PAD)


def top_terms_bars(st: ScoreTerms, n: int = 15, *, title: str | None = None) -> alt.Chart:
    """The ``n`` largest terms as horizontal bars, labelled "query part × key part"."""
    d = top_terms(st, n)
    d["term"] = d["query"] + " × " + d["key"]
    title = title or f"{st.head}: the {len(d)} largest of {st.values.size} terms of {_what(st)} = {st.score:+.4f}"
    return alt.Chart(d, title=title).mark_bar().encode(
        y=alt.Y("term:N", sort=list(d["term"]), title=None),
        x=alt.X("value:Q", title="term"),
        color=_diverging("value", d["value"], "term"),
        tooltip=[alt.Tooltip("query:N", title="query part"), alt.Tooltip("key:N", title="key part"),
                 alt.Tooltip("value:Q", format="+.4f"), alt.Tooltip("share:Q", format="+.1%", title="share")],
    ).properties(width=CONTENT_WIDTH - 260, height=18 * len(d), autosize=PAD)


def side_bars(st: ScoreTerms, side: str = "key", n: int = 15) -> alt.Chart:
    """One side's parts (summed over the other side), the ``n`` largest in size."""
    s = st.key_side if side == "key" else st.query_side
    s = s.reindex(s.abs().sort_values(ascending=False).index[:n])
    d = pd.DataFrame({"part": list(s.index), "value": s.to_numpy(), "kind": [part_kind(p) for p in s.index]})
    return alt.Chart(d, title=f"{st.head}: the {side} side's parts ({_what(st)})").mark_bar().encode(
        y=alt.Y("part:N", sort=list(d["part"]), title=f"{side} part"), x=alt.X("value:Q", title=t("share of the score")),
        color=_diverging("value", d["value"], "value"),
        tooltip=["part:N", "kind:N", alt.Tooltip("value:Q", format="+.4f")],
    ).properties(width=CONTENT_WIDTH - 260, height=18 * len(d), autosize=PAD)


def row_by_kind(row: RowTerms, tokens: list[str] | None = None, side: str = "key") -> alt.LayerChart:
    """Every key the query sees: its score split by the kind of part (embeddings / heads / MLPs / biases) on
    one side, as stacked bars (positive up, negative down), with the model's score as a tick."""
    d = row.frame(side).groupby(["key_pos", "kind"], as_index=False)["value"].sum()
    d["token"] = [tokens[int(p)] if tokens is not None else "" for p in d["key_pos"]]
    scores = pd.DataFrame({"key_pos": row.keys, "score": row.scores})
    base = alt.Chart(d, title=f"{row.head}: query {row.query}'s score to each key, by the {side} side's kinds")
    bars = base.mark_bar().encode(
        x=alt.X("key_pos:O", title="key position"), y=alt.Y("sum(value):Q", title="score"),
        color=alt.Color("kind:N", sort=list(KINDS), scale=alt.Scale(domain=list(KINDS))),
        tooltip=["key_pos:O", "token:N", "kind:N", alt.Tooltip("sum(value):Q", format="+.4f", title="value")])
    ticks = alt.Chart(scores).mark_tick(color="black", thickness=2).encode(
        x="key_pos:O", y="score:Q", tooltip=[alt.Tooltip("score:Q", format="+.4f", title="the model's score")])
    width = max(200, min(CONTENT_WIDTH - 160, 14 * len(row.keys)))
    return alt.layer(bars, ticks).properties(width=width, height=240, autosize=PAD)


def layer0_bars(cells: dict | pd.DataFrame, *, title: str = "") -> alt.LayerChart:
    """Layer 0's score split into token × token, token × position, position × token, position × position and
    biases: a dict from :func:`~attnkit.score_terms.layer0_split`, or the mean ± std table of
    :func:`~attnkit.score_terms.layer0_average` (error bars = one std over the prompts)."""
    if isinstance(cells, dict):
        d = pd.DataFrame({"cell": list(cells), "mean": list(cells.values()), "std": 0.0, "n": 1})
    else:
        d = cells.copy()
    d["lo"], d["hi"] = d["mean"] - d["std"].fillna(0), d["mean"] + d["std"].fillna(0)
    base = alt.Chart(d, title=title or "layer 0: query side × key side")
    bars = base.mark_bar().encode(
        y=alt.Y("cell:N", sort=list(L0_CELLS), title=None), x=alt.X("mean:Q", title=t("share of the score")),
        color=_diverging("mean", d["mean"], "value"),
        tooltip=["cell:N", alt.Tooltip("mean:Q", format="+.4f"), alt.Tooltip("std:Q", format=".4f"), "n:Q"])
    errs = base.mark_rule().encode(y=alt.Y("cell:N", sort=list(L0_CELLS)), x="lo:Q", x2="hi:Q")
    return alt.layer(bars, errs).properties(width=CONTENT_WIDTH - 300, height=24 * len(d), autosize=PAD)
