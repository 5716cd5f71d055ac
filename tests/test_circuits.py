"""Circuits across layers: composition scores against the HF weights, path patching against a hand-hooked
HF run, attribution patching against finite differences, circuit runs against path patching, CLIs, charts."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import compose as CO
from attnkit.circuits import discover as DI
from attnkit.circuits import path as PA
from attnkit import patching as P
from helpers import make_family_checkpoint

CLEAN = "The animal didn't cross the street because it was too tired."
CORRUPT = "The animal didn't cross the street because it was too tired!"
#: the repeated-phrase task: "kernel" was followed by "source" (clean) or by "binary" (corrupted). The two
#: prompts differ only in which word precedes "source" and "binary", so what changes is the previous-token
#: information the induction heads' keys match on, not the tokens they copy.
TINY_CLEAN = "Install the kernel source and the module binary. Install the kernel"
TINY_CORRUPT = "Install the module source and the kernel binary. Install the kernel"
#: the same clean prompt with the match broken ("kernel" no longer occurs before the end)
TINY_CORRUPT_MATCH = "Install the python source and the module binary. Install the kernel"
#: a pair that changes the copied token instead of the match (the prev-token head's output is the same)
COPY_CLEAN = "Install the python package and the kernel source. Install the python package and the kernel"
COPY_CORRUPT = "Install the python package and the kernel binary. Install the python package and the kernel"
#: more swapped-match pairs (word before the answer, word before the distractor, answer, distractor)
SWAPS = [("Find", "red", "green", "ball", "cup"), ("Install", "python", "kernel", "package", "source"),
         ("Open", "file", "window", "name", "size"), ("Install", "kernel", "python", "source", "package"),
         ("Take", "red", "blue", "box", "car")]


def swapped_texts(verb, a, b, x, y) -> dict:
    return {"clean": f"{verb} the {a} {x} and the {b} {y}. {verb} the {a}",
            "corrupt": f"{verb} the {b} {x} and the {a} {y}. {verb} the {a}", "answer": " " + x, "distractor": " " + y}


def swapped(model, *words):
    t = swapped_texts(*words)
    return P.make_pair(model, t["clean"], t["corrupt"], t["answer"], t["distractor"])


@pytest.fixture(scope="module")
def pair(odd):
    return P.make_pair(odd, CLEAN, CORRUPT, ".", "!")


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load("attnkit-tiny", "cpu")


@pytest.fixture(scope="module")
def tiny_pair(tiny):
    return P.make_pair(tiny, TINY_CLEAN, TINY_CORRUPT, " source", " binary")


@pytest.fixture(scope="module")
def solved_pair(tiny):
    """A swapped-match pair attnkit-tiny solves (tiny_pair's corrupted run still prefers the answer, +0.44: no
    circuit share is claimed on it, tests/test_not_solved.py)."""
    return swapped(tiny, *SWAPS[0])


@pytest.fixture(scope="module")
def gqa(tmp_path_factory):
    from attnkit.loading import load

    folder = make_family_checkpoint(tmp_path_factory.mktemp("circuits-gqa"), "mistral-window")
    return load(str(folder), "cpu")


# ----------------------------------------------------------------------------- composition

def _score(A, B):
    return float((A @ B).norm() / (A.norm() * B.norm()))


def _gpt2_circuits(sd, L, H, d):
    """Independent: per head (W_QK, W_OV) as full d×d float64 matrices from c_attn / c_proj split by hand,
    ln_1's weight folded into the reading side."""
    e, out = d // H, []
    for l in range(L):
        W = sd[f"transformer.h.{l}.attn.c_attn.weight"].double() * sd[f"transformer.h.{l}.ln_1.weight"].double()[:, None]
        Wo = sd[f"transformer.h.{l}.attn.c_proj.weight"].double()
        out.append([(W[:, h * e:(h + 1) * e] @ W[:, d + h * e:d + (h + 1) * e].T,
                     W[:, 2 * d + h * e:2 * d + (h + 1) * e] @ Wo[h * e:(h + 1) * e]) for h in range(H)])
    return out


def _expected(circ, l1, h1, l2, h2, mode):
    QK2, OV2 = circ[l2][h2]
    OV1 = circ[l1][h1][1]
    return _score(OV1, {"q": QK2, "k": QK2.T, "v": OV2}[mode])


def test_composition_equals_hf_state_dict(odd):
    cfg = odd.config
    circ = _gpt2_circuits(odd.hf_model.state_dict(), cfg.n_layers, cfg.n_heads, cfg.d_model)
    comp = CO.composition(odd.weights, baseline_samples=20)
    H = cfg.n_heads
    for mode in "qkv":
        s = comp.scores[mode]
        for l1 in range(cfg.n_layers):
            for l2 in range(cfg.n_layers):
                blk = s[l1 * H:(l1 + 1) * H, l2 * H:(l2 + 1) * H]
                if l1 >= l2:
                    assert np.isnan(blk).all()
                    continue
                want = np.array([[_expected(circ, l1, a, l2, b, mode) for b in range(H)] for a in range(H)])
                np.testing.assert_allclose(blk, want, rtol=1e-9, atol=1e-12)


