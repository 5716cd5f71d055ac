"""URL state: the selections named in a page's link restored once per session, and written back after each run."""
from __future__ import annotations

import streamlit as st

from ..loading import MODEL_CHOICES
from .context import DEFAULT_PROMPT, LOCAL

#: URL query parameter -> session key: a view is shared by its link (the page is the URL's path).
URL_KEYS = {"model": "ak_model", "folder": "ak_folder", "prompt": "ak_text", "bos": "ak_bos",
            "layer": "hm_layer", "head": "hm_head", "view": "hm_view", "values": "hm_values", "scale": "hm_scale",
            "stat": "cmp_stat"}
_URL_INTS = {"hm_layer", "hm_head"}
_URL_BOOLS = {"ak_bos"}
#: Longer prompts are not put in the URL (the page says so).
URL_PROMPT_MAX = 400


def url_restore() -> None:
    """Once per browser session: selections named in the URL's query parameters become the session's
    (a value a widget does not offer falls back to its default)."""
    if st.session_state.get("_ak_url_restored"):
        return
    st.session_state["_ak_url_restored"] = True
    for q, key in URL_KEYS.items():
        if q not in st.query_params or key in st.session_state:
            continue
        raw = st.query_params[q]
        try:
            value = int(raw) if key in _URL_INTS else (raw in ("1", "true", "yes")) if key in _URL_BOOLS else raw
        except ValueError:
            continue
        if key == "ak_model" and value != LOCAL and value not in MODEL_CHOICES:   # a folder given by the link
            st.session_state["ak_folder"] = str(value)
            value = LOCAL
        st.session_state[key] = value


def url_save() -> str | None:
    """Write the current selections into the URL; returns a notice when the prompt is too long for it."""
    notice = None
    for q, key in URL_KEYS.items():
        value = st.session_state.get(key)
        if key == "ak_folder" and st.session_state.get("ak_model") != LOCAL:
            value = None
        if key == "ak_text" and (st.session_state.get("ak_source", "Type") != "Type" or value == DEFAULT_PROMPT):
            value = None
        if key == "ak_text" and value is not None and len(value) > URL_PROMPT_MAX:
            notice = (f"The prompt ({len(value):,} characters) is longer than {URL_PROMPT_MAX} and is not kept in the "
                      "page's link; a shared link opens with the default prompt.")
            value = None
        if value is None or value == "":
            st.query_params.pop(q, None)
        else:
            st.query_params[q] = ("1" if value else "0") if key in _URL_BOOLS else str(value)
    return notice
