"""Activation patching: which activations carry the answer from a clean prompt to a corrupted one.

A *pair* is a clean and a corrupted prompt of the same token length, an answer token and a
distractor token, and the position whose next-token logits are read (default: the last). The metric
is the logit difference

    LD = logit(answer) − logit(distractor)       at that position,

and its normalised form (LD − LD_corrupted) / (LD_clean − LD_corrupted): the corrupted run is 0,
the clean run 1.

Targets (``target`` × ``per_position``):

    z       each head's z (pattern·v, before W_O) at every position  -> [L, H]     per position [L, H, T]
    resid   the residual stream entering each block (resid_pre), and
            after the last block (what the final norm and the
            unembedding read) as row L                           -> [L + 1]    per position [L + 1, T]
    attn    each layer's attention output (attn_out)                -> [L]        per position [L, T]
    mlp     each layer's MLP output (mlp_out)                       -> [L]        per position [L, T]

Directions: ``denoise`` runs the corrupted prompt and patches the clean activation in (how much of
the clean behaviour does this activation alone restore?); ``noise`` runs the clean prompt and
patches the corrupted activation in (how much does losing it break?). Both are reported on the
same normalised scale (corrupted 0, clean 1).

Cost: the two prompts run once each and their activations are cached. A patched run then *starts
at the patched block* from the receiving run's cached residual stream (``run(start=L, resid=…)``)
and many patches go through the model together, one per batch row (a hook writes row b's patch);
only the answer's and the distractor's unembedding rows are multiplied at the end.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .i18n import msg
from .model import run
from .pieces import printable_token
from .weights import Weights

__all__ = ["TARGETS", "DIRECTIONS", "PatchError", "Pair", "PatchResult", "resolve_token", "make_pair",
           "side_by_side", "two_token_weights", "logit_diffs", "patch", "patch_many",
           "resid_row_name", "MIN_GAP", "SMALL_GAP", "MARGIN", "solves", "normalise", "gap_note", "SetAverage", "average", "average_results"]

TARGETS = ("z", "resid", "attn", "mlp")
DIRECTIONS = ("denoise", "noise")
#: The roles of a token in a pair, as shown in its notes.
_ROLES = {"answer": msg("answer"), "distractor": msg("distractor")}
TARGET_LABELS = {"z": "head z (pattern·v)", "resid": "residual stream (resid_pre; and after the last block)",
                 "attn": "attention output (attn_out)", "mlp": "MLP output (mlp_out)"}
#: Tokens (batch rows × positions) of one patched batch: bounds the memory of one batched run.
MAX_BATCH_TOKENS = 8192
MIN_GAP = 1e-6        # |LD(clean) − LD(base)| below this: no scale to normalise by (NaN, and said)
SMALL_GAP = 0.1       # below this (a tenth of a logit) a normalised value multiplies noise by 1/gap: said
#: Logits: a clean − corrupted gap below this is too small to call a pair solved (:func:`solves`).
MARGIN = 1.0


def solves(clean_ld: float, corrupt_ld: float, margin: float = MARGIN) -> bool:
    """Whether a model solves a pair, from its two logit differences: the clean run prefers the answer
    (LD_clean > 0), the corrupted run does not (LD_corrupted ≤ 0), and the gap LD_clean − LD_corrupted is at
    least ``margin`` logits. The one definition: the examples' "(not solved)" marks, and whether discovery
    reports a circuit's share of the clean logit difference at all, read it."""
    return bool(clean_ld > 0 >= corrupt_ld and clean_ld - corrupt_ld >= margin)


def gap_note(clean: float, base: float, base_name: str = "corrupted") -> str | None:
    """What :func:`normalise` did with this gap when it is not a plain positive one, else None."""
    gap = clean - base
    said = f"LD(clean) {clean:+.4f}, LD({base_name}) {base:+.4f}"
    if not abs(gap) >= MIN_GAP:
        return (f"the clean and {base_name} runs give the same logit difference ({said}): there is no gap to "
                "normalise by, so the normalised values are undefined (NaN); the raw logit differences are shown")
    if gap < 0:
        return (f"the {base_name} run's logit difference is above the clean one ({said}): the pair is not solved "
                f"and the normalised scale ({base_name} 0, clean 1) runs backwards; read the raw logit differences")
    if gap < SMALL_GAP:
        return (f"the gap between the clean and {base_name} runs is small ({gap:.2g} logits; {said}): normalised "
                f"values multiply noise by {1 / gap:.0f}")
    return None
