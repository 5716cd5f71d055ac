"""Llama-style, GPT-NeoX (Pythia) and GPT-Neo models against HuggingFace, on random-weight
checkpoints with the per-layer shapes of real ones (2 layers, a 512-token vocabulary)."""
import dataclasses
import json

import pytest
import torch

from attnkit import attention as A
from attnkit.families import FAMILIES, UnsupportedModel, family_for, supported_types
from attnkit.loading import LoadError, load
from attnkit.model import run
from attnkit.steps import head_steps, kv_cache_demo
from attnkit.verify import TOL_HIDDEN_REL, TOL_LOGITS, TOL_PATTERN, compare, compare_generation
from attnkit.weights import Weights, param_counts
from helpers import FAMILY_SHAPES, make_family_checkpoint

LLAMA_SHAPES = ["smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "mistral-window"]


@pytest.fixture(scope="session")
def family_model(tmp_path_factory):
    """shape name (+ overrides) -> Loaded, each checkpoint built once per session."""
    built = {}

    def get(shape, **overrides):
        key = (shape, json.dumps(overrides, sort_keys=True))
        if key not in built:
            folder = tmp_path_factory.mktemp(shape)
            make_family_checkpoint(folder, shape, **overrides)
            built[key] = load(str(folder), "cpu")
        return built[key]

    return get


def random_ids(n, vocab=512, seed=0):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))


def assert_equal_to_hf(m, T, seed=0):
    rep = compare(m.hf_model, m.weights, random_ids(T, m.config.d_vocab, seed), name=m.name)
    assert rep.ok, rep.table()
    assert all(l.pattern_abs <= TOL_PATTERN and l.hidden_rel <= TOL_HIDDEN_REL for l in rep.layers)
    assert rep.logits_abs <= TOL_LOGITS
    return rep


# ----------------------------------------------------------------------------- Llama, Qwen2, Mistral

@pytest.mark.parametrize("shape", LLAMA_SHAPES)
def test_llama_style_equals_hf(family_model, shape):
    m = family_model(shape)
    cfg, hf = m.config, m.hf_model.config
    assert cfg.family == "llama" and cfg.norm == "rmsnorm" and cfg.position == "rotary" and cfg.mlp == "gated"
    assert cfg.n_kv_heads == hf.num_key_value_heads < cfg.n_heads
    assert cfg.d_head == (getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads)
    assert cfg.layer_norm_eps == hf.rms_norm_eps
    assert_equal_to_hf(m, 40)


@pytest.mark.parametrize("shape", LLAMA_SHAPES)
def test_rotary_frequencies_are_hfs(family_model, shape):
    """attnkit computes θ_k itself (default and llama3 kinds); they are HF's bit for bit."""
    m = family_model(shape)
    hf_rot = m.hf_model.model.rotary_emb
    assert torch.equal(m.weights.inv_freq, hf_rot.inv_freq)
    assert m.weights.rope_attention_scale == hf_rot.attention_scaling == 1.0


def test_llama3_rope_scaling_is_applied(family_model):
    from attnkit.families.llama import rotary_frequencies

    m = family_model("llama-3.2-1b")
    plain = rotary_frequencies(500000.0, 64)
    assert not torch.equal(m.weights.inv_freq, plain)          # the low frequencies are stretched ×32
    assert torch.equal(m.weights.inv_freq[:4], plain[:4])       # the high ones are kept
    torch.testing.assert_close(m.weights.inv_freq[-1], plain[-1] / 32)


