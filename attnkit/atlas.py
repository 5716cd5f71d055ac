"""The head atlas, per window: what every head does on one batch of token windows (the corpus engine's unit).

Two passes over a corpus (driven by :mod:`attnkit.corpus.atlas`, on the local or the Ray engine):

**The scan** (:func:`scan`, one forward that captures patterns; no T×T kept beyond one layer). Per window and
head: every head statistic of :data:`attnkit.metrics.STATISTICS`, twice — on the pattern as it is, and on the
pattern without position 0 (:func:`attnkit.metrics.without_first`: query 0 and key 0 dropped, each row renormalised over keys ≥ 1; a sink on the first
token dominates several statistics; the first-token share itself is kept as it is) — then

* the head's activation ‖z_h·W_O[h]‖ (the norm of what it writes) at its strongest query and at one query drawn
  at random (the draws estimate the activation's distribution; the strongest are the top examples), each with its
  context and the three keys it attends most (the attended tokens, marked in the atlas);
* (query token, most-attended key token) pairs, the window's 8 heaviest by attention mass;
* the query and key vectors at two positions drawn at random (the atlas's 2-D view of the head's Q/K space);
* Σ_t z_h(t) over the window, for the corpus mean each head is mean-ablated to;
* on a sample of windows (the first window of every :data:`F64_EVERY`-th document), every statistic again from
  a float64 run: the largest |float32 − float64| per head (mean distance divided by T − 1, so every statistic
  is compared on a unit scale).

**The effect** (:func:`effect`): the next-token loss of each window with each head mean-ablated (its z replaced
by its corpus mean at every position), exact: the clean run's residual stream is cached at every layer, and the
ablated runs resume at the head's layer (``run(start=l, resid=…)``) with the heads of one layer batched as rows.
Heads that share a role may be ablated together too (``groups``), so that redundancy shows.
"""
from __future__ import annotations

import json
import math
import time

import numpy as np
import torch
from torch.nn import functional

from .i18n import msg
from .metrics import STATISTICS, head_scores
from .model import Intervention, run
from .verify import as_dtype

__all__ = ["LABELS", "PATTERN_AND_EFFECT", "PATTERN_ONLY", "EFFECT_ONLY", "NEITHER", "ROLE_NAMES", "LABEL_NAMES",
           "NO_FIRST", "F64_EVERY", "PAIRS_PER_WINDOW", "QK_PER_WINDOW", "CONTEXT", "TOP_KEYS",
           "stat_names", "stat_column", "scan", "f64_checked", "effect", "effect_estimate", "RowMeanHead",
           "window_seed", "window_nll", "float64_copy"]

#: Suffix of a statistic computed without position 0 (its column, and its name in the atlas files).
NO_FIRST = " (no position 0)"
#: The verdicts of a role (see :mod:`attnkit.atlas_result`): exactly these identifiers.
PATTERN_AND_EFFECT, PATTERN_ONLY, EFFECT_ONLY, NEITHER = LABELS = (
    "pattern and effect", "pattern only", "effect only", "neither")
#: What is shown for a statistic (a role) and a verdict; the identifiers are what the JSON holds.
ROLE_NAMES = {"previous-token": msg("previous-token"), "first-token": msg("first-token"), "self": msg("self"),
              "duplicate-token": msg("duplicate-token"), "induction": msg("induction"),
              "mean entropy": msg("mean entropy"), "mean distance": msg("mean distance")}
LABEL_NAMES = {PATTERN_AND_EFFECT: msg("pattern and effect"), PATTERN_ONLY: msg("pattern only"),
               EFFECT_ONLY: msg("effect only"), NEITHER: msg("neither")}
#: The float64 check runs on the first window of every F64_EVERY-th document (document 0 always).
F64_EVERY = 16
#: (query token, key token) pairs kept per window and head (the heaviest by attention mass).
PAIRS_PER_WINDOW = 8
#: Positions per window whose query and key vectors are kept for the 2-D view.
QK_PER_WINDOW = 2
#: Tokens of context shown before an example's query; the keys shown with their neighbours.
CONTEXT = 10
TOP_KEYS = 3
#: Floats of logits held at once by the effect pass (rows × T × vocab): 64M = 256 MB in float32.
LOGIT_BUDGET = 64 * 2**20


def stat_names() -> list[str]:
    """The head statistics, in the registry's order (read at call time: a statistic registered later counts)."""
    return list(STATISTICS)


def stat_column(name: str, no_first: bool = False) -> str:
    return name + NO_FIRST if no_first else name


