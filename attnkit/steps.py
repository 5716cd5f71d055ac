"""One head of one layer, one query token, walked through step by step.

Everything here is computed with the functions of :mod:`attnkit.attention` that
:func:`attnkit.model.run` itself calls, on the layer's real input, so that each
number equals the corresponding capture of a :class:`~attnkit.model.Trace`::

    x̂ = ln_1(x)                      ln1          rows 0..i (the tokens query i can see)
    q, k, v = project(x̂, W, b)       q, k, v
    s = scores(q, k, scale)          scores       (q·k, then ×scale = ÷√d_head)
    s + M                            causal_mask / apply_mask (−∞ on future keys)
    a = softmax(s + M)               pattern
    z = mix(a, v)                    z
    merge(z, W_O, b_O)               attn_out     = Σ_h z_h·W_O[h] + b_O

Also: the seeds' worked examples (the 4×4 causal softmax and the three-token demo),
the KV-cache comparison and the X·Xᵀ-versus-q·kᵀ symmetry argument. No Streamlit here.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import pandas as pd
import torch

from . import attention as attention_steps
from .i18n import Message, join, msg
from .model import KVCache, as_ids, generate, norm, run
from .standard import head_name
from .weights import Weights, ModelConfig

__all__ = [
    "HeadSteps", "head_steps", "trace_differences", "key_frame", "vector_frame", "heads_frame",
    "SEED_SCORES", "SEED_X", "seed_causal_4x4", "seed_three_tokens",
    "forward_flops", "KVDemo", "kv_cache_demo", "REPEATS", "TIME_BUDGET",
    "symmetry_stats", "xx_vs_qk", "symmetry_verdict", "SYMMETRIC",
]

COMPACT_DIMS = 8


# ----------------------------------------------------------------------------- one head, one query

@dataclass
class HeadSteps:
    """The walk-through of (layer, head, query). Key-indexed tensors cover keys 0..query only
    (the future keys are masked to −∞ and get weight exactly 0); ``mask_row``/``masked_row``
    cover every position 0..T−1 so the −∞ entries can be shown."""

    layer: int
    head: int
    query: int
    n_tokens: int
    scale: float
    x_hat: torch.Tensor        # [i+1, d]   ln_1 output of the visible tokens
    q: torch.Tensor            # [e]
    k: torch.Tensor            # [i+1, e]
    v: torch.Tensor            # [i+1, e]
    dots: torch.Tensor         # [i+1]      q·k_j
    scaled: torch.Tensor       # [i+1]      q·k_j · scale
    mask_row: torch.Tensor     # [T]        0 or −∞
    masked_row: torch.Tensor   # [T]        scaled + mask (−∞ beyond the query)
    weights: torch.Tensor      # [i+1]      softmax
    z: torch.Tensor            # [e]        Σ_j a_j v_j
    head_out: torch.Tensor     # [d]        z·W_O[head]
    z_all: torch.Tensor        # [H, e]     every head's z at this query
    head_outs: torch.Tensor    # [H, d]     every head's z_h·W_O[h]
    b_O: torch.Tensor | None   # [d]
    attn_out: torch.Tensor     # [d]        merge(z_all, W_O, b_O)
    q_pre: torch.Tensor | None = None   # [e]     rotary families: q before rotation (q is after)
    k_pre: torch.Tensor | None = None   # [i+1, e] k before rotation
    kv_head: int | None = None          # grouped-query attention: the key/value head this head reads

    @property
    def d_head(self) -> int:
        return self.q.shape[-1]

    @property
    def weight_sum(self) -> float:
        return float(self.weights.sum())

    @property
    def concat(self) -> torch.Tensor:
        """concat_h(z_h) [H·e], the vector that meets W_O."""
        return self.z_all.reshape(-1)

    @property
    def sum_of_heads(self) -> torch.Tensor:
        """Σ_h z_h·W_O[h] + b_O, computed head by head (equals :attr:`attn_out` up to rounding)."""
        return self.head_outs.sum(0) if self.b_O is None else self.head_outs.sum(0) + self.b_O


@torch.inference_mode()
def _check_head_query(cfg: ModelConfig, ids: torch.Tensor, layer: int, head: int, query: int) -> int:
    """T of one sequence ``ids`` [1, T]; ValueError when it is a batch or layer/head/query is out of range."""
    if ids.shape[0] != 1:
        raise ValueError("head_steps takes one sequence")
    T = ids.shape[1]
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer {layer} out of range 0..{cfg.n_layers - 1}")
    if not 0 <= head < cfg.n_heads:
        raise ValueError(f"head {head} out of range 0..{cfg.n_heads - 1}")
    if not 0 <= query < T:
        raise ValueError(f"query position {query} out of range 0..{T - 1}")
    return T


def head_steps(weights: Weights, ids, layer: int, head: int, query: int,
               resid_pre: torch.Tensor | None = None) -> HeadSteps:
    """Compute the steps of ``head`` in ``layer`` for query position ``query``.

    ``resid_pre``: the layer's input x [T, d] or [1, T, d] (e.g. ``trace["resid_pre", layer]``);
    when omitted, the model is run up to that layer to get it.
    """
    cfg = weights.config
    ids = as_ids(ids, weights.device)
    T = _check_head_query(cfg, ids, layer, head, query)
    if resid_pre is None:
        resid_pre = run(weights, ids, capture=("resid_pre",), layers=[layer])["resid_pre", layer]
    x = resid_pre.reshape(1, T, cfg.d_model)[:, : query + 1]
    lw = weights.layers[layer]
    # the same steps as attnkit.model.attention, on the visible rows only
    x_hat = norm(x, lw.ln1_w, lw.ln1_b, cfg)                                  # [1, i+1, d]
    q = attention_steps.project(x_hat, lw.W_Q, lw.b_Q)                                       # [1, H, i+1, e]
    k = attention_steps.project(x_hat, lw.W_K, lw.b_K)                                       # [1, H_kv, i+1, e]
    v = attention_steps.project(x_hat, lw.W_V, lw.b_V)
    q_pre = k_pre = None
    if cfg.position == "rotary":
        cos, sin = attention_steps.rotary_tables(weights.inv_freq, torch.arange(query + 1, device=x.device),
                                   weights.rope_attention_scale, x.dtype)
        q_pre, k_pre = q, k
        q, k = attention_steps.rotate(q, cos, sin), attention_steps.rotate(k, cos, sin)
    kv = head // cfg.group
    k_all, v_all = attention_steps.repeat_kv(k, cfg.group), attention_steps.repeat_kv(v, cfg.group)        # [1, H, i+1, e]
    q = q[:, :, query:]                                                        # [1, H, 1, e]
    scale = cfg.attn_scale(layer)
    dots = attention_steps.scores(q, k_all, 1.0)                                             # [1, H, 1, i+1]
    scaled = attention_steps.scores(q, k_all, scale)
    mask_row = attention_steps.causal_mask(T, window=cfg.window(layer), device=x.device, dtype=x.dtype)[query]   # [T]
    # the model adds the full row of M; beyond the query it is −∞ whatever the score
    masked_vis = attention_steps.apply_mask(scaled, mask_row[: query + 1])
    pattern = attention_steps.softmax(masked_vis)                                            # [1, H, 1, i+1]
    z = attention_steps.mix(pattern, v_all)                                                  # [1, H, 1, e]
    attn_out = attention_steps.merge(z, lw.W_O, lw.b_O)[0, 0]                                # [d]
    z_all = z[0, :, 0]                                                         # [H, e]
    head_outs = torch.einsum("he,hed->hd", z_all, lw.W_O)
    masked_row = torch.full((T,), float("-inf"), dtype=x.dtype, device=x.device)
    masked_row[: query + 1] = masked_vis[0, head, 0]
    own = lambda t: None if t is None else t.detach().clone()                  # noqa: E731 (no views kept)
    return HeadSteps(
        layer=layer, head=head, query=query, n_tokens=T, scale=scale,
        x_hat=own(x_hat[0]), q=own(q[0, head, 0]), k=own(k_all[0, head]), v=own(v_all[0, head]),
        dots=own(dots[0, head, 0]), scaled=own(scaled[0, head, 0]), mask_row=own(mask_row),
        masked_row=masked_row, weights=own(pattern[0, head, 0]), z=own(z[0, head, 0]),
        head_out=own(head_outs[head]), z_all=own(z_all), head_outs=head_outs, b_O=own(lw.b_O),
        attn_out=own(attn_out),
        q_pre=None if q_pre is None else own(q_pre[0, head, query]),
        k_pre=None if k_pre is None else own(k_pre[0, kv]),
        kv_head=kv if cfg.group > 1 else None,
    )


TRACE_CAPTURES = ("ln1", "q", "k", "v", "scores", "pattern", "z", "attn_out")


def trace_differences(st: HeadSteps, trace) -> pd.DataFrame:
    """max |step value − the model's capture| for each step, from a Trace holding ``TRACE_CAPTURES``
    of ``st.layer`` (e.g. ``run(weights, ids, capture="all")``)."""
    l, h, i = st.layer, st.head, st.query
    pairs = {
        "x̂ = ln_1(x)": (st.x_hat, trace["ln1", l][0, : i + 1]),
        "q": (st.q, trace["q", l][0, h, i]),
        "k": (st.k, trace["k", l][0, h, : i + 1]),
        "v": (st.v, trace["v", l][0, h, : i + 1]),
        "q·k·scale (scores)": (st.scaled, trace["scores", l][0, h, i, : i + 1]),
        "softmax weights (pattern)": (st.weights, trace["pattern", l][0, h, i, : i + 1]),
        "future weights (pattern)": (torch.zeros(st.n_tokens - i - 1), trace["pattern", l][0, h, i, i + 1:]),
        "z": (st.z, trace["z", l][0, h, i]),
        "attn_out = merge(z)": (st.attn_out, trace["attn_out", l][0, i]),
        "Σ_h z_h·W_O[h] + b_O": (st.sum_of_heads, trace["attn_out", l][0, i]),
    }
    rows = []
    for name, (a, b) in pairs.items():
        a, b = a.detach().cpu().float(), b.detach().cpu().float()
        rows.append({"step": name, "entries": b.numel(),
                     "max |Δ|": float((a - b).abs().max()) if b.numel() else 0.0,
                     "max |capture|": float(b.abs().max()) if b.numel() else 0.0})
    return pd.DataFrame(rows)


def _compact(prefix: str, t: torch.Tensor, n: int = COMPACT_DIMS) -> dict:
    t = t.detach().float().cpu()
    cols = {f"{prefix}[{j}]": t[..., j].tolist() for j in range(min(n, t.shape[-1]))}
    cols[f"|{prefix}|"] = t.norm(dim=-1).tolist()
    return cols


def key_frame(st: HeadSteps, tokens: list[str] | None = None, top_k: int | None = None,
              dims: int = COMPACT_DIMS) -> pd.DataFrame:
    """One row per visible key: q·k, ÷√d, mask, weight, and the first ``dims`` entries of k and v.

    ``top_k``: keep the keys with the largest weights (sorted by weight); None keeps all, in order.
    """
    n = st.query + 1
    df = pd.DataFrame({
        "position": range(n),
        **({"token": tokens[:n]} if tokens is not None else {}),
        "q·k": st.dots.float().cpu().tolist(),
        "q·k·scale": st.scaled.float().cpu().tolist(),
        "mask": st.mask_row[:n].float().cpu().tolist(),
        "weight": st.weights.float().cpu().tolist(),
        **_compact("k", st.k, dims),
        **_compact("v", st.v, dims),
    })
    if top_k is not None:
        df = df.sort_values("weight", ascending=False, kind="stable").head(top_k)
    return df


def vector_frame(st: HeadSteps, which: str, tokens: list[str] | None = None) -> pd.DataFrame:
    """Full values of ``which`` in 'x_hat', 'k', 'v' (one row per visible token) or 'q', 'z', 'head_out'."""
    t = getattr(st, which).detach().float().cpu()
    if t.dim() == 1:
        t = t.unsqueeze(0)
        pos = [st.query]
    else:
        pos = list(range(t.shape[0]))
    df = pd.DataFrame(t.numpy(), columns=[f"{which}[{j}]" for j in range(t.shape[1])])
    df.insert(0, "position", pos)
    if tokens is not None:
        df.insert(1, "token", [tokens[p] for p in pos])
    return df


def heads_frame(st: HeadSteps, dims: int = COMPACT_DIMS) -> pd.DataFrame:
    """Per head: |z_h| and its contribution z_h·W_O[h] (first ``dims`` entries and norm)."""
    return pd.DataFrame({
        "head": range(st.z_all.shape[0]),
        "|z_h|": st.z_all.float().norm(dim=-1).cpu().tolist(),
        **_compact("z_h·W_O[h]", st.head_outs, dims),
    })


# ----------------------------------------------------------------------------- the seeds' examples

#: The seed's 4×4 score matrix: every row [1, 2, 3, 4].
SEED_SCORES = [[1.0, 2.0, 3.0, 4.0]] * 4
#: The seed's three tokens ("猫", "坐", "垫子上"), 4 dimensions each, used directly as Q, K and V.
SEED_X = [[0.8, 0.1, 0.2, 0.5], [0.3, 0.9, 0.1, 0.4], [0.2, 0.4, 0.7, 0.1]]


def seed_causal_4x4(dtype=torch.float64) -> dict[str, torch.Tensor]:
    """scores [1,2,3,4] per row, + causal M, softmax (seed: rows 1 / .269 .731 / … / .032 .087 .237 .644)."""
    s = torch.tensor(SEED_SCORES, dtype=dtype)
    M = attention_steps.causal_mask(4, dtype=dtype)
    masked = attention_steps.apply_mask(s, M)
    return {"scores": s, "mask": M, "masked": masked, "pattern": attention_steps.softmax(masked)}


def seed_three_tokens(causal: bool, dtype=torch.float64) -> dict[str, torch.Tensor]:
    """The seed's demo ``attention(X, X, X)``: Q = K = V = X, scores = X·Xᵀ/√d_k with d_k = 4
    (the seed's ``np.sqrt(d_k)``, so ÷2); the seed runs it without a mask, here also with one."""
    X = torch.tensor(SEED_X, dtype=dtype)
    out, pattern, masked = attention_steps.attention(X, X, X, causal=causal, scale=1 / math.sqrt(X.shape[-1]))
    return {"X": X, "scores": attention_steps.scores(X, X, 1 / math.sqrt(X.shape[-1])), "masked": masked,
            "pattern": pattern, "output": out}


# ----------------------------------------------------------------------------- KV cache

def forward_flops(cfg: ModelConfig, n_new: int, n_keys: int) -> int:
    """Matrix-product FLOPs (2 per multiply-add) of one forward pass feeding ``n_new`` positions
    that attend over ``n_keys`` keys: Q/K/V and output projections, q·kᵀ, pattern·v, the MLP and
    the unembedding (attnkit computes logits for every fed position). LayerNorm, softmax and the
    activation are ignored (they are O(n·d), not O(n·d²))."""
    d, L = cfg.d_model, cfg.n_layers
    per_layer = 2 * n_new * d * 3 * d + 2 * n_new * n_keys * d * 2 + 2 * n_new * d * d + 2 * n_new * d * cfg.d_mlp * 2
    return L * per_layer + 2 * n_new * d * cfg.d_vocab


#: Timed decodings of each mode (alternating, after one untimed warm-up each); each step's time is their median …
REPEATS = 3
#: … while the timed runs so far took less than this many seconds (a large model is timed once).
TIME_BUDGET = 10.0


@dataclass
class KVDemo:
    prompt_len: int
    tokens_cached: list[int]
    tokens_full: list[int]
    seconds_cached: list[float]  # per step: the median over ``repeats`` timed decodings (after a warm-up)
    seconds_full: list[float]
    max_logit_diff: float        # max |Δ| of the next-token logits, cached vs recomputed
    max_kv_diff: float           # max |Δ| of the cache's K/V rows vs a full run on the final sequence
    steps: pd.DataFrame          # per step: positions fed, K/V rows reused / computed, FLOPs, seconds
    repeats: int = 1

    @property
    def tokens_match(self) -> bool:
        return self.tokens_cached == self.tokens_full

    def summary(self) -> pd.DataFrame:
        """Per mode: step 0's seconds (the prompt, the same work in both modes), the later steps' seconds (what
        the cache changes), positions fed, K/V rows computed, GFLOP."""
        s = self.steps
        return pd.DataFrame({
            "mode": ["with KV cache", "without cache"],
            "seconds, step 0": [self.seconds_cached[0], self.seconds_full[0]],
            "seconds, steps 1…": [sum(self.seconds_cached[1:]), sum(self.seconds_full[1:])],
            "positions fed": [int(s["fed (cache)"].sum()), int(s["fed (no cache)"].sum())],
            "K/V rows computed": [int(s["K/V rows computed (cache)"].sum()),
                                  int(s["K/V rows computed (no cache)"].sum())],
            "GFLOP": [s["GFLOP (cache)"].sum(), s["GFLOP (no cache)"].sum()],
        })

    def timing_note(self) -> Message:
        """What the seconds show, from the summary's own numbers: step 0 left out (the same work in both modes),
        the later steps compared, and when the cache is not faster, why (its GFLOP saving beside the seconds)."""
        n = len(self.seconds_cached)
        if n < 2:
            return msg("Only step 0 ran: it feeds the whole prompt in both modes, so the cache cannot change its time. "
                       "Generate more tokens to see the cache at work.")
        c, f = sum(self.seconds_cached[1:]), sum(self.seconds_full[1:])
        s = self.steps.iloc[1:]
        flop = float(s["GFLOP (no cache)"].sum() / max(s["GFLOP (cache)"].sum(), 1e-300))
        args = dict(last=n - 1, c=f"{c:.4f}", f=f"{f:.4f}", runs=self.repeats, flop=f"{flop:.1f}",
                    start=self.prompt_len + 1, end=self.prompt_len + n - 1)
        if c < f:
            return msg("Steps 1–{last} took {c} s with the cache and {f} s without ({x}× faster; every step was timed "
                       "{runs}× after a warm-up, the median kept): with the cache each step feeds one token, without "
                       "it {start} to {end}. Step 0 feeds the whole prompt in both modes, so it is left out.",
                       x=f"{f / max(c, 1e-300):.1f}", **args)
        return msg("Steps 1–{last} took {c} s with the cache and {f} s without (every step timed {runs}× after a "
                   "warm-up, the median kept): the cache is not faster here, although it does {flop}× fewer GFLOP. "
                   "At {start} to {end} positions the arithmetic it saves is small next to the fixed cost of a step "
                   "(and to other work on a busy machine); a longer prompt or more tokens show the saving.",
                   **args)


def _timed(weights: Weights, seq, n_new: int, repeats: int, budget: float):
    """(cached Generation, uncached Generation, per-step median seconds of each, timed runs each): one untimed
    warm-up of each mode, then up to ``repeats`` alternating timed runs while they take less than ``budget`` s."""
    for mode in (True, False):
        generate(weights, seq, min(2, n_new), use_cache=mode)
    runs = {True: [], False: []}
    began = time.perf_counter()
    while len(runs[True]) < max(1, repeats) and (not runs[True] or time.perf_counter() - began < budget):
        for mode in (True, False):
            runs[mode].append(generate(weights, seq, n_new, use_cache=mode))
    med = {m: [statistics.median(x) for x in zip(*(g.step_seconds for g in gs))] for m, gs in runs.items()}
    return runs[True][0], runs[False][0], med[True], med[False], len(runs[True])


@torch.inference_mode()
def kv_cache_demo(weights: Weights, ids, n_new: int, *, check_rows: bool = True, repeats: int = REPEATS,
                  budget: float = TIME_BUDGET) -> KVDemo:
    """Greedy-generate ``n_new`` tokens with and without the KV cache and account for both.

    Step s (0-based) predicts the token at position T+s from the T+s tokens so far. With the cache,
    step 0 feeds the whole prompt (computing K/V rows 0..T−1) and every later step feeds one token,
    reusing rows 0..T+s−2 and computing row T+s−1; without it every step recomputes all T+s rows.
    Timing is fair to both: one untimed warm-up each, then ``repeats`` alternating timed runs (fewer once they
    took ``budget`` seconds), each step's time their median.
    ``check_rows``: also replay the cached decoding and compare the cache's rows with a full run
    (two more forward passes over the prompt; ``max_kv_diff`` is NaN without it).
    """
    cfg = weights.config
    seq = as_ids(ids, weights.device)
    T = seq.shape[1]
    if n_new < 1:
        raise ValueError("generate at least one token")
    gen_c, gen_f, sec_c, sec_f, timed = _timed(weights, seq, n_new, repeats, budget)
    logit_diff = max(float((a - b).abs().max()) for a, b in zip(gen_c.step_logits, gen_f.step_logits))
    lengths = [T + s for s in range(n_new)]             # cache rows after each step, by construction
    kv_diff = float("nan")
    if check_rows:
        lengths, kv_diff = _check_rows(weights, seq, gen_c.tokens)
    rows = [_step_row(cfg, T, s, lengths[s], sec_c[s], sec_f[s]) for s in range(n_new)]
    return KVDemo(prompt_len=T, tokens_cached=gen_c.tokens, tokens_full=gen_f.tokens,
                  seconds_cached=sec_c, seconds_full=sec_f, max_logit_diff=logit_diff, max_kv_diff=kv_diff,
                  steps=pd.DataFrame(rows), repeats=timed)


def _check_rows(weights: Weights, seq: torch.Tensor, tokens: list[int]) -> tuple[list[int], float]:
    """Replay the cached decoding with an explicit cache to read its rows, then compare them with a fresh full run:
    (the cache's length after each step, the largest |Δ| of any K or V row)."""
    cfg = weights.config
    cache = KVCache()
    full = torch.cat([seq, torch.tensor([tokens], device=seq.device)], dim=1)
    lengths = []
    run(weights, seq, cache=cache)
    lengths.append(cache.length)
    for t in tokens[:-1]:
        run(weights, [[t]], cache=cache)
        lengths.append(cache.length)
    k_name = "k_rot" if cfg.position == "rotary" else "k"        # rotary families cache k after rotation
    ref = run(weights, full[:, : cache.length], capture=(k_name, "v"))
    return lengths, max(max(float((cache.keys[l] - ref[k_name, l]).abs().max()),
                            float((cache.values[l] - ref["v", l]).abs().max())) for l in range(cfg.n_layers))


def _step_row(cfg: ModelConfig, T: int, s: int, length: int, sec_c: float, sec_f: float) -> dict:
    """One row of the steps table: step ``s`` predicts position T + s."""
    L = T + s
    fed_c = T if s == 0 else 1
    return {
        "step": s,
        "predicts position": L,
        "cache rows after": length,
        "fed (cache)": fed_c,
        "K/V rows reused (cache)": 0 if s == 0 else L - 1,
        "reused rows": "—" if s == 0 else f"0..{L - 2}",
        "K/V rows computed (cache)": fed_c,
        "new rows": f"0..{L - 1}" if s == 0 else f"{L - 1}",
        "fed (no cache)": L,
        "K/V rows computed (no cache)": L,
        "GFLOP (cache)": forward_flops(cfg, fed_c, L) / 1e9,
        "GFLOP (no cache)": forward_flops(cfg, L, L) / 1e9,
        "seconds (cache)": sec_c,
        "seconds (no cache)": sec_f,
    }


# ----------------------------------------------------------------------------- why W_Q ≠ W_K

def symmetry_stats(S: torch.Tensor) -> dict[str, float]:
    """For a square score matrix S [T, T] (before the mask), over the queries i ≥ 1 (query 0 sees only itself, so
    its own key is its top key by force):

    * asymmetry ‖S − Sᵀ‖_F / ‖S‖_F (0 for a symmetric matrix such as X·Xᵀ);
    * diagonal share: the fraction of those queries whose largest *visible* score (keys j ≤ i) is their own key;
    * diagonal margin: the median over them of S_ii − max_{j<i} S_ij, in standard deviations of the visible scores
      (the lower triangle with its diagonal): positive when a query's own key wins, negative when another does.
    NaN for a one-token prompt (no query with a choice)."""
    S = S.detach().double()
    T = S.shape[-1]
    asym = float((S - S.T).norm() / S.norm().clamp_min(1e-300))
    if T < 2:
        return {"asymmetry": asym, "diagonal share": math.nan, "diagonal margin": math.nan}
    low = torch.tril(torch.ones(T, T, dtype=torch.bool, device=S.device))
    vis = S.masked_fill(~low, float("-inf"))
    diag_share = float((vis.argmax(-1) == torch.arange(T, device=S.device))[1:].double().mean())
    others = S.masked_fill(~torch.tril(low, -1), float("-inf")).max(-1).values[1:]
    spread = float(S[low].std(unbiased=False))
    margin = float((S.diagonal()[1:] - others).median()) / spread if spread > 0 else math.nan
    return {"asymmetry": asym, "diagonal share": diag_share, "diagonal margin": margin}


@torch.inference_mode()
def xx_vs_qk(weights: Weights, ids, layer: int, head: int,
             resid_pre: torch.Tensor | None = None) -> dict:
    """The seed's X·Xᵀ argument on a real prompt: x̂·x̂ᵀ (x̂ = ln_1 of the layer input) beside the
    head's raw q·kᵀ (no scale, no mask), with :func:`symmetry_stats` of each, and each head of the layer's diagonal
    share (``layer_shares``: {head name: share}), to say whether this head is typical."""
    cfg = weights.config
    ids = as_ids(ids, weights.device)
    T = ids.shape[1]
    qn, kn = ("q_rot", "k_rot") if cfg.position == "rotary" else ("q", "k")
    resume = {} if resid_pre is None else {"start": layer, "resid": resid_pre.reshape(1, T, cfg.d_model)}
    tr = run(weights, ids, capture=("ln1", qn, kn), layers=[layer], stop=layer + 1, **resume)
    x_hat = tr["ln1", layer]
    qs, ks = tr[qn, layer][0], tr[kn, layer][0]
    qk_all = [attention_steps.scores(qs[h], ks[h // cfg.group], 1.0) for h in range(cfg.n_heads)]
    xx = attention_steps.scores(x_hat[0], x_hat[0], 1.0)
    qk = qk_all[head]
    return {"xx": xx, "qk": qk, "xx_stats": symmetry_stats(xx), "qk_stats": symmetry_stats(qk),
            "layer_shares": {head_name(layer, h): symmetry_stats(m)["diagonal share"] for h, m in enumerate(qk_all)}}


#: q·kᵀ counts as symmetric below this asymmetry (x̂·x̂ᵀ's is float rounding, < 1e-6).
SYMMETRIC = 0.05


def symmetry_verdict(r: dict, head: str) -> Message:
    """What :func:`xx_vs_qk`'s numbers show about the seed's claim (separate W_Q and W_K break X·Xᵀ's symmetry and
    its heavy diagonal), for head ``head`` (its name): the symmetry part, the diagonal part (broken, weakened or
    kept, by the two diagonal shares), and how many heads of the layer keep the diagonal."""
    xx, qk, shares = r["xx_stats"], r["qk_stats"], r["layer_shares"]
    if math.isnan(qk["diagonal share"]):
        return msg("A one-token prompt: no query has a choice of keys, so there is no diagonal to compare.")
    sym = (msg("W_Q ≠ W_K broke the symmetry: q·kᵀ's asymmetry is {a} (x̂·x̂ᵀ's {b}).", a=f"{qk['asymmetry']:.3f}",
               b=f"{xx['asymmetry']:.1e}") if qk["asymmetry"] >= SYMMETRIC else
           msg("q·kᵀ is nearly symmetric here (asymmetry {a}): this head's W_Q and W_K act almost alike.",
               a=f"{qk['asymmetry']:.3f}"))
    args = dict(head=head, s=f"{qk['diagonal share']:.3f}", xs=f"{xx['diagonal share']:.3f}",
                m=f"{qk['diagonal margin']:+.2f}", xm=f"{xx['diagonal margin']:+.2f}")
    if qk["diagonal share"] <= 0.5 * xx["diagonal share"]:
        diag = msg("{head} broke the diagonal: a query's own key is its top key for {s} of the queries, against {xs} "
                   "for x̂·x̂ᵀ (median margin {m} against {xm} standard deviations).", **args)
    elif qk["diagonal share"] < xx["diagonal share"] or qk["diagonal margin"] < xx["diagonal margin"]:
        diag = msg("{head} weakened the diagonal without breaking it: own key on top for {s} of the queries against "
                   "{xs}, by a median margin of {m} against {xm} standard deviations.", **args)
    else:
        diag = msg("{head} kept the diagonal: own key on top for {s} of the queries, as for x̂·x̂ᵀ ({xs}), by a median "
                   "margin of {m} against {xm} standard deviations. Separate projections make breaking it possible, "
                   "not necessary: this head learned to look at the token itself.", **args)
    keep = [h for h, v in shares.items() if v > 0.5]
    layer = msg("In this layer {k} of {n} heads have their own key on top for more than half the queries{names}.",
                k=len(keep), n=len(shares), names=f" ({', '.join(keep)})" if keep else "")
    return join(sym, " ", diag, " ", layer)
