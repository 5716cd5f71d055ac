"""Attention sinks and KV-cache eviction (issue 46): the mask rule by hand, the original-positions loss equal to
HuggingFace's given the same 4-D mask (GPT-2 and a Llama-style checkpoint), k = 0 with a window covering the text
equal to the full cache bit for bit, generation with an evicting cache equal to recomputing each step with the
keys masked, the rolling cache against its one-pass formula (and refused for learned positions), the sink
measurements against the full patterns, position 0 excluded from the head statistics by hand and in both forms,
the no-sink ablation, the verdict's rule, the CLI and the charts."""
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from attnkit import ablations as A
from attnkit import eviction as E
from attnkit import metrics as M
from attnkit import streaming as S
from attnkit.attention import Keep, causal_mask, visible_keys
from attnkit.charts import sinks as C
from attnkit.cli import main as attnkit_main
from attnkit.cli.sinks import cli as sinks_cli
from attnkit.i18n import language
from attnkit.model import KVCache, generate, run
from attnkit.sinks import measure_sinks
from attnkit.tolerances import TOL_LOGITS
from helpers import make_family_checkpoint

TEXT = ("The animal didn't cross the street because it was too tired. The animal was tired. "
        "When Mary and John went to the store, John gave a drink to Mary. ") * 3


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """SmolLM2-135M's per-layer shape (rotary, grouped-query 9:3), 2 layers, random weights."""
    return make_family_checkpoint(tmp_path_factory.mktemp("llama-sinks"), "smollm2-135m")


@pytest.fixture(scope="module")
def llama(llama_dir):
    from attnkit.loading import load

    return load(str(llama_dir), "cpu")


def _ids(n, vocab, seed=0):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


# ----------------------------------------------------------------------------- the rule

def test_the_mask_rule_by_hand():
    """Query i sees key j when j ≤ i and (j < k or j > i − w): k = 1, w = 2 on 6 tokens, written out."""
    seen = [[1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [1, 0, 1, 1, 0, 0],
            [1, 0, 0, 1, 1, 0],
            [1, 0, 0, 0, 1, 1]]
    m = causal_mask(6, keep=Keep(1, 2))
    assert torch.equal(m == 0, torch.tensor(seen, dtype=torch.bool))
    assert visible_keys(6, 2, sinks=1).tolist() == [1, 2, 3, 3, 3, 3]
    assert visible_keys(6, 2, sinks=3).tolist() == [1, 2, 3, 4, 5, 5]      # sinks inside the window count once
    assert torch.equal(causal_mask(6, keep=Keep(0, 6)), causal_mask(6))
    with pytest.raises(ValueError, match="window ≥ 1"):
        Keep(1, 0)


# ----------------------------------------------------------------------------- against HuggingFace

def _hf_losses(folder, ids, keep):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    x = torch.tensor([ids])
    mask = causal_mask(len(ids), keep=keep)[None, None]                     # [B, 1, T, T], 0 / −∞
    with torch.no_grad():
        logits = hf(x, attention_mask=mask).logits[0, :-1].double()
    return torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="none").numpy()


@pytest.mark.parametrize("which", ["gpt2", "llama"])
def test_original_positions_equals_huggingface_with_the_same_4d_mask(which, odd, odd_dir, llama, llama_dir):
    m, folder = (odd, odd_dir) if which == "gpt2" else (llama, llama_dir)
    ids = _ids(96, 400, seed=1)
    keep = Keep(2, 16)
    ours, hf = E.token_losses(m.weights, ids, keep), _hf_losses(folder, ids, keep)
    np.testing.assert_allclose(ours, hf, rtol=0, atol=TOL_LOGITS)
    full = E.token_losses(m.weights, ids)
    assert np.abs(ours - full)[20:].max() > 1e-3                       # the mask changes the answer
    np.testing.assert_allclose(full[:17], ours[:17], rtol=0, atol=TOL_LOGITS)   # before eviction nothing differs


def test_no_sinks_and_a_window_covering_the_text_is_the_full_cache_exactly(odd, llama):
    for m in (odd, llama):
        ids = _ids(64, 400, seed=2)
        full = E.token_losses(m.weights, ids)
        assert np.array_equal(E.token_losses(m.weights, ids, Keep(0, 64)), full)
        assert np.array_equal(E.token_losses(m.weights, ids, Keep(0, 1000)), full)
    lab = E.eviction_lab(odd.weights, [ids], sinks=(0,), windows=(8, 64), resamples=50)
    wide = lab.rows[1]
    assert wide["window"] == 64 and wide["loss"] == lab.full["loss"] and wide["delta"] == 0.0


# ----------------------------------------------------------------------------- generation

