"""In Chromium: Circuits on a planted model shows the stated circuit beside the discovered one — the counts
of found / missed / extra edges and precision/recall, and the circuit graph coloured by those marks (every
edge found on planted-induction's own example: the marks' green, none of the receiver-input colours)."""
import io

import numpy as np
import pytest

from attnkit import calibration as cal
from attnkit import examples as EX
from attnkit.charts.circuits import MARK_COLOURS
from attnkit.circuits import discover
from attnkit.loading import SHIPPED, load
from attnkit.patching import make_pair
from browser import chromium, need_browser, open_page, screenshot, streamlit_server, wait_idle

pytestmark = pytest.mark.browser

MODEL = "planted-induction"


def _near(px: np.ndarray, hex_colour: str, tol: int = 18, opacity: float = 0.7) -> int:
    """Pixels of ``hex_colour`` drawn at the graph's edge opacity over white."""
    rgb = [opacity * int(hex_colour[i:i + 2], 16) + (1 - opacity) * 255 for i in (1, 3, 5)]
    return int(np.all(np.abs(px - rgb) < tol, axis=-1).sum())


def test_circuits_on_a_planted_model_shows_stated_beside_discovered():
    need_browser()
    from PIL import Image

    m = load(MODEL, "cpu")
    ex = EX.texts(EX.PREFERRED[MODEL])
    found = discover.discover(m.weights, [make_pair(m, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])])
    want = cal.compare_circuits(cal.read_circuit(SHIPPED[MODEL]).edges, found.edges)
    with streamlit_server(MODEL) as (url, _proc), chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, url, "Circuits", charts=3, timeout=300_000)
        main = page.locator("[data-testid='stMain']")
        main.get_by_text("Stated circuit (CIRCUIT.json) beside the discovered one").wait_for(timeout=300_000)
        wait_idle(page, 300_000)
        page.wait_for_function("document.querySelectorAll(\"[data-testid='stMetricValue']\").length >= 5",
                               timeout=300_000)
        page.wait_for_timeout(1000)
        shot = screenshot(page, "circuits_planted_induction")
        texts = [t.split("\n") for t in page.locator("[data-testid='stMetric']").all_inner_texts()]
        metrics = {parts[0].strip(): parts[-1].strip() for parts in texts if len(parts) >= 2}
        assert "Stated edges found" in metrics, texts
        assert metrics["Stated edges found"] == str(len(want["found"])) == "5", metrics
        assert metrics["Stated edges missed"] == "0" and metrics["Extra edges"] == "0", metrics
        assert metrics["Precision"] == metrics["Recall"] == "1.00", metrics
        assert shot.stat().st_size > 10_000
        graph = page.locator("[data-testid='stVegaLiteChart']").last     # the circuit graph: the last chart
        graph.scroll_into_view_if_needed()
        page.wait_for_timeout(2000)                          # the canvas repaints after the screenshot's resize
        px = np.array(Image.open(io.BytesIO(graph.screenshot())).convert("RGB")).astype(int)
        assert _near(px, MARK_COLOURS["found"]) > 200          # the found edges' green (and its legend)
        assert _near(px, "#1f77b4") == 0                        # no receiver-input colour (q's blue) left
        assert not errors, errors
