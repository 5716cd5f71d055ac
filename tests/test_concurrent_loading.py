"""Issue 44, class 13: loading models from several threads at once (a dashboard serves many sessions; each
Training job loads checkpoints in its own thread). transformers builds a model under process-wide switches
(torch's default dtype, torch.nn.init and PreTrainedModel.init_weights/tie_weights swapped out, the meta
device); attnkit.checkpoint.HF_BUILD_LOCK makes those builds one at a time. Without it, 4 threads failed 22
of 28 loads (wrong dtype, meta tensors, a missing lm_head.weight)."""
from __future__ import annotations

import json
import threading

import pytest
import torch

from attnkit.loading import load
from helpers import apptest, make_checkpoint, make_family_checkpoint

SHIPPED = ["attnkit-tiny", "attnkit-tiny-zh", "planted-induction", "planted-llama"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("concurrent")
    gpt2 = make_checkpoint(root / "gpt2", n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=500,
                           bos_token_id=0, eos_token_id=0)
    llama = make_family_checkpoint(root / "llama", "smollm2-135m", hidden_size=64, intermediate_size=128,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    return [str(gpt2), str(llama)]


def _at_once(names: list[str]) -> list:
    """Load every name in its own thread, all released together; each a Loaded or the exception raised."""
    out: list = [None] * len(names)
    gate = threading.Barrier(len(names))

    def one(i: int) -> None:
        gate.wait()
        try:
            out[i] = load(names[i], "cpu")
        except Exception as e:             # noqa: BLE001 - reported by the assertion below
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(names))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


def _same_model(a, b) -> None:
    sa, sb = a.hf_model.state_dict(), b.hf_model.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and not sa[k].is_meta, k
        assert torch.equal(sa[k], sb[k]), k
    tied = [m.hf_model.get_output_embeddings().weight is m.hf_model.get_input_embeddings().weight for m in (a, b)]
    assert tied[0] == tied[1]                  # lm_head tied to the embedding exactly when a lone load ties it
    assert a.tokenizer.encode("attention at once") == b.tokenizer.encode("attention at once")


def test_eight_threads_loading_at_once_all_succeed_and_equal_a_lone_load(built):
    names = SHIPPED + built + SHIPPED[:2]
    alone = {n: load(n, "cpu") for n in dict.fromkeys(names)}
    got = _at_once(names)
    failed = [(n, repr(g)) for n, g in zip(names, got) if isinstance(g, Exception)]
    assert not failed, failed
    for n, g in zip(names, got):
        assert next(g.hf_model.parameters()).dtype == torch.float32, n
        _same_model(g, alone[n])
    assert torch.get_default_dtype() == torch.float32          # the process-wide default is left as it was


def _series(root):
    rows = []
    for k, step in enumerate([0, 100, 200]):
        make_checkpoint(root / f"step-{step:06d}", seed=k, n_layer=2, n_head=2, n_embd=32, n_positions=128,
                        vocab_size=400)
        rows.append({"step": step, "folder": f"step-{step:06d}"})
    (root / "series.json").write_text(json.dumps({"checkpoints": rows}), encoding="utf-8")
    return root


def test_several_training_sessions_at_once_all_finish(tmp_path, monkeypatch):
    """Four sessions of the Training page opened at once on a new series: each one's job loads the series'
    checkpoints (two jobs compute at once, in threads of one process); every session shows the curves and
    no error."""
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    folder = _series(tmp_path / "steps")
    n = 4
    sessions = [apptest("training", timeout=300, tr_series=str(folder)) for _ in range(n)]
    gate = threading.Barrier(n)
    errors: list = [None] * n

    def run(i: int) -> None:
        gate.wait()
        try:
            sessions[i].run()
        except Exception as e:             # noqa: BLE001 - reported below
            errors[i] = repr(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert errors == [None] * n, errors
    for at in sessions:
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        assert at.get("vega_lite_chart"), "no curves drawn"
