"""The forward pass, from the standard :class:`~attnkit.weights.Weights` of any family.

    x = embed(ids)                                    embed, pos_embed
    for each block:                                   resid_pre
        x = x + attention(norm₁(x))                   ln1, q, k, v, (q_rot, k_rot), scores, mask, pattern,
                                                      z, (head_out), attn_out, resid_mid
        x = x + mlp(norm₂(x))                         ln2, mlp_pre, mlp_post, mlp_out, resid_post
        (parallel families: x = x + attention(norm₁(x)) + mlp(norm₂(x)))
    logits = norm_f(x)·W_Uᵀ                           ln_final, logits

Every name on the right is a **hook point**: a hook ``fn(tensor, layer) -> tensor | None`` placed there
sees the activation and may return a replacement (None keeps it). Capturing is the hook that stores
(``run(capture=[...])``). Heads are dim 1 wherever a tensor has them ([B, H, T, …]); ``head_out``
(each head's own z_h·W_O[h], [B, H, T, d]) is computed only when something hooks or captures it.

An :class:`Intervention` is a named bundle of hooks; bundles compose (:func:`compose`, or a list).
At one point hooks run in this order: the interventions in the order given, then ``hooks``, then
the captures — so a capture records what the model actually uses.

The fused SDPA kernel computes softmax(q·kᵀ·scale + M)·v whenever nothing hooks or captures
``scores``, ``mask`` or ``pattern``.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch
from torch.nn import functional

from . import attention as attention_steps
from .parts import norm   # LayerNorm / RMSNorm: the norm kinds are defined once, in parts
from .weights import ModelConfig, Weights

__all__ = [
    "LAYER_HOOKS", "GLOBAL_HOOKS", "HOOK_POINTS", "Hook", "Intervention", "compose",
    "KVCache", "Trace", "run", "generate", "Generation", "as_ids",
    "embed", "norm", "attention", "mlp", "block", "unembed", "act",
]

#: Per-layer hook points, in the order the forward pass meets them.
LAYER_HOOKS = (
    "resid_pre", "ln1", "q", "k", "v", "q_rot", "k_rot", "scores", "mask", "pattern", "z", "head_out",
    "attn_out", "resid_mid", "ln2", "mlp_pre", "mlp_post", "mlp_out", "resid_post",
)
#: Hook points outside the blocks (layer ``None``).
GLOBAL_HOOKS = ("embed", "pos_embed", "ln_final", "logits")
HOOK_POINTS = LAYER_HOOKS + GLOBAL_HOOKS
#: Points that need the pattern written out (not the fused kernel).
PATTERN_POINTS = frozenset({"scores", "mask", "pattern"})
#: What ``capture="all"`` keeps (``head_out`` and ``logits`` only when named).
DEFAULT_ALL = tuple(n for n in HOOK_POINTS if n not in ("head_out", "logits", "mask"))

Hook = Callable[[torch.Tensor, "int | None"], "torch.Tensor | None"]


# ----------------------------------------------------------------------------- hooks

class Intervention:
    """A named bundle of hooks.

    Every method named after a hook point (``def scores(self, s, layer)``, ``def z(self, z, layer)``, …)
    is a hook; :meth:`hooks` lists them (override it to add more). ``layers`` (default: all) limits
    every hook of the bundle to those layers.
    """

    label = ""

    def __init__(self, layers: Iterable[int] | None = None):
        self.layers = None if layers is None else frozenset(int(l) for l in layers)

    def on(self, layer) -> bool:
        layers = getattr(self, "layers", None)
        return layers is None or layer is None or layer in layers

    def hooks(self) -> list[tuple[str, Hook]]:
        out = []
        for name in HOOK_POINTS:
            fn = getattr(type(self), name, None)
            if inspect.isfunction(fn):
                bound = getattr(self, name)
                out.append((name, lambda t, l, f=bound: f(t, l) if self.on(l) else None))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label or ''})"


class Composed(Intervention):
    """Interventions applied in order: at each point, the hooks of ``parts[0]`` first."""

    def __init__(self, parts: Sequence[Intervention]):
        super().__init__()
        self.parts = list(parts)
        self.label = " + ".join(p.label or type(p).__name__ for p in self.parts)

    def hooks(self):
        return [h for p in self.parts for h in p.hooks()]


def compose(*interventions: Intervention | None) -> Intervention:
    """One intervention applying each of ``interventions`` in the order given (``None``s dropped)."""
    parts = [iv for iv in interventions if iv is not None]
    return parts[0] if len(parts) == 1 else Composed(parts)


class _Hooks:
    """The hooks of one run, grouped by point; ``self(name, layer, t)`` applies them in order."""

    def __init__(self, pairs: list[tuple[str, Hook]], want: set[str], keep_layers: set[int], store):
        self.at: dict[str, list[Hook]] = {}
        for name, fn in pairs:
            if name not in HOOK_POINTS:
                raise ValueError(f"unknown hook point {name!r}; known: {', '.join(HOOK_POINTS)}")
            self.at.setdefault(name, []).append(fn)
        self.user = set(self.at)          # points hooked by something other than a capture
        self.want, self.keep_layers = want, keep_layers
        for name in want:
            self.at.setdefault(name, []).append(
                lambda t, l, name=name: store(name, l, t) if (l is None or l in keep_layers) else None)

    def __call__(self, name: str, layer, t):
        fns = self.at.get(name)
        if fns:
            for fn in fns:
                out = fn(t, layer)
                if out is not None:
                    t = out
        return t

    def needs(self, name: str, layer: int) -> bool:
        return name in self.user or (name in self.want and layer in self.keep_layers)

    def needs_pattern(self, layer: int) -> bool:
        return any(self.needs(n, layer) for n in PATTERN_POINTS)


def _pairs(hooks) -> list[tuple[str, Hook]]:
    if not hooks:
        return []
    if isinstance(hooks, dict):
        return [(n, f) for n, fs in hooks.items() for f in (fs if isinstance(fs, (list, tuple)) else [fs])]
    return [tuple(h) for h in hooks]


def _interventions(iv) -> list[tuple[str, Hook]]:
    if iv is None:
        return []
    if isinstance(iv, Intervention):
        return iv.hooks()
    return [h for one in iv for h in _interventions(one)]


# ----------------------------------------------------------------------------- containers

@dataclass
class KVCache:
    """Past keys and values per layer, [B, n_kv_heads, S, e] each; grows as tokens are decoded.

    Rotary families cache k after rotation (``k_rot``), as HF does."""

    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[-2]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

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
    """Result of :func:`run`: logits [B, T, vocab] (None when stopped early) and the captured tensors."""

    logits: torch.Tensor | None
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


# ----------------------------------------------------------------------------- the steps

def act(name: str, x: torch.Tensor) -> torch.Tensor:
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return functional.gelu(x, approximate="tanh")   # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    if name == "gelu":
        return functional.gelu(x)
    if name == "relu":
        return functional.relu(x)
    if name in ("silu", "swish"):
        return functional.silu(x)
    if name == "quick_gelu":
        return x * torch.sigmoid(1.702 * x)             # HF's QuickGELUActivation
    raise ValueError(f"unsupported activation function {name!r}")


def _linear(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    flat = x.reshape(-1, x.shape[-1])
    out = torch.addmm(b, flat, W) if b is not None else flat @ W
    return out.view(*x.shape[:-1], W.shape[-1])


class _Run:
    """What every step of one forward pass shares: config, hooks, masks, rotary tables, cache."""

    def __init__(self, weights: Weights, hooks: _Hooks, T: int, past: int, cache, device, dtype):
        self.w, self.cfg, self.hook, self.cache = weights, weights.config, hooks, cache
        self.T, self.past, self.S = T, past, past + T
        self._masks: dict = {}
        self.device, self.dtype = device, dtype
        self.rot = None
        if self.cfg.position == "rotary":
            pos = torch.arange(past, past + T, device=device)
            self.rot = attention_steps.rotary_tables(weights.inv_freq, pos, weights.rope_attention_scale, dtype)

    def mask(self, layer: int) -> torch.Tensor:
        w = self.cfg.window(layer)
        if w not in self._masks:
            self._masks[w] = attention_steps.causal_mask(self.T, self.S, window=w, device=self.device, dtype=self.dtype)
        return self._masks[w]


def embed(r: _Run, ids: torch.Tensor) -> torch.Tensor:
    """x = W_E[ids] (+ W_pos[positions] for learned positions)."""
    tok = r.hook("embed", None, r.w.wte[ids] * r.cfg.embed_scale if r.cfg.embed_scale != 1 else r.w.wte[ids])
    if r.w.wpe is None:
        return tok
    pos = r.hook("pos_embed", None, r.w.wpe[r.past: r.S].expand(ids.shape[0], -1, -1))
    return tok + pos


def attention(r: _Run, l: int, x_hat: torch.Tensor) -> torch.Tensor:
    """One block's attention step on its normed input x̂ [B, T, d] -> attn_out [B, T, d]."""
    lw, hook, cfg = r.w.layers[l], r.hook, r.cfg
    q = hook("q", l, attention_steps.project(x_hat, lw.W_Q, lw.b_Q))
    k = hook("k", l, attention_steps.project(x_hat, lw.W_K, lw.b_K))
    v = hook("v", l, attention_steps.project(x_hat, lw.W_V, lw.b_V))
    if r.rot is not None:
        q = hook("q_rot", l, attention_steps.rotate(q, *r.rot))
        k = hook("k_rot", l, attention_steps.rotate(k, *r.rot))
    if r.cache is not None:
        k, v = r.cache.extend(l, k, v)
    scale = cfg.attn_scale(l)
    if hook.needs_pattern(l):
        s = hook("scores", l, attention_steps.scores(q, attention_steps.repeat_kv(k, cfg.group), scale))
        m = hook("mask", l, r.mask(l))
        pattern = hook("pattern", l, attention_steps.softmax(attention_steps.apply_mask(s, m)))
        z = attention_steps.mix(pattern, attention_steps.repeat_kv(v, cfg.group))
    else:
        windowed = cfg.window(l) is not None
        z = functional.scaled_dot_product_attention(
            q, k, v, attn_mask=r.mask(l) if (r.past or windowed) else None,
            is_causal=not (r.past or windowed), scale=scale, enable_gqa=cfg.group > 1)
    z = hook("z", l, z)
    if hook.needs("head_out", l):
        head_out = hook("head_out", l, torch.einsum("bhte,hed->bhtd", z, lw.W_O))
        out = head_out.sum(1) if lw.b_O is None else head_out.sum(1) + lw.b_O
    else:
        out = attention_steps.merge(z, lw.W_O, lw.b_O)
    return hook("attn_out", l, out)


