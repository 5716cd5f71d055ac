"""Step by step's layer-0 split: a layer-0 score split into token × token, token × position, position × token
and position × position (the seeds' X·Xᵀ argument measured), on this prompt and averaged over the sidebar's
prompts (:func:`attnkit.score_terms.layer0_split`, :func:`attnkit.score_terms.layer0_average`)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attnkit import score_terms as terms_lib
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.pages.shared.splits import compute, seconds
from attnkit.app.tables import show_table
from attnkit.charts import score_terms as term_charts
from attnkit.i18n import t
from attnkit.standard import head_name

__all__ = ["layer0_section"]


def _layer0(w, ids: list[int], head: int, query: int) -> dict:
    row = terms_lib.score_terms(w, ids, 0, head, query)
    best = int(row.keys[int(np.argmax(row.scores))])
    return terms_lib.layer0_split(terms_lib.score_terms(w, ids, 0, head, query, best)) | {"key": best}


def layer0_section(ctx: Context, head: int, query: int) -> None:
    """Layer 0's score split into token × token, token × position, position × token, position × position —
    the seeds' X·Xᵀ argument measured — on this prompt and averaged over the sidebar's prompts."""
    st.subheader(t("Layer 0: the seeds' X·Xᵀ, measured"))
    ids, cfg, w = ctx.ids, ctx.model.config, ctx.model.weights
    name, tokens = head_name(0, head), ctx.tokens
    try:
        got = compute(ctx, "st_l0", (tuple(ids), head, query), t("Splitting {head}'s score", head=name),
                      lambda progress: (_layer0(w, ids, head, query),), seconds(cfg, len(ids), 0, 2))
    except terms_lib.ScoreTermsError as e:
        st.info(plain(str(e)), icon="ℹ️")
        return
    if got is None:
        return
    cells = dict(got[0])
    key = cells.pop("key")
    score = sum(cells.values())
    big = max(terms_lib.L0_CELLS[:4], key=lambda c: abs(cells[c]))
    st.text(t("In layer 0 a head reads only X = token embedding + position embedding, so its score is X·Xᵀ seen "
              "through W_Q·W_Kᵀ, in four blocks. {head}'s score from {q} ({qt!r}) to the key it scores highest, "
              "{k} ({kt!r}), is {score}: {big} gives {value} of it, token × token {tt}.", head=name, q=query,
              qt=tokens[query], k=key, kt=tokens[key], score=f"{score:+.3f}", big=big, value=f"{cells[big]:+.3f}",
              tt=f"{cells['token × token']:+.3f}"))
    st.altair_chart(term_charts.layer0_bars(cells, title=t("{head}: query {q} → key {k}", head=name, q=query,
                                                           k=key)), width="content")
    prompts = [p for p in (ctx.encode(text)[0] for text in ctx.prompts) if p]
    if len(prompts) < 2:
        st.caption(t("Upload a prompt set in the sidebar (a file of prompts) to see this split averaged over "
                     "them, with its spread."))
        return
    est = seconds(cfg, max(map(len, prompts)), 0, 2 * len(prompts))
    avg = compute(ctx, "st_l0_avg", (tuple(map(tuple, prompts)), head),
                  t("Layer 0's split over {n} prompts", n=len(prompts)),
                  lambda progress: (terms_lib.layer0_average(w, prompts, head, progress=progress),), est)
    if avg is None:
        return
    df = avg[0]
    st.altair_chart(term_charts.layer0_bars(df, title=t(
        "{head}: mean ± std over {n} prompts (each: its last token → the key it scores highest)", head=name,
        n=len(prompts))), width="content")
    show_table(df, cells=("cell",), hide_index=True, width="stretch")
