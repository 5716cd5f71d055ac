"""Issue 44, item 7: `calibrate --model FOLDER` scores every method on a planted model of one's own (here one the tests
build, never shipped: tests/helpers.py's make_planted_negative), a malformed CIRCUIT.json is refused in one line
before any work, and discovery's recall counts what the stated circuit needs: the edges of a negative
(suppressing) head, marked ``"kind": "negative"``, are not misses when discovery reaches its target without them."""
from __future__ import annotations

import json
import shutil

import pytest

from attnkit import calibration as cal
from attnkit.cli import main
from attnkit.loading import load
from helpers import NEGATIVE_CIRCUIT, make_planted_negative


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_planted_negative(tmp_path_factory.mktemp("own") / "planted-negative")


@pytest.fixture(scope="module")
def ctx(folder):
    w = load(str(folder), "cpu").weights
    circuit = cal.read_circuit(folder, w.config)
    return cal.Context(folder.name, w, circuit, cal.make_pairs(circuit, 2))


def test_the_reader_keeps_each_edges_kind(ctx):
    c = ctx.circuit
    assert len(c.edges) == 9 and len(c.required) == 5 and len(c.optional) == 4
    assert c.kind(("L1H1", "logits")) == "negative" and c.kind(("L1H0", "logits")) == "required"
    assert {s for s, r in c.optional} | {r for s, r in c.optional} >= {"L1H1", "L1H1.k"}


def test_the_negative_head_suppresses_and_its_edges_are_not_needed(ctx):
    """The construction is what CIRCUIT.json says: with the negative head's edges ablated too (only the required
    ones kept) the logit difference rises above the clean one; with every stated edge it is ≈ the clean one."""
    rows = {str(r.metric): r for r in cal.m_stated_circuit(ctx)}
    assert rows["faithfulness of the stated edges alone"].value == pytest.approx(1.0, abs=0.1)
    alone = rows["faithfulness of the required edges alone"]
    assert alone.value > 1.2 and alone.verdict.startswith("pass")


def test_discovery_recall_counts_the_required_edges(ctx):
    """Discovery stops once 80 % is reached — without the negative head's inputs. Counted over every stated edge
    (the old recall) that is a miss; over the required edges it is complete, and the verdict says what was not
    counted."""
    rec, prec, faith = cal.m_discovery(ctx)
    found = cal.discover(ctx.weights, ctx.pairs, target=0.8)
    everything = cal.compare_circuits(list(ctx.circuit.edges), found.edges)        # all edges taken as required
    needed = cal.compare_circuits(ctx.circuit, found.edges)
    assert everything["recall"] < 1 and set(everything["missed"]) <= set(ctx.circuit.optional)
    assert needed["recall"] == 1.0 and needed["missed"] == [] and set(needed["not_needed"]) == set(everything["missed"])
    assert rec.value == 1.0 and rec.verdict.startswith("pass: 5 of the 5 required edges found; missed: none; "
                                                       "not counted: 4 optional or negative edge(s)")
    assert prec.value == needed["precision"] and faith.value > 0.8


def test_calibrate_model_folder_scores_every_method_on_it(folder, tmp_path, capsys, monkeypatch):
    """The command itself on the folder (two methods, one pair: seconds; the methods are the library's, tested
    above and in test_calibration.py)."""
    monkeypatch.setattr(cal, "METHODS", [m for m in cal.METHODS if m[0] in ("stated circuit", "discovery")])
    out = tmp_path / "card.json"
    assert main(["calibrate", "--model", str(folder), "--pairs", "1", "--json", str(out)]) == 0
    (model,) = json.loads(out.read_text(encoding="utf-8"))["models"]
    assert model["name"] == "planted-negative" and model["folder"] == str(folder.resolve())
    rows = {r["metric"]: r for r in model["methods"]}
    assert rows["recall of the stated edges (target 80 %)"]["value"] == 1.0
    assert "faithfulness of the required edges alone" in rows
    assert "planted-negative" in capsys.readouterr().out


def test_calibrate_refuses_an_output_inside_the_folder_it_reads(folder, capsys):
    assert main(["calibrate", "--model", str(folder), "--json", str(folder / "CIRCUIT.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is inside the --model folder" in err and "\n" not in err


def _broken(folder, tmp_path, change) -> str:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    data = json.loads(json.dumps(NEGATIVE_CIRCUIT))
    text = change(data)
    (copy / "CIRCUIT.json").write_text(text if isinstance(text, str) else json.dumps(data), encoding="utf-8")
    return str(copy)


@pytest.mark.parametrize("change,says", [
    (lambda d: d["edges"][5].update(kind="sometimes"), 'edges[5].kind must be one of required, optional, negative, '
                                                       'got "sometimes"'),
    (lambda d: [e.update(kind="optional") for e in d["edges"]], "at least one edge must be required"),
    (lambda d: d.update(edges=["L0H0 -> L1H0.k"]), 'edges[0] must be an object with "sender" and "receiver"'),
    (lambda d: d.update(heads=["L0H0", "L7H0"], roles={}), "names L7H0, which this model lacks"),
    (lambda d: d["edges"][0].update(receiver="L1H0.x"), "edges[0].receiver must be L{l}H{h}.q/.k/.v, MLP{l} or logits"),
    (lambda d: d.update(vocab=4000), "vocab = 4000 is larger than the model's vocabulary"),
    (lambda d: '{"heads": ["L0H0"], "edges": [', "is not valid JSON"),
])
def test_a_malformed_circuit_is_one_line_and_exit_2_before_any_work(folder, tmp_path, capsys, monkeypatch, change,
                                                                      says):
    ran = []
    monkeypatch.setattr(cal, "calibrate_model", lambda *a, **k: ran.append(a))
    assert main(["calibrate", "--model", _broken(folder, tmp_path, change)]) == 2
    err = capsys.readouterr().err.strip()
    assert not ran and "\n" not in err and "Traceback" not in err and says in err, err


def test_a_folder_without_a_circuit_or_not_a_folder_is_refused(folder, tmp_path, capsys):
    assert main(["calibrate", "--model", str(tmp_path)]) == 2
    assert main(["calibrate", "--model", str(folder / "config.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "CIRCUIT.json not found" in err[0] and "not a folder" in err[1]
