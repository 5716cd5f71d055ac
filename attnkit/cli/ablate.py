"""``python -m attnkit ablate``: one ablation on a text or prompt set, optionally swept over layers and heads.

Bad input (file, spec, a kind the model cannot take) exits with 2 before any model run."""
from __future__ import annotations

import sys

from .. import loading, prompts
from ..ablations import REGISTRY, AblationError, get_kind, parse_spec
from ..ablations.base import fmt_num
from ..ablations.hull import HULL_ITERS
from ..ablations.measure import check_available, head_sweep, jsonable, layer_sweep, measure
from . import args as cli_args
from .outputs import write_json

PROG = "attnkit ablate"
MAX_HULL_ITERS = 100_000


def _read_texts(path: str, column: str | None) -> list[str]:
    with open(path, "rb") as f:
        data = f.read()
    texts, warnings = prompts.prompts_from(prompts.read_upload(path, data), column)
    for w in warnings:
        print(f"{PROG}: {w}", file=sys.stderr)
    return texts


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(
        prog="python -m attnkit ablate",
        description="Run one ablation on a text (or prompt set) and compare with the unmodified model.",
        epilog="interventions: " + "; ".join(f"{k}: {v.definition}" for k, v in REGISTRY.items()))
    p.add_argument("--model", default=None, type=cli_args.utf8_text,
                   help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--text-file", required=True, type=cli_args.existing_nonempty_text_file,
                   help=".txt/.md (one text) or .csv/.jsonl (one prompt per row)")
    p.add_argument("--column", default=None, type=cli_args.utf8_text, help="column/field of a .csv/.jsonl upload")
    p.add_argument("--intervention", required=True, type=cli_args.utf8_text,
                   help=" | ".join(k + {"none": "", "optional": "[:LxHy,…]", "required": ":LxHy[,…]"}[v.heads]
                                   for k, v in REGISTRY.items()))
    p.add_argument("--layers", default=None, type=cli_args.utf8_text, help="layer scope, e.g. 0,2 (default: all layers)")
    p.add_argument("--sweep", action="store_true", help="also ablate each layer alone, then all layers")
    p.add_argument("--head-map", action="store_true",
                   help="also the loss change of every head ablated alone (L·H forwards per text)")
    p.add_argument("--hull-iters", type=cli_args.int_in(1, MAX_HULL_ITERS), default=HULL_ITERS,
                   help=f"iterations of the convex-hull ablation's projection (default {HULL_ITERS}; 1–{MAX_HULL_ITERS:,})")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write the results here as JSON")
    return p


def _bar(done: int, total: int) -> None:
    print(f"\r  {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def _inputs(a):
    """(model, spec, ids_list, dropped tokens) from the parsed arguments, or None after one line on stderr."""
    try:
        parse_spec(a.intervention, a.layers)                      # the words, before loading anything
        texts = _read_texts(a.text_file, a.column)
    except (OSError, prompts.PromptError, AblationError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return None
    m = loading.load_for_cli(a.model, a.device, PROG)
    if m is None:
        return None
    cfg = m.config
    try:
        spec = parse_spec(a.intervention, a.layers, cfg.n_layers, cfg.n_heads)
        check_available(m.weights, spec.kind)
    except AblationError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return None
    cut = [prompts.truncate(m.encode(t), cfg.n_ctx) for t in texts]
    dropped = [d for _, d in cut if d]
    if dropped:
        print(f"{PROG}: {sum(dropped):,} token(s) beyond the context of {cfg.n_ctx} were dropped "
              f"({len(dropped)} of {len(cut)} text(s) cut)", file=sys.stderr)
    ids_list = [i for i, _ in cut if i]
    if not ids_list:
        print(f"{PROG}: the text has no tokens", file=sys.stderr)
        return None
    return m, spec, ids_list, sum(dropped)


def _print_result(name: str, spec, res) -> None:
    print(f"{name} · {spec} · {res.texts} text(s), {res.baseline.tokens} predicted tokens")
    print(f"  claim: {res.claim}")
    print(f"  loss: {fmt_num(res.baseline.nats, '.4f')} → {fmt_num(res.ablated.nats, '.4f')} nats/token")
    print(f"  effect: {res.effect if res.effect else 'n/a (nothing predicted)'}")
    for s in res.per_layer.values():
        print(f"  {s.metric.title}: " + " · ".join(f"L{l} {fmt_num(b)} → {fmt_num(x)}"
                                                   for l, (b, x) in enumerate(zip(s.baseline, s.ablated))))
    v = res.verdict
    print(f"  verdict: {v.status} — {v.text}")
    if v.why:
        print(f"  why: {v.why}")
    if v.caveat:
        print(f"  note: {v.caveat}")
    print(f"  rule: {v.rule}")
    if v.settle:
        print(f"  would settle it: {v.settle}")
    for n in res.notes:
        print(f"  note: {n}")


def _sweep(m, ids_list, spec) -> list[dict]:
    sw = layer_sweep(m.weights, ids_list, spec, progress=_bar)
    for r in sw.rows:
        print(f"  sweep {r.scope:<11} nats/token {fmt_num(r.nats, '.4f')}  {r.effect or 'n/a'}")
    return [{"scope": r.scope, "nats": r.nats, "effect": r.effect and vars(r.effect)} for r in sw.rows]


def _head_map(m, ids_list, spec) -> dict:
    mode = spec.kind if get_kind(spec.kind).heads == "required" else "zero-head"
    hm = head_sweep(m.weights, ids_list, mode, progress=_bar)
    print(f"  head map ({mode}, {hm.forwards} forwards), loss change nats/token [layer × head]:")
    for l, row in enumerate(hm.increase):
        print(f"    L{l:<2} " + " ".join(fmt_num(float(v), '+.3f') for v in row))
    return {"mode": mode, "increase": hm.increase.tolist(), "lo": hm.lo.tolist(), "hi": hm.hi.tolist(),
            "forwards": hm.forwards}


def cli(argv=None) -> int:
    try:
        p = _parser()
        a = p.parse_args(argv)
    except SystemExit as e:                   # bad values: one line on stderr, exit 2, before any work
        return int(e.code or 0)
    got = _inputs(a)
    if got is None:
        return 2
    m, spec, ids_list, dropped = got
    res = measure(m.weights, ids_list, spec, hull_iters=a.hull_iters)
    out = {"model": a.model, "device": str(m.device), "dropped_tokens": dropped, "measure": res.to_dict()}
    _print_result(a.model, spec, res)
    if a.sweep:
        out["layer_sweep"] = _sweep(m, ids_list, spec)
    if a.head_map:
        out["head_map"] = _head_map(m, ids_list, spec)
    if a.json_out and not write_json(a.json_out, jsonable(out), PROG, indent=2, ensure_ascii=False):
        return 1
    return 0