@pytest.mark.parametrize("which", ["gpt2", "llama"])
def test_generation_with_eviction_equals_recomputing_each_step_with_the_keys_masked(which, odd, llama):
    m = odd if which == "gpt2" else llama
    ids, keep = _ids(20, 400, seed=3), Keep(2, 6)
    cached = generate(m.weights, ids, 12, keep=keep)
    fresh = generate(m.weights, ids, 12, keep=keep, use_cache=False)
    assert cached.tokens == fresh.tokens
    for a, b in zip(cached.step_logits, fresh.step_logits):
        torch.testing.assert_close(a, b, rtol=0, atol=TOL_LOGITS)
    assert cached.cache.length == 8 and cached.cache.positions.tolist() == [0, 1] + list(range(25, 31))
    assert cached.cache.seen == 31
    plain = generate(m.weights, ids, 12)
    assert max(float((a - b).abs().max()) for a, b in zip(plain.step_logits, cached.step_logits)) > 1e-3


def test_rolling_cache_equals_its_one_pass_recompute(llama):
    w, keep = llama.weights, Keep(2, 6)
    ids = _ids(20, 400, seed=4)
    rolled = generate(w, ids, 10, keep=keep, rolling=True)
    seq = list(ids)
    for tok, logits in zip(rolled.tokens, rolled.step_logits):
        again = run(w, seq, keep=keep, intervention=E.RollingPositions(w, keep)).logits[0, -1]
        torch.testing.assert_close(logits, again, rtol=0, atol=TOL_LOGITS)
        seq.append(tok)
    assert rolled.cache.length == 8
    # the rolling positions change only the sinks' scores: without sinks it is the original-positions run
    a = generate(w, ids, 6, keep=Keep(0, 6), rolling=True).step_logits
    b = generate(w, ids, 6, keep=Keep(0, 6)).step_logits
    assert all(torch.allclose(x, y, rtol=0, atol=TOL_LOGITS) for x, y in zip(a, b))
    moved = run(w, seq, keep=keep, intervention=E.RollingPositions(w, keep)).logits
    assert not torch.allclose(moved, run(w, seq, keep=keep).logits, atol=1e-3)


def test_rolling_is_refused_for_learned_positions_with_the_reason(odd):
    why = str(E.rolling_refusal(odd.config))
    assert "learned positions" in why and "recomputing the cache" in why
    with pytest.raises(ValueError, match="learned"):
        generate(odd.weights, _ids(10, 400), 3, keep=Keep(1, 4), rolling=True)
    with pytest.raises(ValueError, match="keep="):
        KVCache(rolling=True)
    lab = E.eviction_lab(odd.weights, [_ids(40, 400)], sinks=(0, 1), windows=(8,), modes=E.MODES, resamples=20)
    assert {r["mode"] for r in lab.rows} == {E.ORIGINAL} and E.ROLLING in lab.refused


# ----------------------------------------------------------------------------- measurements

def test_sink_share_and_writes_equal_the_full_pattern(odd):
    w = odd.weights
    docs = [_ids(40, 400, seed=5), _ids(25, 400, seed=6)]
    st = measure_sinks(w, docs, k=2)
    share, first, writes = np.zeros((3, 6, 40)), np.zeros((3, 6, 40)), []
    for ids in docs:
        tr = run(w, ids, capture=["pattern", "v"])
        p = tr.stack("pattern")[:, 0].double().numpy()                 # [L, H, T, T]
        share[..., :len(ids)] += p[..., :2].sum(-1)
        first[..., :len(ids)] += p[..., 0]
        v = tr.stack("v")[:, 0].double()                               # [L, H, T, e]
        W_O = torch.stack([lw.W_O for lw in w.layers]).double()      # [L, H, e, d]
        writes.append(torch.linalg.vector_norm(torch.einsum("lhte,lhed->lhtd", v, W_O), dim=-1).numpy())
    at = np.array([2] * 25 + [1] * 15)
    np.testing.assert_allclose(st.share_pos, share / at, rtol=0, atol=1e-5)
    np.testing.assert_allclose(st.first_pos, first / at, rtol=0, atol=1e-5)
    np.testing.assert_allclose(st.write_sink, np.mean([x[..., 0] for x in writes], 0), rtol=1e-5)
    np.testing.assert_allclose(st.write_rest, np.mean([x[..., 2:].mean(-1) for x in writes], 0), rtol=1e-5)
    df = st.to_pandas()
    assert list(df["name"][:2]) == ["L0H0", "L0H1"] and set(df["sink"]) <= {True, False}
    # a head's share: queries from position 16 on, each position weighted by the windows reaching it
    expect = (first / at)[..., 16:] @ at[16:] / at[16:].sum()
    np.testing.assert_allclose(st.first, expect, rtol=1e-6)
    assert st.heads() == sorted([(f"L{l}H{h}", float(st.first[l, h])) for l in range(3) for h in range(6)
                                 if st.first[l, h] >= st.threshold], key=lambda x: -x[1])


