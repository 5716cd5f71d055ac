"""The dashboard in 简体中文: every page of the page list rendered with lang=zh shows no untranslated English
sentence; switching language keeps every other choice; a Chinese prompt on an English-only model
shows the CJK notice and its one-click switch to the Chinese model."""
import pytest

from attnkit import cjk
from attnkit.loading import SHIPPED
from attnkit.app.language import SESSION_KEY
from attnkit.app.navigation import PAGES
from helpers import apptest
from markdown_shown import literal_markdown
from test_learner_pages import MODEL_INPUT
from untranslated import apptest_texts, chart_texts, untranslated

ZH_PROMPT = "猫坐在垫子上。猫坐在垫子上。"


def _run_zh(page, model_dir, **state):
    at = apptest(page, model_dir, text=ZH_PROMPT, **{SESSION_KEY: "zh"}, **state).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("page", [spec.key for spec in PAGES])
def test_page_in_zh_has_no_untranslated_english(page, small_dir):
    """Everything a page shows, its charts' titles, axes, legends and tooltips included (their Vega specs)."""
    at = _run_zh(page, small_dir)
    texts = apptest_texts(at)
    assert any("注意力" in s or "模型" in s or "头" in s for s in texts), texts[:20]
    assert untranslated(texts, allow=[str(small_dir), *MODEL_INPUT]) == []
    assert literal_markdown(at) == []             # no Markdown shown as its marks (round five: **grey = masked**)
    assert untranslated(chart_texts(at), allow=[str(small_dir), *MODEL_INPUT]) == []


def test_every_view_of_heatmaps_in_zh(small_dir):
    for view in ("All heads of a layer", "One head through all layers", "Tokens"):
        at = _run_zh("heatmaps", small_dir, hm_view=view)
        assert untranslated(apptest_texts(at), allow=[str(small_dir)]) == [], view
        assert literal_markdown(at) == [], view


def test_switching_language_keeps_model_prompt_and_page_choices(small_dir):
    at = apptest("heatmaps", small_dir, text="Hello world, hello again.", hm_view="All heads of a layer",
                 hm_layer=1).run()
    assert not at.exception
    assert at.radio(key=SESSION_KEY).value == "en"
    assert any("Colour scale" == r.label for r in at.radio)
    at.radio(key=SESSION_KEY).set_value("zh").run()
    assert not at.exception
    assert at.session_state[SESSION_KEY] == "zh"
    assert any("颜色刻度" == r.label for r in at.radio)            # the page is in Chinese now …
    assert at.session_state["ak_folder"] == str(small_dir)          # … and every other choice is kept
    assert at.session_state["ak_text"] == "Hello world, hello again."
    assert at.radio(key="hm_view").value == "All heads of a layer"
    assert at.selectbox(key="hm_layer").value == 1


def test_lang_in_the_link_sets_the_language(small_dir):
    at = apptest("home", small_dir, text=ZH_PROMPT)
    at.query_params["lang"] = "zh"
    at.run()
    assert not at.exception
    assert at.session_state[SESSION_KEY] == "zh"
    assert any(s.value == "模型卡" for s in at.subheader)


def test_chinese_prompt_on_an_english_model_offers_the_chinese_model(small_dir):
    # GPT-2's byte-level BPE splits these characters into byte pieces (attnkit-tiny's vocabulary holds most of
    # them whole, so cjk_notice stays silent there: see the report)
    at = apptest("home", small_dir, text=ZH_PROMPT).run()
    assert not at.exception
    notes = [w.value for w in at.main.warning if cjk.CHINESE_MODEL in w.value]
    assert len(notes) == 1, [w.value for w in at.main.warning]
    at.button(key="ak_load_zh").click().run()
    assert at.session_state["ak_model"] == cjk.CHINESE_MODEL          # one click: the Chinese model …
    assert at.session_state["ak_text"] == ZH_PROMPT                    # … on the same prompt
    if (SHIPPED[cjk.CHINESE_MODEL] / "config.json").exists():                                      # its folder ships (lands on main) → loaded
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert not [w for w in at.main.warning if cjk.CHINESE_MODEL in w.value]


def test_chinese_prompt_on_attnkit_tiny_offers_the_chinese_model():
    # attnkit-tiny keeps most common characters whole (classical poems in its corpus) but only 13 % of its
    # vocabulary is Chinese: the notice says so and offers the Chinese model in one click
    at = apptest("home", text=ZH_PROMPT, ak_model="attnkit-tiny").run()
    assert not at.exception
    notes = [w.value for w in at.main.warning if cjk.CHINESE_MODEL in w.value]
    assert len(notes) == 1 and "13%" in notes[0], [w.value for w in at.main.warning]
    at.button(key="ak_load_zh").click().run()
    assert at.session_state["ak_model"] == cjk.CHINESE_MODEL and at.session_state["ak_text"] == ZH_PROMPT


def test_english_prompt_shows_no_cjk_notice():
    at = apptest("home", text="The cat sat on the mat.", ak_model="attnkit-tiny").run()
    assert not at.exception
    assert not [w for w in at.main.warning if cjk.CHINESE_MODEL in w.value]


def test_the_chinese_model_starts_on_chinese_text_and_chinese_pairs():
    """Issue 44: the default prompt and the pair examples stayed English on attnkit-tiny-zh. The prompt a session
    starts with follows the model's language, an untouched default follows a model change, typed text is kept;
    Head effects opens on the Chinese model's own (solved) Chinese pair."""
    from attnkit import examples
    from attnkit.app.context import DEFAULT_PROMPT, DEFAULT_PROMPTS

    zh_default = DEFAULT_PROMPTS[cjk.CHINESE_MODEL]
    at = apptest("home", ak_model=cjk.CHINESE_MODEL).run()
    assert not at.exception and at.session_state["ak_text"] == zh_default
    at.selectbox(key="ak_model").set_value("attnkit-tiny").run()
    assert at.session_state["ak_text"] == DEFAULT_PROMPT                # the untouched default follows the model
    at.session_state["ak_text"] = "The cat sat on the mat."
    at.selectbox(key="ak_model").set_value(cjk.CHINESE_MODEL).run()
    assert at.session_state["ak_text"] == "The cat sat on the mat."     # typed text is the user's
    he = apptest("effects", ak_model=cjk.CHINESE_MODEL, **{SESSION_KEY: "zh"}).run()
    assert not he.exception and he.selectbox(key="he_example").value == next(iter(examples.CHINESE_EXAMPLES))
    assert not [w.value for w in he.warning if "没有解出" in w.value]
