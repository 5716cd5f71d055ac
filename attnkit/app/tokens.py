"""Tokens on the page: spaces and line breaks made visible, axis labels, the prompt's tokens as plain text."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from .context import Context
from ..i18n import t
from ..pieces import show_spaces, token_labels
from .tables import show_table

__all__ = ["show_spaces", "token_labels", "tokens_inline", "show_tokens"]


def tokens_inline(tokens: list[str]) -> str:
    """The tokens as one wrapped line of text, separated by a thin bar (spaces and breaks made visible)."""
    return " │ ".join(show_spaces(t) for t in tokens)


def show_tokens(ctx: Context, ids: list[int] | None = None):
    """The tokens as wrapped plain text (never Markdown), with the table of positions and ids a click away.
    A character split over several byte-level tokens is drawn once (the table lists its pieces)."""
    ids = ctx.ids if ids is None else ids
    groups = ctx.model.token_groups(ids)
    inline = tokens_inline([g.text for g in groups])
    with st.container(border=True, height=min(320, 40 + 26 * (1 + len(inline) // 120))):
        st.text(inline)
    split = sum(g.size > 1 for g in groups)
    if split:
        st.caption(t("{n} character(s) are split over several tokens by the byte-level tokenizer: each is drawn "
                     "once above; the table lists every token, its bytes and its id.", n=f"{split:,}"))
    with st.expander(t("As a table (position, id, token)")):
        show_table(pd.DataFrame({"position": range(len(ids)), "id": ids,
                                 "token": [show_spaces(t) for t in ctx.model.token_texts(ids)],
                                 "bytes": [show_spaces(t) for t in ctx.model.token_strs(ids)]}),
                   hide_index=True, width="stretch", height=min(400, 38 + 35 * len(ids)))
