"""Long-context figures for ``python -m attnkit bench --long 8192[,32768]`` (issue 18).

At each T on SmolLM2-135M's shape with random weights: entropy for every (layer, head, position) by
:func:`attnkit.streaming.stream_stats`, against a forward pass that captures nothing — time (interleaved,
medians) and peak memory above the loaded weights (each in a fresh process, VmHWM after a reset,
as the bench's memory section measures). Targets: peak rise ≤ 1.5 GB, time ≤ 2× the plain forward.

The model is the Llama family's SmolLM2 shape (``LlamaConfig(hidden_size=576, intermediate_size=1536,
num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, tied,
rope_theta=100000)``) when attnkit has a family for ``llama``; otherwise a GPT-2 with the same sizes
(30 layers, 9 heads, d_model 576, MLP 1536, vocabulary 49,152, n_positions = T) — no GQA, no rotary — and
the result says so.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.utils import logging as hf_logging

from ...families import FAMILIES
from ...loading import load
from ...model import run
from ...streaming import stream_stats
from .common import ROOT, byte_tokenizer, interleaved, judge, random_ids, ratio_row, reset_peak_rss, side, vm_hwm_bytes

__all__ = ["make_long_checkpoint", "long_probe", "long_section", "LONG_TARGETS"]

GB = 1e9
#: check -> (label, op, target)
LONG_TARGETS = {
    "streaming_peak_rise_gb": ("streaming entropy: peak memory above the weights (GB)", "<=", 1.5),
    "streaming_vs_forward": ("streaming entropy, every (layer, head, position) / run() capturing nothing", "<=", 2.0),
}
SMOL = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0)


def _has_llama() -> bool:
    return "llama" in FAMILIES


def make_long_checkpoint(folder: Path, n_ctx: int, quick: bool = False, seed: int = 0,
                         layers: int | None = None) -> tuple[Path, str]:
    """SmolLM2-135M's shape with random weights saved into ``folder``: (folder, description).
    ``layers`` keeps only that many of its 30 layers (every layer costs the same: time ratios per layer
    are the model's; the per-position results grow by 6·4·H·T bytes per layer)."""
    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=512) if quick else {}
    if layers:
        small["num_hidden_layers"] = int(layers)
    if _has_llama():
        cfg = LlamaConfig(**{**SMOL, **small}, max_position_embeddings=n_ctx)
        LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
        desc = "random-weight SmolLM2-135M shape (Llama: rotary, GQA 9/3 heads)"
        if layers:
            desc += f", first {layers} of 30 layers"
    else:
        s = {**SMOL, **small}
        cfg = GPT2Config(n_layer=s["num_hidden_layers"], n_head=s["num_attention_heads"], n_embd=s["hidden_size"],
                         n_inner=s["intermediate_size"], vocab_size=s["vocab_size"], n_positions=n_ctx)
        GPT2LMHeadModel(cfg).save_pretrained(folder, safe_serialization=True)
        desc = (f"random-weight GPT-2 with SmolLM2-135M's sizes ({s['num_hidden_layers']} layers, 9 heads, "
                "d_model 576, MLP 1536, vocabulary 49,152) — no Llama family on this branch yet, so no GQA "
                "or rotary")
        if quick:
            desc = "random-weight GPT-2 tiny (2 layers, d_model 64)"
    byte_tokenizer(folder)
    return folder, desc


def _variants(w, ids):
    class _Stop(Exception):
        pass

    def no_logits():
        def stop(x, _):
            raise _Stop

        try:
            run(w, ids, hooks=[("ln_final", stop)])
        except _Stop:
            pass

    return {
        "forward": lambda: run(w, ids),                      # capturing nothing, logits [T, vocab] included
        "forward_no_logits": no_logits,                      # the same, stopped before the unembedding
        "streaming": lambda: stream_stats(w, ids),           # entropy, first-token, prev, self, distance
    }


def long_probe(source: str, T: int, variant: str, threads: int | None = None) -> dict:
    """In a fresh process: RSS of the loaded weights, then the peak rise during one call of ``variant``
    (peak reset after a short warm-up with the same code path)."""
    if threads:
        torch.set_num_threads(threads)
    loaded = load(source, "cpu")
    w = loaded.weights
    del loaded                                           # the HF model shares the tensors; keep only ours
    gc.collect()
    weights_bytes = sum(t.numel() * t.element_size() for t in
                        {id(t): t for t in _tensors(w)}.values())
    with torch.inference_mode():
        _variants(w, random_ids(w.config.d_vocab, min(T, 256), "cpu", seed=1))[variant]()    # warm-up, small T
        ids = random_ids(w.config.d_vocab, T, "cpu", seed=T)
        fn = _variants(w, ids)[variant]
        gc.collect()
        base = reset_peak_rss()
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        peak = vm_hwm_bytes()
    return {"variant": variant, "T": T, "weights_bytes": weights_bytes, "rss_before_bytes": base,
            "peak_rise_bytes": None if base is None else max(0, peak - base), "seconds_single_call": seconds,
            "method": "VmHWM after clear_refs reset, fresh process"}


