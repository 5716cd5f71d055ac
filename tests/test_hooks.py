"""Hook points: one mechanism reads and writes every activation; interventions compose in order."""
import pytest
import torch

from attnkit import ablations as AB
from attnkit.loading import load
from attnkit.model import HOOK_POINTS, Intervention, compose, run
from helpers import make_checkpoint

TEXT = "The animal didn't cross the street because it was too tired."


class AddToResid(Intervention):
    def __init__(self, layer, amount):
        super().__init__([layer])
        self.amount = amount

    def resid_pre(self, x, layer):
        return x + self.amount


class ScaleScores(Intervention):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def scores(self, s, layer):
        return s * self.f


def test_write_on_resid_pre_changes_exactly_the_layers_from_L_on(odd):
    ids = odd.encode(TEXT)
    L = 1
    clean = run(odd.weights, ids, capture=["resid_post", "pattern"])
    hooked = run(odd.weights, ids, capture=["resid_post", "pattern"],
                 hooks=[("resid_pre", lambda x, l: x + 0.5 if l == L else None)])
    for l in range(odd.config.n_layers):
        same = torch.equal(clean["resid_post", l], hooked["resid_post", l])
        assert same == (l < L), l
        assert torch.equal(clean["pattern", l], hooked["pattern", l]) == (l < L), l
    assert not torch.allclose(clean.logits, hooked.logits)


def test_capture_and_write_at_the_same_point(odd):
    ids = odd.encode(TEXT)
    tr = run(odd.weights, ids, capture=["z"], hooks={"z": lambda z, l: torch.zeros_like(z) if l == 0 else None})
    assert torch.count_nonzero(tr["z", 0]) == 0          # the capture records what the model uses
    assert torch.count_nonzero(tr["z", 1]) > 0
    ref = run(odd.weights, ids, intervention=AB.ZeroHead(layers=[0]))
    torch.testing.assert_close(tr.logits, ref.logits, rtol=0, atol=0)


def test_composing_two_interventions_equals_applying_them_in_order(odd):
    ids = odd.encode(TEXT)
    a, b = ScaleScores(0.5), AddToResid(1, 0.25)
    both = run(odd.weights, ids, intervention=compose(a, b), capture=["scores"])
    as_list = run(odd.weights, ids, intervention=[a, b], capture=["scores"])
    # by hand: halve every layer's scores, and add 0.25 to layer 1's input
    manual = run(odd.weights, ids, capture=["scores"], hooks=[
        ("scores", lambda s, l: s * 0.5), ("resid_pre", lambda x, l: x + 0.25 if l == 1 else None)])
    torch.testing.assert_close(both.logits, manual.logits, rtol=0, atol=0)
    torch.testing.assert_close(as_list.logits, manual.logits, rtol=0, atol=0)
    # order matters where two hooks touch one point: (s·0.5)+1 ≠ (s+1)·0.5
    add1 = type("Add1", (Intervention,), {"scores": lambda self, s, l: s + 1.0})()
    ab = run(odd.weights, ids, intervention=[ScaleScores(0.5), add1], capture=["scores"])
    ba = run(odd.weights, ids, intervention=[add1, ScaleScores(0.5)], capture=["scores"])
    s0 = run(odd.weights, ids, capture=["scores"])["scores", 0]
    torch.testing.assert_close(ab["scores", 0], s0 * 0.5 + 1.0)
    torch.testing.assert_close(ba["scores", 0], (s0 + 1.0) * 0.5)


def test_head_out_sums_to_attn_out_and_is_writable(odd):
    ids = odd.encode(TEXT)
    tr = run(odd.weights, ids, capture=["head_out", "attn_out"])
    for l in range(odd.config.n_layers):
        ho = tr["head_out", l]                                      # [B, H, T, d]
        assert ho.shape[1] == odd.config.n_heads
        torch.testing.assert_close(ho.sum(1) + odd.weights.layers[l].b_O, tr["attn_out", l], atol=1e-5, rtol=0)
    # removing head 2's output equals zeroing its z
    cut = run(odd.weights, ids, hooks={"head_out": lambda t, l: t.index_fill(1, torch.tensor([2]), 0) if l == 1 else None})
    ref = run(odd.weights, ids, intervention=AB.ZeroHead(heads=[(1, 2)]))
    torch.testing.assert_close(cut.logits, ref.logits, atol=1e-5, rtol=0)


