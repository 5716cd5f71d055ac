"""/Atlas as a fresh server's first request: the dashboard's frame, as app.py is (the page's code is
attnkit/app/pages/atlas/). Streamlit serves the first request of a server whose folder has pages/ in its
old pages/ mode, which runs the pages/ script named by the address: this one draws the frame, which runs the
page at that address as every later request does (without this file a "Page not found" box covers the page)."""
from attnkit import app as ui

ui.run_frame(ui.PAGES)
