"""``python -m attnkit bench``: attnkit against HuggingFace, side by side, as ratios with targets.

Every comparison times two (or more) calls *interleaved in the same loop* (A, B, A, B, …) after a
warm-up, and reports the median of each, so that drift in the machine's load hits both sides alike.

    1  run(capture=["pattern"])        vs  HF eager forward, output_attentions=True   target ≤ 1.10
    2  run() capturing nothing         vs  HF's default SDPA forward                   target ≤ 1.25
    3  greedy generation, KV cache     vs  recomputing the whole prefix each step      target ≥ 4× faster
       (and vs HF ``generate``, greedy, use_cache=True: no target)
    4  peak memory of a capture-everything forward at the longest T, and the cheaper captures
       (float16 patterns, a few layers): bytes, time and float16 error
    5  TransformerLens ``run_with_cache`` on the same weights, when it is importable (never required)
    6  the full entropy computation (attnkit.entropy.entropy_profile) vs run(capture=["pattern"])
                                                                                    target ≤ 1.5
       and attnkit.streaming.stream_stats vs entropy_profile (block-wise, no T×T)  target ≤ 1.0
    7  activation patching of every head's z (attnkit.patching.patch, batched runs resumed at the
       patched layer, the two cached runs included) on a 16-token pair vs L·H full forwards
       (144 for GPT-2 small)                                                        target ≤ 0.6
    8  ``--long 8192,32768``: streaming entropy at long T on SmolLM2-135M's shape (attnkit.bench_streaming):
       peak memory above the weights (target ≤ 1.5 GB) and time vs a plain forward (target ≤ 2×)

The default model is GPT-2 small's shape (``GPT2Config()``) with random weights, saved with
``save_pretrained`` into a temporary folder and read back through :func:`attnkit.loading.load`,
the path users take. Timing does not depend on the weights' values.

``--quick`` shrinks everything (2 layers, d_model 64, T ∈ {16, 32}, 2 repeats) for tests.
``--family smollm2-135m`` runs checks 1–3 and the KV cache's bytes under grouped-query attention on
SmolLM2-135M's shape instead (:mod:`attnkit.bench_families`).
"""
from __future__ import annotations

import copy
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

__all__ = ["cli", "bench", "TARGETS", "interleaved", "format_table", "make_checkpoint"]

#: Check id -> (label, comparison, target). Ratios are attnkit/reference (≤) or speed-ups (≥).
TARGETS = {
    "pattern_vs_hf_eager": ("run(capture=['pattern']) / HF eager output_attentions=True", "<=", 1.10),
    "nocapture_vs_hf_sdpa": ("run() capturing nothing / HF SDPA forward", "<=", 1.25),
    "kv_cache_speedup": ("generation without cache / with KV cache (speed-up)", ">=", 4.0),
    "entropy_vs_pattern": ("entropy computation / run(capture=['pattern'])", "<=", 1.5),
    "patching_vs_forwards": ("patch every head's z (16-token pair) / L·H full forwards", "<=", 0.6),
    "streaming_vs_entropy_profile": ("streaming.stream_stats / entropy.entropy_profile", "<=", 1.0),
}
PATCH_T = 16
FULL = dict(lengths=(128, 512, 1024), repeats=5, warmup=1, gen_prompt=128, gen_new=128)
QUICK = dict(lengths=(16, 32), repeats=2, warmup=1, gen_prompt=8, gen_new=4)
QUICK_CONFIG = dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512)
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- checkpoint

def make_checkpoint(folder: Path, quick: bool = False, seed: int = 0) -> Path:
    """A random-weight GPT-2 (``GPT2Config()``, or a tiny one) saved as users' checkpoints are."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    cfg = GPT2Config(**(QUICK_CONFIG if quick else {}))
    GPT2LMHeadModel(cfg).save_pretrained(folder, safe_serialization=True)
    _byte_tokenizer(folder)
    return folder


def _byte_tokenizer(folder: Path):
    """A byte-level BPE with no merges (256 byte tokens + <|endoftext|>): loading wants a tokenizer,
    the benchmark itself feeds random token ids."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["attnkit"], vocab_size=257, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                      unk_token="<|endoftext|>").save_pretrained(folder)


