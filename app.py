"""attnkit's dashboard: ``streamlit run app.py``.

The frame: page config, the navigation (the page list is ``attnkit.app.navigation.PAGES``, Home first), the
sidebar (model and prompt) drawn once, then the chosen page, whose body runs under ``ui.guard`` (an error is
one line, the session is kept).
"""
from attnkit import app as ui

ui.run_frame(ui.PAGES)
