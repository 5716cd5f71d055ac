"""The Training page's logic (out of ``pages/10_Training.py``): the series box's series, the analysis as a job
(progress, Stop; each checkpoint cached on disk by :mod:`attnkit.training`), the curves with their titles in the
reader's language, the pattern slider, and "open this checkpoint" on every other page."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from attnkit import series as series_mod
from attnkit import training
from attnkit.charts import training as training_charts
from attnkit.i18n import t
from attnkit.loading import LoadError
from attnkit.standard import parse_head
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.frame import stop
from attnkit.app.jobs import job_result
from attnkit.app.navigation import PAGES, open_checkpoint
from attnkit.app.sidebar import ask_to_load
from attnkit.app.url import confirm_path, link_path_waits

__all__ = ["SLOT", "resolve", "shown_name", "analysis", "curve_titles", "curves", "pattern_view", "open_buttons",
           "OPEN_ON", "PLAY_S", "PLAYING", "step_controls", "advance", "keep_playing"]

#: The page's job slot, and the session key of its series box.
SLOT = "tr_analysis"
KEY = "tr_series"
#: The pages a checkpoint opens on (every page that runs on a model but Home and this one).
OPEN_ON = tuple(p.key for p in PAGES if p.uses_model and p.key not in ("home", "training"))


def _ignore_link_folder() -> None:
    st.session_state[KEY] = series_mod.SHIPPED_SERIES_NAME


def resolve(spec: str) -> tuple[series_mod.Series | None, str | None]:
    """(the series, None) or (None, the one-line reason it cannot be formed). A folder that came in the link is
    not read before the user confirms it (the page's run ends here with the question, as the sidebar asks for a
    link's model folder)."""
    spec = (spec or "").strip()
    if not spec:
        return None, t("Type a series: {name}, a folder of step folders, or NAME@REV,REV…",
                       name=series_mod.SHIPPED_SERIES_NAME)
    if link_path_waits(KEY, "series", spec, series_mod.is_folder):
        ask_to_load(spec, KEY, confirm_path, _ignore_link_folder)
        stop()
    try:
        s = series_mod.resolve(spec)
        series_mod.check_consistent(s)
    except (LoadError, OSError) as e:
        return None, str(e)
    return s, None


def shown_name(s: series_mod.Series) -> str:
    """The series as the page names it: a shipped or hub series by its name, a local folder by its own name (not
    the path on this machine)."""
    return Path(s.source).name if Path(s.source).is_dir() and s.name not in series_mod.SHIPPED_SERIES else s.name


def analysis(ctx: Context, s: series_mod.Series) -> training.SeriesResult | None:
    """Every checkpoint's numbers, as a job (progress per checkpoint, Stop); None until the first result."""
    key = (s.name, s.source, tuple(m.name for m in s.members), ctx.device)
    device = ctx.device

    def work(progress):
        return training.analyse(s, device=device, progress=progress)

    label = t("Analysing {n} checkpoints of {series}", n=len(s), series=s.name)
    return job_result(SLOT, key, label, work)


def curve_titles(res: training.SeriesResult) -> dict:
    """The curves' axis titles and the rules' labels, translated."""
    return {"induction": t("best induction score (random repeats)"),
            "previous_token": t("best previous-token score"), "first_token": t("best first-token score"),
            "entropy": t("mean attention entropy (normalised)"), "icl": t("ICL score (late − early loss, nats)"),
            "repeat_loss": t("loss on the repeat (nats)"), "k_composition": t("K-composition prev → induction"),
            "val_loss": t("validation loss (series.json)"),
            "phase_change": t("phase change (induction clears {threshold} at {level})", threshold=res.threshold,
                              level=f"{training.LEVEL:.0%}"),
            "icl_drop": t("steepest ICL drop (ends)")}


def curves(res: training.SeriesResult):
    """The curves over steps (the phase change marked), the verdict and the ICL note as plain text."""
    chart = training_charts.curves_chart(res, titles=curve_titles(res))
    st.altair_chart(chart, width="stretch")
    st.caption(t("Shaded: the best induction head's 95 % interval over the random sequences; dotted: the "
                 "threshold; vertical rules: the phase change and the end of the steepest ICL drop."))
    st.subheader(t("Verdict"))
    st.text(str(res.verdict()))
    st.text(str(res.icl_note()))
    return chart


def pattern_view(res: training.SeriesResult, step: int, head: str, neighbours: int):
    """``head``'s pattern on repeated random tokens at ``step`` beside its neighbouring checkpoints."""
    title = t("{head} at step {step} and its neighbours", head=head, step=step)
    chart = training_charts.pattern_strip(res, head, step, neighbours, title=title)
    st.altair_chart(chart)
    st.caption(t("Attention on {n} random tokens repeated once: an induction head attends from each token of the "
                 "repeat to the token after its first occurrence (the diagonal stripe below the main diagonal).",
                 n=len(res.checkpoints[0].pattern_tokens) // 2))
    return chart


def open_buttons(res: training.SeriesResult, step: int, head: str) -> None:
    """One button per page: the checkpoint at ``step`` becomes the sidebar's model, and that page opens (Heatmaps
    on ``head``)."""
    c = res.checkpoints[res.steps.index(step)]
    st.caption(plain(t("Open the checkpoint of step {step} ({name}) on another page:", step=step, name=c.label)))
    per_row = 3                                   # labels stay whole in a normal-width main column (the longest,
    #                                               'Open on Attention sinks & KV cache', is cut at 4 a row at 1280 px)
    cols = [c for i in range(0, len(OPEN_ON), per_row) for c in st.columns(per_row)]
    layer, h = parse_head(head)
    for col, key in zip(cols, OPEN_ON):
        spec = next(p for p in PAGES if p.key == key)
        inputs = {"view": "One head", "layer": layer, "head": h} if key == "heatmaps" else {}
        col.button(t("Open on {page}", page=spec.title), icon=spec.icon, key=f"tr_open_{key}",
                   on_click=open_checkpoint, args=(key, c.name), kwargs=inputs, width="stretch")


# ----------------------------------------------------------------------------- stepping and playing

#: Seconds between two checkpoints while playing; the session key that says it plays.
PLAY_S, PLAYING = 1.5, "tr_playing"
STEP_KEY = "tr_step"


def _go(steps: list[int], where: str) -> None:
    """A button's callback: the first, previous, next or last checkpoint (playing stops)."""
    ss = st.session_state
    k = steps.index(ss[STEP_KEY]) if ss.get(STEP_KEY) in steps else len(steps) - 1
    k = {"first": 0, "prev": max(0, k - 1), "next": min(len(steps) - 1, k + 1), "last": len(steps) - 1}[where]
    ss.update({STEP_KEY: steps[k], PLAYING: False})


def _toggle(steps: list[int]) -> None:
    """Play or pause; playing from the last checkpoint starts again at the first."""
    ss = st.session_state
    if not ss.get(PLAYING) and ss.get(STEP_KEY) == steps[-1]:
        ss[STEP_KEY] = steps[0]
    ss[PLAYING] = not ss.get(PLAYING, False)


def step_controls(steps: list[int]) -> None:
    """First, previous, play/pause, next and last: the pattern slider stepped through the checkpoints, or played
    (one checkpoint every PLAY_S seconds, stopping at the last)."""
    playing = st.session_state.get(PLAYING, False)
    cols = st.columns([1, 1, 2, 1, 1, 6])
    for col, (where, icon, tip) in zip(cols[:2], (("first", "⏮", t("First checkpoint")),
                                                  ("prev", "◀", t("Previous checkpoint")))):
        col.button(icon, key=f"tr_{where}", on_click=_go, args=(steps, where), help=tip)  # internal text: above
    cols[2].button(t("⏸ Pause") if playing else t("▶ Play"), key="tr_play", on_click=_toggle, args=(steps,),
                   help=t("Show the checkpoints one after another, one every {s} s.", s=PLAY_S))
    for col, (where, icon, tip) in zip(cols[3:5], (("next", "▶", t("Next checkpoint")),
                                                   ("last", "⏭", t("Last checkpoint")))):
        col.button(icon, key=f"tr_{where}", on_click=_go, args=(steps, where), help=tip)  # internal text: above


def advance(steps: list[int]) -> None:
    """While playing, each run of the page shows the next checkpoint (called before the slider is drawn); at the last
    one playing stops."""
    ss = st.session_state
    if not ss.get(PLAYING):
        return
    k = steps.index(ss[STEP_KEY]) if ss.get(STEP_KEY) in steps else -1
    ss[STEP_KEY] = steps[min(k + 1, len(steps) - 1)]
    if ss[STEP_KEY] == steps[-1]:
        ss[PLAYING] = False


def keep_playing() -> None:
    """While playing: a timer that reruns the whole page every PLAY_S seconds (the link and the Open buttons follow
    the step shown). An empty fragment with ``run_every``: its run inside the page's run only notes that run; its
    own timed run asks for the page's next run."""
    ss = st.session_state
    ss[_RUN] = ss.get(_RUN, 0) + 1
    if ss.get(PLAYING):
        st.fragment(_tick, run_every=PLAY_S)()


_RUN, _SEEN = "_tr_run", "_tr_tick_seen"


def _tick() -> None:
    ss = st.session_state
    if ss.get(_SEEN) == ss.get(_RUN):           # the timer's own run: no page run since the last tick
        st.rerun(scope="app")
    ss[_SEEN] = ss.get(_RUN)
