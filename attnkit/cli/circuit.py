"""``python -m attnkit circuit``: path patching into one receiver's input, or automatic circuit discovery
(edge attribution, checked by running the circuit with every other edge ablated) on a prompt pair."""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import numpy as np

from ..circuits.attribution_patching import EXACT_TOP, edge_attribution, head_attribution
from ..circuits.discover import ABLATIONS, STEPS as DI_STEPS, discover
from ..circuits.path import SOURCES, path_map
from ..patching import DIRECTIONS, PatchError, make_pair
from .. import prompts
from .pair import add_pair_args, load_pair, write_json
from . import args as cli_args

PROG = "attnkit circuit"
MAX_STEPS = 256               # integrated-gradient points: the ranking settles long before
_NODE = re.compile(r"^(L[0-9]+H[0-9]+(\.[qkv])?|MLP[0-9]+|embed|logits)$", re.ASCII)   # as circuits.path.parse_node


def node(s: str) -> str:
    """A node name: L{l}H{h}[.q|.k|.v], MLP{l}, embed or logits (checked against the model later)."""
    s = cli_args.utf8_text(s).strip()
    if not _NODE.match(s):
        raise argparse.ArgumentTypeError(f"{s!r} is not a node: use L{{l}}H{{h}}.q/.k/.v, MLP{{l}}, embed or logits")
    return s


def share(s: str) -> float:
    x = cli_args.positive_float(s)
    if x > 1.5:
        raise argparse.ArgumentTypeError(f"must be at most 1.5 (a share of the clean logit difference), got {s}")
    return x


def pairs_file(s: str) -> prompts.PairSet:
    """A prompt-set file (JSON lines, or CSV by its name), read by the one prompt-set reader
    (:func:`attnkit.prompts.read_pairs`); any bad row refuses the file, naming its line."""
    cli_args.existing_nonempty_text_file(s)
    path = Path(s).expanduser()
    try:
        got = prompts.read_pairs(str(path), path.read_bytes())
    except (prompts.PromptError, OSError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if got.problems:
        more = f" (and {len(got.problems) - 1} more)" if len(got.problems) > 1 else ""
        raise argparse.ArgumentTypeError(got.problems[0] + more)
    return got


pairs_file.role = "input"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit circuit",
                 description="Circuits on a clean/corrupted pair. With --receiver: path patching of every earlier "
                             "sender (or --sender) into that receiver's input only. Otherwise: circuit discovery — "
                             "edges ranked by edge attribution patching, kept until the circuit, run with every "
                             "other edge ablated, recovers --share of the clean logit difference.")
    add_pair_args(p)
    p.add_argument("--more-corrupt", action="append", default=[], type=cli_args.utf8_text, metavar="TEXT",
                   help="another corrupted prompt for the same clean prompt (repeatable): a prompt set")
    p.add_argument("--pairs", type=pairs_file, default=None, metavar="FILE",
                   help="discovery: more pairs from a JSON-lines file (one {\"clean\", \"corrupted\", \"answer\", "
                        "\"distractor\"} object per line; \"corrupt\" is accepted too) or a .csv with those "
                        f"columns, at most {prompts.MAX_PAIRS} pairs, added to the prompt set")
    p.add_argument("--steps", type=cli_args.int_in(1, MAX_STEPS), default=DI_STEPS,
                   help=f"discovery: integrated-gradient points behind the edge ranking (default {DI_STEPS}; "
                        "1 = plain edge attribution at the clean run; at most {MAX_STEPS})")
    p.add_argument("--receiver", type=node, default=None, help="path patching into this input, e.g. L3H0.k")
    p.add_argument("--sender", type=node, default=None, help="with --receiver: only this sender, e.g. L2H1")
    p.add_argument("--source", choices=SOURCES, default="pair",
                   help="path patching: the sender's output from the other prompt (pair) or its mean over positions")
    p.add_argument("--direction", choices=DIRECTIONS, default="denoise", help="path patching direction")
    p.add_argument("--share", type=share, default=0.8, help="discovery: share of the clean LD to recover (0.8)")
    p.add_argument("--ablation", choices=ABLATIONS, default="resample", help="discovery: how edges are ablated")
    p.add_argument("--no-mlps", action="store_true", help="heads only (MLPs are not nodes)")
    p.add_argument("--exact", action="store_true",
                   help="also run exact patching beside attribution patching (heads and edges) and report "
                        "their Spearman rank correlation")
    p.add_argument("--exact-top", type=cli_args.int_in(0, 10**7), default=EXACT_TOP, metavar="K",
                   help=f"with --exact: compare the K edges of largest |attribution| (default {EXACT_TOP}; 0: every "
                        "edge, one patched run each)")
    p.add_argument("--top", type=cli_args.int_in(1, 10_000), default=15, help="rows listed (default 15; 1–10,000)")
    return p


