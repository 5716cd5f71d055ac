"""Real-browser tests: `streamlit run app.py` on localhost, driven by Playwright in Debian's Chromium.

The app opens on a local test checkpoint (ATTNKIT_MODEL). The tests enter prompts, click and hover
charts, and save a screenshot of every page at 1440 px width under ``artifacts/screenshots/``
(ignored by git) for a person to look at after a run (copies also go to pytest's tmp dir).
Skipped when Chromium or Playwright is missing.

Helpers for further tests live in ``tests/browser.py``: ``open_page(page, url, "Heatmaps", query={...})``
opens a page (with URL query parameters) and waits until it has run; ``screenshot(page, name)``.
"""
import io

import numpy as np
import pytest

from browser import (CHART, chromium, PAGES, need_browser, open_page, overflow_px,
                     screenshot, streamlit_server, wait_idle)
from helpers import make_checkpoint

pytestmark = pytest.mark.browser

PROMPT = "The animal didn't cross the street because it was too tired. <b>not bold</b>"
LONG = " ".join(["Attention lets every token look back at the tokens before it, and the model reads it."] * 7)
WIDTH = 1440


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_browser()
    model = make_checkpoint(tmp_path_factory.mktemp("browser-model"), seed=2, n_layer=2, n_head=4, n_embd=64,
                            n_positions=256, vocab_size=1000)
    with streamlit_server(model) as (url, _proc):      # ATTNKIT_MODEL: the app opens on this folder
        yield url, model


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.close()
    assert not errors, errors


def _n_tokens(model, text: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(str(model)).encode(text))


def enter_prompt(page, text: str, n: int):
    """Type a prompt into the sidebar and run it (Ctrl+Enter); wait until the page shows its n tokens."""
    text_box = page.locator("[data-testid='stSidebar']").get_by_role("textbox", name="Text", exact=True)
    text_box.wait_for(timeout=30_000)
    text_box.fill(text)
    text_box.press("Control+Enter")
    page.get_by_text(f"{n} tokens", exact=False).first.wait_for(timeout=60_000)
    wait_idle(page)


def choose(page, label: str):
    """Click a radio option (or other labelled choice) in the main area and wait for the rerun."""
    page.locator("[data-testid='stMain']").get_by_text(label, exact=True).first.click()
    wait_idle(page)


def _png(locator) -> np.ndarray:
    from PIL import Image

    return np.array(Image.open(io.BytesIO(locator.screenshot())).convert("RGB")).astype(int)


def _red(px: np.ndarray) -> np.ndarray:
    """Pixels of the token view's focus colour (#d62728)."""
    return (abs(px[..., 0] - 0xD6) < 20) & (abs(px[..., 1] - 0x27) < 25) & (abs(px[..., 2] - 0x28) < 25)


def _tooltip(page) -> str:
    tip = page.locator("#vg-tooltip-element")
    tip.wait_for(state="visible", timeout=10_000)
    return tip.inner_text()


def test_every_page_renders_and_is_saved_at_1440(server, page, tmp_path):
    url, model = server
    open_page(page, url, "Home")
    side = page.locator("[data-testid='stSidebar']")
    from playwright.sync_api import expect

    expect(side.get_by_role("textbox", name="Folder", exact=True)).to_have_value(str(model), timeout=30_000)
    enter_prompt(page, PROMPT, _n_tokens(model, PROMPT))
    shots = [screenshot(page, "home")]
    wide = {}
    for name in PAGES:
        if name == "Home":
            continue
        side.get_by_role("link", name=name).click()
        page.get_by_role("heading", name=name).first.wait_for(timeout=60_000)
        wait_idle(page, 120_000)
        assert page.locator("[data-testid='stException']").count() == 0, name
        shots.append(screenshot(page, name.lower().replace(" ", "_")))
        # nothing sticks out to the right at 1440 px (a clipped legend, a table wider than the page)
        over = page.evaluate("document.documentElement.scrollWidth")
        assert over <= WIDTH, f"{name}: the page is {over} px wide"
        if name == "Heatmaps":                       # this page's charts are sized to the content width
            assert overflow_px(page) <= 0, f"{name}: a chart reaches {overflow_px(page):.0f} px past the content"
        else:
            wide[name] = overflow_px(page)
    heatmaps = page.get_by_text("Heatmaps", exact=True)
    assert heatmaps.count() >= 1
    # the HTML in the prompt stays text
    assert page.locator("b", has_text="not bold").count() == 0
    for s in shots:
        assert s.stat().st_size > 10_000
        (tmp_path / s.name).write_bytes(s.read_bytes())
    print("charts reaching past the content area (px, other pages):", wide)


def test_heatmap_views_fit_the_page_and_panels_open_their_head(server, page):
    url, model = server
    open_page(page, url, "Heatmaps", charts=1)
    enter_prompt(page, PROMPT, _n_tokens(model, PROMPT))
    screenshot(page, "heatmaps_one_head")
    assert overflow_px(page) <= 0
    choose(page, "All heads of a layer")
    page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= 1")
    wait_idle(page)
    screenshot(page, "heatmaps_grid")
    assert overflow_px(page) <= 0
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    box = chart.bounding_box()
    assert box["x"] + box["width"] <= WIDTH
    # the second panel of the first row: L0H1 → one head view on head 1
    page.mouse.click(box["x"] + box["width"] * 0.375, box["y"] + box["height"] * 0.55)
    page.wait_for_timeout(500)
    wait_idle(page)
    main = page.locator("[data-testid='stMain']")
    main.get_by_text("L0H1 (layer 0, head 1)", exact=False).first.wait_for(timeout=30_000)
    choose(page, "All heads of a layer")
    page.get_by_text("One colour range for all panels").click()
    wait_idle(page)
    screenshot(page, "heatmaps_grid_shared")
    assert overflow_px(page) <= 0


