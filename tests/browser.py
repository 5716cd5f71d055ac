"""Shared pieces of the real-browser tests: a `streamlit run` server on localhost and Debian's Chromium."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from attnkit.app.navigation import PAGES as PAGE_LIST

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("ATTNKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def need_browser():
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright")


@contextlib.contextmanager
def chromium():
    """Debian's Chromium driven by Playwright (skips the test when either is missing), closed afterwards."""
    need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(model_dir=None, timeout: float = 60, env: dict | None = None, packaged: bool = False):
    """Start ``streamlit run app.py`` on a free localhost port (``env``: extra environment variables);
    yield (url, process). ``packaged``: ``attnkit app`` instead (the package's own script and settings), started in
    an empty folder so that no checkout file (app.py, pages/, .streamlit/) takes part."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    if model_dir is not None:
        env["ATTNKIT_MODEL"] = str(model_dir)
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"attnkit-streamlit-{port}.log", "w")
    if packaged:
        cwd = Path(tempfile.mkdtemp(prefix="attnkit-app-"))
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])   # this checkout's attnkit
        cmd = [sys.executable, "-m", "attnkit", "app", "--port", str(port), "--address", "127.0.0.1"]
    else:
        cwd = ROOT
        cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
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

#: The pages of app.py's navigation: title -> URL path (each page's fixed address in the page list).
PAGES = {spec.title: spec.url_path for spec in PAGE_LIST}
CHART = "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def page_url(base_url: str, page_name: str = "Home", query: dict | None = None) -> str:
    """The address of a page, with query parameters (``query={"layer": 1, "head": 2}``)."""
    from urllib.parse import urlencode

    path = PAGES.get(page_name, page_name)
    return f"{base_url.rstrip('/')}/{path}" + (f"?{urlencode(query)}" if query else "")


class Runs:
    """The script runs of one Playwright page, read from Streamlit's own websocket messages (``new_session``
    starts a run, ``script_finished`` ends it, ``session_status_changed`` says whether one is running).

    Streamlit 1.67 with ``toolbarMode = "minimal"`` draws no status widget while a script runs, so the DOM
    alone cannot tell a page that is still computing from one that has finished; these messages can."""

    def __init__(self, page):
        self.started = self.finished = 0
        self.running = False
        self.statuses: list[int] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, str):
            return
        msg = ForwardMsg()
        try:
            msg.ParseFromString(payload)
        except Exception:
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.started += 1
            self.running = True
        elif kind == "script_finished":
            self.finished += 1
            self.statuses.append(int(msg.script_finished))
        elif kind == "session_status_changed":
            self.running = bool(msg.session_status_changed.script_is_running)


def track_runs(page) -> Runs:
    """Follow ``page``'s script runs from now on (before its first ``goto``); :func:`wait_idle` then waits for
    the run a click started to finish instead of guessing from the DOM."""
    runs = page._ak_runs = Runs(page)
    return runs


def wait_run(page, since: tuple[int, int], timeout: float = 60_000, start_s: float = 4.0):
    """After an action taken when the counters were ``since`` = (started, finished): wait for the run it
    started (if one starts within ``start_s`` seconds) to finish, and for no further run to follow."""
    runs: Runs = page._ak_runs
    t0 = time.time()
    while runs.started == since[0] and runs.finished == since[1] and not runs.running:
        if time.time() - t0 > start_s:
            break
        page.wait_for_timeout(100)
    quiet = 0.0
    while quiet < 0.3:                    # 0.3 s without a run: a rerun (st.rerun) has had its chance
        if time.time() - t0 > timeout / 1000:
            raise TimeoutError(f"the page was still running after {timeout / 1000:.0f} s")
        page.wait_for_timeout(100)
        quiet = 0.0 if runs.running else quiet + 0.1
    page.wait_for_function("document.querySelectorAll(\"[data-stale='true'], [data-testid='stSkeleton']\")"
                           ".length === 0", timeout=timeout)
    page.wait_for_timeout(200)


def act(page, action, timeout: float = 60_000):
    """Run ``action()`` (a click, a key press) on a tracked page and wait for the script run it causes."""
    runs: Runs = page._ak_runs
    since = (runs.started, runs.finished)
    action()
    wait_run(page, since, timeout)


def wait_idle(page, timeout: float = 60_000):
    """Wait until Streamlit has finished the script run (no 'running' status widget, no stale elements).
    On a page followed by :func:`track_runs`: until its runs have finished (Streamlit's own messages)."""
    runs = getattr(page, "_ak_runs", None)
    if runs is not None:
        page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
        wait_run(page, (runs.started, runs.finished), timeout, start_s=1.0)
        return
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


_LAYOUT_JS = r"""(tol) => {
    const out = [];
    const say = (e) => { const t = e.closest("[data-testid]"), id = t ? t.getAttribute("data-testid") : e.tagName;
        return `${id} '${(e.innerText || e.textContent || e.value || "").trim().replace(/\s+/g, " ").slice(0, 48)}'`; };
    const shown = (r) => r.width > 0 && r.height > 0;
    const inner = (e) => { const r = e.getBoundingClientRect(), cs = getComputedStyle(e);
        return {left: r.left + parseFloat(cs.paddingLeft), right: r.right - parseFloat(cs.paddingRight)}; };
    const BOXES = ["[data-testid='stVegaLiteChart'] canvas", "[data-testid='stVegaLiteChart'] svg.marks",
        "[data-testid='stDataFrame']", "[data-testid='stTable']", "[data-testid='stImage'] img", "[data-testid='stAlert']",
        "[data-testid='stMetric']", "[data-testid='stButton'] button", "[data-testid='stDownloadButton'] button",
        "[data-testid='stExpander']", "[data-testid='stWidgetLabel']", "[data-testid='stSelectbox']",
        "[data-testid='stMultiSelect']", "[data-testid='stRadio']", "[data-testid='stSlider']",
        "[data-testid='stTextInput']", "[data-testid='stTextArea']", "[data-testid='stNumberInput']",
        "[data-testid='stCheckbox']", "[data-testid='stFileUploader']", "[data-testid='stCode']",
        "[data-testid='stProgress']", "[data-testid='stTabs']"].join(", ");
    const SKIP_TEXT = "svg, .katex-mathml, [data-testid='stDataFrame'], [data-testid='stTooltipContent'], "
        + "[data-testid='stSliderTickBar'], [data-testid='stCode']";
    const roots = [...document.querySelectorAll("[data-testid='stMainBlockContainer'], [data-testid='stSidebarUserContent']")];
    for (const root of roots) {
        const column = (e) => (e.parentElement && e.parentElement.closest("[data-testid='stColumn']")) || root;
        // boxes: charts, tables, alerts, metrics, widgets against their column and their element's height
        for (const e of root.querySelectorAll(BOXES)) {
            const r = e.getBoundingClientRect();
            if (!shown(r)) continue;
            const b = inner(column(e));
            if (r.right > b.right + tol) out.push(`${say(e)} reaches ${Math.round(r.right - b.right)} px past the right of its column`);
            if (r.left < b.left - tol) out.push(`${say(e)} starts ${Math.round(b.left - r.left)} px left of its column`);
            const ec = e.closest("[data-testid='stElementContainer']");
            if (ec && ec !== e && r.bottom > ec.getBoundingClientRect().bottom + tol)
                out.push(`${say(e)} reaches ${Math.round(r.bottom - ec.getBoundingClientRect().bottom)} px below its element`);
        }
        // a select box's value cut short ("0 (L0H" for "0 (L0H0)")
        for (const e of root.querySelectorAll("input[role='combobox']")) {
            if (shown(e.getBoundingClientRect()) && e.scrollWidth > e.clientWidth + tol)
                out.push(`the value of ${say(e)} = '${e.value}' is cut off (${e.scrollWidth - e.clientWidth} px)`);
        }
        // text: past its column, below its element, or cut by a box that hides what overflows it
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let t = walker.nextNode(); t; t = walker.nextNode()) {
            const el = t.parentElement;
            if (!t.textContent.trim() || el.closest(SKIP_TEXT)) continue;
            const range = document.createRange();
            range.selectNodeContents(t);
            const r = range.getBoundingClientRect();
            if (!shown(r)) continue;
            const what = `text '${t.textContent.trim().slice(0, 40)}'`;
            let clip = el, scrolls = false;
            while (clip && clip !== root) {
                const cs = getComputedStyle(clip);
                if (cs.overflowX !== "visible" || cs.overflowY !== "visible") {
                    scrolls = /auto|scroll/.test(cs.overflowX + cs.overflowY); break; }
                clip = clip.parentElement;
            }
            if (scrolls) continue;                   // a scrolling box: the rest is a scroll away, not lost
            const col = inner(column(el));
            if (r.right > col.right + tol) out.push(`${what} reaches ${Math.round(r.right - col.right)} px past its column`);
            const ec = el.closest("[data-testid='stElementContainer']");
            if (ec && r.bottom > ec.getBoundingClientRect().bottom + 2 * tol)
                out.push(`${what} reaches ${Math.round(r.bottom - ec.getBoundingClientRect().bottom)} px below its element`);
            if (clip && clip !== root) {
                const c = clip.getBoundingClientRect();
                if (r.right > c.right + tol || r.bottom > c.bottom + tol || r.left < c.left - tol)
                    out.push(`${what} is cut off by ${say(clip)}`);
            }
        }
        // inside Vega's SVG: text of a legend, title or axis drawn past the drawing is cut off (the SVG clips
        // it); labels Vega hid to avoid overlaps (opacity 0) are not drawn and do not count
        for (const svg of root.querySelectorAll("[data-testid='stVegaLiteChart'] svg.marks")) {
            const s = svg.getBoundingClientRect();
            if (!shown(s)) continue;
            const title = (svg.querySelector(".role-title text") || {}).textContent || "";
            for (const t of svg.querySelectorAll(".role-legend text, .role-title text, .role-axis text")) {
                const b = t.getBoundingClientRect();
                if (!shown(b) || !t.textContent.trim()) continue;
                let hidden = false;
                for (let a = t; a && a !== svg; a = a.parentElement)
                    if (a.getAttribute("opacity") === "0" || getComputedStyle(a).opacity === "0") hidden = true;
                if (hidden) continue;
                const cut = Math.max(b.right - s.right, b.bottom - s.bottom, s.left - b.left, s.top - b.top);
                const role = [...t.closest(".role-legend, .role-title, .role-axis").classList]
                    .find(c => c.startsWith("role-")).slice(5);
                if (cut > 2 * tol) out.push(`'${t.textContent.slice(0, 30)}' (${role}) of chart '${title.slice(0, 60)}' is cut off by ${Math.round(cut)} px`);
                // a title or a legend's text Vega shortened to its limit ("…"): an axis label may be (its tooltip
                // has it whole), a title or a legend entry may not
                if (role !== "axis" && t.textContent.endsWith("…"))
                    out.push(`'${t.textContent.slice(0, 40)}' (${role}) of chart '${title.slice(0, 60)}' is shortened`);
            }
            // category labels (tokens, heads, parts) Vega hid because they overlapped (opacity 0): the axis shows
            // fewer categories than it has (a numeric axis thinning its ticks is fine)
            const hiddenLabels = [...svg.querySelectorAll(".role-axis-label text")].filter(t =>
                (t.getAttribute("opacity") === "0" || getComputedStyle(t).opacity === "0")
                && !/^[−+-]?[\d.,]+(e[−+-]?\d+)?%?$/.test(t.textContent.trim()));
            if (hiddenLabels.length) out.push(`${hiddenLabels.length} axis label(s) of chart '${title.slice(0, 60)}' `
                + `hidden by Vega: ${hiddenLabels.slice(0, 3).map(t => t.textContent).join(", ")}`);
        }
    }
    return out;
}"""


def layout_problems(page, tol: float = 2) -> list[str]:
    """Everything on the page that does not fit where it is drawn (empty: all fits), for the main area and the
    sidebar: a chart (canvas or SVG), table, image, alert, metric, button or widget reaching past its column
    (or the content area) or below its element; a select box whose value is cut short; a piece of text past
    its column, below its element or cut by a box that hides overflow (a metric's ellipsis); inside a Vega SVG,
    a legend's, title's or axis's text reaching past the drawing, which clips it. ``tol`` px absorb font metrics
    (inside an SVG, twice that: Vega's text boxes and the browser's differ by up to 3 px). Text in a scrolling
    box, MathML copies of formulas, labels Vega hid, slider tick labels (Streamlit draws them under the widget)
    and the insides of canvas-drawn charts and tables are not inspected."""
    return page.evaluate(_LAYOUT_JS, tol)
