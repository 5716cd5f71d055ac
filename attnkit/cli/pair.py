"""Arguments and loading shared by the commands that take a clean/corrupted prompt pair (patch, attribute)."""
from __future__ import annotations

import json
import sys

from .. import loading
from ..patching import PatchError, make_pair
from . import args as cli_args


def add_pair_args(p: cli_args.Parser) -> None:
    p.add_argument("--model", default=None, help="hub name, attnkit-tiny or a local folder (default: as verify)")
    p.add_argument("--device", default="cpu", type=cli_args.device)
    p.add_argument("--clean", required=True, type=cli_args.utf8_text, help="the clean prompt")
    p.add_argument("--corrupt", required=True, type=cli_args.utf8_text,
                   help="the corrupted prompt (same number of tokens)")
    p.add_argument("--answer", required=True, type=cli_args.utf8_text,
                   help="the answer token (e.g. ' Mary'; a word without a space is tried with one first)")
    p.add_argument("--distractor", required=True, type=cli_args.utf8_text, help="the distractor token (e.g. ' John')")
    p.add_argument("--position", type=cli_args.int_in(-1_000_000, 1_000_000), default=None,
                   help="position whose logits are read (default: the last; negative counts from the end)")
    p.add_argument("--json", dest="json_out", default=None, type=cli_args.writable_path,
                   help="write the results here as JSON")


def load_pair(a, prog: str):
    """(model, pair) from parsed CLI args, or None after one line on stderr."""
    m = loading.load_for_cli(a.model, a.device, prog)
    if m is None:
        return None
    try:
        return m, make_pair(m, a.clean, a.corrupt, a.answer, a.distractor, a.position)
    except PatchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


def _plain(x):
    """JSON for what json cannot write itself: numbers (numpy, torch) as floats, anything else as text."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def write_json(path: str, obj: dict, prog: str) -> bool:
    """Write ``obj`` as JSON to ``path``; False after one line on stderr when it cannot (a full disk,
    /dev/full, a folder that went away)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, default=_plain)
        return True
    except OSError as e:
        print(f"{prog}: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return False
