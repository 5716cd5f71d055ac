"""The benchmark runs and reports every figure; no assertion here depends on timing."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from attnkit.cli.bench import cli as bench_cli
from attnkit.dev import bench as B

#: The bench runs whole models through its command line: in the named suite `-m slow` (.ci/run runs it), not the
#: quick one.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick run through the command line, its printed table and its JSON."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    threads = torch.get_num_threads()
    rc = bench_cli(["--quick", "--threads", "1", "--json", str(out)])
    assert rc == 0
    assert torch.get_num_threads() == threads          # the caller's setting is restored
    return json.loads(out.read_text(encoding="utf-8"))


def test_json_has_machine_settings_and_targets(quick):
    m = quick["machine"]
    for key in ("platform", "cpu_model", "cpu_count", "python", "torch", "transformers", "torch_threads",
                "torch_interop_threads", "load_average", "devices"):
        assert key in m, key
    assert m["torch"] == torch.__version__
    assert m["torch_threads"] == 1
    assert "cpu" in m["devices"]
    s = quick["settings"]
    assert s["lengths"] == [16, 32] and s["repeats"] == 2 and s["quick"] is True and s["interleaved"] is True
    assert quick["model"]["n_layers"] == 2 and quick["model"]["d_model"] == 64
    assert {k: v["value"] for k, v in quick["targets"].items()} == {
        "pattern_vs_hf_eager": 1.10, "nocapture_vs_hf_sdpa": 1.25, "kv_cache_speedup": 4.0, "entropy_vs_pattern": 1.5,
        "patching_vs_forwards": 0.6, "streaming_vs_entropy_profile": 1.0, "hull_vs_no_hull": 5.0,
        "attribution_vs_fwd_bwd": 3.0, "eviction_vs_full": 1.5,
        "atlas_scan_vs_pattern": 3.0, "atlas_scan_rise_vs_trace": 1.0}


def test_every_check_has_ratio_target_and_medians(quick):
    rows = quick["results"]
    got = {(r["check"], r["T"]) for r in rows}
    for T in (16, 32):
        assert ("pattern_vs_hf_eager", T) in got and ("nocapture_vs_hf_sdpa", T) in got
    assert any(r["check"] == "kv_cache_speedup" for r in rows)
    assert any(r["check"] == "kv_cache_vs_hf_generate" for r in rows)
    assert any(r["check"] == "entropy_vs_pattern" for r in rows)
    assert any(r["check"] == "patching_vs_forwards" and r["T"] == 16 for r in rows)
    assert {"atlas_scan_vs_pattern", "atlas_effect_vs_forward", "atlas_f64_vs_pattern"} <= {r["check"] for r in rows}
    assert quick["patching"]["cpu"]["heads"] == 8 and quick["patching"]["cpu"]["patched_rows"] == 8
    best_of = {"attribution_vs_fwd_bwd", "discovery_vs_fwd_bwd"}       # circuit_bench reports the best of 2
    for r in rows:
        for side in ("a", "b"):
            t = r[side]["times_s"]
            assert len(t) == (1 if r["check"] in best_of else 2) and all(x > 0 for x in t)
            if r["check"] in best_of:
                continue
            assert r[side]["median_s"] == pytest.approx(sorted(t)[0] / 2 + sorted(t)[1] / 2)
        if r["check"] == "kv_cache_speedup":        # a speed-up: uncached over cached
            assert r["ratio"] == pytest.approx(r["a"]["median_s"] / r["b"]["median_s"])
            assert r["a"]["name"] == "attnkit no cache"
        else:
            assert r["ratio"] == pytest.approx(r["a"]["median_s"] / r["b"]["median_s"])
        if r["check"] in B.TARGETS:
            op, value = B.TARGETS[r["check"]][1:]
            assert (r["op"], r["target"]) == (op, value)
            assert r["pass"] == (r["ratio"] <= value if op == "<=" else r["ratio"] >= value)
            assert (r["miss_by"] == 0) == r["pass"]
        else:
            assert r["target"] is None and r["pass"] is None
    s = quick["summary"]
    judged = [r for r in rows if r["pass"] is not None]
    assert s["judged"] == len(judged) and s["passed"] == sum(r["pass"] for r in judged)
    assert len(s["missed"]) == s["judged"] - s["passed"]


def test_hull_and_circuit_rows(quick):
    """Check 9 (V = X with its hull check ÷ without, at the longest T) and check 10 (attribution patching ÷ one
    forward + backward on 16 tokens, with its Spearman ρ against exact patching and discovery's seconds)."""
    rows = {r["check"]: r for r in quick["results"]}
    hull = quick["hull"]["cpu"]
    assert rows["hull_vs_no_hull"]["T"] == hull["T"] == 32
    assert rows["hull_vs_no_hull"]["ratio"] == pytest.approx(hull["with_hull_s"] / hull["without_hull_s"])
    assert hull["hull_note"].startswith("Hull distances")
    c = quick["circuits"]["cpu"]
    assert c["T"] == rows["attribution_vs_fwd_bwd"]["T"] == 16
    assert rows["attribution_vs_fwd_bwd"]["ratio"] == pytest.approx(c["attribution_s"] / c["forward_backward_s"])
    assert -1 <= c["spearman"] <= 1 and c["discovery_s"] > 0 and c["exact_s"] > 0
    assert rows["discovery_vs_fwd_bwd"]["target"] is None


def test_shapes_rows_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert bench_cli(["--quick", "--no-memory", "--repeats", "1", "--shapes", "tiny", "--shape-T", "16",
                      "--shape-cache", str(tmp_path / "cache"), "--json", str(out)]) == 0
    res = json.loads(out.read_text(encoding="utf-8"))
    got = {r["check"] for r in res["results"] if r.get("shape") == "tiny"}
    timed = {"shape_trace_vs_hf_eager", "shape_patching_vs_forwards", "shape_attribution_vs_fwd_bwd",
             "shape_entropy_vs_trace", "shape_hull_vs_no_hull", "shape_why_key_vs_forward", "shape_why_row_vs_forward",
             "shape_circuits_open_s", "shape_atlas_scan_vs_trace", "shape_atlas_effect_vs_forward"}
    assert timed <= got <= timed | {"shape_why_row_rise_vs_forward"}     # a rise only where the forward's is > 0
    tiny = res["shapes"]["shapes"]["tiny"]
    assert tiny["vx_hull_s"] > 0 and tiny["vx_no_hull_s"] > 0 and tiny["entropy_s"] > 0
    assert res["shapes"]["shapes"]["tiny"]["pattern_bytes"] == 4 * 2 * 4 * 16 * 16
    assert tiny["circuits_pair_shown"] and not tiny["circuits_errors"] and tiny["circuits_open_s"] > 0
    assert "per shape (random weights, CPU)" in capsys.readouterr().out


def test_timed_calls_compute_what_hf_computes(quick):
    """The bench checks, before timing, that both sides agree; the figures must be tiny."""
    for c in quick["correctness"]:
        assert c["logits_max_abs_vs_hf_eager"] < 1e-4
        assert c["pattern_max_abs_vs_hf_eager"] < 1e-5
        assert c["logits_max_abs_hf_sdpa_vs_eager"] < 1e-4
        assert c["float64_rule_ok"] and c["float64_verdict"].startswith("PASS")     # verify's rule, per length
        assert c["max_f64_vs_f64"] <= 1e-9 and c["float64_reference"]["n_tokens"] == c["T"]
    g = quick["generation"]["cpu"]
    assert g["same_tokens_cache_vs_nocache"] and g["same_tokens_attnkit_vs_hf"]
    assert g["new_tokens"] == 4 and set(g["ms_per_token"]) == {"attnkit KV cache", "attnkit no cache", "HF generate"}


def test_memory_section_counts_the_captured_bytes(quick):
    mem = quick["memory"]["cpu"]
    m = quick["model"]
    L, H, d, T = m["n_layers"], m["n_heads"], m["d_model"], mem["T"]
    assert T == 32
    # capture='all': 11 per-layer captures of T·d floats (resid_pre, ln1, q, k, v, z, attn_out, resid_mid,
    # ln2, mlp_out, resid_post), mlp_pre and mlp_post of T·4d, scores and pattern of H·T·T each, and
    # embed, pos_embed, ln_final (T·d)
    all_floats = L * (11 * T * d + 2 * T * 4 * d + 2 * H * T * T) + 3 * T * d
    probes = {p["variant"]: p for p in mem["probes"]}
    assert probes["all"]["captured_bytes"] == 4 * all_floats
    assert probes["all_fp16"]["captured_bytes"] == 2 * all_floats
    assert probes["pattern"]["captured_bytes"] == 4 * L * H * T * T
    assert probes["pattern_fp16"]["captured_bytes"] == 2 * L * H * T * T
    assert probes["pattern_layers_0_1"]["captured_bytes"] == 4 * L * H * T * T   # both layers of 2
    assert probes["hf_eager_attentions_hidden"]["captured_bytes"] is None          # not probed in quick mode
    assert probes["none"]["captured_bytes"] == 0
    for name in ("none", "all"):                                                  # probed in fresh processes
        assert "error" not in probes[name]
        assert probes[name]["peak_delta_bytes"] >= 0 and "fresh process" in probes[name]["peak_method"]
    assert set(mem["timing"]) == {"all", "all_fp16", "pattern", "pattern_fp16", "pattern_layers_0_1"}
    assert mem["time_vs_pattern_fp32"]["pattern"] == 1.0
    # float16 keeps 11 significant bits: error at most half a unit in the last place of values ≤ 1
    assert 0 < mem["fp16_pattern_max_abs_error"] <= 2 ** -12


def test_transformer_lens_column_skipped_cleanly_when_absent(quick, odd, monkeypatch):
    import importlib.util

    installed = importlib.util.find_spec("transformer_lens") is not None
    monkeypatch.setitem(sys.modules, "transformer_lens", None)   # import now fails, installed or not
    monkeypatch.setitem(sys.modules, "transformer_lens.model_bridge", None)
    model, info = B.transformer_lens_bridge(odd)
    assert model is None and info["status"] == "skipped" and "not importable" in info["reason"]
    if installed:                                                 # the real run filled the column
        assert quick["transformer_lens"]["cpu"]["status"] == "measured"
        assert any("transformer_lens" in r["check"] for r in quick["results"])
    else:
        assert quick["transformer_lens"]["cpu"]["status"] == "skipped"
        assert not any("transformer_lens" in r["check"] for r in quick["results"])
        assert quick["machine"]["transformer_lens"] is None


def test_entropy_timing_names_what_it_timed(quick):
    timed = quick["entropy"]["cpu"]["timed"]
    assert "entropy_profile" in timed or "metrics.entropy" in timed
    row = next(r for r in quick["results"] if r["check"] == "entropy_vs_pattern")
    assert row["b"]["name"] == "attnkit pattern"


def test_table_shows_ratio_target_and_verdict(quick):
    text = B.format_table(quick)
    assert "≤ 1.1" in text and "≥ 4" in text and "≤ 1.25" in text and "≤ 1.5" in text
    assert ("PASS" in text) or ("MISS" in text)
    assert "memory at T=32" in text and "TransformerLens" in text


def test_interleaved_alternates_the_calls():
    calls = []
    t = B.interleaved({"A": lambda: calls.append("A"), "B": lambda: calls.append("B")}, repeats=3, warmup=1,
                      warm_fns={"a": lambda: calls.append("a"), "b": lambda: calls.append("b")})
    assert calls == ["a", "b", "A", "B", "A", "B", "A", "B"]
    assert [len(v) for v in t.values()] == [3, 3]


def test_judge_reports_how_far_a_target_is_missed():
    assert B.judge(1.0, "<=", 1.10) == (True, 0.0)
    ok, miss = B.judge(1.32, "<=", 1.10)
    assert not ok and miss == pytest.approx(0.2)
    ok, miss = B.judge(2.0, ">=", 4.0)
    assert not ok and miss == pytest.approx(1.0)
    assert B.judge(5.0, ">=", 4.0) == (True, 0.0)


def test_sdpa_twin_shares_weights_and_agrees(odd):
    hf = odd.hf_model
    twin = B.sdpa_twin(hf)
    assert twin.config._attn_implementation == "sdpa" and hf.config._attn_implementation == "eager"
    assert twin.transformer.h[0].attn.c_attn.weight.data_ptr() == hf.transformer.h[0].attn.c_attn.weight.data_ptr()
    ids = torch.randint(0, hf.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        a = hf(ids, use_cache=False).logits
        b = twin(ids, use_cache=False).logits
    assert torch.allclose(a, b, atol=1e-4, rtol=0)


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    for argv, msg in ((["--lengths", "12,x"], "--lengths"), (["--repeats", "0"], "--repeats"),
                      (["--shapes", "small,huge"], "huge is not a shape")):
        with pytest.raises(SystemExit) as e:          # refused while parsing (attnkit.cli.main turns it into 2)
            bench_cli(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert bench_cli(["--model", str(tmp_path / "missing"), "--quick", "--no-memory"]) == 1
    assert "not found" in capsys.readouterr().err


def test_transformer_lens_that_cannot_build_is_skipped_with_the_reason(odd, monkeypatch):
    import types

    fake = types.ModuleType("transformer_lens")
    bridge_mod = types.ModuleType("transformer_lens.model_bridge")

    class Broken:
        @staticmethod
        def boot_transformers(*a, **k):
            raise TypeError("unexpected keyword argument 'hf_model'")

    bridge_mod.TransformerBridge = Broken
    fake.model_bridge = bridge_mod
    monkeypatch.setitem(sys.modules, "transformer_lens", fake)
    monkeypatch.setitem(sys.modules, "transformer_lens.model_bridge", bridge_mod)
    model, info = B.transformer_lens_bridge(odd)
    assert model is None and info["status"] == "skipped"
    assert "hf_model" in info["reason"]


def test_transformer_lens_bridge_is_the_same_model(odd):
    """TransformerLens 4's bridge around the same HF model: an independent check of attnkit's numbers."""
    pytest.importorskip("transformer_lens.model_bridge")
    model, info = B.transformer_lens_bridge(odd)
    assert info["status"] == "measured", info
    assert info["logits_max_abs_vs_attnkit"] <= 1e-4
    ids = torch.tensor([odd.encode("The animal didn't cross the street because it was too tired.")])
    from attnkit.model import run

    ours = run(odd.weights, ids, capture=["pattern", "resid_post"])
    with torch.inference_mode():
        _, cache = model.run_with_cache(ids)
    for l in range(odd.config.n_layers):
        torch.testing.assert_close(cache[f"blocks.{l}.attn.hook_pattern"], ours["pattern", l], atol=1e-5, rtol=0)
        torch.testing.assert_close(cache[f"blocks.{l}.hook_resid_post"], ours["resid_post", l], atol=1e-4, rtol=1e-5)
