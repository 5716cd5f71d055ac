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
    discovery             recall and precision of the kept edges; faithfulness of the kept circuit
    stated circuit        faithfulness of the stated edges alone (every other edge resample-ablated)
    score terms           "why this key": the key side of a planted head's score comes from the stated sender
"""
from __future__ import annotations

import json
import re
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
from .model import run
from .patching import Pair, patch
from .score_terms import score_terms
from .weights import Weights

__all__ = ["Row", "Context", "METHODS", "read_circuit", "planted_folder", "read_card", "make_pairs", "pair_words", "planted_word",
           "roc_auc", "compare_circuits", "edge_marks", "calibrate_model", "calibrate", "report"]

_KV_RECEIVER = re.compile(r"^L(\d+)H(\d+)\.([kv])$")


@dataclass
class Row:
    method: str
    metric: str
    value: float | None
    verdict: str

    def to_json(self) -> dict:
        v = None if self.value is None or not np.isfinite(self.value) else float(self.value)
        return {"method": self.method, "metric": self.metric, "value": v, "verdict": self.verdict}


@dataclass
class Context:
    name: str
    weights: Weights
    circuit: dict
    pairs: list[Pair]
    notes: list[str] = field(default_factory=list)

    @property
    def heads(self) -> list[str]:
        return list(self.circuit["heads"])

    @property
    def edges(self) -> set[tuple[str, str]]:
        return {(e["sender"], e["receiver"]) for e in self.circuit["edges"]}

    def labels(self) -> list[str]:
        cfg = self.weights.config
        return [f"L{l}H{h}" for l in range(cfg.n_layers) for h in range(cfg.n_heads)]


def read_circuit(folder: str | Path) -> dict:
    """The stated circuit of a planted model folder; ValueError in one line if absent or malformed."""
    path = Path(folder) / "CIRCUIT.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: no readable CIRCUIT.json ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("heads"), list) or not isinstance(data.get("edges"), list):
        raise ValueError(f"{path}: CIRCUIT.json needs 'heads' (a list) and 'edges' (a list of sender/receiver)")
    return data


def planted_folder(source) -> Path | None:
    """The folder of a loaded model (``Loaded.source``) when it states a circuit (holds a CIRCUIT.json), else None
    (a hub repository, or a folder without one)."""
    folder = Path(str(source)).expanduser()
    return folder if (folder / "CIRCUIT.json").is_file() else None


_MD_MARKS = re.compile(r"\*\*|`")


def read_card(folder: str | Path) -> dict:
    """A planted model's MODEL_CARD.md as plain text: {"title", "summary" (the first paragraph), "facts" (the
    bullets as (label, text) pairs, "Family: …" -> ("Family", "…")), "text" (the whole card)}; bold and code
    marks are dropped. A folder without a card gives empty fields."""
    try:
        text = (Path(folder) / "MODEL_CARD.md").read_text(encoding="utf-8")
    except OSError:
        return {"title": "", "summary": "", "facts": [], "text": ""}
    text = _MD_MARKS.sub("", text)
    title, paragraphs, facts = "", [], []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if lines and lines[0].startswith("#"):
            title, lines = lines[0].lstrip("#").strip(), lines[1:]
        bullets: list[str] = []
        for ln in lines if lines and lines[0].startswith("- ") else []:
            if ln.startswith("- "):
                bullets.append(ln[2:])
            else:                                   # a bullet's continuation line
                bullets[-1] += " " + ln
        for b in bullets:
            label, sep, rest = b.partition(": ")
            facts.append((label, rest) if sep and len(label) < 40 else ("", b))
        if lines and not bullets:
            paragraphs.append(" ".join(lines))
    return {"title": title, "summary": paragraphs[0] if paragraphs else "", "facts": facts, "text": text}


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


def make_pairs(circuit: dict, n: int = 4, T: int = 16, vocab: int = 40, seed: int = 0) -> list[Pair]:
    """``n`` clean/corrupted pairs of the circuit's task (answer: clean's next token; distractor: corrupted's)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    while len(out) < n:
        task, shift = circuit.get("task", "induction"), int(circuit.get("shift", 0))
        clean, a = _sequence(task, T, vocab, gen, shift)
        corrupt, d = _sequence(task, T, vocab, gen, shift)
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
    m = _KV_RECEIVER.match(r)
    if group > 1 and m:
        h = int(m[2])
        r = f"L{m[1]}H{h - h % group}.{m[3]}"
    return s, r


