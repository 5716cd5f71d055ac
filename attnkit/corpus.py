"""Corpus-scale analyses: head statistics, entropy curves and ablation losses over many documents,
on one machine or on a Ray cluster, with one code path.

    python -m attnkit corpus --model gpt2 --input docs.jsonl --analyses heads,entropy,ablation-loss \\
        --out runs/docs [--engine local|ray] [--address auto|HOST:PORT] [--window N] [--batch N]

Inputs: a ``.jsonl`` file (one document per line: a JSON string, or an object whose ``--field``,
default ``text``, is the document), a ``.txt``/``.md`` file (the whole file is one document) or a
folder (every ``.jsonl``/``.txt``/``.md`` below it, in sorted path order). Each document is cut into
consecutive windows of at most ``--window`` tokens exactly as the Entropy page does
(:func:`attnkit.entropy.documents`); windows under 2 tokens are dropped.

Documents are grouped into shards of ``--shard-docs`` consecutive documents. A shard is the unit of
work: :class:`ShardWorker` (model loaded once in ``__init__``) turns one shard into Parquet tables.
The ``local`` engine calls it in-process; the ``ray`` engine hands it to Ray Data's ``map_batches``
over an actor pool (``ActorPoolStrategy``), one shard per batch. The driver alone writes the results,
so cluster nodes need no shared filesystem. Output folder::

    manifest.json                       settings; a rerun with other settings is refused
    documents/part-00000.parquet        one row per document: status ok | short | error, stage, error,
                                        chars, chars_cut (beyond the Entropy page's 200,000 per text)
    windows/part-00000.parquet          one row per window: doc, window, start, tokens
    heads/part-00000.parquet            doc, window, layer, head, the metrics.HEAD_STATS columns
    entropy/part-00000.parquet          doc, window, layer, head, entropy[T], first_token[T]
    ablation/part-00000.parquet         doc, window, ablation, nll_sum, tokens, nats, increase
    _done/part-00000.json               written last: the shard is finished (with its input hash)
    summary/{heads,entropy,ablation}.parquet, summary.json   means with bootstrap intervals

Resume: a rerun skips every shard whose ``_done`` marker matches its documents' hash. A document that
fails (unreadable line, tokenizer or analysis error) gets ``status = "error"`` with the stage and the
error, and the run goes on. Rows are sorted within each shard, so both engines write the same files.

Summary intervals are percentile bootstrap intervals (95 %) resampling *documents* (windows of one
document are not independent); every mean is a ratio estimator Σ value / Σ count over the resampled
documents, so a document weighs by its number of windows (heads, entropy) or predicted tokens
(ablation losses).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .compare import head_label
from .prompts import MAX_PROMPT_CHARS as MAX_CHARS      # entropy.documents cuts each text there

__all__ = [
    "ANALYSES", "DEFAULT_ABLATIONS", "CorpusError", "read_inputs", "ShardWorker", "ablation_loss",
    "run_corpus", "summarise", "load_result", "CorpusResult", "Progress", "bench", "cli",
]

#: Analyses a corpus run can do, with the tables they write.
ANALYSES = {
    "heads": "per window, layer and head: every metrics.HEAD_STATS statistic",
    "entropy": "per window, layer and head: the entropy and first-token curves over positions",
    "ablation-loss": "per window: next-token loss unmodified and under each --ablation, and the increase",
}
#: Named in the issue but not in this version of attnkit.
NOT_YET = {"patching": "activation patching needs attnkit.patching, which this version does not have yet"}
#: The layer-wide ablations run by default (head ablations need a head: zero-head:L.H).
DEFAULT_ABLATIONS = ("v=x", "wk=wq", "no-scale", "no-mask")
SHARD_DOCS = 16
#: Bootstrap cells (resamples × entropy cells) held at once: 25M doubles = 200 MB. With gpt2 small's 64
#: positions that is all 1000 resamples; gpt2-xl's entropy intervals use 156 (recorded in summary.json).
ENTROPY_BOOT_CELLS = 25_000_000
FORMAT = 1
TABLES = {"heads": "heads", "entropy": "entropy", "ablation-loss": "ablation"}
#: Settings that change the numbers: a rerun into the same folder must match them.
RESULT_KEYS = ("format", "model", "analyses", "window", "batch", "shard_docs", "ablations", "field", "threads")


class CorpusError(ValueError):
    """Bad input or settings; ``str(err)`` says what is wrong (the CLI exits 2)."""


# ----------------------------------------------------------------------------- reading documents

def read_inputs(path, field: str = "text", max_docs: int | None = None) -> tuple[list[dict], list[str]]:
    """Documents of a .jsonl/.txt/.md file or a folder of them, in a fixed order.

    Returns (docs, notes); each doc is ``{"doc": index, "doc_id": "file:line", "text": str | None,
    "error": None | "Type: message"}`` (a document that cannot be read keeps its place with an error).
    Raises CorpusError when the path is missing, of an unsupported type, or holds no document.
    """
    from . import prompts as P

    root = Path(path).expanduser()
    notes: list[str] = []
    if not root.exists():
        raise CorpusError(f"input not found: {root}")
    kinds = (".jsonl", ".txt", ".md")
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in kinds)
        other = sum(1 for p in root.rglob("*") if p.is_file() and p.suffix.lower() not in kinds)
        if other:
            notes.append(f"{other} file(s) in {root} are not .jsonl/.txt/.md and were left out")
        if not files:
            raise CorpusError(f"{root} holds no .jsonl, .txt or .md files")
        names = [p.relative_to(root).as_posix() for p in files]
    else:
        if root.suffix.lower() not in kinds:
            raise CorpusError(f"{root.name}: unsupported input; give a .jsonl, .txt or .md file or a folder of them")
        files, names = [root], [root.name]
    docs: list[dict] = []

    def add(doc_id, text=None, error=None):
        docs.append({"doc": len(docs), "doc_id": doc_id, "text": text, "error": error})

    for p, name in zip(files, names):
        try:
            data = p.read_bytes()
        except OSError as e:
            add(name, error=f"OSError: {e.strerror or e}")
            continue
        if p.suffix.lower() != ".jsonl":
            try:
                add(name, text=P.check_text(P.decode_text(data, name)))
            except P.PromptError as e:
                add(name, error=f"PromptError: {e}")
        else:
            for n, line in enumerate(data.splitlines(), 1):
                if max_docs is not None and len(docs) >= max_docs:
                    break
                if not line.strip():
                    continue
                doc_id = f"{name}:{n}"
                try:
                    obj = json.loads(line.decode("utf-8"))
                except UnicodeDecodeError as e:
                    add(doc_id, error=f"UnicodeDecodeError: not valid UTF-8 (byte {e.start} of the line)")
                    continue
                except ValueError as e:
                    add(doc_id, error=f"JSONDecodeError: {e}")
                    continue
                if isinstance(obj, dict):
                    if field not in obj:
                        add(doc_id, error=f"KeyError: no field {field!r} (fields: {', '.join(map(str, obj)) or 'none'})")
                        continue
                    obj = obj[field]
                if not isinstance(obj, str):
                    add(doc_id, error=f"TypeError: the document is a JSON {type(obj).__name__}, not a string")
                elif not obj.strip():
                    add(doc_id, error="PromptError: the document is empty")
                else:
                    add(doc_id, text=obj)
        if max_docs is not None and len(docs) >= max_docs:
            break
    if max_docs is not None and len(docs) > max_docs:
        docs = docs[:max_docs]
    if not docs:
        raise CorpusError(f"{root} holds no documents (only blank lines?)")
    return docs, notes


# ----------------------------------------------------------------------------- the analyses

def ablation_loss(weights, ids: list[int], spec: str | None) -> tuple[float, int]:
    """(Σ next-token NLL in nats, predicted tokens) of one window, unmodified (``spec`` None) or under
    the ablation ``spec`` ("v=x", "zero-head:1.3", …; mean-head takes the means over this window).

    The one place the corpus runner touches :mod:`attnkit.ablations`: re-point it here when the
    ablations registry changes.
    """
    from . import ablations as A

    iv = None
    if spec is not None:
        cfg = weights.config
        sp = A.parse_spec(spec, n_layers=cfg.n_layers, n_heads=cfg.n_heads)
        kind = A.get_kind(sp.kind)
        ok, why = kind.available(cfg)
        if not ok:
            raise A.AblationError(why)
        iv = kind.intervention(sp, cfg, A.head_means(weights, [ids]) if kind.needs_means() else None)
    lo = A.loss(weights, [ids], iv)
    return float(sum(float(a.sum()) for a in lo.nll)), lo.tokens


def check_ablation(spec: str) -> str:
    """The spec in its canonical spelling (CorpusError when it cannot be parsed)."""
    from . import ablations as A

    try:
        return str(A.parse_spec(spec))
    except A.AblationError as e:
        raise CorpusError(f"--ablation {spec!r}: {e}") from None


def _head_scorer():
    """An Intervention that computes metrics.head_scores from each layer's pattern as the forward
    pass makes it (so the L patterns of a long window are never held together)."""
    from . import metrics as M
    from .model import Intervention

    class HeadScorer(Intervention):
        def __init__(self, ids):
            super().__init__()
            self.ids = ids                  # [B, T]
            self.per_layer: list[dict] = []  # per layer: stat -> [B, H]

        def pattern(self, pattern, layer):
            per_b = [M.head_scores(pattern[b], self.ids[b]) for b in range(pattern.shape[0])]
            self.per_layer.append({k: np.stack([d[k].double().cpu().numpy() for d in per_b]) for k in per_b[0]})

    return HeadScorer


def _arrow():
    import pyarrow as pa

    return pa


def _schemas(stats):
    pa = _arrow()
    key = [("doc", pa.int64()), ("window", pa.int32())]
    lh = key + [("layer", pa.int32()), ("head", pa.int32())]
    return {
        "documents": pa.schema([("doc", pa.int64()), ("doc_id", pa.string()), ("chars", pa.int64()),
                                ("chars_cut", pa.int64()),
                                ("windows", pa.int32()), ("status", pa.string()), ("stage", pa.string()),
                                ("error", pa.string())]),
        "windows": pa.schema(key + [("start", pa.int64()), ("tokens", pa.int32())]),
        "heads": pa.schema(lh + [(s, pa.float64()) for s in stats]),
        "entropy": pa.schema(lh + [("entropy", pa.list_(pa.float32())), ("first_token", pa.list_(pa.float32()))]),
        "ablation": pa.schema(key + [("ablation", pa.string()), ("nll_sum", pa.float64()), ("tokens", pa.int32()),
                                     ("nats", pa.float64()), ("increase", pa.float64())]),
    }


def _table(schema, cols: dict):
    pa = _arrow()
    arrays = []
    for f in schema:
        v = cols.get(f.name, [])
        arrays.append(pa.array(v, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


class ShardWorker:
    """Turns a batch of shards into result tables; the model is loaded once, in ``__init__``.

    The same object serves both engines: the local engine calls it in-process, the Ray engine gives
    the class to ``Dataset.map_batches`` (one actor per pool slot). A batch is ``{"shard": [k…],
    "docs": [JSON list of documents…]}``; the answer is ``{"shard": [k…], "meta": [JSON…], <table>:
    [Arrow IPC bytes…]}`` for the tables of :func:`tables_for`.
    """

    def __init__(self, settings: dict):
        from .loading import load

        self.settings = dict(settings)
        self.threads = int(settings.get("threads") or 1)
        self.m = load(settings["model"], settings.get("device") or "cpu")
        cfg = self.m.config
        self.window = min(int(settings.get("window") or cfg.n_ctx), cfg.n_ctx)
        self.batch = int(settings.get("batch") or 1)
        self.analyses = list(settings["analyses"])
        self.ablations = list(settings.get("ablations") or ())
        for spec in self.ablations:         # against this model's layers and heads, before any work
            from . import ablations as A

            A.parse_spec(spec, n_layers=cfg.n_layers, n_heads=cfg.n_heads)
        from .metrics import HEAD_STATS

        self.stats = list(HEAD_STATS)
        self.schemas = _schemas(self.stats)

    def meta(self) -> dict:
        cfg = self.m.config
        return {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "n_ctx": cfg.n_ctx, "window": self.window,
                "device": str(self.m.device), "source": self.m.source}

    def __call__(self, batch: dict) -> dict:
        out: dict[str, list] = {"shard": [], "meta": []}
        names = tables_for(self.analyses)
        for n in names:
            out[n] = []
        import torch

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
                out[n].append(_to_ipc(tables[n]))
        return {k: np.array(v, dtype=np.int64 if k == "shard" else object) for k, v in out.items()}

    # one shard ----------------------------------------------------------------
    def process(self, docs: list[dict]) -> dict:
        from .entropy import documents

        rows = {d["doc"]: {"doc": d["doc"], "doc_id": d["doc_id"], "chars": len(d["text"] or ""),
                           "chars_cut": max(0, len(d["text"] or "") - MAX_CHARS), "windows": 0,
                           "status": "ok", "stage": None, "error": None} for d in docs}

        def fail(doc, stage, err):
            r = rows[doc]
            r.update(status="error", stage=stage, error=err if isinstance(err, str) else _err(err), windows=0)

        wins = []                         # (doc, window index, ids)
        for d in docs:
            if d.get("error"):
                fail(d["doc"], "read", d["error"])
                continue
            try:
                ws, info = documents(self.m.encode, [d["text"]], self.window, split=True)
            except Exception as e:    # noqa: BLE001 - one bad document must not stop the run
                fail(d["doc"], "tokenize", e)
                continue
            if not ws:
                rows[d["doc"]].update(status="short", stage="window", error="fewer than 2 tokens: nothing to attend over")
                continue
            rows[d["doc"]]["windows"] = len(ws)
            wins += [(d["doc"], w, ids) for w, ids in enumerate(ws)]

        cols = {n: {} for n in ("windows", "heads", "entropy", "ablation")}
        failed: set[int] = set()
        for group in _batches(wins, self.batch):
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
                            fail(one[0], "analysis", e)
            for table, part in res:
                for k, v in part.items():
                    cols[table].setdefault(k, []).extend(v)
        tables = {"documents": _table(self.schemas["documents"], _columns(sorted(rows.values(), key=lambda r: r["doc"])))}
        for name in tables_for(self.analyses)[1:]:
            t = _table(self.schemas[name], cols[name])
            if failed and t.num_rows:
                import pyarrow.compute as pc

                t = t.filter(pc.invert(pc.is_in(t["doc"], value_set=_arrow().array(sorted(failed), _arrow().int64()))))
            tables[name] = _sorted(t, name)
        return tables

    def _analyse(self, group) -> list[tuple[str, dict]]:
        """Every analysis of one batch of equal-length windows: [(table, columns)…]."""
        import torch

        from .entropy import entropy_profile
        from .model import run

        w = self.m.weights
        ids = torch.tensor([g[2] for g in group], dtype=torch.long)
        B, T = ids.shape
        L, H = self.m.config.n_layers, self.m.config.n_heads
        docs = [g[0] for g in group]
        nums = [g[1] for g in group]
        out = [("windows", {"doc": docs, "window": nums, "start": [n * self.window for n in nums], "tokens": [T] * B})]
        scorer = _head_scorer()(ids) if "heads" in self.analyses else None
        with torch.no_grad():
            if "entropy" in self.analyses:
                curves = entropy_profile(w, ids, intervention=scorer)
                ent = curves.entropy.float().cpu().numpy()          # [B, L, H, T]
                first = curves.first_token.float().cpu().numpy()
                out.append(("entropy", {
                    "doc": np.repeat(docs, L * H).tolist(), "window": np.repeat(nums, L * H).tolist(),
                    "layer": np.tile(np.repeat(np.arange(L), H), B).tolist(), "head": np.tile(np.arange(H), B * L).tolist(),
                    "entropy": list(ent.reshape(B * L * H, T)), "first_token": list(first.reshape(B * L * H, T)),
                }))
            elif scorer is not None:
                run(w, ids, intervention=scorer)
            if scorer is not None:
                c = {"doc": np.repeat(docs, L * H).tolist(), "window": np.repeat(nums, L * H).tolist(),
                     "layer": np.tile(np.repeat(np.arange(L), H), B).tolist(), "head": np.tile(np.arange(H), B * L).tolist()}
                for s in self.stats:
                    c[s] = np.stack([lay[s] for lay in scorer.per_layer], 1).reshape(-1).tolist()   # [B, L, H]
                out.append(("heads", c))
            if "ablation-loss" in self.analyses:
                c = {k: [] for k in ("doc", "window", "ablation", "nll_sum", "tokens", "nats", "increase")}
                for (doc, n, window_ids) in group:
                    base, tokens = ablation_loss(w, window_ids, None)
                    for spec in [None, *self.ablations]:
                        nll, _ = (base, tokens) if spec is None else ablation_loss(w, window_ids, spec)
                        c["doc"].append(doc)
                        c["window"].append(n)
                        c["ablation"].append("baseline" if spec is None else spec)
                        c["nll_sum"].append(nll)
                        c["tokens"].append(tokens)
                        c["nats"].append(nll / tokens)
                        c["increase"].append((nll - base) / tokens)
                out.append(("ablation", c))
        return out


def tables_for(analyses) -> list[str]:
    """The tables a run writes: documents, then windows and one per analysis."""
    return ["documents", "windows"] + [TABLES[a] for a in ANALYSES if a in analyses]


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


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


_SORT = {"windows": ["doc", "window"], "heads": ["doc", "window", "layer", "head"],
         "entropy": ["doc", "window", "layer", "head"], "ablation": ["doc", "window"]}


def _sorted(t, name):
    if t.num_rows == 0:
        return t
    import pyarrow.compute as pc

    # Arrow's sort is stable: the ablation rows of a window keep their order (baseline first)
    idx = pc.sort_indices(t, sort_keys=[(k, "ascending") for k in _SORT[name]])
    return t.take(idx)


def _to_ipc(table) -> bytes:
    pa = _arrow()
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _from_ipc(data: bytes):
    pa = _arrow()
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


# ----------------------------------------------------------------------------- progress

class Progress:
    """A one-line progress bar on ``stream``: documents done, documents per second, time left.

    Called as ``progress(done, total, info)`` after each finished shard; ``info`` has ``resumed``
    (documents found finished), ``errors`` and ``shard``. On a terminal the line is redrawn; in a log
    a line is printed at most every ``every`` seconds (and at the end).
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


