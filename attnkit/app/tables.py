"""Tables as shown: :func:`show_table` is ``st.dataframe`` with the column headers (and the cells of the columns
named) in the session's language — every table of pages/ and attnkit/app/ goes through it.

Library frames keep English column identifiers ("layer", "q·k·scale", "answer_rank"): CSV and JSON exports,
the CLI and the tests read them. :data:`TABLE_TEXT` is the one list of what a table may show translated —
each a catalog message whose id is the English text as it is in the frame, so in English nothing changes.
A header (or a chosen cell) that is not in it — a head name, a token, a number, a formula — is shown as it is.
Ids with ``{fields}`` match a whole cell (``"after {l}"`` matches ``"after 3"``)."""
from __future__ import annotations

import copy
import re
from collections import Counter

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

from ..i18n import DEFAULT, Message, current, msg
from .escaping import plain

__all__ = ["TABLE_TEXT", "shown", "shown_frame", "show_table"]

#: Every header and cell word a table shows translated (message id = the frame's English text).
TABLE_TEXT = (
    # tokens, positions, heads (Home's token table, Compare, Entropy, Step by step)
    msg("position"), msg("id"), msg("token"), msg("bytes"), msg("layer"), msg("head"), msg("weight"),
    msg("nearest head"), msg("distance to it"), msg("head_index"), msg("rank_in_row"), msg("top_key"),
    msg("slope"), msg("intercept"), msg("r2"),
    # Step by step: keys, heads, the check against the model, the KV cache, the symmetry of W_Q·W_Kᵀ
    msg("mask"), msg("q·k·scale"), msg("matrix"), msg("asymmetry"), msg("diagonal share"), msg("diagonal margin"),
    msg("step"), msg("entries"), msg("max |Δ|"), msg("max |capture|"), msg("q·k·scale (scores)"),
    msg("softmax weights (pattern)"), msg("future weights (pattern)"), msg("attn_out = merge(z)"),
    msg("mode"), msg("with KV cache"), msg("without cache"), msg("seconds"), msg("seconds, step 0"),
    msg("seconds, steps 1…"), msg("positions fed"),
    msg("K/V rows computed"), msg("predicts position"), msg("fed (cache)"), msg("fed (no cache)"), msg("reused rows"),
    msg("new rows"), msg("GFLOP (cache)"), msg("GFLOP (no cache)"), msg("seconds (cache)"), msg("seconds (no cache)"),
    # the "why" panel: the terms, their groups, layer 0's split
    msg("query part"), msg("key part"), msg("term"), msg("share of the score"), msg("query_group"), msg("key_group"),
    msg("embeddings"), msg("heads"), msg("MLPs"), msg("biases"), msg("embed"), msg("bias"), msg("cell"),
    msg("mean"), msg("std"), msg("token × token"), msg("token × position"), msg("position × token"),
    msg("position × position"),
    # Head effects and Circuits: logit lens, prompt sets, composition, path patching, discovered edges
    msg("row"), msg("after {l}"), msg("top_k"), msg("answer_rank"), msg("answer_prob"), msg("clean_minus_corrupted"),
    msg("clean"), msg("corrupted"), msg("same"), msg("sender"), msg("receiver"), msg("score"), msg("copying"),
    msg("qk_token"), msg("qk_positional"), msg("preferred_offset"), msg("logit_diff"), msg("change"),
    msg("normalised"), msg("attribution"),
    # Home's model card: how positions enter, the MLP's kind
    msg("learned"), msg("rotary"), msg("plain"), msg("gated"),
    # Ablations' claims
    msg("intervention"), msg("claim"), msg("verdict"), msg("effect"), msg("measured"),
    # Verify
    msg("quantity"), msg("attnkit error"), msg("HF error"), msg("allowed"), msg("float64 |Δ|"), msg("ok"),
    msg("final"), msg("generation"), msg("attention pattern"), msg("hidden state (relative)"),
    msg("final norm (relative)"), msg("logits (relative)"), msg("generation step logits (relative)"),
    # Training: a series' numbers per checkpoint
    msg("label"), msg("tokens_seen"), msg("induction"), msg("induction_head"), msg("induction_lo"),
    msg("induction_hi"), msg("previous_token"), msg("previous_token_head"), msg("first_token"), msg("entropy"),
    msg("icl"), msg("icl_early"), msg("icl_late"), msg("icl_se"), msg("icl_window"), msg("icl_early_positions"),
    msg("icl_late_positions"), msg("repeat_loss"), msg("k_composition"), msg("k_baseline"), msg("val_loss"),
    msg("train_loss"),
)

