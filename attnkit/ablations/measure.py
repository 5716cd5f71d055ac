"""Running an ablation: one spec measured against the unmodified model (:func:`measure`), the same kind
over every layer (:func:`layer_sweep`), every head alone (:func:`head_sweep`), every claim (:func:`check_all`).

Results are dataclasses; pages and charts read their fields, ``to_dict()`` gives JSON.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .base import (
    Acc, AblationError, Effect, Loss, Observation, Progress, Series, Spec, Verdict, effect,
    get_kind, head_kinds, head_means, head_name, ids_list, kinds, loss, ONE_TOKEN_NOTE, plain,
)
from ..i18n import Message, join, msg, nmsg, render
from .hull import HULL_ITERS, HULL_RTOL, HULL_ATOL, sample_note
from ..model import run
from ..progress import Steps

__all__ = ["PositionChange", "Result", "measure", "hull_cost", "SweepRow", "LayerSweep", "layer_sweep", "sweep_specs",
           "HeadMap", "head_sweep", "check_all", "Unavailable", "check_available"]


@dataclass
class PositionChange:
    """No mask: how much one position's logits move once the future is visible (pooled over texts)."""

    position: int
    relative_change: float         # ‖Δlogits‖ / ‖logits‖
    top1_changed: float            # share of texts whose top-1 token changed here
    texts: int


@dataclass
class Result:
    """Baseline against one ablation on the texts."""

    spec: Spec
    kind: str
    label: str
    claim: str
    definition: str
    measures: str
    scope: list                    # the layers ablated
    heads: list                    # the heads named, as L{layer}H{head}
    model: dict
    texts: int
    tokens: int
    baseline: Loss
    ablated: Loss
    effect: Effect | None
    per_layer: dict                # Metric.key -> Series
    per_position: list             # PositionChange (no-mask)
    evidence: list                 # Evidence
    verdict: Verdict
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        loss = {"predicted_tokens": self.baseline.tokens, "one_token_texts_skipped": self.baseline.skipped,
                "baseline_nats": self.baseline.nats, "ablated_nats": self.ablated.nats,
                "baseline_perplexity": self.baseline.perplexity, "ablated_perplexity": self.ablated.perplexity}
        return jsonable({
            "spec": str(self.spec), "kind": self.kind, "label": self.label, "claim": self.claim,
            "definition": self.definition, "measures": self.measures, "scope": {"layers": self.scope,
                                                                                "heads": self.heads},
            "model": self.model, "texts": self.texts, "tokens": self.tokens, "loss": loss,
            "effect": None if self.effect is None else asdict(self.effect),
            "per_layer": {k: {"title": s.metric.title, "baseline": s.baseline, "ablated": s.ablated}
                          for k, s in self.per_layer.items()},
            "per_position": [asdict(p) for p in self.per_position],
            "evidence": [plain(e) for e in self.evidence], "verdict": plain(self.verdict),
            "notes": [render(n) for n in self.notes],
        })


