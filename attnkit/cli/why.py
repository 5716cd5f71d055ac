"""``python -m attnkit why``: why does query i attend to key j? One head's attention score split exactly into
query-part × key-part terms (attnkit.score_terms)."""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import loading
from ..pieces import printable_token
from ..score_terms import RowTerms, ScoreTermsError, explain, grouped, score_terms, top_terms
from ..standard import parse_head
from . import args as cli_args
from .pair import write_json

PROG = "attnkit why"
MAX_POSITION = 1_000_000      # beyond any context attnkit loads (as verify --tokens); the model's own context cuts further


def _head(s: str) -> tuple[int, int]:
    try:
        return parse_head(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit why",
                        description="Why does query i attend to key j? The head's score split exactly into "
                                    "query-part × key-part terms (embed, pos_embed, L{l}H{h}, L{l} b_O, MLP{l}, "
                                    "ln1 bias, b_Q, b_K), each norm's scale held at its value on this prompt.")
    p.add_argument("--model", default=None, help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--text", required=True, type=cli_args.utf8_text, help="the prompt (nothing prepended)")
    p.add_argument("--head", required=True, type=_head, help="the head, e.g. L3H0")
    p.add_argument("--query", required=True, type=cli_args.int_in(0, MAX_POSITION, "a token position"), help="query token position (0-based)")
    p.add_argument("--key", type=cli_args.int_in(0, MAX_POSITION, "a token position"), default=None,
                   help="key token position (0-based); without it, the whole query row")
    p.add_argument("--against", type=cli_args.int_in(0, MAX_POSITION, "a token position"), default=None,
                   help="a second key j′: split score(query, key) − score(query, j′)")
    p.add_argument("--top", type=cli_args.int_in(1, 10_000), default=10, help="terms listed (default 10; 1–10,000)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write score, every term and their total here as JSON")
    return p


def _tok(toks: list[str], p: int) -> str:
    return f"{p} {printable_token(toks[p])!r}"


def _print_key(st, toks: list[str], top: int) -> None:
    print(f"  the model's score {st.score:+.6f}   sum of the {st.values.size} terms {st.total:+.6f}")
    print("  " + explain(st, [printable_token(t) for t in toks]))
    print(f"  largest terms (query part × key part):")
    for _, r in top_terms(st, top).iterrows():
        print(f"    {r['query']:>12} × {r['key']:<12} {r['value']:+.4f}  ({r['share']:+.1%} of the score)")
    print("  key side (summed over the query parts):")
    for name, v in st.key_side.sort_values(key=abs, ascending=False).head(top).items():
        print(f"    {name:<12} {v:+.4f}")
    print("  by kind (query × key):")
    for _, r in grouped(st, "kind").iterrows():
        print(f"    {r['query_group']:>10} × {r['key_group']:<10} {r['value']:+.4f}")


def _print_row(row: RowTerms, toks: list[str], top: int) -> None:
    order = np.argsort(-row.scores)[:top]
    print("  highest-scoring keys, each with the key part contributing most:")
    for n in order:
        col = row.key_side[:, n]
        best = int(np.argmax(np.abs(col)))
        print(f"    key {_tok(toks, int(row.keys[n])):<24} score {row.scores[n]:+.4f}   "
              f"{row.key_parts[best]} {col[best]:+.4f}")


def _row_json(row: RowTerms) -> dict:
    keys = []
    for n, j in enumerate(row.keys):
        keys.append({"key": int(j), "score": float(row.scores[n]), "total": float(row.key_side[:, n].sum()),
                     "key_side": [{"part": p, "value": float(v)} for p, v in zip(row.key_parts, row.key_side[:, n])],
                     "query_side": [{"part": p, "value": float(v)}
                                    for p, v in zip(row.query_parts, row.query_side[:, n])]})
    return {"head": row.head, "kv_head": row.kv_head, "query": row.query, "keys": keys}


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    if a.against is not None and a.key is None:
        print(f"{PROG}: --against needs --key (the contrast is score(query, key) − score(query, against))",
              file=sys.stderr)
        return 2
    m = loading.load_for_cli(a.model, a.device, PROG)
    if m is None:
        return 2
    ids = m.encode(a.text)
    if not ids or len(ids) > m.config.n_ctx:
        print(f"{PROG}: the text has {len(ids)} tokens; need 1 … {m.config.n_ctx}", file=sys.stderr)
        return 2
    layer, head = a.head
    try:
        res = score_terms(m.weights, ids, layer, head, a.query, a.key, a.against)
    except ScoreTermsError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    toks = m.token_strs(ids)
    what = f"key {_tok(toks, a.key)}" if a.key is not None else "every key it sees"
    vs = f" against key {_tok(toks, a.against)}" if a.against is not None else ""
    print(f"{m.name} · {res.head} · query {_tok(toks, a.query)} → {what}{vs} · {len(ids)} tokens")
    if isinstance(res, RowTerms):
        _print_row(res, toks, a.top)
        out = _row_json(res)
    else:
        _print_key(res, toks, a.top)
        out = res.to_json()
    if a.json_out:
        out = {"model": m.name, "text": a.text, "tokens": toks, **out}
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
