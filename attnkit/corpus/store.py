"""A corpus result folder: Parquet shards, the manifest, the ``_done`` markers that make a rerun resume.

    manifest.json                       settings; a rerun with other settings is refused
    documents/part-00000.parquet        one row per document: status ok | short | error, stage, error,
                                        chars, chars_cut (beyond the Entropy page's 200,000 per text)
    windows/part-00000.parquet          one row per window: doc, window, start, tokens
    <analysis table>/part-00000.parquet one per analysis (see attnkit.corpus.analyses)
    _done/part-00000.json               written last: the shard is finished (with its input hash)
    summary/<table>.parquet, summary.json   means with bootstrap intervals
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .analyses import ANALYSES, KEY, selected
from .inputs import CorpusError

FORMAT = 1
#: Settings that change the numbers: a rerun into the same folder must match them (and those the
#: registered analyses own, see result_keys).
RESULT_KEYS = ("format", "model", "analyses", "window", "batch", "shard_docs", "ablations", "field", "threads")
DOCUMENTS = pa.schema([("doc", pa.int64()), ("doc_id", pa.string()), ("chars", pa.int64()), ("chars_cut", pa.int64()),
                       ("windows", pa.int32()), ("status", pa.string()), ("stage", pa.string()),
                       ("error", pa.string())])
WINDOWS = pa.schema(KEY + [("start", pa.int64()), ("tokens", pa.int32())])


def result_keys() -> tuple:
    return RESULT_KEYS + tuple(k for a in ANALYSES.values() for k in a.defaults if k not in RESULT_KEYS)


def tables_for(analyses) -> list[str]:
    """The tables a run writes: documents, then windows and one per analysis."""
    return ["documents", "windows"] + [a.table for a in selected(analyses)]


def schema(name: str):
    """The Arrow schema of a table (documents, windows or an analysis's)."""
    if name == "documents":
        return DOCUMENTS
    if name == "windows":
        return WINDOWS
    return pa.schema(next(a for a in ANALYSES.values() if a.table == name).columns())


def table(name: str, cols: dict):
    """An Arrow table of ``name``'s schema from {column: values} (missing columns empty)."""
    sch = schema(name)
    return pa.Table.from_arrays([pa.array(cols.get(f.name, []), type=f.type) for f in sch], schema=sch)


def sort_keys(name: str) -> tuple:
    if name == "windows":
        return ("doc", "window")
    return next(a.sort for a in ANALYSES.values() if a.table == name)


def sorted_rows(t, name: str):
    """Rows in their table's order (Arrow's sort is stable: a window's ablation rows keep theirs)."""
    if t.num_rows == 0:
        return t
    return t.take(pc.sort_indices(t, sort_keys=[(k, "ascending") for k in sort_keys(name)]))


def without_docs(t, docs):
    """``t`` without the rows of the documents ``docs``."""
    if not docs or not t.num_rows:
        return t
    return t.filter(pc.invert(pc.is_in(t["doc"], value_set=pa.array(sorted(docs), pa.int64()))))


def to_ipc(t) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue()


def from_ipc(data: bytes):
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def shards(docs, size):
    return [docs[i:i + size] for i in range(0, len(docs), size)]


def digest(docs) -> str:
    return hashlib.sha256(json.dumps(docs, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def write_atomic(path: Path, write):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_json(path: Path, obj):
    write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=1), encoding="utf-8"))


def part(k: int) -> str:
    return f"part-{k:05d}"


def _changed(out: Path, old: dict, digests: list[str]) -> str | None:
    """How the documents differ from those of the run in ``out``, or None when they are the same."""
    was = (old.get("inputs") or {}).get("shards")
    if was is None:               # a folder from before inputs were recorded: its markers' hashes
        was = {}
        for m in sorted((out / "_done").glob("part-*.json")) if (out / "_done").exists() else []:
            try:
                was[int(m.stem.split("-")[1])] = json.loads(m.read_text(encoding="utf-8")).get("hash")
            except (OSError, ValueError):
                continue
        bad = [k for k, h in was.items() if k >= len(digests) or digests[k] != h]
        return None if not bad else f"shard {bad[0]} holds other documents"
    if was == digests:
        return None
    first = next((k for k, (a, b) in enumerate(zip(was, digests)) if a != b), min(len(was), len(digests)))
    return (f"{old.get('n_docs')} document(s) in {len(was)} shard(s) there, other documents now: "
            f"{len(digests)} shard(s), the first different one is shard {first}")


