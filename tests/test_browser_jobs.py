"""Real-browser acceptance tests of long work and shared links (issues 26 and 27), on the shipped offline
model attnkit-tiny (the default when offline and no ATTNKIT_MODEL is set):

* V = X on the Ablations page reaches its verdict on a 902-token text within a stated bound;
* Stop ends a long head map within 2 s, and the previous map stays on the page, marked stale;
* a link naming a local folder (or a system path such as /etc) loads nothing until the user confirms.

The server runs with live progress (``ATTNKIT_JOB_WAIT`` back at the app's own wait; tests/conftest.py sets
it to 600 s so that AppTest page runs wait for their jobs). Run with
``python -m pytest -q -m browser tests/test_browser_jobs.py``; skipped when Chromium or Playwright is missing.
"""
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from browser import (CHART, chromium, need_browser, open_page, page_url, screenshot,
                     streamlit_server, wait_idle)
from helpers import make_checkpoint

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1440
#: Issue 26's target: attnkit-tiny's V = X verdict at 902 tokens in under 30 s on 2 cores. The bound is
#: twice that: a CI machine's 2 cores are shared (with this test's own browser and server at least). On the
#: 2-core machine this was written on, shared with another browser suite, it took 6–10 s from Run (72 s
#: before the hull solver ran on one thread and Streamlit stopped collecting garbage after every poll).
VX_TOKENS, VX_BOUND_S = 902, 60.0
#: Stop's promise (the Stop button's help: "within about 2 s"): from the click to the page saying so.
STOP_BOUND_S = 2.0
VERDICTS = ("Verdict: supported", "Verdict: not supported", "Verdict: not enough evidence")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    from attnkit.app import jobs

    env = {"ATTNKIT_JOB_WAIT": str(jobs.WAIT_S),              # live progress and Stop, as a user sees them
           "ATTNKIT_MODEL": "",                                # the offline default: attnkit-tiny
           "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}   # long prompts' store
    with streamlit_server(timeout=120, env=env) as (url, proc):
        yield url, proc


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser):
    """A page in a fresh browser context (its own Streamlit session); no JavaScript errors allowed."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 1000})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, errors


def natural_text(n: int, readme_first: bool = False) -> str:
    """English prose (attnkit's SAMPLE_TEXT and README's opening paragraph, repeated) cut to exactly ``n``
    tokens of attnkit-tiny's tokenizer."""
    from transformers import AutoTokenizer

    from attnkit.loading import SHIPPED, SHIPPED_MODEL
    from attnkit.prompts import SAMPLE_TEXT

    tok = AutoTokenizer.from_pretrained(str(SHIPPED[SHIPPED_MODEL]))
    intro = (ROOT / "README.md").read_text().split("\n\n")[1]
    parts = [intro, SAMPLE_TEXT] if readme_first else [SAMPLE_TEXT, intro]
    ids = tok(" ".join(parts * 3), verbose=False)["input_ids"]
    text = tok.decode(ids[:n])
    assert len(tok(text, verbose=False)["input_ids"]) == n
    return text


def _main(page):
    return page.locator("[data-testid='stMain']")


def _side(page):
    return page.locator("[data-testid='stSidebar']")


def _main_has(page, *, has=(), lacks=(), timeout: float = 60_000):
    """Wait until the main area's text holds every string of ``has`` and none of ``lacks``."""
    page.wait_for_function(
        "([has, lacks]) => { const m = document.querySelector(\"[data-testid='stMain']\"); if (!m) return false;"
        " const t = m.innerText; return has.every(s => t.includes(s)) && !lacks.some(s => t.includes(s)); }",
        arg=[list(has), list(lacks)], timeout=timeout)


def _verdict(page) -> str:
    text = _main(page).inner_text()
    found = [v for v in VERDICTS if v in text]
    assert found, "no verdict on the page"
    return found[0]