_POINT = {"z": "z", "attn": "attn_out", "mlp": "mlp_out", "resid": "resid_pre"}


def normalise(raw, clean_ld: float, corrupt_ld: float):
    """The gap-normalised logit difference (raw − LD_corrupted) / (LD_clean − LD_corrupted): the corrupted
    run is 0, the clean run 1; NaN when the gap is under :data:`MIN_GAP`. The one definition (patching,
    path patching and a circuit's recovered share use it). A float for a scalar ``raw``, else an array."""
    arr = np.asarray(raw, dtype=float)
    gap = clean_ld - corrupt_ld
    out = np.full_like(arr, np.nan) if abs(gap) < MIN_GAP else (arr - corrupt_ld) / gap + 0.0   # + 0.0: no −0.0
    return float(out) if out.ndim == 0 else out


@dataclass
class SetAverage:
    """Maps of a prompt set averaged cell by cell: ``mean`` and ``std`` over the pairs whose value is defined
    (NaN where none is), ``n`` how many were, ``undefined`` the pairs whose clean and corrupted runs agree;
    ``gaps`` each pair's clean − corrupted logit difference, ``dims``/``target`` the maps' axes and target."""

    mean: np.ndarray
    std: np.ndarray
    n: np.ndarray
    undefined: int
    gaps: list = field(default_factory=list)
    dims: tuple = ()
    target: str = ""

    def describe(self) -> str:
        """One paragraph: how many pairs, what is averaged, which pairs are left out, the gaps' range."""
        left_out = (f"; {self.undefined} pair(s) whose clean and corrupted runs agree are left out (nothing to "
                    "normalise)") if self.undefined else ""
        return (f"{len(self.gaps)} pairs; mean and standard deviation of the normalised logit difference (corrupted "
                f"0, clean 1) over the pairs{left_out}. Each pair is read at its last position. Clean − corrupted "
                f"logit difference: mean {np.mean(self.gaps):+.3f}, from {np.min(self.gaps):+.3f} to "
                f"{np.max(self.gaps):+.3f}.")

    def frame(self) -> pd.DataFrame:
        """Long table: one row per cell (its dims, mean, std, n; the residual stream's rows named)."""
        dims = self.dims or tuple(f"dim{i}" for i in range(self.mean.ndim))
        idx = np.indices(self.mean.shape).reshape(self.mean.ndim, -1)
        df = pd.DataFrame({d: idx[i] for i, d in enumerate(dims)})
        df["mean"], df["std"], df["n"] = self.mean.reshape(-1), self.std.reshape(-1), self.n.reshape(-1)
        if self.target == "resid":
            df["row"] = [resid_row_name(int(l), self.mean.shape[0] - 1) for l in df["layer"]]
        return df


def average(maps: list, gaps: list[float] | None = None, dims: tuple = (), target: str = "") -> SetAverage:
    """Mean and standard deviation of normalised maps over a prompt set (NaN cells left out per cell)."""
    stack = np.stack([np.asarray(m, dtype=float) for m in maps])
    finite = np.isfinite(stack)
    n = finite.sum(0)
    filled = np.where(finite, stack, 0.0)
    mean = np.where(n > 0, filled.sum(0) / np.maximum(n, 1), np.nan)
    var = np.where(finite, (stack - mean) ** 2, 0.0).sum(0) / np.maximum(n, 1)
    gaps = [] if gaps is None else [float(g) for g in gaps]
    return SetAverage(mean, np.where(n > 0, np.sqrt(var), np.nan), n, sum(abs(g) < MIN_GAP for g in gaps), gaps,
                      tuple(dims), target)


def average_results(results: list) -> SetAverage:
    """:func:`average` of the normalised maps of a prompt set's :class:`PatchResult` s (one target)."""
    return average([r.normalised for r in results], [r.clean_ld - r.corrupt_ld for r in results],
                   results[0].dims, results[0].target)


class PatchError(ValueError):
    """Input that cannot be patched; ``str(err)`` is one line saying why. ``table`` (when set) holds
    rows (position, clean token, corrupted token) for showing two tokenizations side by side."""

    def __init__(self, msg: str, table: list[dict] | None = None):
        super().__init__(msg)
        self.table = table


def resid_row_name(layer: int, n_layers: int) -> str:
    """A row of the residual-stream map: the stream entering block ``layer``, or (``layer == n_layers``)
    the stream after the last block, which the final norm and the unembedding read."""
    return f"before L{layer}" if layer < n_layers else f"after L{n_layers - 1} (final)"


