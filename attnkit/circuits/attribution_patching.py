"""Attribution patching: the first-order (gradient × activation difference) estimate of patching.

For an activation a of the receiving run and its value a' in the source run, patching changes the
logit difference by about ``(a' − a)·∂LD/∂a`` (Nanda 2023). One forward pass with gradients on the
receiving run, one backward pass from LD, and one plain forward pass on the source prompt give the
estimate for **every head at every position** (a = z) at once.

**Edge attribution patching** (Syed et al. 2023) does the same for every edge of the head/MLP graph
(see :mod:`attnkit.circuits.path` for the node names): the edge sender → receiver is scored
``Σ_t Δ_sender[t]·g_receiver[t]``, where Δ is the sender's output difference and g the gradient of LD
with respect to the stream the receiver reads *through that input only*: ∂LD/∂q_h (or k, v; the MLP's
normed input; the final norm's output), taken back through W_Q[h]ᵀ and the norm's Jacobian at the
receiving run's stream (:func:`attnkit.parts.norm_vjp`). Senders are the embedding, every head and every MLP; receivers every head's
q, k and v, every MLP and the logits.

Each estimate comes with the exact patched values beside it (:func:`attnkit.patching.patch` for
heads, :func:`attnkit.circuits.path.edge_effects` for edges) and their Spearman rank correlation
(:func:`spearman`, written here), so the approximation is never taken on faith.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..model import run
from ..parts import norm_vjp   # the norm's Jacobian, one definition with the norm kinds
from ..patching import Pair, PatchError, logit_diffs, patch, two_token_weights
from ..progress import Progress, Steps
from ..standard import head_name
from ..weights import Weights
from .path import Runs, cache_runs, edge_effects, parse_node, precedes, receiver_names, sender_names, sender_output

__all__ = ["spearman", "rank", "Gradients", "gradients", "HeadAttribution", "head_attribution",
           "EdgeAttribution", "edge_attribution", "norm_vjp", "receiver_grads", "integrated_receiver_grads",
           "versus_exact", "EXACT_TOP", "exact_edge_count", "TIE_REL"]

_RUN = getattr(run, "__wrapped__", run)        # model.run without its inference_mode: a gradient path


#: Values closer than this share of the largest |value| are one tie when ranking: float32 batching noise
#: (±6e-6 on attnkit-tiny's logit differences of ~2) must not break the exact ties of cells a patch cannot
#: change (positions before the first changed token), which would set the correlation by noise.
TIE_REL = 1e-5


def rank(x, tol: float = 0.0) -> np.ndarray:
    """Ranks 1…n, ties given their average rank; values within ``tol`` of a tie group's smallest are tied."""
    x = np.asarray(x, dtype=np.float64).ravel()
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] - xs[i] <= tol:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a, b, tie_rel: float = TIE_REL) -> float:
    """Spearman's rank correlation (Pearson's on the ranks; ties averaged, values within ``tie_rel`` of the
    largest |value| tied: see :data:`TIE_REL`). NaN pairs dropped."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    tol = (lambda v: tie_rel * float(np.abs(v).max()) if len(v) else 0.0)     # noqa: E731
    ra, rb = rank(a, tol(a)), rank(b, tol(b))
    if ok.sum() < 2:
        return float("nan")
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra ** 2).sum() * (rb ** 2).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


@dataclass
class Gradients:
    """One forward + one backward on the receiving run: LD and ∂LD/∂(each hooked activation)."""

    ld: float
    values: dict          # (point, layer) -> activation [T, …] of the receiving run
    grads: dict           # (point, layer) -> ∂LD/∂activation


def gradients(w2: Weights, ids: list[int], pos: int, points=("z",), resid0: torch.Tensor | None = None,
              capture=()) -> Gradients:
    """``w2``: two-token weights (answer, distractor). Adds a zero leaf at each of ``points`` in every layer
    (q, k, v, z, ln2 per layer; ln_final) so the backward pass leaves LD's gradient there. ``resid0``
    [T, d]: the first block's input in place of the embedding (e.g. an interpolated one); ``capture``:
    further points whose values are kept (detached) in ``values``."""
    leaves, values = {}, {}

    def hook(name):
        def f(t, layer):
            values[(name, layer)] = t.detach()[0]
            leaf = torch.zeros_like(t, requires_grad=True)
            leaves[(name, layer)] = leaf
            return t + leaf
        return f

    hooks = {p: hook(p) for p in points}
    start = {} if resid0 is None else {"start": 0, "resid": resid0[None].clone()}
    with torch.inference_mode(False), torch.enable_grad():
        tr = _RUN(w2, ids, hooks=hooks, capture=list(capture) or None, **start)
        ld = logit_diffs(tr.logits, pos)[0]
        keys = list(leaves)
        grads = torch.autograd.grad(ld, [leaves[k] for k in keys], allow_unused=True)
    out = {k: (torch.zeros_like(values[k]) if g is None else g[0].detach()) for k, g in zip(keys, grads)}
    values.update({k: v.detach()[0] for k, v in tr.captures.items()})
    return Gradients(float(ld.detach()), values, out)


@dataclass
class HeadAttribution:
    direction: str
    estimate: np.ndarray           # [L, H, T] estimated patched logit difference
    exact: np.ndarray | None       # [L, H, T] patched logit difference (patching.patch), when computed
    clean_ld: float
    corrupt_ld: float
    notes: list[str] = field(default_factory=list)

    @property
    def spearman(self) -> float:
        return float("nan") if self.exact is None else spearman(self.estimate, self.exact)

    def frame(self):
        L, H, T = self.estimate.shape
        idx = np.indices((L, H, T)).reshape(3, -1)
        df = pd.DataFrame({"layer": idx[0], "head": idx[1], "position": idx[2],
                           "estimate": self.estimate.ravel()})
        df.insert(0, "name", [head_name(int(l), int(h)) for l, h in zip(idx[0], idx[1])])
        if self.exact is not None:
            df["exact"] = self.exact.ravel()
        return df


def head_attribution(weights: Weights, pair: Pair, direction: str = "denoise", exact: bool = True,
                     runs: Runs | None = None, progress: Progress | None = None) -> HeadAttribution:
    """Attribution patching of every head's z at every position (patched LD estimates, [L, H, T]): one
    plain forward on the source prompt, one forward with gradients and one backward on the receiving one.
    ``exact``: also every head × position patched for real (``progress(done, total)`` counts those runs)."""
    if direction not in ("denoise", "noise"):
        raise PatchError(f"unknown direction {direction!r}; choose denoise or noise")
    w2 = runs.w2 if runs is not None else two_token_weights(weights, pair.answer, pair.distractor)
    recv_ids, src_ids = (pair.corrupt, pair.clean) if direction == "denoise" else (pair.clean, pair.corrupt)
    gr = gradients(w2, recv_ids, pair.pos, ("z",))
    with torch.inference_mode():
        src = run(w2, src_ids, capture=["z"])
    src_ld = float(logit_diffs(src.logits, pair.pos)[0])
    L = weights.config.n_layers
    est = np.stack([((src["z", l][0] - gr.values[("z", l)]) * gr.grads[("z", l)]).double().sum(-1).cpu().numpy()
                    for l in range(L)]) + gr.ld
    ex = patch(weights, pair, "z", per_position=True, direction=direction, progress=progress).raw if exact else None
    clean_ld, corrupt_ld = (src_ld, gr.ld) if direction == "denoise" else (gr.ld, src_ld)
    return HeadAttribution(direction, est, ex, clean_ld, corrupt_ld, list(pair.notes))


def receiver_grads(w2: Weights, ids: list[int], pos: int, recv_cache: dict | None = None,
                   resid0: torch.Tensor | None = None) -> tuple[float, dict]:
    """{receiver node: ∂LD/∂(the stream it reads, through that input only) [T, d]} from one backward pass.
    ``resid0``: run from this first-block input instead of the embedding (the streams are then this run's);
    otherwise ``recv_cache`` holds the run's streams."""
    cfg = w2.config
    streams = ("resid_pre", "resid_mid", "resid_post") if resid0 is not None or recv_cache is None else ()
    gr = gradients(w2, ids, pos, ("q", "k", "v", "ln2", "ln_final"), resid0, streams)
    st = (lambda k: gr.values[k]) if streams else (lambda k: recv_cache[k][0])     # noqa: E731
    out = {}
    for l, lw in enumerate(w2.layers):
        x = st(("resid_pre", l))
        for inp, W in (("q", lw.W_Q), ("k", lw.W_K), ("v", lw.W_V)):
            g = gr.grads[(inp, l)]                                          # [H or H_kv, T, e]
            gx = norm_vjp(x, torch.einsum("hte,hde->htd", g.double(), W.double()), lw.ln1_w, cfg)
            for h in range(cfg.n_heads):
                out[(inp, l, h)] = gx[h if inp == "q" else h // cfg.group]
        x2 = x if cfg.parallel else st(("resid_mid", l))
        out[("mlp", l)] = norm_vjp(x2, gr.grads[("ln2", l)], lw.ln2_w, cfg)
    xf = st(("resid_post", cfg.n_layers - 1))
    out[("logits",)] = norm_vjp(xf, gr.grads[("ln_final", None)], w2.lnf_w, cfg)
    return gr.ld, out


def integrated_receiver_grads(w2: Weights, ids: list[int], pos: int, recv_cache: dict, delta0: torch.Tensor,
                              steps: int) -> tuple[float, dict]:
    """Receiver gradients averaged along the straight line from the receiving run's embedding e to
    e + ``delta0`` (EAP-IG, Hanna et al. 2024): at α = (k + ½)/steps, k = 0 … steps − 1; ``steps`` = 1 is
    the receiving run itself (α = 0, plain edge attribution). Returns (the receiving run's LD, gradients)."""
    if steps == 1:
        return receiver_grads(w2, ids, pos, recv_cache)
    e = recv_cache[("resid_pre", 0)][0]
    total: dict = {}
    for k in range(steps):
        _, g = receiver_grads(w2, ids, pos, resid0=e + (k + 0.5) / steps * delta0)
        for r, v in g.items():
            total[r] = v / steps if r not in total else total[r] + v / steps
    ld = float(logit_diffs(run(w2, ids).logits, pos)[0])
    return ld, total


@dataclass
class EdgeAttribution:
    senders: list[str]
    receivers: list[str]
    scores: np.ndarray              # [S, R] estimated change of LD when the edge is patched; NaN if no edge
    direction: str
    receiving_ld: float             # the receiving run's LD (estimates are changes from it)
    exact: np.ndarray | None = None  # [S, R] exact change (edge_effects − receiving LD), when computed
    notes: list[str] = field(default_factory=list)

    @property
    def spearman(self) -> float:
        return float("nan") if self.exact is None else spearman(self.scores, self.exact)

    def edges(self) -> list[tuple[str, str, float]]:
        """(sender, receiver, score) for every edge, largest |score| first."""
        ii, jj = np.nonzero(np.isfinite(self.scores))
        out = [(self.senders[i], self.receivers[j], float(self.scores[i, j])) for i, j in zip(ii, jj)]
        return sorted(out, key=lambda e: -abs(e[2]))

    def frame(self):
        rows = []
        for i, j in zip(*np.nonzero(np.isfinite(self.scores))):
            row = {"sender": self.senders[i], "receiver": self.receivers[j], "estimate": float(self.scores[i, j])}
            if self.exact is not None:
                row["exact"] = float(self.exact[i, j])
            rows.append(row)
        return pd.DataFrame(rows)


def edge_attribution(weights: Weights, pair: Pair, direction: str = "noise", *, deltas: dict | None = None,
                     mlps: bool = True, exact: bool = False, runs: Runs | None = None,
                     steps: int = 1, progress: Progress | None = None,
                     exact_top: int | None = None) -> EdgeAttribution:
    """Edge attribution patching over the head/MLP graph. ``deltas`` (optional): {sender node: Δ [T, d]}
    replacing (source − receiving run), e.g. a mean ablation. ``steps`` > 1: the gradients are averaged
    along the line from the receiving run's embedding to the embedding plus its Δ (integrated gradients
    over the input, :func:`integrated_receiver_grads`); 1: at the receiving run only. With ``exact``,
    ``progress(done, total)`` counts the exact patched runs (one per edge), on every edge or, with
    ``exact_top`` = k, on the k edges of largest |estimate| only (the others' exact value stays NaN)."""
    if not isinstance(steps, int) or steps < 1:
        raise PatchError(f"steps must be a whole number ≥ 1, got {steps!r}")
    cfg = weights.config
    runs = runs or cache_runs(weights, pair)
    recv_c, src_c, ids = runs.side(direction)
    S_names, R_names = sender_names(cfg, mlps), receiver_names(cfg, mlps)
    S_nodes = [parse_node(s, cfg) for s in S_names]
    R_nodes = [parse_node(r, cfg, "receiver") for r in R_names]
    delta = {s: deltas[s] if deltas is not None else sender_output(src_c, s) - sender_output(recv_c, s)
             for s in S_nodes}
    ld, g = integrated_receiver_grads(runs.w2, ids, pair.pos, recv_c, delta[("embed",)], steps)
    D = torch.stack([delta[s].double() for s in S_nodes])                    # [S, T, d]
    G = torch.stack([g[r] for r in R_nodes])                                  # [R, T, d]
    scores = torch.einsum("std,rtd->sr", D, G).cpu().numpy()
    ok = np.array([[precedes(s, r, cfg) for r in R_nodes] for s in S_nodes])
    scores[~ok] = np.nan
    ex = None
    if exact:
        ii, jj = _exact_edges(scores, ok, exact_top)
        vals = edge_effects(runs, [(S_nodes[i], R_nodes[j]) for i, j in zip(ii, jj)], direction,
                            deltas=deltas, progress=progress)
        ex = np.full(scores.shape, np.nan)
        ex[ii, jj] = vals - ld
    notes = list(pair.notes) + ([f"gradients averaged over {steps} points between the receiving run's "
                                 "embedding and the ablated one (integrated gradients)"] if steps > 1 else [])
    if exact and exact_top is not None and exact_top < int(ok.sum()):
        notes.append(f"exact patching on the {exact_top:,} edges of largest |estimate| of {int(ok.sum()):,}; "
                     "the Spearman correlation is over those (ask for every edge for the full comparison)")
    return EdgeAttribution(S_names, R_names, scores, direction, ld, ex, notes)



#: Edges compared with exact patching by default (those of largest |estimate|); None asks for every edge.
EXACT_TOP = 200


def _exact_edges(scores: np.ndarray, ok: np.ndarray, top: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(sender, receiver) indices of the edges to patch exactly: every edge, or the ``top`` of largest |score|."""
    ii, jj = np.nonzero(ok)
    if top is None or top >= len(ii):
        return ii, jj
    order = np.argsort(-np.abs(scores[ii, jj]), kind="stable")[: max(int(top), 0)]
    order.sort()
    return ii[order], jj[order]


def exact_edge_count(cfg, mlps: bool = True, top: int | None = EXACT_TOP) -> int:
    """Edges :func:`versus_exact` patches exactly: every edge of the graph, or ``top`` of them."""
    S = [parse_node(n, cfg) for n in sender_names(cfg, mlps)]
    R = [parse_node(n, cfg, "receiver") for n in receiver_names(cfg, mlps)]
    n = sum(precedes(s, r, cfg) for s in S for r in R)
    return n if top is None else min(n, int(top))


def versus_exact(weights: Weights, pair: Pair, mlps: bool = True, progress: Progress | None = None,
                 top: int | None = EXACT_TOP) -> tuple[HeadAttribution, EdgeAttribution]:
    """Attribution patching beside exact patching: every head × position (denoise) and the ``top`` edges of
    largest |estimate| of the head/MLP graph (noise; ``top=None``: every edge), each estimate with its exact
    patched value. ``progress(done, total)`` counts the exact patched runs of both (heads × positions up to
    the read position, then edges)."""
    cfg = weights.config
    head_runs = cfg.n_layers * cfg.n_heads * (pair.pos + 1)
    steps = Steps(progress, head_runs + exact_edge_count(cfg, mlps, top))
    ha = head_attribution(weights, pair, "denoise", progress=steps.part(0))
    ea = edge_attribution(weights, pair, "noise", mlps=mlps, exact=True, progress=steps.part(head_runs),
                          exact_top=top)
    return ha, ea
