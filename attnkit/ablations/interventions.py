"""The interventions behind the ablation kinds: bundles of hooks (:class:`attnkit.model.Intervention`),
each scoped to chosen layers (default: all) and, where it makes sense, to chosen heads."""
from __future__ import annotations

from typing import Iterable

import torch

from ..model import Intervention
from .base import AblationError

__all__ = ["ValueIsInput", "KeyIsQuery", "NoScale", "NoMask", "NoSink", "ZeroHead", "MeanHead"]


class _Scoped(Intervention):
    def __init__(self, layers: Iterable[int] | None = None, heads: Iterable[tuple[int, int]] = ()):
        self.heads: dict[int, list[int]] = {}
        for l, h in heads:
            self.heads.setdefault(int(l), []).append(int(h))
        super().__init__(frozenset(self.heads) if self.heads and layers is None else layers)

    def head_index(self, layer: int):
        """The heads to touch in ``layer``: a list, or ``slice(None)`` for all of them."""
        return self.heads.get(layer, slice(None)) if self.heads else slice(None)


class ValueIsInput(_Scoped):
    """V = X: the layer's attention output is mean_h(pattern_h · x̂), no W_V/b_V/W_O/b_O.

    x̂ is the block's own norm of X (ln1); under grouped-query attention the mean runs over the
    query heads (each has its own pattern)."""

    def ln1(self, x_hat, layer):
        self._x_hat = x_hat

    def pattern(self, pattern, layer):
        self._pattern = pattern

    def attn_out(self, out, layer):
        pattern, x_hat = self._pattern, self._x_hat
        if pattern.shape[-1] != x_hat.shape[-2]:
            raise AblationError("V = X cannot be combined with a KV cache (the earlier x̂ rows are not kept)")
        return torch.matmul(pattern, x_hat.unsqueeze(1)).mean(1)


class KeyIsQuery(_Scoped):
    """W_K = W_Q and b_K = b_Q: k := q (in all heads of the scoped layers, or in the named heads)."""

    def q(self, q, layer):
        self._q = q

    def k(self, k, layer):
        q = self._q
        if q.shape[1] != k.shape[1]:
            raise AblationError("W_K = W_Q is not defined under grouped-query attention "
                                "(fewer key heads than query heads)")
        if not self.heads:
            return q
        k = k.clone()
        idx = self.head_index(layer)
        k[:, idx] = q[:, idx]
        return k


class NoScale(_Scoped):
    """No 1/√d_head: the scores are multiplied back by √d_head (all heads, or the named heads).

    Only 1/√d_head is removed: another factor a model applies (GPT-2's optional 1/(layer+1)) stays.
    A model that does not scale by 1/√d_head (``scale_attn_weights=False``, GPT-Neo) is unchanged;
    :attr:`no_op` says so."""

    def __init__(self, layers=None, heads=(), config=None):
        super().__init__(layers, heads)
        self.config = config
        self.no_op = config is not None and not config.scale_attn_weights

    def hooks(self):
        return [] if self.no_op else super().hooks()

    def q(self, q, layer):
        self._d_head = q.shape[-1]

    def scores(self, s, layer):
        factor = self._d_head ** 0.5
        if not self.heads:
            return s * factor
        s = s.clone()
        idx = self.head_index(layer)
        s[:, idx] = s[:, idx] * factor
        return s


class NoMask(_Scoped):
    """No causal mask: every query sees every key."""

    def mask(self, mask, layer):
        return torch.zeros_like(mask)


class NoSink(_Scoped):
    """The sink removed: key 0 (the first token) hidden from every later query, its score −∞ before the softmax
    (all heads of the scoped layers, or the named heads). Query 0 keeps it: it is that query's only key."""

    def scores(self, s, layer):
        T, S = s.shape[-2:]
        rows = slice(1, None) if S == T else slice(None)       # with a KV cache every new query lies after 0
        s = s.clone()
        s[:, self.head_index(layer), rows, 0] = float("-inf")
        return s


class ZeroHead(_Scoped):
    """z[:, h] = 0 for the named heads (or all heads of the scoped layers when none are named)."""

    def z(self, z, layer):
        z = z.clone()
        z[:, self.head_index(layer)] = 0
        return z


class MeanHead(_Scoped):
    """z[:, h] = its mean over positions (``means`` [L, H, e], from :func:`head_means`)."""

    def __init__(self, means: torch.Tensor, layers=None, heads=()):
        super().__init__(layers, heads)
        self.means = means

    def z(self, z, layer):
        z = z.clone()
        idx = self.head_index(layer)
        mean = self.means[layer].to(device=z.device, dtype=z.dtype)     # [H, e]
        z[:, idx] = mean[idx].unsqueeze(-2).expand_as(z[:, idx])
        return z
