"""``python -m attnkit corpus --bench``: documents per second of a corpus run, locally and on Ray."""
from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ...corpus import run_corpus
from ...prompts import SAMPLE_TEXT


def bench_corpus(folder, docs: int = 48, words: int = 120, seed: int = 0) -> Path:
    """A synthetic .jsonl corpus of ``docs`` documents of about ``words`` words (sentences of the
    heads command's default text, shuffled per document), for timing only."""
    sentences = sorted({s.strip() + "." for s in SAMPLE_TEXT.split(".") if s.strip()})
    rng = np.random.default_rng(seed)
    path = Path(folder) / "bench.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(docs):
            text, n = [], 0
            while n < words:
                s = sentences[int(rng.integers(len(sentences)))]
                text.append(s)
                n += len(s.split())
            f.write(json.dumps({"text": " ".join(text)}) + "\n")
    return path


def _timed_run(corpus, out, model, analyses, engine, threads, workers, window, batch, shard_docs) -> dict:
    """One run's figures (see :func:`bench`)."""
    t0 = time.perf_counter()
    kw = {"threads": threads}
    if engine == "ray":
        import ray      # optional: only the Ray run needs it

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        kw["workers"] = workers
    try:
        rep = run_corpus(corpus, out, model, analyses, engine=engine, window=window, batch=batch,
                         shard_docs=shard_docs, ablations=["v=x"], bootstrap=0, summary=False, **kw)
    finally:
        if engine == "ray":
            ray.shutdown()
    total = time.perf_counter() - t0
    n_workers = workers if engine == "ray" else 1
    return {"workers": n_workers, "threads": threads, "seconds": round(total, 2),
            "docs_per_s": round(rep.processed_docs / total, 3),
            "worker_docs_per_s": round(rep.processed_docs / rep.compute_seconds, 3),
            "startup_s": round(total - rep.compute_seconds / n_workers, 2), "docs": rep.processed_docs}


def bench(model: str = "attnkit-tiny", docs: int = 48, window: int = 128, workers: int = 2, batch: int = 4,
          analyses=("heads", "entropy", "ablation-loss"), engines=("local", "ray"), shard_docs: int = 4,
          log=None) -> dict:
    """Documents per second on :func:`bench_corpus`: the local engine with 1 and with ``workers`` torch
    threads, and Ray with ``workers`` one-thread actors on a local Ray cluster of ``num_cpus = workers``.

    Per run: ``seconds`` wall time from the start (model loading, Ray starting its actors included) to
    the last shard written, ``docs_per_s`` = docs / seconds, ``worker_docs_per_s`` = docs / Σ shard
    time (what one worker does once running) and ``startup_s`` = seconds − Σ shard time / workers (the
    fixed cost: loading, scheduling, transfers). ``log(line)`` gets one line per run."""
    out: dict = {"model": model, "docs": docs, "window": window, "batch": batch, "analyses": list(analyses),
                 "shard_docs": shard_docs, "cpus": os.cpu_count(), "load_average": _loadavg(), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = bench_corpus(tmp, docs)
        for engine, threads in [(e, t) for e in engines for t in (dict.fromkeys((1, workers)) if e == "local" else (1,))]:
            label = f"ray-{workers}-workers" if engine == "ray" else f"local-{threads}-thread"
            if engine == "ray" and importlib.util.find_spec("ray") is None:
                out["runs"][label] = {"skipped": "Ray is not installed (pip install ray)"}
                continue
            r = _timed_run(corpus, Path(tmp) / label, model, analyses, engine, threads, workers, window, batch,
                           shard_docs)
            n = r.pop("docs")
            out["runs"][label] = r
            if log is not None:
                log(f"{label:>16}: {n} docs in {r['seconds']:.1f} s = {r['docs_per_s']:.2f} docs/s; one worker "
                    f"{r['worker_docs_per_s']:.2f} docs/s once running; fixed cost ≈ {r['startup_s']:.1f} s")
    out["load_average_after"] = _loadavg()
    return out


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
