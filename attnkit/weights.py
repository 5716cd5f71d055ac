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

from .families import family_for
from .i18n import msg
from .parts import norm_kind
from .standard import LayerWeights, ModelConfig, Weights, head_name

__all__ = [
    "ModelConfig",
    "LayerWeights",
    "Weights",
    "extract",
    "head_name",
    "param_counts",
    "attention_weight_count",
]

def extract(hf_model) -> Weights:
    """Convert a HuggingFace causal LM of any supported family into :class:`Weights` (views)."""
    return family_for(getattr(hf_model.config, "model_type", None)).convert(hf_model)


def attention_weight_count(d_model: int, n_heads: int) -> int:
    """Weights (no biases) of one layer's Q/K/V/O: n_heads·(3·d_model·d_head) + d_model·d_model.

    For GPT-2 small (768, 12 heads): 12·(3·768·64) + 768·768 = 2,359,296.
    """
    d_head = d_model // n_heads
    return n_heads * (3 * d_model * d_head) + d_model * d_model


def param_counts(cfg: ModelConfig, weights: Weights | None = None) -> dict[str, int]:
    """Parameter counts per component (the whole model; biases and norms included). The names are
    :class:`~attnkit.i18n.Message` s: English strings as keys (``counts["total"]``), translated when shown.

    Without ``weights`` the GPT-2 layout is assumed (biases everywhere, ``wte`` tied to the
    unembedding and counted once); with ``weights`` the tensors present are counted.
    """
    if weights is not None:
        return _counted(weights)
    d, L = cfg.d_model, cfg.n_layers
    per_layer = {
        msg("attention Q/K/V weights"): 3 * d * d,
        msg("attention Q/K/V biases"): 3 * d,
        msg("attention O weight"): d * d,
        msg("attention O bias"): d,
        msg("MLP"): d * cfg.d_mlp + cfg.d_mlp + cfg.d_mlp * d + d,
        msg("LayerNorms (ln_1, ln_2)"): 4 * d,
    }
    counts = {name: L * n for name, n in per_layer.items()}
    counts[msg("token embedding (wte)")] = cfg.d_vocab * d
    counts[msg("position embedding (wpe)")] = cfg.n_ctx * d
    counts[msg("final LayerNorm")] = 2 * d
    counts[msg("total")] = sum(counts.values())
    return counts


def _n(*ts) -> int:
    return sum(t.numel() for t in ts if t is not None)


def _counted(w: Weights) -> dict[str, int]:
    cfg = w.config
    counts = {
        msg("attention Q/K/V weights"): sum(_n(l.W_Q, l.W_K, l.W_V) for l in w.layers),
        msg("attention Q/K/V biases"): sum(_n(l.b_Q, l.b_K, l.b_V) for l in w.layers),
        msg("attention O weight"): sum(_n(l.W_O) for l in w.layers),
        msg("attention O bias"): sum(_n(l.b_O) for l in w.layers),
        msg("MLP"): sum(_n(l.W_in, l.b_in, l.W_gate, l.W_out, l.b_out) for l in w.layers),
        msg("LayerNorms (ln_1, ln_2)") if norm_kind(cfg).centred else msg("RMSNorms (ln_1, ln_2)"):
            sum(_n(l.ln1_w, l.ln1_b, l.ln2_w, l.ln2_b) for l in w.layers),
        msg("token embedding (wte)"): _n(w.wte),
    }
    if w.wpe is not None:
        counts[msg("position embedding (wpe)")] = _n(w.wpe)
    counts[msg("final norm")] = _n(w.lnf_w, w.lnf_b)
    if w.W_U.data_ptr() != w.wte.data_ptr():
        counts[msg("unembedding (W_U, untied)")] = _n(w.W_U, w.b_U)
    counts[msg("total")] = sum(counts.values())
    return counts
