"""Command line: ``python -m attnkit <command> [options]`` (a front end: nothing in the library imports it).

One module a command. ``COMMANDS`` maps a command to the module that holds its ``cli(argv) -> int``;
a module is imported only when its command runs, so ``python -m attnkit --help`` answers without
importing torch. Argument types shared by every command live in ``attnkit.cli.args``.
"""
from __future__ import annotations

import importlib
import os
import sys

from .. import i18n

COMMANDS = {
    "verify": ("attnkit.cli.verify", "compare attnkit with HuggingFace, layer by layer"),
    "bench": ("attnkit.cli.bench", "benchmark attnkit against HuggingFace (ratios)"),
    "entropy": ("attnkit.cli.entropy", "attention entropy against context length"),
    "ablate": ("attnkit.cli.ablate", "run an ablation and report the loss change"),
    "patch": ("attnkit.cli.patch", "activation patching on a clean/corrupted prompt pair"),
    "attribute": ("attnkit.cli.attribute", "direct logit attribution and the logit lens for an answer"),
    "heads": ("attnkit.cli.heads", "per-head scores: previous-token, first-token, induction…"),
    "corpus": ("attnkit.cli.corpus", "heads, entropy and ablation losses over a corpus, locally or on Ray"),
    "train-default": ("attnkit.cli.train_default", "retrain the shipped attnkit-tiny model"),
    "compose": ("attnkit.cli.compose", "composition scores between heads of different layers (prompt-free)"),
    "training": ("attnkit.cli.training", "head scores and the induction phase change over training checkpoints"),
    "circuit": ("attnkit.cli.circuit", "path patching, attribution patching and circuit discovery on a pair"),
    "calibrate": ("attnkit.cli.calibrate", "score every method on the planted-circuit models (report card)"),
    "atlas": ("attnkit.cli.atlas", "every head over a corpus: statistics, examples, effect, verdicts; offline HTML"),
    "why": ("attnkit.cli.why", "why query i attends to key j: one head's score split into query × key parts"),
    "app": ("attnkit.cli.app", "the dashboard in the browser (Streamlit), served from the installed package"),
    "sinks": ("attnkit.cli.sinks", "attention sinks, and the loss when the KV cache keeps k sinks + a window of w"),
}


def _language(argv: list[str]) -> tuple[str, list[str]]:
    """``--lang zh`` / ``--lang=zh`` anywhere in the line (else $ATTNKIT_LANG, else English), removed from it."""
    lang, rest, i = os.environ.get("ATTNKIT_LANG"), [], 0
    while i < len(argv):
        if argv[i] == "--lang":
            if i + 1 >= len(argv):
                raise i18n.LanguageError(f"--lang needs a value: one of {', '.join(i18n.LANGUAGES)}")
            lang, i = argv[i + 1], i + 2
            continue
        if argv[i].startswith("--lang="):
            lang = argv[i].split("=", 1)[1]
        else:
            rest.append(argv[i])
        i += 1
    return i18n.parse_language(lang), rest


def main(argv: list[str] | None = None) -> int:
    try:
        lang, argv = _language(list(sys.argv[1:] if argv is None else argv))
    except i18n.LanguageError as e:
        print(f"attnkit: {e}", file=sys.stderr)
        return 2
    with i18n.language(lang):
        try:
            return _dispatch(argv)
        except BrokenPipeError:             # `attnkit heads | head`: the reader left; no traceback for that
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())     # (Python's documented way out)
            return 1


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print("usage: attnkit <command> [options]   (or: python -m attnkit <command> [options])\n\ncommands:")
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:<14} {text}")
        print("\noption for every command: --lang en|zh (or $ATTNKIT_LANG): the language of verdicts and notes")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"attnkit: unknown command {name!r}; try one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.cli(rest) or 0)
    except SystemExit as e:            # argparse: --help (0) or a bad value (2, one line already printed)
        return e.code if isinstance(e.code, int) else 2
