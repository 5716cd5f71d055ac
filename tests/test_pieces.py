"""Byte-level pieces merged into characters: the grouping, the token view's layout and tooltips, labels."""
from __future__ import annotations

import numpy as np
import pytest

from attnkit import pieces as PC
from attnkit.charts import tokens as tk

BED = "床".encode()                 # e5 ba 8a
SMILE = "🙂".encode()               # f0 9f 99 82


def test_groups_join_split_characters_and_nothing_else():
    pieces = [b"a", b" ", SMILE[:1], SMILE[1:2], SMILE[2:3], SMILE[3:], b" " + BED[:2], BED[2:], b"x"]
    gs = PC.char_groups(pieces)
    assert [(g.start, g.end, g.text) for g in gs] == [
        (0, 1, "a"), (1, 2, " "), (2, 6, "🙂"), (6, 8, " 床"), (8, 9, "x")]
    assert PC.token_texts(pieces)[2:8] == ["🙂[1/4]", "🙂[2/4]", "🙂[3/4]", "🙂[4/4]", " 床[1/2]", " 床[2/2]"]


def test_bytes_that_never_decode_stay_single_escaped_tokens():
    pieces = [b"\xff", b"ok", BED[:2]]                    # an invalid byte; a character cut off at the end
    gs = PC.char_groups(pieces)
    assert [(g.start, g.end, g.text) for g in gs] == [(0, 1, "\\xff"), (1, 2, "ok"), (2, 3, "\\xe5\\xba")]
    # a split character longer than max_group is not joined
    assert [g.size for g in PC.char_groups([SMILE[:1], SMILE[1:2], SMILE[2:3], SMILE[3:]], max_group=3)] == [1] * 4


def test_shipped_tokenizer_splits_bed_and_smile_and_they_are_rejoined():
    from attnkit.loading import load

    m = load("attnkit-tiny", "cpu")
    for ch in ("床", "🙂"):
        ids = m.encode(ch)
        assert len(ids) >= 2, (ch, ids)                   # the case the merge exists for
        assert [g.text for g in m.token_groups(ids)] == [ch]
        assert m.token_texts(ids)[0] == f"{ch}[1/{len(ids)}]"


def test_token_view_draws_a_split_character_once_across_its_boxes():
    strs = ["a", " \\xe5\\xba", "\\x8a", " b"]
    groups = PC.char_groups([b"a", b" " + BED[:2], BED[2:], b" b"])
    lay = tk.wrap_tokens(strs, budget=20, groups=groups)
    assert list(lay["text"]) == ["a", "床", "", "b"]
    bed = lay[lay["pos"].isin([1, 2])]
    assert list(bed["x0"]) == [2.0, 3.0] and list(bed["x1"]) == [3.0, 4.0]   # 床 is 2 columns: one per piece
    assert list(lay["group"]) == ["", "1–2", "1–2", ""]
    assert lay.loc[3, "x0"] == 5                           # the space after 床, then b
    A = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    spec = tk.token_chart(A, strs, groups=groups, ids=[10, 11, 12, 13]).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["token"] for r in rows] == ["0: a", "1: 床", "2: 床", "3: b"]
    assert rows[1]["pieces"] == rows[2]["pieces"] == "tokens 1–2: ␣\\xe5\\xba (id 11) + \\x8a (id 12)"
    tips = [t["field"] for t in spec["layer"][0]["encoding"]["tooltip"]]
    assert "pieces" in tips
    with pytest.raises(ValueError, match="cover the tokens"):
        tk.wrap_tokens(strs, groups=groups[:2])


@pytest.mark.parametrize("scale,vega,words", [("linear", "linear", "linear"), ("sqrt", "sqrt", "square root"),
                                              ("log", "log", "log")])
def test_token_view_scale_and_caption_follow_the_control(scale, vega, words):
    A = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    spec = tk.token_chart(A, ["a", "b", "c"], scale=scale).to_dict()
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["scale"]["type"] == vega
    cap = tk.scale_caption(scale)
    assert words in cap and all(w not in cap for w in {"linear", "square root", "log"} - {words})


# ----------------------------------------------------------------------------- words by character spans

def test_char_spans_cover_the_decoded_text_and_split_characters_share_one():
    pieces = [b"a", b" " + BED[:2], BED[2:], b"cd"]
    text, spans = PC.char_spans(pieces)
    assert text == "a 床cd"
    assert spans == [(0, 1), (1, 3), (1, 3), (3, 5)]


def test_a_word_is_found_by_character_spans_even_across_token_edges():
    pieces = [b"ab", b"cd", b"e"]
    assert PC.word_occurrences(pieces, "bc") == [[0, 1]]        # straddles two tokens: both hold part of it
    assert PC.word_positions(pieces, "bcde") == [0, 1, 2]
    assert PC.word_positions(pieces, "x") == [] and PC.word_positions(pieces, "") == []
    # a token with its leading space, and a word one token plus a piece of the next
    cats = [b"The", b" cat", b"s"]
    assert PC.word_positions(cats, "cat") == [1] and PC.word_positions(cats, "cats") == [1, 2]
    # a token string that merely contains the word's text is not the word: "天" in 今天 is not part of 昨天
    days = ["我".encode(), "昨".encode(), "天".encode(), "，".encode(), "今".encode(), "天".encode()]
    assert PC.word_positions(days, "昨天") == [1, 2]
    assert PC.word_occurrences(days, "天") == [[2], [5]]
    # a character split over byte pieces: every piece holds part of it
    assert PC.word_positions([b"x", BED[:2], BED[2:]], "床") == [1, 2]


def test_the_seeds_sentence_on_the_chinese_model_counts_no_foreign_token():
    from attnkit.loading import CHINESE_MODEL, SHIPPED, load

    if not (SHIPPED[CHINESE_MODEL] / "config.json").is_file():
        pytest.skip(f"{CHINESE_MODEL} is not installed")
    m = load(CHINESE_MODEL, "cpu")
    ids = m.encode("我昨天在北京吃了烤鸭，今天在上海吃了")
    pieces = m.token_bytes(ids)
    assert "".join(m.token_texts([ids[13]])) == "天"           # 今天's 天, a token of its own
    got = {w: PC.word_positions(pieces, w) for w in ("昨天", "北京", "上海")}
    assert 13 not in got["昨天"]
    for word, where in got.items():                              # the tokens found spell the word, nothing more
        assert "".join(g.text for g in m.token_groups([ids[i] for i in where])) == word
