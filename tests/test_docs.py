"""The manual cannot drift from the code (issue 43, item 5).

Every command line shown in README.md and docs/**/*.md — the lines of fenced ``bash``/``console`` blocks and inline
code starting with ``python -m attnkit``, ``attnkit ``, ``streamlit run``, ``pip install``, ``mkdocs`` or ``python -m
pytest`` — is checked: an attnkit command is parsed by the real argparse parser of its subcommand (parse only: no
model is loaded), any other command must be one of the known forms below, each checked against the files it names.
Python blocks compile, and those marked runnable (``<!-- runnable -->`` on the line before the fence) run, each
page's blocks in one namespace. README keeps its shape: at most 200 lines, the two commands first.
The strict site build (``mkdocs build --strict``) is tests/test_docs_site.py (marker ``docs``).
"""
from __future__ import annotations

import ast
import configparser
import contextlib
import functools
import importlib
import importlib.util
import io
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from attnkit import cli
from docs_text import ROOT, block_commands, commands_of, doc_files, env_names, inline_commands, split

README = ROOT / "README.md"
#: In an elided command (``circuit … --share 0.8``) ``…`` stands for these options of the previous command of the
#: same kind on the page: its model and what it reads.
ELIDED = {"--model", "--clean", "--corrupt", "--answer", "--distractor", "--text", "--text-file", "--input", "--out",
          "--series", "--window", "--batch", "--analyses"}
#: Environment variables the docs set that attnkit does not read itself (torch's, HuggingFace's).
FOREIGN_ENV = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "HF_HUB_OFFLINE", "HF_HOME", "XDG_CACHE_HOME"}


def _names_a_command(code: str) -> bool:
    """Inline ``attnkit training`` in a sentence names the command rather than showing a line to run: it is only
    checked to exist (test_commands_named_in_prose_exist)."""
    words = code.split()
    words = words[2:] if words[:3] == ["python", "-m", "attnkit"] else words
    return len(words) == 2 and words[0] == "attnkit" and not words[1].startswith("-")


def _all_commands():
    """[(where, line)] for every command line of the manual, in page order."""
    out = []
    for path in doc_files():
        blocks, _ = split(path)
        for b in blocks:
            if b.lang in {"bash", "sh", "shell", "console"}:
                out += [(b.where(), line) for line in block_commands(b)]
        out += [(where, code) for where, code in inline_commands(path) if not _names_a_command(code)]
    return out


COMMAND_LINES = _all_commands()


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _placeholder(path: Path) -> None:
    """An input file a documented command names, made in the test's folder (copied from the checkout when the
    checkout has it), so that the parser's checks of it (exists, text, a prompt set) can pass. An absolute path is
    never made: it must exist as the manual names it."""
    if path.exists() or path.is_absolute():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    real = ROOT / path
    if real.is_file():
        path.write_bytes(real.read_bytes())
    elif path.suffix == ".jsonl":
        path.write_text('{"clean": "a b a", "corrupted": "c d c", "answer": " b", "distractor": " d"}\n')
    elif path.suffix == ".csv":
        path.write_text("clean,corrupted,answer,distractor\na b a,c d c, b, d\n")
    else:
        path.write_text("The animal didn't cross the street because it was too tired.\n")


def _make_inputs(parser, argv: list[str]) -> None:
    for action in parser._actions:
        if getattr(action.type, "role", None) != "input":
            continue
        for i, word in enumerate(argv):
            for opt in action.option_strings:
                if word == opt and i + 1 < len(argv):
                    _placeholder(Path(argv[i + 1]))
                elif word.startswith(opt + "="):
                    _placeholder(Path(word.split("=", 1)[1]))


def _expand(name: str, rest: list[str], seen: dict[str, list[str]]) -> list[str]:
    """``…`` right after the command: the previous command's inputs (``ELIDED``) in its place."""
    if rest[:1] not in (["…"], ["..."]):
        assert "…" not in rest and "..." not in rest, "an elision stands right after the command, for its inputs"
        return rest
    assert name in seen, f"`{name} …` elides a command the page has not shown yet"
    prev, kept, keep = seen[name], [], False
    for w in prev:
        keep = w in ELIDED if w.startswith("--") else keep
        kept += [w] if keep else []
    return kept + rest[1:]


