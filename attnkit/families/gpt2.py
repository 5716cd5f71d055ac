"""GPT-2 (and DistilGPT2): HF's ``GPT2LMHeadModel``.

HF stores a layer's three attention projections as one ``Conv1D`` called ``c_attn``: a
``[d_model, 3·d_model]`` matrix that is *right*-multiplied (``x @ W + b``). Its columns are
``[Q | K | V]`` and, inside each, head ``h`` owns columns ``h·d_head … (h+1)·d_head``; W_O is
``c_proj``'s rows split the same way. Everything here is a view of HF's parameters.
"""
from __future__ import annotations

import torch

from ..standard import LayerWeights, ModelConfig, Weights
from . import Family, checks, register


def split_heads_in(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[d_model, n_heads·d_head] (a column block, right-multiplied) -> [n_heads, d_model, d_head] (a view)."""
    d_model, width = w.shape
    return w.view(d_model, n_heads, width // n_heads).permute(1, 0, 2)


@register
class GPT2(Family):
    name = "gpt2"
    model_types = ("gpt2",)
    examples = ("gpt2", "distilgpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")

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

    @torch.no_grad()
    def convert(self, hf_model) -> Weights:
        cfg = self.config(hf_model.config)
        tr = self.body_of(hf_model)
        d, h = cfg.d_model, cfg.n_heads
        layers = []
        for block in tr.h:
            w_qkv = block.attn.c_attn.weight.detach()   # [d, 3d]
            b_qkv = block.attn.c_attn.bias.detach()     # [3d]
            layers.append(LayerWeights(
                ln1_w=block.ln_1.weight.detach(), ln1_b=block.ln_1.bias.detach(),
                W_Q=split_heads_in(w_qkv[:, :d], h),
                W_K=split_heads_in(w_qkv[:, d:2 * d], h),
                W_V=split_heads_in(w_qkv[:, 2 * d:], h),
                b_Q=b_qkv[:d].view(h, -1), b_K=b_qkv[d:2 * d].view(h, -1), b_V=b_qkv[2 * d:].view(h, -1),
                W_O=block.attn.c_proj.weight.detach().view(h, cfg.d_head, d),
                b_O=block.attn.c_proj.bias.detach(),
                ln2_w=block.ln_2.weight.detach(), ln2_b=block.ln_2.bias.detach(),
                W_in=block.mlp.c_fc.weight.detach(), b_in=block.mlp.c_fc.bias.detach(),
                W_out=block.mlp.c_proj.weight.detach(), b_out=block.mlp.c_proj.bias.detach(),
            ))
        lm_head = getattr(hf_model, "lm_head", None)
        return Weights(
            config=cfg,
            wte=tr.wte.weight.detach(), wpe=tr.wpe.weight.detach(),
            lnf_w=tr.ln_f.weight.detach(), lnf_b=tr.ln_f.bias.detach(),
            W_U=(lm_head.weight if lm_head is not None else tr.wte.weight).detach(),
            layers=layers,
        )
