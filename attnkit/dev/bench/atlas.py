"""The head atlas's costs (issue 45), as rows of ``python -m attnkit bench`` and of ``--shapes … --shape-parts atlas``.

    atlas_scan_vs_pattern     the scan of one window (every statistic both ways, examples, pairs, Q/K samples, z
                              sums; :func:`attnkit.atlas.scan` without its float64 check) ÷ run(capture=["pattern"])
                              on the same tokens; interleaved medians                              target ≤ 3
    atlas_scan_rise_vs_trace  the scan's peak memory rise ÷ the pattern trace's: the scan keeps one layer's T×T,
                              the trace every layer's                                               target ≤ 1
    atlas_effect_vs_forward   the effect pass (:func:`attnkit.atlas.effect`: every head mean-ablated alone, exact;
                              the clean residual stream cached at every layer, the ablated runs resumed at the
                              head's layer with its layer's heads batched as rows) ÷ one forward (no capture) over
                              the same tokens — no target: it grows with L·H; the docs give its time per token
    atlas_f64_vs_pattern      the float64 check of one window ÷ the pattern trace (it runs on 1 window in 16
                              documents' first)                                                      context

At the real shapes (``--shapes``) the effect pass of a large model is estimated, not run: the clean run with its
residual stream, then one layer's batched ablation resumed at layer 0 and one at the last layer are timed, and
the L layers' costs interpolated linearly between them (the work of a resumed run is linear in the blocks it
runs, plus the unembedding); the figures say so.
"""
from __future__ import annotations

import torch

from ... import atlas
from ...model import run
from .common import interleaved, random_ids, ratio_row, side

#: The atlas rows' length: long enough for T² work to show, short enough for GPT-2 small's full effect pass.
ATLAS_T = 256


def _pieces(ids):
    return [str(int(i)) for i in ids]


def _scan_fns(w, ids):
    return {"atlas scan": lambda: atlas.scan(w, ids, [1], [1], _pieces),
            "trace with patterns": lambda: run(w, ids, capture=["pattern"])}


def atlas_section(loaded, T: int, repeats: int, warmup: int, peak_rise=None) -> tuple[list, dict]:
    """The rows above at T (the effect pass run in full, once, and the forward interleaved ``repeats`` times)."""
    w, dev = loaded.weights, loaded.device
    c = w.config
    T = min(T, c.n_ctx)
    ids = random_ids(c.d_vocab, T, dev, seed=45)
    means = torch.zeros(c.n_layers, c.n_heads, c.d_head, device=dev)
    w64 = atlas.float64_copy(w)
    fns = {**_scan_fns(w, ids), "one forward": lambda: run(w, ids),
           "float64 check": lambda: atlas._f64_errors(w64, ids[0].cpu(), _stats(w, ids), T)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
        # the effect pass is L·H resumed runs: at most 2 timed rounds, interleaved with its own forward
        te = interleaved({"effect pass": lambda: atlas.effect(w, ids, means), "one forward": fns["one forward"]},
                         min(repeats, 2), 0, dev)
        rise = {k: peak_rise(fns[k]) for k in ("atlas scan", "trace with patterns")} if peak_rise else {}
    s = {k: side(k, v) for k, v in t.items()}
    e = side("effect pass (every head mean-ablated)", te["effect pass"])
    rows = [ratio_row("atlas_scan_vs_pattern", dev, T, s["atlas scan"], s["trace with patterns"]),
            ratio_row("atlas_effect_vs_forward", dev, T, e, side("one forward", te["one forward"]),
                      label=f"atlas effect pass, {c.n_layers * c.n_heads} heads (resumed runs, rows) / one forward"),
            ratio_row("atlas_f64_vs_pattern", dev, T, s["float64 check"], s["trace with patterns"],
                      label="atlas float64 check of one window / trace with patterns (context)")]
    if rise.get("atlas scan") is not None and rise.get("trace with patterns"):
        rows.append(ratio_row("atlas_scan_rise_vs_trace", dev, T, side("scan peak rise (bytes)", [rise["atlas scan"]]),
                              side("trace peak rise (bytes)", [rise["trace with patterns"]]),
                              ratio=rise["atlas scan"] / rise["trace with patterns"]))
    per = {k: v["median_s"] / T for k, v in {**s, "effect pass": e}.items()}
    return rows, {"T": T, "seconds_per_token": per, "peak_rise_bytes": rise, "effect_method": "measured"}


def _stats(w, ids):
    """The float32 statistics of one window, per layer (what the float64 check compares with)."""
    hook = atlas._Stats(ids, w.config)
    run(w, ids, intervention=hook, logits=False)
    return [{k: v[0].cpu() for k, v in lay.items()} for lay in hook.per_layer]


def atlas_shape(loaded, T: int, repeats: int, warmup: int, peak_rise=None) -> tuple[list, dict]:
    """``--shape-parts atlas``: the scan measured; the effect pass estimated (see the module's doc). The rows are
    unjudged here; :mod:`.shapes` judges the scan's against its target."""
    w, dev = loaded.weights, loaded.device
    c = w.config
    T = min(T, c.n_ctx)
    ids = random_ids(c.d_vocab, T, dev, seed=45)
    fns = {**_scan_fns(w, ids), "one forward": lambda: run(w, ids)}
    with torch.inference_mode():
        t = interleaved(fns, repeats, warmup, dev)
        est = atlas.effect_estimate(w, ids, torch.zeros(c.n_layers, c.n_heads, c.d_head, device=dev))
        rise = {k: peak_rise(fns[k]) for k in ("atlas scan", "trace with patterns")} if peak_rise else {}
    s = {k: side(k, v) for k, v in t.items()}
    e = side("effect pass, estimated", [est["estimate_s"]])
    rows = [ratio_row("shape_atlas_scan_vs_trace", dev, T, s["atlas scan"], s["trace with patterns"], target=False),
            ratio_row("shape_atlas_effect_vs_forward", dev, T, e, s["one forward"], target=False,
                      label=f"atlas effect pass, {c.n_layers * c.n_heads} heads, ESTIMATED / one forward")]
    per = {k: v["median_s"] / T for k, v in s.items()} | {"effect pass (estimate)": est["estimate_s"] / T}
    return rows, {"atlas_T": T, "atlas_seconds_per_token": per, "atlas_effect_parts": est,
                  "atlas_peak_rise_bytes": rise}
