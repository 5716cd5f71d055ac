"""Classes 3 and 4 of the fourth hostile round, on the command line: every numeric argument has a stated
range checked while parsing (one line, exit 2, no model loaded); misread or silently ignored input is refused."""
from __future__ import annotations

import json

import pytest

from attnkit.cli import main

PAIR = ["--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b"]
HUGE = str(2**70)


@pytest.fixture
def no_model(monkeypatch):
    from attnkit import loading

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))


@pytest.mark.parametrize("argv, msg", [
    (["compose", "--seed", HUGE], "--seed: must be from 0 to 4,294,967,295"),
    (["verify", "--seed", HUGE], "--seed: must be from 0"),
    (["compose", "--samples", str(10**8)], "--samples: must be from 10 to 10,000"),
    (["compose", "--top", "0"], "--top"),
    (["verify", "--tokens", str(10**9)], "--tokens: must be from 1 to 1,000,000"),
    (["verify", "--generate", str(10**6)], "--generate: must be from 0 to 100,000"),
    (["verify", "--seed", "３"], "ASCII digits"),                  # full-width digit: Python's int() reads it
    (["circuit", *PAIR, "--steps", str(10**6)], "--steps: must be from 1 to 256"),
    (["circuit", *PAIR, "--position", HUGE], "--position"),
    (["circuit", *PAIR, "--receiver", "L３H0.k"], "is not a node"),
    (["circuit", *PAIR, "--receiver", "L0H0.k", "--more-corrupt", "c"], "--more-corrupt: path patching"),
    (["bench", "--quick", "--no-memory", "--long", "abc"], "--long: expected a whole number"),
    (["bench", "--quick", "--no-memory", "--lengths", "5000"], "beyond the --quick model's context of 64"),
    (["bench", "--quick", "--no-memory", "--lengths", "1,8"], "--lengths: must be from 2"),
    (["bench", "--quick", "--repeats", "0"], "--repeats"),
    (["bench", "--family", "smollm2-135m", "--T", "1"], "--T"),
    (["heads", "--top", "0"], "--top"),
    (["train-default", "--seed", "-1"], "--seed"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--window", "１２"], "--window"),
    (["ablate", "--text-file", "/etc/hostname", "--intervention", "zero-head:L３H0"], "a head is written L{layer}H{head}"),
])
def test_numbers_out_of_range_exit_2_in_one_line(argv, msg, no_model, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "Traceback" not in err[0], err


def _pairs(tmp_path, data: bytes):
    f = tmp_path / "pairs.jsonl"
    f.write_bytes(data)
    return f


ROW = {"clean": "x y", "corrupt": "x z", "answer": "a", "distractor": "b"}


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_pairs_file_with_a_byte_order_mark_is_read(encoding, tmp_path):
    from attnkit.cli.circuit import pairs_file

    f = _pairs(tmp_path, (json.dumps(ROW, ensure_ascii=False) + "\n").encode(encoding))
    got = pairs_file(str(f))
    assert [(r.clean, r.corrupted, r.answer, r.distractor) for r in got.rows] == [("x y", "x z", "a", "b")]
    assert not got.problems and not got.notes


def test_pairs_file_takes_corrupted_or_corrupt_and_says_the_cap(tmp_path):
    """The one prompt-set reader: the field is ``corrupted`` (``corrupt`` accepted); more than
    ``prompts.MAX_PAIRS`` (100) pairs keeps the first 100 and says so."""
    from attnkit import prompts
    from attnkit.cli.circuit import pairs_file

    row = {**{k: v for k, v in ROW.items() if k != "corrupt"}, "corrupted": "x w"}
    assert pairs_file(str(_pairs(tmp_path, json.dumps(row).encode()))).rows[0].corrupted == "x w"
    many = pairs_file(str(_pairs(tmp_path, "\n".join([json.dumps(ROW)] * 1001).encode())))
    assert prompts.MAX_PAIRS == 100 and len(many.rows) == 100
    assert any("more than 100 pairs; the first 100 are used" in n for n in many.notes), many.notes


@pytest.mark.parametrize("text, msg", [
    ('{"clean": "a", "clean": "b", "corrupt": "c", "answer": "d", "distractor": "e"}', "'clean' appears twice"),
])
def test_pairs_file_misreadings_are_refused(text, msg, tmp_path, no_model, capsys):
    f = _pairs(tmp_path, text.encode())
    assert main(["circuit", *PAIR, "--pairs", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_json_naming_an_input_file_is_refused(tmp_path, no_model, capsys):
    f = _pairs(tmp_path, json.dumps(ROW).encode())
    before = f.read_bytes()
    assert main(["circuit", *PAIR, "--pairs", str(f), "--json", str(f)]) == 2
    assert "is the --pairs file" in capsys.readouterr().err and f.read_bytes() == before
    t = tmp_path / "t.txt"
    t.write_text("some text")
    assert main(["entropy", "--text-file", str(t), "--json", str(t)]) == 2
    assert "is the --text-file file" in capsys.readouterr().err and t.read_text() == "some text"


def test_path_patching_refuses_discovery_only_options(tmp_path, no_model, capsys):
    f = _pairs(tmp_path, json.dumps(ROW).encode())
    assert main(["circuit", *PAIR, "--receiver", "L1H0.k", "--pairs", str(f)]) == 2
    assert "--pairs: path patching (--receiver) runs on the one" in capsys.readouterr().err


def test_verify_says_every_cut_and_survives_a_full_disk(capsys):
    rc = main(["verify", "--model", "attnkit-tiny", "--tokens", "100000", "--generate", "5", "--json", "/dev/full"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "--tokens 100,000 is longer than the context" in err
    assert "--generate 5: the context leaves room for 0 new tokens" in err
    assert "cannot write /dev/full" in err and "Traceback" not in err