@dataclass
class Pair:
    clean: list[int]
    corrupt: list[int]
    answer: int
    distractor: int
    pos: int                                  # the position read (0-based; the last by default)
    answer_token: str = ""                    # the token actually used, e.g. " Mary"
    distractor_token: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def T(self) -> int:
        return len(self.clean)


def resolve_token(model, word: str, role: str = "answer") -> tuple[int, str, str]:
    """(token id, token text, note) for ``word``, which must be one token.

    A word starting with a letter or digit and no space is tried with a leading space first (" Mary" is
    how a name follows a space), then as given; punctuation as given first ("." ends a sentence), then
    with a space. The note says which token is used. More than one token -> PatchError naming the pieces.
    """
    if word is None or word == "":
        raise PatchError(f"the {role} is empty: give a word that is one token, e.g. ' Mary'")
    if word[:1].isspace():
        candidates = [word]
    else:
        candidates = [" " + word, word] if word[:1].isalnum() else [word, " " + word]
    tried = []
    for c in candidates:
        ids = model.encode(c)
        if len(ids) == 1:
            tok = model.token_strs(ids)[0]
            note = (msg("{role}: {word} -> token {tok} (id {id}, as given)", role=_ROLES.get(role, role), word=repr(word),
                        tok=repr(tok), id=ids[0]) if c == word else
                    msg("{role}: {word} -> token {tok} (id {id}, with a leading space)", role=_ROLES.get(role, role),
                        word=repr(word), tok=repr(tok), id=ids[0]))
            if c != word and len(model.encode(word)) == 1:
                note += msg("; without the space it would be {tok}", tok=repr(model.token_strs(model.encode(word))[0]))
            return ids[0], tok, note
        tried.append((c, ids))
    pieces = "; ".join(f"{c!r} is {len(ids)} tokens: " + " + ".join(printable_token(t) for t in model.token_texts(ids))
                       for c, ids in tried)     # a split character reads 猫[1/2] + 猫[2/2], as on every page
    raise PatchError(msg("the {role} must be a single token, but {pieces}; pick a word that is one token", role=role, pieces=pieces))


def side_by_side(clean_toks: list[str], corrupt_toks: list[str]) -> list[dict]:
    """Rows (position, clean token, corrupted token, same) of two tokenizations."""
    n = max(len(clean_toks), len(corrupt_toks))
    rows = []
    for i in range(n):
        a = printable_token(clean_toks[i]) if i < len(clean_toks) else ""
        b = printable_token(corrupt_toks[i]) if i < len(corrupt_toks) else ""
        rows.append({"position": i, "clean": a, "corrupted": b, "same": a == b})
    return rows


def make_pair(model, clean: str, corrupt: str, answer: str, distractor: str, pos: int | None = None,
              bos: int | None = None) -> Pair:
    """Tokenize and check a pair (``model``: a :class:`attnkit.loading.Loaded`); PatchError if unusable.
    ``bos``: a token id put before both prompts (the sidebar's "Prepend <|endoftext|>")."""
    if not clean or not clean.strip():
        raise PatchError("the clean prompt is empty")
    if not corrupt or not corrupt.strip():
        raise PatchError("the corrupted prompt is empty")
    c_ids, k_ids = model.encode(clean), model.encode(corrupt)
    if bos is not None:
        c_ids, k_ids = [bos] + c_ids, [bos] + k_ids
    n_ctx = model.config.n_ctx
    if len(c_ids) > n_ctx or len(k_ids) > n_ctx:
        raise PatchError(f"the prompts have {len(c_ids)} and {len(k_ids)} tokens; the model's context is {n_ctx}")
    if len(c_ids) != len(k_ids):
        ct, kt = model.token_strs(c_ids), model.token_strs(k_ids)
        table = side_by_side(ct, kt)
        first = next((r["position"] for r in table if not r["same"]), min(len(ct), len(kt)))
        raise PatchError(
            f"the clean prompt has {len(c_ids)} tokens and the corrupted one {len(k_ids)}: they must be the same "
            f"length (first difference at position {first}). clean: {'|'.join(printable_token(t) for t in ct)}  "
            f"corrupted: {'|'.join(printable_token(t) for t in kt)}", table)
    a, a_tok, a_note = resolve_token(model, answer, "answer")
    d, d_tok, d_note = resolve_token(model, distractor, "distractor")
    if a == d:
        raise PatchError(f"the answer and the distractor are the same token ({a_tok!r}); pick two different ones")
    T = len(c_ids)
    if pos is None:
        pos = T - 1
    if not -T <= pos < T:
        raise PatchError(f"position {pos} is outside the prompt (0…{T - 1})")
    pos = pos % T
    notes = [a_note, d_note]
    if c_ids == k_ids:
        notes.append(msg("the clean and corrupted prompts are the same tokens: every patch changes nothing"))
    return Pair(c_ids, k_ids, a, d, pos, a_tok, d_tok, notes)


