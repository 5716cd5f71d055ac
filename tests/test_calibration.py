"""calibrate: every method scored against the planted circuits, to stated bars (a regression, or a method that
finds the wrong heads, fails here). Honest misses are tested as such: plain edge attribution at the clean
run ranks an induction circuit's edges below the bar (its softmax is saturated, so the first-order estimate
of the key-side edges is small), and is checked to stay below EAP-IG."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from attnkit import calibration as cal
from attnkit.cli import main
from attnkit.i18n import language
from attnkit.loading import PLANTED_MODELS, SHIPPED, load

INDUCTION = ["planted-induction", "planted-llama", "planted-competing"]
DECOYS = "planted-decoys"


@pytest.fixture(scope="module")
def ctxs() -> dict[str, cal.Context]:
    out = {}
    for name in PLANTED_MODELS:
        circuit = cal.read_circuit(SHIPPED[name])
        out[name] = cal.Context(name, load(name, "cpu").weights, circuit, cal.make_pairs(circuit, 4))
    return out


def _rows(ctx, fn) -> dict[str, cal.Row]:
    return {r.metric: r for r in fn(ctx)}


def test_roc_auc_on_a_hand_example():
    # positives 0.35 and 0.8 beat 1 and 2 of the negatives 0.1, 0.4: (1 + 2) / 4
    assert cal.roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert cal.roc_auc([1, 1, 1], [True, False, False]) == 0.5          # ties count a half
    assert np.isnan(cal.roc_auc([1, 2], [True, True]))


def test_compare_circuits_found_missed_extra_and_key_value_groups():
    stated = [{"sender": "L0H0", "receiver": "L1H0.k"}, {"sender": "L1H0", "receiver": "logits"}]
    got = cal.compare_circuits(stated, [("L0H0", "L1H1.k", 0.3), ("embed", "L0H0.v", 0.1)])
    assert got["found"] == [] and got["missed"] == [("L0H0", "L1H0.k"), ("L1H0", "logits")]
    assert got["extra"] == [("L0H0", "L1H1.k"), ("embed", "L0H0.v")] and got["precision"] == 0.0
    grouped = cal.compare_circuits(stated, [("L0H0", "L1H1.k"), ("L1H0", "logits")], group=2)
    assert grouped["found"] == [("L0H0", "L1H0.k"), ("L1H0", "logits")] and grouped["recall"] == 1.0
    assert cal.canonical(("L0H0", "L1H3.v"), 2) == ("L0H0", "L1H2.v")
    assert cal.canonical(("L0H0", "L1H3.q"), 2) == ("L0H0", "L1H3.q")    # queries are not shared


def test_read_circuit_refuses_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="CIRCUIT.json not found"):
        cal.read_circuit(tmp_path)
    (tmp_path / "CIRCUIT.json").write_text('{"heads": "L0H0"}', encoding="utf-8")
    with pytest.raises(ValueError, match="heads must be a non-empty list"):
        cal.read_circuit(tmp_path)


@pytest.mark.parametrize("name", PLANTED_MODELS)
def test_stated_circuit_is_faithful_and_necessary(ctxs, name):
    kept, cut = (r.value for r in cal.m_stated_circuit(ctxs[name]))
    assert kept >= 0.85 and cut <= -0.8          # only the stated edges: ≈ clean; without them: ≈ corrupted


@pytest.mark.parametrize("name", PLANTED_MODELS)
def test_head_methods_rank_the_planted_heads_first(ctxs, name):
    """…except where planted-decoys' decoys fool the methods that read patterns or weights alone: there the
    head statistics and composition rows say so (and the methods that measure effects still pass)."""
    ctx = ctxs[name]
    fooled = (cal.m_head_statistics, cal.m_composition) if name == DECOYS else ()
    for fn in (cal.m_head_statistics, cal.m_activation_patching, cal.m_attribution_patching, cal.m_composition,
               cal.m_path_patching, cal.m_score_terms):
        for row in fn(ctx):
            assert row.verdict.startswith("fooled by a decoy" if fn in fooled else "pass"), (name, row)


def test_the_decoys_are_named_and_without_their_statement_the_rows_miss(ctxs):
    """planted-decoys: the fooled rows name the decoy that outranks (or ties) the planted head or edge; the same
    model with its CIRCUIT.json's decoy fields removed gives plain misses (the rows are not fooled by wording)."""
    ctx = ctxs[DECOYS]
    prev, ind = cal.m_head_statistics(ctx)
    decoys = ctx.circuit.decoys
    assert [h for h, d in decoys.items() if d.pattern == "previous-token"][0] in str(prev.verdict)
    assert [h for h, d in decoys.items() if d.pattern == "induction"][0] in str(ind.verdict)
    (comp,) = cal.m_composition(ctx)
    edge = ctx.circuit.decoy_edges[0]
    assert f"{edge.sender}→{edge.receiver}" in str(comp.verdict)
    bare = cal.Context(ctx.name, ctx.weights, dataclasses.replace(ctx.circuit, decoys={}, decoy_edges=()), ctx.pairs)
    assert all(r.verdict.startswith("miss") for r in cal.m_head_statistics(bare))


