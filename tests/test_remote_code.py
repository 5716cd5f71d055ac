"""Code in a model folder never runs: a folder naming custom code is refused in one line before
transformers reads it, and no "[y/N]" question is ever asked, with or without a terminal.
"""
import builtins
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnkit import checkpoint
from attnkit.loading import load, LoadError
from hostile import _Delete, base, DELETE, edited, one_line, ROOT, SMALL


EVIL_PY = """import pathlib
pathlib.Path({marker!r}).write_text("custom code ran")
from transformers import GPT2TokenizerFast, GPT2Config, GPT2LMHeadModel
class EvilTokenizer(GPT2TokenizerFast):
    pass
class EvilConfig(GPT2Config):
    pass
class EvilModel(GPT2LMHeadModel):
    pass
"""


CUSTOM_CODE = [
    ("tokenizer_config.json", {"auto_map": {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]},
                               "tokenizer_class": "EvilTokenizer"}, "auto_map in tokenizer_config.json"),
    ("tokenizer_config.json", {"tokenizer_class": "EvilTokenizer"}, "tokenizer_class 'EvilTokenizer'"),
    ("config.json", {"auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}},
     "auto_map in config.json"),
    ("config.json", {"trust_remote_code": True}, "trust_remote_code in config.json"),
]


def evil_folder(base, tmp_path, file, changes) -> tuple[Path, Path]:
    marker = tmp_path / "marker.txt"
    folder = edited(base("gpt2"), tmp_path / "evil", file, **changes)
    (folder / "evil.py").write_text(EVIL_PY.format(marker=str(marker)))
    return folder, marker


@pytest.fixture
def no_questions(monkeypatch):
    """input() answers "y", as a user at a terminal might; every question asked is recorded."""
    asked = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": asked.append(prompt) or "y")
    return asked


def _run_on_a_terminal(argv, answer: bytes, timeout: float = 180) -> tuple[int, str]:
    """Run ``argv`` with stdin, stdout and stderr on a pseudo-terminal, ``answer`` typed ahead."""
    master, slave = pty.openpty()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    os.write(master, answer)
    out, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:            # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    rc = p.wait(timeout=10)
    return rc, out.decode("utf-8", "replace")


@pytest.mark.parametrize("file,changes,what", CUSTOM_CODE, ids=[w for _, _, w in CUSTOM_CODE])
def test_folder_naming_custom_code_is_refused_in_one_line(base, tmp_path, no_questions, file, changes, what):
    folder, marker = evil_folder(base, tmp_path, file, changes)
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    msg = one_line(str(e.value))
    assert f"names custom code ({what}" in msg and msg.endswith("attnkit never runs code from a model folder"), msg
    assert not marker.exists() and no_questions == []


def test_the_evil_folder_runs_its_code_when_trusted(base, tmp_path):
    """The fixture is live: a program that does trust it (not attnkit) runs evil.py and the marker appears."""
    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    code = ("import sys; from transformers import AutoTokenizer; "
            "AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)")
    r = subprocess.run([sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and marker.exists(), r.stderr[-1500:]


@pytest.mark.parametrize("file,changes,what", CUSTOM_CODE[::2], ids=[w for _, _, w in CUSTOM_CODE[::2]])
def test_without_the_precheck_transformers_is_still_told_no(base, tmp_path, no_questions, monkeypatch,
                                                             file, changes, what):
    """Every transformers call gets trust_remote_code=False: even if the folder check missed something,
    nothing is asked and nothing runs."""
    monkeypatch.setattr(checkpoint, "custom_code", lambda folder: None)
    folder, marker = evil_folder(base, tmp_path, file, changes)
    try:
        load(str(folder), "cpu")
    except LoadError as e:
        one_line(str(e))
    assert not marker.exists() and no_questions == []


def test_hub_model_naming_custom_code_is_refused_before_transformers_reads_it(base, tmp_path, monkeypatch):
    """A hub model not yet cached: its config.json and tokenizer_config.json (of the revision asked for)
    are fetched first and checked; transformers is never reached."""
    import huggingface_hub
    from transformers import AutoConfig

    from attnkit import loading

    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    fetched = []
    monkeypatch.setattr(loading, "_cached", lambda repo, revision=None: False)
    monkeypatch.setattr(loading, "_offline", lambda: False)
    monkeypatch.setattr(loading, "hub_available", lambda repo, timeout=3.0: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo, f, revision=None: fetched.append((f, revision)))
    monkeypatch.setattr(checkpoint, "snapshot_folder", lambda repo, revision=None: folder if fetched else None)
    monkeypatch.setattr(AutoConfig, "from_pretrained", lambda *a, **k: pytest.fail("transformers read the folder"))
    with pytest.raises(LoadError) as e:
        load("owner/evil@v2", "cpu")
    assert "'owner/evil@v2' names custom code (auto_map in tokenizer_config.json)" in one_line(str(e.value))
    assert fetched == [("config.json", "v2"), ("tokenizer_config.json", "v2")] and not marker.exists()


def test_transformers_refusing_custom_code_reads_as_the_same_line(base, monkeypatch):
    """Should transformers itself refuse (its ValueError about trust_remote_code), the user gets attnkit's line."""
    from transformers import AutoConfig

    def refuse(*a, **k):
        raise ValueError("The repository x contains custom code which must be executed to correctly load the "
                         "model.\nPlease pass the argument `trust_remote_code=True` to allow custom code to be run.")

    monkeypatch.setattr(AutoConfig, "from_pretrained", refuse)
    with pytest.raises(LoadError) as e:
        load(str(base("gpt2")), "cpu")
    assert one_line(str(e.value)).endswith("names custom code (transformers asked for trust_remote_code); "
                                           "attnkit never runs code from a model folder")


def test_every_transformers_call_in_the_loaders_refuses_remote_code():
    """The calls in loading.py and checkpoint.py that can import code (from_pretrained, from_config)
    all pass trust_remote_code=False (directly or via checkpoint.NO_CODE)."""
    import ast

    for name in ("loading.py", "checkpoint.py"):
        tree = ast.parse((ROOT / "attnkit" / name).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in {"from_pretrained", "from_config"}]
        assert calls, name
        for c in calls:
            kws = {k.arg for k in c.keywords}
            starred = [ast.unparse(k.value) for k in c.keywords if k.arg is None]
            assert "trust_remote_code" in kws or any("NO_CODE" in s or s == "kwargs" for s in starred), \
                f"{name}:{c.lineno} {ast.unparse(c)[:80]}"
    assert checkpoint.NO_CODE == {"trust_remote_code": False}


def test_cli_on_a_terminal_answering_yes_runs_nothing(base, tmp_path):
    folder, marker = evil_folder(base, tmp_path, *CUSTOM_CODE[0][:2])
    rc, out = _run_on_a_terminal([sys.executable, "-m", "attnkit", "heads", "--model", str(folder)], b"y\n")
    lines = [l for l in out.replace("\r", "").splitlines() if l.strip() and l.strip() != "y"]
    assert rc == 2 and len(lines) == 1, out
    assert "names custom code (auto_map in tokenizer_config.json)" in lines[0] and "[y/N]" not in out, out
    assert not marker.exists()
