"""Ablations: the design choices the seed articles argue for, switched off one at a time and measured.

A registry of kinds (:mod:`.registry`), one class each — V = X, W_K = W_Q, no scaling, no mask, no sink,
zero head, mean head — owning its label, claim (one sentence), definition, intervention, what it measures and
its verdict. :func:`measure` runs one spec against the unmodified model; :func:`layer_sweep`,
:func:`head_sweep` and :func:`check_all` run many, reporting ``progress(done, total)``. The verdict rests on
the loss change with a 95 % bootstrap interval over tokens (or prompts) and the kind's mechanism checks:
"supported", "not supported" or "not enough evidence" (with what would settle it). The convex-hull
geometry is :mod:`.hull`.

Specs are written ``kind`` or ``kind:L{layer}H{head}[,…]`` (heads; optional for wk=wq, no-scale and no-sink,
required for the head kinds), with the layer scope given apart (``--layers``) or as ``@0,2``.

Adding a kind: subclass :class:`Kind`, decorate it with :func:`register`.
"""
from .base import (
    MIN_EFFECT, MIN_PROMPTS, MIN_TOKENS, NOT_ENOUGH, NOT_SUPPORTED, ONE_TOKEN_NOTE, REGISTRY, RESAMPLES,
    STATUSES, SUPPORTED, AblationError, Effect, Evidence, Kind, Loss, Metric, Observation, Progress, Series,
    Spec, Verdict, effect, get_kind, head_kinds, head_means, head_name, kinds, loss, parse_spec, register,
)
from .hull import HULL_ITERS, HULL_MAX_ROWS, hull_distance, participation_ratio
from .interventions import KeyIsQuery, MeanHead, NoMask, NoScale, NoSink, ValueIsInput, ZeroHead
from .measure import (
    HeadMap, LayerSweep, PositionChange, Result, SweepRow, Unavailable, check_all, check_available, head_sweep,
    layer_sweep, measure, sweep_specs,
)
from .registry import MIN_SHIFT, REMOVED, asymmetry
from . import registry  # noqa: F401  (registers the kinds)

__all__ = [
    "MIN_EFFECT", "MIN_PROMPTS", "MIN_TOKENS", "NOT_ENOUGH", "NOT_SUPPORTED", "ONE_TOKEN_NOTE", "REGISTRY",
    "RESAMPLES", "STATUSES", "SUPPORTED", "AblationError", "Effect", "Evidence", "Kind", "Loss", "Metric",
    "Observation", "Progress", "Series", "Spec", "Verdict", "effect", "get_kind", "head_kinds", "head_means",
    "head_name", "kinds", "loss", "parse_spec", "register", "HULL_ITERS", "HULL_MAX_ROWS", "hull_distance",
    "participation_ratio", "KeyIsQuery", "MeanHead", "NoMask", "NoScale", "NoSink", "ValueIsInput", "ZeroHead",
    "HeadMap", "LayerSweep", "PositionChange", "Result", "SweepRow", "Unavailable", "check_all",
    "check_available", "head_sweep", "layer_sweep", "measure", "sweep_specs", "asymmetry", "registry", "MIN_SHIFT",
    "REMOVED",
]
