"""Step by step's calculator: type attention scores, see the softmax — with and without 1/√d, at a
temperature — so a reader can check any number an article gives (a seed says 9, 3, −2 become 60 %, 30 %,
10 %; they become 99.75 %, 0.25 %, 0.002 %).

Computed in float64 with the max subtracted first (exact for any finite scores); bad input raises
:class:`CalculatorError` with a one-line message from the catalog.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .i18n import msg

__all__ = ["CalculatorError", "MAX_SCORES", "parse_scores", "softmax", "Softmax", "calculate"]

#: At most this many scores (a calculator, not a model).
MAX_SCORES = 64
_MINUS = str.maketrans({"−": "-", "–": "-", "—": "-", "，": ",", "；": ",", ";": ",", "、": ","})


class CalculatorError(ValueError):
    """Scores, d or a temperature that cannot be used; ``str(err)`` says what is wrong (in the reader's language)."""


def parse_scores(text: str) -> list[float]:
    """``"9, 3, −2"`` (commas, spaces, Chinese commas; − or -) -> [9.0, 3.0, -2.0]."""
    items = [t for t in re.split(r"[,\s]+", (text or "").translate(_MINUS).strip()) if t]
    if not items:
        raise CalculatorError(msg("type at least one score, e.g. 9, 3, -2"))
    if len(items) > MAX_SCORES:
        raise CalculatorError(msg("at most {max} scores, got {n}", max=MAX_SCORES, n=len(items)))
    out = []
    for t in items:
        try:
            x = float(t)
        except ValueError:
            raise CalculatorError(msg("{item!r} is not a number (scores are numbers separated by commas)",
                                      item=t)) from None
        if not math.isfinite(x):
            raise CalculatorError(msg("scores must be finite numbers, got {item!r}", item=t))
        out.append(x)
    return out


def softmax(scores, scale: float = 1.0) -> np.ndarray:
    """softmax(scale · scores) in float64 (max subtracted: no overflow)."""
    z = np.asarray(scores, dtype=np.float64) * scale
    e = np.exp(z - z.max())
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


def calculate(scores, d: int | None = None, temperature: float = 1.0) -> Softmax:
    """Scores (a list, or text for :func:`parse_scores`) -> :class:`Softmax`, with 1/√d when ``d`` is given."""
    values = parse_scores(scores) if isinstance(scores, str) else [float(x) for x in scores]
    if not values or not all(math.isfinite(x) for x in values):
        raise CalculatorError(msg("scores must be finite numbers, got {item!r}", item=values))
    if not (math.isfinite(temperature) and temperature > 0):
        raise CalculatorError(msg("the temperature must be a positive number, got {t}", t=temperature))
    if d is not None and (int(d) != d or d < 1):
        raise CalculatorError(msg("d (the head dimension) must be a whole number ≥ 1, got {d}", d=d))
    plain = softmax(values, 1 / temperature)
    scaled = None if d is None else softmax(values, 1 / (math.sqrt(d) * temperature))
    return Softmax(tuple(values), None if d is None else int(d), float(temperature), tuple(map(float, plain)),
                   None if scaled is None else tuple(map(float, scaled)))
