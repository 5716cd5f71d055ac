"""Attention entropy against context length: does attention spread out as the context grows?

One causal forward pass of length T gives, for every layer l, head h and query position i,
the entropy of that query's attention over its i + 1 visible keys,

    H_i = −Σ_{j≤i} a_ij·ln a_ij   (nats; ≤ ln(i+1), equality for uniform attention),

so the curve for every context length n = i + 1 ≤ T comes out of that single pass: under the causal
mask query i sees exactly the prefix it would see if the text stopped there. The numbers themselves
come from :mod:`attnkit.metrics` (``entropy``, ``first_token_mass``); this module adds

* :func:`entropy_profile`: the per layer/head/position curves of one batch, computed *inside* the
  forward pass layer by layer (an :class:`~attnkit.model.Intervention` that reads each pattern as it
  is made), so the 144 patterns of GPT-2 small at T = 1024 (600 MB) are never held at once;
* :class:`Aggregate` / :class:`Summary`: mean and spread (standard deviation across documents) per
  position, for documents of different lengths (each position has its own document count);
* :func:`fit_slopes`: the least-squares slope of H_i against ln(i+1) over i ≥ 1 per head
  (1 = spreads like uniform attention, 0 = a fixed focus whatever the length);
* :class:`LogLengthScaling`: the log-length intervention (multiply query i's scores by log_b(i+1)),
  and the next-token loss with and without it.

The normalised entropy H_i / ln(n_i) of a document (n_i = i + 1 visible keys, min(i + 1, w) on a layer with
a sliding window w) equals :func:`attnkit.metrics.normalised_entropy`; since n_i is the same for every
document, the mean (and the spread) of the normalised curve is the mean (spread) of H_i divided by ln(n_i),
so only H_i is accumulated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch.nn import functional

from . import metrics
from . import prompts
from .entropy_claim import (CLAIM, CLAIM_SLOPE, MIN_DOCS, MIN_WINDOW, RISE, Advice, advice, advised_window,
                            claim_check, slope_interval)
from .model import Intervention, as_ids, run
from .streaming import BLOCK, stream_stats, streamable

__all__ = [
    "LogLengthScaling", "QueryScaling", "DocCurves", "entropy_profile", "uniform_bound", "Aggregate", "Summary",
    "fit_slopes", "documents", "profile_documents", "claim_check", "slope_interval", "sample_positions", "doc_curves",
    "CLAIM", "CLAIM_SLOPE", "MIN_DOCS", "MIN_WINDOW", "RISE", "Advice", "advice", "advised_window",
]


# ----------------------------------------------------------------------------- the intervention

class LogLengthScaling(Intervention):
    """Multiply query i's scores (before the mask) by f_i = log_b(n) with n = i + 1 visible keys.

    This is the log-length scaling of Chiang & Cholak (2022) and of "entropy invariance": without it,
    a query that keeps the same score gaps spreads its mass over more keys as n grows and its entropy
    rises like ln n; multiplying the scores by a factor growing like ln n sharpens the softmax in step.

    ``clamp`` (default True) uses max(1, log_b(n)): the model is left exactly as trained for the first
    b − 1 positions and only sharpened beyond, where f grows as ln n / ln b. That is the inference-time
    use (b = the length the model was trained at; beyond it, sharpen). Two consequences, stated plainly:
    with b ≥ the context length nothing changes at all (f = 1 everywhere); and b must be > 1.
    ``clamp=False`` uses log_b(n) as is, as the papers do when they *train* with it: f < 1 (flatter
    attention) for n < b, f = 0 at position 0 (harmless: one visible key gets weight 1 whatever its
    score), and with b larger than the context every query is flattened — a strong change to a model
    trained without it.

    Positions are absolute: with a KV cache, query t of the new tokens is at i = S − T + t.
    ``layers`` limits the change to these layers (default: all).
    """

    def __init__(self, base: float, clamp: bool = True, layers=None):
        base = float(base)
        if not base > 1 or not math.isfinite(base):
            raise ValueError(f"the log base must be a finite number > 1, got {base}")
        self.base = base
        self.clamp = bool(clamp)
        super().__init__(layers)

    def factors(self, T: int, S: int | None = None, device=None, dtype=torch.float32) -> torch.Tensor:
        """f_i for the T queries at absolute positions S − T … S − 1, shape [T]."""
        S = T if S is None else S
        n = torch.arange(S - T + 1, S + 1, device=device, dtype=torch.float64)
        f = torch.log(n) / math.log(self.base)
        if self.clamp:
            f = f.clamp(min=1.0)
        return f.to(dtype)

    def scores(self, s, layer: int):
        T, S = s.shape[-2:]
        return s * self.factors(T, S, device=s.device, dtype=s.dtype)[:, None]

    def on_queries(self) -> "QueryScaling":
        """The same change as a hook on q: row i of q times f_i. Scores are bilinear in q and k (rotation
        is linear per position), so query i's scores come out multiplied by f_i — and nothing needs the
        pattern, so the fused kernel (and :mod:`attnkit.streaming`) can run it. Positions are 0 … T − 1
        (no KV cache)."""
        return QueryScaling(self.factors, layers=self.layers, label=self.describe())

    def describe(self) -> str:
        f = "max(1, log_{b}(i+1))" if self.clamp else "log_{b}(i+1)"
        return f"scores × {f.replace('{b}', f'{self.base:g}')}"


class QueryScaling(Intervention):
    """q_i × f_i at the ``q`` hook (before any rotation), f = ``factors(T, device=…, dtype=…)`` [T]:
    query i's scores multiplied by f_i without touching the scores (see LogLengthScaling.on_queries)."""

    def __init__(self, factors, layers=None, label: str = ""):
        super().__init__(layers)
        self.factors = factors
        self.label = label

    def q(self, q, layer):
        return q * self.factors(q.shape[-2], device=q.device, dtype=q.dtype)[:, None]