def test_composition_gqa_equals_hf_state_dict(gqa):
    """Llama layout (q/k/v/o_proj, RMSNorm weight, 8 query heads on 2 key/value heads)."""
    cfg, sd = gqa.config, gqa.hf_model.state_dict()
    e, H = cfg.d_head, cfg.n_heads
    heads = []
    for l in range(cfg.n_layers):
        pre = f"model.layers.{l}."
        s = sd[pre + "input_layernorm.weight"].double()[:, None]
        q, k, v = (sd[pre + f"self_attn.{n}_proj.weight"].double().T * s for n in "qkv")
        o = sd[pre + "self_attn.o_proj.weight"].double().T
        g = lambda h: h // (H // cfg.kv_heads)      # noqa: E731
        heads.append([(q[:, h * e:(h + 1) * e] @ k[:, g(h) * e:(g(h) + 1) * e].T,
                       v[:, g(h) * e:(g(h) + 1) * e] @ o[h * e:(h + 1) * e]) for h in range(H)])
    comp = CO.composition(gqa.weights, baseline_samples=10)
    for mode in "kv":
        for h1 in (0, 5):
            for h2 in (0, 3, 4, 7):
                assert comp.scores[mode][h1, H + h2] == pytest.approx(_expected(heads, 0, h1, 1, h2, mode), rel=1e-9)
    assert any("grouped-query" in n for n in comp.notes)


def test_tiny_induction_heads_read_the_prev_token_head(tiny):
    """Acceptance: L2H1's K-composition with L3H2 and L3H0 are the two largest layer-2 → layer-3 pairs."""
    cfg = tiny.config
    circ = _gpt2_circuits(tiny.hf_model.state_dict(), cfg.n_layers, cfg.n_heads, cfg.d_model)
    indep = np.array([[_expected(circ, 2, a, 3, b, "k") for b in range(8)] for a in range(8)])
    assert indep[1, 2] == pytest.approx(0.218, abs=6e-4) and indep[1, 0] == pytest.approx(0.215, abs=6e-4)
    comp = CO.composition(tiny.weights, "k")
    blk = comp.block("k", 2, 3)
    np.testing.assert_allclose(blk, indep, rtol=1e-9)
    order = np.argsort(-blk, axis=None)
    assert [divmod(int(i), 8) for i in order[:2]] == [(1, 2), (1, 0)]
    assert blk.ravel()[order[2]] <= 0.2085
    b = comp.baseline
    assert 0.05 < b["mean"] < 0.07 and b["mean"] < b["q95"] <= b["q99"] < blk[1, 0]
    assert comp.top("k", 3)[0][2] > comp.baseline["q99"]


def test_random_baseline_matches_direct_random_matrices():
    """Seeded; equal for the same seed; and its mean agrees with full random d×d products."""
    a, b = CO.random_baseline(64, 8, n=50, seed=3), CO.random_baseline(64, 8, n=50, seed=3)
    assert a == b
    g = torch.Generator().manual_seed(9)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)   # noqa: E731
    direct = np.mean([_score(r(64, 8) @ r(8, 64), r(64, 8) @ r(8, 64)) for _ in range(200)])
    assert a["mean"] == pytest.approx(direct, rel=0.05)


def test_head_scores_on_hand_built_heads(odd):
    """An OV circuit that is +identity on the vocabulary copies (score 1); −identity anti-copies (−1)."""
    w = odd.weights
    cfg = w.config
    lw = w.layers[0]
    # W_V = W_Oᵀ, W_U = W_E, unit norm scales: the e×e matrix W_O·W_Eᵀ·W_E·W_Oᵀ is positive semi-definite
    new = dataclasses.replace(lw, ln1_w=torch.ones_like(lw.ln1_w), W_V=lw.W_O.transpose(1, 2).contiguous())
    neg = dataclasses.replace(new, W_V=-new.W_V)
    w2 = dataclasses.replace(w, lnf_w=torch.ones_like(w.lnf_w), W_U=w.wte, layers=[new, neg] + w.layers[2:])
    hs = CO.head_scores(w2)
    np.testing.assert_allclose(hs.copying[0], 1.0, atol=1e-9)
    np.testing.assert_allclose(hs.copying[1], -1.0, atol=1e-9)
    assert hs.qk_positional.shape == (cfg.n_layers, cfg.n_heads)
    assert ((hs.qk_positional >= 0) & (hs.qk_positional <= 1 + 1e-9)).all()


def test_offset_structure_exact():
    """Scores that depend only on i − j are explained by the offset alone (share 1), preferring offset 1."""
    N = 12
    i, j = np.indices((N, N))
    S = torch.tensor(-np.abs(i - j - 1.0) * 3.0)[None]
    share, best = CO._offset_structure(S)
    assert float(share[0]) == pytest.approx(1.0) and int(best[0]) == 1


def test_composition_bad_mode(odd):
    with pytest.raises(ValueError, match="unknown composition mode"):
        CO.composition(odd.weights, ("x",))


# ----------------------------------------------------------------------------- path patching (vs HF)

def _hf_sender_out(hf, ids, sender, H):
    """Independent: the sender's output [T, d] from HF modules."""
    tr = hf.transformer
    x = torch.tensor([ids])
    got = {}
    if sender[0] == "embed":
        with torch.no_grad():
            return (tr.wte(x) + tr.wpe(torch.arange(len(ids))))[0]
    if sender[0] == "head":
        mod = tr.h[sender[1]].attn.c_proj
        hk = mod.register_forward_pre_hook(lambda m, a: got.__setitem__("z", a[0].detach()))
    else:
        mod = tr.h[sender[1]].mlp
        hk = mod.register_forward_hook(lambda m, a, o: got.__setitem__("z", o.detach()))
    with torch.no_grad():
        hf(x)
    hk.remove()
    if sender[0] == "mlp":
        return got["z"][0]
    e = hf.config.n_embd // H
    sl = slice(sender[2] * e, (sender[2] + 1) * e)
    return got["z"][0, :, sl] @ mod.weight[sl]


