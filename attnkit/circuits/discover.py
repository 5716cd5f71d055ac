"""Automatic circuit discovery: the top edges by edge attribution, checked by running the circuit.

1. Every edge of the head/MLP graph (:mod:`attnkit.circuits.path`) is scored by edge attribution
   patching with Δ = (ablated − clean) sender output
   (:func:`attnkit.circuits.attribution_patching.edge_attribution`), summed over the prompt set. The
   gradients are averaged over ``steps`` runs whose embedding moves from the clean one towards the
   ablated one (EAP-IG, Hanna et al. 2024): at the clean run alone (steps = 1, Syed et al. 2023) the
   first-order estimate misses edges whose effect only appears once others have changed (an induction
   head's keys matter only when the previous-token head's output has moved), and ranks such circuits'
   upstream edges too low to be kept.
2. Edges are ranked by |score|. A circuit of the top k edges is **run**: on the clean prompt, each
   receiver reads ``x − Σ_{senders s not in its circuit edges} (out_s − ablated_s)`` — every edge outside
   the circuit carries the sender's ablated output instead of its actual one, edges inside carry the
   actual output of this very run (which itself depends on what was ablated upstream).
3. faithfulness(k) = LD(circuit of k edges) / LD(clean), averaged over the prompt set as
   mean LD / mean clean LD. The circuit kept is the smallest k whose faithfulness reaches ``target``;
   the curve over k and the empty circuit's LD (every edge ablated) are reported beside it.

A share of the clean logit difference means something only on pairs the model solves
(:func:`attnkit.patching.solves`: LD(clean) > 0 ≥ LD(corrupted), a gap of at least ``MARGIN`` logits —
the same test that marks an example "(not solved)"). When any pair of the set is not solved (or every
edge ablated leaves the clean LD where it was) the result is *not solved*: its share, curve and
recovered fraction are undefined (NaN; ``None`` in JSON), no edge is kept and no circuit is claimed —
:data:`NO_SHARE` is what every front end shows in place of a number; the edges are still ranked.

Ablation: ``resample`` — a sender's output on the corrupted prompt of the same pair (with every edge
ablated this is exactly the corrupted run); ``mean`` — its output averaged over every position of the
pair's clean and corrupted prompts. Grouped-query attention: a key/value head reads one stream, so
its input keeps an edge when any query head of its group keeps it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from ..i18n import msg
from ..model import norm, run
from ..patching import MARGIN, MIN_GAP, Pair, PatchError, gap_note, logit_diffs, normalise, solves
from ..progress import Progress, Steps
from ..standard import parse_head
from ..weights import Weights
from .attribution_patching import edge_attribution
from .path import Runs, cache_runs, parse_node, precedes, receiver_names, sender_names, sender_output

__all__ = ["ABLATIONS", "STEPS", "NO_SHARE", "Circuit", "ablated_outputs", "circuit_logit_diffs", "discover"]

ABLATIONS = ("resample", "mean")
#: integrated-gradient points behind the edge ranking (EAP-IG). On attnkit-tiny's swapped-match prompt set
#: 1 point (plain EAP) ranks the logit-side edges first and needs hundreds of edges; 5 reach 80 % with tens.
STEPS = 5
#: What a front end shows in place of a circuit's share on pairs the model does not solve.
NO_SHARE = msg("not solved: no circuit share")


def ablated_outputs(runs: Runs, senders: list[tuple], ablation: str) -> dict:
    """{sender: the output [T, d] its ablated edges carry} for one pair."""
    if ablation not in ABLATIONS:
        raise PatchError(f"unknown ablation {ablation!r}; choose resample or mean")
    out = {}
    for s in senders:
        if ablation == "resample":
            out[s] = sender_output(runs.corrupt, s)
        else:
            both = torch.cat([sender_output(runs.clean, s), sender_output(runs.corrupt, s)])
            out[s] = both.mean(0, keepdim=True).expand(runs.pair.T, -1)
    return out


class _CircuitRun:
    """Hooks for a batch of circuits (row b: keep [S, R] bool) on the clean prompt. An edge is dropped when
    it is not kept and exists (a parallel block's MLP does not read its own layer's heads)."""

    def __init__(self, w: Weights, S: list[tuple], R: list[tuple], keep: torch.Tensor, abl: dict,
                 exists: torch.Tensor):
        self.w, self.cfg, self.S, self.R = w, w.config, S, R
        self.drop = (~keep & exists).to(w.dtype)                          # [B, S, R]
        self.abl = torch.stack([abl[s] for s in S]).to(w.dtype)           # [S, T, d]
        self.s_index = {s: i for i, s in enumerate(S)}
        self.r_index = {r: j for j, r in enumerate(R)}
        B, (_, T, d) = keep.shape[0], self.abl.shape
        self.D = torch.zeros(B, len(S), T, d, dtype=w.dtype, device=w.device)   # out_s − abl_s, filled in order
        self.n = 0                                                        # senders written so far (a prefix)
        self.stream: dict = {}
        self.qkv: dict = {}

    def _write(self, s: tuple, out: torch.Tensor) -> None:
        i = self.s_index.get(s)
        if i is None:                       # not a sender here (an MLP when MLPs are not nodes): part of the stream
            return
        self.D[:, i] = out - self.abl[i]
        self.n = max(self.n, i + 1)

    def _correction(self, recvs: list[tuple]) -> torch.Tensor:
        """Σ_s drop[b, s, r]·(out_s − abl_s) for each receiver: [B, len(recvs), T, d]."""
        B, n, (_, T, d) = self.D.shape[0], self.n, self.abl.shape
        cols = [self.r_index.get(r) for r in recvs]         # None: not a receiver here (a GQA group's other
        M = self.drop[:, :n][:, :, [c or 0 for c in cols]]  # k/v heads, an MLP when MLPs are not nodes)
        M = M * torch.tensor([c is not None for c in cols], dtype=M.dtype, device=M.device)      # [B, n, R']
        return torch.bmm(M.transpose(1, 2), self.D[:, :n].reshape(B, n, T * d)).view(B, len(recvs), T, d)

    def _inputs(self, name: str, l: int) -> torch.Tensor:
        """The stream each head's q/k/v reads in layer l, [B, H, T, d] (computed once for q, k and v)."""
        if ("q", l) not in self.qkv:
            H = self.cfg.n_heads
            C = self._correction([(i, l, h) for i in ("q", "k", "v") for h in range(H)])
            x = self.stream[("pre", l)][:, None] - C
            self.qkv = {(i, l): x[:, j * H:(j + 1) * H] for j, i in enumerate(("q", "k", "v"))}
        return self.qkv[(name, l)]

    def hooks(self) -> dict:
        cfg, w = self.cfg, self.w
        H, g = cfg.n_heads, cfg.group

        def resid_pre(t, l):
            self.stream[("pre", l)] = t
            if l == 0:
                self._write(("embed",), t)

        def head_out(t, l):
            for h in range(H):
                self._write(("head", l, h), t[:, h])

        def qkv(name):
            def f(t, l):
                lw = w.layers[l]
                x_hat = norm(self._inputs(name, l), lw.ln1_w, lw.ln1_b, cfg)           # [B, H, T, d]
                W, b = {"q": (lw.W_Q, lw.b_Q), "k": (lw.W_K, lw.b_K), "v": (lw.W_V, lw.b_V)}[name]
                if name != "q" and g > 1:                  # one stream per key/value head: a kept edge wins
                    x_hat = x_hat[:, ::g]
                out = torch.einsum("bhtd,hde->bhte", x_hat, W)
                return out if b is None else out + b[None, :, None]
            return f

        def ln2(t, l):
            lw = w.layers[l]
            x = self.stream[("pre" if cfg.parallel else "mid", l)] - self._correction([("mlp", l)])[:, 0]
            return norm(x, lw.ln2_w, lw.ln2_b, cfg)

        def ln_final(t, l):
            x = self.stream[("post", cfg.n_layers - 1)] - self._correction([("logits",)])[:, 0]
            return norm(x, w.lnf_w, w.lnf_b, cfg)

        return {"resid_pre": resid_pre, "head_out": head_out, "mlp_out": lambda t, l: self._write(("mlp", l), t),
                "q": qkv("q"), "k": qkv("k"), "v": qkv("v"),
                "resid_mid": lambda t, l: self.stream.__setitem__(("mid", l), t),
                "resid_post": lambda t, l: self.stream.__setitem__(("post", l), t), "ln2": ln2,
                "ln_final": ln_final}


