"""Llama-style models: HF's ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` and ``MistralForCausalLM``.

One block::

    x = x + o_proj(attention(rotary(q_proj(x̂₁)), rotary(k_proj(x̂₁)), v_proj(x̂₁)))    x̂₁ = RMSNorm₁(x)
    x = x + down_proj(silu(gate_proj(x̂₂)) ⊙ up_proj(x̂₂))                              x̂₂ = RMSNorm₂(x)

with RMSNorm x/√(mean x² + ε)·w (ε = ``rms_norm_eps``), rotary positions on q and k (the whole head,
or the first ``partial_rotary_factor`` of it), grouped-query attention (``num_key_value_heads`` key/value
heads, each serving ``n_heads / n_kv_heads`` query heads), optional q/k/v biases (Qwen2 has them, with
no o_proj bias; Llama's ``attention_bias`` switches all four), a tied or untied ``lm_head``, and
Mistral's / Qwen2's sliding window (a query sees the last w keys: i − w < j ≤ i).

HF's ``nn.Linear`` stores ``[out, in]`` and computes ``x @ Wᵀ``: every standard weight here is a
*view* of that transpose, split per head (no copy; :mod:`attnkit.families.layout` reads them).

Rotary frequencies θ_k are computed here from the config for the kinds attnkit implements
(``default``, ``linear``, ``llama3``; the tests check them bit-exactly against HF's
``rotary_emb.inv_freq``). Other kinds (``yarn``, ``dynamic``, ``longrope``, …) take HF's own
``inv_freq`` buffer and ``attention_scaling``; for the kinds HF recomputes by length (``dynamic``,
``longrope``) the context is then limited to ``original_max_position_embeddings``, where that buffer
is the one HF uses.
"""
from __future__ import annotations

import math

import torch

from ..standard import ModelConfig
from . import Family, UnsupportedModel, checks, register
from .layout import Layout, separate_qkv

#: rope kinds whose frequencies attnkit computes itself
ROPE_KINDS = ("default", "linear", "llama3")
#: kinds HF recomputes as the sequence grows (the initial buffer holds up to the original context)
ROPE_DYNAMIC = ("dynamic", "longrope")


# ----------------------------------------------------------------------------- rotary frequencies

def rope_parameters(cfg) -> dict:
    """The rope parameters of an HF config as one dict (transformers 5 keeps them in
    ``config.rope_parameters``; 4.x in ``rope_theta`` + ``rope_scaling``)."""
    p = getattr(cfg, "rope_parameters", None)
    p = dict(p) if isinstance(p, dict) else {}
    scaling = getattr(cfg, "rope_scaling", None)
    if isinstance(scaling, dict):
        for k, v in scaling.items():
            p.setdefault(k, v)
    p.setdefault("rope_theta", _first(getattr(cfg, "rope_theta", None), getattr(cfg, "rotary_emb_base", None), 10000.0))
    prf = _first(getattr(cfg, "partial_rotary_factor", None), getattr(cfg, "rotary_pct", None))   # GPT-NeoX: rotary_pct
    if prf is not None:
        p.setdefault("partial_rotary_factor", prf)
    p.setdefault("rope_type", p.get("type") or "default")
    return p


def _first(*values):
    """The first value that is not None (0 is a value: rotary_pct 0 rotates nothing)."""
    return next((v for v in values if v is not None), None)


def rotary_frequencies(theta: float, dim: int) -> torch.Tensor:
    """θ_k = theta^(−2k/dim) for k = 0 … dim/2 − 1 (float32, as HF computes them)."""
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def llama3_frequencies(inv_freq: torch.Tensor, factor: float, low_freq_factor: float, high_freq_factor: float,
                       original_context: int) -> torch.Tensor:
    """Llama 3's rope scaling: wavelengths 2π/θ longer than original_context/low_freq_factor are
    stretched by ``factor``, shorter than original_context/high_freq_factor kept, and those between
    interpolated smoothly."""
    low_wavelen = original_context / low_freq_factor
    high_wavelen = original_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope(cfg, head_dim: int, hf_rotary=None) -> tuple[torch.Tensor, float, int, str]:
    """(inv_freq, attention_scale, rotary_dim, source) for an HF config.

    ``source`` is "attnkit" when the frequencies were computed here, "hf" when HF's buffer was taken
    (``hf_rotary``: the model's ``rotary_emb`` module; needed only for kinds attnkit does not implement).
    """
    p = rope_parameters(cfg)
    kind = p["rope_type"]
    dim = int(head_dim * p.get("partial_rotary_factor", 1.0))
    if kind in ROPE_KINDS:
        inv_freq = rotary_frequencies(float(p["rope_theta"]), dim)
        if kind == "linear":
            inv_freq = inv_freq / float(p["factor"])
        elif kind == "llama3":
            inv_freq = llama3_frequencies(
                inv_freq, float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"]),
                int(p.get("original_max_position_embeddings") or cfg.max_position_embeddings))
        return inv_freq, 1.0, dim, "attnkit"
    if hf_rotary is None or getattr(hf_rotary, "inv_freq", None) is None:
        raise UnsupportedModel(f"rope_type {kind!r} is not implemented by attnkit (it computes "
                               f"{', '.join(ROPE_KINDS)}; others are read from the loaded HF model)")
    inv_freq = getattr(hf_rotary, "original_inv_freq", None)
    inv_freq = hf_rotary.inv_freq if inv_freq is None else inv_freq
    if not bool(torch.isfinite(inv_freq).all()):
        raise UnsupportedModel(f"rope_parameters {dict(p)!r} give HF's {kind!r} rotary frequencies that are not "
                               "finite; attnkit computes nothing from them")
    return inv_freq.detach().float().clone(), float(getattr(hf_rotary, "attention_scaling", 1.0)), dim, "hf"


