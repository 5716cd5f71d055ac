"""The atlas's HTML file in Chromium with the network blocked: it draws every head, opens a head's card from a click
on its point, switches to 简体中文, and logs no console error — and asks for nothing but itself."""
from __future__ import annotations

import random

import pytest

from attnkit.corpus import run_atlas

from browser import chromium

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def atlas_page(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("words")
    rng = random.Random(3)
    for d in range(6):
        half = rng.sample([f"t{i}" for i in range(40)], 20)
        (corpus / f"d{d}.txt").write_text(" ".join(half + half), encoding="utf-8")
    out = tmp_path_factory.mktemp("atlas") / "atlas"
    res = run_atlas(corpus, out, "planted-decoys")
    return out / "atlas.html", [h["head"] for h in res.heads]


def test_the_atlas_opens_offline_and_shows_every_head(atlas_page):
    page_file, heads = atlas_page
    asked, problems = [], []
    with chromium() as browser:
        ctx = browser.new_context()

        def route(r):
            asked.append(r.request.url)
            return r.continue_() if r.request.url == page_file.as_uri() else r.abort()

        ctx.route("**/*", route)
        pg = ctx.new_page()
        pg.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        pg.on("pageerror", lambda e: problems.append(str(e)))
        pg.goto(page_file.as_uri())
        pg.wait_for_selector("#scatter svg g.mark-symbol.role-mark path", timeout=30_000)
        points = pg.locator("#scatter svg g.mark-symbol.role-mark path")
        assert points.count() == len(heads)
        cards = pg.locator("details.card")
        assert [cards.nth(i).get_attribute("data-head") for i in range(cards.count())] == heads
        assert all(cards.nth(i).locator("summary").inner_text().startswith(h) for i, h in enumerate(heads))
        label = points.nth(5).get_attribute("aria-label")
        head = label.split("head: ")[1].split(";")[0]
        points.nth(5).click(force=True)
        card = pg.locator(f"#head-{head}")
        card.locator("table").first.wait_for(timeout=10_000)
        assert card.get_attribute("open") is not None and head in card.inner_text()
        card.locator("h4").filter(has_text="queries and keys").wait_for()
        pg.locator("button[data-lang=zh]").click()
        pg.locator("h1").filter(has_text="注意力头图谱").wait_for(timeout=10_000)
        pg.locator("details.card summary").first.click()
        pg.locator("details.card").first.locator("h4").filter(has_text="按激活十分位").wait_for(timeout=10_000)
    assert asked == [page_file.as_uri()] and not problems, (asked, problems)
