"""The notebook API (``import attnkit``): every result holds the library's own numbers (not a second computation),
draws with the pages' chart builders, saves self-contained files, shows itself in Jupyter, speaks the language it
was loaded in, and nothing in it imports Streamlit."""
import json
import pydoc
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

import attnkit
from attnkit import calibration, loading, metrics, patching, series
from attnkit.i18n import msg
from attnkit.model import run
from attnkit.score_terms import score_terms
from helpers import ROOT

TEXT = "When Mary and John went to the store, John gave a drink to Mary."


@pytest.fixture(scope="module")
def planted():
    return attnkit.load("planted-induction")


@pytest.fixture(scope="module")
def odd_model(odd_dir):
    return attnkit.load(str(odd_dir))


def test_run_keeps_the_core_trace_and_pattern_cells_are_the_captured_weights(odd_model):
    r = odd_model.run(TEXT)
    ids = odd_model.to_ids(TEXT)
    ref = run(odd_model.weights, ids, capture=["pattern"])
    assert r.ids == ids and len(r.tokens) == len(ids)
    assert torch.equal(r["pattern", 1], ref["pattern", 1]) and torch.equal(r.logits, ref.logits[0])
    p = r.pattern("L1H4")
    df = p.to_pandas()
    T = len(ids)
    assert len(df) == T * T
    want = ref["pattern", 1][0, 4].double().numpy()
    assert np.array_equal(df["value"].to_numpy(), want.reshape(-1))
    assert list(df["masked"]) == [k > q for q in range(T) for k in range(T)]        # causal: keys after the query
    assert p.top_key(-1)[0] == int(np.argmax(want[-1]))
    assert r.pattern(1, 4).head == "L1H4" and r.pattern("L1H4", kind="scores").kind == "scores"
    with pytest.raises(ValueError, match="kind is"):
        r.pattern("L1H4", kind="weights")


def test_head_statistics_find_the_planted_heads_and_say_they_measure_the_pattern(planted):
    stated = planted.stated_circuit()
    roles = {role: head for head, role in stated.roles.items()}
    text = " ".join(f"t{i}" for i in [3, 5, 7, 9, 11, 3, 5, 7, 9, 11, 2, 4])
    h = planted.heads(text)
    assert h.best("previous-token") == roles["previous token"] and h.best("induction") == roles["induction"]
    ids = planted.to_ids(text)
    table = metrics.head_table(planted.weights, ids, 50)
    row = table[(table["layer"] == 1) & (table["head"] == 0)].iloc[0]
    assert h.score("L1H0", "induction") == pytest.approx(row["induction"], abs=0)
    assert "where each head looks, not what it does" in h.summary()
    assert "not what it *does*" in attnkit.HeadStats.__doc__
    with pytest.raises(KeyError, match="no statistic"):
        h.best("sink")


def test_patching_and_attribution_are_the_library_results(planted):
    pair = planted.planted_pairs(1)[0]
    p = planted.patch(pair)
    ref = patching.patch(planted.weights, pair, "z")
    df = p.to_pandas()
    assert np.allclose(df["logit_diff"], ref.raw.reshape(-1)) and list(df["name"][:2]) == ["L0H0", "L0H1"]
    assert p.top(1)["name"].iloc[0] in planted.stated_circuit().heads
    assert len(df) == 2 * 4 and p.chart().to_dict()["layer"][0]["mark"]["type"] == "rect"     # Head effects' map
    a = planted.attribute(pair.clean, planted.to_tokens([pair.answer])[0], planted.to_tokens([pair.distractor])[0])
    assert a.dla.total == pytest.approx(a.dla.actual, abs=1e-3)           # the parts add up to the logit difference
    assert len(a.heads()) == 2 * 4


def test_why_splits_the_models_own_score(odd_model):
    w = odd_model.why(TEXT, "L2H1", query=-1, key=3)
    ids = odd_model.to_ids(TEXT)
    ref = score_terms(odd_model.weights, ids, 2, 1, len(ids) - 1, 3)
    assert np.array_equal(w.terms.values, ref.values) and w.summary() == str(w.explain())
    score = run(odd_model.weights, ids, capture=["scores"])["scores", 2][0, 1, -1, 3].item()
    assert w.to_pandas()["value"].sum() == pytest.approx(score, abs=1e-3)
    row = odd_model.why(TEXT, "L2H1", query=5)
    assert set(row.to_pandas()["key_pos"]) == set(range(6))
    with pytest.raises(ValueError, match="needs a key"):
        row.explain()


def test_circuit_on_a_planted_model_is_compared_with_its_stated_circuit(planted):
    c = planted.circuit(planted.planted_pairs(2))
    stated = planted.stated_circuit()
    assert c.compare() == calibration.compare_circuits(stated.edges, c.found.edges)
    df = c.to_pandas()
    assert list(df.columns) == ["sender", "receiver", "attribution", "stated circuit"]
    assert set(df["stated circuit"]) <= {"found", "extra"} and c.faithfulness == c.found.share
    c.chart(), c.chart(kind="faithfulness")
    with pytest.raises(ValueError, match="graph"):
        c.chart(kind="sankey")


