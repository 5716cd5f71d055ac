"""Real HuggingFace caches load: sharded snapshots whose files link into ``../../blobs``, and
``NAME@REVISION`` checked against that revision's snapshot (two widths, one per revision).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from attnkit import checkpoint
from helpers import cache_repo, make_checkpoint, make_tokenizer
from hostile import ROOT


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory):
    """A cache with owner/tiny: main is 64 wide in shards (max_shard_size), step1 is 32 wide in one file."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tmp = tmp_path_factory.mktemp("hfcache")
    wide, narrow = tmp / "wide", tmp / "narrow"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=400)).save_pretrained(
        wide, max_shard_size="150KB")
    make_checkpoint(narrow, seed=1, n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=400)
    make_tokenizer(wide)
    hub = tmp / "home" / "hub"
    commits = cache_repo(hub, "owner/tiny", {"main": wide, "step1": narrow})
    assert len(list(wide.glob("model-*.safetensors"))) >= 3      # really sharded
    return hub, commits


LOAD_FROM_CACHE = """
import json, sys
from attnkit.loading import load
from attnkit.verify import compare
import torch
out = {}
for name in sys.argv[1:]:
    m = load(name, "cpu")
    rep = compare(m.hf_model, m.weights, torch.randint(0, 400, (20,), generator=torch.Generator().manual_seed(0)))
    out[name] = [m.config.d_model, m.source, rep.ok, m.hf_model.transformer.wte.weight.shape[1]]
print(json.dumps(out))
"""


def test_cache_snapshot_shards_link_into_blobs_and_are_read(hf_cache):
    hub, commits = hf_cache
    snap = hub / "models--owner--tiny" / "snapshots" / commits["main"]
    files = checkpoint.weight_files(snap)
    assert len(files) >= 3 and all(f.is_symlink() and "blobs" in os.readlink(f) for f in files)
    assert checkpoint.read_header(files[0])


def test_cache_link_escaping_the_repository_is_refused(hf_cache, tmp_path):
    hub, commits = hf_cache
    root = hub / "models--owner--tiny"
    snap = root / "snapshots" / ("e" * 40)
    shutil.copytree(root / "snapshots" / commits["main"], snap, symlinks=True)
    index = json.loads((snap / checkpoint.INDEX_FILE).read_text())
    first = sorted(set(index["weight_map"].values()))[0]
    outside = tmp_path / "elsewhere.safetensors"
    shutil.copy(snap / first, outside)
    (snap / first).unlink()
    (snap / first).symlink_to(outside)
    with pytest.raises(checkpoint.CheckpointError, match="points outside its folder"):
        checkpoint.weight_files(snap)


def test_cached_model_and_its_revisions_load(hf_cache):
    """As a researcher with the hub has them: HF_HOME with the cache, offline; main (sharded, 64 wide),
    @step1 (a branch, 32 wide) and @<commit> each checked against their own snapshot."""
    hub, commits = hf_cache
    env = {**os.environ, "HF_HOME": str(hub.parent), "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    names = ["owner/tiny", "owner/tiny@step1", f"owner/tiny@{commits['step1']}", "owner/tiny@main"]
    r = subprocess.run([sys.executable, "-c", LOAD_FROM_CACHE, *names], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert [got[n][0] for n in names] == [64, 32, 32, 64]
    assert all(got[n][2] and got[n][3] == got[n][0] for n in names), got    # equal to HF, built at that width
