"""One real browser: `streamlit run app.py` on localhost, driven by Playwright in Debian's Chromium.

Opens the app on a local test checkpoint (ATTNKIT_MODEL), enters a prompt, waits for a
heatmap to render on the Heatmaps page, opens the Compare-heads page, and saves screenshots
(to pytest's tmp dir and to /tmp/attnkit_browser*.png). Skipped when Chromium or Playwright is missing.
"""
import shutil

import pytest

from browser import CHROMIUM, CHROMIUM_ARGS as ARGS, need_browser, streamlit_server
from helpers import make_checkpoint

PROMPT = "The animal didn't cross the street because it was too tired. <b>not bold</b>"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    model = make_checkpoint(tmp_path_factory.mktemp("browser-model"), seed=2, n_layer=2, n_head=4, n_embd=64,
                            n_positions=256, vocab_size=1000)
    with streamlit_server(model) as (url, _proc):      # ATTNKIT_MODEL: the app opens on this folder
        yield url, model


def _chart(page, timeout=30_000):
    """Wait until a Vega chart has drawn (canvas or svg inside the chart element)."""
    sel = "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"
    page.wait_for_selector(sel, state="visible", timeout=timeout)
    return page.locator(sel)


def test_browser_heatmap_and_compare(server, tmp_path):
    from playwright.sync_api import sync_playwright

    url, model = server
    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 2200})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="domcontentloaded")
            side = page.locator("[data-testid='stSidebar']")
            page.get_by_role("heading", name="Model card").wait_for(timeout=60_000)   # first run done
            assert side.get_by_label("Folder").input_value() == str(model)
            text = side.get_by_label("Text")
            text.wait_for(timeout=30_000)
            text.fill(PROMPT)
            text.press("Control+Enter")
            from transformers import AutoTokenizer

            n = len(AutoTokenizer.from_pretrained(str(model)).encode(PROMPT))
            page.get_by_text(f"{n} tokens (", exact=False).wait_for(timeout=60_000)      # the new prompt ran
            page.wait_for_function("document.querySelectorAll(\"[data-testid='stDataFrame']\").length >= 3",
                                   timeout=30_000)
            shots.append(tmp_path / "home.png")
            page.screenshot(path=str(shots[-1]), full_page=True)

            side.get_by_role("link", name="Heatmaps").click()
            page.get_by_role("heading", name="Heatmaps").wait_for(timeout=30_000)
            assert _chart(page).count() >= 1
            page.wait_for_timeout(500)
            shots.append(tmp_path / "heatmaps.png")
            page.screenshot(path=str(shots[-1]), full_page=True)
            assert page.get_by_text("not bold").count() == 0 or page.locator("b", has_text="not bold").count() == 0

            side.get_by_role("link", name="Compare heads").click()
            page.get_by_role("heading", name="Compare heads").wait_for(timeout=30_000)
            page.get_by_text("Which heads attend alike?").wait_for(timeout=30_000)
            page.wait_for_function(
                "document.querySelectorAll(\"[data-testid='stVegaLiteChart'] canvas, "
                "[data-testid='stVegaLiteChart'] svg\").length >= 4", timeout=30_000)
            page.wait_for_timeout(500)
            shots.append(tmp_path / "compare.png")
            page.screenshot(path=str(shots[-1]), full_page=True)
            page.get_by_text("Which heads attend alike?").scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            shots.append(tmp_path / "compare_lower.png")
            page.screenshot(path=str(shots[-1]))
            assert page.locator("[data-testid='stException']").count() == 0
            assert not errors, errors
        finally:
            browser.close()
    for s in shots:
        assert s.stat().st_size > 10_000
        try:
            shutil.copy(s, f"/tmp/attnkit_browser_{s.stem}.png")
        except OSError:
            pass
    try:
        shutil.copy(shots[1], "/tmp/attnkit_browser.png")
    except OSError:
        pass
