"""The one reader of a chart click: what the user clicked in an ``st.altair_chart(..., on_select=...,
key=KEY)`` chart, read from Streamlit's session state (``{"selection": {PARAM: [points]}}``).

    clicked("hm_grid", "open", "head")           # ["L0H3"]: the field of every clicked point
    new_click("cmp_overview", "pick", "head")    # the same, only when it changed since the last run
"""
from __future__ import annotations

import streamlit as st

#: Session-key prefix of the last click acted on, per (chart, selection).
_LAST = "_ak_click"


def clicked(key: str, param: str, field: str | None = None) -> list:
    """The points of chart ``key``'s click selection ``param`` (dicts of their fields), or with ``field``
    the value of that field of each point that has it; [] when nothing is clicked (or no such chart)."""
    try:
        points = list(st.session_state.get(key)["selection"][param] or [])
    except (KeyError, TypeError):
        return []
    points = [p for p in points if isinstance(p, dict)]
    return points if field is None else [p[field] for p in points if field in p]


def new_click(key: str, param: str, field: str | None = None) -> list:
    """Like :func:`clicked`, but only a click not acted on yet: the same selection, seen again on a later
    run (Streamlit keeps it until the next click), gives []."""
    points = clicked(key, param, field)
    last = f"{_LAST}:{key}:{param}"
    if not points or points == st.session_state.get(last):
        return []
    st.session_state[last] = points
    return points


def forget_click(key: str, param: str) -> None:
    """Forget the click acted on last, so that the same point clicked again counts as new (e.g. a grid
    panel clicked again after the user went back to the grid)."""
    st.session_state.pop(f"{_LAST}:{key}:{param}", None)
