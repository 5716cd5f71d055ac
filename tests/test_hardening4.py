"""Hostile input, round three (issue 27), classes 1, 5, 6 and 8 (classes 2–4: test_hardening3.py):

1. results are never destroyed: corpus folders refuse other documents and foreign folders, damaged shards
   are recomputed, an interrupted run (a real SIGINT) resumes to the uninterrupted run's tables, and
   train-default never writes the shipped model unless told to;
5. corpus inputs that used to stop or hang a run: deep JSON, lone surrogates, FIFOs and devices, Ray
   addresses that do not answer, GPUs asked of a CPU machine, Ctrl-C, a field no document has;
6. the other CLIs' bad arguments: one line, exit 2, before any work;
8. per-position patching reports progress.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from attnkit import corpus as C
from attnkit.cli import main
from attnkit.corpus import engines as E

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "Attention lets every token look back at the tokens before it.",
    "Debian is a free operating system, developed by volunteers.",
    "A list is a mutable sequence; a tuple is an immutable one.",
    "Heads that copy the previous token appear early in training.",
    "Induction heads complete a pattern seen before in the context.",
]
FLAGS = ["--model", "attnkit-tiny", "--analyses", "heads,entropy", "--window", "16", "--shard-docs", "2",
         "--bootstrap", "0", "--threads", "1"]
TABLES = {"documents": ["doc"], "windows": ["doc", "window"], "heads": ["doc", "window", "layer", "head"],
          "entropy": ["doc", "window", "layer", "head"]}


def _jsonl(path: Path, texts) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def _tables(out: Path) -> dict:
    return {n: pd.read_parquet(out / n).sort_values(k, kind="stable").reset_index(drop=True)
            for n, k in TABLES.items()}


def _assert_same_tables(a: Path, b: Path):
    ta, tb = _tables(a), _tables(b)
    for n in TABLES:          # same process settings, batch shapes and threads: the same numbers
        pd.testing.assert_frame_equal(ta[n], tb[n], check_exact=True)


def _corpus(args, capsys):
    rc = main(["corpus", *FLAGS, *args])
    return rc, capsys.readouterr()


def _one_line(err: str, prefix: str = "attnkit corpus: ") -> str:
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("corpus [")]
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    return {"all": _jsonl(d / "all.jsonl", TEXTS), "other": _jsonl(d / "other.jsonl", TEXTS[::-1])}


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """An uninterrupted run over all six documents (three shards)."""
    out = tmp_path_factory.mktemp("ref") / "out"
    assert main(["corpus", *FLAGS, "--input", str(inputs["all"]), "--out", str(out)]) == 0
    return out


def _snapshot(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- class 1: corpus results kept

def test_other_documents_are_refused_and_nothing_is_touched(inputs, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["corpus", *FLAGS, "--input", str(inputs["all"]), "--out", str(out)]) == 0
    before = _snapshot(out)
    for args in (["--input", str(inputs["all"]), "--max-docs", "2"],      # smaller --max-docs
                 ["--input", str(inputs["other"])]):                         # another input
        rc, cap = _corpus([*args, "--out", str(out)], capsys)
        assert rc == 2 and "holds a run over other documents" in _one_line(cap.err)
        assert _snapshot(out) == before                                     # not a byte changed
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)   # same input: resumes
    assert rc == 0 and "3/3 shards resumed" in cap.out
    after = _snapshot(out)                  # the resume rewrites summary.json (its "created" time, to the second)
    assert {k for k in after if after[k] != before.get(k)} <= {"summary.json"} and after.keys() == before.keys()
    before = after
    with pytest.raises(C.CorpusError, match="other documents"):             # the library refuses the same way
        C.run_corpus(inputs["all"], out, model="attnkit-tiny", analyses="heads,entropy", window=16,
                     shard_docs=2, max_docs=4, bootstrap=0)
    assert _snapshot(out) == before
    rc, cap = _corpus(["--input", str(inputs["all"]), "--max-docs", "4", "--out", str(out), "--redo-changed"], capsys)
    assert rc == 0 and not (out / "_done" / "part-00002.json").exists()     # asked for: the shard past the end goes


def test_foreign_folder_is_refused_before_any_work(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("attnkit.loading.load", lambda *a, **k: pytest.fail("the model was loaded"))
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work", encoding="utf-8")
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)
    assert rc == 2 and "was not written by attnkit corpus" in _one_line(cap.err, "python -m attnkit corpus: error:")
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]
    with pytest.raises(C.CorpusError, match="not a corpus result folder"):
        C.run_corpus(inputs["all"], out, model="attnkit-tiny", analyses="heads", window=16)
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


def test_damaged_shard_is_found_and_recomputed(inputs, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["corpus", *FLAGS, "--input", str(inputs["all"]), "--out", str(out)]) == 0
    marker = json.loads((out / "_done" / "part-00001.json").read_text(encoding="utf-8"))
    assert set(marker["files"]) == set(TABLES) and len(marker["files"]["heads"]["sha256"]) == 64
    part = out / "heads" / "part-00001.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])           # truncated
    ent = out / "entropy" / "part-00002.parquet"
    data = bytearray(ent.read_bytes())
    data[len(data) // 2] ^= 0xFF                                               # one flipped byte, same size
    ent.write_bytes(bytes(data))
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)
    assert rc == 0 and "1/3 shards resumed" in cap.out
    assert "shard 1 is damaged" in cap.err and "shard 2 is damaged" in cap.err
    _assert_same_tables(reference, out)


SLOW_RUN = """
import sys, time
import attnkit.corpus.engines as E
real = E.ShardWorker.process
E.ShardWorker.process = lambda self, docs: (time.sleep(0.5), real(self, docs))[1]
from attnkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_interrupted_run_resumes_to_the_uninterrupted_result(inputs, reference, tmp_path, capsys):
    """A real Ctrl-C (SIGINT) after the first shard: one line, exit 130; the rerun resumes and its
    tables equal those of a run that was never interrupted."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_RUN, "corpus", *FLAGS, "--input", str(inputs["all"]),
                             "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "_done" / "part-00000.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _one_line(err) == "attnkit corpus: interrupted; finished shards kept, rerun to resume"
    done = sorted(p.name for p in (out / "_done").glob("*.json"))
    assert 1 <= len(done) < 3
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)
    assert rc == 0 and f"{len(done)}/3 shards resumed" in cap.out
    _assert_same_tables(reference, out)
    assert json.loads((out / "summary.json").read_text())["complete"]


# ----------------------------------------------------------------------------- class 5: corpus inputs

def test_deep_json_and_lone_surrogates_are_bad_documents_and_the_run_goes_on(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": TEXTS[0]}), "[" * 100_000 + "]" * 100_000, '{"text": "half \\ud800 a pair"}',
             '"\\udfff alone"', json.dumps({"text": TEXTS[1]})]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs, _ = C.read_inputs(src)
    assert [d["error"] is None for d in docs] == [True, False, False, False, True]
    assert docs[1]["error"].startswith("RecursionError") and "U+D800 at character 6" in docs[2]["error"]
    out = tmp_path / "out"
    rc, cap = _corpus(["--input", str(src), "--out", str(out)], capsys)
    assert rc == 0 and "5/5 documents (2 ok, 0 short, 3 error)" in cap.out
    res = C.load_result(out)
    assert list(res.documents.sort_values("doc")["status"]) == ["ok", "error", "error", "error", "ok"]


def test_undecodable_file_names_are_kept_as_escapes(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / os.fsdecode(b"caf\xe9.txt")).write_text(TEXTS[0], encoding="utf-8")
    docs, _ = C.read_inputs(d)
    assert docs[0]["doc_id"] == "caf\\xe9.txt" and docs[0]["doc_id"].encode("utf-8")


def test_fifo_and_devices_are_refused_not_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("attnkit.loading.load", lambda *a, **k: pytest.fail("the model was loaded"))
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)                                    # reading it would block for ever
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")                       # reading it would never end
    for src in (fifo, link, Path("/dev/zero")):
        rc, cap = _corpus(["--input", str(src), "--out", str(tmp_path / "out")], capsys)
        assert rc == 2 and "is not a regular file" in _one_line(cap.err)
    d = tmp_path / "folder"
    d.mkdir()
    os.mkfifo(d / "b.jsonl")
    _jsonl(d / "a.jsonl", TEXTS[:1])
    docs, notes = C.read_inputs(d)
    assert [x["doc_id"] for x in docs] == ["a.jsonl:1"] and "1 entries" in notes[0] and "FIFOs" in notes[0]


def test_a_field_no_document_has_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("attnkit.loading.load", lambda *a, **k: pytest.fail("the model was loaded"))
    src = tmp_path / "docs.jsonl"
    src.write_text('{"body": "a"}\n{"body": "b"}\n', encoding="utf-8")
    rc, cap = _corpus(["--input", str(src), "--out", str(tmp_path / "out")], capsys)
    line = _one_line(cap.err)
    assert rc == 2 and "no document has the field 'text'" in line and "body" in line and "--field" in line
    assert not (tmp_path / "out").exists()
    src.write_text('{"text": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(C.CorpusError, match="none of the 2 document"):
        C.read_inputs(src)


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


NEEDS_RAY = "--engine ray needs Ray: pip install ray"          # the one line on a machine without Ray


def test_ray_address_that_does_not_answer_fails_fast(inputs, tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                          # nothing listens there now
    t0 = time.perf_counter()
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(tmp_path / "out"), "--engine", "ray",
                       "--address", f"127.0.0.1:{port}"], capsys)
    want = f"cannot reach the Ray cluster at 127.0.0.1:{port}" if _has_ray() else NEEDS_RAY
    assert rc == 2 and want in _one_line(cap.err)
    assert time.perf_counter() - t0 < E.CONNECT_TIMEOUT + 30
    with pytest.raises(C.CorpusError, match="expected auto or HOST:PORT"):
        E.check_ray_request("head:port")


def test_ray_address_that_never_answers_or_is_not_ray_is_one_line(inputs, tmp_path, capfd, monkeypatch):
    def never(address, timeout):
        assert timeout == 0.2
        raise TimeoutError("timed out")

    monkeypatch.setattr(E.socket, "create_connection", never)
    with pytest.raises(C.CorpusError, match=r"at 10.255.255.1:6379: no answer \(waited at most 0.2 s\)"):
        E.check_ray_request("10.255.255.1:6379", timeout=0.2)
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(E.socket, "create_connection", lambda *a, **k: open(os.devnull))    # something answers

    def not_ray(**kw):
        os.write(2, b"gcs_client.cc:210: Failed to get cluster ID from GCS server\n")      # as Ray's C++ does
        raise ConnectionError("Failed to connect to Ray cluster at 10.255.255.1:6379")

    monkeypatch.setattr(ray, "init", not_ray)
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(tmp_path / "out"), "--engine", "ray",
                       "--address", "10.255.255.1:6379"], capfd)      # capfd: what reaches file descriptor 2
    assert rc == 2 and _one_line(cap.err).endswith("cannot start or reach Ray at 10.255.255.1:6379: "
                                                   "ConnectionError: Failed to connect to Ray cluster at 10.255.255.1:6379")


def test_gpus_asked_of_a_machine_without_them_fail_fast(inputs, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(tmp_path / "out"), "--engine", "ray",
                       "--gpus-per-worker", "1"], capsys)
    assert rc == 2 and ("no GPU that torch can use" if _has_ray() else NEEDS_RAY) in _one_line(cap.err)

    class Cluster:                                     # a cluster reached by --address: its resources decide
        def __init__(self, res):
            self.res = res

        def cluster_resources(self):
            return self.res

    items = [{"shard": 0}]
    with pytest.raises(C.CorpusError, match="0 GPU.*no actor fits"):
        E._pool(Cluster({"CPU": 8.0}), {"threads": 1}, items, None, 1.0, None)
    with pytest.raises(C.CorpusError, match="2 CPU.*--threads 4.*no actor fits"):
        E._pool(Cluster({"CPU": 2.0}), {"threads": 4}, items, None, 0.0, None)
    assert E._pool(Cluster({"CPU": 2.0}), {"threads": 1}, items * 4, None, 0.0, None)[0] == 2


@pytest.mark.parametrize("args, message", [
    (["--gpus-per-worker", "nan"], "must be a finite number ≥ 0"),
    (["--gpus-per-worker", "-1"], "must be a finite number ≥ 0"),
    (["--field", "\udcff"], "not valid UTF-8"),
])
def test_corpus_flags_are_checked_while_parsing(args, message, inputs, tmp_path, capsys):
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(tmp_path / "o"), *args], capsys)
    assert rc == 2 and message in _one_line(cap.err, "python -m attnkit corpus: error:")


# ----------------------------------------------------------------------------- class 1 and 6: train-default

def _train(argv, capsys):
    from attnkit.cli.train_default import cli

    try:
        rc = cli(argv)
    except SystemExit as e:          # argparse's exit (main() turns it into the return code)
        rc = e.code
    return rc, capsys.readouterr()


@pytest.fixture
def no_training(monkeypatch):
    from attnkit.dev import train as TR

    monkeypatch.setattr(TR, "train", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(TR, "build_corpus", lambda *a, **k: pytest.fail("training started"))


def test_train_default_never_writes_the_shipped_model_by_default(no_training, capsys):
    from attnkit.dev import train as TR

    shipped = TR.DEFAULT_OUT
    before = {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()}
    rc, cap = _train(["--tiny-test"], capsys)                                  # the example
    assert rc == 2 and "--out is required" in _one_line(cap.err, "python -m attnkit train-default: error:")
    for argv in (["--tiny-test", "--out", str(shipped)], ["--out", str(shipped), "--card-only"]):
        rc, cap = _train(argv, capsys)
        assert rc == 2 and "only with --overwrite-shipped" in _one_line(cap.err, "python -m attnkit train-default:")
    assert {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()} == before
    with pytest.raises(TR.TrainError, match="shipped"):                          # the library default too
        TR.check_out(str(shipped))
    with pytest.raises(TR.TrainError, match="no output folder"):
        TR.check_out(TR.Options().out)


def test_train_default_refuses_a_foreign_folder(no_training, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    rc, cap = _train(["--tiny-test", "--out", str(tmp_path)], capsys)
    assert rc == 2 and "was not written by train-default" in _one_line(cap.err, "python -m attnkit train-default:")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_failed_retrain_leaves_the_earlier_model_as_it_was(tmp_path, capsys, monkeypatch):
    """A second run into a train-default folder that fails (here: diverges) changes nothing there; a
    run that completes replaces it."""
    from test_train import TINY_CORPUS

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    out = tmp_path / "model"
    assert _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out)], capsys)[0] == 0
    before = _snapshot(out)
    rc, cap = _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--lr", "1e30"], capsys)
    assert rc == 1 and "diverged" in _one_line(cap.err, "attnkit train-default:")
    assert _snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "model"]
    assert _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--seed", "5"], capsys)[0] == 0
    assert _snapshot(out)["model.safetensors"] != before["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "model"]


def _pickle_folder(d: Path) -> Path:
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 32}), encoding="utf-8")
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")                    # a pickle
    return d


@pytest.mark.parametrize("args, message", [
    (["--init-from", "MISSING"], "missing: no such folder"),
    (["--init-from", "PICKLE/pytorch_model.bin"], "is a file; give the model's folder"),
    (["--init-from", "PICKLE"], "pytorch_model.bin are pickle files, never loaded"),
    (["--compare-with", "PICKLE"], "holds no model.safetensors"),
    (["--n-head", "3"], "--n-head 3 does not divide --n-embd 32"),
    (["--weight-decay", "nan"], "must be a finite number ≥ 0"),
    (["--weight-decay", "inf"], "must be a finite number ≥ 0"),
    (["--text-repeat", "1.5"], "must be a share from 0 to 1"),
    (["--text-repeat", "0.6", "--random-repeat", "0.6"], "is more than all the rows"),
    (["--pos-shift", "-0.1"], "must be a finite number ≥ 0"),
    (["--long-frac", "0"], "share above 0"),
])
def test_train_default_bad_arguments_one_line_before_work(args, message, no_training, tmp_path, capsys):
    pickle = _pickle_folder(tmp_path / "pickle")
    args = [x.replace("PICKLE", str(pickle)).replace("MISSING", str(tmp_path / "missing")) for x in args]
    if args[0] == "--n-head":                  # --tiny-test fixes the head count; this one sets the shape
        argv = ["--out", str(tmp_path / "out"), "--n-embd", "32", *args]
    else:
        argv = ["--tiny-test", "--out", str(tmp_path / "out"), *args]
    rc, cap = _train(argv, capsys)
    assert rc == 2 and message in _one_line(cap.err, "python -m attnkit train-default: error:")
    assert not (tmp_path / "out").exists()


def test_heads_on_a_zero_layer_model_is_one_line(tmp_path, capsys):
    from helpers import make_checkpoint

    d = make_checkpoint(tmp_path / "zero", n_layer=0, n_head=2, n_embd=16, n_positions=32, vocab_size=100,
                        bos_token_id=0, eos_token_id=0)
    rc = main(["heads", "--model", str(d)])
    err = capsys.readouterr().err
    assert rc == 2 and "n_layer=0" in _one_line(err, "attnkit heads:")


def test_long_commands_report_progress_on_stderr(capsys):
    """Class 8: a long CLI run (per-position patching at hundreds of tokens) says how far it is and what is
    left; a short one prints nothing."""
    import io

    from attnkit.cli.progress import Ticker

    quiet = io.StringIO()
    t = Ticker("attnkit patch", "patched runs", stream=quiet)          # default: silent for the first 2 s
    t(1, 10), t(10, 10)
    assert quiet.getvalue() == ""
    out = io.StringIO()
    t = Ticker("attnkit patch", "patched runs", stream=out, after=0, every=0)
    t(250, 1000), t(1000, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("attnkit patch: 250/1,000 patched runs · ") and "left" in lines[0]
    assert lines[1].startswith("attnkit patch: 1,000/1,000 patched runs") and "left" not in lines[1]


def test_patch_cli_passes_its_progress_to_the_library(monkeypatch, capsys):
    from attnkit.cli import patch as patch_cli
    from attnkit.cli.progress import Ticker

    seen = {}
    real = patch_cli.patch

    def spy(*a, **k):
        seen["progress"] = k.get("progress")
        return real(*a, **k)

    monkeypatch.setattr(patch_cli, "patch", spy)
    rc = patch_cli.cli(["--model", "attnkit-tiny", "--clean", "Install the kernel source. Install the kernel",
                        "--corrupt", "Install the kernel binary. Install the kernel", "--answer", " source",
                        "--distractor", " binary"])
    assert rc == 0 and isinstance(seen["progress"], Ticker)
