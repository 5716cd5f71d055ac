"""GPT-Neo: HF's ``GPTNeoForCausalLM``.

GPT-2's block (LayerNorm, learned positions, plain GELU MLP, tied unembedding) with three differences
where attention is concerned:

* separate ``q_proj``/``k_proj``/``v_proj`` without biases and an ``out_proj`` with one;
* **no score scaling**: scores are q·kᵀ, not q·kᵀ/√d_head (``scale_attn_weights=False``);
* layers alternate global and **local** attention (``attention_types``, e.g. ``[[["global", "local"], 6]]``
  for 12 layers): a local layer's query i sees keys i − w < j ≤ i, w = ``window_size`` (256), exactly
  HF's ``tril(ones) xor tril(ones, −w)``.
"""
from __future__ import annotations

from ..standard import ModelConfig
from . import Family, UnsupportedModel, checks, register
from .layout import Layout, separate_qkv


def layer_windows(cfg) -> tuple:
    """Per layer: None (global) or the window (local), from ``attention_layers`` / ``attention_types``."""
    kinds = getattr(cfg, "attention_layers", None)
    if not kinds:
        kinds = [k for pattern, n in cfg.attention_types for _ in range(n) for k in pattern]
    bad = sorted(set(kinds) - {"global", "local"})
    if bad:
        raise UnsupportedModel(f"GPT-Neo attention type(s) {bad} are not supported (only global and local)")
    return tuple(int(cfg.window_size) if k == "local" else None for k in kinds)


@register
class GPTNeo(Family):
    name = "gpt_neo"
    model_types = ("gpt_neo",)
    examples = ("EleutherAI/gpt-neo-125m",)
    layout = Layout(embed="wte", pos_embed="wpe", final_norm="ln_f", ln1="ln_1", ln2="ln_2", attn="attn.attention",
                    qkv=separate_qkv, out="out_proj", mlp_in="mlp.c_fc", mlp_out="mlp.c_proj")

    def validate(self, cfg) -> None:
        checks.finite(cfg)
        checks.count(cfg, "num_layers", 1, "a model without layers has no attention heads")
        heads = checks.count(cfg, "num_heads", 1)
        checks.divides("num_heads", heads, "hidden_size", checks.count(cfg, "hidden_size", 1))
        checks.count(cfg, "max_position_embeddings", 1)
        checks.count(cfg, "vocab_size", 1)
        checks.at_least(cfg, "layer_norm_epsilon", 0.0, "the norm would take the square root of a negative number")
        kinds = getattr(cfg, "attention_layers", None) or getattr(cfg, "attention_types", None)
        if "local" in repr(kinds):
            checks.window("window_size", getattr(cfg, "window_size", None), 1)

    def config(self, cfg) -> ModelConfig:
        self.validate(cfg)
        self.check_activation(cfg.activation_function)
        windows = layer_windows(cfg)
        return ModelConfig(
            n_layers=cfg.num_layers, n_heads=cfg.num_heads, d_model=cfg.hidden_size,
            n_ctx=cfg.max_position_embeddings, d_vocab=cfg.vocab_size,
            d_mlp=cfg.intermediate_size or 4 * cfg.hidden_size, layer_norm_eps=cfg.layer_norm_epsilon,
            act_fn=cfg.activation_function, scale_attn_weights=False, family=self.name,
            windows=windows if any(w is not None for w in windows) else None,
        )