def _parse(module_name: str, argv: list[str]) -> None:
    mod = importlib.import_module(module_name)
    family = any(w == "--family" or w.startswith("--family=") for w in argv)     # bench's own switch (cli/bench.cli)
    parser = (getattr(mod, "_family_parser", None) if family else None) or getattr(mod, "_parser", None) \
        or getattr(mod, "parser")
    parser = parser()
    _make_inputs(parser, argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as e:
        assert e.code == 0 and ("--help" in argv or "-h" in argv), err.getvalue().strip()


def check_attnkit(words: list[str], seen: dict[str, list[str]]) -> None:
    """``attnkit …`` / ``python -m attnkit …``: the command exists and its parser takes the line."""
    lang, argv = cli._language(words)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        return
    assert argv[0] in cli.COMMANDS, f"no command {argv[0]!r} (commands: {', '.join(cli.COMMANDS)})"
    rest = _expand(argv[0], argv[1:], seen)
    seen[argv[0]] = rest
    _parse(cli.COMMANDS[argv[0]][0], rest)


def check_module(words: list[str]) -> None:
    """``python -m attnkit.dev.X …``: the module runs as a script; its parser, when it has one, takes the line."""
    name, argv = words[2], words[3:]
    spec = importlib.util.find_spec(name)
    assert spec is not None, f"no module {name}"
    if name == "attnkit.dev.locale":
        assert argv[:1] in (["update"], ["compile"], ["extract"]) and len(argv) == 1, argv
        return
    mod = importlib.import_module(name if not spec.submodule_search_locations else name + ".__main__")
    assert hasattr(mod, "main"), f"{name} has no main()"
    if hasattr(mod, "_parser"):
        _parse(mod.__name__, argv)


def check_pip(words: list[str]) -> None:
    """``pip install …``: options pip has, -r files that exist, requirements on attnkit's own lists (torch pinned
    as .ci/run pins it), and extras of attnkit that pyproject.toml defines."""
    proj = _pyproject()["project"]
    extras = proj["optional-dependencies"]
    known = {"attnkit", "torch"} | {_name(r) for r in proj["dependencies"]} | {_name(r) for v in extras.values()
                                                                             for r in v}
    pin = re.search(r"torch==([\w.]+)", (ROOT / ".ci" / "run").read_text()).group(0)
    args = iter(words[2:])
    for w in args:
        if w == "-r":
            assert (ROOT / next(args)).is_file()
        elif w.startswith("-"):
            assert w in {"-q", "-e", "-U", "--upgrade", "--force-reinstall", "--no-deps"}, w
        else:
            spec = re.fullmatch(r"(?P<path>\.|\./attnkit|[A-Za-z0-9_.-]+)(\[(?P<extras>[\w,-]+)\])?(?P<ver>.*)", w)
            assert spec, w
            if spec["path"].startswith(".") or spec["path"] == "attnkit":
                assert set((spec["extras"] or "").split(",")) - {""} <= set(extras), f"{w}: no such extra"
            else:
                assert _name(spec["path"]) in known, f"{w}: not a dependency attnkit names"
            if spec["path"] == "torch":
                assert w == pin, f"{w}: .ci/run installs {pin}"


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-")


def check_pytest(words: list[str]) -> None:
    """``python -m pytest …``: its markers are pytest.ini's, its files exist."""
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    markers = {m.split(":")[0].strip() for m in ini["pytest"]["markers"].strip().splitlines()}
    args = iter(words[3:])
    for w in args:
        if w == "-m":
            names = set(re.findall(r"\w+", next(args))) - {"and", "or", "not"}
            assert names <= markers, f"unknown marker in {names}"
        elif w == "-k":
            next(args)
        elif w.startswith("-"):
            assert w in {"-q", "-x", "-v", "-s"}, w
        else:
            assert (ROOT / w.split("::")[0]).exists(), f"{w}: no such test file"


def check_other(words: list[str]) -> None:
    """The other commands the manual shows, one known form each."""
    head = " ".join(words[:2])
    if head == "streamlit run":
        assert words[2:] == ["app.py"] and (ROOT / "app.py").is_file(), words
    elif words[0] == "mkdocs":
        assert words[1] in {"build", "serve"} and (ROOT / "mkdocs.yml").is_file(), words
        assert {w for w in words[2:] if w.startswith("-")} <= {"--strict", "--site-dir"}, words
    elif head == "git clone":
        assert words[2:] == ["REPOSITORY_URL", "attnkit"], words       # the project names no public mirror
    elif words[0] == "cd":
        assert words[1:] == ["attnkit"], words
    elif head == "python -c":
        ast.parse(words[2])
    else:
        assert " ".join(words) in {"ray start --head --port=6379", "ray start --address=HEAD_IP:6379",
                                   "huggingface-cli login"}, f"an unknown command form: {' '.join(words)}"


def check_line(line: str, seen: dict[str, list[str]]) -> None:
    for name in env_names(line):
        assert name in FOREIGN_ENV or _reads_env(name), f"attnkit never reads ${name}"
    for words in commands_of(line):
        if words[0] == "attnkit" or words[:3] == ["python", "-m", "attnkit"]:
            check_attnkit(words[1 if words[0] == "attnkit" else 3:], seen)
        elif words[:2] == ["python", "-m"] and words[2].startswith("attnkit."):
            check_module(words)
        elif words[:2] == ["pip", "install"]:
            check_pip(words)
        elif words[:3] == ["python", "-m", "pytest"]:
            check_pytest(words)
        else:
            check_other(words)


@functools.cache
def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "attnkit").rglob("*.py"))


