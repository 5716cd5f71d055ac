"""Audit 6(d): ``verify`` on config options of GPT-2, Llama, GPT-NeoX and GPT-Neo that HuggingFace cannot run
in float64 or that could break verify. Every option swept has a verdict and its reason (:data:`VERDICTS`):

* ``pass``     — verify runs and gives its verdict (PASS on these random-weight checkpoints);
* ``pass-off`` — HF refuses the option in float64: the float64 reference runs with it off, and says so;
* ``refused``  — attnkit does not implement it: refused before any work, in one line (exit 2), naming it.

The quick suite runs :data:`QUICK` (every verdict other than a plain ``pass``, and one option per family);
``ATTNKIT_VERIFY_SWEEP=all`` runs every row (about a minute on 2 idle cores)."""
from __future__ import annotations

import os

import pytest

from attnkit.cli import main
from helpers import make_checkpoint, make_family_checkpoint

GPT2 = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64)
SMALL = {"smollm2-135m": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16),
         "pythia-70m": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4),
         "gpt-neo-125m": dict(hidden_size=64, num_heads=4, window_size=4)}
TEXT = "one two three four five six seven eight nine ten eleven twelve"

#: option -> (family shape, config, verdict, reason). Measured with this file's test (and /tmp sweeps of the
#: same list) on transformers 5.
VERDICTS = {
    "gpt2 reorder_and_upcast_attn": ("gpt2", dict(reorder_and_upcast_attn=True), "pass-off",
        "HF refuses it in float64; it only reorders float32 steps, so the float64 reference runs with it off"),
    "gpt2 scale_attn_weights=False": ("gpt2", dict(scale_attn_weights=False), "pass", "ModelConfig.attn_scale"),
    "gpt2 scale_attn_by_inverse_layer_idx": ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), "pass",
        "ModelConfig.attn_scale divides by layer + 1"),
    "gpt2 activation relu": ("gpt2", dict(activation_function="relu"), "pass", "model.act"),
    "gpt2 activation gelu": ("gpt2", dict(activation_function="gelu"), "pass", "model.act (exact erf)"),
    "gpt2 activation silu": ("gpt2", dict(activation_function="silu"), "pass", "model.act"),
    "gpt2 activation gelu_pytorch_tanh": ("gpt2", dict(activation_function="gelu_pytorch_tanh"), "pass",
        "the tanh approximation, as gelu_new"),
    "gpt2 activation quick_gelu": ("gpt2", dict(activation_function="quick_gelu"), "pass",
        "x·σ(1.702·x), as HF's QuickGELUActivation (was refused before this sweep)"),
    "gpt2 activation tanh": ("gpt2", dict(activation_function="tanh"), "refused",
        "not a GPT-2 activation in any checkpoint; attnkit names the ones it implements"),
    "gpt2 n_inner=48": ("gpt2", dict(n_inner=48), "pass", "d_mlp read from the weights"),
    "gpt2 add_cross_attention": ("gpt2", dict(add_cross_attention=True), "pass",
        "no encoder input: the cross-attention never runs; HF's cache is then an encoder-decoder cache, whose "
        "decoder part verify now reads (a traceback before this sweep)"),
    "gpt2 tie_word_embeddings=False": ("gpt2", dict(tie_word_embeddings=False), "pass", "W_U read as stored"),
    "gpt2 layer_norm_epsilon=0.1": ("gpt2", dict(layer_norm_epsilon=0.1), "pass", "ModelConfig.layer_norm_eps"),
    "llama attention_bias": ("smollm2-135m", dict(attention_bias=True), "pass", "b_Q, b_K, b_V, b_O read"),
    "llama mlp_bias": ("smollm2-135m", dict(mlp_bias=True), "refused",
        "biases in the gated MLP are not implemented; no released Llama checkpoint has them"),
    "llama hidden_act gelu": ("smollm2-135m", dict(hidden_act="gelu"), "pass", "model.act"),
    "llama rope linear": ("smollm2-135m", dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "pass",
        "θ_k computed from the config (checked bit-exactly against HF's inv_freq)"),
    "llama rope dynamic": ("smollm2-135m", dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0},
                                                max_position_embeddings=16), "pass",
        "HF's inv_freq; kinds HF recomputes by length limit the context to the original one (the cut is said)"),
    "llama rope yarn": ("smollm2-135m", dict(rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                                          "original_max_position_embeddings": 4096}), "pass",
        "HF's own inv_freq buffer and attention_scaling are read"),
    "llama rope llama3": ("smollm2-135m", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}), "pass",
        "θ_k computed from the config (llama3_frequencies, bit-exact against HF)"),
    "llama rope longrope": ("smollm2-135m", dict(rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 8,
        "long_factor": [2.0] * 8, "factor": 4.0, "original_max_position_embeddings": 16}, max_position_embeddings=64),
        "pass",
        "HF's inv_freq; the context is limited to original_max_position_embeddings, where HF uses that buffer"),
    "llama pretraining_tp=2": ("smollm2-135m", dict(pretraining_tp=2), "pass",
        "ignored by transformers 5's Llama (a training-time split of the same products)"),
    "llama head_dim=32": ("smollm2-135m", dict(head_dim=32), "pass", "head_dim ≠ hidden/heads read from config"),
    "neox use_parallel_residual=False": ("pythia-70m", dict(use_parallel_residual=False), "pass",
        "ModelConfig.parallel"),
    "neox rotary_pct=1.0": ("pythia-70m", dict(rotary_pct=1.0), "pass", "ModelConfig.rotary_dim"),
    "neox attention_bias=False": ("pythia-70m", dict(attention_bias=False), "pass", "no biases read"),
    "neox hidden_act relu": ("pythia-70m", dict(hidden_act="relu"), "pass", "model.act"),
    "neox rope linear": ("pythia-70m", dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "pass",
        "the rotary frequencies as Llama's"),
    "neo all local": ("gpt-neo-125m", dict(attention_types=[[["local"], 2]]), "pass",
        "the window mask on every layer (prompt longer than the window)"),
    "neo all global": ("gpt-neo-125m", dict(attention_types=[[["global"], 2]]), "pass", "no window"),
    "neo activation relu": ("gpt-neo-125m", dict(activation_function="relu"), "pass", "model.act"),
}
QUICK = ["gpt2 reorder_and_upcast_attn", "gpt2 activation quick_gelu", "gpt2 activation tanh",
         "gpt2 add_cross_attention", "llama mlp_bias", "llama rope yarn", "neox use_parallel_residual=False",
         "neo all local"]
CASES = list(VERDICTS) if os.environ.get("ATTNKIT_VERIFY_SWEEP") == "all" else QUICK


def _checkpoint(folder, shape: str, config: dict):
    if shape == "gpt2":
        return make_checkpoint(folder, **{**GPT2, **config})
    return make_family_checkpoint(folder, shape, **{**SMALL[shape], **config})


@pytest.mark.parametrize("option", CASES)
def test_every_swept_option_gets_its_verdict(option, tmp_path, capsys):
    shape, config, verdict, reason = VERDICTS[option]
    assert reason
    folder = _checkpoint(tmp_path / "m", shape, config)
    rc = main(["verify", "--model", str(folder), "--generate", "2", "--text", TEXT])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    if verdict == "refused":
        err = out.err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "not implemented" in err[0], out.err
        return
    assert rc == 0 and "PASS" in out.out, (out.out[-600:], out.err[-600:])
    said = "the float64 reference runs with" in out.out
    assert said == (verdict == "pass-off"), out.out[-600:]
