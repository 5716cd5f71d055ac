"""The head atlas's result: per head its statistics over the corpus, its effect, and a verdict per role.

A *role* is a ranked head statistic of :data:`attnkit.metrics.STATISTICS` (previous-token, first-token, self,
duplicate-token, induction; a statistic registered later with ``ranked = True`` is a role too). For each head and
role:

* the role holds **by pattern** when the statistic's corpus mean (over windows) reaches its threshold
  (:data:`THRESHOLD`, or :data:`THRESHOLDS` for a role that has its own);
* the head holds **by effect** when mean-ablating it raises the corpus loss by more than :data:`MARGIN` nats per
  predicted token with the whole 95 % interval above the margin; a head whose removal *lowers* the loss by more
  than the margin (interval below −margin) is said to, as such (it is not inert);
* the verdict is exactly one of :data:`LABELS`: "pattern and effect", "pattern only" (inert on this corpus, said
  plainly), "effect only" (the head matters, without this role's pattern), "neither".

Heads that share a role may be ablated together (the atlas ablates a role's pattern heads as one group): a head
that carries little alone while its group carries much is redundant, and the text says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from .ablations import MIN_EFFECT
from .atlas import EFFECT_ONLY, LABEL_NAMES, LABELS, NEITHER, NO_FIRST, PATTERN_AND_EFFECT, PATTERN_ONLY, ROLE_NAMES
from .charts.atlas import scatter, scatter_frame
from .i18n import LANGUAGES, Message, current, join, msg
from .metrics import STATISTICS
from .standard import head_name, parse_head

__all__ = ["LABELS", "PATTERN_AND_EFFECT", "PATTERN_ONLY", "EFFECT_ONLY", "NEITHER", "THRESHOLD", "THRESHOLDS",
           "MARGIN", "RAISES", "LOWERS", "NO_EFFECT", "roles", "threshold", "direction", "label", "role_verdicts",
           "head_text", "redundancy_text", "redundant", "rules", "AtlasResult", "ROLE_NAMES", "LABEL_NAMES", "in_languages", "text_in"]

#: A role holds by its pattern when its statistic's corpus mean reaches this (a share of attention)…
THRESHOLD = 0.3
#: …or this role's own threshold: every head puts some mass on a sink, so the first-token role asks for half.
THRESHOLDS = {"first-token": 0.5}
#: The effect's margin, nats per predicted token: the ablations' "no effect" bound (≈ 1 % of perplexity).
MARGIN = MIN_EFFECT
RAISES, LOWERS, NO_EFFECT = "raises", "lowers", "none"



def roles() -> list[str]:
    """The roles: the ranked statistics, in the registry's order."""
    return [name for name, s in STATISTICS.items() if s.ranked]


def threshold(role: str) -> float:
    return THRESHOLDS.get(role, THRESHOLD)


def direction(value: float, low: float, high: float, margin: float = MARGIN) -> str:
    """RAISES when the loss rise and its whole interval exceed ``margin``; LOWERS when the interval lies below
    −margin; else NO_EFFECT (within the margin, or an interval that does not decide)."""
    if not all(math.isfinite(x) for x in (value, low, high)):
        return NO_EFFECT
    if value > margin and low > margin:
        return RAISES
    if value < -margin and high < -margin:
        return LOWERS
    return NO_EFFECT


def label(pattern: bool, effect: bool) -> str:
    return {(True, True): PATTERN_AND_EFFECT, (True, False): PATTERN_ONLY,
            (False, True): EFFECT_ONLY, (False, False): NEITHER}[(bool(pattern), bool(effect))]


def role_verdicts(means: dict[str, float], effect_dir: str, no_first: bool = False) -> list[dict]:
    """One verdict per role from the statistics' corpus means (``means[column]``) and the effect's direction;
    ``no_first``: the roles read the statistics computed without position 0."""
    suffix = NO_FIRST if no_first else ""
    out = []
    for role in roles():
        col = role + (suffix if role != "first-token" else "")
        score = means.get(col, math.nan)
        pattern = math.isfinite(score) and score >= threshold(role)
        out.append({"role": role, "statistic": col, "score": None if not math.isfinite(score) else float(score),
                    "threshold": threshold(role), "pattern": bool(pattern), "effect": effect_dir == RAISES,
                    "verdict": label(pattern, effect_dir == RAISES)})
    return out


