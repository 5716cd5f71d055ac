"""Calibration: every explanation method run on the planted-circuit models and scored against the circuit
stated in their ``CIRCUIT.json`` (the ground truth, known by construction; see attnkit/dev/planted.py).

A *method* is one function in :data:`METHODS` (``fn(ctx) -> list[Row]``); adding one is one function and
one registration. Each row carries a value and a verdict: ``pass``/``miss``, the effect size behind it,
and the reason. Prompt pairs are built from token ids (the planted tokenizer is ``t0 … t39``): the
clean prompt shows the behaviour, the corrupted one is the same structure on fresh random tokens, the
answer is the clean prompt's next token and the distractor the corrupted prompt's, so every edge of the
stated circuit carries a difference. Patching runs ``noise`` (clean receiving, corrupted source): a
planted edge is *necessary*, and noise shows necessity one edge at a time.

Scores:
    head statistics       planted previous-token / induction heads are the top heads of that statistic
    composition           planted head→head edges above the random baseline's 99th percentile; their rank
    activation patching   planted heads are the top heads by |patched − clean| (noise, whole head)
    attribution patching  the same from the gradient estimate
    path patching         for each stated edge, its sender is among the top senders into that receiver
    edge attribution      ROC AUC of |score| against the stated edge set (plain: gradients at the clean run)
    EAP-IG                the same, gradients integrated over 5 points
    discovery             recall of the required stated edges (an optional or negative edge left out is not
                          a miss), precision of the kept edges; faithfulness of the kept circuit
    stated circuit        faithfulness of the stated edges alone (every other edge resample-ablated), and of
                          the required edges alone when some are optional or negative
    score terms           "why this key": the key side of a planted head's score comes from the stated sender
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import metrics
from .circuits.attribution_patching import edge_attribution, head_attribution, rank
from .circuits.compose import composition
from .circuits.discover import ablated_outputs, circuit_logit_diffs, discover
from .circuits.path import cache_runs, parse_node, path_map, receiver_names, sender_names
from .i18n import Message, msg
from .model import run
from .patching import Pair, patch
from .planted_files import ROLE_LABELS, ModelCard, StatedCircuit, planted_folder, read_card, read_circuit
from .score_terms import score_terms
from .standard import head_name, node_name, parse_head, split_node
from .weights import Weights

__all__ = ["Row", "Context", "METHODS", "StatedCircuit", "ModelCard", "read_circuit", "planted_folder", "read_card",
           "make_pairs", "pair_words", "planted_word", "roc_auc", "compare_circuits", "edge_marks", "marked_edges",
           "calibrate_model",
           "calibrate", "report"]


@dataclass
class Row:
    """One score of a method: ``method`` (its name in :data:`METHODS`), ``metric`` and ``verdict`` (messages:
    English as str, shown in the reader's language), and the value."""
    method: str
    metric: str
    value: float | None
    verdict: str

    def to_json(self) -> dict:
        """The row as JSON values (the messages as their English text: what a report card file holds); the
        language-aware messages stay reachable through :func:`report` on the rows themselves."""
        v = None if self.value is None or not np.isfinite(self.value) else float(self.value)
        return {"method": self.method, "metric": self.metric, "value": v, "verdict": self.verdict}


def _verdict(ok: bool, text: Message) -> Message:
    """"pass: …" or "miss: …" (the pass/miss word first, as the tests and the report card read it)."""
    return msg("pass: {why}", why=text) if ok else msg("miss: {why}", why=text)


@dataclass
class Context:
    name: str
    weights: Weights
    circuit: StatedCircuit
    pairs: list[Pair]
    notes: list[str] = field(default_factory=list)

    @property
    def heads(self) -> list[str]:
        return list(self.circuit.heads)

    @property
    def edges(self) -> set[tuple[str, str]]:
        return set(self.circuit.edges)

    def labels(self) -> list[str]:
        cfg = self.weights.config
        return [head_name(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)]


def _sequence(task: str, T: int, vocab: int, gen: torch.Generator, shift: int) -> tuple[list[int], int]:
    """(ids, the next token) for one prompt of ``task``: distinct random tokens; for induction the last
    token repeats an earlier one and the answer is what followed it; for successor the answer is the
    token two back shifted by the circuit's ``shift``."""
    ids = torch.randperm(vocab, generator=gen)[:T].tolist()
    if task == "induction":
        m = int(torch.randint(1, T - 3, (1,), generator=gen))
        ids[-1] = ids[m]
        return ids, ids[m + 1]
    return ids, (ids[-3] + shift) % vocab


def make_pairs(circuit: StatedCircuit, n: int = 4, T: int = 16, vocab: int | None = None,
               seed: int = 0) -> list[Pair]:
    """``n`` clean/corrupted pairs of the circuit's task (answer: clean's next token; distractor: corrupted's),
    drawn from the circuit's vocabulary unless ``vocab`` is given."""
    gen = torch.Generator().manual_seed(seed)
    vocab = circuit.vocab if vocab is None else vocab
    out = []
    while len(out) < n:
        clean, a = _sequence(circuit.task, T, vocab, gen, circuit.shift)
        corrupt, d = _sequence(circuit.task, T, vocab, gen, circuit.shift)
        if a != d:
            out.append(Pair(clean, corrupt, a, d, T - 1))
    return out


def planted_word(i: int) -> str:
    """The word of token id ``i`` in the planted models' word-level tokenizer (``t0``, ``t1``, …): the one
    definition, used by attnkit/dev/planted when it writes the tokenizer and by :func:`pair_words`."""
    return f"t{int(i)}"


def pair_words(pair: Pair) -> dict[str, str]:
    """A planted pair as the texts the planted tokenizer reads (token id i is :func:`planted_word`'s ``t{i}``):
    {"clean", "corrupt", "answer", "distractor"}."""
    def words(ids) -> str:
        return " ".join(planted_word(i) for i in ids)

    return {"clean": words(pair.clean), "corrupt": words(pair.corrupt), "answer": words([pair.answer]),
            "distractor": words([pair.distractor])}


def roc_auc(scores, positive) -> float:
    """ROC AUC of ``scores`` for the boolean ``positive`` labels (Mann–Whitney U; ties count ½)."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = rank(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def canonical(edge: tuple[str, str], group: int = 1) -> tuple[str, str]:
    """An edge with a ``.k``/``.v`` receiver named by the first query head of its key/value group (grouped-query
    attention: L1H1.k is the same key head as L1H0.k when 2 query heads share it)."""
    s, r = edge
    try:
        node = split_node(r)
    except ValueError:
        return s, r
    if group > 1 and node[0] in ("k", "v"):
        r = node_name((node[0], node[1], node[2] - node[2] % group))
    return s, r


def compare_circuits(stated, discovered, group: int = 1) -> dict:
    """A stated and a discovered circuit -> {"found": stated edges kept, "missed": required stated edges not kept,
    "extra": kept edges not stated, "not_needed": optional or negative stated edges not kept} (sorted lists of
    (sender, receiver)), plus "precision" (stated among kept) and "recall" (of the *required* edges: what the
    circuit needs; an optional or negative edge left out is not a miss) — NaN when undefined.

    ``stated``: a :class:`StatedCircuit` (its edge kinds read), or edges — pairs or dicts with sender/receiver,
    e.g. CIRCUIT.json's — all then required; ``discovered``: pairs, triples or dicts (:class:`Circuit`'s
    ``edges``). ``group``: query heads per key/value head — .k/.v receivers of one group are one receiver
    (:func:`canonical`)."""
    def as_set(edges) -> set[tuple[str, str]]:
        return {canonical((e["sender"], e["receiver"]) if isinstance(e, dict) else (str(e[0]), str(e[1])), group)
                for e in edges}

    st, dc = as_set(getattr(stated, "edges", stated)), as_set(discovered)
    need = as_set(getattr(stated, "required", st))
    found = st & dc
    return {"found": sorted(found), "missed": sorted(need - dc), "extra": sorted(dc - st),
            "not_needed": sorted(st - need - dc),
            "precision": len(found) / len(dc) if dc else float("nan"),
            "recall": len(need & dc) / len(need) if need else float("nan")}


def edge_marks(stated, discovered, group: int = 1) -> dict[tuple[str, str], str]:
    """Each edge to draw -> "found", "missed" or "extra": every discovered edge (by its own name; found when its
    :func:`canonical` form is stated) and every stated edge the discovery missed (canonical names). The counts of
    distinct canonical edges are :func:`compare_circuits`'s."""
    cmp = compare_circuits(stated, discovered, group)
    found = set(cmp["found"])
    out = {}
    for e in discovered:
        s, r = (e["sender"], e["receiver"]) if isinstance(e, dict) else (str(e[0]), str(e[1]))
        out[(s, r)] = "found" if canonical((s, r), group) in found else "extra"
    out.update({e: "missed" for e in cmp["missed"]})
    return out


