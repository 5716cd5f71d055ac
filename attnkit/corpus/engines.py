"""Where shards are computed: in this process (``local``) or on a Ray cluster (``ray``), one code path.

A shard is the unit of work: :class:`ShardWorker` (model loaded once in ``__init__``) turns one shard
into Arrow tables. The ``local`` engine calls it in-process; the ``ray`` engine hands it to Ray Data's
``map_batches`` over an actor pool (``ActorPoolStrategy``), one shard per batch. The driver alone
writes the results, so cluster nodes need no shared filesystem.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import torch

from .. import loading
from ..entropy import documents
from ..model import Composed, run
from ..prompts import MAX_PROMPT_CHARS as MAX_CHARS      # entropy.documents cuts each text there
from . import store
from .analyses import Windows, selected
from .inputs import CorpusError

#: Seconds to wait for a Ray cluster's address to answer before giving up (a wrong address must not hang).
CONNECT_TIMEOUT = 10.0


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def _batches(wins, size):
    """Windows of equal length in groups of at most ``size``, longest first, in document order."""
    order = sorted(range(len(wins)), key=lambda k: (-len(wins[k][2]), k))
    group: list = []
    for k in order:
        if group and (len(group) == size or len(wins[k][2]) != len(group[0][2])):
            yield group
            group = []
        group.append(wins[k])
    if group:
        yield group


def _columns(rows: list[dict]) -> dict:
    return {k: [r[k] for r in rows] for k in (rows[0] if rows else {})}


class ShardWorker:
    """Turns a batch of shards into result tables; the model is loaded once, in ``__init__``.

    The same object serves both engines: the local engine calls it in-process, the Ray engine gives
    the class to ``Dataset.map_batches`` (one actor per pool slot). A batch is ``{"shard": [k…],
    "docs": [JSON list of documents…]}``; the answer is ``{"shard": [k…], "meta": [JSON…], <table>:
    [Arrow IPC bytes…]}`` for the tables of :func:`attnkit.corpus.store.tables_for`.
    """

    def __init__(self, settings: dict):
        self.settings = dict(settings)
        self.threads = int(settings.get("threads") or 1)
        self.m = loading.load(settings["model"], settings.get("device") or "cpu")
        cfg = self.m.config
        self.window = min(int(settings.get("window") or cfg.n_ctx), cfg.n_ctx)
        self.batch = int(settings.get("batch") or 1)
        self.analyses = selected(settings["analyses"])
        for a in self.analyses:             # against this model's layers and heads, before any work
            a.prepare(cfg, self.settings)

    def meta(self) -> dict:
        cfg = self.m.config
        return {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "n_ctx": cfg.n_ctx, "window": self.window,
                "device": str(self.m.device), "source": self.m.source}

    def __call__(self, batch: dict) -> dict:
        names = store.tables_for(self.settings["analyses"])
        out: dict[str, list] = {"shard": [], "meta": [], **{n: [] for n in names}}
        before = torch.get_num_threads()
        for shard, docs in zip(batch["shard"], batch["docs"]):
            torch.set_num_threads(self.threads)     # the thread count changes float sums: fixed, so both
            t0 = time.perf_counter()                # engines give the same numbers
            try:
                tables = self.process(json.loads(docs))
            finally:
                torch.set_num_threads(before)
            out["shard"].append(int(shard))
            out["meta"].append(json.dumps({**self.meta(), "seconds": round(time.perf_counter() - t0, 4)}))
            for n in names:
                out[n].append(store.to_ipc(tables[n]))
        return {k: np.array(v, dtype=np.int64 if k == "shard" else object) for k, v in out.items()}

    # one shard ----------------------------------------------------------------
    def _windows(self, docs, rows) -> list:
        """(doc, window index, ids) of every window of the shard's readable documents; ``rows`` (the
        documents table) records the documents that failed or are too short."""
        wins = []
        for d in docs:
            if d.get("error"):
                rows[d["doc"]].update(status="error", stage="read", error=d["error"], windows=0)
                continue
            try:
                ws, _ = documents(self.m.encode, [d["text"]], self.window, split=True)
            except Exception as e:    # noqa: BLE001 - one bad document must not stop the run
                rows[d["doc"]].update(status="error", stage="tokenize", error=_err(e), windows=0)
                continue
            if not ws:
                rows[d["doc"]].update(status="short", stage="window", error="fewer than 2 tokens: nothing to attend over")
                continue
            rows[d["doc"]]["windows"] = len(ws)
            wins += [(d["doc"], w, ids) for w, ids in enumerate(ws)]
        return wins

    def process(self, docs: list[dict]) -> dict:
        rows = {d["doc"]: {"doc": d["doc"], "doc_id": d["doc_id"], "chars": len(d["text"] or ""),
                           "chars_cut": max(0, len(d["text"] or "") - MAX_CHARS), "windows": 0,
                           "status": "ok", "stage": None, "error": None} for d in docs}
        cols: dict[str, dict] = {n: {} for n in store.tables_for(self.settings["analyses"])[1:]}
        failed: set[int] = set()
        for group in _batches(self._windows(docs, rows), self.batch):
            try:
                res = self._analyse(group)
            except Exception:             # noqa: BLE001 - retry one window at a time to find the bad one
                res = []
                for one in group:
                    try:
                        res += self._analyse([one])
                    except Exception as e:    # noqa: BLE001
                        if one[0] not in failed:
                            failed.add(one[0])
                            rows[one[0]].update(status="error", stage="analysis", error=_err(e), windows=0)
            for name, part in res:
                for k, v in part.items():
                    cols[name].setdefault(k, []).extend(v)
        tables = {"documents": store.table("documents", _columns(sorted(rows.values(), key=lambda r: r["doc"])))}
        for name, c in cols.items():
            tables[name] = store.sorted_rows(store.without_docs(store.table(name, c), failed), name)
        return tables

    def _analyse(self, group) -> list[tuple[str, dict]]:
        """Every analysis of one batch of equal-length windows: [(table, columns)…]."""
        ids = torch.tensor([g[2] for g in group], dtype=torch.long)
        batch = Windows(self.m.weights, ids, [g[0] for g in group], [g[1] for g in group], [g[2] for g in group],
                        self.settings, pieces=self.m.token_texts)
        B, T = ids.shape
        out = [("windows", {"doc": batch.docs, "window": batch.nums,
                            "start": [n * self.window for n in batch.nums], "tokens": [T] * B})]
        hooks = {a.name: a.hook(batch) for a in self.analyses}
        riders = [h for h in hooks.values() if h is not None]
        iv = None if not riders else riders[0] if len(riders) == 1 else Composed(riders)
        carrier = next((a for a in self.analyses if a.carries_forward), None)
        with torch.no_grad():
            if carrier is None and iv is not None:
                run(self.m.weights, ids, intervention=iv)
            for a in sorted(self.analyses, key=lambda a: a is not carrier):    # the carrier's pass first
                part = a.compute(batch, hooks[a.name], iv if a is carrier else None)
                out.append((a.table, part))
        return out


# ----------------------------------------------------------------------------- engines

def local_engine(settings, items, log=None):
    """In-process: one ShardWorker, called on one shard at a time (exactly what each Ray actor does)."""
    worker = ShardWorker(settings)
    for it in items:
        yield from _rows(worker({"shard": np.array([it["shard"]]), "docs": np.array([it["docs"]], dtype=object)}))


def _rows(batch: dict):
    for i in range(len(batch["shard"])):
        yield {k: v[i] for k, v in batch.items()}


def _pool(ray, settings, items, workers, gpus_per_worker, log):
    """(actors, settings for them): ``workers`` or as many as the cluster holds."""
    res = ray.cluster_resources()
    cpus_per_worker = settings["threads"]
    if workers is None:
        if gpus_per_worker:
            workers = max(1, int(res.get("GPU", 0) // gpus_per_worker))
        else:
            workers = max(1, int(res.get("CPU", 1) // max(cpus_per_worker, 1e-9)))
    workers = max(1, min(int(workers), len(items)))
    fits = res.get("GPU", 0) // gpus_per_worker if gpus_per_worker else res.get("CPU", 0) // cpus_per_worker
    if fits < 1:          # not even one actor can start: Ray Data would wait for ever
        what = (f"{res.get('GPU', 0):g} GPU(s) and --gpus-per-worker {gpus_per_worker:g}" if gpus_per_worker
                else f"{res.get('CPU', 0):g} CPU(s) and --threads {cpus_per_worker} (CPUs per actor)")
        raise CorpusError(f"the Ray cluster has {what}: no actor fits")
    if workers > fits and log is not None:
        log(f"{workers} actors asked for, the cluster has room for {int(fits)} now "
            "(the rest wait for the autoscaler, if any)")
    settings = dict(settings)
    if gpus_per_worker and settings.get("device", "cpu") == "cpu":
        settings["device"] = "cuda"
    return workers, settings


def ray_engine(settings, items, address=None, workers=None, gpus_per_worker=0.0, log=None):
    """Ray Data: the shards as a dataset, ``map_batches(ShardWorker)`` on an actor pool of ``workers``
    actors (each loads the model once; ``gpus_per_worker`` > 0 puts it on a GPU), results streamed back
    to the driver as they finish. Each actor reserves ``settings["threads"]`` CPUs and runs torch with
    that many threads. Uses the running Ray if there is one, else ``ray.init(address)``."""
    import ray          # optional: only the ray engine needs it (the local engine runs without Ray)

    started = False
    if not ray.is_initialized():
        check_ray_request(address, gpus_per_worker)
        try:
            with _quiet_stderr(bool(address)):      # a peer that is not Ray: a warning a second from C++
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR", configure_logging=True)
        except Exception as e:    # noqa: BLE001 - Ray's many ways of not connecting: one line
            raise CorpusError(f"cannot start or reach Ray{' at ' + address if address else ''}: {_err(e)}") from None
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        workers, settings = _pool(ray, settings, items, workers, gpus_per_worker, log)
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        out = ds.map_batches(
            ShardWorker, fn_constructor_kwargs={"settings": settings}, batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=settings["threads"],
            num_gpus=gpus_per_worker or None, runtime_env=_runtime_env(address),
        )
        for row in out.iter_rows():
            yield row
    finally:
        if started:
            ray.shutdown()


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; None for ``auto``/``local``."""
    a = address.strip()
    a = a[len("ray://"):] if a.startswith("ray://") else a
    if a in ("auto", "local", "") or ":" not in a:
        return None
    host, _, port = a.rpartition(":")
    if not port.isdigit():
        raise CorpusError(f"--address {address!r}: expected auto or HOST:PORT")
    return host.strip("[]"), int(port)


