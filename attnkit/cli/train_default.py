"""``python -m attnkit train-default``: retrain the shipped attnkit-tiny model (the training itself is
:mod:`attnkit.dev.train`; its docstring describes the corpus and the pipeline). ``--out`` is required:
a new or empty folder, or one train-default wrote; the shipped model's folder only with
``--overwrite-shipped``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..dev import train as TR
from . import args as cli_args


def model_folder(s: str) -> str:
    """A GPT-2 folder whose weights are model.safetensors (pickle files are never loaded)."""
    p = Path(cli_args.utf8_text(s)).expanduser()
    if not p.exists():
        raise cli_args.Err(f"{s}: no such folder")
    if not p.is_dir():
        raise cli_args.Err(f"{s} is a file; give the model's folder (config.json and model.safetensors)")
    if not (p / "model.safetensors").is_file():
        pickles = sorted(x.name for x in p.glob("*.bin")) + sorted(x.name for x in p.glob("*.pt"))
        raise cli_args.Err(f"{s} holds no model.safetensors" + (f" ({', '.join(pickles)} are pickle files, never loaded)"
                                                           if pickles else ""))
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise cli_args.Err(f"{s} has no readable config.json") from None
    if not isinstance(cfg, dict) or cfg.get("model_type") != "gpt2":
        raise cli_args.Err(f"{s} is not a GPT-2 model (model_type {cfg.get('model_type') if isinstance(cfg, dict) else None!r})")
    return s


model_folder.role = "input"


#: The most optimizer steps a run plans (the shipped models took a few thousand).
MAX_STEPS = 10_000_000
MAX_MINUTES = 7 * 24 * 60


def minutes(s: str) -> float:
    """--minutes: a positive number of minutes, at most a week."""
    x = cli_args.positive_float(s)
    if x > MAX_MINUTES:
        raise cli_args.Err(f"must be at most {MAX_MINUTES:,} (a week), got {s}")
    return x


def share_above_0(s: str) -> float:
    x = cli_args.fraction(s)
    if x == 0:
        raise cli_args.Err("must be a share above 0 and at most 1, got 0")
    return x


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit train-default", description=TR.__doc__.split("\n")[0],
                        shipped_ok="overwrite_shipped")
    p.add_argument("--out", default=None, type=cli_args.new_or_own_dir("training_log.json", "train-default"),
                   help="output folder (required): new, empty, or one train-default wrote (replaced when the new "
                        "run is complete). The shipped model's folder only with --overwrite-shipped")
    p.add_argument("--overwrite-shipped", action="store_true",
                   help="allow --out to be the shipped attnkit-tiny folder (" + str(TR.DEFAULT_OUT) + ")")
    p.add_argument("--steps", type=cli_args.int_in(1, MAX_STEPS), default=1800, help="optimizer steps (default 1800)")
    p.add_argument("--minutes", type=minutes, default=None,
                   help="time-boxed run (implies --schedule wsd): constant LR until 80%% of the time, "
                        "then a linear decay sized to the measured speed; stops at the limit. "
                        "The card records the equivalent --steps/--decay-start/--stop-after")
    p.add_argument("--schedule", choices=["cosine", "wsd"], default="cosine",
                   help="cosine: warmup + cosine decay; wsd: warmup, constant, linear decay")
    p.add_argument("--decay-start", type=cli_args.int_in(0, MAX_STEPS), default=None, help="wsd: step the decay starts (default 80%%)")
    p.add_argument("--stop-after", type=cli_args.int_in(1, MAX_STEPS), default=None,
                   help="stop after this many steps; the LR schedule is still planned for --steps")
    p.add_argument("--init-from", default=None, type=model_folder,
                   help="continue training the model in this folder (a later stage; its tokenizer is retrained "
                        "identically from the same corpus and seed and must match)")
    p.add_argument("--corpus-limit", type=cli_args.int_in(1, 10**11), default=None, help="max characters of corpus")
    p.add_argument("--corpus-file", default=None, type=cli_args.existing_nonempty_text_file, help="train on this text file instead of Debian text")
    p.add_argument("--corpus", choices=["en", "zh"], default="en",
                   help="the Debian source set: en (attnkit-tiny's, mostly English) or zh (attnkit-tiny-zh's: "
                        "Chinese documentation, manual pages and fortunes with some English prose)")
    p.add_argument("--snapshots", type=cli_args.int_in(0, 1_000), default=0,
                   help="keep this many float16 snapshots as a training series in OUT/steps (with series.json), "
                        "chosen densest where the logged induction score changes fastest (default 0: none)")
    p.add_argument("--seed", type=cli_args.seed, default=1234)
    p.add_argument("--threads", type=cli_args.int_in(1, 1_024), default=1, help="torch CPU threads")
    p.add_argument("--batch", type=cli_args.int_in(1, 4_096), default=16)
    p.add_argument("--lr", type=cli_args.positive_float, default=2e-3)
    p.add_argument("--warmup", type=cli_args.int_in(0, MAX_STEPS), default=100)
    p.add_argument("--weight-decay", type=cli_args.nonneg_float, default=0.1)
    _model_and_data_flags(p)
    return p


def _model_and_data_flags(p: cli_args.Parser) -> None:
    """The model's shape, the training windows and the data mixture."""
    p.add_argument("--vocab-size", type=cli_args.int_in(1, 262_144), default=8192)
    p.add_argument("--n-layer", type=cli_args.int_in(1, 256), default=4)
    p.add_argument("--n-head", type=cli_args.int_in(1, 256), default=8)
    p.add_argument("--n-embd", type=cli_args.int_in(1, 16_384), default=256)
    p.add_argument("--n-positions", type=cli_args.int_in(2, 65_536), default=256)
    p.add_argument("--eval-every", type=cli_args.int_in(1, MAX_STEPS), default=100)
    p.add_argument("--train-block", type=cli_args.int_in(2, 65_536), default=None,
                   help="training window (default: --n-positions); windows of --n-positions from --long-start on")
    p.add_argument("--long-start", type=cli_args.int_in(0, MAX_STEPS), default=None,
                   help="from this step on, train on --n-positions windows (batch scaled to keep tokens/step)")
    p.add_argument("--long-frac", type=share_above_0, default=0.9,
                   help="with --minutes and --train-block: switch to long windows at this fraction of the time")
    p.add_argument("--text-repeat", type=cli_args.fraction, default=0.0,
                   help="share of training rows that are a span of natural text repeated (induction-friendly)")
    p.add_argument("--random-repeat", type=cli_args.fraction, default=0.0,
                   help="share of training rows that are a span of random tokens repeated")
    p.add_argument("--pos-shift", type=cli_args.fraction, default=0.0,
                   help="share of natural short rows placed at a random position offset (trains later positions)")
    p.add_argument("--pos-init", choices=["gpt2", "sinusoid"], default="gpt2",
                   help="position embeddings at initialisation: GPT-2's N(0, 0.02), or sinusoids of the same "
                        "per-dimension scale (neighbouring positions start out similar; still learned)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the training forward pass "
                   "(weights, optimizer and evaluation stay float32)")
    p.add_argument("--compare-with", default=None, type=model_folder,
                   help="also measure this (older) model folder's bits per byte on the new validation text")
    p.add_argument("--tiny-test", action="store_true",
                   help="tiny model/corpus/steps for a seconds-long end-to-end test")
    p.add_argument("--card-only", action="store_true",
                   help="re-measure the heads of the model in --out and rewrite its MODEL_CARD.md from its "
                        "training_log.json (no training)")
    p.add_argument("--score-only", action="store_true",
                   help="only print head scores of the model already in --out")