def test_streamed_first_k_equals_the_pattern_in_both_paths(odd):
    ids = torch.tensor([_ids(200, 400, seed=7)])
    P = run(odd.weights, ids, capture=["pattern"]).stack("pattern")
    for fused in (True, False):
        st = S.stream_stats(odd.weights, ids, sinks=3, fused=fused, block=64)
        torch.testing.assert_close(st.first_k, P[..., :3].sum(-1), rtol=0, atol=1e-5)
        assert torch.equal(st.first_k[..., 0], st.first_token[..., 0])          # query 0 sees only key 0


# ----------------------------------------------------------------------------- position 0 excluded

def test_excluding_position_0_by_hand():
    p = torch.tensor([[1.0, 0, 0, 0],
                      [0.5, 0.5, 0, 0],
                      [0.5, 0.25, 0.25, 0],
                      [0.8, 0.1, 0.0, 0.1]])
    q, ids = M.without_first(p, [7, 8, 9, 8])
    torch.testing.assert_close(q, torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5]]))
    assert ids.tolist() == [8, 9, 8]
    s = M.head_scores(p, [7, 8, 9, 8], window=None, exclude_first=True)
    assert math.isnan(float(s["first-token"]))
    assert float(s["previous-token"]) == pytest.approx((0.5 + 0.0) / 2)
    assert float(s["self"]) == pytest.approx((0.5 + 0.5) / 2)
    assert float(s["mean entropy"]) == pytest.approx((math.log(2) / math.log(2) + math.log(2) / math.log(3)) / 2)
    assert float(s["mean distance"]) == pytest.approx((0 + 0.5 + 1.0) / 3)
    assert float(s["duplicate-token"]) == pytest.approx(0.5)                    # token 8 at shifted 2 sees 8 at 0
    kept = M.head_scores(p, [7, 8, 9, 8], window=None)
    assert float(kept["first-token"]) == pytest.approx((0.5 + 0.5 + 0.8) / 3)


@pytest.mark.parametrize("win", [None, 24])
def test_excluding_position_0_streamed_equals_the_full_form(odd, win):
    w = odd.weights
    if win is not None:
        w = dataclasses.replace(w, config=dataclasses.replace(w.config, windows=(None, win, None)))
    ids = torch.tensor([_ids(150, 400, seed=8)])
    P = run(w, ids, capture=["pattern"]).stack("pattern")
    full = M.head_scores(P, ids[0], window=w.config, exclude_first=True)
    st = S.stream_stats(w, ids, exclude_first=True, block=32)
    assert st.T == 149 and st.visible[1].max() == (win or 149)
    for name, v in st.head_scores().items():
        if name == "induction":
            continue
        torch.testing.assert_close(v, full[name], rtol=1e-5, atol=1e-5, equal_nan=True)
    with pytest.raises(ValueError, match="pooled"):
        S.stream_stats(w, ids, exclude_first=True, pool=16)


# ----------------------------------------------------------------------------- the ablation

def test_no_sink_hides_the_first_key_from_later_queries_only(odd):
    ids = _ids(30, 400, seed=9)
    tr = run(odd.weights, ids, capture=["pattern"], intervention=A.NoSink(heads=[(1, 2)]))
    base = run(odd.weights, ids, capture=["pattern"])
    p = tr["pattern", 1][0]
    assert (p[2, 1:, 0] == 0).all() and p[2, 0, 0] == 1
    torch.testing.assert_close(p[2].sum(-1), torch.ones(30))
    assert torch.equal(p[3], base["pattern", 1][0, 3]) and torch.equal(tr["pattern", 0], base["pattern", 0])
    r = A.measure(odd.weights, [ids], A.parse_spec("no-sink", None, 3, 6))
    first, gone = r.evidence
    assert gone.holds and gone.ablated <= A.REMOVED
    assert first.holds == (first.baseline >= A.MIN_SHIFT) and r.verdict.status in A.STATUSES


# ----------------------------------------------------------------------------- the verdict

def _rescue(damage, rescue, margin, share=0.5):
    d = lambda m, lo, hi: {"delta": m, "low": lo, "high": hi}
    return {"window": 32, "sinks": 4, "damage": d(*damage), "rescue": d(*rescue), "margin": d(*margin),
            "recovered_share": share}


