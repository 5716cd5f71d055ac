"""``python -m attnkit verify``: attnkit and HuggingFace in float32, each against HuggingFace in float64.

Prints, per layer and quantity, attnkit's error and HuggingFace's own error against the float64
reference, the allowed bound and the float64-vs-float64 difference, then PASS or FAIL. Exit 0 on a
pass, 1 on a failure, 2 on bad arguments (before any work).
"""
from __future__ import annotations

import json
import sys

from . import args as cli_args

__all__ = ["cli", "parser"]


def parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name (gpt2, distilgpt2, …), attnkit-tiny or a local folder "
                        "(default: gpt2 if reachable, else the shipped model)")
    p.add_argument("--device", default="cpu", type=cli_args.device,
                   help="cpu, cuda, mps or auto (default: cpu); the float64 reference always runs on the CPU")
    p.add_argument("--text", default=None, type=cli_args.utf8_text, help="text to run on (default: a short sentence)")
    p.add_argument("--tokens", type=cli_args.positive_int, default=None,
                   help="instead of --text, this many random token ids (e.g. the full context, 1024)")
    p.add_argument("--seed", type=cli_args.nonneg_int, default=0)
    p.add_argument("--generate", type=cli_args.nonneg_int, default=8, metavar="N",
                   help="also greedy-decode N tokens with the KV cache and compare with HF generate (0: skip)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path, help="write the report as JSON here")
    return p


def cli(argv=None) -> int:
    a = parser().parse_args(argv)
    import torch

    from .. import verify as verify_lib
    from ..loading import load_for_cli

    m = load_for_cli(a.model, a.device, "attnkit verify")
    if m is None:
        return 2
    if a.tokens:
        n = min(a.tokens, m.config.n_ctx)
        ids = torch.randint(0, m.config.d_vocab, (n,), generator=torch.Generator().manual_seed(a.seed))
    else:
        ids = torch.tensor(m.encode(verify_lib.DEFAULT_TEXT if a.text is None else a.text)[: m.config.n_ctx])
        if ids.numel() == 0:
            print("attnkit verify: the text has no tokens", file=sys.stderr)
            return 2
    ids = ids.to(m.device)
    pair = verify_lib.float64_pair(m.hf_model, m.weights)
    rep = verify_lib.compare(m.hf_model, m.weights, ids, name=m.name, pair=pair)
    n_new = min(a.generate, m.config.n_ctx - int(ids.numel()))
    if n_new > 0:
        rep.generation = verify_lib.compare_generation(m.hf_model, m.weights, ids, n_new, pair=pair)
    print(rep.table())
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(rep.to_dict(), f, indent=2)
    return 0 if rep.ok else 1
