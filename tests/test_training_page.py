"""The Training page (attnkit/app/pages/training/) on the shipped series: curves, the phase change, the pattern slider,
and "open this checkpoint" (the sidebar's model becomes the checkpoint, Heatmaps opens on the head)."""
import json
import re

import pyarrow as pa
import pytest

from attnkit import series as series_mod
from attnkit import training
from attnkit.app.context import LOCAL
from helpers import apptest

PAGE = "training"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The shipped series analysed once into a module cache folder (the page then reads it from the disk)."""
    cache = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNKIT_CACHE", str(cache))
    s = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME)
    yield training.analyse(s)
    mp.undo()


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _frames(chart) -> list:
    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]


def _steps_drawn(at) -> set:
    """The steps in the last chart's data (the pattern strip's)."""
    return {int(s) for df in _frames(at.get("vega_lite_chart")[-1]) if "step" in df.columns for s in df["step"]}


def test_the_page_shows_the_curves_and_the_same_phase_change_as_the_library(shipped):
    at = apptest(PAGE, timeout=300).run()
    assert not at.exception, at.exception
    texts = [x.value for x in at.text]
    step = shipped.phase_change_step
    assert step is not None and any(v.startswith(f"phase change at step {step}:") for v in texts), texts
    assert any("positions 116–127 minus at positions 7–19" in v for v in texts)
    specs = json.dumps(_charts(at)[0])
    assert "best induction score (random repeats)" in specs and "ICL score (late" in specs and "K-composition" in specs
    rules = [df for df in _frames(at.get("vega_lite_chart")[0]) if "what" in df.columns]
    assert rules and any(set(zip(df["what"].str[:12], df["step"])) >= {("phase change", step)} for df in rules)
    assert at.session_state["tr_step"] == shipped.steps[-1] and at.session_state["tr_head"] == shipped.default_head()


def test_the_slider_changes_the_step_shown_and_open_sets_the_model(shipped):
    at = apptest(PAGE, timeout=300).run()
    slider = at.select_slider(key="tr_step")
    assert slider.options == [str(s) for s in shipped.steps]
    head = at.session_state["tr_head"]
    assert f"{head} at step {shipped.steps[-1]} and its neighbours" in json.dumps(_charts(at)[-1])
    assert _steps_drawn(at) == set(shipped.steps[-2:])
    slider.set_value(2800).run()
    assert not at.exception, at.exception
    strip = json.dumps(_charts(at)[-1])
    assert f"{head} at step 2800 and its neighbours" in strip and _steps_drawn(at) == {2700, 2800, 2900}
    at.button(key="tr_open_heatmaps").click().run()
    assert not at.exception, at.exception
    member = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME).member(2800)
    ss = at.session_state
    assert (ss["ak_model"], ss["ak_folder"]) == (LOCAL, member.name)
    layer, h = (int(x) for x in head[1:].split("H"))
    assert (ss["hm_view"], ss["hm_layer"], ss["hm_head"]) == ("One head", layer, h)


def test_a_bad_series_is_one_line_and_nothing_runs(tmp_path):
    at = apptest(PAGE, tr_series=str(tmp_path / "nowhere")).run()
    assert not at.exception and len(at.error) == 1 and "series folder not found" in at.error[0].value
    assert not at.get("vega_lite_chart")


# ----------------------------------------------------------------------------- round five (issue 44, item 11)

def test_training_opens_on_the_verdicts_head_and_names_its_series(shipped):
    at = apptest(PAGE, timeout=300).run()
    assert not at.exception, at.exception
    verdict = next(x.value for x in at.text if x.value.startswith(("phase change", "no phase change")))
    named = re.findall(r"\bL\d+H\d+\b", verdict)[0]
    assert at.session_state["tr_head"] == named == shipped.default_head()
    source = next(c.value for c in at.caption if "checkpoints, steps" in c.value)
    assert f"({series_mod.SHIPPED_SERIES_NAME})" in source and "/" not in source
    keys = {b.key for b in at.button}
    assert "tr_open_heatmaps" in keys and "tr_open_glossary" not in keys and "tr_open_home" not in keys


def test_training_steps_and_plays_through_the_checkpoints(shipped):
    steps = shipped.steps
    at = apptest(PAGE, timeout=300).run()
    at.button(key="tr_first").click().run()
    assert at.session_state["tr_step"] == steps[0]
    at.button(key="tr_next").click().run()
    assert at.session_state["tr_step"] == steps[1]
    at.button(key="tr_prev").click().run()
    assert at.session_state["tr_step"] == steps[0]
    at.button(key="tr_play").click().run()                          # each run while playing shows the next one
    assert at.session_state["tr_playing"] and at.session_state["tr_step"] == steps[1]
    at.run()
    assert at.session_state["tr_step"] == steps[2]
    at.button(key="tr_last").click().run()                          # a step button stops playing
    assert at.session_state["tr_step"] == steps[-1] and not at.session_state["tr_playing"]
    at.button(key="tr_play").click().run()                          # from the last: starts again at the first
    assert at.session_state["tr_step"] == steps[1] and not at.exception
