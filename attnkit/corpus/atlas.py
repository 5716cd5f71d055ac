"""The head atlas over a corpus: two corpus analyses (the scan and the effect, :mod:`attnkit.atlas`) and the
driver that runs them on the local or the Ray engine and writes the atlas folder.

    python -m attnkit atlas --model M --corpus PATH --out DIR --json OUT [--engine local|ray]

DIR holds ``work/scan`` and ``work/effect`` (ordinary corpus result folders: a rerun resumes them shard by
shard), then the atlas itself (:mod:`.atlas_files`): one JSON a head in ``heads/``, ``index.json``,
``manifest.json`` and ``atlas.html`` (one self-contained file). The effect pass needs the heads' corpus means,
so it runs after the scan; it runs on every k-th document, k = ⌊corpus tokens / ``effect_tokens``⌋, so that about
that many tokens are ablated (all of them when the corpus is smaller), and ablates each role's pattern heads
together as well as alone.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from .. import atlas as atlas_lib
from ..atlas import NO_FIRST, stat_column, stat_names
from ..atlas_result import roles, threshold
from .analyses import LAYER_HEAD, Analysis, register
from .atlas_files import KIND, MARKER, write_atlas
from .atlas_summary import head_means, read_shards, stat_means, summarise_atlas
from .inputs import CorpusError, read_inputs
from .run import SHARD_DOCS, run_corpus
from . import store

__all__ = ["AtlasScan", "AtlasEffect", "EFFECT_TOKENS", "GROUP_MAX", "run_atlas", "check_atlas_folder", "MARKER",
           "KIND", "SHIPPED_CORPORA", "corpus_path", "role_groups"]

#: The effect pass ablates about this many tokens (every k-th document), or every token of a smaller corpus.
EFFECT_TOKENS = 65_536
#: A role's pattern heads ablated together: at most this many (the strongest by the role's statistic).
GROUP_MAX = 4
#: Texts shipped inside the package, by name (each folder's SOURCES.json says where they come from).
SHIPPED_CORPORA = {"debian-man": Path(__file__).resolve().parents[1] / "corpora" / "debian-man" / "documents.jsonl"}


def corpus_path(name_or_path) -> Path:
    """A shipped corpus's folder by name, else the path as given."""
    return SHIPPED_CORPORA.get(str(name_or_path), Path(str(name_or_path)).expanduser())


def _pieces(batch):
    return batch.pieces if batch.pieces is not None else (lambda ids: [str(int(i)) for i in ids])


class AtlasScan(Analysis):
    name, table = "atlas", "atlas"
    help = "the head atlas's scan (run by attnkit atlas): statistics, examples, pairs, Q/K samples, z sums"
    defaults = {"atlas": None}
    listed = False

    def __init__(self):
        self._w64: tuple | None = None

    def columns(self):
        stats = [(stat_column(s, nf), pa.float64()) for nf in (False, True) for s in stat_names()]
        strings, ints, floats = pa.list_(pa.string()), pa.list_(pa.int32()), pa.list_(pa.float64())
        return LAYER_HEAD + stats + [
            ("act_max", pa.float64()), ("act_rand", pa.float64()), ("ex_max", pa.string()), ("ex_rand", pa.string()),
            ("pair_q", ints), ("pair_k", ints), ("pair_q_piece", strings), ("pair_k_piece", strings),
            ("pair_n", ints), ("pair_mass", floats), ("qk_pos", ints), ("qk_piece", strings),
            ("qk_q", pa.list_(pa.float32())), ("qk_k", pa.list_(pa.float32())), ("z_sum", floats),
            ("positions", pa.int32()), ("f64_error", pa.float64()), ("f64_error_no0", pa.float64())]

    def settings(self, raw):
        return {"atlas": raw["atlas"]} if raw.get("atlas") else {}

    def _weights64(self, weights):
        if self._w64 is None or self._w64[0] is not weights:
            self._w64 = (weights, atlas_lib.float64_copy(weights))
        return self._w64[1]

    def compute(self, batch, hook=None, intervention=None):
        opts = batch.settings.get("atlas") or {}
        cols = atlas_lib.scan(batch.weights, batch.ids, batch.docs, batch.nums, _pieces(batch),
                              no_first=bool(opts.get("no_first")), weights64=self._weights64(batch.weights))
        return {**batch.per_head_key(), **cols}

    def summarise(self, s):            # the atlas summarises its own folders (attnkit.corpus.atlas_summary)
        return pd.DataFrame(), {}


