"""Uploaded and pasted prompts: deep JSON, UTF-16/32, CSV without a header, lone surrogates become
messages naming the file and line; a paste longer than the limit is cut with a notice.
"""
from __future__ import annotations

import pytest

from helpers import apptest


def test_deeply_nested_jsonl_line_is_named():
    from attnkit import prompts as P

    deep = "[" * 100_000 + "]" * 100_000
    data = "\n".join(['{"text": "first"}', deep, '"third"']).encode()
    t = P.read_upload("deep.jsonl", data)
    prompts, warnings = P.prompts_from(t, "text")
    assert prompts == ["first", "third"]
    assert any("deep.jsonl" in w and "skipped 1 malformed line(s)" in w and ": 2." in w for w in warnings)
    with pytest.raises(P.PromptError, match="only.jsonl has no valid JSON lines"):
        P.read_upload("only.jsonl", deep.encode())


def test_utf16_and_utf32_with_bom_are_decoded():
    from attnkit import prompts as P

    text = "Hello, 注意力 🙂"
    for enc in ("utf-16", "utf-16-be", "utf-32"):
        data = text.encode(enc)
        if enc == "utf-16-be":
            data = b"\xfe\xff" + data
        assert P.read_upload("u.txt", data).rows == [text], enc
    with pytest.raises(P.PromptError, match="u.txt starts with a UTF-16 byte-order mark"):
        P.read_upload("u.txt", b"\xff\xfe\x00\xd8")           # a lone surrogate in UTF-16


def test_csv_without_header_is_detected_and_the_user_can_say():
    from attnkit import prompts as P

    data = b"The animal didn't cross the street.\nAttention lets tokens look back.\nA third prompt here.\n"
    t = P.read_upload("p.csv", data)
    assert t.header is False and t.columns == ["column 1"]
    prompts, warnings = P.prompts_from(t, "column 1")
    assert prompts[0] == "The animal didn't cross the street." and len(prompts) == 3
    assert any("p.csv" in w and "looks like data" in w for w in warnings)
    t = P.read_upload("p.csv", data, header=True)             # the user says: it has a header
    assert t.columns == ["The animal didn't cross the street."] and len(t.rows) == 2
    t = P.read_upload("h.csv", b"text,id\nHello world this is long,1\nAnother one here,2\n")
    assert t.header is True and t.columns == ["text", "id"] and not t.warnings


def test_csv_errors_name_the_line(monkeypatch):
    import csv

    from attnkit import prompts as P

    class Broken:
        line_num = 7

        def __iter__(self):
            raise csv.Error("field larger than field limit")
    monkeypatch.setattr(P.csv, "reader", lambda *a, **k: Broken())
    with pytest.raises(P.PromptError, match=r"bad.csv, line 7: not a readable CSV file"):
        P.read_upload("bad.csv", b"text\nhello\n")


def test_any_parser_failure_names_the_file(monkeypatch):
    from attnkit import prompts as P

    def explode(*a, **k):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(P, "_read_jsonl", explode)
    with pytest.raises(P.PromptError, match=r"x.jsonl could not be read \(RecursionError"):
        P.read_upload("x.jsonl", b'"a"\n')


def test_lone_surrogate_is_a_message():
    from attnkit import prompts as P

    with pytest.raises(P.PromptError, match=r"unpaired surrogate \(U\+D83D\) at character 7"):
        P.check_text("hello \ud83d world")
    t = P.read_upload("s.jsonl", b'"fine"\n"\\ud83d alone"\n')
    prompts, warnings = P.prompts_from(t)
    assert prompts == ["fine"] and any(": 2." in w for w in warnings)


def test_lone_surrogate_in_the_prompt_box_is_shown(odd_dir):
    at = apptest("home", odd_dir, text="ok \ud83d then").run()
    assert not at.exception
    assert any("unpaired surrogate" in w.value and "U+D83D" in w.value for w in at.warning)
    assert at.text_area(key="ak_text").value == "ok \ufffd then"
    assert any("tokens (" in m.value for m in at.markdown)          # and the page runs on the repaired text


def test_cli_reports_a_deep_jsonl_without_traceback(tmp_path, capsys):
    from attnkit.cli.ablate import cli

    f = tmp_path / "deep.jsonl"
    f.write_text("[" * 50_000 + "]" * 50_000 + "\n")
    assert cli(["--model", "attnkit-tiny", "--text-file", str(f), "--intervention", "v=x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("attnkit ablate:") and "deep.jsonl" in err[-1]


def test_paste_longer_than_the_limit_is_cut_with_a_notice(odd_dir):
    from attnkit import prompts as P

    at = apptest("home", odd_dir, text="attention " * 25_000).run()     # 250,000 characters
    assert not at.exception
    box = at.text_area(key="ak_text")
    assert not box.max_chars                                # the browser would drop it silently
    assert any(f"Up to {P.MAX_PROMPT_CHARS:,} characters" in c.value for c in at.sidebar.caption)
    assert any("250,000 characters" in w.value and f"{P.MAX_PROMPT_CHARS:,}" in w.value for w in at.warning)
