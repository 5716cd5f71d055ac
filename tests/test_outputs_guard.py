"""Issue 44, class 12: no command writes over an input it reads, into a shipped model's folder, or into a folder it
did not create. Every command of ``attnkit.cli.COMMANDS`` (and the dev entry points) is run with its output option
pointed at its own input — directly, through a symbolic link, a hard link and ``..`` — and at a model's
config.json / model.safetensors: each is refused in one line with exit 2 before any model is loaded, and the file
is byte-identical afterwards. Writes are whole or nothing (a temporary file renamed over the target)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from attnkit.cli import COMMANDS, main
from attnkit.loading import SHIPPED
from helpers import make_checkpoint

SHIPPED_CONFIG = SHIPPED["attnkit-tiny"] / "config.json"
PLANTED_CONFIG = SHIPPED["planted-induction"] / "config.json"
PAIR = ["--clean", "a b", "--corrupt", "a c", "--answer", "b", "--distractor", "c"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A model folder (M), a text file (T), a prompt-set file (P), a JSON-lines corpus (J) and a series (S)."""
    root = tmp_path_factory.mktemp("guard")
    m = make_checkpoint(root / "model", n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=500,
                        bos_token_id=0, eos_token_id=0)
    (root / "t.txt").write_text("some text to read " * 20, encoding="utf-8")
    (root / "p.jsonl").write_text(json.dumps({"clean": "a b", "corrupt": "a c", "answer": "b", "distractor": "c"})
                                  + "\n", encoding="utf-8")
    (root / "corpus").mkdir()
    (root / "corpus" / "j.jsonl").write_text(json.dumps({"text": "a document"}) + "\n", encoding="utf-8")
    s = root / "series"
    shutil.copytree(m, s / "step-000000")
    (s / "series.json").write_text(json.dumps({"checkpoints": [{"step": 0, "folder": "step-000000"}]}))
    return {"M": m, "T": root / "t.txt", "P": root / "p.jsonl", "J": root / "corpus" / "j.jsonl",
            "C": root / "corpus", "S": s, "root": root}


#: command -> (its arguments, [(output option, the input it is pointed at)]); {X} is a path of ``files``
CASES = {
    "verify": (["--model", "{M}"], [("--json", "{M}/config.json"), ("--json", "{M}/model.safetensors")]),
    "bench": (["--model", "{M}", "--quick", "--no-memory"], [("--json", "{M}/config.json")]),
    "entropy": (["--model", "{M}", "--text-file", "{T}"], [("--json", "{T}"), ("--json", "{M}/config.json")]),
    "ablate": (["--model", "{M}", "--text-file", "{T}", "--intervention", "zero-head:L0H0"], [("--json", "{T}")]),
    "patch": (["--model", "{M}", *PAIR], [("--json", "{M}/model.safetensors")]),
    "attribute": (["--model", "{M}", *PAIR], [("--json", "{M}/config.json")]),
    "heads": (["--model", "{M}"], []),                                        # writes nothing
    "app": ([], []),
    "atlas": (["--model", "{M}", "--corpus", "{C}", "--out", "{root}/atlas-out"], [("--json", "{M}/config.json"), ("--out", "{C}")]),
    "sinks": (["--model", "{M}", "--text-file", "{T}", "--tokens", "64"], [("--json", "{T}"), ("--json", "{M}/config.json")]),                                                          # writes nothing (starts Streamlit)
    "corpus": (["--model", "{M}", "--input", "{C}"], [("--out", "{C}"), ("--out", "{M}"), ("--json", "{J}")]),
    "train-default": (["--tiny-test", "--corpus-file", "{T}", "--init-from", "{M}"],
                      [("--out", "{M}"), ("--out", "{root}")]),
    "compose": (["--model", "{M}"], [("--json", "{M}/config.json")]),
    "training": (["--series", "{S}", "--text-file", "{T}"],
                 [("--json", "{S}/step-000000/config.json"), ("--json", "{T}")]),
    "circuit": (["--model", "{M}", *PAIR, "--pairs", "{P}"], [("--json", "{P}")]),
    "calibrate": ([], [("--json", str(PLANTED_CONFIG))]),
    "why": (["--model", "{M}", "--text", "a b", "--head", "L0H0", "--query", "1"],
            [("--json", "{M}/config.json"), ("--json", "{M}/model.safetensors")]),
}


@pytest.fixture
def nothing_runs(monkeypatch):
    from attnkit import loading
    from attnkit.dev import train as TR

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    monkeypatch.setattr(TR, "train", lambda *a, **k: pytest.fail("training started"))


def _refused(argv, target: Path, capsys, what: str = "") -> str:
    """Run ``argv``; it must exit 2 with one line naming ``what`` and leave ``target`` byte-identical."""
    before = target.read_bytes() if target.is_file() else None
    try:
        rc = main(argv)
    finally:
        if before is not None and target.read_bytes() != before:     # never leave a shipped file damaged
            target.write_bytes(before)
            pytest.fail(f"{target} was overwritten by {argv}")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "Traceback" not in err[0], (argv, rc, err)
    assert what in err[0], (what, err)
    return err[0]


def test_every_command_is_covered():
    assert set(CASES) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_pointed_at_the_commands_own_input_is_refused(command, files, nothing_runs, capsys):
    base, outs = CASES[command]
    fill = {k: str(v) for k, v in files.items()}
    for opt, target in outs:
        target = target.format(**fill)
        _refused([command, *[a.format(**fill) for a in base], opt, target], Path(target), capsys, f"argument {opt}:")


