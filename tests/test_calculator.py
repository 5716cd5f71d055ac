"""The softmax calculator (issue 44, class 17): no finite input gives NaN — 1e308 and 0 at the widget's lowest
temperature are 100 % and 0 %, subnormal and huge temperatures work —, checked against a reference written here in
60-digit decimal arithmetic (exact inputs, no float overflow); every bad d, temperature or score is the calculator's
own one-line error in the reader's language, never a bare ValueError or OverflowError."""
from __future__ import annotations

import math
import random
from decimal import Decimal, localcontext

import numpy as np
import pytest

from attnkit import calculator as C
from attnkit.app.pages.shared.next_token import percent
from attnkit.i18n import language


def reference(scores, temperature: float, d: int | None = None) -> list[float]:
    """softmax(s / (√d·T)) from the exact decimal values of the floats, at 60 digits: p_i = exp(z_i − max z) / Σ,
    with Decimal's exponent range (far beyond float's), so nothing overflows; an underflowing term is 0."""
    with localcontext() as ctx:
        ctx.prec = 60
        ctx.Emin, ctx.Emax = -10**8, 10**8
        div = Decimal(temperature) * (Decimal(d).sqrt() if d else 1)
        z = [Decimal(s) / div for s in scores]
        top = max(z)
        e = [(x - top).exp() for x in z]
        total = sum(e)
        return [float(x / total) for x in e]


def _close(got, want) -> bool:
    return all(abs(g - w) <= 1e-12 * max(abs(w), 1e-300) + 1e-300 for g, w in zip(got, want))


def test_the_issues_case_is_100_and_0_percent_at_the_lowest_temperature():
    r = C.calculate("1e308, 0", d=64, temperature=0.01)          # the widget's lowest T (it showed nan %)
    assert r.plain == (1.0, 0.0) and r.scaled == (1.0, 0.0)
    assert [percent(p) for p in r.plain] == ["100.00 %", "0.00 %"]
    # the gap 2e308 overflows float64, yet over √4·1e308 it is 1: weights 1/(1 + e^-1), e^-1/(1 + e^-1)
    assert C.calculate([1e308, -1e308], d=4, temperature=1e308).scaled == pytest.approx(
        [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))], rel=1e-15)


def test_hand_computed_values():
    # gaps 0 and −1 at T = 1/2: weights 1/(1 + e^-2), e^-2/(1 + e^-2); with d = 4 the gap is −1/(2·½) = −1
    r = C.calculate([3.0, 2.0], d=4, temperature=0.5)
    assert r.plain == pytest.approx([1 / (1 + math.exp(-2)), math.exp(-2) / (1 + math.exp(-2))], rel=1e-15)
    assert r.scaled == pytest.approx([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))], rel=1e-15)
    # a subnormal temperature works: 5e-324 / 5e-324 is a gap of exactly 1
    assert C.calculate([5e-324, 0.0], temperature=5e-324).plain == pytest.approx(
        [math.e / (1 + math.e), 1 / (1 + math.e)], rel=1e-15)
    assert C.calculate([1.0, 0.0], temperature=5e-324).plain == (1.0, 0.0)
    assert C.calculate([7.0, 7.0, 7.0], temperature=1e-320).plain == pytest.approx([1 / 3] * 3, rel=1e-15)
    assert C.calculate([1e308, -1e308], temperature=1e308).plain == pytest.approx(
        [1 / (1 + math.exp(-2)), math.exp(-2) / (1 + math.exp(-2))], rel=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_random_scores_at_every_scale_match_the_decimal_reference(seed):
    rng = random.Random(seed)
    temps = [0.01, 1.0, 100.0, 5e-324, 2.2e-308, 1e-300, 1e300, 1.7e308]
    for _ in range(40):
        scale = 10.0 ** rng.choice([-320, -300, -5, 0, 1, 3, 100, 300, 307])
        scores = [rng.uniform(-1.7, 1.7) * scale for _ in range(rng.randint(1, 8))]
        T, d = rng.choice(temps), rng.choice([None, 1, 2, 64, 4096, C.MAX_D])
        r = C.calculate(scores, d=d, temperature=T)
        got = r.scaled if d else r.plain
        assert all(math.isfinite(p) and 0 <= p <= 1 for p in got)
        assert abs(sum(got) - 1) < 1e-12
        assert _close(got, reference(scores, T, d)), (scores, T, d, got)


def test_the_library_softmax_never_gives_nan():
    """It scaled before subtracting the maximum: 1e308/0.01 = inf, inf − inf = NaN (and 1/T = inf at a subnormal T)."""
    for s in ([1e308, 0], [-1e308, 1e308, 0], [1.7976931348623157e308, -1.7976931348623157e308]):
        for T in (5e-324, 0.01, 1.0, 1.7976931348623157e308):
            for d in (None, 64):
                p = C.softmax(s, T, d)
                assert np.isfinite(p).all() and abs(p.sum() - 1) < 1e-15 and _close(p, reference(s, T, d))


@pytest.mark.parametrize("kwargs,says", [
    ({"d": float("nan")}, "d (the head dimension) must be a whole number from 1 to"),
    ({"d": float("inf")}, "whole number from 1 to"),
    ({"d": 10**400}, "whole number from 1 to"),
    ({"d": -4}, "whole number from 1 to"),
    ({"d": 0}, "whole number from 1 to"),
    ({"d": 2.5}, "whole number from 1 to"),
    ({"d": C.MAX_D + 1}, "whole number from 1 to"),
    ({"d": "64"}, "whole number from 1 to"),
    ({"d": True}, "whole number from 1 to"),
    ({"temperature": 0.0}, "positive finite number"),
    ({"temperature": -1.0}, "positive finite number"),
    ({"temperature": float("nan")}, "positive finite number"),
    ({"temperature": float("inf")}, "positive finite number"),
    ({"temperature": 10**400}, "positive finite number"),
    ({"temperature": "warm"}, "positive finite number"),
])
def test_bad_d_and_temperature_are_the_calculators_own_error(kwargs, says):
    with pytest.raises(C.CalculatorError) as e:
        C.calculate("9, 3, -2", **kwargs)
    assert says in str(e.value) and "\n" not in str(e.value)
    with language("zh"):
        assert any("\u4e00" <= c <= "\u9fff" for c in str(e.value))


@pytest.mark.parametrize("scores,says", [
    ("0,5 0,3", "looks like decimal commas"),
    ("0,5, 0,3", "looks like decimal commas"),
    ("９, 3", "not a number in ASCII digits"),
    ("9, ٣", "not a number in ASCII digits"),
    ("1e309, 0", "finite"),
    ("nan", "finite"),
    ([1, float("nan")], "finite"),
    ([10**400, 0], "finite"),
    (["9", 3], "finite"),
    ([True, 0], "finite"),
    ([0.0] * (C.MAX_SCORES + 1), "at most 64"),
    ([], "at least one score"),
])
def test_bad_scores_are_the_calculators_own_error(scores, says):
    with pytest.raises(C.CalculatorError) as e:
        C.calculate(scores)
    assert says in str(e.value) and "\n" not in str(e.value)
    with language("zh"):
        assert any("\u4e00" <= c <= "\u9fff" for c in str(e.value))


def test_commas_without_spaces_and_chinese_commas_are_lists():
    assert C.parse_scores("9,3,-2") == C.parse_scores("9，3，−2") == C.parse_scores("9, 3, -2") == [9.0, 3.0, -2.0]
    assert C.calculate(np.array([2.0, 0.0]), d=np.int64(4)).d == 4
