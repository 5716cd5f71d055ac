"""The step-by-step computations: equal to the model's own captures, to NumPy float64, and to the seeds."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close
from torch.utils.flop_counter import FlopCounterMode

from attnkit import steps as S
from attnkit.model import KVCache, run
from helpers import apptest, selectbox

TEXT = "The animal didn't cross the street because it was too tired."
TIGHT = dict(rtol=1e-5, atol=2e-6)      # float32: the same maths in a different matmul blocking


@pytest.fixture(scope="module")
def prompt(odd):
    ids = odd.encode(TEXT)
    return ids, run(odd.weights, ids, capture="all")


def _np_softmax(s):
    s = s - s[np.isfinite(s)].max()
    e = np.exp(s)
    return e / e.sum()


@pytest.mark.parametrize("layer,head,query", [(0, 0, 0), (1, 4, 5), (2, 5, -1)])
def test_steps_equal_trace_captures(odd, prompt, layer, head, query):
    ids, tr = prompt
    T = len(ids)
    i = query % T
    hs = S.head_steps(odd.weights, ids, layer, head, i)
    assert_close(hs.x_hat, tr["ln1", layer][0, : i + 1], **TIGHT)
    assert_close(hs.q, tr["q", layer][0, head, i], **TIGHT)
    assert_close(hs.k, tr["k", layer][0, head, : i + 1], **TIGHT)
    assert_close(hs.v, tr["v", layer][0, head, : i + 1], **TIGHT)
    assert_close(hs.scaled, tr["scores", layer][0, head, i, : i + 1], **TIGHT)
    assert_close(hs.weights, tr["pattern", layer][0, head, i, : i + 1], **TIGHT)
    assert_close(hs.z, tr["z", layer][0, head, i], **TIGHT)
    assert_close(hs.z_all, tr["z", layer][0, :, i], **TIGHT)
    assert_close(hs.attn_out, tr["attn_out", layer][0, i], **TIGHT)
    assert_close(hs.sum_of_heads, tr["attn_out", layer][0, i], **TIGHT)
    # the mask row: 0 up to the query, −∞ after it; the model's pattern is exactly 0 there
    assert torch.all(hs.mask_row[: i + 1] == 0) and torch.all(torch.isneginf(hs.mask_row[i + 1:]))
    assert torch.all(torch.isneginf(hs.masked_row[i + 1:]))
    assert torch.all(tr["pattern", layer][0, head, i, i + 1:] == 0)
    assert hs.weight_sum == pytest.approx(1.0, abs=1e-6)
    assert_close(hs.dots * hs.scale, hs.scaled)
    assert hs.scale == pytest.approx(1 / math.sqrt(odd.config.d_head))
    # the page's own check agrees
    diffs = S.trace_differences(hs, tr)
    assert (diffs["max |Δ|"] <= 2e-5).all()


def test_steps_equal_numpy_float64(odd, prompt):
    """One head recomputed from x̂ with NumPy float64, independent of attnkit.attention."""
    ids, tr = prompt
    layer, head, i = 1, 2, len(ids) - 3
    hs = S.head_steps(odd.weights, ids, layer, head, i)
    lw = odd.weights.layers[layer]
    x = tr["ln1", layer][0, : i + 1].double().numpy()
    Wq, Wk, Wv = (w[head].double().numpy() for w in (lw.W_Q, lw.W_K, lw.W_V))
    bq, bk, bv = (b[head].double().numpy() for b in (lw.b_Q, lw.b_K, lw.b_V))
    q, k, v = x[-1] @ Wq + bq, x @ Wk + bk, x @ Wv + bv
    dots = k @ q
    a = _np_softmax(dots / math.sqrt(q.shape[0]))
    z = a @ v
    out = z @ lw.W_O[head].double().numpy()
    for ours, ref in ((hs.dots, dots), (hs.weights, a), (hs.z, z), (hs.head_out, out)):
        np.testing.assert_allclose(ours.double().numpy(), ref, rtol=1e-4, atol=1e-6)


def test_head_steps_checks_its_arguments(odd):
    ids = odd.encode("Hello there")
    for bad in ((3, 0, 0), (0, 6, 0), (0, 0, len(ids))):
        with pytest.raises(ValueError, match="out of range"):
            S.head_steps(odd.weights, ids, *bad)


def test_compact_frames(odd, prompt):
    ids, _ = prompt
    hs = S.head_steps(odd.weights, ids, 0, 1, len(ids) - 1)
    full = S.key_frame(hs)
    assert len(full) == len(ids)
    top = S.key_frame(hs, top_k=3)
    assert list(top["weight"]) == sorted(full["weight"], reverse=True)[:3]
    assert list(top.columns).count("k[7]") == 1 and "k[8]" not in top.columns
    assert S.vector_frame(hs, "k").shape == (len(ids), 1 + odd.config.d_head)
    assert len(S.heads_frame(hs)) == odd.config.n_heads


# ----------------------------------------------------------------------------- seeds

def test_seed_4x4_matches_numpy_and_the_seed():
    ex = S.seed_causal_4x4()
    s = np.tile(np.array([1.0, 2.0, 3.0, 4.0]), (4, 1))
    masked = np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, s)
    ref = np.exp(masked - masked.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_array_equal(ex["masked"].numpy(), masked)
    np.testing.assert_allclose(ex["pattern"].numpy(), ref, rtol=1e-12, atol=0)
    seed = [[1.0, 0, 0, 0], [0.269, 0.731, 0, 0], [0.090, 0.245, 0.665, 0], [0.032, 0.087, 0.237, 0.644]]
    np.testing.assert_allclose(ex["pattern"].numpy(), seed, atol=6e-4)   # the seed's rounded numbers


@pytest.mark.parametrize("causal", [False, True])
def test_seed_three_tokens_matches_numpy(causal):
    r = S.seed_three_tokens(causal)
    X = np.array([[0.8, 0.1, 0.2, 0.5], [0.3, 0.9, 0.1, 0.4], [0.2, 0.4, 0.7, 0.1]])
    s = X @ X.T / np.sqrt(4)
    if causal:
        s = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, s)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    np.testing.assert_allclose(r["pattern"].numpy(), w, rtol=1e-12)
    np.testing.assert_allclose(r["output"].numpy(), w @ X, rtol=1e-12)
    if causal:
        np.testing.assert_array_equal(r["pattern"].numpy()[0], [1.0, 0.0, 0.0])
    else:
        # row 0 by hand: x0·x0 = 0.94, x0·x1 = 0.55, x0·x2 = 0.39, each ÷ 2
        assert r["pattern"][0, 0].item() == pytest.approx(np.exp(0.47) / (np.exp(0.47) + np.exp(0.275)
                                                                          + np.exp(0.195)))


# ----------------------------------------------------------------------------- KV cache

def test_kv_cache_demo_tokens_equal_and_rows_reused(odd):
    ids = odd.encode("Attention lets every token look back")
    T, n = len(ids), 4
    kv = S.kv_cache_demo(odd.weights, ids, n)
    assert kv.tokens_match and len(kv.tokens_cached) == n
    # an independent greedy loop: full forward, argmax, append
    seq = list(ids)
    for _ in range(n):
        seq.append(int(run(odd.weights, seq).logits[0, -1].argmax()))
    assert kv.tokens_full == seq[T:]
    assert kv.max_kv_diff < 1e-5 and kv.max_logit_diff < 1e-4
    st = kv.steps
    assert list(st["K/V rows reused (cache)"]) == [0] + [T + s - 1 for s in range(1, n)]
    assert list(st["K/V rows computed (cache)"]) == [T] + [1] * (n - 1)
    assert list(st["K/V rows computed (no cache)"]) == [T + s for s in range(n)]
    assert list(st["cache rows after"]) == [T + s for s in range(n)]
    assert (st["GFLOP (cache)"][1:] < st["GFLOP (no cache)"][1:]).all()
    quick = S.kv_cache_demo(odd.weights, ids, 2, check_rows=False)
    assert quick.tokens_match and quick.tokens_cached == kv.tokens_cached[:2] and math.isnan(quick.max_kv_diff)


@pytest.mark.parametrize("cached", [0, 7])
def test_forward_flops_equal_torch_flop_counter(odd, cached):
    """forward_flops against PyTorch's own count of the matmuls of a run (pattern materialised)."""
    ids = list(range(5, 25))
    cache = None
    if cached:
        cache = KVCache()
        run(odd.weights, ids[:cached], cache=cache)
    new = ids[cached:]
    fc = FlopCounterMode(display=False)
    with fc:
        run(odd.weights, new, cache=cache, capture=("pattern",))
    assert S.forward_flops(odd.config, len(new), len(ids)) == fc.get_total_flops()


