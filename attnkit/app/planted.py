"""Planted-circuit models in the dashboard: a model whose folder states its circuit (``CIRCUIT.json``, read by
:func:`attnkit.calibration.read_circuit`, the one reader) gets its card and stated circuit on Home, a line in
the sidebar, and on Circuits the stated circuit beside the discovered one (found / missed / extra edges,
:func:`attnkit.calibration.compare_circuits`; the graph's edges and marks from
:func:`attnkit.calibration.marked_edges`)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from .. import calibration
from ..charts.circuits import mark_labels
from ..i18n import t
from ..loading import PLANTED_MODELS
from .caches import budgeted
from .escaping import plain, show_error
from .tables import show_table

__all__ = ["Stated", "stated", "sidebar_note", "card_section", "Compared", "compare_section", "mark_labels"]


@dataclass(frozen=True)
class Stated:
    """A loaded model's stated circuit and its card (:func:`attnkit.calibration.read_card`)."""
    folder: str
    circuit: dict
    card: dict


@budgeted
def _read(source: str) -> tuple[Stated | None, str | None]:
    folder = calibration.planted_folder(source)
    if folder is None:
        return None, None
    try:
        return Stated(str(folder), calibration.read_circuit(folder), calibration.read_card(folder)), None
    except ValueError as e:
        return None, str(e)


def stated(ctx, quiet: bool = False) -> Stated | None:
    """The loaded model's stated circuit, or None (not a planted model; a malformed CIRCUIT.json says why once,
    unless ``quiet``)."""
    got, error = _read(str(ctx.model.source))
    if error and not quiet:
        show_error(error)
    return got


def sidebar_note(name) -> None:
    """Under the model picker: a planted model says what it is and where its circuit is shown."""
    if name in PLANTED_MODELS:
        note = t("🧪 A planted-circuit model: its mechanism is set by hand and stated in CIRCUIT.json. Home "
                 "shows its card and circuit; Circuits compares what discovery finds with it.")
        st.caption(note)  # internal text: the catalog's


def _role(role: str) -> str:
    return {"previous token": t("previous token"), "induction": t("induction")}.get(role, role)


def _reads(receiver: str) -> str:
    """What a receiver takes from its senders (the edge's kind)."""
    part = receiver.split(".")[1] if "." in receiver else ""
    return {"q": t("query (Q-composition)"), "k": t("key (K-composition)"), "v": t("value (V-composition)"),
            "": t("the MLP's input") if receiver.startswith("MLP") else t("the unembedding")}.get(part, part)


def circuit_tables(circuit: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(heads with their roles, edges with what each receiver reads) of a stated circuit."""
    roles = circuit.get("roles", {})
    heads = pd.DataFrame({t("head"): circuit["heads"], t("role"): [_role(roles.get(h, "")) for h in circuit["heads"]]})
    edges = pd.DataFrame({t("sender"): [e["sender"] for e in circuit["edges"]],
                          t("receiver"): [e["receiver"] for e in circuit["edges"]],
                          t("reads it through"): [_reads(e["receiver"]) for e in circuit["edges"]]})
    return heads, edges


def card_section(ctx) -> None:
    """Home: the planted model's card (its summary and facts) and its stated circuit as tables."""
    got = stated(ctx)
    if got is None:
        return
    st.subheader(t("Planted circuit (known by construction)"))  # internal text: the catalog's
    card, circuit = got.card, got.circuit
    if card["summary"]:
        st.write(plain(card["summary"]))
    shown = {"Mechanism": t("Mechanism"), "Distractors": t("Distractors")}
    for label, text in card["facts"]:
        if label in shown:
            st.caption(plain(f"{shown[label]}: {text}"))
    left, right = st.columns([1, 2])
    heads, edges = circuit_tables(circuit)
    left.caption(t("Stated heads"))  # internal text: the catalog's
    show_table(heads, on=left, hide_index=True, width="stretch")
    right.caption(t("Stated edges (named as path patching names them)"))  # internal text: the catalog's
    show_table(edges, on=right, hide_index=True, width="stretch")
    st.caption(plain(t("Task: {task}. Metric: {metric}", task=circuit.get("task", "—"), metric=circuit.get("metric", "—"))))
    with st.expander(t("The whole model card")):  # internal text: the catalog's
        st.text(card["text"] or t("This folder has no MODEL_CARD.md."))


@dataclass
class Compared:
    """What the circuit graph draws: the discovered edges, and on a planted model the missed ones too, with each
    edge's mark (:meth:`chart_args` for :func:`attnkit.charts.circuits.circuit_graph`)."""
    edges: list
    marks: dict | None = None
    labels: dict | None = None

    def chart_args(self) -> dict:
        return {} if self.marks is None else {"marks": self.marks, "mark_labels": self.labels,
                                              "mark_title": t("stated circuit")}


def _metrics(cmp: dict) -> None:
    cols = st.columns(5)
    for col, label, value in zip(cols, (t("Stated edges found"), t("Stated edges missed"), t("Extra edges"),
                                        t("Precision"), t("Recall")),
                                 (len(cmp["found"]), len(cmp["missed"]), len(cmp["extra"]),
                                  cmp["precision"], cmp["recall"])):
        col.metric(label, f"{value:.2f}" if isinstance(value, float) and value == value else
                   ("—" if isinstance(value, float) else f"{value}"))


def compare_section(ctx, found) -> Compared:
    """Circuits, on a planted model: the stated circuit beside the discovered one (``found``: a
    :class:`attnkit.circuits.discover.Circuit`) — counts, precision and recall, and the edges with their marks.
    Returns what the graph draws (on any other model: the discovered edges, unmarked)."""
    got = stated(ctx, quiet=True)
    if got is None:
        return Compared(list(found.edges))
    group = ctx.model.config.group
    cmp = calibration.compare_circuits(got.circuit["edges"], found.edges, group)
    drawn, marks = calibration.marked_edges(got.circuit["edges"], found, group)
    st.markdown("**" + t("Stated circuit (CIRCUIT.json) beside the discovered one") + "**")  # internal text: the catalog's
    _metrics(cmp)
    if group > 1:
        note = t("Grouped-query attention: the .k/.v receivers of query heads that share a key/value head count "
                 "as one edge ({group} query heads per key/value head).", group=group)
        st.caption(note)  # internal text: the catalog's
    scores = {(s, r): a for s, r, a in found.ranked}
    labels = mark_labels()
    table = pd.DataFrame([(s, r, labels[m], scores.get((s, r), float("nan"))) for (s, r), m in marks.items()],
                         columns=[t("sender"), t("receiver"), t("stated circuit"), t("attribution")])
    left, right = st.columns(2)
    is_extra = table[t("stated circuit")] == labels["extra"]
    left.caption(t("Stated edges: found or missed"))  # internal text: the catalog's
    show_table(table[~is_extra], on=left, hide_index=True, width="stretch")
    right.caption(t("Discovered edges the stated circuit does not have"))  # internal text: the catalog's
    show_table(table[is_extra], on=right, hide_index=True, width="stretch")
    return Compared(drawn, marks, labels)