def window_seed(doc: int, window: int) -> int:
    """The seed of a window's random draws: the same on any engine, in any batch, in any order."""
    return (int(doc) * 1_000_003 + int(window) * 7_919 + 12_345) % (2**31 - 1)


def _scores(p: torch.Tensor, ids: torch.Tensor, window) -> dict[str, torch.Tensor]:
    """Every statistic of one window's patterns ``[H, T, T]``, plain and without position 0 -> {column: [H]}."""
    plain = head_scores(p, ids, window=window)
    out = {stat_column(k): v for k, v in plain.items()}
    rest = head_scores(p, ids, window=window, exclude_first=True) if p.shape[-1] > 2 else \
        {k: torch.full_like(v, math.nan) for k, v in plain.items()}
    rest["first-token"] = plain["first-token"]        # the share that is dropped: kept as it is
    out.update({stat_column(k, True): v for k, v in rest.items()})
    return out


def _error(a: torch.Tensor, b: torch.Tensor, name: str, T: int) -> torch.Tensor:
    """|float32 − float64| of a statistic on a unit scale (mean distance over T − 1); NaN where both are NaN."""
    d = (a.double() - b.double()).abs()
    d = torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(d), d)
    return d / max(T - 1, 1) if name.startswith("mean distance") else d


class _Stats(Intervention):
    """The statistics of every layer from the pattern as the forward makes it: per layer {column: [B, H]}."""

    def __init__(self, ids: torch.Tensor, config):
        super().__init__()
        self.ids, self.config = ids, config
        self.per_layer: list[dict] = []

    def pattern(self, p, layer):
        w = self.config.window(layer)
        per_b = [_scores(p[b], self.ids[b], w) for b in range(p.shape[0])]
        self.per_layer.append({k: torch.stack([d[k] for d in per_b]) for k in per_b[0]})


class _Scan(_Stats):
    """The scan's hooks: statistics (from :class:`_Stats`), pairs, examples, Q/K samples and z sums per layer."""

    def __init__(self, ids, config, weights, positions, no_first: bool, docs, nums):
        super().__init__(ids, config)
        self.weights, self.positions, self.no_first = weights, positions, no_first   # positions [B, QK_PER_WINDOW]
        self.docs, self.nums = list(docs), list(nums)
        self.kept: torch.Tensor | None = None          # this layer's pattern, until its z is seen
        self.q_at: torch.Tensor | None = None
        self.layers: list[dict] = []

    def hooks(self):
        rot = self.config.position == "rotary"
        return [("pattern", self.pattern), ("z", self.z), ("q_rot" if rot else "q", self._q),
                ("k_rot" if rot else "k", self._k)]

    def _q(self, q, layer):                              # [B, H, T, e] -> at the sampled positions
        idx = self.positions[:, None, :, None].expand(-1, q.shape[1], -1, q.shape[-1])
        self.q_at = torch.gather(q, 2, idx).float()

    def _k(self, k, layer):
        k = k.repeat_interleave(self.config.group, 1) if self.config.group > 1 else k
        idx = self.positions[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[-1])
        self.layers.append({"q": self.q_at, "k": torch.gather(k, 2, idx).float()})

    def pattern(self, p, layer):
        super().pattern(p, layer)
        self.kept = p
        self.layers[layer].update(_pairs(p, self.ids, self.no_first))

    def z(self, z, layer):
        """The activations, and of this layer's pattern only the rows of the queries shown (strongest, random)."""
        W_O = self.weights.layers[layer].W_O.float()                       # [H, e, d]
        act = torch.linalg.vector_norm(torch.einsum("bhte,hed->bhtd", z.float(), W_O), dim=-1)   # [B, H, T]
        B, H, T = act.shape
        best = act[..., 1:].argmax(-1) + 1 if T > 1 else torch.zeros(B, H, dtype=torch.long)
        rand = torch.tensor([[_rand_query(d, n, h, layer, T) for h in range(H)] for d, n in zip(self.docs, self.nums)])
        queries = torch.stack([best, rand.to(best.device)], -1)            # [B, H, 2]
        rows = torch.gather(self.kept, 2, queries[..., None].expand(-1, -1, -1, T))      # [B, H, 2, T]
        self.layers[layer].update(act=act, z_sum=z.double().sum(-2), queries=queries, rows=rows)
        self.kept = None


