"""Bench row for the training analysis (:mod:`attnkit.training`): a whole series computed from nothing (a fresh,
empty cache folder; every checkpoint loaded and measured) and then read back from the disk cache (the per-process
file digests forgotten first, so the files are hashed again as a new process would)."""
from __future__ import annotations

import os
import tempfile
import time

from ... import diskcache, training
from ... import series as series_mod

#: (label, seconds allowed) for a quiet 2-core machine.
TARGETS = {"first_s": ("whole series, first time (nothing cached)", 60.0),
           "cached_s": ("whole series again, from the disk cache", 2.0)}


def series_bench(spec: str = series_mod.SHIPPED_SERIES_NAME, device: str = "cpu") -> dict:
    """{"series", "checkpoints", "first_s", "cached_s", "first_cpu_s", "cached_cpu_s", "rows": [{check, label,
    seconds, cpu_seconds, target, ok}]} (wall-clock seconds against the targets; the process's CPU seconds beside
    them, the honest number on a shared, loaded machine)."""
    s = series_mod.resolve(spec)
    old = os.environ.get("ATTNKIT_CACHE")
    with tempfile.TemporaryDirectory(prefix="attnkit-series-bench-") as tmp:
        os.environ["ATTNKIT_CACHE"] = tmp
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            first = training.analyse(s, device=device)
            t1, c1 = time.perf_counter(), time.process_time()
            diskcache.forget_digests()
            again = training.analyse(s, device=device)
            t2, c2 = time.perf_counter(), time.process_time()
        finally:
            if old is None:
                os.environ.pop("ATTNKIT_CACHE", None)
            else:
                os.environ["ATTNKIT_CACHE"] = old
    assert all(c.cached for c in again.checkpoints) and not any(c.cached for c in first.checkpoints)
    out = {"series": spec, "checkpoints": len(s), "first_s": t1 - t0, "cached_s": t2 - t1, "first_cpu_s": c1 - c0,
           "cached_cpu_s": c2 - c1, "phase_change_step": first.phase_change_step}
    out["rows"] = [{"check": k, "label": label, "seconds": round(out[k], 3),
                    "cpu_seconds": round(out[k.replace("_s", "_cpu_s")], 3), "target": target,
                    "ok": out[k] <= target} for k, (label, target) in TARGETS.items()]
    return out
