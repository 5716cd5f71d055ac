"""The attention formula of the seeds, one step per function.

    Attention(Q, K, V) = softmax(Q·Kᵀ/√d_head + M) · V

Shapes use ``B`` batch, ``H`` heads, ``T`` query positions, ``S`` key positions
(``S = T`` without a KV cache), ``d`` = d_model and ``e`` = d_head.  The model
(:mod:`attnkit.model`) and the step-by-step page call these same functions, so
what the page shows is what the model computes.
"""
from __future__ import annotations

import math

import torch

__all__ = ["project", "scores", "causal_mask", "apply_mask", "softmax", "mix", "merge", "attention"]


def project(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """q, k or v for every head: ``x·W_h + b_h``.

    x: [B, T, d] (or [T, d]);  W: [H, d, e];  b: [H, e]  ->  [B, H, T, e] (or [H, T, e]).
    Computed as one matmul against the heads side by side ([d, H·e], the very
    columns of HF's ``c_attn``), which is how GPT-2 itself does it.
    """
    H, d, e = W.shape
    flat = W.permute(1, 0, 2).reshape(d, H * e)          # a view for weights from attnkit.weights
    out = torch.addmm(b.reshape(H * e), x.reshape(-1, d), flat)
    return out.view(*x.shape[:-1], H, e).transpose(-3, -2)


def scores(q: torch.Tensor, k: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """q·kᵀ times ``scale`` (default 1/√d_head). [.., T, e] × [.., S, e] -> [.., T, S]."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    return torch.matmul(q, k.transpose(-1, -2)) * scale


def causal_mask(T: int, S: int | None = None, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """M: 0 where query i may see key j, −∞ strictly above the diagonal.

    With ``S > T`` (a KV cache holding ``S − T`` earlier positions) query i sits at
    absolute position ``S − T + i`` and sees keys ``j ≤ S − T + i``.
    """
    S = T if S is None else S
    i = torch.arange(T, device=device).unsqueeze(1) + (S - T)
    j = torch.arange(S, device=device).unsqueeze(0)
    return torch.zeros(T, S, device=device, dtype=dtype).masked_fill(j > i, float("-inf"))


def apply_mask(s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """scores + M (``None``: no mask, every key visible)."""
    return s if mask is None else s + mask


def softmax(s: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax over keys; −∞ entries become exactly 0."""
    return torch.softmax(s, dim=-1)


def mix(pattern: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z = pattern · v: each query's weighted sum of value rows. [.., T, S] × [.., S, e] -> [.., T, e]."""
    return torch.matmul(pattern, v)


def merge(z: torch.Tensor, W_O: torch.Tensor, b_O: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads and project: concat_h(z_h) · W_O + b_O.

    z: [B, H, T, e];  W_O: [H, e, d]  ->  [B, T, d].  Equal to Σ_h z_h·W_O[h] + b_O.
    """
    B, H, T, e = z.shape
    concat = z.transpose(1, 2).reshape(B * T, H * e)
    return torch.addmm(b_O, concat, W_O.reshape(H * e, -1)).view(B, T, -1)


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, *, causal: bool = True, scale: float | None = None):
    """softmax(Q·Kᵀ·scale + M)·V for plain matrices (the seeds' worked examples).

    Returns ``(output, pattern, masked_scores)``.
    """
    s = scores(Q, K, scale if scale is not None else 1 / math.sqrt(Q.shape[-1]))
    masked = apply_mask(s, causal_mask(Q.shape[-2], K.shape[-2], device=Q.device, dtype=s.dtype) if causal else None)
    pattern = softmax(masked)
    return mix(pattern, V), pattern, masked