def _n(x: float, spec: str = ".3f") -> str:
    return "—" if x is None or not math.isfinite(x) else format(x, spec)


def _effect_args(eff: dict) -> dict:
    return {"value": _n(eff["value"], "+.4f"), "low": _n(eff["low"], "+.4f"), "high": _n(eff["high"], "+.4f"),
            "margin": _n(MARGIN, "g")}


def _pattern_sentence(head: str, r: dict, eff: dict) -> Message:
    args = dict(head=head, role=ROLE_NAMES.get(r["role"], r["role"]), score=_n(r["score"]), threshold=_n(r["threshold"], "g"),
                **_effect_args(eff))
    if r["verdict"] == PATTERN_AND_EFFECT:
        return msg("{head} holds the {role} role by its pattern ({score} ≥ {threshold}) and by its effect: removing "
                   "it raises the corpus loss by {value} nats/token (95 % interval {low} … {high}, above the margin "
                   "{margin}).", **args)
    if eff["direction"] == LOWERS:
        return msg("{head} shows the {role} pattern ({score} ≥ {threshold}), and removing it lowers the corpus "
                   "loss: {value} nats/token (95 % interval {low} … {high}). On this corpus it works against the "
                   "model's predictions.", **args)
    return msg("{head} shows the {role} pattern ({score} ≥ {threshold}) but is inert on this corpus: "
               "mean-ablating it changes the loss by {value} nats/token (95 % interval {low} … {high}), an interval "
               "that does not lie above the margin {margin}.", **args)


def head_text(head: str, verdicts: list[dict], eff: dict) -> Message:
    """What the atlas says of one head, one sentence per role that holds by pattern (or one for none)."""
    held = [r for r in verdicts if r["pattern"]]
    if held:
        return join(*[_pattern_sentence(head, r, eff) for r in held], sep=" ")
    args = dict(head=head, **_effect_args(eff))
    if eff["direction"] == RAISES:
        return msg("{head} shows none of the named patterns (no statistic reaches its threshold), yet removing "
                   "it raises the corpus loss by {value} nats/token (95 % interval {low} … {high}): an effect "
                   "without a named pattern.", **args)
    if eff["direction"] == LOWERS:
        return msg("{head} shows none of the named patterns, and removing it lowers the corpus loss: {value} "
                   "nats/token (95 % interval {low} … {high}).", **args)
    return msg("{head} shows none of the named patterns, and removing it changes the corpus loss by {value} "
               "nats/token (95 % interval {low} … {high}), an interval that does not lie above the margin {margin}.",
               **args)


def redundant(group: dict, alone: list[float]) -> bool:
    """Heads are redundant when removing them together raises the loss by more than the margin beyond the sum
    of what removing each alone does (the group's whole interval above that sum + margin; a member whose
    removal lowers the loss counts as 0 there, so it cannot make a group look redundant)."""
    low = group.get("low")
    return group["direction"] == RAISES and low is not None and low > sum(max(a or 0.0, 0.0) for a in alone) + MARGIN


def redundancy_text(head: str, group: dict, alone: dict) -> Message:
    """A role's pattern heads ablated together, said of one of them (``group``: role, heads, value, low, high,
    direction, redundant; ``alone``: this head's own effect)."""
    args = dict(head=head, role=ROLE_NAMES.get(group["role"], group["role"]), heads=", ".join(group["heads"]),
                alone=_n(alone["value"], "+.4f"), **_effect_args(group))
    if group["redundant"] and alone["direction"] != RAISES:
        return msg("Alone {head} carries little ({alone} nats/token), but removing the {role} heads {heads} "
                   "together raises the loss by {value} nats/token (95 % interval {low} … {high}), more than "
                   "the sum of removing each alone: they are redundant, one stands in for another.", **args)
    if group["redundant"]:
        return msg("Removing the {role} heads {heads} together raises the loss by {value} nats/token (95 % "
                   "interval {low} … {high}), more than the sum of removing each alone ({head} alone: {alone}): "
                   "they share the work.", **args)
    return msg("Removing the {role} heads {heads} together changes the loss by {value} nats/token (95 % interval "
               "{low} … {high}); {head} alone: {alone}.", **args)