def test_token_view_click_moves_the_colours(server, page):
    url, model = server
    open_page(page, url, "Heatmaps", charts=1)
    enter_prompt(page, PROMPT, _n_tokens(model, PROMPT))
    choose(page, "Tokens")
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= 1")
    page.wait_for_timeout(500)
    screenshot(page, "heatmaps_tokens")
    assert overflow_px(page) <= 0
    before = _png(chart)
    red = np.argwhere(_red(before))
    assert len(red) > 20, "the chosen token (the last one at first) is drawn in red"
    # the first token on the chosen token's line: the left-most coloured pixel of that row
    y = int(np.median(red[:, 0]))
    row = np.nonzero(before[y].sum(-1) < 3 * 235)[0]
    x = int(row.min()) + 5
    box = chart.bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)
    tip = _tooltip(page)
    assert "token" in tip and "weight" in tip, tip
    page.mouse.click(box["x"] + x, box["y"] + y)
    page.wait_for_timeout(400)
    after = _png(chart)
    red_after = np.argwhere(_red(after))
    assert len(red_after) > 20 and red_after[:, 1].min() < red[:, 1].min(), "the clicked token is now chosen"
    assert (before != after).any(axis=-1).mean() > 0.005, "the other tokens changed colour"
    # pointing instead of clicking: the colours follow the mouse
    choose(page, "pointing at it")
    page.wait_for_timeout(500)
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    box = chart.bounding_box()
    still = _png(chart)
    page.mouse.move(box["x"] + x + 30, box["y"] + y)
    page.wait_for_timeout(400)
    moved = _png(chart)
    assert (still != moved).any(axis=-1).mean() > 0.005


def test_long_prompt_image_tooltip_names_tokens_and_a_click_moves_the_window(server, page):
    url, model = server
    n = _n_tokens(model, LONG)
    assert 64 < n <= 256
    open_page(page, url, "Heatmaps", charts=1)
    enter_prompt(page, LONG, n)
    page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= 2")
    page.wait_for_timeout(500)
    screenshot(page, "heatmaps_long")
    assert overflow_px(page) <= 0, "the window's legend is not cut off"
    image = page.locator("[data-testid='stVegaLiteChart']").first
    box = image.bounding_box()
    q_from = page.get_by_label("Query rows from")
    start = int(q_from.input_value())
    # lower-left part of the image: visible cells (below the diagonal)
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.8)
    tip = _tooltip(page)
    assert "query token" in tip and "key token" in tip and "weight" in tip, tip
    assert "base64" not in tip and "x2" not in tip, tip
    page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.8)
    page.wait_for_timeout(500)
    wait_idle(page)
    page.wait_for_function("(s) => { const e = [...document.querySelectorAll('input')].find("
                           "i => i.getAttribute('aria-label') === 'Query rows from'); return e && e.value !== s; }",
                           arg=str(start), timeout=30_000)
    assert int(q_from.input_value()) != start
    screenshot(page, "heatmaps_long_clicked")


def test_a_shared_link_opens_the_same_head_and_prompt(server, page, browser):
    """URL round trip: choose a head, read the address the page now has, open it in a fresh tab."""
    url, model = server
    text = "A shared view of the animal and the street."
    open_page(page, url, "Heatmaps", query={"prompt": text, "layer": 1, "head": 3}, charts=1)
    shared = page.url
    assert "layer=1" in shared and "head=3" in shared and "prompt=" in shared
    fresh = browser.new_page(viewport={"width": WIDTH, "height": 1000})      # a new session: nothing shared
    try:
        fresh.goto(shared, wait_until="domcontentloaded")
        fresh.get_by_role("heading", name="Heatmaps").first.wait_for(timeout=60_000)
        wait_idle(fresh)
        fmain = fresh.locator("[data-testid='stMain']")
        # the Layer and Head pickers show the linked head, the sidebar the linked prompt
        layer = fmain.get_by_role("combobox", name="Layer", exact=True)
        try:
            layer.wait_for(timeout=120_000)          # a fresh session loads the model on a busy machine
        except Exception:
            screenshot(fresh, "shared_link_failed")
            raise
        layer_box = layer.input_value()
        head_box = fmain.get_by_role("combobox", name="Head", exact=True).input_value()
        assert layer_box == "1" and head_box.startswith("3") and "L1H3" in head_box
        box = fresh.locator("[data-testid='stSidebar']").get_by_role("textbox", name="Text", exact=True)
        assert box.input_value() == text
        assert "layer=1" in fresh.url and "head=3" in fresh.url
    finally:
        fresh.close()


def test_run_button_runs_the_typed_prompt(server, page):
    url, model = server
    open_page(page, url, "Home")
    side = page.locator("[data-testid='stSidebar']")
    box = side.get_by_role("textbox", name="Text", exact=True)
    text = "Run this prompt with the button please."
    box.fill(text)
    # the hint under the box does not cover the text
    hint_box = box.bounding_box()
    side.get_by_role("button", name="Run").click()
    page.get_by_text(f"{_n_tokens(model, text)} tokens", exact=False).first.wait_for(timeout=60_000)
    wait_idle(page)
    assert box.input_value() == text and hint_box["height"] > 40
