"""The whole GPT-2 forward pass, from :class:`~attnkit.weights.GPT2Weights`.

    x = wte[ids] + wpe[pos]                          resid_pre
    for each block:
        x̂ = ln_1(x)                                   ln1
        q, k, v = x̂·W_Q + b_Q, x̂·W_K + b_K, x̂·W_V + b_V   q, k, v      [B, H, T, e]
        s = q·kᵀ/√e                                   scores (before the mask)  [B, H, T, S]
        a = softmax(s + M)                            pattern
        z = a·v                                       z
        x = x + concat(z)·W_O + b_O                   attn_out, resid_mid
        x = x + MLP(ln_2(x))                          ln2, mlp_out, resid_post
    logits = ln_f(x)·W_Uᵀ                             ln_final, logits

Captures are keyed ``(name, layer)`` and only the names asked for are kept:
all patterns of GPT-2 small at T = 1024 are 12·12·1024² floats (600 MB).

Interventions (ablations) plug in through :class:`Intervention`, whose methods
are called at each step of every layer and return what the layer should use.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F

from . import attention as A
from .weights import GPT2Weights, LayerWeights

__all__ = [
    "LAYER_HOOKS",
    "Intervention",
    "KVCache",
    "Trace",
    "run",
    "generate",
    "Generation",
    "as_ids",
]

#: Per-layer capture names, in the order the forward pass meets them.
LAYER_HOOKS = (
    "resid_pre", "ln1", "q", "k", "v", "scores", "pattern", "z",
    "attn_out", "resid_mid", "ln2", "mlp_out", "resid_post",
)
#: Captures outside the blocks (stored with layer ``None``).
GLOBAL_HOOKS = ("embed", "pos_embed", "ln_final")


class Intervention:
    """Identity at every step. Subclass and override the steps to change.

    Each method receives what the layer computed and returns what it should use
    instead. ``layer`` is the block index; heads are the tensors' dim 1.
    """

    def qkv(self, layer: int, q, k, v, x_hat, lw: LayerWeights):
        return q, k, v

    def scale(self, layer: int, default: float) -> float:
        return default

    def scores(self, layer: int, s):
        """Scaled scores before the mask, [B, H, T, S]."""
        return s

    def mask(self, layer: int, mask):
        """The additive mask M [T, S] (``None`` means no mask)."""
        return mask

    def pattern(self, layer: int, pattern):
        return pattern

    def z(self, layer: int, z):
        return z

    def attn_out(self, layer: int, out, *, z, pattern, x_hat, lw: LayerWeights):
        """The block's attention output [B, T, d] before it joins the residual stream."""
        return out


_IDENTITY = Intervention


def _overrides(iv: Intervention | None, name: str) -> bool:
    return iv is not None and getattr(type(iv), name) is not getattr(_IDENTITY, name)


@dataclass
class KVCache:
    """Past keys and values per layer, [B, H, S, e] each; grows as tokens are decoded."""

    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[-2]

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=-2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=-2)
        return self.keys[layer], self.values[layer]


@dataclass
class Trace:
    """Result of :func:`run`: logits [B, T, vocab] and the captured tensors."""

    logits: torch.Tensor
    captures: dict = field(default_factory=dict)
    cache: KVCache | None = None

    def __getitem__(self, key):
        if isinstance(key, str):
            key = (key, None)
        try:
            return self.captures[key]
        except KeyError:
            have = sorted({n for n, _ in self.captures})
            raise KeyError(f"{key} was not captured; captured names: {have or 'none'}") from None

    def __contains__(self, key) -> bool:
        return (key if isinstance(key, tuple) else (key, None)) in self.captures

    def stack(self, name: str) -> torch.Tensor:
        """All captured layers of ``name`` stacked on a new leading dim, in layer order."""
        layers = sorted(l for n, l in self.captures if n == name and l is not None)
        if not layers:
            raise KeyError(f"{name!r} was not captured")
        return torch.stack([self.captures[(name, l)] for l in layers])