def windows(cfg, n_layers: int) -> tuple | None:
    """Per layer: the sliding window (Mistral: every layer; Qwen2: the layers whose ``layer_types``
    entry is ``sliding_attention``) or None (global)."""
    w = getattr(cfg, "sliding_window", None)
    if not w:
        return None
    types = getattr(cfg, "layer_types", None)
    per = tuple(int(w) if t == "sliding_attention" else None for t in types) if types else (int(w),) * n_layers
    return per if any(x is not None for x in per) else None


@register
class Llama(Family):
    name = "llama"
    model_types = ("llama", "qwen2", "mistral")
    body, block_list = "model", "layers"
    examples = ("HuggingFaceTB/SmolLM2-135M", "Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.2-1B",
                "TinyLlama/TinyLlama-1.1B-Chat-v1.0")
    layout = Layout(embed="embed_tokens", final_norm="norm", ln1="input_layernorm", ln2="post_attention_layernorm",
                    attn="self_attn", qkv=separate_qkv, out="o_proj", mlp_in="mlp.up_proj", mlp_out="mlp.down_proj",
                    mlp_gate="mlp.gate_proj", rope=rope)

    def validate(self, cfg) -> None:
        checks.finite(cfg)
        checks.count(cfg, "num_hidden_layers", 1, "a model without layers has no attention heads")
        heads, width = checks.count(cfg, "num_attention_heads", 1), checks.count(cfg, "hidden_size", 1)
        head_dim = checks.count(cfg, "head_dim", 1)
        if head_dim is None:
            checks.divides("num_attention_heads", heads, "hidden_size", width)
            head_dim = width // heads if width and heads else None
        if head_dim is not None and head_dim % 2:
            checks.refuse("head_dim", head_dim, "is odd: rotary positions turn a head's dims in pairs")
        checks.divides("num_key_value_heads", checks.count(cfg, "num_key_value_heads", 1), "num_attention_heads",
                       heads, "each key/value head serves a whole group of query heads")
        checks.count(cfg, "max_position_embeddings", 1)
        checks.count(cfg, "vocab_size", 1)
        checks.at_least(cfg, "rms_norm_eps", 0.0, "the norm would take the square root of a negative number")
        checks.rope(rope_parameters(cfg))
        if getattr(cfg, "mlp_bias", False):
            raise UnsupportedModel("config field mlp_bias=True (biases in the gated MLP) is not implemented by attnkit")
        w = getattr(cfg, "sliding_window", None)
        if getattr(cfg, "model_type", None) == "qwen2" and not getattr(cfg, "use_sliding_window", False):
            w = None                                    # Qwen2 reads the window only with use_sliding_window
        types = getattr(cfg, "layer_types", None)
        if w is not None and (not types or "sliding_attention" in types):
            checks.window("sliding_window", w, 1)
            checks.window("sliding_window", w, 2, "is refused: HuggingFace's KV cache for a window of 1 keeps no "
                          "keys, so its generation differs from its own forward pass and attnkit cannot equal both")

    def config(self, cfg) -> ModelConfig:
        self.validate(cfg)
        self.check_activation(cfg.hidden_act)
        n_heads = cfg.num_attention_heads
        n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
        p = rope_parameters(cfg)
        dim = int(head_dim * p.get("partial_rotary_factor", 1.0))
        n_ctx = cfg.max_position_embeddings
        if p["rope_type"] in ROPE_DYNAMIC:
            n_ctx = int(p.get("original_max_position_embeddings") or n_ctx)
        return ModelConfig(
            n_layers=cfg.num_hidden_layers, n_heads=n_heads, d_model=cfg.hidden_size, n_ctx=n_ctx,
            d_vocab=cfg.vocab_size, d_mlp=cfg.intermediate_size, layer_norm_eps=cfg.rms_norm_eps,
            act_fn=cfg.hidden_act, scale_attn_weights=True, family=self.name,
            n_kv_heads=n_kv, head_dim=head_dim, norm="rmsnorm", position="rotary",
            rotary_dim=None if dim == head_dim else dim, mlp="gated",
            windows=windows(cfg, cfg.num_hidden_layers),
        )
