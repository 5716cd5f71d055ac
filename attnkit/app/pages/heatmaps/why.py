"""Why does this query attend to this key? Heatmaps' panel below the one-head chart: a cell clicked on the chart,
or query and key picked in two boxes, and the score split into query part × key part, against the row's
runner-up key, with links to the heads behind the largest terms.

The numbers are :mod:`attnkit.score_terms`'s, the same as ``python -m attnkit why`` prints for the same model,
tokens, head, query and key (the JSON export here has the CLI's fields); :mod:`..shared.splits` runs them at
once or as a job, by their estimated cost.
"""
from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from attnkit import examples
from attnkit import score_terms as terms_lib
from attnkit.charts import score_terms as term_charts
from attnkit.i18n import t
from attnkit.standard import head_name, parse_head
from attnkit.app.clicks import new_click
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.exports import json_bytes
from attnkit.app.navigation import open_head, open_page
from attnkit.app.pages.shared.splits import compute, seconds
from attnkit.app.tables import show_table
from attnkit.model import Trace

__all__ = ["CHART_KEY", "SELECT", "Q_KEY", "K_KEY", "draw_clickable", "panel", "pair_inputs"]

#: The one-head chart's key and its click selection (fields: the query and key labels of the cell).
CHART_KEY, SELECT = "hm_cell", "cell"
#: Session keys of the panel's two boxes (the page state's ``why_q``, ``why_k``: a shared link keeps them), and of
#: its whole-row switch and grouping.
Q_KEY, K_KEY, ROW_KEY, GROUP_KEY = "hm_why_q", "hm_why_k", "hm_why_row", "hm_why_by"
#: Heads offered as links on each side (the largest in size).
LINKS = 4


# ----------------------------------------------------------------------------- picking a cell

def draw_clickable(chart: alt.Chart) -> None:
    """The one-head heatmap with a click on a cell choosing its query and key for the panel below."""
    pick = alt.selection_point(name=SELECT, fields=["query", "key"], on="click", clear=False)
    st.altair_chart(chart.add_params(pick), width="content", on_select="rerun", selection_mode=SELECT,
                    key=CHART_KEY)


def _read_click(labels: list[str]) -> None:
    """A new click on a cell sets the two boxes (before they are drawn in this run)."""
    where = {label: i for i, label in enumerate(labels)}
    for point in new_click(CHART_KEY, SELECT)[-1:]:
        q, k = where.get(point.get("query")), where.get(point.get("key"))
        if q is not None and k is not None:
            st.session_state.update({Q_KEY: q, K_KEY: k})


def pair_inputs(T: int, labels: list[str]) -> tuple[int | None, int | None]:
    """The query and key boxes (a click on a cell fills them); (None, None) until both are picked."""
    _read_click(labels)
    opts = [None] + list(range(T))
    for key in (Q_KEY, K_KEY):
        if st.session_state.get(key) not in opts:
            st.session_state[key] = None
    c1, c2 = st.columns(2)
    fmt = lambda i: t("(pick a token)") if i is None else labels[i]     # noqa: E731
    q = c1.selectbox(t("Query token (attending)"), opts, key=Q_KEY, format_func=fmt)
    k = c2.selectbox(t("Key token (attended to)"), opts, key=K_KEY, format_func=fmt)
    return q, k


# ----------------------------------------------------------------------------- the panel

def panel(ctx: Context, ids: list[int], layer: int, head: int, trace: Trace, labels: list[str]) -> None:
    """Heatmaps' "Why does this query attend to this key?" below the one-head chart. ``trace``: the page's run of
    the prompt, with its ``scores`` (the runner-up key is read from them)."""
    cfg, T, name = ctx.model.config, len(ids), head_name(layer, head)
    st.subheader(t("Why does this query attend to this key?"))
    q, k = pair_inputs(T, labels)
    if q is None or k is None:
        st.caption(t("Click a cell of the chart above, or pick a query and a key: the score is split exactly into "
                     "what the query side and the key side are made of (embeddings, each earlier head, each MLP, "
                     "biases), each norm's scale held at its value on this prompt."))
        return
    reason = terms_lib.refusal(cfg, T, layer, head, q, k)
    if reason is not None:
        st.info(plain(reason), icon="🚫")
        return
    against = terms_lib.runner_up(trace, cfg, layer, head, q, k)
    w = ctx.model.weights

    def split(progress):
        def half(first: bool):        # the key's split, then the contrast's: one bar over both
            if progress is None:
                return None
            return lambda done, total: progress(done + (0 if first else total), 2 * total)
        main = terms_lib.score_terms(w, ids, layer, head, q, k, progress=half(True))
        vs = None if against is None else terms_lib.score_terms(w, ids, layer, head, q, k, against, half(False))
        return main, vs

    got = compute(ctx, "hm_why", (tuple(ids), layer, head, q, k, against),
                  t("Splitting {head}'s score from {q} to {k}", head=name, q=q, k=k), split,
                  seconds(cfg, T, layer, 2, row=False))
    if got is None:
        return
    tokens = ctx.model.token_strs(ids)
    main, vs = got
    _show_split(ctx, main, tokens, ids)
    if vs is not None:
        _show_contrast(vs, tokens)
    _links(ctx, main, layer, head)
    _whole_row(ctx, ids, layer, head, q, tokens)