def compare_circuits(stated, discovered, group: int = 1) -> dict:
    """Edges (sender, receiver) of a stated and a discovered circuit -> {"found", "missed", "extra"} (sorted
    lists of pairs), plus "precision" and "recall" (NaN when undefined). Accepts pairs or dicts with
    sender/receiver, e.g. CIRCUIT.json's edges or :class:`Circuit`'s ``edges``. ``group``: query heads per
    key/value head — .k/.v receivers of one group are one receiver (:func:`canonical`)."""
    def as_set(edges) -> set[tuple[str, str]]:
        return {canonical((e["sender"], e["receiver"]) if isinstance(e, dict) else (str(e[0]), str(e[1])), group)
                for e in edges}

    st, dc = as_set(stated), as_set(discovered)
    found = st & dc
    return {"found": sorted(found), "missed": sorted(st - dc), "extra": sorted(dc - st),
            "precision": len(found) / len(dc) if dc else float("nan"),
            "recall": len(found) / len(st) if st else float("nan")}


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


def _top_set(ctx: Context, values: np.ndarray, planted: list[str], method: str, metric: str) -> Row:
    """Whether ``planted`` heads are the top |planted| heads of ``values`` [L·H]; value = worst planted rank."""
    labels = ctx.labels()
    order = list(np.argsort(-values, kind="stable"))
    ranks = {labels[i]: order.index(i) + 1 for i in range(len(labels))}
    worst = max(ranks[h] for h in planted)
    others = [values[i] for i in range(len(labels)) if labels[i] not in planted]
    low = min(values[labels.index(h)] for h in planted)
    ok = worst == len(planted)
    verdict = (f"{'pass' if ok else 'miss'}: planted {', '.join(planted)} rank "
               f"{', '.join(str(ranks[h]) for h in planted)} of {len(labels)}; weakest planted {low:.3g} vs "
               f"strongest other {max(others):.3g}")
    return Row(method, metric, float(worst), verdict)


def _roles(ctx: Context) -> dict[str, list[str]]:
    """Planted heads by role (previous token, induction): the roles a head statistic scores."""
    out: dict[str, list[str]] = {}
    for head, role in ctx.circuit.get("roles", {}).items():
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
    decoys = [h for h, d in ctx.circuit.get("decoys", {}).items() if d.get("pattern") == DECOY_PATTERN.get(role)]
    weakest = min(planted, key=lambda h: values[labels.index(h)])
    above = [d for d in decoys if values[labels.index(d)] >= values[labels.index(weakest)]]
    if not above:
        return row
    d = max(above, key=lambda h: values[labels.index(h)])
    return Row(row.method, row.metric, row.value,
               f"fooled by a decoy: decoy {d} scores {values[labels.index(d)]:.3g}, planted {weakest} "
               f"{values[labels.index(weakest)]:.3g} — a pattern is not a role (the atlas checks roles by effect)")


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
        row = _top_set(ctx, vals, heads, "head statistics", f"{role} score: planted heads' worst rank")
        rows.append(_fooled(ctx, row, vals, role, heads))
    return rows


def m_composition(ctx: Context) -> list[Row]:
    comp = composition(ctx.weights)
    rows, labels, q99 = [], ctx.labels(), comp.baseline["q99"]
    for s, r in sorted(ctx.edges):
        if not (s.startswith("L") and r.startswith("L") and "." in r):
            continue
        recv, mode = r.split(".")
        sc = comp.scores[mode]
        val = sc[labels.index(s), labels.index(recv)]
        flat = sc[np.isfinite(sc)]
        position = int((flat > val).sum()) + 1
        ok = val > q99 and position == 1
        row = Row("composition", f"{mode.upper()}-composition {s}→{recv}: rank among {flat.size} pairs",
                  float(position), f"{'pass' if ok else 'miss'}: score {val:.3f} vs baseline 99th pct "
                  f"{q99:.3f} (×{val / comp.baseline['mean']:.1f} the baseline mean); rank {position}")
        rows.append(_decoy_edge(ctx, row, comp, (s, r), val))
    return rows