def marked_edges(stated, found, group: int = 1) -> tuple[list[tuple[str, str, float]], dict]:
    """What a graph of a discovered circuit beside a stated one draws: the discovered edges (sender, receiver,
    attribution), then the stated edges the discovery missed (their attribution from ``found.ranked``, else 0),
    and each edge's mark (:func:`edge_marks`). ``found``: a :class:`attnkit.circuits.discover.Circuit`."""
    marks = edge_marks(stated, found.edges, group)
    scores = {(s, r): a for s, r, a in found.ranked}
    missed = [(s, r, scores.get((s, r), 0.0)) for (s, r), m in marks.items() if m == "missed"]
    return list(found.edges) + missed, marks


def _top_set(ctx: Context, values: np.ndarray, planted: list[str], method: str, metric: str) -> Row:
    """Whether ``planted`` heads are the top |planted| heads of ``values`` [L·H]; value = worst planted rank."""
    labels = ctx.labels()
    order = list(np.argsort(-values, kind="stable"))
    ranks = {labels[i]: order.index(i) + 1 for i in range(len(labels))}
    worst = max(ranks[h] for h in planted)
    others = [values[i] for i in range(len(labels)) if labels[i] not in planted]
    low = min(values[labels.index(h)] for h in planted)
    ok = worst == len(planted)
    verdict = _verdict(ok, msg("planted {heads} rank {ranks} of {n}; weakest planted {low} vs strongest other {high}",
                               heads=", ".join(planted), ranks=", ".join(str(ranks[h]) for h in planted),
                               n=len(labels), low=f"{low:.3g}", high=f"{max(others):.3g}"))
    return Row(method, metric, float(worst), verdict)


