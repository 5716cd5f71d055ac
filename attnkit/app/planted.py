"""Planted-circuit models in the dashboard: a model whose folder states its circuit (``CIRCUIT.json``, read by
:func:`attnkit.planted_files.read_circuit`, the one reader, checked against the loaded model) gets its card and
stated circuit on Home, a line in the sidebar, and on Circuits the stated circuit beside the discovered one (found /
missed / extra edges, :func:`attnkit.calibration.compare_circuits`; the graph's marks from
:func:`attnkit.calibration.edge_marks`). A file that cannot be used is one line on the page, never a traceback."""
from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from .. import calibration, planted_files
from ..i18n import t
from ..loading import PLANTED_MODELS
from .caches import budgeted
from .escaping import plain, show_error
from .tables import show_table

__all__ = ["Stated", "stated", "sidebar_note", "card_section", "Compared", "compare_section", "mark_labels"]


@dataclass(frozen=True)
class Stated:
    """A loaded model's stated circuit and its card (:func:`attnkit.planted_files.read_card`)."""
    folder: str
    circuit: planted_files.StatedCircuit
    card: planted_files.ModelCard


def _stamps(folder) -> tuple:
    """The two files' (inode, size, change time): a file edited or replaced is read again."""
    out = []
    for name in (planted_files.CIRCUIT_FILE, planted_files.CARD_FILE):
        try:
            st_ = os.stat(folder / name)
            out.append((st_.st_ino, st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


@budgeted
def _read(source: str, shape: tuple, stamps: tuple, _config=None) -> tuple[Stated | None, tuple]:
    """(the stated circuit and card, or None; the reasons a file could not be used, as messages rendered when
    shown). A card that cannot be read leaves the circuit shown; a circuit that cannot leaves nothing."""
    folder = planted_files.planted_folder(source)
    if folder is None:
        return None, ()
    try:
        circuit = planted_files.read_circuit(folder, _config)
    except ValueError as e:
        return None, (e.args[0],)
    try:
        return Stated(str(folder), circuit, planted_files.read_card(folder)), ()
    except ValueError as e:
        return Stated(str(folder), circuit, planted_files.ModelCard()), (e.args[0],)


def stated(ctx) -> Stated | None:
    """The loaded model's stated circuit, or None (not a planted model); a CIRCUIT.json or MODEL_CARD.md that
    cannot be used — malformed, naming heads the model lacks, a FIFO — says why in one line."""
    source, cfg = str(ctx.model.source), ctx.model.config
    folder = planted_files.planted_folder(source)
    if folder is None:
        return None
    got, errors = _read(source, (cfg.n_layers, cfg.n_heads, cfg.d_vocab), _stamps(folder), _config=cfg)
    for error in errors:
        show_error(error)
    return got


def sidebar_note(name) -> None:
    """Under the model picker: a planted model says what it is and where its circuit is shown."""
    if name in PLANTED_MODELS:
        note = t("🧪 A planted-circuit model: its mechanism is set by hand and stated in CIRCUIT.json. Home "
                 "shows its card and circuit; Circuits compares what discovery finds with it.")
        st.caption(note)  # internal text: the catalog's


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


def mark_labels() -> dict[str, str]:
    """found / missed / extra as shown (legend, tooltips, tables)."""
    return {"found": t("found (stated and discovered)"), "missed": t("missed (stated, not discovered)"),
            "extra": t("extra (discovered, not stated)")}


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
    got = stated(ctx)
    if got is None:
        return Compared(list(found.edges))
    group = ctx.model.config.group
    cmp = calibration.compare_circuits(got.circuit.edges, found.edges, group)
    marks = calibration.edge_marks(got.circuit.edges, found.edges, group)
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
    missed = [(s, r, scores.get((s, r), 0.0)) for (s, r), m in marks.items() if m == "missed"]
    return Compared(list(found.edges) + missed, marks, labels)
