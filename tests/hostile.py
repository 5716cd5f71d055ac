"""Helpers shared by the hostile-input test modules (fixtures and builders of bad checkpoints)."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from attnkit import checkpoint
from attnkit.loading import load, LoadError
from helpers import make_checkpoint, make_family_checkpoint, ROOT


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("tiny"), n_layer=2, n_head=2, n_embd=32, n_positions=64,
                           vocab_size=500)


def variant(tiny_dir, tmp_path, config=None, edit=None) -> Path:
    d = tmp_path / "ckpt"
    shutil.copytree(tiny_dir, d)
    if config:
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(config)
        (d / "config.json").write_text(json.dumps(cfg))
    if edit:
        edit(d)
    return d


def edit_weights(fn):
    def edit(d):
        from safetensors.torch import load_file, save_file

        sd = load_file(d / "model.safetensors")
        sd = fn(sd) or sd
        save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
    return edit


def refused(folder, *parts, within: float = 2.0) -> str:
    from attnkit.loading import LoadError, load

    t0 = time.perf_counter()
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    took = time.perf_counter() - t0
    msg = str(e.value)
    assert took < within, (took, msg)
    assert "\n" not in msg
    for p in parts:
        assert p in msg, (p, msg)
    return msg


class _Delete:
    def __repr__(self):
        return "DELETE"


DELETE = _Delete()


#: each family at a small width (the per-layer layout of the real shape, 64 wide)
SMALL = {
    "llama": ("smollm2-135m", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=16)),
    "mistral": ("mistral-window", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                       num_key_value_heads=2, head_dim=16, sliding_window=4)),
    "neox": ("pythia-70m", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4)),
    "neo": ("gpt-neo-125m", dict(hidden_size=64, intermediate_size=128, num_heads=4)),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """family -> a small random checkpoint folder of it, each built once."""
    built = {}

    def get(family):
        if family not in built:
            folder = tmp_path_factory.mktemp(family)
            if family == "gpt2":
                make_checkpoint(folder, n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=400,
                                bos_token_id=0, eos_token_id=0)
            else:
                shape, kw = SMALL[family]
                make_family_checkpoint(folder, shape, **kw)
            built[family] = folder
        return built[family]

    return get


def edited(src: Path, dst: Path, file: str = "config.json", **changes) -> Path:
    """A copy of the checkpoint ``src`` whose JSON ``file`` has ``changes`` (``a.b`` sets a nested key;
    DELETE removes one; NaN and ±Infinity are written as JSON's NaN / Infinity)."""
    shutil.copytree(src, dst)
    data = json.loads((dst / file).read_text())
    for key, value in changes.items():
        *path, last = key.split(".")
        node = data
        for p in path:
            node = node[p]
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    (dst / file).write_text(json.dumps(data, allow_nan=True))
    return dst


def one_line(msg: str) -> str:
    assert msg and "\n" not in msg.strip() and "Traceback" not in msg, msg
    return msg


def only_line(err: str, prefix: str = "attnkit corpus: ") -> str:
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("corpus [")]
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


def snapshot(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