def _ln(mod, x):
    return F.layer_norm(x, mod.normalized_shape, mod.weight, mod.bias, mod.eps)


def _hf_patched_ld(hf, ids, recv, delta, a, d, pos, H):
    """Independent: HF forward hooks give the receiver norm(x + Δ) for its input only."""
    tr, hooks, keep = hf.transformer, [], {}
    if recv[0] in ("q", "k", "v"):
        blk = tr.h[recv[1]]
        hooks.append(blk.ln_1.register_forward_hook(lambda m, i, o: keep.__setitem__("x", _ln(m, i[0] + delta))))
        e, D = hf.config.n_embd // H, hf.config.n_embd
        off = {"q": 0, "k": D, "v": 2 * D}[recv[0]] + recv[2] * e

        def swap(m, i, o):
            o = o.clone()
            o[..., off:off + e] = (keep["x"] @ m.weight + m.bias)[..., off:off + e]
            return o
        hooks.append(blk.attn.c_attn.register_forward_hook(swap))
    else:
        ln = tr.ln_f if recv[0] == "logits" else tr.h[recv[1]].ln_2
        hooks.append(ln.register_forward_hook(lambda m, i, o: _ln(m, i[0] + delta)))
    try:
        with torch.no_grad():
            lg = hf(torch.tensor([ids])).logits[0, pos].double()
    finally:
        for h in hooks:
            h.remove()
    return float(lg[a] - lg[d])


@pytest.mark.parametrize("direction", ["denoise", "noise"])
def test_path_patching_equals_hand_hooked_hf(odd, pair, direction):
    cfg, hf, H = odd.config, odd.hf_model, odd.config.n_heads
    runs = PA.cache_runs(odd.weights, pair)
    edges = [("L0H1", "L2H3.k"), ("L1H4", "L2H0.q"), ("L0H5", "L1H2.v"), ("embed", "L1H0.k"), ("MLP0", "L2H5.q"),
             ("L1H3", "MLP1"), ("L2H2", "logits"), ("MLP2", "logits"), ("L0H0", "MLP0")]
    recv_ids, src_ids = (pair.corrupt, pair.clean) if direction == "denoise" else (pair.clean, pair.corrupt)
    parsed = [(PA.parse_node(s, cfg), PA.parse_node(r, cfg, "receiver")) for s, r in edges]
    got = PA.edge_effects(runs, parsed, direction)
    for (s, r), v in zip(parsed, got):
        delta = _hf_sender_out(hf, src_ids, s, H) - _hf_sender_out(hf, recv_ids, s, H)
        want = _hf_patched_ld(hf, recv_ids, r, delta, pair.answer, pair.distractor, pair.pos, H)
        assert v == pytest.approx(want, abs=2e-4), (PA.node_name(s), PA.node_name(r))
    # the per-receiver map is the same computation, one row per sender
    res = PA.path_map(odd.weights, pair, "L2H3.k", direction, runs=runs)
    assert res.senders == [f"L{l}H{h}" for l in range(2) for h in range(H)]
    assert res.raw[1] == pytest.approx(got[0], abs=1e-5)


def test_path_patching_moves_tiny_induction_keys(tiny, tiny_pair):
    """Acceptance: L2H1 → L3H0's and L3H2's keys carry a large share of the clean/corrupted gap on the
    swapped-match pair, in both directions, and only through the keys (not q or v)."""
    runs = PA.cache_runs(tiny.weights, tiny_pair)
    assert runs.clean_ld > 4 and runs.clean_ld - runs.corrupt_ld > 4
    for recv in ("L3H0.k", "L3H2.k"):
        res = PA.path_patch(tiny.weights, tiny_pair, "L2H1", recv, "denoise", runs=runs)
        assert res.change[0] > 1.0 and res.normalised[0] > 0.2, (recv, res.change)
        back = PA.path_patch(tiny.weights, tiny_pair, "L2H1", recv, "noise", runs=runs)
        assert back.change[0] < -0.5, (recv, back.change)
    for recv in ("L3H0.q", "L3H0.v"):
        assert abs(PA.path_patch(tiny.weights, tiny_pair, "L2H1", recv, runs=runs).change[0]) < 0.1
    # the other swapped pairs agree: on average L2H1 → L3H0.k restores ≥ 15 % of each gap
    many = PA.path_map_many(tiny.weights, [swapped(tiny, *v) for v in SWAPS], "L3H0.k", senders=["L2H1"])
    assert many["mean"][0] > 0.15 and (many["per_pair"][:, 0] > 0.1).all(), many["per_pair"]


def test_copy_pair_does_not_exercise_the_prev_token_head(tiny):
    """Why the earlier default pair (the copied token changed) showed almost nothing on this edge: L2H1's
    output is the same in both prompts except after the changed token, so patching it moves little; its
    mean over positions (the previous-token information removed) moves a lot."""
    pr = P.make_pair(tiny, COPY_CLEAN, COPY_CORRUPT, " source", " binary")
    runs = PA.cache_runs(tiny.weights, pr)
    out = PA.sender_output(runs.clean, ("head", 2, 1)) - PA.sender_output(runs.corrupt, ("head", 2, 1))
    changed = [t for t in range(pr.T) if pr.clean[t] != pr.corrupt[t]]
    assert changed == [7] and out[:7].abs().max() < 1e-5        # causal: nothing before the change moves
    assert abs(PA.path_patch(tiny.weights, pr, "L2H1", "L3H0.k", runs=runs).change[0]) < 0.05
    assert PA.path_patch(tiny.weights, pr, "L2H1", "L3H0.k", "noise", "mean", runs=runs).change[0] < -0.2


