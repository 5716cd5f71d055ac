"""Attention statistics at long contexts without ever holding a T × T pattern.

For every layer l, head h and query position i the pattern row is a_ij = exp(s_ij − lse_i) with
s_ij = scale·q_i·k_j over the visible keys j (causal, and i − w < j for a local window w) and
lse_i = log Σ_j exp(s_ij). The statistics below need only per-row sums or single entries of that row,
so they are computed **block by block** over queries and keys with a running log-sum-exp, the way
flash attention computes its output: per query block, for each key block,

    m' = max(m, max_j s_ij),   α = exp(m − m'),   e_ij = exp(s_ij − m')
    l' = α·l + Σ_j e_ij                                   (lse = m + ln l at the end)
    u' = α·(u + (m − m')·l) + Σ_j e_ij·(s_ij − m')          (entropy H_i = ln l − u/l)
    d' = α·d + Σ_j e_ij·(i − j)                            (mean distance Σ_j a_ij·(i − j) = d/l)

and the single entries (first token j = 0, previous token j = i − 1, self j = i, the induction
target j = i − offset + 1 of a known repeat) are kept as raw scores and turned into weights
exp(s − lse) once the row is finished. Nothing larger than a [B, H, block, block] score tile exists.

The forward pass itself runs through the fused kernel: q and k are read at the hook points
(``q_rot``/``k_rot`` for rotary families, ``q``/``k`` otherwise), honouring the layer's scale
(``config.attn_scale``), grouped-query attention (query head h reads kv head h // group) and a local
window (``config.window``). A score intervention can only be applied if it has an equivalent that
does not need the pattern: :meth:`attnkit.entropy.LogLengthScaling.on_queries` multiplies row i of q
by f_i, which multiplies query i's scores by f_i.

In the same pass, optionally, a **block-pooled overview** of chosen layers (each pixel the max or
the mean of a k × k block of the pattern, the picture of a long pattern); and **on demand**
(:func:`pattern_rows`, :func:`focus_window`) the exact rows a user opens, computed for just those rows.

Memory per layer: O(block²·H) for the tiles plus O(H·T) for the per-position results.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch
from torch.nn import functional

from .attention import hidden_keys, is_hidden, visible_keys, visible_span
from .metrics import STATISTICS, normalise
from .model import PATTERN_POINTS, Composed, Intervention, as_ids, run

__all__ = [
    "StreamStats", "Pooled", "stream_stats", "streamable", "pattern_rows", "focus_window", "rows_from_qk",
    "visible_counts", "pool_size", "qk_points", "BLOCK",
]

#: default tile side (queries and keys); the pooling block size is rounded into it
BLOCK = 256
_NEG = -1e30          # "no key seen yet": finite, so that (m − m')·l stays 0·finite, never NaN


class _Stop(Exception):
    """Raised from a hook to end the forward pass early (no unembedding over T × vocab)."""


# ----------------------------------------------------------------------------- results

@dataclass
class Pooled:
    """A layer's block-pooled pattern: pixel (r, c) covers queries r·k … r·k + k − 1 and keys c·k …

    max:   [B, H, R, C] the largest weight in the block (0 where the whole block is masked)
    mean:  [B, H, R, C] the mean weight over the block's *visible* cells (0 where none)
    count: [R, C] visible cells per block; ``masked`` = count == 0
    """

    k: int
    max: torch.Tensor
    mean: torch.Tensor
    count: torch.Tensor

    @property
    def masked(self) -> torch.Tensor:
        return self.count == 0

    def image(self, mode: str = "max") -> torch.Tensor:
        if mode not in ("max", "mean"):
            raise ValueError(f"pooling is 'max' or 'mean', not {mode!r}")
        return self.max if mode == "max" else self.mean


@dataclass
class StreamStats:
    """Per (layer, batch, head, position) statistics from one streaming pass, each [L, B, H, T] float32.

    entropy      H_i = −Σ_j a_ij ln a_ij (nats)
    first_token  a_i0 (0 when a window hides position 0)
    previous     a_{i,i−1} (NaN at i = 0)
    self_mass    a_ii
    distance     Σ_j a_ij·(i − j), in tokens
    induction    a_{i, i−offset+1}, the token after the earlier copy of a repeat with the given offset
                 (NaN for i < offset; None when no offset was given)
    first_k      Σ_{j < sinks} a_ij, the share on the first ``sinks`` tokens (= first_token for sinks = 1)
    lse          log Σ_j exp(s_ij) of the (intervened) scaled scores: a_ij = exp(s_ij − lse_i)
    visible      [L, T] keys visible to query i in each layer (i + 1, or min(i + 1, w) with a window)
    pooled       layer -> :class:`Pooled` for the layers asked for
    loss         [B, T − 1] next-token loss (nats) when asked for
    qk           layer -> (q, k) as the scores use them (after rotation), for the layers asked to keep
    """

    entropy: torch.Tensor
    first_token: torch.Tensor
    previous: torch.Tensor
    self_mass: torch.Tensor
    distance: torch.Tensor
    lse: torch.Tensor
    visible: torch.Tensor
    induction: torch.Tensor | None = None
    induction_offset: int | None = None
    first_k: torch.Tensor | None = None
    sinks: int = 1
    first_excluded: bool = False
    pooled: dict = field(default_factory=dict)
    loss: torch.Tensor | None = None
    qk: dict = field(default_factory=dict)
    seconds: float | None = None

    @property
    def T(self) -> int:
        return self.entropy.shape[-1]

    @property
    def normalised(self) -> torch.Tensor:
        """H_i / ln(n_i), n_i = keys visible to query i; NaN where n_i = 1 (one key, no spread)."""
        return normalise(self.entropy, self.visible[:, None, None, :]).float()

    def head_scores(self) -> dict[str, torch.Tensor]:
        """Per-head means [L, B, H] of every statistic in :data:`attnkit.metrics.STATISTICS` that has a
        streaming form (duplicate-token needs the tokens' equality matrix; induction a known repeat).
        From a pass with ``exclude_first``, first-token (the sink itself) is NaN."""
        nan = torch.full(self.entropy.shape[:-1], math.nan)
        out = {}
        for name, stat in STATISTICS.items():
            v = stat.streamed(self)
            if v is not None:
                out[name] = v if self.T > 1 and not (self.first_excluded and stat.sink) else nan.clone()
        return out


# ----------------------------------------------------------------------------- interventions

def streamable(intervention) -> Intervention | None:
    """The intervention in a form the fused forward can run: a bundle with ``on_queries()`` (e.g.
    :class:`~attnkit.entropy.LogLengthScaling`) is replaced by it, composed bundles part by part.
    ValueError for any remaining hook on scores, mask or pattern (it would need the T × T pattern)."""
    if intervention is None:
        return None
    if isinstance(intervention, (list, tuple)):
        parts = [streamable(p) for p in intervention if p is not None]
        parts = [p for p in parts if p is not None]
        return None if not parts else parts[0] if len(parts) == 1 else Composed(parts)
    if isinstance(intervention, Composed):
        return Composed([streamable(p) for p in intervention.parts])
    if callable(getattr(intervention, "on_queries", None)):
        intervention = intervention.on_queries()
    bad = sorted({name for name, _ in intervention.hooks() if name in PATTERN_POINTS})
    if bad:
        raise ValueError(f"{intervention!r} hooks {', '.join(bad)}: streaming never writes out the pattern; "
                         "give the intervention an on_queries() equivalent (as LogLengthScaling has)")
    return intervention


def qk_points(cfg) -> tuple[str, str]:
    """The hook points where q and k are what the scores use: after rotation for rotary families."""
    return ("q_rot", "k_rot") if cfg.position == "rotary" else ("q", "k")


# ----------------------------------------------------------------------------- geometry

def pool_size(T: int, px: int) -> int:
    """Block side k so that ceil(T / k) ≤ px (as :func:`attnkit.charts.heatmaps.block_max` chooses it)."""
    return max(1, int(math.ceil(T / max(1, int(px)))))


def visible_counts(T: int, k: int, window: int | None = None) -> torch.Tensor:
    """[R, R] (R = ceil(T / k)): how many (query, key) cells of each k × k block are visible
    (each row's span from :func:`attnkit.attention.visible_span`)."""
    R = -(-T // k)
    lo, hi = visible_span(torch.arange(T)[:, None], window)
    c0 = torch.arange(R)[None, :] * k
    c1 = (c0 + k).clamp(max=T) - 1
    per_row = (torch.minimum(hi, c1) - torch.maximum(lo, c0) + 1).clamp(min=0)        # [T, R]
    pad = R * k - T
    if pad:
        per_row = torch.cat([per_row, per_row.new_zeros(pad, R)])
    return per_row.view(R, k, R).sum(1)


# ----------------------------------------------------------------------------- one layer

class _Layer:
    """Buffers of one streaming pass (all layers) and the block loop for one layer."""

    def __init__(self, L: int, B: int, H: int, T: int, device, block: int, offset: int | None,
                 pool_layers: set, pool_k: int | None, fused: bool = True, dtype=torch.float32, sinks: int = 1,
                 exclude_first: bool = False):
        self.use_fused, self.dtype, self.exclude_first = fused and not exclude_first, dtype, exclude_first
        f32 = dict(device=device, dtype=torch.float32)
        self.sinks = [f"sink{c}" for c in range(1, min(int(sinks), T))]     # keys 1 … k − 1 (key 0: first_token)
        self.out = {n: torch.empty(L, B, H, T, **f32)
                    for n in ("entropy", "first_token", "previous", "self_mass", "distance", "lse", *self.sinks)}
        self.offset = offset
        if offset is not None:
            self.out["induction"] = torch.empty(L, B, H, T, **f32)
        self.pool_layers, self.pool_k = pool_layers, pool_k
        self.pooled: dict = {}
        if pool_k is not None and pool_k > block:
            block = pool_k
        elif pool_k is not None:
            block = (block // pool_k) * pool_k
        self.block = block
        self.T, self.device = T, device

    def targets(self, q0: int, q1: int) -> dict[str, torch.Tensor]:
        """Key index of each single-entry statistic for queries q0 … q1 − 1 (−1: none)."""
        i = torch.arange(q0, q1, device=self.device)
        t = {"first_token": torch.zeros_like(i), "previous": i - 1, "self_mass": i}
        for c, name in enumerate(self.sinks, start=1):
            t[name] = torch.where(i >= c, torch.full_like(i, c), torch.full_like(i, -1))    # −1: not yet seen
        if self.offset is not None:
            j = i - self.offset + 1
            t["induction"] = torch.where((i >= self.offset) & (j >= 0), j, torch.full_like(j, -1))
        return t

    def fused(self, l: int, q: torch.Tensor, k: torch.Tensor, scale: float, group: int) -> bool:
        """The per-row statistics of a causal layer from one call of the fused flash kernel, which returns
        lse with its output: with values v_j = [k_j, j] the output is Σ_j a_ij·[k_j, j], so

            H_i = lse_i − scale·q_i·Σ_j a_ij k_j,   distance_i = i − Σ_j a_ij·j,

        and the single entries are exp(scale·q_i·k_j − lse_i). In float32 (the default) the kernel's lse and
        output carry ~1e-6 relative error (≤ 2e-6 nats on the tests' models; more with very large scores);
        float64 is exact but ~3× slower. False when the kernel is unavailable."""
        op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
        if op is None or q.device.type != "cpu":
            return False
        B, H, T, e = q.shape
        dt = self.dtype
        pad = 8
        kr = k if group == 1 else k.repeat_interleave(group, dim=1)
        qq = functional.pad(q.to(dt), (0, pad))
        kk = functional.pad(kr.to(dt), (0, pad))
        pos = torch.arange(T, device=q.device, dtype=dt)
        vv = torch.cat([kr.to(dt), pos.expand(B, H, T)[..., None], kk.new_zeros(B, H, T, pad - 1)], -1)
        out, lse = op(qq, kk, vv, 0.0, True, scale=scale)[:2]
        del qq, kk, vv
        o = self.out
        qd = q.to(dt)
        o["lse"][l] = lse.float()
        o["entropy"][l] = (lse - scale * torch.linalg.vecdot(qd, out[..., :e])).float()
        o["distance"][l] = (pos - out[..., e]).float()
        del out
        for name, j in self.targets(0, T).items():
            kj = kr[:, :, j.clamp(min=0)].to(dt)                          # [B, H, T, e]
            p = torch.exp(scale * torch.linalg.vecdot(qd, kj) - lse)
            p = torch.where(j >= 0, p, torch.full_like(p, math.nan if name in ("previous", "induction") else 0.0))
            o[name][l] = p.float()
        return True

    @torch.inference_mode()
    def __call__(self, l: int, q: torch.Tensor, k: torch.Tensor, scale: float, window: int | None, group: int):
        if window is None and l not in self.pool_layers and self.use_fused and self.fused(l, q, k, scale, group):
            return
        B, H, T, e = q.shape
        Hkv = k.shape[1]
        if q.dtype != torch.float32:
            q, k = q.float(), k.float()
        qg = q.view(B, Hkv, group, T, e)
        kt = k.transpose(-1, -2).unsqueeze(2)                     # [B, Hkv, 1, e, T]
        pk = self.pool_k if l in self.pool_layers else None
        if pk is not None:
            R = -(-T // pk)
            pmax = torch.zeros(B, H, R, R, device=q.device)
            psum = torch.zeros(B, H, R, R, device=q.device)
        for q0 in range(0, T, self.block):
            q1 = min(T, q0 + self.block)
            lse, pieces = self._query_block(l, qg[:, :, :, q0:q1] * scale, kt, q0, q1, window, pk)
            if pk is not None:
                self._pool_rows(pmax, psum, pieces, lse, q0, q1 - q0, pk)
        if pk is not None:
            cnt = visible_counts(T, pk, window).to(q.device)
            mean = torch.where(cnt > 0, psum / cnt.clamp(min=1), torch.zeros_like(psum))
            self.pooled[l] = Pooled(k=pk, max=pmax.cpu(), mean=mean.cpu(), count=cnt.cpu())

    def _query_block(self, l: int, qb: torch.Tensor, kt: torch.Tensor, q0: int, q1: int, window: int | None,
                     pk: int | None):
        """Queries q0 … q1 − 1 (``qb`` = scale·q, [B, Hkv, G, n, e]) against their visible key blocks with the
        running log-sum-exp; writes the layer's per-position results; returns (lse, pooling pieces)."""
        B, Hkv, group, n, _ = qb.shape
        bs, dev = self.block, qb.device
        m = torch.full((B, Hkv, group, n), _NEG, device=dev)
        lsum = torch.zeros_like(m)
        u = torch.zeros_like(m)
        d = torch.zeros_like(m)
        tg = self.targets(q0, q1)
        raw = {name: torch.full_like(m, -math.inf) for name in tg}
        rows = torch.arange(n, device=dev)
        pieces = []
        k_start = int(visible_span(torch.tensor(q0), window)[0]) // bs * bs
        for k0 in range(k_start, q1, bs):
            k1 = min(q1, k0 + bs)
            s = torch.matmul(qb, kt[..., k0:k1])                  # [B, Hkv, G, n, nk]
            hid = None
            if k1 - 1 > q0 or (window is not None and k0 <= q1 - 1 - window) or (self.exclude_first and k0 == 0):
                hid = hidden_keys(q1, window=window, q0=q0, k0=k0, k1=k1, device=dev)
                if self.exclude_first and k0 == 0:       # position 0 taken out of every row but its own
                    hid[(1 if q0 == 0 else 0):, 0] = True
                s.masked_fill_(hid, -math.inf)
            for name, j in tg.items():
                sel = (j >= k0) & (j < k1)
                if bool(sel.any()):
                    r = rows[sel]
                    raw[name][..., r] = s[..., r, j[sel] - k0]
            m_new = torch.maximum(m, s.amax(-1))
            alpha = torch.exp(m - m_new)
            s.sub_(m_new.unsqueeze(-1))                           # t = s − m' (−inf where hidden)
            if pk is not None:
                pieces.append((k0, self._pool_cols(s, pk), m_new))
            w = torch.exp(s)
            if hid is not None:
                s.masked_fill_(hid, 0.0)
            w_sum = w.sum(-1)
            u = alpha * (u + (m - m_new) * lsum) + torch.linalg.vecdot(w, s)
            # Σ e·(i − j) = (i − k0)·Σ e − Σ e·(j − k0): small numbers in each block
            rel = torch.arange(k1 - k0, device=dev, dtype=w.dtype)
            d = alpha * d + (torch.arange(q0, q1, device=dev) - k0).to(w.dtype) * w_sum - w @ rel
            lsum = alpha * lsum + w_sum
            m = m_new
        lse = m + torch.log(lsum)
        self._write(l, q0, q1, lse, torch.log(lsum) - u / lsum, d / lsum, raw, tg)
        return lse, pieces

    def _write(self, l: int, q0: int, q1: int, lse, ent, dist, raw: dict, tg: dict) -> None:
        """Store one query block's results ([B, Hkv, G, n] each) at layer l, positions q0 … q1 − 1."""
        B = lse.shape[0]
        shape = (B, -1, q1 - q0)
        sl = (l, slice(None), slice(None), slice(q0, q1))
        out = self.out
        out["lse"][sl] = lse.reshape(shape)
        out["entropy"][sl] = ent.reshape(shape)
        out["distance"][sl] = dist.reshape(shape)
        for name, j in tg.items():
            p = torch.exp(raw[name] - lse)
            if name in ("previous", "induction"):
                p = torch.where(j >= 0, p, torch.full_like(p, math.nan))
            out[name][sl] = p.reshape(shape)

    @staticmethod
    def _pool_cols(t: torch.Tensor, pk: int):
        """Per row and k-wide key block: (max of t, Σ exp t), both [B, Hkv, G, n, nk / k]."""
        nk = t.shape[-1]
        pad = (-nk) % pk
        if pad:
            t = functional.pad(t, (0, pad), value=-math.inf)
        tv = t.unflatten(-1, (-1, pk))
        return tv.amax(-1), torch.exp(tv).sum(-1)

    @staticmethod
    def _pool_rows(pmax, psum, pieces, lse, q0: int, n: int, pk: int):
        B, H = pmax.shape[:2]
        r0 = q0 // pk
        pad = (-n) % pk
        for k0, (tmax, esum), m_ref in pieces:
            shift = (m_ref - lse).unsqueeze(-1)                   # t was relative to m_ref
            vmax = torch.exp(tmax + shift).view(B, H, n, -1)
            vsum = (esum * torch.exp(shift)).view(B, H, n, -1)
            if pad:
                vmax = functional.pad(vmax, (0, 0, 0, pad))
                vsum = functional.pad(vsum, (0, 0, 0, pad))
            nr, nc = (n + pad) // pk, vmax.shape[-1]
            c0 = k0 // pk
            pmax[:, :, r0:r0 + nr, c0:c0 + nc] = vmax.unflatten(2, (nr, pk)).amax(3)
            psum[:, :, r0:r0 + nr, c0:c0 + nc] = vsum.unflatten(2, (nr, pk)).sum(3)


# ----------------------------------------------------------------------------- the pass

@torch.inference_mode()
def stream_stats(weights, ids, *, intervention=None, induction_offset: int | None = None,
                 pool: int | None = None, pool_layers: Iterable[int] | None = None, loss: bool = False,
                 keep_qk: Iterable[int] = (), block: int = BLOCK,
                 progress: Callable[[int, int], None] | None = None, loss_chunk: int = 1024,
                 fused: bool = True, fused_dtype=torch.float32, sinks: int = 1,
                 exclude_first: bool = False) -> StreamStats:
    """One forward pass of ``ids`` ([T] or [B, T]) through the fused kernel, with every statistic of
    :class:`StreamStats` computed block-wise as each layer's q and k are made.

    intervention:     applied to the forward (see :func:`streamable`); with a score intervention such as
                      LogLengthScaling its q-row form is used, so the statistics are those of the
                      intervened model.
    induction_offset: n for a known repeat (token i repeats token i − n): records a_{i, i−n+1}.
    pool:             side in pixels of the pooled overview (blocks of k = ceil(T / pool)), for
                      ``pool_layers`` (default all layers when ``pool`` is given).
    loss:             also the next-token loss, unembedding ``loss_chunk`` positions at a time (the
                      T × vocab logits are never formed).
    keep_qk:          layers whose q and k to return (for :func:`pattern_rows` without a second pass).
    sinks:            k for ``first_k``, the share of each row on the first k tokens (attention sinks).
    exclude_first:    the statistics of the pattern with position 0 taken out, as
                      :func:`attnkit.metrics.without_first` takes it out of a full pattern: every row but the
                      first computed over keys j ≥ 1 (the forward itself is unchanged), then position 0
                      dropped, so the fields hold queries 1 … T − 1 (first_token and first_k NaN; no pooling).
    progress:         ``progress(layers_done, n_layers)`` after each layer.
    fused:            causal layers that are not pooled go through the CPU flash kernel, which returns
                      each row's lse (:meth:`_Layer.fused`; ``fused_dtype=torch.float64`` for exactness);
                      windowed or pooled layers, other devices, or ``fused=False`` use the block loop.
    """
    t0 = time.perf_counter()
    cfg = weights.config
    ids = as_ids(ids, weights.device)
    B, T = ids.shape
    L, H = cfg.n_layers, cfg.n_heads
    pool_k = pool_size(T, pool) if pool else None
    pl = set(range(L)) if pool and pool_layers is None else set(pool_layers or ())
    if exclude_first and pool:
        raise ValueError("the pooled overview draws the whole pattern; it is not offered with position 0 excluded")
    st = _Layer(L, B, H, T, weights.device, int(block), induction_offset, pl, pool_k, fused=fused,
                dtype=fused_dtype, sinks=sinks, exclude_first=exclude_first)
    qk, final = _forward(weights, ids, streamable(intervention), st, set(keep_qk), progress)
    lossv = _chunked_loss(weights, final, ids, loss_chunk) if loss else None
    o = st.out
    o["first_k"] = o["first_token"] + sum(o.pop(n) for n in st.sinks) if st.sinks else o["first_token"]
    if exclude_first:
        o = _drop_first(o)
    visible = torch.stack([visible_keys(T - exclude_first, cfg.window(l)).long() for l in range(L)])
    return StreamStats(entropy=o["entropy"], first_token=o["first_token"], previous=o["previous"],
                       self_mass=o["self_mass"], distance=o["distance"], lse=o["lse"], visible=visible,
                       induction=o.get("induction"), induction_offset=induction_offset, pooled=st.pooled,
                       loss=lossv, qk=qk, seconds=time.perf_counter() - t0, first_k=o["first_k"], sinks=int(sinks),
                       first_excluded=exclude_first)


def _drop_first(o: dict) -> dict:
    """Per-position fields of a pass that hid key 0 from every later row, shifted to queries 1 … T − 1: a
    shifted query i' = i − 1 sees keys 1 … i, again min(i' + 1, w) of them; position 1 has no previous key left
    and the sink fields are NaN (position 0 is gone)."""
    out = {name: t[..., 1:].clone() for name, t in o.items()}
    out["previous"][..., 0] = math.nan
    out["first_token"].fill_(math.nan)
    out["first_k"].fill_(math.nan)
    return out


def _forward(weights, ids, iv, st: _Layer, keep: set, progress) -> tuple[dict, torch.Tensor]:
    """The fused forward with ``st`` fed each layer's q and k as they are made, stopped at the final norm:
    (layer -> (q, k) for the layers in ``keep``, the final normed stream)."""
    cfg = weights.config
    qn, kn = qk_points(cfg)
    cur: dict = {}
    qk: dict = {}
    final: dict = {}

    def grab_q(t, l):
        cur["q"] = t

    def grab_k(t, l):
        q = cur.pop("q")
        if l in keep:
            qk[l] = (q, t)
        st(l, q, t, cfg.attn_scale(l), cfg.window(l), cfg.group)
        if progress is not None:
            progress(l + 1, cfg.n_layers)

    def stop(x, _):
        final["x"] = x
        raise _Stop

    try:
        run(weights, ids, intervention=iv, hooks=[(qn, grab_q), (kn, grab_k), ("ln_final", stop)])
    except _Stop:
        pass
    return qk, final["x"]


def _chunked_loss(weights, x: torch.Tensor, ids: torch.Tensor, chunk: int) -> torch.Tensor:
    """Next-token cross-entropy [B, T − 1] from the final normed stream, ``chunk`` positions at a time."""
    B, T = ids.shape
    out = x.new_zeros(B, max(0, T - 1), dtype=torch.float32)
    for a in range(0, T - 1, chunk):
        b = min(T - 1, a + chunk)
        logits = torch.matmul(x[:, a:b], weights.W_U.T)
        if weights.b_U is not None:
            logits = logits + weights.b_U
        out[:, a:b] = functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, a + 1:b + 1].reshape(-1),
                                      reduction="none").view(B, b - a)
    return out


# ----------------------------------------------------------------------------- rows on demand

def rows_from_qk(q: torch.Tensor, k: torch.Tensor, rows, *, scale: float, window: int | None = None,
                 group: int = 1, heads=None, cols: slice | None = None) -> torch.Tensor:
    """Exact pattern rows [B, H', R, S'] for query positions ``rows`` from a layer's q [B, H, T, e] and
    k [B, H_kv, T, e]: only R × T scores per head are formed."""
    rows = torch.as_tensor(list(rows) if not isinstance(rows, torch.Tensor) else rows, dtype=torch.long,
                           device=q.device)
    B, H, T, e = q.shape
    heads = list(range(H)) if heads is None else [int(h) for h in heads]
    hq = torch.tensor(heads, device=q.device)
    qs = q[:, hq][:, :, rows].float() * scale                          # [B, H', R, e]
    ks = k[:, hq // group].float()                                     # [B, H', T, e]
    s = torch.matmul(qs, ks.transpose(-1, -2))                         # [B, H', R, T]
    hid = is_hidden(rows[:, None], torch.arange(T, device=q.device)[None, :], window)
    p = torch.softmax(s.masked_fill(hid, -math.inf), -1)
    return p if cols is None else p[..., cols]


@torch.inference_mode()
def pattern_rows(weights, ids, layer: int, rows, *, heads=None, intervention=None,
                 cols: slice | None = None) -> torch.Tensor:
    """The exact rows ``rows`` of ``layer``'s pattern [B, H', R, T] (or the ``cols`` slice), from a forward
    that stops at that layer's keys; the rest of the T × T pattern is never formed."""
    cfg = weights.config
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer {layer} out of range 0 … {cfg.n_layers - 1}")
    ids = as_ids(ids, weights.device)
    T = ids.shape[1]
    rows = [int(r) for r in rows]
    if any(not 0 <= r < T for r in rows):
        raise ValueError(f"rows must lie in 0 … {T - 1}")
    qn, kn = qk_points(cfg)
    got: dict = {}

    def grab_q(t, l):
        if l == layer:
            got["q"] = t

    def grab_k(t, l):
        if l == layer:
            got["k"] = t
            raise _Stop

    try:
        run(weights, ids, intervention=streamable(intervention), hooks=[(qn, grab_q), (kn, grab_k)],
            stop=layer + 1)
    except _Stop:
        pass
    return rows_from_qk(got["q"], got["k"], rows, scale=cfg.attn_scale(layer), window=cfg.window(layer),
                        group=cfg.group, heads=heads, cols=cols)


def focus_window(weights, ids, layer: int, head: int, q0: int, q1: int, k0: int, k1: int,
                 intervention=None) -> np.ndarray:
    """The [q1 − q0, k1 − k0] window of one head's pattern (exact), computed for those rows only."""
    p = pattern_rows(weights, ids, layer, range(q0, q1), heads=[head], intervention=intervention,
                     cols=slice(k0, k1))
    return p[0, 0].cpu().numpy()
