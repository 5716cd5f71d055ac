"""``python -m attnkit <command>``: the entry point, a front end; the command line lives in ``attnkit.cli``.

It is loaded by name so that no library module's import graph reaches the front end."""
import importlib
import sys

if __name__ == "__main__":
    sys.exit(importlib.import_module("attnkit.cli").main())
