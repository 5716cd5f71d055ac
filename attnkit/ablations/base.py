"""What every ablation kind shares: the spec, the quantities it measures, the loss, the effect with its
bootstrap interval, the verdict and its rule, and the :class:`Kind` base class with its registry.

A kind is one subclass of :class:`Kind` decorated with :func:`register`; nothing else needs to know it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import numpy as np
import torch
from torch.nn import functional

from ..i18n import Message, join, msg, render, status_label
from ..model import Intervention, run
from ..progress import Progress
from ..standard import head_name, parse_head

__all__ = [
    "AblationError", "Metric", "Series", "Evidence", "Effect", "Verdict", "Loss", "Spec", "Kind",
    "REGISTRY", "register", "get_kind", "kinds", "head_kinds", "parse_spec", "head_name", "loss", "effect",
    "head_means", "ids_list", "Progress",
    "SUPPORTED", "NOT_SUPPORTED", "NOT_ENOUGH", "STATUSES", "MIN_EFFECT", "MIN_TOKENS", "MIN_PROMPTS",
    "RESAMPLES", "ONE_TOKEN_NOTE", "MIN_SHIFT", "status_label", "plain",
]

#: The verdicts, and nothing else.
SUPPORTED, NOT_SUPPORTED, NOT_ENOUGH = "supported", "not supported", "not enough evidence"
STATUSES = (SUPPORTED, NOT_SUPPORTED, NOT_ENOUGH)
#: A loss change smaller than this (nats per predicted token, ≈ 1 % perplexity) counts as no effect.
MIN_EFFECT = 0.01
#: Fewer predicted tokens than this give "not enough evidence", whatever the interval says.
MIN_TOKENS = 64
#: From this many prompts (with a prediction) on, the interval resamples prompts, not tokens.
MIN_PROMPTS = 5
#: Bootstrap resamples per interval.
RESAMPLES = 1000

#: A mechanism check on a share of attention (self, future keys) needs at least this change (absolute, in
#: attention weight: 0.1 = a tenth of a query's attention moved), not just a direction.
MIN_SHIFT = 0.1

ONE_TOKEN_NOTE = msg("A one-token text has no next token inside it to predict, so its cross-entropy is not "
                     "defined; it is left out of the loss (give at least two tokens).")

def plain(record) -> dict:
    """A dataclass's fields with every message rendered (this context's language): for JSON and tables."""
    return {k: render(v) for k, v in record.__dict__.items()}



class AblationError(ValueError):
    """A bad spec or scope, or a kind this model cannot take; ``str(err)`` says what is wrong."""


# ----------------------------------------------------------------------------- measured quantities

@dataclass(frozen=True)
class Metric:
    """A per-layer quantity, named once: ``key`` is its column in tables and JSON, ``title`` its axis."""

    key: str
    title: str
    log: bool = False          # draw on a log axis
    peak: bool = False         # aggregate over texts by the maximum, not the mean
    chart: bool = True         # drawn per layer on the page (else only in the table)


@dataclass
class Series:
    """One metric per layer, baseline and ablated (None where undefined)."""

    metric: Metric
    baseline: list
    ablated: list


@dataclass
class Evidence:
    """One mechanism check a verdict rests on: the numbers and whether they go the way the claim says."""

    what: Message
    baseline: float | None
    ablated: float | None
    expect: Message            # what the claim predicts, in words, with its threshold
    holds: bool | None         # None: cannot be checked here
    unit: Message | str = ""   # the one unit of both numbers

    def line(self) -> Message:
        """``what (unit): baseline → ablated; expected …: yes/no``, one unit per line."""
        verdict = {True: msg("yes"), False: msg("no"), None: msg("not measurable")}[self.holds]
        what = msg("{what} ({unit})", what=self.what, unit=self.unit) if self.unit else self.what
        return msg("{what}: {baseline} → {ablated} (expected {expect}: {holds})", what=what,
                   baseline=fmt_num(self.baseline), ablated=fmt_num(self.ablated), expect=self.expect,
                   holds=verdict)


# ----------------------------------------------------------------------------- loss and effect

@dataclass
class Loss:
    """Next-token cross-entropy of each text with at least two tokens (``nll[i]``: nats per position)."""

    nll: list = field(default_factory=list)      # np.ndarray [T_i − 1] per predicting text
    prompts: int = 0
    skipped: int = 0                             # one-token texts (nothing to predict inside them)

    def add(self, ids: list[int], logits: torch.Tensor) -> None:
        """Count one text's run: its per-position loss, or a skip when it has one token."""
        self.prompts += 1
        if len(ids) < 2:
            self.skipped += 1
        else:
            self.nll.append(_nll(logits, ids))

    @property
    def tokens(self) -> int:
        return int(sum(len(a) for a in self.nll))

    @property
    def nats(self) -> float:
        return float(sum(a.sum() for a in self.nll) / self.tokens) if self.tokens else math.nan

    @property
    def perplexity(self) -> float:
        return math.exp(self.nats) if self.tokens else math.nan


