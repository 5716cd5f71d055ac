"""Ablations: the design choices the seeds argue for, switched off one at a time and measured.

Each intervention is an :class:`attnkit.model.Intervention`, scoped to chosen layers (default: all)
and, where it makes sense, to chosen heads:

``v=x``        the value is the input itself. Head h mixes x̂ = ln_1(X) (full width d_model) with its
               own pattern, z_h = pattern_h · x̂, with no W_V, b_V, W_O or b_O; the layer's attention
               output is the mean over heads, (1/H)·Σ_h pattern_h · x̂. Every output row is then a convex
               combination of the rows of x̂ (the mean of H stochastic rows is stochastic).
``wk=wq``      one projection for "looking" and "being looked at": k := q (W_K = W_Q and b_K = b_Q), so
               the scores before the mask, S = q·qᵀ/√e, are symmetric.
``no-scale``   scores are not divided by √d_head (scale 1.0).
``no-mask``    no causal mask: every position sees the whole text, future included.
``zero-head``  head L.H's output z is replaced by zeros.
``mean-head``  head L.H's output z is replaced by its mean over the positions of the text or prompt
               set (taken from an unablated run): the head still adds its average, but no information.

Specs are written ``kind`` or ``kind:L.H[,L.H…]`` (heads; for wk=wq and no-scale optional, for the
head kinds required), with the layer scope given apart (``--layers``).

Measurements: next-token cross-entropy (nats per predicted token) and perplexity, baseline against
ablated, plus one set of numbers per intervention that tests the seed's claim; sweeps over layers
(each alone, then all) and over heads (a layer × head map). One-token prompts predict nothing inside
the text: they are skipped for the loss and counted.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F

from . import metrics as M
from .model import Intervention, run

__all__ = [
    "KINDS", "HEAD_KINDS", "CLAIMS", "DEFINITIONS", "AblationError", "Spec", "parse_spec",
    "ValueIsInput", "KeyIsQuery", "NoScale", "NoMask", "ZeroHead", "MeanHead",
    "build", "head_means", "loss", "Loss", "measure", "layer_sweep", "head_sweep", "sweep_specs",
    "hull_distance", "participation_ratio", "asymmetry", "HULL_ITERS", "HULL_MAX_ROWS", "cli",
]

KINDS = ("v=x", "wk=wq", "no-scale", "no-mask", "zero-head", "mean-head")
HEAD_KINDS = ("zero-head", "mean-head")
#: Budget of :func:`hull_distance`: major (Frank–Wolfe) steps per row of Wolfe's min-norm-point method.
HULL_ITERS = 1000
#: At most this many query rows per text are tested against the hull (evenly spaced; all hull rows kept).
HULL_MAX_ROWS = 32

#: What each seed claims, in our words.
CLAIMS = {
    "v=x": "If attention mixed the inputs themselves (V = X), every output would be a weighted average of "
           "the input vectors: it could never leave their convex hull, so a layer could only blend what is "
           "already in the context, and stacking layers would keep re-blending the same points. The learned "
           "value projection W_V is what lets attention write something new.",
    "wk=wq": "With a single projection for 'the token that looks' and 'the token looked at' (W_K = W_Q), the "
             "score of i→j equals that of j→i, so order is lost, and a dot product is largest for vectors "
             "that resemble each other: tokens would favour look-alikes, themselves first.",
    "no-scale": "Dot products of d-dimensional vectors grow like √d; dividing by √d keeps the scores near "
                "unit variance. Without it the softmax saturates: attention collapses onto a few keys "
                "(lower entropy) and its gradients vanish.",
    "no-mask": "The causal mask sets the scores of future keys to −∞, so a token cannot peek at what comes "
               "after it. Without the mask each position could see the very token it is asked to predict "
               "(the model would 'cheat'), and earlier positions would change when later text is added.",
    "zero-head": "Heads work in parallel and specialise (syntax, coreference, nearby words …): each one "
                 "captures a different relation, so removing a head removes something the others do not "
                 "provide, and some heads matter far more than others.",
    "mean-head": "Heads work in parallel and specialise: replacing a head by its average output keeps its "
                 "constant contribution but removes what it reads from the context; the loss increase "
                 "measures how much the model relies on that head.",
}

#: How each intervention is implemented (shown on the page and in the CLI help).
DEFINITIONS = {
    "v=x": "attn_out_ℓ = (1/H)·Σ_h pattern_h · x̂_ℓ with x̂_ℓ = ln_1(X) at full width d_model; W_V, b_V, W_O "
           "and b_O are not used. Each output row is a convex combination of the rows of x̂_ℓ.",
    "wk=wq": "k := q in every scoped head (W_K = W_Q, b_K = b_Q): S = q·qᵀ/√d_head before the mask.",
    "no-scale": "scores = q·kᵀ (factor 1 instead of 1/√d_head).",
    "no-mask": "the additive mask M is dropped: softmax(q·kᵀ/√d_head) over all positions, future included.",
    "zero-head": "z[:, h] = 0 for the named head(s): the head adds nothing to the residual stream except b_O.",
    "mean-head": "z[:, h] = mean of z[:, h] over all positions of the text/prompt set (unablated run).",
}


class AblationError(ValueError):
    """A bad spec or scope; ``str(err)`` says what is wrong."""


# ----------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class Spec:
    kind: str
    layers: tuple[int, ...] | None = None          # scope (None = all layers)
    heads: tuple[tuple[int, int], ...] = ()        # (layer, head) pairs

    def __str__(self) -> str:
        s = self.kind
        if self.heads:
            s += ":" + ",".join(f"{l}.{h}" for l, h in self.heads)
        if self.layers is not None and self.kind not in HEAD_KINDS:
            s += "@" + ",".join(map(str, self.layers))
        return s

    def with_layers(self, layers) -> "Spec":
        return Spec(self.kind, None if layers is None else tuple(sorted(set(layers))), self.heads)

    def scope(self, n_layers: int) -> list[int]:
        if self.heads:
            return sorted({l for l, _ in self.heads})
        return list(range(n_layers)) if self.layers is None else list(self.layers)


def _parse_layers(text) -> tuple[int, ...] | None:
    if text is None or text == "" or text == "all":
        return None
    if isinstance(text, str):
        try:
            return tuple(sorted({int(t) for t in text.replace(" ", "").split(",") if t}))
        except ValueError:
            raise AblationError(f"layers must be numbers separated by commas (e.g. 0,2), got {text!r}") from None
    return tuple(sorted({int(t) for t in text}))


def parse_spec(text: str, layers=None, n_layers: int | None = None, n_heads: int | None = None) -> Spec:
    """``"v=x"``, ``"wk=wq:1.2"``, ``"zero-head:0.3,2.1"`` (+ a layer scope, ``"0,2"`` or a list) -> Spec.

    With ``n_layers``/``n_heads`` the numbers are checked against the model.
    """
    text = (text or "").strip().lower().replace(" ", "")
    scope_txt = None
    if "@" in text:
        text, scope_txt = text.split("@", 1)
    kind, _, rest = text.partition(":")
    if kind not in KINDS:
        raise AblationError(f"unknown intervention {kind!r}; choose one of {', '.join(KINDS)}")
    heads = []
    if rest:
        if kind in ("v=x", "no-mask"):
            raise AblationError(f"{kind} acts on whole layers; give the scope with --layers, not heads")
        for item in rest.split(","):
            l, dot, h = item.partition(".")
            try:
                heads.append((int(l), int(h)))
            except ValueError:
                raise AblationError(f"a head is written LAYER.HEAD (e.g. 1.3), got {item!r}") from None
    if kind in HEAD_KINDS and not heads:
        raise AblationError(f"{kind} needs the head(s): {kind}:LAYER.HEAD (e.g. {kind}:0.1)")
    scope = _parse_layers(layers if layers is not None else scope_txt)
    spec = Spec(kind, scope, tuple(sorted(set(heads))))
    if n_layers is not None:
        for l in (spec.layers or ()) + tuple(l for l, _ in spec.heads):
            if not 0 <= l < n_layers:
                raise AblationError(f"layer {l} does not exist: the model has layers 0–{n_layers - 1}")
    if n_heads is not None:
        for l, h in spec.heads:
            if not 0 <= h < n_heads:
                raise AblationError(f"head {l}.{h} does not exist: each layer has heads 0–{n_heads - 1}")
    if spec.heads and spec.layers is not None and kind not in HEAD_KINDS:
        outside = sorted({l for l, _ in spec.heads} - set(spec.layers))
        if outside:
            raise AblationError(f"heads in layer(s) {outside} lie outside the layer scope {list(spec.layers)}")
    return spec


# ----------------------------------------------------------------------------- interventions

class _Scoped(Intervention):
    def __init__(self, layers: Iterable[int] | None = None, heads: Iterable[tuple[int, int]] = ()):
        self.heads: dict[int, list[int]] = {}
        for l, h in heads:
            self.heads.setdefault(int(l), []).append(int(h))
        super().__init__(frozenset(self.heads) if self.heads and layers is None else layers)

    def head_index(self, layer: int):
        """The heads to touch in ``layer``: a list, or ``slice(None)`` for all of them."""
        return self.heads.get(layer, slice(None)) if self.heads else slice(None)


class ValueIsInput(_Scoped):
    """V = X: the layer's attention output is mean_h(pattern_h · x̂), no W_V/b_V/W_O/b_O.

    x̂ is the block's own norm of X (ln1); under grouped-query attention the mean runs over the
    query heads (each has its own pattern)."""

    def ln1(self, x_hat, layer):
        self._x_hat = x_hat

    def pattern(self, pattern, layer):
        self._pattern = pattern

    def attn_out(self, out, layer):
        pattern, x_hat = self._pattern, self._x_hat
        if pattern.shape[-1] != x_hat.shape[-2]:
            raise AblationError("V = X cannot be combined with a KV cache (the earlier x̂ rows are not kept)")
        return torch.matmul(pattern, x_hat.unsqueeze(1)).mean(1)


class KeyIsQuery(_Scoped):
    """W_K = W_Q and b_K = b_Q: k := q (in all heads of the scoped layers, or in the named heads)."""

    def q(self, q, layer):
        self._q = q

    def k(self, k, layer):
        q = self._q
        if q.shape[1] != k.shape[1]:
            raise AblationError("W_K = W_Q is not defined under grouped-query attention "
                                "(fewer key heads than query heads)")
        if not self.heads:
            return q
        k = k.clone()
        idx = self.head_index(layer)
        k[:, idx] = q[:, idx]
        return k


class NoScale(_Scoped):
    """No 1/√d_head: the scores are multiplied back by √d_head (all heads, or the named heads).

    Only 1/√d_head is removed: another factor a model applies (GPT-2's optional 1/(layer+1)) stays.
    A model that does not scale by 1/√d_head (``scale_attn_weights=False``, GPT-Neo) is unchanged;
    :attr:`no_op` says so."""

    def __init__(self, layers=None, heads=(), config=None):
        super().__init__(layers, heads)
        self.config = config
        self.no_op = config is not None and not config.scale_attn_weights

    def hooks(self):
        return [] if self.no_op else super().hooks()

    def q(self, q, layer):
        self._d_head = q.shape[-1]

    def scores(self, s, layer):
        factor = self._d_head ** 0.5
        if not self.heads:
            return s * factor
        s = s.clone()
        idx = self.head_index(layer)
        s[:, idx] = s[:, idx] * factor
        return s


class NoMask(_Scoped):
    """No causal mask: every query sees every key."""

    def mask(self, mask, layer):
        return torch.zeros_like(mask)


class ZeroHead(_Scoped):
    """z[:, h] = 0 for the named heads (or all heads of the scoped layers when none are named)."""

    def z(self, z, layer):
        z = z.clone()
        z[:, self.head_index(layer)] = 0
        return z


class MeanHead(_Scoped):
    """z[:, h] = its mean over positions (``means`` [L, H, e], from :func:`head_means`)."""

    def __init__(self, means: torch.Tensor, layers=None, heads=()):
        super().__init__(layers, heads)
        self.means = means

    def z(self, z, layer):
        z = z.clone()
        idx = self.head_index(layer)
        mean = self.means[layer].to(device=z.device, dtype=z.dtype)     # [H, e]
        z[:, idx] = mean[idx].unsqueeze(-2).expand_as(z[:, idx])
        return z


def _ids_list(ids_list) -> list[list[int]]:
    if isinstance(ids_list, torch.Tensor):
        ids_list = ids_list.tolist()
    if ids_list and isinstance(ids_list[0], int):
        ids_list = [ids_list]
    return [[int(i) for i in ids] for ids in ids_list if len(ids)]


def head_means(weights, ids_list) -> torch.Tensor:
    """[L, H, e]: every head's z averaged over all positions of all texts (unablated runs)."""
    ids_list = _ids_list(ids_list)
    if not ids_list:
        raise AblationError("mean ablation needs at least one token to average over")
    total, count = None, 0
    for ids in ids_list:
        z = run(weights, ids, capture=["z"]).stack("z")[:, 0].double()   # [L, H, T, e]
        s = z.sum(-2)
        total = s if total is None else total + s
        count += z.shape[-2]
    return (total / count).to(weights.dtype)


def build(spec: Spec, weights=None, ids_list=None, means: torch.Tensor | None = None) -> Intervention:
    """The Intervention for ``spec`` (mean-head needs ``means`` or ``weights`` + ``ids_list``)."""
    if spec.kind == "v=x":
        return ValueIsInput(spec.layers)
    if spec.kind == "wk=wq":
        return KeyIsQuery(spec.layers, spec.heads)
    if spec.kind == "no-scale":
        return NoScale(spec.layers, spec.heads, config=getattr(weights, 'config', None))
    if spec.kind == "no-mask":
        return NoMask(spec.layers)
    heads = spec.heads
    layers = spec.layers if not heads else None
    if spec.kind == "zero-head":
        return ZeroHead(layers, heads)
    if spec.kind == "mean-head":
        if means is None:
            means = head_means(weights, ids_list)
        return MeanHead(means, layers, heads)
    raise AblationError(f"unknown intervention {spec.kind!r}")


# ----------------------------------------------------------------------------- loss

@dataclass
class Loss:
    """Mean next-token cross-entropy over every predicted token of the texts."""

    nll_sum: float
    tokens: int
    prompts: int
    skipped: int                     # one-token prompts (nothing to predict inside them)

    @property
    def nats(self) -> float:
        return self.nll_sum / self.tokens if self.tokens else math.nan

    @property
    def perplexity(self) -> float:
        return math.exp(self.nats) if self.tokens else math.nan


ONE_TOKEN_NOTE = ("A one-token text has no next token inside it to predict, so its cross-entropy is not "
                  "defined; it is left out of the loss (give at least two tokens).")


def _nll(logits: torch.Tensor, ids: list[int]) -> float:
    """Sum over positions 0..T−2 of −log p(ids[t+1]), in float64."""
    target = torch.tensor(ids[1:], device=logits.device)
    return float(F.cross_entropy(logits[0, :-1].double(), target, reduction="sum"))


def loss(weights, ids_list, intervention: Intervention | None = None) -> Loss:
    ids_list = _ids_list(ids_list)
    total, n, skipped = 0.0, 0, 0
    for ids in ids_list:
        if len(ids) < 2:
            skipped += 1
            continue
        total += _nll(run(weights, ids, intervention=intervention).logits, ids)
        n += len(ids) - 1
    return Loss(total, n, len(ids_list), skipped)


# ----------------------------------------------------------------------------- geometry

def _min_norm_row(K, diag, c, pp, iters, tol_abs, rel, shift):
    """Wolfe's minimum-norm-point method for conv{a_k − p}: (weights, major steps, gap, g_min, converged).

    Each major step is a Frank–Wolfe step (the vertex k minimising x·(a_k − p) joins the active set S);
    minor steps then minimise exactly over the affine hull of S and, when that leaves the simplex,
    move back to its boundary and drop a vertex. The affine minimiser is M⁻¹·1 normalised, with
    M = G + s·11ᵀ (G the Gram matrix of the active a_k − p, s a shift keeping M positive definite while
    the active vertices are affinely independent). The inverse Cholesky factor of M grows by one row per
    new vertex (O(|S|²)) and is refactorised when vertices leave.
    """
    n = c.shape[0]
    j0 = int(np.argmin(diag - 2 * c))
    S = [j0]
    lam = np.ones(1)
    Li = np.array([[1.0 / math.sqrt(max(diag[j0] - 2 * c[j0] + pp + shift, 1e-300))]])   # L⁻¹, M = L·Lᵀ
    it, gap, gmin = 0, math.inf, 0.0
    for it in range(1, iters + 1):
        g = lam @ K[S] - lam @ c[S] - c + pp          # x·(a_k − p) for every vertex k
        xx = float(lam @ g[S])                         # ‖x‖²
        j = int(np.argmin(g))
        gmin = float(g[j])
        gap = xx - gmin                                # Frank–Wolfe gap
        if gap <= tol_abs or gap <= rel * xx or j in S:
            return _weights(n, S, lam), it, gap, gmin, True
        b = K[S, j] - c[S] - c[j] + pp + shift
        y = Li @ b
        d2 = float(diag[j] - 2 * c[j] + pp + shift - y @ y)
        if d2 <= 1e-12 * shift:                        # numerically inside aff(S) already
            return _weights(n, S, lam), it, gap, gmin, False
        k, dl = len(S), math.sqrt(d2)
        Li2 = np.zeros((k + 1, k + 1))
        Li2[:k, :k] = Li
        Li2[k, :k] = -(y @ Li) / dl
        Li2[k, k] = 1.0 / dl
        Li, S, lam = Li2, S + [j], np.append(lam, 0.0)
        for _ in range(len(S) + 1):                    # minor steps
            u = Li.T @ Li.sum(1)                       # M⁻¹·1
            alpha = u / u.sum()
            if (alpha > 0).all():
                lam = alpha
                break
            lam, drop = _minor_step(lam, alpha)
            S = [v for v, d in zip(S, drop) if not d]
            lam = _renormalised(lam, drop)
            try:
                Li = np.linalg.inv(np.linalg.cholesky(K[np.ix_(S, S)] - c[S][:, None] - c[S][None, :] + pp + shift))
            except np.linalg.LinAlgError:              # lost positive definiteness: stop (still a hull point)
                return _weights(n, S, lam), it, gap, gmin, False
    return _weights(n, S, lam), it, gap, gmin, False


def _min_norm_row_fast(K, diag, c, pp, iters, tol_abs, rel, shift):
    """The same method keeping M⁻¹ itself by rank-one updates as vertices join or leave (O(|S|²), no
    factorisation, except a refresh of M⁻¹ before declaring the active set optimal); quicker, but on nearly
    degenerate active sets (more tokens than dimensions) it can lose precision and stop early, reporting
    ``converged`` False: :func:`hull_distance` then reruns the row with :func:`_min_norm_row`."""
    n = c.shape[0]
    j0 = int(np.argmin(diag - 2 * c))
    S = [j0]
    lam = np.ones(1)
    Minv = np.array([[1.0 / max(diag[j0] - 2 * c[j0] + pp + shift, 1e-300)]])
    it, gap, gmin, refreshed = 0, math.inf, 0.0, False
    for it in range(1, iters + 1):
        g = lam @ K[S] - lam @ c[S] - c + pp
        xx = float(lam @ g[S])
        j = int(np.argmin(g))
        gmin = float(g[j])
        gap = xx - gmin
        if gap <= tol_abs or gap <= rel * xx:
            return _weights(n, S, lam), it, gap, gmin, True
        if j in S:                                     # optimal over S, or M⁻¹ has drifted: refresh it once
            if refreshed:
                return _weights(n, S, lam), it, gap, gmin, True
            refreshed = True
            try:
                Minv = np.linalg.inv(K[np.ix_(S, S)] - c[S][:, None] - c[S][None, :] + pp + shift)
            except np.linalg.LinAlgError:
                return _weights(n, S, lam), it, gap, gmin, False
            u = Minv.sum(1)
            alpha = u / u.sum()
            if not (alpha > 0).all():
                return _weights(n, S, lam), it, gap, gmin, False
            lam = alpha
            continue
        refreshed = False
        b = K[S, j] - c[S] - c[j] + pp + shift
        y = (Minv * b).sum(1)
        delta = float(diag[j] - 2 * c[j] + pp + shift - b @ y)       # Schur complement
        if delta <= 1e-12 * shift:
            return _weights(n, S, lam), it, gap, gmin, False
        k = len(S)
        M2 = np.empty((k + 1, k + 1))
        M2[:k, :k] = Minv + np.outer(y, y) / delta
        M2[:k, k] = M2[k, :k] = -y / delta
        M2[k, k] = 1.0 / delta
        Minv, S, lam = M2, S + [j], np.append(lam, 0.0)
        for _ in range(len(S) + 1):
            u = Minv.sum(1)
            alpha = u / u.sum()
            if (alpha > 0).all():
                lam = alpha
                break
            lam, drop = _minor_step(lam, alpha)
            for i in sorted(np.flatnonzero(drop), reverse=True):      # M⁻¹ of M without row/column i
                piv = Minv[i, i]
                if piv <= 0:
                    return _weights(n, S, lam), it, gap, gmin, False
                col = np.delete(Minv[:, i], i)
                Minv = np.delete(np.delete(Minv, i, 0), i, 1) - np.outer(col, col) / piv
            S = [v for v, d in zip(S, drop) if not d]
            lam = _renormalised(lam, drop)
    return _weights(n, S, lam), it, gap, gmin, False


def _minor_step(lam, alpha):
    """Wolfe's minor step: move the weights from ``lam`` towards the affine minimiser ``alpha`` until the
    first weight reaches 0; returns (new weights, mask of the vertices to drop, at least that one)."""
    neg = alpha <= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(neg, lam / (lam - alpha), np.inf)
    theta = min(max(float(ratios.min()), 0.0), 1.0)
    lam = lam + theta * (alpha - lam)
    drop = lam <= 0
    drop[int(np.argmin(np.where(neg, lam, np.inf)))] = True
    return lam, drop


def _renormalised(lam, drop):
    lam = np.maximum(lam[~drop], 0.0)
    return lam / lam.sum()


def _weights(n, S, lam):
    w = np.zeros(n)
    w[S] = lam
    return w


def hull_distance(points, hull, iters: int = HULL_ITERS, tol: float = 1e-12,
                  rel: float = 1e-10) -> tuple[np.ndarray, dict]:
    """Euclidean distance of each row of ``points`` [m, d] from the convex hull of the rows of ``hull`` [n, d].

    Wolfe's minimum-norm-point method (Frank–Wolfe's vertex step, then exact minimisation over the
    active vertices: "fully corrective" Frank–Wolfe), in float64, at most ``iters`` major steps per row;
    a row stops once its Frank–Wolfe gap g = ‖x‖² − min_k x·(a_k − p) is below ``tol``·mean‖a_k‖² or
    ``rel``·‖x‖², or once its hull point lies within 1e-7·RMS‖a_k‖ of p. Unlike plain Frank–Wolfe it
    reaches interior points exactly (distance ~1e-10, not
    ~1e-2 after thousands of steps, on flat hulls of real activations).

    The distance returned is that of a point of the hull, hence an upper bound on the true one;
    ``info['lower']`` holds certified lower bounds max(min_k x·(a_k − p), 0)/‖x‖. Returns (distances [m],
    info with ``lower``, ``iterations`` (most major steps used by a row), ``max_gap``, ``converged``, ``budget``).
    """
    P = np.asarray(points, dtype=np.float64)
    A = np.asarray(hull, dtype=np.float64)
    if P.ndim == 1:
        P = P[None]
    m, n = P.shape[0], A.shape[0]
    K = A @ A.T                                   # [n, n] Gram matrix of the hull points
    C = P @ A.T                                   # [m, n]
    diag = np.diag(K).copy()
    shift = max(float(diag.mean()), 1e-300)
    tol_abs = tol * shift
    W = np.zeros((m, n))
    used, gaps, gmins, conv = np.zeros(m, dtype=int), np.zeros(m), np.zeros(m), np.zeros(m, dtype=bool)
    for r in range(m):
        args = (K, diag, C[r], float(P[r] @ P[r]), iters, tol_abs, rel, shift)
        fast = (K, diag, C[r], float(P[r] @ P[r]), min(iters, n + 50), tol_abs, rel, shift)
        W[r], used[r], gaps[r], gmins[r], conv[r] = _min_norm_row_fast(*fast)
        if not conv[r]:
            # a hull point within 1e-7·RMS‖a_k‖ of p settles "inside" without further work (an upper bound)
            if np.linalg.norm(W[r] @ A - P[r]) <= 1e-7 * math.sqrt(shift):
                conv[r] = True
            else:
                W[r], used[r], gaps[r], gmins[r], conv[r] = _min_norm_row(*args)
    dist = np.linalg.norm(W @ A - P, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.where(dist > 0, np.maximum(gmins, 0.0) / dist, 0.0)
    return dist, {"lower": np.minimum(lower, dist), "iterations": int(used.max()) if m else 0,
                  "max_gap": float(gaps.max()) if m else 0.0, "converged": bool(conv.all()), "budget": iters}


def participation_ratio(rows) -> float:
    """Effective dimension (Σσ²)²/Σσ⁴ of the rows after centring (NaN with fewer than 2 rows)."""
    X = np.asarray(rows, dtype=np.float64)
    if X.shape[0] < 2:
        return math.nan
    X = X - X.mean(0, keepdims=True)
    s2 = np.linalg.svd(X, compute_uv=False) ** 2
    if s2.sum() == 0:
        return math.nan
    return float(s2.sum() ** 2 / (s2 ** 2).sum())


def asymmetry(S: torch.Tensor) -> torch.Tensor:
    """‖S − Sᵀ‖_F / ‖S‖_F over the last two dims (0 for a symmetric matrix)."""
    S = S.double()
    num = torch.linalg.matrix_norm(S - S.transpose(-1, -2))
    den = torch.linalg.matrix_norm(S)
    return torch.where(den > 0, num / den, torch.zeros_like(den))


def _even_rows(T: int, limit: int = HULL_MAX_ROWS) -> np.ndarray:
    return np.arange(T) if T <= limit else np.unique(np.linspace(0, T - 1, limit).round().astype(int))


# ----------------------------------------------------------------------------- measurements

class _Acc:
    """Running sums of named per-layer quantities (mean over the texts, NaNs skipped)."""

    def __init__(self):
        self.sums: dict = {}
        self.counts: dict = {}
        self.maxes: dict = {}

    def add(self, key, value, weight=1.0):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return
        self.sums[key] = self.sums.get(key, 0.0) + float(value) * weight
        self.counts[key] = self.counts.get(key, 0.0) + weight

    def peak(self, key, value):
        self.maxes[key] = max(self.maxes.get(key, -math.inf), float(value))

    def mean(self, key):
        return self.sums[key] / self.counts[key] if self.counts.get(key) else math.nan

    def max(self, key):
        return self.maxes.get(key, math.nan)


_CAPTURE = {
    "v=x": ("ln1", "attn_out"),
    "wk=wq": ("scores", "pattern"),
    "no-scale": ("pattern",),
    "no-mask": ("pattern",),
    "zero-head": (),
    "mean-head": (),
}


def _per_text(kind, acc: _Acc, pos: dict, ids, base, abl, L, hull_iters, info, hsel):
    T = len(ids)
    if kind == "v=x":
        for l in range(L):
            for tag, tr in (("baseline", base), ("ablated", abl)):
                x_hat = tr["ln1", l][0].double().cpu().numpy()
                out = tr["attn_out", l][0].double().cpu().numpy()
                rows = _even_rows(T)
                d, inf = hull_distance(out[rows], x_hat, iters=hull_iters)
                acc.add((l, f"hull distance lower bound ({tag})"), float(inf["lower"].mean()), len(rows))
                info["hull_iterations"] = max(info.get("hull_iterations", 0), inf["iterations"])
                info["hull_converged"] = info.get("hull_converged", True) and inf["converged"]
                scale = float(np.sqrt((x_hat ** 2).sum(1).mean()))
                acc.add((l, f"hull distance ({tag})"), float(d.mean()), len(rows))
                acc.peak((l, f"max hull distance ({tag})"), float(d.max()))
                acc.add((l, f"relative hull distance ({tag})"), float(d.mean()) / scale, len(rows))
                acc.add((l, f"effective dim of x̂ ({tag})"), participation_ratio(x_hat))
                acc.add((l, f"effective dim of output ({tag})"), participation_ratio(out))
    elif kind == "wk=wq":
        for l in range(L):
            for tag, tr in (("baseline", base), ("ablated", abl)):
                S, p = tr["scores", l][0, hsel(l)], tr["pattern", l][0, hsel(l)]   # [h, T, T]
                acc.add((l, f"asymmetry ({tag})"), float(asymmetry(S).mean()))
                st = M.head_scores(p, ids)
                if T > 1:
                    acc.add((l, f"attention on self ({tag})"), float(st["self"].mean()), T - 1)
                    top = p[:, 1:].argmax(-1) == torch.arange(1, T, device=p.device)
                    acc.add((l, f"rows whose top key is self ({tag})"), float(top.double().mean()), T - 1)
                dup = st["duplicate-token"]
                if not torch.isnan(dup).any():
                    acc.add((l, f"attention on earlier copies ({tag})"), float(dup.mean()))
    elif kind == "no-scale":
        for l in range(L):
            for tag, tr in (("baseline", base), ("ablated", abl)):
                p = tr["pattern", l][0, hsel(l)]
                if T > 1:
                    acc.add((l, f"entropy, nats ({tag})"), float(M.entropy(p)[:, 1:].double().mean()), T - 1)
                    acc.add((l, f"largest weight ({tag})"), float(p[:, 1:].max(-1).values.double().mean()), T - 1)
    elif kind == "no-mask":
        for l in range(L):
            p = abl["pattern", l][0]                                          # [H, T, T]
            future = torch.ones(T, T, dtype=torch.bool, device=p.device).triu(1)
            acc.add((l, "attention on future keys (ablated)"), float((p * future).sum(-1).double().mean()), T)
        lb, la = base.logits[0].double(), abl.logits[0].double()
        rel = (torch.linalg.vector_norm(la - lb, dim=-1) / torch.linalg.vector_norm(lb, dim=-1)).cpu()
        flip = (la.argmax(-1) != lb.argmax(-1)).cpu()
        for t in range(T):
            row = pos.setdefault(t, {"sum_rel": 0.0, "flips": 0, "n": 0})
            row["sum_rel"] += float(rel[t])
            row["flips"] += int(flip[t])
            row["n"] += 1
        if T > 1:
            acc.add((None, "early rel change"), float(rel[:-1].mean()), T - 1)
            acc.add((None, "early top-1 changed"), float(flip[:-1].double().mean()), T - 1)


def measure(weights, ids_list, spec: Spec, *, means=None, hull_iters: int = HULL_ITERS) -> dict:
    """Baseline vs ``spec`` on the texts: loss, perplexity, the kind's own numbers, a verdict.

    Returns a JSON-ready dict (NaN written as None) with keys spec, kind, definition, claim, scope,
    loss, per_layer (rows), per_position (no-mask), summary, verdict, notes.
    """
    ids_list = _ids_list(ids_list)
    if not ids_list:
        raise AblationError("no tokens to run on")
    cfg = weights.config
    L = cfg.n_layers
    if spec.kind == "mean-head" and means is None:
        means = head_means(weights, ids_list)
    iv = build(spec, means=means)
    cap = _CAPTURE[spec.kind]
    acc, pos, info = _Acc(), {}, {}
    named = {}
    for l, h in spec.heads:
        named.setdefault(l, []).append(h)

    def hsel(l):   # the heads a layer's numbers are taken over: the named ones, else all
        return named.get(l, slice(None)) if named else slice(None)
    base_loss = Loss(0.0, 0, len(ids_list), 0)
    abl_loss = Loss(0.0, 0, len(ids_list), 0)
    for ids in ids_list:
        base = run(weights, ids, capture=cap)
        abl = run(weights, ids, capture=cap, intervention=iv)
        if len(ids) >= 2:
            base_loss.nll_sum += _nll(base.logits, ids)
            abl_loss.nll_sum += _nll(abl.logits, ids)
            base_loss.tokens += len(ids) - 1
            abl_loss.tokens += len(ids) - 1
        else:
            base_loss.skipped += 1
            abl_loss.skipped += 1
        _per_text(spec.kind, acc, pos, ids, base, abl, L, hull_iters, info, hsel)

    scope = spec.scope(L)
    rows = []
    keys = list(dict.fromkeys(k for (l, k) in list(acc.sums) + list(acc.maxes) if l is not None))
    for l in range(L):
        if not keys:
            break
        row = {"layer": l, "in scope": l in scope}
        for k in keys:
            row[k] = acc.max((l, k)) if k.startswith("max ") else acc.mean((l, k))
        rows.append(row)
    per_position = [{"position": t, "relative logit change": v["sum_rel"] / v["n"],
                     "top-1 changed": v["flips"] / v["n"], "texts": v["n"]} for t, v in sorted(pos.items())]
    summary = _summary(spec.kind, rows, acc, scope, info)
    result = {
        "spec": str(spec), "kind": spec.kind, "definition": DEFINITIONS[spec.kind], "claim": CLAIMS[spec.kind],
        "scope": {"layers": scope, "heads": [f"{l}.{h}" for l, h in spec.heads]},
        "model": {"layers": L, "heads": cfg.n_heads, "d_model": cfg.d_model, "d_head": cfg.d_head},
        "texts": len(ids_list), "tokens": sum(len(i) for i in ids_list),
        "loss": {
            "predicted tokens": base_loss.tokens, "one-token texts skipped": base_loss.skipped,
            "baseline nats/token": base_loss.nats, "ablated nats/token": abl_loss.nats,
            "increase nats/token": abl_loss.nats - base_loss.nats,
            "baseline perplexity": base_loss.perplexity, "ablated perplexity": abl_loss.perplexity,
        },
        "per_layer": rows, "per_position": per_position, "summary": summary, "notes": [],
    }
    if base_loss.skipped:
        result["notes"].append(ONE_TOKEN_NOTE if not base_loss.tokens else
                               f"{base_loss.skipped} one-token text(s) predict nothing and were left out of the loss.")
    if spec.kind == "v=x":
        result["notes"].append(
            f"Hull distances: Wolfe's minimum-norm-point method (fully corrective Frank–Wolfe) in float64, at most "
            f"{hull_iters} major steps per row "
            f"(used up to {info.get('hull_iterations', 0)}; all converged: {info.get('hull_converged', True)}); "
            f"at most {HULL_MAX_ROWS} query rows per text, against all of that layer's x̂ rows. "
            "Effective dimension: participation ratio (Σσ²)²/Σσ⁴ of the centred rows.")
    if spec.kind == "mean-head":
        result["notes"].append(
            "The mean is taken over the positions of these very texts, later positions included, so the "
            "replacement carries a little information about the whole text; over a prompt set it is pooled "
            "over all prompts, which dilutes that.")
    result["verdict"] = verdict(result)
    return _clean(result)


def _col(rows, key, scope=None):
    vals = [r.get(key, math.nan) for r in rows if scope is None or r["layer"] in scope]
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return vals


def _summary(kind, rows, acc, scope, info) -> dict:
    s: dict = {}
    if kind == "v=x":
        s["max hull distance, ablated layers"] = max(_col(rows, "max hull distance (ablated)", scope), default=math.nan)
        s["max relative hull distance, ablated layers"] = max(_col(rows, "relative hull distance (ablated)", scope),
                                                              default=math.nan)
        s["mean hull distance lower bound, baseline"] = _mean(_col(rows, "hull distance lower bound (baseline)", scope))
        s["mean relative hull distance, baseline"] = _mean(_col(rows, "relative hull distance (baseline)", scope))
        s["mean effective dim of output / x̂, baseline"] = _mean(
            [o / i for o, i in zip(_col(rows, "effective dim of output (baseline)", scope),
                                   _col(rows, "effective dim of x̂ (baseline)", scope)) if i])
        s["mean effective dim of output / x̂, ablated"] = _mean(
            [o / i for o, i in zip(_col(rows, "effective dim of output (ablated)", scope),
                                   _col(rows, "effective dim of x̂ (ablated)", scope)) if i])
        last = rows[-1] if rows else {}
        s["effective dim of x̂, last layer, baseline"] = last.get("effective dim of x̂ (baseline)", math.nan)
        s["effective dim of x̂, last layer, ablated"] = last.get("effective dim of x̂ (ablated)", math.nan)
        s["hull solver converged"] = info.get("hull_converged", True)
    elif kind == "wk=wq":
        s["max asymmetry, ablated layers"] = max(_col(rows, "asymmetry (ablated)", scope), default=math.nan)
        s["mean asymmetry, baseline"] = _mean(_col(rows, "asymmetry (baseline)", scope))
        s["attention on self, baseline"] = _mean(_col(rows, "attention on self (baseline)", scope))
        s["attention on self, ablated"] = _mean(_col(rows, "attention on self (ablated)", scope))
        s["top key is self, baseline"] = _mean(_col(rows, "rows whose top key is self (baseline)", scope))
        s["top key is self, ablated"] = _mean(_col(rows, "rows whose top key is self (ablated)", scope))
        s["attention on earlier copies, baseline"] = _mean(_col(rows, "attention on earlier copies (baseline)", scope))
        s["attention on earlier copies, ablated"] = _mean(_col(rows, "attention on earlier copies (ablated)", scope))
    elif kind == "no-scale":
        b = _col(rows, "entropy, nats (baseline)", scope)
        a = _col(rows, "entropy, nats (ablated)", scope)
        s["entropy, baseline"] = _mean(b)
        s["entropy, ablated"] = _mean(a)
        s["entropy drop"] = s["entropy, baseline"] - s["entropy, ablated"]
        s["layers whose entropy dropped"] = sum(x > y for x, y in zip(b, a))
        s["layers measured"] = len(b)
    elif kind == "no-mask":
        s["mean relative logit change, positions before the last"] = acc.mean((None, "early rel change"))
        s["share of earlier positions whose top-1 changed"] = acc.mean((None, "early top-1 changed"))
        s["attention on future keys (ablated layers)"] = _mean(
            _col(rows, "attention on future keys (ablated)", scope))
    return s


def _mean(v):
    return float(np.mean(v)) if len(v) else math.nan


def _fmt(x, spec=".3g"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def verdict(result: dict) -> dict:
    """{'status': 'supported' | 'not supported' | 'mixed' | 'undetermined', 'text': why, from the numbers}."""
    kind, s, lo = result["kind"], result["summary"], result["loss"]
    inc = lo["increase nats/token"]
    has_loss = lo["predicted tokens"] > 0
    loss_txt = (f"the loss goes {'up' if inc > 0 else 'down'} by {abs(inc):.3g} nats/token "
                f"({lo['baseline nats/token']:.3g} → {lo['ablated nats/token']:.3g})") if has_loss else \
        "the loss is undefined here (one token, nothing to predict)"
    if kind == "v=x":
        d_abl = s["max hull distance, ablated layers"]
        rel_a = s["max relative hull distance, ablated layers"]
        rel_b = s["mean relative hull distance, baseline"]
        low_b = s["mean hull distance lower bound, baseline"]
        inside = rel_a is not None and not math.isnan(rel_a) and rel_a <= 1e-3
        outside = (low_b is not None and not math.isnan(low_b) and d_abl is not None
                   and low_b > 10 * max(d_abl, 1e-12))
        text = (f"Ablated outputs lie within {_fmt(d_abl)} (at most {_fmt(rel_a)} × the RMS norm of x̂) of the hull "
                f"of x̂: trapped inside, as the seed says. The real attention outputs lie outside it "
                f"({_fmt(rel_b)} × |x̂| on average, certified ≥ {_fmt(low_b)}): W_V·W_O writes vectors no "
                f"mixture of the inputs can reach. Effective dimension output/x̂: "
                f"{_fmt(s['mean effective dim of output / x̂, baseline'])} real, "
                f"{_fmt(s['mean effective dim of output / x̂, ablated'])} under V = X; the last layer's input "
                f"x̂ has effective dimension {_fmt(s['effective dim of x̂, last layer, baseline'])} normally, "
                f"{_fmt(s['effective dim of x̂, last layer, ablated'])} after the ablated layers; {loss_txt}.")
        if has_loss and inc <= 0:
            text += " The loss does not rise here, so this model does not need what W_V adds on this text."
        status = ("supported" if (not has_loss or inc > 0) else "mixed") if inside and outside else \
            "mixed" if inside else "not supported"
    elif kind == "wk=wq":
        asym = s["max asymmetry, ablated layers"]
        sb, sa = s["attention on self, baseline"], s["attention on self, ablated"]
        sym = asym is not None and asym < 1e-5
        more_self = sa is not None and sb is not None and not math.isnan(sa) and sa > sb
        text = (f"Pre-mask scores become symmetric (asymmetry {_fmt(asym)} vs {_fmt(s['mean asymmetry, baseline'])} "
                f"with the model's own W_K); attention on the token itself goes {_fmt(sb)} → {_fmt(sa)}, "
                f"rows whose top key is the token itself {_fmt(s['top key is self, baseline'])} → "
                f"{_fmt(s['top key is self, ablated'])}"
                + (f"; attention on earlier copies of the same token {_fmt(s['attention on earlier copies, baseline'])}"
                   f" → {_fmt(s['attention on earlier copies, ablated'])}"
                   if not math.isnan(s["attention on earlier copies, ablated"]) else
                   " (no repeated token here to test look-alikes)")
                + f"; {loss_txt}.")
        status = ("supported" if sym and more_self else "mixed" if sym else "not supported") \
            if sa is not None and not math.isnan(sa) else "undetermined"
    elif kind == "no-scale":
        n, k = s["layers measured"], s["layers whose entropy dropped"]
        text = (f"Mean attention entropy {_fmt(s['entropy, baseline'])} → {_fmt(s['entropy, ablated'])} nats "
                f"(drop {_fmt(s['entropy drop'])}; lower in {k} of {n} scoped layers); {loss_txt}.")
        status = "undetermined" if n == 0 else "supported" if k == n else "mixed" if k > 0 else "not supported"
    elif kind == "no-mask":
        ch = s["mean relative logit change, positions before the last"]
        fut = s["attention on future keys (ablated layers)"]
        changed = ch is not None and not math.isnan(ch) and ch > 1e-6
        text = (f"Without the mask, {_fmt(fut)} of the attention goes to future tokens and the logits of earlier "
                f"positions change by {_fmt(ch)} (relative), top-1 changes at "
                f"{_fmt(s['share of earlier positions whose top-1 changed'])} of them; {loss_txt}. ")
        if has_loss and inc < 0:
            text += "The loss drops: the model profits from seeing the future (it cheats)."
            status = "supported"
        elif has_loss:
            text += ("The loss rises instead: a model trained with the mask never learned to read the future, so "
                     "the extra keys only disturb it; the mask's role (earlier positions independent of later "
                     "text) is confirmed by the changed logits, the 'cheating' is not.")
            status = "mixed" if changed else "not supported"
        else:
            status = "undetermined"
    else:
        text = f"Removing {', '.join(result['scope']['heads'])}: {loss_txt}. Use the head map to compare heads."
        status = "undetermined" if not has_loss else "supported" if inc > 0 else "not supported"
    return {"status": status, "text": text}


def _clean(obj):
    """NaN/inf -> None, numpy scalars -> Python, recursively (for JSON)."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


# ----------------------------------------------------------------------------- sweeps

def sweep_specs(spec: Spec, n_layers: int, n_heads: int) -> list[tuple[str, Spec]]:
    """(label, Spec) for each layer alone, then all layers: the same kind of ablation, whole layers."""
    kind = spec.kind
    out = []
    for l in range(n_layers):
        if kind in HEAD_KINDS:
            out.append((f"layer {l}", Spec(kind, None, tuple((l, h) for h in range(n_heads)))))
        else:
            out.append((f"layer {l}", Spec(kind, (l,), ())))
    if kind in HEAD_KINDS:
        out.append(("all layers", Spec(kind, None, tuple((l, h) for l in range(n_layers) for h in range(n_heads)))))
    else:
        out.append(("all layers", Spec(kind, None, ())))
    return out


Progress = Callable[[int, int, str], None]


def layer_sweep(weights, ids_list, spec: Spec, progress: Progress | None = None, means=None) -> dict:
    """Loss with each layer ablated alone, then all layers: {'baseline': nats, 'rows': [...]}."""
    cfg = weights.config
    ids_list = _ids_list(ids_list)
    if spec.kind == "mean-head" and means is None:
        means = head_means(weights, ids_list)
    base = loss(weights, ids_list)
    jobs = sweep_specs(spec, cfg.n_layers, cfg.n_heads)
    rows = []
    for i, (label, sp) in enumerate(jobs):
        if progress:
            progress(i, len(jobs), label)
        lo = loss(weights, ids_list, build(sp, means=means))
        rows.append({"scope": label, "layer": None if label == "all layers" else i,
                     "nats/token": lo.nats, "increase": lo.nats - base.nats, "perplexity": lo.perplexity})
    if progress:
        progress(len(jobs), len(jobs), "done")
    return _clean({"kind": spec.kind, "baseline": base.nats, "predicted tokens": base.tokens, "rows": rows})


def head_sweep(weights, ids_list, mode: str = "zero-head", progress: Progress | None = None, means=None) -> dict:
    """Loss increase with each head ablated alone (L·H forwards per text): {'increase': [L][H], …}."""
    cfg = weights.config
    ids_list = _ids_list(ids_list)
    if mode not in HEAD_KINDS:
        raise AblationError(f"head map mode must be one of {HEAD_KINDS}")
    if mode == "mean-head" and means is None:
        means = head_means(weights, ids_list)
    base = loss(weights, ids_list)
    inc = np.full((cfg.n_layers, cfg.n_heads), np.nan)
    n = cfg.n_layers * cfg.n_heads
    for l in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            if progress:
                progress(l * cfg.n_heads + h, n, f"head {l}.{h}")
            lo = loss(weights, ids_list, build(Spec(mode, None, ((l, h),)), means=means))
            inc[l, h] = lo.nats - base.nats
    if progress:
        progress(n, n, "done")
    return _clean({"mode": mode, "baseline": base.nats, "predicted tokens": base.tokens,
                   "forwards": n * sum(1 for i in ids_list if len(i) > 1), "increase": inc.tolist()})


# ----------------------------------------------------------------------------- CLI

def _read_texts(path: str, column: str | None) -> list[str]:
    from . import prompts as P

    with open(path, "rb") as f:
        data = f.read()
    table = P.read_upload(path, data)
    texts, warnings = P.prompts_from(table, column)
    for w in warnings:
        print(f"attnkit ablate: {w}", file=sys.stderr)
    return texts


def cli(argv=None) -> int:
    from . import cli_args as T
    from .loading import load_for_cli
    from .prompts import PromptError

    p = T.Parser(
        prog="python -m attnkit ablate",
        description="Run one ablation on a text (or prompt set) and compare with the unmodified model.",
        epilog="interventions: " + "; ".join(f"{k}: {v}" for k, v in DEFINITIONS.items()))
    p.add_argument("--model", default=None, type=T.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--device", default="cpu", type=T.device)
    p.add_argument("--text-file", required=True, type=T.existing_nonempty_text_file, help=".txt/.md (one text) or .csv/.jsonl (one prompt per row)")
    p.add_argument("--column", default=None, type=T.utf8_text, help="column/field of a .csv/.jsonl upload")
    p.add_argument("--intervention", required=True, type=T.utf8_text,
                   help="v=x | wk=wq[:L.H,…] | no-scale[:L.H,…] | no-mask | zero-head:L.H[,…] | mean-head:L.H[,…]")
    p.add_argument("--layers", default=None, type=T.utf8_text, help="layer scope, e.g. 0,2 (default: all layers)")
    p.add_argument("--sweep", action="store_true", help="also ablate each layer alone, then all layers")
    p.add_argument("--head-map", action="store_true",
                   help="also the loss increase of every head ablated alone (L·H forwards per text)")
    p.add_argument("--hull-iters", type=T.positive_int, default=HULL_ITERS)
    p.add_argument("--json", dest="json_out", default=None, type=T.writable_path, help="write the results here as JSON")
    a = p.parse_args(argv)
    m = load_for_cli(a.model, a.device, "attnkit ablate")
    if m is None:
        return 2
    cfg = m.config
    try:
        texts = _read_texts(a.text_file, a.column)
        spec = parse_spec(a.intervention, a.layers, cfg.n_layers, cfg.n_heads)
    except (OSError, PromptError, AblationError) as e:
        print(f"attnkit ablate: {e}", file=sys.stderr)
        return 2
    ids_list = [m.encode(t)[: cfg.n_ctx] for t in texts]
    ids_list = [i for i in ids_list if i]
    if not ids_list:
        print("attnkit ablate: the text has no tokens", file=sys.stderr)
        return 2

    def bar(i, n, label):
        print(f"\r  {i}/{n} {label:<20}", end="" if i < n else "\n", file=sys.stderr, flush=True)

    means = head_means(m.weights, ids_list) if spec.kind == "mean-head" else None
    res = measure(m.weights, ids_list, spec, means=means, hull_iters=a.hull_iters)
    out = {"model": a.model, "device": str(m.device), "measure": res}
    lo = res["loss"]
    print(f"{a.model} · {spec} · {res['texts']} text(s), {lo['predicted tokens']} predicted tokens")
    print(f"  claim: {res['claim']}")
    for k, v in lo.items():
        print(f"  {k:<28} {_fmt(v, '.4f') if isinstance(v, float) or v is None else v}")
    for r in res["per_layer"]:
        print("  layer " + " · ".join(f"{k}={_fmt(v) if isinstance(v, float) or v is None else v}"
                                        for k, v in r.items() if k != "layer") + f"  [{r['layer']}]")
    for k, v in res["summary"].items():
        print(f"  {k}: {_fmt(v) if isinstance(v, float) or v is None else v}")
    print(f"  verdict: {res['verdict']['status']} — {res['verdict']['text']}")
    for n in res["notes"]:
        print(f"  note: {n}")
    if a.sweep:
        sw = layer_sweep(m.weights, ids_list, spec, progress=bar, means=means)
        out["layer_sweep"] = sw
        for r in sw["rows"]:
            print(f"  sweep {r['scope']:<11} nats/token {_fmt(r['nats/token'], '.4f')}  "
                  f"increase {_fmt(r['increase'], '+.4f')}")
    if a.head_map:
        mode = spec.kind if spec.kind in HEAD_KINDS else "zero-head"
        hm = head_sweep(m.weights, ids_list, mode, progress=bar, means=means)
        out["head_map"] = hm
        print(f"  head map ({mode}, {hm['forwards']} forwards), loss increase nats/token [layer × head]:")
        for l, row in enumerate(hm["increase"]):
            print(f"    {l:>2}: " + " ".join(_fmt(v, '+.3f') for v in row))
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, ensure_ascii=False)
    return 0
