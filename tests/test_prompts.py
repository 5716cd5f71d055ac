"""Hostile and broken input to attnkit.prompts: clear messages, valid parts kept, nothing silent."""
import json

import pytest

from attnkit import prompts as P


def test_empty_and_whitespace_prompts():
    for text in ("", "   \n\t ", None):
        with pytest.raises(P.PromptError, match="empty"):
            P.check_text(text)
    assert P.check_text(" x ") == " x "


def test_text_upload_keeps_unicode_exactly():
    text = "Emoji 🙂🚀, 中文注意力, עברית right-to-left, <script>alert(1)</script>"
    t = P.read_upload("a.txt", text.encode("utf-8"))
    assert P.prompts_from(t) == ([text], [])
    bom = P.read_upload("b.md", b"\xef\xbb\xbfhello")
    assert bom.rows == ["hello"]


def test_binary_file_named_txt():
    with pytest.raises(P.PromptError, match="binary"):
        P.read_upload("x.txt", bytes(range(256)) * 10)


def test_invalid_utf8_names_the_offset():
    with pytest.raises(P.PromptError, match="not valid UTF-8.*offset 6"):
        P.read_upload("x.txt", b"hello \xff\xfe world")


def test_five_megabyte_text_is_cut_with_a_warning():
    data = ("word " * (5 * 1024 * 1024 // 5)).encode()
    t = P.read_upload("big.txt", data)
    prompts, warnings = P.prompts_from(t)
    assert len(prompts[0]) == P.MAX_PROMPT_CHARS
    assert any("only the first" in w for w in warnings)


def test_upload_over_the_cap():
    with pytest.raises(P.PromptError, match=f"limit is {P.MAX_UPLOAD_MB} MB"):
        P.read_upload("huge.txt", b"a" * (P.MAX_UPLOAD_MB * 1024 * 1024 + 1))


def test_unknown_extension():
    with pytest.raises(P.PromptError, match="unsupported file type"):
        P.read_upload("model.bin", b"abc")


def test_csv_column_choice_and_missing_column():
    t = P.read_upload("p.csv", b"id,text\n1,first prompt\n2,\n3,third prompt\n")
    assert t.columns == ["id", "text"]
    prompts, warnings = P.prompts_from(t, "text")
    assert prompts == ["first prompt", "third prompt"]
    assert any("skipped 1 empty" in w for w in warnings)
    with pytest.raises(P.PromptError, match="no column 'prompt'.*id, text"):
        P.prompts_from(t, "prompt")


def test_jsonl_reports_malformed_lines_and_keeps_valid():
    lines = [json.dumps({"text": "one"}), "{not json", json.dumps("two"), "", "[1, 2]", json.dumps({"text": "three"})]
    t = P.read_upload("p.jsonl", "\n".join(lines).encode())
    prompts, warnings = P.prompts_from(t, "text")
    assert prompts == ["one", "two", "three"]
    assert any("skipped 2 malformed line(s)" in w and "2, 5" in w for w in warnings)


def test_ten_thousand_prompts_are_capped_and_said():
    data = "text\n" + "\n".join(f"prompt number {i}" for i in range(10_000))
    prompts, warnings = P.prompts_from(P.read_upload("many.csv", data.encode()), "text")
    assert len(prompts) == P.MAX_PROMPTS and prompts[-1] == f"prompt number {P.MAX_PROMPTS - 1}"
    assert any(f"{10_000 - P.MAX_PROMPTS:,} are left out" in w for w in warnings)


def test_truncate_and_windows():
    assert P.truncate(list(range(10)), 4) == ([0, 1, 2, 3], 6)
    assert P.truncate([1, 2], 4) == ([1, 2], 0)
    assert P.windows(list(range(9)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]   # a 1-token tail has nothing to attend
    assert P.windows(list(range(10)), 4)[-1] == [8, 9]


def test_upload_cap_matches_streamlit_config():
    import tomllib
    from pathlib import Path

    cfg = tomllib.loads((Path(__file__).parents[1] / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["maxUploadSize"] == P.MAX_UPLOAD_MB


# ----------------------------------------------------------------------------- prompt sets (read_pairs)

_PAIR = {"clean": "a b", "corrupted": "a c", "answer": " b", "distractor": " c"}


@pytest.mark.parametrize("encoding, bom", [("utf-8", b""), ("utf-8", b"\xef\xbb\xbf"), ("utf-16", b"")])
def test_read_pairs_csv_and_jsonl_in_every_encoding_give_the_same_rows(encoding, bom):
    """CSV (columns in any case/order, 'corrupt' for 'corrupted') and JSONL read to the same rows."""
    csv_text = "Distractor, Answer ,clean,corrupt\n c, b,a b,a c\n"
    jsonl_text = json.dumps(_PAIR, ensure_ascii=False) + "\n\n" + json.dumps(_PAIR | {"clean": "中文 b"}) + "\n"
    got_csv = P.read_pairs("s.csv", bom + csv_text.encode(encoding))
    got_jsonl = P.read_pairs("s.jsonl", bom + jsonl_text.encode(encoding))
    assert [r.clean for r in got_jsonl.rows] == ["a b", "中文 b"] and not got_jsonl.problems
    assert [r.where for r in got_jsonl.rows] == ["line 1", "line 3"]
    assert got_csv.rows[0] == P.PairRow(**_PAIR, where="row 1") and not got_csv.problems


def test_read_pairs_names_the_row_and_the_missing_fields():
    lines = [json.dumps(_PAIR), "{not json", json.dumps({"clean": "x", "answer": 3}), "[1, 2]"]
    got = P.read_pairs("p.jsonl", "\n".join(lines).encode())
    assert len(got.rows) == 1 and got.problems[0].startswith("line 2: not JSON")
    assert got.problems[1] == ("line 3: needs the text fields clean, corrupted, answer, distractor "
                               "(missing or not text: corrupted, answer, distractor)")
    assert got.problems[2].startswith("line 4: needs") and len(got.problems) == 3
    with pytest.raises(P.PromptError, match=r"no usable pairs \(line 1: not JSON"):
        P.read_pairs("p.jsonl", b"{oops\n")
    with pytest.raises(P.PromptError, match=r"no column\(s\) answer, distractor; its columns are: clean, corrupted"):
        P.read_pairs("p.csv", b"clean,corrupted\nx,y\n")


def test_read_pairs_states_its_limit():
    data = "\n".join(json.dumps(_PAIR) for _ in range(5)).encode()
    got = P.read_pairs("p.jsonl", data, limit=3)
    assert len(got.rows) == 3 and got.notes == ["p.jsonl has more than 3 pairs; the first 3 are used."]
    assert len(P.read_pairs("p.jsonl", data).rows) == 5