def two_token_weights(w: Weights, answer: int, distractor: int) -> Weights:
    """The same weights with only the answer's and the distractor's unembedding rows: logits [B, T, 2]."""
    idx = torch.tensor([answer, distractor], device=w.device)
    return dataclasses.replace(w, W_U=w.W_U[idx], b_U=None if w.b_U is None else w.b_U[idx])


def logit_diffs(logits2: torch.Tensor, pos: int) -> torch.Tensor:
    """[B] logit(answer) − logit(distractor) at ``pos`` from two-token logits [B, T, 2]."""
    return (logits2[:, pos, 0] - logits2[:, pos, 1]).double()


@dataclass
class PatchResult:
    target: str
    direction: str
    per_position: bool
    raw: np.ndarray                # patched logit differences, shape by ``dims``
    clean_ld: float
    corrupt_ld: float
    pos: int
    n_runs: int = 0                # patched batch rows run
    notes: list[str] = field(default_factory=list)

    @property
    def dims(self) -> tuple[str, ...]:
        base = ("layer", "head") if self.target == "z" else ("layer",)
        return base + (("position",) if self.per_position else ())

    @property
    def normalised(self) -> np.ndarray:
        return normalise(self.raw, self.clean_ld, self.corrupt_ld)

    def frame(self, tokens: list[str] | None = None):
        """Long table: one row per patched activation (layer[, head][, position], logit_diff, normalised)."""
        idx = np.indices(self.raw.shape).reshape(len(self.raw.shape), -1)
        df = pd.DataFrame({d: idx[i] for i, d in enumerate(self.dims)})
        if self.target == "resid":
            df["row"] = [resid_row_name(int(l), self.raw.shape[0] - 1) for l in df["layer"]]
        if "position" in df and tokens is not None:
            df["token"] = [tokens[p] for p in df["position"]]
        df["logit_diff"] = self.raw.reshape(-1)
        df["normalised"] = self.normalised.reshape(-1)
        return df

    def to_json(self) -> dict:
        def clean(a):
            return [clean(x) for x in a] if isinstance(a, list) else (None if a is None or not math.isfinite(a) else a)

        return {"target": self.target, "direction": self.direction, "per_position": self.per_position,
                "dims": list(self.dims), "position_read": self.pos, "clean_logit_diff": self.clean_ld,
                "corrupted_logit_diff": self.corrupt_ld, "patched_runs": self.n_runs,
                "logit_diff": clean(self.raw.tolist()), "normalised": clean(self.normalised.tolist()),
                "notes": self.notes}


def _cache(w2: Weights, ids: list[int], points: set[str]) -> tuple[dict, float]:
    """One run: {(point, layer): activation} for ``points`` plus resid_pre, and its logit difference
    at every position [T] (returned as the Trace's two-token logits). The stream after the last block
    is stored as ``("resid_pre", n_layers)``: what a run started at block n_layers reads."""
    tr = run(w2, ids, capture=sorted(points | {"resid_pre", "resid_post"}))
    caps = dict(tr.captures)
    n = w2.config.n_layers
    caps[("resid_pre", n)] = caps[("resid_post", n - 1)]
    return caps, tr.logits


def _rows_for(target: str, per_position: bool, H: int, T: int) -> list[tuple]:
    """The patches of one layer: (head, position) for z, (position,) otherwise; None = all positions."""
    ps = range(T) if per_position else [None]
    if target == "z":
        return [(h, p) for h in range(H) for p in ps]
    return [(None, p) for p in ps]


