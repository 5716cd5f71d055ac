"""``python -m attnkit.dev.planted [FOLDER] [--force]``: rebuild every planted model (into attnkit/models/, or
FOLDER: new, empty, or one this command wrote; ``--force`` replaces the planted-* folders of any other)."""
import sys
from pathlib import Path

from ...cli import args as cli_args
from . import MARKER, NAMES, build_all, gpt2


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog="python -m attnkit.dev.planted", shipped_ok=True,
                        description="Rebuild the planted-circuit models (" + ", ".join(NAMES) + ").")
    p.add_argument("folder", nargs="?", default=None, type=cli_args.writable_dir,
                   help=f"where to build them (default: the shipped {gpt2.MODELS_DIR}); a new or empty folder, or "
                        f"one this command wrote (it holds {MARKER})")
    p.add_argument("--force", action="store_true",
                   help="build into a folder that holds other files (its planted-* folders are replaced, nothing "
                        "else is touched)")
    return p


def main(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    out = Path(a.folder).expanduser() if a.folder else gpt2.MODELS_DIR
    mine = out.resolve() == gpt2.MODELS_DIR.resolve() or (out / MARKER).is_file()
    if out.is_dir() and any(out.iterdir()) and not mine and not a.force:
        p.error(f"argument folder: {a.folder} is not empty and was not written by this command (no {MARKER}); "
                "give a new or empty folder, or --force to replace the planted-* folders in it")
    for path in build_all(out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
