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
from .attention import Keep
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

    Rotary families cache k after rotation (``k_rot``), as HF does. With ``keep`` (an
    :class:`~attnkit.attention.Keep`) the cache evicts: it holds the first ``keep.sinks`` positions and the
    ``keep.window`` most recent, and each key keeps its original position (``positions``), so the result is
    that of masking the dropped keys. With ``rolling`` (rotary families, with ``keep``) keys are cached before
    rotation and rotated to their slot in the cache at each step, StreamingLLM's positions inside the cache."""

    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    keep: Keep | None = None
    rolling: bool = False
    positions: torch.Tensor | None = None      # absolute position of each cached key (an evicting cache)

    def __post_init__(self):
        if self.rolling and (self.keep is None or self.keep.window is None):
            raise ValueError("a rolling cache needs keep=Keep(sinks, window): the keys it keeps")

    @property
    def length(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[-2]

    @property
    def seen(self) -> int:
        """Tokens fed so far: the absolute position of the next one (= length unless keys were evicted)."""
        return self.length if self.positions is None else (int(self.positions[-1]) + 1 if len(self.positions) else 0)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def kept(self, first: int) -> torch.Tensor | None:
        """Indices of the cached keys a query at position ``first`` (or later) can still see; None: all."""
        if self.keep is None or self.positions is None:
            return None
        return torch.nonzero(~self.keep.hidden(torch.tensor(first), self.positions)).reshape(-1)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor, kept: torch.Tensor | None = None):
        """Append one layer's new keys and values (after dropping the cached ones not in ``kept``)."""
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            old_k, old_v = self.keys[layer], self.values[layer]
            if kept is not None:
                old_k, old_v = old_k.index_select(-2, kept.to(old_k.device)), old_v.index_select(-2, kept.to(old_v.device))
            self.keys[layer] = torch.cat([old_k, k], dim=-2)
            self.values[layer] = torch.cat([old_v, v], dim=-2)
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
    """What every step of one forward pass shares: config, hooks, masks, rotary tables, cache.

    ``past`` is the absolute position of the first new token; ``key_pos`` the absolute positions of the keys
    the new queries meet when a :class:`~attnkit.attention.Keep` drops some (else None: keys 0 … S − 1)."""

    def __init__(self, weights: Weights, hooks: _Hooks, T: int, cache, device, dtype, keep: Keep | None = None):
        self.w, self.cfg, self.hook, self.cache = weights, weights.config, hooks, cache
        past = cache.seen if cache is not None else 0
        self.T, self.past, self.S = T, past, past + T
        keep = cache.keep if cache is not None and cache.keep is not None else keep
        # a Keep whose window holds every position so far drops nothing: the plain causal run, bit for bit
        self.keep = None if keep is None or keep.window is None or keep.window >= self.S else keep
        self.kept = cache.kept(past) if cache is not None else None
        self.key_pos = None
        if self.keep is not None:
            old = torch.arange(past) if cache is None or cache.positions is None else cache.positions[self.kept]
            self.key_pos = torch.cat([old.to(device), torch.arange(past, past + T, device=device)])
        self._masks: dict = {}
        self.device, self.dtype = device, dtype
        self.rolling = cache is not None and cache.rolling
        self.rot = None
        if self.cfg.position == "rotary":
            n = self.S if self.key_pos is None else len(self.key_pos)
            pos = torch.arange(n - T if self.rolling else past, n if self.rolling else self.S, device=device)
            self.rot = attention_steps.rotary_tables(weights.inv_freq, pos, weights.rope_attention_scale, dtype)
            if self.rolling:        # every cached key rotated to its slot 0 … n − 1, the queries to the last T
                self.rot_keys = attention_steps.rotary_tables(weights.inv_freq, torch.arange(n, device=device),
                                                              weights.rope_attention_scale, dtype)

    @property
    def masked(self) -> bool:
        """The fused kernel needs an explicit mask (a cache, or keys dropped): is_causal alone is not enough."""
        return bool(self.past) or self.keep is not None

    def mask(self, layer: int) -> torch.Tensor:
        w = self.cfg.window(layer)
        if w not in self._masks:
            if self.key_pos is not None:
                i = torch.arange(self.past, self.S, device=self.device)
                self._masks[w] = attention_steps.position_mask(i, self.key_pos, window=w, keep=self.keep,
                                                               dtype=self.dtype)
            else:
                self._masks[w] = attention_steps.causal_mask(self.T, self.S, window=w, device=self.device,
                                                             dtype=self.dtype)
        return self._masks[w]

    def finish(self) -> None:
        """After the blocks: an evicting cache records the positions of the keys it now holds."""
        if self.cache is not None and self.key_pos is not None:
            self.cache.positions = self.key_pos.cpu()


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
    if r.rot is not None and not r.rolling:
        q = hook("q_rot", l, attention_steps.rotate(q, *r.rot))
        k = hook("k_rot", l, attention_steps.rotate(k, *r.rot))
    if r.cache is not None:
        k, v = r.cache.extend(l, k, v, r.kept)
    if r.rolling:                   # keys cached unrotated, rotated to their slots now (k_rot: all of them)
        q = hook("q_rot", l, attention_steps.rotate(q, *r.rot))
        k = hook("k_rot", l, attention_steps.rotate(k, *r.rot_keys))
    scale = cfg.attn_scale(l)
    if hook.needs_pattern(l):
        s = hook("scores", l, attention_steps.scores(q, attention_steps.repeat_kv(k, cfg.group), scale))
        m = hook("mask", l, r.mask(l))
        pattern = hook("pattern", l, attention_steps.softmax(attention_steps.apply_mask(s, m)))
        z = attention_steps.mix(pattern, attention_steps.repeat_kv(v, cfg.group))
    else:
        windowed = cfg.window(l) is not None
        z = functional.scaled_dot_product_attention(
            q, k, v, attn_mask=r.mask(l) if (r.masked or windowed) else None,
            is_causal=not (r.masked or windowed), scale=scale, enable_gqa=cfg.group > 1)
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


