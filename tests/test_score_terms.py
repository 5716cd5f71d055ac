"""score_terms: an attention score split into query-part × key-part terms adds up to the model's own score
(float32 and float64, every family), matches an independent hook computation head by head, refuses keys a
query cannot see, and tells the same story as composition scores and path patching on attnkit-tiny."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnkit import attention as A
from attnkit import score_terms as ST
from attnkit.model import run
from attnkit.tolerances import TOL_F64, TOL_SCORE_REL, f64_tolerance
from helpers import family_weights, with_biases

# shape name -> overrides (Llama with W_Q/W_K biases; Qwen2 has them already)
FAMILIES = {"gpt2": None, "smollm2-135m": {"attention_bias": True}, "qwen2.5-0.5b": {},
            "mistral-window": {}, "pythia-70m": {}, "gpt-neo-125m": {}}
T = 24


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    return family_weights(tmp_path_factory, FAMILIES)


def ids_for(w, seed=0):
    return torch.randint(0, w.config.d_vocab, (T,), generator=torch.Generator().manual_seed(seed)).tolist()


def model_scores(w, ids, layer):
    return run(w, ids, capture=["scores"], layers=[layer])["scores", layer][0]      # [H, T, T]


# ----------------------------------------------------------------------------- the sums

@pytest.mark.parametrize("name", list(FAMILIES))
def test_terms_add_up_to_the_models_score(family, name):
    w32 = with_biases(family(name), torch.float32)
    w64 = with_biases(family(name), torch.float64)
    ids = ids_for(w32)
    cfg = w32.config
    layer, head, query, key = 2, cfg.n_heads - 1, T - 1, T - 5
    for w, tol in ((w32, None), (w64, f64_tolerance(cfg.family))):
        st = ST.score_terms(w, ids, layer, head, query, key)
        own = float(model_scores(w, ids, layer)[head, query, key])
        assert st.kv_head == head // cfg.group
        assert len(st.query_parts) * len(st.key_parts) == st.values.size
        bound = tol if tol is not None else TOL_SCORE_REL * max(1.0, float(np.abs(st.values).sum()))
        assert abs(st.total - own) <= bound, (name, w.dtype, st.total, own)
        assert abs(st.score - own) <= bound
    # float64: exact, against a float64 recomputation of the score from the layer's input
    assert abs(st.total - float(exact_scores(w64, ids, layer, head)[query, key])) <= TOL_F64
    # the whole row: every key's key-side and query-side splits add up to the same exact row
    row = ST.score_terms(w64, ids, layer, head, query)
    own_row = exact_scores(w64, ids, layer, head)[query, row.keys].numpy()
    np.testing.assert_allclose(row.key_side.sum(0), own_row, atol=TOL_F64, rtol=0)
    np.testing.assert_allclose(row.query_side.sum(0), own_row, atol=TOL_F64, rtol=0)
    # the contrast is the difference of the two splits
    c = ST.score_terms(w64, ids, layer, head, query, key, against=0 if cfg.window(layer) is None else key + 1)
    assert abs(c.total - (own_row[list(row.keys).index(key)] - own_row[list(row.keys).index(c.against)])) <= TOL_F64


@pytest.mark.parametrize("name", ["gpt2", "qwen2.5-0.5b"])
def test_a_row_too_large_to_keep_takes_two_runs_and_the_same_terms(family, name, monkeypatch):
    """A row whose kept parts would exceed a forward's logits is split in two runs (σ and q_i first, then
    each part reduced at once): the same terms as the one run, to float64 noise, and the same exact row."""
    w = with_biases(family(name), torch.float64)
    ids = ids_for(w, 4)
    cfg = w.config
    assert not ST.two_runs(cfg, T, 2, T)                        # a small model keeps its row in one run
    one = ST.score_terms(w, ids, 2, 1, T - 1)
    calls = []
    real_run = ST.run
    monkeypatch.setattr(ST, "two_runs", lambda *a: True)
    monkeypatch.setattr(ST, "run", lambda *a, **k: calls.append(k.get("stop")) or real_run(*a, **k))
    two = ST.score_terms(w, ids, 2, 1, T - 1)
    assert calls == [3, 2]                                      # up to the layer, then up to its input
    assert two.key_parts == one.key_parts and two.query_parts == one.query_parts
    np.testing.assert_allclose(two.key_side, one.key_side, atol=TOL_F64, rtol=0)
    np.testing.assert_allclose(two.query_side, one.query_side, atol=TOL_F64, rtol=0)
    np.testing.assert_allclose(two.key_side.sum(0), exact_scores(w, ids, 2, 1)[T - 1, two.keys].numpy(),
                               atol=TOL_F64, rtol=0)


def test_one_run_for_a_key_and_a_kept_row_two_for_xl_at_full_context():
    """The rule with real shapes: GPT-2 small keeps a 1,024-token row (about 80 MB of parts against 206 MB of
    logits), GPT-2 xl's last layer does not (1,271 parts: 666 MB); a single key is always one run."""
    from types import SimpleNamespace
    small = SimpleNamespace(n_heads=12, d_head=64, d_vocab=50257)
    xl = SimpleNamespace(n_heads=25, d_head=64, d_vocab=50257)
    assert not ST.two_runs(small, 1024, 11, 1024) and ST.two_runs(xl, 1024, 47, 1024)
    assert ST.kept_bytes(xl, 47, 1024) == (2 + 47 * 27) * 1024 * 64 * 8
    assert not ST.two_runs(xl, 1024, 47, 2)