class AtlasEffect(Analysis):
    name, table = "atlas-effect", "atlas_effect"
    help = "the head atlas's effect pass (run by attnkit atlas): the loss with each head mean-ablated"
    defaults = {"atlas": None}
    listed = False

    def __init__(self):
        self._means: tuple | None = None

    def columns(self):
        return LAYER_HEAD + [("tokens", pa.int32()), ("base_nll", pa.float64()), ("delta_nll", pa.float64())]

    def settings(self, raw):
        if not raw.get("atlas") or raw.get("atlas_means") is None:
            raise CorpusError("the atlas's effect pass needs the heads' means (run it with attnkit atlas)")
        return {"atlas": raw["atlas"], "atlas_means": raw["atlas_means"]}

    def _means_of(self, settings, device):
        key = settings["atlas"]["means_sha256"]
        if self._means is None or self._means[0] != key:
            self._means = (key, torch.tensor(settings["atlas_means"], dtype=torch.float64))
        return self._means[1].to(device=device, dtype=torch.float32)

    def compute(self, batch, hook=None, intervention=None):
        opts = batch.settings["atlas"]
        keep = [i for i, d in enumerate(batch.docs) if d % int(opts["effect_every"]) == 0]
        cols = {c: [] for c, _ in self.columns()}
        if not keep:
            return cols
        ids = batch.ids[keep]
        groups = [tuple(tuple(m) for m in g["members"]) for g in opts.get("groups", [])]
        res = atlas_lib.effect(batch.weights, ids, self._means_of(batch.settings, ids.device), groups)
        L, H = res["heads"].shape[:2]
        for b, i in enumerate(keep):
            rows = [(l, h, res["heads"][l, h, b]) for l in range(L) for h in range(H)]
            rows += [(-1, g, res["groups"][g, b]) for g in range(len(groups))]
            for l, h, delta in rows:
                for c, v in (("doc", batch.docs[i]), ("window", batch.nums[i]), ("layer", l), ("head", h),
                             ("tokens", int(res["tokens"][b])), ("base_nll", float(res["base"][b])),
                             ("delta_nll", float(delta))):
                    cols[c].append(v)
        return cols

    def summarise(self, s):
        return pd.DataFrame(), {}


register(AtlasScan())
register(AtlasEffect())


# ----------------------------------------------------------------------------- the effect's groups

def role_groups(means: dict[str, np.ndarray], no_first: bool) -> list[dict]:
    """Each role whose pattern (its threshold) at least two heads show: its strongest ≤ GROUP_MAX such heads."""
    out = []
    for role in roles():
        col = role + (NO_FIRST if no_first and role != "first-token" else "")
        m = np.nan_to_num(means[col], nan=-np.inf)
        hits = [(float(m[l, h]), l, h) for l, h in zip(*np.nonzero(m >= threshold(role)))]
        if len(hits) >= 2:
            top = sorted(hits, key=lambda x: (-x[0], x[1], x[2]))[:GROUP_MAX]
            out.append({"role": role, "members": sorted([int(l), int(h)] for _, l, h in top)})
    return out


def _tokens(scan: Path) -> int:
    return int(sum(t["tokens"].to_numpy().sum() for t in read_shards(scan, "windows", ["tokens"])))


# ----------------------------------------------------------------------------- the driver