def rules() -> dict:
    """The verdicts' rules as data (the atlas's manifest and JSON state them)."""
    return {"roles": {r: {"threshold": threshold(r)} for r in roles()}, "effect_margin_nats_per_token": MARGIN,
            "effect_rule": "mean-ablating the head raises the corpus loss by more than the margin, its 95 % "
                           "interval above the margin", "labels": list(LABELS)}


def in_languages(value) -> dict | object:
    """A message as {language: text} for every language (the atlas's files carry both); else unchanged."""
    return {lang: value.render(lang) for lang in LANGUAGES} if isinstance(value, Message) else value


def text_in(value, lang: str | None = None) -> str:
    """A text of an atlas ({language: text} as its files carry it, or a message) in ``lang`` (default: this
    context's language)."""
    if isinstance(value, dict):
        return str(value.get(lang or current()) or value.get("en") or "")
    return "" if value is None else value.render(lang) if isinstance(value, Message) else str(value)


# ----------------------------------------------------------------------------- the result object

@dataclass
class AtlasResult:
    """A head atlas: ``info`` (model, corpus, settings, rules, float64 check) and one record a head (``heads``,
    in layer-then-head order; see docs/atlas.md for their fields). :meth:`to_pandas` is one row a head,
    :meth:`chart` the scatter, :meth:`card` one head's record, :meth:`to_json` the ``--json`` answer."""

    info: dict
    heads: list = field(default_factory=list)

    def card(self, head) -> dict:
        """The record of a head, by name (``L2H1``) or (layer, head)."""
        name = head if isinstance(head, str) else head_name(*head)
        parse_head(name)
        for h in self.heads:
            if h["head"] == name:
                return h
        raise KeyError(f"no head {name} in this atlas")

    def to_pandas(self) -> pd.DataFrame:
        """One row a head: head, layer, index, every statistic's corpus mean (both ways), the effect and its
        interval and direction, each role's verdict (column ``verdict: <role>``), and the float64 check."""
        rows = []
        for h in self.heads:
            row = {"head": h["head"], "layer": h["layer"], "index": h["index"]}
            row.update({k: v["mean"] for k, v in h["statistics"].items()})
            e = h["effect"]
            row.update(effect=e["value"], effect_low=e["low"], effect_high=e["high"], effect_direction=e["direction"])
            row.update({f"verdict: {r['role']}": r["verdict"] for r in h["roles"]})
            row["float64 ok"] = h["float64"]["ok"]
            rows.append(row)
        return pd.DataFrame(rows)

    def chart(self, x: str = "previous-token", y: str = "induction", color: str = "verdict", role: str | None = None):
        """The scatter of every head on two statistics (or ``effect``), coloured by layer or by the verdict of
        ``role`` (default: ``y``'s role, else induction) — :func:`attnkit.charts.atlas.scatter`."""
        return scatter(scatter_frame(self.to_pandas(), role or (y if y in roles() else "induction")), x, y, color)

    def to_json(self) -> dict:
        """The ``--json`` answer: model, corpus, rules, and per head its effect, its roles and the check."""
        return {"model": self.info.get("model", {}).get("name"), "model_info": self.info.get("model"),
                "corpus": self.info.get("corpus"), "rules": self.info.get("rules"),
                "settings": self.info.get("settings"),
                "heads": [{"head": h["head"], "effect": {k: h["effect"][k] for k in ("value", "low", "high", "direction")},
                           "roles": [{k: r[k] for k in ("role", "score", "threshold", "verdict")} for r in h["roles"]],
                           "summary": h["summary"], "float64": h["float64"]} for h in self.heads]}
