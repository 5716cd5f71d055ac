"""Issue 44, classes 18 and 19: every count a command takes has a stated maximum (one line, exit 2, before any work:
``calibrate --pairs 10**9`` once grew to 2.9 GB printing nothing); an unusable ATTNKIT_CACHE is refused in one line
instead of silently replaced by another folder; a full disk is one line, not a traceback."""
from __future__ import annotations

import importlib
import json

import pytest

from attnkit import diskcache
from attnkit.cli import COMMANDS, args as cli_args, main
from helpers import make_checkpoint

BIG = str(10**9)


def _parsers():
    """(command, parser) for every command and the dev entry points."""
    from attnkit.cli import bench
    from attnkit.dev.planted.__main__ import _parser as planted

    out = []
    for name, (module, _) in COMMANDS.items():
        mod = importlib.import_module(module)
        out.append((name, (getattr(mod, "parser", None) or mod._parser)()))
    return out + [("bench --family", bench._family_parser()), ("attnkit.dev.planted", planted())]


#: options of a whole-number type without a top of its own, each with where its maximum is stated
BOUNDED_ELSEWHERE = {(c, o) for c in ("corpus", "atlas") for o in ("window", "batch", "shard_docs", "threads")}          # attnkit.corpus.settings_for: one message for library and CLI
UNBOUNDED = (cli_args.positive_int, cli_args.nonneg_int, cli_args.whole_number)


def test_every_whole_number_option_has_a_stated_maximum():
    loose = []
    for name, p in _parsers():
        for a in p._actions:
            t = a.type
            if t in UNBOUNDED or getattr(t, "__name__", "").startswith("int_at_least"):
                if (name, a.dest) not in BOUNDED_ELSEWHERE:
                    loose.append(f"{name} {a.option_strings}")
    assert not loose, loose


@pytest.fixture
def no_model(monkeypatch):
    from attnkit import loading

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))


PAIR = ["--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b"]


@pytest.mark.parametrize("argv, msg", [
    (["calibrate", "--pairs", BIG], "--pairs: must be from 1 to 100"),
    (["why", "--text", "a b", "--head", "L0H0", "--query", BIG], "--query: must be from 0 to 1,000,000"),
    (["why", "--text", "a b", "--head", "L0H0", "--query", "1", "--top", BIG], "--top: must be from 1 to 10,000"),
    (["entropy", "--text-file", "/etc/hostname", "--window", BIG], "--window: must be from 2 to 1,000,000"),
    (["entropy", "--text-file", "/etc/hostname", "--batch", BIG], "--batch: must be from 1 to 4,096"),
    (["entropy", "--text-file", "/etc/hostname", "--max-docs", BIG], "--max-docs: must be from 1 to 1,000,000"),
    (["entropy", "--text-file", "/etc/hostname", "--log-base", "nan"], "--log-base: must be a finite number > 0"),
    (["ablate", "--text-file", "/etc/hostname", "--intervention", "zero-head:L0H0", "--hull-iters", BIG],
     "--hull-iters: must be from 1 to 100,000"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--bench-docs", BIG], "--bench-docs"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--workers", BIG], "--workers"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--gpus-per-worker", "1e9"], "from 0 to 64"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--threads", BIG],
     "--threads must be at most 1,024"),
    (["corpus", "--input", "x", "--out", "/tmp/attnkit-never-made/x", "--shard-docs", BIG], "--shard-docs must be at most"),
    (["train-default", "--steps", BIG], "--steps: must be from 1 to 10,000,000"),
    (["train-default", "--n-embd", BIG], "--n-embd: must be from 1 to 16,384"),
    (["train-default", "--vocab-size", BIG], "--vocab-size"),
    (["train-default", "--snapshots", BIG], "--snapshots"),
    (["train-default", "--minutes", "1e9"], "--minutes: must be at most 10,080"),
])
def test_counts_beyond_their_maximum_are_one_line_before_any_work(argv, msg, no_model, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("value, msg", [
    ("relative/cache", "ATTNKIT_CACHE='relative/cache' is a relative path"),
    ("/etc/hostname", "is not a folder"),
])
def test_an_unusable_attnkit_cache_is_refused_in_one_line(value, msg, monkeypatch, no_model, capsys):
    monkeypatch.setenv("ATTNKIT_CACHE", value)
    assert main(["training", "--series", "attnkit-tiny-steps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "--no-cache" in err[0], err


def test_the_library_refuses_a_relative_cache_rather_than_using_another_folder(monkeypatch, tmp_path):
    from attnkit import series as series_mod, training

    monkeypatch.setenv("ATTNKIT_CACHE", "cache")
    with pytest.raises(diskcache.CacheError, match="relative path"):
        diskcache.cache_folder("series")
    with pytest.raises(diskcache.CacheError):
        training.analyse(series_mod.resolve(series_mod.SHIPPED_SERIES_NAME))
    monkeypatch.setenv("ATTNKIT_CACHE", "~/somewhere")                  # ~ is expanded: absolute
    assert diskcache.cache_folder("x").is_absolute() and diskcache.cache_problem() is None
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "c"))
    assert diskcache.cache_folder("series") == tmp_path / "c" / "series" and diskcache.cache_problem() is None


def test_training_json_on_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    """The issue's example: ``training --json /dev/full`` ended in a traceback."""
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    s = tmp_path / "series"
    make_checkpoint(s / "step-000000", n_layer=1, n_head=2, n_embd=16, n_positions=64, vocab_size=500,
                    bos_token_id=0, eos_token_id=0)
    (s / "series.json").write_text(json.dumps({"checkpoints": [{"step": 0, "folder": "step-000000"}]}))
    assert main(["training", "--series", str(s), "--json", "/dev/full"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["attnkit training: cannot write /dev/full: No space left on device"], err
