"""``python -m attnkit bench --family smollm2-135m``: the GPT-2 bench's ratios on a Llama-style shape.

SmolLM2-135M's full shape (30 layers, d_model 576, 9 query heads, 3 key/value heads, d_head 64, SwiGLU
1536, vocabulary 49152, tied) with random weights, saved with ``save_pretrained`` and read back through
:func:`attnkit.loading.load`. The same interleaved timing as :mod:`attnkit.dev.bench`:

    1  run(capture=["pattern"])    vs  HF eager, output_attentions=True        target ≤ 1.10
    2  run() capturing nothing     vs  HF SDPA                                 target ≤ 1.25
    3  greedy generation with the KV cache vs recomputing the prefix           target ≥ 4× (at the GPT-2 bench's
       128 + 128 tokens; the default here is shorter to keep CPU time modest, so the speed-up is smaller)
    4  the KV cache's bytes under grouped-query attention against a cache with one key/value head per
       query head (n_heads / n_kv_heads = 3× for SmolLM2), measured on the filled cache
"""
from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from ...loading import load
from ...model import generate
from .common import byte_tokenizer, machine_info, random_ids, sdpa_twin
from .sections import forward_section, generation_section

__all__ = ["SHAPES", "make_family_checkpoint", "bench_family", "format_family"]

#: Full shapes of real checkpoints (their config.json values); only the weights are random.
SHAPES = {
    "smollm2-135m": ("llama", dict(
        num_hidden_layers=30, hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
        head_dim=64, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=8192,
        vocab_size=49152, hidden_act="silu", bos_token_id=0, eos_token_id=0)),
}


def make_family_checkpoint(folder: Path, shape: str = "smollm2-135m", seed: int = 0) -> Path:
    hf_logging.disable_progress_bar()
    model_type, kw = SHAPES[shape]
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kw)).save_pretrained(
        folder, safe_serialization=True)
    byte_tokenizer(folder)
    return folder


def kv_cache_bytes(weights, n_prompt: int, n_new: int) -> dict:
    """Bytes of attnkit's filled KV cache after greedy-decoding ``n_new`` tokens, and of the same cache
    with one key/value head per query head."""
    cfg = weights.config
    ids = random_ids(cfg.d_vocab, n_prompt, weights.device, seed=3)
    g = generate(weights, ids, n_new, use_cache=True)
    got = g.cache.nbytes()
    per_token = 2 * cfg.n_layers * cfg.kv_heads * cfg.d_head * weights.dtype.itemsize
    assert got == per_token * g.cache.length
    return {"positions": g.cache.length, "n_heads": cfg.n_heads, "n_kv_heads": cfg.kv_heads,
            "cache_bytes": got, "full_head_bytes": got * cfg.n_heads // cfg.kv_heads,
            "bytes_per_token": per_token, "full_head_bytes_per_token": per_token * cfg.n_heads // cfg.kv_heads,
            "ratio_gqa_to_full": cfg.kv_heads / cfg.n_heads,
            "cache_heads_stored": int(g.cache.keys[0].shape[1])}


def bench_family(shape: str = "smollm2-135m", *, T: int = 256, repeats: int = 3, gen_prompt: int = 64,
                 gen_new: int = 32, threads: int | None = None, log=lambda s: None) -> dict:
    """Checks 1–4 on ``shape`` at one length ``T`` on the CPU; JSON-ready."""
    hf_logging.set_verbosity_error()
    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    started = time.time()
    res = {"machine": machine_info([torch.device("cpu")]), "shape": shape,
           "settings": {"T": T, "repeats": repeats, "warmup_rounds": 1, "interleaved": True, "statistic": "median",
                        "generation": {"prompt_tokens": gen_prompt, "new_tokens": gen_new}},
           "results": []}
    try:
        with tempfile.TemporaryDirectory(prefix="attnkit-bench-family-") as tmp:
            log(f"[bench] building a random-weight {shape} …")
            folder = make_family_checkpoint(Path(tmp) / shape, shape)
            loaded = load(str(folder), "cpu")
            c = loaded.config
            res["model"] = {"name": f"random-weight {shape} (full shape)", "n_layers": c.n_layers,
                            "n_heads": c.n_heads, "n_kv_heads": c.kv_heads, "d_model": c.d_model,
                            "d_head": c.d_head, "d_mlp": c.d_mlp, "d_vocab": c.d_vocab}
            hf_sdpa = sdpa_twin(loaded.hf_model)
            log(f"[bench] forward T={T} …")
            rows, checks = forward_section(loaded, hf_sdpa, T, repeats, 1)
            res["results"] += rows
            res["correctness"] = checks
            log(f"[bench] generation {gen_prompt}+{gen_new} …")
            rows, info = generation_section(loaded, hf_sdpa, gen_prompt, gen_new, repeats, 1)
            res["results"] += rows
            res["generation"] = info
            res["kv_cache"] = kv_cache_bytes(loaded.weights, gen_prompt, gen_new)
            del loaded, hf_sdpa
            gc.collect()
    finally:
        torch.set_num_threads(threads_before)
    judged = [r for r in res["results"] if r["pass"] is not None]
    res["summary"] = {"passed": sum(r["pass"] for r in judged), "judged": len(judged),
                      "wall_seconds": time.time() - started}
    return res


def format_family(res: dict) -> str:
    m, kv = res["model"], res["kv_cache"]
    out = [f"attnkit bench · {m['name']}: {m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} query / "
           f"{m['n_kv_heads']} key-value heads, d_head {m['d_head']} · T {res['settings']['T']} · medians of "
           f"{res['settings']['repeats']} interleaved runs", ""]
    for r in res["results"]:
        tgt = "" if r["target"] is None else f"{'≤' if r['op'] == '<=' else '≥'} {r['target']:g}"
        verdict = "" if r["pass"] is None else ("PASS" if r["pass"] else f"MISS by {100 * r['miss_by']:.0f}%")
        out.append(f"{r['label'][:62]:<62} {r['ratio']:>6.2f} {tgt:>7}  {verdict}")
    g = res["generation"]
    out.append(f"generation {g['prompt_tokens']}+{g['new_tokens']}: same tokens with/without cache "
               f"{g['same_tokens_cache_vs_nocache']}, attnkit = HF {g['same_tokens_attnkit_vs_hf']}")
    out.append(f"KV cache: {kv['cache_heads_stored']} key/value heads stored, {kv['bytes_per_token']:,} bytes/token vs "
               f"{kv['full_head_bytes_per_token']:,} for a full-head cache ({kv['ratio_gqa_to_full']:.2f}×); "
               f"{kv['positions']} positions: {kv['cache_bytes'] / 2**20:.2f} MB vs {kv['full_head_bytes'] / 2**20:.2f} MB")
    c = res["correctness"]
    out.append(f"correctness at T={c['T']}: logits max|Δ| vs HF eager {c['logits_max_abs_vs_hf_eager']:.2e}, "
               f"patterns {c['pattern_max_abs_vs_hf_eager']:.2e}")
    out.append(f"targets met: {res['summary']['passed']}/{res['summary']['judged']} · wall time "
               f"{res['summary']['wall_seconds']:.0f} s")
    return "\n".join(out)