# ----------------------------------------------------------------------------- W_Q ≠ W_K

def test_symmetry_stats_by_hand():
    S_sym = torch.tensor([[4.0, 1.0], [1.0, 2.0]])
    st = S.symmetry_stats(S_sym)
    spread = math.sqrt(42 / 27)                      # population std of the visible scores 4, 1, 2
    assert st["asymmetry"] == 0 and st["diagonal share"] == 1.0       # query 0 (no choice) is left out
    assert st["diagonal margin"] == pytest.approx((2 - 1) / spread)
    M = torch.tensor([[0.0, 1.0], [3.0, 2.0]])       # row 1: key 0 (3) beats itself (2)
    st = S.symmetry_stats(M)
    D = M.numpy() - M.numpy().T
    assert st["asymmetry"] == pytest.approx(np.linalg.norm(D) / np.linalg.norm(M.numpy()))
    assert st["diagonal share"] == 0.0 and st["diagonal margin"] == pytest.approx((2 - 3) / spread)
    assert math.isnan(S.symmetry_stats(torch.tensor([[1.0]]))["diagonal share"])


def _verdict(xx_share, qk_share, xx_margin=2.0, qk_margin=1.0, asym=0.8, shares=None):
    stats = lambda a, s, m: {"asymmetry": a, "diagonal share": s, "diagonal margin": m}   # noqa: E731
    return str(S.symmetry_verdict({"xx_stats": stats(0.0, xx_share, xx_margin), "qk_stats": stats(asym, qk_share,
                                                                                                     qk_margin),
                                   "layer_shares": shares or {"L0H0": qk_share, "L0H1": 0.25}}, "L0H0"))


