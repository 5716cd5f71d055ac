"""Long work as a job: a background thread per job, progress (done/total, elapsed, an estimate), the last
result kept on the page and labelled stale while a new one computes, and a Stop that stops it.

The work is a library function given a ``progress(done, total)`` callback (the analyses layer knows nothing
of Streamlit or of jobs). The job's callback records the progress and raises :class:`Stopped` once Stop was
pressed, so the computation ends at its next progress call (the library calls it at least once a layer or
once a run). :class:`Stopped` is a BaseException: no ``except Exception`` in the library swallows it.

Sharing the machine: every job is a thread of the server process; at most :data:`JOB_SLOTS` jobs compute at
once (``ATTNKIT_JOBS``, default 2), later ones wait in order of arrival and say so; one job per page slot
and session (a new one in the same slot stops the old one). Torch ops and numpy release the GIL, so the
server keeps answering other sessions while jobs run.

The job runs in a copy of the context it was created in (:func:`contextvars.copy_context`): the session's
language (attnkit.i18n keeps it in a ContextVar) and anything else the session's context carries travel with
it, so a message rendered in the worker thread — a failed job's one-line error included — comes out in the
session's language.

Pages call :func:`job`; :class:`Job` is usable without Streamlit (tests)."""
from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import streamlit as st

from .caches import JOB_RESULTS_MB, TraceCache, sizeof
from ..i18n import t
from .escaping import plain

__all__ = ["JOB_SLOTS", "POLL_S", "WAIT_S", "Stopped", "Job", "Shown", "job", "job_result", "one_line", "duration"]

#: Jobs computing at once in this server (the rest wait their turn).
JOB_SLOTS = max(1, int(os.environ.get("ATTNKIT_JOBS", "2")))
#: How often a page polls a running job (seconds).
POLL_S = 0.5
#: How long a page run waits for a job before drawing its progress (quick work shows no bar at all). The
#: tests set ``ATTNKIT_JOB_WAIT`` high: AppTest cannot poll, so its page runs wait for their jobs.
WAIT_S = 0.5


def _wait_s() -> float:
    return float(os.environ.get("ATTNKIT_JOB_WAIT", WAIT_S))
_SLOTS = threading.BoundedSemaphore(JOB_SLOTS)
_QUEUE: list = []                  # jobs waiting for a slot, oldest first
_QUEUE_LOCK = threading.Lock()


class Stopped(BaseException):
    """Raised by a job's progress callback once Stop was pressed."""


def one_line(e: BaseException) -> str:
    """An exception as one line: 'Kind: message' (first line of the message, at most 300 characters)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{e.__class__.__name__}: {msg[:300]}" if msg else e.__class__.__name__


def duration(s: float) -> str:
    """'8 s', '3 min 05 s', '1 h 02 min'."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class Job:
    """``fn(progress)`` in a background thread. ``state``: waiting, running, done, failed or stopped."""

    def __init__(self, key, label: str, fn: Callable[[Callable[[int, int], None]], Any]):
        self.key, self.label, self.fn = key, label, fn
        self.done, self.total = 0, 0
        self.state, self.result, self.error = "waiting", None, None
        self.created = time.monotonic()
        self.started = self.finished = None
        self._stop = threading.Event()
        self._context = contextvars.copy_context()      # the creating session's language and the rest of its context
        self._thread = threading.Thread(target=self._context.run, args=(self._run,), name=f"attnkit-job-{label}",
                                        daemon=True)

    def start(self) -> "Job":
        with _QUEUE_LOCK:
            _QUEUE.append(self)
        self._thread.start()
        return self

    # -- called from the worker thread
    def progress(self, done: int, total: int) -> None:
        if self._stop.is_set():
            raise Stopped()
        self.done, self.total = int(done), int(total)

    def _run(self) -> None:
        try:
            while not _SLOTS.acquire(timeout=0.2):
                if self._stop.is_set():
                    self._finish("stopped")
                    return
            try:
                with _QUEUE_LOCK:
                    _QUEUE.remove(self)
                if self._stop.is_set():
                    raise Stopped()
                self.state, self.started = "running", time.monotonic()
                self.result = self.fn(self.progress)
                self._finish("done")
            finally:
                _SLOTS.release()
        except Stopped:
            self._finish("stopped")
        except Exception as e:             # the page shows one line; the traceback goes to the server log
            logging.getLogger("attnkit").exception("job %s failed", self.label)
            self.error = one_line(e)
            self._finish("failed")
        finally:
            with _QUEUE_LOCK:
                if self in _QUEUE:
                    _QUEUE.remove(self)

    def _finish(self, state: str) -> None:
        self.finished = time.monotonic()
        self.state = state

    # -- called from the page
    def stop(self, wait: float = 0.0) -> bool:
        """Ask the job to stop; wait up to ``wait`` seconds for it. True when it has ended."""
        self._stop.set()
        self._thread.join(wait)
        return not self.alive

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self.state in ("waiting", "running")

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    @property
    def remaining(self) -> float | None:
        """Seconds left by the rate so far (None before the first step)."""
        if not self.done or not self.total:
            return None
        return self.elapsed * (self.total - self.done) / self.done

    @property
    def ahead(self) -> int:
        """Jobs queued before this one."""
        with _QUEUE_LOCK:
            return _QUEUE.index(self) if self in _QUEUE else 0

    def status(self) -> str:
        """One line: what the job is doing, done/total, elapsed, the estimate."""
        if self.state == "waiting":
            return t("{label}: waiting for a free slot ({n} in line, {slots} run at once)", label=self.label,
                     n=self.ahead + 1, slots=JOB_SLOTS)
        parts = [self.label]
        if self.total:
            parts.append(f"{self.done}/{self.total}")
        parts.append(t("{time} elapsed", time=duration(self.elapsed)))
        left = self.remaining
        parts.append(t("estimating the time left") if left is None else t("about {time} left", time=duration(left)))
        return " · ".join(parts)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


