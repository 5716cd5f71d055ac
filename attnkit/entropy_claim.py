"""The seed's claim about entropy — attention spreads out as the context grows — judged on an entropy
:class:`~attnkit.entropy.Summary`: an effect size (the median slope of entropy against ln(i+1)), a 95 %
bootstrap interval over documents, a stated threshold, and for every status but "supported" why and what
would settle it (:class:`Advice`: a Window setting or a longer text). Sentences are catalog messages
(:mod:`attnkit.i18n`). Re-exported by :mod:`attnkit.entropy`.

The advice follows one rule, :func:`advised_window` — the longest window that still cuts the text into
:data:`MIN_DOCS` documents — so following it never undoes an earlier advice: too few documents → that window
(shorter); an interval that is narrow but between the thresholds → that window when it is at least twice the
current one (longer windows: the claim is about long contexts); anything else → more text (a longer text or a
prompt set: the Entropy page offers the shipped texts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .i18n import Message, join, msg

__all__ = ["CLAIM", "CLAIM_SLOPE", "RISE", "MIN_DOCS", "MIN_WINDOW", "Advice", "advised_window", "advice",
           "slope_interval", "claim_check"]


# ----------------------------------------------------------------------------- the seed's claim

CLAIM = msg("The longer the context, the more terms share the softmax's mass, so the attention's entropy "
         "rises and picking out the key tokens gets harder — a core difficulty of long contexts and of "
         "length extrapolation.")


#: The claim holds when the median slope of entropy against ln(i+1) exceeds this (nats per unit of ln n) …
CLAIM_SLOPE = 0.3
#: … and a head "rises" when its slope exceeds this.
RISE = 0.1
#: Documents (windows) needed before an interval over documents is trusted.
MIN_DOCS = 5


def slope_interval(doc_slopes, resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """95 % bootstrap interval of the mean over documents of each document's median head slope
    (None with fewer than :data:`MIN_DOCS` documents)."""
    x = np.asarray(doc_slopes, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < MIN_DOCS:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def claim_check(s, context: int | None = None) -> tuple[str, Message]:   # s: attnkit.entropy.Summary
    """(verdict, explanation) of the seed's claim — attention spreads out as the context grows — with its
    effect size (the median slope of entropy against ln(i+1)) and a 95 % bootstrap interval over documents.

    Verdicts: 'supported' (the whole interval above CLAIM_SLOPE and at least half the heads rise),
    'not supported' (the whole interval below RISE: attention keeps its focus), 'not enough evidence'
    (fewer than MIN_DOCS documents, or an interval not wholly past either threshold), 'undetermined' (NaN,
    too short). The explanation is a message (rendered in the reader's language); every status but
    'supported' says why and what would settle it (:func:`advice`; ``context``: the model's, the longest
    window it can be advised)."""
    bad = ~np.isfinite(s.mean["entropy"])
    if bad.any():                       # NaN/Inf attention: no verdict computed from it
        return "undetermined", msg("The attention holds NaN or Inf values (first in layer {layer}), so no entropy and "
                                   "no verdict can be computed: the weights or the input overflow float32.",
                                   layer=int(np.argwhere(bad)[0][0]))
    sl = s.slope[np.isfinite(s.slope)]
    if sl.size == 0:
        return "undetermined", msg("Too few positions (need at least 3 tokens) to fit a slope.")
    ci = slope_interval(s.extra.get("doc_slopes", ()))
    n_docs = _n_docs(s)
    text = _claim_text(s, sl, ci, n_docs)
    verdict = _verdict(sl, ci)
    if verdict == "not supported":
        return verdict, join(text, " ", msg(
            "Why: the whole interval lies below {rise}, so attention keeps its focus as the context grows. Settled for "
            "this model and text; other texts (a prompt set) would show whether it holds more widely.", rise=RISE))
    if verdict == "supported":
        return verdict, text
    return verdict, join(text, " ", advice(s, context).message)


def _n_docs(s) -> int:
    return int(np.isfinite(np.asarray(s.extra.get("doc_slopes", ()), dtype=float)).sum())


def _verdict(sl: np.ndarray, ci) -> str:
    if ci is None:
        return "not enough evidence"
    if ci[0] > CLAIM_SLOPE and int((sl > RISE).sum()) >= 0.5 * sl.size:
        return "supported"
    if ci[1] < RISE:
        return "not supported"
    return "not enough evidence"


def _claim_text(s, sl: np.ndarray, ci, n_docs: int) -> Message:
    """The effect size, its interval, the heads that rise, the last position's entropy and the rule."""
    last = s.normalised("mean")[:, s.n_heads, -1]
    interval = (msg(", 95 % interval over {n} documents {lo} … {hi}", n=n_docs, lo=f"{ci[0]:.2f}", hi=f"{ci[1]:.2f}")
                if ci else msg("; no interval: {n} document(s), fewer than {need}", n=n_docs, need=MIN_DOCS))
    return join(
        msg("Effect: median slope of entropy against ln(i+1) = {slope} nats per unit of ln n (1 = spreads like "
            "uniform attention, 0 = fixed focus)", slope=f"{float(np.median(sl)):.2f}"), interval, ". ",
        msg("{rising} of {heads} heads rise by more than {rise} nat per unit of ln(i+1), {steep} by more than 0.7, "
            "{flat} stay flat.", rising=int((sl > RISE).sum()), heads=sl.size, rise=RISE,
            steep=int((sl > 0.7).sum()), flat=int((np.abs(sl) <= RISE).sum())), " ",
        msg("At the longest position ({T} tokens) the head-mean normalised entropy per layer is {values} (1 = "
            "uniform).", T=s.T, values=", ".join(f"{v:.2f}" for v in last)), " ",
        msg("Rule: 'supported' when the whole interval lies above {slope} and at least half the heads rise; 'not "
            "supported' when it lies below {rise}; otherwise not enough evidence.", slope=CLAIM_SLOPE, rise=RISE))


# ----------------------------------------------------------------------------- what would settle it

#: A window needs at least this many tokens for its slope to mean something.
MIN_WINDOW = 8


@dataclass(frozen=True)
class Advice:
    """What would settle a 'not enough evidence' verdict: ``window`` (split the same text into windows of this many
    tokens) or ``more_text`` (a longer text or a prompt set: the text is too short for a window that helps), and
    the sentence that says why (a catalog message naming the Window setting and --window)."""

    message: Message
    window: int | None = None
    more_text: bool = False


def advised_window(tokens: int, context: int | None = None) -> int:
    """The longest window that still cuts ``tokens`` tokens into :data:`MIN_DOCS` documents (at most ``context``):
    the one rule behind every window the advice names, and the window the Entropy page opens a shipped text with."""
    w = tokens // MIN_DOCS
    return min(w, context) if context else w


def advice(s, context: int | None = None) -> Advice:
    """What would settle the verdict on ``s`` (see the module docstring): a window by :func:`advised_window`, or more
    text. ``context``: the model's (the advice never names a longer window)."""
    tokens, window, n_docs = int(np.asarray(s.count).sum()), int(s.T), _n_docs(s)
    best = advised_window(tokens, context)
    ci = slope_interval(s.extra.get("doc_slopes", ()))
    if ci is None:
        why = msg("Why: an interval needs at least {need} documents or windows; there are {n}.", need=MIN_DOCS,
                  n=n_docs)
        if MIN_WINDOW <= best < window:
            return Advice(join(why, " ", msg(
                "What would settle it: set Window (tokens) (--window on the command line) to {window} with “split "
                "into windows”, so these {tokens} tokens make {need} windows; or use a prompt set of at least {need} "
                "texts.", window=best, tokens=f"{tokens:,}", need=MIN_DOCS)), window=best)
        return Advice(join(why, " ", msg(
            "What would settle it: at least {need} documents or windows of at least {min} tokens each: a longer text "
            "(at least {total} tokens), or a prompt set.", need=MIN_DOCS, min=MIN_WINDOW, total=MIN_DOCS * MIN_WINDOW)),
            more_text=True)
    lo, hi = ci
    between = RISE <= lo and hi <= CLAIM_SLOPE
    why = msg("Why: the interval {lo} … {hi} does not lie wholly above {slope} or below {rise}.", lo=f"{lo:.2f}",
              hi=f"{hi:.2f}", rise=RISE, slope=CLAIM_SLOPE)
    if between and best >= 2 * window:
        return Advice(join(why, " ", msg(
            "It is narrow and lies between the two: windows of {window} tokens measure the slope over short contexts "
            "only. What would settle it: longer windows — set Window (tokens) (--window on the command line) to "
            "{best}, the longest that still makes {need} windows of these {tokens} tokens.", window=window, best=best,
            need=MIN_DOCS, tokens=f"{tokens:,}")), window=best)
    need = (msg("longer windows (at least {w} tokens) need more text: at least {total} tokens", w=2 * window,
                total=f"{2 * window * MIN_DOCS:,}") if between else
            msg("the interval is wide: more documents of this length, that is more text"))
    return Advice(join(why, " ", msg(
        "What would settle it: {need} — a longer text or a prompt set (the Entropy page offers the shipped texts).",
        need=need)), more_text=True)
