"""A config attnkit cannot compute exactly is refused at load in one line naming the field; one it
accepts it computes equal to HF.
"""
import math
import re

import pytest
import torch

from attnkit import checkpoint
from attnkit.loading import load, LoadError
from attnkit.verify import compare_generation
from helpers import make_family_checkpoint
from hostile import _Delete, base, DELETE, edited, one_line, SMALL
from test_families import assert_equal_to_hf, random_ids

NAN, INF = float("nan"), float("inf")


REFUSED = [
    ("llama", {"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ("llama", {"rope_parameters": {"rope_theta": 1e5, "rope_type": "linear", "factor": 0.0}}, "factor"),
    ("llama", {"rope_parameters": {"rope_theta": 1e5, "rope_type": "llama3", "factor": -2.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 256}}, "factor"),
    ("llama", {"rope_parameters.rope_theta": 0.0}, "rope_theta"),
    ("llama", {"rope_parameters.rope_theta": -10000.0}, "rope_theta"),
    ("llama", {"rope_parameters.rope_theta": NAN}, "rope_theta"),
    ("llama", {"rms_norm_eps": INF}, "rms_norm_eps"),
    ("llama", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("llama", {"num_attention_heads": 0}, "num_attention_heads"),
    ("llama", {"num_attention_heads": 3, "head_dim": DELETE}, "num_attention_heads"),   # 3 ∤ 64
    ("llama", {"num_key_value_heads": 3}, "num_key_value_heads"),                      # 3 ∤ 4
    ("llama", {"num_key_value_heads": 0}, "num_key_value_heads"),
    ("llama", {"head_dim": 15}, "head_dim"),
    ("llama", {"rms_norm_eps": -1e-5}, "rms_norm_eps"),
    ("mistral", {"sliding_window": 0}, "sliding_window"),
    ("mistral", {"sliding_window": -4}, "sliding_window"),
    ("mistral", {"sliding_window": 1}, "sliding_window"),
    ("neox", {"rope_parameters.partial_rotary_factor": 1.5}, "rotary_pct"),
    ("neox", {"rope_parameters": {"rope_theta": 10000, "rope_type": "default"}, "rotary_pct": 1.5}, "rotary_pct"),
    ("neox", {"rope_parameters.partial_rotary_factor": -0.25}, "rotary_pct"),
    ("neox", {"rope_parameters.rope_theta": 0}, "rope_theta"),
    ("neox", {"hidden_size": 60, "rope_parameters.partial_rotary_factor": 1.0}, "rotary_pct"),   # 16 dims of 15
    ("neox", {"num_hidden_layers": 0}, "num_hidden_layers"),
    ("neox", {"num_attention_heads": 0}, "num_attention_heads"),
    ("neox", {"num_attention_heads": 5}, "num_attention_heads"),
    ("neo", {"window_size": 0}, "window_size"),
    ("neo", {"window_size": -1}, "window_size"),
    ("neo", {"num_heads": 0}, "num_heads"),
    ("neo", {"num_layers": 0, "attention_layers": [], "attention_types": []}, "num_layers"),
    ("gpt2", {"n_layer": 0}, "n_layer"),
    ("gpt2", {"n_head": 0}, "n_head"),
    ("gpt2", {"n_head": 5}, "n_head"),
    ("gpt2", {"layer_norm_epsilon": NAN}, "layer_norm_epsilon"),
    ("gpt2", {"layer_norm_epsilon": -1e-5}, "layer_norm_epsilon"),
    ("neox", {"layer_norm_eps": -1.0}, "layer_norm_eps"),
]


ACCEPTED = [
    ("neox", dict(rotary_pct=0.0), False),                  # no rotary dims: HF rotates nothing
    ("neox", dict(hidden_size=128, num_attention_heads=2, rotary_pct=0.3), False),   # 19 of 64 dims: odd
    ("neo", dict(window_size=1), True),                     # a local layer sees only itself
    ("mistral", dict(sliding_window=2), True),              # the smallest window HF's cache keeps right
    ("llama", dict(rope_scaling={"rope_type": "linear", "factor": 0.5}), False),     # HF warns, computes
]


@pytest.mark.parametrize("family,changes,field", REFUSED,
                         ids=[f"{f}-{','.join(f'{k}={v}' for k, v in c.items())[:60]}" for f, c, _ in REFUSED])
def test_config_attnkit_cannot_compute_is_refused_naming_the_field(base, tmp_path, capsys, family, changes, field):
    from attnkit.cli import main

    folder = edited(base(family), tmp_path / "m", **changes)
    capsys.readouterr()                       # (building the base checkpoint may have written progress)
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    msg = one_line(str(e.value))
    assert re.search(rf"config field ([\w.]+\.)?{field}=", msg), msg
    assert main(["heads", "--model", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_window_1_of_hfs_sliding_cache_really_differs(base, tmp_path):
    """Why Mistral/Qwen2's window 1 is refused: HF's own cached generation then differs from its forward
    pass (its sliding-window cache keeps w − 1 = 0 keys), so no implementation can equal both."""
    shape, kw = SMALL["mistral"]
    folder = make_family_checkpoint(tmp_path / "w1", shape, tokenizer=False, **{**kw, "sliding_window": 1})
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = random_ids(12)[None]
    with torch.no_grad():
        gen = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                          pad_token_id=0, eos_token_id=None)
        full = hf(gen).logits[0, ids.shape[1] - 1:-1].argmax(-1)
    assert gen[0, ids.shape[1]:].tolist() != full.tolist()


@pytest.mark.parametrize("family,overrides,generate", ACCEPTED, ids=[f"{f}-{o}" for f, o, _ in ACCEPTED])
def test_accepted_edge_configs_equal_hf(tmp_path, family, overrides, generate):
    shape, kw = SMALL[family]
    m = load(str(make_family_checkpoint(tmp_path / "m", shape, **{**kw, **overrides})), "cpu")
    assert_equal_to_hf(m, 24, seed=2)
    if generate:
        g = compare_generation(m.hf_model, m.weights, random_ids(20, seed=4), n_new=8)
        assert g.ok and g.tokens == g.hf_tokens, g.line()
    if "rotary_pct" in overrides:      # 0 → nothing rotates; 0.3 of 64 → 19 → 10 frequencies turning 20 dims
        assert m.config.rotary_dim == 2 * m.weights.inv_freq.numel() == {0.0: 0, 0.3: 20}[overrides["rotary_pct"]]


def test_qwen2_window_is_checked_only_where_qwen2_reads_it():
    """Qwen2 ignores sliding_window unless use_sliding_window (HF sets it to None), so 0 there is no error."""
    from attnkit.families import UnsupportedModel, checks, family_for

    qwen2 = dict(model_type="qwen2", num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 hidden_size=64, sliding_window=0)
    family_for("qwen2").validate(checks.raw(qwen2))
    with pytest.raises(UnsupportedModel, match="sliding_window=0"):
        family_for("qwen2").validate(checks.raw({**qwen2, "use_sliding_window": True}))
    with pytest.raises(UnsupportedModel, match="sliding_window=1"):
        family_for("qwen2").validate(checks.raw({**qwen2, "use_sliding_window": True, "sliding_window": 1}))


def test_validate_is_each_familys_hook():
    """One place per family: every registered family overrides validate (the checks it shares live in
    attnkit/families/checks.py)."""
    from attnkit.families import FAMILIES, Family

    assert FAMILIES and all(type(f).validate is not Family.validate for f in FAMILIES.values())
    assert math.isnan(NAN)