def _roles(ctx: Context) -> dict[str, list[str]]:
    """Planted heads by role (previous token, induction): the roles a head statistic scores."""
    out: dict[str, list[str]] = {}
    for head, role in ctx.circuit.roles.items():
        if role in ("previous token", "induction"):
            out.setdefault(role, []).append(head)
    return out


#: A stated role -> the head statistic a decoy of it mimics (CIRCUIT.json's "decoys": {head: {"pattern": …}}).
DECOY_PATTERN = {"previous token": "previous-token", "induction": "induction"}
#: Two composition scores closer than this (relative) tie: float noise, not a difference between the edges.
TIE_REL = 1e-4


def _fooled(ctx: Context, row: Row, values: np.ndarray, role: str, planted: list[str]) -> Row:
    """The row, said to be fooled when a stated decoy of ``role`` scores at least as high as a planted head."""
    labels = ctx.labels()
    decoys = [h for h, d in ctx.circuit.decoys.items() if d.pattern == DECOY_PATTERN.get(role)]
    weakest = min(planted, key=lambda h: values[labels.index(h)])
    above = [d for d in decoys if values[labels.index(d)] >= values[labels.index(weakest)]]
    if not above:
        return row
    d = max(above, key=lambda h: values[labels.index(h)])
    return Row(row.method, row.metric, row.value,
               msg("fooled by a decoy: decoy {decoy} scores {score}, planted {head} {planted} — a pattern is not a "
                   "role (the atlas checks roles by effect)", decoy=d, score=f"{values[labels.index(d)]:.3g}",
                   head=weakest, planted=f"{values[labels.index(weakest)]:.3g}"))