def test_the_symmetry_verdict_says_what_its_numbers_show():
    kept = _verdict(1.0, 1.0, 2.0, 2.5, shares={"L0H0": 1.0, "L0H1": 0.25, "L0H2": 0.75})
    assert "kept the diagonal" in kept and "1.000" in kept and "+2.50" in kept and "+2.00" in kept
    assert "2 of 3 heads" in kept and "(L0H0, L0H2)" in kept and "broke the symmetry" in kept
    weak = _verdict(1.0, 0.75)
    assert "weakened the diagonal" in weak and "0.750" in weak and "1.000" in weak
    assert "weakened" in _verdict(1.0, 1.0, 2.0, 1.5)                 # the same share, a smaller margin
    broke = _verdict(1.0, 0.25, 2.0, -1.2)
    assert "broke the diagonal" in broke and "0.250" in broke and "-1.20" in broke and "1 of 2 heads" not in broke
    assert "nearly symmetric" in _verdict(1.0, 0.25, asym=0.01)


def test_xx_is_symmetric_qk_is_not(odd, prompt):
    ids, tr = prompt
    r = S.xx_vs_qk(odd.weights, ids, 1, 3)
    x = tr["ln1", 1][0].double()
    assert_close(r["xx"].double(), x @ x.T, rtol=1e-5, atol=1e-4)
    q, k = tr["q", 1][0, 3].double(), tr["k", 1][0, 3].double()
    assert_close(r["qk"].double(), q @ k.T, rtol=1e-5, atol=1e-5)
    assert r["xx_stats"]["asymmetry"] < 1e-6
    assert r["qk_stats"]["asymmetry"] > 0.05           # ≫ X·Xᵀ's float noise (< 1e-6): W_Q ≠ W_K
    assert r["xx_stats"]["diagonal margin"] > r["qk_stats"]["diagonal margin"]
    assert r["layer_shares"]["L1H3"] == r["qk_stats"]["diagonal share"] and len(r["layer_shares"]) == odd.config.n_heads


# ----------------------------------------------------------------------------- the page

def _frame(at, first_col, contains=None):
    for d in at.dataframe:
        v = d.value
        if len(v.columns) and v.columns[0] == first_col and (contains is None or contains in v.columns):
            return v
    raise AssertionError(f"no dataframe starting with {first_col!r}")


