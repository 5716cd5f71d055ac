"""``python -m attnkit <command>``: the command line lives in ``attnkit.cli``."""
import sys

from attnkit.cli import COMMANDS, main  # noqa: F401  (COMMANDS: the command table, for tests)

if __name__ == "__main__":
    sys.exit(main())
