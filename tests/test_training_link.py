"""A link to the Training page that names a local folder (issue 44, class 14) asks before reading it, exactly as the
sidebar asks for a link's model folder: nothing is resolved, listed or analysed until "Load this folder"; "Ignore it"
goes back to the shipped series; a folder the user typed, the shipped series and hub revisions are used as named."""
from __future__ import annotations

import importlib
import json

import pytest

from attnkit import series as series_mod
from attnkit.app import state as page_state
from helpers import apptest

PAGE = "training"


@pytest.fixture()
def watched(monkeypatch):
    """Every series the page resolves (the first read of a folder) is recorded; the analysis is left out."""
    view = importlib.import_module("attnkit.app.pages.training.view")
    seen = []
    real = series_mod.resolve
    monkeypatch.setattr(series_mod, "resolve", lambda spec: seen.append(spec) or real(spec))
    monkeypatch.setattr(view, "analysis", lambda ctx, s: None)
    return seen


@pytest.fixture()
def folder(tmp_path):
    """A series folder whose series.json its reader refuses (a step in other digits): reading it says so."""
    root = tmp_path / "steps"
    (root / "step-000000").mkdir(parents=True)
    (root / "series.json").write_text(json.dumps({"checkpoints": [{"folder": "step-000000", "step": "０"}]}),
                                      encoding="utf-8")
    return root


def _linked(spec: str):
    at = apptest(PAGE)
    at.query_params["series"] = spec
    return at.run()


def _shown(elements) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]


def test_a_linked_folder_is_read_only_after_confirmation(watched, folder):
    at = _linked(str(folder))
    assert not at.exception, at.exception
    assert watched == [] and not at.error                              # nothing read yet
    assert any(str(folder) in w and "Nothing is loaded until you confirm" in w for w in _shown(at.warning))
    next(b for b in at.button if b.label == "Load this folder").click().run()
    assert not at.exception, at.exception
    assert watched == [str(folder)]                                    # read now, and its reader's one line shown
    assert len(at.error) == 1 and "digits 0-9 (ASCII)" in _shown(at.error)[0]
    at.run()                                                           # confirmed once for the session
    assert not at.warning and len(at.error) == 1


def test_ignore_goes_back_to_the_shipped_series(watched, folder):
    at = _linked(str(folder))
    next(b for b in at.button if b.label == "Ignore it").click().run()
    assert not at.exception, at.exception
    assert at.session_state["tr_series"] == series_mod.SHIPPED_SERIES_NAME and str(folder) not in watched
    assert not at.warning


@pytest.mark.parametrize("spec", [series_mod.SHIPPED_SERIES_NAME, "someone/absent@step0..step10/2"])
def test_the_shipped_series_and_hub_revisions_need_no_confirmation(watched, spec):
    at = _linked(spec)
    assert not at.exception, at.exception
    assert watched == [spec] and not at.warning


def test_a_folder_the_user_typed_needs_no_confirmation(watched, folder):
    at = apptest(PAGE, tr_series=str(folder)).run()
    assert not at.exception, at.exception
    assert watched == [str(folder)] and not at.warning and "digits 0-9 (ASCII)" in _shown(at.error)[0]


def test_a_links_numbers_are_ascii_digits():
    assert page_state.parse("int", "2800") == 2800
    for kind, raw in (("int", "２８００"), ("int", "٢٨٠٠"), ("float", "０.５"), ("list[int]", "1,２")):
        with pytest.raises(ValueError):
            page_state.parse(kind, raw)