def mlp(r: _Run, l: int, x_hat: torch.Tensor) -> torch.Tensor:
    """act(x̂·W_in + b_in)·W_out + b_out, or gated: (act(x̂·W_gate) ⊙ x̂·W_in)·W_out."""
    lw, hook = r.w.layers[l], r.hook
    if lw.W_gate is not None:
        pre = hook("mlp_pre", l, _linear(x_hat, lw.W_gate, None))
        post = hook("mlp_post", l, act(r.cfg.act_fn, pre) * _linear(x_hat, lw.W_in, lw.b_in))
    else:
        pre = hook("mlp_pre", l, _linear(x_hat, lw.W_in, lw.b_in))
        post = hook("mlp_post", l, act(r.cfg.act_fn, pre))
    return hook("mlp_out", l, _linear(post, lw.W_out, lw.b_out))


def block(r: _Run, l: int, x: torch.Tensor) -> torch.Tensor:
    lw, hook = r.w.layers[l], r.hook
    x = hook("resid_pre", l, x)
    a = attention(r, l, hook("ln1", l, norm(x, lw.ln1_w, lw.ln1_b, r.cfg)))
    if r.cfg.parallel:
        m = mlp(r, l, hook("ln2", l, norm(x, lw.ln2_w, lw.ln2_b, r.cfg)))
        x = hook("resid_mid", l, x + a) + m
    else:
        x = hook("resid_mid", l, x + a)
        x = x + mlp(r, l, hook("ln2", l, norm(x, lw.ln2_w, lw.ln2_b, r.cfg)))
    return hook("resid_post", l, x)


