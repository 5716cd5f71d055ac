"""Twelve browser sessions at once against one `streamlit run`: each gets its own results.

Reports the server's peak memory (printed, and written to $TMPDIR/attnkit-many-users.json); timings are
reported, not asserted (they depend on the machine's load)."""
import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from browser import CHROMIUM, CHROMIUM_ARGS, need_browser, peak_rss_mb, streamlit_server

pytestmark = pytest.mark.browser

N_SESSIONS = 12


def test_twelve_sessions_no_cross_talk(odd_dir, odd, tmp_path):
    need_browser()
    from playwright.async_api import async_playwright

    prompts = [f"Session {i} asks about " + " ".join(["attention"] * (3 * i + 1)) for i in range(N_SESSIONS)]
    counts = [len(odd.encode(p)) for p in prompts]
    assert len(set(counts)) == N_SESSIONS          # each session's own answer is recognisable

    async def session(browser, url, i):
        ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
        page = await ctx.new_page()
        t0 = time.perf_counter()
        await page.goto(url, timeout=180_000)          # 12 sessions start at once on a small machine
        box = page.get_by_role("textbox", name="Text", exact=True)
        await box.wait_for(timeout=60_000)
        await box.fill(prompts[i])
        await box.press("Control+Enter")
        await page.get_by_text(f"{counts[i]} tokens (", exact=False).wait_for(timeout=240_000)
        elapsed = time.perf_counter() - t0
        # no other session's count is shown on this page
        body = await page.inner_text("body")
        others = [c for j, c in enumerate(counts) if j != i and f"\n{c} tokens (" in body]
        if i == N_SESSIONS - 1:
            await page.screenshot(path=str(tmp_path / "session.png"), full_page=True)
        await ctx.close()
        return elapsed, others

    async def main(url):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                return await asyncio.gather(*(session(browser, url, i) for i in range(N_SESSIONS)))
            finally:
                await browser.close()

    with streamlit_server(odd_dir) as (url, proc):
        results = asyncio.run(main(url))
        peak = peak_rss_mb(proc.pid)
    slowest = max(t for t, _ in results)
    assert all(not others for _, others in results), results
    report = {"sessions": N_SESSIONS, "slowest_s": round(slowest, 2), "server_peak_rss_mb": round(peak, 1)}
    print(f"\n{N_SESSIONS} sessions, isolated; server peak memory {peak:.0f} MB; slowest session {slowest:.1f} s")
    print(json.dumps(report))
    Path(os.environ.get("TMPDIR", "/tmp"), "attnkit-many-users.json").write_text(json.dumps(report))
    assert peak < 4000, report
