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


def setup_page(title: str, icon: str = "🔍"):
    """Page config and title (inside the navigation frame the frame has set the config already)."""
    if not getattr(_frame, "active", False):
        st.set_page_config(page_title=f"{title} · attnkit", page_icon=icon, layout="wide")
    st.title(title)
    open_notices()


#: Set by the navigation frame (app.py) for the duration of one script run.
_frame = threading.local()
#: Session key: this session has asked Streamlit for the navigation once from a page run on its own.
NAV_ASKED = "_ak_nav_asked"


def run_frame(pages: tuple[PageSpec, ...] = PAGES) -> None:
    """app.py: page config, the navigation, the sidebar drawn once, then the chosen page under :func:`guard`.

    ``pages``: the page list (:data:`navigation.PAGES`). Streamlit's own page list is off
    (``client.showSidebarNavigation = false``); the frame draws the links. Pages call :func:`page`, which
    returns the Context the frame resolved."""
    language.apply()                        # first: everything below is drawn in the session's language
    st.set_page_config(page_title="attnkit", page_icon="🔍", layout="wide")
    nav = st.navigation(st_pages(pages), position="hidden")
    _frame.saved = False
    follow(in_frame=True)
    spec = spec_of(nav, pages)
    path = str.__str__(spec.title) if spec else nav.title      # the page's identity: its English title
    begin_run(path)
    url_restore(path)
    nav_links(pages)
    _frame.active, _frame.ctx = True, sidebar()
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


def _opened_by_address(spec: PageSpec | None) -> bool:
    """True when this page runs by itself because its address was the first request to a fresh server.

    An app with a ``pages/`` folder starts in Streamlit's old multipage mode: until some run has called
    ``st.navigation``, a request for a page's address runs that page's script alone, without app.py, so the
    frame never draws the links or writes the link, for every session, until someone opens Home. Calling
    ``st.navigation`` (public API) ends that mode for the whole server; when the page it resolves for this
    request is this page, the request came by its address and a rerun goes through app.py. Asked once per
    session: a page run on its own (``streamlit run pages/X.py``, AppTest) resolves Home and goes on."""
    if spec is None or st.session_state.get(NAV_ASKED):
        return False
    st.session_state[NAV_ASKED] = True
    try:
        resolved = st.navigation(st_pages(PAGES, absolute=True), position="hidden")
    except st.errors.StreamlitAPIException:
        return False
    return resolved.url_path == spec.url_path and spec is not PAGES[0]


def page(name: str, icon: str | None = None) -> Context:
    """Start a page: its title, and the Context (model + prompt) from the sidebar; stops the page
    (after the sidebar has said why) when there is nothing to run on. ``name``: the page's key, title or
    heading in :data:`navigation.PAGES` (its heading and icon come from there), or any title.

    Inside the frame the sidebar has been drawn once already; run on its own (``streamlit run
    pages/X.py`` or AppTest) the page draws it itself."""
    if not getattr(_frame, "active", False):
        language.apply()                    # a page run on its own: the language first, as the frame does
    try:
        spec = page_spec(name)
    except KeyError:
        spec = None
    title, icon = (str(spec.shown_title), icon or spec.icon) if spec else (name, icon or "🔍")
    if not getattr(_frame, "active", False):
        if _opened_by_address(spec):
            st.rerun()                      # again, this time through app.py's frame
        begin_run(None)
        _frame.saved = False
        url_restore(None)
    setup_page(title, icon)
    if not getattr(_frame, "active", False):
        follow(in_frame=False)
    ctx = _frame.ctx if getattr(_frame, "active", False) else sidebar()
    if ctx is None:
        stop()
    return ctx


