"""``python -m attnkit attribute``: direct logit attribution and the logit lens for an answer."""
from __future__ import annotations

import math

import numpy as np

from ..attribution import direct_logit_attribution, logit_lens
from ..pieces import printable_token
from . import args as cli_args
from .pair import add_pair_args, load_pair, write_json

PROG = "attnkit attribute"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit attribute",
                        description="Direct logit attribution of logit(answer) − logit(distractor) on the "
                                    "clean prompt (and the corrupted one), plus the logit lens.")
    add_pair_args(p)
    p.add_argument("--top", type=cli_args.int_in(1, 10_000), default=15, help="parts listed (default 15)")
    return p


def _one_prompt(m, pair, which: str, ids, top: int, text: str) -> dict:
    """Print the attribution and the lens of one prompt; its JSON entry."""
    dla = direct_logit_attribution(m.weights, ids, pair.answer, pair.distractor, pair.pos)
    print(f"  {which}: actual {dla.actual:+.4f} = sum of parts {dla.total:+.4f}")
    for i in np.argsort(-np.abs(dla.values))[:top]:
        print(f"    {dla.labels[i]:<18} {dla.values[i]:+.4f}")
    lens = logit_lens(m.weights, ids, pair.answer, k=3)
    toks = m.token_strs(ids)
    ranks = lens.answer_rank[:, pair.pos]
    print(f"    logit lens at {printable_token(toks[pair.pos])}: answer rank by layer " + " ".join(f"{r}" for r in ranks))
    return {"text": text, "tokens": toks, "actual_logit_diff": dla.actual, "sum_of_parts": dla.total,
            "parts": [{"part": lab, "kind": k, "layer": l, "head": h, "logit_diff": float(v)}
                      for lab, k, l, h, v in zip(dla.labels, dla.kinds, dla.layers, dla.heads, dla.values)],
            "logit_lens": {"rows": lens.rows,
                           "answer_rank": lens.answer_rank[:, pair.pos].tolist(),
                           "answer_prob": [float(x) if math.isfinite(x) else None
                                           for x in lens.answer_prob[:, pair.pos]],
                           "top_token": [m.token_strs([int(t)])[0] for t in lens.top_ids[:, pair.pos, 0]]}}


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    got = load_pair(a, PROG)
    if got is None:
        return 2
    m, pair = got
    out = {"model": m.name, "answer": pair.answer_token, "answer_id": pair.answer,
           "distractor": pair.distractor_token, "distractor_id": pair.distractor, "position_read": pair.pos,
           "notes": pair.notes}
    print(f"{m.name} · direct logit attribution of logit({pair.answer_token!r}) − logit({pair.distractor_token!r}) "
          f"at position {pair.pos}")
    for n in pair.notes:
        print(f"  note: {n}")
    for which, ids, text in (("clean", pair.clean, a.clean), ("corrupt", pair.corrupt, a.corrupt)):
        out[which] = _one_prompt(m, pair, which, ids, a.top, text)
    if a.json_out:
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