def _nll(logits: torch.Tensor, ids: list[int]) -> np.ndarray:
    """−log p(ids[t+1]) for t = 0 … T−2, in float64."""
    target = torch.tensor(ids[1:], device=logits.device)
    return functional.cross_entropy(logits[0, :-1].double(), target, reduction="none").cpu().numpy()


def ids_list(texts) -> list[list[int]]:
    """Token ids as a list of texts (one list, a 1-D tensor or a list of lists); empty texts dropped."""
    if isinstance(texts, torch.Tensor):
        texts = texts.tolist()
    if texts and isinstance(texts[0], int):
        texts = [texts]
    return [[int(i) for i in ids] for ids in texts if len(ids)]


def loss(weights, texts, intervention: Intervention | None = None, check: Callable[[], None] | None = None) -> Loss:
    """The loss of the model (with ``intervention``) on the texts. ``check()`` is called after every block
    (a progress callback that raises there stops the run)."""
    out = Loss()
    hooks = [("resid_post", lambda x, layer: check())] if check else None
    for ids in ids_list(texts):
        out.add(ids, run(weights, ids, intervention=intervention, hooks=hooks).logits)
    return out


@dataclass
class Effect:
    """Ablated − baseline loss (nats per predicted token) with a 95 % bootstrap interval.

    The interval resamples ``over`` ("tokens", or "prompts" from :data:`MIN_PROMPTS` prompts on): the
    paired per-token differences, or whole prompts with their differences."""

    delta: float
    lo: float
    hi: float
    over: str
    units: int
    tokens: int

    def describe(self) -> Message:
        return msg("{delta} nats/token (95 % interval {lo} … {hi}, bootstrap over {units} {over})",
                   delta=f"{self.delta:+.4f}", lo=f"{self.lo:+.4f}", hi=f"{self.hi:+.4f}", units=f"{self.units:,}",
                   over=_UNITS[self.over])

    def __str__(self) -> str:
        return self.describe().render()


_UNITS = {"tokens": msg("tokens"), "prompts": msg("prompts")}


