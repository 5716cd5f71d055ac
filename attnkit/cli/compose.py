"""``python -m attnkit compose``: prompt-free Q/K/V-composition scores between heads of different layers,
with a random baseline, and each head's OV copying and QK scores."""
from __future__ import annotations

import sys

import numpy as np

from ..circuits.compose import composition, head_scores
from ..i18n import t
from ..loading import load_for_cli
from ..standard import head_name
from .pair import write_json
from . import args as cli_args

PROG = "attnkit compose"
MAX_SAMPLES = 10_000


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit compose",
                 description="Composition scores (Elhage et al. 2021) of every pair of heads in different layers, "
                             "beside the score of random matrices of the same shapes; per-head OV copying and QK "
                             "token/positional scores. Heads are named L{layer}H{head}.")
    p.add_argument("--model", default=None, help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--mode", choices=("q", "k", "v", "all"), default="all", help="which composition (default all)")
    p.add_argument("--top", type=cli_args.int_in(1, 10_000), default=10, help="pairs listed per mode (default 10; 1–10,000)")
    p.add_argument("--layers", type=cli_args.int_in(0, 10_000), nargs=2, metavar=("SENDER", "RECEIVER"), default=None,
                   help="only pairs from this sender layer to this receiver layer")
    p.add_argument("--samples", type=cli_args.int_in(10, MAX_SAMPLES, "each sample holds a d_model² matrix"), default=200,
                   help=f"random baseline samples (default 200; 10–{MAX_SAMPLES:,})")
    p.add_argument("--seed", type=cli_args.seed, default=0, help=f"random baseline seed (default 0; 0–{cli_args.MAX_SEED:,})")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path, help="write the results here")
    return p


def _pairs(comp, mode: str, layers, top: int) -> list[tuple[str, str, float]]:
    if layers is None:
        return comp.top(mode, top)
    l1, l2 = layers
    blk = comp.block(mode, l1, l2)
    order = np.argsort(-blk, axis=None)[:top]
    H = comp.n_heads
    return [(head_name(l1, int(i) // H), head_name(l2, int(i) % H), float(blk.ravel()[i])) for i in order]


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    m = load_for_cli(a.model, a.device, PROG)
    if m is None:
        return 2
    L = m.config.n_layers
    if a.layers is not None and not (a.layers[0] < a.layers[1] < L):
        print(f"{PROG}: --layers {a.layers[0]} {a.layers[1]}: need SENDER < RECEIVER < {L}", file=sys.stderr)
        return 2
    modes = ("q", "k", "v") if a.mode == "all" else (a.mode,)
    comp = composition(m.weights, modes, baseline_samples=a.samples, seed=a.seed)
    hs = head_scores(m.weights)
    b = comp.baseline
    print(f"{m.name} · composition scores · random baseline ({b['n']} samples, seed {b['seed']}): "
          f"mean {b['mean']:.4f}, 95th pct {b['q95']:.4f}, 99th pct {b['q99']:.4f}")
    for n in comp.notes:
        print(f"  note: {n}")
    print("  " + t("From the weights alone: a score says how much a later head could read an earlier one's output, "
                   "not that it does on any prompt — a real edge and a decoy's can score alike. Measure the effect: "
                   "python -m attnkit circuit --receiver (path patching)."))
    out = {"model": m.name, **comp.to_json(), "top": {}}
    for mode in modes:
        print(f"  {mode.upper()}-composition, largest pairs (sender → receiver):")
        pairs = _pairs(comp, mode, a.layers, a.top)
        out["top"][mode] = [{"sender": s, "receiver": r, "score": v} for s, r, v in pairs]
        for s, r, v in pairs:
            flag = "  > baseline 99th pct" if v > b["q99"] else ""
            print(f"    {s:>7} → {r:<7} {v:.4f}  (×{v / b['mean']:.1f} baseline mean){flag}")
    print("  per head: OV copying (Re Σλ/Σ|λ|), QK same-token, QK positional share, preferred offset")
    df = hs.frame()
    for _, r in df.iterrows():
        print(f"    {r['head']:<7} copying {r['copying']:+.3f}  qk_token {r['qk_token']:+.3f}  "
              f"positional {r['qk_positional']:.3f}  offset {int(r['preferred_offset'])}")
    out["heads"] = df.to_dict(orient="records")
    out["head_notes"] = hs.notes
    if a.json_out:
        if not write_json(a.json_out, out, PROG):
            return 1
        print(f"wrote {a.json_out}")
    return 0
