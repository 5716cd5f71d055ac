"""The head atlas's summary: the scan's and the effect pass's shards read back into one record a head.

Means over windows carry percentile-bootstrap intervals that resample documents (as every corpus summary's,
:class:`~attnkit.bootstrap.Boot`); a statistic's distribution over windows is given as quantiles and a
histogram; the effect is Σ(ablated − clean NLL) / Σ predicted tokens over the effect pass's documents, with the
same kind of interval. Examples by activation decile: the deciles come from the activation at one random query a
window (an unbiased sample of the head's activations), the examples from those draws and each window's strongest
query. Everything is read shard by shard in shard order, so both engines' folders give the same atlas.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch
import transformers

from .. import __version__
from ..atlas import stat_column, stat_names
from ..diskcache import file_digest
from ..atlas_result import AtlasResult, direction, head_text, redundancy_text, redundant, role_verdicts, rules
from ..standard import head_name
from ..tolerances import TOL_ATLAS_F64
from . import store
from ..bootstrap import Boot

__all__ = ["summarise_atlas", "model_hash", "read_shards", "head_means", "stat_means", "pca2", "HIST_BINS", "QK_POINTS",
           "EXAMPLES_PER_DECILE"]

HIST_BINS = 20
#: Points of a head's 2-D Q/K view (each of queries and keys), and examples shown per activation decile.
QK_POINTS = 300
EXAMPLES_PER_DECILE = 2
#: Examples kept per head while reading (the first windows' random draws; every window's strongest is
#: considered for the top decile).
CANDIDATES = 2000


def read_shards(folder: Path, table: str, columns=None):
    """Every finished shard's part of ``table``, in shard order (a pyarrow Table each)."""
    for k in store.done_shards(folder, [table]):
        yield pq.read_table(folder / table / f"{store.part(k)}.parquet", columns=columns)


def head_means(scan: Path, n_layers: int, n_heads: int) -> np.ndarray:
    """[L, H, e] float64: each head's z averaged over every position of the scanned windows."""
    total, count = None, 0.0
    for t in read_shards(scan, "atlas", ["layer", "head", "z_sum", "positions"]):
        layer, head = t["layer"].to_numpy(), t["head"].to_numpy()
        z = np.array(t["z_sum"].to_pylist(), dtype=np.float64)
        if total is None:
            total = np.zeros((n_layers, n_heads, z.shape[-1]))
        np.add.at(total, (layer, head), z)
        count += float(t["positions"].to_numpy()[(layer == 0) & (head == 0)].sum())
    if total is None or count == 0:
        raise ValueError("the scan found no windows to average the heads over")
    return total / count


def _columns() -> list[str]:
    return [stat_column(s, nf) for nf in (False, True) for s in stat_names()]


