"""Per-shape rows of ``python -m attnkit bench --shapes small,medium,xl,llama1b`` (issue 26): what the pages'
computations cost at real models' full shapes on this machine, each against HuggingFace in the same run.

At each shape (random weights), on the CPU:

    trace        run(capture=["pattern"]) ÷ HF eager forward with output_attentions=True, at ``T`` tokens
                 (interleaved medians; target ≤ 1.10, check 1's), and how far memory rises above the loaded
                 weights during each (Heatmaps, Compare heads, Step by step draw from such a trace)
    patching     every head's z patched on a 16-token pair (:func:`attnkit.patching.patch`, the Head effects
                 map) ÷ (heads × one forward of that pair); target ≤ 0.6 (check 7's); its peak rise
    attribution  attribution patching of every head and position (:func:`attnkit.circuits.timing.circuit_bench`,
                 the Circuits page's first map) ÷ one forward + one backward; target ≤ 3 (issue 28's)
    entropy      :func:`attnkit.entropy.entropy_profile` at ``T`` (the Entropy page) ÷ the trace with patterns;
                 target ≤ 1.5 (check 4's)
    why          :func:`attnkit.score_terms.score_terms` for the last layer's head 0 at the last query: one key's
                 split and a whole query row ÷ one forward (no capture) at ``T``; target ≤ 2 for the row
                 (issue 34's), and the row's peak rise ≤ the forward's
    circuits     the Circuits page's first run (AppTest, a fresh session, the model already loaded; b: the same
                 with the model's loading) in seconds; target ≤ 10 s (issue 33's): what takes longer waits for
                 a button labelled with its estimate (:mod:`attnkit.app.costs`)
    atlas        the head atlas's scan ÷ the trace with patterns (target ≤ 3), and its effect pass, estimated from
                 three timed parts (:mod:`.atlas`), ÷ one forward; seconds per token of each
    ablation     the V = X ablation with its convex-hull check (:func:`attnkit.ablations.measure`, the Ablations
                 page's default) at ``T`` ÷ the same without the hull check; target ≤ 5 (check 9's)

Peak memory: VmHWM reset to the current RSS (``/proc/self/clear_refs``) after a warm-up of the same call,
in the bench's own process, then read back after one call; the rise above the RSS before the call.
Checkpoints are built once with ``save_pretrained`` into a cache folder and reused
(``--cache``, else ``$ATTNKIT_BENCH_CACHE``, else ``<tmp>/attnkit-bench-cache``); GPT-2 xl is ~6.2 GB on disk.
"""
from __future__ import annotations

import ctypes
import gc
import os
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from ... import patching
from ...ablations.base import Spec
from ...ablations.measure import measure
from ...circuits.timing import circuit_bench
from ...entropy import entropy_profile
from ...loading import load
from ...model import run
from ...score_terms import score_terms
from .common import byte_tokenizer, interleaved, judge, random_ids, ratio_row, reset_peak_rss, side, vm_hwm_bytes
from .sections import PATCH_T, patch_pair
from .atlas import atlas_shape

__all__ = ["REAL_SHAPES", "SHAPE_TARGETS", "SHAPE_PARTS", "cache_folder", "shape_checkpoint", "peak_rise", "shape_rows",
           "shape_section", "format_shapes"]

#: name -> (model_type, config kwargs): the full shapes of real checkpoints (their config.json); random weights.
REAL_SHAPES = {
    "tiny": ("gpt2", dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512, bos_token_id=0,
                         eos_token_id=0)),    # for --quick / tests
    "small": ("gpt2", {}),                                                                   # GPT2Config() = gpt2
    "medium": ("gpt2", dict(n_layer=24, n_embd=1024, n_head=16)),
    "xl": ("gpt2", dict(n_layer=48, n_embd=1600, n_head=25)),
    "llama1b": ("llama", dict(                                                               # Llama-3.2-1B
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
        rope_theta=500000.0, tie_word_embeddings=True, vocab_size=128256, hidden_act="silu",
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}, bos_token_id=128000, eos_token_id=128001)),
}
#: check -> (label, op, target)
SHAPE_TARGETS = {
    "shape_trace_vs_hf_eager": ("trace with patterns / HF eager output_attentions", "<=", 1.10),
    "shape_patching_vs_forwards": ("patch every head's z / (heads × one forward)", "<=", 0.6),
    "shape_attribution_vs_fwd_bwd": ("attribution patching, all heads / (one forward + one backward)", "<=", 3.0),
    "shape_entropy_vs_trace": ("entropy_profile / trace with patterns", "<=", 1.5),
    "shape_hull_vs_no_hull": ("V = X with its hull check / without it", "<=", 5.0),
    "shape_why_key_vs_forward": ("score terms, one key's split / one forward", "<=", 2.0),
    "shape_why_row_vs_forward": ("score terms, a whole query row / one forward", "<=", 2.0),
    "shape_why_row_rise_vs_forward": ("score terms row's peak memory rise / the forward's", "<=", 1.0),
    "shape_circuits_open_s": ("Circuits page, first run in a fresh session (s; b: model loading included)", "<=", 10.0),
    "shape_atlas_scan_vs_trace": ("atlas scan (every statistic both ways, examples, pairs, Q/K) / trace with patterns",
                                  "<=", 3.0),
}


