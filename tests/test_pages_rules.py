"""A page is a folder, and pages are wiring, checked (the rules of ../shared/tools/check_pages.py): each page's
folder in attnkit/app/pages/ holds at most 600 lines, no page file over 300 lines, no function over 60 lines in a
page file or app.py, at most 120 lines of top-level code in a page file. The layout is read from the imports:
a page folder's modules serve that page only, shared/ serves two pages or more, and no module of the frame
(attnkit/app/ outside pages/) is page code used by one page only. In the front end no one-letter module alias,
and in all of attnkit/ no head name built or read by hand (standard.head_name / parse_head)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnkit.app.navigation import PAGE_DIR, PAGES
from helpers import ROOT
from test_layers import import_graph

MAX_LINES, MAX_FUNCTION, MAX_TOP_LEVEL, MAX_FOLDER = 300, 60, 120, 600
#: The folder of what two or more pages share (beside the page folders, measured as they are).
SHARED = "shared"
FRONT = ["pages", "attnkit/app", "attnkit/charts"]
HAND_NAME = re.compile(r'f"[^"]*L\{[^}]+\}H\{[^}]+\}')
HAND_PARSE = re.compile(r"""\[1:\]\.split\(["']H["']\)""")
#: The one place a head name is written and read (head_name, parse_head).
NAMES = "attnkit/standard.py"
#: TODO(lead): library modules other branches are moving to head_name/parse_head (calibration, training,
#: cli/compose). Empty this set after merging them: test_the_head_name_todo_is_still_needed says when.
HEAD_NAME_TODO: set[str] = set()


def lines(src: str) -> int:
    return src.count("\n") + 1


def page_problems(src: str, name: str = "page") -> list[str]:
    """The rules broken by one page file's source, one line each (the same counts as check_pages.py)."""
    tree, out = ast.parse(src), []
    if lines(src) > MAX_LINES:
        out.append(f"{name}: {lines(src)} lines")
    top = sum(node.end_lineno - node.lineno + 1 for i, node in enumerate(tree.body)
              if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
              and not (i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)))
    if top > MAX_TOP_LEVEL:
        out.append(f"{name}: {top} lines of top-level code")
    out += [f"{name}: {node.name} is {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION]
    return out


def folder_problems(folder: Path, name: str | None = None) -> list[str]:
    """A page folder: its size in all, and each of its files."""
    files = sorted(folder.rglob("*.py"))
    out = [f"{name or folder.name}/: {n} lines" for n in [sum(lines(p.read_text(encoding="utf-8")) for p in files)]
           if n > MAX_FOLDER]
    for p in files:
        out += page_problems(p.read_text(encoding="utf-8"), f"{name or folder.name}/{p.relative_to(folder)}")
    return out


def alias_problems(src: str, name: str = "module") -> list[str]:
    """One-letter module aliases (``import x as T``)."""
    return [f"{name}:{node.lineno}: alias {a.asname}" for node in ast.walk(ast.parse(src))
            if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names if a.asname and len(a.asname) == 1]


def name_problems(src: str, name: str = "module") -> list[str]:
    """Head names built by hand (``f"L{l}H{h}"``) or read by hand (``name[1:].split("H")``)."""
    return [f"{name}:{i}: head name by hand" for i, line in enumerate(src.splitlines(), 1)
            if HAND_NAME.search(line.split("#")[0]) or HAND_PARSE.search(line.split("#")[0])]


def page_folders() -> list[Path]:
    return sorted(p for p in PAGE_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


@pytest.mark.parametrize("folder", [p.name for p in page_folders()])
def test_each_page_folder_is_within_the_rules(folder):
    problems = folder_problems(PAGE_DIR / folder)
    assert not problems, problems


@pytest.mark.parametrize("path", ["app.py", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))])
def test_app_and_the_frames_copies_are_wiring(path):
    problems = page_problems((ROOT / path).read_text(encoding="utf-8"), path)
    assert not problems, problems


def test_every_folder_is_a_page_of_the_list_or_shared():
    assert {p.name for p in page_folders()} == {spec.key for spec in PAGES} | {SHARED}
    assert all((PAGE_DIR / spec.key / "__init__.py").is_file() and ast.get_docstring(
        ast.parse((PAGE_DIR / spec.key / "__init__.py").read_text(encoding="utf-8"))) for spec in PAGES)


# ----------------------------------------------------------------------------- who uses what (from the imports)

def folder_of(module: str) -> str | None:
    """The page folder of a module (``attnkit.app.pages.heatmaps.why`` -> ``heatmaps``), None outside them."""
    parts = module.split(".")
    return parts[3] if parts[:3] == ["attnkit", "app", "pages"] and len(parts) > 3 else None


def layout_problems(graph: dict[str, set[str]]) -> list[str]:
    """Modules in the wrong place, judged by who imports them: a page folder's module imported from outside its
    folder; a shared module used by fewer than two pages; a frame module (attnkit/app/, outside pages/) that
    only one page folder imports."""
    out = []
    for module in sorted(graph):
        users = {u for u, deps in graph.items() if module in deps and u != module}
        folders = {folder_of(u) for u in users}
        home = folder_of(module)
        if home == SHARED:
            pages = folders - {SHARED, None}
            if len(pages) < 2 and None not in folders:
                out.append(f"{module} is shared but used by {sorted(pages) or 'no page'}")
        elif home is not None:
            strangers = sorted(u for u in users if folder_of(u) != home)
            if strangers:
                out.append(f"{module} belongs to {home}/ but {', '.join(strangers)} imports it")
        elif module.startswith("attnkit.app.") and module != "attnkit.app.pages" and len(folders) == 1 \
                and None not in folders:
            out.append(f"{module} is in the frame but only {folders.pop()}/ uses it")
    return out


def test_page_code_sits_in_its_pages_folder_and_shared_code_in_shared():
    graph, _ = import_graph()
    problems = layout_problems(graph)
    assert not problems, "\n".join(problems)


def test_the_layout_check_catches_misplaced_modules():
    pages = "attnkit.app.pages"
    graph = {f"{pages}.heatmaps.page": {f"{pages}.heatmaps.focus", "attnkit.app.focus_like", f"{pages}.shared.pairs"},
             f"{pages}.heatmaps.focus": set(), "attnkit.app.focus_like": set(), f"{pages}.shared.pairs": set(),
             f"{pages}.steps.page": {f"{pages}.heatmaps.focus"}, "attnkit.app.frame": set()}
    assert layout_problems(graph) == [
        "attnkit.app.focus_like is in the frame but only heatmaps/ uses it",
        f"{pages}.heatmaps.focus belongs to heatmaps/ but {pages}.steps.page imports it",
        f"{pages}.shared.pairs is shared but used by ['heatmaps']"]


# ----------------------------------------------------------------------------- names

def test_front_end_modules_spell_out_aliases():
    problems = []
    for folder in FRONT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            problems += alias_problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not problems, problems


def _library_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")),
            *sorted(p for p in (ROOT / "attnkit").rglob("*.py") if "models" not in p.relative_to(ROOT).parts)]


