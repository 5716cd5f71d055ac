"""Real browser: a click on a cell of Heatmaps' one-head chart opens "Why does this query attend to this key?"."""
import pytest

from browser import chromium, need_browser, open_page, streamlit_server, wait_idle
from helpers import make_checkpoint

pytestmark = pytest.mark.browser

PROMPT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    model = make_checkpoint(tmp_path_factory.mktemp("why-browser"), seed=2, n_layer=2, n_head=4, n_embd=64,
                            n_positions=256, vocab_size=1000)
    with streamlit_server(model) as (url, _proc):
        yield url


def test_a_clicked_cell_opens_the_why_panel(server):
    with chromium() as b:
        page = b.new_page(viewport={"width": 1440, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_page(page, server, "Heatmaps", charts=1, timeout=240_000)   # a busy 2-core machine
        main = page.locator("[data-testid='stMain']")
        main.get_by_text("Why does this query attend to this key?").first.wait_for(timeout=120_000)
        assert main.get_by_text("The model's score").count() == 0
        chart = page.locator("[data-testid='stVegaLiteChart']").first
        box = chart.bounding_box()
        tip = page.locator("#vg-tooltip-element")
        for fy in (0.8, 0.7, 0.6, 0.5):              # a cell low in the square (a late query, an early key)
            page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * fy)
            page.wait_for_timeout(300)
            if tip.is_visible() and "key token" in tip.inner_text():
                break
        else:
            pytest.fail("no cell under the pointer")
        page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * fy)
        page.wait_for_timeout(500)
        wait_idle(page)
        shown = main.get_by_text("The model's score").or_(main.get_by_text("comes after query"))
        shown.first.wait_for(timeout=120_000)
        assert not errors, errors