def _pairs(p: torch.Tensor, ids: torch.Tensor, no_first: bool) -> dict:
    """Per window and head, the heaviest (query token, most-attended key token) pairs over queries i ≥ 1 (key 0
    left out when ``no_first``): {"pairs": [B][H] list of (query id, key id, count, mass)}."""
    B, H, T, _ = p.shape
    if T < 2 + no_first:
        return {"pairs": [[[] for _ in range(H)] for _ in range(B)]}
    rows = p[..., 1 + no_first:, int(no_first):]                           # queries, keys considered
    mass, j = rows.max(-1)                                                  # [B, H, Q]
    j = j + int(no_first)
    out = []
    for b in range(B):
        q_ids = ids[b, 1 + no_first:]
        k_ids = ids[b][j[b]]                                                # [H, Q]
        per_h = []
        for h in range(H):
            code = q_ids.long() * (1 << 32) + k_ids[h].long()
            uniq, inv = torch.unique(code, return_inverse=True)
            tot = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inv, mass[b, h].double())
            cnt = torch.bincount(inv, minlength=len(uniq))
            top = torch.argsort(-tot, stable=True)[:PAIRS_PER_WINDOW]
            per_h.append([(int(uniq[t] >> 32), int(uniq[t] & 0xFFFFFFFF), int(cnt[t]), float(tot[t])) for t in top])
        out.append(per_h)
    return {"pairs": out}


def _example(pattern_row: torch.Tensor, ids: list[int], i: int, act: float, pieces) -> str:
    """One example as JSON: the query i with its context, and the keys it attends most with theirs."""
    w, j = torch.topk(pattern_row[: i + 1], min(TOP_KEYS, i + 1))
    lo = max(0, i - CONTEXT)
    keys = []
    for jj, ww in zip(j.tolist(), w.tolist()):
        a, b = max(0, jj - 3), min(i + 1, jj + 3)
        keys.append({"pos": jj, "weight": round(ww, 6), "start": a, "pieces": pieces(ids[a:b])})
    return json.dumps({"pos": i, "act": act, "start": lo, "pieces": pieces(ids[lo: i + 1]), "keys": keys},
                      ensure_ascii=False)


def _sample_positions(docs, nums, T: int) -> torch.Tensor:
    """[B, QK_PER_WINDOW] positions in 1 … T−1 (or 0), drawn from each window's own seed."""
    out = []
    for d, n in zip(docs, nums):
        g = torch.Generator().manual_seed(window_seed(d, n))
        out.append(torch.randint(1, T, (QK_PER_WINDOW,), generator=g) if T > 1 else torch.zeros(QK_PER_WINDOW, dtype=torch.long))
    return torch.stack(out)


def _rand_query(doc: int, num: int, h: int, layer: int, T: int) -> int:
    g = torch.Generator().manual_seed(window_seed(doc, num) + 31 * layer + h + 1)
    return int(torch.randint(1, T, (1,), generator=g)) if T > 1 else 0


def f64_checked(doc: int, window: int) -> bool:
    """Whether the float64 check runs on this window (the first window of every F64_EVERY-th document)."""
    return int(window) == 0 and int(doc) % F64_EVERY == 0


def _f64_errors(weights64, ids: torch.Tensor, stats32: list[dict], T: int) -> dict[str, np.ndarray]:
    """Largest |float32 − float64| over the statistics (plain, and without position 0) of one window's heads:
    {"f64_error": [L, H], "f64_error_no0": [L, H]}."""
    hook = _Stats(ids[None], weights64.config)
    run(weights64, ids[None], intervention=hook, logits=False)
    out = {}
    for suffix, no_first in (("", False), ("_no0", True)):
        errs = []
        for lay32, lay64 in zip(stats32, hook.per_layer):
            cols = [stat_column(s, no_first) for s in stat_names()]
            e = torch.stack([_error(lay32[c], lay64[c][0], c, T) for c in cols])     # [S, H]
            errs.append(torch.nan_to_num(e, nan=math.inf).max(0).values)
        out["f64_error" + suffix] = torch.stack(errs).numpy()
    return out


