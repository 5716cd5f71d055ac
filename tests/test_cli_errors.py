"""Command-line values: one line on stderr, exit 2, before any work; --device cuda without CUDA runs
on the CPU.
"""
from __future__ import annotations

import json

import pytest
import torch


BAD_VALUES = [
    ("verify", ["--tokens", "-5"], "--tokens"),
    ("verify", ["--tokens", "0"], "--tokens"),
    ("heads", ["--induction-n", "0"], "--induction-n"),
    ("bench", ["--threads", "-1"], "--threads"),
    ("entropy", ["--text-file", "{txt}", "--window", "0"], "--window"),
    ("entropy", ["--text-file", "{txt}", "--batch", "0"], "--batch"),
    ("entropy", ["--text-file", "{txt}", "--max-docs", "0"], "--max-docs"),
    ("ablate", ["--text-file", "{txt}", "--intervention", "v=x", "--hull-iters", "-1"], "--hull-iters"),
    ("verify", ["--text", "abc\udcff"], "not valid UTF-8"),
    ("heads", ["--text-file", "{empty}"], "is empty"),
    ("heads", ["--text-file", "{blank}"], "only whitespace"),
    ("verify", ["--json", "/no/such/folder/r.json"], "does not exist"),
    ("verify", ["--json", "{dir}"], "is a folder"),
    ("entropy", ["--text-file", "{txt}", "--json", "/proc/attnkit.json"], "cannot write"),
    ("train-default", ["--out", "/proc/attnkit-out"], "cannot write"),
    ("train-default", ["--steps", "0"], "--steps"),
    ("verify", ["--device", "tpu"], "unknown device"),
]


@pytest.mark.parametrize("command,args,expect", BAD_VALUES, ids=[f"{c} {' '.join(a)}" for c, a, _ in BAD_VALUES])
def test_bad_cli_values_exit_2_with_one_line(command, args, expect, tmp_path, capsys, monkeypatch):
    from attnkit import loading
    from attnkit.cli import main

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    (tmp_path / "t.txt").write_text("some text " * 20)
    (tmp_path / "e.txt").write_text("")
    (tmp_path / "b.txt").write_text("  \n\t\n")
    paths = {"txt": tmp_path / "t.txt", "empty": tmp_path / "e.txt", "blank": tmp_path / "b.txt", "dir": tmp_path}
    args = [a.format(**paths) for a in args]
    assert main([command, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0] and "Traceback" not in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_cuda_without_cuda_runs_on_cpu(capsys):
    from attnkit.cli.verify import cli

    assert cli(["--model", "attnkit-tiny", "--device", "cuda", "--text", "Hello there, attention."]) == 0
    out = capsys.readouterr()
    assert "not available" in out.err and "running on the CPU" in out.err and "on cpu" in out.out
