"""Corpus runs never destroy results and survive hostile inputs: other documents and foreign folders
are refused, damaged shards recomputed, an interrupted run (a real SIGINT) resumes to the uninterrupted
run's tables; deep JSON, lone surrogates, FIFOs and devices, Ray addresses that do not answer, GPUs
asked of a CPU machine and a field no document has are one-line errors or bad documents.
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
from hostile import only_line, snapshot


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


SLOW_RUN = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
import attnkit.corpus.engines as E
real = E.ShardWorker.process
E.ShardWorker.process = lambda self, docs: (time.sleep(0.5), real(self, docs))[1]
from attnkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


NEEDS_RAY = "--engine ray needs Ray: pip install ray"          # the one line on a machine without Ray


def test_other_documents_are_refused_and_nothing_is_touched(inputs, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["corpus", *FLAGS, "--input", str(inputs["all"]), "--out", str(out)]) == 0
    before = snapshot(out)
    for args in (["--input", str(inputs["all"]), "--max-docs", "2"],      # smaller --max-docs
                 ["--input", str(inputs["other"])]):                         # another input
        rc, cap = _corpus([*args, "--out", str(out)], capsys)
        assert rc == 2 and "holds a run over other documents" in only_line(cap.err)
        assert snapshot(out) == before                                     # not a byte changed
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)   # same input: resumes
    assert rc == 0 and "3/3 shards resumed" in cap.out
    after = snapshot(out)                  # the resume rewrites summary.json (its "created" time, to the second)
    assert {k for k in after if after[k] != before.get(k)} <= {"summary.json"} and after.keys() == before.keys()
    before = after
    with pytest.raises(C.CorpusError, match="other documents"):             # the library refuses the same way
        C.run_corpus(inputs["all"], out, model="attnkit-tiny", analyses="heads,entropy", window=16,
                     shard_docs=2, max_docs=4, bootstrap=0)
    assert snapshot(out) == before
    rc, cap = _corpus(["--input", str(inputs["all"]), "--max-docs", "4", "--out", str(out), "--redo-changed"], capsys)
    assert rc == 0 and not (out / "_done" / "part-00002.json").exists()     # asked for: the shard past the end goes


def test_foreign_folder_is_refused_before_any_work(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("attnkit.loading.load", lambda *a, **k: pytest.fail("the model was loaded"))
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work", encoding="utf-8")
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)
    assert rc == 2 and "was not written by attnkit corpus" in only_line(cap.err, "python -m attnkit corpus: error:")
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


@pytest.mark.slow
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
    assert only_line(err) == "attnkit corpus: interrupted; finished shards kept, rerun to resume"
    done = sorted(p.name for p in (out / "_done").glob("*.json"))
    assert 1 <= len(done) < 3
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(out)], capsys)
    assert rc == 0 and f"{len(done)}/3 shards resumed" in cap.out
    _assert_same_tables(reference, out)
    assert json.loads((out / "summary.json").read_text())["complete"]


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
        assert rc == 2 and "is not a regular file" in only_line(cap.err)
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
    line = only_line(cap.err)
    assert rc == 2 and "no document has the field 'text'" in line and "body" in line and "--field" in line
    assert not (tmp_path / "out").exists()
    src.write_text('{"text": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(C.CorpusError, match="none of the 2 document"):
        C.read_inputs(src)


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
    assert rc == 2 and want in only_line(cap.err)
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
    assert rc == 2 and only_line(cap.err).endswith("cannot start or reach Ray at 10.255.255.1:6379: "
                                                   "ConnectionError: Failed to connect to Ray cluster at 10.255.255.1:6379")


def test_gpus_asked_of_a_machine_without_them_fail_fast(inputs, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    rc, cap = _corpus(["--input", str(inputs["all"]), "--out", str(tmp_path / "out"), "--engine", "ray",
                       "--gpus-per-worker", "1"], capsys)
    assert rc == 2 and ("no GPU that torch can use" if _has_ray() else NEEDS_RAY) in only_line(cap.err)

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
    assert rc == 2 and message in only_line(cap.err, "python -m attnkit corpus: error:")
