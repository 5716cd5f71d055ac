"""A score split (:mod:`attnkit.score_terms`) on a page: its cost estimated from the model's shape and T
(:func:`attnkit.score_terms.cost`), run at once and cached when quick, else as a job with progress and Stop —
Heatmaps' "why" panel and Step by step's layer-0 split."""
from __future__ import annotations

from attnkit import score_terms as terms_lib
from attnkit.app.caches import cached_result
from attnkit.app.context import Context
from attnkit.app.jobs import job_result

__all__ = ["JOB_SECONDS", "FLOPS", "OVERHEAD_S", "seconds", "compute"]

#: Work estimated above this many seconds runs as a job (progress and Stop).
JOB_SECONDS = 1.0
#: The estimate: seconds = OVERHEAD_S + cost / FLOPS per split, fitted on attnkit-tiny's rows at T = 100 … 780
#: on the shared 2-core machine under a load average of ~16 (0.52 s … 3.19 s measured).
FLOPS, OVERHEAD_S = 5e9, 0.2


def seconds(cfg, T: int, layer: int, n: int = 1, row: bool = True) -> float:
    """Estimated seconds of ``n`` splits of a head in ``layer`` at T tokens (whole rows, or single keys)."""
    return n * (OVERHEAD_S + terms_lib.cost(cfg, T, layer, row) / FLOPS)


def compute(ctx: Context, slot: str, key: tuple, label: str, fn, estimate: float):
    """``fn(progress)``: at once (cached for every session) when quick, else as a job; None while it runs."""
    full = (ctx.model_name, ctx.device, slot, *key)
    if estimate <= JOB_SECONDS:
        return cached_result(full, lambda: fn(None))
    return job_result(slot, full, label, fn)
