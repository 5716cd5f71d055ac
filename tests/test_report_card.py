"""Issue 44, item 7: the report card on a page. The card is computed once per process and kept on disk keyed by the
models' content (a changed file is a new card; a damaged entry is computed again, never shown or trusted); its
messages come back from disk in the reader's language. The Report card page shows the cached card, computes it
on request as a job (never when the page opens), and scores a planted folder of one's own loaded in the sidebar.

Two methods on one planted model the tests build (seconds, not the full card's minutes): the methods themselves
are tested in test_calibration.py and test_calibrate_folder.py."""
from __future__ import annotations

import json

import pytest

from attnkit import calibration as cal
from attnkit import report_card as rc
from attnkit.i18n import language
from helpers import apptest, make_planted_negative

FEW = [m for m in cal.METHODS if m[0] == "stated circuit"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_planted_negative(tmp_path_factory.mktemp("card") / "planted-negative")


@pytest.fixture(scope="module")
def computed(folder, tmp_path_factory):
    """A cache folder of its own, one method, the planted model as the only 'shipped' one, and its card computed
    once (with the progress it reported): (models, card, ticks, the entry's bytes on disk)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNKIT_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.setattr(cal, "METHODS", FEW)
        mp.setattr(rc, "_MEMORY", {})
        models = [("planted-negative", folder)]
        mp.setattr(rc, "shipped", lambda: models)
        ticks = []
        card = rc.report_card(models, n_pairs=1, progress=lambda d, t: ticks.append((d, t)))
        yield models, card, ticks, rc._path(rc.card_key(models, 1)).read_bytes()


@pytest.fixture
def quick(computed, monkeypatch):
    """This process's memory forgotten (as a new process starts), the disk entry as computed."""
    models, _, _, entry = computed
    monkeypatch.setattr(rc, "_MEMORY", {})
    rc._path(rc.card_key(models, 1)).write_bytes(entry)
    return models


def test_computed_once_then_read_back_from_disk_in_the_readers_language(computed, quick):
    _, card, ticks, _ = computed
    assert not card["cached"] and ticks[-1] == (1, 1)
    back = rc.peek(quick, n_pairs=1)                                           # a new process: from the disk
    assert back["cached"] and back["pairs"] == 1 and rc.report_card(quick, n_pairs=1) is back   # not computed again
    rows, again = card["models"][0]["methods"], back["models"][0]["methods"]
    assert len(rows) == 3 and [(r["method"], str(r["metric"]), r["value"]) for r in rows] == \
        [(r["method"], str(r["metric"]), r["value"]) for r in again]
    with language("zh"):
        assert [str(r["verdict"]) for r in again] == [str(r["verdict"]) for r in rows]
        assert str(again[0]["metric"]) == "仅保留声明边时的忠实度" and str(again[0]["verdict"]).startswith("通过")
    assert rc.peek(quick, n_pairs=4) is None                                   # other settings: another card


def test_a_changed_model_file_is_another_card(quick):
    before = rc.card_key(quick, 1)
    circuit = quick[0][1] / "CIRCUIT.json"
    text = circuit.read_text(encoding="utf-8")
    try:
        circuit.write_text(text.replace('"vocab": 40', '"vocab": 39'), encoding="utf-8")
        assert rc.card_key(quick, 1) != before and rc.peek(quick, n_pairs=1) is None
    finally:
        circuit.write_text(text, encoding="utf-8")
    assert rc.card_key(quick, 1) == before and rc.peek(quick, n_pairs=1) is not None


@pytest.mark.parametrize("damage", [
    lambda d: "garbage{",
    lambda d: json.dumps({**d, "key": "another"}),
    lambda d: json.dumps({**d, "models": "none"}),
    lambda d: json.dumps(d).replace('"id": "pass: {why}"', '"id": "pass: {why.__class__}"'),
    lambda d: json.dumps(d).replace('"id": "pass: {why}"', '"id": "pass: {other}"'),
])
def test_a_damaged_entry_is_treated_as_absent(quick, damage):
    path = rc._path(rc.card_key(quick, 1))
    path.write_text(damage(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
    assert rc.peek(quick, n_pairs=1) is None           # report_card() then computes it again and writes it over


def _table(at):
    return next(d.value for d in at.dataframe if "planted-negative" in d.value.columns)


def test_the_page_computes_on_request_then_shows_the_card(quick, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(rc._path("x").parent.parent / "empty"))       # nothing cached
    at = apptest("report").run()
    assert not at.exception, at.exception
    assert not [d for d in at.dataframe if "planted-negative" in d.value.columns]      # nothing computed unasked
    assert any(c.value.startswith("Not computed on this machine yet") for c in at.caption)
    at.button(key="_ak_run_rc_card").click().run()
    assert not at.exception, at.exception
    table = _table(at)
    card = rc.peek(quick)
    values = [r for r in card["models"][0]["methods"]]
    assert len(table) == len(values) and list(table.columns) == ["method", "metric", "planted-negative"]
    for cell, r in zip(table["planted-negative"], values):
        assert cell == f"{r['value']:.3g}" + (" ✓" if str(r["verdict"]).startswith("pass") else " ✗")
    later = apptest("report", ak_lang="zh").run()                              # another session: at once, in zh
    assert not later.exception, later.exception
    assert "仅保留声明边时的忠实度" in set(_table(later)["指标"])


def test_the_page_scores_a_planted_folder_loaded_in_the_sidebar(quick, folder, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(rc._path("x").parent.parent / "empty"))       # nothing cached
    monkeypatch.setattr(rc, "shipped", lambda: [])                            # only the folder's own card here
    at = apptest("report", folder).run()
    assert not at.exception, at.exception
    at.button(key="_ak_run_rc_own").click().run()
    assert not at.exception, at.exception
    assert len(_table(at)) == len(rc.peek([(folder.name, folder)])["models"][0]["methods"])
