"""Tables in 简体中文: every page's dataframe headers in Chinese on its first view; every table of pages/ and
attnkit/app/ drawn by attnkit.app.tables.show_table (so the ones shown only after a click are translated too, by
TABLE_TEXT, which is checked here whole); in English the frame is shown exactly as the library built it."""
import ast
import json
import re

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from attnkit import i18n
from attnkit.app import tables
from attnkit.app.navigation import PAGES
from helpers import ROOT, dashboard_sources
from test_learner_pages import zh_page
from untranslated import untranslated

#: Terms the Chinese pages write in English everywhere, as the seeds do: formulas and their functions, and
#: "token" (the seeds never write 词元; the glossary gives it as Token（词元）).
TERMS = ("softmax", "logits", "logit", "token")
#: A position:token label (the mask table's headers on Step by step): the model's input, shown as it is.
TOKEN_LABEL = re.compile(r"^\d+:")
FRONT = [str(p.relative_to(ROOT)) for p in dashboard_sources()]


def english_headers(frame) -> list[str]:
    """The headers of a shown frame (columns, the index's and the columns' names) with an English word."""
    frame = getattr(frame, "data", frame)              # a Styler's frame
    names = [*frame.columns, frame.index.name, frame.columns.name]
    return [str(h) for h in names if isinstance(h, str) and not TOKEN_LABEL.match(h)
            and untranslated(h, allow=TERMS, min_words=1)]


@pytest.mark.parametrize("page", [spec.key for spec in PAGES])
def test_page_tables_have_chinese_headers(page):
    at = zh_page(page).run()
    assert not at.exception, at.exception
    left = {h for d in at.dataframe for h in english_headers(d.value)}
    assert not left, f"{page}: {sorted(left)}"


def test_every_table_text_is_chinese():
    with i18n.language("zh"):
        shown = {m.id: i18n.Message(m.id, dict.fromkeys(re.findall(r"\{(\w+)\}", m.id), "3")).render()
                 for m in tables.TABLE_TEXT}
    assert not {k: v for k, v in shown.items() if untranslated(v, allow=TERMS, min_words=1)}
    assert len(shown) == len(tables.TABLE_TEXT)                       # no id listed twice


def test_every_table_goes_through_show_table():
    calls = []
    for rel in FRONT:
        if rel == "attnkit/app/tables.py":
            continue
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dataframe", "table", "data_editor")):
                calls.append(f"{rel}:{node.lineno}")
    assert not calls, f"use attnkit.app.show_table: {calls}"


FRAME = pd.DataFrame({"layer": [0, 1], "weight": [0.5, 0.25], "L3H0": ["final", "x"], "mode": ["with KV cache", "?"]})


def test_shown_frame_translates_headers_and_named_cells_only():
    assert tables.shown_frame(FRAME, cells=("mode",)) is FRAME                 # English: the library's frame
    with i18n.language("zh"):
        out = tables.shown_frame(FRAME, cells=("mode",))
        assert list(out.columns) == [i18n.t("layer"), i18n.t("weight"), "L3H0", i18n.t("mode")]
        assert list(out[i18n.t("mode")]) == [i18n.t("with KV cache"), "?"]
        assert list(out["L3H0"]) == ["final", "x"]                            # not a named column
        rows = tables.shown_frame(pd.DataFrame({"row": ["embed", "after 3"]}), cells=("row",))
        assert list(rows.iloc[:, 0]) == [i18n.t("embed"), i18n.t("after {l}", l=3)]
        pivot = tables.shown_frame(pd.DataFrame([[1.0]], index=pd.Index(["heads"], name="query_group"),
                                                columns=pd.Index(["biases"], name="key_group")), index=True)
        assert (list(pivot.index), pivot.index.name) == ([i18n.t("heads")], i18n.t("query_group"))
        assert (list(pivot.columns), pivot.columns.name) == ([i18n.t("biases")], i18n.t("key_group"))
        # two headers that would show the same text keep their own
        same = tables.shown_frame(pd.DataFrame({"embed": [1], "embeddings": [2]}))
        assert list(same.columns) == ["embed", "embeddings"]
    assert list(FRAME.columns) == ["layer", "weight", "L3H0", "mode"]           # the caller's frame untouched


def _table_page():
    import pandas as pd
    import streamlit as st

    from attnkit import i18n
    from attnkit.app import show_table

    i18n.set_language(st.session_state.get("lang", "en"))
    df = pd.DataFrame({"layer": [0, 1], "weight": [0.5, 0.25], "head": [3, 1]})
    show_table(df, hide_index=True, column_order=("weight", "layer"),
               column_config={"weight": st.column_config.NumberColumn(format="%.1f")})
    hot = df["head"] == 3
    show_table(df.style.apply(lambda r: ["color: red" if hot[r.name] else ""] * len(r), axis=1), hide_index=True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_show_table_keeps_column_config_and_styles(lang):
    at = AppTest.from_function(_table_page)
    at.session_state["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    with i18n.language(lang):
        layer, weight, head = i18n.t("layer"), i18n.t("weight"), i18n.t("head")
    plain, styled = at.dataframe
    assert list(plain.value.columns) == list(styled.value.columns) == [layer, weight, head]
    assert list(plain.proto.column_order) == [weight, layer]
    assert json.loads(plain.proto.columns)[weight]["type_config"]["format"] == "%.1f"
    assert "color: red" in styled.proto.arrow_data.styler.styles              # the row picked by its index


def test_one_word_for_token_in_the_catalog():
    """Prose and headers say “token” as the seeds do; 词元 appears only where the glossary gives it as the
    translation (a header saying 词元 above prose saying token read as two different things)."""
    po = (ROOT / "attnkit" / "locale" / "zh_CN" / "LC_MESSAGES" / "attnkit.po").read_text(encoding="utf-8")
    strs = re.findall(r'^msgstr(?:\[\d\])? "(.*)"$', po, flags=re.M)
    assert sum("token" in s for s in strs) > 100
    assert [s for s in strs if "词元" in s] == ["Token（词元）"]
