"""The page list (defined once), the one way to open another page, and the one reader of a chart click."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnkit.app import navigation
from helpers import ROOT, apptest


def test_the_page_list_names_every_page_file_once_with_home_first():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))
    assert sorted(spec.path for spec in navigation.PAGES) == files
    assert navigation.PAGES[0].key == "home" and navigation.PAGES[0].url_path == ""
    assert len({spec.key for spec in navigation.PAGES}) == len({spec.title for spec in navigation.PAGES}) \
        == len(navigation.PAGES)
    assert navigation.page_spec("steps").url_path == "Step_by_step"
    assert navigation.page_spec("Step by step").icon == navigation.page_spec("pages/5_Step_by_step.py").icon
    with pytest.raises(KeyError, match="heatmaps"):
        navigation.page_spec("nowhere")


def test_each_page_uses_its_list_title_icon_and_prefix():
    """The page's own title and session-key prefix are the list's: no second copy to drift."""
    for spec in navigation.PAGES:
        src = Path(ROOT / spec.path).read_text(encoding="utf-8")
        if spec.prefix and spec.key not in ("effects", "circuits", "verify"):
            assert f'prefix = "{spec.prefix}"' in src, spec.path
    at = apptest("app.py").run()
    assert not at.exception
    assert [t.value for t in at.title] == [navigation.PAGES[0].heading]
    at.switch_page("pages/5_Step_by_step.py").run()
    assert [t.value for t in at.title] == ["Step by step"]


def _opener():
    import streamlit as st

    from attnkit.app import navigation as nav

    st.button("go", on_click=nav.open_head, args=(1, 2), kwargs={"prompt": "Hello there"})
    nav.follow(in_frame=False)


def test_open_head_sets_the_heatmaps_inputs_and_says_where_they_went_outside_the_frame():
    at = AppTest.from_function(_opener).run()
    assert not at.info
    at.button[0].click().run()
    assert not at.exception, at.exception
    ss = at.session_state
    assert (ss["hm_layer"], ss["hm_head"], ss["hm_view"]) == (1, 2, "One head")
    assert (ss["ak_text"], ss["ak_source"]) == ("Hello there", "Type")
    assert [i.value for i in at.info] == [
        "Head L1H2 and the prompt are selected on the Heatmaps page; open it from the navigation."]
    at.run()
    assert not at.info                                # said once


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