def test_qwen2_biases_and_tied_output(family_model):
    m = family_model("qwen2.5-0.5b")
    lw, at = m.weights.layers[0], m.hf_model.model.layers[0].self_attn
    assert lw.b_Q.shape == (14, 64) and lw.b_K.shape == (2, 64) and lw.b_V.shape == (2, 64) and lw.b_O is None
    torch.testing.assert_close(lw.b_K.reshape(-1), at.k_proj.bias)
    assert m.weights.W_U.data_ptr() == m.weights.wte.data_ptr()                # tied
    # views of HF's parameters, no copies
    assert lw.W_Q.data_ptr() == at.q_proj.weight.data_ptr() and lw.W_gate.data_ptr() == \
        m.hf_model.model.layers[0].mlp.gate_proj.weight.data_ptr()
    counts = param_counts(m.config, m.weights)
    assert counts["total"] == sum(p.numel() for p in m.hf_model.parameters())


def test_intermediates_equal_hf_q_k_rotated(family_model):
    """q and k after rotation equal what HF's attention multiplies (hooked from its rotary step)."""
    m = family_model("smollm2-135m")
    ids = random_ids(12)
    tr = run(m.weights, ids, capture=("q", "k", "q_rot", "k_rot", "v"), layers=[1])
    at = m.hf_model.model.layers[1].self_attn
    seen = {}
    h = at.register_forward_hook(lambda mod, args, kwargs, out: seen.update(x=kwargs["hidden_states"]),
                                 with_kwargs=True)
    try:
        m.hf_model(ids[None])
    finally:
        h.remove()
    x = seen["x"]
    q = at.q_proj(x).view(1, 12, -1, 64).transpose(1, 2)
    k = at.k_proj(x).view(1, 12, -1, 64).transpose(1, 2)
    cos, sin = m.hf_model.model.rotary_emb(x, torch.arange(12)[None])
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    assert tr["q", 1].shape == (1, 9, 12, 64) and tr["k", 1].shape == (1, 3, 12, 64)
    torch.testing.assert_close(tr["q", 1], q, rtol=0, atol=1e-6)
    torch.testing.assert_close(tr["q_rot", 1], q_rot, rtol=0, atol=1e-6)
    torch.testing.assert_close(tr["k_rot", 1], k_rot, rtol=0, atol=1e-6)


def test_sliding_window_is_exercised(family_model):
    """Mistral's window w = 16 with T = 64: query i sees keys i − 16 < j ≤ i, as HF's mask; without the
    window attnkit would differ from HF."""
    m = family_model("mistral-window")
    w = m.config.window(0)
    assert w == 16 and m.config.windows == (16, 16)
    T = 64
    rep = assert_equal_to_hf(m, T, seed=3)
    p = run(m.weights, random_ids(T, seed=3), capture="pattern")["pattern", 1][0]    # [H, T, T]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    outside = (j <= i - w) | (j > i)
    assert (p[:, outside] == 0).all() and (p[:, ~outside] > 0).all()
    no_window = Weights(**{**{f.name: getattr(m.weights, f.name) for f in dataclasses.fields(Weights)},
                           "config": dataclasses.replace(m.config, windows=None)})
    assert not compare(m.hf_model, no_window, random_ids(T, seed=3)).ok
    assert rep.n_tokens == T > w


def test_qwen2_sliding_layers(family_model):
    """Qwen2 with use_sliding_window: layers from max_window_layers on use the window (layer_types)."""
    m = family_model("qwen2.5-0.5b", use_sliding_window=True, sliding_window=8, max_window_layers=1)
    assert m.config.windows == (None, 8)
    assert_equal_to_hf(m, 24)


@pytest.mark.parametrize("shape", LLAMA_SHAPES)
def test_llama_style_generation_equals_hf(family_model, shape):
    m = family_model(shape)
    T = 20 if shape != "mistral-window" else 30      # past the window of 16
    g = compare_generation(m.hf_model, m.weights, random_ids(T, seed=5), n_new=8)
    assert g.ok, g.line()
    assert g.tokens == g.hf_tokens and len(g.tokens) == 8
    assert g.cache_heads == m.config.n_kv_heads < m.config.n_heads                  # the cache stores n_kv_heads
    assert g.cache_bytes * m.config.group == g.full_head_bytes