def check_atlas_folder(out) -> None:
    """CorpusError unless ``out`` is new, empty, or an atlas folder (its manifest says so)."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise CorpusError(f"{out} exists and is not a folder")
    man = out / MARKER
    if man.exists():
        try:
            kind = json.loads(man.read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind != KIND:
            raise CorpusError(f"{out} holds a {MARKER} that is not an atlas's; give a new or empty folder")
    elif any(out.iterdir()):
        raise CorpusError(f"{out} is not empty and is not an atlas folder (no {MARKER}); give a new or empty folder")


def _phase(progress, offset: int):
    """run_corpus's ``progress(done, total, info)`` as the atlas's ``progress(done, total)``: two passes."""
    if progress is None:
        return None
    return lambda done, total, info=None: progress(offset + done, 2 * total)


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def run_atlas(corpus, out, model: str = "attnkit-tiny", *, engine: str = "local", address: str | None = None,
              window: int | None = None, batch: int = 1, shard_docs: int = SHARD_DOCS, threads: int = 1,
              device: str = "cpu", workers: int | None = None, no_first: bool = False,
              effect_tokens: int = EFFECT_TOKENS, bootstrap: int = 1000, field: str = "text",
              max_docs: int | None = None, command: str | None = None, progress=None, log=None):
    """The atlas of ``model`` over the documents of ``corpus`` (a shipped corpus's name, a file or a folder)
    into the folder ``out``; returns the :class:`~attnkit.atlas_result.AtlasResult`. Resumable: a rerun with the
    same settings skips every finished shard of either pass. ``progress(done, total)`` counts documents over
    both passes (an exception raised there stops the run; what is written stays). ``no_first``: the verdicts
    and the pairs read the statistics without position 0. CorpusError on bad input, before any work."""
    out, path = Path(out), corpus_path(corpus)
    check_atlas_folder(out)
    if int(effect_tokens) < 1:
        raise CorpusError(f"--effect-tokens must be at least 1, got {effect_tokens}")
    docs, notes = read_inputs(path, field, max_docs)
    for n in notes if log is not None else ():
        log(n)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARKER).exists():       # the folder is the atlas's from now on: an interrupted run resumes here
        store.write_json(out / MARKER, {"kind": KIND, "status": "running", "corpus": str(path), "model": str(model)})
    started = time.time()
    common = dict(model=model, engine=engine, address=address, window=window, batch=batch, shard_docs=shard_docs,
                  field=field, device=device, threads=threads, workers=workers, max_docs=max_docs, summary=False,
                  log=log)
    scan_opts = {"no_first": bool(no_first), "f64_every": atlas_lib.F64_EVERY, "version": 1}
    run_corpus(path, out / "work" / "scan", analyses=["atlas"], progress=_phase(progress, 0),
               options={"atlas": scan_opts}, **common)
    meta = _done_meta(out / "work" / "scan")
    L, H = int(meta["n_layers"]), int(meta["n_heads"])
    try:
        means = head_means(out / "work" / "scan", L, H)
    except ValueError as e:              # no document gave a window (all too short or unreadable)
        raise CorpusError(str(e)) from None
    groups = role_groups(stat_means(out / "work" / "scan", L, H), no_first)
    every = max(1, _tokens(out / "work" / "scan") // int(effect_tokens))
    means_list = means.tolist()
    eff_opts = {"means_sha256": _sha(means_list), "groups": groups, "effect_every": every, "version": 1}
    run_corpus(path, out / "work" / "effect", analyses=["atlas-effect"], progress=_phase(progress, len(docs)),
               options={"atlas": eff_opts, "atlas_means": means_list}, **common)
    try:
        result = summarise_atlas(out / "work" / "scan", out / "work" / "effect", bootstrap=bootstrap,
                                 no_first=no_first, groups=groups, effect_every=every)
    except ValueError as e:              # the effect's sample holds no window (its documents all failed)
        raise CorpusError(f"{e}; give --effect-tokens a larger value, or check the documents' errors") from None
    result.info.update(corpus={"path": str(path), "name": str(corpus), "documents": len(docs),
                               "sha256": store.digest(docs)}, command=command,
                       seconds=round(time.time() - started, 1))
    write_atlas(result, out)
    return result


def _done_meta(folder: Path) -> dict:
    """The worker's meta (model shape, source) from the first finished shard's marker."""
    for m in sorted((folder / "_done").glob("part-*.json")):
        return json.loads(m.read_text(encoding="utf-8")).get("meta", {})
    raise CorpusError(f"{folder}: no finished shard (no document could be read?)")
