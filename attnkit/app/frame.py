"""The frame: app.py's navigation (sidebar drawn once, URL state, the page under :func:`guard`), and
:func:`page`, how a page starts."""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import NoReturn

import streamlit as st

from ..i18n import t
from . import language
from .context import Context
from .escaping import plain
from .navigation import PAGES, PageSpec, follow, nav_links, page_spec, spec_of, st_pages
from .sidebar import sidebar
from .state import begin_run, flush_notices, open_notices
from .url import url_restore, url_save


@contextlib.contextmanager
def guard(view: str):
    """Run a page body; an unexpected error becomes a short message, and the session (prompt, uploads,
    selections) stays as it was. The traceback goes to the server log, not the page."""
    try:
        yield
    except Exception as e:                  # st.stop()/st.rerun() raise BaseExceptions and pass through
        logging.getLogger("attnkit").exception("%s failed", view)
        st.error(t("{view} could not be computed: {error}. Your prompt, uploads and selections are kept; change the "
                   "input and try again.", view=plain(view), error=f"{e.__class__.__name__}: {plain(str(e)[:300])}"),
                 icon="⚠️")


def setup_page(title: str):
    """The page's title and its notice area (the frame has set the page config already)."""
    st.title(title)
    open_notices()


#: Set by the frame (app.py) for the duration of one script run.
_frame = threading.local()


def run_frame(pages: tuple[PageSpec, ...] = PAGES) -> None:
    """app.py: page config, the navigation, the sidebar drawn once, then the chosen page under :func:`guard`.

    ``pages``: the page list (:data:`navigation.PAGES`). Streamlit's own page list is off
    (``client.showSidebarNavigation = false``); the frame draws the links. Pages call :func:`page`, which
    returns the Context the frame resolved."""
    language.apply()                        # first: everything below is drawn in the session's language
    st.set_page_config(page_title="attnkit", page_icon="🔍", layout="wide")
    nav = st.navigation(st_pages(pages), position="hidden")
    _frame.saved = False
    follow()
    spec = spec_of(nav, pages)
    path = str.__str__(spec.title) if spec else nav.title      # the page's identity: its English title
    begin_run(path)
    url_restore(path)
    nav_links(pages)
    _frame.active, _frame.ctx = True, sidebar(spec)
    try:
        with guard(nav.title):
            nav.run()
    finally:
        _frame.active, _frame.ctx = False, None
        _save_link()


def _save_link() -> None:
    """The end of a run: the link written and the notices still waiting shown (once per run)."""
    if getattr(_frame, "saved", False):
        return
    _frame.saved = True
    notice = url_save()
    if notice:
        st.sidebar.caption(plain(notice))
    flush_notices()


def stop() -> NoReturn:
    """End the page's run here (instead of ``st.stop()``), after writing its link and its waiting notices.

    Nothing a run sends after ``st.stop()`` reaches the browser, so a page that stops early (waiting for a
    button, a job still running, an error said) with ``st.stop()`` alone would leave its link without the
    model, the prompt and its inputs, and a shared link would open the default view."""
    _save_link()
    st.stop()


def page(name: str) -> Context:
    """Start a page: its title, and the Context (model + prompt) the frame's sidebar resolved; stops the page
    (after the sidebar has said why) when there is nothing to run on. ``name``: the page's key, title or
    heading in :data:`navigation.PAGES` (its heading comes from there), or any title.

    A page runs inside the frame (``streamlit run app.py``): a page script run on its own says so in one line."""
    if not getattr(_frame, "active", False):
        st.error(t("A page of attnkit runs inside its dashboard: start it with {command}.",
                   command="streamlit run app.py"))
        st.stop()
    try:
        title = str(page_spec(name).shown_title)
    except KeyError:
        title = name
    setup_page(title)
    if _frame.ctx is None:
        stop()
    return _frame.ctx