def _decoy_edge(ctx: Context, row: Row, comp, edge: tuple[str, str], val: float) -> Row:
    """The row, said to be fooled when a stated decoy edge (CIRCUIT.json's "decoy_edges", each naming the edge
    it ``ties_with``) scores as high as the stated edge, or within float noise (TIE_REL) of it."""
    labels = ctx.labels()
    for d in ctx.circuit.get("decoy_edges", []):
        tie = d.get("ties_with", {})
        if (tie.get("sender"), tie.get("receiver")) != edge:
            continue
        recv, mode = d["receiver"].split(".")
        dv = float(comp.scores[mode][labels.index(d["sender"]), labels.index(recv)])
        if dv >= val * (1 - TIE_REL):
            return Row(row.method, row.metric, row.value,
                       f"fooled by a decoy: decoy edge {d['sender']}→{d['receiver']} scores {dv:.6f}, the stated "
                       f"edge {val:.6f} (relative difference {abs(dv - val) / val:.1e}): composition cannot tell "
                       "them apart")
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
                     "planted heads' worst rank by |patched − clean LD|")]


def m_attribution_patching(ctx: Context) -> list[Row]:
    return [_top_set(ctx, _head_effects(ctx, True), ctx.heads, "attribution patching",
                     "planted heads' worst rank by |estimated change|")]


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
    return [Row("path patching", "share of stated receivers whose stated senders are the top senders",
                good / n, f"{'pass' if good == n else 'miss'}: {good} of {n} receivers; smallest margin "
                f"(weakest planted − strongest other |Δ LD|, summed over {len(ctx.pairs)} pairs) {worst_gap:.3g}")]


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
    return Row(method, "ROC AUC of |edge score| for the stated edges", auc,
               f"{'pass' if ok else 'miss'}: AUC {auc:.3f} over {n} edges ({len(ctx.edges)} stated; bar 0.95; "
               f"{len(ctx.pairs)} pairs)")


def m_edge_attribution(ctx: Context) -> list[Row]:
    return [_auc_row(ctx, 1, "edge attribution")]


def m_eap_ig(ctx: Context) -> list[Row]:
    return [_auc_row(ctx, 5, "EAP-IG")]


def m_discovery(ctx: Context) -> list[Row]:
    circ = discover(ctx.weights, ctx.pairs, target=0.8)
    cmp = compare_circuits(ctx.edges, circ.edges, ctx.weights.config.group)
    faith = circ.circuit_ld / circ.clean_ld if circ.clean_ld else float("nan")
    missed = ", ".join(f"{s}→{r}" for s, r in cmp["missed"]) or "none"
    return [Row("discovery", "recall of the stated edges (target 80 %)", cmp["recall"],
                f"{'pass' if cmp['recall'] == 1 else 'miss'}: {len(cmp['found'])} of {len(ctx.edges)} found; "
                f"missed: {missed}"),
            Row("discovery", "precision of the kept edges", cmp["precision"],
                f"{'pass' if cmp['precision'] >= 0.5 else 'miss'}: {len(cmp['extra'])} extra of {circ.size} kept"
                + (f" ({len(cmp['found']) + len(cmp['extra'])} once a key/value group's receivers are one)"
                   if ctx.weights.config.group > 1 else "")),
            Row("discovery", "faithfulness of the kept circuit", faith,
                f"{'pass' if faith >= 0.8 else 'miss'}: LD(circuit) / LD(clean) = {faith:.3f} with {circ.size} edges "
                f"(recovered {circ.recovered:.3f})")]


