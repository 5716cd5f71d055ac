"""Checks 9 and 10 of ``python -m attnkit bench``: what the seeds' V = X claim and the circuit tools cost.

    9   the V = X ablation with its convex-hull check (:func:`attnkit.ablations.measure`, the Ablations
        page's default) vs the same ablation with the hull check off (``hull_iters=0``), at the longest T
        (1,024 on GPT-2 small's shape); interleaved medians                          target ≤ 5
    10  attribution patching of every head at every position (:func:`attnkit.circuits.head_attribution`
        without the exact runs) on a 16-token pair vs one forward with gradients + one backward
                                                                                        target ≤ 3
        with its Spearman correlation against exact patching of every head × position, and automatic
        circuit discovery (:func:`attnkit.circuits.discover`) on the same pair, in seconds (no target:
        reported beside one forward + backward)
    11  the cache-eviction lab's cost per (k, w) cell (:func:`attnkit.eviction.token_losses` with the cache keeping
        k sinks + a window of w, original positions) ÷ the full cache's, k ∈ {0, 1, 4}, w ∈ {32, 64, 128, 256}
        (quick: w < T), at the longest T; one row per cell                          target ≤ 1.5
"""
from __future__ import annotations

import torch

from ...ablations.base import Spec
from ...ablations.measure import measure
from ...attention import Keep
from ...circuits.timing import circuit_bench
from ...eviction import token_losses
from .common import interleaved, random_ids, ratio_row, side

#: Tokens of the circuit pair (check 10), as issue 28 states it.
CIRCUIT_T = 16


def hull_section(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 9: V = X with the hull check ÷ without it, on random tokens of length T."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=9)[0].tolist()
    spec = Spec("v=x")
    last = {}

    def with_hull():
        last["result"] = measure(w, [ids], spec)

    fns = {"V = X with the hull check": with_hull,
           "V = X without it": lambda: measure(w, [ids], spec, hull_iters=0)}
    with torch.inference_mode():
        t = interleaved(fns, max(1, min(repeats, 3)), warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    row = ratio_row("hull_vs_no_hull", dev, T, s["V = X with the hull check"], s["V = X without it"])
    notes = last["result"].notes if "result" in last else []
    return [row], {"T": T, "with_hull_s": s["V = X with the hull check"]["median_s"],
                   "without_hull_s": s["V = X without it"]["median_s"],
                   "hull_note": next((n for n in notes if n.startswith("Hull")), None)}


def circuits_section(loaded, repeats: int, T: int = CIRCUIT_T) -> tuple[list, dict]:
    """Check 10: attribution patching ÷ one forward + backward; Spearman vs exact; discovery's seconds."""
    w, dev = loaded.weights, loaded.device
    T = min(T, w.config.n_ctx)
    cb = circuit_bench(w, T=T, repeat=max(1, repeats), discovery=True, exact=True)
    fb = side("one forward + one backward", [cb["forward_backward_s"]])
    rows = [ratio_row("attribution_vs_fwd_bwd", dev, T, side("attribution patching, all heads × positions",
                                                             [cb["attribution_s"]]), fb),
            ratio_row("discovery_vs_fwd_bwd", dev, T, side("circuit discovery", [cb["discovery_s"]]), fb,
                      label="circuit discovery (edge attribution + faithfulness runs) / one forward + backward "
                            "(context)")]
    return rows, {k: cb[k] for k in ("T", "forward_backward_s", "attribution_s", "attribution_ratio", "spearman",
                                     "exact_s", "discovery_s", "discovery_edges", "discovery_faithfulness")}


#: The eviction grid of check 11 (issue 46's table).
EVICTION_SINKS, EVICTION_WINDOWS = (0, 1, 4), (32, 64, 128, 256)


def eviction_section(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 11: each (k, w) cell's loss ÷ the full cache's, interleaved, on random tokens of length T."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=11)[0].tolist()
    windows = [x for x in EVICTION_WINDOWS if x < T] or [max(1, T // 4)]
    cells = [(k, x) for k in EVICTION_SINKS for x in windows]
    fns = {"full cache": lambda: token_losses(w, ids)}
    fns.update({f"k={k}, w={x}": (lambda k=k, x=x: token_losses(w, ids, Keep(k, x))) for k, x in cells})
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    full = s["full cache"]
    rows = [ratio_row("eviction_vs_full", dev, T, s[f"k={k}, w={x}"], full,
                      label=f"eviction lab cell k={k}, w={x} / full cache") for k, x in cells]
    return rows, {"T": T, "full_s": full["median_s"], "cells": {f"k={k}, w={x}": r["ratio"]
                                                                 for (k, x), r in zip(cells, rows)}}