def _sdpa_twin(hf_model):
    """A second HF model object using the SDPA attention (HF's default) that shares every weight
    tensor with ``hf_model`` (built on the meta device, then handed the same tensors)."""
    cfg = copy.deepcopy(hf_model.config)
    with torch.device("meta"):
        twin = type(hf_model)._from_config(cfg, attn_implementation="sdpa")     # any family's model class
    twin.load_state_dict(hf_model.state_dict(), assign=True)
    src = dict(hf_model.named_buffers())       # non-persistent buffers (rotary inv_freq) are not in the state dict
    for name, buf in list(twin.named_buffers()):
        if buf.is_meta and name in src:
            owner, _, attr = name.rpartition(".")
            twin.get_submodule(owner).register_buffer(attr, src[name], persistent=False)
    return twin.eval()


# ----------------------------------------------------------------------------- timing

def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(fns: dict[str, Callable], repeats: int, warmup: int = 1,
                device: torch.device = torch.device("cpu"), warm_fns: dict | None = None) -> dict[str, list[float]]:
    """Seconds per call of each function, called in turn A, B, C, A, B, C, … ``repeats`` times
    after ``warmup`` untimed rounds (``warm_fns`` may give cheaper stand-ins for the warm-up)."""
    warm = warm_fns or fns
    for _ in range(warmup):
        for f in warm.values():
            f()
            _sync(device)
    times: dict[str, list[float]] = {k: [] for k in fns}
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()            # as timeit does: tensors are freed by reference counting anyway
    try:
        for _ in range(repeats):
            for name, f in fns.items():
                _sync(device)
                t0 = time.perf_counter()
                f()
                _sync(device)
                times[name].append(time.perf_counter() - t0)
    finally:
        if was_enabled:
            gc.enable()
    return times


def _side(name: str, times: list[float]) -> dict:
    return {"name": name, "median_s": statistics.median(times), "min_s": min(times), "times_s": times}


def _judge(ratio: float, op: str, target: float) -> tuple[bool, float]:
    """(passed, miss): miss = how far past the target, as a fraction (0 when passed)."""
    if op == "<=":
        return ratio <= target, max(0.0, ratio / target - 1)
    return ratio >= target, max(0.0, target / ratio - 1) if ratio > 0 else math.inf


def _row(check: str, device, T, a: dict, b: dict, *, ratio: float | None = None, label=None, target=True) -> dict:
    """One comparison: ratio = a/b medians unless given. Checks in TARGETS are judged."""
    r = a["median_s"] / b["median_s"] if ratio is None else ratio
    row = {"check": check, "label": label or TARGETS.get(check, (check,))[0], "device": str(device), "T": T,
           "a": a, "b": b, "ratio": r, "target": None, "op": None, "pass": None, "miss_by": None}
    if target and check in TARGETS:
        _, op, value = TARGETS[check]
        ok, miss = _judge(r, op, value)
        row.update(target=value, op=op, **{"pass": ok, "miss_by": miss})
    return row