def parse_args(argv):
    """The flags, checked (exit 2 with one line on a bad one); ``--tiny-test`` shrinks every size."""
    p = _parser()
    a = p.parse_args(argv)
    if a.out is None:
        p.error("--out is required: a new or empty folder (the shipped model's folder only with --overwrite-shipped)")
    if a.card_only and not (Path(a.out) / "training_log.json").is_file():
        p.error(f"--card-only: {a.out} has no training_log.json (not a folder written by train-default)")
    if a.score_only and not (Path(a.out) / "model.safetensors").is_file():
        p.error(f"--score-only: {a.out} holds no model.safetensors")
    if not a.score_only:
        try:
            TR.check_out(a.out, a.overwrite_shipped)
        except TR.TrainError as e:
            p.error(f"argument --out: {e}")
    if a.tiny_test:
        a.n_layer, a.n_head, a.n_embd, a.n_positions = 2, 2, 32, 32
        a.vocab_size = min(a.vocab_size, 400)
        a.steps, a.batch, a.warmup, a.eval_every = min(a.steps, 6), 4, 2, 3
        a.corpus_limit = a.corpus_limit or 200_000
        a.minutes = None
    _check_shape(p, a)
    return a


def _check_shape(p: cli_args.Parser, a) -> None:
    """Settings that only fail together (exit 2 before any work)."""
    if a.n_embd % a.n_head:
        p.error(f"--n-head {a.n_head} does not divide --n-embd {a.n_embd} (each head gets n_embd / n_head dimensions)")
    if a.text_repeat + a.random_repeat > 1:
        p.error(f"--text-repeat {a.text_repeat:g} + --random-repeat {a.random_repeat:g} is more than all the rows")
    if a.init_from:
        n = json.loads((Path(a.init_from).expanduser() / "config.json").read_text(encoding="utf-8")).get("n_positions")
        if n != a.n_positions:
            p.error(f"--init-from {a.init_from} has {n} positions; this run has --n-positions {a.n_positions}")


def _log(text: str) -> None:
    print(text, flush=True)


def cli(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    if a.card_only:   # re-measure the heads and rewrite MODEL_CARD.md from the saved training log
        print(f"rewrote {TR.rewrite_card(Path(a.out), a.threads, log=_log)}")
        return 0
    if a.score_only:
        print(TR.probe_saved(Path(a.out), a.seed, a.threads))
        return 0
    try:
        TR.train(TR.Options.of(a), argv, log=_log)
    except TR.TrainError as e:
        print(f"attnkit train-default: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nattnkit train-default: interrupted; {a.out} is as it was", file=sys.stderr)
        return 130
    return 0
