"""The residual stream's parts, and the norm held at its σ: one definition for direct logit attribution, the
why split (:mod:`attnkit.score_terms`), composition and attribution patching.

**The parts.** The stream entering block l (l = n_layers: the stream the final norm reads) is a sum

    x = embed + pos_embed + Σ_{l′ < l} ( Σ_h L{l′}H{h} + L{l′} b_O + MLP{l′} )

embed      the token embedding (times the family's embed scale)
pos_embed  the learned position table's row (rotary families have none: positions rotate q and k instead)
L{l}H{h}   head h's output z_h·W_O[h]
L{l} b_O   layer l's attention output bias, its own part (the same at every position; absent without one)
MLP{l}     the MLP's output (its output bias included)

named by :func:`attnkit.standard.node_name`, in the order :func:`names` lists them. :func:`hooks` is the one
hook set that hands each part over as a run makes it; the parts add up to the model's own stream.

**The norm held at σ.** Every norm here is ``centre(x)/σ(x)·gain(w) + b`` with σ = √(mean centre(x)² + ε):

    LayerNorm            centre(x) = x − mean(x)   gain = w        bias b
    RMSNorm              centre(x) = x             gain = w        no bias
    RMSNorm (1 + w)      centre(x) = x             gain = 1 + w    (Gemma's; no family here uses it yet)

With σ held at the value it has on the real stream (as direct logit attribution does), the norm is affine
in x: each part contributes centre(part)/σ·gain(w) and b is a part of its own. :data:`NORMS` is the one
place the kinds differ; the forward pass (:func:`norm`, :func:`attnkit.model.norm`), the held norm, its
fold into a reading weight and its Jacobian (:func:`norm_vjp`) all read it, so a new kind is one entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn import functional

from .standard import ModelConfig, Weights, head_name, node_name, split_node

__all__ = ["NormKind", "NORMS", "norm_kind", "gain", "centre", "sigma", "held_norm", "fold", "norm", "norm_vjp",
           "Part", "names", "hooks", "Rows", "KINDS", "kind", "layer_of"]


# ----------------------------------------------------------------------------- the norm kinds

@dataclass(frozen=True)
class NormKind:
    """What tells one norm from another: whether it subtracts the mean first, and the gain's offset."""

    centred: bool            # LayerNorm: x − mean(x) before dividing by σ; RMSNorm: x itself
    offset: float = 0.0      # the gain is offset + w (1 for Gemma's RMSNorm, which stores w − 1)


#: ``ModelConfig.norm`` -> its kind. The one place the kinds differ.
NORMS = {"layernorm": NormKind(centred=True), "rmsnorm": NormKind(centred=False),
         "rmsnorm1p": NormKind(centred=False, offset=1.0)}


def norm_kind(cfg: ModelConfig) -> NormKind:
    try:
        return NORMS[cfg.norm]
    except KeyError:
        raise ValueError(f"unknown norm kind {cfg.norm!r}; known: {', '.join(NORMS)}") from None


