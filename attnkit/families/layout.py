"""Where a family keeps each weight, declared as data (:class:`Layout`), and the one conversion that reads it.

A family file says what differs — the attribute paths of its embeddings, norms, attention and MLP modules,
how its q/k/v projections are stored (:data:`Layout.qkv`), whether its matrices are HF ``nn.Linear``
(``[out, in]``, x @ Wᵀ) or GPT-2's ``Conv1D`` (``[in, out]``, x @ W), and its rotary frequencies — and
:func:`convert` builds the standard :class:`~attnkit.standard.Weights` the same way for all of them (in the
spirit of TransformerLens's declarative bridge). Every standard weight is a *view* of HF's parameter.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Callable

import torch

from ..standard import LayerWeights, ModelConfig, Weights

__all__ = ["Layout", "convert", "heads_in", "heads_bias", "heads_out", "right", "bias", "separate_qkv"]


# ----------------------------------------------------------------------------- readers of one module

def heads_in(linear, n_heads: int) -> torch.Tensor:
    """An nn.Linear [n_heads·e, d] (x @ Wᵀ) -> [n_heads, d, e] (a view of its transpose)."""
    w = linear.weight.detach()
    out, d = w.shape
    return w.view(n_heads, out // n_heads, d).transpose(1, 2)


def heads_bias(linear, n_heads: int) -> torch.Tensor | None:
    b = getattr(linear, "bias", None)
    return None if b is None else b.detach().view(n_heads, -1)


def heads_out(linear, n_heads: int, conv1d: bool = False) -> torch.Tensor:
    """W_O [n_heads, e, d] from an nn.Linear [d, n_heads·e] (a view of its transpose) or a Conv1D
    [n_heads·e, d] (a view)."""
    w = linear.weight.detach()
    w = w if conv1d else w.t()
    width, d = w.shape
    return w.view(n_heads, width // n_heads, d)


def right(linear, conv1d: bool = False) -> torch.Tensor:
    """A matrix in the right-multiplied layout x @ W (a view): Conv1D's weight, or nn.Linear's transposed."""
    w = linear.weight.detach()
    return w if conv1d else w.t()


def bias(module) -> torch.Tensor | None:
    """A module's bias, or None (no bias, or RMSNorm's absent one)."""
    b = getattr(module, "bias", None)
    return None if b is None else b.detach()


def separate_qkv(attn, cfg: ModelConfig):
    """q_proj / k_proj / v_proj, three nn.Linear (key and value with ``kv_heads`` heads under GQA)."""
    h, kv = cfg.n_heads, cfg.kv_heads
    Ws = (heads_in(attn.q_proj, h), heads_in(attn.k_proj, kv), heads_in(attn.v_proj, kv))
    return Ws, (heads_bias(attn.q_proj, h), heads_bias(attn.k_proj, kv), heads_bias(attn.v_proj, kv))


# ----------------------------------------------------------------------------- the layout

@dataclass(frozen=True)
class Layout:
    """Dotted attribute paths: ``embed``, ``pos_embed``, ``final_norm`` from the body (``Family.body_of``);
    ``ln1``, ``ln2``, ``attn``, ``mlp_in``, ``mlp_out``, ``mlp_gate`` from a block; ``out`` from ``attn``;
    ``unembed`` from the LM (the first that is present; none: tied to the token embedding)."""

    embed: str
    final_norm: str
    ln1: str
    ln2: str
    attn: str
    qkv: Callable                    # (attention module, ModelConfig) -> ((W_Q, W_K, W_V), (b_Q, b_K, b_V))
    out: str
    mlp_in: str
    mlp_out: str
    mlp_gate: str | None = None
    pos_embed: str | None = None
    unembed: tuple[str, ...] = ("lm_head",)
    conv1d: bool = False             # GPT-2's Conv1D instead of nn.Linear
    rope: Callable | None = None     # (HF config, d_head, HF rotary module) -> (inv_freq, scale, dim, source)


def _get(obj, path: str | None):
    return None if path is None else attrgetter(path)(obj)


def _layer(block, lay: Layout, cfg: ModelConfig) -> LayerWeights:
    attn = _get(block, lay.attn)
    (W_Q, W_K, W_V), (b_Q, b_K, b_V) = lay.qkv(attn, cfg)
    out, ln1, ln2 = _get(attn, lay.out), _get(block, lay.ln1), _get(block, lay.ln2)
    mlp_in, mlp_out, gate = _get(block, lay.mlp_in), _get(block, lay.mlp_out), _get(block, lay.mlp_gate)
    return LayerWeights(
        ln1_w=ln1.weight.detach(), ln1_b=bias(ln1),
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V,
        W_O=heads_out(out, cfg.n_heads, lay.conv1d), b_O=bias(out),
        ln2_w=ln2.weight.detach(), ln2_b=bias(ln2),
        W_in=right(mlp_in, lay.conv1d), b_in=bias(mlp_in),
        W_out=right(mlp_out, lay.conv1d), b_out=bias(mlp_out),
        W_gate=None if gate is None else right(gate, lay.conv1d),
    )


@torch.no_grad()
def convert(family, hf_model) -> Weights:
    """HF model -> standard Weights by ``family.layout`` (``family.config`` reads the config)."""
    lay: Layout = family.layout
    cfg = family.config(hf_model.config)
    body = family.body_of(hf_model)
    layers = [_layer(block, lay, cfg) for block in family.blocks(hf_model)]
    wte = _get(body, lay.embed).weight.detach()
    norm = _get(body, lay.final_norm)
    head = next((m for m in (getattr(hf_model, p, None) for p in lay.unembed) if m is not None), None)
    extra = {}
    if lay.rope is not None:
        inv_freq, scale, _, _ = lay.rope(hf_model.config, cfg.d_head, getattr(body, "rotary_emb", None))
        extra = dict(inv_freq=inv_freq.to(wte.device), rope_attention_scale=scale)
    pos = _get(body, lay.pos_embed)
    return Weights(
        config=cfg, wte=wte, wpe=None if pos is None else pos.weight.detach(),
        lnf_w=norm.weight.detach(), lnf_b=bias(norm),
        W_U=wte if head is None else head.weight.detach(), layers=layers, **extra,
    )
