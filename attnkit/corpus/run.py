"""One corpus run: checked settings, the shards still to do, an engine, the results written shard by shard."""
from __future__ import annotations

import importlib.util
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from . import store
from .analyses import ANALYSES, DEFAULT_ABLATIONS, UNAVAILABLE, selected
from .engines import ENGINES, local_engine, ray_engine
from .inputs import CorpusError, read_inputs
from .summary import summarise

SHARD_DOCS = 16


def _analysis_names(analyses) -> list[str]:
    if isinstance(analyses, str):
        analyses = [a.strip() for a in analyses.split(",") if a.strip()]
    analyses = list(dict.fromkeys(analyses))
    if not analyses:
        raise CorpusError("no analysis given; choose from " + ", ".join(ANALYSES))
    for a in analyses:
        if a in UNAVAILABLE:
            raise CorpusError(f"analysis {a!r} is not available: {UNAVAILABLE[a]}")
        if a not in ANALYSES:
            raise CorpusError(f"unknown analysis {a!r}; choose from {', '.join(ANALYSES)}")
    return analyses


#: The largest values settings_for takes (a window beyond any context attnkit loads; the model's cuts further).
MAX_WINDOW, MAX_BATCH, MAX_SHARD_DOCS, MAX_THREADS = 1_000_000, 4_096, 1_000_000, 1_024


def _big(n: int) -> str:
    return f"{n:,}" if abs(n) < 10**30 else f"a number of {len(str(abs(n)))} digits"


def settings_for(model, analyses, window=None, batch=4, shard_docs=SHARD_DOCS, ablations=DEFAULT_ABLATIONS,
                 field="text", device="cpu", threads=1, options: dict | None = None) -> dict:
    """Checked settings (CorpusError when one is out of range); these decide the numbers. ``options``: raw
    settings the analyses read in :meth:`Analysis.settings` besides the ablations (the atlas's)."""
    analyses = _analysis_names(analyses)
    for name, value, low, high in (("--window", window, 2, MAX_WINDOW), ("--batch", batch, 1, MAX_BATCH),
                                   ("--shard-docs", shard_docs, 1, MAX_SHARD_DOCS), ("--threads", threads, 1, MAX_THREADS)):
        if value is None and name == "--window":
            continue
        if value is None or int(value) < low:
            raise CorpusError(f"{name} must be at least {low}{' tokens' if name == '--window' else ''}, got {value}")
        if int(value) > high:
            raise CorpusError(f"{name} must be at most {high:,}, got {_big(int(value))}")
    raw = {"ablations": ablations, **(options or {})}
    owned = {k: v for a in ANALYSES.values() for k, v in a.defaults.items()}     # what an analysis not run leaves
    for a in selected(analyses):
        owned.update(a.settings(raw))
    return {"format": store.FORMAT, "model": str(model), "analyses": [a for a in ANALYSES if a in analyses],
            "window": None if window is None else int(window), "batch": int(batch), "shard_docs": int(shard_docs),
            **owned, "field": field, "device": device, "threads": int(threads)}


@dataclass
class RunReport:
    out: str
    docs: int
    shards: int
    skipped_shards: int
    processed_docs: int
    errors: int
    seconds: float                     # wall time of this run (loading the model, starting Ray included)
    engine: str
    compute_seconds: float = 0.0       # Σ over shards of the time a worker spent on it

    @property
    def docs_per_s(self) -> float:
        return self.processed_docs / self.seconds if self.seconds > 0 else math.nan


def _write_shard(out: Path, row: dict, names, digest: str, n_docs: int) -> tuple[int, dict]:
    """Write one finished shard's tables, then its ``_done`` marker: (errors, the worker's meta)."""
    k = int(row["shard"])
    errs = 0
    for n in names:
        t = store.from_ipc(row[n])
        store.write_atomic(out / n / f"{store.part(k)}.parquet", lambda p, t=t: pq.write_table(t, p))
        if n == "documents":
            errs = sum(1 for s in t["status"].to_pylist() if s == "error")
    meta = json.loads(row["meta"])
    files = {n: store.file_record(out / n / f"{store.part(k)}.parquet") for n in names}
    store.write_atomic(out / "_done" / f"{store.part(k)}.json", lambda p: p.write_text(json.dumps(
        {"shard": k, "hash": digest, "docs": n_docs, "errors": errs, "files": files, "meta": meta}),
        encoding="utf-8"))
    return errs, meta


