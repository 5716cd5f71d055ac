"""attnkit.parts: the residual stream's parts add up to the model's own stream (GPT-2, a GQA Llama, Pythia), the
norm held at the real stream's σ is the model's norm, its Jacobian is autograd's, direct logit attribution
is the parts through that norm and W_U, and a new norm kind is one entry of NORMS: an RMSNorm stored as
(1 + w) gives every consumer (forward, DLA, the why split, composition, attribution patching) the numbers
of the plain RMSNorm it equals."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnkit import attention as A
from attnkit import attribution as AT
from attnkit import parts
from attnkit import patching as P
from attnkit import score_terms as ST
from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import compose as CO
from attnkit.circuits.path import parse_node
from attnkit.model import run
from attnkit.pieces import printable_token
from attnkit.standard import node_name, split_node
from attnkit.tolerances import TOL_F64
from helpers import family_weights, with_biases

T = 12
#: small checkpoints of three layouts: learned positions + LayerNorm, GQA + RMSNorm + rotary, parallel NeoX
SHAPES = {"gpt2": None,
          "smollm2-135m": dict(hidden_size=64, intermediate_size=128, num_attention_heads=8, num_key_value_heads=2,
                               head_dim=8, attention_bias=True),
          "pythia-70m": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4)}


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    return family_weights(tmp_path_factory, SHAPES, lambda w: with_biases(w, torch.float64))


def ids_for(w, seed=0):
    return torch.randint(0, 300, (T,), generator=torch.Generator().manual_seed(seed)).tolist()


def close(a, b, tol=TOL_F64) -> bool:
    """|a − b| within ``tol`` of the larger's largest entry (float64 noise grows with the size of the stream)."""
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).abs().max()) <= tol * max(1.0, float(a.abs().max()))


# ----------------------------------------------------------------------------- the parts

@pytest.mark.parametrize("name", list(SHAPES))
def test_the_parts_add_up_to_the_stream_entering_every_block(family, name):
    w = family(name)
    cfg, ids = w.config, ids_for(w)
    L = cfg.n_layers
    rows = parts.Rows(list(range(T)))
    tr = run(w, ids, hooks=parts.hooks(w, L, rows), capture=["resid_pre", "resid_post"])
    assert rows.names == parts.names(w, L)
    assert ("pos_embed" in rows.names) == (cfg.position == "learned")
    stack = rows.stack()                                                  # [P, T, d]
    for layer in range(L + 1):
        n = len(parts.names(w, layer))                                    # the parts up to a layer: a prefix
        stream = tr["resid_pre", layer][0] if layer < L else tr["resid_post", L - 1][0]
        assert close(stack[:n].sum(0), stream), (name, layer)
    # a part left out is missed: without the last MLP the sum is not the final stream
    assert not close(stack[:-1].sum(0), tr["resid_post", L - 1][0], 1e-3)
    for n in rows.names:                                                  # one spelling: the standard's
        assert node_name(split_node(n)) == n


def test_part_names_are_standard_nodes_and_not_path_senders():
    assert split_node("L2 b_O") == ("b_O", 2) and node_name(("b_O", 2)) == "L2 b_O"
    assert split_node("pos_embed") == ("pos_embed",) and node_name(("pos_embed",)) == "pos_embed"
    cfg = dataclasses.replace(parts_cfg(), n_layers=3, n_heads=2)
    for name in ("L2 b_O", "pos_embed"):
        with pytest.raises(P.PatchError, match="unknown sender"):
            parse_node(name, cfg)
    kinds = {n: parts.kind(n) for n in ("embed", "pos_embed", "L1H0", "MLP3", "L2 b_O", "ln1 bias", "b_K")}
    assert kinds == {"embed": "embeddings", "pos_embed": "embeddings", "L1H0": "heads", "MLP3": "MLPs",
                     "L2 b_O": "biases", "ln1 bias": "biases", "b_K": "biases"}
    assert [parts.layer_of(n) for n in ("pos_embed", "L1H0", "MLP3", "L2 b_O", "b_Q")] == \
        ["embed", "L1", "L3", "L2", "bias"]


def parts_cfg():
    from attnkit.standard import ModelConfig
    return ModelConfig(n_layers=2, n_heads=2, d_model=8, n_ctx=8, d_vocab=10, d_mlp=16)


# ----------------------------------------------------------------------------- the norm held at σ

@pytest.mark.parametrize("name", list(SHAPES))
def test_held_norm_at_the_real_sigma_is_the_models_norm(family, name):
    """The whole stream through the held norm (σ from the stream itself, plus b) is the model's ln1 output;
    the parts through it (no b) add up to the same less b."""
    w = family(name)
    cfg, ids = w.config, ids_for(w, 1)
    tr = run(w, ids, capture=["resid_pre", "ln1"], layers=[2])
    x, lw = tr["resid_pre", 2][0], w.layers[2]
    sig = parts.sigma(x, cfg)
    held = parts.held_norm(x, sig, lw.ln1_w, cfg, lw.ln1_b)
    # the model's RMSNorm rounds to float32 (as HF's does), its LayerNorm is PyTorch's float64 kernel
    assert close(held, tr["ln1", 2][0], TOL_F64 if cfg.norm == "layernorm" else 1e-6)
    rows = parts.Rows(list(range(T)))
    run(w, ids, hooks=parts.hooks(w, 2, rows), stop=2, logits=False)
    each = parts.held_norm(rows.stack(), sig, lw.ln1_w, cfg).sum(0)
    assert close(each + (0 if lw.ln1_b is None else lw.ln1_b.double()), held)