def _show_split(ctx: Context, main: terms_lib.ScoreTerms, tokens: list[str], ids: list[int]) -> None:
    m1, m2, m3 = st.columns(3)
    m1.metric(t("The model's score"), f"{main.score:+.4f}")
    m2.metric(t("Sum of the terms"), f"{main.total:+.4f}")
    m3.metric(t("Terms (query part × key part)"), f"{main.values.size:,}")
    st.text(str(terms_lib.explain(main, tokens)))
    st.altair_chart(term_charts.terms_grid(main, title=t(
        "{head}: score({q}, {k}) = {score}, split into query part × key part", head=main.head, q=main.query,
        k=main.key, score=f"{main.score:+.4f}")), width="content")
    top = terms_lib.top_terms(main, 15)
    show_table(top.rename(columns={"query": "query part", "key": "key part", "value": "term",
                                   "share": "share of the score"}),
               hide_index=True, width="stretch",
               column_config={"term": st.column_config.NumberColumn(format="%+.4f"),
                              "share of the score": st.column_config.NumberColumn(format="%+.3f")})
    by = st.radio(t("Group the terms by"), ["kind", "layer"], key=GROUP_KEY, horizontal=True,
                  format_func=lambda b: t("kind (embeddings, heads, MLPs, biases)") if b == "kind" else t("layer"))
    table = terms_lib.grouped(main, by).pivot_table(index="query_group", columns="key_group", values="value",
                                                    sort=False, aggfunc="sum")
    st.caption(t("Rows: the query side's groups; columns: the key side's. Every cell is a sum of terms."))
    show_table(table.style.format("{:+.4f}"), index=True, width="stretch")
    out = {"model": ctx.model_name, "tokens": tokens, "ids": list(ids), **main.to_json()}
    st.download_button(t("Every term (JSON, as the CLI's --json)"), json_bytes(out),
                       file_name=f"why_{main.head}_q{main.query}_k{main.key}.json", mime="application/json",
                       key="hm_why_json", on_click="ignore")


def _show_contrast(vs: terms_lib.ScoreTerms, tokens: list[str]) -> None:
    st.markdown("**" + t("Against the row's runner-up key") + "**")
    st.caption(t("What a softmax reads is the difference of two scores: here the chosen key against the other "
                 "key this query scores highest, split the same way."))
    st.text(str(terms_lib.explain(vs, tokens)))
    st.altair_chart(term_charts.side_bars(vs, "key"), width="content")


# ----------------------------------------------------------------------------- links to other pages

def _heads(series: pd.Series) -> list[str]:
    order = series.abs().sort_values(ascending=False).index
    return [p for p in order if terms_lib.part_kind(p) == "heads"][:LINKS]


def _circuits_pair(text: str) -> dict:
    """Circuits' example whose clean prompt is this prompt (its pair then comes along), else nothing."""
    for name, ex in examples.EXAMPLES.items():
        if ex["clean"] == text:
            return {"example": name, **ex}
    return {}


def _links(ctx: Context, main: terms_lib.ScoreTerms, layer: int, head: int) -> None:
    """Each large head term's pattern (Heatmaps), and each key-side head's path patch into this head's key
    (Circuits): the prompt-level term beside the causal check."""
    key_heads, query_heads = _heads(main.key_side), _heads(main.query_side)
    if not key_heads and not query_heads:
        return
    st.markdown("**" + t("The heads behind the largest terms") + "**")
    st.caption(t("Each head's side total: its part of the score summed over every part of the other side."))
    pair = _circuits_pair(ctx.text)
    receiver = f"{head_name(layer, head)}.k"
    for side, heads in ((t("key side"), key_heads), (t("query side"), query_heads)):
        cols = st.columns(1 + LINKS)
        cols[0].caption(plain(side))
        for col, part in zip(cols[1:], heads):
            pl, ph = parse_head(part)
            value = (main.key_side if heads is key_heads else main.query_side)[part]
            col.button(plain(t("{head} (side total {value}): its pattern", head=part, value=f"{value:+.3f}")),
                       key=f"hm_why_open_{side}_{part}", on_click=open_head, args=(pl, ph))
            if heads is key_heads:
                col.button(plain(t("Path patch {sender} → {receiver}", sender=part, receiver=receiver)),
                           key=f"hm_why_path_{part}", on_click=open_page, args=("circuits",),
                           kwargs=dict(recv_layer=layer, recv_head=head, recv_input="k", sender=part, **pair))
    st.caption(t("Path patching runs on Circuits' prompt pair (a clean and a corrupted prompt): ")
               + (t("this prompt is the clean prompt of its example, which comes along.") if pair else
                  t("this prompt is none of its examples' clean prompts, so Circuits keeps its own pair.")))


def _whole_row(ctx: Context, ids: list[int], layer: int, head: int, q: int, tokens: list[str]) -> None:
    if not st.checkbox(plain(t("Split the whole row: every key query {q} sees, by kind of part", q=q)), key=ROW_KEY):
        return
    w, cfg = ctx.model.weights, ctx.model.config
    row = compute(ctx, "hm_why_row", (tuple(ids), layer, head, q),
                  t("Splitting {head}'s row {q}", head=head_name(layer, head), q=q),
                  lambda progress: (terms_lib.score_terms(w, ids, layer, head, q, progress=progress),),
                  seconds(cfg, len(ids), layer))
    if row is not None:
        st.altair_chart(term_charts.row_by_kind(row[0], tokens), width="content")
        st.caption(t("Bars: each key's score split by the kind of part its key carries; tick: the model's score."))
