"""Path patching: one sender's output changed for one receiver's input only.

Nodes of the head/MLP graph (named as everywhere: a head is ``L{l}H{h}``):

    senders     "embed" (token + position embedding), "L{l}H{h}" (the head's z_h·W_O[h]), "MLP{l}"
    receivers   "L{l}H{h}.q" / ".k" / ".v" (that head's query, key or value input), "MLP{l}" (its input),
                "logits" (the final norm's input)

An *edge* sender → receiver is patched by giving the receiver ``norm(x + Δ)`` where x is the stream it
reads in the receiving run and Δ = (sender's output in the source run) − (its output in the receiving
run), while every other reader of the stream sees x. Everything downstream of the receiver runs as
usual. With ``denoise`` the receiving run is the corrupted prompt and the source the clean one; with
``noise`` the reverse (as in :mod:`attnkit.patching`). Grouped-query attention: a ``.k``/``.v``
receiver is the key/value head its group shares (every query head of the group sees the change).

Cost: both prompts run once with their head outputs cached; patched runs start at the receiver's
block from the cached stream (``run(start=…, resid=…)``), many edges per batch (one per row), with
only the answer's and distractor's unembedding rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import attention
from ..i18n import msg
from ..model import norm, run
from ..patching import (DIRECTIONS, MAX_BATCH_TOKENS, Pair, PatchError, average, gap_note, logit_diffs, normalise,
                        two_token_weights)
from ..progress import Progress
from ..standard import NODE_INPUTS, node_name, split_node
from ..weights import Weights

__all__ = ["INPUTS", "Runs", "PathResult", "parse_node", "sender_names", "receiver_names", "precedes",
           "SOURCES", "cache_runs", "edge_effects", "mean_deltas", "node_name", "sender_output", "path_patch", "path_map", "path_map_many"]

INPUTS = NODE_INPUTS
CACHED = ["head_out", "mlp_out", "resid_pre", "resid_mid", "resid_post"]


def parse_node(name: str, cfg, role: str = "sender") -> tuple:
    """("embed",), ("head", l, h), ("mlp", l), ("q"|"k"|"v", l, h) or ("logits",); PatchError if unknown,
    not in the model, or not a ``role`` (the syntax is :func:`attnkit.standard.split_node`'s)."""
    name = str(name).strip()
    want = "embed, L{l}H{h} or MLP{l}" if role == "sender" else "L{l}H{h}.q/.k/.v, MLP{l} or logits"
    try:
        node = split_node(name)
    except ValueError:
        raise PatchError(f"unknown {role} {name!r}; use {want}") from None
    kind = node[0]
    if kind == "head" or kind in INPUTS:
        l, h = node[1], node[2]
        if not (0 <= l < cfg.n_layers and 0 <= h < cfg.n_heads):
            raise PatchError(f"{name}: the model has layers 0…{cfg.n_layers - 1} and heads 0…{cfg.n_heads - 1}")
        if role == "receiver" and kind == "head":
            raise PatchError(f"receiver {name}: say which input, e.g. {name}.k (q, k or v)")
        if role == "sender" and kind != "head":
            raise PatchError(f"sender {name}: a sender is a head's whole output; drop the .{kind}")
        return node
    if kind == "mlp":
        if not 0 <= node[1] < cfg.n_layers:
            raise PatchError(f"{name}: the model has layers 0…{cfg.n_layers - 1}")
        return node
    if (kind, role) in (("embed", "sender"), ("logits", "receiver")):
        return node
    raise PatchError(f"unknown {role} {name!r}; use {want}")


def _read_layer(recv: tuple, cfg) -> float:
    """Where a receiver reads: heads at l, MLPs at l + ½ (l for parallel blocks), logits at L."""
    if recv[0] == "logits":
        return cfg.n_layers
    if recv[0] == "mlp":
        return recv[1] + (0 if cfg.parallel else 0.5)
    return recv[1]


def _write_layer(send: tuple) -> float:
    return -1 if send[0] == "embed" else send[1] + (0.5 if send[0] == "mlp" else 0)


def precedes(send: tuple, recv: tuple, cfg) -> bool:
    """Whether ``send``'s output is in the stream ``recv`` reads."""
    return _write_layer(send) < _read_layer(recv, cfg)


def sender_names(cfg, mlps: bool = True) -> list[str]:
    out = ["embed"]
    for l in range(cfg.n_layers):
        out += [node_name(("head", l, h)) for h in range(cfg.n_heads)] + ([node_name(("mlp", l))] if mlps else [])
    return out


def receiver_names(cfg, mlps: bool = True) -> list[str]:
    """Every receiving input, each once: under grouped-query attention a group of ``cfg.group`` query heads
    shares one key/value head, so its .k and .v inputs are listed once, under the group's first query head."""
    g = getattr(cfg, "group", 1) or 1
    out = []
    for l in range(cfg.n_layers):
        out += [node_name((i, l, h)) for h in range(cfg.n_heads) for i in INPUTS if i == "q" or h % g == 0]
        out += [node_name(("mlp", l))] if mlps else []
    return out + ["logits"]


@dataclass
class Runs:
    """Both prompts' cached runs (two-token weights) and their logit differences."""

    w2: Weights
    pair: Pair
    clean: dict
    corrupt: dict
    clean_ld: float
    corrupt_ld: float

    def side(self, direction: str) -> tuple[dict, dict, list[int]]:
        """(receiving cache, source cache, receiving ids)."""
        if direction not in DIRECTIONS:
            raise PatchError(f"unknown direction {direction!r}; choose denoise or noise")
        return (self.corrupt, self.clean, self.pair.corrupt) if direction == "denoise" else \
            (self.clean, self.corrupt, self.pair.clean)


def cache_runs(weights: Weights, pair: Pair) -> Runs:
    w2 = two_token_weights(weights, pair.answer, pair.distractor)
    out = []
    for ids in (pair.clean, pair.corrupt):
        tr = run(w2, ids, capture=CACHED)
        out.append((tr.captures, float(logit_diffs(tr.logits, pair.pos)[0])))
    return Runs(w2, pair, out[0][0], out[1][0], out[0][1], out[1][1])


def sender_output(cache: dict, send: tuple) -> torch.Tensor:
    """A sender's output [T, d] in a cached run."""
    if send[0] == "embed":
        return cache[("resid_pre", 0)][0]
    if send[0] == "head":
        return cache[("head_out", send[1])][0, send[2]]
    return cache[("mlp_out", send[1])][0]


def _stream(cache: dict, recv: tuple, cfg, L: int) -> torch.Tensor:
    """The stream [T, d] a receiver reads in a cached run."""
    if recv[0] == "logits":
        return cache[("resid_post", L - 1)][0]
    if recv[0] == "mlp" and not cfg.parallel:
        return cache[("resid_mid", recv[1])][0]
    return cache[("resid_pre", recv[1])][0]


def _hooks(w: Weights, rows: list[tuple], recv_cache: dict, layer: int) -> dict:
    """Hooks writing each row's patched receiver input (rows: (receiver, Δ [T, d])) in block ``layer``."""
    cfg, lw = w.config, w.layers[layer]
    by_point: dict = {}
    for b, (recv, delta) in enumerate(rows):
        by_point.setdefault("ln2" if recv[0] == "mlp" else recv[0], []).append((b, recv, delta))

    def make(point, items):
        def hook(t, l):
            if l != layer:
                return None
            t = t.clone()
            for b, recv, delta in items:
                x = _stream(recv_cache, recv, cfg, cfg.n_layers) + delta
                if point == "ln2":
                    t[b] = norm(x, lw.ln2_w, lw.ln2_b, cfg)
                    continue
                g = recv[2] if point == "q" else recv[2] // cfg.group
                W, bias = {"q": (lw.W_Q, lw.b_Q), "k": (lw.W_K, lw.b_K), "v": (lw.W_V, lw.b_V)}[point]
                x_hat = norm(x, lw.ln1_w, lw.ln1_b, cfg)
                t[b, g] = attention.project(x_hat, W[g:g + 1], None if bias is None else bias[g:g + 1])[0]
            return t
        return hook

    return {p: make(p, items) for p, items in by_point.items()}


def _run_rows(w2: Weights, recv_cache: dict, ids: list[int], rows: list[tuple], pos: int) -> torch.Tensor:
    """Logit differences [len(rows)] with row b's edge patched; rows all read in the same block."""
    cfg = w2.config
    L = cfg.n_layers
    n, dev = len(rows), w2.device
    ids_t = torch.tensor([ids], device=dev)
    if rows[0][0][0] == "logits":
        resid = torch.stack([_stream(recv_cache, r, cfg, L) + d for r, d in rows])
        return logit_diffs(run(w2, ids_t, start=L, resid=resid).logits, pos)
    layer = rows[0][0][1]
    resid = recv_cache[("resid_pre", layer)].expand(n, -1, -1)
    tr = run(w2, ids_t, start=layer, resid=resid, hooks=_hooks(w2, rows, recv_cache, layer))
    return logit_diffs(tr.logits, pos)


def edge_effects(runs: Runs, edges: list[tuple[tuple, tuple]], direction: str = "denoise",
                 deltas: dict | None = None, max_batch_tokens: int = MAX_BATCH_TOKENS,
                 progress: Progress | None = None) -> np.ndarray:
    """Patched logit differences, one per (sender, receiver) edge (parsed nodes). ``deltas`` (optional)
    maps a sender to its Δ [T, d] instead of (source − receiving run). ``progress(done, total)`` is called
    after each batch of patched runs (edges done of all)."""
    cfg = runs.w2.config
    recv_c, src_c, ids = runs.side(direction)
    for s, r in edges:
        if not precedes(s, r, cfg):
            raise PatchError(f"{node_name(s)} does not write into what {node_name(r)} reads (it is not earlier)")
    out = np.full(len(edges), np.nan)
    groups: dict = {}
    for i, (s, r) in enumerate(edges):
        groups.setdefault(cfg.n_layers if r[0] == "logits" else r[1], []).append(i)
    chunk = max(1, max_batch_tokens // runs.pair.T)
    done = 0
    for _, idx in sorted(groups.items()):
        for c in range(0, len(idx), chunk):
            part = idx[c: c + chunk]
            rows = []
            for i in part:
                s, r = edges[i]
                d = deltas[s] if deltas is not None else sender_output(src_c, s) - sender_output(recv_c, s)
                rows.append((r, d))
            out[part] = _run_rows(runs.w2, recv_c, ids, rows, runs.pair.pos).cpu().numpy()
            done += len(part)
            if progress:
                progress(done, len(edges))
    return out


@dataclass
class PathResult:
    senders: list[str]
    receiver: str
    direction: str
    raw: np.ndarray                   # patched logit difference per sender
    clean_ld: float
    corrupt_ld: float
    notes: list[str] = field(default_factory=list)

    @property
    def normalised(self) -> np.ndarray:
        return normalise(self.raw, self.clean_ld, self.corrupt_ld)

    @property
    def change(self) -> np.ndarray:
        """Patched − unpatched logit difference (the receiving run's)."""
        base = self.corrupt_ld if self.direction == "denoise" else self.clean_ld
        return self.raw - base

    def frame(self):
        return pd.DataFrame({"sender": self.senders, "receiver": self.receiver, "logit_diff": self.raw,
                             "change": self.change, "normalised": self.normalised})

    def to_json(self) -> dict:
        fin = (lambda a: [float(x) if np.isfinite(x) else None for x in a])   # noqa: E731
        return {"receiver": self.receiver, "direction": self.direction, "senders": self.senders,
                "clean_logit_diff": self.clean_ld, "corrupted_logit_diff": self.corrupt_ld,
                "logit_diff": fin(self.raw), "change": fin(self.change), "normalised": fin(self.normalised),
                "notes": self.notes}


SOURCES = ("pair", "mean")


def mean_deltas(recv_cache: dict, senders: list[tuple]) -> dict:
    """Δ for ``source="mean"``: each sender's output averaged over the positions of the receiving run,
    minus its output there (mean ablation of the sender, for that receiver only)."""
    out = {}
    for s in senders:
        o = sender_output(recv_cache, s)
        out[s] = o.mean(0, keepdim=True) - o
    return out


def path_patch(weights: Weights, pair: Pair, sender: str, receiver: str, direction: str = "denoise",
               source: str = "pair", runs: Runs | None = None) -> PathResult:
    """One edge: ``sender`` (e.g. "L2H1") → ``receiver`` (e.g. "L3H0.k")."""
    return path_map(weights, pair, receiver, direction, senders=[sender], source=source, runs=runs)


def path_map(weights: Weights, pair: Pair, receiver: str, direction: str = "denoise", *,
             senders: list[str] | None = None, mlps: bool = False, source: str = "pair",
             runs: Runs | None = None, progress: Progress | None = None) -> PathResult:
    """Every sender earlier than ``receiver`` (heads; MLPs and the embedding with ``mlps``) patched
    into that one input, one sender at a time. ``source``: "pair" (the sender's output in the other
    prompt's run) or "mean" (its output averaged over the receiving run's positions). ``progress(done,
    total)``: senders patched so far."""
    cfg = weights.config
    if source not in SOURCES:
        raise PatchError(f"unknown source {source!r}; choose pair or mean")
    r = parse_node(receiver, cfg, "receiver")
    if senders is None:
        senders = [n for n in sender_names(cfg, mlps) if (mlps or n.startswith("L"))
                   and precedes(parse_node(n, cfg), r, cfg)]
    parsed = [parse_node(s, cfg) for s in senders]
    runs = runs or cache_runs(weights, pair)
    deltas = mean_deltas(runs.side(direction)[0], parsed) if source == "mean" else None
    raw = edge_effects(runs, [(s, r) for s in parsed], direction, deltas, progress=progress) if parsed \
        else np.zeros(0)
    notes = list(pair.notes)
    if source == "mean":
        notes.append(msg("source = mean: each sender's output replaced (for the receiver only) by its mean over the "
                         "receiving run's positions; the normalised scale still uses the clean/corrupted runs"))
    if cfg.group > 1 and r[0] in ("k", "v"):
        notes.append(msg("grouped-query attention: {receiver} is the key/value head shared by its group of {n} query "
                         "heads", receiver=receiver, n=cfg.group))
    if gap_note(runs.clean_ld, runs.corrupt_ld):
        notes.append(gap_note(runs.clean_ld, runs.corrupt_ld))
    return PathResult(list(senders), node_name(r), direction, raw, runs.clean_ld, runs.corrupt_ld, notes)


def path_map_many(weights: Weights, pairs: list[Pair], receiver: str, direction: str = "denoise",
                  mlps: bool = False, source: str = "pair", senders: list[str] | None = None) -> dict:
    """Normalised path maps over a prompt set: {"senders", "mean", "std", "n", "per_pair"}."""
    res = [path_map(weights, p, receiver, direction, mlps=mlps, source=source, senders=senders) for p in pairs]
    stack = np.stack([r.normalised for r in res])
    avg = average(stack)
    return {"senders": res[0].senders, "mean": avg.mean, "std": avg.std, "n": len(pairs), "per_pair": stack}