@pytest.mark.parametrize("damage,rescue,margin,tokens,status,why", [
    ((1.0, 0.8, 1.2), (0.9, 0.7, 1.1), (0.4, 0.2, 0.6), 500, A.SUPPORTED, "win back more than 50%"),
    ((1.0, 0.8, 1.2), (0.1, 0.05, 0.2), (-0.4, -0.5, -0.3), 500, A.NOT_SUPPORTED, "less than 50%"),
    ((1.0, 0.8, 1.2), (0.0, -0.008, 0.009), (-0.5, -0.6, -0.4), 500, A.NOT_SUPPORTED, "less than 50%"),
    ((0.004, -0.001, 0.009), (0.0, -0.01, 0.01), (0.0, -0.01, 0.01), 500, A.NOT_ENOUGH, "nothing to rescue"),
    ((1.0, 0.8, 1.2), (0.5, 0.3, 0.7), (0.0, -0.1, 0.1), 500, A.NOT_ENOUGH, "straddles"),
    ((1.0, 0.8, 1.2), (0.9, 0.7, 1.1), (0.4, 0.2, 0.6), 30, A.NOT_ENOUGH, "only 30 predicted tokens"),
])
def test_the_rescue_verdict_follows_its_rule(damage, rescue, margin, tokens, status, why):
    v = E.rescue_verdict(_rescue(damage, rescue, margin), tokens)
    assert v.status == status and why in str(v.why)
    assert str(A.MIN_EFFECT) in str(v.rule)
    assert E.rescue_verdict({}, 500).status == A.NOT_ENOUGH


def test_blocks_and_the_paired_interval(odd):
    unit, sizes = E._blocks([np.zeros(130), np.zeros(10)], 64)
    assert sizes.tolist() == [64, 64, 2, 10] and unit[63] == 0 and unit[64] == 1 and unit[-1] == 3
    lab = E.eviction_lab(odd.weights, [_ids(200, 400, seed=10)], sinks=(0, 2), windows=(8,), resamples=200)
    for r in lab.rows:
        assert r["low"] <= r["loss"] <= r["high"] and r["delta_low"] <= r["delta"] <= r["delta_high"]
        assert r["delta"] == pytest.approx(r["loss"] - lab.full["loss"], abs=1e-12)
    res = lab.rescue
    assert res["rescue"]["delta"] == pytest.approx(lab.rows[0]["loss"] - lab.rows[1]["loss"], abs=1e-12)


# ----------------------------------------------------------------------------- CLI and charts

def test_cli_writes_the_grid_and_refuses_bad_input_before_loading(odd_dir, tmp_path, capsys):
    f = tmp_path / "text.txt"
    f.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.json"
    rc = sinks_cli(["--model", str(odd_dir), "--text-file", str(f), "--tokens", "100", "--sinks", "0,1",
                    "--windows", "8,16", "--resamples", "50", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["full"]) >= {"loss"} and data["tokens"] == 99
    assert [(g["sinks"], g["window"], g["mode"]) for g in data["grid"]] == [
        (0, 8, E.ORIGINAL), (0, 16, E.ORIGINAL), (1, 8, E.ORIGINAL), (1, 16, E.ORIGINAL)]
    assert all(g["low"] <= g["loss"] <= g["high"] for g in data["grid"])
    assert data["verdict"]["status"] in A.STATUSES and "sink_heads" in data["sinks"]
    assert "verdict" in capsys.readouterr().out
    missing = str(tmp_path / "no-such-model")
    for bad, what in [(["--sinks", "a"], "--sinks"), (["--windows", "0"], "--windows"), (["--mode", "x"], "--mode"),
                      (["--json", str(f)], "overwrite the input")]:
        assert attnkit_main(["sinks", "--model", missing, "--text-file", str(f), *bad]) == 2
        assert what in capsys.readouterr().err
    assert attnkit_main(["sinks", "--model", missing, "--text-file", str(tmp_path / "none.txt")]) == 2


def test_charts_draw_the_grid_with_bands_and_the_full_cache_in_both_languages(odd):
    lab = E.eviction_lab(odd.weights, [_ids(80, 400, seed=11)], sinks=(0, 1), windows=(8, 16), resamples=20)
    spec = lab.chart().to_dict()
    marks = [l["mark"]["type"] if isinstance(l["mark"], dict) else l["mark"] for l in spec["layer"]]
    assert marks == ["area", "line", "rule", "text"]
    assert spec["layer"][1]["encoding"]["x"]["axis"]["title"] == "window w (most recent keys kept)"
    st = measure_sinks(odd.weights, [_ids(40, 400)], k=2)
    heat = st.chart().to_dict()
    assert heat["layer"][0]["encoding"]["color"]["title"] == "share on the first 2 token(s)"
    pos = st.by_position(8)
    assert pos["position"].min() == 0 and pos["name"].nunique() == 18
    np.testing.assert_allclose(pos[pos["position"] == 0]["share"], 1, atol=1e-6)   # query 0 sees only key 0
    assert C.share_by_position(pos, ["L0H0"]).to_dict()["encoding"]["x"]["scale"]["type"] == "log"
    with language("zh"):
        zh = lab.chart().to_dict()
        assert zh["layer"][1]["encoding"]["x"]["axis"]["title"] != "window w (most recent keys kept)"
