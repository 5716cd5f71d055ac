"""train-default never writes the shipped model unless told to, refuses foreign folders, leaves the
earlier model as it was when a retrain fails, and checks its arguments in one line before any work.
"""
import json
from pathlib import Path

import pytest

from attnkit.cli import main
from hostile import only_line, snapshot


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


def _pickle_folder(d: Path) -> Path:
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 32}), encoding="utf-8")
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")                    # a pickle
    return d


def test_train_default_never_writes_the_shipped_model_by_default(no_training, capsys):
    from attnkit.dev import train as TR

    shipped = TR.DEFAULT_OUT
    before = {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()}
    rc, cap = _train(["--tiny-test"], capsys)                                  # the example
    assert rc == 2 and "--out is required" in only_line(cap.err, "python -m attnkit train-default: error:")
    for argv in (["--tiny-test", "--out", str(shipped)], ["--out", str(shipped), "--card-only"]):
        rc, cap = _train(argv, capsys)
        assert rc == 2 and "only with --overwrite-shipped" in only_line(cap.err, "python -m attnkit train-default:")
    assert {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()} == before
    with pytest.raises(TR.TrainError, match="shipped"):                          # the library default too
        TR.check_out(str(shipped))
    with pytest.raises(TR.TrainError, match="no output folder"):
        TR.check_out(TR.Options().out)


def test_train_default_refuses_a_foreign_folder(no_training, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    rc, cap = _train(["--tiny-test", "--out", str(tmp_path)], capsys)
    assert rc == 2 and "was not written by train-default" in only_line(cap.err, "python -m attnkit train-default:")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_failed_retrain_leaves_the_earlier_model_as_it_was(tmp_path, capsys, monkeypatch):
    """A second run into a train-default folder that fails (here: diverges) changes nothing there; a
    run that completes replaces it."""
    from test_train import TINY_CORPUS

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS, encoding="utf-8")
    out = tmp_path / "model"
    assert _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out)], capsys)[0] == 0
    before = snapshot(out)
    rc, cap = _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--lr", "1e30"], capsys)
    assert rc == 1 and "diverged" in only_line(cap.err, "attnkit train-default:")
    assert snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "model"]
    assert _train(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--seed", "5"], capsys)[0] == 0
    assert snapshot(out)["model.safetensors"] != before["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "model"]


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
    assert rc == 2 and message in only_line(cap.err, "python -m attnkit train-default: error:")
    assert not (tmp_path / "out").exists()
