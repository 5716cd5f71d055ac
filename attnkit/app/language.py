"""The interface language of one browser session: read from the link (``?lang=zh``) or the session (else the
server's $ATTNKIT_LANG, which ``attnkit app --lang zh`` sets),
applied to this script run (:func:`attnkit.i18n.set_language`: a context variable, so sessions served by
the same process never share it), and a switch for the sidebar.

Phase 2 wiring (pages and frame being rewritten): call :func:`apply` at the top of every run, before
anything is drawn (the frame's ``page()``), put :func:`switch` in the sidebar, and add
``"lang": SESSION_KEY`` to ``url.URL_KEYS`` so the link keeps it. Pages translate with
``attnkit.i18n.t`` / ``nt``; library messages render themselves.
"""
from __future__ import annotations

import os

import streamlit as st

from .. import i18n
from .escaping import plain

__all__ = ["SESSION_KEY", "choose", "apply", "switch"]

#: Session key of the chosen language (also the widget's key).
SESSION_KEY = "ak_lang"


def choose(link, session) -> tuple[str, str | None]:
    """(language, notice): the session's choice once made, else the link's, else English. A bad link value
    gives English and a one-line notice (a message), never an error."""
    if session in i18n.LANGUAGES:
        return session, None
    try:
        return i18n.parse_language(link), None
    except i18n.LanguageError:
        return i18n.DEFAULT, i18n.msg("The link asks for language {lang}, which is not available; showing English.",
                                      lang=str(link)[:20])


def apply() -> str:
    """Set this run's language from the session/link (call first in every run); returns it."""
    link = st.query_params.get("lang") or os.environ.get("ATTNKIT_LANG")     # `attnkit app --lang zh` sets it
    lang, notice = choose(link, st.session_state.get(SESSION_KEY))
    st.session_state[SESSION_KEY] = lang
    i18n.set_language(lang)
    if notice:
        st.toast(plain(str(notice)))
    return lang


def switch(container=None) -> str:
    """English / 简体中文, bound to the session; a change reruns the page in the new language."""
    where = container if container is not None else st.sidebar
    return where.radio("Language · 语言", list(i18n.LANGUAGES), key=SESSION_KEY, horizontal=True,
                       format_func=i18n.LANGUAGES.get)