def exact_scores(w, ids, layer, head, minus=None):
    """Independent float64 reference: the scores of ``(layer, head)`` recomputed from the residual stream
    entering the layer with a float64 norm (the model's RMSNorm rounds to float32, as HF's does), keys
    optionally reading the stream without head ``minus`` = (l, h)'s output (σ held at its actual value)."""
    tr = run(w, ids, capture=["resid_pre", "head_out"], layers=[layer] + ([minus[0]] if minus else []))
    x = tr["resid_pre", layer][0].double()
    lw, cfg = w.layers[layer], w.config
    y = x if minus is None else x - tr["head_out", minus[0]][0, minus[1]].double()
    if cfg.norm == "rmsnorm":
        sigma = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + cfg.layer_norm_eps)
        xq, xk = x / sigma * lw.ln1_w.double(), y / sigma * lw.ln1_w.double()
    else:
        sigma = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + cfg.layer_norm_eps)
        xq, xk = ((v - v.mean(-1, keepdim=True)) / sigma * lw.ln1_w.double() + lw.ln1_b.double() for v in (x, y))
    dbl = (lambda t: None if t is None else t.double())    # noqa: E731
    q = A.project(xq, lw.W_Q.double(), dbl(lw.b_Q))[head]
    k = A.project(xk, lw.W_K.double(), dbl(lw.b_K))[head // cfg.group]
    if cfg.position == "rotary":
        tables = A.rotary_tables(w.inv_freq, torch.arange(len(ids)), w.rope_attention_scale, torch.float64)
        q, k = A.rotate(q, *tables), A.rotate(k, *tables)
    return A.scores(q, k, cfg.attn_scale(layer))


@pytest.mark.parametrize("name", ["gpt2", "qwen2.5-0.5b", "pythia-70m"])
def test_key_side_of_a_head_is_removing_it_from_the_keys(family, name):
    w = with_biases(family(name), torch.float64)
    ids = ids_for(w, 1)
    layer, head, query, key = 2, 1, T - 1, T - 7
    st = ST.score_terms(w, ids, layer, head, query, key)
    full = exact_scores(w, ids, layer, head)[query, key]
    for sender in ((0, 0), (1, w.config.n_heads - 1)):
        gone = exact_scores(w, ids, layer, head, minus=sender)[query, key]
        assert abs(float(full - gone) - st.key_side[f"L{sender[0]}H{sender[1]}"]) <= TOL_F64


# ----------------------------------------------------------------------------- refusals and views

def test_a_key_the_query_cannot_see_is_refused_with_the_reason(family):
    w = family("mistral-window")
    ids = ids_for(w)
    assert w.config.window(1) == 16
    with pytest.raises(ST.ScoreTermsError, match=r"outside layer 1's window of 16 tokens: query 23 sees only keys 8 … 23"):
        ST.score_terms(w, ids, 1, 0, 23, 3)
    with pytest.raises(ST.ScoreTermsError, match="comes after query 5"):
        ST.score_terms(w, ids, 1, 0, 5, 6)
    with pytest.raises(ST.ScoreTermsError, match="no head L1H8"):
        ST.score_terms(w, ids, 1, 8, 5, 5)
    with pytest.raises(ST.ScoreTermsError, match="outside the prompt's 24 tokens"):
        ST.score_terms(w, ids, 1, 0, 24)
    assert list(A.key_range(23, w.config.window(1))) == list(range(8, 24))
    row = ST.score_terms(w, ids, 1, 0, 23)
    assert list(row.keys) == list(range(8, 24))


def test_grouped_views_and_top_terms_keep_the_total(family):
    w = with_biases(family("gpt2"), torch.float64)
    st = ST.score_terms(w, ids_for(w), 2, 0, T - 1, 3)
    for by in ("kind", "layer"):
        g = ST.grouped(st, by)
        assert abs(g["value"].sum() - st.total) <= TOL_F64
    kinds = ST.grouped(st, "kind")
    assert set(kinds["query_group"]) == set(ST.KINDS)
    top = ST.top_terms(st, 5)
    flat = np.sort(np.abs(st.values.ravel()))[::-1][:5]
    np.testing.assert_allclose(np.abs(top["value"]), flat)
    assert st.query_parts[:2] == ["embed", "pos_embed"] and "L1H3" in st.key_parts and "MLP1" in st.key_parts
    assert "b_Q" in st.query_parts and "b_Q" not in st.key_parts and "b_K" in st.key_parts
    js = st.to_json()
    assert len(js["terms"]) == st.values.size and js["total"] == pytest.approx(sum(t["value"] for t in js["terms"]))
    with pytest.raises(ValueError, match="group by"):
        ST.grouped(st, "colour")


def test_layer0_split_adds_up_and_needs_learned_positions(family):
    w = with_biases(family("gpt2"), torch.float64)
    ids = ids_for(w)
    st = ST.score_terms(w, ids, 0, 1, 10, 4)
    cells = ST.layer0_split(st)
    assert abs(sum(cells.values()) - st.score) <= TOL_F64
    tt = float(st.values[st.query_parts.index("embed"), st.key_parts.index("embed")])
    assert cells["token × token"] == tt
    avg = ST.layer0_average(w, [ids, ids_for(w, 1), ids_for(w, 2)], 1)
    assert list(avg["n"]) == [3] * 5 and avg["std"].notna().all()
    with pytest.raises(ST.ScoreTermsError, match="not in layer 0"):
        ST.layer0_split(ST.score_terms(w, ids, 1, 1, 10, 4))
    rot = family("pythia-70m")
    with pytest.raises(ST.ScoreTermsError, match="rotary"):
        ST.layer0_split(ST.score_terms(rot, ids_for(rot), 0, 0, 10, 4))


def test_layer0_top_splits_the_score_of_the_key_the_model_scores_highest(family):
    w = with_biases(family("gpt2"), torch.float64)
    ids = ids_for(w)
    cells, key = ST.layer0_top(w, ids, 1, 10)
    row = model_scores(w, ids, 0)[1, 10, :11]                         # the model's own scores, keys 0 … 10
    assert key == int(row.argmax())
    assert abs(sum(cells.values()) - float(row[key])) <= TOL_F64


def test_runner_up_is_the_other_key_the_query_scores_highest():
    """Hand-made scores: query 3 of head 1 scores keys 0 … 3 as 0.5, 2.0, 1.5, 0.7 (key 4, in its future, 9)."""
    scores = torch.full((1, 2, 5, 5), -1.0)
    scores[0, 1, 3] = torch.tensor([0.5, 2.0, 1.5, 0.7, 9.0])
    trace = {("scores", 0): scores}
    causal, window2 = SimpleNamespace(window=lambda layer: None), SimpleNamespace(window=lambda layer: 2)
    assert ST.runner_up(trace, causal, 0, 1, 3, 1) == 2
    assert ST.runner_up(trace, causal, 0, 1, 3, 2) == 1
    assert ST.runner_up(trace, causal, 0, 1, 0, 0) is None             # query 0 sees only itself
    assert ST.runner_up(trace, window2, 0, 1, 3, 2) == 3               # a window of 2: keys 2 and 3 only


# ----------------------------------------------------------------------------- attnkit-tiny: three views

TINY_CLEAN = "Install the kernel source and the module binary. Install the kernel"
TINY_CORRUPT = "Install the module source and the kernel binary. Install the kernel"


def test_tiny_induction_key_reads_the_previous_token_head_in_three_views():
    """At the second ' kernel' (11), L3H0's score to ' source' (3, after the first ' kernel'): L2H1 is among the
    largest key-side terms and the largest of the contrast with ' binary' (7); composition scores (weights) and
    path patching into L3H0's key (causal) put L2H1 first too."""
    from attnkit import patching as P
    from attnkit.circuits import compose as CO, path as PA
    from attnkit.loading import load

    m = load("attnkit-tiny", "cpu")
    ids = m.encode(TINY_CLEAN)
    assert m.token_strs(ids)[11] == " kernel" and m.token_strs(ids)[3] == " source"
    st = ST.score_terms(m.weights, ids, 3, 0, 11, 3)
    ks = st.key_side.sort_values(key=abs, ascending=False)
    assert "L2H1" in list(ks.index[:3]) and ks["L2H1"] > 0
    c = ST.score_terms(m.weights, ids, 3, 0, 11, 3, against=7)
    assert c.key_side.abs().idxmax() == "L2H1" and c.key_side["L2H1"] > 0 and c.score > 0
    said = str(ST.explain(c, m.token_strs(ids)))
    assert "L2H1's output" in said and "L3H0 scores 3 (' source') above 7 (' binary')" in said
    # the contrast the other way round names the same winner (its sign, not the order asked, decides)
    back = ST.score_terms(m.weights, ids, 3, 0, 11, 7, against=3)
    assert back.score == pytest.approx(-c.score, abs=1e-5)
    assert "L3H0 scores 3 (' source') above 7 (' binary')" in str(ST.explain(back, m.token_strs(ids)))
    comp = CO.composition(m.weights, "k")
    into = comp.block("k", 2, 3)[:, 0]
    assert int(np.argmax(into)) == 1 and into[1] > comp.baseline["q99"]
    pm = PA.path_map(m.weights, P.make_pair(m, TINY_CLEAN, TINY_CORRUPT, " source", " binary"), "L3H0.k")
    assert pm.senders[int(np.argmax(pm.change))] == "L2H1"


# ----------------------------------------------------------------------------- CLI

def test_why_cli_json_holds_every_term_and_the_models_score(tmp_path, capsys):
    from attnkit.cli import main
    from attnkit.loading import load

    out = tmp_path / "why.json"
    assert main(["why", "--model", "attnkit-tiny", "--text", TINY_CLEAN, "--head", "L3H0", "--query", "11",
                 "--key", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "L3H0 attends from 11" in text and "L2H1" in text
    got = json.loads(out.read_text())
    m = load("attnkit-tiny", "cpu")
    own = float(model_scores(m.weights, m.encode(TINY_CLEAN), 3)[0, 11, 3])
    assert isinstance(got["score"], float) and abs(got["score"] - own) <= TOL_SCORE_REL * abs(own)
    terms = got["terms"]
    assert {"query", "key", "value"} <= set(terms[0]) and ("embed", "pos_embed") == (terms[0]["query"], terms[1]["key"])
    assert got["total"] == pytest.approx(sum(t["value"] for t in terms))
    assert abs(got["total"] - own) <= TOL_SCORE_REL * sum(abs(t["value"]) for t in terms)
    assert got["tokens"][11] == " kernel"
    assert main(["why", "--model", "attnkit-tiny", "--text", TINY_CLEAN, "--head", "L3H0", "--query", "11",
                 "--json", str(out)]) == 0
    row = json.loads(out.read_text())
    assert [k["key"] for k in row["keys"]] == list(range(12))


@pytest.mark.parametrize("argv, msg", [
    (["--head", "L3", "--query", "1"], "not a head label"),
    (["--head", "L3H0", "--query", "-1"], "--query"),
    (["--head", "L3H0", "--query", "1", "--against", "0"], "--against needs --key"),
    (["--head", "L3H0", "--query", "1", "--json", "/nonexistent-dir/x.json"], "--json"),
    (["--head", "L3H0", "--query", "99"], "outside the prompt's 12 tokens"),
    (["--head", "L3H0", "--query", "3", "--key", "5"], "comes after query 3"),
    (["--head", "L9H0", "--query", "3"], "no head L9H0"),
])
def test_why_cli_bad_input_is_one_line_and_exit_2_before_work(argv, msg, capsys, monkeypatch):
    from attnkit.cli import main

    monkeypatch.setattr(ST, "run", lambda *a, **k: pytest.fail("the model was run"))
    assert main(["why", "--model", "attnkit-tiny", "--text", TINY_CLEAN] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "Traceback" not in err[0], err


# ----------------------------------------------------------------------------- charts

def test_charts_keep_the_total_and_carry_tooltips(family):
    from attnkit.charts import score_terms as CH

    w = with_biases(family("gpt2"), torch.float64)
    ids = ids_for(w)
    st = ST.score_terms(w, ids, 2, 0, T - 1, 3, against=1)
    g = CH.grid_frame(st, 5)
    assert len(set(g["query"])) == 6 and CH.OTHER_QUERY in set(g["query"]) and CH.OTHER_KEY in set(g["key"])
    assert abs(g["value"].sum() - st.total) <= TOL_F64
    spec = CH.terms_grid(st, 5).to_dict()
    assert {t["field"] for t in spec["encoding"]["tooltip"]} >= {"query", "key", "value", "share"}
    bars = CH.top_terms_bars(st, 7).data                  # the 7 largest and one bar for the rest: they add up
    assert len(bars) == 8 and abs(bars["value"].sum() - st.total) <= TOL_F64
    row = ST.score_terms(w, ids, 2, 0, T - 1)
    CH.row_by_kind(row, [str(i) for i in ids]).to_dict()
    CH.layer0_bars(ST.layer0_average(w, [ids, ids_for(w, 1)], 0)).to_dict()
