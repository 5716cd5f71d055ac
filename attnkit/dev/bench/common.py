"""What every bench section shares: interleaved timing, ratio rows judged against targets, the
machine's description, random inputs, a byte-level tokenizer, HF's SDPA twin and peak-memory readings."""
from __future__ import annotations

import copy
import gc
import math
import os
import platform
import resource
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile
from transformers import GPT2TokenizerFast
from ...checkpoint import HF_BUILD_LOCK

#: Check id -> (label, comparison, target). Ratios are attnkit/reference (≤) or speed-ups (≥).
TARGETS = {
    "pattern_vs_hf_eager": ("run(capture=['pattern']) / HF eager output_attentions=True", "<=", 1.10),
    "nocapture_vs_hf_sdpa": ("run() capturing nothing / HF SDPA forward", "<=", 1.25),
    "kv_cache_speedup": ("generation without cache / with KV cache (speed-up)", ">=", 4.0),
    "entropy_vs_pattern": ("entropy computation / run(capture=['pattern'])", "<=", 1.5),
    "patching_vs_forwards": ("patch every head's z (16-token pair) / L·H full forwards", "<=", 0.6),
    "streaming_vs_entropy_profile": ("streaming.stream_stats / entropy.entropy_profile", "<=", 1.0),
    "hull_vs_no_hull": ("V = X ablation with its hull check / without it", "<=", 5.0),
    "attribution_vs_fwd_bwd": ("attribution patching, every head and position / one forward + backward", "<=", 3.0),
    "eviction_vs_full": ("eviction lab, one (k, w) cell's loss / the full cache's", "<=", 1.5),
    "atlas_scan_vs_pattern": ("atlas scan (statistics both ways, examples, pairs, Q/K, z sums) / run(capture=['pattern'])",
                              "<=", 3.0),
    "atlas_scan_rise_vs_trace": ("atlas scan's peak memory rise / the pattern trace's (one layer's T×T kept, not L)",
                                 "<=", 1.0),
}
#: The repository root (what a probe in a fresh process puts on PYTHONPATH).
ROOT = Path(__file__).resolve().parents[3]


def byte_tokenizer(folder: Path):
    """A byte-level BPE with no merges (256 byte tokens + <|endoftext|>): loading wants a tokenizer,
    the benchmark itself feeds random token ids."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["attnkit"], vocab_size=257, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                      unk_token="<|endoftext|>").save_pretrained(folder)


def sdpa_twin(hf_model):
    """A second HF model object using the SDPA attention (HF's default) that shares every weight
    tensor with ``hf_model`` (built on the meta device, then handed the same tensors)."""
    cfg = copy.deepcopy(hf_model.config)
    with HF_BUILD_LOCK, torch.device("meta"):
        twin = type(hf_model)._from_config(cfg, attn_implementation="sdpa")     # any family's model class
    twin.load_state_dict(hf_model.state_dict(), assign=True)
    src = dict(hf_model.named_buffers())       # non-persistent buffers (rotary inv_freq) are not in the state dict
    for name, buf in list(twin.named_buffers()):
        if buf.is_meta and name in src:
            owner, _, attr = name.rpartition(".")
            twin.get_submodule(owner).register_buffer(attr, src[name], persistent=False)
    return twin.eval()



def sync(device: torch.device):
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
            sync(device)
    times: dict[str, list[float]] = {k: [] for k in fns}
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()            # as timeit does: tensors are freed by reference counting anyway
    try:
        for _ in range(repeats):
            for name, f in fns.items():
                sync(device)
                t0 = time.perf_counter()
                f()
                sync(device)
                times[name].append(time.perf_counter() - t0)
    finally:
        if was_enabled:
            gc.enable()
    return times


def side(name: str, times: list[float]) -> dict:
    return {"name": name, "median_s": statistics.median(times), "min_s": min(times), "times_s": times}


def judge(ratio: float, op: str, target: float) -> tuple[bool, float]:
    """(passed, miss): miss = how far past the target, as a fraction (0 when passed)."""
    if op == "<=":
        return ratio <= target, max(0.0, ratio / target - 1)
    return ratio >= target, max(0.0, target / ratio - 1) if ratio > 0 else math.inf


def ratio_row(check: str, device, T, a: dict, b: dict, *, ratio: float | None = None, label=None, target=True) -> dict:
    """One comparison: ratio = a/b medians unless given. Checks in TARGETS are judged."""
    r = a["median_s"] / b["median_s"] if ratio is None else ratio
    row = {"check": check, "label": label or TARGETS.get(check, (check,))[0], "device": str(device), "T": T,
           "a": a, "b": b, "ratio": r, "target": None, "op": None, "pass": None, "miss_by": None}
    if target and check in TARGETS:
        _, op, value = TARGETS[check]
        ok, miss = judge(r, op, value)
        row.update(target=value, op=op, **{"pass": ok, "miss_by": miss})
    return row


def profile(fn: Callable, device: torch.device, top: int = 8) -> list[dict]:
    """Top operators by self time of one call of ``fn`` (torch.profiler)."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=acts) as prof:
        fn()
        sync(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    ev = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0), reverse=True)[:top]
    return [{"op": e.key, "self_ms": getattr(e, key, 0) / 1000, "calls": e.count} for e in ev]


def explain(row: dict, fa: Callable, fb: Callable, device) -> None:
    """For a missed target: profile both sides once and name the operators that differ most."""
    try:
        pa, pb = profile(fa, device), profile(fb, device)
    except Exception as e:  # profiling is a diagnosis, never a reason to fail the benchmark
        row["why"] = f"profiling failed: {e.__class__.__name__}: {e}"
        return
    b_ms = {p["op"]: p["self_ms"] for p in pb}
    extra = sorted(((p["self_ms"] - b_ms.get(p["op"], 0.0), p["op"]) for p in pa), reverse=True)[:3]
    row["profile"] = {"a": pa, "b": pb}
    row["why"] = "largest self-time excess of A over B: " + ", ".join(f"{op} +{d:.1f} ms" for d, op in extra if d > 0)



def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(devices) -> dict:
    info = {
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
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
        import transformer_lens  # noqa: F401  (optional: recorded only when importable)

        info["transformer_lens"] = version("transformer-lens")
    except Exception:
        info["transformer_lens"] = None
    return info


# ----------------------------------------------------------------------------- the sections
def random_ids(vocab: int, T: int, device, seed: int) -> torch.Tensor:
    """[1, T] token ids, uniform over the vocabulary, the same for the same seed."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, T), generator=g).to(device)


def maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def reset_peak_rss() -> int | None:
    """Linux: reset this process's peak RSS to the current RSS (``echo 5 > /proc/self/clear_refs``)
    and return it, so that the loading's own peak does not hide the forward pass's; None elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return vm_hwm_bytes()
    except (OSError, ValueError):
        return None


def vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise ValueError("no VmHWM in /proc/self/status")

