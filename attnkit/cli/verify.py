"""``python -m attnkit verify``: attnkit and HuggingFace in float32, each against HuggingFace in float64.

Prints, per layer and quantity, attnkit's error and HuggingFace's own error against the float64
reference, the allowed bound and the float64-vs-float64 difference, then PASS or FAIL. Exit 0 on a
pass, 1 on a failure, 2 on bad arguments (before any work).
"""
from __future__ import annotations

import sys

import torch

from .. import verify as verify_lib
from ..loading import load_for_cli
from . import args as cli_args
from .pair import write_json

__all__ = ["cli", "parser"]

PROG = "attnkit verify"
MAX_TOKENS = 1_000_000       # beyond any context attnkit loads; the model's own context cuts further, and says so
MAX_GENERATE = 100_000


def parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name (gpt2, distilgpt2, …), attnkit-tiny or a local folder "
                        "(default: gpt2 if reachable, else the shipped model)")
    p.add_argument("--device", default="cpu", type=cli_args.device,
                   help="cpu, cuda, mps or auto (default: cpu); the float64 reference always runs on the CPU")
    p.add_argument("--text", default=None, type=cli_args.utf8_text,
                   help="text to run on (default: a short sentence; cut to the model's context, with a notice)")
    p.add_argument("--tokens", type=cli_args.int_in(1, MAX_TOKENS), default=None,
                   help="instead of --text, this many random token ids (e.g. the full context, 1024; at most the "
                        "context, with a notice)")
    p.add_argument("--seed", type=cli_args.seed, default=0, help=f"seed of --tokens (0–{cli_args.MAX_SEED:,})")
    p.add_argument("--generate", type=cli_args.int_in(0, MAX_GENERATE), default=8, metavar="N",
                   help="also greedy-decode N tokens with the KV cache and compare with HF generate (0: skip; "
                        "at most what the context leaves, with a notice)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path, help="write the report as JSON here")
    return p


def _note(text: str) -> None:
    print(f"{PROG}: note: {text}", file=sys.stderr)


def _ids(m, a):
    """The token ids to compare on, each cut said; None after one line on stderr."""
    n_ctx = m.config.n_ctx
    if a.tokens:
        if a.tokens > n_ctx:
            _note(f"--tokens {a.tokens:,} is longer than the context; using {n_ctx:,}")
        n = min(a.tokens, n_ctx)
        return torch.randint(0, m.config.d_vocab, (n,), generator=torch.Generator().manual_seed(a.seed))
    ids = m.encode(verify_lib.DEFAULT_TEXT if a.text is None else a.text)
    if not ids:
        print(f"{PROG}: the text has no tokens", file=sys.stderr)
        return None
    if len(ids) > n_ctx:
        _note(f"the text has {len(ids):,} tokens; only the first {n_ctx:,} (the context) are compared")
    return torch.tensor(ids[:n_ctx])


def cli(argv=None) -> int:
    a = parser().parse_args(argv)
    m = load_for_cli(a.model, a.device, PROG)
    if m is None:
        return 2
    ids = _ids(m, a)
    if ids is None:
        return 2
    ids = ids.to(m.device)
    pair = verify_lib.float64_pair(m.hf_model, m.weights)
    rep = verify_lib.compare(m.hf_model, m.weights, ids, name=m.name, pair=pair)
    n_new = min(a.generate, m.config.n_ctx - int(ids.numel()))
    if n_new < a.generate:
        _note(f"--generate {a.generate:,}: the context leaves room for {max(n_new, 0):,} new tokens")
    if n_new > 0:
        rep.generation = verify_lib.compare_generation(m.hf_model, m.weights, ids, n_new, pair=pair)
    print(rep.table())
    if a.json_out and not write_json(a.json_out, rep.to_dict(), PROG):
        return 1
    return 0 if rep.ok else 1
