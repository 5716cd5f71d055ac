"""GPT-2's weights, taken out of a HuggingFace model and split per head.

HF stores the three attention projections of a layer as one ``Conv1D`` called
``c_attn``: a ``[d_model, 3·d_model]`` matrix that is *right*-multiplied
(``x @ W + b``).  Its columns are ``[Q | K | V]`` and, inside each, head ``h``
owns columns ``h·d_head … (h+1)·d_head``.  We split it into

    W_Q, W_K, W_V : [n_heads, d_model, d_head]      b_Q, b_K, b_V : [n_heads, d_head]
    W_O           : [n_heads, d_head, d_model]      b_O           : [d_model]

with no folding of LayerNorm into the weights and no centring, so that every
intermediate (q, k, v, scores, pattern, z, …) equals HF's own.  The tensors are
*views* of HF's parameters: extracting costs no memory and no copy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = [
    "ModelConfig",
    "LayerWeights",
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
    scale_attn_weights: bool = True          # divide scores by √d_head (GPT-2 always does)
    scale_attn_by_inverse_layer_idx: bool = False  # extra 1/(layer+1), off in every OpenAI checkpoint

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_hf(cls, cfg) -> "ModelConfig":
        if getattr(cfg, "model_type", None) != "gpt2":
            raise ValueError(f"not a GPT-2 config (model_type={getattr(cfg, 'model_type', None)!r})")
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd={cfg.n_embd} is not divisible by n_head={cfg.n_head}")
        return cls(
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
        )

    def attn_scale(self, layer: int) -> float:
        """The factor the scores q·kᵀ are multiplied by in ``layer`` (1/√d_head for GPT-2)."""
        scale = self.d_head ** -0.5 if self.scale_attn_weights else 1.0
        if self.scale_attn_by_inverse_layer_idx:
            scale /= float(layer + 1)
        return scale


@dataclass
class LayerWeights:
    ln1_w: torch.Tensor   # [d_model]
    ln1_b: torch.Tensor
    W_Q: torch.Tensor     # [n_heads, d_model, d_head]
    W_K: torch.Tensor
    W_V: torch.Tensor
    b_Q: torch.Tensor     # [n_heads, d_head]
    b_K: torch.Tensor
    b_V: torch.Tensor
    W_O: torch.Tensor     # [n_heads, d_head, d_model]
    b_O: torch.Tensor     # [d_model]
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    W_in: torch.Tensor    # [d_model, d_mlp]
    b_in: torch.Tensor
    W_out: torch.Tensor   # [d_mlp, d_model]
    b_out: torch.Tensor


@dataclass
class GPT2Weights:
    config: ModelConfig
    wte: torch.Tensor     # [d_vocab, d_model] token embedding
    wpe: torch.Tensor     # [n_ctx, d_model]   position embedding
    lnf_w: torch.Tensor
    lnf_b: torch.Tensor
    W_U: torch.Tensor     # [d_vocab, d_model] unembedding (tied to wte in GPT-2)
    layers: list[LayerWeights] = field(default_factory=list)

    @property
    def device(self) -> torch.device:
        return self.wte.device

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.dtype


def _split_heads_in(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[d_model, n_heads·d_head] (a column block of c_attn) -> [n_heads, d_model, d_head] (a view)."""
    d_model, width = w.shape
    return w.view(d_model, n_heads, width // n_heads).permute(1, 0, 2)


@torch.no_grad()
def extract(hf_model) -> GPT2Weights:
    """Split a HuggingFace ``GPT2LMHeadModel`` (or ``GPT2Model``) into :class:`GPT2Weights`."""
    cfg = ModelConfig.from_hf(hf_model.config)
    tr = getattr(hf_model, "transformer", hf_model)
    d, h = cfg.d_model, cfg.n_heads
    layers = []
    for block in tr.h:
        w_qkv = block.attn.c_attn.weight.detach()   # [d, 3d]
        b_qkv = block.attn.c_attn.bias.detach()     # [3d]
        w_q, w_k, w_v = w_qkv[:, :d], w_qkv[:, d : 2 * d], w_qkv[:, 2 * d :]
        b_q, b_k, b_v = b_qkv[:d], b_qkv[d : 2 * d], b_qkv[2 * d :]
        layers.append(
            LayerWeights(
                ln1_w=block.ln_1.weight.detach(),
                ln1_b=block.ln_1.bias.detach(),
                W_Q=_split_heads_in(w_q, h),
                W_K=_split_heads_in(w_k, h),
                W_V=_split_heads_in(w_v, h),
                b_Q=b_q.view(h, -1),
                b_K=b_k.view(h, -1),
                b_V=b_v.view(h, -1),
                W_O=block.attn.c_proj.weight.detach().view(h, cfg.d_head, d),
                b_O=block.attn.c_proj.bias.detach(),
                ln2_w=block.ln_2.weight.detach(),
                ln2_b=block.ln_2.bias.detach(),
                W_in=block.mlp.c_fc.weight.detach(),
                b_in=block.mlp.c_fc.bias.detach(),
                W_out=block.mlp.c_proj.weight.detach(),
                b_out=block.mlp.c_proj.bias.detach(),
            )
        )
    lm_head = getattr(hf_model, "lm_head", None)
    W_U = (lm_head.weight if lm_head is not None else tr.wte.weight).detach()
    return GPT2Weights(
        config=cfg,
        wte=tr.wte.weight.detach(),
        wpe=tr.wpe.weight.detach(),
        lnf_w=tr.ln_f.weight.detach(),
        lnf_b=tr.ln_f.bias.detach(),
        W_U=W_U,
        layers=layers,
    )


def attention_weight_count(d_model: int, n_heads: int) -> int:
    """Weights (no biases) of one layer's Q/K/V/O: n_heads·(3·d_model·d_head) + d_model·d_model.

    For GPT-2 small (768, 12 heads): 12·(3·768·64) + 768·768 = 2,359,296.
    """
    d_head = d_model // n_heads
    return n_heads * (3 * d_model * d_head) + d_model * d_model


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """Parameter counts per component (the whole model; biases and LayerNorms included).

    ``wte`` is counted once: GPT-2 ties the unembedding to it.
    """
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