def m_head_statistics(ctx: Context) -> list[Row]:
    """Previous-token mass on the clean prompts; induction score on repeated random tokens."""
    rows = []
    for role, heads in _roles(ctx).items():
        if role == "induction":
            vals = metrics.induction_scores(ctx.weights, n=20, batch=4).flatten().cpu().numpy()
        else:
            ids = torch.tensor([p.clean for p in ctx.pairs])
            pats = run(ctx.weights, ids, capture=["pattern"]).stack("pattern")        # [L, B, H, T, T]
            vals = metrics.diagonal_mass(pats, -1).mean(dim=(1, -1)).flatten().cpu().numpy()
        row = _top_set(ctx, vals, heads, "head statistics",
                       msg("{role} score: planted heads' worst rank", role=ROLE_LABELS[role]))
        rows.append(_fooled(ctx, row, vals, role, heads))
    return rows


def m_composition(ctx: Context) -> list[Row]:
    comp = composition(ctx.weights)
    rows, labels, q99 = [], ctx.labels(), comp.baseline["q99"]
    for s, r in sorted(ctx.edges):
        sender, receiver = split_node(s), split_node(r)
        if sender[0] != "head" or receiver[0] not in ("q", "k", "v"):
            continue
        mode, recv = receiver[0], head_name(receiver[1], receiver[2])
        sc = comp.scores[mode]
        val = sc[labels.index(s), labels.index(recv)]
        flat = sc[np.isfinite(sc)]
        position = int((flat > val).sum()) + 1
        ok = val > q99 and position == 1
        row = Row("composition", msg("{mode}-composition {sender}→{receiver}: rank among {n} pairs",
                                     mode=mode.upper(), sender=s, receiver=recv, n=flat.size), float(position),
                  _verdict(ok, msg("score {score} vs baseline 99th pct {q99} (×{times} the baseline mean); rank "
                                   "{rank}", score=f"{val:.3f}", q99=f"{q99:.3f}",
                                   times=f"{val / comp.baseline['mean']:.1f}", rank=position)))
        rows.append(_decoy_edge(ctx, row, comp, (s, r), val))
    return rows


def _decoy_edge(ctx: Context, row: Row, comp, edge: tuple[str, str], val: float) -> Row:
    """The row, said to be fooled when a stated decoy edge (CIRCUIT.json's "decoy_edges", each naming the edge
    it ``ties_with``) scores as high as the stated edge, or within float noise (TIE_REL) of it."""
    labels = ctx.labels()
    for d in ctx.circuit.decoy_edges:
        if d.ties_with != edge:
            continue
        mode, layer, head = split_node(d.receiver)
        dv = float(comp.scores[mode][labels.index(d.sender), labels.index(head_name(layer, head))])
        if dv >= val * (1 - TIE_REL):
            return Row(row.method, row.metric, row.value,
                       msg("fooled by a decoy: decoy edge {sender}→{receiver} scores {decoy}, the stated edge {score} "
                           "(relative difference {rel}): composition cannot tell them apart", sender=d.sender,
                           receiver=d.receiver, decoy=f"{dv:.6f}", score=f"{val:.6f}", rel=f"{abs(dv - val) / val:.1e}"))
    return row


def _head_effects(ctx: Context, estimate: bool) -> np.ndarray:
    """|change of LD| per head [L·H], noise direction, summed over pairs (exact patching or its estimate)."""
    total = 0
    for p in ctx.pairs:
        if estimate:
            ha = head_attribution(ctx.weights, p, "noise", exact=False)
            total = total + np.abs((ha.estimate - ha.clean_ld).sum(-1)).flatten()
        else:
            res = patch(ctx.weights, p, "z", direction="noise")
            total = total + np.abs(res.raw - res.clean_ld).flatten()
    return total


def m_activation_patching(ctx: Context) -> list[Row]:
    return [_top_set(ctx, _head_effects(ctx, False), ctx.heads, "activation patching",
                     msg("planted heads' worst rank by |patched − clean LD|"))]


def m_attribution_patching(ctx: Context) -> list[Row]:
    return [_top_set(ctx, _head_effects(ctx, True), ctx.heads, "attribution patching",
                     msg("planted heads' worst rank by |estimated change|"))]


