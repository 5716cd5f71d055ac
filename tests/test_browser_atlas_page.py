"""In Chromium at 1280×800, in English and in 简体中文: the Atlas page on planted-decoys (the atlas computed beforehand
into the server's cache folder, as a first session would leave it) opens after the link's corpus folder is
confirmed, draws the scatter, the card and the model view with nothing clipped or past its column, and a click on a
point of the scatter opens that head's card and names it in the link (screenshots under artifacts/screenshots/)."""
from __future__ import annotations

import re

import pytest

from attnkit.corpus import atlas_cache
from browser import (CHART, act, chromium, layout_problems, need_browser, overflow_px, page_url, screenshot,
                     streamlit_server, track_runs, wait_idle)
from test_atlas import _words_corpus

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 800
CARD = {"en": "Head {head}", "zh": "注意力头 {head}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    need_browser()
    cache = tmp_path_factory.mktemp("cache")
    words = _words_corpus(tmp_path_factory.mktemp("words"), n_docs=6, seed=11)
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNKIT_CACHE", str(cache))
    atlas_cache.cached_atlas(words, "planted-decoys", max_docs=6, device="cpu")
    mp.undo()
    with streamlit_server(env={"ATTNKIT_CACHE": str(cache)}, timeout=120) as (url, _proc):
        yield url, words


def _open(page, url: str, words, lang: str) -> None:
    query = {"model": "planted-decoys", "corpus": str(words), "docs": 6, "lang": lang}
    page.goto(page_url(url, "Atlas", query), wait_until="domcontentloaded")
    confirm = page.locator(".st-key-at_corpus_confirm_folder button")
    confirm.wait_for(timeout=240_000)
    wait_idle(page, 240_000)
    act(page, confirm.click, timeout=240_000)
    page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= 3", timeout=240_000)
    wait_idle(page, 240_000)


def _click_a_point(page) -> str:
    """Point at the scatter until its tooltip names a head; click there; the head's name."""
    chart = page.locator("[data-testid='stMain'] [data-testid='stVegaLiteChart']").first
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    tip = page.locator("#vg-tooltip-element")
    for fy in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        for fx in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
            page.mouse.move(x, y)
            page.wait_for_timeout(60)
            if tip.is_visible() and (m := re.search(r"L\d+H\d+", tip.inner_text())):
                act(page, lambda: page.mouse.click(x, y), timeout=240_000)
                wait_idle(page, 240_000)
                return m.group(0)
    pytest.fail("no point of the scatter under the pointer")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_fits_and_a_click_on_the_scatter_opens_a_card(served, lang):
    url, words = served
    with chromium() as browser:
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        track_runs(page)
        _open(page, url, words, lang)
        main = page.locator("[data-testid='stMain']")
        assert ("A pattern is not a role" if lang == "en" else "模式不等于作用") in main.inner_text()
        first = re.search(r"head=(L\d+H\d+)", page.url)
        head = _click_a_point(page)
        page.get_by_role("heading", name=CARD[lang].format(head=head)).first.wait_for(timeout=120_000)
        page.wait_for_function(f"location.search.includes('head={head}')", timeout=60_000)
        assert first is None or head == first.group(1) or f"head={first.group(1)}" not in page.url
        screenshot(page, f"atlas_{lang}")
        problems = layout_problems(page)
        assert overflow_px(page) <= 0 and problems == [], problems
        assert not errors, errors