def _tensors(w):
    yield from (t for t in (w.wte, w.wpe, w.lnf_w, w.lnf_b, w.W_U, w.b_U) if isinstance(t, torch.Tensor))
    for lw in w.layers:
        yield from (t for t in vars(lw).values() if isinstance(t, torch.Tensor))


def _probe_subprocess(source: str, T: int, variant: str, threads: int | None) -> dict:
    code = ("import json, sys; from attnkit.dev.bench.long_context import long_probe; "
            "print('@@' + json.dumps(long_probe(*json.loads(sys.argv[1]))))")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps([source, T, variant, threads])],
                          capture_output=True, text=True, env=env, timeout=7200)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"variant": variant, "T": T, "error": f"probe failed (exit {proc.returncode}): {tail[:300]}"}


def long_section(lengths=(8192,), repeats: int = 2, threads: int | None = None, quick: bool = False,
                 memory: bool = True, log=lambda s: None, layers: int | None = None, variants=None,
                 timing: bool = True) -> dict:
    """Time (interleaved, in this process) and peak memory (fresh processes) at each T; rows as in bench."""
    out = {"rows": [], "probes": [], "model": None}
    n_ctx = max(lengths)
    with tempfile.TemporaryDirectory(prefix="attnkit-long-") as tmp:
        source, desc = make_long_checkpoint(Path(tmp) / "smollm2-shape", n_ctx, quick=quick, layers=layers)
        source = str(source)
        out["model"] = desc
        for T in lengths:
            if memory:
                for v in variants or ("forward", "forward_no_logits", "streaming"):
                    log(f"[bench] long T={T}: memory of {v} (fresh process) …")
                    out["probes"].append(_probe_subprocess(source, T, v, threads))
            probe = next((p for p in out["probes"] if p.get("T") == T and p["variant"] == "streaming"
                          and "error" not in p), None)
            if probe is not None and probe.get("peak_rise_bytes") is not None:
                gb = probe["peak_rise_bytes"] / GB
                mrow = {"check": "streaming_peak_rise_gb", "label": LONG_TARGETS["streaming_peak_rise_gb"][0],
                        "device": "cpu", "T": T, "a": {"name": "streaming peak rise (GB)", "median_s": gb},
                        "b": {"name": "1 GB", "median_s": 1.0}, "ratio": gb, "target": None, "op": None,
                        "pass": None, "miss_by": None}
                _judge_long(mrow, "streaming_peak_rise_gb")
                out["rows"].append(mrow)
            if not timing:
                continue
            log(f"[bench] long T={T}: timing forward vs streaming ({repeats} interleaved runs) …")
            loaded = load(source, "cpu")
            w = loaded.weights
            with torch.inference_mode():
                fns = _variants(w, random_ids(w.config.d_vocab, T, "cpu", seed=T))
                t = interleaved(fns, repeats, warmup=0, warm_fns=None)
            del loaded, w, fns
            gc.collect()
            s = {k: side(k, v) for k, v in t.items()}
            row = ratio_row("streaming_vs_forward", "cpu", T, s["streaming"], s["forward"], target=False)
            _judge_long(row, "streaming_vs_forward")
            out["rows"].append(row)
            out["rows"].append(ratio_row("streaming_vs_forward_no_logits", "cpu", T, s["streaming"],
                                         s["forward_no_logits"], target=False,
                                         label="streaming entropy / forward stopped before the unembedding"))
    return out


def _judge_long(row: dict, check: str):
    _, op, value = LONG_TARGETS[check]
    ok, miss = judge(row["ratio"], op, value)
    row.update(target=value, op=op, **{"pass": ok, "miss_by": miss})


def format_long(res: dict) -> str:
    lines = [f"long contexts: {res['model']}"]
    for p in res["probes"]:
        if "error" in p:
            lines.append(f"  T={p['T']:>6} {p['variant']:<18} {p['error']}")
            continue
        lines.append(f"  T={p['T']:>6} {p['variant']:<18} peak rise {p['peak_rise_bytes'] / GB:6.2f} GB above "
                     f"{p['rss_before_bytes'] / GB:.2f} GB resident (weights {p['weights_bytes'] / GB:.2f} GB); "
                     f"one call {p['seconds_single_call']:.1f} s")
    return "\n".join(lines)
