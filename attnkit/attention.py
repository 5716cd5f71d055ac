"""The attention formula of the seeds, one step per function.

    Attention(Q, K, V) = softmax(Q·Kᵀ/√d_head + M) · V

Shapes use ``B`` batch, ``H`` heads, ``T`` query positions, ``S`` key positions
(``S = T`` without a KV cache), ``d`` = d_model and ``e`` = d_head.  The model
(:mod:`attnkit.model`) and the step-by-step page call these same functions, so
what the page shows is what the model computes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .i18n import Message, msg

__all__ = ["project", "rotary_tables", "rotate", "repeat_kv", "scores", "visible_span", "is_hidden", "hidden_keys", "visible_keys",
           "key_range", "Keep", "rolling_refusal", "causal_mask", "position_mask", "apply_mask", "softmax",
           "mix", "merge", "attention"]


def project(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """q, k or v for every head: ``x·W_h + b_h``.

    x: [B, T, d] (or [T, d]);  W: [H, d, e];  b: [H, e] or None  ->  [B, H, T, e] (or [H, T, e]).
    Computed as one matmul against the heads side by side ([d, H·e], the very
    columns of HF's ``c_attn``), which is how GPT-2 itself does it.
    """
    H, d, e = W.shape
    flat = W.permute(1, 0, 2).reshape(d, H * e)          # a view for weights from attnkit.weights
    out = torch.addmm(b.reshape(H * e), x.reshape(-1, d), flat) if b is not None else x.reshape(-1, d) @ flat
    return out.view(*x.shape[:-1], H, e).transpose(-3, -2)


def rotary_tables(inv_freq: torch.Tensor, positions: torch.Tensor, attention_scale: float = 1.0,
                  dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles p·θ_k for each position p, [T, 2·len(θ)] each.

    The angles are computed in float32 (as HF does) and repeated for the two halves that
    :func:`rotate` pairs up; ``attention_scale`` multiplies both (1 except for YaRN-style scaling).
    """
    angles = positions.float()[:, None] * inv_freq.float()[None, :]          # [T, r/2]
    emb = torch.cat([angles, angles], dim=-1)                                # [T, r]
    return (emb.cos() * attention_scale).to(dtype), (emb.sin() * attention_scale).to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of q or k [.., T, e]: the first r = cos.shape[-1] dims are rotated,

        x_rot = x·cos + rotate_half(x)·sin,   rotate_half([x₁, x₂]) = [−x₂, x₁]

    (dim k pairs with dim k + r/2, the GPT-NeoX / Llama layout); dims beyond r pass through
    (partial rotary, e.g. Pythia's ``rotary_pct``).
    """
    r = cos.shape[-1]
    x_r, x_pass = x[..., :r], x[..., r:]
    x1, x2 = x_r[..., : r // 2], x_r[..., r // 2:]
    out = x_r * cos + torch.cat([-x2, x1], dim=-1) * sin
    return out if x_pass.shape[-1] == 0 else torch.cat([out, x_pass], dim=-1)


def repeat_kv(k: torch.Tensor, group: int) -> torch.Tensor:
    """Grouped-query attention: key/value head g serves query heads g·group … (g+1)·group − 1.

    [B, H_kv, S, e] -> [B, H_kv·group, S, e] (the tensor itself when group = 1)."""
    return k if group == 1 else k.repeat_interleave(group, dim=-3)


def scores(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """q·kᵀ times ``scale`` (default 1/√d_head). [.., T, e] × [.., S, e] -> [.., T, S]."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    return torch.matmul(q, k.transpose(-1, -2)) * scale


def visible_span(i: torch.Tensor, window: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys the query at absolute position i sees: ``lo ≤ j ≤ hi`` with ``hi = i`` (causal) and ``lo = 0``,
    or ``lo = max(0, i − w + 1)`` under a sliding window of w keys.

    This is the one definition of "which keys a query sees": :func:`is_hidden`, :func:`hidden_keys`,
    :func:`causal_mask`, :func:`visible_keys` (how many), :func:`key_range` (which) and the streaming pass's
    block counts all read it (:func:`is_hidden` adds the sinks a cache may keep in front of the window).
    """
    lo = torch.zeros_like(i) if window is None else (i - int(window) + 1).clamp(min=0)
    return lo, i


def key_range(query: int, window: int | None = None) -> range:
    """The keys the query at absolute position ``query`` sees (:func:`visible_span`), as a range of positions."""
    lo, hi = visible_span(torch.tensor(query), window)
    return range(int(lo), int(hi) + 1)


def is_hidden(i: torch.Tensor, j: torch.Tensor, window: int | None = None, sinks: int = 0) -> torch.Tensor:
    """bool, broadcast over ``i`` and ``j`` (absolute positions): key j is hidden from query i.

    Query i sees key j when ``j ≤ i`` and (``j < sinks`` or ``j > i − w``): the causal mask, a window of the
    w most recent keys (itself included; none: all of them), and in front of the window the first ``sinks``
    positions, which an evicting KV cache keeps (StreamingLLM's attention sinks; 0 for a model's own window).
    """
    lo, hi = visible_span(i, window)
    return (j > hi) | ((j < lo) & (j >= int(sinks)))


def hidden_keys(T: int, S: int | None = None, *, window: int | None = None, sinks: int = 0, q0: int = 0,
                q1: int | None = None, k0: int = 0, k1: int | None = None, device=None) -> torch.Tensor:
    """[q1 − q0, k1 − k0] bool: True where the key is hidden from the query (the cells drawn as masked).

    Queries ``q0 … q1 − 1`` and keys ``k0 … k1 − 1`` of a ``[T, S]`` pattern (default: all of it); with
    ``S > T`` (a KV cache) query row r sits at absolute position ``S − T + r``.
    """
    S = T if S is None else S
    q1 = T if q1 is None else q1
    k1 = S if k1 is None else k1
    i = torch.arange(q0, q1, device=device).unsqueeze(1) + (S - T)
    j = torch.arange(k0, k1, device=device).unsqueeze(0)
    return is_hidden(i, j, window, sinks)


def visible_keys(T: int, window: int | None = None, S: int | None = None, device=None, sinks: int = 0) -> torch.Tensor:
    """[T] keys visible to the T queries at absolute positions S − T … S − 1: n_i = i + 1 under the causal
    mask, min(i + 1, w) under a sliding window of w keys, plus min(sinks, i − w + 1) sinks kept in front of
    the window (float64)."""
    S = T if S is None else S
    i = torch.arange(S - T, S, device=device, dtype=torch.float64)
    lo, hi = visible_span(i, window)
    return hi - lo + 1 + lo.clamp(max=int(sinks))


@dataclass(frozen=True)
class Keep:
    """The keys an evicting KV cache keeps: the first ``sinks`` positions and the ``window`` most recent
    (None: every key). Query i then sees key j when j ≤ i and (j < sinks or j > i − window), the rule of
    :func:`is_hidden`; the model's own sliding window, where it has one, still applies on top."""

    sinks: int = 0
    window: int | None = None

    def __post_init__(self):
        if int(self.sinks) < 0 or (self.window is not None and int(self.window) < 1):
            raise ValueError(f"a cache keeps sinks ≥ 0 and a window ≥ 1 key, not sinks={self.sinks}, "
                             f"window={self.window}")

    @property
    def size(self) -> int | None:
        """The most keys the cache holds between runs (None: unbounded)."""
        return None if self.window is None else int(self.sinks) + int(self.window)

    def hidden(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return is_hidden(i, j, self.window, self.sinks)


def rolling_refusal(config) -> Message | None:
    """Why this model cannot take a rolling cache (one line), or None when it can: the cache re-assigns positions
    inside itself by rotating keys to their slots, which only rotary positions allow."""
    if config.position != "rotary":
        return msg("the rolling cache is not offered for this model: its learned positions are added to the input "
                   "before the first layer, so every cached key and value already carries its original position, and "
                   "re-assigning positions would mean recomputing the cache")
    if config.windows is not None and any(w is not None for w in config.windows):
        return msg("the rolling cache is not offered for this model: it has a sliding window of its own")
    return None


def position_mask(i: torch.Tensor, j: torch.Tensor, *, window: int | None = None, keep: Keep | None = None,
                  dtype=torch.float32) -> torch.Tensor:
    """M [len(i), len(j)] for queries and keys at the absolute positions ``i`` and ``j`` (1-D): 0 where the
    query sees the key, −∞ where :func:`is_hidden` hides it under the model's ``window`` or ``keep`` does."""
    i, j = i.reshape(-1, 1), j.reshape(1, -1)
    hidden = is_hidden(i, j, window)
    if keep is not None:
        hidden = hidden | keep.hidden(i, j)
    return torch.zeros(hidden.shape, device=i.device, dtype=dtype).masked_fill(hidden, float("-inf"))


def causal_mask(T: int, S: int | None = None, *, window: int | None = None, keep: Keep | None = None, device=None,
                dtype=torch.float32) -> torch.Tensor:
    """M: 0 where query i may see key j, −∞ where :func:`hidden_keys` hides it.

    With ``S > T`` (a KV cache holding ``S − T`` earlier positions) query i sits at
    absolute position ``S − T + i`` and sees keys ``j ≤ S − T + i``. With a local
    ``window`` w it sees only the last w positions: ``i − w < j ≤ i``; ``keep`` (an evicting cache's
    :class:`Keep`) hides what that cache drops as well.
    """
    S = T if S is None else S
    if keep is not None:
        return position_mask(torch.arange(S - T, S, device=device), torch.arange(S, device=device), window=window,
                             keep=keep, dtype=dtype)
    hidden = hidden_keys(T, S, window=window, device=device)
    return torch.zeros(T, S, device=device, dtype=dtype).masked_fill(hidden, float("-inf"))


def apply_mask(s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """scores + M (``None``: no mask, every key visible)."""
    return s if mask is None else s + mask


def softmax(s: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax over keys; −∞ entries become exactly 0."""
    return torch.softmax(s, dim=-1)


def mix(pattern: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z = pattern · v: each query's weighted sum of value rows. [.., T, S] × [.., S, e] -> [.., T, e]."""
    return torch.matmul(pattern, v)


def merge(z: torch.Tensor, W_O: torch.Tensor, b_O: torch.Tensor | None) -> torch.Tensor:
    """Concatenate the heads and project: concat_h(z_h) · W_O + b_O.

    z: [B, H, T, e];  W_O: [H, e, d]  ->  [B, T, d].  Equal to Σ_h z_h·W_O[h] + b_O.
    """
    B, H, T, e = z.shape
    concat = z.transpose(1, 2).reshape(B * T, H * e)
    W = W_O.reshape(H * e, -1)
    return (torch.addmm(b_O, concat, W) if b_O is not None else concat @ W).view(B, T, -1)


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, *, causal: bool = True, scale: float | None = None):
    """softmax(Q·Kᵀ·scale + M)·V for plain matrices (the seeds' worked examples).

    Returns ``(output, pattern, masked_scores)``.
    """
    s = scores(Q, K, scale if scale is not None else 1 / math.sqrt(Q.shape[-1]))
    masked = apply_mask(s, causal_mask(Q.shape[-2], K.shape[-2], device=Q.device, dtype=s.dtype) if causal else None)
    pattern = softmax(masked)
    return mix(pattern, V), pattern, masked
