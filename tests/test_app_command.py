"""``attnkit app``: the dashboard served from the package — its settings are the checkout's .streamlit/config.toml
(one source: the package's copy must equal it), given to Streamlit as flags it accepts; bad input stops before
anything starts; the server answers Streamlit's health check from a folder outside the checkout; --lang reaches
the dashboard; and the package's script opens every page (once the pages live inside the package)."""
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from attnkit.cli import app as app_cli
from attnkit.cli import main as cli_main
from browser import free_port
from helpers import ROOT


def test_the_packaged_settings_are_the_checkouts():
    assert app_cli.CONFIG.read_bytes() == (ROOT / ".streamlit" / "config.toml").read_bytes(), \
        "copy .streamlit/config.toml to attnkit/app/config.toml (the installed dashboard reads the copy)"


def test_the_flags_set_what_the_file_sets():
    """Streamlit's own command line parses the flags, and its config then holds the file's every value."""
    import tomllib

    from streamlit import config
    from streamlit.web import bootstrap
    from streamlit.web import cli as streamlit_cli

    file = tomllib.loads(app_cli.CONFIG.read_text(encoding="utf-8"))
    params = streamlit_cli.main_run.make_context("run", ["app.py", *app_cli.flags()]).params
    try:
        bootstrap.load_config_options({k: v for k, v in params.items() if k not in ("target", "args")})
        for section, table in file.items():
            for key, value in table.items():
                assert config.get_option(f"{section}.{key}") == value, (section, key)
    finally:
        config.get_config_options(force_reparse=True)


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "65536"], ["--port", "http"], ["--colour", "red"]])
def test_bad_input_exits_2_in_one_line_before_starting(argv, capsys, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("started Streamlit"))
    assert cli_main(["app", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit app: error:") and "\n" not in err


def test_it_hands_the_packaged_script_settings_port_and_language_to_streamlit(monkeypatch):
    seen = {}

    class Done:
        def __init__(self, cmd, env):
            seen.update(cmd=cmd, env=env)

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Done)
    monkeypatch.setattr(app_cli, "missing_pages", lambda: [])
    assert cli_main(["app", "--port", "8765", "--lang", "zh"]) == 0
    cmd = seen["cmd"]
    assert cmd[1:5] == ["-m", "streamlit", "run", str(app_cli.SCRIPT)] and app_cli.SCRIPT.parent.name == "pages"
    assert cmd[5:-1] == app_cli.flags() and cmd[-1] == "--server.port=8765" and seen["env"]["ATTNKIT_LANG"] == "zh"


def test_without_streamlit_it_says_how_to_install_it(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a))
    assert cli_main(["app"]) == 2
    assert "pip install 'attnkit[app]'" in capsys.readouterr().err


def test_lang_becomes_the_dashboards_language_when_the_link_names_none(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from test_i18n import _page

    monkeypatch.setenv("ATTNKIT_LANG", "zh")
    assert AppTest.from_function(_page).run().markdown[0].value == "不成立"
    linked = AppTest.from_function(_page)
    linked.query_params["lang"] = "en"
    assert linked.run().markdown[0].value == "not supported"                # the link wins


def test_the_server_answers_from_outside_the_checkout(tmp_path):
    """The command line ``attnkit app`` runs (Streamlit's, with the packaged settings as flags), started in a folder
    that is not the checkout, answers Streamlit's health check (whatever the script's pages: the health check
    does not run it)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(app_cli.command(port, "127.0.0.1"), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert health(port, proc) == 200, proc.stdout.read().decode() if proc.poll() is not None else "no answer"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def health(port: int, proc, timeout: float = 120) -> int | None:
    """The status of ``/_stcore/health`` once the server answers (None when it exits or the time runs out)."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return r.status
        except OSError:
            time.sleep(0.5)
    return None


def test_it_refuses_in_one_line_when_the_pages_are_not_in_the_package(monkeypatch, capsys, tmp_path):
    from attnkit.app import navigation
    monkeypatch.setattr(navigation, "PAGE_DIR", tmp_path)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("started Streamlit"))
    assert cli_main(["app"]) == 2
    err = capsys.readouterr().err.strip()
    assert "are not in this attnkit package" in err and "streamlit run app.py" in err and "\n" not in err


def test_the_packaged_script_has_no_pages_folder_beside_it():
    """Streamlit starts in its old multipage mode when the main script has a ``pages/`` folder beside it; there a
    page's address as a fresh server's first request is covered by "Page not found" (the browser test below)."""
    assert not (app_cli.SCRIPT.parent / "pages").exists()


@pytest.mark.package
def test_the_packaged_script_opens_every_page():
    from streamlit.testing.v1 import AppTest

    from attnkit.app.navigation import PAGES

    at = AppTest.from_file(str(app_cli.SCRIPT), default_timeout=300).run()
    assert not at.exception, at.exception
    for spec in PAGES[1:]:
        at.switch_page(str(spec.path)).run()
        assert not at.exception, (spec.key, at.exception)
        assert [t.value for t in at.title][:1] == [str(spec.shown_title)], spec.key