@torch.inference_mode()
def circuit_logit_diffs(runs: Runs, S: list[tuple], R: list[tuple], keep: torch.Tensor, abl: dict,
                        max_rows: int = 16, max_bytes: float = 2.5e8,
                        progress: Callable[[int], None] | None = None) -> np.ndarray:
    """LD on the clean prompt for each circuit (row of ``keep`` [B, S, R]), in batches whose stack of sender
    differences stays under ``max_bytes``; ``progress(rows)`` after each batch with the rows it ran."""
    keep = keep.to(runs.w2.device)
    exists = torch.tensor([[precedes(s, r, runs.w2.config) for r in R] for s in S], device=keep.device)
    out = []
    per_row = len(S) * runs.pair.T * runs.w2.config.d_model * runs.w2.wte.element_size()   # the sender stack
    max_rows = max(1, min(max_rows, int(max_bytes // per_row)))
    for i in range(0, keep.shape[0], max_rows):
        part = keep[i: i + max_rows]
        cr = _CircuitRun(runs.w2, S, R, part, abl, exists)
        ids = torch.tensor([runs.pair.clean], device=runs.w2.device).expand(part.shape[0], -1)
        out.append(logit_diffs(run(runs.w2, ids, hooks=cr.hooks()).logits, runs.pair.pos).cpu().numpy())
        if progress:
            progress(part.shape[0])
    return np.concatenate(out)


@dataclass
class Circuit:
    edges: list[tuple[str, str, float]]         # the kept edges (sender, receiver, attribution), best first
    ranked: list[tuple[str, str, float]]        # every edge, best first
    sizes: list[int]                            # the curve: number of edges …
    faithfulness: list[float]                   # … and LD(circuit) / LD(clean)
    clean_ld: float
    empty_ld: float                             # every edge ablated
    corrupt_ld: float
    circuit_ld: float
    target: float
    ablation: str
    n_pairs: int
    notes: list[str] = field(default_factory=list)
    unsolved: list[int] = field(default_factory=list)   # the pairs (1, 2, …) the model does not solve

    @property
    def size(self) -> int:
        return len(self.edges)

    @property
    def solved(self) -> bool:
        """Whether there is a share to measure: the model solves every pair (:func:`attnkit.patching.solves`) and
        ablating every edge moves the clean LD (:func:`solved`)."""
        return not self.unsolved and solved(self.clean_ld, self.empty_ld)

    @property
    def share(self) -> float:
        """LD(circuit) / LD(clean), NaN when the pairs are not solved (see :attr:`solved`)."""
        return float(normalise(self.circuit_ld, self.clean_ld, 0.0)) if self.solved else float("nan")

    def share_text(self) -> str:
        """The share as shown ("80.5 %"), or :data:`NO_SHARE` (in the reader's language) when not solved."""
        return f"{self.share:.1%}" if self.solved else str(NO_SHARE)

    @property
    def reached(self) -> bool:
        return bool(self.solved and self.share >= self.target)

    @property
    def recovered(self) -> float:
        """(LD(circuit) − LD(empty)) / (LD(clean) − LD(empty)): 0 with every edge ablated, 1 when clean; NaN when
        not solved."""
        return normalise(self.circuit_ld, self.clean_ld, self.empty_ld) if self.solved else float("nan")

    @property
    def heads(self) -> list[str]:
        """Heads on a kept edge (as sender or receiver), in layer order."""
        names = {e[0] for e in self.edges} | {e[1].split(".")[0] for e in self.edges}
        hs = [n for n in names if n.startswith("L")]
        return sorted(hs, key=parse_head)

    def curve_frame(self):
        return pd.DataFrame({"edges": self.sizes, "faithfulness": self.faithfulness})

    def to_json(self) -> dict:
        return {"edges": [{"sender": s, "receiver": r, "attribution": a} for s, r, a in self.edges],
                "size": self.size, "heads": self.heads, "curve": {"edges": self.sizes, "faithfulness": self.faithfulness},
                "clean_logit_diff": self.clean_ld, "empty_circuit_logit_diff": self.empty_ld,
                "corrupted_logit_diff": self.corrupt_ld, "circuit_logit_diff": self.circuit_ld,
                "faithfulness": self.share if np.isfinite(self.share) else None, "solved": self.solved,
                "unsolved_pairs": list(self.unsolved), "share_text": NO_SHARE if not self.solved else None,
                "recovered": self.recovered if np.isfinite(self.recovered) else None,
                "target": self.target, "reached": self.reached, "ablation": self.ablation, "pairs": self.n_pairs,
                "notes": self.notes}


def solved(clean: float, empty: float) -> bool:
    """A pair set discovery can measure shares on: LD(clean) ≥ MIN_GAP and LD(clean) − LD(empty) ≥ MIN_GAP."""
    return clean >= MIN_GAP and clean - empty >= MIN_GAP


def _notes(n_pairs: int, ablation: str, steps: int, clean: float, empty: float, unsolved: list, lds: list) -> list:
    how = (msg("integrated over {steps} points from the clean to the ablated embedding", steps=steps) if steps > 1
           else msg("at the clean run"))
    notes = [msg("{n} pair(s); edges ranked by |edge attribution| (Δ = {ablation}-ablated − clean output; gradients "
                 "{how}); faithfulness = LD(circuit) / LD(clean) with every other edge ablated", n=n_pairs,
                 ablation=ablation, how=how)]
    if unsolved:
        notes.append(msg("{no_share}: the model does not solve pair(s) {pairs} (LD clean / corrupted: {lds}; solved "
                         "means LD(clean) > 0 ≥ LD(corrupted) with a gap of at least {margin} logits), so no share of "
                         "the clean logit difference is reported and no circuit is claimed; the edges are still "
                         "ranked", no_share=NO_SHARE, pairs=", ".join(map(str, unsolved)), margin=f"{MARGIN:g}",
                         lds=", ".join(f"{c:+.2f} / {k:+.2f}" for c, k in (lds[i - 1] for i in unsolved))))
    elif not solved(clean, empty):
        notes.append(msg("{no_share}: LD(clean) {clean}, LD(every edge ablated) {empty} (the clean run must be "
                         "positive and above the ablated one), so no share of the clean logit difference is reported "
                         "and no circuit is claimed; the edges are still ranked", no_share=NO_SHARE,
                         clean=f"{clean:+.4f}", empty=f"{empty:+.4f}"))
    elif gap_note(clean, empty, "every-edge-ablated"):
        notes.append(gap_note(clean, empty, "every-edge-ablated"))
    return notes


def _n_edges(S: list[tuple], R: list[tuple], cfg) -> int:
    return sum(precedes(s, r, cfg) for s in S for r in R)


def _grid(n: int, points: int) -> list[int]:
    g = np.unique(np.round(np.geomspace(1, max(n, 1), points)).astype(int))
    return [0] + [int(x) for x in g]


def _keep(order: np.ndarray, shape: tuple, ks: list[int]) -> torch.Tensor:
    keep = torch.zeros((len(ks),) + shape, dtype=torch.bool)
    flat = keep.view(len(ks), -1)
    for b, k in enumerate(ks):
        flat[b, torch.as_tensor(order[:k], dtype=torch.long)] = True
    return keep


def _scores(weights: Weights, pairs: list[Pair], S, R, ablation: str, mlps: bool, steps: int, tick=None):
    """(summed edge attribution [S, R], per pair (runs, ablated outputs)); ``tick(runs)`` after each pair."""
    total, per = None, []
    for pr in pairs:
        runs = cache_runs(weights, pr)
        abl = ablated_outputs(runs, S, ablation)
        deltas = {s: abl[s] - sender_output(runs.clean, s) for s in S}
        ea = edge_attribution(weights, pr, "noise", deltas=deltas, mlps=mlps, runs=runs, steps=steps)
        total = ea.scores if total is None else total + ea.scores
        per.append((runs, abl))
        if tick:
            tick(_scoring_runs(steps))
    return total, per


def _scoring_runs(steps: int) -> int:
    """Forward-pass equivalents of scoring one pair's edges: its two cached runs and one forward + backward
    (≈ 2 forwards) per integrated-gradient point."""
    return 2 + 2 * steps


def discover(weights: Weights, pairs: Pair | list[Pair], target: float = 0.8, *, ablation: str = "resample",
             mlps: bool = True, points: int = 24, refine: int = 12, steps: int = STEPS,
             progress: Progress | None = None) -> Circuit:
    """The smallest top-k edge circuit (by |edge attribution|) whose faithfulness reaches ``target``.
    ``steps``: points of the integrated-gradients average behind the edge scores (1: plain edge attribution).
    ``progress(done, total)`` counts forward-pass equivalents: scoring each pair, then each circuit run (the
    total assumes the refinement runs; it jumps to done when none is needed)."""
    pairs = [pairs] if isinstance(pairs, Pair) else list(pairs)
    if not pairs:
        raise PatchError("no prompt pairs to discover a circuit on")
    if not 0 < target <= 1.5:
        raise PatchError(f"target share {target} must be in (0, 1.5]")
    cfg = weights.config
    S_names, R_names = sender_names(cfg, mlps), receiver_names(cfg, mlps)
    S = [parse_node(n, cfg) for n in S_names]
    R = [parse_node(n, cfg, "receiver") for n in R_names]
    total = len(pairs) * (_scoring_runs(steps) + len(_grid(_n_edges(S, R, cfg), points)) + refine)
    tick = Steps(progress, total).add
    scores, per = _scores(weights, pairs, S, R, ablation, mlps, steps, tick)
    ok = np.isfinite(scores)
    flat = np.where(ok, np.abs(scores), -1.0).ravel()
    order = np.argsort(-flat, kind="stable")[: int(ok.sum())]
    clean = float(np.mean([r.clean_ld for r, _ in per]))

    def faith(ks: list[int]) -> np.ndarray:
        keep = _keep(order, scores.shape, ks)
        lds = np.mean([circuit_logit_diffs(r, S, R, keep, a, progress=tick) for r, a in per], 0)
        return lds

    ks = _grid(len(order), points)
    lds = faith(ks)
    pair_lds = [(r.clean_ld, r.corrupt_ld) for r, _ in per]
    unsolved = [i for i, (c, k) in enumerate(pair_lds, 1) if not solves(c, k)]
    ok_gap = not unsolved and solved(clean, float(lds[0]))
    hit = [i for i, v in enumerate(lds) if ok_gap and v / clean >= target]
    if hit and hit[0] > 0 and ks[hit[0]] - ks[hit[0] - 1] > 1:
        lo, hi = ks[hit[0] - 1], ks[hit[0]]
        extra = sorted(set(int(x) for x in np.linspace(lo, hi, refine + 2)[1:-1]) - set(ks))
        if extra:
            ks, lds = ks + extra, np.concatenate([lds, faith(extra)])
            o = np.argsort(ks)
            ks, lds = [ks[i] for i in o], lds[o]
            hit = [i for i, v in enumerate(lds) if ok_gap and v / clean >= target]
    notes = _notes(len(pairs), ablation, steps, clean, float(lds[0]), unsolved, pair_lds)
    if hit:
        best = hit[0]
    elif not ok_gap:
        best = 0
    else:
        best = int(np.argmax(lds))
        notes.append(msg("no circuit reached {target} of the clean logit difference; the most faithful one ({best}) "
                         "is kept", target=f"{target:.0%}", best=f"{lds[best] / clean:.1%}"))
    fl = [(S_names[i // len(R)], R_names[i % len(R)], float(scores.ravel()[i])) for i in order]
    tick(total)
    shares = normalise(lds, clean, 0.0) if ok_gap else np.full(len(lds), np.nan)
    return Circuit(fl[: ks[best]], fl, ks, [float(v) for v in shares], clean,
                   float(lds[0]), float(np.mean([r.corrupt_ld for r, _ in per])), float(lds[best]), target, ablation,
                   len(pairs), notes, unsolved)
