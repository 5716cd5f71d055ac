"""Issue 44, item 3: a pair the model does not solve claims no circuit share anywhere. Circuits reported a discovered
circuit at 80.5 % on attnkit-tiny's "kernel source / module binary" swap, which the app itself marked "(not
solved)" (its corrupted run still prefers the answer, LD +0.44). One definition of solved
(:func:`attnkit.patching.solves`) now decides both the mark and whether discovery reports a share: the library,
the Circuits page, the `circuit` CLI and the notebook API say "not solved: no circuit share" instead of a number."""
from __future__ import annotations

import json
import math

import pytest

from attnkit import examples as EX
from attnkit import patching as P
from attnkit.circuits import discover as DI
from attnkit.cli import main
from attnkit.loading import SHIPPED, load
from attnkit.notebook.effects import Circuit as NotebookCircuit
from helpers import apptest

UNSOLVED = EX.EXAMPLES["A repeated phrase, match swapped (kernel / module)"]
SOLVED = EX.EXAMPLES["A repeated phrase"]


@pytest.fixture(scope="module")
def tiny():
    return load("attnkit-tiny", "cpu")


def _pair(model, ex):
    return P.make_pair(model, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])


@pytest.mark.parametrize("clean,corrupt,solved", [(5.05, 0.44, False), (5.0, -0.1, True), (0.6, -0.3, False),
                                                   (-1.0, -3.0, False), (2.0, 0.0, True)])
def test_one_definition_of_solved(clean, corrupt, solved):
    assert P.solves(clean, corrupt) is solved
    assert EX.Check("x", clean, corrupt).solved is solved


@pytest.fixture(scope="module")
def mixed(tiny):
    """Discovery on a set of a solved pair and the unsolved swap (the second pair)."""
    return DI.discover(tiny.weights, [_pair(tiny, SOLVED), _pair(tiny, UNSOLVED)], 0.8, points=8, refine=0)


def test_discovery_on_an_unsolved_pair_claims_no_share(tiny, mixed):
    pr = _pair(tiny, UNSOLVED)
    check = EX.check_pair(tiny.weights, pr)
    assert not check.solved and check.corrupt_ld > 0                        # the page's "(not solved)" mark
    assert UNSOLVED["clean"] == "Install the kernel source and the module binary. Install the kernel"
    assert mixed.unsolved == [2] and not mixed.solved and not mixed.reached
    assert math.isnan(mixed.share) and math.isnan(mixed.recovered)
    assert all(math.isnan(f) for f in mixed.faithfulness) and mixed.size == 0 and mixed.heads == []
    assert len(mixed.ranked) == 1519                                          # the edges are still ranked
    assert mixed.share_text() == "not solved: no circuit share"
    assert any(str(n).startswith("not solved: no circuit share: the model does not solve pair(s) 2") for n in mixed.notes)
    js = json.loads(json.dumps(mixed.to_json()))
    assert js["faithfulness"] is None and js["recovered"] is None and js["solved"] is False
    assert js["unsolved_pairs"] == [2] and js["share_text"] == "not solved: no circuit share"


def test_the_notebook_api_says_not_solved_instead_of_a_number(mixed):
    nb = NotebookCircuit(mixed, 4, 8)
    assert nb.summary().startswith("not solved: no circuit share") and "%" not in nb.summary()
    with pytest.raises(ValueError, match="not solved: no circuit share"):
        nb.chart("faithfulness")
    zh = NotebookCircuit(mixed, 4, 8, lang="zh")
    assert "not solved" not in zh.summary() and "%" not in zh.summary()


def test_the_circuit_cli_prints_no_share_on_an_unsolved_pair(tmp_path, capsys):
    out = tmp_path / "c.json"
    rc = main(["circuit", "--model", "attnkit-tiny", "--clean", UNSOLVED["clean"], "--corrupt", UNSOLVED["corrupt"],
               "--answer", UNSOLVED["answer"], "--distractor", UNSOLVED["distractor"], "--top", "3", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("circuit:"))
    assert "not solved: no circuit share" in line and "%" not in line
    assert "faithfulness curve" not in text
    got = json.loads(out.read_text(encoding="utf-8"))["circuit"]
    assert got["faithfulness"] is None and got["size"] == 0 and got["unsolved_pairs"] == [1]


def test_circuits_page_shows_no_share_on_an_unsolved_pair():
    """On a planted model (quick) with a pair it does not solve: the corrupted prompt changes only the first token,
    which the induction answer does not depend on, so both runs prefer the answer."""
    name = "planted-induction"
    ex = EX.texts(next(iter(EX.MODEL_EXAMPLES[name])))
    words = ex["clean"].split()
    spare = next(f"t{i}" for i in range(40) if f"t{i}" not in words)
    corrupt = " ".join([spare] + words[1:])
    at = apptest("circuits", timeout=600, ak_model=name, ci_example="Your own", ci_clean=ex["clean"],
                 ci_corrupt=corrupt, ci_answer=ex["answer"], ci_distractor=ex["distractor"]).run()
    assert not at.exception, at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["LD(circuit) / LD(clean)"] == "not solved: no circuit share"
    assert "Recall" not in shown and "Stated edges found" not in shown       # nothing claimed, nothing compared
    assert any("corrupted run also prefers the answer" in w.value for w in at.warning)
    assert any(c.value.startswith("not solved: no circuit share: the model does not solve pair(s) 1") for c in at.caption)
    assert SHIPPED[name].is_dir()
