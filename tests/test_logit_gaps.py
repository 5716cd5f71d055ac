"""Class 2 of the fourth hostile round: every normalisation by a logit-difference gap says what it did when
the gap is empty, small or negative; discovery claims no share on a pair that is not solved."""
from __future__ import annotations

import json

import numpy as np
import pytest

from attnkit import patching as P
from attnkit.circuits.discover import discover
from attnkit.circuits.path import path_map
from attnkit.cli import main

CLEAN = "Install the kernel source and the module binary. Install the kernel"
CORRUPT = "Install the module source and the kernel binary. Install the kernel"
BASE = ["circuit", "--model", "attnkit-tiny", "--clean", CLEAN, "--corrupt", CORRUPT]


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load("attnkit-tiny", "cpu")


def test_normalise_and_gap_note_on_hand_computed_gaps():
    assert P.normalise([1.0, 3.0, 2.0], 3.0, 1.0).tolist() == [0.0, 1.0, 0.5]      # (raw, clean_ld, corrupt_ld)
    assert np.isnan(P.normalise([1.0], 2.0, 2.0)).all() and "no gap" in P.gap_note(2.0, 2.0)
    assert P.normalise([3.0], 0.0, 1.0).tolist() == [-2.0] and "not solved" in P.gap_note(0.0, 1.0)
    assert "multiply noise by 20" in P.gap_note(1.05, 1.0)
    assert P.gap_note(3.0, 1.0) is None


def test_clean_ld_of_exactly_zero_is_said_not_a_zero_division(tmp_path, capsys):
    """A pair and its mirror (answer and distractor swapped): the mean clean logit difference is exactly 0."""
    f = tmp_path / "mirror.jsonl"
    f.write_text(json.dumps({"clean": CLEAN, "corrupt": CORRUPT, "answer": " binary", "distractor": " source"}))
    out = tmp_path / "c.json"
    rc = main(BASE + ["--answer", " source", "--distractor", " binary", "--pairs", str(f), "--steps", "1",
                      "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "not solved: no circuit share" in text and "reached" not in text
    c = json.loads(out.read_text())["circuit"]
    assert c["clean_logit_diff"] == 0 and c["reached"] is False and c["faithfulness"] is None and c["size"] == 0


def test_unsolved_pair_reports_no_share(tiny):
    """Clean and corrupted swapped: LD(corrupted) > LD(clean); discovery must not report a share above 100 %."""
    pr = P.make_pair(tiny, CORRUPT, CLEAN, " source", " binary")
    c = discover(tiny.weights, pr, 0.8, steps=1, mlps=False, points=6, refine=0)
    assert c.clean_ld < c.corrupt_ld
    assert not c.solved and not c.reached and np.isnan(c.share) and c.size == 0
    assert any("not solved" in n for n in c.notes)
    assert all(np.isnan(c.faithfulness))


def test_path_patching_says_a_negative_gap(tiny):
    pr = P.make_pair(tiny, CORRUPT, CLEAN, " source", " binary")
    res = path_map(tiny.weights, pr, "L3H0.k", senders=["L2H1"])
    assert res.clean_ld < res.corrupt_ld and any("runs backwards" in n for n in res.notes)
    assert np.allclose(res.normalised, (res.raw - res.corrupt_ld) / (res.clean_ld - res.corrupt_ld))


def test_activation_patching_says_an_empty_gap(tiny):
    pr = P.make_pair(tiny, CLEAN, CLEAN, " source", " binary")
    res = P.patch(tiny.weights, pr, "resid")
    assert np.isnan(res.normalised).all() and any("no gap" in n for n in res.notes)