def test_path_bad_nodes(odd, pair):
    for recv, msg in (("L2H3", "say which input"), ("L9H0.k", "layers"), ("foo", "unknown receiver")):
        with pytest.raises(P.PatchError, match=msg):
            PA.path_map(odd.weights, pair, recv)
    with pytest.raises(P.PatchError, match="not earlier"):
        PA.path_patch(odd.weights, pair, "L2H0", "L1H0.q")
    with pytest.raises(P.PatchError, match="unknown source"):
        PA.path_patch(odd.weights, pair, "L0H0", "L1H0.q", source="zero")


# ----------------------------------------------------------------------------- attribution patching

def _double(w):
    f = (lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t)   # noqa: E731
    layers = [dataclasses.replace(lw, **{k: f(getattr(lw, k)) for k in lw.__dataclass_fields__}) for lw in w.layers]
    top = {k: f(getattr(w, k)) for k in w.__dataclass_fields__ if k not in ("config", "layers")}
    return dataclasses.replace(w, layers=layers, **top)


def test_rank_and_spearman_hand_computed():
    np.testing.assert_array_equal(AP.rank([10, 30, 20, 20]), [1, 4, 2.5, 2.5])
    assert AP.spearman([1, 2, 3], [3, 5, 9]) == pytest.approx(1.0)
    assert AP.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): 4.5 / √(4.5·5)
    assert AP.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / np.sqrt(22.5))
    scipy = pytest.importorskip("scipy.stats")
    x, y = np.random.default_rng(0).normal(size=(2, 40)).round(1)
    assert AP.spearman(x, y) == pytest.approx(scipy.spearmanr(x, y)[0])


def _check_edge_derivatives(weights, pr, n=30, seed=1, eps=1e-4, rel=1e-5, atol=1e-8):
    w64 = _double(weights)
    cfg = weights.config
    ea = AP.edge_attribution(w64, pr, "noise")
    runs = PA.cache_runs(w64, pr)
    ii, jj = np.nonzero(np.isfinite(ea.scores))
    kinds = set()
    for k in np.random.default_rng(seed).choice(len(ii), n, replace=False):
        s, r = PA.parse_node(ea.senders[ii[k]], cfg), PA.parse_node(ea.receivers[jj[k]], cfg, "receiver")
        kinds.add(r[0])
        delta = PA.sender_output(runs.corrupt, s) - PA.sender_output(runs.clean, s)
        up, dn = (PA.edge_effects(runs, [(s, r)], "noise", deltas={s: c * eps * delta})[0] for c in (1, -1))
        assert ea.scores[ii[k], jj[k]] == pytest.approx((up - dn) / (2 * eps), rel=rel, abs=atol)
    return kinds


def test_edge_attribution_is_the_derivative_of_path_patching(odd, pair):
    """In float64 the edge score equals d/dε of the exactly patched LD with Δ scaled by ε (central
    differences), for every receiver kind: the gradients through the norms are right."""
    assert len(_check_edge_derivatives(odd.weights, pair)) >= 4


def test_edge_attribution_derivative_other_families(family):
    """The same on RMSNorm + GQA (a k/v receiver is the shared key/value head) and LayerNorm + parallel
    blocks + rotary. RMSNorm runs in float32 even in a float64 model (as HF does), so the differences
    use a larger ε and a tolerance above that float32 noise (~1e-7 / ε)."""
    ids = family.encode("Attention lets every token look back at the tokens before it.")[:10]
    pr = P.Pair(ids, ids[:3] + [(ids[3] + 1) % 300] + ids[4:], 5, 9, len(ids) - 1)
    rms = family.config.norm == "rmsnorm"
    kinds = _check_edge_derivatives(family.weights, pr, n=20, seed=2, eps=1e-2 if rms else 1e-4,
                                    rel=2e-3 if rms else 1e-5, atol=2e-5 if rms else 1e-8)
    assert len(kinds) >= 3


def test_head_attribution_is_the_derivative_of_z_patching(odd, pair):
    w64 = _double(odd.weights)
    ha = AP.head_attribution(w64, pair, "denoise", exact=False)
    w2 = P.two_token_weights(w64, pair.answer, pair.distractor)
    from attnkit.model import run

    clean_z = run(w2, pair.clean, capture=["z"])
    corr_z = run(w2, pair.corrupt, capture=["z"])
    for l, h, t in ((0, 1, 3), (1, 4, pair.pos), (2, 0, pair.pos), (2, 5, 5)):
        dz = clean_z["z", l][0, h, t] - corr_z["z", l][0, h, t]      # denoise: Δz = clean − corrupted

        def ld(eps, l=l, h=h, t=t, dz=dz):
            def hook(z, layer):
                if layer == l:
                    z = z.clone()
                    z[0, h, t] += eps * dz
                    return z
            return float(P.logit_diffs(run(w2, pair.corrupt, hooks={"z": hook}).logits, pair.pos)[0])

        deriv = (ld(1e-4) - ld(-1e-4)) / 2e-4
        assert ha.estimate[l, h, t] - ha.corrupt_ld == pytest.approx(deriv, rel=1e-5, abs=1e-9)