def test_heads_are_named_with_standard_everywhere():
    problems = []
    for path in _library_files():
        rel = str(path.relative_to(ROOT))
        if rel != NAMES and rel not in HEAD_NAME_TODO:
            problems += name_problems(path.read_text(encoding="utf-8"), rel)
    assert not problems, problems


def test_the_head_name_todo_is_still_needed():
    fixed = sorted(rel for rel in HEAD_NAME_TODO if not name_problems((ROOT / rel).read_text(encoding="utf-8")))
    assert not fixed, f"remove from HEAD_NAME_TODO in tests/test_pages_rules.py (fixed): {fixed}"


def test_the_checks_catch_a_planted_breach(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    planted = f'"""doc"""\nimport numpy as N\n\ndef f():\n{body}\n\n' + "y = 1\n" * 121 + "\n" * 120
    found = page_problems(planted, "planted")
    assert any("lines of top-level code" in p for p in found)
    assert any("f is 62 lines" in p for p in found)
    assert any(p.endswith("lines") and "planted: 3" in p for p in found)
    assert alias_problems(planted) == ["module:2: alias N"]
    assert name_problems('name = f"L{layer}H{head}"\n') == ["module:1: head name by hand"]
    assert name_problems('l, h = map(int, name[1:].split("H"))\n') == ["module:1: head name by hand"]
    assert name_problems("import numpy as np\nname = head_name(1, 2)\n") == []
    for i in range(3):                                  # three files of 250 lines: each within, the folder not
        (tmp_path / f"m{i}.py").write_text("# a comment\n" * 249)
    assert folder_problems(tmp_path, "planted") == ["planted/: 750 lines"]
