"""The timed sections of ``python -m attnkit bench`` (checks 1–3 and 5–7; memory is in :mod:`.memory`)."""
from __future__ import annotations

import copy
from importlib.metadata import version

import torch

from ... import entropy as ent_mod
from ... import metrics
from ... import patching
from ... import verify
from ...model import generate, run
from ...streaming import stream_stats
from .common import explain, interleaved, random_ids, ratio_row, side

#: Tokens of the activation-patching pair (check 7).
PATCH_T = 16


def forward_section(loaded, hf_sdpa, T: int, repeats: int, warmup: int, tl_model=None) -> tuple[list, dict]:
    """Checks 1, 2 (and 5, plus capture='all' for context) at one length, all interleaved."""
    w, hf, dev = loaded.weights, loaded.hf_model, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)
    fns = {
        "attnkit pattern": lambda: run(w, ids, capture=["pattern"]),
        "HF eager attentions": lambda: hf(ids, output_attentions=True, use_cache=False),
        "attnkit none": lambda: run(w, ids),
        "HF sdpa": lambda: hf_sdpa(ids, use_cache=False),
        "attnkit all": lambda: run(w, ids, capture="all"),
        "HF eager attentions+hidden": lambda: hf(ids, output_attentions=True, output_hidden_states=True,
                                                  use_cache=False),
    }
    if tl_model is not None:
        fns["TransformerLens run_with_cache"] = lambda: tl_model.run_with_cache(ids)
    # the numbers are only worth timing if both sides compute the same thing
    with torch.inference_mode():
        ref = hf(ids, output_attentions=True, use_cache=False)
        tr = run(w, ids, capture=["pattern"])
        checks = {
            "T": T,
            "logits_max_abs_vs_hf_eager": float((tr.logits - ref.logits).abs().max()),
            "pattern_max_abs_vs_hf_eager": max(float((tr["pattern", l] - a).abs().max())
                                               for l, a in enumerate(ref.attentions)),
            "logits_max_abs_hf_sdpa_vs_eager": float((hf_sdpa(ids, use_cache=False).logits - ref.logits).abs().max()),
        }
        if tl_model is not None:
            checks["logits_max_abs_transformer_lens"] = float((tl_model(ids) - tr.logits).abs().max())
        del ref, tr
    checks.update(float64_verdict(loaded, ids))
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    rows = [
        ratio_row("pattern_vs_hf_eager", dev, T, s["attnkit pattern"], s["HF eager attentions"]),
        ratio_row("nocapture_vs_hf_sdpa", dev, T, s["attnkit none"], s["HF sdpa"]),
        ratio_row("all_vs_hf_eager_hidden", dev, T, s["attnkit all"], s["HF eager attentions+hidden"],
                  label="run(capture='all') / HF eager attentions+hidden states"),
    ]
    if tl_model is not None:
        rows.append(ratio_row("all_vs_transformer_lens", dev, T, s["attnkit all"], s["TransformerLens run_with_cache"],
                              label="run(capture='all') / TransformerLens run_with_cache"))
    with torch.inference_mode():
        for row, (fa, fb) in zip(rows[:2], [(fns["attnkit pattern"], fns["HF eager attentions"]),
                                            (fns["attnkit none"], fns["HF sdpa"])]):
            if row["pass"] is False:
                explain(row, fa, fb, dev)
    return rows, checks


def float64_verdict(loaded, ids) -> dict:
    """The bench's equality line under verify's rule: attnkit's float32 error against HF in float64 within
    FACTOR × HF's own float32 error + FLOOR, and attnkit float64 = HF float64 (:mod:`attnkit.verify`)."""
    rep = verify.compare(loaded.hf_model, loaded.weights, ids.cpu(), pair=_f64_pair(loaded))
    worst = max(rep.all_checks(), key=lambda lc: lc[1].ours / lc[1].allowed)[1]
    return {"float64_rule_ok": rep.ok, "float64_verdict": rep.verdict_text(),
            "float64_reference": rep.reference,
            "worst_check": {"quantity": worst.quantity, "attnkit_f32_error": worst.ours, "hf_f32_error": worst.hf,
                            "allowed": worst.allowed, "f64_vs_f64": worst.f64},
            "max_f64_vs_f64": max(c.f64 for _, c in rep.all_checks())}


