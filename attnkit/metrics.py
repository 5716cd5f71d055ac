"""Numbers read off attention patterns: entropy per position, and per-head scores.

Patterns are ``[..., T, S]`` (query rows, key columns), usually a layer's
``[B, H, T, T]`` or all layers stacked ``[L, B, H, T, T]`` from ``Trace.stack('pattern')``.
Every score is a fraction of attention mass in [0, 1] unless said otherwise.

The per-head statistics form a registry (:data:`STATISTICS`): one :class:`HeadStatistic` subclass each,
holding its full-pattern form and its streaming form (:mod:`attnkit.streaming`), added with ``@register``.
:func:`head_scores`, ``StreamStats.head_scores``, Compare's overview and the ``heads`` command read it.
Normalised entropy divides by ln n_i, n_i the keys query i can see: i + 1, or min(i + 1, w) under a
sliding window of w keys — in both forms.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from .attention import visible_keys
from .i18n import msg
from .model import run

__all__ = [
    "entropy", "normalised_entropy", "normalise", "visible_keys", "layer_windows", "first_token_mass", "diagonal_mass", "head_scores",
    "induction_scores", "induction_per_sequence", "induction_on_text", "HEAD_STATS", "STATISTICS", "HeadStatistic", "register",
    "repeated_random_tokens", "induction_scores_tl", "head_table", "without_first",
]


def entropy(pattern: torch.Tensor) -> torch.Tensor:
    """H_i = −Σ_j a_ij·ln a_ij in nats (0·ln 0 = 0): ``[..., T, S] -> [..., T]``."""
    p = pattern.double() if pattern.dtype in (torch.float16, torch.bfloat16) else pattern
    return -torch.special.xlogy(p, p).sum(-1)


def layer_windows(window):
    """The sliding windows a caller passes for a model's patterns: a config (its ``windows``, one per layer),
    one per layer (a sequence, None entries for causal layers), one int for all, or None (causal)."""
    return getattr(window, "windows", window)


def _visible_for(shape, window, device) -> torch.Tensor:
    """Visible keys per query, broadcastable to a pattern's ``[..., T]``: ``window`` is None (causal), one w for
    every layer, one entry per layer along the pattern's first axis (stacked layers), or the model's config."""
    T, S = shape[-2:]
    window = layer_windows(window)
    if window is None or isinstance(window, int):
        return visible_keys(T, window, S, device)
    rows = [visible_keys(T, w, S, device) for w in window]
    if len(rows) != shape[0]:
        raise ValueError(f"{len(rows)} windows for {shape[0]} stacked layers")
    return torch.stack(rows).view(len(rows), *([1] * (len(shape) - 3)), T)


def normalise(h: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """H_i / ln(n_i) (n_i = visible keys of query i; the entropy of uniform attention over them is ln n_i):
    1 means uniform over the visible keys, 0 one-hot; NaN where n_i = 1 (one key, no spread). float64."""
    n = visible.double()
    out = h.double() / torch.log(n)
    return torch.where(n > 1, out, torch.full_like(out, math.nan))


def normalised_entropy(pattern: torch.Tensor, *, window) -> torch.Tensor:
    """H_i / ln(n_i), n_i = keys visible to query i: i + 1 under the causal mask, min(i + 1, w) under a sliding
    window w. ``window`` is required (see :func:`layer_windows`): the model's config, one per layer of stacked
    patterns, an int, or None for a causal layer — never a silent causal default. Position 0 is NaN."""
    h = normalise(entropy(pattern), _visible_for(pattern.shape, window, pattern.device))
    return h.to(pattern.dtype if pattern.is_floating_point() else torch.float32)


def first_token_mass(pattern: torch.Tensor) -> torch.Tensor:
    """a_i0: attention on the first position, ``[..., T, S] -> [..., T]``."""
    return pattern[..., 0]


def diagonal_mass(pattern: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """a_{i, i+offset} for every query that has such a key ([..., T − |offset|]); offset −1 = previous token."""
    return torch.diagonal(pattern, offset=offset, dim1=-2, dim2=-1)


def _mean_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Mean over the query positions selected by boolean ``rows`` [T] of values [..., T] (NaN if none)."""
    if rows.sum() == 0:
        return torch.full(values.shape[:-1], math.nan, dtype=values.dtype, device=values.device)
    return values[..., rows].mean(-1)