def as_ids(ids, device=None) -> torch.Tensor:
    """Token ids as a LongTensor [B, T] (a list or a 1-D tensor becomes B = 1)."""
    t = ids if isinstance(ids, torch.Tensor) else torch.tensor(ids, dtype=torch.long)
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"token ids must be 1-D or 2-D, got shape {tuple(t.shape)}")
    if t.shape[1] == 0:
        raise ValueError("no tokens: the prompt is empty")
    return t.to(device=device, dtype=torch.long)


def _layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def _act(name: str, x: torch.Tensor) -> torch.Tensor:
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return F.gelu(x, approximate="tanh")   # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    if name == "gelu":
        return F.gelu(x)
    if name == "relu":
        return F.relu(x)
    if name in ("silu", "swish"):
        return F.silu(x)
    raise ValueError(f"unsupported activation_function {name!r}")


def _wanted(capture) -> set[str]:
    if capture in (None, False):
        return set()
    if capture in ("all", True):
        return set(LAYER_HOOKS) | set(GLOBAL_HOOKS)
    names = {capture} if isinstance(capture, str) else set(capture)
    unknown = names - set(LAYER_HOOKS) - set(GLOBAL_HOOKS)
    if unknown:
        raise ValueError(f"unknown capture name(s) {sorted(unknown)}; known: {LAYER_HOOKS + GLOBAL_HOOKS}")
    return names


@torch.inference_mode()
def run(
    weights: GPT2Weights,
    ids,
    *,
    capture: Iterable[str] | str | None = None,
    layers: Sequence[int] | None = None,
    intervention: Intervention | None = None,
    cache: KVCache | None = None,
    capture_dtype: torch.dtype | None = None,
) -> Trace:
    """Run GPT-2 on ``ids`` and return a :class:`Trace`.

    capture:       names from ``LAYER_HOOKS``/``GLOBAL_HOOKS`` (or ``"all"``) to keep.
    layers:        restrict per-layer captures to these layers (default: all).
    intervention:  an :class:`Intervention` changing the computation.
    cache:         a :class:`KVCache`; ``ids`` are then the *new* tokens, placed after
                   the cached ones, and their keys/values are appended to it.
    capture_dtype: store captures in this dtype (e.g. ``torch.float16`` halves memory).
    """
    cfg = weights.config
    ids = as_ids(ids, weights.device)
    B, T = ids.shape
    past = cache.length if cache is not None else 0
    if past + T > cfg.n_ctx:
        raise ValueError(
            f"{past + T} tokens exceed the model's context of {cfg.n_ctx} positions"
            + (f" ({past} cached + {T} new)" if past else "")
        )
    if int(ids.max()) >= cfg.d_vocab or int(ids.min()) < 0:
        raise ValueError(f"token id out of range for a vocabulary of {cfg.d_vocab}")
    want = _wanted(capture)
    keep_layers = set(range(cfg.n_layers)) if layers is None else set(layers)
    caps: dict = {}

    def keep(name, layer, value):
        if name in want and (layer is None or layer in keep_layers):
            caps[(name, layer)] = value if capture_dtype is None else value.to(capture_dtype)

    iv = intervention
    # The pattern must be materialised when it is captured or an intervention touches it;
    # otherwise PyTorch's fused kernel computes the very same softmax(q·kᵀ·scale + M)·v.
    iv_needs_pattern = any(_overrides(iv, m) for m in ("scale", "scores", "mask", "pattern", "attn_out"))
    capture_pattern = bool(want & {"scores", "pattern"})

    tok = weights.wte[ids]
    pos = weights.wpe[past : past + T]
    x = tok + pos
    keep("embed", None, tok)
    keep("pos_embed", None, pos.expand(B, T, -1))
    mask = A.causal_mask(T, past + T, device=x.device, dtype=x.dtype)

    for l, lw in enumerate(weights.layers):
        keep("resid_pre", l, x)
        x_hat = _layer_norm(x, lw.ln1_w, lw.ln1_b, cfg.layer_norm_eps)
        keep("ln1", l, x_hat)
        q = A.project(x_hat, lw.W_Q, lw.b_Q)
        k = A.project(x_hat, lw.W_K, lw.b_K)
        v = A.project(x_hat, lw.W_V, lw.b_V)
        if iv is not None:
            q, k, v = iv.qkv(l, q, k, v, x_hat, lw)
        if cache is not None:
            k, v = cache.extend(l, k, v)
        keep("q", l, q)
        keep("k", l, k)
        keep("v", l, v)
        scale = cfg.attn_scale(l)
        if iv_needs_pattern or (capture_pattern and l in keep_layers):
            if iv is not None:
                scale = iv.scale(l, scale)
            s = A.scores(q, k, scale)
            if iv is not None:
                s = iv.scores(l, s)
            keep("scores", l, s)
            m = iv.mask(l, mask) if iv is not None else mask
            pattern = A.softmax(A.apply_mask(s, m))
            if iv is not None:
                pattern = iv.pattern(l, pattern)
            keep("pattern", l, pattern)
            z = A.mix(pattern, v)
        else:
            pattern = None
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if past else None,
                                               is_causal=not past, scale=scale)
        if iv is not None:
            z = iv.z(l, z)
        keep("z", l, z)
        attn_out = A.merge(z, lw.W_O, lw.b_O)
        if iv is not None:
            attn_out = iv.attn_out(l, attn_out, z=z, pattern=pattern, x_hat=x_hat, lw=lw)
        keep("attn_out", l, attn_out)
        x = x + attn_out
        keep("resid_mid", l, x)
        x2 = _layer_norm(x, lw.ln2_w, lw.ln2_b, cfg.layer_norm_eps)
        keep("ln2", l, x2)
        h = _act(cfg.act_fn, torch.addmm(lw.b_in, x2.reshape(-1, cfg.d_model), lw.W_in))
        mlp_out = torch.addmm(lw.b_out, h, lw.W_out).view(B, T, cfg.d_model)
        keep("mlp_out", l, mlp_out)
        x = x + mlp_out
        keep("resid_post", l, x)

    x = _layer_norm(x, weights.lnf_w, weights.lnf_b, cfg.layer_norm_eps)
    keep("ln_final", None, x)
    logits = torch.matmul(x, weights.W_U.T)
    return Trace(logits=logits, captures=caps, cache=cache)