def test_rope_kind_attnkit_does_not_compute_uses_hfs_buffer(family_model):
    """YaRN: θ_k and the cos/sin factor come from HF's rotary module (said in the family's docstring)."""
    from attnkit.families.llama import rope

    m = family_model("mistral-window", rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                     "original_max_position_embeddings": 256})
    hf_rot = m.hf_model.model.rotary_emb
    assert rope(m.hf_model.config, 32, hf_rot)[3] == "hf"
    assert torch.equal(m.weights.inv_freq, hf_rot.inv_freq)
    assert m.weights.rope_attention_scale == hf_rot.attention_scaling != 1.0
    assert_equal_to_hf(m, 24)


def test_step_by_step_shows_rotation_and_gqa_group(family_model):
    m = family_model("smollm2-135m")
    ids = random_ids(10)
    st = head_steps(m.weights, ids, layer=1, head=4, query=7)
    tr = run(m.weights, ids, capture=("q", "k_rot", "pattern"), layers=[1])
    assert st.kv_head == 4 // 3 == 1
    torch.testing.assert_close(st.q_pre, tr["q", 1][0, 4, 7])
    torch.testing.assert_close(st.k, tr["k_rot", 1][0, 1, :8])
    torch.testing.assert_close(st.weights, tr["pattern", 1][0, 4, 7, :8], rtol=0, atol=1e-6)
    assert not torch.allclose(st.q_pre, st.q)                 # rotation moved q
    demo = kv_cache_demo(m.weights, ids, 3)
    assert demo.tokens_match and demo.max_kv_diff <= 1e-5


# ----------------------------------------------------------------------------- GPT-NeoX (Pythia)

@pytest.mark.parametrize("shape", ["pythia-70m", "pythia-160m"])
def test_pythia_equals_hf(family_model, shape):
    m = family_model(shape)
    cfg = m.config
    assert cfg.family == "gpt_neox" and cfg.parallel and cfg.position == "rotary" and cfg.norm == "layernorm"
    assert cfg.rotary_dim == cfg.d_head // 4 == 16 and m.weights.inv_freq.shape == (8,)
    assert torch.equal(m.weights.inv_freq, m.hf_model.gpt_neox.rotary_emb.inv_freq)
    assert m.weights.W_U.data_ptr() != m.weights.wte.data_ptr()          # untied unembedding
    assert_equal_to_hf(m, 40)


def test_pythia_fused_qkv_is_per_head(family_model):
    """HF's query_key_value output viewed as [.., H, 3·e]: head h's q, k, v side by side."""
    m = family_model("pythia-70m")
    at = m.hf_model.gpt_neox.layers[0].attention
    x = torch.randn(5, 512, generator=torch.Generator().manual_seed(0))
    qkv = at.query_key_value(x).view(5, 8, 3 * 64)
    q, k, v = qkv.chunk(3, dim=-1)                                        # [T, H, e], HF's own split
    lw = m.weights.layers[0]
    torch.testing.assert_close(A.project(x, lw.W_Q, lw.b_Q), q.transpose(0, 1), rtol=0, atol=1e-5)
    torch.testing.assert_close(A.project(x, lw.W_K, lw.b_K), k.transpose(0, 1), rtol=0, atol=1e-5)
    torch.testing.assert_close(A.project(x, lw.W_V, lw.b_V), v.transpose(0, 1), rtol=0, atol=1e-5)
    assert lw.W_Q.data_ptr() == at.query_key_value.weight.data_ptr()    # a view, no copy


def test_partial_rotary_leaves_the_other_dims(family_model):
    m = family_model("pythia-70m")
    tr = run(m.weights, random_ids(10), capture=("q", "q_rot"), layers=[0])
    q, q_rot = tr["q", 0], tr["q_rot", 0]
    assert torch.equal(q[..., 16:], q_rot[..., 16:]) and not torch.equal(q[..., 1:, :16], q_rot[..., 1:, :16])
    assert torch.equal(q[..., 0, :], q_rot[..., 0, :])                    # position 0: angle 0