#: Written into the cache folder the bench fills: how ``--shape-cache`` recognises a folder as the bench's own.
CACHE_MARKER = ".attnkit-bench-cache"


def cache_folder(cache: str | os.PathLike | None = None) -> Path:
    """Where built checkpoints are kept: ``cache``, else $ATTNKIT_BENCH_CACHE, else <tmp>/attnkit-bench-cache."""
    return Path(cache or os.environ.get("ATTNKIT_BENCH_CACHE") or Path(tempfile.gettempdir()) / "attnkit-bench-cache")


def shape_checkpoint(shape: str, cache: str | os.PathLike | None = None, seed: int = 0, log=lambda s: None) -> Path:
    """The random-weight checkpoint of ``shape`` in the cache, built (and saved with save_pretrained) if absent.
    Built into a side folder and renamed when complete, so an interrupted build is never reused."""
    model_type, kw = REAL_SHAPES[shape]
    folder = cache_folder(cache) / f"{shape}-seed{seed}"
    if (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    log(f"[bench] building a random-weight {shape} checkpoint in {folder} (once) …")
    hf_logging.disable_progress_bar()
    folder.parent.mkdir(parents=True, exist_ok=True)
    (folder.parent / CACHE_MARKER).touch()
    part = Path(tempfile.mkdtemp(prefix=f".{shape}-", dir=folder.parent))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kw))
    model.save_pretrained(part, safe_serialization=True)
    del model
    gc.collect()
    byte_tokenizer(part)
    os.replace(part, folder)
    return folder


def _release_freed() -> None:
    """Give freed heap memory back to the system (glibc ``malloc_trim``), so that memory an earlier call freed
    but the allocator kept does not hide the next call's rise (without it every rise read 0 after a warm-up)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_rise(fn) -> int | None:
    """Bytes the process's peak RSS rose above its RSS during one call of ``fn`` (Linux; None elsewhere)."""
    gc.collect()
    _release_freed()
    base = reset_peak_rss()
    if base is None:
        return None
    out = fn()
    peak = vm_hwm_bytes()
    del out
    return max(0, peak - base)


def _judged(check: str, dev, T, a: dict, b: dict, ratio: float | None = None, label: str | None = None) -> dict:
    row = ratio_row(check, dev, T, a, b, ratio=ratio, label=label or SHAPE_TARGETS[check][0], target=False)
    _, op, value = SHAPE_TARGETS[check]
    ok, miss = judge(row["ratio"], op, value)
    row.update(target=value, op=op, **{"pass": ok, "miss_by": miss})
    return row


