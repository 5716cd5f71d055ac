"""``python -m attnkit patch``: activation patching on a clean/corrupted prompt pair."""
from __future__ import annotations

from ..patching import DIRECTIONS, TARGET_LABELS, TARGETS, patch
from ..pieces import printable_token
from ..weights import head_name
from . import args as cli_args
from .pair import add_pair_args, load_pair, write_json
from .progress import Ticker

PROG = "attnkit patch"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit patch",
                        description="Activation patching on a clean/corrupted prompt pair: the normalised "
                                    "logit difference (corrupted 0, clean 1) for every patched activation.")
    add_pair_args(p)
    p.add_argument("--target", choices=TARGETS, default="z", help="z (heads), resid, attn or mlp (default z)")
    p.add_argument("--per-position", action="store_true", help="patch each position separately")
    p.add_argument("--direction", choices=DIRECTIONS, default="denoise",
                   help="denoise: corrupted run, clean activation patched in (default); noise: the reverse")
    return p


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    got = load_pair(a, PROG)
    if got is None:
        return 2
    m, pair = got
    res = patch(m.weights, pair, a.target, per_position=a.per_position, direction=a.direction,
                progress=Ticker(PROG, "patched runs"))
    toks = m.token_strs(pair.corrupt if a.direction == "denoise" else pair.clean)
    print(f"{m.name} · {TARGET_LABELS[a.target]} · {a.direction} · {pair.T} tokens · read at position "
          f"{pair.pos} ({printable_token(toks[pair.pos])})")
    for n in res.notes:
        print(f"  note: {n}")
    print(f"  logit diff  clean {res.clean_ld:+.4f}  corrupted {res.corrupt_ld:+.4f}  "
          f"({res.n_runs} patched runs)")
    df = res.frame(toks).sort_values("normalised", ascending=False, key=lambda s: s.abs(), na_position="last")
    print("  largest effects (normalised: corrupted 0, clean 1):")
    for _, r in df.head(10).iterrows():
        where = (head_name(int(r["layer"]), int(r["head"])) if "head" in r else r["row"] if "row" in r
                 else f"L{int(r['layer'])}") + \
                (f" pos {int(r['position'])} {printable_token(r['token'])}" if "position" in r else "")
        print(f"    {where:<28} {r['normalised']:+.4f}  (logit diff {r['logit_diff']:+.4f})")
    if a.json_out:
        out = {"model": m.name, "clean": a.clean, "corrupt": a.corrupt, "answer": pair.answer_token,
               "answer_id": pair.answer, "distractor": pair.distractor_token, "distractor_id": pair.distractor,
               "tokens_clean": m.token_strs(pair.clean), "tokens_corrupt": m.token_strs(pair.corrupt),
               **res.to_json()}
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