# ----------------------------------------------------------------------------- engines

def _local_engine(settings, items):
    """In-process: one ShardWorker, called on one shard at a time (exactly what each Ray actor does)."""
    worker = ShardWorker(settings)
    for it in items:
        yield from _rows(worker({"shard": np.array([it["shard"]]), "docs": np.array([it["docs"]], dtype=object)}))


def _rows(batch: dict):
    for i in range(len(batch["shard"])):
        yield {k: v[i] for k, v in batch.items()}


def _ray_engine(settings, items, address=None, workers=None, gpus_per_worker=0.0):
    """Ray Data: the shards as a dataset, ``map_batches(ShardWorker)`` on an actor pool of ``workers``
    actors (each loads the model once; ``gpus_per_worker`` > 0 puts it on a GPU), results streamed back
    to the driver as they finish. Each actor reserves ``settings["threads"]`` CPUs and runs torch with
    that many threads. Uses the running Ray if there is one, else ``ray.init(address)``."""
    import ray

    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR", configure_logging=True)
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        res = ray.cluster_resources()
        cpus_per_worker = settings["threads"]
        if workers is None:
            if gpus_per_worker:
                workers = max(1, int(res.get("GPU", 0) // gpus_per_worker))
            else:
                workers = max(1, int(res.get("CPU", 1) // max(cpus_per_worker, 1e-9)))
        workers = max(1, min(int(workers), len(items)))
        fits = res.get("GPU", 0) // gpus_per_worker if gpus_per_worker else res.get("CPU", 0) // cpus_per_worker
        if workers > fits:
            print(f"attnkit corpus: {workers} actors asked for, the cluster has room for {int(fits)} now "
                  "(the rest wait for the autoscaler, if any)", file=sys.stderr)
        settings = dict(settings)
        if gpus_per_worker and settings.get("device", "cpu") == "cpu":
            settings["device"] = "cuda"
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        out = ds.map_batches(
            ShardWorker, fn_constructor_kwargs={"settings": settings}, batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=cpus_per_worker,
            num_gpus=gpus_per_worker or None, runtime_env=_runtime_env(address),
        )
        for row in out.iter_rows():
            yield row
    finally:
        if started:
            ray.shutdown()


def _runtime_env(address) -> dict:
    """How Ray workers import attnkit: on this machine via PYTHONPATH, on a remote cluster by shipping
    the package (``py_modules``; it carries the shipped attnkit-tiny, hub models come from each node's
    HuggingFace cache or the hub)."""
    pkg = Path(__file__).resolve().parent
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_HOME", "TRANSFORMERS_OFFLINE") if k in os.environ}
    if address in (None, "", "local"):
        env["PYTHONPATH"] = os.pathsep.join([str(pkg.parent)] + ([os.environ["PYTHONPATH"]]
                                                                 if os.environ.get("PYTHONPATH") else []))
        return {"env_vars": env}
    return {"py_modules": [str(pkg)], "env_vars": env}


ENGINES = {"local": _local_engine, "ray": _ray_engine}


# ----------------------------------------------------------------------------- one run

def _shards(docs, size):
    return [docs[i:i + size] for i in range(0, len(docs), size)]


def _digest(docs) -> str:
    return hashlib.sha256(json.dumps(docs, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def _write_atomic(path: Path, write):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def _part(k: int) -> str:
    return f"part-{k:05d}"


def settings_for(model, analyses, window=None, batch=4, shard_docs=SHARD_DOCS, ablations=DEFAULT_ABLATIONS,
                 field="text", device="cpu", threads=1) -> dict:
    """Checked settings (CorpusError when one is out of range); these decide the numbers."""
    if isinstance(analyses, str):
        analyses = [a.strip() for a in analyses.split(",") if a.strip()]
    analyses = list(dict.fromkeys(analyses))
    if not analyses:
        raise CorpusError("no analysis given; choose from " + ", ".join(ANALYSES))
    for a in analyses:
        if a in NOT_YET:
            raise CorpusError(f"analysis {a!r} is not available: {NOT_YET[a]}")
        if a not in ANALYSES:
            raise CorpusError(f"unknown analysis {a!r}; choose from {', '.join(ANALYSES)}")
    if window is not None and int(window) < 2:
        raise CorpusError(f"--window must be at least 2 tokens, got {window}")
    if int(batch) < 1:
        raise CorpusError(f"--batch must be at least 1, got {batch}")
    if int(shard_docs) < 1:
        raise CorpusError(f"--shard-docs must be at least 1, got {shard_docs}")
    if threads is None or int(threads) < 1:
        raise CorpusError(f"--threads must be at least 1, got {threads}")
    abl = [check_ablation(s) for s in ablations] if "ablation-loss" in analyses else []
    if "baseline" in abl or len(set(abl)) != len(abl):
        raise CorpusError("--ablation: each ablation once")
    return {"format": FORMAT, "model": str(model), "analyses": [a for a in ANALYSES if a in analyses],
            "window": None if window is None else int(window), "batch": int(batch), "shard_docs": int(shard_docs),
            "ablations": abl, "field": field, "device": device, "threads": int(threads)}


def _check_manifest(out: Path, settings: dict, docs) -> dict:
    """Write the manifest, or check that the one in ``out`` was made with the same settings."""
    path = out / "manifest.json"
    mine = {k: settings[k] for k in RESULT_KEYS}
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise CorpusError(f"{path} is not valid JSON: is {out} a corpus result?") from None
        diff = [k for k in RESULT_KEYS if old.get("settings", {}).get(k) != mine[k]]
        if diff:
            was = old.get("settings", {})
            what = ", ".join(f"{k}: {was.get(k)!r} there, {mine[k]!r} now" for k in diff)
            raise CorpusError(f"{out} holds a run with other settings ({what}); "
                              "use another --out, or the same settings to resume")
        if old.get("n_docs") != len(docs):        # the input grew or shrank: the shards say what is finished
            old["n_docs"] = len(docs)
            _write_atomic(path, lambda p: p.write_text(json.dumps(old, indent=1), encoding="utf-8"))
        return old
    elif out.exists() and any(out.iterdir()):
        raise CorpusError(f"{out} exists and is not a corpus result folder (no manifest.json); use an empty or new folder")
    man = {"settings": mine, "n_docs": len(docs), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_atomic(path, lambda p: p.write_text(json.dumps(man, indent=1), encoding="utf-8"))
    return man


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


def run_corpus(input, out, model="attnkit-tiny", analyses=("heads", "entropy", "ablation-loss"), *,
               engine: str = "local", address: str | None = None, window: int | None = None, batch: int = 4,
               shard_docs: int = SHARD_DOCS, ablations=DEFAULT_ABLATIONS, field: str = "text", device: str = "cpu",
               threads: int = 1, workers: int | None = None, gpus_per_worker: float = 0.0,
               max_docs: int | None = None, bootstrap: int = 1000,
               progress=None, summary: bool = True) -> RunReport:
    """Run the analyses over the documents of ``input`` into the folder ``out`` (see the module doc).

    Shards already finished in ``out`` (same settings, same documents) are skipped. ``progress(done,
    total, info)`` is called after each shard is written (an exception there stops the run; what is
    written stays and a rerun resumes). With ``summary`` the summary files are written at the end.
    """
    if engine not in ENGINES:
        raise CorpusError(f"unknown engine {engine!r}; use local or ray")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise CorpusError("--engine ray needs Ray: pip install ray (the local engine does not)")
    settings = settings_for(model, analyses, window, batch, shard_docs, ablations, field, device, threads)
    docs, notes = read_inputs(input, field, max_docs)
    for n in notes:
        print(f"attnkit corpus: {n}", file=sys.stderr)
    out = Path(out)
    _check_manifest(out, settings, docs)
    shards = _shards(docs, settings["shard_docs"])
    digests = [_digest(s) for s in shards]
    names = tables_for(settings["analyses"])
    pending, resumed = [], 0
    for k, s in enumerate(shards):
        marker = out / "_done" / f"{_part(k)}.json"
        try:
            ok = json.loads(marker.read_text(encoding="utf-8")).get("hash") == digests[k]
        except (OSError, ValueError):
            ok = False
        ok = ok and all((out / n / f"{_part(k)}.parquet").exists() for n in names)
        if ok:
            resumed += len(s)
        else:
            pending.append(k)
            marker.unlink(missing_ok=True)     # its documents changed: not finished until redone
    for stale in sorted((out / "_done").glob("part-*.json")) if (out / "_done").exists() else []:
        if int(stale.stem.split("-")[1]) >= len(shards):
            stale.unlink()                # the input shrank: shards past its end are no longer part of it
            for n in names:
                (out / n / f"{stale.stem}.parquet").unlink(missing_ok=True)
    items = [{"shard": k, "docs": json.dumps(shards[k], ensure_ascii=False)} for k in pending]
    t0 = time.perf_counter()
    done, errors, compute = resumed, 0, 0.0
    info = {"resumed": resumed, "errors": 0, "started": t0}
    if items:
        if engine == "ray":
            rows = _ray_engine(settings, items, address, workers, gpus_per_worker)
        else:
            rows = _local_engine(settings, items)
        import pyarrow.parquet as pq

        try:
            for row in rows:
                k = int(row["shard"])
                for n in names:
                    t = _from_ipc(row[n])
                    _write_atomic(out / n / f"{_part(k)}.parquet", lambda p, t=t: pq.write_table(t, p))
                    if n == "documents":
                        errs = sum(1 for s in t["status"].to_pylist() if s == "error")
                meta = json.loads(row["meta"])
                _write_atomic(out / "_done" / f"{_part(k)}.json", lambda p: p.write_text(json.dumps(
                    {"shard": k, "hash": digests[k], "docs": len(shards[k]), "errors": errs, "meta": meta}),
                    encoding="utf-8"))
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


# ----------------------------------------------------------------------------- summary

class _Boot:
    """Ratio means Σ num / Σ den over documents, with the same sums under B bootstrap resamplings of the
    documents (weights W [B, D]: how often each document is drawn), accumulated shard by shard so a
    corpus never has to be held at once."""

    def __init__(self, W, shape, dshape):
        self.W = W
        self.S, self.N = np.zeros(shape), np.zeros(dshape)
        B = 0 if W is None else W.shape[0]
        self.bS, self.bN = np.zeros((B, *shape)), np.zeros((B, *dshape))

    def add(self, d, S, N):
        """d [n] global document indices, S [n, *shape], N [n, *dshape]: per-document sums."""
        self.S += S.sum(0)
        self.N += N.sum(0)
        if self.W is not None and self.W.shape[0]:
            w = self.W[:, d]
            self.bS += (w @ S.reshape(len(d), -1)).reshape(self.bS.shape)
            self.bN += (w @ N.reshape(len(d), -1)).reshape(self.bN.shape)

    def result(self, level, num=None, bnum=None):
        """(mean, lo, hi) of Σ num / Σ den; ``num``/``bnum`` replace the accumulated numerators."""
        num = self.S if num is None else num
        bnum = self.bS if bnum is None else bnum
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = num / self.N
            if self.W is None or not self.W.shape[0]:
                nan = np.full(np.broadcast(mean).shape, np.nan)
                return mean, nan, nan.copy()
            est = bnum / self.bN
        q = (1 - level) / 2 * 100
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN cells (no document there)
            lo, hi = np.nanpercentile(est, [q, 100 - q], axis=0)
        return mean, lo, hi


def _done_shards(out: Path, names) -> list[int]:
    ks = []
    for m in sorted((out / "_done").glob("part-*.json")) if (out / "_done").exists() else []:
        k = int(m.stem.split("-")[1])
        if all((out / n / f"{_part(k)}.parquet").exists() for n in names):
            ks.append(k)
    return ks


def _manifest(out: Path) -> dict:
    try:
        return json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except OSError:
        raise CorpusError(f"{out} is not a corpus result (no manifest.json)") from None
    except ValueError:
        raise CorpusError(f"{out}/manifest.json is not valid JSON") from None


def summarise(out, bootstrap: int = 1000, level: float = 0.95, seed: int = 0, max_points: int = 64,
              write: bool = True) -> "CorpusResult":
    """Means with percentile-bootstrap intervals (documents resampled ``bootstrap`` times, fixed
    ``seed``) over the finished shards of the result folder ``out``; ``write`` saves them as
    ``summary/*.parquet`` + ``summary.json``. See :func:`load_result` for the tables."""
    import pandas as pd
    import pyarrow.parquet as pq

    from .entropy import sample_positions

    out = Path(out)
    man = _manifest(out)
    st = man["settings"]
    names = tables_for(st["analyses"])
    ks = _done_shards(out, names)
    read = lambda name, k, **kw: pq.read_table(out / name / f"{_part(k)}.parquet", **kw)  # noqa: E731
    documents = (pd.concat([read("documents", k).to_pandas() for k in ks], ignore_index=True) if ks
                 else _schemas([])["documents"].empty_table().to_pandas())
    windows = (pd.concat([read("windows", k).to_pandas() for k in ks], ignore_index=True) if ks
               else _schemas([])["windows"].empty_table().to_pandas())
    metas = [json.loads((out / "_done" / f"{_part(k)}.json").read_text(encoding="utf-8")).get("meta", {}) for k in ks]
    meta = metas[0] if metas else {}
    ok_docs = np.array(sorted(set(windows["doc"].tolist())), dtype=np.int64)
    D = len(ok_docs)
    rng = np.random.default_rng(seed)
    W = rng.multinomial(D, np.full(D, 1.0 / D), size=int(bootstrap)).astype(np.float64) if D >= 2 and bootstrap else None
    dix = lambda docs: np.searchsorted(ok_docs, np.asarray(docs, dtype=np.int64))  # noqa: E731
    L, H = meta.get("n_layers"), meta.get("n_heads")
    entropy_resamples = None
    result = CorpusResult(path=str(out), info={}, documents=documents)

    if "heads" in st["analyses"] and D:
        from .metrics import HEAD_STATS

        stats = list(HEAD_STATS)
        acc = _Boot(W, (L, H, len(stats)), (L, H, len(stats)))
        for k in ks:
            t = read("heads", k).to_pandas()
            if not len(t):
                continue
            u, inv = np.unique(dix(t["doc"]), return_inverse=True)
            v = t[stats].to_numpy(np.float64)
            S = np.zeros((len(u), L, H, len(stats)))
            N = np.zeros_like(S)
            where = (inv, t["layer"].to_numpy(), t["head"].to_numpy())
            np.add.at(S, where, np.nan_to_num(v))
            np.add.at(N, where, ~np.isnan(v))
            acc.add(u, S, N)
        mean, lo, hi = acc.result(level)
        ll, hh, ss = np.meshgrid(np.arange(L), np.arange(H), np.arange(len(stats)), indexing="ij")
        result.heads = pd.DataFrame({
            "layer": ll.ravel(), "head": hh.ravel(), "label": [head_label(int(l), int(h)) for l, h in zip(ll.ravel(), hh.ravel())],
            "stat": np.array(stats)[ss.ravel()], "mean": mean.ravel(), "lo": lo.ravel(), "hi": hi.ravel(),
            "windows": acc.N.ravel().astype(np.int64),
        })

    if "entropy" in st["analyses"] and D:
        T = int(windows["tokens"].max())
        P = sample_positions(T, max_points, head=min(16, max_points))
        K = 2 * L * (H + 1) * len(P)
        We = None if W is None else W[: max(50, min(W.shape[0], ENTROPY_BOOT_CELLS // K))]
        entropy_resamples = 0 if We is None else We.shape[0]
        acc = _Boot(We, (2, L, H + 1, len(P)), (1, 1, 1, len(P)))
        for k in ks:
            t = read("entropy", k)
            if not t.num_rows:
                continue
            u, inv = np.unique(dix(t["doc"].to_numpy()), return_inverse=True)
            layer, head = t["layer"].to_numpy(), t["head"].to_numpy()
            S = np.zeros((len(u), 2, L, H + 1, len(P)))
            N = np.zeros((len(u), 1, 1, 1, len(P)))
            for q, col in enumerate(("entropy", "first_token")):
                arr = t[col].combine_chunks()
                vals = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
                offs = arr.offsets.to_numpy()
                lens = np.diff(offs)
                for j, p in enumerate(P):
                    m = lens > p
                    if not m.any():
                        continue
                    x = vals[offs[:-1][m] + p]
                    np.add.at(S, (inv[m], q, layer[m], head[m], j), x)
                    np.add.at(S, (inv[m], q, layer[m], H, j), x / H)
                    if q == 0:
                        np.add.at(N, (inv[m], 0, 0, 0, j), (head[m] == 0) & (layer[m] == 0))
            acc.add(u, S, N)
        mean, lo, hi = acc.result(level)
        qq, ll, hh, pp = np.meshgrid(np.arange(2), np.arange(L), np.arange(H + 1), np.arange(len(P)), indexing="ij")
        result.entropy = pd.DataFrame({
            "quantity": np.array(["entropy", "first_token"])[qq.ravel()], "layer": ll.ravel(),
            "head": pd.array([None if h == H else int(h) for h in hh.ravel()], dtype="Int64"),
            "position": P[pp.ravel()], "n": P[pp.ravel()] + 1,
            "mean": mean.ravel(), "lo": lo.ravel(), "hi": hi.ravel(),
            "windows": np.broadcast_to(acc.N, mean.shape).ravel().astype(np.int64),
            "bound": np.where(qq.ravel() == 0, np.log(P[pp.ravel()] + 1.0), 1.0),
        })

    if "ablation-loss" in st["analyses"] and D:
        specs = ["baseline", *st["ablations"]]
        acc = _Boot(W, (len(specs),), (1,))
        for k in ks:
            t = read("ablation", k).to_pandas()
            if not len(t):
                continue
            u, inv = np.unique(dix(t["doc"]), return_inverse=True)
            S = np.zeros((len(u), len(specs)))
            N = np.zeros((len(u), 1))
            a = t["ablation"].map({s: i for i, s in enumerate(specs)}).to_numpy()
            np.add.at(S, (inv, a), t["nll_sum"].to_numpy())
            base = a == 0
            np.add.at(N, (inv[base], 0), t["tokens"].to_numpy()[base])
            acc.add(u, S, N)
        mean, lo, hi = acc.result(level)
        inc = acc.S - acc.S[:1]
        binc = acc.bS - acc.bS[:, :1] if acc.bS.shape[0] else acc.bS
        imean, ilo, ihi = acc.result(level, inc, binc)
        result.ablation = pd.DataFrame({
            "ablation": specs, "nats": mean, "lo": lo, "hi": hi,
            "increase": imean, "increase_lo": ilo, "increase_hi": ihi,
            "tokens": np.repeat(acc.N.astype(np.int64), len(specs)),
        })

    status = documents["status"].value_counts().to_dict() if len(documents) else {}
    result.info = {
        "settings": st, "model": meta, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "documents": {"total": man.get("n_docs"), "finished": int(len(documents)), "ok": int(status.get("ok", 0)),
                      "short": int(status.get("short", 0)), "error": int(status.get("error", 0))},
        "windows": int(len(windows)), "tokens": int(windows["tokens"].sum()) if len(windows) else 0,
        "shards_done": ks, "complete": len(documents) == man.get("n_docs"),
        "interval": {"method": "percentile bootstrap, documents resampled", "level": level,
                     "resamples": int(bootstrap) if W is not None else 0, "seed": seed,
                     "resamples_entropy": entropy_resamples},
    }
    if write:
        for name in ("heads", "entropy", "ablation"):
            df = getattr(result, name)
            if df is not None:
                _write_atomic(out / "summary" / f"{name}.parquet", lambda p, df=df: df.to_parquet(p, index=False))
        _write_atomic(out / "summary.json", lambda p: p.write_text(json.dumps(result.info, indent=1), encoding="utf-8"))
    return result


@dataclass
class CorpusResult:
    """A corpus result folder, summarised (see :func:`load_result`)."""

    path: str
    info: dict
    documents: object                 # pandas DataFrame, one row per finished document
    heads: object | None = None
    entropy: object | None = None
    ablation: object | None = None

    @property
    def errors(self):
        """The documents that failed (status 'error') or had under 2 tokens (status 'short')."""
        return self.documents[self.documents["status"] != "ok"].reset_index(drop=True)

    @property
    def complete(self) -> bool:
        return bool(self.info.get("complete"))

    def head_stat(self, stat: str):
        """One head statistic as compare.scores_frame lays it out — head ('L.H'), layer, head_index,
        ``stat`` (the corpus mean) — plus lo, hi and windows. KeyError for a statistic not in the result."""
        if self.heads is None:
            raise KeyError("this corpus run has no head statistics (analysis 'heads')")
        df = self.heads[self.heads["stat"] == stat]
        if not len(df):
            raise KeyError(f"no head statistic {stat!r}; there are: {', '.join(dict.fromkeys(self.heads['stat']))}")
        return (df.rename(columns={"label": "head", "head": "head_index", "mean": stat})
                [["head", "layer", "head_index", stat, "lo", "hi", "windows"]].reset_index(drop=True))

    def curve(self, quantity: str = "entropy", head: int | None = None, layers=None, normalised: bool = False):
        """Corpus curves per layer in the columns of entropy.curve_frame — layer, position, n, mean, lo,
        hi, docs (here: windows reaching the position), bound — for one head or (None) the mean over
        heads; ``normalised`` divides entropy by ln n (position 0 left out)."""
        if self.entropy is None:
            raise KeyError("this corpus run has no entropy curves (analysis 'entropy')")
        e = self.entropy[self.entropy["quantity"] == quantity]
        e = e[e["head"].isna()] if head is None else e[e["head"] == int(head)]
        if layers is not None:
            e = e[e["layer"].isin(list(layers))]
        e = e.rename(columns={"windows": "docs"})[["layer", "position", "n", "mean", "lo", "hi", "docs", "bound"]]
        if normalised:
            if quantity != "entropy":
                raise ValueError("only the entropy has a normalised view")
            e = e[e["position"] >= 1].copy()
            for c in ("mean", "lo", "hi"):
                e[c] = e[c] / e["bound"]
            e["bound"] = 1.0
        return e.reset_index(drop=True)


def load_result(path) -> CorpusResult:
    """Read a corpus result folder for display: the summary tables, with intervals.

    * ``heads``: one row per (layer, head, stat) — ``layer``, ``head``, ``label`` ('L1H2'), ``stat`` (a
      name of :data:`attnkit.metrics.HEAD_STATS`), ``mean``, ``lo``, ``hi`` (the interval), ``windows``
      (windows where the statistic is defined).
    * ``entropy``: one row per (quantity, layer, head, position) — ``quantity`` ('entropy' in nats or
      'first_token'), ``layer``, ``head`` (nullable Int64; <NA> = mean over the layer's heads),
      ``position`` i, ``n`` = i + 1, ``mean``, ``lo``, ``hi``, ``windows`` (windows reaching i),
      ``bound`` (ln n for entropy, 1 for first_token: divide by it for the normalised view). At most
      64 positions (all of the first 16, then log-spaced, always the last).
    * ``ablation``: one row per ablation ('baseline' first) — ``nats`` (per predicted token),
      ``lo``, ``hi``, ``increase`` over the baseline with ``increase_lo``/``increase_hi``, ``tokens``.
    * ``documents`` (every finished document with its status) and ``errors`` (those not 'ok').
    * ``head_stat(stat)`` and ``curve(quantity, head, layers, normalised)``: the same numbers in the
      layouts of :func:`attnkit.compare.scores_frame` and :func:`attnkit.entropy.curve_frame` (plus
      ``lo``/``hi``), to draw beside the current prompt's.
    * ``info``: settings, model shape, counts, ``complete``, the interval method (``resamples``;
      ``resamples_entropy`` is fewer for very large models, to bound memory).

    A table is None when its analysis was not run. When the saved summary is missing or older than the
    finished shards (a run still going, or interrupted), the summary is computed here from the shards
    and not written (that can take a while on a large corpus: callers that redraw, like pages, should
    cache on the path and the mtime of ``summary.json`` and the ``_done`` folder). CorpusError when
    ``path`` is not a corpus result.
    """
    import pandas as pd

    out = Path(path)
    man = _manifest(out)
    ks = _done_shards(out, tables_for(man["settings"]["analyses"]))
    try:
        info = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = None
    if info is None or info.get("shards_done") != ks:
        return summarise(out, write=False)
    documents = pd.concat([pd.read_parquet(out / "documents" / f"{_part(k)}.parquet") for k in ks], ignore_index=True)
    res = CorpusResult(path=str(out), info=info, documents=documents)
    for name in ("heads", "entropy", "ablation"):
        f = out / "summary" / f"{name}.parquet"
        if f.exists():
            setattr(res, name, pd.read_parquet(f))
    return res


# ----------------------------------------------------------------------------- command line

def _parser():
    p = argparse.ArgumentParser(
        prog="python -m attnkit corpus",
        description="Head statistics, entropy curves and ablation losses over a corpus, locally or on Ray.",
        epilog="analyses: " + "; ".join(f"{k}: {v}" for k, v in ANALYSES.items()))
    p.add_argument("--model", default=None, help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--input", help=".jsonl (one document per line), .txt/.md (one document) or a folder of them")
    p.add_argument("--field", default="text", help="field of a .jsonl object holding the document (default text)")
    p.add_argument("--analyses", default="heads,entropy,ablation-loss", help="comma-separated: " + ", ".join(ANALYSES))
    p.add_argument("--ablation", action="append", default=None, metavar="SPEC",
                   help="an ablation for ablation-loss (repeatable; default: " + ", ".join(DEFAULT_ABLATIONS) + ")")
    p.add_argument("--out", help="result folder (created; a rerun resumes it)")
    p.add_argument("--engine", default="local", choices=sorted(ENGINES))
    p.add_argument("--address", default=None, help="Ray cluster: auto or HOST:PORT (default: start Ray here)")
    p.add_argument("--workers", type=int, default=None, help="Ray actors (default: as many as the cluster holds)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0, help="> 0 runs each actor's model on a GPU")
    p.add_argument("--window", type=int, default=None, help="tokens per window (default: the model's context)")
    p.add_argument("--batch", type=int, default=4, help="windows of equal length per forward pass (default 4)")
    p.add_argument("--shard-docs", type=int, default=SHARD_DOCS, help=f"documents per shard (default {SHARD_DOCS})")
    p.add_argument("--max-docs", type=int, default=None, help="use only the first N documents")
    p.add_argument("--device", default="cpu", help="cpu, cuda, mps or auto (local engine; default cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per worker = CPUs per Ray actor (default 1; the numbers depend on it "
                        "in the last float bits, so a resumed run must use the same)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals (default 1000)")
    p.add_argument("--bench", action="store_true", help="measure documents/second: local, then Ray with --workers")
    p.add_argument("--bench-docs", type=int, default=48)
    p.add_argument("--json", dest="json_out", default=None, help="(--bench) write the measurements here")
    return p


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    prog = "attnkit corpus"
    try:
        for name in ("workers", "max_docs", "bench_docs"):
            v = getattr(a, name)
            if v is not None and v < 1:
                raise CorpusError(f"--{name.replace('_', '-')} must be at least 1, got {v}")
        if a.bootstrap < 0 or a.gpus_per_worker < 0:
            raise CorpusError("--bootstrap and --gpus-per-worker must not be negative")
        if a.bench:
            res = bench(model=a.model or "attnkit-tiny", docs=a.bench_docs, window=a.window or 128,
                        workers=a.workers or 2, batch=a.batch)
            if a.json_out:
                Path(a.json_out).write_text(json.dumps(res, indent=1), encoding="utf-8")
            return 0
        if not a.input or not a.out:
            raise CorpusError("--input and --out are required")
        if a.engine == "ray" and importlib.util.find_spec("ray") is None:
            raise CorpusError("--engine ray needs Ray: pip install ray (the local engine does not)")
        if a.engine == "local" and (a.address or a.workers or a.gpus_per_worker):
            raise CorpusError("--address, --workers and --gpus-per-worker are for --engine ray")
        model = a.model
        ablations = a.ablation if a.ablation is not None else DEFAULT_ABLATIONS
        settings_for(model or "?", a.analyses, a.window, a.batch, a.shard_docs, ablations, a.field, a.device, a.threads)
        read_inputs(a.input, a.field, a.max_docs)          # a missing or unusable input: stop before any work
        if model is None:
            from .loading import default_model

            model, notice = default_model()
            if notice:
                print(notice, file=sys.stderr)
        rep = run_corpus(a.input, a.out, model, a.analyses, engine=a.engine, address=a.address, window=a.window,
                         batch=a.batch, shard_docs=a.shard_docs, ablations=ablations, field=a.field,
                         device=a.device, threads=a.threads, workers=a.workers, gpus_per_worker=a.gpus_per_worker,
                         max_docs=a.max_docs, bootstrap=a.bootstrap,
                         progress=Progress())
    except CorpusError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except Exception as e:       # noqa: BLE001 - a model that will not load (locally or in a Ray actor)
        from .loading import LoadError

        if isinstance(e, LoadError):
            print(f"{prog}: {e}", file=sys.stderr)
            return 2
        print(f"{prog}: the run stopped: {_err(e)}; finished shards are kept, rerun to resume", file=sys.stderr)
        return 1
    res = load_result(a.out)
    _print_summary(rep, res)
    return 0


def _print_summary(rep: RunReport, res: CorpusResult):
    i = res.info
    d = i["documents"]
    print(f"{rep.out}: {d['finished']}/{d['total']} documents ({d['ok']} ok, {d['short']} short, {d['error']} "
          f"error), {i['windows']} windows, {i['tokens']:,} tokens; {rep.skipped_shards}/{rep.shards} shards resumed; "
          f"{rep.processed_docs} documents in {rep.seconds:.1f} s ({rep.docs_per_s:.2f} docs/s, engine {rep.engine})")
    lvl = int(round(i["interval"]["level"] * 100))
    if res.heads is not None:
        for stat in ("previous-token", "first-token", "induction"):
            top = res.heads[res.heads["stat"] == stat].nlargest(3, "mean")
            print(f"  top heads by {stat}: " + ", ".join(
                f"{r.label} {r.mean:.3f} [{r.lo:.3f}, {r.hi:.3f}]" for r in top.itertuples()) + f" ({lvl}% interval)")
    if res.ablation is not None:
        for r in res.ablation.itertuples():
            print(f"  {r.ablation:<16} {r.nats:.4f} nats/token [{r.lo:.4f}, {r.hi:.4f}]"
                  + ("" if r.ablation == "baseline" else f"  increase {r.increase:+.4f} [{r.increase_lo:+.4f}, {r.increase_hi:+.4f}]"))
    cut = res.documents[res.documents["chars_cut"] > 0]
    if len(cut):
        print(f"  {len(cut)} document(s) longer than {MAX_CHARS:,} characters: only their first {MAX_CHARS:,} "
              "were used (as on the Entropy page); split them into several documents to use all")
    if len(res.errors):
        for r in res.errors.head(5).itertuples():
            print(f"  {r.status}: {r.doc_id} ({r.stage}): {r.error}")
        if len(res.errors) > 5:
            print(f"  … {len(res.errors) - 5} more in {rep.out}/documents (status != ok)")


# ----------------------------------------------------------------------------- bench

def bench_corpus(folder, docs: int = 48, words: int = 120, seed: int = 0) -> Path:
    """A synthetic .jsonl corpus of ``docs`` documents of about ``words`` words (sentences of the
    heads command's default text, shuffled per document), for timing only."""
    from .metrics import _DEFAULT_TEXT

    sentences = sorted({s.strip() + "." for s in _DEFAULT_TEXT.split(".") if s.strip()})
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


def bench(model: str = "attnkit-tiny", docs: int = 48, window: int = 128, workers: int = 2, batch: int = 4,
          analyses=("heads", "entropy", "ablation-loss"), engines=("local", "ray"), shard_docs: int = 4) -> dict:
    """Documents per second on :func:`bench_corpus`: the local engine with 1 and with ``workers`` torch
    threads, and Ray with ``workers`` one-thread actors on a local Ray cluster of ``num_cpus = workers``.

    Per run: ``seconds`` wall time from the start (model loading, Ray starting its actors included) to
    the last shard written, ``docs_per_s`` = docs / seconds, ``worker_docs_per_s`` = docs / Σ shard
    time (what one worker does once running) and ``startup_s`` = seconds − Σ shard time / workers (the
    fixed cost: loading, scheduling, transfers)."""
    import tempfile

    out: dict = {"model": model, "docs": docs, "window": window, "batch": batch, "analyses": list(analyses),
                 "shard_docs": shard_docs, "cpus": os.cpu_count(), "load_average": _loadavg(), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = bench_corpus(tmp, docs)
        for engine, threads in [(e, t) for e in engines for t in (dict.fromkeys((1, workers)) if e == "local" else (1,))]:
            label = f"ray-{workers}-workers" if engine == "ray" else f"local-{threads}-thread"
            if engine == "ray" and importlib.util.find_spec("ray") is None:
                out["runs"][label] = {"skipped": "Ray is not installed (pip install ray)"}
                continue
            t0 = time.perf_counter()
            kw = {"threads": threads}
            if engine == "ray":
                import ray

                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
                kw["workers"] = workers
            try:
                rep = run_corpus(corpus, Path(tmp) / label, model, analyses, engine=engine, window=window,
                                 batch=batch, shard_docs=shard_docs, ablations=["v=x"], bootstrap=0, summary=False,
                                 **kw)
            finally:
                if engine == "ray":
                    ray.shutdown()
            total = time.perf_counter() - t0
            n_workers = workers if engine == "ray" else 1
            out["runs"][label] = {
                "workers": n_workers, "threads": threads, "seconds": round(total, 2),
                "docs_per_s": round(rep.processed_docs / total, 3),
                "worker_docs_per_s": round(rep.processed_docs / rep.compute_seconds, 3),
                "startup_s": round(total - rep.compute_seconds / n_workers, 2)}
            r = out["runs"][label]
            print(f"{label:>16}: {rep.processed_docs} docs in {total:.1f} s = {r['docs_per_s']:.2f} docs/s; "
                  f"one worker {r['worker_docs_per_s']:.2f} docs/s once running; fixed cost ≈ {r['startup_s']:.1f} s",
                  flush=True)
    out["load_average_after"] = _loadavg()
    return out


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