def effect(base: Loss, abl: Loss, resamples: int = RESAMPLES, seed: int = 0) -> Effect | None:
    """The paired loss change with its bootstrap interval; None when nothing was predicted."""
    diffs = [a - b for a, b in zip(abl.nll, base.nll)]
    n = sum(len(d) for d in diffs)
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    if len(diffs) >= MIN_PROMPTS:
        over, s = "prompts", np.array([d.sum() for d in diffs])
        cnt = np.array([len(d) for d in diffs], dtype=float)
        w = rng.multinomial(len(diffs), np.full(len(diffs), 1 / len(diffs)), size=resamples).astype(float)
        boots = (w @ s) / (w @ cnt)
    else:
        over, d = "tokens", np.concatenate(diffs)
        chunk = max(1, 2_000_000 // n)
        boots = np.concatenate([d[rng.integers(0, n, (min(chunk, resamples - i), n))].mean(1)
                                for i in range(0, resamples, chunk)])
    lo, hi = np.quantile(boots, [0.025, 0.975])
    units = len(diffs) if over == "prompts" else n
    return Effect(float(sum(d.sum() for d in diffs) / n), float(lo), float(hi), over, units, n)


# ----------------------------------------------------------------------------- verdict

@dataclass
class Verdict:
    """The status, and in words (messages, shown in the reader's language): what was measured, why the
    status follows, what would settle it, the rule, and — when the kind removes a part the model was
    trained with — what the loss change therefore measures."""

    status: str                # one of STATUSES (an identifier; shown through status_label)
    text: Message | str        # what was measured, in numbers, one unit per line of evidence
    rule: Message | str        # the rule the status follows from
    settle: Message | str = ""     # what would settle it (every status but "supported")
    why: Message | str = ""        # why this status, with the numbers that decide it
    caveat: Message | str = ""     # a trained-with part removed: the loss rise measures dependence


# ----------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class Spec:
    kind: str
    layers: tuple[int, ...] | None = None          # scope (None = all layers)
    heads: tuple[tuple[int, int], ...] = ()        # (layer, head) pairs

    def __str__(self) -> str:
        s = self.kind
        if self.heads:
            s += ":" + ",".join(head_name(l, h) for l, h in self.heads)
        if self.layers is not None:
            s += "@" + ",".join(map(str, self.layers))
        return s

    def scope(self, n_layers: int) -> list[int]:
        if self.heads:
            return sorted({l for l, _ in self.heads})
        return list(range(n_layers)) if self.layers is None else list(self.layers)

    def head_index(self, layer: int):
        """The heads of ``layer`` the spec names (a list), or ``slice(None)`` when it names none there."""
        named = [h for l, h in self.heads if l == layer]
        return named or slice(None)


_LAYERS = re.compile(r"^[0-9]+(,[0-9]*)*$", re.ASCII)      # ASCII digits only, as standard.parse_head


def _parse_layers(text) -> tuple[int, ...] | None:
    if text is None or text == "" or text == "all":
        return None
    if isinstance(text, str):
        text = text.replace(" ", "")
        try:
            if not _LAYERS.match(text):
                raise ValueError(text)
            return tuple(sorted({int(t) for t in text.split(",") if t}))
        except ValueError:
            raise AblationError(msg("layers must be numbers separated by commas (e.g. 0,2), got {text!r}",
                text=text)) from None
    return tuple(sorted({int(t) for t in text}))


def parse_spec(text: str, layers=None, n_layers: int | None = None, n_heads: int | None = None) -> Spec:
    """``"v=x"``, ``"wk=wq:L1H2"``, ``"zero-head:L0H3,L2H1"`` (``1.2`` also reads as L1H2), with a layer
    scope (``"0,2"``, a list, or ``@0,2`` in the text) -> Spec; with ``n_layers``/``n_heads`` checked
    against the model."""
    text = (text or "").strip().lower().replace(" ", "")
    scope_txt = None
    if "@" in text:
        text, scope_txt = text.split("@", 1)
    name, _, rest = text.partition(":")
    if name not in REGISTRY:
        raise AblationError(msg("unknown intervention {name!r}; choose one of {kinds}",
            name=name, kinds=", ".join(REGISTRY)))
    kind = REGISTRY[name]
    heads = []
    for item in filter(None, rest.split(",")):
        try:
            heads.append(parse_head(item))
        except ValueError:
            raise AblationError(msg("a head is written L{{layer}}H{{head}} (e.g. L1H3), got {item!r}", item=item)) from None
    if heads and kind.heads == "none":
        raise AblationError(msg("{name} acts on whole layers; give the scope with --layers, not heads", name=name))
    if kind.heads == "required" and not heads:
        raise AblationError(msg("{name} needs the head(s): {name}:L{{layer}}H{{head}} (e.g. {name}:L0H1)", name=name))
    scope = _parse_layers(layers if layers is not None else scope_txt)
    if kind.heads == "required":
        scope = None
    spec = Spec(name, scope, tuple(sorted(set(heads))))
    for l in (spec.layers or ()) + tuple(l for l, _ in spec.heads):
        if n_layers is not None and not 0 <= l < n_layers:
            raise AblationError(msg("layer {l} does not exist: the model has layers 0–{last}", l=l, last=n_layers - 1))
    for l, h in spec.heads:
        if n_heads is not None and not 0 <= h < n_heads:
            raise AblationError(msg("head {head} does not exist: each layer has heads 0–{last}",
                head=head_name(l, h), last=n_heads - 1))
    if spec.heads and spec.layers is not None:
        outside = sorted({l for l, _ in spec.heads} - set(spec.layers))
        if outside:
            raise AblationError(msg("heads in layer(s) {outside} lie outside the layer scope {scope}",
                outside=outside, scope=list(spec.layers)))
    return spec


# ----------------------------------------------------------------------------- per-text accumulation

class Acc:
    """Running means (or maxima, for peak metrics) of metrics per (layer, run) over the texts."""

    def __init__(self):
        self.sums: dict = {}
        self.counts: dict = {}
        self.peaks: dict = {}

    def add(self, metric: Metric, layer, run: str, value, weight: float = 1.0):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return
        key = (metric.key, layer, run)
        if metric.peak:
            self.peaks[key] = max(self.peaks.get(key, -math.inf), float(value))
            return
        self.sums[key] = self.sums.get(key, 0.0) + float(value) * weight
        self.counts[key] = self.counts.get(key, 0.0) + weight

    def get(self, metric: Metric, layer, run: str):
        key = (metric.key, layer, run)
        if metric.peak:
            return self.peaks.get(key)
        return self.sums[key] / self.counts[key] if self.counts.get(key) else None


@dataclass
class Observation:
    """What a kind sees of one text: its ids, the baseline and ablated traces (with the kind's
    captures), the model's config (its layer count, each layer's sliding window), the heads each layer is
    measured over."""

    ids: list
    base: object
    abl: object
    spec: Spec
    config: object
    hull_iters: int
    acc: Acc
    info: dict
    tick: Callable[[], None] | None = None     # a kind's observe calls it after each layer's work

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    def heads(self, layer: int):
        return self.spec.head_index(layer)

    def both(self):
        return (("baseline", self.base), ("ablated", self.abl))

    def add_position(self, t: int, relative_change: float, top1_changed: bool) -> None:
        """A per-position change of the logits (pooled over texts by position)."""
        row = self.info.setdefault("positions", {}).setdefault(t, [0.0, 0, 0])
        row[0] += relative_change
        row[1] += int(top1_changed)
        row[2] += 1


# ----------------------------------------------------------------------------- the kind

REGISTRY: dict[str, "Kind"] = {}


class Kind:
    """One ablation: what it is, what it claims, how it is done, what it measures, how it is judged.

    Subclass, set the class attributes, override :meth:`intervention` (and, when the kind measures
    something besides the loss, :meth:`observe` and :meth:`evidence`), decorate with :func:`register`.
    """

    name: ClassVar[str]                   # the spec word ("v=x"), unique
    label: ClassVar[str]                  # menu text
    claim: ClassVar[str]                  # the claim it tests, one sentence
    definition: ClassVar[str]             # how it is done
    measures: ClassVar[str]               # what is measured, one sentence
    heads: ClassVar[str] = "none"         # heads in the spec: "none", "optional" or "required"
    captures: ClassVar[tuple[str, ...]] = ()
    metrics: ClassVar[tuple[Metric, ...]] = ()    # per-layer quantities (charted in this order)
    expects: ClassVar[int] = +1           # the sign of the loss change the claim predicts
    latex: ClassVar[str] = ""             # the formula, when the page should show one
    trained_with: ClassVar[Message | str] = ""    # the trained-with part the kind removes (see caveat())

    def available(self, config) -> tuple[bool, str]:
        """(False, why) when this model cannot take the ablation (or it would change nothing)."""
        return True, ""

    def intervention(self, spec: Spec, config=None, means=None) -> Intervention:
        raise NotImplementedError

    def needs_means(self) -> bool:
        return False

    def observe(self, obs: Observation) -> None:
        """Record this text's per-layer metrics into ``obs.acc`` (nothing by default)."""

    def evidence(self, result) -> list[Evidence]:
        """The mechanism checks besides the loss (none by default)."""
        return []

    # ------------------------------------------------------------------------- the verdict

    def rule(self) -> Message:
        way = msg("rise") if self.expects > 0 else msg("fall")
        return msg("The claim predicts the loss to {way}. Supported: every mechanism check holds (each by its stated "
                   "threshold) and the whole 95 % interval of the loss change lies beyond {min} nats/token in that "
                   "direction. Not supported: a check fails, or the whole interval lies short of it. Otherwise, or "
                   "with fewer than {tokens} predicted tokens: not enough evidence.",
                   way=way, min=MIN_EFFECT, tokens=MIN_TOKENS)

    def caveat(self) -> Message | str:
        """For a kind that removes a part the model was trained with: what a loss rise then measures."""
        if not self.trained_with:
            return ""
        return msg("This removes {part}, which the model was trained with and never learned to do without: a loss "
                   "rise measures how much this trained model depends on it, not whether the design is better than "
                   "the alternative (that would need a model trained without it).", part=self.trained_with)

    def verdict(self, eff: Effect | None, evidence: list[Evidence]) -> Verdict:
        checks = join(*[e.line() for e in evidence], sep="; ")
        failed = [e for e in evidence if e.holds is False]
        rule, caveat = self.rule(), self.caveat()
        if eff is None:
            return Verdict(NOT_ENOUGH, join(checks, "; " if evidence else "", msg("no token is predicted here.")),
                           rule, msg("a text of at least {tokens} tokens", tokens=MIN_TOKENS),
                           msg("no next token is predicted, so the loss change is not defined"), caveat)
        text = join(msg("Loss change {effect}.", effect=eff.describe()), *((" ", checks, ".") if evidence else ()))
        interval = msg("{lo} … {hi} nats/token", lo=f"{eff.lo:+.4f}", hi=f"{eff.hi:+.4f}")
        if failed:
            return Verdict(NOT_SUPPORTED, text, rule, _refuted(),
                           msg("the mechanism the claim names does not happen (by its threshold): {checks}",
                               checks=join(*[e.line() for e in failed], sep="; ")), caveat)
        lo, hi = sorted((self.expects * eff.lo, self.expects * eff.hi))
        way = msg("rise") if self.expects > 0 else msg("fall")
        if eff.tokens < MIN_TOKENS:
            return Verdict(NOT_ENOUGH, text, rule,
                           msg("at least {need} predicted tokens (here {have}): a longer text or a prompt set",
                               need=MIN_TOKENS, have=eff.tokens),
                           msg("only {have} predicted tokens, fewer than the {need} the rule asks for",
                               have=eff.tokens, need=MIN_TOKENS), caveat)
        if lo > MIN_EFFECT:
            return Verdict(SUPPORTED, text, rule, "",
                           msg("every mechanism check holds and the whole 95 % interval ({interval}) is a {way} of "
                               "more than {min} nats/token", interval=interval, way=way, min=MIN_EFFECT), caveat)
        if hi < MIN_EFFECT:
            return Verdict(NOT_SUPPORTED, text, rule, _refuted(),
                           msg("the whole 95 % interval ({interval}) lies short of a {way} of {min} nats/token, the "
                               "smallest effect the rule counts", interval=interval, way=way, min=MIN_EFFECT), caveat)
        return Verdict(NOT_ENOUGH, text, rule, _settle(eff, self.expects),
                       msg("the 95 % interval ({interval}) straddles the {min} nats/token threshold", interval=interval,
                           min=MIN_EFFECT), caveat)


def _refuted() -> Message:
    return msg("settled for this model and text; whether it holds more widely needs the same check on a prompt set "
               "of at least {prompts} prompts or on another model", prompts=MIN_PROMPTS)


def _settle(eff: Effect, expects: int) -> Message:
    half, gap = (eff.hi - eff.lo) / 2, abs(expects * eff.delta - MIN_EFFECT)
    if gap < 1e-9:
        return msg("the estimate sits on the {min} nats/token threshold: far more text than now", min=MIN_EFFECT)
    need = math.ceil(eff.units * (half / gap) ** 2 * 1.2)
    return msg("about {need} {over} (now {units}) for the interval to clear {min} nats/token, if the effect keeps "
               "its size (the interval narrows like 1/√n)", need=f"{need:,}", over=_UNITS[eff.over],
               units=f"{eff.units:,}", min=MIN_EFFECT)


def fmt_num(x, spec=".3g") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def register(cls: type[Kind]) -> type[Kind]:
    """Class decorator: put one instance of ``cls`` into :data:`REGISTRY` under ``cls.name``."""
    if not re.fullmatch(r"[a-z][a-z0-9=\-]*", cls.name):
        raise ValueError(f"kind name {cls.name!r}: lower-case letters, digits, '=' and '-' only")
    REGISTRY[cls.name] = cls()
    return cls


def get_kind(name: str) -> Kind:
    try:
        return REGISTRY[name]
    except KeyError:
        raise AblationError(msg("unknown intervention {name!r}; choose one of {kinds}",
            name=name, kinds=", ".join(REGISTRY))) from None


def kinds() -> list[Kind]:
    return list(REGISTRY.values())


def head_kinds() -> list[Kind]:
    """The kinds that act on named heads (the head map's modes)."""
    return [k for k in REGISTRY.values() if k.heads == "required"]


def head_means(weights, texts) -> torch.Tensor:
    """[L, H, e]: every head's z averaged over all positions of all texts (unablated runs)."""
    texts = ids_list(texts)
    if not texts:
        raise AblationError(msg("mean ablation needs at least one token to average over"))
    total, count = None, 0
    for ids in texts:
        z = run(weights, ids, capture=["z"]).stack("z")[:, 0].double()   # [L, H, T, e]
        s = z.sum(-2)
        total = s if total is None else total + s
        count += z.shape[-2]
    return (total / count).to(weights.dtype)
