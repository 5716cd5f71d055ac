"""Planted-circuit models in the dashboard: a model whose folder states its circuit (``CIRCUIT.json``, read by
:func:`attnkit.planted_files.read_circuit`, the one reader, checked against the loaded model) has it read once
here (:func:`stated`) and gets a line in the sidebar; Home shows its card and circuit (``pages/home/planted.py``) and
Circuits the stated circuit beside the discovered one (``pages/circuits/planted.py``). A file that cannot be used is
one line on the page, never a traceback."""
from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from .. import planted_files
from ..i18n import t
from ..loading import PLANTED_MODELS
from .caches import budgeted
from .escaping import plain, show_error

__all__ = ["Stated", "stated", "sidebar_note"]


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
