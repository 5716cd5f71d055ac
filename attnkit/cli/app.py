"""``attnkit app [--port N] [--address HOST]``: the dashboard, from the installed package.

The package's own script (:mod:`attnkit.app.main`, the frame over every page) goes to Streamlit's command line,
``python -m streamlit run``, with the dashboard's settings as flags: Streamlit reads ``.streamlit/config.toml``
only from the folder it starts in, so the package carries a copy (``attnkit/app/config.toml``;
tests/test_app_command.py keeps it equal to the checkout's ``.streamlit/config.toml``, the one place the
settings are edited). ``--lang zh`` (read by ``attnkit.cli``) becomes the dashboard's language when a link
names none ($ATTNKIT_LANG of the server).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from .. import i18n
from . import args as cli_args

PROG = "attnkit app"
APP = Path(__file__).resolve().parents[1] / "app"
SCRIPT = APP / "pages" / "main.py"            # the dashboard: the frame over the page list
CONFIG = APP / "config.toml"        # a copy of .streamlit/config.toml


def _parser() -> cli_args.Parser:
    p = cli_args.Parser(prog=PROG, description="the dashboard (Streamlit), from the installed package")
    p.add_argument("--port", type=cli_args.int_in(1, 65535), default=None,
                   help="the port to serve on (default: Streamlit's, 8501, or the next free one)")
    p.add_argument("--address", default=None, type=cli_args.utf8_text,
                   help="the address to listen on (default: every interface, as Streamlit does)")
    return p


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def flags(config: Path = CONFIG) -> list[str]:
    """The settings of ``config`` as Streamlit flags, ``--section.option=value`` (what the file would set)."""
    data = tomllib.loads(Path(config).read_text(encoding="utf-8"))
    return [f"--{section}.{key}={_value(v)}" for section, table in data.items() for key, v in table.items()]


def command(port: int | None = None, address: str | None = None) -> list[str]:
    """The Streamlit command line that serves the dashboard."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(SCRIPT), *flags()]
    if port is not None:
        cmd.append(f"--server.port={port}")
    if address is not None:
        cmd.append(f"--server.address={address}")
    return cmd


def missing_pages() -> list[str]:
    """The page scripts of the page list that Streamlit would not find from :data:`SCRIPT` (none in a whole install;
    every one in a checkout from before the pages moved into the package). Imported here, not at the top: the
    page list imports Streamlit, which this command first checks is installed."""
    from ..app.navigation import PAGES

    return [str(spec.path) for spec in PAGES if not spec.path.is_file()]


def cli(argv=None) -> int:
    a = _parser().parse_args(argv)
    if importlib.util.find_spec("streamlit") is None:
        print(f"{PROG}: the dashboard needs Streamlit: pip install 'attnkit[app]'", file=sys.stderr)
        return 2
    missing = missing_pages()
    if missing:
        print(f"{PROG}: {len(missing)} page(s) of the dashboard are not in this attnkit package (first: {missing[0]}); "
              "in a checkout run `streamlit run app.py`, else reinstall attnkit", file=sys.stderr)
        return 2
    env = {**os.environ, "ATTNKIT_LANG": i18n.current()}
    proc = subprocess.Popen(command(a.port, a.address), env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:           # Ctrl-C reached Streamlit too (same process group): let it stop
        return proc.wait()