def _path(m, pair, a, out) -> int:
    try:
        res = path_map(m.weights, pair, a.receiver, a.direction, senders=[a.sender] if a.sender else None,
                       mlps=not a.no_mlps, source=a.source)
    except PatchError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(f"{m.name} · path patching into {res.receiver} · {a.direction} · source {a.source}")
    for n in res.notes:
        print(f"  note: {n}")
    print(f"  logit diff  clean {res.clean_ld:+.4f}  corrupted {res.corrupt_ld:+.4f}")
    order = np.argsort(-np.abs(res.change))[: a.top]
    for i in order:
        print(f"    {res.senders[i]:>7} → {res.receiver:<9} change {res.change[i]:+.4f}  "
              f"(logit diff {res.raw[i]:+.4f}, normalised {res.normalised[i]:+.4f})")
    out["path"] = res.to_json()
    return 0


def _discover(m, pairs, a, out) -> None:
    c = discover(m.weights, pairs, a.share, ablation=a.ablation, mlps=not a.no_mlps, steps=a.steps)
    print(f"{m.name} · circuit discovery · {len(pairs)} pair(s) · {a.ablation} ablation of every other edge")
    for n in c.notes:
        print(f"  note: {n}")
    print(f"  logit diff  clean {c.clean_ld:+.4f}  corrupted {c.corrupt_ld:+.4f}  every edge ablated {c.empty_ld:+.4f}")
    if not c.solved:
        print(f"  circuit: {c.share_text()} (see the note); the top {min(a.top, len(c.ranked))} of "
              f"{len(c.ranked)} edges by |attribution|, no circuit claimed:")
    else:
        print(f"  circuit: {c.size} of {len(c.ranked)} edges, logit diff {c.circuit_ld:+.4f} = {c.share_text()} of "
              f"clean (target {a.share:.0%}, reached: {'yes' if c.reached else 'no'}); heads {' '.join(c.heads) or 'none'}")
        print("  faithfulness curve (edges: share): " +
              ", ".join(f"{k}: {f:.2f}" for k, f in zip(c.sizes, c.faithfulness)))
    for s, r, v in (c.edges if c.solved else c.ranked)[: a.top]:
        print(f"    {s:>7} → {r:<9} attribution {v:+.4f}")
    out["circuit"] = c.to_json()


def _exact(m, pair, a, out) -> None:
    ha = head_attribution(m.weights, pair, a.direction)
    ea = edge_attribution(m.weights, pair, "noise", mlps=not a.no_mlps, exact=True, exact_top=a.exact_top or None)
    for n in ea.notes[len(pair.notes):]:
        print(f"  note: {n}")
    print(f"  attribution patching vs exact: heads×positions Spearman {ha.spearman:+.3f} ({a.direction}); "
          f"edges Spearman {ea.spearman:+.3f} (noise, {int(np.isfinite(ea.scores).sum())} edges)")
    out["attribution_vs_exact"] = {"heads_spearman": ha.spearman, "edges_spearman": ea.spearman}


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    if a.sender and not a.receiver:
        p.error("--sender needs --receiver (the input it is patched into)")
    if a.receiver and (a.more_corrupt or a.pairs or a.steps != DI_STEPS):
        used = [o for o, v in (("--more-corrupt", a.more_corrupt), ("--pairs", a.pairs),
                               ("--steps", a.steps != DI_STEPS)) if v]
        p.error(f"{', '.join(used)}: path patching (--receiver) runs on the one --clean/--corrupt pair; "
                "these are for discovery — drop them or drop --receiver")
    got = load_pair(a, PROG)
    if got is None:
        return 2
    m, pair = got
    more = a.pairs.rows if a.pairs is not None else []
    for n in a.pairs.notes if a.pairs is not None else []:
        print(f"{PROG}: note: {n}", file=sys.stderr)
    try:
        pairs = [pair] + [make_pair(m, a.clean, k, a.answer, a.distractor, a.position) for k in a.more_corrupt]
        for n, d in enumerate(more, 1):
            try:
                pairs.append(make_pair(m, d.clean, d.corrupted, d.answer, d.distractor, a.position))
            except PatchError as e:
                raise PatchError(f"--pairs, pair {n}: {d.where}: {e}") from None
    except PatchError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    out = {"model": m.name, "clean": a.clean, "corrupt": [a.corrupt] + a.more_corrupt, "more_pairs": [dataclasses.asdict(d) for d in more],
           "answer": pair.answer_token,
           "distractor": pair.distractor_token, "position_read": pair.pos}
    if a.receiver:
        rc = _path(m, pair, a, out)
        if rc:
            return rc
    else:
        _discover(m, pairs, a, out)
    if a.exact:
        _exact(m, pair, a, out)
    if a.json_out:
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