def _check(cfg: ModelConfig, ids: torch.Tensor, cache, keep, start: int, stop: int, resid) -> None:
    """ValueError, in words, for a run that cannot be done as asked."""
    T = ids.shape[1]
    past = cache.seen if cache is not None else 0
    if cache is not None and cache.rolling:
        _check_rolling(cfg, cache, T)
    elif past + T > cfg.n_ctx:
        raise ValueError(
            f"{past + T} tokens exceed the model's context of {cfg.n_ctx} positions"
            + (f" ({past} cached + {T} new)" if past else "")
        )
    if keep is not None and cache is not None and cache.keep not in (None, keep):
        raise ValueError(f"keep={keep} differs from the cache's own keep={cache.keep}")
    if keep is not None and cache is not None and cache.keep is None and cache.length:
        raise ValueError("keep= on a cache that already holds keys: give the cache its keep when it is made")
    if int(ids.max()) >= cfg.d_vocab or int(ids.min()) < 0:
        raise ValueError(f"token id out of range for a vocabulary of {cfg.d_vocab}")
    if not 0 <= start <= stop <= cfg.n_layers:
        raise ValueError(f"start={start}, stop={stop}: need 0 ≤ start ≤ stop ≤ {cfg.n_layers}")
    if start > 0 and resid is None:
        raise ValueError("start > 0 needs resid (the residual stream entering that block)")
    if resid is not None and cache is not None:
        raise ValueError("a run resumed at a later block cannot fill a KV cache")


