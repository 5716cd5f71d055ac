"""The softmax calculator (Step by step, and the Glossary beside its softmax entry): type the scores an article
gives and check its percentages; :mod:`attnkit.calculator` does the arithmetic in float64."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit.app.escaping import show_error
from attnkit.app.pages.shared.next_token import percent
from attnkit.app.tables import show_table
from attnkit.calculator import CalculatorError, calculate
from attnkit.i18n import t

__all__ = ["SEED_SCORES", "calculator_frame", "softmax_calculator"]

#: The seed's example scores ("softmax turns 9, 3, −2 into 60 %, 30 %, 10 %" — it does not).
SEED_SCORES = "9, 3, -2"


def calculator_frame(res) -> pd.DataFrame:
    """One row per score: the score, softmax(s/T) and softmax(s/(√d·T)) as percentages (the calculator's table)."""
    with_d = t("softmax(s / (√d·T)), d = {d}", d=res.d)
    return pd.DataFrame([{t("score"): f"{r['score']:g}", t("softmax(s / T)"): percent(r["softmax"]),
                          **({} if r["softmax_scaled"] is None else {with_d: percent(r["softmax_scaled"])})}
                         for r in res.rows()])


def softmax_calculator(key: str = "st_calc", d: int = 64):
    """Type scores, see their softmax with and without 1/√d at a temperature (attnkit.calculator does the
    arithmetic, in float64). Returns the :class:`attnkit.calculator.Softmax`, or None after an error line."""
    st.subheader(t("Softmax calculator"))
    st.caption(t("Type the scores an article gives and check its percentages: softmax turns scores s into "
                 "weights exp(s/T) / Σ exp(s/T); attention divides the scores by √d first."))
    c1, c2, c3 = st.columns([3, 1, 1])
    text = c1.text_input(t("Scores (separated by commas)"), value=SEED_SCORES, key=f"{key}_scores")
    dim = c2.number_input(t("d (the head dimension)"), 1, 1 << 16, value=int(d), key=f"{key}_d",
                          help=t("The 1/√d column divides every score by √d before the softmax."))
    temp = c3.number_input(t("Temperature T"), 0.01, 100.0, value=1.0, step=0.1, key=f"{key}_temp",
                           help=t("Above 1 the weights spread out, below 1 they sharpen."))
    try:
        res = calculate(text, d=int(dim), temperature=float(temp))
    except CalculatorError as e:
        show_error(str(e))
        return None
    show_table(calculator_frame(res), hide_index=True, width="stretch")
    st.caption(t("The weights of each column add up to 100 %. Computed in float64 with the largest score "
                 "subtracted first, so no score is too large."))
    return res