def gain(w: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """The norm's multiplier: w, or offset + w (in w's dtype)."""
    offset = norm_kind(cfg).offset
    return w if offset == 0 else w + offset


def centre(x: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """x − mean(x) over the last dim for a centring norm (LayerNorm), x itself otherwise."""
    return x - x.mean(-1, keepdim=True) if norm_kind(cfg).centred else x


def sigma(x: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """σ of the norm at each row of the real stream x [..., d], float64 [..., 1]: √(mean centre(x)² + ε)."""
    c = centre(x.double(), cfg)
    return torch.sqrt(c.pow(2).mean(-1, keepdim=True) + cfg.layer_norm_eps)


def held_norm(x: torch.Tensor, sig: torch.Tensor, w: torch.Tensor, cfg: ModelConfig,
              b: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., d] (a part, or a sum of parts) through the norm with σ held at ``sig``: centre(x)/σ·gain(w),
    plus b when given (pass b for the whole stream, leave it out for a part). float64."""
    out = centre(x.double(), cfg) / sig * gain(w, cfg).double()
    return out if b is None else out + b.double()


def fold(W: torch.Tensor, w: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """The held norm's linear map (before the division by σ) folded into a weight W [d, e] that reads its
    output: centre(x)·diag(gain)·W = x·fold(W). float64 [d, e]."""
    Wg = gain(w, cfg).double()[:, None] * W.double()
    return Wg - Wg.mean(0, keepdim=True) if norm_kind(cfg).centred else Wg


def norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, cfg: ModelConfig) -> torch.Tensor:
    """The norm as the forward pass computes it: LayerNorm with PyTorch's kernel; RMSNorm in float32 at
    least (as HF's Llama does), then back to x's dtype."""
    g = gain(w, cfg)
    if norm_kind(cfg).centred:
        return functional.layer_norm(x, (x.shape[-1],), g, b, cfg.layer_norm_eps)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg.layer_norm_eps)
    out = g * xf.to(x.dtype)
    return out if b is None else out + b


def norm_vjp(x: torch.Tensor, g: torch.Tensor, w: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """Gradient with respect to x [.., T, d] of the norm's output, given its output gradient g [.., T, d]
    (σ not held: the derivative of the real norm). With n = centre(x)/σ and ĝ = g·gain(w):
    (centre(ĝ) − n·mean(ĝ·n))/σ. float64."""
    x, g = x.double(), g.double()
    s = sigma(x, cfg)
    n, gn = centre(x, cfg) / s, g * gain(w, cfg).double()
    return (centre(gn, cfg) - n * (gn * n).mean(-1, keepdim=True)) / s


# ----------------------------------------------------------------------------- the parts

@dataclass
class Part:
    """One part of the stream, as a run made it (batch row 0). ``x``: its rows [T, d], or [d] for a bias (the
    same at every position); for a head, ``x`` is its z_h [T, e] and ``W`` its W_O[h] [e, d] (the part is
    x·W, kept factored so that a reader can project W first)."""

    name: str
    x: torch.Tensor
    W: torch.Tensor | None = None

    @property
    def constant(self) -> bool:
        return self.x.dim() == 1

    def rows(self, positions) -> torch.Tensor:
        """The part at ``positions`` (a list or 1-D tensor of positions), float64 [n, d]."""
        if self.constant:
            return self.x.double()[None].expand(len(positions), -1)
        x = self.x[positions].double()
        return x if self.W is None else x @ self.W.double()

    def times(self, M: torch.Tensor, positions) -> torch.Tensor:
        """The part at ``positions`` times M [d, e] (float64), [n, e]: a head as z·(W_O[h]·M)."""
        if self.constant:
            return (self.x.double() @ M)[None].expand(len(positions), -1)
        x = self.x[positions].double()
        return x @ M if self.W is None else x @ (self.W.double() @ M)


def names(weights: Weights, layer: int) -> list[str]:
    """The parts of the stream entering block ``layer`` (``n_layers``: the final stream), in order."""
    out = ["embed"] + (["pos_embed"] if weights.wpe is not None else [])
    for l in range(layer):
        out += [head_name(l, h) for h in range(weights.config.n_heads)]
        out += [node_name(("b_O", l))] if weights.layers[l].b_O is not None else []
        out += [node_name(("mlp", l))]
    return out


def hooks(weights: Weights, layer: int, keep: Callable[[Part], None]) -> dict:
    """One hook set for :func:`attnkit.model.run`: every part of the stream entering block ``layer``
    (``n_layers``: the final stream) handed to ``keep(part)`` as the run makes it, in :func:`names`' order.
    The model's hook points as they are: embed, pos_embed, z, mlp_out."""
    def embed(t, _l, name):
        keep(Part(name, t[0]))

    def z(t, l):
        if l < layer:
            lw = weights.layers[l]
            for h in range(t.shape[1]):
                keep(Part(head_name(l, h), t[0, h], lw.W_O[h]))
            if lw.b_O is not None:
                keep(Part(node_name(("b_O", l)), lw.b_O))

    def mlp_out(t, l):
        if l < layer:
            keep(Part(node_name(("mlp", l)), t[0]))

    return {"embed": lambda t, l: embed(t, l, "embed"), "pos_embed": lambda t, l: embed(t, l, "pos_embed"),
            "z": z, "mlp_out": mlp_out}


class Rows:
    """A ``keep`` for :func:`hooks` that keeps each part's rows at ``positions`` (float64): names, [P, n, d]."""

    def __init__(self, positions):
        self.positions = positions
        self.names: list[str] = []
        self._rows: list[torch.Tensor] = []

    def __call__(self, part: Part) -> None:
        self.names.append(part.name)
        self._rows.append(part.rows(self.positions))

    def stack(self) -> torch.Tensor:
        return torch.stack(self._rows)


# ----------------------------------------------------------------------------- kinds of parts

#: Kinds of parts, in the order the grouped views list them (the reader's own biases are "biases" too).
KINDS = ("embeddings", "heads", "MLPs", "biases")
_KIND = {"embed": "embeddings", "pos_embed": "embeddings", "head": "heads", "mlp": "MLPs", "b_O": "biases"}


def _node(name: str) -> tuple | None:
    try:
        return split_node(name)
    except ValueError:
        return None                   # a reader's own bias ("ln1 bias", "b_Q", "final norm bias", …)


def kind(name: str) -> str:
    """embeddings (embed, pos_embed), heads (L{l}H{h}), MLPs (MLP{l}) or biases (L{l} b_O and the reader's
    own biases)."""
    node = _node(name)
    return _KIND.get(node[0], "biases") if node else "biases"


def layer_of(name: str) -> str:
    """The layer a part was written in ("L3"), "embed" for the embeddings, "bias" for the reader's own biases."""
    node = _node(name)
    if node is None or node[0] not in _KIND:
        return "bias"
    return "embed" if kind(name) == "embeddings" else f"L{node[1]}"
