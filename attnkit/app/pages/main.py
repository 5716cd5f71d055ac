"""The dashboard as the installed package runs it: ``attnkit app`` hands this file to Streamlit.

The same two lines as a checkout's ``app.py`` (``streamlit run app.py`` keeps working there): the frame over
the page list, Home first. It lives here, among the page folders, and not beside them in ``attnkit/app/``: a script
with a ``pages/`` folder beside it starts Streamlit in its old multipage mode, where a page's address as a fresh
server's first request covers the page with "Page not found" (measured in Chromium); this folder has no ``pages/``
of its own, so ``st.navigation`` resolves every address from the first request on.

Streamlit puts a script's folder first on ``sys.path``, as Python does; this folder is the inside of the package ``attnkit.app.pages``, whose modules must be imported by that name only
(``shared`` or ``home`` as top-level names would shadow other packages), so it is taken off again.
"""
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if not (p and Path(p).resolve() == _HERE)]

from attnkit import app as ui  # noqa: E402  (after the path fix above)

ui.run_frame(ui.PAGES)