def scan(weights, ids: torch.Tensor, docs, nums, pieces, *, no_first: bool = False, weights64=None) -> dict:
    """The scan of one batch of equal-length windows ``ids`` [B, T] -> columns, one row per (window, layer, head)
    in that order (see the module's doc). ``pieces(ids) -> [str]`` shows tokens; ``no_first`` leaves key 0 out
    of the pairs; ``weights64`` (a float64 copy) runs the float64 check on the windows :func:`f64_checked` picks."""
    B, T = ids.shape
    cfg = weights.config
    L, H = cfg.n_layers, cfg.n_heads
    hook = _Scan(ids, cfg, weights, _sample_positions(docs, nums, T).to(ids.device), no_first, docs, nums)
    run(weights, ids, intervention=hook, logits=False)
    cols = _stat_rows(hook.per_layer, B, L, H)
    cols.update(_layer_rows(hook, ids, docs, nums, pieces))
    f64 = {"f64_error": np.full((B, L, H), np.nan), "f64_error_no0": np.full((B, L, H), np.nan)}
    for b in range(B):
        if weights64 is not None and f64_checked(docs[b], nums[b]):
            errs = _f64_errors(weights64, ids[b].cpu(), [{k: v[b].cpu() for k, v in lay.items()} for lay in hook.per_layer], T)
            for k, v in errs.items():
                f64[k][b] = v
    cols.update({k: v.reshape(-1).tolist() for k, v in f64.items()})
    cols["positions"] = [T] * (B * L * H)
    return cols


def _stat_rows(per_layer: list[dict], B: int, L: int, H: int) -> dict:
    return {c: torch.stack([lay[c] for lay in per_layer], 1).reshape(-1).double().cpu().tolist()   # [B, L, H]
            for c in per_layer[0]}


def _layer_rows(hook: _Scan, ids: torch.Tensor, docs, nums, pieces) -> dict:
    """Examples, pairs, Q/K samples and z sums as columns in (window, layer, head) order."""
    names = ("act_max", "act_rand", "ex_max", "ex_rand", "pair_q", "pair_k", "pair_q_piece", "pair_k_piece",
             "pair_n", "pair_mass", "qk_pos", "qk_piece", "qk_q", "qk_k", "z_sum")
    cols: dict[str, list] = {n: [] for n in names}
    B, T = ids.shape
    for b in range(B):
        tokens = ids[b].tolist()
        pos = hook.positions[b].tolist()
        for layer, lay in enumerate(hook.layers):
            for h in range(lay["act"].shape[1]):
                _head_row(cols, lay, b, h, tokens, pos, pieces)
    return cols


def _head_row(cols, lay, b, h, tokens, pos, pieces) -> None:
    act = lay["act"][b, h]
    for k, name in enumerate(("max", "rand")):
        i = int(lay["queries"][b, h, k])
        cols[f"act_{name}"].append(float(act[i]))
        cols[f"ex_{name}"].append(_example(lay["rows"][b, h, k], tokens, i, round(float(act[i]), 6), pieces))
    pairs = lay["pairs"][b][h]
    cols["pair_q"].append([p[0] for p in pairs])
    cols["pair_k"].append([p[1] for p in pairs])
    cols["pair_q_piece"].append(pieces([p[0] for p in pairs]) if pairs else [])
    cols["pair_k_piece"].append(pieces([p[1] for p in pairs]) if pairs else [])
    cols["pair_n"].append([p[2] for p in pairs])
    cols["pair_mass"].append([p[3] for p in pairs])
    cols["qk_pos"].append(pos)
    cols["qk_piece"].append(pieces([tokens[i] for i in pos]))
    cols["qk_q"].append(lay["q"][b, h].reshape(-1).tolist())
    cols["qk_k"].append(lay["k"][b, h].reshape(-1).tolist())
    cols["z_sum"].append(lay["z_sum"][b, h].tolist())


# ----------------------------------------------------------------------------- the effect pass

class RowMeanHead(Intervention):
    """Rows ablate different heads of one layer: in row block r (``rows_per`` rows each) the head ``heads[r]``'s
    z is replaced by its mean ``means[heads[r]]`` [e] at every position (a group: a tuple of heads, all replaced)."""

    def __init__(self, layer: int, heads: list, means: torch.Tensor, rows_per: int):
        super().__init__(layers=[layer])
        self.heads, self.means, self.rows_per = heads, means, rows_per

    def z(self, z, layer):
        z = z.clone()
        for r, hs in enumerate(self.heads):
            rows = slice(r * self.rows_per, (r + 1) * self.rows_per)
            for h in (hs if isinstance(hs, tuple) else (hs,)):
                z[rows, h] = self.means[h].to(z.dtype)
        return z


