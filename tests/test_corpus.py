"""Corpus runs (attnkit.corpus): local and Ray engines, resume, bad documents, the CLI's checks."""
from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import attnkit
from attnkit import corpus as C
from attnkit.tolerances import CORPUS_ATOL
from attnkit.corpus import analyses as CA
# Imported here, not inside the test that patches attnkit.loading.load: the corpus CLI's imports (the bench
# among them) bind `load` by name, and a first import under the patch kept the fake for later test files.
from attnkit.cli import corpus as corpus_cli  # noqa: F401
from attnkit.cli import main

WINDOW = 16
KW = dict(model="attnkit-tiny", analyses=("heads", "entropy", "ablation-loss"), window=WINDOW, batch=4,
          shard_docs=2, ablations=["v=x"], bootstrap=50)
SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "Attention lets every token look back at the tokens before it, and the heads learn where to look.",
    "Debian is a free operating system, developed by thousands of volunteers all over the world.",
    "A list is a mutable sequence; a tuple is an immutable sequence of values.",
]
BAD_TEXT = "Zebra crossings are striped so that drivers can see them from far away in the rain."


def _write_corpus(folder: Path) -> Path:
    lines = [json.dumps({"text": " ".join(SENTENCES[(i + j) % 4] for j in range(1 + i % 3))}) for i in range(6)]
    lines.insert(2, '{"text": "unterminated')                  # malformed JSON: recorded, the run goes on
    lines.insert(5, json.dumps({"text": BAD_TEXT}))              # analysis fails on it (test_analysis_error)
    lines.append(json.dumps({"text": 42}))                        # not a string
    lines.append(json.dumps({"text": "a"}))                       # one token: nothing to attend over
    path = folder / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    return _write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def local_run(corpus_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    rep = C.run_corpus(corpus_file, out, **KW)
    return out, rep


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load("attnkit-tiny", "cpu")


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    keys = {"documents": ["doc"], "windows": ["doc", "window"], "heads": ["doc", "window", "layer", "head"],
            "entropy": ["doc", "window", "layer", "head"], "ablation": ["doc", "window", "ablation"]}
    return {n: pd.read_parquet(out / n).sort_values(k, kind="stable").reset_index(drop=True) for n, k in keys.items()}


def _same(a: pd.DataFrame, b: pd.DataFrame):
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for c in a.columns:
        x, y = a[c].tolist(), b[c].tolist()
        if c in ("entropy", "first_token"):
            assert all(np.array_equal(u, v) for u, v in zip(x, y)), c
        else:
            assert pd.Series(x).equals(pd.Series(y)), c


def test_local_run_writes_shards_summary_and_errors(corpus_file, local_run, tiny):
    out, rep = local_run
    assert rep.docs == 10 and rep.shards == 5 and rep.skipped_shards == 0 and rep.processed_docs == 10
    t = _tables(out)
    docs = t["documents"].set_index("doc")
    assert docs.loc[2, "status"] == "error" and docs.loc[2, "stage"] == "read" and "JSONDecodeError" in docs.loc[2, "error"]
    assert docs.loc[8, "status"] == "error" and "TypeError" in docs.loc[8, "error"]
    assert docs.loc[9, "status"] == "short"
    ok = docs.index[docs["status"] == "ok"].tolist()
    assert ok == [0, 1, 3, 4, 5, 6, 7]
    assert docs.loc[ok, "windows"].sum() == len(t["windows"]) and (t["windows"]["tokens"] <= WINDOW).all()
    L, H = tiny.config.n_layers, tiny.config.n_heads
    assert len(t["heads"]) == len(t["entropy"]) == len(t["windows"]) * L * H
    assert len(t["ablation"]) == 2 * len(t["windows"])

    # the numbers are those of the library's own functions on the same window
    from attnkit.entropy import documents, entropy_profile
    from attnkit.metrics import head_scores
    from attnkit.model import run

    first = C.read_inputs(corpus_file)[0][0]
    ws, _ = documents(tiny.encode, [first["text"]], WINDOW)
    ids = torch.tensor([ws[0]])
    pats = run(tiny.weights, ids, capture=["pattern"]).stack("pattern")[:, 0]
    want = head_scores(pats, ids[0], window=tiny.config)
    got = t["heads"][(t["heads"]["doc"] == 0) & (t["heads"]["window"] == 0)]
    for stat, v in want.items():
        np.testing.assert_allclose(got[stat].to_numpy(), v.reshape(-1).double().numpy(), rtol=1e-5, atol=1e-6)
    curves = entropy_profile(tiny.weights, ids)
    e = t["entropy"][(t["entropy"]["doc"] == 0) & (t["entropy"]["window"] == 0)]
    np.testing.assert_allclose(np.stack(e["entropy"].tolist()), curves.entropy[0].reshape(L * H, -1).numpy(),
                               atol=CORPUS_ATOL)
    base = t["ablation"][(t["ablation"]["doc"] == 0) & (t["ablation"]["window"] == 0) & (t["ablation"]["ablation"] == "baseline")]
    from attnkit.ablations import loss

    assert base["nats"].iloc[0] == pytest.approx(loss(tiny.weights, [ws[0]]).nats, rel=1e-6)

    res = C.load_result(out)
    assert res.complete and res.info["documents"] == {"total": 10, "finished": 10, "ok": 7, "short": 1, "error": 2}
    assert set(res.errors["doc"]) == {2, 8, 9}
    h = res.heads
    assert len(h) == L * H * 7 and set(h["stat"]) >= {"previous-token", "induction"}
    fin = h.dropna(subset=["lo", "hi"])
    assert len(fin) and ((fin["lo"] <= fin["mean"] + 1e-12) & (fin["mean"] <= fin["hi"] + 1e-12)).all()
    # mean over windows of the per-window statistic (every window counts once)
    pt = t["heads"][(t["heads"]["layer"] == 1) & (t["heads"]["head"] == 2)]["previous-token"].mean()
    assert h[(h["label"] == "L1H2") & (h["stat"] == "previous-token")]["mean"].iloc[0] == pytest.approx(pt)
    e = res.entropy
    assert set(e["quantity"]) == {"entropy", "first_token"} and e["head"].isna().any()
    assert (e[e["quantity"] == "entropy"]["mean"] <= e[e["quantity"] == "entropy"]["bound"] + 1e-6).all()
    a = res.ablation.set_index("ablation")
    assert list(a.index) == ["baseline", "v=x"] and a.loc["baseline", "increase"] == 0
    assert a.loc["v=x", "increase"] == pytest.approx(a.loc["v=x", "nats"] - a.loc["baseline", "nats"])
    assert a.loc["v=x", "lo"] <= a.loc["v=x", "nats"] <= a.loc["v=x", "hi"]


def test_resume_after_interrupted_run(corpus_file, local_run, tmp_path):
    out = tmp_path / "out"
    calls = []

    def stop_after_first_shard(done, total, info):
        calls.append(done)
        if done >= 2:
            raise KeyboardInterrupt("stopped by the test")

    with pytest.raises(KeyboardInterrupt):
        C.run_corpus(corpus_file, out, progress=stop_after_first_shard, **KW)
    assert calls == [2] and len(list((out / "_done").glob("*.json"))) == 1
    assert not C.load_result(out).complete                   # readable while partial
    seen = []
    rep = C.run_corpus(corpus_file, out, progress=lambda d, n, i: seen.append((d, i["resumed"])), **KW)
    assert rep.skipped_shards == 1 and rep.processed_docs == 8 and seen[0] == (4, 2)
    ref, got = _tables(local_run[0]), _tables(out)
    for n in ref:
        _same(ref[n], got[n])
    rep = C.run_corpus(corpus_file, out, **KW)                # nothing left to do
    assert rep.skipped_shards == rep.shards and rep.processed_docs == 0
    with pytest.raises(C.CorpusError, match="other settings"):
        C.run_corpus(corpus_file, out, **{**KW, "window": 8})
    changed = tmp_path / "edited" / corpus_file.name           # one document edited: only its shard is redone
    changed.parent.mkdir()
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    lines[3] = json.dumps({"text": "An edited document about heads and tokens."})
    changed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(C.CorpusError, match="other documents"):      # refused unless asked for
        C.run_corpus(changed, out, **KW)
    rep = C.run_corpus(changed, out, redo_changed=True, **KW)
    assert rep.skipped_shards == rep.shards - 1 and rep.processed_docs == 2
    assert C.load_result(out).complete


def test_failing_document_is_recorded_and_the_run_goes_on(corpus_file, tiny, tmp_path, monkeypatch):
    bad = tiny.encode(BAD_TEXT)[:WINDOW]
    real = CA.ablation_loss

    def flaky(weights, ids, spec):
        if list(ids) == bad:
            raise RuntimeError("boom on this window")
        return real(weights, ids, spec)

    monkeypatch.setattr(CA, "ablation_loss", flaky)
    out = tmp_path / "out"
    rep = C.run_corpus(corpus_file, out, **{**KW, "bootstrap": 0})
    res = C.load_result(out)
    row = res.documents.set_index("doc").loc[5]
    assert row["status"] == "error" and row["stage"] == "analysis" and "boom on this window" in row["error"]
    assert rep.errors == 3 and res.info["documents"]["ok"] == 6
    t = _tables(out)
    assert 5 not in set(t["heads"]["doc"]) | set(t["windows"]["doc"]) | set(t["ablation"]["doc"])
    assert {0, 1, 3, 4, 6, 7} == set(t["windows"]["doc"])     # its batch-mates were retried alone and kept


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # from inside Ray Data
@pytest.mark.slow
def test_ray_engine_matches_local(corpus_file, local_run, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install ray); the local engine is tested")
    out = tmp_path / "out"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rep = C.run_corpus(corpus_file, out, engine="ray", workers=2, **KW)
    finally:
        ray.shutdown()
    assert rep.engine == "ray" and rep.processed_docs == 10
    ref, got = _tables(local_run[0]), _tables(out)
    for n in ref:
        _same(ref[n], got[n])
    for n in ("heads", "entropy", "ablation"):              # same bootstrap seed: same intervals
        pd.testing.assert_frame_equal(pd.read_parquet(local_run[0] / "summary" / f"{n}.parquet"),
                                      pd.read_parquet(out / "summary" / f"{n}.parquet"))


def test_folder_input(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("One document in a text file.", encoding="utf-8")
    (d / "sub" / "b.jsonl").write_text('"a plain string"\n{"body": "x"}\n', encoding="utf-8")
    (d / "c.csv").write_text("text\nleft out\n", encoding="utf-8")
    (d / "z.md").write_bytes(b"\xc3\x28 not utf-8")
    docs, notes = C.read_inputs(d)
    assert [x["doc_id"] for x in docs] == ["a.txt", "sub/b.jsonl:1", "sub/b.jsonl:2", "z.md"]
    assert docs[1]["text"] == "a plain string" and "no field 'text'" in docs[2]["error"]
    assert "not valid UTF-8" in docs[3]["error"] and "1 file(s)" in notes[0]
    assert C.read_inputs(d, field="body")[0][2]["text"] == "x"


@pytest.mark.parametrize("args, message", [
    (["--input", "MISSING.jsonl"], "input not found"),
    (["--batch", "0"], "--batch must be at least 1"),
    (["--window", "0"], "--window must be at least 2"),
    (["--analyses", "heads,attention-rollout"], "unknown analysis 'attention-rollout'"),
    (["--analyses", "patching"], "not available"),
    (["--ablation", "v=y"], "unknown intervention"),
    (["--threads", "0"], "--threads must be at least 1"),
    (["--workers", "2"], "are for --engine ray"),
])
def test_cli_refuses_bad_input_before_any_work(args, message, corpus_file, tmp_path, monkeypatch, capsys):
    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr("attnkit.corpus.engines.ShardWorker", no_model)
    monkeypatch.setattr("attnkit.loading.load", no_model)
    out = tmp_path / "out"
    base = {"--model": "attnkit-tiny", "--input": str(corpus_file), "--out": str(out)}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    assert main(["corpus", *[x for kv in base.items() for x in kv]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnkit corpus: ") and message in err
    assert not out.exists()


def test_cli_runs_and_prints_summary(corpus_file, tmp_path, capsys):
    from attnkit.cli import main

    out = tmp_path / "out"
    rc = main(["corpus", "--model", "attnkit-tiny", "--input", str(corpus_file), "--out", str(out), "--analyses",
               "ablation-loss", "--ablation", "no-scale", "--window", "8", "--shard-docs", "5", "--bootstrap", "20"])
    assert rc == 0
    cap = capsys.readouterr()
    assert "10/10 documents (7 ok, 1 short, 2 error)" in cap.out and "no-scale" in cap.out
    assert "docs/s" in cap.err and "left" in cap.err
    res = C.load_result(out)
    assert res.heads is None and res.entropy is None and list(res.ablation["ablation"]) == ["baseline", "no-scale"]


def test_progress_line():
    s = io.StringIO()
    p = C.Progress(stream=s, every=0)
    p(4, 10, {"resumed": 2, "errors": 1, "started": 0.0})
    line = s.getvalue()
    assert "4/10 docs (2 resumed)" in line and "docs/s" in line and "left" in line and "1 error" in line


def test_local_engine_needs_no_ray_and_ray_engine_says_how_to_get_it(corpus_file, tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    code = ("import sys; sys.modules['ray'] = None\n"               # any `import ray` now fails
            "from attnkit.corpus import run_corpus\n"
            f"r = run_corpus({str(corpus_file)!r}, {str(tmp_path / 'out')!r}, 'attnkit-tiny', 'heads', window=8, "
            "max_docs=2, bootstrap=0)\n"
            "assert r.processed_docs == 2, r\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(attnkit.__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    from attnkit.cli import main

    assert main(["corpus", "--model", "attnkit-tiny", "--input", str(corpus_file), "--out", str(tmp_path / "o2"),
                 "--engine", "ray"]) == 2
    assert "pip install ray" in capsys.readouterr().err and not (tmp_path / "o2").exists()


def test_result_frames_for_the_pages(local_run):
    res = C.load_result(local_run[0])
    pt = res.head_stat("previous-token")
    assert list(pt.columns) == ["head", "layer", "head_index", "previous-token", "lo", "hi", "windows"]
    assert pt["head"].iloc[1] == "L0H1" and len(pt) == 4 * 8
    with pytest.raises(KeyError, match="there are"):
        res.head_stat("nope")
    c = res.curve("entropy", head=None, layers=[0, 3])
    assert list(c.columns) == ["layer", "position", "n", "mean", "lo", "hi", "docs", "bound"]
    assert set(c["layer"]) == {0, 3} and c["position"].max() == WINDOW - 1
    nc = res.curve("entropy", head=2, normalised=True)
    assert (nc["position"] >= 1).all() and (nc["mean"] <= 1 + 1e-6).all() and (nc["bound"] == 1).all()


def test_compare_page_shows_a_corpus_result_beside_the_prompt(local_run):
    from helpers import apptest

    out, _ = local_run
    at = apptest("compare", text="The animal didn't cross the street because it was too tired.",
                 cmp_corpus=str(out)).run()
    assert not at.exception and not at.error
    at.selectbox(key="cmp_stat").set_value("previous-token").run()
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "corpus mean" in d.value.columns)
    res = C.load_result(out)
    ref = res.head_stat("previous-token")
    assert len(table) == len(ref) and set(table["head"]) == set(ref["head"])
    assert (table["95 % low"] <= table["corpus mean"] + 1e-12).all() and (table["corpus mean"] <= table["95 % high"] + 1e-12).all()
    assert table["this prompt"].notna().all()
    at.text_input(key="cmp_corpus").set_value(str(out / "nope")).run()
    assert not at.exception and any("not a folder" in e.value for e in at.error)


def test_entropy_page_shows_corpus_curves(local_run):
    from helpers import apptest

    out, _ = local_run
    at = apptest("entropy", text="The animal didn't cross the street because it was too tired.",
                 ent_corpus=str(out)).run()
    assert not at.exception and not at.error
    assert any("95 % bootstrap interval over documents" in c.value for c in at.caption)
