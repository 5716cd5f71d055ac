"""The head atlas kept on disk, for the dashboard and notebooks: one atlas folder per (model content, corpus
content, settings) under attnkit's cache folder, so that the same atlas asked for again — by another session of
the dashboard, another notebook, after a restart — is read, not computed; and what an atlas costs, said before it
starts.

    res, folder = cached_atlas("debian-man", "attnkit-tiny", max_docs=8)   # read when complete, else run (resuming)
    seconds = estimate(weights, lengths)                                   # timed here on one window, then scaled

The folder is an ordinary atlas folder (``attnkit atlas --out``: :mod:`.atlas_files`) at
``cache_folder("atlas", KEY)``, KEY a digest of the model's files (:func:`.atlas_summary.model_hash`), the
corpus's documents (the digest the manifest records) and the settings. An interrupted run (a Stop) leaves its
finished shards there, and the next run with the same three resumes them. In one process, one run at a time
computes a given folder; another asking for it waits, then reads it.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from .. import atlas as atlas_lib
from ..atlas_result import AtlasResult
from ..circuits.cost import forward_flops
from ..diskcache import cache_folder, key_of
from ..entropy import documents
from ..loading import locate
from .atlas import EFFECT_TOKENS, corpus_path, run_atlas
from .atlas_files import KIND, MARKER, load_atlas
from .atlas_summary import model_hash
from .inputs import read_inputs
from .run import SHARD_DOCS
from . import store

__all__ = ["FORMAT", "settings_of", "corpus_digest", "atlas_key", "atlas_folder", "complete", "cached_atlas",
           "window_lengths", "effect_every", "time_window", "estimate", "ESTIMATE_TOKENS", "OVERHEAD_S"]

#: Part of every key: a change of the atlas's files or rules that makes older cached atlases wrong bumps it.
FORMAT = 1
#: The estimate times the scan and the effect on one window of this many tokens (or the context, if shorter).
ESTIMATE_TOKENS = 64
#: Seconds an atlas costs besides its windows: the worker's model load, the summary's bootstrap, the files.
OVERHEAD_S = 8.0
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def settings_of(*, max_docs: int | None = None, no_first: bool = False, effect_tokens: int = EFFECT_TOKENS,
                bootstrap: int = 1000, window: int | None = None, device: str = "cpu") -> dict:
    """The settings an atlas is keyed on (the others are fixed here: one thread, batch 1, the default shards)."""
    return {"max_docs": max_docs, "no_first": bool(no_first), "effect_tokens": int(effect_tokens),
            "bootstrap": int(bootstrap), "window": window, "device": str(device), "threads": 1, "batch": 1,
            "shard_docs": SHARD_DOCS}


def corpus_digest(corpus, max_docs: int | None = None) -> tuple[list[dict], str]:
    """The corpus's documents (a shipped name, a file or a folder; the first ``max_docs``) and their digest, as
    the atlas's manifest records it. CorpusError on a corpus that cannot be read."""
    docs, _ = read_inputs(corpus_path(corpus), "text", max_docs)
    return docs, store.digest(docs)


def atlas_key(model_sha: str, corpus_sha: str, settings: dict) -> str:
    return key_of("attnkit atlas", FORMAT, model_sha, corpus_sha, settings)


def atlas_folder(key: str) -> Path:
    return cache_folder("atlas", key)


def complete(folder) -> bool:
    """Whether ``folder`` holds a finished atlas (its manifest says so)."""
    try:
        man = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(man, dict) and man.get("kind") == KIND and man.get("status") == "complete"


@contextmanager
def _one_run(folder: Path, progress):
    """One run at a time per folder in this process; while another computes it, ``progress(0, 1)`` is called
    every half second (a job's Stop raises there)."""
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault(str(folder), threading.Lock())
    while not lock.acquire(timeout=0.5):
        if progress is not None:
            progress(0, 1)
    try:
        yield
    finally:
        lock.release()


def cached_atlas(corpus, model: str, *, source: str | None = None, progress=None, log=None,
                 **settings) -> tuple[AtlasResult, Path]:
    """The atlas of ``model`` (a name or folder; ``source``: the folder it was loaded from, default
    :func:`attnkit.loading.locate`'s) over ``corpus``, read from the cache when it holds it, else run there
    (:func:`.atlas.run_atlas`, resuming an interrupted run; ``progress(done, total)`` as there). ``settings``: those
    of :func:`settings_of`. Returns (the atlas as its folder reads back, the folder)."""
    s = settings_of(**settings)
    source = str(source or locate(model))
    _, corpus_sha = corpus_digest(corpus, s["max_docs"])
    folder = atlas_folder(atlas_key(model_hash(source) or f"{model}|{source}", corpus_sha, s))
    with _one_run(folder, progress):
        if not complete(folder):
            run_atlas(corpus, folder, model, window=s["window"], device=s["device"], no_first=s["no_first"],
                      effect_tokens=s["effect_tokens"], bootstrap=s["bootstrap"], max_docs=s["max_docs"],
                      progress=progress, log=log)
    return load_atlas(folder), folder


# ----------------------------------------------------------------------------- what it costs

def window_lengths(encode, docs: list[dict], window: int) -> list[int]:
    """The lengths of the windows the atlas cuts from ``docs`` (as the corpus engine cuts them)."""
    texts = [d["text"] for d in docs if d.get("text")]
    wins, _ = documents(encode, texts, window, split=True)
    return [len(w) for w in wins]


def effect_every(lengths: list[int], effect_tokens: int = EFFECT_TOKENS) -> int:
    """The effect pass's k (every k-th document), as :func:`.atlas.run_atlas` chooses it."""
    return max(1, sum(lengths) // int(effect_tokens))


def time_window(weights) -> tuple[float, float]:
    """Seconds of the scan and of the effect on one window of :data:`ESTIMATE_TOKENS` tokens (or the context), one
    thread (as the atlas runs), on this machine now."""
    cfg = weights.config
    T = min(ESTIMATE_TOKENS, cfg.n_ctx)
    ids = (torch.arange(T, device=weights.device) % cfg.d_vocab).unsqueeze(0)
    means = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.d_head, device=weights.device)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t0 = time.perf_counter()
        atlas_lib.scan(weights, ids, [1], [0], lambda xs: [str(int(i)) for i in xs])
        t1 = time.perf_counter()
        effect_s = atlas_lib.effect_estimate(weights, ids, means)["estimate_s"]
    finally:
        torch.set_num_threads(before)
    return t1 - t0, effect_s


def estimate(weights, lengths: list[int], every: int = 1, timed: tuple[float, float] | None = None) -> float:
    """Seconds an atlas over windows of ``lengths`` takes on this machine (the effect on every ``every``-th
    window, as the effect pass samples documents): the scan and the effect timed on one window of
    :data:`ESTIMATE_TOKENS` tokens (``timed``: :func:`time_window`'s two seconds, when already measured), each window's time scaled
    by the floating-point operations of a forward at its length against the timed one's, plus
    :data:`OVERHEAD_S`. An estimate (a busy machine runs slower); the float64 check's windows are not counted."""
    cfg = weights.config
    scan_s, effect_s = timed or time_window(weights)
    unit = forward_flops(cfg, min(ESTIMATE_TOKENS, cfg.n_ctx))
    scale = [forward_flops(cfg, T) / unit for T in lengths]
    return OVERHEAD_S + scan_s * sum(scale) + effect_s * sum(scale[::max(1, int(every))])