# ----------------------------------------------------------------------------- results shared by sessions

#: Finished results of every session, keyed by (slot, key): one LRU bounded by their bytes
#: (``ATTNKIT_JOB_RESULTS_MB``, part of attnkit/app/caches.py's BUDGET). A session keeps only the key of its
#: slot's last result, so many sessions cannot hold more than the budget between them; a result larger
#: than the whole budget is kept alone. An evicted result is computed again when its page is next drawn.
_SHARED = TraceCache(JOB_RESULTS_MB, sizeof=sizeof)


def remember(results: dict, slot: str, key, result, elapsed: float) -> tuple:
    """Keep a finished result for ``slot`` of one session (``results``: the session's dict)."""
    held = (key, result, elapsed)
    results[slot] = key
    _SHARED.put((slot, key), held, oversize=True)
    return held


def recall(results: dict, slot: str, key=None):
    """(key, result, elapsed) of the session's last result in ``slot`` (or of ``key``'s, shared by every
    session), or None when there is none or it was evicted."""
    if key is not None:
        got = _SHARED.peek((slot, key))
        if got is not None:
            results[slot] = key
            return got
    mine = results.get(slot)
    return None if mine is None else _SHARED.peek((slot, mine))


@dataclass
class Shown:
    """What a page draws for a slot: the last finished result, and whether it belongs to the current inputs."""

    result: Any
    fresh: bool
    elapsed: float


def _store() -> tuple[dict, dict]:
    return st.session_state.setdefault("_ak_jobs", {}), st.session_state.setdefault("_ak_results", {})


def job(slot: str, key, label: str, fn, *, auto: bool = True, button: str | None = None) -> Shown | None:
    """The page side of a job in ``slot`` for the inputs ``key`` (hashable); ``fn(progress)`` computes the
    result in a background thread. ``auto``: start when there is no result for ``key`` (what a page shows
    when it opens); otherwise a button labelled ``button`` (default ``label``) starts it. While it runs, a
    progress bar (done/total, elapsed, an estimate) and a Stop button are drawn here, polled every
    :data:`POLL_S` s; a stopped or failed job says so in one line and offers to run again.

    Returns the slot's last finished result — ``fresh`` False (and labelled stale here) when it was computed
    for other inputs and a job for ``key`` has been started — or None."""
    jobs, results = _store()
    j = jobs.get(slot)
    if j is not None and j.key == key and j.alive:
        j.join(_wait_s())
    if j is not None and j.key != key and j.alive:
        j.stop()                           # the inputs changed: the old computation is of no use
    held = None
    if j is not None and j.state == "done":
        held = remember(results, slot, j.key, j.result, j.elapsed)
        del jobs[slot]
        j = None
    if held is None or held[0] != key:
        held = recall(results, slot, key) or held
    if held is not None and held[0] == key:
        return Shown(held[1], True, held[2])
    mine = j if j is not None and j.key == key else None
    if mine is None or not mine.alive:
        if mine is not None:
            _ended(mine)
        pressed, drawn = False, mine is not None or not auto
        if drawn:
            text = button or label
            pressed = st.button(plain(t("Run again: {what}", what=text) if mine is not None else text), key=f"_ak_run_{slot}")
        if pressed or (auto and mine is None):
            mine = jobs[slot] = Job(key, label, fn).start()
            mine.join(_wait_s())
            if not mine.alive and (mine.state == "done" or not drawn):
                return job(slot, key, label, fn, auto=auto, button=button)   # quick: shown at once, no progress bar
            if not mine.alive:              # a quick failure after the button (drawn above): its one line here
                _ended(mine)
    if mine is not None and mine.alive:
        _poll(slot)
    if held is None or mine is None:
        return None
    st.caption(t("Stale: the result below is the previous one, computed for other settings; the new one is computing.")
               if mine.alive else t("Stale: the result below is the previous one, computed for other settings."))
    return Shown(held[1], False, held[2])


def _ended(j: Job) -> None:
    if j.state == "failed":
        st.error(plain(t("{label} failed after {time}: {error}", label=j.label, time=duration(j.elapsed), error=j.error)),
                 icon="⚠️")
    else:
        st.info(plain(t("{label} stopped after {time} at {done}/{total}.", label=j.label, time=duration(j.elapsed),
                        done=j.done, total=j.total)), icon="⏹️")


@st.fragment(run_every=POLL_S)
def _poll(slot: str) -> None:
    """Progress and Stop for the job in ``slot``; once it has ended, the whole page reruns to show it."""
    j = st.session_state.get("_ak_jobs", {}).get(slot)
    if j is None or not j.alive:
        st.rerun(scope="app")
        return
    st.progress(j.fraction, text=plain(j.status()))  # internal text: a number; the status line is escaped
    if st.button(t("Stop"), key=f"_ak_stop_{slot}", help=t("Stop this computation (within about 2 s).")):
        j.stop(wait=2.0)
        st.rerun(scope="app")


def job_result(slot: str, key, label: str, fn, **kw):
    """:func:`job`'s result alone (the fresh one, or the stale one it labels as such), or None."""
    shown = job(slot, key, label, fn, **kw)
    return None if shown is None else shown.result
