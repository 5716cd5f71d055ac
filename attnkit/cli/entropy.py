"""``python -m attnkit entropy``: attention entropy against context length, per layer, head and position."""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import loading, prompts
from ..entropy import CLAIM, LogLengthScaling, Summary, claim_check, documents, profile_documents
from . import args as cli_args
from .outputs import write_json

PROG = "attnkit entropy"
MAX_WINDOW = 1_000_000        # beyond any context attnkit loads
MAX_DOCS = 1_000_000
MAX_BATCH = 4_096


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit entropy",
                        description="Attention entropy against context length, per layer, head and position.")
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: gpt2 if reachable, else the shipped model)")
    p.add_argument("--device", default="cpu", type=cli_args.device, help="cpu, cuda, mps or auto (default: cpu)")
    p.add_argument("--text-file", required=True, type=cli_args.existing_nonempty_text_file,
                   help="UTF-8 text, split into windows of --window tokens")
    p.add_argument("--window", type=cli_args.int_in(2, MAX_WINDOW, "tokens; the model's context cuts further"), default=None,
                   help="window length in tokens (default: the model's context)")
    p.add_argument("--max-docs", type=cli_args.int_in(1, MAX_DOCS), default=None,
                   help=f"use at most this many windows (1–{MAX_DOCS:,})")
    p.add_argument("--batch", type=cli_args.int_in(1, MAX_BATCH), default=4,
                   help=f"windows per forward pass (default 4; 1–{MAX_BATCH:,})")
    p.add_argument("--log-base", type=cli_args.positive_float, default=None,
                   help="also run the log-length intervention: scores × log_b(i+1) with this base b > 1")
    p.add_argument("--no-clamp", action="store_true",
                   help="use log_b(i+1) as is (flattens positions < b); default max(1, log_b(i+1))")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write all the numbers as JSON here")
    return p


def _read_text(path: str) -> str | None:
    """The file's text, checked, or None after one line on stderr."""
    try:
        with open(path, "rb") as f:
            text = prompts.decode_text(f.read(), path)
        prompts.check_text(text)
        return text
    except OSError as e:
        print(f"{PROG}: cannot read {path}: {e.strerror}", file=sys.stderr)
    except prompts.PromptError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
    return None


def _print_summary(name: str, s: Summary, docs, window: int, seconds: float, verdict: str, why) -> None:
    H = s.n_heads
    print(f"{name}: {len(docs)} window(s) of ≤ {window} tokens ({sum(map(len, docs)):,} tokens), "
          f"{seconds:.1f} s; next-token loss {s.loss:.4f} nats/token")
    print(f"{'layer':>5}  {'H at last pos':>13}  {'bound ln n':>10}  {'normalised':>10}  {'mean slope':>10}  "
          f"{'first-token':>11}")
    for l in range(s.n_layers):
        print(f"{l:>5}  {s.mean['entropy'][l, H, -1]:>13.3f}  {s.layer_bound(l)[-1]:>10.3f}  "
              f"{s.normalised()[l, H, -1]:>10.3f}  {np.nanmean(s.slope[l]):>10.3f}  "
              f"{s.mean['first_token'][l, H, -1]:>11.3f}")
    print(f"seed's claim (entropy rises with context length): {verdict}. {why}")


def _log_length(m, docs, a, s: Summary) -> dict:
    """The log-length intervention's run, printed, as the JSON's ``log_length`` entry."""
    iv = LogLengthScaling(a.log_base, clamp=not a.no_clamp)
    s2 = profile_documents(m.weights, docs, iv, batch=a.batch)
    H = s2.n_heads
    print(f"log-length scaling ({iv.describe()}): loss {s2.loss:.4f} vs {s.loss:.4f} nats/token "
          f"({s2.loss - s.loss:+.4f}); head-mean entropy at the last position per layer: "
          + ", ".join(f"{s2.mean['entropy'][l, H, -1]:.2f}" for l in range(s2.n_layers)))
    return {"base": a.log_base, "clamp": not a.no_clamp, "formula": iv.describe(),
            "loss_change": round(s2.loss - s.loss, 6), **s2.to_dict()}


def cli(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    text = _read_text(a.text_file)
    if text is None:
        return 2
    try:
        if a.log_base is not None:
            LogLengthScaling(a.log_base, clamp=not a.no_clamp)          # a bad base: refused before loading
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    m = loading.load_for_cli(a.model, a.device, PROG)
    if m is None:
        return 2
    window = min(a.window or m.config.n_ctx, m.config.n_ctx)
    try:
        docs, info = documents(m.encode, [text], window, split=True, max_docs=a.max_docs)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if not docs:
        print(f"{PROG}: the text has fewer than 2 tokens: there is nothing to attend over", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    s = profile_documents(m.weights, docs, batch=a.batch)
    seconds = time.perf_counter() - t0
    verdict, why = claim_check(s, m.config.n_ctx)
    _print_summary(m.name, s, docs, window, seconds, verdict, why)
    out = {"model": m.name, "text_file": a.text_file, "window": window, "documents": info,
           "tokens": int(sum(map(len, docs))), "seconds": round(seconds, 3), "claim": CLAIM,
           "verdict": verdict, "verdict_detail": str(why), "entropy_unit": "nats",
           "axes": {"per_head": "[layer][head][position]", "layer_mean": "[layer][position]"},
           **s.to_dict()}
    if a.log_base is not None:
        out["log_length"] = _log_length(m, docs, a, s)
    if a.json_out:
        if not write_json(a.json_out, out, PROG, indent=None):
            return 1
        print(f"wrote {a.json_out}")
    return 0