def test_head_attribution_beside_exact_on_tiny(tiny, tiny_pair):
    ha = AP.head_attribution(tiny.weights, tiny_pair, "denoise")
    ref = P.patch(tiny.weights, tiny_pair, "z", per_position=True)
    np.testing.assert_allclose(ha.exact, ref.raw, atol=1e-5)
    assert (ha.clean_ld, ha.corrupt_ld) == pytest.approx((ref.clean_ld, ref.corrupt_ld), abs=1e-4)
    assert ha.spearman > 0.7
    assert list(ha.frame().columns[:4]) == ["name", "layer", "head", "position"]


# ----------------------------------------------------------------------------- circuit runs and discovery

def _nodes(cfg):
    return ([PA.parse_node(n, cfg) for n in PA.sender_names(cfg)],
            [PA.parse_node(n, cfg, "receiver") for n in PA.receiver_names(cfg)])


def test_circuit_runs_full_empty_and_one_edge_out(odd, pair):
    """Every edge kept = the clean run; none kept (resample) = the corrupted run; all but one edge = path
    patching of that edge with Δ = corrupted − clean (the two engines agree)."""
    cfg = odd.config
    S, R = _nodes(cfg)
    runs = PA.cache_runs(odd.weights, pair)
    abl = DI.ablated_outputs(runs, S, "resample")
    ok = torch.tensor([[PA.precedes(s, r, cfg) for r in R] for s in S])
    edges = [("L0H2", "L1H3.v"), ("MLP0", "L2H1.k"), ("L1H5", "logits"), ("embed", "MLP1")]
    keep = [torch.zeros_like(ok), ok.clone()]
    for s, r in edges:
        k = ok.clone()
        k[S.index(PA.parse_node(s, cfg)), R.index(PA.parse_node(r, cfg, "receiver"))] = False
        keep.append(k)
    lds = DI.circuit_logit_diffs(runs, S, R, torch.stack(keep), abl)
    assert lds[0] == pytest.approx(runs.corrupt_ld, abs=1e-4)
    assert lds[1] == pytest.approx(runs.clean_ld, abs=1e-4)
    want = PA.edge_effects(runs, [(PA.parse_node(s, cfg), PA.parse_node(r, cfg, "receiver")) for s, r in edges],
                           "noise")
    np.testing.assert_allclose(lds[2:], want, atol=1e-4)


@pytest.fixture(scope="module", params=["mistral-window", "pythia-70m"])
def family(request, gqa, tmp_path_factory):
    from attnkit.loading import load

    if request.param == "mistral-window":
        return gqa
    return load(str(make_family_checkpoint(tmp_path_factory.mktemp("circuits-neox"), request.param)), "cpu")


def test_circuit_runs_other_families(family):
    """Grouped-query attention (Mistral layout) and parallel blocks with rotary positions (Pythia): every edge
    kept = clean, none = corrupted, all but one (q, MLP or logits receiver) = path patching of that edge."""
    ids = family.encode("Attention lets every token look back at the tokens before it.")
    pr = P.Pair(ids, ids[:3] + [(ids[3] + 1) % 300] + ids[4:], 5, 9, len(ids) - 1)
    cfg = family.config
    S, R = _nodes(cfg)
    runs = PA.cache_runs(family.weights, pr)
    ok = torch.tensor([[PA.precedes(s, r, cfg) for r in R] for s in S])
    edges = [("L0H1", "L1H2.q"), ("MLP0", "MLP1"), ("L1H3", "logits"), ("embed", "L1H0.q"), ("L0H2", "MLP0")]
    if cfg.parallel:
        edges = edges[:-1]            # a parallel block's MLP reads the stream before its own heads
    keep = [ok.clone(), torch.zeros_like(ok)]
    for s, r in edges:
        k = ok.clone()
        k[S.index(PA.parse_node(s, cfg)), R.index(PA.parse_node(r, cfg, "receiver"))] = False
        keep.append(k)
    lds = DI.circuit_logit_diffs(runs, S, R, torch.stack(keep), DI.ablated_outputs(runs, S, "resample"))
    assert lds[0] == pytest.approx(runs.clean_ld, abs=1e-4)
    assert lds[1] == pytest.approx(runs.corrupt_ld, abs=1e-4)
    want = PA.edge_effects(runs, [(PA.parse_node(s, cfg), PA.parse_node(r, cfg, "receiver")) for s, r in edges],
                           "noise")
    np.testing.assert_allclose(lds[2:], want, atol=1e-4)
    assert not np.allclose(want, runs.clean_ld, atol=1e-6)      # the edges do something


def test_discovery_on_tiny_finds_the_induction_circuit(tiny, solved_pair):
    """Acceptance: the circuit found on a swapped-match pair the model solves, and on five such pairs at once,
    holds the previous-token head L2H1 and the induction heads L3H0 and L3H2, is a small share of the 1,519
    edges, and recovers ≥ 80 % of the clean LD when every other edge is resample-ablated."""
    c = DI.discover(tiny.weights, solved_pair, 0.8)
    assert c.reached and c.circuit_ld / c.clean_ld >= 0.8
    assert {"L2H1", "L3H0", "L3H2"} <= set(c.heads)
    assert {("L2H1", "L3H0.k"), ("L2H1", "L3H2.k")} <= {e[:2] for e in c.edges}
    assert c.empty_ld == pytest.approx(c.corrupt_ld, abs=1e-4) and c.faithfulness[-1] == pytest.approx(1, abs=1e-5)
    assert c.size < len(c.ranked) / 10
    pairs = [swapped(tiny, *v) for v in SWAPS]
    many = DI.discover(tiny.weights, pairs, 0.8)
    assert many.reached and many.size < 100 and {"L2H1", "L3H0", "L3H2"} <= set(many.heads), many.size
    assert json.loads(json.dumps(many.to_json()))["size"] == many.size
    # plain edge attribution (gradients at the clean run only) ranks these edges too low: far more are needed
    plain = DI.discover(tiny.weights, pairs, 0.8, steps=1)
    assert plain.size > 5 * many.size, (plain.size, many.size)