def _row_mass(p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ_j p[..., i, j] over the cells (i, j) marked in ``mask`` [T, T] -> [..., T]. Gathered, not multiplied
    out: these masks are thin (a few cells a row on text), so this reads a few cells, not all T² of them."""
    i, j = mask.nonzero(as_tuple=True)
    out = torch.zeros(p.shape[:-1], dtype=p.dtype, device=p.device)
    return out.index_add_(-1, i, p[..., i, j])


def _same_token(ids: torch.Tensor) -> torch.Tensor:
    """[T, T] bool: j < i and ids[j] == ids[i]."""
    ids = ids.reshape(-1)
    T = ids.shape[0]
    eq = ids[:, None] == ids[None, :]
    return eq & torch.ones(T, T, dtype=torch.bool, device=ids.device).tril(-1)


def induction_on_text(pattern: torch.Tensor, ids) -> torch.Tensor:
    """Attention from i to j+1 for every earlier copy j of token i (A B … A → B), mean over such i."""
    ids = torch.as_tensor(ids, device=pattern.device).reshape(-1)
    same = _same_token(ids)
    target = torch.zeros_like(same)
    target[:, 1:] = same[:, :-1]              # key j+1 for each earlier copy j
    target &= torch.ones_like(same).tril(-1)  # j+1 must still be in the past
    return _mean_rows(_row_mass(pattern, target), target.any(-1))


# ----------------------------------------------------------------------------- the registry

class HeadStatistic:
    """One per-head statistic, in both of its forms (a new statistic is a subclass plus ``@register``):

    ``full(p, ids, visible)``: from patterns p ``[..., T, T]`` (float32), the tokens ``ids`` ([T] tensor, or
    None) and the visible keys per query (broadcastable to ``[..., T]``) -> ``[...]``; T ≥ 2.
    ``streamed(st)``: the same number from a :class:`attnkit.streaming.StreamStats` (its per-position
    ``[L, B, H, T]`` fields) -> ``[L, B, H]``, or None when a streaming pass cannot give it.

    name:         the key in :func:`head_scores` (a column of Compare's overview, the corpus' heads table)
    description:  one line, with its formula
    ranked:       the ``heads`` command lists the best heads by it (a fraction where more = more of a kind)
    needs_ids:    needs the tokens (NaN without them)
    sink:         measures position 0 itself (NaN when position 0 is excluded)
    """

    name: str = ""
    description: str = ""
    ranked: bool = True
    needs_ids: bool = False
    sink: bool = False

    def full(self, p: torch.Tensor, ids: torch.Tensor | None, visible: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError          # pragma: no cover - abstract

    def streamed(self, st) -> torch.Tensor | None:
        return None


#: name -> statistic, in the order shown
STATISTICS: dict[str, HeadStatistic] = {}
#: name -> description (the registry's table of contents)
HEAD_STATS: dict[str, str] = {}


def register(cls: type[HeadStatistic]) -> type[HeadStatistic]:
    """Class decorator: add a statistic to :data:`STATISTICS` (and so to head_scores, Compare, the CLI)."""
    inst = cls()
    STATISTICS[inst.name] = inst
    HEAD_STATS[inst.name] = inst.description
    return cls


@register
class MeanEntropy(HeadStatistic):
    name = "mean entropy"
    description = msg("mean over query positions i ≥ 1 of −Σ_j a_ij·ln a_ij divided by ln n_i, n_i = visible keys "
                      "(i+1, or min(i+1, w) under a sliding window w; 1 = uniform)")
    ranked = False

    def full(self, p, ids, visible):
        return torch.nanmean(normalise(entropy(p), visible).float()[..., 1:], -1)

    def streamed(self, st):
        return torch.nanmean(st.normalised[..., 1:], -1)


@register
class PreviousToken(HeadStatistic):
    name = "previous-token"
    description = msg("mean attention of position i on i−1")

    def full(self, p, ids, visible):
        return diagonal_mass(p, -1).mean(-1)

    def streamed(self, st):
        return st.previous[..., 1:].mean(-1)


@register
class FirstToken(HeadStatistic):
    name = "first-token"
    description = msg("mean attention on position 0 (the sink), over i ≥ 1")
    sink = True

    def full(self, p, ids, visible):
        return first_token_mass(p)[..., 1:].mean(-1)

    def streamed(self, st):
        return st.first_token[..., 1:].mean(-1)


@register
class SelfMass(HeadStatistic):
    name = "self"
    description = msg("mean attention of position i on itself, over i ≥ 1")

    def full(self, p, ids, visible):
        return diagonal_mass(p, 0)[..., 1:].mean(-1)

    def streamed(self, st):
        return st.self_mass[..., 1:].mean(-1)


@register
class MeanDistance(HeadStatistic):
    name = "mean distance"
    description = msg("mean over i of Σ_j a_ij·(i−j), in tokens")
    ranked = False

    def full(self, p, ids, visible):
        T = p.shape[-1]
        i = torch.arange(T, device=p.device)
        return (p * (i[:, None] - i[None, :]).clamp(min=0).to(p.dtype)).sum(-1).mean(-1)

    def streamed(self, st):
        return st.distance.mean(-1)


@register
class DuplicateToken(HeadStatistic):
    name = "duplicate-token"
    description = msg("mean attention on earlier copies of the current token (positions that have one)")
    needs_ids = True

    def full(self, p, ids, visible):
        same = _same_token(ids)
        return _mean_rows(_row_mass(p, same), same.any(-1))


@register
class Induction(HeadStatistic):
    name = "induction"
    description = msg("mean attention on the token after an earlier copy of the current token (A B … A → B)")
    needs_ids = True

    def full(self, p, ids, visible):
        return induction_on_text(p, ids)

    def streamed(self, st):
        """On a known repeat (token i repeats token i − n): mean over i ≥ n of a_{i, i−n+1}, as
        :func:`induction_scores` (equal to the full form when the first copy holds no repeated token)."""
        n = st.induction_offset
        if st.induction is None or n is None or n >= st.T:
            return None
        return st.induction[..., n:].mean(-1)


def head_scores(pattern: torch.Tensor, ids=None, *, window, exclude_first: bool = False) -> dict[str, torch.Tensor]:
    """Every statistic of :data:`STATISTICS` for patterns ``[..., T, T]`` -> tensors ``[...]``.

    ``ids`` (the tokens) are needed for duplicate-token and induction; without them those are NaN.
    ``window`` is required, taken from the model (:func:`layer_windows`): its config for stacked
    ``[L, …, T, T]`` patterns, ``config.window(l)`` for one layer's, None only for a causal layer. (An optional
    argument let a windowed model's normalised entropy silently use ln(i + 1).) Float64 patterns are scored in
    float64 (the atlas's float64 check), anything else in float32.
    ``exclude_first``: the statistics of the pattern with position 0 taken out (:func:`without_first`), so that
    a head parking most of its attention on the sink is described by what it does with the rest; first-token,
    which measures the sink itself, is then NaN.
    """
    if exclude_first:
        pattern, ids = without_first(pattern, ids)
    T = pattern.shape[-1]
    p = pattern if pattern.dtype == torch.float64 else pattern.float()
    tokens = None if ids is None else torch.as_tensor(ids, device=p.device).reshape(-1)
    visible = _visible_for(p.shape, window, p.device)
    nan = torch.full(p.shape[:-2], math.nan, device=p.device)
    return {name: nan.clone() if T < 2 or (s.needs_ids and tokens is None) or (exclude_first and s.sink)
            else s.full(p, tokens, visible) for name, s in STATISTICS.items()}


# ----------------------------------------------------------------------------- position 0 taken out

def without_first(pattern: torch.Tensor, ids=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The pattern with position 0 taken out: queries and keys 1 … T − 1, each row renormalised over the keys it
    still sees, a'_ij = a_ij / Σ_{j' ≥ 1} a_ij', and the tokens without their first. [..., T, T] -> [..., T − 1, T − 1].

    The rest of a row is summed in float64, not taken as 1 − a_i0: a sink row's rest is tiny and 1 − a_i0 would lose
    it to rounding. A row with nothing left (all its weight on position 0, the rest underflowed) stays 0, so every
    mass statistic counts it as none. Under a window w the keys a shifted query sees are again min(i' + 1, w), so
    every statistic reads the result as a pattern of its own. (The streaming form hides key 0 inside the pass.)"""
    rest = pattern[..., 1:, 1:].double()
    total = rest.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    return (rest / total).to(pattern.dtype), None if ids is None else torch.as_tensor(ids).reshape(-1)[1:]


def repeated_random_tokens(n: int, vocab: int, seed: int = 0, batch: int = 4, low: int = 0) -> torch.Tensor:
    """[batch, 2n]: n random tokens, then the same n again (the standard induction test input)."""
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(low, vocab, (batch, n), generator=g)
    return torch.cat([half, half], dim=1)


def induction_scores(weights, n: int = 50, batch: int = 4, seed: int = 0) -> torch.Tensor:
    """[L, H] induction score: on repeated random tokens, mean attention from position i in the
    second half to i − n + 1 (the token that followed the first copy of token i)."""
    return induction_per_sequence(weights, n, batch, seed)[0].mean(1)


def induction_per_sequence(weights, n: int = 50, batch: int = 4, seed: int = 0):
    """(scores [L, B, H], ids [B, 2n], trace): :func:`induction_scores` per random sequence (their mean over B is
    it), the repeated random tokens and the run on them (patterns and logits) for further use."""
    n = min(n, weights.config.n_ctx // 2)
    ids = repeated_random_tokens(n, weights.config.d_vocab, seed=seed, batch=batch).to(weights.device)
    tr = run(weights, ids, capture=["pattern"])
    pats = tr.stack("pattern")                                          # [L, B, H, 2n, 2n]
    diag = torch.diagonal(pats, offset=-(n - 1), dim1=-2, dim2=-1)      # a_{i, i-n+1}, i = n-1 … 2n-1
    return diag[..., 1:].mean(-1), ids, tr                              # queries i ≥ n


def induction_scores_tl(weights, bos_id: int, n: int = 50, batch: int = 10, seed: int = 0) -> torch.Tensor:
    """[L, H] induction score by TransformerLens's recipe (as in its induction-head tutorials): a BOS
    token, then n random tokens, then the same n again; the mean over the batch and over the *whole*
    diagonal at offset −(n − 1), a_{i, i−n+1} for i = n−1 … 2n (2 of its n + 2 cells lie before the
    repeat, so a perfect head scores n/(n + 2))."""
    n = min(n, (weights.config.n_ctx - 1) // 2)
    half = repeated_random_tokens(n, weights.config.d_vocab, seed=seed, batch=batch)
    ids = torch.cat([torch.full((batch, 1), int(bos_id), dtype=half.dtype), half], dim=1).to(weights.device)
    pats = run(weights, ids, capture=["pattern"]).stack("pattern")      # [L, B, H, 2n+1, 2n+1]
    return torch.diagonal(pats, offset=-(n - 1), dim1=-2, dim2=-1).mean(dim=(-1, 1))


def head_table(weights, ids, induction_n: int = 50, bos_id: int | None = None):
    """Per-head scores as rows (layer, head, stat…): on ``ids`` plus induction on repeated random tokens
    (and, given the model's ``bos_id``, by TransformerLens's recipe too)."""
    pats = run(weights, ids, capture=["pattern"]).stack("pattern")[:, 0]        # [L, H, T, T]
    scores = head_scores(pats, ids, window=weights.config)
    ind = induction_scores(weights, n=induction_n)
    tl = None if bos_id is None else induction_scores_tl(weights, bos_id, n=induction_n)
    L, H = ind.shape
    rows = []
    for l in range(L):
        for h in range(H):
            row = {"layer": l, "head": h}
            row.update({k: float(v[l, h]) for k, v in scores.items()})
            row["induction (random repeats)"] = float(ind[l, h])
            if tl is not None:
                row["induction (TL recipe)"] = float(tl[l, h])
            rows.append(row)
    return pd.DataFrame(rows)

