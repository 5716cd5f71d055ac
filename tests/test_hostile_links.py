"""Class 4 of the fourth hostile round, in links: a link's parameters that disagree or are out of range are
resolved with a one-line notice, never silently."""
from __future__ import annotations

from attnkit import app as ui
from helpers import ROOT, apptest, dashboard_sources

TEXT = "The animal didn't cross the street because it was too tired."


def _notices(at) -> list[str]:
    return [str(m.value) for m in at.info]


def test_prompt_and_prompt_sha_that_disagree_are_said(odd_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sha = ui.store_prompt("Another prompt, stored by its hash.")
    at = apptest("heatmaps", odd_dir)
    at.query_params["prompt"] = TEXT
    at.query_params["prompt_sha"] = sha
    at.run()
    assert not at.exception
    assert at.session_state["ak_text"] == TEXT                 # the text written in the link wins …
    said = [n for n in _notices(at) if "differ" in n]
    assert len(said) == 1 and sha[:12] in said[0], _notices(at)  # … and the page says so, once


def test_prompt_and_its_own_hash_agree_silently(odd_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sha = ui.store_prompt(TEXT)
    at = apptest("heatmaps", odd_dir)
    at.query_params["prompt"] = TEXT
    at.query_params["prompt_sha"] = sha
    at.run()
    assert not at.exception and at.session_state["ak_text"] == TEXT
    assert not [n for n in _notices(at) if "hash" in n], _notices(at)


def test_a_hash_not_stored_here_is_said(odd_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    at = apptest("heatmaps", odd_dir)
    at.query_params["prompt_sha"] = "ab" * 32
    at.run()
    assert not at.exception and any("not on this machine" in n for n in _notices(at)), _notices(at)


def test_entropy_log_base_out_of_range_is_reset_with_a_notice(odd_dir):
    at = apptest("entropy", odd_dir, text=TEXT, ent_log_on=True)
    at.query_params["log_base"] = "1e308"
    at.run()
    assert not at.exception
    said = [n for n in _notices(at) if n.startswith("Base b changed from 1e+308")]
    assert len(said) == 1, _notices(at)
    assert 1.5 <= at.session_state["ent_log_base"] <= 1e6


def test_pages_stop_through_ui_stop():
    """Class 7: nothing a run sends after st.stop() reaches the browser, so a page that stopped with st.stop()
    kept the link it came with (Verify's never named its model and prompt). Pages and the app's widgets stop
    through ui.stop(), which writes the link and the waiting notices first."""
    files = [p for p in dashboard_sources() if p.name != "frame.py"]
    found = [str(p.relative_to(ROOT)) for p in files if "st.stop()" in p.read_text(encoding="utf-8")]
    assert not found, found
