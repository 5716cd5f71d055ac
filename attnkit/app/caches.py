"""Caches shared by every session: models (``st.cache_resource``, at most 3), runs (:class:`TraceCache`, an LRU
bounded by the bytes of its tensors, ``ATTNKIT_TRACE_CACHE_MB``), results of work that reports progress
(:func:`cached_result`, and the pages' memoised functions: :func:`budgeted`), jobs' finished results (attnkit/app/jobs.py), corpus results. Traces and results are
read-only.

The server's memory budget beside the models (:data:`BUDGET`, each part settable): traces
``ATTNKIT_TRACE_CACHE_MB`` (default 2,048), results of progress-reporting work ``ATTNKIT_RESULT_CACHE_MB``
(default an eighth of the traces'), jobs' results of every session ``ATTNKIT_JOB_RESULTS_MB`` (default an
eighth of the traces'). Each is an LRU by bytes shared by every session, so the sum holds whatever the
number of sessions; a session keeps only keys into them."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import logging
import os
import threading
from collections import OrderedDict

import streamlit as st
import torch

from ..corpus import CorpusError, load_result
from ..loading import Loaded, default_model, load
from ..i18n import t
from ..model import Trace, run
from .context import Context
from .escaping import show_error

def _mb(name: str, default: float) -> float:
    """A budget in MB from the environment (a bad or negative value: the default, and the server log says so)."""
    raw = os.environ.get(name)
    try:
        value = float(raw) if raw is not None else default
        if not 0 <= value < float("inf"):
            raise ValueError(raw)
        return value
    except ValueError:
        logging.getLogger("attnkit").warning("%s=%r is not a size in MB; using %s", name, raw, default)
        return default


TRACE_CACHE_MB = _mb("ATTNKIT_TRACE_CACHE_MB", 2048)
RESULT_CACHE_MB = _mb("ATTNKIT_RESULT_CACHE_MB", TRACE_CACHE_MB / 8)
JOB_RESULTS_MB = _mb("ATTNKIT_JOB_RESULTS_MB", TRACE_CACHE_MB / 8)
#: The server's memory budget beside the models, in MB, by part (docs/costs.md's "Memory" says the same).
BUDGET = {"traces": TRACE_CACHE_MB, "results": RESULT_CACHE_MB, "job results": JOB_RESULTS_MB}


def sizeof(value, _depth: int = 0) -> int:
    """Bytes held by a result: arrays and tensors by their buffers, data frames by their memory use, and the
    contents of tuples, lists, dicts and dataclasses (to a depth of 6); anything else counts 0."""
    if _depth > 6 or value is None:
        return 0
    if hasattr(value, "nbytes") and isinstance(getattr(value, "nbytes"), int):
        return int(value.nbytes)
    if hasattr(value, "memory_usage") and callable(value.memory_usage):       # pandas
        try:
            used = value.memory_usage(deep=True)
            return int(used.sum() if hasattr(used, "sum") else used)
        except (TypeError, ValueError):
            return 0
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, dict):
        return sum(sizeof(k, _depth + 1) + sizeof(v, _depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(sizeof(v, _depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(sizeof(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value))
    return 0


@st.cache_resource(show_spinner=False, ttl=600)
def cached_default_model() -> tuple[str, str | None]:
    return default_model(timeout=3.0)


@st.cache_resource(show_spinner=False, max_entries=3)
def cached_model(name: str, device: str) -> Loaded:
    return load(name, device)


class TraceCache:
    """A thread-safe LRU of Traces (or of other values, measured by ``sizeof``) bounded by their bytes: it never
    holds more than its budget.

    ``get(key, make, size)``: with the expected ``size`` in bytes, older entries are evicted *before* ``make``
    runs, so the new value and the kept ones fit together; a value larger than the whole budget is returned
    but not kept."""

    def __init__(self, budget_mb: float, sizeof=None):
        self.budget = budget_mb * 2**20
        self.sizeof = sizeof or self.nbytes
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    @staticmethod
    def nbytes(tr: Trace) -> int:
        return (0 if tr.logits is None else tr.logits.nbytes) + sum(t.nbytes for t in tr.captures.values())

    def _evict_to(self, room: float) -> None:
        while self.items and self.bytes > room:
            _, (_, freed) = self.items.popitem(last=False)
            self.bytes -= freed

    def peek(self, key):
        """The value kept for ``key`` (now the most recently used), or None."""
        with self.lock:
            if key not in self.items:
                return None
            self.items.move_to_end(key)
            return self.items[key][0]

    def put(self, key, value, oversize: bool = False) -> None:
        """Keep ``value``; one larger than the whole budget is kept only with ``oversize`` (then alone: every
        other entry is evicted, so the cache holds its budget or that one value)."""
        size = self.sizeof(value)
        with self.lock:
            if key in self.items:
                self.bytes -= self.items.pop(key)[1]
            if size > self.budget and not oversize:
                return
            self._evict_to(max(0.0, self.budget - size))
            self.items[key] = (value, size)
            self.bytes += size

    def get(self, key, make, size: int | None = None):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
            if size is not None:
                self._evict_to(max(0.0, self.budget - size))
        value = make()                       # outside the lock: other sessions keep going
        size = self.sizeof(value)
        with self.lock:
            if key not in self.items and size <= self.budget:
                self._evict_to(self.budget - size)
                self.items[key] = (value, size)
                self.bytes += size
        return value


_TRACES = TraceCache(TRACE_CACHE_MB)

#: Captures of one [H, T, T] matrix per layer; every other capture is at most [T, max(d_model, H·d_head)].
_SQUARE = {"pattern", "scores", "mask"}


def trace_bytes(cfg, T: int, capture, n_layers: int | None = None, logits: bool = True) -> int:
    """Bytes a float32 trace of ``capture`` on T tokens holds (its logits included)."""
    n = cfg.n_layers if n_layers is None else n_layers
    width = max(cfg.d_model, cfg.n_heads * cfg.d_head)
    per_layer = sum(cfg.n_heads * T * T if c in _SQUARE else T * width for c in capture)
    return 4 * (n * per_layer + (T * cfg.d_vocab if logits else 0))


class LayerTrace:
    """A trace whose per-layer captures are computed when read, one layer at a time, from the cached residual
    stream (``resid_pre`` of every layer, [L, T, d]): a page reads ``tr["pattern", l]`` as from a
    :class:`Trace`, and the cache holds only the layers it has room for. Used when the whole trace would
    exceed the cache's budget (GPT-2 xl at 1,024 tokens: 10 GB of patterns and scores)."""

    def __init__(self, ctx: Context, ids: tuple, capture: tuple):
        self.ctx, self.ids, self.capture = ctx, ids, capture
        cfg = ctx.model.weights.config
        self.resid = _TRACES.get((ctx.model_name, ctx.device, ids, ("resid_pre",), None),
                                 lambda: run(ctx.model.weights, list(ids), capture=["resid_pre"]),
                                 trace_bytes(cfg, len(ids), ("resid_pre",)))
        self.logits = self.resid.logits

    def layer(self, l: int) -> Trace:
        ctx, w = self.ctx, self.ctx.model.weights
        x = self.resid["resid_pre", l]
        return _TRACES.get((ctx.model_name, ctx.device, self.ids, self.capture, (l,), "resumed"),
                           lambda: run(w, list(self.ids), start=l, resid=x, stop=l + 1, capture=self.capture,
                                       layers=[l]),
                           trace_bytes(w.config, len(self.ids), self.capture, 1, logits=False))

    def __getitem__(self, key):
        name, l = key
        return self.layer(l)[name, l]


