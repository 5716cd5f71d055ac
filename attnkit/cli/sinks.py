"""``python -m attnkit sinks``: attention sinks and the cache-eviction lab on a text — which heads are sinks, and
the loss when the KV cache keeps k sink tokens and a window of the w most recent, for a grid of (k, w), beside
the full cache, with intervals and a verdict (attnkit.sinks, attnkit.eviction)."""
from __future__ import annotations

import sys

from .. import loading
from ..eviction import CLAIM, MODES, ORIGINAL, ROLLING, eviction_lab
from ..i18n import render
from ..sinks import measure_sinks, sink_rule, text_windows
from . import args as cli_args
from .entropy import _read_text
from .pair import write_json

PROG = "attnkit sinks"


#: Bounds of the counts (the text itself and the model's context cut further, and say so).
MAX_TOKENS, MAX_CONTEXT = 10_000_000, 1_000_000

def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit sinks",
                        description="Attention sinks and KV-cache eviction: the sink heads, and the loss when the cache "
                                    "keeps the first k tokens and the w most recent (query i sees key j when j <= i and "
                                    "(j < k or j > i - w)), for every k and w given, beside the full cache.")
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: gpt2 if reachable, else the shipped model)")
    p.add_argument("--device", default="cpu", type=cli_args.device, help="cpu, cuda, mps or auto (default: cpu)")
    p.add_argument("--text-file", required=True, type=cli_args.existing_nonempty_text_file, help="UTF-8 text")
    p.add_argument("--tokens", type=cli_args.int_in(2, MAX_TOKENS), default=None,
                   help="use the first N tokens of the text (default: all of it)")
    p.add_argument("--context", type=cli_args.int_in(2, MAX_CONTEXT, "tokens; the model's context cuts further"),
                   default=None,
                   help="tokens per cache: the text is cut into windows this long, each starting its own cache "
                        "(default: the model's context)")
    p.add_argument("--sinks", type=cli_args.int_list(0, 1024), default=[0, 1, 4],
                   help="first tokens kept, comma-separated (default 0,1,4; 0 = none)")
    p.add_argument("--windows", type=cli_args.int_list(1, 1_000_000), default=[32, 64, 128, 256],
                   help="most recent keys kept, comma-separated (default 32,64,128,256)")
    p.add_argument("--mode", choices=[ORIGINAL, ROLLING, "both"], default=ORIGINAL,
                   help="original-positions (keys keep their positions: the same as masking them), rolling (positions "
                        "re-assigned inside the cache; rotary models only) or both (default original-positions)")
    p.add_argument("--share-k", type=cli_args.int_in(1, 1024), default=None,
                   help="the sink heads' share is measured on the first k tokens (default: the largest --sinks, at "
                        "least 1)")
    p.add_argument("--resamples", type=cli_args.int_in(0, 100_000), default=1000,
                   help="bootstrap resamples for the intervals (default 1000; 0: none)")
    p.add_argument("--seed", type=cli_args.seed, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write the grid, the sink heads and the verdict here as JSON")
    return p


def _windows(m, text: str, a) -> tuple[list, int] | None:
    """The text's first --tokens tokens cut into caches of --context tokens; None after one line on stderr."""
    context = min(a.context or m.config.n_ctx, m.config.n_ctx)
    docs, have = text_windows(m.encode, text, context, a.tokens)
    if a.tokens is not None and have < a.tokens:
        print(f"{PROG}: note: the text has {have:,} tokens, fewer than --tokens {a.tokens:,}; using all of them",
              file=sys.stderr)
    if not docs:
        print(f"{PROG}: the text has {have} token(s): at least 2 are needed to predict one", file=sys.stderr)
        return None
    return docs, context


def _print(lab, stats, context: int) -> None:
    print(f"{lab.model}: {lab.tokens:,} predicted tokens in {lab.windows} cache window(s) of ≤ {context} tokens; "
          f"full cache {lab.full['loss']:.4f} nats/token ({lab.full['low']:.4f} … {lab.full['high']:.4f})")
    print(f"{'k':>5} {'w':>6}  {'mode':<19} {'loss':>8}  {'95 % interval':>19}  {'vs full':>8}  {'cost':>5}")
    for r in lab.rows:
        print(f"{r['sinks']:>5} {r['window']:>6}  {r['mode']:<19} {r['loss']:>8.4f}  "
              f"{r['low']:>8.4f} … {r['high']:<8.4f}  {r['delta']:>+8.4f}  {r['cost']:>5.2f}")
    for mode, why in lab.refused.items():
        print(f"{mode}: {render(why)}")
    heads = stats.heads()
    print(f"sink heads ({render(sink_rule(stats.threshold, stats.from_position))}): "
          + (", ".join(f"{n} {s:.3f}" for n, s in heads) if heads else "none"))
    v = lab.verdict
    print(f"claim: {render(CLAIM)}")
    print(f"verdict: {v.status}. {render(v.text)} Why: {render(v.why)}."
          + (f" To settle it: {render(v.settle)}." if v.settle else ""))


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    text = _read_text(a.text_file)
    if text is None:
        return 2
    m = loading.load_for_cli(a.model, a.device, PROG)
    if m is None:
        return 2
    got = _windows(m, text, a)
    if got is None:
        return 2
    docs, context = got
    modes = MODES if a.mode == "both" else (a.mode,)
    k = a.share_k or max(1, max(a.sinks))
    stats = measure_sinks(m.weights, docs, k=k, model=m.name)
    lab = eviction_lab(m.weights, docs, a.sinks, a.windows, modes, resamples=a.resamples, seed=a.seed,
                       sink_stats=stats, model=m.name)
    _print(lab, stats, context)
    if a.json_out:
        out = {"text_file": a.text_file, "context": context, **lab.to_dict()}
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
