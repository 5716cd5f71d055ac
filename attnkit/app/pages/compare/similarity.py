"""Compare heads' "Which heads attend alike?": every pair of heads (all, or one layer's) scored 1 − the
Jensen–Shannon distance between their patterns (:func:`attnkit.compare.head_similarity`), drawn in clustering
order."""
from __future__ import annotations

import streamlit as st

from attnkit import app as ui
from attnkit import compare
from attnkit.app.context import Context
from attnkit.app.pages.shared import labels as choice_labels
from attnkit.charts import heatmaps as hm
from attnkit.i18n import t

__all__ = ["SCOPES", "similarity_section"]

#: Which heads are compared: every head of the model, or the heads of one layer.
SCOPES = ["all heads", "the heads of one layer"]
shown = choice_labels.shown(choice_labels.COMPARE_NAMES)


@ui.budgeted
def _similarity(model: str, device: str, ids: tuple, heads: tuple, capture: tuple, _ctx):
    tr = ui.trace(_ctx, capture=capture, ids=list(ids))
    return compare.head_similarity(lambda l: tr["pattern", l][0], list(heads), len(ids))


def similarity_section(ctx: Context, capture: tuple, meta) -> None:
    """Which heads attend alike: 1 − Jensen–Shannon distance, in clustering order (``capture``: the page's
    trace, one cached run; ``meta(**extra)``: the downloads' notes)."""
    L, H, ids = ctx.model.config.n_layers, ctx.model.config.n_heads, ctx.ids
    T = len(ids)
    st.subheader(t("Which heads attend alike?"))
    st.caption(t("Similarity = 1 − Jensen–Shannon distance between two heads' patterns (base 2: 1 = identical "
                 "rows, 0 = disjoint), averaged over query rows 1…T−1 (row 0 sees only itself in every head). As on "
                 "the heatmaps, bright (yellow) means more. Heads are ordered by average-linkage clustering so "
                 "similar heads sit together."))
    if T < 2:
        st.info(t("The prompt needs at least two tokens."))
        return
    c1, c2 = st.columns([2, 1])
    scope = c1.radio(t("Compare"), SCOPES, key="cmp_scope", horizontal=True, format_func=shown)
    layer = c2.selectbox(t("Layer"), range(L), key="cmp_sim_layer", disabled=scope == SCOPES[0])
    layers = range(L) if scope == SCOPES[0] else [layer]
    heads = [(l, h) for l in layers for h in range(H)]
    res = _similarity(ctx.model_name, ctx.device, tuple(ids), tuple(heads), capture, ctx)  # ids: the BOS too
    N = len(heads)
    if len(res.rows) < res.n_rows_total:
        st.caption(t("{T} tokens and {N} heads: the distance is averaged over {rows} evenly spaced query rows "
                     "of the {all} (to keep this fast), not all of them.", T=T, N=N, rows=len(res.rows),
                     all=res.n_rows_total))
    if N <= hm.MARK_LIMIT:
        chart = hm.distance_chart(res.distance, res.names, res.order,
                                  title=t("Similarity (1 − JS distance), {n} heads in similarity order", n=N))
    else:
        title = t("Similarity (1 − JS distance), {n} heads in similarity order (image)", n=N)
        chart = hm.distance_image(res.distance, res.order, title=title)
        st.caption(t("{n} heads: drawn as an image; the order is listed below (position → head).", n=N))
    st.altair_chart(chart, width="content")
    with st.expander(t("The order, with each head's nearest neighbour")):
        ui.show_table(res.neighbours(), hide_index=True, width="stretch")
    order = " ".join(res.names[i] for i in res.order)
    ui.download_buttons(res.long_frame(), chart, "head_similarity", meta(rows_used=len(res.rows), order=order),
                        key="sim")