def _f64_pair(loaded):
    """The float64 copies of HF and attnkit, made once per loaded model (every length reuses them)."""
    pair = getattr(loaded, "_bench_f64_pair", None)
    if pair is None:
        pair = verify.float64_pair(loaded.hf_model, loaded.weights)
        try:
            loaded._bench_f64_pair = pair
        except AttributeError:          # a frozen or slotted object: recompute next time
            pass
    return pair


def generation_section(loaded, hf_sdpa, n_prompt: int, n_new: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 3: greedy generation with / without the KV cache, and HF generate."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, n_prompt, dev, seed=7)
    out = {}

    def ak(cache):
        def f():
            out[cache] = generate(w, ids, n_new, use_cache=cache).tokens
        return f

    def hf():
        # no min_new_tokens: it sets end-of-text's logit to −∞, so HF would not pick the argmax attnkit picks.
        # HF may then stop early at end-of-text; the tokens are compared up to where it stopped.
        g = hf_sdpa.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                             do_sample=False, use_cache=True, pad_token_id=0)
        out["hf"] = g[0, n_prompt:].tolist()

    fns = {"attnkit KV cache": ak(True), "attnkit no cache": ak(False), "HF generate": hf}
    # warm up with a short generation: the code paths and allocator are then warm, at a fraction of the cost
    short = max(1, min(4, n_new))
    warm = {
        "a": lambda: generate(w, ids, short, use_cache=True),
        "b": lambda: generate(w, ids, short, use_cache=False),
        "c": lambda: hf_sdpa.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=short,
                                      do_sample=False, use_cache=True, pad_token_id=0),
    }
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev, warm_fns=warm)
    s = {k: side(k, v) for k, v in t.items()}
    speedup = s["attnkit no cache"]["median_s"] / s["attnkit KV cache"]["median_s"]
    rows = [
        ratio_row("kv_cache_speedup", dev, n_prompt, s["attnkit no cache"], s["attnkit KV cache"], ratio=speedup),
        ratio_row("kv_cache_vs_hf_generate", dev, n_prompt, s["attnkit KV cache"], s["HF generate"],
                  label="attnkit generate (KV cache) / HF generate (greedy, cache)"),
    ]
    info = {
        "prompt_tokens": n_prompt,
        "new_tokens": n_new,
        "same_tokens_cache_vs_nocache": out.get(True) == out.get(False),
        "same_tokens_attnkit_vs_hf": same_greedy(out.get(True), out.get("hf")),
        "hf_new_tokens": len(out.get("hf") or []),
        "ms_per_token": {k: 1000 * v["median_s"] / n_new for k, v in s.items()},
    }
    return rows, info


def same_greedy(ours: list | None, hf: list | None) -> bool:
    """Like with like: HF's greedy tokens equal ours up to where HF stopped (at end-of-text, which ours
    must then have chosen too)."""
    if ours is None or hf is None or not hf:
        return False
    return ours[: len(hf)] == hf


