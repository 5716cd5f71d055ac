"""In Chromium at 1280×800, in English and 简体中文: the Sinks page on a shipped text draws its four charts (the
share map, the writes, the share against length, the loss against (k, w)), states its verdict, generates with an
evicting cache on its button, fits the window (nothing cut off), and is saved under artifacts/screenshots/."""
import pytest

from attnkit.i18n import language, t
from browser import CHART, act, chromium, layout_problems, need_browser, open_page, screenshot, streamlit_server, \
    track_runs, wait_idle
from helpers import make_checkpoint
from untranslated import untranslated

pytestmark = pytest.mark.browser

MAIN = "() => document.querySelector(\"[data-testid='stMain']\").innerText"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sinks_page_in_both_languages_fits_1280_by_800(tmp_path, lang):
    need_browser()
    model = make_checkpoint(tmp_path / "model", seed=4, n_layer=2, n_head=4, n_embd=64, n_positions=256,
                            vocab_size=1000)
    with language(lang):
        heading, generate = t("Attention sinks & KV cache"), t("Generate both ways")
    verdict = {"en": "Verdict:", "zh": "结论："}[lang]
    with streamlit_server(model, timeout=120) as (url, _proc), chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        track_runs(page)
        open_page(page, url, "Sinks", {"lang": lang, "source": "eval", "tokens": 1024}, heading=heading,
                  timeout=300_000)
        page.wait_for_function(f"document.querySelectorAll({CHART!r}).length >= 4", timeout=300_000)
        wait_idle(page, 300_000)
        main = page.locator("[data-testid='stMain']")
        assert verdict in main.inner_text()
        act(page, lambda: main.get_by_role("button", name=generate).click(), timeout=300_000)
        main.locator("[data-testid='stText']").first.wait_for(timeout=120_000)
        screenshot(page, f"sinks_{lang}")
        assert layout_problems(page) == []
        if lang == "zh":                         # model output and the text's own tokens are shown as they are
            shown = main.locator("[data-testid='stText']").all_inner_texts()
            assert untranslated(page.evaluate(MAIN), allow=[str(model), *shown]) == []
        assert "source=eval" in page.url and "tokens=1024" in page.url