def stat_means(scan: Path, n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    """Per statistic column, [L, H]: the mean over the windows where it is defined (no interval)."""
    cols = _columns()
    S = {c: np.zeros((n_layers, n_heads)) for c in cols}
    N = {c: np.zeros((n_layers, n_heads)) for c in cols}
    for t in read_shards(scan, "atlas", ["layer", "head", *cols]):
        where = (t["layer"].to_numpy(), t["head"].to_numpy())
        for c in cols:
            v = t[c].to_numpy(zero_copy_only=False).astype(np.float64)
            np.add.at(S[c], where, np.nan_to_num(v))
            np.add.at(N[c], where, ~np.isnan(v))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {c: S[c] / N[c] for c in cols}


def pca2(points: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """The rows of ``points`` [n, e] on the first two principal axes of the centred rows, and the share of
    the variance each axis explains (float64 SVD). Signs fixed: each axis's largest coordinate is positive."""
    x = points - points.mean(0)
    if len(x) < 2 or not np.any(x):
        return np.zeros((len(x), 2)), [math.nan, math.nan]
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    k = min(2, len(s))
    v = vt[:k].T
    v = v * np.sign(v[np.abs(v).argmax(0), np.arange(k)])
    coords = x @ v
    var = (s ** 2) / (s ** 2).sum()
    if k < 2:
        coords = np.hstack([coords, np.zeros((len(x), 1))])
    return coords, [float(var[i]) if i < k else math.nan for i in range(2)]


# ----------------------------------------------------------------------------- per head, while reading

class _Head:
    """What is gathered for one head while the shards are read."""

    def __init__(self):
        self.values: dict[str, list] = {c: [] for c in _columns()}
        self.act: list[float] = []
        self.candidates: list[tuple[float, int, str]] = []       # (activation, order, example JSON)
        self.pairs: dict[tuple, list] = {}
        self.qk: list[tuple] = []
        self.f64 = [0, 0.0, 0.0]                                  # windows, max error, max error (no position 0)

    def add(self, row: dict, order: int) -> None:
        for c in self.values:
            self.values[c].append(row[c])
        self.act.append(row["act_rand"])
        if len(self.candidates) < CANDIDATES:
            self.candidates.append((row["act_rand"], 2 * order + 1, row["ex_rand"]))
        self.candidates.append((row["act_max"], 2 * order, row["ex_max"]))
        for q, k, qp, kp, n, m in zip(row["pair_q"], row["pair_k"], row["pair_q_piece"], row["pair_k_piece"],
                                      row["pair_n"], row["pair_mass"]):
            acc = self.pairs.setdefault((q, k), [qp, kp, 0, 0.0])
            acc[2] += n
            acc[3] += m
        if len(self.qk) < QK_POINTS:
            e = len(row["qk_q"]) // max(1, len(row["qk_pos"]))
            for i, piece in enumerate(row["qk_piece"]):
                self.qk.append((row["qk_q"][i * e:(i + 1) * e], row["qk_k"][i * e:(i + 1) * e], piece))
        if not math.isnan(row["f64_error"]):
            self.f64 = [self.f64[0] + 1, max(self.f64[1], row["f64_error"]), max(self.f64[2], row["f64_error_no0"])]


def _gather(scan: Path, n_layers: int, n_heads: int) -> list[list[_Head]]:
    heads = [[_Head() for _ in range(n_heads)] for _ in range(n_layers)]
    order = 0
    for t in read_shards(scan, "atlas"):
        for row in t.to_pylist():
            heads[row["layer"]][row["head"]].add(row, order)
            order += 1
    return heads


def _distribution(values: list) -> dict:
    v = np.array([x for x in values if x is not None and not math.isnan(x)], dtype=np.float64)
    if not len(v):
        return {"windows": 0, "quantiles": None, "histogram": None}
    lo, hi = min(0.0, float(v.min())), max(1.0, float(v.max()))
    counts, edges = np.histogram(v, bins=HIST_BINS, range=(lo, hi))
    q = np.quantile(v, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {"windows": int(len(v)), "quantiles": {k: float(x) for k, x in zip(("p5", "p25", "p50", "p75", "p95"), q)},
            "histogram": {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}}


def _deciles(h: _Head) -> list[dict]:
    """Examples per activation decile, top decile first (edges from the random draws' activations)."""
    if not h.act:
        return []
    edges = np.quantile(np.array(h.act), np.linspace(0, 1, 11))
    out = []
    for d in range(9, -1, -1):
        lo, hi = edges[d], edges[d + 1]
        inside = [c for c in h.candidates if (c[0] >= lo) and (c[0] <= hi if d == 9 else c[0] < hi)]
        if d == 9:
            inside += [c for c in h.candidates if c[0] > hi]
        inside.sort(key=lambda c: (-c[0], c[1]))
        seen, picked = set(), []
        for c in inside:
            if c[2] not in seen:
                seen.add(c[2])
                picked.append(json.loads(c[2]))
            if len(picked) == EXAMPLES_PER_DECILE:
                break
        out.append({"decile": d + 1, "low": float(lo), "high": float(hi), "examples": picked})
    return out


def _qk(h: _Head) -> dict:
    if not h.qk:
        return {"points": [], "explained": [None, None], "samples": 0}
    q = np.array([p[0] for p in h.qk], dtype=np.float64)
    k = np.array([p[1] for p in h.qk], dtype=np.float64)
    coords, explained = pca2(np.vstack([q, k]))
    kinds = ["query"] * len(q) + ["key"] * len(k)
    pieces = [p[2] for p in h.qk] * 2
    pts = [{"x": round(float(x), 5), "y": round(float(y), 5), "kind": kd, "token": tok}
           for (x, y), kd, tok in zip(coords, kinds, pieces)]
    return {"points": pts, "explained": [None if math.isnan(e) else e for e in explained], "samples": len(q)}


def _pairs(h: _Head, n: int = 10) -> list[dict]:
    top = sorted(h.pairs.items(), key=lambda kv: (-kv[1][3], kv[0]))[:n]
    return [{"query": v[0], "key": v[1], "count": int(v[2]), "mass": float(v[3])} for _, v in top]


# ----------------------------------------------------------------------------- intervals

def _weights(docs: np.ndarray, bootstrap: int, seed: int) -> np.ndarray | None:
    """[resamples, documents]: how often each document is drawn (as the corpus summary draws them)."""
    D = len(docs)
    rng = np.random.default_rng(seed)
    return rng.multinomial(D, np.full(D, 1.0 / D), size=int(bootstrap)).astype(np.float64) if D >= 2 and bootstrap else None


def _stat_intervals(scan: Path, L: int, H: int, bootstrap: int, level: float, seed: int) -> tuple:
    """(mean, low, high, windows) each [L, H, S] over the statistic columns, documents resampled."""
    cols = _columns()
    docs = np.unique(np.concatenate([t["doc"].to_numpy() for t in read_shards(scan, "windows", ["doc"])]))
    acc = Boot(_weights(docs, bootstrap, seed), (L, H, len(cols)), (L, H, len(cols)))
    for t in read_shards(scan, "atlas", ["doc", "layer", "head", *cols]):
        if not t.num_rows:
            continue
        u, inv = np.unique(np.searchsorted(docs, t["doc"].to_numpy()), return_inverse=True)
        v = np.stack([t[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in cols], -1)
        S = np.zeros((len(u), L, H, len(cols)))
        N = np.zeros_like(S)
        where = (inv, t["layer"].to_numpy(), t["head"].to_numpy())
        np.add.at(S, where, np.nan_to_num(v))
        np.add.at(N, where, ~np.isnan(v))
        acc.add(u, S, N)
    mean, lo, hi = acc.result(level)
    return mean, lo, hi, acc.N


def _effect_intervals(effect: Path, L: int, H: int, G: int, bootstrap: int, level: float, seed: int) -> dict:
    """Σ(ablated − clean) / Σ tokens per head ([L·H]) and group ([G]), documents resampled; with the counts."""
    parts = list(read_shards(effect, "atlas_effect"))
    rows = [t.to_pandas() for t in parts if t.num_rows]
    if not rows:
        raise ValueError("the effect pass has no windows")
    df = pd.concat(rows, ignore_index=True)
    docs = np.unique(df["doc"].to_numpy())
    acc = Boot(_weights(docs, bootstrap, seed + 1), (L * H + G,), (1,))
    col = np.where(df["layer"].to_numpy() >= 0, df["layer"].to_numpy() * H + df["head"].to_numpy(),
                   L * H + df["head"].to_numpy())
    inv = np.searchsorted(docs, df["doc"].to_numpy())
    S = np.zeros((len(docs), L * H + G))
    N = np.zeros((len(docs), 1))
    np.add.at(S, (inv, col), df["delta_nll"].to_numpy())
    first = (df["layer"].to_numpy() == 0) & (df["head"].to_numpy() == 0)
    np.add.at(N, (inv[first], 0), df["tokens"].to_numpy()[first])
    acc.add(np.arange(len(docs)), S, N)
    mean, lo, hi = acc.result(level)
    return {"mean": mean, "low": lo, "high": hi, "tokens": int(N.sum()), "documents": int(len(docs)),
            "windows": int(first.sum())}


# ----------------------------------------------------------------------------- the records

def _effect_of(eff: dict, i: int) -> dict:
    v, lo, hi = (float(eff[k][i]) for k in ("mean", "low", "high"))
    clean = lambda x: None if not math.isfinite(x) else x          # noqa: E731
    return {"value": clean(v), "low": clean(lo), "high": clean(hi), "direction": direction(v, lo, hi),
            "tokens": eff["tokens"], "documents": eff["documents"], "windows": eff["windows"]}


def _groups_of(groups: list, eff: dict, L: int, H: int) -> list[dict]:
    out = []
    for g, grp in enumerate(groups):
        e = _effect_of(eff, L * H + g)
        alone = [float(eff["mean"][l * H + h]) for l, h in grp["members"]]
        rec = {"role": grp["role"], "heads": [head_name(l, h) for l, h in grp["members"]], "members": grp["members"],
               "alone": alone, **{k: e[k] for k in ("value", "low", "high", "direction")}}
        out.append({**rec, "redundant": redundant(rec, alone)})
    return out


def _record(l: int, h: int, g: _Head, stats: tuple, eff: dict, groups: list, no_first: bool) -> dict:
    mean, lo, hi, _ = stats
    name = head_name(l, h)
    statistics = {}
    for s, c in enumerate(_columns()):
        cell = {"mean": float(mean[l, h, s]), "low": float(lo[l, h, s]), "high": float(hi[l, h, s])}
        statistics[c] = {k: (None if not math.isfinite(v) else v) for k, v in cell.items()} | _distribution(g.values[c])
    e = _effect_of(eff, l * (mean.shape[1]) + h)
    means = {c: (v["mean"] if v["mean"] is not None else math.nan) for c, v in statistics.items()}
    verdicts = role_verdicts(means, e["direction"], no_first)
    mine = [grp for grp in groups if [l, h] in grp["members"]]
    ok = g.f64[0] > 0 and max(g.f64[1], g.f64[2]) <= TOL_ATLAS_F64
    return {"head": name, "layer": l, "index": h, "statistics": statistics, "effect": e, "roles": verdicts,
            "summary": head_text(name, verdicts, e),
            "redundancy": [{**grp, "text": redundancy_text(name, grp, e)} for grp in mine],
            "deciles": _deciles(g), "pairs": _pairs(g), "qk": _qk(g),
            "float64": {"windows": g.f64[0], "max_error": g.f64[1], "max_error_no_position_0": g.f64[2],
                        "tolerance": TOL_ATLAS_F64, "ok": bool(ok)}}


def model_hash(source) -> str | None:
    """SHA-256 over the model folder's weight and config files (name and content), or None (not a folder). Each
    file's digest is remembered per its stamp (:func:`attnkit.diskcache.file_digest`): asked again, it is not read."""
    folder = Path(str(source))
    if not folder.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file() and (p.suffix in (".safetensors", ".bin", ".json")
                                                                   or p.name in ("merges.txt",))):
        h.update(f.name.encode() + b"\0")
        h.update(bytes.fromhex(file_digest(f)))
    return h.hexdigest()


def _info(scan: Path, meta: dict, eff: dict, effect_every: int, no_first: bool, heads: list, level, bootstrap) -> dict:
    man = store.manifest(scan)
    windows = sum(t.num_rows for t in read_shards(scan, "windows", ["doc"]))
    tokens = int(sum(t["tokens"].to_numpy().sum() for t in read_shards(scan, "windows", ["tokens"])))
    checked = sum(1 for t in read_shards(scan, "atlas", ["layer", "head", "f64_error"])
                  for l, h, e in zip(*(t[c].to_pylist() for c in ("layer", "head", "f64_error")))
                  if l == 0 and h == 0 and e is not None and not math.isnan(e))
    return {
        "kind": "attnkit atlas", "format": 1,
        "model": {"name": man["settings"]["model"], "source": meta.get("source"), "sha256": model_hash(meta.get("source")),
                  "n_layers": meta.get("n_layers"), "n_heads": meta.get("n_heads"), "n_ctx": meta.get("n_ctx")},
        "settings": {k: man["settings"].get(k) for k in ("window", "batch", "shard_docs", "threads", "device", "field")}
        | {"window_used": meta.get("window"), "device": meta.get("device"), "no_position_0": bool(no_first)},
        "rules": rules(), "windows": windows, "tokens": tokens,
        "interval": {"method": "percentile bootstrap, documents resampled", "level": level, "resamples": bootstrap},
        "effect": {"method": "exact mean ablation: each head's z replaced by its corpus mean at every position; the "
                             "clean residual stream cached at every layer, the ablated runs resumed at the head's "
                             "layer with that layer's heads batched as rows",
                   "every": effect_every, "tokens": eff["tokens"], "documents": eff["documents"], "windows": eff["windows"]},
        "float64": {"windows": checked, "tolerance": TOL_ATLAS_F64, "every": f"the first window of every "
                    f"{man['settings'].get('atlas', {}).get('f64_every')}th document",
                    "ok": all(h["float64"]["ok"] for h in heads)},
        "versions": {"attnkit": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
    }


def summarise_atlas(scan, effect, *, bootstrap: int = 1000, level: float = 0.95, seed: int = 0, no_first: bool = False,
                    groups=(), effect_every: int = 1) -> AtlasResult:
    """The atlas from its two passes' folders (see the module's doc)."""
    scan, effect = Path(scan), Path(effect)
    meta = next((json.loads(m.read_text(encoding="utf-8")).get("meta", {})
                 for m in sorted((scan / "_done").glob("part-*.json"))), {})
    L, H = int(meta["n_layers"]), int(meta["n_heads"])
    stats = _stat_intervals(scan, L, H, bootstrap, level, seed)
    eff = _effect_intervals(effect, L, H, len(groups), bootstrap, level, seed)
    grp = _groups_of(list(groups), eff, L, H)
    gathered = _gather(scan, L, H)
    heads = [_record(l, h, gathered[l][h], stats, eff, grp, no_first) for l in range(L) for h in range(H)]
    return AtlasResult(_info(scan, meta, eff, effect_every, no_first, heads, level, bootstrap), heads)