class _Recorder(Intervention):
    """Reads every layer's pattern as the forward pass makes it (entropy and first-token mass);
    nothing is kept but [B, H, T] per layer. Composed *after* the user's intervention."""

    def __init__(self):
        super().__init__()
        self.entropy: list[torch.Tensor] = []
        self.first: list[torch.Tensor] = []

    def pattern(self, pattern, layer):
        self.entropy.append(metrics.entropy(pattern).float())
        self.first.append(metrics.first_token_mass(pattern).float())


# ----------------------------------------------------------------------------- one forward pass

@dataclass
class DocCurves:
    """Curves of one batch of equal-length documents from one forward pass."""

    entropy: torch.Tensor        # [B, L, H, T] nats
    first_token: torch.Tensor    # [B, L, H, T] a_i0
    loss: torch.Tensor | None    # [B, T − 1] next-token cross-entropy (nats) at positions 0 … T − 2
    windows: tuple | None = None  # per layer: None (causal) or the sliding window w (config.windows)

    @property
    def normalised(self) -> torch.Tensor:
        """H_i / ln(n_i), n_i = i + 1 visible keys (min(i + 1, w) under a window), NaN at position 0 (equal to
        metrics.normalised_entropy of the patterns)."""
        L, T = self.entropy.shape[1], self.entropy.shape[-1]
        b = torch.stack([uniform_bound(T, self.entropy.device, _window(self.windows, l)) for l in range(L)])
        return self.entropy / b[:, None, :].float()


def _window(windows, layer: int) -> int | None:
    return None if windows is None else windows[layer]


def uniform_bound(T: int, device=None, window: int | None = None) -> torch.Tensor:
    """ln(n_i) for i = 0 … T − 1, n_i = min(i + 1, w) visible keys: the entropy of uniform attention over the
    visible keys (float64). Where n_i = 1 (position 0) it would be 0; dividing by it gives NaN/inf, so it is NaN."""
    b = torch.log(metrics.visible_keys(T, window, device=device))
    return torch.where(b > 0, b, torch.full_like(b, math.nan))


def entropy_profile(weights, ids, intervention: Intervention | None = None, loss: bool = False) -> DocCurves:
    """Entropy and first-token mass for every layer, head and position (and with ``loss`` the
    next-token loss) from ONE forward pass of ``ids`` ([T] or [B, T]); patterns are read layer by
    layer as the pass makes them, never stored together."""
    ids = as_ids(ids, weights.device)
    rec = _Recorder()
    tr = run(weights, ids, intervention=[intervention, rec])
    logits = tr.logits
    B, T = ids.shape
    if not loss:
        loss = None
    elif T > 1:
        loss = functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1),
                               reduction="none").view(B, T - 1)
    else:
        loss = logits.new_zeros(B, 0)
    return DocCurves(entropy=torch.stack(rec.entropy, 1), first_token=torch.stack(rec.first, 1), loss=loss,
                     windows=weights.config.windows)


