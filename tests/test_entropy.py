"""Entropy against context length (issue 5): the curves, their aggregation, the log-length intervention,
the CLI and the page."""
import json
import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from attnkit import entropy as E
from attnkit.metrics import normalised_entropy
from attnkit.model import Intervention, KVCache, run
from helpers import apptest

TEXT = "The animal didn't cross the street because it was too tired. Attention looks back at the past. " * 3


class Uniform(Intervention):
    """All scores 0: every query attends uniformly to its visible keys."""

    def scores(self, s, layer):
        return torch.zeros_like(s)


class SelfOnly(Intervention):
    """Each query sees only itself: one-hot attention on the diagonal."""

    def mask(self, mask, layer):
        T, S = mask.shape
        m = torch.full_like(mask, -math.inf)
        m[torch.arange(T), torch.arange(S - T, S)] = 0
        return m


def _ids(odd, n=None):
    ids = odd.encode(TEXT)
    return ids if n is None else ids[:n]


# ----------------------------------------------------------------------------- exact hand-made cases

def test_uniform_attention_is_normalised_one_and_slope_one(odd):
    ids = _ids(odd, 40)
    c = E.entropy_profile(odd.weights, ids, Uniform())
    T = len(ids)
    norm = c.normalised
    assert torch.isnan(norm[..., 0]).all()
    torch.testing.assert_close(norm[..., 1:], torch.ones_like(norm[..., 1:]), rtol=0, atol=1e-6)
    s = E.profile_documents(odd.weights, [ids], Uniform())
    np.testing.assert_allclose(s.normalised()[..., 1:], 1.0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(s.slope, 1.0, atol=1e-5)          # H = ln(i+1): slope 1, intercept 0
    np.testing.assert_allclose(s.intercept, 0.0, atol=1e-5)
    np.testing.assert_allclose(s.mean["first_token"][..., :T], np.broadcast_to(1 / np.arange(1, T + 1), (3, 7, T)),
                               rtol=1e-6)


def test_uniform_float64_pattern_is_exactly_one():
    T = 12
    p = torch.tril(torch.ones(T, T, dtype=torch.float64)) / torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    agg = E.Aggregate()
    from attnkit.metrics import entropy, first_token_mass

    agg.add(entropy(p)[None, None], first_token_mass(p)[None, None], np.zeros(T - 1))
    s = agg.result()
    np.testing.assert_allclose(s.normalised()[0, 0, 1:], 1.0, rtol=0, atol=1e-14)
    # and the aggregate's normalisation is metrics.normalised_entropy's
    np.testing.assert_allclose(s.normalised()[0, 0, 1:], normalised_entropy(p, window=None)[1:].numpy(), rtol=0, atol=1e-14)


def test_one_hot_attention_is_zero(odd):
    ids = _ids(odd, 30)
    c = E.entropy_profile(odd.weights, ids, SelfOnly())
    assert (c.entropy == 0).all()
    assert (c.normalised[..., 1:] == 0).all()
    assert (c.first_token[..., 0] == 1).all() and (c.first_token[..., 1:] == 0).all()
    s = E.profile_documents(odd.weights, [ids], SelfOnly())
    assert (s.slope == 0).all()


def test_fit_slopes_on_known_lines():
    T = 50
    x = np.log(np.arange(1, T + 1))
    y = np.stack([2 + 0.5 * x, 3 - 0.25 * x])
    y[:, 0] = 100.0                       # position 0 is not part of the fit
    slope, icpt, r2 = E.fit_slopes(y)
    np.testing.assert_allclose(slope, [0.5, -0.25], atol=1e-12)
    np.testing.assert_allclose(icpt, [2, 3], atol=1e-12)
    np.testing.assert_allclose(r2, [1, 1], atol=1e-12)
    assert np.isnan(E.fit_slopes(y[:, :2])[0]).all()      # one position i ≥ 1: no line


# ----------------------------------------------------------------------------- against HuggingFace

def test_entropies_equal_hf_output_attentions(odd):
    ids = _ids(odd, 64)
    c = E.entropy_profile(odd.weights, ids, loss=True)
    assert E.entropy_profile(odd.weights, ids).loss is None
    with torch.no_grad():
        out = odd.hf_model(torch.tensor([ids]), output_attentions=True, labels=torch.tensor([ids]))
    a = torch.stack([t[0].double() for t in out.attentions])                     # [L, H, T, T]
    ref = -(a * torch.log(torch.where(a > 0, a, torch.ones_like(a)))).sum(-1)    # 0·ln 0 = 0
    assert c.entropy.shape == (1, 3, 6, len(ids))                                # one point per position
    assert (c.entropy[0].double() - ref).abs().max() <= 1e-5
    assert (c.first_token[0].double() - a[..., 0]).abs().max() <= 1e-6
    assert abs(float(c.loss.mean()) - float(out.loss)) <= 1e-5                   # HF's shifted cross-entropy


# ----------------------------------------------------------------------------- documents of different lengths

def test_documents_of_different_lengths(odd):
    long, short = _ids(odd, 40), _ids(odd, 40)[5:17]                             # 40 and 12 tokens
    cl = E.entropy_profile(odd.weights, long, loss=True)
    cs = E.entropy_profile(odd.weights, short, loss=True)
    s = E.profile_documents(odd.weights, [short, long], batch=4)
    assert s.T == 40 and s.n_docs == 2
    assert (s.count[:12] == 2).all() and (s.count[12:] == 1).all()
    H = 6
    el, es = cl.entropy[0].double().numpy(), cs.entropy[0].double().numpy()
    np.testing.assert_allclose(s.mean["entropy"][:, :H, 12:], el[..., 12:], rtol=0, atol=1e-6)
    np.testing.assert_allclose(s.mean["entropy"][:, :H, :12], (el[..., :12] + es) / 2, rtol=0, atol=1e-6)
    np.testing.assert_allclose(s.std["entropy"][:, :H, :12], np.std(np.stack([el[..., :12], es]), 0, ddof=1),
                               rtol=0, atol=1e-5)
    assert np.isnan(s.std["entropy"][..., 12:]).all()                            # one document: no spread
    head_mean = np.stack([el[..., :12].mean(1), es.mean(1)])
    np.testing.assert_allclose(s.mean["entropy"][:, H, :12], head_mean.mean(0), atol=1e-6)
    np.testing.assert_allclose(s.std["entropy"][:, H, :12], head_mean.std(0, ddof=1), atol=1e-5)
    # loss: token-weighted over both documents
    total = (cl.loss.sum() + cs.loss.sum()).item() / (39 + 11)
    assert abs(s.loss - total) <= 1e-6
    assert s.loss_by_position.shape == (39,) and (s.loss_count[:11] == 2).all()


def test_documents_windows_and_short_texts(odd):
    ids = odd.encode(TEXT)
    docs, info = E.documents(odd.encode, [TEXT], 16, split=True)
    assert [len(d) for d in docs] == [16] * (len(ids) // 16) + ([len(ids) % 16] if len(ids) % 16 >= 2 else [])
    assert sum(docs, []) == ids[: sum(map(len, docs))]
    one = next(t for t in ["a", "x", "The"] if len(odd.encode(t)) == 1)
    docs, info = E.documents(odd.encode, [one, TEXT], 16, split=False, max_docs=5)
    assert len(docs) == 1 and info["short"] == 1 and info["dropped_tokens"] == len(ids) - 16
    with pytest.raises(ValueError, match="nothing to attend"):
        E.Aggregate().result()


# ----------------------------------------------------------------------------- the log-length intervention

def test_log_length_factor_one_equals_unmodified_exactly(odd):
    ids = _ids(odd, 50)
    base = run(odd.weights, ids, capture=["pattern"])          # the materialised-pattern path
    iv = E.LogLengthScaling(base=1000, clamp=True)             # max(1, log_1000(n)) = 1 for n ≤ 50
    assert (iv.factors(50) == 1).all()
    scaled = run(odd.weights, ids, capture=["pattern"], intervention=iv)
    assert torch.equal(scaled.logits, base.logits)
    assert torch.equal(scaled.stack("pattern"), base.stack("pattern"))
    a, b = E.entropy_profile(odd.weights, ids, loss=True), E.entropy_profile(odd.weights, ids, iv, loss=True)
    assert torch.equal(a.entropy, b.entropy) and torch.equal(a.loss, b.loss)


def test_log_length_factors_and_scores(odd):
    raw = E.LogLengthScaling(4, clamp=False).factors(16, dtype=torch.float64)
    np.testing.assert_allclose(raw.numpy(), np.log(np.arange(1, 17)) / np.log(4), rtol=1e-15)
    assert raw[0] == 0 and raw[3] == 1 and abs(raw[15] - 2) < 1e-15
    cl = E.LogLengthScaling(4).factors(16, dtype=torch.float64)
    assert (cl[:4] == 1).all() and torch.equal(cl[4:], raw[4:])
    # with a cache the queries sit at absolute positions S − T … S − 1
    np.testing.assert_allclose(E.LogLengthScaling(4, clamp=False).factors(2, 16, dtype=torch.float64).numpy(),
                               raw[14:].numpy(), rtol=0)
    ids = _ids(odd, 20)
    iv = E.LogLengthScaling(3, clamp=False, layers=[1])
    plain = run(odd.weights, ids, capture=["scores"])
    mod = run(odd.weights, ids, capture=["scores"], intervention=iv)
    assert torch.equal(mod["scores", 0], plain["scores", 0])   # layer 0 untouched, so its input is equal
    f = torch.log(torch.arange(1, 21, dtype=torch.float64)) / math.log(3)
    torch.testing.assert_close(mod["scores", 1].double(), plain["scores", 1].double() * f[:, None],
                               rtol=1e-6, atol=1e-6)
    for bad in (1, 0.5, float("nan")):
        with pytest.raises(ValueError, match="> 1"):
            E.LogLengthScaling(bad)


def test_log_length_with_kv_cache_equals_full_pass(odd):
    ids = torch.tensor([_ids(odd, 24)])
    iv = E.LogLengthScaling(2.5, clamp=False)
    full = run(odd.weights, ids, intervention=iv).logits
    cache = KVCache()
    run(odd.weights, ids[:, :16], intervention=iv, cache=cache)
    step = run(odd.weights, ids[:, 16:], intervention=iv, cache=cache).logits
    torch.testing.assert_close(step, full[:, 16:], rtol=1e-4, atol=1e-4)


def test_log_length_sharpens_long_positions(odd):
    ids = _ids(odd, 64)
    a = E.entropy_profile(odd.weights, ids)
    b = E.entropy_profile(odd.weights, ids, E.LogLengthScaling(8))      # factor > 1 beyond position 7
    assert torch.equal(a.entropy[..., :8], b.entropy[..., :8])         # causal: early positions unchanged
    assert (b.entropy[..., 40:].mean() < a.entropy[..., 40:].mean())


# ----------------------------------------------------------------------------- CLI

def test_cli_writes_json(odd_dir, tmp_path, capsys):
    from attnkit.cli import main

    txt = tmp_path / "long.txt"
    txt.write_text(TEXT * 2, encoding="utf-8")
    out = tmp_path / "e.json"
    assert main(["entropy", "--model", str(odd_dir), "--text-file", str(txt), "--window", "32",
                 "--log-base", "8", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nats/token" in printed and "seed's claim" in printed
    d = json.loads(out.read_text())
    n_docs = d["n_docs"]
    assert n_docs >= 2 and d["window"] == 32 and d["positions"] == 32
    assert np.array(d["per_head"]["entropy"]).shape == (3, 6, 32)
    assert np.array(d["layer_mean"]["entropy"]).shape == (3, 32)
    assert np.array(d["slope"]).shape == (3, 6)
    assert d["count"][0] == n_docs and len(d["loss_by_position"]) == 31
    assert d["uniform_bound"][5] == pytest.approx(math.log(6))
    assert d["verdict"] in {"supported", "not enough evidence", "not supported"}
    assert d["log_length"]["base"] == 8 and "loss_change" in d["log_length"]
    assert np.array(d["log_length"]["per_head"]["entropy"]).shape == (3, 6, 32)
    assert main(["entropy", "--model", str(odd_dir), "--text-file", str(tmp_path / "none.txt")]) == 2
    assert main(["entropy", "--model", str(odd_dir), "--text-file", str(txt), "--log-base", "1"]) == 2


# ----------------------------------------------------------------------------- page

def _chart_rows(chart):
    ds = chart.proto.datasets
    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in ds]


def test_page_runs_and_slope_map_has_every_head(odd_dir):
    at = apptest("entropy", odd_dir, text=TEXT, ent_log_on=True, ent_log_base=8.0).run()
    assert not at.exception and not at.error
    assert any("supported" in m.value or "not enough evidence" in m.value for m in at.markdown)
    slope_tables = [d.value for d in at.dataframe if {"layer", "head", "slope"} <= set(d.value.columns)]
    assert len(slope_tables) == 1 and len(slope_tables[0]) == 3 * 6
    assert slope_tables[0][["layer", "head"]].drop_duplicates().shape[0] == 18
    charts = at.get("vega_lite_chart")
    slope_charts = [c for c in charts if any({"head", "slope"} <= set(df.columns) for df in _chart_rows(c))]
    assert len(slope_charts) == 1
    assert max(len(df) for df in _chart_rows(slope_charts[0])) == 18
    loss = next(d.value for d in at.dataframe if "next-token loss (nats/token)" in d.value.columns)
    assert len(loss) == 2 and np.isfinite(loss["next-token loss (nats/token)"]).all()


def test_page_one_token_prompt_is_a_message(odd_dir, odd):
    one = next(t for t in ["a", "x", "The"] if len(odd.encode(t)) == 1)
    at = apptest("entropy", odd_dir, text=one).run()
    assert not at.exception and not at.error
    assert any("fewer than 2 tokens" in w.value for w in at.warning)
    assert not at.get("vega_lite_chart")


def test_page_two_tokens_has_no_slope_but_no_error(odd_dir, odd):
    two = next(t for t in ["a b", "The animal", "x y", "ab cd"] if len(odd.encode(t)) == 2)
    at = apptest("entropy", odd_dir, text=two).run()
    assert not at.exception and not at.error
    assert any("at least 3 tokens" in i.value for i in at.info)
    assert any("undetermined" in m.value for m in at.markdown)


def test_page_prompt_set_and_long_text_windows(odd_dir, odd):
    one = next(t for t in ["a", "x", "The"] if len(odd.encode(t)) == 1)
    rows = [TEXT[:60], TEXT[:120], one, TEXT[:200]]
    data = "\n".join(json.dumps(r) for r in rows).encode()
    at = apptest("entropy", odd_dir, ak_source="Upload", ak_upload_data=("p.jsonl", data),
                 ak_pick="all").run()
    assert not at.exception and not at.error
    caption = " ".join(c.value for c in at.caption)
    assert "3 document(s)" in caption and "1 text(s)/window(s) under 2 tokens skipped" in caption
    curves = next(df for c in at.get("vega_lite_chart") for df in _chart_rows(c) if "lo" in df.columns)
    assert curves["std"].notna().any()                            # a spread band across documents
    # one long text, split into windows of 32 tokens: several documents, every position reached by all
    n = len(odd.encode(TEXT * 3))
    at = apptest("entropy", odd_dir, ak_source="Upload", ak_upload_data=("long.txt", (TEXT * 3).encode()),
                 ent_window=32).run()
    assert not at.exception and not at.error
    caption = " ".join(c.value for c in at.caption)
    assert f"{n // 32 + (n % 32 >= 2)} document(s)" in caption


def test_tables_for_charts():
    T = 1024
    agg = E.Aggregate()
    e = np.broadcast_to(np.log(np.arange(1, T + 1)), (2, 3, T)).copy()
    agg.add(e, np.zeros((2, 3, T)), np.arange(T - 1, dtype=float))        # loss at position i is i
    s = agg.result()
    df = E.curve_frame(s, max_points=240)
    per_layer = df.groupby("layer")["n"].apply(list)
    assert len(per_layer) == 2 and all(len(v) <= 240 and v[0] == 1 and v[-1] == T for v in per_layer)
    np.testing.assert_allclose(df["mean"], np.log(df["n"]), atol=1e-12)
    assert (E.curve_frame(s, normalised=True)["n"] >= 2).all()
    lf = E.loss_frame(s)
    # bin [2^k, 2^(k+1)) of n = i + 1 holds positions i = 2^k − 1 … 2^(k+1) − 2: mean 1.5·2^k − 1.5;
    # the last bin stops at the last predicted position, i = 1022
    assert list(lf["n_from"]) == [2 ** k for k in range(10)]
    np.testing.assert_allclose(lf["unmodified"], [1.5 * 2 ** k - 1.5 for k in range(9)] + [(511 + 1022) / 2], atol=1e-9)
    assert E.slope_frame(s).shape[0] == 6


def test_claim_verdict_needs_documents_and_an_interval():
    import numpy as np

    from attnkit import entropy as E

    T, L, H = 40, 2, 3
    x = np.log(np.arange(1, T + 1))

    def agg(n_docs, slope, noise):
        a = E.Aggregate()
        rng = np.random.default_rng(0)
        for _ in range(n_docs):
            ent = slope * x[None, None, :] + noise * rng.standard_normal((L, H, T))
            a.add(np.clip(ent, 0, None), np.zeros((L, H, T)), None)
        return a.result()

    one = agg(1, 0.8, 0.0)
    assert E.claim_check(one)[0] == "not enough evidence"            # one document: no interval
    assert "at least 5 documents" in E.claim_check(one)[1]
    steep = agg(8, 0.8, 0.01)
    lo, hi = E.slope_interval(steep.extra["doc_slopes"])
    assert lo <= 0.8 <= hi + 1e-3 and hi - lo < 0.05
    assert E.claim_check(steep)[0] == "supported"
    flat = agg(8, 0.0, 0.01)
    assert E.claim_check(flat)[0] == "not supported"
    noisy = agg(6, 0.3, 2.0)                                          # straddles the thresholds
    assert E.claim_check(noisy)[0] == "not enough evidence"
