"""The driver of ``python -m attnkit bench``: every section on every device, one JSON-ready result,
and its table."""
from __future__ import annotations

import gc
import os
import tempfile
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from ...loading import LoadError, load, resolve_device
from .common import TARGETS, machine_info, byte_tokenizer, sdpa_twin
from .analyses import circuits_section, eviction_section, hull_section
from .atlas import ATLAS_T, atlas_section
from .shapes import peak_rise as _peak_rise
from .memory import memory_section
from .sections import (PATCH_T, entropy_section, forward_section, generation_section, patching_section,
                       transformer_lens_bridge)

FULL = dict(lengths=(128, 512, 1024), repeats=5, warmup=1, gen_prompt=128, gen_new=128)
QUICK = dict(lengths=(16, 32), repeats=2, warmup=1, gen_prompt=8, gen_new=4)
QUICK_CONFIG = dict(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=512)


def make_checkpoint(folder: Path, quick: bool = False, seed: int = 0) -> Path:
    """A random-weight GPT-2 (``GPT2Config()``, or a tiny one) saved as users' checkpoints are."""
    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    cfg = GPT2Config(**(QUICK_CONFIG if quick else {}))
    GPT2LMHeadModel(cfg).save_pretrained(folder, safe_serialization=True)
    byte_tokenizer(folder)
    return folder


def _skeleton(devices, model_desc, source, lengths, repeats, warmup, quick, gen_prompt, gen_new) -> dict:
    return {
        "machine": machine_info(devices),
        "model": {"name": model_desc, "source": source},
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
        "hull": {},
        "circuits": {},
        "eviction": {},
        "atlas": {},
        "transformer_lens": {},
    }


def _on_device(result: dict, dev, source: str, model_desc: str, p: dict, threads, memory: bool, log) -> None:
    """Every section on one device, into ``result``; ``p``: lengths, repeats, warmup, gen_prompt,
    gen_new, quick."""
    log(f"[bench] loading {model_desc} on {dev} …")
    loaded = load(source, dev)
    c = loaded.config
    result["model"].update(n_layers=c.n_layers, n_heads=c.n_heads, d_model=c.d_model, n_ctx=c.n_ctx,
                           d_vocab=c.d_vocab)
    hf_sdpa = sdpa_twin(loaded.hf_model)
    tl_model, tl_info = transformer_lens_bridge(loaded)
    result["transformer_lens"][str(dev)] = tl_info
    repeats, warmup = p["repeats"], p["warmup"]
    usable = [T for T in p["lengths"] if T <= c.n_ctx]
    if not usable:
        raise LoadError(f"none of the lengths {list(p['lengths'])} fits the context of {c.n_ctx}")
    if len(usable) < len(p["lengths"]):
        log(f"[bench] skipping lengths beyond the context of {c.n_ctx}: {[T for T in p['lengths'] if T > c.n_ctx]}")
    for T in usable:
        log(f"[bench] {dev} forward T={T} …")
        rows, checks = forward_section(loaded, hf_sdpa, T, repeats, warmup, tl_model)
        checks["device"] = str(dev)
        result["results"] += rows
        result["correctness"].append(checks)
    n_prompt = min(p["gen_prompt"], max(1, c.n_ctx - p["gen_new"]))
    log(f"[bench] {dev} generation {n_prompt}+{p['gen_new']} …")
    rows, result["generation"][str(dev)] = generation_section(loaded, hf_sdpa, n_prompt, p["gen_new"], repeats, warmup)
    result["results"] += rows
    T = max(usable)
    log(f"[bench] {dev} entropy T={T} …")
    rows, result["entropy"][str(dev)] = entropy_section(loaded, T, repeats, warmup)
    result["results"] += rows
    log(f"[bench] {dev} patching, T={min(PATCH_T, c.n_ctx)} …")
    rows, result["patching"][str(dev)] = patching_section(loaded, repeats, warmup)
    result["results"] += rows
    log(f"[bench] {dev} V = X hull check, T={T} …")
    rows, result["hull"][str(dev)] = hull_section(loaded, T, repeats, warmup)
    result["results"] += rows
    log(f"[bench] {dev} circuits (attribution patching, discovery) …")
    rows, result["circuits"][str(dev)] = circuits_section(loaded, repeats)
    result["results"] += rows
    log(f"[bench] {dev} eviction lab cells, T={T} …")
    rows, result["eviction"][str(dev)] = eviction_section(loaded, T, repeats, warmup)
    result["results"] += rows
    log(f"[bench] {dev} atlas (scan, effect pass, float64 check), T={min(ATLAS_T, T)} …")
    rows, result["atlas"][str(dev)] = atlas_section(loaded, min(ATLAS_T, T), repeats, warmup,
                                                    None if p["quick"] else _peak_rise)
    result["results"] += rows
    if memory:
        log(f"[bench] {dev} memory T={T} …")
        result["memory"][str(dev)] = memory_section(loaded, source, T, repeats, warmup,
                                                    threads or torch.get_num_threads(), quick=p["quick"])
    del loaded, hf_sdpa, tl_model
    gc.collect()


