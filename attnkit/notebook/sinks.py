"""Results of the attention-sink measurements and the cache-eviction lab (the Sinks page): which heads park their
attention on the first tokens, and the loss when the KV cache keeps k sink tokens and the w most recent.

Each wraps the library's result (:class:`attnkit.sinks.SinkStats`, :class:`attnkit.eviction.EvictionLab`) and
draws with the page's chart builders (:mod:`attnkit.charts.sinks`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..eviction import EvictionLab
from ..i18n import msg, status_label
from ..sinks import SinkStats
from .results import Result

__all__ = ["Sinks", "Eviction"]


@dataclass(repr=False)
class Sinks(Result):
    """Per head: the share of attention on the first k tokens and on the first token, what the sink writes
    (‖v₀·W_O‖) against the other keys, and whether it is a sink head (``.heads()``)."""

    stats: SinkStats

    def heads(self) -> list[tuple[str, float]]:
        """The sink heads, largest share first: (``"L3H3"``, share on the first token)."""
        return self.stats.heads()

    def by_position(self, bins: int = 32) -> pd.DataFrame:
        """The share on the first k tokens against context length n = i + 1, per head (a long table)."""
        return self.stats.by_position(bins)

    def _frame(self) -> pd.DataFrame:
        return self.stats.to_pandas()

    def _chart(self, kind: str = "heads", heads: list[str] | None = None):
        return self.stats.chart(kind, heads)

    def _summary(self):
        s, heads = self.stats, self.stats.heads()
        found = ", ".join(f"{n} {v:.2f}" for n, v in heads[:6]) if heads else msg("none")
        return msg("{model}: {tokens} tokens in {windows} window(s); sink heads (share on the first token ≥ {share}): "
                   "{heads}.", model=s.model, tokens=f"{s.tokens:,}", windows=s.windows, share=f"{s.threshold:g}",
                   heads=found)


@dataclass(repr=False)
class Eviction(Result):
    """The loss (nats/token, with a 95 % block-bootstrap interval) of every (k sinks, w window) cell beside the full
    cache, and the verdict on "keeping the first tokens rescues a windowed cache" (``.verdict``)."""

    lab: EvictionLab

    @property
    def verdict(self):
        return self.lab.verdict

    @property
    def full(self) -> dict:
        """The full cache's loss, with its interval: {"loss", "low", "high", …}."""
        return self.lab.full

    def to_dict(self) -> dict:
        """Everything, as ``attnkit sinks --json`` writes it."""
        return self.lab.to_dict()

    def _frame(self) -> pd.DataFrame:
        return self.lab.to_pandas()

    def _chart(self):
        return self.lab.chart()

    def _summary(self):
        v = self.lab.verdict
        return msg("{model}, {tokens} predicted tokens: full cache {loss} nats/token. Verdict: {status}. {measured}",
                   model=self.lab.model, tokens=f"{self.lab.tokens:,}", loss=f"{self.lab.full['loss']:.4f}",
                   status=status_label(v.status), measured=v.text)