def m_path_patching(ctx: Context) -> list[Row]:
    """For every receiver of a stated edge: are its stated senders the top senders (|change|, summed)?"""
    by_recv: dict[str, set[str]] = {}
    for s, r in ctx.edges:
        by_recv.setdefault(r, set()).add(s)
    good, worst_gap = 0, np.inf
    for r, planted in sorted(by_recv.items()):
        total, senders = 0, None
        for p in ctx.pairs:
            res = path_map(ctx.weights, p, r, "noise", mlps=True)
            total, senders = total + np.abs(res.change), res.senders
        order = np.argsort(-total, kind="stable")
        top = {senders[i] for i in order[: len(planted)]}
        good += top == planted
        rest = [total[i] for i in range(len(senders)) if senders[i] not in planted]
        weakest = min(total[senders.index(s)] for s in planted)
        worst_gap = min(worst_gap, weakest - (max(rest) if rest else 0.0))
    n = len(by_recv)
    return [Row("path patching", msg("share of stated receivers whose stated senders are the top senders"),
                good / n, _verdict(good == n, msg("{good} of {n} receivers; smallest margin (weakest planted − "
                                                  "strongest other |Δ LD|, summed over {pairs} pairs) {gap}",
                                                  good=good, n=n, pairs=len(ctx.pairs), gap=f"{worst_gap:.3g}")))]


def _edge_auc(ctx: Context, steps: int) -> tuple[float, int]:
    total, ea = 0, None
    for p in ctx.pairs:
        ea = edge_attribution(ctx.weights, p, "noise", mlps=True, steps=steps)
        total = total + np.abs(ea.scores)
    ok = np.isfinite(total)
    ii, jj = np.nonzero(ok)
    group = ctx.weights.config.group
    stated = {canonical(e, group) for e in ctx.edges}
    pos = [canonical((ea.senders[i], ea.receivers[j]), group) in stated for i, j in zip(ii, jj)]
    return roc_auc(total[ii, jj], pos), len(pos)


def _auc_row(ctx: Context, steps: int, method: str) -> Row:
    auc, n = _edge_auc(ctx, steps)
    ok = auc >= 0.95
    return Row(method, msg("ROC AUC of |edge score| for the stated edges"), auc,
               _verdict(ok, msg("AUC {auc} over {n} edges ({stated} stated; bar 0.95; {pairs} pairs)",
                                auc=f"{auc:.3f}", n=n, stated=len(ctx.edges), pairs=len(ctx.pairs))))


def m_edge_attribution(ctx: Context) -> list[Row]:
    return [_auc_row(ctx, 1, "edge attribution")]


def m_eap_ig(ctx: Context) -> list[Row]:
    return [_auc_row(ctx, 5, "EAP-IG")]


def _recall_text(ctx: Context, cmp: dict):
    """What discovery's recall counted: the required edges found and missed, and the optional or negative ones
    it was not charged for."""
    group = ctx.weights.config.group
    need = {canonical(e, group) for e in ctx.circuit.required}
    other = {canonical(e, group) for e in ctx.circuit.optional} - need
    missed = ", ".join(f"{s}→{r}" for s, r in cmp["missed"]) or msg("none")
    found = len(need) - len(cmp["missed"])
    if not other:
        return msg("{found} of {n} found; missed: {missed}", found=found, n=len(need), missed=missed)
    return msg("{found} of the {n} required edges found; missed: {missed}; not counted: {optional} optional or "
               "negative edge(s), {kept} of them kept", found=found, n=len(need), missed=missed,
               optional=len(other), kept=len(other) - len(cmp["not_needed"]))


