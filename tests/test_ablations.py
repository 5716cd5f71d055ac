"""Ablations: each intervention does exactly what it says (checked against NumPy float64), the hull
distance is exact on hand-computed cases, losses equal HuggingFace's, verdicts follow their rule with a
bootstrap interval, a new kind is one class, the CLI and the page work."""
import json
import math

import numpy as np
import pytest
import torch

from attnkit import ablations as A
from attnkit.cli.ablate import cli as ablate_cli
from attnkit.ablations.hull import HULL_ATOL, certify_mixture
from attnkit.model import Intervention, run
from helpers import apptest

TEXT = "The animal didn't cross the street because it was too tired. The animal was tired."


@pytest.fixture(scope="module")
def ids(odd):
    out = odd.encode(TEXT)
    assert 15 <= len(out) <= 40
    return out


def np64(t):
    return t.detach().double().cpu().numpy()


# ----------------------------------------------------------------------------- interventions

def test_identity_intervention_is_bit_for_bit_the_plain_forward(odd, ids):
    plain = run(odd.weights, ids, capture=["attn_out", "z"])
    same = run(odd.weights, ids, capture=["attn_out", "z"], intervention=Intervention())
    assert torch.equal(plain.logits, same.logits)
    for l in range(odd.config.n_layers):
        assert torch.equal(plain["attn_out", l], same["attn_out", l])
        assert torch.equal(plain["z", l], same["z", l])


def test_v_equals_x_is_the_mean_over_heads_of_pattern_times_x_hat(odd, ids):
    w = odd.weights
    tr = run(w, ids, capture=["ln1", "pattern", "attn_out"], intervention=A.ValueIsInput())
    base = run(w, ids, capture=["ln1", "attn_out"])
    for l in range(odd.config.n_layers):
        x_hat, pat, out = np64(tr["ln1", l][0]), np64(tr["pattern", l][0]), np64(tr["attn_out", l][0])
        expect = np.mean([pat[h] @ x_hat for h in range(pat.shape[0])], axis=0)     # NumPy float64
        np.testing.assert_allclose(out, expect, atol=2e-5, rtol=1e-5)
        # the pattern mean is a certificate: the output is that mixture of x̂ to float noise
        d, info = certify_mixture(out, x_hat, pat.mean(0))
        assert d.max() <= 1e-5 and info["converged"] and info["weight_error"] < 1e-6, (l, d.max())
        # the solver, not told the weights, stops inside by its stated rule (≤ HULL_ATOL of the RMS norm)
        d, info = A.hull_distance(out, x_hat)
        assert d.max() <= HULL_ATOL * np.sqrt((x_hat ** 2).sum(1).mean()) and info["lower"].max() <= 1e-5
        # the real attention output is not a mixture of x̂: it lies well outside the hull
        db, info_b = A.hull_distance(np64(base["attn_out", l][0]), np64(base["ln1", l][0]))
        assert info_b["lower"].min() > 1e-2
    assert not torch.equal(tr.logits, base.logits)


