"""The model's next-token top k after the sidebar prompt (Home and Step by step), and probabilities as
percentages the way the learner pages print them."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit import i18n
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.tables import show_table
from attnkit.app.tokens import show_spaces
from attnkit.attribution import next_tokens

__all__ = ["SMALLEST", "percent", "decoder", "next_token_frame", "next_token_table", "predictions", "pieces_note"]


#: Below this percentage a probability reads "< 0.001 %" (not 2e-06 %).
SMALLEST = 0.001


def percent(p: float) -> str:
    """A probability as a percentage, the one formatter of the learner pages: two decimals (0.25 %), one
    significant digit below 0.01 % (0.002 %), "< 0.001 %" below that, "0.00 %" for exactly 0."""
    x = 100 * float(p)
    if x == 0 or x >= 0.01:
        return f"{x:.2f} %"
    if x < SMALLEST:
        return f"< {SMALLEST:g} %"
    return f"{float(f'{x:.1g}'):g} %"


def decoder(model):
    """token id -> its text (spaces kept), for :func:`attnkit.attribution.next_tokens`."""
    return lambda i: model.token_strs([int(i)])[0]


def next_token_frame(preds) -> pd.DataFrame:
    """The top-k predictions as a table: rank, token (spaces made visible; a byte piece of a character as the
    character it starts, ``烤[1/2]``), probability."""
    return pd.DataFrame({i18n.t("rank"): range(1, len(preds) + 1),
                         i18n.t("next token"): [show_spaces(p.shown) for p in preds],
                         i18n.t("probability"): [percent(p.prob) for p in preds]})


def next_token_table(ctx: Context, k: int = 5) -> list | None:
    """The model's top ``k`` next tokens after the sidebar prompt, with their probabilities (a table);
    returns the predictions (attnkit.attribution.next_tokens), or None when the prompt has no tokens."""
    ids = ctx.ids
    if not ids:
        return None
    preds = predictions(ctx.model, ids, k)
    st.subheader(i18n.t("What the model predicts next"))
    st.caption(i18n.t("The {k} most likely next tokens after the prompt ({model}), softmax of the last position's "
                      "logits.", k=len(preds), model=plain(ctx.model_name)))
    show_table(next_token_frame(preds), hide_index=True, width="content")
    pieces_note(preds)
    return preds


def predictions(model, ids: list[int], k: int = 5) -> list:
    """The top ``k`` next tokens, a byte piece of a character finished as the model would finish it."""
    return next_tokens(model.weights, ids, decoder(model), k=k, token_bytes=model.token_bytes)


def pieces_note(preds) -> None:
    """One line under a next-token table that holds a byte piece of a character: what ``烤[1/2]`` means."""
    split = [p for p in preds if p.char is not None]
    if split:
        st.caption(i18n.t("{shown}: the token is only the first bytes of a character ({token}); the character shown "
                          "is how the model itself finishes it (its likeliest next token). The probability is the "
                          "first token's.", shown=plain(show_spaces(split[0].shown)), token=plain(split[0].token)))
