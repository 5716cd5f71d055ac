"""Arguments and loading shared by the commands that take a clean/corrupted prompt pair (patch, attribute)."""
from __future__ import annotations

import sys

from .. import loading
from ..patching import PatchError, make_pair
from . import args as cli_args
from .outputs import write_json

__all__ = ["add_pair_args", "load_pair", "write_json"]


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