def check_manifest(out: Path, settings: dict, docs, digests: list[str] | None = None, *,
                   redo_changed: bool = False, write: bool = True) -> dict:
    """Write the manifest, or check that the one in ``out`` was made with the same settings and the
    same documents (``digests``: one hash a shard). CorpusError when not: a folder that is not a
    corpus result, other settings, or other documents (unless ``redo_changed``: the shards whose
    documents changed are then redone). ``write=False`` only checks (nothing is created)."""
    path = out / "manifest.json"
    keys = result_keys()
    mine = {k: settings[k] for k in keys}
    digests = [digest(s) for s in shards(docs, settings["shard_docs"])] if digests is None else digests
    inputs = {"n_docs": len(docs), "shards": digests}
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise CorpusError(f"{path} is not valid JSON: is {out} a corpus result?") from None
        diff = [k for k in keys if old.get("settings", {}).get(k) != mine[k]]
        if diff:
            was = old.get("settings", {})
            what = ", ".join(f"{k}: {was.get(k)!r} there, {mine[k]!r} now" for k in diff)
            raise CorpusError(f"{out} holds a run with other settings ({what}); "
                              "use another --out, or the same settings to resume")
        change = _changed(out, old, digests)
        if change and not redo_changed:
            raise CorpusError(f"{out} holds a run over other documents ({change}); nothing was changed. Use "
                              "another --out, the same input and --max-docs to resume, or --redo-changed to "
                              "recompute the shards whose documents changed")
        if write and (old.get("inputs") != inputs or old.get("n_docs") != len(docs)):
            old.update(n_docs=len(docs), inputs=inputs)
            write_json(path, old)
        return old
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CorpusError(f"{out} exists and is not a corpus result folder (no manifest.json); use an empty or new folder")
    man = {"settings": mine, "n_docs": len(docs), "inputs": inputs,
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if write:
        write_json(path, man)
    return man


def manifest(out: Path) -> dict:
    try:
        return json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except OSError:
        raise CorpusError(f"{out} is not a corpus result (no manifest.json)") from None
    except ValueError:
        raise CorpusError(f"{out}/manifest.json is not valid JSON") from None


def done_shards(out: Path, names) -> list[int]:
    """Finished shards: a ``_done`` marker and every table's part."""
    ks = []
    for m in sorted((out / "_done").glob("part-*.json")) if (out / "_done").exists() else []:
        k = int(m.stem.split("-")[1])
        if all((out / n / f"{part(k)}.parquet").exists() for n in names):
            ks.append(k)
    return ks


def file_record(path: Path) -> dict:
    """What a ``_done`` marker records of a part: its size and SHA-256 (a damaged part is found)."""
    return {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def intact(out: Path, k: int, names, marker: dict) -> bool:
    """Every table's part of shard ``k`` is there and as its marker recorded it (older markers, without
    a record: the part's Parquet footer reads)."""
    files = marker.get("files")
    for n in names:
        f = out / n / f"{part(k)}.parquet"
        try:
            if files is None:
                pq.read_metadata(f)
            elif n not in files or file_record(f) != files[n]:
                return False
        except (OSError, pa.ArrowException):
            return False
    return True


def pending_shards(out: Path, digests: list[str], names, log=None) -> tuple[list[int], list[int]]:
    """(shards to do, shards finished with these documents). A shard whose part is damaged or missing
    is redone (``log`` says so); the markers of changed shards are removed, and the parts of shards
    past the input's end (only reached with ``redo_changed``: check_manifest refuses other documents)."""
    pending, finished = [], []
    for k, h in enumerate(digests):
        marker = out / "_done" / f"{part(k)}.json"
        try:
            m = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            m = None
        ours = isinstance(m, dict) and m.get("hash") == h
        if ours and intact(out, k, names, m):
            finished.append(k)
            continue
        pending.append(k)
        if marker.exists() and log is not None:
            log(f"shard {k} is damaged or incomplete in {out}: it is computed again")
        marker.unlink(missing_ok=True)     # not finished until redone
    for stale in sorted((out / "_done").glob("part-*.json")) if (out / "_done").exists() else []:
        if int(stale.stem.split("-")[1]) >= len(digests):
            stale.unlink()                # the input shrank: shards past its end are no longer part of it
            for n in names:
                (out / n / f"{stale.stem}.parquet").unlink(missing_ok=True)
    return pending, finished