def test_neox_sequential_residual_equals_hf(family_model):
    m = family_model("pythia-70m", use_parallel_residual=False)
    assert not m.config.parallel
    assert_equal_to_hf(m, 24)


@pytest.mark.parametrize("shape", ["pythia-70m", "gpt-neo-125m"])
def test_generation_equals_hf(family_model, shape):
    m = family_model(shape)
    g = compare_generation(m.hf_model, m.weights, random_ids(20, seed=7), n_new=8)
    assert g.ok, g.line()
    assert g.cache_heads == m.config.kv_heads == m.config.n_heads
    assert g.cache_bytes == g.full_head_bytes                          # no GQA: the cache is full-head


# ----------------------------------------------------------------------------- GPT-Neo

def test_gpt_neo_equals_hf_past_its_local_window(family_model):
    """GPT-Neo-125M's layers: global, local (w = 256); T = 300 > 256 exercises the window."""
    m = family_model("gpt-neo-125m")
    cfg = m.config
    assert cfg.windows == (None, 256) and not cfg.scale_attn_weights and cfg.attn_scale(1) == 1.0
    lw = m.weights.layers[0]
    assert lw.b_Q is None and lw.b_K is None and lw.b_V is None and lw.b_O is not None
    T = 300
    assert_equal_to_hf(m, T, seed=11)
    p = run(m.weights, random_ids(T, seed=11), capture="pattern")
    local, glob = p["pattern", 1][0], p["pattern", 0][0]
    assert (local[:, 299, :44] == 0).all() and (local[:, 299, 44:] > 0).all()     # keys 299 − 256 < j ≤ 299
    assert (glob[:, 299] > 0).all()
    no_window = Weights(**{**{f.name: getattr(m.weights, f.name) for f in dataclasses.fields(Weights)},
                           "config": dataclasses.replace(cfg, windows=None)})
    assert not compare(m.hf_model, no_window, random_ids(T, seed=11)).ok


def test_gpt_neo_generation_across_the_window(family_model):
    m = family_model("gpt-neo-125m")
    g = compare_generation(m.hf_model, m.weights, random_ids(252, seed=2), n_new=8)    # crosses T = 256
    assert g.ok, g.line()


def test_ablations_per_family(family_model):
    """W_K = W_Q under GQA is refused with the reason; no scaling on GPT-Neo is a no-op and says so;
    V = X averages over the query heads of the block's own norm."""
    from attnkit.ablations import AblationError, KeyIsQuery, NoScale, ValueIsInput

    llama, neo, pythia = family_model("smollm2-135m"), family_model("gpt-neo-125m"), family_model("pythia-70m")
    ids = random_ids(12)
    with pytest.raises(AblationError, match="grouped-query"):
        run(llama.weights, ids, intervention=KeyIsQuery())
    ns = NoScale(config=neo.config)
    assert ns.no_op
    torch.testing.assert_close(run(neo.weights, ids, intervention=ns).logits, run(neo.weights, ids).logits)
    for m in (llama, pythia):
        base = run(m.weights, ids).logits
        assert not torch.allclose(run(m.weights, ids, intervention=ValueIsInput()).logits, base)
        assert not torch.allclose(run(m.weights, ids, intervention=NoScale(config=m.config)).logits, base)
    out = run(pythia.weights, ids, intervention=KeyIsQuery(), capture=("q_rot", "k_rot"), layers=[0])
    assert torch.equal(out["q_rot", 0], out["k_rot", 0])                 # W_K = W_Q: k = q before rotation too


# ----------------------------------------------------------------------------- the family table

