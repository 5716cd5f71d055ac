"""GPT-2 (and DistilGPT2): HF's ``GPT2LMHeadModel``.

HF stores a layer's three attention projections as one ``Conv1D`` called ``c_attn``: a
``[d_model, 3·d_model]`` matrix that is *right*-multiplied (``x @ W + b``). Its columns are
``[Q | K | V]`` and, inside each, head ``h`` owns columns ``h·d_head … (h+1)·d_head``; W_O is
``c_proj``'s rows split the same way. Everything here is a view of HF's parameters.
"""
from __future__ import annotations

import torch

from ..standard import ModelConfig
from . import Family, checks, register
from .layout import Layout


def split_heads_in(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[d_model, n_heads·d_head] (a column block, right-multiplied) -> [n_heads, d_model, d_head] (a view)."""
    d_model, width = w.shape
    return w.view(d_model, n_heads, width // n_heads).permute(1, 0, 2)


def fused_qkv(attn, cfg: ModelConfig):
    """``c_attn``: one Conv1D [d, 3·d] whose columns are [Q | K | V], each split per head (views)."""
    w_qkv, b_qkv = attn.c_attn.weight.detach(), attn.c_attn.bias.detach()      # [d, 3d], [3d]
    d, h = cfg.d_model, cfg.n_heads
    Ws = tuple(split_heads_in(w_qkv[:, i * d:(i + 1) * d], h) for i in range(3))
    return Ws, tuple(b_qkv[i * d:(i + 1) * d].view(h, -1) for i in range(3))


@register
class GPT2(Family):
    name = "gpt2"
    model_types = ("gpt2",)
    examples = ("gpt2", "distilgpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
    layout = Layout(embed="wte", pos_embed="wpe", final_norm="ln_f", ln1="ln_1", ln2="ln_2", attn="attn",
                    qkv=fused_qkv, out="c_proj", mlp_in="mlp.c_fc", mlp_out="mlp.c_proj", conv1d=True)

    def validate(self, cfg) -> None:
        checks.finite(cfg)
        checks.count(cfg, "n_layer", 1, "a model without layers has no attention heads")
        heads = checks.count(cfg, "n_head", 1)
        checks.divides("n_head", heads, "n_embd", checks.count(cfg, "n_embd", 1))
        checks.count(cfg, "n_positions", 1)
        checks.count(cfg, "vocab_size", 1)
        checks.at_least(cfg, "layer_norm_epsilon", 0.0, "the norm would take the square root of a negative number")

    def config(self, cfg) -> ModelConfig:
        self.validate(cfg)
        self.check_activation(cfg.activation_function)
        return ModelConfig(
            n_layers=cfg.n_layer,
            n_heads=cfg.n_head,
            d_model=cfg.n_embd,
            n_ctx=cfg.n_positions,
            d_vocab=cfg.vocab_size,
            d_mlp=cfg.n_inner or 4 * cfg.n_embd,
            layer_norm_eps=cfg.layer_norm_epsilon,
            act_fn=cfg.activation_function,
            scale_attn_weights=cfg.scale_attn_weights,
            scale_attn_by_inverse_layer_idx=cfg.scale_attn_by_inverse_layer_idx,
            family=self.name,
        )
