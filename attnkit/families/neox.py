"""GPT-NeoX / Pythia: HF's ``GPTNeoXForCausalLM``.

One block (``use_parallel_residual=True``, every Pythia model)::

    x = x + dense(attention(x̂₁)) + mlp(x̂₂)       x̂₁ = LayerNorm₁(x), x̂₂ = LayerNorm₂(x)   (both read x)

and with ``use_parallel_residual=False`` the usual sequential form. LayerNorms with ε = ``layer_norm_eps``,
a plain MLP ``dense_4h_to_h(act(dense_h_to_4h(x̂)))``, a final LayerNorm and an untied unembedding (``embed_out``; ``lm_head`` in transformers 5).

Rotary positions on the first ``rotary_pct`` of each head's dims only (Pythia: 0.25, so 16 of 64 rotate;
the rest pass through), frequencies θ_k = rotary_emb_base^(−2k/r) over those r dims.

The fused ``query_key_value`` (an ``nn.Linear`` [3·d, d]) is laid out **per head**, not [Q | K | V]:
its output viewed as [.., H, 3·e] gives head h's q, k, v side by side (``qkv.chunk(3, dim=-1)`` in HF).
So its rows split as [H, 3, e, d]; W_Q = rows [h, 0], W_K = [h, 1], W_V = [h, 2] (views of the transpose).
"""
from __future__ import annotations

from ..standard import ModelConfig
from . import Family, checks, register
from .layout import Layout
from .llama import rope, rope_parameters


def fused_qkv(attn, cfg: ModelConfig):
    """``query_key_value``, split per head (see :func:`split_fused_qkv`)."""
    return split_fused_qkv(attn.query_key_value, cfg.n_heads)


def split_fused_qkv(linear, n_heads: int):
    """GPT-NeoX's per-head fused q/k/v -> (W_Q, W_K, W_V) [H, d, e] and (b_Q, b_K, b_V) [H, e] (views)."""
    w = linear.weight.detach()                          # [H·3·e, d]
    three_d, d = w.shape
    e = three_d // (3 * n_heads)
    w4 = w.view(n_heads, 3, e, d).transpose(2, 3)       # [H, 3, d, e]
    Ws = tuple(w4[:, i] for i in range(3))
    b = getattr(linear, "bias", None)
    bs = (None,) * 3 if b is None else tuple(b.detach().view(n_heads, 3, e)[:, i] for i in range(3))
    return Ws, bs


def rotated_dims(head_dim: int, p: dict) -> int:
    """How many of a head's dims rotate: ``int(head_dim · rotary_pct)`` frequencies θ_k for k < that / 2,
    each turning a pair of dims (so an odd count is rounded up, as in HF)."""
    dim = int(head_dim * float(p.get("partial_rotary_factor", 1.0)))
    return 2 * ((dim + 1) // 2)


@register
class GPTNeoX(Family):
    name = "gpt_neox"
    model_types = ("gpt_neox",)
    body, block_list = "gpt_neox", "layers"
    examples = ("EleutherAI/pythia-70m", "EleutherAI/pythia-160m", "EleutherAI/pythia-410m")
    layout = Layout(embed="embed_in", final_norm="final_layer_norm", ln1="input_layernorm",
                    ln2="post_attention_layernorm", attn="attention", qkv=fused_qkv, out="dense",
                    mlp_in="mlp.dense_h_to_4h", mlp_out="mlp.dense_4h_to_h", unembed=("embed_out", "lm_head"),
                    rope=rope)                                  # embed_out: transformers 4.x, lm_head: 5.x

    def validate(self, cfg) -> None:
        checks.finite(cfg)
        checks.count(cfg, "num_hidden_layers", 1, "a model without layers has no attention heads")
        heads, width = checks.count(cfg, "num_attention_heads", 1), checks.count(cfg, "hidden_size", 1)
        checks.divides("num_attention_heads", heads, "hidden_size", width)
        checks.count(cfg, "max_position_embeddings", 1)
        checks.count(cfg, "vocab_size", 1)
        checks.at_least(cfg, "layer_norm_eps", 0.0, "the norm would take the square root of a negative number")
        p = rope_parameters(cfg)
        checks.rope(p, "rotary_pct")
        if heads and width and p.get("partial_rotary_factor") is not None:    # absent: HF's default, 0.25
            head_dim = width // heads
            turned = rotated_dims(head_dim, p)
            if turned > head_dim:
                checks.refuse("rotary_pct", p["partial_rotary_factor"], f"turns {turned} dims (pairs) of a "
                              f"{head_dim}-dim head; HuggingFace's forward fails on it")

    def config(self, cfg) -> ModelConfig:
        self.validate(cfg)
        self.check_activation(cfg.hidden_act)
        head_dim = cfg.hidden_size // cfg.num_attention_heads
        dim = rotated_dims(head_dim, rope_parameters(cfg))
        return ModelConfig(
            n_layers=cfg.num_hidden_layers, n_heads=cfg.num_attention_heads, d_model=cfg.hidden_size,
            n_ctx=cfg.max_position_embeddings, d_vocab=cfg.vocab_size, d_mlp=cfg.intermediate_size,
            layer_norm_eps=cfg.layer_norm_eps, act_fn=cfg.hidden_act, scale_attn_weights=True, family=self.name,
            position="rotary", rotary_dim=None if dim == head_dim else dim,
            parallel=bool(cfg.use_parallel_residual),
        )