@dataclass
class Generation:
    tokens: list[int]                 # the new tokens only
    step_logits: list[torch.Tensor]   # next-token logits [vocab] before each new token
    step_seconds: list[float]
    used_cache: bool
    cache: KVCache | None = None      # the filled KV cache (with use_cache): keys/values of every position fed

    @property
    def seconds(self) -> float:
        return sum(self.step_seconds)


def generate(weights: GPT2Weights, ids, n_new: int, *, use_cache: bool = True) -> Generation:
    """Greedy decoding of ``n_new`` tokens after ``ids`` (one sequence).

    With ``use_cache`` each step feeds only the newest token and reuses the keys
    and values of every earlier position (the KV cache); without it each step
    recomputes the whole prefix. Both choose the same tokens.
    """
    seq = as_ids(ids, weights.device)
    if seq.shape[0] != 1:
        raise ValueError("generate takes one sequence")
    if seq.shape[1] + n_new > weights.config.n_ctx:
        raise ValueError(
            f"{seq.shape[1]} prompt tokens + {n_new} new exceed the context of {weights.config.n_ctx}"
        )
    cache = KVCache() if use_cache else None
    tokens, step_logits, times = [], [], []
    feed = seq
    for _ in range(n_new):
        t0 = time.perf_counter()
        out = run(weights, feed if use_cache else seq, cache=cache)
        last = out.logits[0, -1]
        nxt = int(torch.argmax(last))
        times.append(time.perf_counter() - t0)
        tokens.append(nxt)
        step_logits.append(last)
        new = torch.tensor([[nxt]], device=seq.device)
        seq = torch.cat([seq, new], dim=1)
        feed = new
    return Generation(tokens=tokens, step_logits=step_logits, step_seconds=times, used_cache=use_cache, cache=cache)
