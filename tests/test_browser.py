"""One real browser: `streamlit run app.py` on localhost, driven by Playwright in Debian's Chromium.

Opens the app, points the sidebar at a local test checkpoint, enters a prompt, waits for a
heatmap to render on the Heatmaps page, opens the Compare-heads page, and saves screenshots
(to pytest's tmp dir and to /tmp/attnkit_browser*.png). Skipped when Chromium or Playwright is missing.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT, make_checkpoint

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
PROMPT = "The animal didn't cross the street because it was too tired. <b>not bold</b>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc, timeout: float = 40) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError("streamlit did not come up")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(CHROMIUM) or shutil.which(CHROMIUM) is None:
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    model = make_checkpoint(tmp_path_factory.mktemp("browser-model"), seed=2, n_layer=2, n_head=4, n_embd=64,
                            n_positions=256, vocab_size=1000)
    port = _free_port()
    log = open(tmp_path_factory.mktemp("browser-log") / "streamlit.log", "w")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url, model
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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
            # Model: "Local folder…", then the folder
            side.locator("[data-testid='stSelectbox']").first.click()
            page.get_by_role("option", name="Local folder…").click()
            folder = side.get_by_label("Folder")
            folder.fill(str(model))
            folder.press("Enter")
            text = side.get_by_label("Text")
            text.wait_for(timeout=30_000)
            text.fill(PROMPT)
            text.press("Control+Enter")
            page.get_by_role("heading", name="Model card").wait_for(timeout=60_000)
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