def _check_rolling(cfg: ModelConfig, cache: KVCache, T: int) -> None:
    """A rolling cache: rotary positions, no window of the model's own, one token at a time once it is full."""
    why = attention_steps.rolling_refusal(cfg)
    if why is not None:
        raise ValueError(why.render())
    if cache.seen + T > cache.keep.size and T > 1:
        raise ValueError(f"a rolling cache of {cache.keep.size} keys takes one token at a time once it fills "
                         f"({cache.seen} fed, {T} new)")
    if cache.keep.size > cfg.n_ctx:
        raise ValueError(f"a rolling cache of {cache.keep.size} keys exceeds the model's context of {cfg.n_ctx}")


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
    keep: Keep | None = None,
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
    keep:          an :class:`~attnkit.attention.Keep`: every query sees only the keys an evicting cache would
                   keep (the first ``sinks`` and the ``window`` most recent; keys keep their positions).
    capture_dtype: store captures in this dtype (``torch.float16`` halves memory).
    start, resid:  resume at block ``start`` from its input ``resid`` [B, T, d] (e.g. a cached
                   ``resid_pre``); the embedding and earlier blocks are skipped. ``ids`` [1 or B, T]
                   still give the positions.
    stop:          run blocks ``start … stop − 1`` only; the trace then has no logits.
    logits:        False skips the unembedding (no logits; GPT-2 small's costs half as much as its 12 blocks).
    """
    cfg = weights.config
    ids = as_ids(ids, weights.device)
    stop = cfg.n_layers if stop is None else stop
    _check(cfg, ids, cache, keep, start, stop, resid)
    caps: dict = {}

    def store(name, layer, value):
        caps[(name, layer)] = value if capture_dtype is None else value.to(capture_dtype)

    keep_layers = set(range(cfg.n_layers)) if layers is None else set(layers)
    hk = _Hooks(_interventions(intervention) + _pairs(hooks), _wanted(capture), keep_layers, store)
    r = _Run(weights, hk, ids.shape[1], cache, weights.device, weights.dtype, keep)
    x = embed(r, ids) if resid is None else resid
    for l in range(start, stop):
        x = block(r, l, x)
    r.finish()
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


def generate(weights: Weights, ids, n_new: int, *, use_cache: bool = True, keep: Keep | None = None,
             rolling: bool = False) -> Generation:
    """Greedy decoding of ``n_new`` tokens after ``ids`` (one sequence).

    With ``use_cache`` each step feeds only the newest token and reuses the keys
    and values of every earlier position (the KV cache); without it each step
    recomputes the whole prefix. Both choose the same tokens.

    ``keep`` evicts: the cache holds the first ``keep.sinks`` positions and the ``keep.window`` most recent,
    with their original positions; without the cache each step recomputes the prefix with the same keys
    masked (:func:`run`'s ``keep``), the same answer. ``rolling`` (rotary families, with the cache) places
    the keys at their slots in the cache instead; a prompt longer than the cache is fed one token at a time.
    """
    seq = as_ids(ids, weights.device)
    if seq.shape[0] != 1:
        raise ValueError("generate takes one sequence")
    if rolling and not use_cache:
        raise ValueError("a rolling cache's positions exist only with the cache; attnkit.eviction recomputes them")
    if not rolling and seq.shape[1] + n_new > weights.config.n_ctx:
        raise ValueError(
            f"{seq.shape[1]} prompt tokens + {n_new} new exceed the context of {weights.config.n_ctx}"
        )
    cache = KVCache(keep=keep, rolling=rolling) if use_cache else None
    tokens, step_logits, times = [], [], []
    feed = _prefill(weights, seq, cache) if rolling else seq
    for _ in range(n_new):
        t0 = time.perf_counter()
        out = run(weights, feed, cache=cache) if use_cache else run(weights, seq, keep=keep)
        last = out.logits[0, -1]
        nxt = int(torch.argmax(last))
        times.append(time.perf_counter() - t0)
        tokens.append(nxt)
        step_logits.append(last)
        new = torch.tensor([[nxt]], device=seq.device)
        seq = torch.cat([seq, new], dim=1)
        feed = new
    return Generation(tokens=tokens, step_logits=step_logits, step_seconds=times, used_cache=use_cache, cache=cache)


def _prefill(weights: Weights, seq: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Feed a rolling cache all but the prompt's last token (at once while it fits, then one at a time);
    returns what the first step feeds."""
    head = min(seq.shape[1] - 1, cache.keep.size)
    if head:
        run(weights, seq[:, :head], cache=cache, logits=False)
    for t in range(head, seq.shape[1] - 1):
        run(weights, seq[:, t:t + 1], cache=cache, logits=False)
    return seq[:, -1:]