def m_stated_circuit(ctx: Context) -> list[Row]:
    """The stated edges alone, every other edge resample-ablated: its faithfulness (should be ≈ 1), and the
    stated edges ablated with every other kept (should be ≈ 0 or below)."""
    cfg = ctx.weights.config
    S = [parse_node(n, cfg) for n in sender_names(cfg, True)]
    R = [parse_node(n, cfg, "receiver") for n in receiver_names(cfg, True)]
    S_names, R_names = sender_names(cfg, True), receiver_names(cfg, True)
    keep = torch.zeros((2, len(S), len(R)), dtype=torch.bool)
    for s, r in ctx.edges:
        keep[0, S_names.index(s), R_names.index(r)] = True
    keep[1] = ~keep[0]
    lds, clean = np.zeros(2), 0.0
    for p in ctx.pairs:
        runs = cache_runs(ctx.weights, p)
        lds += circuit_logit_diffs(runs, S, R, keep, ablated_outputs(runs, S, "resample"))
        clean += runs.clean_ld
    kept, cut = lds / clean
    return [Row("stated circuit", "faithfulness of the stated edges alone", float(kept),
                f"{'pass' if kept >= 0.8 else 'miss'}: LD share {kept:.3f} with only the {len(ctx.edges)} stated edges (bar 0.8)"),
            Row("stated circuit", "LD share with the stated edges ablated (all others kept)", float(cut),
                f"{'pass' if cut <= 0.1 else 'miss'}: LD share {cut:.3f} (bar ≤ 0.1)")]


def _expected_key_parts(ctx: Context) -> dict[str, set[str]]:
    """Planted heads above layer 0 -> the key-side parts their score should come from: the stated head
    senders into their ``.k``, or, with none, the embeddings (a positional or token-matching key)."""
    cfg = ctx.weights.config
    group = cfg.group
    stated = {canonical(e, group) for e in ctx.edges}
    out = {}
    for head in ctx.heads:
        if head.startswith("L0H"):
            continue
        key = canonical(("", f"{head}.k"), group)[1]
        senders = {s for s, r in stated if r == key and s.startswith("L")}
        out[head] = senders or {"embed", "pos_embed"}
    return out


def m_score_terms(ctx: Context) -> list[Row]:
    """"Why this key": for each planted head above layer 0, the clean prompt's last query and the key it attends
    most; the key side of its score split (summed over query parts) should be largest for the stated sender."""
    trace = run(ctx.weights, torch.tensor([p.clean for p in ctx.pairs]), capture=["pattern"])
    hits, cases, shares = 0, 0, []
    for head, want in _expected_key_parts(ctx).items():
        l, h = (int(x) for x in head[1:].split("H"))
        for b, p in enumerate(ctx.pairs):
            key = int(trace["pattern", l][b, h, p.pos, : p.pos + 1].argmax())
            side = score_terms(ctx.weights, p.clean, l, h, p.pos, key).key_side
            top = str(side.idxmax())
            hits += top in want
            cases += 1
            shares.append(float(side[top] / side.abs().sum()))
    if not cases:
        return [Row("score terms", "key-side top part is the stated sender", None,
                    "n/a: no planted head above layer 0")]
    return [Row("score terms", "share of (planted head, pair) whose key-side top part is the stated sender "
                "(an embedding where no head is stated)",
                hits / cases, f"{'pass' if hits == cases else 'miss'}: {hits} of {cases}; the top part carries "
                f"{min(shares):.0%}–{max(shares):.0%} of the key side's |terms|")]


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
                    methods=None) -> dict:
    """{"name", "folder", "methods": [row…]} for one planted model."""
    circuit = read_circuit(folder)
    ctx = Context(name, weights, circuit, make_pairs(circuit, n_pairs, vocab=circuit.get("vocab", 40)))
    rows = []
    for _, fn in (methods or METHODS):
        rows += [r.to_json() for r in fn(ctx)]
    return {"name": name, "folder": str(Path(folder).resolve()), "methods": rows}


def calibrate(models: list[tuple[str, str | Path, Weights]], n_pairs: int = 4,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """The report card over (name, folder, weights) triples: ``{"models": [...]}``."""
    out = []
    for i, (name, folder, w) in enumerate(models):
        out.append(calibrate_model(name, folder, w, n_pairs))
        if progress:
            progress(i + 1, len(models))
    return {"models": out}


def report(card: dict) -> list[str]:
    """The report card as text lines (model, method, metric, value, verdict)."""
    lines = []
    for m in card["models"]:
        lines.append(f"{m['name']}  ({m['folder']})")
        for r in m["methods"]:
            v = "—" if r["value"] is None else f"{r['value']:.3g}"
            lines.append(f"  {r['method']:<21} {r['metric']}: {v}\n  {'':<21} {r['verdict']}")
    return lines