def unembed(r: _Run, x: torch.Tensor) -> torch.Tensor:
    x = r.hook("ln_final", None, norm(x, r.w.lnf_w, r.w.lnf_b, r.cfg))
    logits = torch.matmul(x, r.w.W_U.T)
    return r.hook("logits", None, logits if r.w.b_U is None else logits + r.w.b_U)


# ----------------------------------------------------------------------------- run

def _wanted(capture) -> set[str]:
    if capture in (None, False):
        return set()
    if capture in ("all", True):
        return set(DEFAULT_ALL)
    names = {capture} if isinstance(capture, str) else set(capture)
    unknown = names - set(HOOK_POINTS)
    if unknown:
        raise ValueError(f"unknown capture name(s) {sorted(unknown)}; known: {', '.join(HOOK_POINTS)}")
    return names


@torch.inference_mode()
def run(
    weights: Weights,
    ids,
    *,
    capture: Iterable[str] | str | None = None,
    layers: Sequence[int] | None = None,
    intervention: Intervention | Sequence[Intervention] | None = None,
    hooks=None,
    cache: KVCache | None = None,
    capture_dtype: torch.dtype | None = None,
    start: int = 0,
    resid: torch.Tensor | None = None,
    stop: int | None = None,
    logits: bool = True,
) -> Trace:
    """Run the model on ``ids`` and return a :class:`Trace`.

    capture:       hook point names (or ``"all"``) to keep, stored as ``(name, layer)``.
    layers:        restrict per-layer captures to these layers (default: all).
    intervention:  an :class:`Intervention` or a list of them (applied in order).
    hooks:         ``[(point, fn), …]`` or ``{point: fn or [fns]}``; ``fn(tensor, layer) -> tensor | None``.
    cache:         a :class:`KVCache`; ``ids`` are then the *new* tokens, placed after the cached ones.
    capture_dtype: store captures in this dtype (``torch.float16`` halves memory).
    start, resid:  resume at block ``start`` from its input ``resid`` [B, T, d] (e.g. a cached
                   ``resid_pre``); the embedding and earlier blocks are skipped. ``ids`` [1 or B, T]
                   still give the positions.
    stop:          run blocks ``start … stop − 1`` only; the trace then has no logits.
    logits:        False skips the unembedding (no logits; GPT-2 small's costs half as much as its 12 blocks).
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
    stop = cfg.n_layers if stop is None else stop
    if not 0 <= start <= stop <= cfg.n_layers:
        raise ValueError(f"start={start}, stop={stop}: need 0 ≤ start ≤ stop ≤ {cfg.n_layers}")
    if start > 0 and resid is None:
        raise ValueError("start > 0 needs resid (the residual stream entering that block)")
    if resid is not None and cache is not None:
        raise ValueError("a run resumed at a later block cannot fill a KV cache")
    caps: dict = {}

    def store(name, layer, value):
        caps[(name, layer)] = value if capture_dtype is None else value.to(capture_dtype)

    keep_layers = set(range(cfg.n_layers)) if layers is None else set(layers)
    hk = _Hooks(_interventions(intervention) + _pairs(hooks), _wanted(capture), keep_layers, store)
    r = _Run(weights, hk, T, past, cache, weights.device, weights.dtype)
    x = embed(r, ids) if resid is None else resid
    for l in range(start, stop):
        x = block(r, l, x)
    out = unembed(r, x) if stop == cfg.n_layers and logits else None
    return Trace(logits=out, captures=caps, cache=cache)


# ----------------------------------------------------------------------------- generation

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


def generate(weights: Weights, ids, n_new: int, *, use_cache: bool = True) -> Generation:
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