def _reads_env(name: str) -> bool:
    return name in _sources()


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Commands parse in an empty folder (their outputs are probed there), with a home of their own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def test_the_manual_shows_commands():
    """The extraction finds what it should: both of README's commands, and every page's attnkit commands."""
    lines = [line for where, line in COMMAND_LINES if where.startswith("README.md")]
    assert "python -m pytest -q" in lines and any("streamlit run app.py" in line for line in lines)
    assert len({where.split(":")[0] for where, _ in COMMAND_LINES}) >= 10


@pytest.mark.parametrize("page", sorted({w.split(":")[0] for w, _ in COMMAND_LINES}))
def test_every_command_line_parses(page, scratch):
    seen: dict[str, list[str]] = {}
    bad = []
    for where, line in COMMAND_LINES:
        if where.split(":")[0] == page:
            try:
                check_line(line, seen)
            except (AssertionError, ImportError, StopIteration) as e:
                bad.append(f"{where}: {line}\n    {type(e).__name__}: {e}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line, why", [
    ("python -m attnkit heads --modle attnkit-tiny", "unrecognized arguments"),
    ("python -m attnkit ablate --model attnkit-tiny --text-file notes.txt --intervention v=x --sweep --tokens -5",
     "--tokens"),
    ("python -m attnkit calibrate --models planted-induction,planted-llama", "invalid choice"),
    ("attnkit frobnicate", "no command"),
    ("pip install torch==2.2.0", ".ci/run installs"),
    ('pip install ".[gui]"', "no such extra"),
    ("python -m pytest -q -m browsers", "unknown marker"),
    ("ATTNKIT_MODLE=gpt2 streamlit run app.py", "never reads"),
    ("streamlit run home.py", "home.py"),
    ("python -m attnkit circuit … --share 0.8", "has not shown"),
])
def test_a_drifted_command_is_caught(line, why, scratch):
    """The checks can fail: a misspelt option, a bad value, an unknown command, pin, extra, marker or variable."""
    with pytest.raises(AssertionError, match=re.escape(why)):
        check_line(line, {})


def test_commands_named_in_prose_exist():
    named = [(w, c) for p in doc_files() for w, c in inline_commands(p) if _names_a_command(c)]
    assert named, "the manual names commands in its prose"
    unknown = [f"{w}: {c}" for w, c in named if c.split()[-1] not in cli.COMMANDS]
    assert not unknown, unknown


def test_python_blocks_compile():
    bad = []
    for path in doc_files():
        for b in split(path)[0]:
            if b.lang in {"python", "py"}:
                try:
                    ast.parse(b.text)
                except SyntaxError as e:
                    bad.append(f"{b.where()}: {e}")
    assert not bad, "\n".join(bad)


RUNNABLE_PAGES = sorted({b.path for p in doc_files() for b in split(p)[0] if b.runnable}, key=str)


@pytest.mark.parametrize("path", RUNNABLE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_runnable_python_blocks_run(path, scratch):
    """A page's runnable blocks, in order, in one namespace (as a notebook runs them)."""
    blocks = [b for b in split(path)[0] if b.runnable]
    assert all(b.lang == "python" for b in blocks), [b.where() for b in blocks]
    space: dict = {"__name__": "__docs__"}
    for b in blocks:
        exec(compile(b.text, b.where(), "exec"), space)


def test_readme_runs_its_notebook_example():
    assert README in RUNNABLE_PAGES


# ----------------------------------------------------------------------------- README's shape and the site's pages

def test_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    blocks = split(README)[0]
    first, second = blocks[0], blocks[1]
    assert first.lang == second.lang == "bash"
    assert "git clone" in first.text and "cd attnkit" in first.text and "streamlit run app.py" in first.text
    assert "pip install torch==" in first.text and "pip install -r requirements.txt" in first.text
    assert second.text.strip() == "python -m pytest -q"
    assert "Local folder…" in text


def test_readme_links_and_screenshot_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "README links into the manual"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing
    images = [t for t in local if t.endswith(".png")]
    assert images and all((ROOT / t).stat().st_size <= 300_000 for t in images)


def _nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    conf = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(conf["nav"])
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(set(nav)) == sorted(nav), "a page is twice in the nav"
    assert set(nav) == pages, f"not in the nav: {pages - set(nav)}; no such page: {set(nav) - pages}"


def test_every_command_is_documented_on_the_commands_page():
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    missing = [c for c in cli.COMMANDS if f"attnkit {c}" not in text]
    assert not missing, missing


def test_every_attnkit_command_has_an_example_somewhere():
    shown = set()
    for _, line in COMMAND_LINES:
        for words in commands_of(line):
            if words[0] == "attnkit" or words[:3] == ["python", "-m", "attnkit"]:
                shown.update(cli._language(words[1 if words[0] == "attnkit" else 3:])[1][:1])
    assert set(cli.COMMANDS) <= shown, set(cli.COMMANDS) - shown