def test_unsupported_model_type_lists_supported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(LoadError) as e:
        load(str(tmp_path), "cpu")
    msg = str(e.value)
    assert "'bert'" in msg and "not supported" in msg
    for t in ("gpt2", "llama", "qwen2", "mistral", "gpt_neox", "gpt_neo"):
        assert t in msg
    with pytest.raises(UnsupportedModel, match="attnkit supports: .*llama"):
        family_for("falcon")


def test_family_table():
    assert {"gpt2", "llama", "qwen2", "mistral", "gpt_neox", "gpt_neo"} <= set(supported_types())
    assert FAMILIES["qwen2"] is FAMILIES["llama"]


# ----------------------------------------------------------------------------- loading

def test_revision_syntax(monkeypatch, tmp_path):
    import transformers

    import attnkit.loading as L

    assert L.split_revision("EleutherAI/pythia-70m@step1000") == ("EleutherAI/pythia-70m", "step1000")
    assert L.split_revision("attnkit-tiny") == ("attnkit-tiny", None)
    odd = tmp_path / "ckpt@v1"
    odd.mkdir()
    assert L.split_revision(str(odd)) == (str(odd), None)               # an existing folder is never split
    with pytest.raises(LoadError, match="NAME@REVISION"):
        L.split_revision("EleutherAI/pythia-70m@")
    with pytest.raises(LoadError, match="HF_HUB_OFFLINE"):              # conftest sets it: nothing is fetched
        load("EleutherAI/pythia-70m@step1000", "cpu")
    seen = {}

    def fake_config(source, **kw):
        seen.update(source=source, **kw)
        raise OSError("stop here")

    monkeypatch.setattr(L, "_cached", lambda repo, revision=None: True)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", fake_config)
    with pytest.raises(LoadError, match="could not read the config"):
        load("EleutherAI/pythia-70m@step1000", "cpu")
    assert seen["source"] == "EleutherAI/pythia-70m" and seen["revision"] == "step1000"


def test_model_picker_lists_each_family():
    from attnkit.loading import FAMILY_MODELS, MODEL_CHOICES

    assert {"llama", "gpt_neox", "gpt_neo"} <= set(FAMILY_MODELS)
    for name in ("HuggingFaceTB/SmolLM2-135M", "Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.2-1B",
                 "EleutherAI/pythia-70m", "EleutherAI/pythia-160m", "EleutherAI/gpt-neo-125m", "gpt2"):
        assert name in MODEL_CHOICES
    assert len(MODEL_CHOICES) == len(set(MODEL_CHOICES))


@pytest.mark.parametrize("shape", ["smollm2-135m", "pythia-70m", "gpt-neo-125m"])
def test_verify_cli_with_generation(family_model, shape, tmp_path, capsys):
    from attnkit.cli.verify import cli

    m = family_model(shape)
    out = tmp_path / "v.json"
    assert cli(["--model", m.source, "--device", "cpu", "--tokens", "24", "--generate", "4", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "greedy generation with the KV cache: 4 tokens equal to HF generate's" in text
    rep = json.loads(out.read_text())
    assert rep["ok"] and rep["generation"]["ok"] and rep["generation"]["cache_heads"] == m.config.kv_heads


def test_bench_family_pieces(family_model):
    """The family bench's KV-cache bytes (GQA vs full-head) and its SDPA twin of a Llama-style model."""
    from attnkit.dev.bench import kv_cache_bytes
    from attnkit.dev.bench import sdpa_twin as _sdpa_twin

    m = family_model("smollm2-135m")
    kv = kv_cache_bytes(m.weights, 8, 4)
    assert kv["cache_heads_stored"] == 3 and kv["positions"] == 11
    assert kv["bytes_per_token"] == 2 * 2 * 3 * 64 * 4 and kv["full_head_bytes"] == 3 * kv["cache_bytes"]
    twin = _sdpa_twin(m.hf_model)
    ids = random_ids(16)[None]
    with torch.inference_mode():
        torch.testing.assert_close(twin(ids).logits, run(m.weights, ids).logits, rtol=0, atol=1e-4)
