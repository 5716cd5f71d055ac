"""Page content at first contact (AppTest) and, in Chromium, characters drawn whole and nothing clipped."""
from __future__ import annotations

import pytest

from attnkit.app.navigation import PAGES
from helpers import apptest

APP_PAGES = [spec.title for spec in PAGES[1:]]


def test_home_start_here_names_every_page_and_the_offline_notice_is_one_line():
    at = apptest("home", text="Hello 床 🙂").run()                 # the shipped model (the hub is offline)
    assert not at.exception, at.exception
    assert any(h.value == "Start here" for h in at.subheader)
    start = next(m.value for m in at.markdown if "seed" in m.value and "Verify" in m.value)
    assert all(f"**{p}**" in start for p in APP_PAGES)
    assert "claims" in start
    side = at.sidebar
    notes = [c.value for c in side.caption if "Offline" in c.value]
    assert len(notes) == 1 and "\n" not in notes[0] and len(notes[0]) < 100
    assert not [i for i in side.info if "python -c" in i.value]       # the long command sits in the expander
    assert any("python -c" in t.value for t in side.expander[0].text)
    # the tokens: 床 and 🙂 drawn whole in the text, their pieces listed in the table
    texts = [t.value for t in at.main.text]
    assert any("床" in t and "🙂" in t and "\\x" not in t for t in texts)
    table = at.dataframe[2].value
    assert {"token", "bytes", "id"} <= set(table.columns)
    assert any(str(t).startswith("🙂[1/") for t in table["token"])
