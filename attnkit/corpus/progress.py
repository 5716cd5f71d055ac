"""A progress callback for :func:`attnkit.corpus.run_corpus` that draws one line on a stream."""
from __future__ import annotations

import math
import sys
import time


class Progress:
    """A one-line progress bar on ``stream``: documents done, documents per second, time left.

    Called as ``progress(done, total, info)`` after each finished shard; ``info`` has ``resumed``
    (documents found finished), ``errors`` and ``shard``. On a terminal the line is redrawn; in a log
    a line is written at most every ``every`` seconds (and at the end).
    """

    def __init__(self, stream=None, every: float = 10.0, width: int = 24):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every, self.width = every, width
        self.last = -math.inf

    def __call__(self, done: int, total: int, info: dict):
        now = time.perf_counter()
        started = info.get("started", now)
        rate = (done - info.get("resumed", 0)) / (now - started) if now > started else 0.0
        left = (total - done) / rate if rate > 0 else math.nan
        final = done >= total
        if not (self.tty or final or now - self.last >= self.every):
            return
        self.last = now
        text = self.line(done, total, rate, left, info)
        self.stream.write("\r" + text + ("\n" if final else "") if self.tty else text + "\n")
        self.stream.flush()

    def line(self, done, total, rate, left, info) -> str:
        fill = int(self.width * done / total) if total else self.width
        eta = "—" if not math.isfinite(left) else time.strftime("%H:%M:%S", time.gmtime(left))
        extra = f" ({info['resumed']} resumed)" if info.get("resumed") else ""
        errors = f" · {info['errors']} error(s)" if info.get("errors") else ""
        return (f"corpus [{'#' * fill}{'.' * (self.width - fill)}] {done}/{total} docs{extra} · "
                f"{rate:.2f} docs/s · {eta} left{errors}")