def trace(ctx: Context, capture=("pattern",), ids: list[int] | None = None, layers=None) -> Trace | LayerTrace:
    """The (cached) attnkit run of the current prompt, or of ``ids``. Treat it as read-only. When the whole
    run's captures would not fit in the cache's budget, a :class:`LayerTrace` (same ``tr[name, layer]``
    reads, each layer computed on demand) is returned instead."""
    ids = tuple(int(i) for i in (ctx.ids if ids is None else ids))
    capture = tuple(sorted(set(capture)))
    layers = None if layers is None else tuple(layers)
    model = ctx.model
    size = trace_bytes(model.weights.config, len(ids), capture, None if layers is None else len(layers))
    if size > _TRACES.budget and (layers is None or len(layers) > 1):
        return LayerTrace(ctx, ids, capture)
    return _TRACES.get((ctx.model_name, ctx.device, ids, capture, layers),
                       lambda: run(model.weights, list(ids), capture=capture, layers=layers), size)


#: Results of work that reports its progress to the page (tuples of arrays). Not ``st.cache_data``: it records
#: the progress bar's updates made inside the cached function and replays them on a hit, into a bar of another
#: run that the replay cannot find (CacheReplayClosureError in every later session).
_RESULTS = TraceCache(RESULT_CACHE_MB, sizeof=sizeof)


def cached_result(key: tuple, make):
    """``make()`` once per ``key`` for every session (an LRU bounded by the arrays' bytes); ``make`` may update
    the page's progress bar. Treat the result as read-only."""
    return _RESULTS.get(key, make)


def _key_part(value):
    """An argument as part of a cache key: lists as tuples, arrays and tensors by their bytes' digest."""
    if isinstance(value, (list, tuple)):
        return tuple(_key_part(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _key_part(v)) for k, v in value.items()))
    if hasattr(value, "tobytes") or isinstance(value, torch.Tensor):
        data = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
        return ("array", tuple(data.shape), str(data.dtype), hashlib.sha1(data.tobytes()).hexdigest())
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value


def budgeted(fn):
    """A page's memoised function held to the byte budget (in place of ``st.cache_data``, which bounds entries
    by count, not bytes): results go into the shared results LRU (:func:`cached_result`, ``RESULT_CACHE_MB``),
    keyed by the function (its file and name) and its arguments; parameters whose name starts with ``_`` are
    left out of the key, as ``st.cache_data`` does. Every session shares one copy: treat it as read-only."""
    sig = inspect.signature(fn)
    name = (fn.__code__.co_filename, fn.__qualname__)

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        key = name + tuple((k, _key_part(v)) for k, v in bound.arguments.items() if not k.startswith("_"))
        return _RESULTS.get(key, lambda: fn(*args, **kwargs))

    return cached


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

@budgeted
def _corpus_result(path: str, stamp: tuple):
    return load_result(path)


def corpus_result(key: str):
    """A text box for a corpus result folder (``python -m attnkit corpus --out DIR``); returns the
    :class:`attnkit.corpus.CorpusResult`, or None (empty box, or a one-line message why not)."""
    folder = st.text_input(t("Corpus result folder (from {command})", command="`python -m attnkit corpus --out DIR`"),
                           key=key,
                           placeholder="/path/to/corpus-result").strip()
    if not folder:
        return None
    p = os.path.expanduser(folder)
    if not os.path.isdir(p):
        show_error(t("not a folder: {folder}", folder=folder))
        return None
    stamp = tuple(os.path.getmtime(os.path.join(p, f)) for f in ("summary.json", "_done") if os.path.exists(os.path.join(p, f)))
    try:
        return _corpus_result(p, stamp)
    except (CorpusError, OSError, ValueError, KeyError) as e:
        show_error(t("could not read the corpus result {folder}: {error}", folder=folder, error=str(e)))
        return None