def test_entropy_ablation_and_the_seeds(odd_model):
    e = odd_model.entropy(TEXT)
    df = e.to_pandas()
    first = df[df["n"] == 1]
    assert np.allclose(first["mean"], 0.0, atol=1e-6)                     # one visible key: no spread
    assert np.allclose(df["bound"], np.log(df["n"]))                       # ln n, uniform attention's entropy
    assert e.verdict in ("supported", "not supported", "not enough evidence", "undetermined") and e.reason
    a = odd_model.ablate("v=x", TEXT)
    assert a.verdict == a.result.verdict.status and a.delta == a.result.effect.delta
    a.chart()
    z = odd_model.ablate("zero-head", TEXT, heads=["L1H2"])
    with pytest.raises(ValueError, match="no per-layer chart"):
        z.chart()
    assert set(z._repr_mimebundle_()) == {"text/plain"}                   # no chart: the summary alone
    seed = attnkit.seed_matrices("mask")
    assert np.allclose(seed["pattern"].values[3], np.exp([1, 2, 3, 4]) / np.exp([1, 2, 3, 4]).sum())
    assert list(attnkit.softmax_table("9, 3, -2")["softmax"].round(4)) == [0.9975, 0.0025, 0.0]


def test_save_writes_self_contained_files(odd_model, tmp_path):
    p = odd_model.run("The animal didn't cross the street").pattern("L0H0")
    html = p.save(tmp_path / "p.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc\s*=", html) and "cdn.jsdelivr" not in html and "vegaEmbed" in html
    assert p.save(tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in p.save(tmp_path / "p.svg").read_text(encoding="utf-8")[:300]
    back = pd.read_csv(p.save(tmp_path / "p.csv"))
    assert np.allclose(back["value"], p.to_pandas()["value"])
    with pytest.raises(ValueError, match="use one of"):
        p.save(tmp_path / "p.pdf")


def test_display_and_language(odd_dir):
    en, zh = attnkit.load(str(odd_dir)), attnkit.load(str(odd_dir), lang="zh")
    r_en, r_zh = en.run(TEXT).pattern("L0H1"), zh.run(TEXT).pattern("L0H1")
    data, _ = r_en._repr_mimebundle_()
    assert data["text/plain"] == r_en.summary() == repr(r_en) and len(data) > 1
    assert r_zh.summary() == msg("{head} {kind} on {n} tokens: the last token {last!r} puts its largest {what} on "
                                 "position {j} {key!r} ({value}).", head="L0H1", kind=msg("pattern"), n=len(r_zh.tokens),
                                 last=r_zh.tokens[-1], what=msg("weight"), j=r_zh.top_key()[0],
                                 key=r_zh.tokens[r_zh.top_key()[0]], value=f"{r_zh.top_key()[1]:.3f}").render("zh")
    assert "注意力模式" in r_zh.summary() and "注意力模式" in json.dumps(r_zh.chart().to_dict(), ensure_ascii=False)
    assert "注意力模式" not in json.dumps(r_en.chart().to_dict(), ensure_ascii=False)
    with pytest.raises(Exception, match="unknown language"):
        attnkit.load(str(odd_dir), lang="fr")


def test_help_lists_the_notebook_api():
    text = pydoc.render_doc(attnkit, renderer=pydoc.plaintext)
    for name in ("load(", "class Model", "class Run", "class HeadStats", "class Circuit", "class Why", "seed_matrices("):
        assert name in text, name
    assert all(getattr(attnkit, n).__doc__ for n in attnkit.__all__ if n != "HOOK_POINTS")


def test_nothing_in_the_notebook_api_imports_streamlit(odd_dir, tmp_path):
    code = f"""
import sys, attnkit
assert "torch" not in sys.modules                      # the name table is lazy
m = attnkit.load({str(odd_dir)!r})
r = m.run("The animal didn't cross the street")
r.pattern("L0H0").save({str(tmp_path / "x.html")!r})
m.heads("The animal didn't cross the street", induction_n=8).chart(); m.entropy("The animal didn't cross").chart()
import attnkit.notebook
print("streamlit" in sys.modules, sorted(k for k in sys.modules if k.startswith("attnkit.app")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False []"


def test_a_shipped_model_missing_from_an_install_fails_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(loading.SHIPPED, "attnkit-tiny", tmp_path / "gone")
    with pytest.raises(loading.LoadError) as e:
        attnkit.load("attnkit-tiny")
    assert "\n" not in str(e.value) and "pip install --force-reinstall attnkit" in str(e.value)
    monkeypatch.setitem(series.SHIPPED_SERIES, series.SHIPPED_SERIES_NAME, tmp_path / "gone")
    with pytest.raises(series.SeriesError, match="is not in this installation"):
        series.resolve(series.SHIPPED_SERIES_NAME)