def _run_prompt(page, text: str) -> float:
    """Put ``text`` in the sidebar's box and press Run; the time of the click (time.monotonic)."""
    box = _side(page).get_by_role("textbox", name="Text", exact=True)
    box.fill(text)
    t0 = time.monotonic()
    _side(page).get_by_role("button", name="Run", exact=True).click()
    return t0


def _no_exception(page):
    assert page.locator("[data-testid='stException']").count() == 0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- issue 26: V = X is bounded

def test_v_equals_x_reaches_a_verdict_on_902_tokens_within_the_bound(server, page):
    url, _ = server
    open_page(page, url, "Ablations", timeout=120_000)
    _main_has(page, has=["Verdict:"], timeout=120_000)          # the default prompt's verdict, V = X
    assert "V = X" in _main(page).get_by_role("combobox", name="Intervention").input_value()
    t0 = _run_prompt(page, natural_text(VX_TOKENS))
    # the new verdict: its hull note names the 902 rows, and the previous one is no longer shown as stale
    _main_has(page, has=["Verdict:", f"of {VX_TOKENS} query rows"], lacks=["Stale:"],
              timeout=VX_BOUND_S * 4 * 1000)
    took = time.monotonic() - t0
    print(f"V = X verdict on {VX_TOKENS} tokens of attnkit-tiny: {took:.1f} s from Run (bound {VX_BOUND_S:.0f} s, "
          f"issue target 30 s)")
    screenshot(page, "ablations_v_equals_x_902")
    _no_exception(page)
    _verdict(page)
    assert took < VX_BOUND_S, f"V = X took {took:.1f} s on {VX_TOKENS} tokens (bound {VX_BOUND_S:.0f} s)"


# ----------------------------------------------------------------------------- issue 26: Stop stops

def test_stop_ends_a_long_head_map_within_2_s_and_keeps_the_previous_map(server, page):
    url, proc = server
    main = _main(page)
    # the map of mean-ablated heads (a link's choice): about 2.5× as long as zero-ablated ones
    open_page(page, url, "Ablations", query={"map_mode": "mean-head"}, timeout=120_000)
    _main_has(page, has=["Verdict:"], timeout=120_000)
    assert main.get_by_role("combobox", name="Head ablation").input_value() == "Mean-ablate a head"
    # the previous result: the head map of the short default prompt
    main.get_by_role("button", name="Run the head map").click()
    _main_has(page, has=["Largest increases:"], timeout=120_000)
    earlier = main.get_by_text("Largest increases:").inner_text()
    # a long text: its V = X verdict first (a job of its own), then the head map, 32 runs of ~900 tokens
    _run_prompt(page, natural_text(900, readme_first=True))
    _main_has(page, has=["Verdict:", "of 900 query rows"], lacks=["Stale:"], timeout=240_000)
    assert main.get_by_text("Largest increases:").count() == 0     # not for this text yet
    main.get_by_role("button", name="Run the head map").click()
    bar = main.locator("[data-testid='stProgress']")
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[data-testid='stProgress']\")].some("
        "e => /Head map · [1-9]\\d*\\/\\d+/.test(e.innerText))", timeout=60_000)
    status = bar.first.inner_text()
    assert "elapsed" in status, status
    _main_has(page, has=["Stale: the result below is the previous one", "Largest increases:"])
    t0 = time.monotonic()
    main.get_by_role("button", name="Stop", exact=True).click()
    _main_has(page, has=["Head map stopped after"], timeout=30_000)
    took = time.monotonic() - t0
    print(f"Stop → 'stopped' shown in {took:.2f} s (progress was: {status})")
    screenshot(page, "ablations_head_map_stopped")
    _no_exception(page)
    assert took < STOP_BOUND_S, f"the page said the job stopped {took:.2f} s after Stop"
    stopped = main.get_by_text("Head map stopped after").inner_text()
    done, total = map(int, re.search(r"at (\d+)/(\d+)", stopped).groups())
    assert 0 < done < total, stopped
    assert bar.count() == 0
    # the previous map is still shown, marked stale, and the job can be run again
    _main_has(page, has=["Stale: the result below is the previous one", "Largest increases:"])
    assert main.get_by_text("Largest increases:").inner_text() == earlier
    assert main.get_by_role("button", name="Run again: Run the head map").is_enabled()
    # the computation really ended: the server is idle (a head map keeps the 2 cores busy)
    wait_idle(page)
    c0, w0 = _cpu_s(proc.pid), time.monotonic()
    time.sleep(2.0)
    busy = (_cpu_s(proc.pid) - c0) / (time.monotonic() - w0)
    assert busy < 0.3, f"the server still computes after Stop ({busy:.0%} of a core)"
    # and the page answers: another job runs to its chart
    charts = page.locator(CHART).count()
    main.get_by_role("button", name="Run the layer sweep").click()
    page.wait_for_function(f"document.querySelectorAll({CHART!r}).length > {charts}", timeout=120_000)
    wait_idle(page)
    _no_exception(page)
    assert main.get_by_text("Head map stopped after").count() == 1


