"""``python -m attnkit calibrate [--json F]``: every method scored on every planted-circuit model (the
report card; see attnkit/calibration.py)."""
from __future__ import annotations

import sys
import time

from .. import loading
from ..calibration import calibrate, read_circuit, report
from ..files import FileError
from ..i18n import t
from ..prompts import MAX_PAIRS
from . import args as cli_args
from .pair import write_json

PROG = "attnkit calibrate"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit calibrate",
                        description="Run every explanation method on the planted-circuit models ("
                                    + ", ".join(loading.PLANTED_MODELS) + ") and score it against the circuit "
                                    "each model states in CIRCUIT.json.")
    p.add_argument("--models", nargs="+", choices=loading.PLANTED_MODELS, default=loading.PLANTED_MODELS,
                   help="planted models to score (default: all)")
    p.add_argument("--pairs", type=cli_args.int_in(1, MAX_PAIRS, "as a prompt set"), default=4,
                   help=f"prompt pairs per model (default 4; 1–{MAX_PAIRS})")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write the report card here as JSON")
    return p


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    start = time.perf_counter()
    try:
        models = [(n, loading.SHIPPED[n], loading.load(n, "cpu").weights) for n in a.models]
        for _, folder, w in models:                 # every stated circuit checked against its model before any work
            read_circuit(folder, w.config)
    except (loading.LoadError, FileError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    card = calibrate(models, a.pairs)
    print("\n".join(report(card)))
    print(f"({time.perf_counter() - start:.1f} s)")
    if a.json_out:
        if not write_json(a.json_out, card, PROG):
            return 1
        print(t("wrote {path}", path=a.json_out))
    return 0
