"""Check 4 of ``python -m attnkit bench``: how far memory rises while a forward pass captures
activations (everything, float16, a few layers), each variant probed in a fresh process."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time

import torch

from ...loading import load
from ...metrics import entropy
from ...model import run
from .common import ROOT, interleaved, maxrss_bytes, random_ids, reset_peak_rss, side, sync, vm_hwm_bytes


def capture_variants(L: int) -> dict[str, dict]:
    chosen = sorted({0, L // 2, L - 1})
    return {
        "all": dict(capture="all"),
        "all_fp16": dict(capture="all", capture_dtype=torch.float16),
        "pattern": dict(capture=["pattern"]),
        "pattern_fp16": dict(capture=["pattern"], capture_dtype=torch.float16),
        f"pattern_layers_{'_'.join(map(str, chosen))}": dict(capture=["pattern"], layers=chosen),
    }


def memory_probe(source: str, device: str, T: int, variant: str, threads: int | None = None) -> dict:
    """In a fresh process: how far memory rises during one forward with the given capture variant.

    CPU (Linux): the peak RSS is reset to the current RSS after loading and a warm-up forward
    (/proc/self/clear_refs), and the peak during the call is read back (VmHWM); elsewhere the growth
    of ru_maxrss, which the loading's own peak can hide. CUDA: torch.cuda.max_memory_allocated above
    the allocation before the call. Compare each variant with 'none' (a plain forward)."""
    if threads:
        torch.set_num_threads(threads)
    loaded = load(source, device)
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)
    with torch.inference_mode():
        run(w, ids)
        gc.collect()
        sync(dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
            method = "torch.cuda.max_memory_allocated"
        else:
            base = reset_peak_rss()
            method = "peak RSS (VmHWM) after reset, fresh process"
            if base is None:
                base, method = maxrss_bytes(), "ru_maxrss growth, fresh process (may be hidden by loading)"
        t0 = time.perf_counter()
        if variant == "none":
            run(w, ids)
            kept = []
        elif variant == "hf_eager_attentions_hidden":
            res = loaded.hf_model(ids, output_attentions=True, output_hidden_states=True, use_cache=False)
            kept = list(res.attentions) + list(res.hidden_states)
        else:
            tr = run(w, ids, **capture_variants(w.config.n_layers)[variant])
            kept = list(tr.captures.values())
        sync(dev)
        seconds = time.perf_counter() - t0
        if dev.type == "cuda":
            peak = torch.cuda.max_memory_allocated(dev)
        else:
            peak = maxrss_bytes() if method.startswith("ru_maxrss") else vm_hwm_bytes()
    return {
        "variant": variant,
        "captured_bytes": sum(t.numel() * t.element_size() for t in kept),
        "peak_delta_bytes": max(0, peak - base),
        "peak_method": method,
        "seconds_single_call": seconds,
    }


def probe_in_subprocess(source: str, device: str, T: int, variant: str, threads: int | None) -> dict:
    code = ("import json, sys; from attnkit.dev.bench.memory import memory_probe; "
            "print('@@' + json.dumps(memory_probe(*json.loads(sys.argv[1]))))")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps([source, device, T, variant, threads])],
                          capture_output=True, text=True, env=env, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"variant": variant, "error": f"probe failed (exit {proc.returncode}): {tail[:300]}"}


def memory_section(loaded, source: str, T: int, repeats: int, warmup: int, threads: int | None,
                   quick: bool = False) -> dict:
    """Check 4: memory of capturing everything at T, the cheaper captures, and what they cost.

    Each peak is probed in a fresh process (``quick``: only 'all' and 'pattern_fp16', to stay fast)."""
    w, dev = loaded.weights, loaded.device
    L = w.config.n_layers
    variants = capture_variants(L)
    probed = ["none", "all"] if quick else ["none", *variants, "hf_eager_attentions_hidden"]
    probes = {v: probe_in_subprocess(source, str(dev), T, v, threads) for v in probed}
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)
    fns = {name: (lambda kw=kw: run(w, ids, **kw)) for name, kw in variants.items()}
    with torch.inference_mode():
        captured = {name: sum(t.numel() * t.element_size() for t in f().captures.values()) for name, f in fns.items()}
        t = interleaved(fns, repeats, warmup, dev)
        full = run(w, ids, capture=["pattern"])
        half = run(w, ids, capture=["pattern"], capture_dtype=torch.float16)
        err = max(float((half["pattern", l].float() - full["pattern", l]).abs().max()) for l in range(L))
        rel_entropy = None
        try:
            h32 = torch.stack([entropy(full["pattern", l]) for l in range(L)])
            h16 = torch.stack([entropy(half["pattern", l]) for l in range(L)]).to(h32.dtype)
            rel_entropy = float((h16 - h32).abs().max())
        except Exception:
            pass
        del full, half
    timing = {k: side(k, v) for k, v in t.items()}
    base = timing["pattern"]["median_s"]
    rows = []
    captured["none"] = 0
    for name in ["none", *variants, "hf_eager_attentions_hidden"]:
        p = probes.get(name, {})
        rows.append({"variant": name, "captured_bytes": captured.get(name, p.get("captured_bytes")),
                     "peak_delta_bytes": p.get("peak_delta_bytes"), "peak_method": p.get("peak_method"),
                     **({"error": p["error"]} if "error" in p else {})})
    return {
        "T": T,
        "device": str(dev),
        "probes": rows,
        "timing": timing,
        "time_vs_pattern_fp32": {k: v["median_s"] / base for k, v in timing.items()},
        "fp16_pattern_max_abs_error": err,
        "fp16_entropy_max_abs_error_nats": rel_entropy,
    }