@pytest.mark.parametrize("command", sorted(c for c in COMMANDS if CASES[c][1] and CASES[c][1][0][0] == "--json"))
def test_json_at_the_shipped_models_config_is_refused(command, files, nothing_runs, capsys):
    """Without --model the command reads a shipped model (or gpt2 from HuggingFace's cache): neither is
    written, whatever else the command reads."""
    base, _ = CASES[command]
    fill = {k: str(v) for k, v in files.items()}
    base = [a.format(**fill) for a in base]
    if "--model" in base:
        i = base.index("--model")
        base = base[:i] + base[i + 2:]
    _refused([command, *base, "--json", str(SHIPPED_CONFIG)], SHIPPED_CONFIG, capsys, "shipped models' folder")


def test_links_and_dotdot_to_an_input_are_refused(files, nothing_runs, tmp_path, capsys):
    m = files["M"]
    (tmp_path / "soft.json").symlink_to(m / "config.json")
    os.link(m / "config.json", tmp_path / "hard.json")
    os.link(files["T"], tmp_path / "hard.txt")
    why = ["why", "--model", str(m), "--text", "a b", "--head", "L0H0", "--query", "1", "--json"]
    _refused([*why, str(tmp_path / "soft.json")], m / "config.json", capsys, "inside the --model folder")
    _refused([*why, str(tmp_path / "hard.json")], m / "config.json", capsys, "hard link to a file of --model")
    _refused([*why, f"{m}/../{m.name}/config.json"], m / "config.json", capsys, "--model")
    _refused(["entropy", "--model", str(m), "--text-file", str(files["T"]), "--json", str(tmp_path / "hard.txt")],
             files["T"], capsys, "hard link to a file of --text-file")
    hub = tmp_path / "hub"
    (hub / "models--x--y" / "snapshots" / "0").mkdir(parents=True)
    cfg = hub / "models--x--y" / "snapshots" / "0" / "config.json"
    cfg.write_text("{}")
    from huggingface_hub import constants

    old = constants.HF_HUB_CACHE
    constants.HF_HUB_CACHE = str(hub)
    try:
        _refused(["compose", "--model", "x/y", "--json", str(cfg)], cfg, capsys, "HuggingFace's cache")
    finally:
        constants.HF_HUB_CACHE = old


@pytest.mark.parametrize("argv, what", [
    (["compose", "--json=--help"], "looks like an option"),
    (["train-default", "--tiny-test", "--out=--help"], "looks like an option"),
    (["corpus", "--input", "{J}", "--out=-o"], "looks like an option"),
    (["corpus", "--input", "{J}", "--out", "{root}/res", "--json", "{root}/res/bench.json"],
     "inside the --out folder"),
])
def test_option_like_names_and_outputs_inside_outputs_are_refused(argv, what, files, nothing_runs, capsys):
    fill = {k: str(v) for k, v in files.items()}
    (files["root"] / "res").mkdir(exist_ok=True)
    _refused([a.format(**fill) for a in argv], files["T"], capsys, what)
    assert not Path("--help").exists() and not Path("-o").exists()


def test_planted_builder_never_overwrites_a_folder_it_did_not_write(files, nothing_runs, tmp_path, capsys):
    from attnkit.dev import planted
    from attnkit.dev.planted.__main__ import main as planted_main

    mine = tmp_path / "mine" / "planted-induction"
    mine.mkdir(parents=True)
    (mine / "model.safetensors").write_bytes(b"the user's own weights")
    for argv, what in (([str(tmp_path / "mine")], "not empty and was not written by this command"),
                       ([str(files["T"])], "is a file, not a folder"),
                       (["--out"], "unrecognized arguments"),
                       ([str(files["M"])], "not empty")):
        with pytest.raises(SystemExit) as e:
            planted_main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and what in err[0], err
    assert (mine / "model.safetensors").read_bytes() == b"the user's own weights"
    assert planted.MARKER and not (tmp_path / "mine" / planted.MARKER).exists()


def test_ship_series_never_replaces_a_folder_it_did_not_write(files, tmp_path, capsys):
    from attnkit.dev.train import ship_series

    run = tmp_path / "run"
    shutil.copytree(files["S"], run / "steps")
    (run / "steps" / "eval.txt").write_text("text")          # looks like a shipped series: still the run's own input
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    for dest, what in ((tmp_path / "other", "not empty and was not written by ship_series"),
                       (run / "steps", "the run_out input"), (SHIPPED["attnkit-tiny"], "not empty")):
        with pytest.raises(SystemExit) as e:
            ship_series.main([str(run), str(dest), "--command", "x"])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and what in err[0], err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_failed_write_leaves_the_old_file_and_no_half_file(tmp_path, monkeypatch, capsys):
    from attnkit.cli import outputs

    out = tmp_path / "r.json"
    out.write_text("old results")
    os.chmod(out, 0o640)

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", full)
    assert outputs.write_json(str(out), {"a": 1}, "attnkit x") is False
    assert capsys.readouterr().err.strip() == f"attnkit x: cannot write {out}: No space left on device"
    assert out.read_text() == "old results" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    monkeypatch.undo()
    link = tmp_path / "link.json"
    link.symlink_to(out)
    assert outputs.write_json(str(link), {"a": 1}, "attnkit x")
    assert link.is_symlink() and json.loads(out.read_text()) == {"a": 1} and oct(out.stat().st_mode & 0o777) == "0o640"
    assert outputs.write_json("/dev/full", {"a": 1}, "attnkit x") is False
    assert "cannot write /dev/full: No space left on device" in capsys.readouterr().err
