"""The training series' disk cache (issue 44, class 15): an entry is keyed by the content of the checkpoint's files; a
damaged entry of any kind is treated as absent (recomputed and written over, never a traceback); and a checkpoint
replaced while it is being read leaves nothing in the cache (the files are hashed and stamped again after the
computation, and the numbers are kept only when nothing changed)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import zipfile

import numpy as np
import pytest

from attnkit import diskcache, training
from attnkit import series as series_mod
from helpers import make_checkpoint

SHAPE = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=400)
TEXT = "the cat sat on the mat and the dog sat on the log, " * 8


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """A series of two checkpoints with different weights (step 0 and step 100)."""
    root = tmp_path_factory.mktemp("cache-series") / "steps"
    make_checkpoint(root / "step-000000", seed=0, **SHAPE)
    make_checkpoint(root / "step-000100", seed=1, **SHAPE)
    return root


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    diskcache.forget_digests()
    return tmp_path / "cache" / "series"


def _numbers(res) -> list:
    return res.frame().drop(columns="cached").to_dict("records")


def _resave(path, meta=None, **arrays):
    """The entry at ``path`` written again with some of its fields replaced."""
    with np.load(path, allow_pickle=False) as z:
        old_meta = json.loads(str(z["meta"][()]))
        old = {k: z[k] for k in z.files if k != "meta"}
    np.savez(path, meta=np.array(json.dumps({**old_meta, **(meta or {})})), **{**old, **arrays})


def _header_lies(path):
    """An entry whose patterns header claims 10¹² floats in a member of a few bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f2", "fortran_order": False, "shape": (10**6, 10**6)})
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["patterns.npy"] = buf.getvalue() + b"\0" * 8
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


DAMAGES = {
    "garbage": lambda p: p.write_bytes(os.urandom(3000)),
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "meta not JSON": lambda p: np.savez(p, meta=np.array("{not json"), patterns=np.zeros(2)),
    "stats a dict": lambda p: _resave(p, meta={"stats": {"previous-token": 1}}),
    "icl as text": lambda p: _resave(p, meta={"icl": "-0.105"}),
    "k_pair a number": lambda p: _resave(p, meta={"k_pair": 3}),
    "tokens not text": lambda p: _resave(p, meta={"pattern_tokens": [1, 2]}),
    "another format": lambda p: _resave(p, meta={"format": training.FORMAT - 1}),
    "patterns wrong shape": lambda p: _resave(p, patterns=np.zeros((2, 2, 3, 3), np.float16)),
    "patterns wrong dtype": lambda p: _resave(p, patterns=np.load(p)["patterns"].astype(np.float32)),
    "induction wrong shape": lambda p: _resave(p, induction_seq=np.zeros((4, 2, 5))),
    "a statistic missing": lambda p: _resave(p, stat0=np.zeros((3, 3))),
    "header lies": _header_lies,
    "a FIFO": lambda p: (p.unlink(), os.mkfifo(p)),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_entry_is_recomputed_and_written_over(two, cache, damage):
    s = series_mod.resolve(str(two))
    fresh = training.analyse(s, TEXT)
    entries = sorted(cache.glob("*.npz"))
    assert len(entries) == 2 and not any(c.cached for c in fresh.checkpoints)
    DAMAGES[damage](entries[0])
    again = training.analyse(s, TEXT)                    # no traceback, and the numbers of a fresh computation
    assert sum(c.cached for c in again.checkpoints) == 1 and _numbers(again) == _numbers(fresh)
    third = training.analyse(s, TEXT)                    # the damaged entry was written over with good numbers
    assert all(c.cached for c in third.checkpoints) and _numbers(third) == _numbers(fresh)


def test_another_checkpoints_entry_under_this_key_is_not_used(two, cache):
    """An entry copied under another key's name (same format, valid arrays) names its own key: refused."""
    s = series_mod.resolve(str(two))
    fresh = training.analyse(s, TEXT)
    keys = [training._cache_key(m, training.Settings(text=TEXT), "cpu")[0] for m in s.members]
    shutil.copy(cache / f"{keys[1]}.npz", cache / f"{keys[0]}.npz")
    again = training.analyse(s, TEXT)
    assert [c.cached for c in again.checkpoints] == [False, True] and _numbers(again) == _numbers(fresh)


def test_a_checkpoint_replaced_while_being_read_leaves_nothing_in_the_cache(two, cache, tmp_path, monkeypatch):
    """step-000000's weights are swapped for step-000100's after its key is computed and before the model is
    read (as a copy finishing during a run): the numbers computed are step 100's. Without the check they were kept
    under step 0's key, and once the file was back step 0 read step 100's numbers from the cache (issue 44: cached
    ICL −0.105 against +0.143 recomputed). With it nothing is kept, and step 0 is recomputed."""
    root = tmp_path / "steps"
    shutil.copytree(two, root)
    weights = root / "step-000000" / "model.safetensors"
    original, other = weights.read_bytes(), (root / "step-000100" / "model.safetensors").read_bytes()
    truth = training.analyse(series_mod.resolve(str(root)), TEXT, use_cache=False)
    real_load = training.loading.load
    swapped = []

    def load_while_replaced(name, device):
        if name.endswith("step-000000") and not swapped:
            (root / "swap.tmp").write_bytes(other)
            os.replace(root / "swap.tmp", weights)
            swapped.append(name)
        return real_load(name, device)

    monkeypatch.setattr(training.loading, "load", load_while_replaced)
    s = series_mod.resolve(str(root))
    mixed = training.analyse(s, TEXT)
    assert swapped and _numbers(mixed)[0]["induction"] == _numbers(truth)[1]["induction"]   # step 100's numbers
    assert len(list(cache.glob("*.npz"))) == 1                         # only step 100's entry was written
    (root / "swap.tmp").write_bytes(original)
    os.replace(root / "swap.tmp", weights)                              # the checkpoint as it was
    after = training.analyse(s, TEXT)
    assert [c.cached for c in after.checkpoints] == [False, True]
    assert _numbers(after) == _numbers(truth) and _numbers(after)[0]["induction"] != _numbers(mixed)[0]["induction"]


def test_a_file_rewritten_with_its_size_and_time_is_hashed_again(tmp_path):
    """The remembered digest is keyed by inode and change time too: a file replaced by one of the same size and
    modification time (cp -p, rsync -t), or rewritten in place with its time set back, is read again."""
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"a" * 64)
    first, st = diskcache.file_digest(f), f.stat()
    (tmp_path / "new").write_bytes(b"b" * 64)
    os.utime(tmp_path / "new", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp_path / "new", f)
    second = diskcache.file_digest(f)
    with open(f, "r+b") as fh:
        fh.write(b"c" * 64)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = diskcache.file_digest(f)
    assert (first, second, third) == tuple(hashlib.sha256(c * 64).hexdigest() for c in (b"a", b"b", b"c"))


def test_a_fifo_weights_file_is_never_hashed(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")
    with pytest.raises(Exception, match="is a FIFO"):
        diskcache.file_digest(tmp_path / "model.safetensors")
