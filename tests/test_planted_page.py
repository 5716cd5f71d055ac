"""Planted-circuit models in the dashboard: their card and stated circuit on Home, their own example (calibrate's
pair for the stated task) on the pair pages, and on Circuits the stated circuit beside the discovered one with
the numbers of :func:`attnkit.calibration.compare_circuits` on the library's own discovery."""
from __future__ import annotations

import pytest

from attnkit import calibration as cal
from attnkit import examples as EX
from attnkit.charts import circuits as circuit_charts
from attnkit.circuits import discover
from attnkit.loading import SHIPPED, load
from attnkit.patching import make_pair
from helpers import apptest

INDUCTION = "planted-induction"
EXAMPLE = "Repeated random tokens (planted induction)"


@pytest.fixture(scope="module")
def planted():
    return load(INDUCTION, "cpu")


def test_read_card_summary_and_facts(tmp_path):
    (tmp_path / "MODEL_CARD.md").write_text(
        "# toy\n\nMade **by hand** for `tests`;\nnot trained.\n\n- Family: GPT-2 (2 layers,\n  4 heads).\n"
        "- Mechanism: L0H0 copies - then L1H0 reads.\n- A line without a label.\n", encoding="utf-8")
    card = cal.read_card(tmp_path)
    assert card.title == "toy" and card.summary == "Made by hand for tests; not trained."
    assert card.facts == (("Family", "GPT-2 (2 layers, 4 heads)."), ("Mechanism", "L0H0 copies - then L1H0 reads."),
                          ("", "A line without a label."))
    assert cal.read_card(tmp_path / "nowhere").summary == ""
    assert cal.planted_folder(tmp_path) is None and cal.planted_folder("openai-community/gpt2") is None
    assert cal.planted_folder(SHIPPED[INDUCTION]) == SHIPPED[INDUCTION]


def test_edge_marks_found_missed_extra_and_key_value_groups():
    stated = [{"sender": "L0H0", "receiver": "L1H0.k"}, {"sender": "L1H0", "receiver": "logits"}]
    got = cal.edge_marks(stated, [("L0H0", "L1H1.k", 0.3), ("embed", "L0H0.v", 0.1)], group=2)
    assert got == {("L0H0", "L1H1.k"): "found", ("embed", "L0H0.v"): "extra", ("L1H0", "logits"): "missed"}
    assert cal.edge_marks(stated, [("L0H0", "L1H1.k", 0.3)])[("L0H0", "L1H1.k")] == "extra"   # no groups


def test_graph_colours_by_mark_with_missed_edges_dashed():
    marks = {("L0H0", "L1H0.k"): "found", ("embed", "L0H0.v"): "missed", ("L1H1", "logits"): "extra"}
    chart = circuit_charts.circuit_graph([(s, r, 1.0) for s, r in marks], 2, 4, marks=marks,
                                         mark_labels={"found": "F", "missed": "M", "extra": "E"}).to_dict()
    lines = chart["layer"][0]
    assert lines["encoding"]["color"]["field"] == "mark"
    assert lines["encoding"]["color"]["scale"] == {"domain": ["F", "M", "E"], "range": list(circuit_charts.MARK_COLOURS.values())}
    rows = chart["datasets"][lines["data"]["name"]]
    assert {(r["sender"], r["mark"], r["dash"]) for r in rows} == {("L0H0", "F", False), ("embed", "M", True), ("L1H1", "E", False)}
    plain = circuit_charts.circuit_graph([("L0H0", "L1H0.k", 1.0)], 2, 4).to_dict()
    assert plain["layer"][0]["encoding"]["color"]["field"] == "input"


def test_planted_models_get_calibrates_pair_as_their_solved_example(planted):
    """The example is calibrate's first pair for the stated task, token for token, and the model solves it."""
    circuit = cal.read_circuit(SHIPPED[INDUCTION])
    want = cal.make_pairs(circuit, 1)[0]
    assert list(EX.examples_for(INDUCTION))[0] == EXAMPLE and EXAMPLE not in EX.examples_for("attnkit-tiny")
    ex = EX.texts(EXAMPLE)
    pair = make_pair(planted, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])
    assert (pair.clean, pair.corrupt, pair.answer, pair.distractor, pair.pos) == \
        (want.clean, want.corrupt, want.answer, want.distractor, want.pos)
    checks = EX.check_examples(planted)
    assert checks[EXAMPLE].solved and EX.pick_default(INDUCTION, checks, EX.CIRCUITS_PREFERRED) == EXAMPLE
    assert list(EX.examples_for(str(SHIPPED["planted-mlp"])))[0] == EX.PREFERRED["planted-mlp"]   # by its folder too
    assert EX.PREFERRED["planted-mlp"] == "Token two back + 7 (planted successor)"


def test_home_shows_the_planted_card_and_stated_circuit():
    at = apptest("home", ak_model=INDUCTION).run()
    assert not at.exception, at.exception
    circuit = cal.read_circuit(SHIPPED[INDUCTION])
    assert any(s.value.startswith("Planted circuit") for s in at.subheader)
    card = cal.read_card(SHIPPED[INDUCTION])
    assert any(card.summary[:60] in m.value.replace("\\", "") for m in at.markdown)
    assert any(c.value.replace("\\", "").startswith("Mechanism: the previous-token head L0H0") for c in at.caption)
    frames = [d.value for d in at.dataframe]
    heads = next(f for f in frames if list(f.columns) == ["head", "role"])
    assert heads.values.tolist() == [["L0H0", "previous token"], ["L1H0", "induction"]]
    edges = next(f for f in frames if "reads it through" in f.columns)
    assert edges[["sender", "receiver"]].values.tolist() == [list(e) for e in circuit.edges]
    assert edges["reads it through"].tolist()[1] == "key (K-composition)"
    assert any("planted-circuit model" in c.value for c in at.sidebar.caption)


def test_circuits_compares_the_stated_circuit_with_the_librarys_discovery(planted):
    at = apptest("circuits", timeout=600, ak_model=INDUCTION).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="ci_example").value == EXAMPLE
    ex = EX.texts(EXAMPLE)
    pair = make_pair(planted, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])
    found = discover.discover(planted.weights, [pair], 0.8, ablation="resample", mlps=True)
    want = cal.compare_circuits(cal.read_circuit(SHIPPED[INDUCTION]).edges, found.edges)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Stated edges found"] == str(len(want["found"]))
    assert shown["Stated edges missed"] == str(len(want["missed"]))
    assert shown["Extra edges"] == str(len(want["extra"]))
    assert float(shown["Precision"]) == pytest.approx(want["precision"], abs=0.005)
    assert float(shown["Recall"]) == pytest.approx(want["recall"], abs=0.005)
    assert want["recall"] == 1.0                         # the planted circuit is found on its own example
    tables = [d.value for d in at.dataframe if "stated circuit" in d.value.columns]
    listed = {(r["sender"], r["receiver"]): r["stated circuit"].split(" ")[0] for t in tables for _, r in t.iterrows()}
    assert listed == cal.edge_marks(cal.read_circuit(SHIPPED[INDUCTION]).edges, found.edges)