# ----------------------------------------------------------------------------- issue 27: links to local paths

def _open_link(page, url: str, query: dict):
    """Open Home from a shared link naming a local path; wait until the sidebar asks for confirmation."""
    page.goto(page_url(url, "Home", query), wait_until="domcontentloaded")
    _side(page).get_by_role("button", name="Load this folder").wait_for(timeout=120_000)
    wait_idle(page)


def _nothing_loaded(page, path: str):
    side, main = _side(page), _main(page)
    assert path in side.locator("[data-testid='stAlert']").first.inner_text()
    assert main.get_by_text("The link names a local folder").count() == 1
    assert main.get_by_role("heading", name="Model card").count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 0 and page.locator(CHART).count() == 0
    assert side.get_by_role("combobox", name="Model").count() == 0       # no model chosen, none loaded
    _no_exception(page)


def test_a_link_to_a_local_folder_loads_it_only_after_confirmation(server, page, tmp_path):
    url, _ = server
    from attnkit.app.context import LOCAL

    # a shape of its own (3 layers, 6 heads, d_model 192) so that its model card is recognisable
    folder = make_checkpoint(tmp_path / "linked", seed=3, n_layer=3, n_head=6, n_embd=192, n_positions=256,
                             vocab_size=1000)
    _open_link(page, url, {"model": LOCAL, "folder": str(folder)})
    page.wait_for_timeout(1500)                                  # nothing starts by itself meanwhile
    wait_idle(page)
    _nothing_loaded(page, str(folder))
    assert parse_qs(urlparse(page.url).query).get("folder") == [str(folder)]     # the link stays as it came
    screenshot(page, "link_local_folder_waiting")
    _side(page).get_by_role("button", name="Load this folder").click()
    main = _main(page)
    main.get_by_role("heading", name="Model card").wait_for(timeout=120_000)
    wait_idle(page)
    _no_exception(page)
    screenshot(page, "link_local_folder_loaded")
    # its card: 6 heads of d_head 32 in d_model 192 (the caption), 3 layers (the Ablations page's head map)
    assert main.get_by_text("6·(3·192·32) + 192·192", exact=False).count() == 1
    assert _side(page).get_by_role("textbox", name="Folder", exact=True).input_value() == str(folder)
    _side(page).get_by_role("link", name="Ablations").click()
    _main_has(page, has=["Each of the 3·6 = 18 heads ablated alone"], timeout=120_000)
    wait_idle(page)
    _no_exception(page)


def test_a_link_naming_a_system_path_never_loads_it(server, page):
    url, _ = server
    _open_link(page, url, {"model": "/etc"})
    _nothing_loaded(page, "/etc")
    screenshot(page, "link_etc_waiting")
    # even confirmed, /etc is no checkpoint: refused in one line, no model card
    _side(page).get_by_role("button", name="Load this folder").click()
    _main_has(page, has=["/etc has no config.json"], timeout=60_000)
    wait_idle(page)
    _no_exception(page)
    assert _main(page).get_by_role("heading", name="Model card").count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 0