@pytest.mark.parametrize("name", PLANTED_MODELS)
def test_eap_ig_auc_and_discovery_recover_the_circuit(ctxs, name):
    ctx = ctxs[name]
    (ig,) = cal.m_eap_ig(ctx)
    assert ig.value >= 0.95, ig
    disc = {r.metric.split(" ")[0]: r.value for r in cal.m_discovery(ctx)}
    assert disc["recall"] == 1.0 and disc["precision"] >= 0.9 and disc["faithfulness"] >= 0.8, disc


def test_plain_edge_attribution_honest_miss_on_induction(ctxs):
    """Gradients at the clean run: AUC 0.68–0.76 on the induction circuits (below the 0.95 bar, above chance),
    always below EAP-IG's; on planted-mlp, whose softmaxes do not gate the answer, it passes."""
    for name in INDUCTION:
        (plain,), (ig,) = cal.m_edge_attribution(ctxs[name]), cal.m_eap_ig(ctxs[name])
        assert 0.6 <= plain.value < 0.95 and plain.verdict.startswith("miss") and plain.value < ig.value, name
    assert cal.m_edge_attribution(ctxs["planted-mlp"])[0].value >= 0.95


def test_a_wrong_stated_circuit_is_scored_as_a_miss(ctxs):
    """The scoring can fail: state a distractor as the planted heads and the patching methods say miss."""
    ctx = ctxs["planted-induction"]
    wrong = dataclasses.replace(ctx.circuit, heads=("L0H1", "L1H2"), edges=(("L0H1", "L1H2.k"),))
    bad = cal.Context(ctx.name, ctx.weights, wrong, ctx.pairs)
    assert cal.m_activation_patching(bad)[0].verdict.startswith("miss")
    assert cal.m_path_patching(bad)[0].value == 0.0
    assert cal.m_eap_ig(bad)[0].value < 0.5
    assert cal.m_score_terms(bad)[0].value == 0.0       # L1H2's key side is not L0H1's output


def test_cli_writes_the_report_card(tmp_path, capsys):
    out = tmp_path / "card.json"
    assert main(["calibrate", "--models", "planted-mlp", "--pairs", "1", "--json", str(out)]) == 0
    card = json.loads(out.read_text(encoding="utf-8"))
    (model,) = card["models"]
    assert model["name"] == "planted-mlp" and model["folder"] == str(SHIPPED["planted-mlp"].resolve())
    methods = {r["method"] for r in model["methods"]}
    assert {name for name, _ in cal.METHODS} == methods
    assert all(set(r) == {"method", "metric", "value", "verdict"} for r in model["methods"])
    assert "planted-mlp" in capsys.readouterr().out


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["calibrate", "--pairs", "0"]) == 2
    assert main(["calibrate", "--models", "gpt2"]) == 2
    assert main(["calibrate", "--json", str(tmp_path / "missing" / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "Traceback" not in "".join(err)


def test_the_report_card_is_in_the_readers_language_and_its_json_in_english(ctxs):
    """Issue 44, class 19: calibrate's report stayed English in a 简体中文 call. Its lines render in the call's
    language; the JSON keeps the method names, metrics and verdicts as English identifiers and text."""
    name = "planted-induction"
    card = cal.calibrate([(name, SHIPPED[name], ctxs[name].weights)], n_pairs=1)
    card["models"][0]["methods"] = card["models"][0]["methods"][:4]          # stated circuit, head statistics
    english = "\n".join(cal.report(card))
    with language("zh"):
        chinese = "\n".join(cal.report(card))
    assert "head statistics" in english and "pass: planted L0H0" in english
    assert "头统计量" in chinese and "通过：植入的 L0H0" in chinese and "head statistics" not in chinese
    row = json.loads(json.dumps(card))["models"][0]["methods"][2]
    assert row["method"] == "head statistics" and row["verdict"].startswith("pass: planted")


def test_cli_refuses_a_stated_circuit_its_model_lacks_before_any_work(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "planted"
    shutil.copytree(SHIPPED["planted-mlp"], folder)
    data = json.loads((folder / "CIRCUIT.json").read_text(encoding="utf-8"))
    (folder / "CIRCUIT.json").write_text(json.dumps({**data, "heads": ["L0H0", "L4H0"], "roles": {}}),
                                         encoding="utf-8")
    monkeypatch.setitem(SHIPPED, "planted-mlp", folder)
    ran = []
    monkeypatch.setattr(cal, "calibrate_model", lambda *a, **k: ran.append(a))
    assert main(["calibrate", "--models", "planted-mlp", "--pairs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert not ran and "\n" not in err and "names L4H0, which this model lacks" in err
