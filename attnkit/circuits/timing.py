"""Bench-ready measurements of the circuit tools (for ``python -m attnkit bench``; nothing here prints).

:func:`circuit_bench` times, on a random token pair of ``T`` tokens:

    forward_backward_s      one forward pass with gradients + one backward pass (the unit)
    attribution_s           attribution patching of every head at every position (:func:`head_attribution`
                            without the exact runs: a plain forward on the source prompt, a forward with
                            gradients and a backward on the receiving one)
    attribution_ratio       attribution_s / forward_backward_s
    spearman                rank correlation of that estimate with exact patching of every head×position
    exact_s                 the exact patching it is compared with
    discovery_s             :func:`discover` on the same pair (edge attribution + the faithfulness curve runs)
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..patching import Pair, patch
from ..weights import Weights
from .attribution_patching import gradients, head_attribution, spearman
from .discover import discover
from .path import cache_runs

__all__ = ["random_pair", "circuit_bench"]


def random_pair(weights: Weights, T: int = 16, seed: int = 0) -> Pair:
    """Random tokens, the first half repeated (an induction-shaped prompt, T ≥ 4). The answer is the token
    that followed the last token's earlier occurrence; the corrupted prompt has that earlier token
    replaced by the distractor."""
    cfg = weights.config
    if T < 4:
        raise ValueError("a bench pair needs at least 4 tokens")
    g = torch.Generator().manual_seed(seed)
    half = (T + 1) // 2
    first = torch.randperm(cfg.d_vocab, generator=g)[: half + 1].tolist()
    clean = (first[:half] * 2)[:T]
    src = T - half                                   # where the answer followed the last token before
    answer, distractor = clean[src], first[half]     # the distractor is not in the prompt
    corrupt = list(clean)
    corrupt[src] = distractor
    return Pair(clean, corrupt, answer, distractor, T - 1)


def _best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def circuit_bench(weights: Weights, T: int = 16, seed: int = 0, repeat: int = 3, discovery: bool = True,
                  exact: bool = True) -> dict:
    """Timings and the Spearman correlation described in the module docstring."""
    pair = random_pair(weights, T, seed)
    runs = cache_runs(weights, pair)

    def fb():
        gradients(runs.w2, pair.corrupt, pair.pos, ("z",))

    fb()
    out = {"T": T, "n_layers": weights.config.n_layers, "n_heads": weights.config.n_heads}
    out["forward_backward_s"] = _best_of(fb, repeat)
    out["attribution_s"] = _best_of(lambda: head_attribution(weights, pair, exact=False), repeat)
    out["attribution_ratio"] = out["attribution_s"] / out["forward_backward_s"]
    if exact:
        t0 = time.perf_counter()
        ex = patch(weights, pair, "z", per_position=True).raw
        out["exact_s"] = time.perf_counter() - t0
        est = head_attribution(weights, pair, exact=False, runs=runs).estimate
        keep = np.zeros_like(ex, dtype=bool)
        keep[..., : pair.pos + 1] = True
        out["spearman"] = spearman(est[keep], ex[keep])
    if discovery:
        t0 = time.perf_counter()
        c = discover(weights, pair)
        out["discovery_s"] = time.perf_counter() - t0
        out["discovery_edges"] = c.size
        out["discovery_faithfulness"] = c.share
    out["clean_ld"], out["corrupt_ld"] = runs.clean_ld, runs.corrupt_ld
    return out