def doc_curves(weights, ids, intervention=None, loss: bool = True, progress=None, block: int = BLOCK,
               exclude_first: bool = False) -> DocCurves:
    """:class:`DocCurves` (entropy, first-token mass [B, L, H, T], loss) from one streaming pass
    (:func:`attnkit.streaming.stream_stats`): what :func:`entropy_profile` gives, at any length the model takes.
    ``exclude_first``: the curves of the pattern with position 0 taken out (``stream_stats(exclude_first=True)``:
    queries 1 … T − 1 over keys j ≥ 1, so T − 1 positions; first-token mass NaN); the loss is the model's own."""
    st = stream_stats(weights, ids, intervention=intervention, loss=loss, progress=progress, block=block,
                      exclude_first=exclude_first)
    return DocCurves(entropy=st.entropy.transpose(0, 1), first_token=st.first_token.transpose(0, 1), loss=st.loss,
                     windows=weights.config.windows)


# ----------------------------------------------------------------------------- averaging over documents

class Aggregate:
    """Running sums over documents of different lengths: position i is averaged over the documents
    longer than i. The head axis gets one more slot, index H, holding each document's mean over heads
    (so its spread across documents is that of the head-mean curve, not a mean of per-head spreads)."""

    QUANTITIES = ("entropy", "first_token")

    def __init__(self, windows: tuple | None = None):
        self.windows = windows          # per layer: None or the sliding window (for the normalised view)
        self.n_docs = 0
        self.shape: tuple[int, int] | None = None
        self.count = np.zeros(0)
        self.sums: dict[str, np.ndarray] = {}
        self.sq: dict[str, np.ndarray] = {}
        self.loss_sum = np.zeros(0)
        self.loss_count = np.zeros(0)
        self.doc_slopes: list[float] = []   # per document: the median over heads of its own slopes

    def _grow(self, T: int):
        if T <= self.count.shape[0]:
            return
        extra = T - self.count.shape[0]
        self.count = np.concatenate([self.count, np.zeros(extra)])
        for d in (self.sums, self.sq):
            for k, v in d.items():
                d[k] = np.concatenate([v, np.zeros(v.shape[:-1] + (extra,))], -1)
        self.loss_sum = np.concatenate([self.loss_sum, np.zeros(extra)])
        self.loss_count = np.concatenate([self.loss_count, np.zeros(extra)])

    def add(self, entropy, first_token, loss):
        """One document: entropy and first_token [L, H, T], loss [T − 1] or None (tensors or arrays)."""
        arrays = {"entropy": np.asarray(_np(entropy), dtype=np.float64),
                  "first_token": np.asarray(_np(first_token), dtype=np.float64)}
        L, H, T = arrays["entropy"].shape
        if self.shape is None:
            self.shape = (L, H)
            for k in self.QUANTITIES:
                self.sums[k] = np.zeros((L, H + 1, 0))
                self.sq[k] = np.zeros((L, H + 1, 0))
        elif self.shape != (L, H):
            raise ValueError(f"documents from different models: {self.shape} vs {(L, H)} layers × heads")
        self._grow(T)
        for k, x in arrays.items():
            x = np.concatenate([x, x.mean(1, keepdims=True)], 1)
            self.sums[k][..., :T] += x
            self.sq[k][..., :T] += x * x
        self.count[:T] += 1
        if T >= 3:
            own = fit_slopes(arrays["entropy"])[0]
            if np.isfinite(own).any():
                self.doc_slopes.append(float(np.nanmedian(own)))
        if loss is not None:
            loss = np.asarray(_np(loss), dtype=np.float64).reshape(-1)
            self.loss_sum[: loss.shape[0]] += loss
            self.loss_count[: loss.shape[0]] += 1
        self.n_docs += 1

    def add_curves(self, c: DocCurves):
        for b in range(c.entropy.shape[0]):
            self.add(c.entropy[b], c.first_token[b], None if c.loss is None else c.loss[b])

    def result(self) -> "Summary":
        if self.n_docs == 0:
            raise ValueError("no documents with at least 2 tokens: there is nothing to attend over")
        cnt = self.count
        mean, std = {}, {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for k in self.QUANTITIES:
                m = self.sums[k] / cnt
                var = (self.sq[k] - cnt * m * m) / (cnt - 1)
                mean[k] = m
                std[k] = np.where(cnt >= 2, np.sqrt(np.clip(var, 0, None)), np.nan)
            loss_mean = self.loss_sum / self.loss_count
        slope, intercept, r2 = fit_slopes(mean["entropy"][:, : self.shape[1]], cnt)
        total = self.loss_count.sum()
        return Summary(
            n_docs=self.n_docs, count=cnt.copy(), mean=mean, std=std,
            loss_by_position=loss_mean[: int((self.loss_count > 0).sum())],
            loss_count=self.loss_count[: int((self.loss_count > 0).sum())].copy(),
            loss=float(self.loss_sum.sum() / total) if total else math.nan,
            slope=slope, intercept=intercept, r2=r2, extra={"doc_slopes": [float(v) for v in self.doc_slopes]},
            windows=self.windows,
        )


def _np(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def fit_slopes(mean_entropy: np.ndarray, count: np.ndarray | None = None):
    """Least-squares fit H_i ≈ a + s·ln(i+1) over positions i ≥ 1 (that have documents), per row.

    ``mean_entropy`` [..., T] -> (slope, intercept, r²) each [...]; NaN where fewer than 2 positions.
    """
    y = np.asarray(mean_entropy, dtype=np.float64)
    T = y.shape[-1]
    use = np.arange(T) >= 1
    if count is not None:
        use &= np.asarray(count)[:T] > 0
    nan = np.full(y.shape[:-1], np.nan)
    if use.sum() < 2:
        return nan, nan.copy(), nan.copy()
    x = np.log(np.arange(1, T + 1, dtype=np.float64))[use]
    yy = y[..., use]
    xc = x - x.mean()
    ym = yy.mean(-1, keepdims=True)
    slope = ((yy - ym) * xc).sum(-1) / (xc * xc).sum()
    intercept = ym[..., 0] - slope * x.mean()
    resid = yy - (intercept[..., None] + slope[..., None] * x)
    tot = ((yy - ym) ** 2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = np.where(tot > 0, 1 - (resid ** 2).sum(-1) / tot, np.nan)
    return slope, intercept, r2


@dataclass
class Summary:
    """Mean and spread across documents per layer, head (index H = mean over heads) and position."""

    n_docs: int
    count: np.ndarray                  # [T] documents reaching each position
    mean: dict                         # "entropy"/"first_token" -> [L, H+1, T]
    std: dict                          # same; NaN where fewer than 2 documents
    loss_by_position: np.ndarray       # [T−1] mean next-token loss predicting token i+1 at position i
    loss_count: np.ndarray             # [T−1]
    loss: float                        # nats per predicted token over all documents
    slope: np.ndarray                  # [L, H] dH/d ln(i+1) of the mean curve, over i ≥ 1
    intercept: np.ndarray              # [L, H]
    r2: np.ndarray                     # [L, H]
    extra: dict = field(default_factory=dict)
    windows: tuple | None = None       # per layer: None (causal) or the sliding window w

    @property
    def T(self) -> int:
        return int(self.count.shape[0])

    @property
    def n_layers(self) -> int:
        return self.slope.shape[0]

    @property
    def n_heads(self) -> int:
        return self.slope.shape[1]

    @property
    def bound(self) -> np.ndarray:
        """ln(i+1), the uniform-attention entropy of a causal layer (0 at position 0)."""
        return np.log(np.arange(1, self.T + 1, dtype=np.float64))

    def layer_bound(self, layer: int) -> np.ndarray:
        """ln(n_i) of one layer, n_i = min(i + 1, w) under its window (0 at position 0)."""
        return np.log(metrics.visible_keys(self.T, _window(self.windows, layer)).numpy())

    def normalised(self, which: str = "mean") -> np.ndarray:
        """Mean (or std) of H_i / ln(n_i) [L, H+1, T] (n_i visible keys of each layer), NaN at position 0."""
        b = np.stack([uniform_bound(self.T, window=_window(self.windows, l)).numpy() for l in range(self.n_layers)])
        return getattr(self, which)["entropy"] / b[:, None, :]

    def to_dict(self, per_head: bool = True, digits: int = 6) -> dict:
        r = lambda a: _rounded(a, digits)  # noqa: E731
        H = self.n_heads
        heads = slice(0, H) if per_head else slice(H, H + 1)
        out = {
            "n_docs": self.n_docs,
            "positions": self.T,
            "count": self.count.astype(int).tolist(),
            "uniform_bound": r(self.bound),
            **({"windows": list(self.windows)} if self.windows is not None and any(self.windows) else {}),
            "loss_nats_per_token": round(self.loss, digits) if math.isfinite(self.loss) else None,
            "loss_by_position": r(self.loss_by_position),
            "slope": r(self.slope), "intercept": r(self.intercept), "r2": r(self.r2),
            "layer_mean": self._curves(H, r),
        }
        if per_head:
            out["per_head"] = self._curves(heads, r)
        out.update(self.extra)
        return out

    def _curves(self, h, r) -> dict:
        """Mean and std curves of the heads ``h`` (an index or a slice of the head axis), rounded by ``r``."""
        return {"entropy": r(self.mean["entropy"][:, h]), "entropy_std": r(self.std["entropy"][:, h]),
                "normalised": r(self.normalised("mean")[:, h]), "first_token": r(self.mean["first_token"][:, h]),
                "first_token_std": r(self.std["first_token"][:, h])}


def _rounded(a, digits):
    a = np.round(np.asarray(a, dtype=np.float64), digits)
    return np.where(np.isfinite(a), a, None).tolist()     # JSON has no NaN: null


# ----------------------------------------------------------------------------- documents

def documents(encode, texts, window: int, split: bool = True, max_docs: int | None = None):
    """Token windows to average over: each text encoded, then split into consecutive windows of at
    most ``window`` tokens (``split``) or cut to its first ``window`` tokens. Windows with fewer than
    2 tokens are dropped (nothing to attend over).

    Returns (docs, info) with info = {"texts", "tokens" (the texts' tokens, all of them), "used" (the tokens in
    ``docs``), "chars_cut" (characters past :data:`attnkit.prompts.MAX_PROMPT_CHARS`, never encoded), "short"
    (texts/windows under 2 tokens), "dropped_tokens" (cut off when not splitting), "left_out" (documents beyond
    max_docs), "left_out_tokens" (their tokens)}: the one account of what was used, for the page and the CLI.
    """
    if window < 2:
        raise ValueError("the window must hold at least 2 tokens")
    docs, short, dropped, total, cut = [], 0, 0, 0, 0
    for text in texts:
        cut += max(0, len(text) - prompts.MAX_PROMPT_CHARS)
        ids = encode(text[: prompts.MAX_PROMPT_CHARS])
        total += len(ids)
        if split:
            ws = prompts.windows(ids, window, min_len=1)
            short += sum(len(w) < 2 for w in ws)
            docs += [w for w in ws if len(w) >= 2]
        else:
            kept, d = prompts.truncate(ids, window)
            dropped += d
            if len(kept) < 2:
                short += 1
            else:
                docs.append(kept)
    left_out = left_tokens = 0
    if max_docs is not None and len(docs) > max_docs:
        left_out, left_tokens = len(docs) - max_docs, sum(map(len, docs[max_docs:]))
        docs = docs[:max_docs]
    return docs, {"texts": len(texts), "tokens": total, "used": sum(map(len, docs)), "chars_cut": cut,
                  "short": short, "dropped_tokens": dropped, "left_out": left_out, "left_out_tokens": left_tokens}


def profile_documents(weights, docs, intervention: Intervention | None = None, batch: int = 4,
                      progress=None, streaming: bool | str = "auto") -> Summary:
    """Aggregate :func:`entropy_profile` over documents (lists of ids, any lengths ≥ 2); documents of
    equal length are run together in batches of ``batch``. ``progress(done, total)`` is called.

    ``streaming`` ("auto": whenever the intervention allows it) computes the curves block-wise with
    :func:`attnkit.streaming.doc_curves` — the same numbers (to float rounding) without a T × T pattern,
    which long-context models need."""
    profile = entropy_profile
    if streaming:
        try:
            streamable(intervention)
            profile = doc_curves
        except ValueError:
            if streaming != "auto":
                raise
    agg = Aggregate(weights.config.windows)
    order = sorted(range(len(docs)), key=lambda k: -len(docs[k]))
    done = 0
    k = 0
    while k < len(order):
        T = len(docs[order[k]])
        group = [order[k]]
        while k + len(group) < len(order) and len(group) < batch and len(docs[order[k + len(group)]]) == T:
            group.append(order[k + len(group)])
        ids = torch.tensor([docs[g] for g in group], dtype=torch.long)
        agg.add_curves(profile(weights, ids, intervention, loss=True))
        k += len(group)
        done += len(group)
        if progress is not None:
            progress(done, len(docs))
    return agg.result()


def sample_positions(T: int, max_points: int = 240, head: int = 48) -> np.ndarray:
    """Positions to draw: all when T ≤ max_points, else the first ``head`` and log-spaced ones after,
    always including T − 1 (values at the chosen positions are exact, not averaged)."""
    if T <= max_points:
        return np.arange(T)
    rest = np.unique(np.round(np.geomspace(head, T - 1, max_points - head)).astype(int))
    return np.unique(np.concatenate([np.arange(head), rest, [T - 1]]))


# ----------------------------------------------------------------------------- tables for charts and exports

def curve_frame(s: Summary, quantity: str = "entropy", head: int | None = None, layers=None,
                normalised: bool = False, max_points: int = 240):
    """Long table of one curve per layer: layer, position i, n = i + 1, mean, std, lo/hi (mean ± std,
    clipped to the possible range), docs, bound (ln n for entropy). ``head`` None = mean over heads.
    At most ``max_points`` positions per layer (see :func:`sample_positions`)."""
    h = s.n_heads if head is None else int(head)
    layers = range(s.n_layers) if layers is None else layers
    pos = sample_positions(s.T, max_points)
    if normalised:
        if quantity != "entropy":
            raise ValueError("only the entropy has a normalised view")
        pos = pos[pos >= 1]
        mean, std, top = s.normalised("mean"), s.normalised("std"), np.ones(s.T)
    else:
        mean, std = s.mean[quantity], s.std[quantity]
        top = s.bound if quantity == "entropy" else np.ones(s.T)
    frames = []
    for l in layers:
        if quantity == "entropy" and not normalised:
            top = s.layer_bound(l)
        m, sd = mean[l, h, pos], std[l, h, pos]
        frames.append(pd.DataFrame({
            "layer": l, "position": pos, "n": pos + 1, "mean": m, "std": sd,
            "lo": np.clip(m - sd, 0, top[pos]), "hi": np.clip(m + sd, 0, top[pos]),
            "docs": s.count[pos].astype(int), "bound": top[pos],
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def slope_frame(s: Summary):
    """One row per (layer, head): slope of H against ln(i+1), intercept, r²."""
    L, H = s.slope.shape
    return pd.DataFrame({
        "layer": np.repeat(np.arange(L), H), "head": np.tile(np.arange(H), L),
        "slope": s.slope.reshape(-1), "intercept": s.intercept.reshape(-1), "r2": s.r2.reshape(-1),
    })


def compare_frame(base: Summary, scaled: Summary, head: int | None = None, layers=None, max_points: int = 240):
    """Entropy curves of the unmodified model and of the intervention, side by side (variant column)."""
    a = curve_frame(base, head=head, layers=layers, max_points=max_points).assign(variant="unmodified")
    b = curve_frame(scaled, head=head, layers=layers, max_points=max_points).assign(variant="log-length")
    return pd.concat([a, b], ignore_index=True)


def loss_frame(base: Summary, scaled: Summary | None = None):
    """Next-token loss by position, in bins n ∈ [2^k, 2^(k+1)) of n = i + 1 (token-weighted means):
    columns bin, n_from, unmodified, (log-length, change = log-length − unmodified), tokens."""
    def binned(s: Summary):
        n = np.arange(1, s.loss_by_position.shape[0] + 1)
        k = np.floor(np.log2(n)).astype(int)
        out = {}
        for b in np.unique(k):
            sel = k == b
            w = s.loss_count[sel]
            out[int(b)] = (float((s.loss_by_position[sel] * w).sum() / w.sum()), int(w.sum()))
        return out

    a = binned(base)
    c = binned(scaled) if scaled is not None else {}
    rows = []
    for b, (loss, tokens) in a.items():
        row = {"bin": f"{2 ** b}–{2 ** (b + 1) - 1}", "n_from": 2 ** b, "unmodified": loss, "tokens": tokens}
        if b in c:
            row["log-length"] = c[b][0]
            row["change"] = c[b][0] - loss
        rows.append(row)
    return pd.DataFrame(rows)