def _profile(fn: Callable, device: torch.device, top: int = 8) -> list[dict]:
    """Top operators by self time of one call of ``fn`` (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        fn()
        _sync(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    ev = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0), reverse=True)[:top]
    return [{"op": e.key, "self_ms": getattr(e, key, 0) / 1000, "calls": e.count} for e in ev]


def _explain(row: dict, fa: Callable, fb: Callable, device) -> None:
    """For a missed target: profile both sides once and name the operators that differ most."""
    try:
        pa, pb = _profile(fa, device), _profile(fb, device)
    except Exception as e:  # profiling is a diagnosis, never a reason to fail the benchmark
        row["why"] = f"profiling failed: {e.__class__.__name__}: {e}"
        return
    b_ms = {p["op"]: p["self_ms"] for p in pb}
    extra = sorted(((p["self_ms"] - b_ms.get(p["op"], 0.0), p["op"]) for p in pa), reverse=True)[:3]
    row["profile"] = {"a": pa, "b": pb}
    row["why"] = "largest self-time excess of A over B: " + ", ".join(f"{op} +{d:.1f} ms" for d, op in extra if d > 0)


# ----------------------------------------------------------------------------- machine

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(devices) -> dict:
    import transformers

    info = {
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "devices": [str(d) for d in devices],
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        import transformer_lens  # noqa: F401
        from importlib.metadata import version

        info["transformer_lens"] = version("transformer-lens")
    except Exception:
        info["transformer_lens"] = None
    return info


# ----------------------------------------------------------------------------- the sections

def _ids(vocab: int, T: int, device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, T), generator=g).to(device)


def forward_section(loaded, hf_sdpa, T: int, repeats: int, warmup: int, tl_model=None) -> tuple[list, dict]:
    """Checks 1, 2 (and 5, plus capture='all' for context) at one length, all interleaved."""
    from .model import run

    w, hf, dev = loaded.weights, loaded.hf_model, loaded.device
    ids = _ids(w.config.d_vocab, T, dev, seed=T)
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
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: _side(k, v) for k, v in t.items()}
    rows = [
        _row("pattern_vs_hf_eager", dev, T, s["attnkit pattern"], s["HF eager attentions"]),
        _row("nocapture_vs_hf_sdpa", dev, T, s["attnkit none"], s["HF sdpa"]),
        _row("all_vs_hf_eager_hidden", dev, T, s["attnkit all"], s["HF eager attentions+hidden"],
             label="run(capture='all') / HF eager attentions+hidden states"),
    ]
    if tl_model is not None:
        rows.append(_row("all_vs_transformer_lens", dev, T, s["attnkit all"], s["TransformerLens run_with_cache"],
                         label="run(capture='all') / TransformerLens run_with_cache"))
    with torch.inference_mode():
        for row, (fa, fb) in zip(rows[:2], [(fns["attnkit pattern"], fns["HF eager attentions"]),
                                            (fns["attnkit none"], fns["HF sdpa"])]):
            if row["pass"] is False:
                _explain(row, fa, fb, dev)
    return rows, checks


def generation_section(loaded, hf_sdpa, n_prompt: int, n_new: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 3: greedy generation with / without the KV cache, and HF generate."""
    from .model import generate

    w, dev = loaded.weights, loaded.device
    ids = _ids(w.config.d_vocab, n_prompt, dev, seed=7)
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
    s = {k: _side(k, v) for k, v in t.items()}
    speedup = s["attnkit no cache"]["median_s"] / s["attnkit KV cache"]["median_s"]
    rows = [
        _row("kv_cache_speedup", dev, n_prompt, s["attnkit no cache"], s["attnkit KV cache"], ratio=speedup),
        _row("kv_cache_vs_hf_generate", dev, n_prompt, s["attnkit KV cache"], s["HF generate"],
             label="attnkit generate (KV cache) / HF generate (greedy, cache)"),
    ]
    info = {
        "prompt_tokens": n_prompt,
        "new_tokens": n_new,
        "same_tokens_cache_vs_nocache": out.get(True) == out.get(False),
        "same_tokens_attnkit_vs_hf": _same_greedy(out.get(True), out.get("hf")),
        "hf_new_tokens": len(out.get("hf") or []),
        "ms_per_token": {k: 1000 * v["median_s"] / n_new for k, v in s.items()},
    }
    return rows, info


def _same_greedy(ours: list | None, hf: list | None) -> bool:
    """Like with like: HF's greedy tokens equal ours up to where HF stopped (at end-of-text, which ours
    must then have chosen too)."""
    if ours is None or hf is None or not hf:
        return False
    return ours[: len(hf)] == hf


