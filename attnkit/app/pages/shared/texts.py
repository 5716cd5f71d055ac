"""The texts that ship with attnkit (:func:`attnkit.loading.shipped_texts`) as the pages use them: read once, their
length in the model's tokens, and the Entropy inputs that measure the longest of them to a verdict (Entropy's Text
box and its advice, Step by step's one-click check of the seed's claim)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from attnkit.app.caches import budgeted
from attnkit.app.context import Context
from attnkit.entropy_claim import advised_window
from attnkit.loading import shipped_texts

__all__ = ["read", "shipped_tokens", "entropy_inputs"]


@lru_cache(maxsize=16)
def read(path: Path) -> str:
    """A shipped text's contents."""
    return path.read_text(encoding="utf-8")


@budgeted
def _count(name: str, device: str, path: str, _encode) -> int:
    return len(_encode(read(Path(path))))


def shipped_tokens(ctx: Context) -> dict[str, int]:
    """{shipped text: its length in this model's tokens}."""
    return {name: _count(ctx.model_name, ctx.device, str(path), ctx.model.encode)
            for name, path in shipped_texts().items()}


def entropy_inputs(ctx: Context, name: str | None = None) -> dict:
    """Entropy's inputs that measure the shipped text ``name`` (default: the longest) in :data:`MIN_DOCS
    <attnkit.entropy_claim.MIN_DOCS>` windows (at most the context): enough documents for a verdict on the shipped
    models (measured: docs/learner.md). {} when no text ships."""
    counts = shipped_tokens(ctx)
    name = name or max(counts, key=counts.get, default=None)
    if name is None:
        return {}
    return {"text": name, "window": max(2, advised_window(counts[name], ctx.model.config.n_ctx)),
            "split": "split into windows"}
