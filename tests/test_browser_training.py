"""In Chromium: the Training page on the shipped series shows the curves and the pattern slider (screenshot under
artifacts/screenshots/), the slider moves the step kept in the link, and one click opens that checkpoint on
Heatmaps with the sidebar's model set to it."""
from urllib.parse import unquote

import pytest

from attnkit import series as series_mod
from attnkit import training
from browser import act, chromium, need_browser, open_page, screenshot, streamlit_server, track_runs, wait_idle

pytestmark = pytest.mark.browser


def test_training_page_curves_slider_and_one_click_to_heatmaps(tmp_path, monkeypatch):
    need_browser()
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    s = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME)
    res = training.analyse(s)                      # into the cache the server reads (the page is then instant)
    with streamlit_server(env={"ATTNKIT_CACHE": str(tmp_path / "cache")}, timeout=120) as (url, _proc), \
            chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        track_runs(page)
        open_page(page, url, "Training", heading="Watching attention learn", charts=2, timeout=300_000)
        main = page.locator("[data-testid='stMain']")
        assert f"phase change at step {res.phase_change_step}:" in main.inner_text()
        assert main.locator("[data-testid='stVegaLiteChart']").count() >= 2
        screenshot(page, "training")
        assert f"step={s.steps[-1]}" in page.url, page.url                 # the slider's step, kept in the link
        thumb = main.get_by_role("slider").first
        thumb.focus()
        act(page, lambda: page.keyboard.press("ArrowLeft"), timeout=120_000)
        wait_idle(page, 120_000)
        page.wait_for_function(f"location.search.includes('step={s.steps[-2]}')", timeout=120_000)
        screenshot(page, "training_slider_moved")
        act(page, lambda: main.get_by_role("button", name="Open on Heatmaps").click(), timeout=120_000)
        page.get_by_role("heading", name="Heatmaps").first.wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        assert page.url.split("?")[0].endswith("/Heatmaps")
        folder = s.member(s.steps[-2]).name
        page.wait_for_function("location.search.includes('folder=')", timeout=60_000)
        assert folder in unquote(page.url.replace("+", " ")), page.url
        sidebar = page.locator("[data-testid='stSidebar']")
        assert sidebar.get_by_label("Folder").input_value() == folder
        screenshot(page, "training_opened_on_heatmaps")