def check_ray_request(address: str | None, gpus_per_worker: float = 0.0, timeout: float | None = None) -> None:
    """Before Ray starts or connects, what can fail fast: a ``HOST:PORT`` that does not answer within
    ``timeout`` seconds (CONNECT_TIMEOUT), and GPUs asked of a Ray started here on a machine without one."""
    hp = _host_port(address) if address else None
    if hp is not None:
        try:
            socket.create_connection(hp, timeout=CONNECT_TIMEOUT if timeout is None else timeout).close()
        except OSError as e:
            why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
            raise CorpusError(f"cannot reach the Ray cluster at {address}: {why} "
                              f"(waited at most {CONNECT_TIMEOUT if timeout is None else timeout:g} s)") from None
    if gpus_per_worker and not address and not torch.cuda.is_available():
        raise CorpusError(f"--gpus-per-worker {gpus_per_worker:g}: this machine has no GPU that torch can use, "
                          "and without --address Ray runs here")


@contextlib.contextmanager
def _quiet_stderr(on: bool):
    """File descriptor 2 sent to /dev/null while connecting (Ray's C++ client writes there directly)."""
    if not on:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _runtime_env(address) -> dict:
    """How Ray workers import attnkit: on this machine via PYTHONPATH, on a remote cluster by shipping
    the package (``py_modules``; it carries the shipped attnkit-tiny, hub models come from each node's
    HuggingFace cache or the hub)."""
    pkg = Path(__file__).resolve().parents[1]
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_HOME", "TRANSFORMERS_OFFLINE") if k in os.environ}
    if address in (None, "", "local"):
        env["PYTHONPATH"] = os.pathsep.join([str(pkg.parent)] + ([os.environ["PYTHONPATH"]]
                                                                 if os.environ.get("PYTHONPATH") else []))
        return {"env_vars": env}
    return {"py_modules": [str(pkg)], "env_vars": env}


ENGINES = {"local": local_engine, "ray": ray_engine}
