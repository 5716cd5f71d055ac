"""Issue 44, class 13, in the browser: eight sessions open the Training page at once on a fresh cache, so their
jobs load the series' checkpoints in threads of one server at the same time (before attnkit built one model at
a time, these showed as failed Training jobs). Every session shows the phase change and no failure."""
import asyncio

import pytest

from attnkit import series as series_mod
from attnkit import training
from browser import CHROMIUM, CHROMIUM_ARGS, need_browser, streamlit_server

pytestmark = pytest.mark.browser

N_SESSIONS = 8


def test_eight_training_sessions_at_once_all_finish(tmp_path):
    need_browser()
    from playwright.async_api import async_playwright

    s = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME)
    expected = f"phase change at step {training.analyse(s, use_cache=False).phase_change_step}:"

    async def session(browser, url):
        ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
        page = await ctx.new_page()
        await page.goto(f"{url}/Training", timeout=300_000)
        main = page.locator("[data-testid='stMain']")
        await main.get_by_text(expected, exact=False).first.wait_for(timeout=600_000)
        text = await main.inner_text()
        await ctx.close()
        return text

    async def run(url):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                return await asyncio.gather(*(session(browser, url) for _ in range(N_SESSIONS)))
            finally:
                await browser.close()

    with streamlit_server(env={"ATTNKIT_CACHE": str(tmp_path / "cache")}, timeout=120) as (url, _proc):
        texts = asyncio.run(run(url))
    for text in texts:
        assert expected in text and "failed after" not in text, text[:400]
