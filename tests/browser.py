"""Shared pieces of the real-browser tests: a `streamlit run` server on localhost and Debian's Chromium."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("ATTNKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def need_browser():
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(model_dir=None, timeout: float = 60, env: dict | None = None):
    """Start ``streamlit run app.py`` on a free localhost port (``env``: extra environment variables);
    yield (url, process)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    if model_dir is not None:
        env["ATTNKIT_MODEL"] = str(model_dir)
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"attnkit-streamlit-{port}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start (see {log.name})")
            time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ----------------------------------------------------------------------------- driving pages

#: The pages of app.py's navigation: title -> URL path (st.Page takes it from the file name).
PAGES = {"Home": "", "Heatmaps": "Heatmaps", "Compare heads": "Compare_heads", "Head effects": "Head_effects",
         "Circuits": "Circuits", "Entropy": "Entropy", "Ablations": "Ablations", "Step by step": "Step_by_step", "Verify": "Verify"}
CHART = "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def page_url(base_url: str, page_name: str = "Home", query: dict | None = None) -> str:
    """The address of a page, with query parameters (``query={"layer": 1, "head": 2}``)."""
    from urllib.parse import urlencode

    path = PAGES.get(page_name, page_name)
    return f"{base_url.rstrip('/')}/{path}" + (f"?{urlencode(query)}" if query else "")


def wait_idle(page, timeout: float = 60_000):
    """Wait until Streamlit has finished the script run (no 'running' status widget, no stale elements)."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
    try:                                  # a click's rerun may take a moment to start
        page.wait_for_selector("[data-testid='stStatusWidget']", timeout=1_500)
    except Exception:
        pass
    idle = ("() => !document.querySelector(\"[data-testid='stStatusWidget']\") && "
            "document.querySelectorAll(\"[data-stale='true'], [data-testid='stSkeleton']\").length === 0")
    for _ in range(2):                    # twice: a rerun can start just after the first look
        page.wait_for_function(idle, timeout=timeout)
        page.wait_for_timeout(400)


def open_page(page, base_url: str, page_name: str = "Home", query: dict | None = None, *,
              heading: str | None = None, charts: int = 0, timeout: float = 60_000):
    """Open ``page_name`` (a title of :data:`PAGES`) with URL ``query`` parameters in a Playwright page and
    wait until it has run: its heading shown (``heading``, default the page name; Home's is the app's title),
    no script running, and at least ``charts`` Vega charts drawn. Returns the Playwright page."""
    page.goto(page_url(base_url, page_name, query), wait_until="domcontentloaded")
    # the script has run at least as far as the sidebar's model choice (the idle check alone can pass
    # before the first run has even started on a slow machine)
    page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first.wait_for(timeout=timeout)
    if heading is None and page_name != "Home":
        heading = page_name
    if heading:
        page.get_by_role("heading", name=heading).first.wait_for(timeout=timeout)
    wait_idle(page, timeout)
    if charts:
        page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= {charts}", timeout=timeout)
        page.wait_for_timeout(300)
    return page


def screenshot(page, name: str, folder: Path | None = None, full_page: bool = True) -> Path:
    """Save a PNG of the page under ``artifacts/screenshots/`` (ignored by git) for a person to look at."""
    folder = Path(folder or SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    size = page.viewport_size
    if full_page and size:
        # Streamlit scrolls inside its main container, not the document: grow the window to the content
        tall = page.evaluate("Math.max(document.documentElement.scrollHeight, ...[...document.querySelectorAll("
                             "\"[data-testid='stMain'], [data-testid='stSidebarContent']\")].map(e => e.scrollHeight))")
        if tall > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": min(int(tall) + 40, 12_000)})
            page.wait_for_timeout(400)
    try:
        page.screenshot(path=str(path), full_page=full_page)
    finally:
        if size and page.viewport_size != size:
            page.set_viewport_size(size)
    return path


def overflow_px(page) -> float:
    """How far the widest chart or table reaches past the right edge of the column (or the page's content
    area) holding it (≤ 0: none). Streamlit clips what sticks out of a column, and the content area scrolls
    inside the page, so the document's own width does not show this."""
    return page.evaluate("""() => {
        const main = document.querySelector("[data-testid='stMainBlockContainer']");
        if (!main) return 0;
        const inner = (e) => { const r = e.getBoundingClientRect(), cs = getComputedStyle(e);
                               return r.right - parseFloat(cs.paddingRight) + 1; };
        const els = document.querySelectorAll("[data-testid='stVegaLiteChart'] canvas, "
            + "[data-testid='stVegaLiteChart'] svg.marks, [data-testid='stDataFrame'], [data-testid='stTable']");
        let worst = -1e9;
        for (const e of els) {
            const box = e.closest("[data-testid='stColumn']") || main;
            worst = Math.max(worst, e.getBoundingClientRect().right - inner(box));
        }
        return els.length ? worst : 0;
    }""")
