"""The ablation kinds: one class each, registered by :func:`~attnkit.ablations.base.register`.

Each class owns its spec word, label, claim (one sentence), definition, intervention, what it
measures (its :class:`Metric` constants and mechanism checks) and, through :class:`Kind`, its verdict.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .. import metrics as head_metrics
from ..i18n import msg
from .base import MIN_SHIFT, Evidence, Kind, Metric, Observation, register
from .hull import even_rows, hull_check, participation_ratio, record
from .interventions import KeyIsQuery, MeanHead, NoMask, NoScale, NoSink, ValueIsInput, ZeroHead

__all__ = [
    "ValueIsInputKind", "KeyIsQueryKind", "NoScaleKind", "NoMaskKind", "NoSinkKind", "ZeroHeadKind", "MeanHeadKind",
    "HULL_DISTANCE", "HULL_MAX", "HULL_LOWER", "HULL_RELATIVE", "DIM_X", "DIM_OUT", "ASYMMETRY",
    "SELF", "TOP_SELF", "COPIES", "ENTROPY", "LARGEST", "FUTURE", "asymmetry", "HULL_LOWER_RELATIVE",
    "INSIDE", "MIN_ENTROPY_DROP", "FIRST", "REMOVED",
]

# ----------------------------------------------------------------------------- measured quantities

HULL_DISTANCE = Metric("hull_distance", msg("distance of the output from the hull of x̂"), log=True)
HULL_MAX = Metric("hull_distance_max",
                  msg("largest distance of an output row from the hull of x̂"), peak=True, chart=False)
HULL_LOWER = Metric("hull_distance_lower", msg("certified lower bound of that distance"), chart=False)
HULL_RELATIVE = Metric("hull_distance_relative", msg("distance from the hull / RMS norm of x̂"), chart=False)
HULL_LOWER_RELATIVE = Metric("hull_distance_lower_relative",
                             msg("certified lower bound of that distance / RMS norm of x̂"),
                             chart=False)
DIM_X = Metric("dim_x_hat", msg("effective dimension of x̂"))
DIM_OUT = Metric("dim_output", msg("effective dimension of the attention output"))
ASYMMETRY = Metric("asymmetry", msg("asymmetry ‖S − Sᵀ‖/‖S‖ of the scores"))
SELF = Metric("attention_on_self", msg("attention on the token itself"))
TOP_SELF = Metric("top_key_is_self", msg("rows whose top key is the token itself"))
COPIES = Metric("attention_on_copies", msg("attention on earlier copies of the same token"), chart=False)
ENTROPY = Metric("entropy", msg("attention entropy (nats)"))
LARGEST = Metric("largest_weight", msg("largest attention weight"))
FUTURE = Metric("attention_on_future", msg("attention on future keys"))
FIRST = Metric("attention_on_first", msg("attention on the first token"))

#: V = X's outputs count as inside the hull below this distance / RMS norm of x̂.
INSIDE = 1e-3
#: No 1/√d's entropy check needs the mean attention entropy to fall by at least this (nats), not just fall.
MIN_ENTROPY_DROP = 0.1
#: The sink counts as removed when the ablated run leaves at most this attention on the first token (float noise).
REMOVED = 1e-6
_WEIGHT = msg("attention weight, 0–1")


def asymmetry(S: torch.Tensor) -> torch.Tensor:
    """‖S − Sᵀ‖_F / ‖S‖_F over the last two dims (0 for a symmetric matrix)."""
    S = S.double()
    num = torch.linalg.matrix_norm(S - S.transpose(-1, -2))
    den = torch.linalg.matrix_norm(S)
    return torch.where(den > 0, num / den, torch.zeros_like(den))


def _in_scope(result, metric: Metric, run: str) -> list[float]:
    vals = getattr(result.per_layer[metric.key], run)
    return [v for l, v in enumerate(vals) if l in result.scope and v is not None and not math.isnan(v)]


def _mean(v) -> float | None:
    return float(np.mean(v)) if len(v) else None


def _compare(result, metric: Metric, what, unit, expect, test) -> Evidence:
    """Evidence from the mean of ``metric`` over the scoped layers, baseline vs ablated."""
    b, a = _mean(_in_scope(result, metric, "baseline")), _mean(_in_scope(result, metric, "ablated"))
    return Evidence(what, b, a, expect, None if a is None or b is None else bool(test(b, a)), unit)


# ----------------------------------------------------------------------------- the kinds

@register
class ValueIsInputKind(Kind):
    name = "v=x"
    label = msg("V = X (no value/output projection)")
    claim = msg("With V = X every attention output is an average of the layer's normed inputs and so stays inside "
             "their convex hull; the value and output projections are what let attention write something new, "
             "and without them the model predicts worse.")
    definition = msg("attn_out_ℓ = (1/H)·Σ_h pattern_h · x̂_ℓ with x̂_ℓ = ln_1(X) at full width d_model (the block's own "
                  "norm; under grouped-query attention the mean runs over the query heads); W_V, b_V, W_O and b_O "
                  "are not used. Each output row is a convex combination of the rows of x̂_ℓ.")
    measures = msg("How far the attention outputs lie from the convex hull of x̂ (the ablated rows certified by their "
                "own mixture weights; the baseline rows by a batched FISTA solver with certified lower bounds), "
                "their effective dimension, and the loss.")
    latex = (r"\mathrm{attn\_out}_\ell = \frac{1}{H}\sum_{h=1}^{H} \mathrm{softmax}\!\Big(\frac{q_h k_h^\top}"
             r"{\sqrt{d_{head}}} + M\Big)\,\hat X_\ell,\qquad \hat X_\ell = \mathrm{ln}_1(X_\ell)")
    captures = ("ln1", "attn_out")
    mean_pattern = True            # measure() keeps mean_h(pattern_h) of the ablated run as ("pattern_mean", l)
    metrics = (HULL_DISTANCE, DIM_OUT, DIM_X, HULL_MAX, HULL_LOWER, HULL_RELATIVE, HULL_LOWER_RELATIVE)
    trained_with = msg("the value and output projections (W_V, W_O)")

    def intervention(self, spec, config=None, means=None):
        return ValueIsInput(spec.layers)

    def observe(self, obs: Observation):
        rows, T = even_rows(len(obs.ids)), len(obs.ids)
        scope = set(obs.spec.scope(obs.n_layers))
        for l in range(obs.n_layers):
            for run, tr in obs.both():
                x_hat = tr["ln1", l][0].double().cpu().numpy()
                out = tr["attn_out", l][0].double().cpu().numpy()
                # the ablated output is mean_h(pattern_h)·x̂ by definition: those weights certify it
                mix = tr.captures.get(("pattern_mean", l)) if run == "ablated" and l in scope else None
                mix = None if mix is None else mix.double().cpu().numpy()
                d, info = hull_check(out, x_hat, rows, mix, iters=obs.hull_iters)
                record(obs.info, info, len(rows), T)
                if info["method"] == "off":
                    continue
                scale = float(np.sqrt((x_hat ** 2).sum(1).mean()))
                obs.acc.add(HULL_DISTANCE, l, run, float(d.mean()), len(rows))
                obs.acc.add(HULL_MAX, l, run, float(d.max()))
                obs.acc.add(HULL_LOWER, l, run, float(info["lower"].mean()), len(rows))
                obs.acc.add(HULL_RELATIVE, l, run, float(d.mean()) / scale, len(rows))
                obs.acc.add(HULL_LOWER_RELATIVE, l, run, float(info["lower"].mean()) / scale, len(rows))
                obs.acc.add(DIM_X, l, run, participation_ratio(x_hat))
                obs.acc.add(DIM_OUT, l, run, participation_ratio(out))
            if obs.tick:
                obs.tick()

    def evidence(self, result):
        """Both lines in one unit — a distance divided by the RMS norm of x̂ — so the bound can be read against
        the distance it bounds; the second check itself compares absolute distances (bound vs peak)."""
        inside = max(_in_scope(result, HULL_RELATIVE, "ablated"), default=None)
        outside = _mean(_in_scope(result, HULL_LOWER, "baseline"))
        peak = max(_in_scope(result, HULL_MAX, "ablated"), default=None)
        unit = msg("distance / RMS norm of x̂")
        return [
            Evidence(msg("distance of the attention output from the hull of x̂"),
                     _mean(_in_scope(result, HULL_RELATIVE, "baseline")), inside,
                     msg("ablated ≤ {limit} (inside the hull)", limit=INSIDE),
                     None if inside is None else inside <= INSIDE, unit),
            Evidence(msg("certified lower bound of that distance"),
                     _mean(_in_scope(result, HULL_LOWER_RELATIVE, "baseline")),
                     _mean(_in_scope(result, HULL_LOWER_RELATIVE, "ablated")),
                     msg("baseline above 10 × the ablated run's largest distance (the real output leaves the hull)"),
                     None if outside is None or peak is None else outside > 10 * max(peak, 1e-12), unit),
        ]


@register
class KeyIsQueryKind(Kind):
    name = "wk=wq"
    label = msg("W_K = W_Q (one projection for looking and being looked at)")
    claim = msg("With one projection for the token that looks and the token looked at (W_K = W_Q) the scores become "
             "symmetric and a token matches itself best, so attention shifts onto the token itself and the "
             "model predicts worse.")
    definition = msg("k := q in every scoped head (W_K = W_Q, b_K = b_Q): S = q·qᵀ/√d_head before the mask.")
    measures = msg("The asymmetry of the scores, the attention each token pays itself, and the loss.")
    heads = "optional"
    captures = ("scores", "pattern")
    metrics = (ASYMMETRY, SELF, TOP_SELF, COPIES)
    trained_with = msg("separate query and key projections (W_Q ≠ W_K)")

    def available(self, config):
        if config.group > 1:
            return False, msg("W_K = W_Q is not defined under grouped-query attention: this model has "
                              "{kv} key heads for {heads} query heads.", kv=config.kv_heads, heads=config.n_heads)
        return True, ""

    def intervention(self, spec, config=None, means=None):
        return KeyIsQuery(spec.layers, spec.heads)

    def observe(self, obs: Observation):
        T = len(obs.ids)
        for l in range(obs.n_layers):
            for run, tr in obs.both():
                S, p = tr["scores", l][0, obs.heads(l)], tr["pattern", l][0, obs.heads(l)]   # [h, T, T]
                obs.acc.add(ASYMMETRY, l, run, float(asymmetry(S).mean()))
                st = head_metrics.head_scores(p, obs.ids, window=obs.config.window(l))
                if T > 1:
                    obs.acc.add(SELF, l, run, float(st["self"].mean()), T - 1)
                    top = p[:, 1:].argmax(-1) == torch.arange(1, T, device=p.device)
                    obs.acc.add(TOP_SELF, l, run, float(top.double().mean()), T - 1)
                dup = st["duplicate-token"]
                if not torch.isnan(dup).any():
                    obs.acc.add(COPIES, l, run, float(dup.mean()))
            if obs.tick:
                obs.tick()

    def evidence(self, result):
        sym = max(_in_scope(result, ASYMMETRY, "ablated"), default=None)
        return [
            Evidence(msg("asymmetry ‖S − Sᵀ‖/‖S‖ of the scores"), _mean(_in_scope(result, ASYMMETRY, "baseline")), sym,
                     msg("ablated < {limit} (symmetric)", limit="1e-05"), None if sym is None else sym < 1e-5,
                     msg("ratio of norms")),
            _compare(result, SELF, msg("attention on the token itself"), _WEIGHT,
                     msg("ablated ≥ baseline + {shift}", shift=MIN_SHIFT), lambda b, a: a - b >= MIN_SHIFT),
        ]


@register
class NoScaleKind(Kind):
    name = "no-scale"
    label = msg("No 1/√d scaling")
    claim = msg("Without dividing the scores by √d_head the softmax saturates, so attention collapses onto fewer "
             "keys (lower entropy) and the model predicts worse.")
    definition = msg("scores = q·kᵀ (factor 1 instead of 1/√d_head); any other factor the model applies, such as "
                  "GPT-2's optional 1/(layer+1), stays.")
    measures = msg("Attention entropy and the largest weight per row, and the loss.")
    heads = "optional"
    captures = ("pattern",)
    metrics = (ENTROPY, LARGEST)
    trained_with = msg("the 1/√d_head scaling of the scores")

    def available(self, config):
        if not config.scale_attn_weights:
            return False, msg("this model does not divide its scores by √d_head (scale_attn_weights=False): "
                              "removing the factor would change nothing.")
        return True, ""

    def intervention(self, spec, config=None, means=None):
        return NoScale(spec.layers, spec.heads, config=config)

    def observe(self, obs: Observation):
        if len(obs.ids) < 2:
            return
        for l in range(obs.n_layers):
            for run, tr in obs.both():
                p = tr["pattern", l][0, obs.heads(l)]
                obs.acc.add(ENTROPY, l, run, float(head_metrics.entropy(p)[:, 1:].double().mean()), len(obs.ids) - 1)
                obs.acc.add(LARGEST, l, run, float(p[:, 1:].max(-1).values.double().mean()), len(obs.ids) - 1)
            if obs.tick:
                obs.tick()

    def evidence(self, result):
        return [_compare(result, ENTROPY, msg("attention entropy"), msg("nats"),
                         msg("ablated ≤ baseline − {drop}", drop=MIN_ENTROPY_DROP),
                         lambda b, a: b - a >= MIN_ENTROPY_DROP)]


@register
class NoMaskKind(Kind):
    name = "no-mask"
    label = msg("No causal mask (future visible)")
    claim = msg("Without the causal mask each position can see the very token it must predict, so the next-token "
             "loss falls: the model cheats.")
    definition = msg("the additive mask M is dropped (a local window too): softmax(q·kᵀ/√d_head) over all "
                  "positions, future included.")
    measures = msg("Attention on future keys, how much the logits of earlier positions change, and the loss "
                "(the claim predicts it falls).")
    captures = ("pattern",)
    metrics = (FUTURE,)
    expects = -1

    def intervention(self, spec, config=None, means=None):
        return NoMask(spec.layers)

    def observe(self, obs: Observation):
        T = len(obs.ids)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        for l in range(obs.n_layers):
            p = obs.abl["pattern", l][0]
            obs.acc.add(FUTURE, l, "ablated", float((p * future.to(p.device)).sum(-1).double().mean()), T)
            obs.acc.add(FUTURE, l, "baseline", 0.0, T)
            if obs.tick:
                obs.tick()
        lb, la = obs.base.logits[0].double(), obs.abl.logits[0].double()
        rel = (torch.linalg.vector_norm(la - lb, dim=-1) / torch.linalg.vector_norm(lb, dim=-1)).cpu()
        flip = (la.argmax(-1) != lb.argmax(-1)).cpu()
        for t in range(T):
            obs.add_position(t, float(rel[t]), bool(flip[t]))

    def evidence(self, result):
        fut = _mean(_in_scope(result, FUTURE, "ablated"))
        early = [p.relative_change for p in result.per_position[:-1]]
        ch = _mean(early)
        return [
            Evidence(msg("attention on future keys"), 0.0, fut, msg("ablated ≥ {shift}", shift=MIN_SHIFT),
                     None if fut is None else fut >= MIN_SHIFT, _WEIGHT),
            Evidence(msg("change of the logits at positions before the last"), 0.0, ch,
                     msg("ablated > {limit}", limit="1e-06"), None if ch is None else ch > 1e-6,
                     msg("‖Δlogits‖ / ‖logits‖")),
        ]


@register
class NoSinkKind(Kind):
    name = "no-sink"
    label = msg("Remove the attention sink (hide the first token's key)")
    claim = msg("Heads park attention on the first token, so hiding that token's key from every later query moves "
                "the parked attention onto tokens that write something and the model predicts worse.")
    definition = msg("key 0 is hidden from every query i ≥ 1 (its score set to −∞ before the softmax) in the scoped "
                     "layers, or in the named heads; query 0 keeps it, its only key. Heads outside the scope still "
                     "see it.")
    measures = msg("The attention on the first token (before: is there a sink to remove; after: is it gone), the "
                   "attention entropy, and the loss.")
    heads = "optional"
    captures = ("pattern",)
    metrics = (FIRST, ENTROPY)
    trained_with = msg("the first token as a place to park attention")

    def intervention(self, spec, config=None, means=None):
        return NoSink(spec.layers, spec.heads)

    def observe(self, obs: Observation):
        T = len(obs.ids)
        if T < 2:
            return
        for l in range(obs.n_layers):
            for run, tr in obs.both():
                p = tr["pattern", l][0, obs.heads(l)][:, 1:]                     # [h, T − 1, T], queries i ≥ 1
                obs.acc.add(FIRST, l, run, float(p[..., 0].double().mean()), T - 1)
                obs.acc.add(ENTROPY, l, run, float(head_metrics.entropy(p).double().mean()), T - 1)
            if obs.tick:
                obs.tick()

    def evidence(self, result):
        before = _mean(_in_scope(result, FIRST, "baseline"))
        after = max(_in_scope(result, FIRST, "ablated"), default=None)
        return [
            Evidence(msg("attention on the first token before the ablation"), before,
                     _mean(_in_scope(result, FIRST, "ablated")),
                     msg("baseline ≥ {shift} (a sink to remove)", shift=MIN_SHIFT),
                     None if before is None else before >= MIN_SHIFT, _WEIGHT),
            Evidence(msg("attention on the first token after it"), before, after,
                     msg("ablated ≤ {limit} (removed)", limit=f"{REMOVED:g}"), None if after is None else after <= REMOVED,
                     _WEIGHT),
        ]


class _HeadKind(Kind):
    heads = "required"
    measures = msg("The loss with the named head(s) ablated; the head map does it for every head alone.")


@register
class ZeroHeadKind(_HeadKind):
    name = "zero-head"
    label = msg("Zero-ablate a head")
    claim = msg("Heads specialise, so setting a head's output to zero removes something the other heads do not "
             "supply and the model predicts worse.")
    definition = msg("z[:, h] = 0 for the named head(s): the head adds nothing to the residual stream except b_O.")

    def intervention(self, spec, config=None, means=None):
        return ZeroHead(None, spec.heads)


@register
class MeanHeadKind(_HeadKind):
    name = "mean-head"
    label = msg("Mean-ablate a head")
    claim = msg("Replacing a head's output by its average keeps the head's constant contribution but removes what "
             "it reads from the context, and the model predicts worse.")
    definition = msg("z[:, h] = mean of z[:, h] over all positions of the text/prompt set (unablated run).")

    def needs_means(self) -> bool:
        return True

    def intervention(self, spec, config=None, means=None):
        return MeanHead(means, None, spec.heads)
