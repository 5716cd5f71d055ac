"""Planted-circuit models in the dashboard: a model whose folder states its circuit (``CIRCUIT.json``, read by
:func:`attnkit.calibration.read_circuit`, the one reader) has it read once here (:func:`stated`) and gets a line
in the sidebar; Home shows its card and circuit (``pages/home/planted.py``) and Circuits the stated circuit
beside the discovered one (``pages/circuits/planted.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from .. import calibration
from ..i18n import t
from ..loading import PLANTED_MODELS
from .caches import budgeted
from .escaping import plain, show_error

__all__ = ["Stated", "stated", "sidebar_note"]


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
