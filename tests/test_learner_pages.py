"""What a learner checks on the pages, in 简体中文 too: the Ablations page's why and caveat, the softmax calculator
(the seed's 9, 3, −2), the next-token top 5 against HuggingFace, and the seeds' Chinese examples on the Chinese
model, their numbers from the model. (Every page in Chinese: tests/test_app_zh.py.)"""
import math
from types import SimpleNamespace

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnkit import examples, i18n
from attnkit.app.language import SESSION_KEY
from attnkit.app.navigation import page_spec
from attnkit.app.pages.shared.next_token import next_token_frame, percent
from attnkit.app.pages.steps import seeds
from attnkit.attribution import next_tokens
from attnkit.loading import CHINESE_MODEL, load
from helpers import apptest
from untranslated import apptest_texts, untranslated


def zh_page(page: str, timeout: float = 240, **state) -> AppTest:
    """``page`` (a key of PAGES) in the app, in Chinese unless ``state`` sets the language."""
    return apptest(page, timeout=timeout, **{SESSION_KEY: "zh", **state})


def body_texts(at) -> list[str]:
    """What the page body shows (the sidebar and frame belong to the frame's own test)."""
    return apptest_texts(SimpleNamespace(_tree=at.main))


#: Model input shown as it is: the example prompt pairs (Head effects, Circuits) and their answer tokens.
MODEL_INPUT = [v for ex in examples.EXAMPLES.values() for v in ex.values()]


def english_left(at, page: str) -> list[str]:
    # the page's heading is the frame's (navigation.PAGES), translated with the frame
    return untranslated(body_texts(at), allow=[page_spec(page).shown_title, *MODEL_INPUT])


def test_ablations_page_shows_why_and_caveat():
    at = zh_page("ablations", ab_kind="v=x").run()
    assert not at.exception
    texts = body_texts(at)
    with i18n.language("zh"):
        why, caveat = i18n.t("**Why.** {why}", why="").strip(), i18n.t("**What the loss change measures.** {caveat}",
                                                                         caveat="").strip()
    assert any(s.startswith(why) and len(s) > len(why) + 5 for s in texts), texts
    assert any(s.startswith(caveat) and len(s) > len(caveat) + 5 for s in texts), texts


def _calculator_page():
    from attnkit.app.pages.shared import calculator

    calculator.softmax_calculator(d=4)


def test_calculator_widget_gives_the_seed_numbers():
    at = AppTest.from_function(_calculator_page).run()
    assert not at.exception
    df = at.dataframe[0].value
    e = [math.exp(s) for s in (9, 3, -2)]
    expect = [f"{100 * x / sum(e):.2f} %" for x in e[:2]]
    assert list(df.iloc[:, 1])[:2] == expect == ["99.75 %", "0.25 %"]
    assert list(df.iloc[:, 1])[2] == "0.002 %" and 100 * e[2] / sum(e) == pytest.approx(0.00167, rel=1e-2)
    e4 = [math.exp(s / 2) for s in (9, 3, -2)]                       # 1/√d with d = 4
    assert list(df.iloc[:, 2]) == [percent(x / sum(e4)) for x in e4]
    at.text_input[0].input("1, 2, x").run()
    assert at.error and "x" in at.error[0].value and not at.dataframe


def test_next_token_top5_equals_huggingface():
    model = load("attnkit-tiny", "cpu")
    ids = model.encode("The animal didn't cross the street because it was too")
    preds = next_tokens(model.weights, ids, lambda i: model.token_strs([i])[0], k=5)
    with torch.no_grad():
        logits = model.hf_model(torch.tensor([ids])).logits[0, -1].double()
    p, top = torch.softmax(logits, -1).topk(5)
    assert [x.token_id for x in preds] == top.tolist()
    assert [x.prob for x in preds] == pytest.approx(p.tolist(), abs=1e-5)
    frame = next_token_frame(preds)
    assert list(frame.iloc[:, 2]) == [percent(x) for x in p.tolist()]


zh_ready = pytest.mark.skipif(not seeds.zh_model_ready(), reason=f"{CHINESE_MODEL} is not installed")


@zh_ready
def test_seed_examples_live_on_the_chinese_model():
    at = zh_page("steps", ak_model=CHINESE_MODEL, ak_text=seeds.ZH_CAT).run()
    assert not at.exception, at.exception
    assert not english_left(at, "steps"), english_left(at, "steps")
    model = load(CHINESE_MODEL, "cpu")
    ids = model.encode(seeds.ZH_FOOD)
    preds = next_tokens(model.weights, ids, lambda i: model.token_strs([i])[0], k=5)
    shown = [df.value for df in at.dataframe]
    assert any(list(df.iloc[:, 2]) == [percent(x.prob) for x in preds] for df in shown if df.shape[1] == 3)


@zh_ready
def test_one_click_loads_the_chinese_model_with_the_seed_sentence():
    # in English: AppTest cannot rerun a page whose select box shows a translated label (it looks the shown label
    # up among the untranslated options); the zh page's own text is checked by the tests above
    at = zh_page("steps", **{SESSION_KEY: "en"}).run()    # attnkit-tiny, English prompt
    button = next(b for b in at.button if b.key == "st_zh_load")
    button.click().run()
    assert at.session_state["ak_model"] == CHINESE_MODEL and at.session_state["ak_text"] == seeds.ZH_CAT
