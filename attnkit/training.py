"""Watching attention learn: per checkpoint of a series (:mod:`attnkit.series`) the numbers that show an
induction head forming, and where the phase change happens (Olsson et al. 2022).

Per checkpoint (:func:`checkpoint_result`, on a model loaded by :func:`attnkit.loading.load`):

- the registered head statistics of :mod:`attnkit.metrics` on the text's first context (as ``heads``);
- induction on repeated random tokens (:func:`attnkit.metrics.induction_scores`: n = 50, 4 sequences, seed 0,
  as ``heads``), per sequence too, so the best head's score carries a 95 % t-interval over the sequences;
- the in-context-learning score (Olsson et al.'s "loss at token 500 minus loss at token 50"): on the text cut into
  windows of W tokens, W the window the checkpoints were trained on (series.json ``train_block``, else the
  context; at most 1024), the mean loss at positions in the last tenth of a window (late) minus the mean loss at
  positions 5–15 % into it (early, ≈ W/10), with its standard error over the windows; negative when later
  tokens are predicted better. Positions past the trained window are never used: a model trained on shorter
  windows than its context loses more there for want of training, not of context;
- the loss on the second half of the repeated random tokens (a model that copies drives it to 0);
- the K-composition (:func:`attnkit.circuits.compose.composition`) of the strongest pair: the best
  induction head of layers ≥ 1 and the best previous-token head of an earlier layer, with the random baseline;
- the validation and training loss of ``series.json`` where it gives them;
- every head's pattern on one repeated random sequence (2 × 16 tokens), for side-by-side views over steps.

Phase change (:func:`phase_change`): the first step whose best induction score's 95 % interval lies wholly
above :data:`THRESHOLD`; the ICL drop (:func:`icl_drop`): the pair of neighbouring checkpoints between which
the ICL score falls fastest per step, among the falls larger than their noise (1.96 × the standard error of the
difference); None when no fall is.

Each checkpoint's result is kept on disk (:func:`attnkit.diskcache.cache_folder` ``/series``), keyed by the
SHA-256 of its weights, config and tokenizer files and the settings, so a series computed once is read back
without loading any model. ``progress(done, total)`` is called as checkpoints finish (an exception raised
there stops the work: that is how Stop works).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from . import checkpoint, diskcache, files, loading, metrics
from .circuits.compose import composition
from .i18n import Message, msg
from .model import run
from .progress import Progress, Steps
from .prompts import SAMPLE_TEXT, truncate, windows
from .files import MB
from .series import Member, Series, SeriesError, check_consistent, read_texts, shape_of
from .standard import head_name, parse_head

__all__ = ["THRESHOLD", "LEVEL", "Settings", "CheckpointResult", "SeriesResult", "analyse", "checkpoint_result",
           "phase_change", "icl_drop", "FORMAT"]

#: The phase change: the first step where the best induction score's 95 % interval clears this.
THRESHOLD = 0.5
LEVEL = 0.95
ICL_EARLY = (0.05, 0.15)          # fractions of a window: "token 50 of 500"
ICL_LATE = (0.9, 1.0)             # "token 500 of 500"
ICL_MAX_T = 1024
ICL_MIN_T = 20
#: The ICL score reads at most this many tokens of the text (and at least 16 windows where the text has them).
ICL_TOKENS = 16384
ICL_MIN_WINDOWS = 16
#: A fall of the ICL score counts when it exceeds this many standard errors of the difference.
ICL_Z = 1.96
PATTERN_N = 16
#: Bump when what is cached changes meaning.
FORMAT = 3


@dataclass(frozen=True)
class Settings:
    text: str = SAMPLE_TEXT
    induction_n: int = 50
    induction_batch: int = 4
    seed: int = 0
    pattern_n: int = PATTERN_N
    icl_window: int | None = None       # the trained window (series.json train_block); None: the context

    def key(self) -> dict:
        return {"text": hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest(),
                "n": self.induction_n, "batch": self.induction_batch, "seed": self.seed, "pattern_n": self.pattern_n,
                "icl_window": self.icl_window}


@dataclass
class CheckpointResult:
    step: int
    label: str
    name: str
    folder: str | None
    info: dict                          # the series.json row (tokens_seen, train_loss, val_loss, …)
    stats: dict                         # registered statistic -> [L, H] on the text
    induction_seq: np.ndarray           # [B, L, H] induction on repeated random tokens, per sequence
    icl: float
    icl_early: float
    icl_late: float
    icl_se: float                       # standard error of the ICL score over the windows
    icl_positions: dict                 # {"window", "early": [first, last], "late": [first, last], "windows"}
    repeat_loss: float
    k_composition: float
    k_pair: tuple                       # (previous-token head, induction head), names
    k_baseline: float
    patterns: np.ndarray                # [L, H, T, T] float16 on pattern_tokens
    pattern_tokens: list
    cached: bool = False

    @property
    def induction(self) -> np.ndarray:
        """[L, H]: metrics.induction_scores (the mean over the sequences)."""
        return self.induction_seq.mean(0)

    def _best(self, scores: np.ndarray) -> tuple[float, str]:
        flat = np.where(np.isfinite(scores), scores, -np.inf)
        l, h = np.unravel_index(int(np.argmax(flat)), flat.shape)
        return float(scores[l, h]), head_name(int(l), int(h))

    @property
    def best_induction(self) -> tuple[float, str]:
        return self._best(self.induction)

    def induction_interval(self) -> tuple[float, float]:
        """95 % t-interval of the best induction head's score over the random sequences."""
        _, name = self.best_induction
        l, h = parse_head(name)
        vals = self.induction_seq[:, l, h].astype(np.float64)
        if len(vals) < 2:
            return (math.nan, math.nan)
        half = t_quantile(0.5 + LEVEL / 2, len(vals) - 1) * vals.std(ddof=1) / math.sqrt(len(vals))
        return float(vals.mean() - half), float(vals.mean() + half)

    def row(self) -> dict:
        """The checkpoint in one flat row (the CLI's JSON and the charts' frame)."""
        ind, ind_head = self.best_induction
        prev, prev_head = self._best(self.stats["previous-token"])
        lo, hi = self.induction_interval()
        return {"step": self.step, "label": self.label, "name": self.name, "folder": self.folder,
                "tokens_seen": self.info.get("tokens_seen"), "induction": ind, "induction_head": ind_head,
                "induction_lo": lo, "induction_hi": hi, "previous_token": prev, "previous_token_head": prev_head,
                "first_token": self._best(self.stats["first-token"])[0],
                "entropy": float(np.nanmean(self.stats["mean entropy"])), "icl": self.icl,
                "icl_early": self.icl_early, "icl_late": self.icl_late, "icl_se": self.icl_se,
                "icl_window": self.icl_positions.get("window"), "icl_early_positions": self.icl_positions.get("early"),
                "icl_late_positions": self.icl_positions.get("late"), "repeat_loss": self.repeat_loss,
                "k_composition": self.k_composition, "k_pair": list(self.k_pair), "k_baseline": self.k_baseline,
                "val_loss": self.info.get("val_loss"), "train_loss": self.info.get("train_loss"),
                "cached": self.cached}


