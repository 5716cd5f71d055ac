"""Summaries of a corpus result folder: means with percentile-bootstrap intervals over documents.

Intervals (95 %) resample *documents* (windows of one document are not independent); every mean is
a ratio estimator Σ value / Σ count over the resampled documents, so a document weighs by its number
of windows (heads, entropy) or predicted tokens (ablation losses). Each analysis summarises its own
table (:meth:`attnkit.corpus.analyses.Analysis.summarise`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from . import store
from .analyses import SummaryInput, selected


@dataclass
class CorpusResult:
    """A corpus result folder, summarised (see :func:`load_result`). ``tables`` holds each analysis's
    summary by table name; ``heads``, ``entropy`` and ``ablation`` are the built-in ones."""

    path: str
    info: dict
    documents: object                 # pandas DataFrame, one row per finished document
    tables: dict = field(default_factory=dict)

    heads = property(lambda self: self.tables.get("heads"))
    entropy = property(lambda self: self.tables.get("entropy"))
    ablation = property(lambda self: self.tables.get("ablation"))

    @property
    def errors(self):
        """The documents that failed (status 'error') or had under 2 tokens (status 'short')."""
        return self.documents[self.documents["status"] != "ok"].reset_index(drop=True)

    @property
    def complete(self) -> bool:
        return bool(self.info.get("complete"))

    def head_stat(self, stat: str):
        """One head statistic as compare.scores_frame lays it out — head (``L{l}H{h}``), layer, head_index,
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


def _read_all(out: Path, name: str, ks) -> pd.DataFrame:
    if not ks:
        return store.schema(name).empty_table().to_pandas()
    return pd.concat([pq.read_table(out / name / f"{store.part(k)}.parquet").to_pandas() for k in ks],
                     ignore_index=True)


def _summary_input(out: Path, st: dict, ks, windows, meta, bootstrap, level, seed, max_points) -> SummaryInput:
    ok_docs = np.array(sorted(set(windows["doc"].tolist())), dtype=np.int64)
    D = len(ok_docs)
    rng = np.random.default_rng(seed)
    W = rng.multinomial(D, np.full(D, 1.0 / D), size=int(bootstrap)).astype(np.float64) if D >= 2 and bootstrap else None
    return SummaryInput(
        settings=st, shards=ks, read=lambda name, k: pq.read_table(out / name / f"{store.part(k)}.parquet"),
        doc_index=lambda docs: np.searchsorted(ok_docs, np.asarray(docs, dtype=np.int64)), W=W, windows=windows,
        n_layers=meta.get("n_layers"), n_heads=meta.get("n_heads"), level=level, max_points=max_points)


def _info(man, st, meta, documents, windows, ks, level, bootstrap, W, seed) -> dict:
    status = documents["status"].value_counts().to_dict() if len(documents) else {}
    return {
        "settings": st, "model": meta, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "documents": {"total": man.get("n_docs"), "finished": int(len(documents)), "ok": int(status.get("ok", 0)),
                      "short": int(status.get("short", 0)), "error": int(status.get("error", 0))},
        "windows": int(len(windows)), "tokens": int(windows["tokens"].sum()) if len(windows) else 0,
        "shards_done": ks, "complete": len(documents) == man.get("n_docs"),
        "interval": {"method": "percentile bootstrap, documents resampled", "level": level,
                     "resamples": int(bootstrap) if W is not None else 0, "seed": seed,
                     "resamples_entropy": None},
    }


def summarise(out, bootstrap: int = 1000, level: float = 0.95, seed: int = 0, max_points: int = 64,
              write: bool = True) -> CorpusResult:
    """Means with percentile-bootstrap intervals (documents resampled ``bootstrap`` times, fixed
    ``seed``) over the finished shards of the result folder ``out``; ``write`` saves them as
    ``summary/<table>.parquet`` + ``summary.json``. See :func:`load_result` for the tables."""
    out = Path(out)
    man = store.manifest(out)
    st = man["settings"]
    ks = store.done_shards(out, store.tables_for(st["analyses"]))
    documents, windows = _read_all(out, "documents", ks), _read_all(out, "windows", ks)
    metas = [json.loads((out / "_done" / f"{store.part(k)}.json").read_text(encoding="utf-8")).get("meta", {})
             for k in ks]
    meta = metas[0] if metas else {}
    s = _summary_input(out, st, ks, windows, meta, bootstrap, level, seed, max_points)
    result = CorpusResult(path=str(out), info=_info(man, st, meta, documents, windows, ks, level, bootstrap, s.W, seed),
                          documents=documents)
    if len(windows):                  # some document has windows to summarise
        for a in selected(st["analyses"]):
            result.tables[a.table], notes = a.summarise(s)
            result.info["interval"].update(notes)
    if write:
        for name, df in result.tables.items():
            store.write_atomic(out / "summary" / f"{name}.parquet", lambda p, df=df: df.to_parquet(p, index=False))
        store.write_json(out / "summary.json", result.info)
    return result


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
    * ``tables``: every analysis's summary by table name (the three above, and any registered one).
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
    out = Path(path)
    man = store.manifest(out)
    ks = store.done_shards(out, store.tables_for(man["settings"]["analyses"]))
    try:
        info = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = None
    if info is None or info.get("shards_done") != ks:
        return summarise(out, write=False)
    documents = pd.concat([pd.read_parquet(out / "documents" / f"{store.part(k)}.parquet") for k in ks], ignore_index=True)
    res = CorpusResult(path=str(out), info=info, documents=documents)
    for a in selected(man["settings"]["analyses"]):
        f = out / "summary" / f"{a.table}.parquet"
        if f.exists():
            res.tables[a.table] = pd.read_parquet(f)
    return res
