"""The message catalog: the committed .mo is the .po compiled, every marked string has a zh translation
with the same format fields, the language is per context (sessions in threads do not mix), the CLI takes
--lang, and the untranslated-English finder used by the zh page tests finds what it should."""
import gettext
import json
import string
import threading

import pytest

from attnkit import i18n
from attnkit.cli import main as cli_main
from attnkit.dev import locale as L
from attnkit.i18n import join, language, msg, nmsg, nt, t
from untranslated import untranslated


def _fields(text: str) -> set:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}


@pytest.fixture(scope="module")
def zh_catalog():
    return L.read_po(L.po_path("zh").read_text(encoding="utf-8"))


def test_committed_mo_is_the_po_compiled(zh_catalog):
    assert L.mo_path("zh").read_bytes() == L.mo_bytes(zh_catalog), "run: python -m attnkit.dev.locale compile"


def test_every_marked_string_has_a_zh_translation():
    assert L.missing("zh") == [], "run: python -m attnkit.dev.locale update, then translate the empty entries"


def test_translations_keep_the_format_fields_and_read_back_through_stdlib_gettext(zh_catalog):
    mo = gettext.GNUTranslations(open(L.mo_path("zh"), "rb"))
    entries = {k: v for k, v in zh_catalog.items() if k and isinstance(k, str)}
    assert len(entries) >= 90
    for en, zh in entries.items():
        assert _fields(en) == _fields(zh), en
        assert mo.gettext(en) == zh
        assert any("\u4e00" <= c <= "\u9fff" for c in zh) or zh == en, en      # really translated


def test_po_reader_and_writer_round_trip(zh_catalog, tmp_path):
    text = L.po_text(zh_catalog, {}, "zh")
    assert L.read_po(text) == zh_catalog
    tricky = {'say "hi"\\n': '说 "嗨"\\n', ("{n} head", "{n} heads"): ["{n} 个头"]}
    back = L.read_po(L.po_text(tricky, {}, "zh"))
    assert "Plural-Forms: nplurals=1; plural=0;" in back.pop("") and back == tricky
    mo = tmp_path / "x.mo"
    mo.write_bytes(L.mo_bytes(tricky))
    cat = gettext.GNUTranslations(open(mo, "rb"))
    assert cat.gettext('say "hi"\\n') == '说 "嗨"\\n' and cat.ngettext("{n} head", "{n} heads", 5) == "{n} 个头"


def test_extract_finds_every_marker_with_literal_ids(tmp_path):
    (tmp_path / "attnkit").mkdir()
    (tmp_path / "attnkit" / "m.py").write_text(
        'a = msg("one {x}", x=1)\nb = t("two")\nc = nt("{n} head", "{n} heads", 3)\nd = ui.t("three")\n'
        'e = msg(variable)\nf = nmsg("a", "b", 2)\n', encoding="utf-8")
    found = L.extract(tmp_path)
    assert set(found) == {("one {x}",), ("two",), ("{n} head", "{n} heads"), ("three",), ("a", "b")}
    assert found[("two",)] == ["attnkit/m.py:2"]


def test_message_is_english_text_and_renders_in_the_context_language():
    m = msg("Loss change {effect}.", effect=msg("{lo} … {hi} nats/token", lo="+0.1", hi="+0.2"))
    assert m == "Loss change +0.1 … +0.2 nats/token." and json.loads(json.dumps([m])) == [m]
    with language("zh"):
        assert str(m) == "损失变化 +0.1 … +0.2 奈特/token。" and f"{m}" == str(m)
        assert m.render("en") == "Loss change +0.1 … +0.2 nats/token."
        assert str(join(msg("yes"), "; ", msg("no"))) == "是；否"        # punctuation joined in code: Chinese marks
        assert t("supported") == "成立" and nt("{n} tokens", "{n} tokens", 3) == "3 tokens"   # unknown id: English
    assert str(m) == "Loss change +0.1 … +0.2 nats/token." and i18n.current() == "en"
    assert str(nmsg("{n} head", "{n} heads", 1)) == "1 head" and str(nmsg("{n} head", "{n} heads", 2)) == "2 heads"


def test_punctuation_joined_in_code_follows_the_language():
    """Issue 44: verdicts ended in "; " and "." inside Chinese. Separators and punctuation-only parts of a join are
    written as the language writes them: full-width marks and no spaces in Chinese, nothing doubled after a
    sentence that has ended; English unchanged."""
    verdict = join(msg("Loss change {effect}.", effect="+4.88"), " ",
                   join(msg("yes"), msg("no"), msg("not measurable"), sep="; "), ".")
    assert verdict.render("en") == "Loss change +4.88. yes; no; not measurable."
    assert verdict.render("zh") == "损失变化 +4.88。是；否；无法测量。"
    assert join(msg("yes"), msg("no"), sep=", ").render("zh") == "是，否"
    assert join("L3H0", " ", msg("yes")).render("zh") == "L3H0 是"          # a space after Latin text stays
    assert join(msg("Loss change {effect}.", effect="+1"), ".").render("zh") == "损失变化 +1。"   # not "。."
    with language("zh"):
        assert i18n.punctuation("; ") == "；" and i18n.punctuation(" ", "是") == "" and i18n.punctuation(" – ") == " – "
    assert i18n.punctuation("; ") == "; "


