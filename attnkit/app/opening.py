"""How long a page takes to open in a fresh browser session (the bench's per-shape page rows): the page run
by Streamlit's AppTest on a model folder, timed from the start of its first script run to its end."""
from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from .context import LOCAL
from .navigation import ROOT, page_spec


def open_page(page: str, folder: str, runs: int = 2, timeout: float = 900, state: dict | None = None) -> dict:
    """Open ``page`` (a key of the page list) on ``folder`` ``runs`` times, each in a fresh session: the
    first also loads the model into the server's cache, the later ones are what a new visitor waits for;
    ``state``: session values set before the run (a page's inputs, as a link would set them).
    Returns {"seconds": [per run], "buttons": labels of the last run's buttons, "texts": its captions and
    markdown, "errors": its exceptions and error boxes}."""
    path = str(ROOT / page_spec(page).path)
    times, at = [], None
    for _ in range(runs):
        at = AppTest.from_file(path, default_timeout=timeout)
        at.session_state["ak_model"], at.session_state["ak_folder"] = LOCAL, str(folder)
        for k, v in (state or {}).items():
            at.session_state[k] = v
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    return {"seconds": times, "buttons": [str(b.label) for b in at.button],
            "texts": [str(m.value) for m in [*at.caption, *at.markdown]],
            "errors": [str(e.value) for e in [*at.exception, *at.error]]}