def entropy_section(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 6: the whole entropy computation vs the forward pass that captures patterns."""
    w, dev = loaded.weights, loaded.device
    L = w.config.n_layers
    ids = random_ids(w.config.d_vocab, T, dev, seed=T + 1)
    fns = {"attnkit pattern": lambda: run(w, ids, capture=["pattern"])}
    source = None
    try:
        if callable(getattr(ent_mod, "entropy_profile", None)):
            with torch.inference_mode():
                ent_mod.entropy_profile(w, ids)       # does it run on this signature?
            fns["entropy_profile"] = lambda: ent_mod.entropy_profile(w, ids)
            source = "attnkit.entropy.entropy_profile(weights, ids)"
    except Exception as e:  # another engineer's module: absent or changed; fall back below
        source = f"attnkit.entropy.entropy_profile unusable ({e.__class__.__name__}); "

    def per_layer():
        tr = run(w, ids, capture=["pattern"])
        return torch.stack([metrics.entropy(tr["pattern", l]) for l in range(L)])

    def stacked():
        return metrics.entropy(run(w, ids, capture=["pattern"]).stack("pattern"))

    fns["metrics.entropy per layer"] = per_layer
    fns["metrics.entropy over stack"] = stacked
    fns["streaming"] = lambda: stream_stats(w, ids)         # issue 18: block-wise, no T×T
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    main = "entropy_profile" if "entropy_profile" in s else "metrics.entropy per layer"
    if source is None or not source.startswith("attnkit.entropy.entropy_profile("):
        source = (source or "") + "metrics.entropy per layer over run(capture=['pattern'])"
    rows = [ratio_row("entropy_vs_pattern", dev, T, s[main], s["attnkit pattern"])]
    if "entropy_profile" in s:
        rows.append(ratio_row("streaming_vs_entropy_profile", dev, T, s["streaming"], s["entropy_profile"]))
    for other in ("metrics.entropy per layer", "metrics.entropy over stack"):
        if other != main:
            rows.append(ratio_row(f"entropy_{other.split()[-1]}_vs_pattern", dev, T, s[other], s["attnkit pattern"],
                                  label=f"{other} / run(capture=['pattern'])"))
    return rows, {"timed": source}


def patch_pair(c, T: int = PATCH_T) -> patching.Pair:
    """The bench's clean/corrupted pair: random tokens, the corrupted prompt differing at two positions."""
    clean = random_ids(c.d_vocab, T, "cpu", seed=7)[0].tolist()
    corrupt = list(clean)
    for p in (1, T // 2):
        corrupt[p] = (corrupt[p] + 1) % c.d_vocab
    return patching.Pair(clean, corrupt, answer=clean[-1], distractor=(clean[-1] + 1) % c.d_vocab, pos=T - 1)


def patching_section(loaded, repeats: int, warmup: int, T: int = PATCH_T) -> tuple[list, dict]:
    """Check 7: all L·H heads patched (z, all positions, denoising) vs L·H full forwards of one prompt."""
    w, dev = loaded.weights, loaded.device
    c = w.config
    T = min(T, c.n_ctx)
    pair = patch_pair(c, T)
    n = c.n_layers * c.n_heads
    ids = torch.tensor([pair.clean], device=dev)
    batched = ids.expand(n, -1)

    def forwards():
        for _ in range(n):
            run(w, ids)

    fns = {"patch z, all heads": lambda: patching.patch(w, pair, "z"),
           f"{n} full forwards": forwards,
           f"one forward of {n} rows": lambda: run(w, batched)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    rows = [ratio_row("patching_vs_forwards", dev, T, s["patch z, all heads"], s[f"{n} full forwards"],
                      label=f"patch all {n} heads' z / {n} full forwards"),
            ratio_row("patching_vs_batched_forward", dev, T, s["patch z, all heads"], s[f"one forward of {n} rows"],
                      label=f"patch all {n} heads' z / one forward of {n} rows (context)")]
    res = patching.patch(w, pair, "z")
    return rows, {"T": T, "heads": n, "patched_rows": res.n_runs, "batches": c.n_layers,
                  "timed": "attnkit.patching.patch(weights, pair, 'z'): two cached runs + one batch per layer, "
                           "each resumed at that layer from the cached residual stream"}


def transformer_lens_bridge(loaded) -> tuple[object | None, dict]:
    """TransformerLens 4's ``TransformerBridge`` around the very same HF model (raw HF weights, no
    folding, no centring), or why not. Its ``run_with_cache`` is the peer timed against attnkit."""
    try:        # optional, and imported here so that a test can hide it
        import transformer_lens  # noqa: F401
        from transformer_lens.model_bridge import TransformerBridge
    except Exception as e:
        return None, {"status": "skipped", "reason": f"transformer_lens is not importable ({e.__class__.__name__})"}
    try:
        # the bridge rewires the HF model it wraps: give it its own copy, not the one HF is timed on
        bridge = TransformerBridge.boot_transformers(
            loaded.source, hf_model=copy.deepcopy(loaded.hf_model), tokenizer=loaded.tokenizer,
            device=str(loaded.device))
        bridge.eval()
        c = loaded.weights.config
        probe = random_ids(c.d_vocab, min(8, c.n_ctx), loaded.device, seed=0)
        with torch.inference_mode():
            logits, _ = bridge.run_with_cache(probe)            # fails here rather than mid-benchmark
            diff = float((logits - run(loaded.weights, probe).logits).abs().max())
        return bridge, {"status": "measured", "version": version("transformer-lens"),
                        "api": "TransformerBridge.boot_transformers(…, hf_model=…)",
                        "logits_max_abs_vs_attnkit": diff}
    except Exception as e:
        return None, {"status": "skipped",
                      "reason": f"could not build a TransformerBridge: {e.__class__.__name__}: {str(e)[:200]}"}


