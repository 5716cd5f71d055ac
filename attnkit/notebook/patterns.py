"""Results that read attention patterns: one head's pattern (Heatmaps), the heads' statistics (Compare heads),
entropy against context length (Entropy), a small matrix and the KV cache (Step by step).

Each wraps the library's computation and draws with the page's chart builder (:mod:`attnkit.charts`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import entropy as entropy_lib
from .. import i18n
from ..charts import entropy as entropy_charts
from ..charts import heatmaps as heatmap_charts
from ..charts import steps as step_charts
from ..i18n import msg, status_label, t
from ..pieces import token_labels
from ..standard import head_name, parse_head
from ..steps import KVDemo
from .results import Result

__all__ = ["Pattern", "HeadStats", "Entropy", "Matrix", "CacheDemo"]


@dataclass(repr=False)
class Pattern(Result):
    """One head's attention pattern ``a_ij`` (or its pre-softmax scores) on a prompt: query rows i, key columns j.

    The Heatmaps page's one-head view; masked cells (keys query i cannot see) are drawn grey and hold 0."""

    head: str                # "L1H3"
    kind: str                # "pattern" or "scores"
    values: np.ndarray       # [T, T]
    tokens: list[str]
    masked: np.ndarray       # [T, T] True where query i cannot see key j

    @property
    def labels(self) -> list[str]:
        return token_labels(self.tokens)

    def _frame(self) -> pd.DataFrame:
        return heatmap_charts.cells_frame(self.values, self.labels, self.labels, self.masked)

    def _chart(self, scale: str = "linear", size: int | None = None):
        layer, h = parse_head(self.head)
        title = t("{name} (layer {l}, head {h}): {kind}", name=self.head, l=layer, h=h,
                  kind=t("pattern") if self.kind == "pattern" else t("scores"))
        T = len(self.tokens)
        if T <= heatmap_charts.MARK_LIMIT:
            side = size or min(heatmap_charts.CONTENT_WIDTH - 200, max(420, 30 * T))
            return heatmap_charts.cell_chart(self.values, self.labels, self.labels, masked=self.masked, kind=self.kind,
                                             scale=scale, title=title, size=side, name=self.head)
        return heatmap_charts.image_chart(self.values, masked=self.masked, kind=self.kind, scale=scale, title=title,
                                          labels=self.labels, name=self.head, size=size or 620)

    def top_key(self, query: int = -1) -> tuple[int, float]:
        """(key position, value) of the largest visible entry of ``query``'s row."""
        i = query % len(self.tokens)
        row = np.where(self.masked[i], -np.inf, self.values[i])
        j = int(np.argmax(row))
        return j, float(self.values[i, j])

    def _summary(self):
        j, v = self.top_key(-1)
        return msg("{head} {kind} on {n} tokens: the last token {last!r} puts its largest {what} on position {j} "
                   "{key!r} ({value}).", head=self.head, kind=t("pattern") if self.kind == "pattern" else t("scores"),
                   n=len(self.tokens), last=self.tokens[-1], what=t("weight") if self.kind == "pattern" else t("score"),
                   j=j, key=self.tokens[j], value=f"{v:.3f}")


@dataclass(repr=False)
class HeadStats(Result):
    """Per-head statistics of the attention PATTERN (previous-token, first-token, self, duplicate-token, induction,
    entropy, mean distance) on a text, and induction on repeated random tokens.

    They measure where each head *looks*, not what it *does*: a head that attends to the previous token is not
    thereby a previous-token head of any circuit. Ablation (:meth:`Model.ablate`) and patching
    (:meth:`Model.patch`) measure effects."""

    table: pd.DataFrame      # attnkit.metrics.head_table: layer, head, one column per statistic
    n_tokens: int

    @property
    def statistics(self) -> list[str]:
        return [c for c in self.table.columns if c not in ("layer", "head")]

    def _frame(self) -> pd.DataFrame:
        """Columns head (``L{l}H{h}``), layer, head_index (Compare's overview reads these), the statistics."""
        df = self.table.rename(columns={"head": "head_index"})
        df.insert(0, "head", [head_name(int(l), int(h)) for l, h in zip(df["layer"], df["head_index"])])
        return df

    def top(self, stat: str, n: int = 5) -> pd.DataFrame:
        """The ``n`` heads with the highest ``stat`` (columns head, stat): a ranking of where heads look, not of
        what they do (:meth:`Model.patch` measures that)."""
        df = self._frame()
        return df.nlargest(n, self._stat(stat))[["head", stat]].reset_index(drop=True)

    def best(self, stat: str) -> str:
        """The head (``L{l}H{h}``) with the highest ``stat``."""
        return str(self.top(stat, 1)["head"].iloc[0])

    def score(self, head: str, stat: str) -> float:
        """``stat`` of ``head`` (a name such as ``"L1H3"``)."""
        df = self._frame().set_index("head")
        return float(df.loc[head, self._stat(stat)])

    def _stat(self, stat: str) -> str:
        if stat not in self.statistics:
            raise KeyError(f"no statistic {stat!r}; one of: {', '.join(self.statistics)}")
        return stat

    def _chart(self, stat: str = "previous-token"):
        df = self._frame()[["head", "layer", "head_index", self._stat(stat)]]
        return heatmap_charts.head_overview_chart(df, stat, label=t(stat))

    def _summary(self):
        ranked = [s for s in ("previous-token", "induction", "induction (random repeats)", "first-token")
                  if s in self.statistics]
        best = ", ".join(f"{t(s)} {self.best(s)} {self.score(self.best(s), s):.3f}" for s in ranked)
        return msg("Head statistics of the attention pattern on {n} tokens — where each head looks, not what it does "
                   "(ablation and patching measure that). Highest: {best}.", n=self.n_tokens, best=best)