def jsonable(obj):
    """NaN/inf -> None, numpy scalars -> Python, recursively (for JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, Message):
        return obj.render()
    return obj


def check_available(weights, name: str) -> None:
    """Raise :class:`AblationError` with the reason when this model cannot take the kind."""
    kind = get_kind(name)
    ok, why = kind.available(weights.config)
    if not ok:
        raise AblationError(f"{kind.label}: {why}")


def _means_for(kind, weights, texts, means):
    return head_means(weights, texts) if kind.needs_means() and means is None else means


def _mean_pattern_hooks(kind, spec: Spec, n_layers: int, hull_iters: int, keep: dict):
    """For a kind that certifies by the mixture weights (V = X): a hook keeping mean_h(pattern_h) [T, T]
    of each scoped layer of the ablated run (T² floats a layer, not H·T²)."""
    if not getattr(kind, "mean_pattern", False) or hull_iters <= 0:
        return None
    scope = set(spec.scope(n_layers))

    def hook(pattern, layer):
        if layer in scope:
            keep[("pattern_mean", layer)] = pattern[0].mean(0)
    return [("pattern", hook)]


def measure(weights, texts, spec: Spec, *, means=None, hull_iters: int = HULL_ITERS,
            progress: Progress | None = None) -> Result:
    """Baseline vs ``spec`` on the texts: the loss change with its interval, the kind's own numbers per
    layer, its mechanism checks and its verdict. ``hull_iters`` caps the hull solver (0: no hull check).
    ``progress(done, total)``: steps of L + 2 per text (each forward, then each layer's checks), also
    called after every block of the forwards (same ``done``), so a callback that raises stops it there."""
    texts = ids_list(texts)
    if not texts:
        raise AblationError(msg("no tokens to run on"))
    check_available(weights, spec.kind)
    kind, cfg = get_kind(spec.kind), weights.config
    iv = kind.intervention(spec, cfg, _means_for(kind, weights, texts, means))
    cap = kind.captures or None
    base, abl, acc, info = Loss(), Loss(), Acc(), {}
    step = Steps(progress, len(texts) * (cfg.n_layers + 2), start=True)
    for i, ids in enumerate(texts):
        keep = {}
        tb = run(weights, ids, capture=cap, hooks=step.hooks())
        step.at(i * (cfg.n_layers + 2) + 1)
        ta = run(weights, ids, capture=cap, intervention=iv,
                 hooks=(_mean_pattern_hooks(kind, spec, cfg.n_layers, hull_iters, keep) or []) + step.hooks())
        step.at(i * (cfg.n_layers + 2) + 2)
        ta.captures.update(keep)
        base.add(ids, tb.logits)
        abl.add(ids, ta.logits)
        kind.observe(Observation(ids, tb, ta, spec, cfg, hull_iters, acc, info, tick=step.add))
        step.at((i + 1) * (cfg.n_layers + 2))
    per_layer = {m.key: Series(m, [acc.get(m, l, "baseline") for l in range(cfg.n_layers)],
                               [acc.get(m, l, "ablated") for l in range(cfg.n_layers)]) for m in kind.metrics}
    positions = [PositionChange(t, s / n, f / n, n) for t, (s, f, n) in sorted(info.get("positions", {}).items())]
    res = Result(spec, kind.name, kind.label, kind.claim, kind.definition, kind.measures,
                 spec.scope(cfg.n_layers), [head_name(l, h) for l, h in spec.heads],
                 {"layers": cfg.n_layers, "heads": cfg.n_heads, "d_model": cfg.d_model, "d_head": cfg.d_head},
                 len(texts), sum(len(i) for i in texts), base, abl, effect(base, abl), per_layer, positions,
                 [], Verdict("", "", ""))
    res.evidence = kind.evidence(res)
    res.verdict = kind.verdict(res.effect, res.evidence)
    res.notes = _notes(res, info, hull_iters)
    return res


def _notes(res: Result, info: dict, hull_iters: int) -> list:
    notes = []
    if res.baseline.skipped:
        notes.append(ONE_TOKEN_NOTE if not res.baseline.tokens else
                     nmsg("{n} one-token text predicts nothing and was left out of the loss.",
                          "{n} one-token texts predict nothing and were left out of the loss.", res.baseline.skipped))
    if "hull_rows" in info:
        notes.append(_hull_note(info, hull_iters))
    if get_kind(res.kind).needs_means():
        notes.append(msg("The mean is taken over the positions of these very texts, later positions included, so the "
                         "replacement carries a little information about the whole text; over a prompt set it is "
                         "pooled over all prompts, which dilutes that."))
    return notes


def _hull_note(info: dict, hull_iters: int) -> Message:
    parts = [msg("Hull distances, in float64, on {rows}, against all of that layer's x̂ rows.",
                 rows=sample_note(info["hull_rows"], info["hull_T"]))]
    if info.get("hull_certified"):
        parts.append(msg("Ablated rows: certified by their own weights mean_h(pattern_h) (a convex mixture of x̂), "
                         "distance ≤ the residual ‖out − w·x̂‖, at most {residual}; lower bound 0.",
                         residual=f"{info['hull_residual']:.2g}"))
    if info.get("hull_solved"):
        parts.append(msg("Other rows: batched FISTA on the simplex, stopped once upper − lower bound ≤ {rtol}·distance + "
                         "{atol}·RMS‖x̂‖, at most {iters} iterations (used up to {used}; all met the stop rule: {ok}; "
                         "largest gap {gap}); the lower bound is certified by a separating hyperplane.",
                         rtol=f"{HULL_RTOL:g}", atol=f"{HULL_ATOL:g}", iters=hull_iters, used=info["hull_iterations"],
                         ok=msg("yes") if info["hull_converged"] else msg("no"), gap=f"{info['hull_gap']:.2g}"))
    parts.append(msg("Effective dimension: participation ratio (Σσ²)²/Σσ⁴ of the centred rows."))
    return join(*parts, sep=" ")


def hull_cost(weights, ids, spec: Spec | None = None, hull_iters: int = HULL_ITERS) -> dict:
    """The V = X ablation on one text timed with its hull check and without it (``hull_iters`` = 0):
    ``{"with_hull_s", "without_hull_s", "ratio"}`` (ratio = with ÷ without; the bench's target is ≤ 5)."""
    spec = spec or Spec("v=x")
    t0 = time.perf_counter()
    measure(weights, [ids], spec, hull_iters=0)
    t1 = time.perf_counter()
    measure(weights, [ids], spec, hull_iters=hull_iters)
    t2 = time.perf_counter()
    return {"with_hull_s": t2 - t1, "without_hull_s": t1 - t0, "ratio": (t2 - t1) / max(t1 - t0, 1e-9)}


# ----------------------------------------------------------------------------- sweeps

@dataclass
class SweepRow:
    scope: str                     # "layer 3", "all layers", "L2H5"
    layer: int | None
    nats: float
    effect: Effect | None

    @property
    def increase(self) -> float:
        return math.nan if self.effect is None else self.effect.delta


@dataclass
class LayerSweep:
    kind: str
    baseline: float
    tokens: int
    rows: list                     # SweepRow


def sweep_specs(spec: Spec, n_layers: int, n_heads: int) -> list[tuple[str, int | None, Spec]]:
    """(label, layer, Spec) for each layer alone, then all layers: the same kind, whole layers."""
    per_head = get_kind(spec.kind).heads == "required"

    def whole(layers):
        if per_head:
            return Spec(spec.kind, None, tuple((l, h) for l in layers for h in range(n_heads)))
        return Spec(spec.kind, None if len(layers) == n_layers else tuple(layers), ())
    return [(f"layer {l}", l, whole([l])) for l in range(n_layers)] + \
        [("all layers", None, whole(list(range(n_layers))))]


def _loss_changes(weights, texts, jobs, progress: Progress | None):
    """(baseline Loss, [(label, layer, Loss, Effect)]) for each (label, layer, intervention) job."""
    check = (lambda: progress(0, len(jobs))) if progress else None
    base = loss(weights, texts, check=check)
    out = []
    for i, (label, layer, iv) in enumerate(jobs):
        if progress:
            progress(i, len(jobs))
            check = (lambda i=i: progress(i, len(jobs)))
        lo = loss(weights, texts, iv, check=check)
        out.append((label, layer, lo, effect(base, lo)))
    if progress:
        progress(len(jobs), len(jobs))
    return base, out


def layer_sweep(weights, texts, spec: Spec, progress: Progress | None = None, means=None) -> LayerSweep:
    """The loss change with each layer ablated alone, then all layers, each with its interval."""
    texts = ids_list(texts)
    check_available(weights, spec.kind)
    kind, cfg = get_kind(spec.kind), weights.config
    means = _means_for(kind, weights, texts, means)
    jobs = [(label, l, kind.intervention(sp, cfg, means)) for label, l, sp in
            sweep_specs(spec, cfg.n_layers, cfg.n_heads)]
    base, rows = _loss_changes(weights, texts, jobs, progress)
    return LayerSweep(spec.kind, base.nats, base.tokens, [SweepRow(lb, l, lo.nats, e) for lb, l, lo, e in rows])


@dataclass
class HeadMap:
    """The loss change with each head ablated alone: ``increase[l][h]`` with its 95 % interval ``lo``/``hi``."""

    mode: str
    baseline: float
    tokens: int
    increase: np.ndarray           # [L, H]
    lo: np.ndarray
    hi: np.ndarray
    forwards: int

    def names(self) -> list[list[str]]:
        return [[head_name(l, h) for h in range(self.increase.shape[1])] for l in range(self.increase.shape[0])]

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        order = np.argsort(-np.nan_to_num(self.increase, nan=-np.inf), axis=None)[:n]
        return [(head_name(*divmod(int(i), self.increase.shape[1])), float(self.increase.flat[i])) for i in order]


def head_sweep(weights, texts, mode: str = "zero-head", progress: Progress | None = None, means=None) -> HeadMap:
    """Each head ablated alone (L·H runs per text)."""
    texts = ids_list(texts)
    if mode not in [k.name for k in head_kinds()]:
        raise AblationError(msg("head map mode must be one of {modes}", modes=", ".join(k.name for k in head_kinds())))
    kind, cfg = get_kind(mode), weights.config
    L, H = cfg.n_layers, cfg.n_heads
    means = _means_for(kind, weights, texts, means)
    jobs = [(head_name(l, h), l, kind.intervention(Spec(mode, None, ((l, h),)), cfg, means))
            for l in range(L) for h in range(H)]
    base, rows = _loss_changes(weights, texts, jobs, progress)
    grid = [np.array([math.nan if e is None else getattr(e, a) for _, _, _, e in rows]).reshape(L, H)
            for a in ("delta", "lo", "hi")]
    return HeadMap(mode, base.nats, base.tokens, *grid, forwards=L * H * sum(1 for i in texts if len(i) > 1))


@dataclass
class Unavailable:
    kind: str
    label: str
    reason: str


def check_all(weights, texts, progress: Progress | None = None) -> list:
    """Every layer-level kind on all layers: a :class:`Result` each, or :class:`Unavailable` with the reason."""
    todo = [k for k in kinds() if k.heads != "required"]
    out = []
    for i, k in enumerate(todo):
        if progress:
            progress(i, len(todo))
        ok, why = k.available(weights.config)
        each = (lambda d, t, i=i: progress(i, len(todo))) if progress else None
        out.append(measure(weights, texts, Spec(k.name), progress=each) if ok else Unavailable(k.name, k.label, why))
    if progress:
        progress(len(todo), len(todo))
    return out

