"""The standard form every model family is converted into: :class:`ModelConfig`, :class:`LayerWeights`,
:class:`Weights` (see :mod:`attnkit.weights` for the layout). The families (:mod:`attnkit.families`) build
these; :mod:`attnkit.weights` re-exports them with :func:`~attnkit.weights.extract` on top, so the import
graph runs standard ← families ← weights without a loop."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

__all__ = ["ModelConfig", "LayerWeights", "Weights", "head_name", "parse_head", "NODE_INPUTS", "node_name", "split_node"]


def head_name(layer: int, head: int) -> str:
    """A head's name everywhere (tables, charts, CLI, specs): ``L{layer}H{head}``. The one formatter."""
    return f"L{layer}H{head}"


#: ASCII digits only: Python's \d also matches full-width and other scripts' digits ("L３H0")
_HEAD_RE = re.compile(r"^(?:[Ll]([0-9]+)[Hh]([0-9]+)|([0-9]+)\.([0-9]+))$", re.ASCII)


def parse_head(label: str) -> tuple[int, int]:
    """'L3H5' (or the older '3.5') -> (3, 5); ValueError for anything else. The one parser of head names."""
    m = _HEAD_RE.match(str(label).strip())
    if not m:
        raise ValueError(f"not a head label of the form L{{layer}}H{{head}}: {label!r}")
    a, b, c, d = m.groups()
    return (int(a), int(b)) if a is not None else (int(c), int(d))


#: the inputs of a head a path-patching receiver names: ``L{l}H{h}.q`` / ``.k`` / ``.v``
NODE_INPUTS = ("q", "k", "v")
_MLP_RE = re.compile(r"^MLP([0-9]+)$", re.ASCII)
_BIAS_RE = re.compile(r"^L([0-9]+) b_O$", re.ASCII)
_WHOLE = ("embed", "pos_embed", "logits")


def node_name(node: tuple) -> str:
    """A node of the head/MLP graph, or a part of the residual stream (:mod:`attnkit.parts`), as written
    everywhere: ("embed",) -> 'embed', ("pos_embed",) -> 'pos_embed', ("head", l, h) -> 'L{l}H{h}',
    ("k", l, h) -> 'L{l}H{h}.k', ("b_O", l) -> 'L{l} b_O' (layer l's attention output bias), ("mlp", l) ->
    'MLP{l}', ("logits",) -> 'logits'. The one formatter."""
    kind = node[0]
    if kind == "head":
        return head_name(node[1], node[2])
    if kind in NODE_INPUTS:
        return f"{head_name(node[1], node[2])}.{kind}"
    if kind == "b_O":
        return f"L{node[1]} b_O"
    return f"MLP{node[1]}" if kind == "mlp" else kind


def split_node(name: str) -> tuple:
    """'L1H0.k' -> ("k", 1, 0), 'L1H0' -> ("head", 1, 0), 'MLP2' -> ("mlp", 2), 'L2 b_O' -> ("b_O", 2),
    'embed' / 'pos_embed' / 'logits' -> (name,); ValueError for anything else. The one parser of node names (the
    syntax only: whether the node exists in a model, and may send or receive, is the caller's check, e.g.
    :func:`attnkit.circuits.path.parse_node`)."""
    text = str(name).strip()
    if text in _WHOLE:
        return (text,)
    m = _MLP_RE.match(text)
    if m:
        return ("mlp", int(m[1]))
    m = _BIAS_RE.match(text)
    if m:
        return ("b_O", int(m[1]))
    head, dot, inp = text.rpartition(".")
    if not dot or inp not in NODE_INPUTS:
        head, inp = text, None
    try:
        l, h = parse_head(head)
    except ValueError:
        raise ValueError(f"not a node name: {text!r} (embed, pos_embed, L{{l}}H{{h}}, L{{l}}H{{h}}.q/.k/.v, "
                         "L{l} b_O, MLP{l} or logits)") from None
    return (inp, l, h) if inp else ("head", l, h)


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
