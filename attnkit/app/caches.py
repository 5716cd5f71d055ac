"""Caches shared by every session: models (``st.cache_resource``, at most 3), runs (:class:`TraceCache`, an LRU
bounded by the bytes of its tensors, ``ATTNKIT_TRACE_CACHE_MB``), results of work that reports progress
(:func:`cached_result`), corpus results. Traces and results are read-only."""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

import streamlit as st

from ..corpus import CorpusError, load_result
from ..loading import Loaded, default_model, load
from ..model import Trace, run
from .context import Context
from .escaping import show_error

TRACE_CACHE_MB = float(os.environ.get("ATTNKIT_TRACE_CACHE_MB", "2048"))


@st.cache_resource(show_spinner=False, ttl=600)
def cached_default_model() -> tuple[str, str | None]:
    return default_model(timeout=3.0)


@st.cache_resource(show_spinner=False, max_entries=3)
def cached_model(name: str, device: str) -> Loaded:
    return load(name, device)


class TraceCache:
    """A thread-safe LRU of Traces (or of other values, measured by ``sizeof``) bounded by their bytes."""

    def __init__(self, budget_mb: float, sizeof=None):
        self.budget = budget_mb * 2**20
        self.sizeof = sizeof or self.nbytes
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    @staticmethod
    def nbytes(tr: Trace) -> int:
        return tr.logits.nbytes + sum(t.nbytes for t in tr.captures.values())

    def get(self, key, make):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
        value = make()                       # outside the lock: other sessions keep going
        size = self.sizeof(value)
        with self.lock:
            if key not in self.items:
                self.items[key] = (value, size)
                self.bytes += size
            while self.bytes > self.budget and len(self.items) > 1:
                _, (_, freed) = self.items.popitem(last=False)
                self.bytes -= freed
        return value


_TRACES = TraceCache(TRACE_CACHE_MB)


def trace(ctx: Context, capture=("pattern",), ids: list[int] | None = None, layers=None) -> Trace:
    """The (cached) attnkit run of the current prompt, or of ``ids``. Treat it as read-only."""
    ids = tuple(int(i) for i in (ctx.ids if ids is None else ids))
    capture = tuple(sorted(set(capture)))
    layers = None if layers is None else tuple(layers)
    model = ctx.model
    return _TRACES.get((ctx.model_name, ctx.device, ids, capture, layers),
                       lambda: run(model.weights, list(ids), capture=capture, layers=layers))


#: Results of work that reports its progress to the page (tuples of arrays). Not ``st.cache_data``: it records
#: the progress bar's updates made inside the cached function and replays them on a hit, into a bar of another
#: run that the replay cannot find (CacheReplayClosureError in every later session).
_RESULTS = TraceCache(TRACE_CACHE_MB / 8, sizeof=lambda v: sum(getattr(a, "nbytes", 0) for a in v))


def cached_result(key: tuple, make):
    """``make()`` once per ``key`` for every session (an LRU bounded by the arrays' bytes); ``make`` may update
    the page's progress bar. Treat the result as read-only."""
    return _RESULTS.get(key, make)


def traces_for_all(ctx: Context, fn, label: str = "Running the prompts"):
    """Apply ``fn(ids) -> value`` to every prompt of the set, with a progress bar; returns the values.

    One-token prompts are skipped (nothing to attend over) and counted in the message.
    """
    out, skipped = [], 0
    bar = st.progress(0.0, text=label)
    for i, text in enumerate(ctx.prompts):
        ids, _ = ctx.encode(text)
        if len(ids) < 2:
            skipped += 1
        else:
            out.append(fn(ids))
        bar.progress((i + 1) / len(ctx.prompts), text=f"{label}: {i + 1}/{len(ctx.prompts)}")
    bar.empty()
    if skipped:
        st.caption(f"{skipped:,} prompt(s) with fewer than 2 tokens were skipped.")
    return out


# ----------------------------------------------------------------------------- corpus results

@st.cache_data(show_spinner="Reading the corpus result …", max_entries=4)
def _corpus_result(path: str, stamp: tuple):
    return load_result(path)


def corpus_result(key: str):
    """A text box for a corpus result folder (``python -m attnkit corpus --out DIR``); returns the
    :class:`attnkit.corpus.CorpusResult`, or None (empty box, or a one-line message why not)."""
    folder = st.text_input("Corpus result folder (from python -m attnkit corpus --out DIR)", key=key,
                           placeholder="/path/to/corpus-result").strip()
    if not folder:
        return None
    p = os.path.expanduser(folder)
    if not os.path.isdir(p):
        show_error(f"not a folder: {folder}")
        return None
    stamp = tuple(os.path.getmtime(os.path.join(p, f)) for f in ("summary.json", "_done") if os.path.exists(os.path.join(p, f)))
    try:
        return _corpus_result(p, stamp)
    except (CorpusError, OSError, ValueError, KeyError) as e:
        show_error(f"could not read the corpus result {folder}: {e}")
        return None
