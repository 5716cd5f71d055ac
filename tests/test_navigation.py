"""The page list (defined once), the one way to open another page, and the one reader of a chart click."""
import ast

import pytest
from streamlit.testing.v1 import AppTest

from attnkit.app import navigation
from helpers import ROOT, apptest


def test_the_page_list_names_every_page_folder_once_with_home_first():
    folders = sorted(p.parent.name for p in navigation.PAGE_DIR.glob("*/page.py"))
    assert sorted(spec.key for spec in navigation.PAGES) == folders
    assert all(spec.path == navigation.PAGE_DIR / spec.key / "page.py" for spec in navigation.PAGES)
    assert navigation.PAGES[0].key == "home" and navigation.PAGES[0].url_path == ""
    assert len({spec.key for spec in navigation.PAGES}) == len({spec.title for spec in navigation.PAGES}) \
        == len({spec.address for spec in navigation.PAGES}) == len(navigation.PAGES)
    assert navigation.page_spec("steps").url_path == "Step_by_step"
    assert navigation.page_spec("Step by step") is navigation.page_spec("Step_by_step") is navigation.page_spec("steps")
    with pytest.raises(KeyError, match="heatmaps"):
        navigation.page_spec("nowhere")


#: The pages' addresses before pages became folders: links in the wild use them.
ADDRESSES = {"home": "", "heatmaps": "Heatmaps", "compare": "Compare_heads", "effects": "Head_effects",
             "circuits": "Circuits", "report": "Report_card", "entropy": "Entropy", "ablations": "Ablations", "steps": "Step_by_step",
             "verify": "Verify", "glossary": "Glossary", "training": "Training", "sinks": "Sinks",
             "atlas": "Atlas"}


def test_the_pages_keep_their_addresses_and_pages_holds_the_frame_for_each():
    """A page's address is fixed (st.Page gets it, not the file name), and pages/ has one copy of app.py's frame
    per address: Streamlit runs it when the address is a fresh server's first request (its old pages/ mode)."""
    assert {spec.key: spec.url_path for spec in navigation.PAGES} == ADDRESSES
    scripts = sorted((ROOT / "pages").glob("*.py"))
    assert sorted(p.stem for p in scripts) == sorted(spec.address for spec in navigation.PAGES[1:])
    frame = [ast.dump(node) for node in ast.parse((ROOT / "app.py").read_text(encoding="utf-8")).body[1:]]
    for p in scripts:                       # the code after the docstring, node for node
        assert [ast.dump(node) for node in ast.parse(p.read_text(encoding="utf-8")).body[1:]] == frame, p.name


def test_each_page_uses_its_list_title_icon_and_prefix():
    """The page's own title and session-key prefix are the list's: no second copy to drift."""
    for spec in navigation.PAGES:
        src = spec.path.read_text(encoding="utf-8")
        assert f'ui.page("{spec.key}")' in src, spec.key
        if spec.prefix and spec.key not in ("effects", "circuits", "verify"):
            assert f'prefix = "{spec.prefix}"' in src, spec.key
    for spec in navigation.PAGES:
        at = apptest(spec.key).run()
        assert not at.exception, (spec.key, at.exception)
        assert [t.value for t in at.title] == [spec.shown_title], spec.key


def test_a_page_script_run_on_its_own_says_where_it_runs():
    at = AppTest.from_file(str(navigation.page_spec("heatmaps").path)).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "A page of attnkit runs inside its dashboard: start it with streamlit run app.py."]


def _opener():
    import streamlit as st

    from attnkit.app import navigation as nav

    st.button("go", on_click=nav.open_head, args=(1, 2), kwargs={"prompt": "Hello there"})


def test_open_head_sets_the_heatmaps_inputs_and_asks_for_the_switch():
    at = AppTest.from_function(_opener).run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    ss = at.session_state
    assert (ss["hm_layer"], ss["hm_head"], ss["hm_view"]) == (1, 2, "One head")
    assert (ss["ak_text"], ss["ak_source"]) == ("Hello there", "Type")
    assert ss[navigation.GOTO] == "heatmaps"


def test_the_frame_switches_to_the_page_asked_for_before_drawing_anything(odd_dir):
    at = apptest("glossary", odd_dir).run()
    assert [t.value for t in at.title] == ["Glossary"]
    at.session_state["hm_layer"], at.session_state["hm_view"] = 1, "One head"
    at.session_state[navigation.GOTO] = "heatmaps"
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Heatmaps"]          # Glossary's title never drawn on this run
    assert at.selectbox(key="hm_layer").value == 1 and navigation.GOTO not in at.session_state


def _click_reader():
    import streamlit as st

    from attnkit import app as ui

    st.session_state.setdefault("chart", {"selection": {"pick": [{"head": "L0H1"}, {"x": 3}, "junk"]}})
    st.write(repr(ui.clicked("chart", "pick", "head")))
    st.write(repr(ui.clicked("chart", "other")))
    st.write(repr(ui.clicked("absent", "pick")))
    st.write(repr(ui.new_click("chart", "pick", "head")))


def test_the_click_reader_reads_fields_and_new_clicks_once():
    at = AppTest.from_function(_click_reader).run()
    assert not at.exception, at.exception
    assert [m.value for m in at.markdown] == ["['L0H1']", "[]", "[]", "['L0H1']"]
    at.run()
    assert [m.value for m in at.markdown][-1] == "[]"   # the same click, seen again: not new
