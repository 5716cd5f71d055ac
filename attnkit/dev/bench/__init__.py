"""The bench, ``python -m attnkit bench`` (a developer tool outside the library): attnkit against
HuggingFace, side by side, as ratios with targets.

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
    9  the V = X ablation with its hull check vs without it, at the longest T (:mod:`.analyses`)
                                                                                    target ≤ 5
    10 attribution patching of every head and position (16 tokens) vs one forward + backward, with its
       Spearman ρ against exact patching, and circuit discovery's seconds (:mod:`.analyses`)  target ≤ 3
    11 the cache-eviction lab: each (k, w) cell's loss ÷ the full cache's, at the longest T (:mod:`.analyses`)
                                                                                    target ≤ 1.5
    8  ``--long 8192,32768``: streaming entropy at long T on SmolLM2-135M's shape (:mod:`.long_context`):
       peak memory above the weights (target ≤ 1.5 GB) and time vs a plain forward (target ≤ 2×)

The default model is GPT-2 small's shape (``GPT2Config()``) with random weights, saved with
``save_pretrained`` into a temporary folder and read back through :func:`attnkit.loading.load`,
the path users take. Timing does not depend on the weights' values.

``--shapes small,medium,xl,llama1b`` adds per-shape rows at real models' shapes (:mod:`.shapes`).

Modules: :mod:`.common` (timing, ratio rows, targets, machine), :mod:`.sections` (checks 1–3, 5–7),
:mod:`.analyses` (checks 9–11), :mod:`.shapes` (``--shapes``),
:mod:`.memory` (check 4), :mod:`.run` (the driver and its table), :mod:`.families`, :mod:`.long_context`,
:mod:`.corpus` (documents/second of a corpus run).

``--quick`` shrinks everything (2 layers, d_model 64, T ∈ {16, 32}, 2 repeats) for tests.
``--family smollm2-135m`` runs checks 1–3 and the KV cache's bytes under grouped-query attention on
SmolLM2-135M's shape instead (:mod:`.families`).
"""
from __future__ import annotations

from .common import TARGETS, interleaved, judge, machine_info, random_ids, ratio_row, sdpa_twin
from .families import SHAPES, bench_family, format_family, kv_cache_bytes, make_family_checkpoint
from .long_context import LONG_TARGETS, format_long, long_section
from .memory import memory_probe, memory_section
from . import shapes
from . import run
from .run import bench, format_table, judged_summary, make_checkpoint
from .sections import transformer_lens_bridge

__all__ = ["bench", "TARGETS", "interleaved", "judge", "ratio_row", "format_table", "make_checkpoint", "sdpa_twin",
           "transformer_lens_bridge", "machine_info", "random_ids", "memory_probe", "memory_section",
           "judged_summary", "SHAPES", "bench_family", "format_family", "kv_cache_bytes", "make_family_checkpoint",
           "LONG_TARGETS", "long_section", "format_long", "shapes"]