def test_resume_from_cached_resid_equals_the_full_run(odd):
    ids = odd.encode(TEXT)
    full = run(odd.weights, ids, capture=["resid_pre"])
    for L in range(odd.config.n_layers):
        resumed = run(odd.weights, ids, start=L, resid=full["resid_pre", L])
        torch.testing.assert_close(resumed.logits, full.logits, rtol=0, atol=1e-5)
    # a batch of residual streams against one prompt's positions
    x = full["resid_pre", 1].repeat(3, 1, 1)
    batch = run(odd.weights, ids, start=1, resid=x)
    assert batch.logits.shape[0] == 3
    stopped = run(odd.weights, ids, stop=1, capture=["resid_post"])
    assert stopped.logits is None and ("resid_post", 1) not in stopped


def test_fused_path_taken_when_no_hook_needs_the_pattern(odd, monkeypatch):
    import torch.nn.functional as F

    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    ids = odd.encode(TEXT)
    run(odd.weights, ids, capture=["z", "resid_post"], hooks={"z": lambda z, l: None})
    assert len(calls) == odd.config.n_layers
    calls.clear()
    run(odd.weights, ids, capture=["pattern"], layers=[1])
    assert len(calls) == odd.config.n_layers - 1              # only layer 1 writes its pattern out


def test_unknown_hook_point_is_named(odd):
    with pytest.raises(ValueError, match="unknown hook point 'attn_pattern'"):
        run(odd.weights, [1, 2, 3], hooks=[("attn_pattern", lambda t, l: None)])
    assert {"resid_pre", "q", "k", "v", "scores", "pattern", "z", "head_out", "mlp_pre", "mlp_out",
            "ln_final", "logits"} <= set(HOOK_POINTS)


# ----------------------------------------------------------------------------- fixes found against HF

@pytest.fixture(scope="module")
def inverse_idx(tmp_path_factory):
    d = make_checkpoint(tmp_path_factory.mktemp("inv"), seed=3, n_layer=3, n_head=4, n_embd=64, n_positions=64,
                        vocab_size=400, scale_attn_by_inverse_layer_idx=True)
    return load(str(d), "cpu")


@pytest.fixture(scope="module")
def unscaled(tmp_path_factory):
    d = make_checkpoint(tmp_path_factory.mktemp("unscaled"), seed=4, n_layer=2, n_head=4, n_embd=64, n_positions=64,
                        vocab_size=400, scale_attn_weights=False)
    return load(str(d), "cpu")


def test_no_scale_keeps_the_inverse_layer_factor(inverse_idx):
    """HF with scale_attn_weights=False (and 1/(layer+1) kept) is the no-scale ablation's reference."""
    m = inverse_idx
    ids = torch.tensor([m.encode(TEXT)])
    ours = run(m.weights, ids, intervention=AB.NoScale(config=m.config))
    blocks = m.hf_model.transformer.h
    saved = [blk.attn.scaling for blk in blocks]
    for l, blk in enumerate(blocks):           # HF precomputes scaling = 1/√d_head · 1/(l+1); drop only 1/√d_head
        blk.attn.scaling = 1.0 / (l + 1)
    try:
        with torch.no_grad():
            ref = m.hf_model(ids).logits
    finally:
        for blk, sc in zip(blocks, saved):
            blk.attn.scaling = sc
    torch.testing.assert_close(ours.logits, ref, atol=1e-4, rtol=0)


def test_no_scale_on_an_unscaled_model_is_a_no_op(unscaled):
    m = unscaled
    ids = m.encode(TEXT)
    iv = AB.NoScale(config=m.config)
    assert iv.no_op
    torch.testing.assert_close(run(m.weights, ids, intervention=iv).logits, run(m.weights, ids).logits, rtol=0, atol=0)
