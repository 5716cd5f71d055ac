"""Comparing attention heads: similarity, ordering, ranking for a token pair, statistics over prompts.

Pure torch/numpy/pandas (no Streamlit), so every piece is testable on its own.

* :func:`js_distance` — Jensen–Shannon distance (base 2, so in [0, 1]) between two heads'
  patterns, averaged over query rows.
* :func:`distance_matrix` — that distance for every pair of heads.
* :func:`similarity_order` — an order of the heads in which similar heads sit next to each
  other (average-linkage agglomerative clustering, leaves read left to right).
* :func:`rank_heads_for_pair` — every head ranked by the weight from one query token to one key.
* :func:`mean_scores` — per-prompt head statistics averaged over prompts (NaN-aware).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .standard import head_name, parse_head

__all__ = [
    "head_name", "markdown_table", "parse_head", "js_divergence_rows", "js_distance", "distance_matrix", "sample_rows",
    "similarity_order", "rank_heads_for_pair", "mean_scores", "scores_frame", "find_token",
    "Similarity", "head_similarity", "SIMILARITY_BUDGET",
]

_LN2 = math.log(2.0)


def markdown_table(df: pd.DataFrame) -> str:
    """A data frame as a Markdown table, floats to 3 decimals (the ``heads`` command, the model card)."""
    cell = (lambda v: f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def js_divergence_rows(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """JS divergence in bits between distributions along the last dim: ``[..., S] -> [...]``.

    JSD(P, Q) = ½·KL(P‖M) + ½·KL(Q‖M) with M = ½(P + Q); 0 ≤ JSD ≤ 1 bit.
    """
    p = p.double()
    q = q.double()
    m = 0.5 * (p + q)
    kl_p = (torch.special.xlogy(p, p) - torch.special.xlogy(p, m)).sum(-1)
    kl_q = (torch.special.xlogy(q, q) - torch.special.xlogy(q, m)).sum(-1)
    return (0.5 * (kl_p + kl_q) / _LN2).clamp(min=0.0, max=1.0)


def js_distance(p: torch.Tensor, q: torch.Tensor, rows=None) -> float:
    """Jensen–Shannon distance √JSD between two patterns ``[T, S]``, averaged over query rows.

    ``rows`` (indices) picks the query rows; by default every row but the first (under the
    causal mask row 0 sees only key 0, so every head agrees there).
    """
    if rows is None:
        rows = torch.arange(1 if p.shape[-2] > 1 else 0, p.shape[-2])
    d = js_divergence_rows(p[..., rows, :], q[..., rows, :]).sqrt()
    return float(d.mean())


def sample_rows(T: int, max_rows: int | None) -> torch.Tensor:
    """Query rows used for head similarity: all rows 1..T−1, or ``max_rows`` of them evenly spaced."""
    rows = torch.arange(1 if T > 1 else 0, T)
    if max_rows is None or len(rows) <= max_rows:
        return rows
    pick = torch.linspace(0, len(rows) - 1, max_rows).round().long().unique()
    return rows[pick]


def distance_matrix(patterns: torch.Tensor, rows=None, progress=None) -> torch.Tensor:
    """Pairwise JS distance between heads: ``patterns [N, T, S] -> [N, N]`` (float64, symmetric, 0 diagonal).

    ``rows``: query rows to average over (see :func:`js_distance`); ``progress(i, N)`` is called per head.
    """
    N, T, S = patterns.shape
    if rows is None:
        rows = sample_rows(T, None)
    rows = torch.as_tensor(rows, dtype=torch.long)
    sub = patterns[:, rows, :].double()                       # [N, R, S]
    if T == S:                                                # causal: keys after the last row are all zero
        sub = sub[..., : int(rows.max()) + 1]
    ent = -torch.special.xlogy(sub, sub).sum(-1)             # H(P) per head and row, nats [N, R]
    out = torch.zeros(N, N, dtype=torch.float64)
    for i in range(N):
        if i + 1 < N:
            # JSD = H(M) − ½(H(P) + H(Q)), M = ½(P + Q): one xlogy per pair instead of four
            m = 0.5 * (sub[i : i + 1] + sub[i + 1 :])
            jsd = (-torch.special.xlogy(m, m).sum(-1) - 0.5 * (ent[i : i + 1] + ent[i + 1 :])) / _LN2
            d = jsd.clamp(min=0.0, max=1.0).sqrt().mean(-1)                      # [N − i − 1]
            out[i, i + 1 :] = d
            out[i + 1 :, i] = d
        if progress is not None:
            progress(i + 1, N)
    return out


def similarity_order(dist) -> list[int]:
    """An order of the items in which close items are neighbours.

    Average-linkage (UPGMA) agglomerative clustering on ``dist [N, N]``; when two clusters
    merge, their leaf lists are joined in whichever of the four orientations puts the two
    closest end leaves next to each other. Deterministic (ties broken by lowest index).
    """
    D = dist.double().cpu().numpy() if isinstance(dist, torch.Tensor) else np.array(dist, dtype=np.float64)
    N = D.shape[0]
    if N == 0:
        return []
    clusters: dict[int, list[int]] = {i: [i] for i in range(N)}
    sizes = {i: 1 for i in range(N)}
    C = D.copy()
    np.fill_diagonal(C, np.inf)
    alive = list(range(N))
    while len(alive) > 1:
        sub = C[np.ix_(alive, alive)]
        flat = int(np.argmin(sub))
        a, b = alive[flat // len(alive)], alive[flat % len(alive)]
        a, b = min(a, b), max(a, b)
        A, B = clusters[a], clusters[b]
        options = [A + B, A + B[::-1], A[::-1] + B, A[::-1] + B[::-1]]
        joins = [D[A[-1], B[0]], D[A[-1], B[-1]], D[A[0], B[0]], D[A[0], B[-1]]]
        clusters[a] = options[int(np.argmin(joins))]
        del clusters[b]
        na, nb = sizes[a], sizes.pop(b)
        for c in alive:
            if c not in (a, b):
                C[a, c] = C[c, a] = (na * C[a, c] + nb * C[b, c]) / (na + nb)
        sizes[a] = na + nb
        alive.remove(b)
    return clusters[alive[0]]


def rank_heads_for_pair(patterns: torch.Tensor, query: int, key: int) -> pd.DataFrame:
    """Every head ranked by the attention weight from position ``query`` to position ``key``.

    ``patterns``: ``[L, H, T, S]``. Columns: head (``L{l}H{h}``), layer, head_index, weight,
    rank_in_row (1 = the key is this query's most attended position), top_key (that position).
    """
    L, H, T, S = patterns.shape
    if not 0 <= query < T or not 0 <= key < S:
        raise ValueError(f"positions out of range: query {query} of {T}, key {key} of {S}")
    row = patterns[:, :, query, :].float().cpu()                 # [L, H, S]
    w = row[:, :, key]                                           # [L, H]
    rank = (row > w.unsqueeze(-1)).sum(-1) + 1
    df = pd.DataFrame({
        "head": [head_name(l, h) for l in range(L) for h in range(H)],
        "layer": np.repeat(np.arange(L), H),
        "head_index": np.tile(np.arange(H), L),
        "weight": w.reshape(-1).double().numpy(),
        "rank_in_row": rank.reshape(-1).numpy(),
        "top_key": row.argmax(-1).reshape(-1).numpy(),
    })
    return df.sort_values(["weight", "layer", "head_index"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True)


def mean_scores(per_prompt: list[dict[str, torch.Tensor]]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Average per-prompt head statistics ``{stat: [L, H]}`` over prompts, ignoring NaN.

    A statistic can be undefined on a prompt (e.g. duplicate-token without repeated tokens);
    such prompts are left out of that statistic's mean. Returns (means, counts of prompts used).
    """
    if not per_prompt:
        return {}, {}
    means, counts = {}, {}
    for stat in per_prompt[0]:
        x = torch.stack([d[stat].double().cpu() for d in per_prompt])      # [P, L, H]
        ok = ~torch.isnan(x)
        n = ok.sum(0)
        total = torch.where(ok, x, torch.zeros_like(x)).sum(0)
        means[stat] = torch.where(n > 0, total / n.clamp(min=1), torch.full_like(total, math.nan))
        counts[stat] = n
    return means, counts


def scores_frame(values: torch.Tensor, stat: str = "value") -> pd.DataFrame:
    """A [L, H] statistic as rows (head ``L{l}H{h}``, layer, head_index, value)."""
    v = torch.as_tensor(values).double().cpu()
    L, H = v.shape
    return pd.DataFrame({
        "head": [head_name(l, h) for l in range(L) for h in range(H)],
        "layer": np.repeat(np.arange(L), H),
        "head_index": np.tile(np.arange(H), L),
        stat: v.reshape(-1).numpy(),
    })


def find_token(tokens: list[str], word: str, before: int | None = None) -> int | None:
    """Position of the token that starts the last occurrence of ``word`` as a whole word (case-insensitive),
    optionally only at positions < ``before``. A word split over several tokens (' anim' 'al') is found
    at its first token."""
    word = word.strip().lower()
    hits = []
    for i, t in enumerate(tokens):
        if before is not None and i >= before:
            break
        starts_word = i == 0 or t[:1].isspace() or not tokens[i - 1][-1:].isalnum()
        if not starts_word or not t.strip():
            continue
        text = "".join(tokens[i : i + len(word) + 1]).strip().lower()
        if text.startswith(word) and not text[len(word) : len(word) + 1].isalnum():
            hits.append(i)
    return hits[-1] if hits else None


SIMILARITY_BUDGET = 1e8     # N²·rows·keys element operations allowed for one head-similarity matrix


@dataclass
class Similarity:
    """Which heads attend alike: JS distances, a similarity order and each head's nearest neighbour."""

    heads: list[tuple[int, int]]
    names: list[str]
    distance: np.ndarray           # [N, N] JS distance (0 = identical rows, 1 = disjoint)
    order: list[int]               # similar heads next to each other
    rows: list[int]                # the query rows averaged over
    n_rows_total: int              # T − 1

    @property
    def similarity(self) -> np.ndarray:
        """1 − JS distance: 1 = the two heads attend identically (the colour convention of the pages)."""
        return 1.0 - self.distance

    def neighbours(self) -> pd.DataFrame:
        """In similarity order: each head, its nearest other head and the distance to it."""
        N = len(self.heads)
        D = self.distance + np.diag(np.full(N, np.inf))
        nearest = D.argmin(1) if N > 1 else np.zeros(N, dtype=int)
        return pd.DataFrame({"position": range(N), "head": [self.names[i] for i in self.order],
                             "nearest head": [self.names[nearest[i]] for i in self.order],
                             "distance to it": [float(D[i, nearest[i]]) if N > 1 else math.nan for i in self.order]})

    def long_frame(self) -> pd.DataFrame:
        N = len(self.names)
        return pd.DataFrame({"head A": np.repeat(self.names, N), "head B": np.tile(self.names, N),
                             "js_distance": self.distance.reshape(-1)})


def head_similarity(pattern_of, heads: list[tuple[int, int]], T: int, *, budget: float = SIMILARITY_BUDGET,
                    progress=None) -> Similarity:
    """JS distance between every pair of ``heads`` on one prompt of ``T`` tokens.

    ``pattern_of(layer)`` gives that layer's pattern [H, T, T] (e.g. from a cached trace); only the
    sampled query rows of each head are kept, so the cost stays within ``budget``.
    """
    if T < 2:
        raise ValueError("head similarity needs at least two tokens")
    N = len(heads)
    rows = sample_rows(T, max(4, int(budget / (max(N, 1) ** 2 * T))))
    keys = int(rows.max()) + 1                   # causal: later keys are 0 in every sampled row
    stack = []
    for l, h in heads:
        p = pattern_of(l)
        stack.append(p[h][rows.to(p.device), :keys].detach().cpu())
    dist = distance_matrix(torch.stack(stack), torch.arange(len(rows)), progress=progress).numpy()
    return Similarity(heads=list(heads), names=[head_name(l, h) for l, h in heads], distance=dist,
                      order=similarity_order(dist), rows=[int(r) for r in rows], n_rows_total=T - 1)
