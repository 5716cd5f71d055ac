"""The cache-eviction lab: the loss of a long text when the KV cache keeps only k sink tokens and a window of the w
most recent, for a grid of (k, w), beside the full cache; and a verdict on "keeping the first tokens rescues a
windowed cache" (StreamingLLM, Xiao et al. 2023).

In a (k, w) cell query i sees key j when ``j ≤ i and (j < k or j > i − w)``: the first k tokens and the w most
recent, itself included (:func:`attnkit.attention.is_hidden`, the one place that rule lives). Two modes:

original-positions  every kept key keeps the position it had. A cache that evicts this way gives exactly the
                    answer of one forward with the dropped keys masked (``run(keep=…)``), which is how the loss
                    is computed here, checked against HuggingFace given the same 4-D mask.
rolling             the cache re-assigns positions inside itself (StreamingLLM): sinks at slots 0 … k − 1, the
                    window after them, the query in the last slot. Only rotary families allow it: rotating a key
                    to a new slot is one rotation. With learned positions (GPT-2) the position is added to the
                    input before the first layer, so every cached key and value already carries its original
                    position; re-assigning it means recomputing the cache, so the mode is refused there. Its loss
                    is computed in one pass by :class:`RollingPositions`: once the cache is full (i ≥ k + w) the
                    query sits at slot P = k + w − 1, so a window key keeps its distance i − j and only a sink's
                    score changes, to rot(q_i, P)·rot(k_j, j).

Intervals: paired percentile bootstrap (:class:`attnkit.bootstrap.Boot`) over blocks of :data:`BLOCK` predicted
tokens (a text's neighbouring tokens are not independent draws; blocks keep that dependence), the same
resampled blocks for every cell, so differences between cells get their own intervals.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch.nn import functional

from .ablations.base import MIN_EFFECT, MIN_TOKENS, NOT_ENOUGH, NOT_SUPPORTED, SUPPORTED, Verdict
from .attention import Keep, repeat_kv, rolling_refusal, rotary_tables, rotate
from .bootstrap import Boot
from .charts import sinks as sink_charts
from .i18n import Message, join, msg, render
from .model import Intervention, run
from .sinks import SinkStats, sink_rule

__all__ = ["ORIGINAL", "ROLLING", "MODES", "BLOCK", "CLAIM", "RULE", "rolling_refusal", "RollingPositions",
           "token_losses", "EvictionLab", "eviction_lab", "rescue_verdict"]

ORIGINAL, ROLLING = "original-positions", "rolling"
MODES = (ORIGINAL, ROLLING)
#: Predicted tokens per bootstrap unit.
BLOCK = 64
#: "Rescues" means the sinks win back at least this share of what the window alone costs (a rescue of a tenth
#: of the damage is measurable but leaves the windowed cache broken).
RESCUE_SHARE = 0.5

CLAIM = msg("Keeping the first tokens rescues a windowed cache: where a cache of the w most recent keys raises the "
            "loss, also keeping the first k tokens wins most of it back.")
RULE = msg("Judged in the original-positions mode at the smallest window w of the grid and the largest k: damage = "
           "loss(k = 0, w) − loss(full cache), rescue = loss(k = 0, w) − loss(k, w) and margin = rescue − {share} × "
           "damage, each with its paired 95 % block-bootstrap interval. Supported: the damage and the rescue lie "
           "wholly above {min} nats/token and the margin wholly above 0 (the sinks win back at least {pct} of the "
           "damage). Not supported: the damage lies above {min} and the rescue wholly below it or the margin wholly "
           "below 0. Otherwise, or with fewer than {tokens} predicted tokens: not enough evidence.",
           share=RESCUE_SHARE, pct=f"{RESCUE_SHARE:.0%}", min=MIN_EFFECT, tokens=MIN_TOKENS)


class RollingPositions(Intervention):
    """The rolling cache's scores without the cache: for queries i ≥ k + w (the cache full) the score on sink j < k
    becomes scale·rot(q_i, P)·rot(k_j, j) with P = k + w − 1, the query's slot; every other score is unchanged
    (a window key keeps its distance i − j, and before the cache fills slots are positions). Use it with
    ``run(keep=Keep(k, w))`` for the keys the cache holds."""

    def __init__(self, weights, keep: Keep):
        super().__init__()
        why = rolling_refusal(weights.config)
        if why is not None:
            raise ValueError(render(why))
        self.weights, self.keep = weights, keep

    def q(self, q, layer):
        self._q = q                                   # before rotation

    def k_rot(self, k, layer):
        self._k = k

    def scores(self, s, layer):
        k, w = int(self.keep.sinks), self.keep.window
        if k == 0 or w is None or s.shape[-2] <= k + w:
            return None
        cfg, wt = self.weights.config, self.weights
        cos, sin = rotary_tables(wt.inv_freq, torch.tensor([k + w - 1], device=s.device), wt.rope_attention_scale,
                                 self._q.dtype)
        q_slot = rotate(self._q[..., k + w:, :], cos, sin)                          # [B, H, T − k − w, e]
        sink_keys = repeat_kv(self._k[..., :k, :], cfg.group)                     # [B, H, k, e]
        s = s.clone()
        s[..., k + w:, :k] = torch.matmul(q_slot, sink_keys.transpose(-1, -2)) * cfg.attn_scale(layer)
        return s


def token_losses(weights, ids, keep: Keep | None = None, mode: str = ORIGINAL) -> np.ndarray:
    """−log p(ids[t + 1]) for t = 0 … T − 2 (float64 nats) with the cache keeping ``keep`` in ``mode``
    (None: the full cache)."""
    iv = RollingPositions(weights, keep) if mode == ROLLING and keep is not None else None
    logits = run(weights, ids, keep=keep, intervention=iv).logits[0, :-1]
    target = torch.as_tensor(ids[1:], device=logits.device)
    return functional.cross_entropy(logits.double(), target, reduction="none").cpu().numpy()


# ----------------------------------------------------------------------------- the lab

@dataclass
class EvictionLab:
    """The loss of every (k, w, mode) cell and of the full cache, with intervals, and the verdict.

    rows: one dict per cell: sinks, window, mode, loss, low, high (its 95 % interval), delta, delta_low,
    delta_high (cell − full cache), keys (the most keys a query sees: k + w), seconds, cost (÷ the full cache's).
    """

    model: str
    windows: int
    tokens: int
    block: int
    resamples: int
    full: dict
    rows: list
    verdict: Verdict
    refused: dict = field(default_factory=dict)          # mode -> why it was not run
    sink_stats: SinkStats | None = None
    rescue: dict = field(default_factory=dict)

    def to_pandas(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def chart(self):
        """Loss against window per k with interval bands, the full cache as a rule
        (:func:`attnkit.charts.sinks.loss_chart`)."""
        return sink_charts.loss_chart(self.to_pandas(), self.full)

    def to_dict(self) -> dict:
        v = self.verdict
        return {"model": self.model, "windows": self.windows, "tokens": self.tokens,
                "loss_unit": "nats per predicted token", "interval": {
                    "method": "paired percentile bootstrap over blocks of predicted tokens", "block": self.block,
                    "resamples": self.resamples, "level": 0.95},
                "mask_rule": "query i sees key j when j <= i and (j < sinks or j > i - window)",
                "full": self.full, "grid": _json_rows(self.rows),
                "refused": {m: render(why) for m, why in self.refused.items()},
                "claim": render(CLAIM), "rescue": self.rescue,
                "verdict": {"status": v.status, "text": render(v.text), "why": render(v.why),
                            "settle": render(v.settle), "rule": render(v.rule)},
                "sinks": None if self.sink_stats is None else self.sink_stats.to_dict()}


def _json_rows(rows: list) -> list:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()} for r in rows]


def _blocks(losses: list[np.ndarray], block: int) -> tuple[np.ndarray, np.ndarray]:
    """(unit id of every predicted token, tokens per unit): consecutive blocks of ``block`` tokens inside each window."""
    ids, sizes, n = [], [], 0
    for nll in losses:
        m = -(-len(nll) // block)
        ids.append(n + np.arange(len(nll)) // block)
        sizes += [min(block, len(nll) - b * block) for b in range(m)]
        n += m
    return np.concatenate(ids), np.array(sizes, dtype=float)


def _boot(columns: list[np.ndarray], unit: np.ndarray, sizes: np.ndarray, resamples: int, seed: int) -> Boot:
    """A Boot over the units with one numerator per column (per-token losses, all windows concatenated)."""
    D = len(sizes)
    rng = np.random.default_rng(seed)
    W = rng.multinomial(D, np.full(D, 1.0 / D), size=int(resamples)).astype(np.float64) if D >= 2 and resamples else None
    S = np.stack([np.bincount(unit, weights=c, minlength=D) for c in columns], axis=1)     # [D, cells]
    acc = Boot(W, (len(columns),), (1,))
    acc.add(np.arange(D), S, sizes[:, None])
    return acc


def _cells(sinks, windows, modes, config) -> tuple[list, dict]:
    refused = {}
    cells = []
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        why = rolling_refusal(config) if mode == ROLLING else None
        if why is not None:
            refused[mode] = why
            continue
        cells += [(int(k), int(w), mode) for k in sorted(set(sinks)) for w in sorted(set(windows))]
    return cells, refused


def _check_grid(sinks, windows, docs) -> list:
    docs = [list(d) for d in docs if len(d) >= 2]
    if not docs:
        raise ValueError("no window of at least 2 tokens: there is no next token to predict")
    if not sinks or any(int(k) < 0 for k in sinks):
        raise ValueError("sinks: give one or more counts ≥ 0 (0: no sink kept)")
    if not windows or any(int(w) < 1 for w in windows):
        raise ValueError("windows: give one or more sizes ≥ 1 (the w most recent keys, the query itself included)")
    return docs


def eviction_lab(weights, docs, sinks=(0, 1, 4), windows=(32, 64, 128, 256), modes=(ORIGINAL,), *,
                 resamples: int = 1000, seed: int = 0, block: int = BLOCK, sink_stats: SinkStats | None = None,
                 model: str = "", progress: Callable[[int, int], None] | None = None) -> EvictionLab:
    """The loss of every (k, w, mode) cell and of the full cache on ``docs`` (token windows of ≤ the model's
    context; each starts its own cache, its first token the sink), with paired block-bootstrap intervals and the
    verdict. ``sink_stats`` (:func:`attnkit.sinks.measure_sinks` on the same windows) lets the verdict say
    whether the model has a sink. ``progress(done, total)`` after each forward."""
    docs = _check_grid(sinks, windows, docs)
    cells, refused = _cells(sinks, windows, modes, weights.config)
    total, done = (len(cells) + 1) * len(docs), 0
    losses: list[list[np.ndarray]] = []
    seconds = []
    for cell in [None] + cells:
        t0, per_doc = time.perf_counter(), []
        for ids in docs:
            keep = None if cell is None else Keep(cell[0], cell[1])
            per_doc.append(token_losses(weights, ids, keep, ORIGINAL if cell is None else cell[2]))
            done += 1
            if progress:
                progress(done, total)
        losses.append(per_doc)
        seconds.append(time.perf_counter() - t0)
    unit, sizes = _blocks(losses[0], block)
    acc = _boot([np.concatenate(c) for c in losses], unit, sizes, resamples, seed)
    rows, full = _rows(acc, cells, seconds)
    rescue = _rescue(acc, cells, rows)
    verdict = rescue_verdict(rescue, int(sizes.sum()), sink_stats)
    return EvictionLab(model, len(docs), int(sizes.sum()), block, int(resamples), full, rows, verdict, refused,
                       sink_stats, rescue)


def _rows(acc: Boot, cells: list, seconds: list) -> tuple[list, dict]:
    mean, lo, hi = acc.result(0.95)
    dnum = acc.S - acc.S[0]
    dmean, dlo, dhi = acc.result(0.95, dnum, acc.bS - acc.bS[:, :1])
    full = {"loss": float(mean[0]), "low": float(lo[0]), "high": float(hi[0]), "seconds": seconds[0]}
    rows = []
    for c, (k, w, mode) in enumerate(cells, start=1):
        rows.append({"sinks": k, "window": w, "mode": mode, "loss": float(mean[c]), "low": float(lo[c]),
                     "high": float(hi[c]), "delta": float(dmean[c]), "delta_low": float(dlo[c]),
                     "delta_high": float(dhi[c]), "keys": k + w, "seconds": seconds[c],
                     "cost": seconds[c] / max(seconds[0], 1e-12)})
    return rows, full


def _rescue(acc: Boot, cells: list, rows: list) -> dict:
    """Damage and rescue at the smallest window and the largest k (original positions), with intervals; {} when
    the grid lacks k = 0 or a k > 0 there."""
    orig = [(c, k, w) for c, (k, w, mode) in enumerate(cells, start=1) if mode == ORIGINAL]
    if not orig:
        return {}
    w = min(w for _, _, w in orig)
    at = {k: c for c, k, ww in orig if ww == w}
    if 0 not in at or max(at) == 0:
        return {}
    c0, ck, k = at[0], at[max(at)], max(at)

    def combo(weights: dict) -> dict:
        """Σ_c weight_c · loss_c with its interval (the same resampled blocks for every cell)."""
        num = sum(x * acc.S[[c]] for c, x in weights.items())
        bnum = sum(x * acc.bS[:, [c]] for c, x in weights.items())
        m, lo, hi = acc.result(0.95, num, bnum)
        return {"delta": float(np.ravel(m)[0]), "low": float(np.ravel(lo)[0]), "high": float(np.ravel(hi)[0])}

    damage, rescue = combo({c0: 1, 0: -1}), combo({c0: 1, ck: -1})
    margin = combo({c0: 1 - RESCUE_SHARE, ck: -1, 0: RESCUE_SHARE})            # rescue − share × damage
    share = rescue["delta"] / damage["delta"] if damage["delta"] > 0 else math.nan
    return {"window": w, "sinks": k, "damage": damage, "rescue": rescue, "margin": margin, "recovered_share": share}


def _nats(d: dict) -> str:
    return f"{d['delta']:+.4f} ({d['low']:+.4f} … {d['high']:+.4f})"


def _sink_line(sink_stats: SinkStats | None) -> Message | str:
    if sink_stats is None:
        return ""
    heads = sink_stats.heads()
    if not heads:
        return msg("This model has no sink head here ({rule}).", rule=sink_rule(sink_stats.threshold,
                                                                                 sink_stats.from_position))
    return msg("Sink heads: {heads}.", heads=", ".join(f"{n} {s:.2f}" for n, s in heads[:8]))


def rescue_verdict(rescue: dict, tokens: int, sink_stats: SinkStats | None = None) -> Verdict:
    """The verdict on :data:`CLAIM` by :data:`RULE` from :func:`_rescue`'s numbers."""
    sinks = _sink_line(sink_stats)
    if not rescue:
        return Verdict(NOT_ENOUGH, join(msg("The grid has no window with both k = 0 and a k > 0."),
                                        *((" ", sinks) if sinks else ())), RULE,
                       msg("a grid with k = 0 and some k > 0 at the same window"),
                       msg("the claim compares a window with and without sinks"))
    k, w, dmg, res, mar = rescue["sinks"], rescue["window"], rescue["damage"], rescue["rescue"], rescue["margin"]
    share = rescue["recovered_share"]
    text = join(msg("At w = {w}: keeping only the window costs {damage} nats/token against the full cache; keeping "
                    "the first {k} tokens too lowers the loss by {rescue} nats/token, {share} of that cost (95 % "
                    "intervals in brackets).", w=w, k=k, damage=_nats(dmg), rescue=_nats(res),
                    share="n/a" if math.isnan(share) else f"{share:.0%}"), *((" ", sinks) if sinks else ()))
    if tokens < MIN_TOKENS:
        return Verdict(NOT_ENOUGH, text, RULE, msg("a text of at least {tokens} tokens", tokens=MIN_TOKENS),
                       msg("only {have} predicted tokens, fewer than the {need} the rule asks for", have=tokens,
                           need=MIN_TOKENS))
    hurt = dmg["low"] > MIN_EFFECT
    if hurt and res["low"] > MIN_EFFECT and mar["low"] > 0:
        return Verdict(SUPPORTED, text, RULE, "", msg(
            "the window alone costs more than {min} nats/token and the first {k} tokens surely win back more than "
            "{pct} of it", min=MIN_EFFECT, k=k, pct=f"{RESCUE_SHARE:.0%}"))
    if hurt and (res["high"] < MIN_EFFECT or mar["high"] < 0):
        return Verdict(NOT_SUPPORTED, text, RULE, msg("settled for this model and text; another model or text may "
                                                      "differ"),
                       msg("the window alone costs more than {min} nats/token, and keeping the first {k} tokens surely "
                           "wins back less than {pct} of it", min=MIN_EFFECT, k=k, pct=f"{RESCUE_SHARE:.0%}"))
    if dmg["high"] < MIN_EFFECT:
        return Verdict(NOT_ENOUGH, text, RULE, msg("a smaller window, where the cache loses something"),
                       msg("a window of {w} keys costs less than {min} nats/token here: there is nothing to rescue",
                           w=w, min=MIN_EFFECT))
    return Verdict(NOT_ENOUGH, text, RULE, msg("more text: the intervals narrow like 1/√n"),
                   msg("an interval straddles its threshold (the damage or rescue {min} nats/token, or the margin 0)",
                       min=MIN_EFFECT))
