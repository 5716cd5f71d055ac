"""``python -m attnkit calibrate [--models …] [--model FOLDER …] [--json F]``: every method scored on planted-circuit
models (the report card; see attnkit/calibration.py) — the shipped ones, and any folder that states its circuit in a
``CIRCUIT.json`` (docs/formats.md)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import loading
from ..calibration import calibrate, read_circuit, report
from ..files import FileError
from ..i18n import t
from ..planted_files import CIRCUIT_FILE
from ..prompts import MAX_PAIRS
from . import args as cli_args
from .pair import write_json

PROG = "attnkit calibrate"


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit calibrate",
                        description="Run every explanation method on planted-circuit models and score it against "
                                    "the circuit each model states in CIRCUIT.json: the shipped ones ("
                                    + ", ".join(loading.PLANTED_MODELS) + ") and, with --model, a folder of your own "
                                    "(its CIRCUIT.json: docs/formats.md).")
    p.add_argument("--models", nargs="+", choices=loading.PLANTED_MODELS, default=None,
                   help="shipped planted models to score (default: all, unless --model is given)")
    p.add_argument("--model", action="append", default=[], type=cli_args.utf8_text, metavar="FOLDER",
                   help="a model folder holding a CIRCUIT.json (repeatable): scored beside --models")
    p.add_argument("--pairs", type=cli_args.int_in(1, MAX_PAIRS, "as a prompt set"), default=4,
                   help=f"prompt pairs per model (default 4; 1–{MAX_PAIRS})")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write the report card here as JSON")
    return p


def _folders(a) -> list[tuple[str, Path, str]]:
    """(name, folder, what to load) of every model to score: --models (all shipped ones when neither option is
    given), then each --model FOLDER by its folder's name. FileError (one line) for a folder without a readable
    CIRCUIT.json."""
    shipped = a.models if a.models is not None else ([] if a.model else loading.PLANTED_MODELS)
    out = [(n, Path(loading.SHIPPED[n]), n) for n in shipped]
    for given in a.model:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            raise FileError(t("--model {folder}: not a folder (a model folder holding {file})", folder=given,
                              file=CIRCUIT_FILE))
        read_circuit(folder)                      # the file's own syntax, before the model is loaded
        out.append((folder.resolve().name, folder, str(folder)))
    return out


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    start = time.perf_counter()
    try:
        folders = _folders(a)
        models = [(n, f, loading.load(source, "cpu").weights) for n, f, source in folders]
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
