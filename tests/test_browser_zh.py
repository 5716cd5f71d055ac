"""In Chromium: every page of the navigation opened with ``?lang=zh`` — each of its tabs too — shows no
untranslated English sentence, its charts' titles, axes and legends included (the text Vega draws in the SVG;
identifiers, model names, numbers, formulas and the model's own tokens allowed), keeps ``lang=zh`` in its link, and
is saved as a 1280×800 screenshot under artifacts/screenshots/zh/ for a person to look at."""
import pytest

from attnkit.app.navigation import PAGES
from attnkit.glossary import GLOSSARY
from attnkit.i18n import language
from browser import SCREENSHOTS, act, chromium, need_browser, open_page, screenshot, streamlit_server, track_runs
from helpers import make_checkpoint
from untranslated import untranslated

pytestmark = pytest.mark.browser

PROMPT = "猫坐在垫子上。猫坐在垫子上。"
TEXT = ("() => [...document.querySelectorAll(\"[data-testid='stMain'], [data-testid='stSidebar']\")]"
        ".map(e => e.innerText).join('\\n')")
#: Every text Vega drew in a chart (titles, axis titles and labels, legends): innerText leaves SVG out.
CHART_TEXT = ("() => [...document.querySelectorAll(\"[data-testid='stVegaLiteChart'] svg.marks text\")]"
              ".map(t => t.textContent)")


def _example_texts() -> list[str]:
    """The pair examples' prompts (Head effects and Circuits run them): model input, allowed where shown whole."""
    from attnkit import examples

    return [v for ex in examples.EXAMPLES.values() for v in (ex["clean"], ex["corrupt"])]


#: The Glossary's English column: each term in English beside its Chinese, on purpose.
ENGLISH_TERMS = [term.en for term in GLOSSARY]


def _shown(page) -> list[str]:
    return [page.evaluate(TEXT)] + page.evaluate(CHART_TEXT)


def test_every_page_in_zh_has_no_untranslated_english_and_is_screenshotted(tmp_path):
    need_browser()
    model = make_checkpoint(tmp_path / "model", seed=3, n_layer=2, n_head=2, n_embd=32, n_positions=64,
                            vocab_size=1000)
    found, links = {}, {}
    with streamlit_server(model) as (url, _proc), chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        track_runs(page)
        for spec in PAGES:
            with language("zh"):
                heading = str(spec.shown_title)
            open_page(page, url, spec.title, {"lang": "zh", "prompt": PROMPT}, heading=heading, timeout=180_000)
            links[spec.key] = page.url
            shown = _shown(page)
            tabs = page.locator("[data-testid='stMain'] [role='tab']")
            for i in range(1, tabs.count()):            # every tab's text and charts
                act(page, lambda: tabs.nth(i).click(), 180_000)
                shown += _shown(page)
            found[spec.key] = untranslated(shown, allow=[str(model), *_example_texts(), *ENGLISH_TERMS])
            screenshot(page, spec.key, folder=SCREENSHOTS / "zh", full_page=False)
    assert all("lang=zh" in u for u in links.values()), links
    assert (SCREENSHOTS / "zh" / "home.png").exists()
    left = {k: v for k, v in found.items() if v}
    assert not left, "untranslated English, by page:\n" + "\n".join(f"{k}: {v}" for k, v in left.items())
