"""Tokens on the page: spaces and line breaks made visible, axis labels, the prompt's tokens as plain text."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from .context import Context

def show_spaces(tok: str) -> str:
    """A token with its spaces and line breaks made visible (GPT-2 tokens often start with a space)."""
    return tok.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def token_labels(tokens: list[str]) -> list[str]:
    """Unique axis labels 'position:token' (tokens repeat; positions don't)."""
    return [f"{i}:{show_spaces(t)}" for i, t in enumerate(tokens)]


def tokens_inline(tokens: list[str]) -> str:
    """The tokens as one wrapped line of text, separated by a thin bar (spaces and breaks made visible)."""
    return " │ ".join(show_spaces(t) for t in tokens)


def show_tokens(ctx: Context, ids: list[int] | None = None):
    """The tokens as wrapped plain text (never Markdown), with the table of positions and ids a click away."""
    ids = ctx.ids if ids is None else ids
    toks = ctx.model.token_strs(ids)
    with st.container(border=True, height=min(320, 40 + 26 * (1 + len(tokens_inline(toks)) // 120))):
        st.text(tokens_inline(toks))
    with st.expander("As a table (position, id, token)"):
        st.dataframe(pd.DataFrame({"position": range(len(ids)), "id": ids, "token": [show_spaces(t) for t in toks]}),
                     hide_index=True, width="stretch", height=min(400, 38 + 35 * len(ids)))