def window_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Σ over positions of −log p(next token), per row: logits [R, T, V], ids [R, T] -> [R] float64. The last
    position has no next token (its target is ignored), so the logits are read in place, not copied."""
    target = ids.roll(-1, dims=1)
    target[:, -1] = -100
    nll = functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
                                   reduction="none", ignore_index=-100)
    return nll.view(ids.shape).double().sum(-1)


def _ablated(weights, ids, resid, layer, jobs, means_l, budget) -> list[torch.Tensor]:
    """Σ NLL per window [B] for each job (a head, or a tuple of heads) mean-ablated at ``layer``."""
    B, T = ids.shape
    per_run = max(1, budget // max(1, B * T * weights.config.d_vocab))
    out = []
    for s in range(0, len(jobs), per_run):
        chunk = jobs[s: s + per_run]
        iv = RowMeanHead(layer, chunk, means_l, B)
        rep = ids.repeat(len(chunk), 1)
        tr = run(weights, rep, start=layer, resid=resid.repeat(len(chunk), 1, 1), intervention=iv)
        out += list(window_nll(tr.logits, rep).view(len(chunk), B))
    return out


def effect(weights, ids: torch.Tensor, means: torch.Tensor, groups=(), budget: int = LOGIT_BUDGET) -> dict:
    """Σ NLL per window, clean and with each head mean-ablated alone, then each group together.

    ``means`` [L, H, e]: the heads' corpus means; ``groups``: tuples of (layer, head). Returns {"tokens": [B],
    "base": [B], "heads": [L, H, B] (ablated − clean), "groups": [G, B]} as float64 arrays. The ablated runs
    resume from the clean run's cached residual stream at the head's layer (earlier layers are not recomputed)."""
    cfg = weights.config
    B, T = ids.shape
    tr = run(weights, ids, capture=["resid_pre"])
    base = window_nll(tr.logits, ids)
    heads = np.zeros((cfg.n_layers, cfg.n_heads, B))
    for layer in range(cfg.n_layers):
        res = _ablated(weights, ids, tr["resid_pre", layer], layer, list(range(cfg.n_heads)), means[layer], budget)
        heads[layer] = torch.stack(res).numpy() - base.numpy()
    out_groups = np.zeros((len(groups), B))
    for g, members in enumerate(groups):
        first = min(l for l, _ in members)
        iv = _GroupMean(members, means)
        run_g = run(weights, ids, start=first, resid=tr["resid_pre", first], intervention=iv)
        out_groups[g] = window_nll(run_g.logits, ids).numpy() - base.numpy()
    return {"tokens": np.full(B, T - 1), "base": base.numpy(), "heads": heads, "groups": out_groups}


def effect_estimate(weights, ids: torch.Tensor, means: torch.Tensor, budget: int = LOGIT_BUDGET) -> dict:
    """Seconds :func:`effect` (no groups) takes on ``ids`` on this machine now, from three timed parts: the clean
    run, then every head of the first layer and of the last mean-ablated as :func:`effect` runs them. A run resumed
    at layer l costs its L − l blocks plus the unembedding, linear in l, so the layers between are interpolated —
    2 layers run instead of L (GPT-2 small: 24 ablated runs, not 144). Returns {"clean_s", "first_layer_s",
    "last_layer_s", "estimate_s"}."""
    L, H = weights.config.n_layers, weights.config.n_heads
    t0 = time.perf_counter()
    tr = run(weights, ids, capture=["resid_pre"])
    window_nll(tr.logits, ids)
    clean = time.perf_counter() - t0
    per = {}
    for layer in dict.fromkeys((0, L - 1)):                  # one layer when L = 1
        t0 = time.perf_counter()
        _ablated(weights, ids, tr["resid_pre", layer], layer, list(range(H)), means[layer], budget)
        per[layer] = time.perf_counter() - t0
    slope = (per[0] - per[L - 1]) / max(L - 1, 1)            # seconds per block of H rows
    total = clean + sum(per[L - 1] + slope * (L - 1 - l) for l in range(L))
    return {"clean_s": clean, "first_layer_s": per[0], "last_layer_s": per[L - 1], "estimate_s": total}


class _GroupMean(Intervention):
    """Every head of ``members`` ((layer, head) pairs, any layers) replaced by its mean."""

    def __init__(self, members, means):
        super().__init__()
        self.members, self.means = list(members), means

    def z(self, z, layer):
        hs = [h for l, h in self.members if l == layer]
        if not hs:
            return None
        z = z.clone()
        for h in hs:
            z[:, h] = self.means[layer, h].to(z.dtype)
        return z


def float64_copy(weights):
    """The float64 copy of ``weights`` the check runs on (on the CPU)."""
    return as_dtype(weights, torch.float64, "cpu")
