"""The frame: app.py's navigation (sidebar drawn once, URL state, the page under :func:`guard`), and
:func:`page`, how a page starts."""
from __future__ import annotations

import contextlib
import logging
import threading

import streamlit as st

from .context import Context
from .escaping import plain
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
        st.error(f"{plain(view)} could not be computed: {e.__class__.__name__}: {plain(str(e)[:300])}. "
                 "Your prompt, uploads and selections are kept; change the input and try again.", icon="⚠️")


def setup_page(title: str, icon: str = "🔍"):
    """Page config and title (inside the navigation frame the frame has set the config already)."""
    if not getattr(_frame, "active", False):
        st.set_page_config(page_title=f"{title} · attnkit", page_icon=icon, layout="wide")
    st.title(title)
    open_notices()


#: Set by the navigation frame (app.py) for the duration of one script run.
_frame = threading.local()


def run_frame(pages: list) -> None:
    """app.py: page config, the navigation, the sidebar drawn once, then the chosen page under :func:`guard`.

    Pages call :func:`page`, which returns the Context the frame resolved."""
    st.set_page_config(page_title="attnkit", page_icon="🔍", layout="wide")
    nav = st.navigation(pages)
    path = nav.title
    begin_run(path)
    url_restore(path)
    _frame.active, _frame.ctx = True, sidebar()
    try:
        with guard(nav.title):
            nav.run()
    finally:
        _frame.active, _frame.ctx = False, None
        notice = url_save()
        if notice:
            st.sidebar.caption(plain(notice))
        flush_notices()


def _left_pages_folder_mode() -> bool:
    """True when Streamlit ran this page alone in its old multipage mode, and has now been told to stop.

    An app with a ``pages/`` folder starts in that mode: until some run has called ``st.navigation``, a request
    for a page's address (a shared link opened on a freshly started server) runs that page's script by itself,
    without app.py, so the frame never writes the link and every session stays so until someone opens the
    home page. The mode is one process-wide flag, which ``st.navigation`` clears; clearing it here and running
    again sends this and every later run through app.py. ``streamlit run pages/X.py`` and AppTest never set it."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:                     # a Streamlit without it has no such mode
        return False
    if getattr(PagesManager, "uses_pages_directory", None) is not True:
        return False
    PagesManager.uses_pages_directory = False
    return True


def page(title: str, icon: str = "🔍") -> Context:
    """Start a page: its title, and the Context (model + prompt) from the sidebar; stops the page
    (after the sidebar has said why) when there is nothing to run on.

    Inside the frame the sidebar has been drawn once already; run on its own (``streamlit run
    pages/X.py`` or AppTest) the page draws it itself."""
    if not getattr(_frame, "active", False):
        if _left_pages_folder_mode():
            st.rerun()                      # again, this time through app.py's frame
        begin_run(None)
        url_restore(None)
    setup_page(title, icon)
    ctx = _frame.ctx if getattr(_frame, "active", False) else sidebar()
    if ctx is None:
        url_save()                          # nothing written after st.stop() reaches the browser
        flush_notices()
        st.stop()
    return ctx


