"""Circuits on a planted-circuit model: the stated circuit beside the discovered one (found / missed / extra
edges, :func:`attnkit.calibration.compare_circuits`; the graph's marks from :func:`attnkit.calibration.edge_marks`)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from attnkit import calibration
from attnkit.app import plain, show_table
from attnkit.charts.circuits import mark_labels
from attnkit.app.planted import stated
from attnkit.i18n import t


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
    if got is None or not found.solved:                   # not solved: no circuit claimed, nothing to compare
        return Compared(list(found.edges))
    group = ctx.model.config.group
    cmp = calibration.compare_circuits(got.circuit, found.edges, group)
    drawn, marks = calibration.marked_edges(got.circuit, found, group)
    st.markdown("**" + t("Stated circuit (CIRCUIT.json) beside the discovered one") + "**")  # internal text: the catalog's
    _metrics(cmp)
    if cmp["not_needed"]:
        st.caption(plain(t("Recall counts the required edges only: {edges} (optional or negative in CIRCUIT.json) "
                           "left out, not missed.", edges=", ".join(f"{s} → {r}" for s, r in cmp["not_needed"]))))
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
