"""What each long Circuits computation costs, before it starts: seconds from the model's shape and a rate
measured on this machine (one forward pass of the model itself, :func:`measured_rate`).

Every computation is counted in floating-point operations (multiply-adds × 2) of the passes it runs:

    forward(T)        2·P·T + 4·L·T²·(H·e) (+ 2·d·V·T for the logits of a full forward)
                      P: parameters of the blocks, L layers, H heads of width e, d model width, V vocabulary
    backward          2 × the forward
    patched run       a forward on two-token unembedding weights (the logit difference only)
    circuit run       a patched run + 2·S·R·T·d for the edge corrections (S senders, R receivers)
    edge scores       per gradient point 20·R·T·d (each receiver's norm backward), then 2·S·R·T·d, in float64

so an estimate is ``flops / rate``. The estimates are for planning (the page says them before a job starts);
the bench's per-shape rows (``python -m attnkit bench --shapes``) hold the measured times.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..model import run
from ..weights import Weights
from .attribution_patching import EXACT_TOP, exact_edge_count
from .discover import STEPS, _grid
from .path import parse_node, precedes, receiver_names, sender_names

__all__ = ["Estimate", "measured_rate", "forward_flops", "path_map_cost", "discovery_cost", "exact_cost",
           "composition_cost", "DEFAULT_RATE"]

#: Floating-point operations per second when nothing was measured (a quiet 2-core laptop, float32).
DEFAULT_RATE = 2e10
#: float64 linear algebra (composition scores) runs at about half the float32 rate on CPUs.
FLOAT64_SLOWER = 2.0
_RATES: dict = {}


@dataclass(frozen=True)
class Estimate:
    """A computation's cost: what, its passes (forward-pass equivalents), floating-point operations, seconds."""

    what: str
    passes: float
    flops: float
    seconds: float

    def text(self) -> str:
        s = self.seconds
        when = f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"
        return f"{self.what}: about {when} ({self.passes:,.0f} passes of the model)"


def _block_params(cfg) -> int:
    e = cfg.d_head
    attn = cfg.d_model * cfg.n_heads * e * 2 + cfg.d_model * cfg.kv_heads * e * 2        # Q, O; K, V
    mlp = cfg.d_model * cfg.d_mlp * (3 if cfg.mlp == "gated" else 2)
    return cfg.n_layers * (attn + mlp)


def forward_flops(cfg, T: int, logits: bool = True) -> float:
    """Floating-point operations of one forward pass on T tokens (see the module docstring)."""
    f = 2.0 * _block_params(cfg) * T + 4.0 * cfg.n_layers * T * T * cfg.n_heads * cfg.d_head
    return f + (2.0 * cfg.d_model * cfg.d_vocab * T if logits else 0.0)


def measured_rate(weights: Weights, T: int = 32) -> float:
    """Operations per second of this machine on ``weights`` (the fastest of three timed forward passes after a
    warm-up: a busy machine's pauses do not make every estimate long; cached per model shape and device)."""
    cfg = weights.config
    key = (cfg, str(weights.device))
    if key not in _RATES:
        ids = list(range(1, min(T, cfg.n_ctx) + 1))
        run(weights, ids)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            run(weights, ids)
            best = min(best, time.perf_counter() - t0)
        _RATES[key] = max(forward_flops(cfg, len(ids)) / max(best, 1e-6), 1e6)
    return _RATES[key]


def _estimate(what: str, cfg, T: int, flops: float, rate: float | None) -> Estimate:
    return Estimate(what, flops / forward_flops(cfg, T), flops, flops / (rate or DEFAULT_RATE))


def _graph(cfg, mlps: bool) -> tuple[int, int, int]:
    S = [parse_node(n, cfg) for n in sender_names(cfg, mlps)]
    R = [parse_node(n, cfg, "receiver") for n in receiver_names(cfg, mlps)]
    return len(S), len(R), sum(precedes(s, r, cfg) for s in S for r in R)


def path_map_cost(cfg, T: int, n_senders: int, rate: float | None = None) -> Estimate:
    """Path patching of ``n_senders`` senders into one receiver: the two cached runs and one patched run each."""
    flops = 2 * forward_flops(cfg, T) + n_senders * forward_flops(cfg, T, logits=False)
    return _estimate(f"path patching of {n_senders:,} senders", cfg, T, flops, rate)


def discovery_cost(cfg, T: int, n_pairs: int = 1, steps: int = STEPS, mlps: bool = True, points: int = 24,
                   refine: int = 12, rate: float | None = None) -> Estimate:
    """Circuit discovery: per pair its two cached runs, ``steps`` forward + backward passes for the edge
    scores, then one circuit run per point of the faithfulness curve (and the refinement)."""
    S, R, n_edges = _graph(cfg, mlps)
    fwd, patched = forward_flops(cfg, T), forward_flops(cfg, T, logits=False)
    circuit_run = patched + 2.0 * S * R * T * cfg.d_model
    scoring = FLOAT64_SLOWER * (steps * R * 20.0 * T * cfg.d_model + 2.0 * S * R * T * cfg.d_model)   # float64
    per_pair = 2 * fwd + steps * 3 * fwd + scoring + (len(_grid(n_edges, points)) + refine) * circuit_run
    return _estimate(f"circuit discovery on {n_pairs:,} pair(s), {n_edges:,} edges", cfg, T, n_pairs * per_pair, rate)


def exact_cost(cfg, T: int, pos: int | None = None, mlps: bool = True, top: int | None = EXACT_TOP,
               rate: float | None = None) -> Estimate:
    """Attribution patching beside exact patching (:func:`~.attribution_patching.versus_exact`): one patched
    run per head × position up to the read position, one per compared edge (``top``; None: every edge)."""
    pos = T - 1 if pos is None else pos
    edges = exact_edge_count(cfg, mlps, top)
    runs = cfg.n_layers * cfg.n_heads * (pos + 1) + edges
    flops = 4 * forward_flops(cfg, T) + runs * forward_flops(cfg, T, logits=False)
    which = "every edge" if top is None else f"the top {edges:,} edges"
    return _estimate(f"exact patching of every head × position and {which}", cfg, T, flops, rate)


def composition_cost(cfg, samples: int = 200, rate: float | None = None) -> Estimate:
    """Composition scores of every pair of heads in different layers (three modes) and the random baseline:
    about 8·d·e² float64 operations a pair (the factored Frobenius norms)."""
    L, H, d, e = cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head
    pairs = 3 * H * H * L * (L - 1) / 2 + samples
    flops = pairs * 8.0 * d * e * e * FLOAT64_SLOWER
    return _estimate(f"composition scores of {int(pairs - samples):,} head pairs", cfg, 1, flops, rate)
