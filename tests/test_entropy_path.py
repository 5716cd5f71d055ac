"""Round five, Entropy as a learner meets it: the one-click path from Step by step reaches a verdict, the verdict's
advice is one rule that following never undoes (and ends in a verdict or stops), shipped texts are offered, and
one account says which tokens were used (the sidebar does not say "dropped" on a page that uses them all)."""
import numpy as np
import pytest

from attnkit import entropy as E
from attnkit.app.pages.entropy import texts as entropy_texts
from attnkit.app.pages.steps import seeds
from attnkit.loading import CHINESE_MODEL, load, shipped_texts
from helpers import apptest

zh_ready = pytest.mark.skipif(not seeds.zh_model_ready(), reason=f"{CHINESE_MODEL} is not installed")
L, H = 2, 2


def _summary(n_docs: int, T: int, slope: float, noise: float = 0.0):
    x, rng, agg = np.log(np.arange(1, T + 1)), np.random.default_rng(0), E.Aggregate()
    for _ in range(n_docs):
        agg.add(np.clip(slope * x + noise * rng.standard_normal((L, H, T)), 0, None), np.zeros((L, H, T)), None)
    return agg.result()


def test_the_advice_is_one_rule_and_never_undoes_itself():
    assert E.advised_window(9338, 1024) == 1024 and E.advised_window(83) == 16
    one = E.advice(_summary(1, 120, 0.8))                             # too few documents: the advised window
    assert one.window == 24 and not one.more_text
    assert E.advice(_summary(1, 20, 0.8)).more_text                  # 20 // 5 < MIN_WINDOW: more text
    # narrow between the thresholds, room for windows twice as long: longer windows, never shorter
    narrow = E.advice(_summary(20, 40, 0.2, 0.001))
    assert narrow.window == 160 and "longer windows" in str(narrow.message)
    # narrow, but the text is too short for windows twice as long: more text (not the window it came from)
    short = E.advice(_summary(6, 40, 0.2, 0.001))
    assert short.more_text and short.window is None and "at least 80 tokens" in str(short.message)
    # a window the too-few advice gives is never followed by a shorter or the same one
    for tokens in (40, 83, 120, 342, 1000):
        w = E.advised_window(tokens)
        assert tokens // w >= E.MIN_DOCS and E.advised_window(tokens) < 2 * w


@zh_ready
def test_following_the_advice_reaches_a_verdict_on_the_chinese_model():
    m = load(CHINESE_MODEL, "cpu")
    texts = {k: p.read_text(encoding="utf-8") for k, p in shipped_texts().items()}
    longest = max(texts, key=lambda k: len(texts[k]))
    text, window, seen = seeds.ZH_TEXT, m.config.n_ctx, set()
    for _ in range(4):
        assert (text[:20], window) not in seen                       # no advice leads back to a setting tried
        seen.add((text[:20], window))
        docs, _ = E.documents(m.encode, [text], window, split=True)
        s = E.profile_documents(m.weights, docs)
        verdict, why = E.claim_check(s, m.config.n_ctx)
        if verdict != "not enough evidence":
            break
        a = E.advice(s, m.config.n_ctx)
        assert str(a.message) in str(why)                            # the verdict says what the button does
        if a.window:
            window = a.window
        else:
            text = texts[longest]
            window = E.advised_window(len(m.encode(text)), m.config.n_ctx)
    assert verdict == "supported", why


def _fresh(at, tries: int = 30):
    """Rerun until no job on the page is still computing."""
    for _ in range(tries):
        if not any("the new one is computing" in c.value for c in at.caption):
            return at
        at.run()
    raise AssertionError("the entropy job did not finish")


def _verdict(at) -> str:
    return next(m.value for m in at.markdown if m.value.split(" ", 1)[-1].startswith("On **"))


@zh_ready
def test_the_one_click_path_and_the_advice_button_reach_a_verdict():
    at = apptest("steps", ak_model=CHINESE_MODEL, ak_text=seeds.ZH_CAT, timeout=300).run()
    link = next(b for b in at.button if "spread out" in b.label)
    link.click().run()
    inputs = {k: at.session_state[f"ent_{k}"] for k in ("text", "window", "split")}
    assert inputs["text"] in shipped_texts() and inputs["split"] == "split into windows"
    ent = _fresh(apptest("entropy", ak_model=CHINESE_MODEL, ak_text=seeds.ZH_TEXT, timeout=300,
                         **{f"ent_{k}": v for k, v in inputs.items()}).run())
    assert not ent.exception, ent.exception
    assert "**supported**" in _verdict(ent)
    # on the sidebar's short prompt the advice asks for more text, and its button measures the shipped text
    short = apptest("entropy", ak_model=CHINESE_MODEL, ak_text="猫坐在垫子上", timeout=300).run()
    assert "**not enough evidence**" in _verdict(short)
    short.button(key="ent_settle_text").click().run()
    assert "**supported**" in _verdict(_fresh(short))
    assert not [b for b in short.button if (b.key or "").startswith("ent_settle")]     # the advice stops


def test_one_account_of_the_tokens_used():
    words = " ".join(f"t{i % 40}" for i in range(300))               # planted-induction: 300 tokens, context 48
    at = apptest("entropy", ak_model="planted-induction", ak_text=words, timeout=300).run()
    assert not at.exception, at.exception
    assert not [w for w in at.main.warning if "were dropped" in w.value]
    note = next(c.value for c in at.caption if c.value.startswith("Measured:"))
    assert "300 of the 300 tokens" in note and "used whole" in note
    shown = apptest("heatmaps", ak_model="planted-induction", ak_text=words, timeout=300).run()
    assert [w for w in shown.main.warning if "the last 252 tokens were dropped" in w.value]
    assert set(entropy_texts.choices()) == {entropy_texts.PROMPT, *shipped_texts()}