def judged_summary(results: list) -> dict:
    """passed / judged / missed over the rows that have a target."""
    judged = [r for r in results if r["pass"] is not None]
    return {"passed": sum(r["pass"] for r in judged), "judged": len(judged),
            "missed": [{"check": r["check"], "device": r["device"], "T": r["T"], "ratio": r["ratio"],
                        "target": r["target"], "miss_by": r["miss_by"], "why": r.get("why")}
                       for r in judged if not r["pass"]]}


def bench(model: str | None = None, *, lengths=None, repeats=None, quick: bool = False, devices=None,
          threads: int | None = None, gen_new: int | None = None, gen_prompt: int | None = None,
          memory: bool = True, log=lambda s: None) -> dict:
    """Run every section and return the JSON-ready result; ``log(line)`` hears what is being measured."""
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    preset = QUICK if quick else FULL
    p = {"lengths": tuple(lengths or preset["lengths"]), "repeats": int(repeats or preset["repeats"]),
         "warmup": preset["warmup"], "gen_new": int(gen_new or preset["gen_new"]),
         "gen_prompt": int(gen_prompt or preset["gen_prompt"]), "quick": quick}
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
    result = _skeleton(devices, model_desc, None if tmp else source, p["lengths"], p["repeats"], p["warmup"],
                       quick, p["gen_prompt"], p["gen_new"])
    try:
        for dev in devices:
            _on_device(result, dev, source, model_desc, p, threads, memory, log)
    finally:
        torch.set_num_threads(threads_before)    # callers in the same process keep their setting
        if tmp is not None:
            tmp.cleanup()
    result["summary"] = {**judged_summary(result["results"]), "wall_seconds": time.time() - started,
                         "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
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
    out += _context_lines(res)
    for dev, t in res["transformer_lens"].items():
        out.append(f"TransformerLens on {dev}: {t['status']}" + (f" ({t['reason']})" if t.get("reason") else ""))
    s = res["summary"]
    out.append("")
    out.append(f"targets met: {s['passed']}/{s['judged']} · wall time {s['wall_seconds']:.0f} s"
               + (f" · load average at end {', '.join(f'{x:.2f}' for x in s['load_average_end'])}"
                  if s.get("load_average_end") else ""))
    out.append("ratio = A median / B median; rows without a target are context")
    return "\n".join(out)


def _context_lines(res: dict) -> list[str]:
    """The equality verdicts, what the entropy timing measured, the hull check's and the circuit tools' figures."""
    out = []
    for c in res["correctness"]:
        if "float64_rule_ok" in c:
            w = c["worst_check"]
            out.append(f"equality on {c.get('device', 'cpu')} at T={c['T']}: {c['float64_verdict']} (closest to its "
                       f"bound: {w['quantity']}, attnkit {w['attnkit_f32_error']:.2e} vs HF {w['hf_f32_error']:.2e}, "
                       f"allowed {w['allowed']:.2e}; float64 |Δ| ≤ {c['max_f64_vs_f64']:.1e})")
    for dev, e in res["entropy"].items():
        out.append(f"entropy timed on {dev}: {e['timed']}")
    for dev, h in res.get("hull", {}).items():
        out.append(f"V = X on {dev} at T={h['T']}: {h['with_hull_s']:.2f} s with the hull check, "
                   f"{h['without_hull_s']:.2f} s without" + (f"; {h['hull_note']}" if h.get("hull_note") else ""))
    for dev, c in res.get("circuits", {}).items():
        out.append(f"circuits on {dev}, {c['T']}-token pair: attribution patching {c['attribution_s']:.3f} s "
                   f"(Spearman ρ with exact patching of every head × position {c['spearman']:.3f}; exact "
                   f"{c['exact_s']:.2f} s); discovery {c['discovery_s']:.2f} s, {c['discovery_edges']} edges, "
                   f"faithfulness {c['discovery_faithfulness']:.2f}")
    for dev, a in res.get("atlas", {}).items():
        per = a["seconds_per_token"]
        out.append(f"atlas on {dev} at T={a['T']}: ms per token — scan {1e3 * per['atlas scan']:.3f}, trace with "
                   f"patterns {1e3 * per['trace with patterns']:.3f}, one forward {1e3 * per['one forward']:.3f}, "
                   f"effect pass {1e3 * per['effect pass']:.3f} (measured), float64 check of a window "
                   f"{1e3 * per['float64 check']:.3f}")
    return out