# ----------------------------------------------------------------------------- one checkpoint


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (0.5 < p < 1): the t at which the CDF, integrated from the density on a fine grid
    (trapezoids; within 1e-7 of SciPy for df ≥ 1 at 0.975), reaches ``p``. No SciPy needed."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    grid = np.linspace(0.0, 400.0, 400_001)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(grid ** 2 / df))
    steps = np.diff(grid)[0] / 2 * (pdf[1:] + pdf[:-1])          # trapezoids
    cdf = 0.5 + np.concatenate([[0.0], np.cumsum(steps)])
    return float(np.interp(p, cdf, grid))

def _token_losses(weights, ids: torch.Tensor) -> torch.Tensor:
    """[B, T−1] cross-entropy of each next token (nats)."""
    logits = run(weights, ids).logits
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                           reduction="none").view(ids.shape[0], -1)


def icl_positions(window: int) -> tuple[range, range]:
    """(early, late) target positions of a window of ``window`` tokens: 5–15 % into it, and its last tenth."""
    return (range(math.ceil(ICL_EARLY[0] * window), math.ceil(ICL_EARLY[1] * window)),
            range(math.ceil(ICL_LATE[0] * window), window))


def icl_score(weights, ids: list[int], window: int | None = None) -> tuple[float, float, float, float, dict]:
    """(late − early, early, late, standard error of late − early over the windows, the positions used) of the
    mean losses over the text's windows of min(``window`` or the context, n_ctx, 1024) tokens (see the module
    docstring); NaNs when the text has fewer than 20 tokens."""
    W = min(window or weights.config.n_ctx, weights.config.n_ctx, ICL_MAX_T, len(ids))
    wins = [w for w in windows(ids, W) if len(w) == W][:max(ICL_MIN_WINDOWS, ICL_TOKENS // max(W, 1))]
    if W < ICL_MIN_T or not wins:
        return math.nan, math.nan, math.nan, math.nan, {}
    early_pos, late_pos = icl_positions(W)
    loss = _token_losses(weights, torch.tensor(wins, device=weights.device)).double()   # column p−1: position p
    early = loss[:, early_pos.start - 1: early_pos.stop - 1].mean(1)
    late = loss[:, late_pos.start - 1: late_pos.stop - 1].mean(1)
    diff = late - early
    se = float(diff.std(unbiased=True) / math.sqrt(len(wins))) if len(wins) > 1 else math.nan
    where = {"window": W, "early": [early_pos.start, early_pos.stop - 1], "late": [late_pos.start, late_pos.stop - 1],
             "windows": len(wins)}
    return float(diff.mean()), float(early.mean()), float(late.mean()), se, where


def _k_pair(w, stats: dict, induction: np.ndarray) -> tuple[float, tuple, float]:
    """K-composition of the best previous-token head (earlier layer) into the best induction head (layer ≥ 1)."""
    L, H = induction.shape
    if L < 2:
        return math.nan, ("", ""), math.nan
    later = np.where(np.arange(L)[:, None] >= 1, np.nan_to_num(induction, nan=-1.0), -np.inf)
    il, ih = np.unravel_index(int(np.argmax(later)), later.shape)
    prev = np.where(np.arange(L)[:, None] < il, np.nan_to_num(stats["previous-token"], nan=-1.0), -np.inf)
    pl, ph = np.unravel_index(int(np.argmax(prev)), prev.shape)
    comp = composition(w, modes=("k",))
    score = comp.scores["k"][pl * H + ph, il * H + ih]
    return float(score), (head_name(int(pl), int(ph)), head_name(int(il), int(ih))), float(comp.baseline["mean"])


@torch.no_grad()
def checkpoint_result(loaded, member: Member, settings: Settings = Settings()) -> CheckpointResult:
    """Every number of one checkpoint (computed, not cached)."""
    w = loaded.weights
    ids, _ = truncate(loaded.encode(settings.text), w.config.n_ctx)
    pats = run(w, torch.tensor([ids], device=w.device), capture=["pattern"]).stack("pattern")[:, 0]
    stats = {k: v.double().cpu().numpy() for k, v in metrics.head_scores(pats, ids, window=w.config.windows).items()}
    seq, rep_ids, tr = metrics.induction_per_sequence(w, settings.induction_n, settings.induction_batch, settings.seed)
    n = rep_ids.shape[1] // 2
    rep_loss = F.cross_entropy(tr.logits[:, n:-1].float().reshape(-1, tr.logits.shape[-1]),
                               rep_ids[:, n + 1:].reshape(-1))
    icl, early, late, icl_se, where = icl_score(w, loaded.encode(settings.text), settings.icl_window)
    induction_seq = seq.permute(1, 0, 2).double().cpu().numpy()             # [B, L, H]
    k, pair, base = _k_pair(w, stats, induction_seq.mean(0))
    pn = min(settings.pattern_n, w.config.n_ctx // 2)
    p_ids = metrics.repeated_random_tokens(pn, w.config.d_vocab, seed=settings.seed, batch=1).to(w.device)
    p_pats = run(w, p_ids, capture=["pattern"]).stack("pattern")[:, 0].half().cpu().numpy()
    return CheckpointResult(member.step, member.label, member.name, None if member.folder is None else
                            str(member.folder), dict(member.info), stats, induction_seq, icl, early, late, icl_se,
                            where, float(rep_loss), k, pair, base, p_pats, loaded.token_texts(p_ids[0].tolist()))


# ----------------------------------------------------------------------------- the disk cache

#: A cache entry larger than this is not one this module wrote (it is treated as absent).
CACHE_MAX = 256 * MB
_ENTRY = {"meta.npy", "induction_seq.npy", "patterns.npy"}


def _cache_files(folder: Path) -> list[Path]:
    files_ = [*checkpoint.weight_files(folder), folder / "config.json"]
    return files_ + [folder / f for f in ("tokenizer.json", "vocab.json", "merges.txt") if (folder / f).is_file()]


def _cache_key(member: Member, settings: Settings, device: str) -> tuple[str, tuple] | None:
    """(the key of a checkpoint's entry: the SHA-256 of its weights, config and tokenizer files with the settings;
    the files' stamps, which tell whether any was replaced or changed since), or None when it cannot be keyed."""
    folder = member.folder
    if folder is None:
        return None
    try:
        paths = _cache_files(folder)
        stamps = tuple(diskcache.stamp(f) for f in paths)
        digests = [diskcache.file_digest(f) for f in paths]
    except (OSError, checkpoint.CheckpointError, files.FileError):
        return None
    return diskcache.key_of(FORMAT, digests, settings.key(), device), stamps


def _cache_path(key: str) -> Path:
    return diskcache.cache_folder("series", f"{key}.npz")


def _save(key: str, r: CheckpointResult) -> None:
    meta = {"format": FORMAT, "key": key, "icl": r.icl, "icl_early": r.icl_early, "icl_late": r.icl_late,
            "icl_se": r.icl_se, "icl_positions": r.icl_positions, "repeat_loss": r.repeat_loss,
            "k_composition": r.k_composition, "k_pair": list(r.k_pair), "k_baseline": r.k_baseline,
            "pattern_tokens": r.pattern_tokens, "stats": list(r.stats)}
    arrays = {f"stat{i}": v for i, v in enumerate(r.stats.values())}
    path = _cache_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f"{path.stem}.", suffix=".tmp", delete=False) as f:
            tmp = Path(f.name)
            np.savez(f, meta=np.array(json.dumps(meta, ensure_ascii=False)), induction_seq=r.induction_seq,
                     patterns=r.patterns, **arrays)
        os.replace(tmp, path)
    except OSError:
        pass                           # a cache that cannot be written only costs time


def _load(key: str, member: Member, settings: Settings) -> CheckpointResult | None:
    """The entry of ``key`` (the one reader of a cache entry), or None when it is absent or damaged in any way
    — not a regular file, truncated, not the arrays this module writes, another key's, wrong shapes or types —:
    such an entry is treated as absent, and recomputed and written over."""
    path = _cache_path(key)
    if not files.exists(path):
        return None
    try:
        meta, arrays = _read_entry(path)
        return _entry_result(meta, arrays, key, member, settings)
    except Exception:                  # noqa: BLE001 - whatever is wrong with an entry, it is recomputed
        return None


def _read_entry(path: Path) -> tuple[dict, dict]:
    """(meta, arrays) of a cache file: an uncompressed .npz whose every array's header fits its member."""
    data = files.read_bytes(path, CACHE_MAX)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        names = {i.filename for i in infos}
        if not _ENTRY <= names or any(i.compress_type != zipfile.ZIP_STORED for i in infos):
            raise ValueError("not a series cache entry")
        for i in infos:
            with z.open(i) as f:
                fmt = np.lib.format
                read = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = read(f)
                if dtype.hasobject or math.prod(shape) * dtype.itemsize > i.file_size:
                    raise ValueError(f"{i.filename}: its header does not fit its data")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"][()]))
        arrays = {k: z[k] for k in z.files if k != "meta"}
    return meta, arrays


def _entry_result(meta: dict, arrays: dict, key: str, member: Member, settings: Settings) -> CheckpointResult:
    """The cached numbers, after checking every field's type and every array's shape against the others."""
    numbers = ("icl", "icl_early", "icl_late", "icl_se", "repeat_loss", "k_composition", "k_baseline")
    if meta.get("format") != FORMAT or meta.get("key") != key or meta.get("stats") != list(metrics.STATISTICS):
        raise ValueError("another format, key or set of statistics")
    if not all(isinstance(meta[k], (int, float)) and not isinstance(meta[k], bool) for k in numbers):
        raise ValueError("a number is not one")
    pair, tokens, where = meta["k_pair"], meta["pattern_tokens"], meta["icl_positions"]
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
            and isinstance(tokens, list) and all(isinstance(x, str) for x in tokens) and isinstance(where, dict)):
        raise ValueError("k_pair, pattern_tokens or icl_positions")
    seq, pats = arrays["induction_seq"], arrays["patterns"]
    stats = {name: arrays[f"stat{i}"] for i, name in enumerate(meta["stats"])}
    B, L, H = seq.shape
    T = len(tokens)
    if (B != settings.induction_batch or pats.shape != (L, H, T, T) or pats.dtype != np.float16
            or seq.dtype != np.float64 or any(v.shape != (L, H) or v.dtype != np.float64 for v in stats.values())):
        raise ValueError("shapes or dtypes")
    return CheckpointResult(member.step, member.label, member.name, str(member.folder), dict(member.info), stats,
                            seq, *(float(meta[k]) for k in numbers[:4]), where, float(meta["repeat_loss"]),
                            float(meta["k_composition"]), tuple(pair), float(meta["k_baseline"]), pats, tokens,
                            cached=True)


# ----------------------------------------------------------------------------- the series

@dataclass
class SeriesResult:
    name: str
    source: str
    checkpoints: list[CheckpointResult]
    threshold: float = THRESHOLD
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    @property
    def phase_change_step(self) -> int | None:
        return phase_change(self.checkpoints, self.threshold)

    @property
    def icl_drop(self) -> tuple[int, int] | None:
        return icl_drop(self.checkpoints)

    def frame(self) -> pd.DataFrame:
        """One row per checkpoint (:meth:`CheckpointResult.row`)."""
        return pd.DataFrame([c.row() for c in self.checkpoints])

    def head_frame(self, stat: str = "induction") -> pd.DataFrame:
        """Long table step × head of one statistic ("induction" on random repeats, or a registered one)."""
        rows = []
        for c in self.checkpoints:
            scores = c.induction if stat == "induction" else c.stats[stat]
            rows += [{"step": c.step, "head": head_name(l, h), "layer": l, "value": float(scores[l, h])}
                     for l in range(scores.shape[0]) for h in range(scores.shape[1])]
        return pd.DataFrame(rows)

    def default_head(self) -> str:
        """The head to show first: the one :meth:`verdict` names (the best induction head at the phase change, or
        at the checkpoint with the highest score when there is none), so the page opens on what it says."""
        return self._verdict_checkpoint().best_induction[1]

    def _verdict_checkpoint(self) -> CheckpointResult:
        """The checkpoint the verdict speaks of: the phase change's, else the one with the best induction score."""
        step = self.phase_change_step
        if step is None:
            return max(self.checkpoints, key=lambda c: c.best_induction[0])
        return self.checkpoints[self.steps.index(step)]

    def patterns(self, head: str, step: int, neighbours: int = 1) -> list[tuple[int, np.ndarray]]:
        """(step, [T, T] float32 pattern of ``head``) at ``step`` and up to ``neighbours`` checkpoints each side."""
        l, h = parse_head(head)
        k = self.steps.index(step) if step in self.steps else None
        if k is None:
            raise SeriesError(msg("no checkpoint at step {step}; steps are {steps}", step=step,
                                  steps=", ".join(map(str, self.steps))))
        pick = self.checkpoints[max(0, k - neighbours): k + neighbours + 1]
        return [(c.step, c.patterns[l, h].astype(np.float32)) for c in pick]

    def verdict(self) -> Message:
        """The phase change in one sentence: step, score with its interval, threshold, and why (a catalog message:
        English as a str, shown in the reader's language)."""
        step = self.phase_change_step
        if step is None:
            best = self._verdict_checkpoint()
            lo, hi = best.induction_interval()
            return msg("no phase change found: no checkpoint's best induction score has its {level} interval above "
                       "{threshold} (highest: {score} [{lo}, {hi}] at step {step}, {head})", level=f"{LEVEL:.0%}",
                       threshold=self.threshold, score=f"{best.best_induction[0]:.3f}", lo=f"{lo:.3f}",
                       hi=f"{hi:.3f}", step=best.step, head=best.best_induction[1])
        c = self._verdict_checkpoint()
        lo, hi = c.induction_interval()
        k = self.steps.index(step)
        before = self.checkpoints[k - 1].best_induction[0] if k else math.nan
        return msg("phase change at step {step}: {head}'s induction score is {score} [{lo}, {hi}] ({level} t-interval "
                   "over {n} random sequences), the first whose interval clears {threshold}; it was {before} one "
                   "checkpoint earlier", step=step, head=c.best_induction[1], score=f"{c.best_induction[0]:.3f}",
                   lo=f"{lo:.3f}", hi=f"{hi:.3f}", level=f"{LEVEL:.0%}", n=c.induction_seq.shape[0],
                   threshold=self.threshold, before=f"{before:.3f}")

    @property
    def icl_positions(self) -> dict:
        """The ICL score's window and positions ({"window", "early": [first, last], "late": …, "windows"}) as the
        first checkpoint used them ({} without a text long enough)."""
        return dict(self.checkpoints[0].icl_positions) if self.checkpoints else {}

    def icl_note(self) -> Message:
        """Which positions the ICL score compares, and what its steepest drop is (or that none exceeds its noise)."""
        where = self.icl_positions
        if not where:
            return msg("no ICL score: the text has fewer than {n} tokens", n=ICL_MIN_T)
        args = dict(late=f"{where['late'][0]}–{where['late'][1]}", early=f"{where['early'][0]}–{where['early'][1]}",
                    windows=where["windows"], window=where["window"], z=ICL_Z)
        drop = self.icl_drop
        if drop is None:
            return msg("ICL score: mean loss at positions {late} minus at positions {early} of {windows} windows of "
                       "{window} tokens; no fall between neighbouring checkpoints exceeds {z} standard errors "
                       "(noise)", **args)
        return msg("ICL score: mean loss at positions {late} minus at positions {early} of {windows} windows of "
                   "{window} tokens; it falls fastest between steps {a} and {b} (beyond {z} standard errors)",
                   a=drop[0], b=drop[1], **args)

    def to_json(self) -> dict:
        drop = self.icl_drop
        return {"series": self.name, "source": self.source, "threshold": self.threshold, "level": LEVEL,
                "checkpoints": [_jsonable(c.row()) for c in self.checkpoints],
                "phase_change_step": self.phase_change_step, "icl_drop_steps": list(drop) if drop else None,
                "icl_positions": self.icl_positions, "icl_note": str.__str__(self.icl_note()),
                "verdict": str.__str__(self.verdict()), "notes": self.notes}


def _jsonable(row: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def phase_change(checkpoints: list[CheckpointResult], threshold: float = THRESHOLD) -> int | None:
    """The first step whose best induction score's 95 % interval lies wholly above ``threshold``."""
    for c in checkpoints:
        lo, _ = c.induction_interval()
        if math.isfinite(lo) and lo > threshold:
            return c.step
    return None


def icl_drop(checkpoints: list[CheckpointResult], z: float = ICL_Z) -> tuple[int, int] | None:
    """(step a, step b): the neighbouring checkpoints between which the ICL score falls fastest per step, among the
    falls larger than ``z`` standard errors of the difference (the windows' noise); None when no fall is."""
    best, out = 0.0, None
    for a, b in zip(checkpoints, checkpoints[1:]):
        if b.step > a.step and math.isfinite(a.icl) and math.isfinite(b.icl):
            noise = z * math.hypot(a.icl_se, b.icl_se) if math.isfinite(a.icl_se) and math.isfinite(b.icl_se) else 0.0
            slope = (b.icl - a.icl) / (b.step - a.step)
            if a.icl - b.icl > noise and slope < best:
                best, out = slope, (a.step, b.step)
    return out


def _one(member: Member, settings: Settings, device: str, use_cache: bool, shape: list) -> CheckpointResult:
    """One checkpoint's numbers: from its cache entry, else computed — and written to the cache only when its
    files hash and stamp the same after the computation as before (a checkpoint replaced while it was being read
    would otherwise leave another checkpoint's numbers under its key)."""
    before = _cache_key(member, settings, device) if use_cache else None
    hit = _load(before[0], member, settings) if before else None
    if hit is not None:
        return hit
    loaded = loading.load(member.name, device)
    if not shape:
        shape.append(shape_of(loaded.config))
    elif shape_of(loaded.config) != shape[0]:
        raise SeriesError(msg("checkpoint {label} has another shape than the first: {shape} vs {first}",
                              label=member.label, shape=dict(shape_of(loaded.config)), first=dict(shape[0])))
    result = checkpoint_result(loaded, member, settings)
    folder = member.folder or checkpoint.snapshot_folder(*loading.split_revision(member.name))
    if result.folder is None and folder is not None:
        result.folder = str(folder)
    if use_cache and folder is not None:
        after = _cache_key(Member(member.step, member.label, member.name, folder), settings, device)
        if after is not None and (before is None or before == after):
            _save(after[0], result)
    return result


def analyse(series: Series, text: str | None = None, *, device: str = "cpu", settings: Settings | None = None,
            progress: Progress | None = None, use_cache: bool = True) -> SeriesResult:
    """Every checkpoint's numbers (from the disk cache where they are there), in step order."""
    check_consistent(series)
    if use_cache:
        diskcache.cache_folder()        # a relative ATTNKIT_CACHE: CacheError now, not a silent other folder
    settings = settings or Settings(text=text if text is not None else _default_text(series),
                                    icl_window=series.train_block)
    steps = Steps(progress, len(series), start=True)
    shape: list = []
    out = [steps.after(_one(m, settings, str(device), use_cache, shape)) for m in series.members]
    notes = [msg("induction: {batch} sequences of {n} random tokens repeated (seed {seed}); phase change: first step "
                 "whose best head's {level} interval clears {threshold}", batch=settings.induction_batch,
                 n=settings.induction_n, seed=settings.seed, level=f"{LEVEL:.0%}", threshold=THRESHOLD)]
    return SeriesResult(series.name, series.source, out, THRESHOLD, notes)


def _default_text(series: Series) -> str:
    """The series' own evaluation text (series.json "texts"), else the built-in paragraph; SeriesError when the
    series names a text that cannot be read."""
    text = read_texts(series)
    return SAMPLE_TEXT if text is None else text