def check_output(out, settings: dict, docs, redo_changed: bool = False) -> None:
    """What run_corpus checks of ``out`` before any work (CorpusError), without writing anything: a
    folder that is not a corpus result, or one holding a run with other settings or other documents."""
    store.check_manifest(Path(out), settings, docs, redo_changed=redo_changed, write=False)


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise CorpusError(f"unknown engine {engine!r}; use local or ray")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise CorpusError("--engine ray needs Ray: pip install ray (the local engine does not)")


def run_corpus(input, out, model="attnkit-tiny", analyses=("heads", "entropy", "ablation-loss"), *,
               engine: str = "local", address: str | None = None, window: int | None = None, batch: int = 4,
               shard_docs: int = SHARD_DOCS, ablations=DEFAULT_ABLATIONS, field: str = "text", device: str = "cpu",
               threads: int = 1, workers: int | None = None, gpus_per_worker: float = 0.0,
               max_docs: int | None = None, bootstrap: int = 1000, redo_changed: bool = False,
               progress=None, summary: bool = True, log=None, options: dict | None = None) -> RunReport:
    """Run the analyses over the documents of ``input`` into the folder ``out`` (see the package doc).

    Shards already finished in ``out`` (same settings, same documents) are skipped; a damaged one is
    computed again. A folder that is not a corpus result, or holds a run with other settings or other
    documents, is refused (CorpusError) before anything is written — with ``redo_changed`` the shards
    whose documents changed are computed again instead. ``progress(done,
    total, info)`` is called after each shard is written (an exception there stops the run; what is
    written stays and a rerun resumes). With ``summary`` the summary files are written at the end.
    ``log(text)`` receives notes (files left out of a folder, a Ray cluster too small). ``options``: see
    :func:`settings_for`.
    """
    check_engine(engine)
    settings = settings_for(model, analyses, window, batch, shard_docs, ablations, field, device, threads, options)
    docs, notes = read_inputs(input, field, max_docs)
    for n in notes if log is not None else ():
        log(n)
    out = Path(out)
    shards = store.shards(docs, settings["shard_docs"])
    digests = [store.digest(s) for s in shards]
    store.check_manifest(out, settings, docs, digests, redo_changed=redo_changed)
    names = store.tables_for(settings["analyses"])
    pending, finished = store.pending_shards(out, digests, names, log)
    resumed = sum(len(shards[k]) for k in finished)
    items = [{"shard": k, "docs": json.dumps(shards[k], ensure_ascii=False)} for k in pending]
    t0 = time.perf_counter()
    done, errors, compute = resumed, 0, 0.0
    info = {"resumed": resumed, "errors": 0, "started": t0}
    if items:
        rows = (ray_engine(settings, items, address, workers, gpus_per_worker, log) if engine == "ray"
                else local_engine(settings, items, log))
        try:
            for row in rows:
                k = int(row["shard"])
                errs, meta = _write_shard(out, row, names, digests[k], len(shards[k]))
                done += len(shards[k])
                errors += errs
                compute += float(meta.get("seconds", 0.0))
                info.update(errors=errors, shard=k)
                if progress is not None:
                    progress(done, len(docs), dict(info))
        finally:
            close = getattr(rows, "close", None)
            if close:
                close()
    seconds = time.perf_counter() - t0
    if summary:
        summarise(out, bootstrap=bootstrap, write=True)
    return RunReport(str(out), len(docs), len(shards), len(shards) - len(pending), done - resumed, errors,
                     seconds, engine, compute)
