"""Watching attention learn: a series of training checkpoints, the induction phase change, a head's pattern
over steps, and any checkpoint opened on the other pages (the logic is in view.py beside this file)."""
from dataclasses import dataclass

import streamlit as st

from attnkit import app as ui
from attnkit.app.pages.training import view
from attnkit.i18n import t
from attnkit.series import SHIPPED_SERIES_NAME
from attnkit.standard import parse_head


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys tr_*, URL parameters by field name)."""

    prefix = "tr"
    series: str = SHIPPED_SERIES_NAME
    step: int = -1                       # the last checkpoint
    head: str = ""                       # the best induction head at the last checkpoint
    neighbours: int = 1


ctx = ui.page("training")
state = Inputs.load()

st.markdown(t(
    "A **series** is an ordered list of checkpoints of one model taken during training. For each checkpoint: the "
    "best induction score on repeated random tokens (with its 95 % interval), the previous-token and first-token "
    "scores, the attention entropy, the in-context-learning (ICL) score — loss late in a window minus loss early "
    "in it, on the series' own text, inside the window the model was trained on — the loss on the repeat, the "
    "K-composition of the strongest previous-token → induction pair and the validation loss. The **phase change** "
    "is the first step whose best induction score's interval lies wholly above the threshold (Olsson et al. 2022)."))

spec = st.text_input(t("Series"), key="tr_series", help=t(
    "{name} (shipped), a folder of step folders (step-000000/, …), or a hub model with revisions: "
    "NAME@step0,step1000 or NAME@step0..step143000/16", name=SHIPPED_SERIES_NAME))
series, error = view.resolve(spec)
if series is None:
    st.error(ui.plain(error), icon="⚠️")
    ui.stop()
st.caption(ui.plain(t("{n} checkpoints, steps {first}–{last} ({source})", n=len(series), first=series.steps[0],
                      last=series.steps[-1], source=view.shown_name(series))))

res = view.analysis(ctx, series)
if res is None:
    ui.stop()

st.subheader(t("Curves over steps"))
view.curves(res)

st.subheader(t("A head's pattern, step by step"))
steps = res.steps
state.fit("step", steps, steps[-1], what=t("Step"), because=t("not a checkpoint of this series"), basis=series.name)
heads = sorted(set(res.head_frame("induction")["head"]), key=parse_head)
state.fit("head", heads, res.default_head(), what=t("Head"), because=t("not a head of this model"),
          basis=series.name)
state.fit("neighbours", range(0, 4), 1, what=t("Neighbours"), because=t("0 to 3"))
view.advance(steps)
left, mid, right = st.columns([3, 1, 1])
step = left.select_slider(t("Step"), options=steps, key="tr_step")
head = mid.selectbox(t("Head"), heads, key="tr_head")
neighbours = right.number_input(t("Neighbours each side"), 0, 3, key="tr_neighbours")
view.step_controls(steps)
view.pattern_view(res, step, head, int(neighbours))

st.subheader(t("Open this checkpoint"))
view.open_buttons(res, step, head)

with st.expander(t("Every checkpoint's numbers")):
    table = res.frame()
    ui.show_table(table.drop(columns=["folder", "name", "k_pair", "cached"]), hide_index=True)
    ui.download_buttons(table, None, stem="training_series", meta={"series": series.name}, key="tr_table")
view.keep_playing()
