"""Step by step's calculator: type attention scores, see the softmax — with and without 1/√d, at a
temperature — so a reader can check any number an article gives (a seed says 9, 3, −2 become 60 %, 30 %,
10 %; they become 99.75 %, 0.25 %, 0.002 %).

Computed in float64 with the max subtracted before dividing by the temperature and √d (no finite input gives NaN,
1e308 and 0 at any temperature give 100 % and 0 %); bad input — scores, d or a temperature — raises
:class:`CalculatorError` with a one-line message from the catalog, never a bare ValueError or OverflowError.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import numpy as np

from .i18n import msg

__all__ = ["CalculatorError", "MAX_SCORES", "MAX_D", "parse_scores", "softmax", "Softmax", "calculate"]

#: At most this many scores (a calculator, not a model).
MAX_SCORES = 64
#: The largest head dimension d the calculator takes (real models: 64–256).
MAX_D = 2 ** 20
_MINUS = str.maketrans({"−": "-", "–": "-", "—": "-", "，": ",", "；": ",", ";": ",", "、": ","})
_DECIMAL_COMMA = re.compile(r"[0-9],[0-9]", re.ASCII)


class CalculatorError(ValueError):
    """Scores, d or a temperature that cannot be used; ``str(err)`` says what is wrong (in the reader's language)."""


def parse_scores(text: str) -> list[float]:
    """``"9, 3, −2"`` (commas, spaces, Chinese commas; − or -) -> [9.0, 3.0, -2.0]. Refused, each in one line: no
    score, more than :data:`MAX_SCORES`, a word, a non-finite number, digits other than ASCII 0-9, and decimal
    commas (``0,5 0,3``: a comma between digits in a list that also separates by spaces)."""
    text = (text or "").translate(_MINUS).strip()
    items = [t for t in re.split(r"[,\s]+", text) if t]
    if not items:
        raise CalculatorError(msg("type at least one score, e.g. 9, 3, -2"))
    if len(items) > MAX_SCORES:
        raise CalculatorError(msg("at most {max} scores, got {n}", max=MAX_SCORES, n=len(items)))
    if _DECIMAL_COMMA.search(text) and re.search(r"\s", text):
        raise CalculatorError(msg("{scores} looks like decimal commas: write decimals with a point (0.5) and separate "
                                  "the scores with commas", scores=repr(text[:40])))
    return [_score(t) for t in items]


def _score(item: str) -> float:
    if not item.isascii():
        raise CalculatorError(msg("{item} is not a number in ASCII digits (0-9, a point, e, -)", item=repr(item)))
    try:
        x = float(item)
    except ValueError:
        raise CalculatorError(msg("{item!r} is not a number (scores are numbers separated by commas)",
                                  item=item)) from None
    if not math.isfinite(x):
        raise CalculatorError(msg("scores must be finite numbers, got {item!r}", item=item))
    return x


def softmax(scores, temperature: float = 1.0, d: int | None = None) -> np.ndarray:
    """softmax(scores / (√d · T)) in float64 (without d: softmax(scores / T)), computed so that no finite input
    gives NaN: the maximum is subtracted first, the gaps s − max ≤ 0 are divided by T and then by √d (one after
    the other: their product may overflow). A gap beyond the float range (1e308 − (−1e308)) is halved before the
    division (by T/2), so a large T still gives it its finite share; a subnormal T sends every non-zero gap to
    −inf (a weight of 0). The largest score's term is exp(0) = 1, so the sum is ≥ 1."""
    s = np.asarray(scores, dtype=np.float64)
    T = float(temperature)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        gap = s - s.max()
        z = gap / T
        wide = np.isinf(gap)
        z[wide] = (s[wide] / 2 - s.max() / 2) / (T / 2)
        if d is not None:
            z = z / math.sqrt(d)
        e = np.exp(z)
    return e / e.sum()


@dataclass(frozen=True)
class Softmax:
    """The weights of one set of scores: plain (÷ temperature), and scaled by 1/√d (÷ temperature)."""

    scores: tuple
    d: int | None
    temperature: float
    plain: tuple               # softmax(scores / T)
    scaled: tuple | None       # softmax(scores / (√d · T)); None without d

    def rows(self) -> list[dict]:
        """One row per score: the score, its weight without and with 1/√d (as fractions, 0–1)."""
        return [{"score": s, "softmax": p, "softmax_scaled": None if self.scaled is None else self.scaled[i]}
                for i, (s, p) in enumerate(zip(self.scores, self.plain))]


def _real(x) -> float | None:
    """A finite real number as a float (bool, text, NaN, ±inf and integers beyond the float range: None)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        return None
    try:
        v = float(x)
    except (OverflowError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _values(scores) -> list[float]:
    if isinstance(scores, str):
        return parse_scores(scores)
    try:
        items = list(scores)
    except TypeError:
        raise CalculatorError(msg("type at least one score, e.g. 9, 3, -2")) from None
    if not items:
        raise CalculatorError(msg("type at least one score, e.g. 9, 3, -2"))
    if len(items) > MAX_SCORES:
        raise CalculatorError(msg("at most {max} scores, got {n}", max=MAX_SCORES, n=len(items)))
    values = [_real(x) for x in items]
    bad = next((x for x, v in zip(items, values) if v is None), None)
    if any(v is None for v in values):
        raise CalculatorError(msg("scores must be finite numbers, got {item!r}", item=str(bad)[:40]))
    return values


def _head_dim(d) -> int | None:
    v = None if d is None else _real(d)
    if d is not None and (v is None or not v.is_integer() or not 1 <= v <= MAX_D):
        raise CalculatorError(msg("d (the head dimension) must be a whole number from 1 to {max}, got {d}",
                                  max=f"{MAX_D:,}", d=str(d)[:40]))
    return None if d is None else int(v)


def calculate(scores, d: int | None = None, temperature: float = 1.0) -> Softmax:
    """Scores (a list, or text for :func:`parse_scores`) -> :class:`Softmax`, with 1/√d when ``d`` is given.
    CalculatorError (one line, translated) for scores, d or a temperature it cannot use; never a NaN."""
    values = _values(scores)
    T = _real(temperature)
    if T is None or T <= 0:
        raise CalculatorError(msg("the temperature must be a positive finite number, got {t}",
                                  t=str(temperature)[:40]))
    dim = _head_dim(d)
    plain = softmax(values, T)
    scaled = None if dim is None else softmax(values, T, dim)
    return Softmax(tuple(values), dim, T, tuple(map(float, plain)), None if scaled is None else tuple(map(float, scaled)))
