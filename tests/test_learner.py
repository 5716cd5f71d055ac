"""What a learner reads: verdicts with one unit per line, stated effect-size thresholds, a why and what
would settle it, the trained-with caveat (both languages); the softmax calculator (the seed's 9, 3, −2);
the next-token top 5; the notice for a Chinese prompt on a model that cannot read it; the glossary."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnkit import ablations as A
from attnkit import calculator as C
from attnkit import cjk, entropy as E, glossary
from attnkit.ablations import registry as R
from attnkit.attribution import next_tokens
from attnkit.i18n import language
from attnkit.pieces import char_groups
from attnkit.tolerances import TOL_LOGITS
from untranslated import untranslated


def fake_result(values: dict, scope=(0,)):
    """A Result stand-in: metric key -> (baseline per layer, ablated per layer)."""
    per_layer = {k: SimpleNamespace(baseline=list(b), ablated=list(a)) for k, (b, a) in values.items()}
    return SimpleNamespace(per_layer=per_layer, scope=list(scope))


def eff(delta, lo, hi, tokens=500):
    return A.Effect(delta, lo, hi, "tokens", tokens, tokens)


# ----------------------------------------------------------------------------- verdicts

def test_a_direction_is_not_enough_self_attention_must_move_by_the_threshold():
    kind = A.get_kind("wk=wq")
    small = kind.evidence(fake_result({R.ASYMMETRY.key: ([0.8], [0.0]), R.SELF.key: ([0.116], [0.136])}))
    assert small[1].holds is False and "0.1" in small[1].expect               # +0.02 < MIN_SHIFT
    v = kind.verdict(eff(0.3, 0.2, 0.4), small)
    assert v.status == A.NOT_SUPPORTED and "0.116 → 0.136" in v.why and v.settle
    big = kind.evidence(fake_result({R.ASYMMETRY.key: ([0.8], [0.0]), R.SELF.key: ([0.116], [0.5])}))
    assert kind.verdict(eff(0.3, 0.2, 0.4), big).status == A.SUPPORTED


def test_v_eq_x_evidence_uses_one_unit_on_both_lines():
    kind = A.get_kind("v=x")
    res = fake_result({R.HULL_RELATIVE.key: ([4.26], [1.19e-7]), R.HULL_LOWER.key: ([31.6], [0.0]),
                       R.HULL_MAX.key: ([40.0], [2e-6]), R.HULL_LOWER_RELATIVE.key: ([3.9], [0.0])})
    ev = kind.evidence(res)
    assert [str(e.unit) for e in ev] == ["distance / RMS norm of x̂"] * 2
    assert ev[1].baseline == 3.9 < ev[0].baseline == 4.26                    # the bound reads below what it bounds
    assert all(e.holds for e in ev)
    line = str(ev[1].line())
    assert line.startswith("certified lower bound of that distance (distance / RMS norm of x̂): 3.9 → 0")


@pytest.mark.parametrize("name,caveat", [("v=x", True), ("wk=wq", True), ("no-scale", True), ("no-mask", False),
                                          ("no-sink", True), ("zero-head", False), ("mean-head", False)])
def test_removing_a_trained_with_part_says_what_the_loss_rise_measures(name, caveat):
    v = A.get_kind(name).verdict(eff(0.3, 0.2, 0.4), [])
    assert bool(v.caveat) is caveat
    if caveat:
        assert "depends on it, not whether the design is better" in v.caveat
        with language("zh"):
            assert "依赖程度" in str(v.caveat) and "训练" in str(v.caveat)


@pytest.mark.parametrize("e,status,why", [
    (eff(0.0002, 0.0001, 0.0003), A.NOT_SUPPORTED, "lies short of a rise of 0.01 nats/token"),
    (eff(0.02, -0.01, 0.05), A.NOT_ENOUGH, "straddles the 0.01 nats/token threshold"),
    (eff(0.2, 0.15, 0.25, tokens=18), A.NOT_ENOUGH, "only 18 predicted tokens"),
    (None, A.NOT_ENOUGH, "no next token is predicted"),
])
def test_every_verdict_short_of_supported_says_why_and_what_would_settle_it(e, status, why):
    v = A.get_kind("zero-head").verdict(e, [])
    assert v.status == status and why in v.why and v.settle
    with language("zh"):
        for part in (v.text, v.why, v.settle, v.rule):
            s = str(part)
            assert "{" not in s and untranslated(s) == [], s


def test_no_mask_not_supported_gives_its_reason():
    kind = A.get_kind("no-mask")
    ev = kind.evidence(SimpleNamespace(per_layer={R.FUTURE.key: SimpleNamespace(baseline=[0.0], ablated=[0.4])},
                                       scope=[0], per_position=[SimpleNamespace(relative_change=0.2)] * 3))
    v = kind.verdict(eff(0.3, 0.2, 0.4), ev)        # the loss rose: the claim predicts a fall
    assert v.status == A.NOT_SUPPORTED and "lies short of a fall" in v.why


def test_entropy_with_one_text_names_the_window_setting_that_would_settle_it():
    T, L, H = 120, 2, 2
    agg = E.Aggregate()
    x = np.log(np.arange(1, T + 1))
    agg.add(np.broadcast_to(0.8 * x, (L, H, T)).copy(), np.zeros((L, H, T)), None)
    status, why = E.claim_check(agg.result())
    assert status == "not enough evidence"
    assert "set Window (tokens) (--window on the command line) to 24 with" in why     # 120 tokens / 5 windows
    assert E.advice(agg.result()).window == 24 == E.advised_window(120)
    with language("zh"):
        assert "窗口（token 数）" in str(why) and "24" in str(why)
    short = E.Aggregate()
    short.add(np.broadcast_to(0.8 * x[:20], (L, H, 20)).copy(), np.zeros((L, H, 20)), None)
    assert "a longer text (at least 40 tokens)" in E.claim_check(short.result())[1]


# ----------------------------------------------------------------------------- calculator

def test_the_seeds_softmax_example_is_99_75_0_25_0_002_percent():
    r = C.calculate("9, 3, −2")
    e = [math.exp(9), math.exp(3), math.exp(-2)]
    assert r.plain == pytest.approx([v / sum(e) for v in e], rel=1e-12)
    assert [round(100 * p, 3) for p in r.plain] == [99.751, 0.247, 0.002]        # not 60 %, 30 %, 10 %
    assert r.scaled is None


def test_calculator_scaling_and_temperature_on_hand_numbers():
    r = C.calculate([2.0, 0.0], d=4, temperature=0.5)      # plain: scores / 0.5 = 4, 0; scaled: scores / (2 · 0.5)
    assert r.plain == pytest.approx([1 / (1 + math.exp(-4)), math.exp(-4) / (1 + math.exp(-4))], rel=1e-12)
    assert r.scaled == pytest.approx([1 / (1 + math.exp(-2)), math.exp(-2) / (1 + math.exp(-2))], rel=1e-12)
    assert C.calculate("1000，0；-1000").plain[0] == 1.0                   # Chinese commas; no overflow
    assert [row["score"] for row in r.rows()] == [2.0, 0.0]


@pytest.mark.parametrize("text,kwargs,says", [("", {}, "at least one score"), ("9, x", {}, "'x' is not a number"),
                                              ("1, inf", {}, "finite"), ("1", {"temperature": 0}, "temperature"),
                                              ("1", {"d": 0}, "whole number from 1 to"), (",".join("1" * 65), {}, "at most 64")])
def test_calculator_refuses_bad_input_in_one_line(text, kwargs, says):
    with pytest.raises(C.CalculatorError) as err:
        C.calculate(text, **kwargs)
    assert says in str(err.value) and "\n" not in str(err.value)
    with language("zh"):
        assert any("\u4e00" <= c <= "\u9fff" for c in str(err.value))


# ----------------------------------------------------------------------------- next token, CJK, glossary

def test_next_tokens_are_the_models_own_top_five(odd):
    ids = odd.encode("The animal didn't cross the street")
    top = next_tokens(odd.weights, ids, odd.tokenizer.decode, k=5)
    with torch.no_grad():
        hf = torch.softmax(odd.hf_model(torch.tensor([ids])).logits[0, -1].double(), -1)
    p, i = hf.topk(5)
    assert [t.token_id for t in top] == i.tolist()
    assert [t.prob for t in top] == pytest.approx(p.tolist(), abs=TOL_LOGITS)
    assert all(a.prob >= b.prob for a, b in zip(top, top[1:])) and all(isinstance(t.token, str) for t in top)
    with pytest.raises(ValueError, match="no tokens"):
        next_tokens(odd.weights, [], odd.tokenizer.decode)


def _split_bytes(text):
    """Every character as its own UTF-8 bytes, one byte per token (what an English BPE does to 汉字)."""
    return [bytes([b]) for b in text.encode("utf-8")]


def test_cjk_notice_names_the_chinese_model_when_the_characters_are_split():
    text = "猫坐在垫子上"
    split = char_groups(_split_bytes(text))
    whole = char_groups([c.encode() for c in text])
    assert cjk.split_share(split) == 1.0 and cjk.split_share(whole) == 0.0
    note = cjk.cjk_notice(text, split, "attnkit-tiny")
    assert note is not None and "attnkit-tiny-zh" in note and "100%" in note
    with language("zh"):
        assert "attnkit-tiny-zh" in str(note) and "中文" in str(note)
    assert cjk.cjk_notice(text, whole, "attnkit-tiny") is None                       # it reads them
    assert cjk.cjk_notice(text, whole, "attnkit-tiny", knows_cjk=False) is not None  # trained on none
    assert cjk.cjk_notice(text, split, cjk.CHINESE_MODEL) is None
    little = cjk.cjk_notice(text, whole, "attnkit-tiny", vocab_share=0.13)        # whole, but little Chinese
    assert little is not None and "13%" in little and "attnkit-tiny-zh" in little
    assert cjk.cjk_notice(text, whole, "attnkit-tiny", vocab_share=0.45) is None
    assert cjk.vocab_cjk_share([b"ab", "猫".encode(), b"\xe7", "上海".encode()]) == 0.5
    assert cjk.cjk_notice("The cat 猫", char_groups(_split_bytes("The cat 猫")), "attnkit-tiny") is None


def test_cjk_check_on_a_real_byte_level_tokenizer(odd):
    text = "今天在上海吃了"
    groups = odd.token_groups(odd.encode(text))
    share = cjk.split_share(groups)
    assert 0.0 <= share <= 1.0
    assert (cjk.cjk_notice(text, groups, "odd") is not None) == (share > cjk.SPLIT_MOST)
    assert cjk.vocab_has_cjk(odd.token_bytes(range(len(odd.tokenizer)))) is True   # the test BPE saw 注意力
    assert cjk.vocab_has_cjk([b"the", b"\xe5"]) is False


def test_glossary_uses_the_seeds_vocabulary_and_is_translated():
    names = {t.key: t.zh for t in glossary.GLOSSARY}
    for key, word in [("attention", "注意力"), ("query", "查询"), ("key", "键"), ("value", "值"),
                      ("causal-mask", "掩码"), ("multi-head", "多头"), ("entropy", "熵"), ("kv-cache", "KV 缓存")]:
        assert word in names[key]
    assert len(names) == len(glossary.GLOSSARY)
    with language("zh"):
        for t in glossary.GLOSSARY:
            assert untranslated(str(t.definition)) == [], t.key
    with pytest.raises(KeyError, match="unknown glossary term"):
        glossary.term("nope")
