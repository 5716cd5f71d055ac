"""The standard weights every model family is converted into (:mod:`attnkit.families`).

Per layer, per head, in the right-multiplied layout of the formula (``x @ W + b``)::

    W_Q          : [n_heads,    d_model, d_head]     b_Q : [n_heads, d_head]     (or None)
    W_K, W_V     : [n_kv_heads, d_model, d_head]     b_K, b_V : [n_kv_heads, d_head]
    W_O          : [n_heads,    d_head,  d_model]    b_O : [d_model]             (or None)
    W_in, W_gate : [d_model, d_mlp]                  W_out : [d_mlp, d_model]

``n_kv_heads < n_heads`` is grouped-query attention: query head ``h`` reads key/value head
``h // (n_heads / n_kv_heads)``. There is no folding of norms into the weights and no centring, so
every intermediate (q, k, v, scores, pattern, z, …) equals the original model's. Converters return
*views* of the HF parameters where the layout allows it: extracting costs no copy.

A family fills only what it has: GPT-2 has biases everywhere, LayerNorm, learned positions and a
plain GELU MLP; a Llama has RMSNorm (no bias), rotary positions, GQA and a gated (SwiGLU) MLP.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = [
    "ModelConfig",
    "LayerWeights",
    "Weights",
    "GPT2Weights",
    "extract",
    "param_counts",
    "attention_weight_count",
]


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int
    n_heads: int
    d_model: int
    n_ctx: int
    d_vocab: int
    d_mlp: int
    layer_norm_eps: float = 1e-5
    act_fn: str = "gelu_new"
    scale_attn_weights: bool = True          # divide scores by √d_head (GPT-2 always does; GPT-Neo does not)
    scale_attn_by_inverse_layer_idx: bool = False  # extra 1/(layer+1), off in every OpenAI checkpoint
    family: str = "gpt2"
    n_kv_heads: int | None = None            # None: as many as n_heads (no grouped-query attention)
    head_dim: int | None = None              # None: d_model / n_heads
    norm: str = "layernorm"                  # "layernorm" (x−μ)/σ·w+b, or "rmsnorm" x/rms(x)·w
    position: str = "learned"                # "learned" (a position table added to the embedding) or "rotary"
    rotary_dim: int | None = None            # rotary: how many of each head's dims rotate (None: all)
    mlp: str = "plain"                       # "plain" act(x·W_in+b)·W_out, or "gated" (act(x·W_gate)⊙x·W_in)·W_out
    parallel: bool = False                   # attention and MLP both read resid_pre (GPT-NeoX, GPT-J)
    windows: tuple | None = None             # per layer: None (global) or a local window w (keys i−w < j ≤ i)
    embed_scale: float = 1.0                 # embeddings multiplied by this (1 for every family here)

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def group(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.n_heads // self.kv_heads

    def window(self, layer: int) -> int | None:
        return None if self.windows is None else self.windows[layer]

    def attn_scale(self, layer: int) -> float:
        """The factor the scores q·kᵀ are multiplied by in ``layer`` (1/√d_head for GPT-2)."""
        scale = self.d_head ** -0.5 if self.scale_attn_weights else 1.0
        if self.scale_attn_by_inverse_layer_idx:
            scale /= float(layer + 1)
        return scale

    @classmethod
    def from_hf(cls, cfg) -> "ModelConfig":
        """The config of an HF model of any supported family (see :mod:`attnkit.families`)."""
        from .families import family_for

        return family_for(getattr(cfg, "model_type", None)).config(cfg)


@dataclass
class LayerWeights:
    ln1_w: torch.Tensor          # [d_model]
    ln1_b: torch.Tensor | None   # None for RMSNorm
    W_Q: torch.Tensor            # [n_heads, d_model, d_head]
    W_K: torch.Tensor            # [n_kv_heads, d_model, d_head]
    W_V: torch.Tensor
    b_Q: torch.Tensor | None     # [n_heads, d_head]
    b_K: torch.Tensor | None     # [n_kv_heads, d_head]
    b_V: torch.Tensor | None
    W_O: torch.Tensor            # [n_heads, d_head, d_model]
    b_O: torch.Tensor | None     # [d_model]
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor | None
    W_in: torch.Tensor           # [d_model, d_mlp]
    b_in: torch.Tensor | None
    W_out: torch.Tensor          # [d_mlp, d_model]
    b_out: torch.Tensor | None
    W_gate: torch.Tensor | None = None   # [d_model, d_mlp], gated MLPs only


@dataclass
class Weights:
    config: ModelConfig
    wte: torch.Tensor                  # [d_vocab, d_model] token embedding (W_E)
    wpe: torch.Tensor | None           # [n_ctx, d_model] learned positions; None for rotary families
    lnf_w: torch.Tensor
    lnf_b: torch.Tensor | None
    W_U: torch.Tensor                  # [d_vocab, d_model] unembedding (tied to wte in GPT-2)
    layers: list[LayerWeights] = field(default_factory=list)
    b_U: torch.Tensor | None = None    # [d_vocab]
    inv_freq: torch.Tensor | None = None   # rotary: [rotary_dim / 2] angular frequencies θ_k
    rope_attention_scale: float = 1.0      # rotary: cos and sin are multiplied by this (YaRN-style kinds)

    @property
    def device(self) -> torch.device:
        return self.wte.device

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.dtype


#: The name used before other families existed (GPT-2's weights are the standard weights).
GPT2Weights = Weights


def extract(hf_model) -> Weights:
    """Convert a HuggingFace causal LM of any supported family into :class:`Weights` (views)."""
    from .families import family_for

    return family_for(getattr(hf_model.config, "model_type", None)).convert(hf_model)


def attention_weight_count(d_model: int, n_heads: int) -> int:
    """Weights (no biases) of one layer's Q/K/V/O: n_heads·(3·d_model·d_head) + d_model·d_model.

    For GPT-2 small (768, 12 heads): 12·(3·768·64) + 768·768 = 2,359,296.
    """
    d_head = d_model // n_heads
    return n_heads * (3 * d_model * d_head) + d_model * d_model


def param_counts(cfg: ModelConfig, weights: Weights | None = None) -> dict[str, int]:
    """Parameter counts per component (the whole model; biases and norms included).

    Without ``weights`` the GPT-2 layout is assumed (biases everywhere, ``wte`` tied to the
    unembedding and counted once); with ``weights`` the tensors present are counted.
    """
    if weights is not None:
        return _counted(weights)
    d, L = cfg.d_model, cfg.n_layers
    per_layer = {
        "attention Q/K/V weights": 3 * d * d,
        "attention Q/K/V biases": 3 * d,
        "attention O weight": d * d,
        "attention O bias": d,
        "MLP": d * cfg.d_mlp + cfg.d_mlp + cfg.d_mlp * d + d,
        "LayerNorms (ln_1, ln_2)": 4 * d,
    }
    counts = {name: L * n for name, n in per_layer.items()}
    counts["token embedding (wte)"] = cfg.d_vocab * d
    counts["position embedding (wpe)"] = cfg.n_ctx * d
    counts["final LayerNorm"] = 2 * d
    counts["total"] = sum(counts.values())
    return counts


def _n(*ts) -> int:
    return sum(t.numel() for t in ts if t is not None)


def _counted(w: Weights) -> dict[str, int]:
    cfg = w.config
    counts = {
        "attention Q/K/V weights": sum(_n(l.W_Q, l.W_K, l.W_V) for l in w.layers),
        "attention Q/K/V biases": sum(_n(l.b_Q, l.b_K, l.b_V) for l in w.layers),
        "attention O weight": sum(_n(l.W_O) for l in w.layers),
        "attention O bias": sum(_n(l.b_O) for l in w.layers),
        "MLP": sum(_n(l.W_in, l.b_in, l.W_gate, l.W_out, l.b_out) for l in w.layers),
        f"{'RMSNorms' if cfg.norm == 'rmsnorm' else 'LayerNorms'} (ln_1, ln_2)":
            sum(_n(l.ln1_w, l.ln1_b, l.ln2_w, l.ln2_b) for l in w.layers),
        "token embedding (wte)": _n(w.wte),
    }
    if w.wpe is not None:
        counts["position embedding (wpe)"] = _n(w.wpe)
    counts["final norm"] = _n(w.lnf_w, w.lnf_b)
    if w.W_U.data_ptr() != w.wte.data_ptr():
        counts["unembedding (W_U, untied)"] = _n(w.W_U, w.b_U)
    counts["total"] = sum(counts.values())
    return counts
