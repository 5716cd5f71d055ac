"""Checkpoints that ask too much or are broken are refused from their headers before the model is built:
huge configs (with both numbers), memory, shape mismatches, missing tensors, truncated weights, tokenizers
larger than the embedding, malformed tokenizer.json, shard indexes pointing outside their folder.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from helpers import make_checkpoint
from hostile import edit_weights, refused, tiny_dir, variant


def _meta(cfg):
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    return m


def test_hundred_thousand_layers_refused_in_a_second(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_layer": 100_000})
    msg = refused(d, "100,000 layers")
    assert ("memory" in msg and "GB" in msg) or ("lacks" in msg and "transformer.h.2." in msg)


def test_huge_width_refused_with_both_numbers(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_embd": 10**7, "n_head": 2})
    msg = refused(d, "parameters", "float32", "memory available")
    assert msg.count("GB") >= 2 or msg.count("MB") >= 2


def test_memory_check_uses_the_machine_numbers(tiny_dir):
    from transformers import AutoConfig

    from attnkit import checkpoint as CK

    cfg = AutoConfig.from_pretrained(tiny_dir)
    need = CK.estimate_bytes(cfg)
    assert need == 4 * sum(p.numel() for p in _meta(cfg).parameters())
    with pytest.raises(CK.CheckpointError, match=r"parameters .* but this machine has only .* available"):
        CK.check_config(cfg, memory=need // 2)
    CK.check_config(cfg, memory=need * 2)
    avail = CK.available_memory()
    assert avail is None or avail > 0


def test_layer_template_matches_the_full_meta_model(tiny_dir):
    """Above FULL_META_LAYERS the names come from a 2-layer template: the same as building it all."""
    from transformers import AutoConfig

    from attnkit import checkpoint as CK

    cfg = AutoConfig.from_pretrained(tiny_dir)
    cfg.num_hidden_layers = CK.FULL_META_LAYERS + 3
    it, count, nbytes, _ = CK.expected_tensors(cfg)
    full, prefix = CK._tensors(_meta(cfg))
    assert sorted(it()) == sorted(full) and count == len(full)
    assert nbytes == sum(4 * torch.Size(s).numel() for _, s in full) and prefix == "transformer"


def test_shape_mismatch_is_one_plain_sentence(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_embd": 64})
    msg = refused(d, "does not fit config.json", "transformer.wte.weight", "[500, 32]", "[500, 64]")
    assert "ignore_mismatched_sizes" not in msg


def test_missing_tensor_is_named_not_random(tiny_dir, tmp_path):
    def drop(sd):
        del sd["transformer.h.1.attn.c_proj.weight"]
    d = variant(tiny_dir, tmp_path, edit=edit_weights(drop))
    refused(d, "lacks 1 ", "transformer.h.1.attn.c_proj.weight")


def test_tied_and_unprefixed_checkpoints_load(tiny_dir, tmp_path):
    """openai-community/gpt2 stores 'h.0…' without 'transformer.' and no lm_head (tied): that is fine."""
    from attnkit.loading import load

    d = variant(tiny_dir, tmp_path, edit=edit_weights(
        lambda sd: {k.removeprefix("transformer."): v for k, v in sd.items() if k != "lm_head.weight"}))
    m = load(str(d), "cpu")
    assert m.hf_model.lm_head.weight.data_ptr() == m.hf_model.transformer.wte.weight.data_ptr()


def test_truncated_weights_and_unsupported_activation(tiny_dir, tmp_path):
    def cut(d):
        b = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(b[: len(b) // 2])
    refused(variant(tiny_dir, tmp_path, edit=cut), "truncated")
    shutil.rmtree(tmp_path / "ckpt")
    from attnkit.families import family_for

    msg = refused(variant(tiny_dir, tmp_path, {"activation_function": "mish"}), "'mish'", "supported:")
    assert all(a in msg for a in family_for("gpt2").activations)


def test_tokenizer_larger_than_the_embedding(tmp_path):
    d = make_checkpoint(tmp_path / "small-vocab", n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=300)
    msg = refused(d, "400", "300", within=10)              # make_tokenizer trains 400 tokens
    assert "tokenizer" in msg and "embedding" in msg


def test_malformed_tokenizer_json_is_named(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, edit=lambda d: (d / "tokenizer.json").write_text('{"model": {'))
    refused(d, str(d / "tokenizer.json"), "malformed")


def test_shard_index_outside_its_folder_is_refused(tiny_dir, tmp_path):
    def shard(d):
        shutil.copy(d / "model.safetensors", d / "model-00001-of-00002.safetensors")
        (d / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors",
                                        "transformer.wpe.weight": "../elsewhere.safetensors"}}))
    refused(variant(tiny_dir, tmp_path, edit=shard), "points outside its folder", "elsewhere.safetensors")


def test_sharded_checkpoint_inside_its_folder_loads(tiny_dir, tmp_path):
    from attnkit.loading import load

    d = tmp_path / "sharded"
    m = load(str(tiny_dir), "cpu")
    m.hf_model.save_pretrained(d, max_shard_size="20KB")
    shutil.copy(tiny_dir / "tokenizer.json", d)
    assert (d / "model.safetensors.index.json").is_file()
    assert load(str(d), "cpu").config.n_layers == 2