def test_step_page_shows_the_trace_numbers_and_follows_the_widgets(odd, odd_dir, prompt):
    ids, tr = prompt
    at = apptest("steps", odd_dir, text=TEXT).run()
    assert not at.exception and not at.error
    T = len(ids)
    assert selectbox(at, "st_query").value == T - 1
    q_shown = _frame(at, "vector").iloc[0]
    q_ref = tr["q", 0][0, 0, T - 1]
    assert [q_shown[f"[{j}]"] for j in range(8)] == pytest.approx(q_ref[:8].tolist(), abs=2e-6)
    keys = _frame(at, "position", "weight")
    assert keys["weight"].tolist() == pytest.approx(
        sorted(tr["pattern", 0][0, 0, T - 1].tolist(), reverse=True)[: len(keys)], abs=2e-6)
    assert len(at.get("vega_lite_chart")) >= 10           # weights, seeds (4 + 6), symmetry

    at.selectbox(key="st_head").set_value(3).run()
    assert not at.exception
    q3 = _frame(at, "vector").iloc[0]
    assert [q3[f"[{j}]"] for j in range(8)] == pytest.approx(tr["q", 0][0, 3, T - 1][:8].tolist(), abs=2e-6)
    assert [q3[f"[{j}]"] for j in range(8)] != pytest.approx([q_shown[f"[{j}]"] for j in range(8)], abs=1e-4)

    at.selectbox(key="st_layer").set_value(2).run()
    selectbox(at, "st_query").set_value(2).run()
    assert not at.exception
    keys = _frame(at, "position", "weight")
    assert sorted(keys["position"]) == [0, 1, 2]           # only the visible keys
    assert keys["weight"].sum() == pytest.approx(1.0, abs=1e-6)
    assert sorted(keys["weight"].tolist()) == pytest.approx(sorted(tr["pattern", 2][0, 3, 2, :3].tolist()), abs=2e-6)

    at.button(key="st_kv_go").click().run()
    assert not at.exception and not at.error
    assert any("Same" in s.value for s in at.success)


def test_step_page_at_a_full_1024_context(tmp_path):
    """A long prompt stays usable: compact tables (top-k keys), every step still computed."""
    from helpers import make_checkpoint

    d = make_checkpoint(tmp_path / "long", seed=3, n_layer=1, n_head=2, n_embd=32, n_positions=1024,
                        vocab_size=400)
    text = " ".join(f"w{i % 97}" for i in range(1500))
    at = apptest("steps", d, text=text).run()
    assert not at.exception and not at.error
    assert selectbox(at, "st_query").value == 1023
    keys = _frame(at, "position", "weight")
    assert len(keys) == 10                                  # top-k, not 1024 rows
    assert any("dropped" in w.value for w in at.warning)    # the prompt was cut to the context
    assert at.number_input(key="st_kv_len").value == 256      # the KV demo starts on a shorter prefix


def test_kv_timing_note_reads_its_own_numbers(odd):
    ids = odd.encode("Attention lets every token look back")
    kv = S.kv_cache_demo(odd.weights, ids, 4, check_rows=False, repeats=2)
    assert 1 <= kv.repeats <= 2 and len(kv.seconds_cached) == 4
    s = kv.summary()
    assert list(s["seconds, step 0"]) == [kv.seconds_cached[0], kv.seconds_full[0]]
    assert list(s["seconds, steps 1…"]) == [sum(kv.seconds_cached[1:]), sum(kv.seconds_full[1:])]
    fast = dataclasses.replace(kv, seconds_cached=[9.0, 0.1, 0.1, 0.1], seconds_full=[0.01, 0.2, 0.3, 0.4])
    note = str(fast.timing_note())                     # step 0 (9 s vs 0.01 s) is left out of the comparison
    assert "0.3000 s with the cache and 0.9000 s without (3.0× faster" in note and "left out" in note
    slow = dataclasses.replace(kv, seconds_cached=[0.1, 0.5, 0.5, 0.5], seconds_full=[0.1, 0.2, 0.2, 0.2])
    note = str(slow.timing_note())
    flop = kv.steps["GFLOP (no cache)"][1:].sum() / kv.steps["GFLOP (cache)"][1:].sum()
    assert "1.5000 s with the cache and 0.6000 s without" in note and "not faster" in note
    assert f"{flop:.1f}× fewer GFLOP" in note
    one = dataclasses.replace(kv, seconds_cached=[0.1], seconds_full=[0.1])
    assert "Only step 0 ran" in str(one.timing_note())