def _patched_batch(w2, ids, L, target, rows, recv, src, pos) -> torch.Tensor:
    """Logit differences [len(rows)] of the receiving run with row b's patch at block L."""
    n = len(rows)
    dev = w2.device
    point = _POINT[target]
    s = src[(point, L)][0]                                 # [T, d], or [H, T, e] for z
    b = torch.arange(n, device=dev)
    sel = (torch.tensor([r[0] for r in rows], device=dev),) if target == "z" else ()   # the heads
    if rows[0][1] is not None:                              # one position per row
        sel += (torch.tensor([r[1] for r in rows], device=dev),)
    resid = recv[("resid_pre", L)].expand(n, -1, -1)
    hooks = {}
    if target == "resid":                                   # the run starts from this residual stream
        resid = resid.clone()
        resid[(b, *sel)] = s[sel]
    else:
        def write(t, layer):
            if layer != L:
                return None
            t = t.clone()
            t[(b, *sel)] = s[sel]
            return t
        hooks[point] = write
    tr = run(w2, torch.tensor([ids], device=dev), start=L, resid=resid, hooks=hooks)
    return logit_diffs(tr.logits, pos)


def patch(weights: Weights, pair: Pair, target: str = "z", *, per_position: bool = False,
          direction: str = "denoise", layers: list[int] | None = None,
          progress: Callable[[int, int], None] | None = None, max_batch_tokens: int = MAX_BATCH_TOKENS
          ) -> PatchResult:
    """Patch every activation of ``target`` (one at a time, many per batch) and read the metric."""
    if target not in TARGETS:
        raise PatchError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if direction not in DIRECTIONS:
        raise PatchError(f"unknown direction {direction!r}; choose denoise or noise")
    cfg = weights.config
    L_all, H, T = cfg.n_layers, cfg.n_heads, pair.T
    layers = None if layers is None else list(layers)
    w2 = two_token_weights(weights, pair.answer, pair.distractor)
    point = _POINT[target]
    clean_c, clean_logits = _cache(w2, pair.clean, {point})
    corr_c, corr_logits = _cache(w2, pair.corrupt, {point})
    clean_ld = float(logit_diffs(clean_logits, pair.pos)[0])
    corrupt_ld = float(logit_diffs(corr_logits, pair.pos)[0])
    recv, src, recv_ids = (corr_c, clean_c, pair.corrupt) if direction == "denoise" else (clean_c, corr_c, pair.clean)
    rows = _rows_for(target, per_position, H, T)
    n_rows = L_all + 1 if target == "resid" else L_all        # resid: + the stream after the last block
    if layers is None:
        layers = list(range(n_rows))
    shape = ((L_all, H) if target == "z" else (n_rows,)) + ((T,) if per_position else ())
    raw = np.full(shape, np.nan)
    if per_position:
        # a patch after the position read cannot reach it (causal mask): the receiving run's value, no run
        raw[..., pair.pos + 1:] = corrupt_ld if direction == "denoise" else clean_ld
        rows = [r for r in rows if r[1] <= pair.pos]
    chunk = max(1, max_batch_tokens // T)
    total, done = len(layers) * len(rows), 0
    for L in layers:
        for i in range(0, len(rows), chunk):
            part = rows[i: i + chunk]
            ld = _patched_batch(w2, recv_ids, L, target, part, recv, src, pair.pos).cpu().numpy()
            for (h, p), v in zip(part, ld):
                key = (L,) + ((h,) if target == "z" else ()) + ((p,) if per_position else ())
                raw[key] = v
            done += len(part)
            if progress:
                progress(done, total)
    notes = list(pair.notes)
    if gap_note(clean_ld, corrupt_ld):
        notes.append(gap_note(clean_ld, corrupt_ld))
    if per_position and pair.pos < T - 1:
        notes.append(f"position {pair.pos} is read: positions after it cannot change it (causal mask) and are "
                     "not run; they hold the unpatched value")
    return PatchResult(target, direction, per_position, raw, clean_ld, corrupt_ld, pair.pos, total, notes)


def patch_many(weights: Weights, pairs: list[Pair], target: str = "z", *, per_position: bool = False,
               direction: str = "denoise", progress: Callable[[int, int], None] | None = None) -> dict:
    """Normalised maps over a prompt set: {"mean", "std", "n", "per_pair"} (pairs of different lengths
    can only be averaged without positions)."""
    if per_position and len({p.T for p in pairs}) > 1:
        raise PatchError("per-position maps need pairs of one token length; average without positions instead")
    maps = []
    for i, pr in enumerate(pairs):
        maps.append(patch(weights, pr, target, per_position=per_position, direction=direction).normalised)
        if progress:
            progress(i + 1, len(pairs))
    avg = average(maps)
    return {"mean": avg.mean, "std": avg.std, "n": len(pairs), "per_pair": np.stack(maps)}
