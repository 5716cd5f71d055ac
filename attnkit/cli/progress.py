"""Progress of a long command on stderr: ``done/total``, elapsed and an estimate of what is left.

Quiet for the first ``after`` seconds (a short run prints nothing), then a line at most every ``every``
seconds, and a last one when the work is done."""
from __future__ import annotations

import sys
import time


def _dur(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


class Ticker:
    """``progress(done, total)`` for the library's long loops (patching, sweeps)."""

    def __init__(self, prog: str, what: str, stream=None, after: float = 2.0, every: float = 5.0):
        self.prog, self.what = prog, what
        self.stream = stream if stream is not None else sys.stderr
        self.after, self.every = after, every
        self.t0 = time.perf_counter()
        self.last = None

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        el = now - self.t0
        final = done >= total
        if el < self.after or not (final or self.last is None or now - self.last >= self.every):
            return
        self.last = now
        left = "" if final or done <= 0 else f" · about {_dur(el * (total - done) / done)} left"
        print(f"{self.prog}: {done:,}/{total:,} {self.what} · {_dur(el)}{left}", file=self.stream, flush=True)
