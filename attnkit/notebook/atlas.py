"""The head atlas as a notebook result (:meth:`attnkit.notebook.Model.atlas`): every head of the model over a
corpus — its statistics, its effect on the loss when mean-ablated, a verdict per role — with the Atlas page's
scatter as its chart and the atlas's own offline HTML file as what ``.save("x.html")`` writes.

The atlas itself is :mod:`attnkit.corpus.atlas` (run) and :mod:`attnkit.corpus.atlas_cache` (kept on disk, so the
same atlas asked for again is read, not computed); this wraps its :class:`~attnkit.atlas_result.AtlasResult`.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..atlas import LABEL_NAMES, PATTERN_AND_EFFECT, PATTERN_ONLY, ROLE_NAMES
from ..atlas_result import AtlasResult
from ..i18n import msg
from .results import Result

__all__ = ["Atlas"]


@dataclass(repr=False)
class Atlas(Result):
    """Every head over a corpus: ``to_pandas()`` one row a head (every statistic's mean both ways, the effect and
    its interval, each role's verdict), ``chart(x, y, color)`` the scatter, ``card(head)`` a head's whole record
    (examples by activation decile, pairs, Q/K view, effect, verdicts, float64 check), ``verdicts(head)`` its
    verdict per role, ``save("atlas.html")`` the offline HTML file (``.csv``, ``.png``, ``.svg`` as every result).
    ``result`` is the library's :class:`~attnkit.atlas_result.AtlasResult`, ``folder`` the atlas folder."""

    result: AtlasResult
    folder: Path

    def _frame(self) -> pd.DataFrame:
        return self.result.to_pandas()

    def _chart(self, x: str = "previous-token", y: str = "induction", color: str = "verdict", role: str | None = None):
        return self.result.chart(x, y, color, role)

    def card(self, head) -> dict:
        """A head's record (``"L2H1"`` or (layer, head)); its texts as {"en": …, "zh": …}."""
        return self.result.card(head)

    def verdicts(self, head) -> dict[str, str]:
        """{role: verdict} of a head: "pattern and effect", "pattern only", "effect only" or "neither"."""
        return {r["role"]: r["verdict"] for r in self.card(head)["roles"]}

    def _held(self, verdict: str) -> str:
        rows = [f"{h['head']} {ROLE_NAMES.get(r['role'], r['role'])}" for h in self.result.heads for r in h["roles"]
                if r["verdict"] == verdict]
        return ", ".join(map(str, rows)) or "—"

    def _summary(self):
        info = self.result.info
        return msg("Head atlas of {model} over {corpus}: {heads} heads, {tokens} tokens (the effect on {effect} "
                   "tokens). {both}: {held}. {only} (the pattern without its effect): {inert}.",
                   model=info["model"]["name"], corpus=info.get("corpus", {}).get("name", ""),
                   heads=len(self.result.heads), tokens=f"{info['tokens']:,}",
                   effect=f"{info['effect']['tokens']:,}", both=LABEL_NAMES[PATTERN_AND_EFFECT],
                   held=self._held(PATTERN_AND_EFFECT), only=LABEL_NAMES[PATTERN_ONLY],
                   inert=self._held(PATTERN_ONLY))

    def save(self, path, **options) -> Path:
        """``.html``: the atlas's own offline file (scatter, every head's card, both languages; nothing fetched);
        ``.csv``, ``.png``, ``.svg``: the table or the scatter, as every result saves them."""
        path = Path(path).expanduser()
        if path.suffix.lower() != ".html" or options:
            return super().save(path, **options)
        page = self.folder / "atlas.html"
        if path.exists() and path.resolve() == page.resolve():
            return path
        shutil.copyfile(page, path)
        return path