_EXACT = {m.id: m for m in TABLE_TEXT if "{" not in m.id}
_FIELD = re.compile(r"\{(\w+)\}")
_PATTERNS = [(re.compile("".join(f"(?P<{part}>.+?)" if i % 2 else re.escape(part)
                                 for i, part in enumerate(_FIELD.split(m.id)))), m.id)
             for m in TABLE_TEXT if "{" in m.id]


def shown(text):
    """A header or cell in this run's language: its :data:`TABLE_TEXT` message, else unchanged."""
    if not isinstance(text, str):
        return text
    key = str.__str__(text)
    if key in _EXACT:
        return _EXACT[key].render()
    for pattern, id in _PATTERNS:
        if hit := pattern.fullmatch(key):
            return Message(id, hit.groupdict()).render()
    return text


def _unique(new: list, old) -> list:
    """Translated labels, except where two would show the same (then both keep the frame's own)."""
    count = Counter(new)
    return [n if count[n] == 1 else o for n, o in zip(new, old)]


def shown_frame(df: pd.DataFrame, cells=(), index: bool = False) -> pd.DataFrame:
    """``df`` as shown: headers (and the index's and columns' names) translated; the string cells of the
    columns in ``cells`` too, and with ``index`` the index labels. English: ``df`` itself."""
    if current() == DEFAULT:
        return df
    out = df.copy()
    for c in cells:
        if c in out.columns:
            out[c] = out[c].map(shown)
    out.columns = pd.Index(_unique([shown(c) for c in out.columns], out.columns), name=shown(out.columns.name))
    if index:
        out.index = pd.Index(_unique([shown(i) for i in out.index], out.index), name=out.index.name)
    out.index.name = shown(out.index.name)
    return out


def _wrapped(on, df: pd.DataFrame, kwargs: dict):
    """``df`` as a static table whose long text wraps onto more lines (``st.table``), every header and text cell
    shown literally (:func:`~attnkit.app.escaping.plain`: st.table reads Markdown)."""
    out = df.map(lambda v: plain(v) if isinstance(v, str) else v)
    out.columns = [plain(c) for c in out.columns]
    return on.table(out, hide_index=kwargs.get("hide_index"))


def show_table(data, *, on=None, cells=(), index: bool = False, wrap: bool = False, **kwargs):
    """``st.dataframe(data, **kwargs)`` (``on``: a column or container instead of ``st``) with the headers in the
    session's language (:func:`shown_frame`; ``data``: a DataFrame, a Styler or a dict of columns).
    ``column_config`` and ``column_order`` name columns by their English identifiers, as the frame does.
    ``wrap``: a small table of sentences (a DataFrame), drawn whole with its text wrapped instead of cut at the
    column's edge."""
    on = st if on is None else on
    if wrap:
        return _wrapped(on, shown_frame(pd.DataFrame(data) if isinstance(data, dict) else data, cells, index), kwargs)
    if current() == DEFAULT:
        return on.dataframe(data, **kwargs)
    if isinstance(data, Styler):
        frame = shown_frame(data.data, cells, index)
        data = copy.copy(data)
        data.data, data.index, data.columns = frame, frame.index, frame.columns
    else:
        data = shown_frame(pd.DataFrame(data) if isinstance(data, dict) else data, cells, index)
    if kwargs.get("column_config"):
        kwargs["column_config"] = {shown(k): v for k, v in kwargs["column_config"].items()}
    if kwargs.get("column_order"):
        kwargs["column_order"] = [shown(c) for c in kwargs["column_order"]]
    return on.dataframe(data, **kwargs)
