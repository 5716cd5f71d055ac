"""``python -m attnkit bench``: attnkit against HuggingFace as ratios with targets (the bench itself is
:mod:`attnkit.dev.bench`); ``--family SHAPE`` runs it on a Llama-style shape, ``--long T,…`` adds the
long-context streaming figures."""
from __future__ import annotations

import sys

from ..dev import bench as bench_lib
from ..loading import LoadError
from . import args as cli_args
from .pair import write_json

MAX_T = 1_048_576             # a million tokens: beyond every shipped shape


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _parser():
    p = cli_args.Parser(prog="python -m attnkit bench", description=bench_lib.__doc__.split("\n\n")[0])
    p.add_argument("--model", type=cli_args.utf8_text, help="model name or folder (default: random-weight GPT-2 small shape)")
    p.add_argument("--json", dest="json_out", metavar="OUT", type=cli_args.writable_path, help="write every figure and raw timing here")
    p.add_argument("--lengths", type=cli_args.int_list(2, MAX_T),
                   help="comma-separated sequence lengths, each 2 to the model's context (default 128,512,1024; "
                        "with --quick 16,32, at most 64)")
    p.add_argument("--repeats", type=cli_args.int_in(1, 1000), help="timed runs per measurement (default 5; 1–1000)")
    p.add_argument("--quick", action="store_true", help="tiny model, T 16/32, 2 repeats: a few seconds")
    p.add_argument("--device", action="append", type=cli_args.device, help="cpu / cuda (repeatable; default cpu, plus cuda if present)")
    p.add_argument("--threads", type=cli_args.int_in(1, 1024), help="torch.set_num_threads before measuring")
    p.add_argument("--gen-new", type=cli_args.int_in(1, MAX_T), help="generated tokens (default 128)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory section (it starts subprocesses)")
    p.add_argument("--long", metavar="T,…", type=cli_args.int_list(16, MAX_T), help="also the long-context streaming figures at these lengths "
                   "(e.g. 8192,32768; SmolLM2-135M's shape, random weights; minutes per length)")
    p.add_argument("--long-layers", type=cli_args.int_in(1, 30), help="with --long: keep only this many of the 30 layers (faster; "
                   "time ratios are per layer)")
    p.add_argument("--shapes", type=_shapes, metavar="S,…", help="also the per-shape rows (trace, patching, attribution "
                   f"patching, peak memory) at these real shapes with random weights: {', '.join(SHAPE_NAMES)} "
                   "(checkpoints are built once into --shape-cache; xl is ~6 GB)")
    p.add_argument("--shape-T", type=cli_args.int_in(2, MAX_T), default=256, help="with --shapes: the trace's length (default 256)")
    p.add_argument("--shape-parts", type=_shape_parts, metavar="P,…", help="with --shapes: only these parts, of "
                   f"{', '.join(SHAPE_PARTS)} (default all)")
    p.add_argument("--shape-cache", type=cli_args.new_or_own_dir(bench_lib.shapes.CACHE_MARKER, "the bench"),
                   help="with --shapes: where the checkpoints are kept: new, empty, or one the bench filled "
                   "(default $ATTNKIT_BENCH_CACHE or <tmp>/attnkit-bench-cache)")
    return p


SHAPE_NAMES = [s for s in bench_lib.shapes.REAL_SHAPES if s != "tiny"]
SHAPE_PARTS = bench_lib.shapes.SHAPE_PARTS


def _shape_parts(text: str) -> list[str]:
    """--shape-parts: comma-separated names of attnkit.dev.bench.shapes.SHAPE_PARTS."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in SHAPE_PARTS]
    if not names or bad:
        raise cli_args.Err(f"{', '.join(bad) or 'nothing'} is not a part; choose from {', '.join(SHAPE_PARTS)}")
    return list(dict.fromkeys(names))


def _shapes(text: str) -> list[str]:
    """--shapes: comma-separated names of attnkit.dev.bench.shapes.REAL_SHAPES."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in bench_lib.shapes.REAL_SHAPES]
    if not names or bad:
        raise cli_args.Err(f"{', '.join(bad) or 'nothing'} is not a shape; choose from "
                                           f"{', '.join(SHAPE_NAMES)}")
    return list(dict.fromkeys(names))