@dataclass(repr=False)
class Entropy(Result):
    """Attention entropy H_i = −Σ_j a_ij·ln a_ij against context length n = i + 1, averaged over documents and over
    heads (the Entropy page): does attention spread out as the context grows? ``verdict`` checks the seed's claim."""

    curves: entropy_lib.Summary

    def _frame(self) -> pd.DataFrame:
        return entropy_lib.curve_frame(self.curves, "entropy")

    def _chart(self, normalised: bool = False, head: int | None = None, layers=None, log_x: bool = True):
        df = entropy_lib.curve_frame(self.curves, "entropy", head, layers, normalised=normalised)
        if normalised:
            return entropy_charts.curves(df, t("H / ln n (1 = uniform)"), bound=t("1 = uniform"), log_x=log_x)
        return entropy_charts.curves(df, t("entropy H (nats)"), log_x=log_x)

    def slopes(self) -> pd.DataFrame:
        """Per head: the slope of H against ln(i + 1) (1 = spreads like uniform attention, 0 = a fixed focus)."""
        return entropy_lib.slope_frame(self.curves)

    @property
    def verdict(self) -> str:
        """The seed's claim checked: 'supported', 'not supported', 'not enough evidence' or 'undetermined'."""
        return entropy_lib.claim_check(self.curves)[0]

    @property
    def reason(self) -> str:
        """Why that verdict: the effect size, its interval, the rule, and what would settle it."""
        with i18n.language(self.lang):
            return str(entropy_lib.claim_check(self.curves)[1])

    def _summary(self):
        return msg("Entropy against context length on {docs} document(s) of up to {T} tokens: the seed's claim "
                   "(attention spreads out as the context grows) is {verdict} (see .reason).", docs=self.curves.n_docs,
                   T=self.curves.T, verdict=status_label(self.verdict))


@dataclass(repr=False)
class Matrix(Result):
    """A small matrix with its numbers in the cells (Step by step's seed examples: scores, mask, softmax)."""

    values: np.ndarray
    rows: list[str] | None = None
    cols: list[str] | None = None
    title: str = ""
    digits: int = 3

    def _frame(self) -> pd.DataFrame:
        return step_charts.matrix_frame(self.values, self.rows, self.cols, self.digits)

    def _chart(self, size: int = 36):
        return step_charts.matrix_chart(self.values, self.rows, self.cols, self.title, digits=self.digits, size=size)

    def _summary(self):
        return msg("{title}: a {r}×{c} matrix", title=self.title or t("matrix"), r=self.values.shape[0],
                   c=self.values.shape[1])


@dataclass(repr=False)
class CacheDemo(Result):
    """Greedy decoding with and without the KV cache (Step by step's KV-cache tab): the same tokens, the K/V rows
    each step reuses or computes, and the cost."""

    demo: KVDemo

    def _frame(self) -> pd.DataFrame:
        return self.demo.steps

    def _chart(self):
        return step_charts.kv_rows_chart(self.demo.steps)

    def _summary(self):
        s = self.demo.summary()
        return msg("KV cache: {n} tokens generated with and without the cache — the same tokens: {same}; largest "
                   "logit difference {diff}; K/V rows computed {cached} with the cache, {full} without.",
                   n=len(self.demo.tokens_cached), same=t("yes") if self.demo.tokens_match else t("no"),
                   diff=f"{self.demo.max_logit_diff:.2e}", cached=int(s["K/V rows computed"][0]),
                   full=int(s["K/V rows computed"][1]))