def test_language_is_per_context_not_per_process():
    """Streamlit runs each session's script in its own thread: two sessions at once keep their languages."""
    seen, ready = {}, threading.Barrier(2)

    def session(lang):
        i18n.set_language(lang)
        ready.wait()
        seen[lang] = str(i18n.status_label("not supported"))

    threads = [threading.Thread(target=session, args=(lang,)) for lang in ("en", "zh")]
    [th.start() for th in threads]
    [th.join() for th in threads]
    assert seen == {"en": "not supported", "zh": "不成立"} and i18n.current() == "en"


@pytest.mark.parametrize("text,code", [("zh", "zh"), ("zh-CN", "zh"), ("简体中文", "zh"), ("EN", "en"), ("", "en"),
                                       (None, "en")])
def test_parse_language(text, code):
    assert i18n.parse_language(text) == code


def test_cli_lang_is_checked_first_and_applies_to_the_call(capsys, monkeypatch):
    assert cli_main(["--lang", "fr", "heads"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown language 'fr'" in err and "Traceback" not in err
    assert cli_main(["--lang"]) == 2 and "--lang needs a value" in capsys.readouterr().err
    monkeypatch.setenv("ATTNKIT_LANG", "xx")
    assert cli_main(["--help"]) == 2
    monkeypatch.setenv("ATTNKIT_LANG", "zh")
    assert cli_main(["--help"]) == 0 and i18n.current() == "en"        # the call's language does not leak


def test_cli_ablate_prints_the_verdict_in_chinese(odd_dir, tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text("The animal didn't cross the street because it was too tired.", encoding="utf-8")
    assert cli_main(["ablate", "--model", str(odd_dir), "--text-file", str(f), "--intervention", "wk=wq",
                     "--lang=zh"]) == 0
    out = capsys.readouterr().out
    verdict = next(line for line in out.splitlines() if line.startswith("  verdict:"))
    assert "损失变化" in verdict and "奈特/token" in verdict
    note = next(line for line in out.splitlines() if line.startswith("  note:"))
    assert "训练" in note                                   # the trained-with caveat, in Chinese


# ----------------------------------------------------------------------------- the untranslated finder

@pytest.mark.parametrize("text", [
    "L3H0 的注意力得分为 0.42，attnkit-tiny-zh 把猫坐在垫子上切成 6 个 token。",
    "softmax(QKᵀ/√d + M)·V，W_K = W_Q，d_head = 64，KV 缓存，GPT-2 的 1,024 个位置。",
    "模型 gpt2/medium 与 --window 512；`attnkit heads` 命令。",
    "注意力熵 −Σ p log p 的单位是奈特（nats）。",
])
def test_finder_allows_identifiers_formulas_numbers_and_single_words(text):
    assert untranslated(text) == []


@pytest.mark.parametrize("text,found", [
    ("损失变化 +0.01。What would settle it: a longer text.", ["What would settle it", "a longer text"]),
    ("Loss change", ["Loss change"]),
    ("第 3 层 Next-token loss 的结果", ["Next-token loss"]),
    ("按钮：Run the sweep", ["Run the sweep"]),
])
def test_finder_reports_english_phrases(text, found):
    assert untranslated(text) == found


def test_finder_allows_token_pieces_and_model_output_given_to_it():
    assert untranslated("模型预测下一个 token：the cat sat", allow=["the cat sat"]) == []
    assert untranslated(["模型预测：the cat sat", "另一行：the cat sat"]) == ["the cat sat"]   # once each


# ----------------------------------------------------------------------------- the session's language (app)

def test_choose_prefers_the_session_then_the_link():
    from attnkit.app.language import choose

    assert choose("zh", None) == ("zh", None) and choose("zh", "en") == ("en", None)
    assert choose(None, None) == ("en", None)
    lang, notice = choose("fr", None)
    assert lang == "en" and "fr" in notice


def _page():
    import streamlit as st

    from attnkit.app import language
    from attnkit.i18n import status_label

    language.apply()
    language.switch(st)
    st.write(str(status_label("not supported")))


def test_a_session_takes_its_language_from_the_link_and_the_switch():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_page)
    at.query_params["lang"] = "zh"
    at.run()
    assert not at.exception and at.markdown[0].value == "不成立"
    at.radio(key="ak_lang").set_value("en").run()
    assert at.markdown[0].value == "not supported"
    other = AppTest.from_function(_page).run()                # another session, no link: English
    assert other.markdown[0].value == "not supported"
