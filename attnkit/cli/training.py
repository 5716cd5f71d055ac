"""``python -m attnkit training --series S [--text-file F] [--json F]``: watch attention learn over a series of
checkpoints (the library is :mod:`attnkit.training`; a series is :mod:`attnkit.series`)."""
from __future__ import annotations

import sys
from pathlib import Path

from .. import diskcache
from .. import series as series_mod
from .. import training
from ..loading import LoadError
from ..dev.bench.series import series_bench
from ..prompts import PromptError, decode_text
from . import args as cli_args
from .outputs import write_json
from .progress import Ticker

PROG = "attnkit training"
COLUMNS = ["step", "induction", "induction_lo", "induction_hi", "induction_head", "previous_token", "first_token",
           "entropy", "icl", "repeat_loss", "k_composition", "val_loss", "cached"]


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit training",
                        description="head scores, ICL score and the induction phase change over training checkpoints")
    p.add_argument("--series", required=True, type=cli_args.utf8_text,
                   help=f"{series_mod.SHIPPED_SERIES_NAME}, a folder of step folders, or a hub model with revisions "
                        "(EleutherAI/pythia-160m@step0,step1000 or @step0..step143000/16)")
    p.add_argument("--text-file", default=None, type=cli_args.existing_nonempty_text_file,
                   help="UTF-8 text for the head statistics and the ICL score (default: the series' own text, else "
                        "the built-in paragraph)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path, help="write the results here")
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--no-cache", action="store_true", help="compute every checkpoint again (the cache is not read)")
    p.add_argument("--bench", action="store_true",
                   help="time the whole series from nothing (a fresh cache folder) and again from the disk cache")
    return p


def _bench(a) -> int:
    res = series_bench(a.series, a.device)
    for r in res["rows"]:
        print(f"{r['label']}: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU (target ≤ {r['target']:g} s) "
              f"{'ok' if r['ok'] else 'SLOW'}")
    return 0 if not a.json_out or write_json(a.json_out, res, PROG) else 1


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    problem = None if a.no_cache or a.bench else diskcache.cache_problem()
    if problem:
        print(f"{PROG}: {problem}; or run with --no-cache", file=sys.stderr)
        return 2
    try:
        if a.bench:
            series_mod.check_consistent(series_mod.resolve(a.series))
            return _bench(a)
        s = series_mod.resolve(a.series)
        series_mod.check_consistent(s)
        text = decode_text(Path(a.text_file).read_bytes(), a.text_file) if a.text_file else None
        res = training.analyse(s, text, device=a.device, use_cache=not a.no_cache,
                               progress=Ticker(PROG, "checkpoints"))
    except (LoadError, PromptError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    df = res.frame()
    print(f"series {a.series}: {len(df)} checkpoints ({s.source})")
    print(df[COLUMNS].to_string(index=False, float_format="%.3f"))
    print(res.verdict())
    print(res.icl_note())
    if a.json_out and not write_json(a.json_out, res.to_json(), PROG, ensure_ascii=False):
        return 1
    return 0