def _capture_variants(L: int) -> dict[str, dict]:
    chosen = sorted({0, L // 2, L - 1})
    return {
        "all": dict(capture="all"),
        "all_fp16": dict(capture="all", capture_dtype=torch.float16),
        "pattern": dict(capture=["pattern"]),
        "pattern_fp16": dict(capture=["pattern"], capture_dtype=torch.float16),
        f"pattern_layers_{'_'.join(map(str, chosen))}": dict(capture=["pattern"], layers=chosen),
    }


def _maxrss_bytes() -> int:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def _reset_peak_rss() -> int | None:
    """Linux: reset this process's peak RSS to the current RSS (``echo 5 > /proc/self/clear_refs``)
    and return it, so that the loading's own peak does not hide the forward pass's; None elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _vm_hwm_bytes()
    except (OSError, ValueError):
        return None


def _vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise ValueError("no VmHWM in /proc/self/status")


def memory_probe(source: str, device: str, T: int, variant: str, threads: int | None = None) -> dict:
    """In a fresh process: how far memory rises during one forward with the given capture variant.

    CPU (Linux): the peak RSS is reset to the current RSS after loading and a warm-up forward
    (/proc/self/clear_refs), and the peak during the call is read back (VmHWM); elsewhere the growth
    of ru_maxrss, which the loading's own peak can hide. CUDA: torch.cuda.max_memory_allocated above
    the allocation before the call. Compare each variant with 'none' (a plain forward)."""
    from .loading import load
    from .model import run

    if threads:
        torch.set_num_threads(threads)
    loaded = load(source, device)
    w, dev = loaded.weights, loaded.device
    ids = _ids(w.config.d_vocab, T, dev, seed=T)
    with torch.inference_mode():
        run(w, ids)
        gc.collect()
        _sync(dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
            method = "torch.cuda.max_memory_allocated"
        else:
            base = _reset_peak_rss()
            method = "peak RSS (VmHWM) after reset, fresh process"
            if base is None:
                base, method = _maxrss_bytes(), "ru_maxrss growth, fresh process (may be hidden by loading)"
        t0 = time.perf_counter()
        if variant == "none":
            run(w, ids)
            kept = []
        elif variant == "hf_eager_attentions_hidden":
            res = loaded.hf_model(ids, output_attentions=True, output_hidden_states=True, use_cache=False)
            kept = list(res.attentions) + list(res.hidden_states)
        else:
            tr = run(w, ids, **_capture_variants(w.config.n_layers)[variant])
            kept = list(tr.captures.values())
        _sync(dev)
        seconds = time.perf_counter() - t0
        if dev.type == "cuda":
            peak = torch.cuda.max_memory_allocated(dev)
        else:
            peak = _maxrss_bytes() if method.startswith("ru_maxrss") else _vm_hwm_bytes()
    return {
        "variant": variant,
        "captured_bytes": sum(t.numel() * t.element_size() for t in kept),
        "peak_delta_bytes": max(0, peak - base),
        "peak_method": method,
        "seconds_single_call": seconds,
    }


def _probe_in_subprocess(source: str, device: str, T: int, variant: str, threads: int | None) -> dict:
    code = ("import json, sys; from attnkit.bench import memory_probe; "
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
    from .model import run

    w, dev = loaded.weights, loaded.device
    L = w.config.n_layers
    variants = _capture_variants(L)
    probed = ["none", "all"] if quick else ["none", *variants, "hf_eager_attentions_hidden"]
    probes = {v: _probe_in_subprocess(source, str(dev), T, v, threads) for v in probed}
    ids = _ids(w.config.d_vocab, T, dev, seed=T)
    fns = {name: (lambda kw=kw: run(w, ids, **kw)) for name, kw in variants.items()}
    with torch.inference_mode():
        captured = {name: sum(t.numel() * t.element_size() for t in f().captures.values()) for name, f in fns.items()}
        t = interleaved(fns, repeats, warmup, dev)
        full = run(w, ids, capture=["pattern"])
        half = run(w, ids, capture=["pattern"], capture_dtype=torch.float16)
        err = max(float((half["pattern", l].float() - full["pattern", l]).abs().max()) for l in range(L))
        rel_entropy = None
        try:
            from .metrics import entropy

            h32 = torch.stack([entropy(full["pattern", l]) for l in range(L)])
            h16 = torch.stack([entropy(half["pattern", l]) for l in range(L)]).to(h32.dtype)
            rel_entropy = float((h16 - h32).abs().max())
        except Exception:
            pass
        del full, half
    timing = {k: _side(k, v) for k, v in t.items()}
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


def entropy_section(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """Check 6: the whole entropy computation vs the forward pass that captures patterns."""
    from . import metrics
    from .model import run

    w, dev = loaded.weights, loaded.device
    L = w.config.n_layers
    ids = _ids(w.config.d_vocab, T, dev, seed=T + 1)
    fns = {"attnkit pattern": lambda: run(w, ids, capture=["pattern"])}
    source = None
    try:
        from . import entropy as ent_mod

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
    from .streaming import stream_stats

    fns["streaming"] = lambda: stream_stats(w, ids)         # issue 18: block-wise, no T×T
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: _side(k, v) for k, v in t.items()}
    main = "entropy_profile" if "entropy_profile" in s else "metrics.entropy per layer"
    if source is None or not source.startswith("attnkit.entropy.entropy_profile("):
        source = (source or "") + "metrics.entropy per layer over run(capture=['pattern'])"
    rows = [_row("entropy_vs_pattern", dev, T, s[main], s["attnkit pattern"])]
    if "entropy_profile" in s:
        rows.append(_row("streaming_vs_entropy_profile", dev, T, s["streaming"], s["entropy_profile"]))
    for other in ("metrics.entropy per layer", "metrics.entropy over stack"):
        if other != main:
            rows.append(_row(f"entropy_{other.split()[-1]}_vs_pattern", dev, T, s[other], s["attnkit pattern"],
                             label=f"{other} / run(capture=['pattern'])"))
    return rows, {"timed": source}


def patching_section(loaded, repeats: int, warmup: int, T: int = PATCH_T) -> tuple[list, dict]:
    """Check 7: all L·H heads patched (z, all positions, denoising) vs L·H full forwards of one prompt."""
    from . import patching as P
    from .model import run

    w, dev = loaded.weights, loaded.device
    c = w.config
    T = min(T, c.n_ctx)
    clean = _ids(c.d_vocab, T, dev, seed=7)[0].tolist()
    corrupt = list(clean)
    for p in (1, T // 2):                       # the corrupted prompt differs at two positions
        corrupt[p] = (corrupt[p] + 1) % c.d_vocab
    pair = P.Pair(clean, corrupt, answer=clean[-1], distractor=(clean[-1] + 1) % c.d_vocab, pos=T - 1)
    n = c.n_layers * c.n_heads
    ids = torch.tensor([clean], device=dev)
    batched = ids.expand(n, -1)

    def forwards():
        for _ in range(n):
            run(w, ids)

    fns = {"patch z, all heads": lambda: P.patch(w, pair, "z"),
           f"{n} full forwards": forwards,
           f"one forward of {n} rows": lambda: run(w, batched)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: _side(k, v) for k, v in t.items()}
    rows = [_row("patching_vs_forwards", dev, T, s["patch z, all heads"], s[f"{n} full forwards"],
                 label=f"patch all {n} heads' z / {n} full forwards"),
            _row("patching_vs_batched_forward", dev, T, s["patch z, all heads"], s[f"one forward of {n} rows"],
                 label=f"patch all {n} heads' z / one forward of {n} rows (context)")]
    res = P.patch(w, pair, "z")
    return rows, {"T": T, "heads": n, "patched_rows": res.n_runs, "batches": c.n_layers,
                  "timed": "attnkit.patching.patch(weights, pair, 'z'): two cached runs + one batch per layer, "
                           "each resumed at that layer from the cached residual stream"}


def _transformer_lens(loaded) -> tuple[object | None, dict]:
    """TransformerLens 4's ``TransformerBridge`` around the very same HF model (raw HF weights, no
    folding, no centring), or why not. Its ``run_with_cache`` is the peer timed against attnkit."""
    try:
        import transformer_lens
        from transformer_lens.model_bridge import TransformerBridge
    except Exception as e:
        return None, {"status": "skipped", "reason": f"transformer_lens is not importable ({e.__class__.__name__})"}
    try:
        from importlib.metadata import version

        import copy

        # the bridge rewires the HF model it wraps: give it its own copy, not the one HF is timed on
        bridge = TransformerBridge.boot_transformers(
            loaded.source, hf_model=copy.deepcopy(loaded.hf_model), tokenizer=loaded.tokenizer,
            device=str(loaded.device))
        bridge.eval()
        c = loaded.weights.config
        probe = _ids(c.d_vocab, min(8, c.n_ctx), loaded.device, seed=0)
        with torch.inference_mode():
            logits, _ = bridge.run_with_cache(probe)            # fails here rather than mid-benchmark
            from .model import run

            diff = float((logits - run(loaded.weights, probe).logits).abs().max())
        return bridge, {"status": "measured", "version": version("transformer-lens"),
                        "api": "TransformerBridge.boot_transformers(…, hf_model=…)",
                        "logits_max_abs_vs_attnkit": diff}
    except Exception as e:
        return None, {"status": "skipped",
                      "reason": f"could not build a TransformerBridge: {e.__class__.__name__}: {str(e)[:200]}"}


# ----------------------------------------------------------------------------- driver

def bench(model: str | None = None, *, lengths=None, repeats=None, quick: bool = False, devices=None,
          threads: int | None = None, gen_new: int | None = None, gen_prompt: int | None = None,
          memory: bool = True, log=print) -> dict:
    """Run every section and return the JSON-ready result."""
    from transformers.utils import logging as hf_logging

    from .loading import load, resolve_device

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    preset = QUICK if quick else FULL
    lengths = tuple(lengths or preset["lengths"])
    repeats = int(repeats or preset["repeats"])
    warmup = preset["warmup"]
    gen_new = int(gen_new or preset["gen_new"])
    gen_prompt = int(gen_prompt or preset["gen_prompt"])
    if devices is None:
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    devices = [resolve_device(d) for d in devices]
    started = time.time()

    tmp = None
    if model is None:
        tmp = tempfile.TemporaryDirectory(prefix="attnkit-bench-")
        source = str(make_checkpoint(Path(tmp.name) / ("gpt2-tiny" if quick else "gpt2-small-shape"), quick=quick))
        model_desc = "random-weight GPT-2 " + ("tiny (2 layers, d_model 64)" if quick else "small shape (GPT2Config())")
    else:
        source, model_desc = model, model
    result = {
        "machine": machine_info(devices),
        "model": {"name": model_desc, "source": None if tmp else source},
        "settings": {"lengths": list(lengths), "repeats": repeats, "warmup_rounds": warmup, "batch": 1,
                     "quick": quick, "generation": {"prompt_tokens": gen_prompt, "new_tokens": gen_new},
                     "interleaved": True, "statistic": "median", "hf_forward_use_cache": False},
        "targets": {k: {"label": v[0], "op": v[1], "value": v[2]} for k, v in TARGETS.items()},
        "results": [],
        "correctness": [],
        "generation": {},
        "memory": {},
        "entropy": {},
        "patching": {},
        "transformer_lens": {},
    }
    try:
        for dev in devices:
            log(f"[bench] loading {model_desc} on {dev} …")
            loaded = load(source, dev)
            c = loaded.config
            result["model"].update(n_layers=c.n_layers, n_heads=c.n_heads, d_model=c.d_model, n_ctx=c.n_ctx,
                                   d_vocab=c.d_vocab)
            hf_sdpa = _sdpa_twin(loaded.hf_model)
            tl_model, tl_info = _transformer_lens(loaded)
            result["transformer_lens"][str(dev)] = tl_info
            usable = [T for T in lengths if T <= c.n_ctx]
            if len(usable) < len(lengths):
                log(f"[bench] skipping lengths beyond the context of {c.n_ctx}: {[T for T in lengths if T > c.n_ctx]}")
            for T in usable:
                log(f"[bench] {dev} forward T={T} …")
                rows, checks = forward_section(loaded, hf_sdpa, T, repeats, warmup, tl_model)
                checks["device"] = str(dev)
                result["results"] += rows
                result["correctness"].append(checks)
            n_prompt = min(gen_prompt, max(1, c.n_ctx - gen_new))
            log(f"[bench] {dev} generation {n_prompt}+{gen_new} …")
            rows, info = generation_section(loaded, hf_sdpa, n_prompt, gen_new, repeats, warmup)
            result["results"] += rows
            result["generation"][str(dev)] = info
            T = max(usable)
            log(f"[bench] {dev} entropy T={T} …")
            rows, info = entropy_section(loaded, T, repeats, warmup)
            result["results"] += rows
            result["entropy"][str(dev)] = info
            log(f"[bench] {dev} patching, T={min(PATCH_T, c.n_ctx)} …")
            rows, info = patching_section(loaded, repeats, warmup)
            result["results"] += rows
            result["patching"][str(dev)] = info
            if memory:
                log(f"[bench] {dev} memory T={T} …")
                result["memory"][str(dev)] = memory_section(loaded, source, T, repeats, warmup,
                                                            threads or torch.get_num_threads(), quick=quick)
            del loaded, hf_sdpa, tl_model
            gc.collect()
    finally:
        torch.set_num_threads(threads_before)    # callers in the same process keep their setting
        if tmp is not None:
            tmp.cleanup()
    judged = [r for r in result["results"] if r["pass"] is not None]
    result["summary"] = {
        "passed": sum(r["pass"] for r in judged),
        "judged": len(judged),
        "missed": [{"check": r["check"], "device": r["device"], "T": r["T"], "ratio": r["ratio"],
                    "target": r["target"], "miss_by": r["miss_by"], "why": r.get("why")}
                   for r in judged if not r["pass"]],
        "wall_seconds": time.time() - started,
        "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    return result


# ----------------------------------------------------------------------------- output

def _mb(n) -> str:
    return "—" if n is None else f"{n / 2**20:,.1f} MB"


def format_table(res: dict) -> str:
    m = res["machine"]
    out = [f"attnkit bench · {res['model']['name']} · torch {m['torch']} · transformers {m['transformers']}",
           f"{m['cpu_model']} · {m['cpu_count']} CPUs · torch threads {m['torch_threads']} · "
           f"load average at start {', '.join(f'{x:.2f}' for x in (m['load_average'] or []))}",
           f"medians of {res['settings']['repeats']} interleaved runs after {res['settings']['warmup_rounds']} warm-up",
           ""]
    head = f"{'check':<62} {'dev':<5} {'T':>5} {'A median':>10} {'B median':>10} {'ratio':>7} {'target':>8}  result"
    out += [head, "-" * len(head)]
    for r in res["results"]:
        tgt = "" if r["target"] is None else f"{'≤' if r['op'] == '<=' else '≥'} {r['target']:g}"
        verdict = "" if r["pass"] is None else ("PASS" if r["pass"] else f"MISS by {100 * r['miss_by']:.0f}%")
        out.append(f"{r['label'][:62]:<62} {r['device'][:5]:<5} {r['T']:>5} {r['a']['median_s']:>9.4f}s "
                   f"{r['b']['median_s']:>9.4f}s {r['ratio']:>7.2f} {tgt:>8}  {verdict}")
        out.append(f"{'':<4}A = {r['a']['name']}, B = {r['b']['name']}")
        if r.get("why"):
            out.append(f"{'':<4}why: {r['why']}")
    for dev, g in res["generation"].items():
        out.append("")
        out.append(f"generation on {dev}: {g['prompt_tokens']} prompt + {g['new_tokens']} new tokens; ms/token "
                   + ", ".join(f"{k} {v:.1f}" for k, v in g["ms_per_token"].items())
                   + f"; same tokens with/without cache: {g['same_tokens_cache_vs_nocache']}, attnkit = HF: "
                   + f"{g['same_tokens_attnkit_vs_hf']}")
    for dev, mem in res["memory"].items():
        out.append("")
        out.append(f"memory at T={mem['T']} on {dev}: captured tensors, and how far memory rose during one "
                   f"forward (each in a fresh process; 'none' = plain forward)")
        out.append(f"  {'capture':<28} {'captured':>12} {'peak rise':>12} {'time / pattern fp32':>20}")
        for p in mem["probes"]:
            if "error" in p:
                out.append(f"  {p['variant']:<28} {p['error']}")
                continue
            if p["captured_bytes"] is None:
                continue
            rel = mem["time_vs_pattern_fp32"].get(p["variant"])
            out.append(f"  {p['variant']:<28} {_mb(p['captured_bytes']):>12} {_mb(p['peak_delta_bytes']):>12} "
                       f"{'—' if rel is None else f'{rel:.2f}×':>20}")
        out.append(f"  float16 patterns: max abs error {mem['fp16_pattern_max_abs_error']:.2e}"
                   + ("" if mem["fp16_entropy_max_abs_error_nats"] is None
                      else f", entropy error ≤ {mem['fp16_entropy_max_abs_error_nats']:.2e} nats"))
    for dev, e in res["entropy"].items():
        out.append(f"entropy timed on {dev}: {e['timed']}")
    for dev, t in res["transformer_lens"].items():
        out.append(f"TransformerLens on {dev}: {t['status']}" + (f" ({t['reason']})" if t.get("reason") else ""))
    s = res["summary"]
    out.append("")
    out.append(f"targets met: {s['passed']}/{s['judged']} · wall time {s['wall_seconds']:.0f} s"
               + (f" · load average at end {', '.join(f'{x:.2f}' for x in s['load_average_end'])}"
                  if s.get("load_average_end") else ""))
    out.append("ratio = A median / B median; rows without a target are context")
    return "\n".join(out)


def cli(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--family" or a.startswith("--family=") for a in argv):
        from .bench_families import cli as family_cli     # a Llama-style shape: see attnkit.bench_families

        return family_cli(argv)
    from .cli import args as T

    p = T.Parser(prog="python -m attnkit bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=T.utf8_text, help="model name or folder (default: random-weight GPT-2 small shape)")
    p.add_argument("--json", dest="json_out", metavar="OUT", type=T.writable_path, help="write every figure and raw timing here")
    p.add_argument("--lengths", help="comma-separated sequence lengths (default 128,512,1024)")
    p.add_argument("--repeats", type=int, help="timed runs per measurement (default 5)")
    p.add_argument("--quick", action="store_true", help="tiny model, T 16/32, 2 repeats: a few seconds")
    p.add_argument("--device", action="append", type=T.device, help="cpu / cuda (repeatable; default cpu, plus cuda if present)")
    p.add_argument("--threads", type=T.positive_int, help="torch.set_num_threads before measuring")
    p.add_argument("--gen-new", type=T.positive_int, help="generated tokens (default 128)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory section (it starts subprocesses)")
    p.add_argument("--long", metavar="T,…", help="also the long-context streaming figures at these lengths "
                   "(e.g. 8192,32768; SmolLM2-135M's shape, random weights; minutes per length)")
    p.add_argument("--long-layers", type=int, help="with --long: keep only this many of the 30 layers (faster; "
                   "time ratios are per layer)")
    a = p.parse_args(argv)
    try:
        lengths = [int(x) for x in a.lengths.split(",") if x.strip()] if a.lengths else None
        if lengths is not None and (not lengths or min(lengths) < 2):
            raise ValueError
    except ValueError:
        print("attnkit bench: --lengths takes comma-separated integers ≥ 2, e.g. 128,512,1024", file=sys.stderr)
        return 2
    if a.repeats is not None and a.repeats < 1:
        print("attnkit bench: --repeats must be ≥ 1", file=sys.stderr)
        return 2
    from .loading import LoadError

    try:
        res = bench(a.model, lengths=lengths, repeats=a.repeats, quick=a.quick,
                    devices=list(dict.fromkeys(a.device)) if a.device else None,
                    threads=a.threads, gen_new=a.gen_new, memory=not a.no_memory,
                    log=lambda s: print(s, file=sys.stderr, flush=True))
    except LoadError as e:
        print(f"attnkit bench: {e}", file=sys.stderr)
        return 1
    if a.long:
        from . import bench_streaming as BS

        long = BS.long_section([int(x) for x in a.long.split(",") if x.strip()], repeats=a.repeats or 2,
                               threads=a.threads, quick=a.quick, memory=not a.no_memory, layers=a.long_layers,
                               log=lambda s: print(s, file=sys.stderr, flush=True))
        res["long"] = long
        res["results"] += long["rows"]
        judged = [r for r in res["results"] if r["pass"] is not None]
        res["summary"].update(passed=sum(r["pass"] for r in judged), judged=len(judged),
                              missed=[{"check": r["check"], "device": r["device"], "T": r["T"], "ratio": r["ratio"],
                                       "target": r["target"], "miss_by": r["miss_by"], "why": r.get("why")}
                                      for r in judged if not r["pass"]])
    print(format_table(res))
    if a.long:
        print(BS.format_long(res["long"]))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
        print(f"\nwrote {a.json_out}")
    return 0
