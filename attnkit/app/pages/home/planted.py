"""Home on a planted-circuit model: its card (summary and facts) and its stated circuit as tables."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from attnkit.app import plain, show_table
from attnkit import planted_files
from attnkit.app.planted import stated
from attnkit.i18n import t


def _role(role: str) -> str:
    return str(planted_files.ROLE_LABELS.get(role, role))


def _reads(receiver: str) -> str:
    """What a receiver takes from its senders (the edge's kind)."""
    part = receiver.split(".")[1] if "." in receiver else ""
    return {"q": t("query (Q-composition)"), "k": t("key (K-composition)"), "v": t("value (V-composition)"),
            "": t("the MLP's input") if receiver.startswith("MLP") else t("the unembedding")}.get(part, part)


def circuit_tables(circuit: planted_files.StatedCircuit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(heads with their roles, edges with what each receiver reads) of a stated circuit."""
    heads = pd.DataFrame({t("head"): list(circuit.heads),
                          t("role"): [_role(circuit.roles.get(h, "")) for h in circuit.heads]})
    edges = pd.DataFrame({t("sender"): [s for s, _ in circuit.edges], t("receiver"): [r for _, r in circuit.edges],
                          t("reads it through"): [_reads(r) for _, r in circuit.edges]})
    return heads, edges


def card_section(ctx) -> None:
    """Home: the planted model's card (its summary and facts) and its stated circuit as tables."""
    got = stated(ctx)
    if got is None:
        return
    st.subheader(t("Planted circuit (known by construction)"))  # internal text: the catalog's
    card, circuit = got.card, got.circuit
    if card.summary:
        st.write(plain(card.summary))
    shown = {"Mechanism": t("Mechanism"), "Distractors": t("Distractors")}
    for label, text in card.facts:
        if label in shown:
            st.caption(plain(f"{shown[label]}: {text}"))
    left, right = st.columns([1, 2])
    heads, edges = circuit_tables(circuit)
    left.caption(t("Stated heads"))  # internal text: the catalog's
    show_table(heads, on=left, hide_index=True, width="stretch")
    right.caption(t("Stated edges (named as path patching names them)"))  # internal text: the catalog's
    show_table(edges, on=right, hide_index=True, width="stretch")
    st.caption(plain(t("Task: {task}. Metric: {metric}", task=circuit.task, metric=circuit.metric or "—")))
    with st.expander(t("The whole model card")):  # internal text: the catalog's
        st.text(card.text or t("This folder has no MODEL_CARD.md."))