def _family_parser():
    p = cli_args.Parser(prog="python -m attnkit bench --family", description=bench_lib.families.__doc__.split("\n\n")[0])
    p.add_argument("--family", default="smollm2-135m", choices=sorted(bench_lib.SHAPES))
    p.add_argument("--T", type=cli_args.int_in(2, MAX_T), default=256, help="sequence length (default 256)")
    p.add_argument("--repeats", type=cli_args.int_in(1, 1000), default=3)
    p.add_argument("--gen-prompt", type=cli_args.int_in(1, MAX_T), default=64)
    p.add_argument("--gen-new", type=cli_args.int_in(1, MAX_T), default=32)
    p.add_argument("--threads", type=cli_args.int_in(1, 1024))
    p.add_argument("--json", dest="json_out", metavar="OUT", type=cli_args.writable_path)
    return p


def family_cli(argv) -> int:
    """``--family SHAPE``: checks 1–3 and the KV cache's bytes on a Llama-style shape."""
    a = _family_parser().parse_args(argv)
    res = bench_lib.bench_family(a.family, T=a.T, repeats=a.repeats, gen_prompt=a.gen_prompt, gen_new=a.gen_new,
                         threads=a.threads, log=_log)
    print(bench_lib.format_family(res))
    if a.json_out:
        if not write_json(a.json_out, res, "attnkit bench"):
            return 1
    return 0


def _context(a) -> int | None:
    """The context of the model the bench builds itself (None for --model: the loader knows it)."""
    if a.model:
        return None
    return bench_lib.run.QUICK_CONFIG["n_positions"] if a.quick else 1024


def _add_long(res: dict, a) -> None:
    """--long: the long-context rows into ``res``, its summary recounted."""
    long = bench_lib.long_section(a.long, repeats=a.repeats or 2,
                          threads=a.threads, quick=a.quick, memory=not a.no_memory, layers=a.long_layers, log=_log)
    res["long"] = long
    res["results"] += long["rows"]
    res["summary"].update(bench_lib.judged_summary(res["results"]))


def _add_shapes(res: dict, a) -> None:
    """--shapes: the per-shape rows into ``res``, its summary recounted."""
    sec = bench_lib.shapes.shape_section(a.shapes, T=a.shape_T, repeats=a.repeats or 2, cache=a.shape_cache, log=_log,
                                             parts=a.shape_parts or SHAPE_PARTS)
    res["shapes"] = sec
    res["results"] += sec["rows"]
    res["summary"].update(bench_lib.judged_summary(res["results"]))


def cli(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(x == "--family" or x.startswith("--family=") for x in argv):
        return family_cli(argv)
    p = _parser()
    a = p.parse_args(argv)
    n_ctx = _context(a)
    if a.lengths and n_ctx is not None and max(a.lengths) > n_ctx:
        p.error(f"argument --lengths: {max(a.lengths):,} is beyond the {'--quick ' if a.quick else ''}model's "
                f"context of {n_ctx:,}")
    try:
        res = bench_lib.bench(a.model, lengths=a.lengths, repeats=a.repeats, quick=a.quick,
                      devices=list(dict.fromkeys(a.device)) if a.device else None,
                      threads=a.threads, gen_new=a.gen_new, memory=not a.no_memory, log=_log)
    except LoadError as e:
        print(f"attnkit bench: {e}", file=sys.stderr)
        return 1
    if a.long:
        _add_long(res, a)
    if a.shapes:
        _add_shapes(res, a)
    print(bench_lib.format_table(res))
    if a.long:
        print(bench_lib.format_long(res["long"]))
    if a.shapes:
        print(bench_lib.shapes.format_shapes(res["shapes"]))
    if a.json_out:
        if not write_json(a.json_out, res, "attnkit bench"):
            return 1
        print(f"\nwrote {a.json_out}")
    return 0