@pytest.mark.parametrize("kind", list(parts.NORMS))
def test_norm_vjp_is_autograds_gradient_of_the_norm(kind):
    g = torch.Generator().manual_seed(0)
    cfg = dataclasses.replace(parts_cfg(), d_model=16, norm=kind, layer_norm_eps=1e-5)
    x, w, out = (torch.randn(5, 16, generator=g, dtype=torch.float64) for _ in range(3))
    x = x * 3 + 1
    leaf = x.clone().requires_grad_(True)
    y = parts.held_norm(leaf, parts.sigma(leaf, cfg), w, cfg)          # σ not held: taken from the input
    (want,) = torch.autograd.grad(y, leaf, out)
    assert close(parts.norm_vjp(x, out, w, cfg), want)


def test_an_unknown_norm_kind_is_refused():
    cfg = dataclasses.replace(parts_cfg(), norm="batchnorm")
    with pytest.raises(ValueError, match="unknown norm kind 'batchnorm'"):
        parts.sigma(torch.ones(2, 8), cfg)


# ----------------------------------------------------------------------------- direct logit attribution

@pytest.mark.parametrize("name", list(SHAPES))
def test_dla_is_each_part_through_the_held_norm_and_w_u(family, name):
    """Every head's value recomputed from the model's own head_out (not the parts' z·W_O) with σ of the final
    stream written out by hand; the parts and the biases add up to the model's logit difference."""
    w = family(name)
    cfg, ids = w.config, ids_for(w, 2)
    a, d, pos = 5, 9, 7
    dla = AT.direct_logit_attribution(w, ids, a, d, pos)
    L = cfg.n_layers
    tr = run(w, ids, capture=["head_out", "resid_post"])
    assert abs(dla.actual - float(tr.logits[0, pos, a] - tr.logits[0, pos, d])) <= TOL_F64
    # the model's final RMSNorm rounds to float32 (as HF's does): its logits carry that rounding
    tol = TOL_F64 if cfg.norm == "layernorm" else 1e-6
    assert abs(dla.total - dla.actual) <= tol * max(1.0, float(np.abs(dla.values).sum()))
    x = tr["resid_post", L - 1][0, pos]
    centred = cfg.norm == "layernorm"
    sig = torch.sqrt(((x - x.mean()) if centred else x).pow(2).mean() + cfg.layer_norm_eps)
    u = w.W_U[a] - w.W_U[d]
    for l in range(L):
        for h in range(cfg.n_heads):
            p = tr["head_out", l][0, h, pos]
            p = p - p.mean() if centred else p
            assert abs(dla.head_map[l, h] - float(p / sig * w.lnf_w @ u)) <= TOL_F64, (name, l, h)
    assert [lab for lab in dla.labels if lab.startswith("MLP")] == [f"MLP{l}" for l in range(L)]
    assert set(dla.kinds) >= {"embed", "head", "mlp"}


# ----------------------------------------------------------------------------- a norm kind is one entry

def as_one_plus_w(w):
    """The same model with its RMSNorms stored as Gemma stores them: gain 1 + w′ with w′ = w − 1."""
    minus = (lambda t: t - 1.0)                                          # noqa: E731
    layers = [dataclasses.replace(lw, ln1_w=minus(lw.ln1_w), ln2_w=minus(lw.ln2_w)) for lw in w.layers]
    return dataclasses.replace(w, config=dataclasses.replace(w.config, norm="rmsnorm1p"), layers=layers,
                               lnf_w=minus(w.lnf_w))


def test_a_one_plus_w_rmsnorm_gives_every_consumer_the_same_numbers(family):
    """Each consumer reads the norm's gain through parts: were one to read the stored w′ itself, its numbers
    would move by the whole of the norm (w′ = w − 1), not by float64 noise."""
    w = family("smollm2-135m")
    w1 = as_one_plus_w(w)
    ids = ids_for(w, 3)
    assert close(run(w1, ids).logits, run(w, ids).logits)
    dla, dla1 = (AT.direct_logit_attribution(m, ids, 5, 9) for m in (w, w1))
    assert dla1.labels == dla.labels and close(dla1.values, dla.values)
    st, st1 = (ST.score_terms(m, ids, 2, 3, T - 1, T - 4) for m in (w, w1))
    assert st1.key_parts == st.key_parts and close(st1.values, st.values)
    for mode in ("q", "v"):
        c, c1 = (np.nan_to_num(CO.composition(m, mode, baseline_samples=2).scores[mode]) for m in (w, w1))
        assert close(c1, c)
    hs, hs1 = (CO.head_scores(m, n_pos=8) for m in (w, w1))
    assert close(hs1.copying, hs.copying, 1e-9)
    pair = P.Pair(ids, ids[:3] + [(ids[3] + 1) % 300] + ids[4:], 5, 9, T - 1)
    ea, ea1 = (AP.edge_attribution(m, pair, "noise") for m in (w, w1))
    assert close(np.nan_to_num(ea1.scores), np.nan_to_num(ea.scores))


# ----------------------------------------------------------------------------- one name per thing

@pytest.mark.parametrize("window", [None, 3])
def test_key_range_is_the_visible_keys_counted(window):
    counts = A.visible_keys(9, window)
    for i in range(9):
        keys = A.key_range(i, window)
        assert len(keys) == int(counts[i]) and keys.stop == i + 1
        assert not A.is_hidden(torch.tensor(i), torch.tensor(keys.start), window)


def test_printable_token_shows_spaces_breaks_and_control_characters():
    assert printable_token(" a\n\tb\x01\x7f") == "␣a↵⇥b\\x01\\x7f"
    assert printable_token("") == "∅"
