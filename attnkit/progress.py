"""Progress of long analyses: a ``progress(done, total)`` callback, and :class:`Steps` to count toward it.

The analyses call the callback as their work advances (last call: done == total); front ends draw it
(the dashboard's jobs raise from it once Stop is pressed, so the work ends at its next call; the CLIs
print it). This module imports nothing of attnkit."""
from __future__ import annotations

from typing import Callable

__all__ = ["Progress", "Steps"]

#: ``progress(done, total)``, called as the work advances (last call: done == total).
Progress = Callable[[int, int], None]


class Steps:
    """Progress over a known number of steps. ``at(n)``: n done; ``add(k)``: k more; ``after(x)``: one more,
    returning x (for ``y = steps.after(work())``); ``part(offset)``: a callback for a piece of the work whose
    own ``done`` counts from ``offset`` here; ``hooks()``: model hooks that report the current count after
    every block of a forward (so a raising callback stops mid-forward). ``start``: report 0 at once."""

    def __init__(self, progress: Progress | None, total: int, start: bool = False):
        self.progress, self.total, self.done = progress, total, 0
        if progress and start:
            progress(0, total)

    def at(self, done: int) -> None:
        self.done = min(done, self.total)
        if self.progress:
            self.progress(self.done, self.total)

    def add(self, n: int = 1) -> None:
        self.at(self.done + n)

    def after(self, x):
        self.add()
        return x

    def part(self, offset: int) -> Progress | None:
        return None if self.progress is None else (lambda done, _total: self.at(offset + done))

    def hooks(self) -> list:
        if not self.progress:
            return []
        return [("resid_post", lambda x, layer: self.progress(self.done, self.total))]
