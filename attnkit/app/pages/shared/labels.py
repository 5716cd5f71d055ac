"""What choice widgets show for values that stay identifiers in the program (and the link): colour scales,
head statistics, … — each a catalog message, rendered in the session's language by :func:`shown`."""
from __future__ import annotations

from attnkit.i18n import msg

__all__ = ["SCALE_NAMES", "STAT_NAMES", "RANDOM_INDUCTION", "RANDOM_INDUCTION_HELP", "COMPARE_NAMES", "shown"]

#: Heatmap colour scales (``charts.heatmaps.SCALES``).
SCALE_NAMES = {"linear": msg("linear"), "sqrt": msg("square root"), "log": msg("log (3 decades)")}
#: Head statistics (``metrics.HEAD_STATS`` names, and Compare's random-token induction test).
STAT_NAMES = {"mean entropy": msg("mean entropy"), "previous-token": msg("previous-token"),
              "first-token": msg("first-token"), "self": msg("self"), "mean distance": msg("mean distance"),
              "duplicate-token": msg("duplicate-token"), "induction": msg("induction"),
              "induction (repeated random tokens)": msg("induction (repeated random tokens)")}

#: Compare's statistic computed on repeated random tokens (not a per-prompt statistic), and its one line.
RANDOM_INDUCTION = "induction (repeated random tokens)"
RANDOM_INDUCTION_HELP = msg("on 4 sequences of 50 random tokens repeated once: mean attention from a token in the "
                            "second copy to the token that followed it in the first copy (independent of the prompt)")
#: Compare's choices: its statistics and its scopes.
COMPARE_NAMES = {**STAT_NAMES, "all heads": msg("all heads"), "the heads of one layer": msg("the heads of one layer")}


def shown(names: dict):
    """A ``format_func`` for a choice widget: the option's message in this run's language (else the option)."""
    return lambda option: str(names.get(option, option))
