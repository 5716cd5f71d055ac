"""Long work says its cost before it starts (issue 33, class 8): seconds estimated from the model's shape
(:mod:`attnkit.circuits.cost`) at a rate measured on this machine.

A computation estimated under :data:`AUTO_S` starts on its own and its estimate is a caption; a longer one
waits for a button whose label is the estimate, so a page opens with what is quick (at GPT-2 small's shape
within seconds) and never starts minutes of work unasked. Pressed once, a computation runs on its own for
the rest of the session (changing its inputs reruns it, as the quick ones do)."""
from __future__ import annotations

import streamlit as st

from attnkit.circuits import attribution_patching
from attnkit.circuits import cost as cost_lib
from attnkit.circuits import path as path_patching
from attnkit.i18n import t
from attnkit.app.escaping import plain
from attnkit.app.caches import cached_model
from attnkit.app.jobs import job_result

#: Computations estimated at most this many seconds start without a click.
AUTO_S = 10.0
#: Session key: the computations the user has asked for ({key}).
ASKED = "_ak_costs_asked"


def rate(model_name: str, device: str) -> float:
    """This machine's operations per second on the model (one timed forward, cached per shape)."""
    return cost_lib.measured_rate(cached_model(model_name, device).weights)


def seconds_text(s: float) -> str:
    """``12 s``, ``3 min``, ``1.5 h`` (in the session's language)."""
    if s < 90:
        return t("about {n} s", n=f"{max(s, 1):.0f}")
    if s < 5400:
        return t("about {n} min", n=f"{s / 60:.0f}")
    return t("about {n} h", n=f"{s / 3600:.1f}")


def gate(key: str, label: str, est: cost_lib.Estimate, dg=st) -> bool:
    """Whether the computation ``label`` (estimated by ``est``) runs in this script run: at once when it is
    quick or was asked for, else when its button ("label (about N s)") is pressed. The estimate is shown
    before the work starts either way."""
    when = seconds_text(est.seconds)
    asked = st.session_state.setdefault(ASKED, set())
    if est.seconds <= AUTO_S or key in asked:
        dg.caption(plain(t("{what}: estimated {when} on this machine ({passes} passes of the model).", what=label,
                           when=when, passes=f"{est.passes:,.0f}")))
        return True
    if dg.button(plain(t("Start: {what} ({when})", what=label, when=when)), key=f"{key}_start"):
        asked.add(key)
        return True
    dg.caption(plain(t("Not started: estimated {when} on this machine ({passes} passes of the model), from the "
                       "model's shape.", when=when, passes=f"{est.passes:,.0f}")))
    return False


def path_cost(cfg, T: int, receiver: str, rate_: float | None = None) -> cost_lib.Estimate:
    """Path patching into ``receiver`` (MLPs and the embedding among the senders, as the Circuits page runs it)."""
    recv = path_patching.parse_node(receiver, cfg, "receiver")
    n = sum(path_patching.precedes(path_patching.parse_node(s, cfg), recv, cfg)
            for s in path_patching.sender_names(cfg, True))
    return cost_lib.path_map_cost(cfg, T, n, rate_)


def exact_choice(cfg, T: int, pos: int, mlps: bool, rate_: float | None, key: str) -> tuple[bool, int | None]:
    """The exact comparison's two check boxes, each labelled with its estimate: run it (``key``), and on every
    edge (``key``_all) rather than the :data:`~attnkit.circuits.attribution_patching.EXACT_TOP` edges of largest
    |attribution| (the default). Returns (run it, top: None for every edge)."""
    top = attribution_patching.EXACT_TOP
    every = cost_lib.exact_cost(cfg, T, pos, mlps, None, rate_)
    if st.checkbox(plain(t("Every edge ({when}), not only the {n} of largest |attribution|",
                           when=seconds_text(every.seconds), n=top)), key=f"{key}_all"):
        top = None
    est = cost_lib.exact_cost(cfg, T, pos, mlps, top, rate_)
    return st.checkbox(plain(t("Run exact patching to compare ({when})", when=seconds_text(est.seconds))), key=key), top


def job(ctx, slot: str, key: tuple, label: str, fn, *args, est: cost_lib.Estimate | None = None, **kw):
    """``fn(weights, *args, progress=…, **kw)`` as a job (:func:`attnkit.app.jobs.job_result`: progress, Stop,
    the last result kept) keyed on the model, the device and ``key``; ``est``: its cost, said before it starts
    (:func:`gate`: a long one waits for its button). None while it has not started or runs."""
    if est is not None and not gate(f"{slot}:{ctx.model_name}", label, est):
        return None
    w = cached_model(ctx.model_name, ctx.device).weights
    return job_result(slot, (ctx.model_name, ctx.device, *key), label,
                      lambda progress: fn(w, *args, progress=progress, **kw))