def _trace(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """trace with patterns vs HF eager output_attentions at T: interleaved medians, then each one's peak rise."""
    w, hf, dev = loaded.weights, loaded.hf_model, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)
    fns = {"attnkit trace, patterns": lambda: run(w, ids, capture=["pattern"]),
           "HF eager output_attentions": lambda: hf(ids, output_attentions=True, use_cache=False),
           "attnkit forward, no capture": lambda: run(w, ids)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
        rise = {k: peak_rise(f) for k, f in fns.items()}
    s = {k: side(k, v) for k, v in t.items()}
    row = _judged("shape_trace_vs_hf_eager", dev, T, s["attnkit trace, patterns"], s["HF eager output_attentions"])
    c = w.config
    return [row], {"trace_s": s["attnkit trace, patterns"]["median_s"],
                   "hf_eager_s": s["HF eager output_attentions"]["median_s"],
                   "forward_s": s["attnkit forward, no capture"]["median_s"],
                   "trace_peak_rise_bytes": rise["attnkit trace, patterns"],
                   "hf_eager_peak_rise_bytes": rise["HF eager output_attentions"],
                   "forward_peak_rise_bytes": rise["attnkit forward, no capture"],
                   "pattern_bytes": 4 * c.n_layers * c.n_heads * T * T}


def _patching(loaded, repeats: int, T: int = PATCH_T) -> tuple[list, dict]:
    """Every head's z patched vs heads × one forward of the pair (the forward timed, then multiplied)."""
    w, dev = loaded.weights, loaded.device
    c = w.config
    T = min(T, c.n_ctx)
    pair = patch_pair(c, T)
    n = c.n_layers * c.n_heads
    ids = torch.tensor([pair.clean], device=dev)
    fns = {"patch z, all heads": lambda: patching.patch(w, pair, "z"), "one forward": lambda: run(w, ids)}
    with torch.inference_mode():       # warm with the forward only: one patch of xl's 1,200 heads is minutes
        t = interleaved(fns, repeats, 1, dev, warm_fns={"one forward": fns["one forward"]})
        rise = peak_rise(fns["patch z, all heads"])
    s = {k: side(k, v) for k, v in t.items()}
    n_fwd = side(f"{n} × one forward", [x * n for x in t["one forward"]])
    row = _judged("shape_patching_vs_forwards", dev, T, s["patch z, all heads"], n_fwd,
                  label=f"patch all {n} heads' z / ({n} × one forward)")
    return [row], {"patch_T": T, "heads": n, "patch_s": s["patch z, all heads"]["median_s"],
                   "one_forward_s": s["one forward"]["median_s"], "patch_peak_rise_bytes": rise}


def _attribution(loaded, repeats: int, T: int = PATCH_T) -> tuple[list, dict]:
    """Attribution patching of every head and position vs one forward + one backward (best of ``repeats``)."""
    w, dev = loaded.weights, loaded.device
    cb = circuit_bench(w, T=min(T, w.config.n_ctx), repeat=repeats, discovery=False, exact=False)
    a = side("attribution patching, all heads", [cb["attribution_s"]])
    b = side("one forward + one backward", [cb["forward_backward_s"]])
    return [_judged("shape_attribution_vs_fwd_bwd", dev, cb["T"], a, b)], {
        "attribution_s": cb["attribution_s"], "forward_backward_s": cb["forward_backward_s"]}


def _entropy(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """The Entropy page's computation vs the trace with patterns, interleaved."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)
    fns = {"entropy_profile": lambda: entropy_profile(w, ids),
           "attnkit trace, patterns": lambda: run(w, ids, capture=["pattern"])}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
    s = {k: side(k, v) for k, v in t.items()}
    row = _judged("shape_entropy_vs_trace", dev, T, s["entropy_profile"], s["attnkit trace, patterns"])
    return [row], {"entropy_s": s["entropy_profile"]["median_s"]}


def _ablation(loaded, T: int, repeats: int) -> tuple[list, dict]:
    """V = X with its hull check vs without it (one warm-up of the cheap side only), on T random tokens."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=9)[0].tolist()
    fns = {"V = X with the hull check": lambda: measure(w, [ids], Spec("v=x")),
           "V = X without it": lambda: measure(w, [ids], Spec("v=x"), hull_iters=0)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, 1, dev, warm_fns={"V = X without it": fns["V = X without it"]})
    s = {k: side(k, v) for k, v in t.items()}
    row = _judged("shape_hull_vs_no_hull", dev, T, s["V = X with the hull check"], s["V = X without it"])
    return [row], {"vx_hull_s": s["V = X with the hull check"]["median_s"],
                   "vx_no_hull_s": s["V = X without it"]["median_s"]}


def _why(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """The last layer's head 0, query T − 1: one key's split (key T // 2) and the whole row vs one forward."""
    w, dev = loaded.weights, loaded.device
    ids = random_ids(w.config.d_vocab, T, dev, seed=T)[0].tolist()
    L = w.config.n_layers
    fns = {"score terms, one key": lambda: score_terms(w, ids, L - 1, 0, T - 1, T // 2),
           "score terms, query row": lambda: score_terms(w, ids, L - 1, 0, T - 1),
           "one forward": lambda: run(w, ids)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
        rise = {k: peak_rise(f) for k, f in fns.items()}
    s = {k: side(k, v) for k, v in t.items()}
    rows = [_judged("shape_why_key_vs_forward", dev, T, s["score terms, one key"], s["one forward"]),
            _judged("shape_why_row_vs_forward", dev, T, s["score terms, query row"], s["one forward"])]
    r_row, r_fwd = rise["score terms, query row"], rise["one forward"]
    if r_row is not None and r_fwd:
        rows.append(_judged("shape_why_row_rise_vs_forward", dev, T, side("row peak rise (bytes)", [r_row]),
                            side("forward peak rise (bytes)", [r_fwd]), ratio=r_row / r_fwd))
    return rows, {"why_key_s": s["score terms, one key"]["median_s"], "why_row_s": s["score terms, query row"]["median_s"],
                  "why_forward_s": s["one forward"]["median_s"], "why_key_peak_rise_bytes": rise["score terms, one key"],
                  "why_row_peak_rise_bytes": r_row, "why_forward_peak_rise_bytes": r_fwd}


#: The Circuits page's pair at the bench's shapes: their byte-level tokenizer makes no example's answer one token.
CIRCUITS_PAIR = {"ci_example": "Your own", "ci_clean": "ab ab ab a", "ci_corrupt": "ab cb ab a", "ci_answer": "b",
                 "ci_distractor": "c"}


def _circuits_page(loaded) -> tuple[list, dict]:
    """The Circuits page opened twice in fresh sessions on ``loaded``'s folder: the first run loads the model
    (the server's cache), the second is what a new visitor waits for. Also: the computations left waiting
    behind a button with their estimate, and whether the page showed the pair's logit differences."""
    from ...app import opening    # Streamlit only here: the corpus and bench commands import this module without it
    got = opening.open_page("circuits", loaded.name, state=CIRCUITS_PAIR)
    times = got["seconds"]
    waiting = [b for b in got["buttons"] if b.endswith(")") and "about" in b]
    shown = any("tokens; the prompts differ at position" in x for x in got["texts"])
    row = _judged("shape_circuits_open_s", loaded.device, len(loaded.encode(CIRCUITS_PAIR["ci_clean"])), side("fresh session", [times[1]]),
                  side("first open, model loading included", [times[0]]), ratio=times[1])
    return [row], {"circuits_open_s": times[1], "circuits_first_open_s": times[0], "circuits_waiting": waiting,
                   "circuits_pair_shown": shown, "circuits_errors": got["errors"]}


def _atlas(loaded, T: int, repeats: int, warmup: int) -> tuple[list, dict]:
    """The atlas's scan ÷ the trace (judged) and its estimated effect pass ÷ one forward (:mod:`.atlas`)."""
    (scan, effect), info = atlas_shape(loaded, T, repeats, warmup, peak_rise)
    return [_judged("shape_atlas_scan_vs_trace", scan["device"], scan["T"], scan["a"], scan["b"]), effect], info


def shape_rows(loaded, T: int, repeats: int, warmup: int, parts=("trace", "patching", "attribution"),
               log=lambda s: None) -> tuple[list, dict]:
    """The per-shape rows on a loaded model: (rows, figures)."""
    c = loaded.weights.config
    T = min(T, c.n_ctx)
    rows, info = [], {"T": T, "n_layers": c.n_layers, "n_heads": c.n_heads, "n_kv_heads": c.kv_heads,
                      "d_model": c.d_model, "d_vocab": c.d_vocab, "params": sum(p.numel() for p in
                                                                                 loaded.hf_model.parameters())}
    steps = {"trace": lambda: _trace(loaded, T, repeats, warmup), "patching": lambda: _patching(loaded, repeats),
             "attribution": lambda: _attribution(loaded, repeats),
             "entropy": lambda: _entropy(loaded, T, repeats, warmup), "ablation": lambda: _ablation(loaded, T, repeats),
             "why": lambda: _why(loaded, T, repeats, warmup), "circuits": lambda: _circuits_page(loaded),
             "atlas": lambda: _atlas(loaded, T, repeats, warmup)}
    for part in parts:
        log(f"[bench]   {part} …")
        t0 = time.perf_counter()
        r, figures = steps[part]()
        rows += r
        info.update(figures)
        info[f"{part}_section_s"] = time.perf_counter() - t0
    return rows, info


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


#: The parts of a shape's rows, in the order they run (``--shape-parts`` picks some).
SHAPE_PARTS = ("trace", "patching", "attribution", "entropy", "ablation", "why", "circuits", "atlas")


def shape_section(shapes, *, T: int = 256, repeats: int = 2, warmup: int = 1, cache=None, parts=SHAPE_PARTS,
                  log=lambda s: None) -> dict:
    """Every shape in turn (built or read from the cache, loaded, measured, freed): JSON-ready."""
    out = {"T": T, "repeats": repeats, "cache": str(cache_folder(cache)), "shapes": {}, "rows": []}
    for shape in shapes:
        folder = shape_checkpoint(shape, cache, log=log)
        log(f"[bench] shape {shape}: loading …")
        gc.collect()
        before, t0 = _rss(), time.perf_counter()
        loaded = load(str(folder), "cpu")
        info = {"load_s": time.perf_counter() - t0, "rss_after_load_bytes": _rss(), "rss_rise_on_load_bytes":
                _rss() - before}
        rows, figures = shape_rows(loaded, T, repeats, warmup, parts, log)
        for r in rows:
            r["shape"] = shape
        out["rows"] += rows
        out["shapes"][shape] = {**info, **figures}
        del loaded
        gc.collect()
    return out


def _mb(n) -> str:
    return "—" if n is None else f"{n / 2**20:,.0f} MB"


def format_shapes(sec: dict) -> str:
    """The per-shape table: ratios with targets, then seconds and peak rises."""
    out = [f"per shape (random weights, CPU): trace, entropy and V = X at T={sec['T']}, patching and attribution on a "
           f"{PATCH_T}-token pair; medians of {sec['repeats']} interleaved runs"]
    for r in sec["rows"]:
        tgt = "" if r["target"] is None else f"{'≤' if r['op'] == '<=' else '≥'} {r['target']:g}"
        verdict = "" if r["pass"] is None else "PASS" if r["pass"] else f"MISS by {100 * r['miss_by']:.0f}%"
        if r["check"].endswith("_rise_vs_forward"):          # bytes, not seconds
            a, b = _mb(r["a"]["median_s"]), _mb(r["b"]["median_s"])
        else:
            a, b = f"{r['a']['median_s']:.3f}s", f"{r['b']['median_s']:.3f}s"
        out.append(f"  {r['shape']:<8} {r['label'][:60]:<60} {a:>10} {b:>10} {r['ratio']:>6.2f} {tgt:>7}  {verdict}")
    out.append(f"  {'shape':<8} {'params':>8} {'load':>7} {'trace':>8} {'HF eager':>9} {'trace rise':>11} "
               f"{'HF rise':>9} {'patterns':>9} {'patch all':>10} {'patch rise':>11} {'attrib.':>8} {'entropy':>8} "
               f"{'V = X':>8}")
    for name, s in sec["shapes"].items():
        def secs(k):
            return "—" if k not in s else f"{s[k]:.2f}s"
        out.append(f"  {name:<8} {s['params'] / 1e6:>7.0f}M {s['load_s']:>6.1f}s {secs('trace_s'):>8} "
                   f"{secs('hf_eager_s'):>9} {_mb(s.get('trace_peak_rise_bytes')):>11} "
                   f"{_mb(s.get('hf_eager_peak_rise_bytes')):>9} {_mb(s.get('pattern_bytes')):>9} "
                   f"{secs('patch_s'):>10} {_mb(s.get('patch_peak_rise_bytes')):>11} {secs('attribution_s'):>8} "
                   f"{secs('entropy_s'):>8} {secs('vx_hull_s'):>8}")
        if "circuits_open_s" in s:
            out.append(f"  {name:<8} Circuits page: first run {s['circuits_open_s']:.1f}s in a fresh session "
                       f"({s['circuits_first_open_s']:.1f}s with the model's loading); pair shown: "
                       f"{'yes' if s['circuits_pair_shown'] else 'no'}; waiting for a click: "
                       + ("; ".join(s["circuits_waiting"]) or "nothing"))
        if "atlas_seconds_per_token" in s:
            per = s["atlas_seconds_per_token"]
            out.append(f"  {name:<8} atlas at T={s['atlas_T']}, ms per token: scan {1e3 * per['atlas scan']:.3f}, trace "
                       f"{1e3 * per['trace with patterns']:.3f}, forward {1e3 * per['one forward']:.3f}, effect pass "
                       f"{1e3 * per['effect pass (estimate)']:.3f} (estimated)")
        if "why_row_s" in s:
            out.append(f"  {name:<8} score terms: one key {s['why_key_s']:.2f}s (rise {_mb(s['why_key_peak_rise_bytes'])}), "
                       f"a query row {s['why_row_s']:.2f}s (rise {_mb(s['why_row_peak_rise_bytes'])}), one forward "
                       f"{s['why_forward_s']:.2f}s (rise {_mb(s['why_forward_peak_rise_bytes'])})")
    return "\n".join(out)
