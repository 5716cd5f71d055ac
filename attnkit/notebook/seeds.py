"""The seeds' worked examples for a notebook (Step by step's "Seed examples" tab): the softmax calculator, the
4×4 causal example and the three-token demo, computed by :mod:`attnkit.calculator` and :mod:`attnkit.steps`."""
from __future__ import annotations

import pandas as pd

from .. import i18n
from ..calculator import calculate
from ..i18n import t
from ..steps import seed_causal_4x4, seed_three_tokens
from .patterns import Matrix

__all__ = ["softmax_table", "seed_matrices"]

#: The seed's three tokens, the rows of its X.
SEED_TOKENS = ["0 猫", "1 坐", "2 垫子上"]


def softmax_table(scores, d: int | None = None, temperature: float = 1.0) -> pd.DataFrame:
    """The softmax calculator: ``scores`` (a list, or text such as ``"9, 3, -2"``) -> one row per score with its
    weight softmax(s / T) and, given the head dimension ``d``, softmax(s / (√d·T)) (fractions 0–1, float64)."""
    return pd.DataFrame(calculate(scores, d, temperature).rows())


def _matrices(ex: dict, names: dict, lang: str, **labels) -> dict[str, Matrix]:
    with i18n.language(lang):
        return {k: Matrix(ex[k].numpy(), title=str(title), lang=lang, **labels.get(k, {})) for k, title in names.items()}


def seed_matrices(example: str = "mask", *, causal: bool = True, lang: str = i18n.DEFAULT) -> dict[str, Matrix]:
    """The seeds' examples as matrices with their numbers (each a result with a chart), in float64.

    ``"mask"``: every score row [1, 2, 3, 4] — ``scores``, ``mask`` (0 or −∞), ``masked`` and ``pattern``
    (softmax(scores + M)). ``"three tokens"``: X (the seed's 猫, 坐, 垫子上) used as Q, K and V — ``X``,
    ``scores`` (X·Xᵀ/√4), ``pattern`` and ``output`` (pattern·V), with the causal mask when ``causal``."""
    if example == "mask":
        with i18n.language(lang):
            names = {"scores": t("scores"), "mask": t("M (causal mask)"), "masked": t("scores + M"),
                     "pattern": "softmax(scores + M)"}
        return _matrices(seed_causal_4x4(), names, lang)
    if example == "three tokens":
        dims = [f"d{j}" for j in range(4)]
        rows, square = {"rows": SEED_TOKENS, "cols": dims}, {"rows": SEED_TOKENS, "cols": SEED_TOKENS}
        names = {"X": "X (= Q = K = V)", "scores": "X·Xᵀ / √4", "pattern": "softmax", "output": "output = weights·V"}
        return _matrices(seed_three_tokens(causal), names, lang, X=rows, output=rows, scores=square, pattern=square)
    raise ValueError(f"example is 'mask' or 'three tokens', not {example!r}")