def test_integrated_edge_attribution_is_complete_over_the_embedding(tiny, tiny_pair):
    """Σ over every reader r of the embedding's edge score embed → r is Δembed · ∂LD/∂embed (the gradient
    through each reader, summed, is the whole gradient); averaged along the line from the clean to the
    corrupted embedding it is LD(corrupted) − LD(clean) (integrated gradients' completeness). One point (at
    the clean run) is far off on this pair; 16 points are within 0.5 %."""
    w64 = _double(tiny.weights)
    runs = PA.cache_runs(w64, tiny_pair)
    gap = runs.corrupt_ld - runs.clean_ld

    def total(steps):
        ea = AP.edge_attribution(w64, tiny_pair, "noise", steps=steps, runs=runs)
        assert ea.receiving_ld == pytest.approx(runs.clean_ld, abs=1e-9)
        return np.nansum(ea.scores[ea.senders.index("embed")])

    assert total(16) == pytest.approx(gap, rel=5e-3)
    assert abs(total(1) - gap) > 0.2 * abs(gap)
    with pytest.raises(P.PatchError, match="steps"):
        AP.edge_attribution(w64, tiny_pair, steps=0, runs=runs)


def test_discovery_bad_input(odd, pair):
    with pytest.raises(P.PatchError, match="unknown ablation"):
        DI.discover(odd.weights, pair, ablation="zero")
    with pytest.raises(P.PatchError, match="no prompt pairs"):
        DI.discover(odd.weights, [])
    with pytest.raises(P.PatchError, match="target share"):
        DI.discover(odd.weights, pair, 0)


def test_bench_function_runs(odd):
    from attnkit.circuits.timing import circuit_bench, random_pair

    pr = random_pair(odd.weights, 9)
    # first half (5 tokens) repeated to 9; the last token (= token 3) was followed by token 4: the answer
    assert pr.clean[:4] == pr.clean[5:9] and pr.answer == pr.clean[4] and pr.corrupt[4] == pr.distractor
    assert pr.distractor not in pr.clean and [i for i in range(9) if pr.clean[i] != pr.corrupt[i]] == [4]
    out = circuit_bench(odd.weights, T=8, repeat=1, exact=False, discovery=False)
    assert out["attribution_ratio"] > 0 and out["forward_backward_s"] > 0


# ----------------------------------------------------------------------------- charts and CLIs

def test_charts(tiny, solved_pair):
    from attnkit.charts import circuits as CC

    comp = CO.composition(tiny.weights, "k", baseline_samples=20)
    spec = CC.composition_matrix(comp, "k").to_dict()
    assert spec["layer"][1]["transform"][0]["filter"] == "datum.beyond_q99"
    assert "baseline mean" in json.dumps(spec["layer"][0].get("title", spec.get("title")))
    c = DI.discover(tiny.weights, solved_pair)
    g = CC.circuit_graph(c.edges, 4, 8).to_dict()
    assert any(l.get("mark", {}).get("type") == "rule" for l in g["layer"] if isinstance(l.get("mark"), dict))
    CC.faithfulness_curve(c).to_dict()
    assert CC.node_xy("L3H0.k", 4, 8) == (0.0, 3.0) and CC.node_xy("logits", 4, 8)[1] == 4.0


