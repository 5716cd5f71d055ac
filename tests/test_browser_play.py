"""In Chromium: the Training page's ▶ Play shows the checkpoints one after another on its own (a timer only a real
browser runs), the link following the step shown, and stops at the last checkpoint."""
import pytest

from attnkit import series as series_mod
from attnkit import training
from browser import act, chromium, need_browser, open_page, streamlit_server, track_runs

pytestmark = pytest.mark.browser


def test_play_walks_the_checkpoints_and_stops_at_the_last(tmp_path, monkeypatch):
    need_browser()
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    s = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME)
    training.analyse(s)                            # into the cache the server reads (the page is then instant)
    with streamlit_server(env={"ATTNKIT_CACHE": str(tmp_path / "cache")}, timeout=120) as (url, _proc), \
            chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        track_runs(page)
        open_page(page, url, "Training", {"step": s.steps[-4]}, heading="Watching attention learn", charts=2,
                  timeout=300_000)
        main = page.locator("[data-testid='stMain']")
        act(page, lambda: main.get_by_role("button", name="▶ Play").click(), timeout=120_000)
        for step in s.steps[-3:]:                  # one checkpoint after another, without a click
            page.wait_for_function(f"location.search.includes('step={step}')", timeout=120_000)
        page.wait_for_timeout(4_000)               # stopped at the last: the step stays and Play is offered again
        assert f"step={s.steps[-1]}" in page.url
        main.get_by_role("button", name="▶ Play").wait_for(timeout=60_000)