def test_v_equals_x_scope_leaves_other_layers_alone(odd, ids):
    w = odd.weights
    tr = run(w, ids, capture=["attn_out", "resid_pre"], intervention=A.ValueIsInput(layers=[1]))
    base = run(w, ids, capture=["attn_out", "resid_pre"])
    # (the hook makes every layer use the explicit softmax path instead of the fused kernel: same maths)
    torch.testing.assert_close(tr["attn_out", 0], base["attn_out", 0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tr["resid_pre", 1], base["resid_pre", 1], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(tr["attn_out", 1], base["attn_out", 1])


def test_wk_equals_wq_gives_symmetric_scores_from_the_query_projection(odd, ids):
    w = odd.weights
    tr = run(w, ids, capture=["ln1", "q", "k", "scores"], intervention=A.KeyIsQuery())
    e = odd.config.d_head
    for l, lw in enumerate(w.layers):
        S = np64(tr["scores", l][0])
        np.testing.assert_allclose(S, np.swapaxes(S, -1, -2), atol=1e-6, rtol=0)
        assert A.asymmetry(tr["scores", l]).max() < 1e-6
        x_hat = np64(tr["ln1", l][0])
        q = np.einsum("td,hde->hte", x_hat, np64(lw.W_Q)) + np64(lw.b_Q)[:, None, :]
        np.testing.assert_allclose(S, q @ np.swapaxes(q, -1, -2) / math.sqrt(e), atol=2e-4, rtol=1e-4)
    base = run(w, ids, capture=["scores"])
    assert A.asymmetry(base["scores", 0]).min() > 0.1


def test_wk_equals_wq_for_one_head_only(odd, ids):
    tr = run(odd.weights, ids, capture=["q", "k"], intervention=A.KeyIsQuery(heads=[(1, 2)]))
    base = run(odd.weights, ids, capture=["k"])
    assert torch.equal(tr["k", 1][:, 2], tr["q", 1][:, 2])
    assert torch.equal(tr["k", 1][:, 3], base["k", 1][:, 3])
    assert torch.equal(tr["k", 0], base["k", 0])


def test_no_scaling_multiplies_the_scores_by_sqrt_d_head(odd, ids):
    base = run(odd.weights, ids, capture=["scores"])
    tr = run(odd.weights, ids, capture=["scores"], intervention=A.NoScale())
    one = run(odd.weights, ids, capture=["scores"], intervention=A.NoScale(layers=[0], heads=[(0, 4)]))
    r = math.sqrt(odd.config.d_head)
    torch.testing.assert_close(tr["scores", 0], base["scores", 0] * r, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(one["scores", 0][:, 4], base["scores", 0][:, 4] * r, rtol=1e-5, atol=1e-5)
    assert torch.equal(one["scores", 0][:, 3], base["scores", 0][:, 3])


def test_causal_mask_makes_the_past_independent_of_the_future_and_removing_it_does_not(odd, ids):
    w, t = odd.weights, 6
    other = ids[:t] + [(i * 7 + 3) % odd.config.d_vocab for i in ids[t:]]
    assert other != ids
    masked_a, masked_b = run(w, ids).logits, run(w, other).logits
    assert torch.equal(masked_a[0, :t], masked_b[0, :t])                # positions < t ignore tokens ≥ t
    free_a = run(w, ids, intervention=A.NoMask()).logits
    free_b = run(w, other, intervention=A.NoMask()).logits
    assert not torch.allclose(free_a[0, :t], free_b[0, :t], atol=1e-4)  # now they see them
    assert not torch.allclose(free_a[0, :t], masked_a[0, :t], atol=1e-4)
    pat = run(w, ids, capture=["pattern"], intervention=A.NoMask())["pattern", 0]
    assert float(pat[0, :, 0, 1:].sum()) > 0                           # position 0 looks ahead


def test_zero_head_zeroes_that_head_and_changes_the_logits(odd, ids):
    base = run(odd.weights, ids, capture=["z"])
    tr = run(odd.weights, ids, capture=["z"], intervention=A.ZeroHead(heads=[(1, 3)]))
    assert torch.count_nonzero(tr["z", 1][:, 3]) == 0
    assert torch.equal(tr["z", 1][:, 2], base["z", 1][:, 2])
    assert torch.equal(tr["z", 0], base["z", 0])
    assert not torch.allclose(tr.logits, base.logits, atol=1e-5)


def test_mean_head_uses_the_mean_over_positions_of_an_unablated_run(odd, ids):
    texts = [ids, ids[:9]]
    means = A.head_means(odd.weights, texts)
    z_all = np.concatenate([np64(run(odd.weights, t, capture=["z"])["z", 2][0, 5]) for t in texts])
    np.testing.assert_allclose(np64(means[2, 5]), z_all.mean(0), atol=1e-6)
    tr = run(odd.weights, ids, capture=["z"], intervention=A.MeanHead(means, heads=[(2, 5)]))
    np.testing.assert_allclose(np64(tr["z", 2][0, 5]), np.broadcast_to(z_all.mean(0), (len(ids), z_all.shape[1])),
                               atol=1e-6)


# ----------------------------------------------------------------------------- geometry

def test_hull_distance_by_hand_on_the_unit_simplex():
    E = np.eye(3)
    pts = np.array([[1.0, 1, 1], [0, 0, 0], [2, 0, 0], [0.2, 0.3, 0.5], [1, 1, 0]])
    d, info = A.hull_distance(pts, E, rtol=1e-9, atol=1e-9)
    # nearest points: (⅓,⅓,⅓), (⅓,⅓,⅓), e1, itself, (½,½,0)
    expect = [2 / math.sqrt(3), 1 / math.sqrt(3), 1.0, 0.0, 1 / math.sqrt(2)]
    np.testing.assert_allclose(d, expect, atol=1e-7)
    assert info["converged"]
    assert np.all(info["lower"] <= d + 1e-12)
    np.testing.assert_allclose(info["lower"][:3], expect[:3], rtol=1e-6)


def test_hull_distance_is_zero_inside_a_random_hull_and_exact_outside_a_square():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(12, 40))
    W = rng.dirichlet(np.ones(12) * 0.5, size=30)
    d, _ = A.hull_distance(W @ V, V, rtol=1e-9, atol=1e-9)
    assert d.max() < 1e-6
    square = np.array([[0.0, 0], [1, 0], [0, 1], [1, 1]])
    d, _ = A.hull_distance(np.array([[2.0, 0.5], [3, 3], [0.5, 0.5]]), square, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(d, [1.0, 2 * math.sqrt(2), 0.0], atol=1e-9)


def test_hull_distance_on_a_flat_hull_is_exact_and_certified():
    # 60 points on a 6-dimensional affine slice of R^100 (real activations are this flat); plain
    # Frank–Wolfe crawls here, the min-norm-point method must land on the points inside exactly
    rng = np.random.default_rng(1)
    basis = rng.normal(size=(6, 100))
    V = rng.normal(size=(60, 6)) @ basis + 5 * rng.normal(size=100)
    inside = rng.dirichlet(np.ones(60) * 0.2, size=20) @ V
    d, info = A.hull_distance(inside, V, rtol=1e-9, atol=1e-9)
    assert d.max() < 1e-8 and info["converged"]
    outside = inside + rng.normal(size=(20, 100))
    d, info = A.hull_distance(outside, V, rtol=1e-9, atol=1e-9)
    assert np.all(d > 1) and info["converged"]
    np.testing.assert_allclose(info["lower"], d, rtol=1e-6)     # the duality bound meets the distance


def test_participation_ratio_by_hand():
    assert A.participation_ratio([[1, 0], [-1, 0], [0, 1], [0, -1]]) == pytest.approx(2.0)
    assert A.participation_ratio([[1, 2], [2, 4], [3, 6]]) == pytest.approx(1.0)
    assert math.isnan(A.participation_ratio([[1, 2]]))


# ----------------------------------------------------------------------------- measurements

def _series(r, metric, run="ablated"):
    return getattr(r.per_layer[metric.key], run)


def test_loss_equals_huggingface(odd, ids):
    lo = A.loss(odd.weights, [ids, ids[:5], ids[:1]])
    with torch.no_grad():
        hf = [odd.hf_model(torch.tensor([t]), labels=torch.tensor([t])).loss.double() for t in (ids, ids[:5])]
    expect = (float(hf[0]) * (len(ids) - 1) + float(hf[1]) * 4) / (len(ids) - 1 + 4)
    assert lo.tokens == len(ids) - 1 + 4 and lo.skipped == 1 and lo.prompts == 3
    assert lo.nats == pytest.approx(expect, rel=1e-5)
    assert lo.perplexity == pytest.approx(math.exp(expect), rel=1e-5)


def test_measure_wk_wq_and_v_x_report_what_the_ablation_guarantees(odd, ids):
    r = A.measure(odd.weights, [ids], A.parse_spec("wk=wq"))
    assert max(_series(r, A.registry.ASYMMETRY)) < 1e-6
    assert min(_series(r, A.registry.ASYMMETRY, "baseline")) > 0.1
    assert [e.holds for e in r.evidence][0] is True                   # symmetric, as constructed
    json.dumps(r.to_dict(), allow_nan=False)                          # JSON-ready
    r = A.measure(odd.weights, [ids], A.parse_spec("v=x", layers="0,2"))
    peak, lower = _series(r, A.registry.HULL_MAX), _series(r, A.registry.HULL_LOWER)
    assert peak[0] <= 1e-5 and peak[2] <= 1e-5
    assert lower[1] > 1e-2                                            # layer 1 not ablated: outside
    assert r.scope == [0, 2] and r.spec == A.Spec("v=x", (0, 2))
    assert r.baseline.nats == pytest.approx(A.loss(odd.weights, [ids]).nats, rel=1e-9)
    assert all(e.holds for e in r.evidence)


def test_measure_no_scale_entropy_and_no_mask_change(odd, ids):
    from attnkit.metrics import entropy

    r = A.measure(odd.weights, [ids], A.parse_spec("no-scale"))
    p = run(odd.weights, ids, capture=["pattern"], intervention=A.NoScale())["pattern", 1][0]
    assert _series(r, A.registry.ENTROPY)[1] == pytest.approx(float(entropy(p)[:, 1:].mean()), rel=1e-5)
    r = A.measure(odd.weights, [ids], A.parse_spec("no-mask"))
    assert len(r.per_position) == len(ids) and r.per_position[0].relative_change > 1e-4
    assert min(_series(r, A.registry.FUTURE)) > 0


def test_one_token_text_is_explained_not_nan(odd):
    r = A.measure(odd.weights, [odd.encode("The")[:1]], A.parse_spec("v=x"))
    assert r.baseline.tokens == 0 and r.effect is None
    assert r.to_dict()["loss"]["baseline_nats"] is None               # null in JSON, never NaN
    assert A.ONE_TOKEN_NOTE in r.notes
    assert r.verdict.status == A.NOT_ENOUGH and r.verdict.settle
    json.dumps(r.to_dict(), allow_nan=False)


def test_sweeps_agree_with_single_ablations_and_report_progress(odd, ids):
    w = odd.weights
    calls = []
    sw = A.layer_sweep(w, [ids], A.parse_spec("zero-head:L0H0"), progress=lambda d, t: calls.append((d, t)))
    assert [r.scope for r in sw.rows] == ["layer 0", "layer 1", "layer 2", "all layers"]
    assert calls[0] == (0, 4) and calls[-1] == (4, 4)
    lone = A.loss(w, [ids], A.ZeroHead(layers=[1])).nats - A.loss(w, [ids]).nats
    assert sw.rows[1].increase == pytest.approx(lone, rel=1e-9, abs=1e-12)
    assert sw.rows[1].effect.lo <= sw.rows[1].increase <= sw.rows[1].effect.hi
    calls.clear()
    hm = A.head_sweep(w, [ids], "zero-head", progress=lambda d, t: calls.append(d))
    assert hm.increase.shape == (3, 6) and calls[-1] == 18
    one = A.loss(w, [ids], A.ZeroHead(heads=[(2, 4)])).nats - A.loss(w, [ids]).nats
    assert hm.increase[2, 4] == pytest.approx(one, rel=1e-9, abs=1e-12)
    assert hm.names()[2][4] == "L2H4" and hm.top(1)[0][0].startswith("L")
    assert np.all(hm.lo <= hm.increase + 1e-12) and np.all(hm.increase <= hm.hi + 1e-12)


def test_parse_spec_messages():
    assert str(A.parse_spec("zero-head:1.2,L0H3")) == "zero-head:L0H3,L1H2"
    assert A.parse_spec("v=x", layers="2, 0").layers == (0, 2)
    assert str(A.parse_spec("no-scale", layers="0,1")) == "no-scale@0,1"
    for bad, msg in [("v=y", "unknown"), ("zero-head", "needs the head"), ("no-mask:1.2", "whole layers"),
                     ("zero-head:x", "L{layer}H{head}")]:
        with pytest.raises(A.AblationError, match=msg):
            A.parse_spec(bad)
    with pytest.raises(A.AblationError, match="does not exist"):
        A.parse_spec("zero-head:L3H0", n_layers=3, n_heads=6)
    with pytest.raises(A.AblationError, match="does not exist"):
        A.parse_spec("zero-head:L0H6", n_layers=3, n_heads=6)


# ----------------------------------------------------------------------------- effect and verdict

def _loss(arrays):
    return A.Loss(nll=[np.asarray(a, dtype=float) for a in arrays], prompts=len(arrays))


def test_bootstrap_interval_over_tokens_then_over_prompts():
    rng = np.random.default_rng(3)
    d = rng.normal(0.5, 1.0, 400)
    e = A.effect(_loss([np.zeros(400)]), _loss([d]))
    assert e.over == "tokens" and e.units == 400 and e.delta == pytest.approx(d.mean())
    assert e.lo < d.mean() < e.hi
    assert (e.hi - e.lo) == pytest.approx(2 * 1.96 / 20, rel=0.2)     # ≈ 2·1.96·σ/√n
    parts = np.array_split(d, 8)
    e = A.effect(_loss([np.zeros(len(p)) for p in parts]), _loss(parts))
    assert e.over == "prompts" and e.units == 8 and e.lo < e.delta < e.hi
    assert A.effect(_loss([]), _loss([])) is None


def test_verdicts_follow_the_stated_rule():
    def eff(delta, lo, hi, tokens=500):
        return A.Effect(delta, lo, hi, "tokens", tokens, tokens)

    head, mask = A.get_kind("zero-head"), A.get_kind("no-mask")
    # a +0.0002 nats/token change is no effect, however tight its interval
    assert head.verdict(eff(0.0002, 0.0001, 0.0003), []).status == A.NOT_SUPPORTED
    assert head.verdict(eff(0.2, 0.15, 0.25), []).status == A.SUPPORTED
    short = head.verdict(eff(0.2, 0.15, 0.25, tokens=18), [])         # one 18-token prompt
    assert short.status == A.NOT_ENOUGH and str(A.MIN_TOKENS) in short.settle
    wide = head.verdict(eff(0.02, -0.01, 0.05), [])
    assert wide.status == A.NOT_ENOUGH and "tokens (now 500)" in wide.settle
    assert mask.verdict(eff(-0.3, -0.4, -0.2), []).status == A.SUPPORTED         # predicted: the loss falls
    assert mask.verdict(eff(0.3, 0.2, 0.4), []).status == A.NOT_SUPPORTED
    failed = A.Evidence("attention entropy", 2.0, 2.5, "ablated < baseline", False)
    v = A.get_kind("no-scale").verdict(eff(0.2, 0.15, 0.25), [failed])
    assert v.status == A.NOT_SUPPORTED and "attention entropy" in v.text
    for k in A.kinds():
        assert str(A.MIN_EFFECT) in k.verdict(None, []).rule and k.claim.count(". ") == 0   # one sentence


# ----------------------------------------------------------------------------- the registry

def test_every_kind_owns_its_words_and_a_new_kind_is_one_class(odd, ids):
    assert list(A.REGISTRY) == ["v=x", "wk=wq", "no-scale", "no-mask", "no-sink", "zero-head", "mean-head"]
    for k in A.kinds():
        assert k.label and k.claim and k.definition and k.measures and k.available(odd.config) == (True, "")

    class Flip(Intervention):
        def attn_out(self, out, layer):
            return -out

    @A.register
    class FlipAttention(A.Kind):
        name = "flip-attn"
        label = "Flip the attention output"
        claim = "Attention's sign matters, so flipping its output makes the model predict worse."
        definition = "attn_out := −attn_out."
        measures = "The loss."

        def intervention(self, spec, config=None, means=None):
            return Flip(spec.layers)

    try:
        assert "flip-attn" in A.REGISTRY
        spec = A.parse_spec("flip-attn", "1", 3, 6)
        r = A.measure(odd.weights, [ids], spec)
        assert r.kind == "flip-attn" and r.verdict.status in A.STATUSES and r.effect.delta != 0
        assert len(A.layer_sweep(odd.weights, [ids], spec).rows) == 4
        assert "Flip the attention output" in [c.label for c in A.check_all(odd.weights, [ids])]
    finally:
        A.REGISTRY.pop("flip-attn")


def test_kinds_a_model_cannot_take_say_why(odd, ids):
    import dataclasses

    gqa = dataclasses.replace(odd.config, n_kv_heads=2)
    ok, why = A.get_kind("wk=wq").available(gqa)
    assert not ok and "grouped-query" in why and "2 key heads for 6 query heads" in why
    assert A.get_kind("v=x").available(gqa) == (True, "")
    ok, why = A.get_kind("no-scale").available(dataclasses.replace(odd.config, scale_attn_weights=False))
    assert not ok and "change nothing" in why


# ----------------------------------------------------------------------------- charts

def test_head_map_chart_shows_values_and_covers_the_largest_change():
    from attnkit.charts import ablations as C

    inc = np.zeros((2, 3))
    inc[1, 2] = 0.62
    hm = A.HeadMap("zero-head", 3.0, 100, inc, inc - 0.1, inc + 0.1, 6)
    df = C.head_map_frame(hm)
    assert list(df["name"]) == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    spec = C.head_map_chart(df, "t").to_dict()
    rect, text = spec["layer"]
    scale = rect["encoding"]["color"]["scale"]
    assert scale["domain"][0] < 0 < scale["domain"][1] and scale["domain"][1] >= 0.62
    assert scale["domain"][0] == -scale["domain"][1] and scale["reverse"] is True   # ascending domain: legend − … +
    assert text["mark"]["type"] == "text" and text["encoding"]["text"]["field"] == "increase"


# ----------------------------------------------------------------------------- CLI and page

def test_cli_writes_json_and_says_what_it_dropped(odd_dir, tmp_path, capsys):
    f = tmp_path / "text.txt"
    f.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.json"
    rc = ablate_cli(["--model", str(odd_dir), "--text-file", str(f), "--intervention", "no-scale", "--layers", "0,1",
                "--sweep", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["measure"]["spec"] == "no-scale@0,1" and data["measure"]["verdict"]["status"] in A.STATUSES
    assert len(data["layer_sweep"]) == 4
    assert "verdict" in capsys.readouterr().out
    rc = ablate_cli(["--model", str(odd_dir), "--text-file", str(f), "--intervention", "zero-head:L9H0"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
    long = tmp_path / "long.txt"
    long.write_text(TEXT * 30, encoding="utf-8")
    rc = ablate_cli(["--model", str(odd_dir), "--text-file", str(long), "--intervention", "no-mask", "--layers", "0"])
    n = len(__import__("attnkit.loading", fromlist=["load"]).load(str(odd_dir), "cpu").encode(TEXT * 30))
    assert rc == 0 and f"{n - 256:,} token(s) beyond the context of 256 were dropped" in capsys.readouterr().err


def test_cli_refuses_bad_input_before_loading_the_model(tmp_path, capsys):
    f = tmp_path / "text.txt"
    f.write_text(TEXT, encoding="utf-8")
    missing = str(tmp_path / "no-such-model")                          # never reached: the spec is checked first
    assert ablate_cli(["--model", missing, "--text-file", str(f), "--intervention", "v=y"]) == 2
    assert "unknown intervention" in capsys.readouterr().err
    assert ablate_cli(["--model", missing, "--text-file", str(tmp_path / "none.txt"), "--intervention", "v=x"]) == 2


def test_page_runs_every_intervention_and_the_sweeps(odd_dir):
    at = apptest("ablations", odd_dir, text=TEXT).run()
    assert not at.exception and not at.error
    assert any("convex" in m.value for m in list(at.markdown) + list(at.caption))   # the definition is shown
    for k in A.kinds():
        at.selectbox(key="ab_kind").set_value(k.name).run()
        # an error box here may only be a "not supported" verdict (a random model fails mechanism thresholds)
        assert not at.exception and all(e.value.startswith("Verdict: not supported") for e in at.error), k.name
        assert any(k.claim in m.value for m in at.markdown), k.name
        assert any("Rule:" in c.value for c in at.caption), k.name
    at.button(key="_ak_run_ab_sweep").click().run()
    at.button(key="_ak_run_ab_map").click().run()
    assert not at.exception and not at.error
    assert any("Largest increases: L" in c.value for c in at.caption)
    at.button(key="_ak_run_ab_all").click().run()
    assert not at.exception and not at.error
    claims = at.dataframe[-1].value
    assert len(claims) == 5 and claims["verdict"].isin(A.STATUSES).all()


def test_page_one_token_prompt_is_explained(odd_dir):
    at = apptest("ablations", odd_dir, text="The").run()
    assert not at.exception and not at.error
    assert any("one-token" in i.value for i in at.info)
    at.button(key="_ak_run_ab_sweep").click().run()
    assert not at.exception and not at.error


def test_page_pools_a_prompt_set(odd_dir):
    data = "\n".join(json.dumps(t) for t in [TEXT, "The", "Attention lets every token look back."]).encode()
    at = apptest("ablations", odd_dir, ak_source="Upload", ak_upload_data=("set.jsonl", data),
                 ak_pick="all", ab_kind="no-mask").run()
    assert not at.exception and not at.error
    assert any("All 3 prompts" in c.value for c in at.caption)
    assert any("1 one-token text" in c.value for c in at.caption)
