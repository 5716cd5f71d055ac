"""Streaming statistics (issue 18): block-wise with a running log-sum-exp, against the full patterns at
T = 1,024 — plain, with a local window, with grouped-query attention on a rotary model, with the
log-length intervention — plus the pooled overview, rows on demand and the loss."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from attnkit import entropy as E
from attnkit import metrics as M
from attnkit import streaming as S
from attnkit.charts.heatmaps import block_max
from attnkit.model import Intervention, run
from helpers import make_checkpoint

T = 1024
TOL = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """2 layers, 4 heads, d_model 64, 1,024 positions; W_Q × 6 so that the heads are far from uniform."""
    from attnkit.loading import load

    folder = make_checkpoint(tmp_path_factory.mktemp("gpt2-stream"), seed=3, n_layer=2, n_head=4, n_embd=64,
                             n_positions=T, vocab_size=1000)
    w = load(str(folder), "cpu").weights
    return dataclasses.replace(w, layers=[dataclasses.replace(lw, W_Q=lw.W_Q * 6) for lw in w.layers])


def windowed(w, windows=(None, 100)):
    return dataclasses.replace(w, config=dataclasses.replace(w.config, windows=tuple(windows)))


def rotary_gqa(w, n_kv=2):
    """The tiny model made Llama-like: rotary positions (no position table) and 2 key/value heads for 4
    query heads (query head h reads kv head h // 2)."""
    cfg = dataclasses.replace(w.config, position="rotary", n_kv_heads=n_kv)
    e = cfg.d_head
    inv_freq = 1.0 / (10000 ** (torch.arange(0, e, 2, dtype=torch.float32) / e))
    layers = [dataclasses.replace(lw, W_K=lw.W_K[:n_kv], b_K=lw.b_K[:n_kv], W_V=lw.W_V[:n_kv], b_V=lw.b_V[:n_kv])
              for lw in w.layers]
    return dataclasses.replace(w, config=cfg, wpe=None, inv_freq=inv_freq, layers=layers)


def _ids(seed=0, n=T, vocab=1000):
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


def _full(w, ids, intervention=None):
    return run(w, ids, capture=["pattern"], intervention=intervention).stack("pattern")   # [L, B, H, T, T]


def _visible(w, T):
    L = w.config.n_layers
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    out = []
    for l in range(L):
        win = w.config.window(l)
        out.append((j <= i) & (torch.ones_like(j, dtype=torch.bool) if win is None else j > i - win))
    return torch.stack(out)                                                             # [L, T, T]


def _check_against_full(st: S.StreamStats, P: torch.Tensor, vis: torch.Tensor, offset: int | None = None):
    Tn = P.shape[-1]
    pos = torch.arange(Tn)
    torch.testing.assert_close(st.entropy, M.entropy(P), rtol=0, atol=TOL)
    n = vis.sum(-1)                                                                     # [L, T] visible keys
    norm = M.entropy(P).double() / torch.log(n.double())[:, None, None]
    ok = (n > 1)[:, None, None].expand_as(norm)
    torch.testing.assert_close(st.normalised.double()[ok], norm[ok], rtol=0, atol=TOL)
    assert torch.isnan(st.normalised[~ok]).all()
    torch.testing.assert_close(st.first_token, P[..., 0], rtol=0, atol=TOL)
    torch.testing.assert_close(st.self_mass, torch.diagonal(P, 0, -2, -1), rtol=0, atol=TOL)
    torch.testing.assert_close(st.previous[..., 1:], torch.diagonal(P, -1, -2, -1), rtol=0, atol=TOL)
    assert torch.isnan(st.previous[..., 0]).all()
    dist = (P * (pos[:, None] - pos[None, :]).clamp(min=0).float()).sum(-1)
    # distances are in tokens (up to 1,023; float32 resolves 6e-5 at 512): compare per token of reach
    torch.testing.assert_close(st.distance / pos.clamp(min=1), dist / pos.clamp(min=1), rtol=0, atol=TOL)
    if offset is not None:
        ind = torch.diagonal(P, -(offset - 1), -2, -1)                                  # a_{i, i-offset+1}, i ≥ offset-1
        torch.testing.assert_close(st.induction[..., offset:], ind[..., 1:], rtol=0, atol=TOL)
        assert torch.isnan(st.induction[..., :offset]).all()
    # a_ij = exp(s_ij − lse_i): the pattern's rows sum to one with this lse
    assert torch.isfinite(st.lse).all()


@pytest.mark.parametrize("fused", [True, False], ids=["flash-kernel", "block-loop"])
def test_streaming_matches_full_patterns(tiny, fused):
    ids = _ids()
    st = S.stream_stats(tiny, ids, induction_offset=300, block=128, fused=fused)
    P = _full(tiny, ids)
    assert M.entropy(P).std() > 0.5            # the heads are not all near-uniform: a real test
    _check_against_full(st, P, _visible(tiny, T), offset=300)
    hs, ref = st.head_scores(), M.head_scores(P, window=tiny.config)
    for k in ("mean entropy", "previous-token", "first-token", "self"):
        torch.testing.assert_close(hs[k], ref[k], rtol=0, atol=TOL)
    torch.testing.assert_close(hs["mean distance"], ref["mean distance"], rtol=TOL, atol=TOL)


def test_block_size_does_not_change_the_numbers(tiny):
    ids = _ids(1, 777)                         # not a multiple of any block
    a = S.stream_stats(tiny, ids, block=64, fused=False)
    b = S.stream_stats(tiny, ids, block=1000, fused=False)
    for name in ("entropy", "first_token", "self_mass", "lse"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=TOL)


def test_streaming_with_a_local_window(tiny):
    w = windowed(tiny)
    ids = _ids(2)
    st = S.stream_stats(w, ids, induction_offset=50, block=128)
    P = _full(w, ids)
    vis = _visible(w, T)
    assert (P[1][..., ~vis[1]] == 0).all()     # the model itself honours the window
    _check_against_full(st, P, vis, offset=50)
    assert (st.first_token[1, ..., 100:] == 0).all()        # position 0 out of the window
    assert st.visible[1].max() == 100 and st.visible[0].max() == T


def test_streaming_with_gqa_on_a_rotary_model(tiny):
    w = rotary_gqa(windowed(tiny, (64, None)))
    assert w.config.group == 2 and S.qk_points(w.config) == ("q_rot", "k_rot")
    ids = _ids(3)
    st = S.stream_stats(w, ids, block=256)
    P = _full(w, ids)
    _check_against_full(st, P, _visible(w, T))


@pytest.mark.parametrize("clamp", [True, False])
def test_streaming_with_log_length_scaling(tiny, clamp):
    iv = E.LogLengthScaling(64, clamp=clamp)
    ids = _ids(4)
    st = S.stream_stats(tiny, ids, intervention=iv, loss=True)
    P = _full(tiny, ids, intervention=iv)       # the scores hook, through the pattern path
    assert not torch.allclose(P, _full(tiny, ids), atol=1e-3)
    _check_against_full(st, P, _visible(tiny, T))
    # the forward with q rows scaled is the intervened model: same loss as entropy_profile's
    ref = E.entropy_profile(tiny, ids, iv, loss=True)
    torch.testing.assert_close(st.loss, ref.loss, rtol=0, atol=1e-4)
    torch.testing.assert_close(st.entropy.transpose(0, 1), ref.entropy, rtol=0, atol=TOL)


def test_log_length_on_a_rotary_gqa_model(tiny):
    w = rotary_gqa(tiny)
    iv = E.LogLengthScaling(32)
    ids = _ids(5, 600)
    st = S.stream_stats(w, ids, intervention=iv)
    P = _full(w, ids, intervention=iv)
    _check_against_full(st, P, _visible(w, 600))


def test_interventions_that_need_the_pattern_are_refused(tiny):
    class Scores(Intervention):
        def scores(self, s, layer):
            return s * 2

    with pytest.raises(ValueError, match="on_queries"):
        S.stream_stats(tiny, _ids(0, 16), intervention=Scores())
    assert S.streamable([None, E.LogLengthScaling(4)]) is not None


@pytest.mark.parametrize("win", [None, 100])
def test_pooled_overview_is_the_pooled_full_pattern(tiny, win):
    w = windowed(tiny, (win, win))
    ids = _ids(6, 1000)                         # 1000 = 7 × 143 − 1: the last block is partial
    for px in (7, 100):
        st = S.stream_stats(w, ids, pool=px, pool_layers=[1], block=128)
        assert set(st.pooled) == {1}
        P = _full(w, ids)[1, 0].numpy()
        vis = _visible(w, 1000)[1].numpy()
        pl = st.pooled[1]
        for h in range(w.config.n_heads):
            v, masked, k = block_max(P[h], ~vis, px)
            assert k == pl.k and (masked == pl.masked.numpy()).all()
            np.testing.assert_allclose(pl.max[0, h].numpy(), v, rtol=0, atol=TOL)
            R = v.shape[0]
            pad = R * k - 1000
            tot = np.pad(np.where(vis, P[h], 0), ((0, pad), (0, pad))).reshape(R, k, R, k).sum((1, 3))
            cnt = np.pad(vis, ((0, pad), (0, pad))).reshape(R, k, R, k).sum((1, 3))
            assert (cnt == pl.count.numpy()).all()
            np.testing.assert_allclose(pl.mean[0, h].numpy(), np.where(cnt > 0, tot / np.maximum(cnt, 1), 0),
                                       rtol=0, atol=TOL)
            assert (pl.image("mean")[0, h] == pl.mean[0, h]).all()


def test_rows_on_demand_equal_the_full_rows(tiny):
    w = rotary_gqa(windowed(tiny, (None, 100)))
    iv = E.LogLengthScaling(16)
    ids = _ids(7)
    P = _full(w, ids, intervention=iv)
    rows = [0, 1, 99, 100, 511, 1023]
    for layer in (0, 1):
        r = S.pattern_rows(w, ids, layer, rows, intervention=iv)
        torch.testing.assert_close(r, P[layer][:, :, rows], rtol=0, atol=TOL)
    f = S.focus_window(w, ids, 1, 3, 500, 564, 450, 514, intervention=iv)
    np.testing.assert_allclose(f, P[1, 0, 3, 500:564, 450:514].numpy(), rtol=0, atol=TOL)
    # from q and k kept by the streaming pass: no second forward
    st = S.stream_stats(w, ids, intervention=iv, keep_qk=[1])
    q, k = st.qk[1]
    r = S.rows_from_qk(q, k, rows, scale=w.config.attn_scale(1), window=100, group=2, heads=[1, 2])
    torch.testing.assert_close(r, P[1][:, [1, 2]][:, :, rows], rtol=0, atol=TOL)
    # and the lse of the pass reproduces them: a_ij = exp(s_ij − lse_i)
    s = (q[:, 1, rows] * w.config.attn_scale(1)) @ k[:, 0].transpose(-1, -2)
    a = torch.exp(s - st.lse[1, :, 1, rows][..., None]) * _visible(w, T)[1][rows]
    torch.testing.assert_close(a, P[1][:, 1, rows], rtol=0, atol=TOL)


def test_loss_progress_and_batches(tiny):
    ids = torch.cat([_ids(8, 300), _ids(9, 300)])
    seen = []
    st = S.stream_stats(tiny, ids, loss=True, loss_chunk=77, progress=lambda d, n: seen.append((d, n)))
    assert seen == [(1, 2), (2, 2)]
    ref = E.entropy_profile(tiny, ids, loss=True)
    torch.testing.assert_close(st.loss, ref.loss, rtol=0, atol=1e-4)
    torch.testing.assert_close(st.entropy.transpose(0, 1), ref.entropy, rtol=0, atol=TOL)
    torch.testing.assert_close(st.first_token.transpose(0, 1), ref.first_token, rtol=0, atol=TOL)


def test_gpt2_small_shape_at_full_context(small):
    """GPT-2 small's shape at T = 1,024: the streaming entropy is entropy_profile's."""
    ids = _ids(10, T, small.config.d_vocab)
    st = S.stream_stats(small.weights, ids)
    ref = E.entropy_profile(small.weights, ids)
    torch.testing.assert_close(st.entropy.transpose(0, 1), ref.entropy, rtol=0, atol=TOL)
    torch.testing.assert_close(st.first_token.transpose(0, 1), ref.first_token, rtol=0, atol=TOL)
    assert not math.isnan(float(st.entropy.sum()))


@pytest.mark.slow
def test_long_bench_rows_quick():
    """bench --long on a tiny stand-in: memory probes in fresh processes, ratios with targets."""
    from attnkit.dev.bench import long_context as BS

    r = BS.long_section([64], repeats=1, quick=True, log=lambda s: None, variants=("streaming",))
    checks = {row["check"]: row for row in r["rows"]}
    assert set(checks) == {"streaming_vs_forward", "streaming_vs_forward_no_logits", "streaming_peak_rise_gb"}
    assert checks["streaming_vs_forward"]["target"] == 2.0 and checks["streaming_peak_rise_gb"]["target"] == 1.5
    assert all("error" not in p for p in r["probes"]) and len(r["probes"]) == 1
    assert "T=    64 streaming" in BS.format_long(r)
