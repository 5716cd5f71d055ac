"""The dashboard as the installed package runs it: ``attnkit app`` hands this file to Streamlit.

The same two lines as a checkout's ``app.py`` (``streamlit run app.py`` keeps working there): the frame over
the page list, Home first. Streamlit puts a script's folder first on ``sys.path``, as Python does; this
folder is the inside of the package ``attnkit.app``, whose modules must be imported by that name only
(``tables`` or ``pages`` as top-level names would shadow other packages), so it is taken off again.
"""
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if not (p and Path(p).resolve() == _HERE)]

from attnkit import app as ui  # noqa: E402  (after the path fix above)

ui.run_frame(ui.PAGES)