def m_discovery(ctx: Context) -> list[Row]:
    """Discovery at 80 % of the clean LD: recall of the edges the stated circuit needs (its ``required`` ones: an
    optional or negative edge discovery can do without is not a miss), precision of the kept edges against every
    stated edge, and the kept circuit's faithfulness."""
    circ = discover(ctx.weights, ctx.pairs, target=0.8)
    cmp = compare_circuits(ctx.circuit, circ.edges, ctx.weights.config.group)
    faith = circ.circuit_ld / circ.clean_ld if circ.clean_ld else float("nan")
    extra = msg("{n} extra of {size} kept", n=len(cmp["extra"]), size=circ.size)
    if ctx.weights.config.group > 1:
        extra = msg("{n} extra of {size} kept ({distinct} once a key/value group's receivers are one)",
                    n=len(cmp["extra"]), size=circ.size, distinct=len(cmp["found"]) + len(cmp["extra"]))
    return [Row("discovery", msg("recall of the stated edges (target 80 %)"), cmp["recall"],
                _verdict(cmp["recall"] == 1, _recall_text(ctx, cmp))),
            Row("discovery", msg("precision of the kept edges"), cmp["precision"],
                _verdict(cmp["precision"] >= 0.5, extra)),
            Row("discovery", msg("faithfulness of the kept circuit"), faith,
                _verdict(faith >= 0.8, msg("LD(circuit) / LD(clean) = {faith} with {size} edges (recovered "
                                           "{recovered})", faith=f"{faith:.3f}", size=circ.size,
                                           recovered=f"{circ.recovered:.3f}")))]


def _edge_sets_shares(ctx: Context, edge_sets: list) -> np.ndarray:
    """LD share (mean LD / mean clean LD over the pairs) of a circuit run with only each set of edges kept (every
    other edge resample-ablated); an edge set given as ``~set`` keeps every edge but those."""
    cfg = ctx.weights.config
    S_names, R_names = sender_names(cfg, True), receiver_names(cfg, True)
    S = [parse_node(n, cfg) for n in S_names]
    R = [parse_node(n, cfg, "receiver") for n in R_names]
    keep = torch.zeros((len(edge_sets), len(S), len(R)), dtype=torch.bool)
    for b, (edges, invert) in enumerate(edge_sets):
        for s, r in edges:
            keep[b, S_names.index(s), R_names.index(r)] = True
        if invert:
            keep[b] = ~keep[b]
    lds, clean = np.zeros(len(edge_sets)), 0.0
    for p in ctx.pairs:
        runs = cache_runs(ctx.weights, p)
        lds += circuit_logit_diffs(runs, S, R, keep, ablated_outputs(runs, S, "resample"))
        clean += runs.clean_ld
    return lds / clean


def m_stated_circuit(ctx: Context) -> list[Row]:
    """The stated edges alone, every other edge resample-ablated: its faithfulness (should be ≈ 1), and the
    stated edges ablated with every other kept (should be ≈ 0 or below). When some stated edges are optional or
    negative, also the required edges alone: they must reach the bar, or the file's marks are wrong."""
    required = ctx.circuit.required
    sets = [(ctx.edges, False), (ctx.edges, True)] + ([(required, False)] if len(required) < len(ctx.edges) else [])
    kept, cut, *alone = _edge_sets_shares(ctx, sets)
    rows = [Row("stated circuit", msg("faithfulness of the stated edges alone"), float(kept),
                _verdict(kept >= 0.8, msg("LD share {share} with only the {n} stated edges (bar 0.8)",
                                          share=f"{kept:.3f}", n=len(ctx.edges)))),
            Row("stated circuit", msg("LD share with the stated edges ablated (all others kept)"), float(cut),
                _verdict(cut <= 0.1, msg("LD share {share} (bar ≤ 0.1)", share=f"{cut:.3f}")))]
    if alone:
        rows.append(Row("stated circuit", msg("faithfulness of the required edges alone"), float(alone[0]),
                        _verdict(alone[0] >= 0.8, msg("LD share {share} with only the {n} required edges (bar 0.8)",
                                                      share=f"{alone[0]:.3f}", n=len(required)))))
    return rows


def _expected_key_parts(ctx: Context) -> dict[str, set[str]]:
    """Planted heads above layer 0 -> the key-side parts their score should come from: the stated head
    senders into their ``.k``, or, with none, the embeddings (a positional or token-matching key)."""
    cfg = ctx.weights.config
    group = cfg.group
    stated = {canonical(e, group) for e in ctx.edges}
    out = {}
    for head in ctx.heads:
        layer, h = parse_head(head)
        if layer == 0:
            continue
        key = canonical(("", node_name(("k", layer, h))), group)[1]
        senders = {s for s, r in stated if r == key and split_node(s)[0] == "head"}
        out[head] = senders or {"embed", "pos_embed"}
    return out