def test_compose_cli(tmp_path, capsys):
    from attnkit.cli import main

    out = tmp_path / "c.json"
    assert main(["compose", "--model", "attnkit-tiny", "--mode", "k", "--layers", "2", "3", "--top", "2",
                 "--samples", "20", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "L2H1 → L3H2" in text and "L2H1 → L3H0" in text
    got = json.loads(out.read_text())
    assert [p["receiver"] for p in got["top"]["k"]] == ["L3H2", "L3H0"] and got["baseline"]["n"] == 20
    assert main(["compose", "--model", "attnkit-tiny", "--layers", "3", "2"]) == 2
    assert "need SENDER < RECEIVER" in capsys.readouterr().err


@pytest.mark.parametrize("argv, msg", [
    (["compose", "--top", "0"], "--top"),
    (["compose", "--mode", "x"], "--mode"),
    (["compose", "--json", "/nonexistent-dir/x.json"], "--json"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--receiver", "L3"],
     "not a node"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--share", "2"],
     "--share"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--sender", "L0H0"],
     "--sender needs --receiver"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--ablation", "zero"],
     "--ablation"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--steps", "0"],
     "--steps"),
    (["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b", "--pairs", "/nonexistent"],
     "--pairs"),
])
def test_cli_bad_args_exit_2_before_loading(argv, msg, capsys, monkeypatch):
    from attnkit import loading
    from attnkit.cli import main

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("text, msg", [("{\"clean\": 1}", "line 1: needs the text fields"),
                                       ("\n{not json", "line 2: not JSON"), ("[1, 2]", "line 1: needs")])
def test_circuit_cli_bad_pairs_file(text, msg, tmp_path, capsys, monkeypatch):
    from attnkit import loading
    from attnkit.cli import main

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    f = tmp_path / "pairs.jsonl"
    f.write_text(text)
    assert main(["circuit", "--clean", "a", "--corrupt", "b", "--answer", "a", "--distractor", "b",
                 "--pairs", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "--pairs" in err[0], err


def test_circuit_cli_prompt_set(tiny, tmp_path, capsys):
    """Discovery over the five swapped-match pairs from a --pairs file; a pair of unequal lengths is refused."""
    from attnkit.cli import main

    f = tmp_path / "pairs.jsonl"
    f.write_text("\n".join(json.dumps(swapped_texts(*v)) for v in SWAPS[1:]))
    out = tmp_path / "c.json"
    first = swapped_texts(*SWAPS[0])
    base = ["circuit", "--model", "attnkit-tiny", "--clean", first["clean"], "--corrupt", first["corrupt"],
            "--answer", first["answer"], "--distractor", first["distractor"]]
    assert main(base + ["--pairs", str(f), "--top", "2", "--json", str(out)]) == 0
    assert "5 pair(s)" in capsys.readouterr().out
    c = json.loads(out.read_text())["circuit"]
    assert c["pairs"] == 5 and c["reached"] and c["size"] < 100 and {"L2H1", "L3H0", "L3H2"} <= set(c["heads"])
    f.write_text(json.dumps({"clean": "a b c", "corrupt": "a b", "answer": "a", "distractor": "b"}))
    assert main(base + ["--pairs", str(f)]) == 2
    assert "--pairs, pair 1:" in capsys.readouterr().err


def test_circuit_cli(tiny, tmp_path, capsys):
    from attnkit.cli import main

    base = ["circuit", "--model", "attnkit-tiny", "--clean", TINY_CLEAN, "--corrupt", TINY_CORRUPT,
            "--answer", " source", "--distractor", " binary"]
    out = tmp_path / "p.json"
    assert main(base + ["--receiver", "L3H0.k", "--source", "mean", "--direction", "noise", "--json", str(out)]) == 0
    assert "L2H1 → L3H0.k" in capsys.readouterr().out
    got = json.loads(out.read_text())["path"]
    assert got["receiver"] == "L3H0.k" and len(got["senders"]) == 1 + 3 * 8 + 3      # embed, heads, MLP0…2
    assert main(base + ["--receiver", "L1H0.k", "--sender", "L2H1"]) == 2
    assert "not earlier" in capsys.readouterr().err
    assert main(base + ["--sender", "L2H1"]) == 2
    out = tmp_path / "c.json"
    first = swapped_texts(*SWAPS[0])            # a pair the model solves (base's is not: no share, test_not_solved.py)
    solved = ["circuit", "--model", "attnkit-tiny", "--clean", first["clean"], "--corrupt", first["corrupt"],
              "--answer", first["answer"], "--distractor", first["distractor"]]
    more = "Find the blue ball and the red cup. Find the red"     # "red" now precedes the distractor: solved too
    assert main(solved + ["--more-corrupt", more, "--top", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "circuit:" in text and "L2H1" in text
    c = json.loads(out.read_text())["circuit"]
    assert c["reached"] and c["pairs"] == 2 and c["solved"]


def test_circuits_page(tiny):
    from helpers import apptest

    at = apptest("circuits", timeout=300).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    heads = [s.value for s in at.subheader]
    assert any("compose" in h for h in heads) and any("Path patching" in h for h in heads)
    assert any("random" in c.value.lower() and "0.06" in c.value for c in at.caption)
    kept = at.metric[0].value
    assert "of 1519" in kept and float(at.metric[1].value.rstrip("%")) >= 80
    assert "L2H1" in " ".join(c.value for c in at.caption if c.value.startswith("Heads in the circuit"))
    # what a click on the edge L2H1 → L3H0.k sets: its path patch is shown
    for k, v in dict(ci_recv_layer=3, ci_recv_head=0, ci_recv_input="k", ci_sender="L2H1").items():
        at.session_state[k] = v
    at.run()
    info = [i.value for i in at.info if "L2H1 → L3H0.k" in i.value]
    assert info, [i.value for i in at.info]
    assert float(info[0].split("(change ")[1].split(",")[0]) > 1.0       # the keys' path moves the LD
    at.text_input(key="ci_corrupt").input("Install the kernel").run()
    assert any("must be the same length" in e.value for e in at.error)


def test_path_map_over_a_prompt_set_and_batches(tiny, tiny_pair):
    """The set's mean is the mean of the pairs' maps; circuit runs split into small batches agree."""
    broken = P.make_pair(tiny, TINY_CLEAN, TINY_CORRUPT_MATCH, " source", " binary")
    many = PA.path_map_many(tiny.weights, [tiny_pair, broken], "L3H0.k", "noise")
    one = [PA.path_map(tiny.weights, p, "L3H0.k", "noise").normalised for p in (tiny_pair, broken)]
    np.testing.assert_allclose(many["mean"], np.mean(one, 0), atol=1e-12)
    assert many["n"] == 2 and len(many["senders"]) == 24
    cfg = tiny.config
    S, R = _nodes(cfg)
    runs = PA.cache_runs(tiny.weights, tiny_pair)
    abl = DI.ablated_outputs(runs, S, "mean")
    keep = torch.rand(5, len(S), len(R), generator=torch.Generator().manual_seed(0)) < 0.5
    a = DI.circuit_logit_diffs(runs, S, R, keep, abl)
    b = DI.circuit_logit_diffs(runs, S, R, keep, abl, max_bytes=1)
    np.testing.assert_allclose(a, b, atol=1e-4)


# ----------------------------------------------------------------------------- progress and Stop (the page's jobs)

class _Stop(BaseException):
    """Stands for attnkit.app.jobs.Stopped, which the page's progress callback raises once Stop is pressed."""


def _recorder(stop_after: int | None = None):
    calls = []

    def progress(done, total):
        calls.append((done, total))
        if stop_after is not None and len(calls) >= stop_after:
            raise _Stop
    return calls, progress


def test_circuit_work_reports_progress_and_stops_when_asked(pair, odd):
    """Path maps, discovery, the exact comparison and the weight views count up to their total (done ≤ total, never
    backwards, ending at total) and end at the first progress call that raises, as Stop does."""
    w = odd.weights
    L = w.config.n_layers
    runs = {
        "path map": lambda pr: PA.path_map(w, pair, f"L{L - 1}H0.k", "denoise", mlps=True, progress=pr),
        "discover": lambda pr: DI.discover(w, pair, 0.8, progress=pr, steps=2),
        "versus exact": lambda pr: AP.versus_exact(w, pair, True, progress=pr),
        "weight views": lambda pr: CO.weight_views(w, progress=pr),
    }
    for name, fn in runs.items():
        calls, pr = _recorder()
        fn(pr)
        assert calls, name
        dones = [d for d, _ in calls]
        assert dones == sorted(dones) and all(d <= t for d, t in calls), (name, calls)
        assert calls[-1][0] == calls[-1][1], (name, calls[-1])
        calls, pr = _recorder(stop_after=1)
        with pytest.raises(_Stop):
            fn(pr)
        assert len(calls) == 1, name


def test_versus_exact_counts_every_exact_run(pair, odd):
    """Its total is the heads × positions up to the read position plus the compared edges (by default the
    EXACT_TOP = 200 of largest |estimate|, of 397 here), and its results are head_attribution's and
    edge_attribution's with exact values."""
    w = odd.weights
    calls, pr = _recorder()
    ha, ea = AP.versus_exact(w, pair, False, progress=pr)
    c = w.config
    edges = int(np.isfinite(ea.scores).sum())
    assert edges > AP.EXACT_TOP
    assert calls[-1][1] == c.n_layers * c.n_heads * (pair.pos + 1) + AP.EXACT_TOP
    assert ha.exact is not None and ea.exact is not None
    np.testing.assert_allclose(ha.estimate, AP.head_attribution(w, pair, "denoise", exact=False).estimate, atol=1e-9)


def test_weight_views_are_composition_and_head_scores(odd):
    comp, hs = CO.weight_views(odd.weights)
    ref = CO.composition(odd.weights)
    for m in CO.MODES:
        np.testing.assert_array_equal(comp.scores[m], ref.scores[m])
    np.testing.assert_array_equal(hs.frame()["copying"], CO.head_scores(odd.weights).frame()["copying"])


def test_circuit_cli_pairs_file_is_read_by_the_one_reader(tmp_path):
    """--pairs takes what the pages take: 'corrupted' or 'corrupt', CSV by its name, UTF-16; a bad row refuses
    the file naming its line and the missing fields."""
    import argparse

    from attnkit.cli.circuit import pairs_file

    row = {"clean": "a b", "corrupted": "a c", "answer": " b", "distractor": " c"}
    f = tmp_path / "p.csv"
    f.write_bytes("clean,corrupt,answer,distractor\na b,a c, b, c\n".encode("utf-16"))
    got = pairs_file(str(f))
    assert [(r.clean, r.corrupted, r.answer, r.distractor) for r in got.rows] == [tuple(row.values())]
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(row) + "\n" + json.dumps({"clean": "x"}) + "\n")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^line 2: needs .*missing or not text: corrupted, answer"):
        pairs_file(str(f))


def test_circuits_page_checks_its_examples_and_takes_a_prompt_set(tiny):
    """Circuits offers the one registry's examples, each checked on the model, the solved ones first (the swapped
    match, solved on attnkit-tiny, is its default; the unsolved ones are marked and listed after them); an
    uploaded set adds pairs to discovery and a bad row is named."""
    from helpers import apptest

    rows = [{"clean": TINY_CLEAN, "corrupt": TINY_CORRUPT, "answer": " source", "distractor": " binary"},
            {"clean": TINY_CLEAN, "answer": " source"}]
    at = apptest("circuits", timeout=300,
                 ci_upload_data=("set.jsonl", "\n".join(json.dumps(r) for r in rows).encode())).run()
    assert not at.exception, at.exception
    box = at.selectbox(key="ci_example")
    assert box.value == "A repeated phrase, match swapped"
    assert box.options[:2] == ["A repeated phrase, match swapped", "A repeated phrase"]
    assert all(o.endswith("(not solved)") for o in box.options[2:-1]) and box.options[-1] == "Your own"
    assert not any("does not solve" in w.value for w in at.warning)
    assert any("line 2: needs" in w.value and "corrupted, distractor" in w.value for w in at.warning)
    assert any(c.value.startswith("1 more pair(s) from set.jsonl") for c in at.caption)
