"""A page opened the way a browser opens its address on a fresh session, under Streamlit's AppTest: the tests'
one way to run a page (tests/helpers.py) and the bench's per-shape page rows (how long a page takes to open,
timed from the start of its first script run to its end)."""
from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from .context import LOCAL
from .navigation import PAGES, page_spec

#: The dashboard's script (``streamlit run app.py``): the frame, which runs every page.
APP = Path(__file__).resolve().parents[2] / "app.py"


def app_test(page: str, timeout: float = 120) -> AppTest:
    """An AppTest of app.py whose first run opens ``page`` (a key of :data:`PAGES`) inside the frame, as a
    browser's first request for the page's address does.

    Before a first run AppTest asks for a page by its script's file name, as a browser asks by address: the
    frame's copy for the address, ``pages/<address>.py``, is that script. AppTest keeps asking for it: a run
    that switches page (``ui.open_page``) ends on the new page, and the run after it opens ``page`` again."""
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    spec = page_spec(page)
    if spec is not PAGES[0]:
        at.switch_page(f"pages/{spec.address}.py")
    return at


def open_page(page: str, folder: str, runs: int = 2, timeout: float = 900, state: dict | None = None) -> dict:
    """Open ``page`` (a key of the page list) on ``folder`` ``runs`` times, each in a fresh session: the
    first also loads the model into the server's cache, the later ones are what a new visitor waits for;
    ``state``: session values set before the run (a page's inputs, as a link would set them).
    Returns {"seconds": [per run], "buttons": labels of the last run's buttons, "texts": its captions and
    markdown, "errors": its exceptions and error boxes}."""
    times, at = [], None
    for _ in range(runs):
        at = app_test(page, timeout)
        at.session_state["ak_model"], at.session_state["ak_folder"] = LOCAL, str(folder)
        for k, v in (state or {}).items():
            at.session_state[k] = v
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    return {"seconds": times, "buttons": [str(b.label) for b in at.button],
            "texts": [str(m.value) for m in [*at.caption, *at.markdown]],
            "errors": [str(e.value) for e in [*at.exception, *at.error]]}