def m_score_terms(ctx: Context) -> list[Row]:
    """"Why this key": for each planted head above layer 0, the clean prompt's last query and the key it attends
    most; the key side of its score split (summed over query parts) should be largest for the stated sender."""
    trace = run(ctx.weights, torch.tensor([p.clean for p in ctx.pairs]), capture=["pattern"])
    hits, cases, shares = 0, 0, []
    for head, want in _expected_key_parts(ctx).items():
        l, h = parse_head(head)
        for b, p in enumerate(ctx.pairs):
            key = int(trace["pattern", l][b, h, p.pos, : p.pos + 1].argmax())
            side = score_terms(ctx.weights, p.clean, l, h, p.pos, key).key_side
            top = str(side.idxmax())
            hits += top in want
            cases += 1
            shares.append(float(side[top] / side.abs().sum()))
    if not cases:
        return [Row("score terms", msg("key-side top part is the stated sender"), None,
                    msg("n/a: no planted head above layer 0"))]
    return [Row("score terms", msg("share of (planted head, pair) whose key-side top part is the stated sender "
                                   "(an embedding where no head is stated)"),
                hits / cases, _verdict(hits == cases, msg("{hits} of {cases}; the top part carries {low}–{high} of "
                                                          "the key side's |terms|", hits=hits, cases=cases,
                                                          low=f"{min(shares):.0%}", high=f"{max(shares):.0%}")))]


#: (name, function) — one registration per method, run in this order.
METHODS: list[tuple[str, Callable[[Context], list[Row]]]] = [
    ("stated circuit", m_stated_circuit),
    ("head statistics", m_head_statistics),
    ("composition", m_composition),
    ("activation patching", m_activation_patching),
    ("attribution patching", m_attribution_patching),
    ("path patching", m_path_patching),
    ("edge attribution", m_edge_attribution),
    ("EAP-IG", m_eap_ig),
    ("discovery", m_discovery),
    ("score terms", m_score_terms),
]


def calibrate_model(name: str, folder: str | Path, weights: Weights, n_pairs: int = 4,
                    methods=None, tick: Callable[[], None] | None = None) -> dict:
    """{"name", "folder", "methods": [row…]} for one planted model; ``tick()`` after each method."""
    circuit = read_circuit(folder, weights.config)
    ctx = Context(name, weights, circuit, make_pairs(circuit, n_pairs))
    rows = []
    for _, fn in (methods or METHODS):
        rows += [r.to_json() for r in fn(ctx)]
        if tick:
            tick()
    return {"name": name, "folder": str(Path(folder).resolve()), "methods": rows}


def calibrate(models: list[tuple[str, str | Path, Weights]], n_pairs: int = 4,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """The report card over (name, folder, weights) triples: ``{"models": [...]}``; ``progress(done, total)``
    after each method of each model."""
    total, done = len(models) * len(METHODS), [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(done[0], total)

    return {"models": [calibrate_model(name, folder, w, n_pairs, tick=tick) for name, folder, w in models]}


#: Each method's name as shown (the report card's text; its JSON keeps the names of :data:`METHODS`).
METHOD_LABELS = {"stated circuit": msg("stated circuit"), "head statistics": msg("head statistics"),
                 "composition": msg("composition"), "activation patching": msg("activation patching"),
                 "attribution patching": msg("attribution patching"), "path patching": msg("path patching"),
                 "edge attribution": msg("edge attribution"), "EAP-IG": "EAP-IG", "discovery": msg("discovery"),
                 "score terms": msg("score terms")}


def report(card: dict) -> list[str]:
    """The report card as text lines (model, method, metric, value, verdict), in the reader's language."""
    lines = []
    for m in card["models"]:
        lines.append(f"{m['name']}  ({m['folder']})")
        for r in m["methods"]:
            v = "—" if r["value"] is None else f"{r['value']:.3g}"
            label = str(METHOD_LABELS.get(r["method"], r["method"]))
            lines.append(f"  {label:<21} {r['metric']}: {v}\n  {'':<21} {r['verdict']}")
    return lines
