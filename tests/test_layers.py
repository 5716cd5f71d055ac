"""The layering of attnkit/ (README, "For developers"): imports go downward only.

The import graph is read from the source with ast (every import, at module top or not). It must have
no cycle, and nothing outside the front ends (attnkit.cli, attnkit.app, attnkit.dev, attnkit.__main__)
may import a front end or Streamlit (attnkit.charts draws with Altair and does not import Streamlit either).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "attnkit"
FRONT = ("attnkit.cli", "attnkit.app", "attnkit.dev", "attnkit.__main__")
STREAMLIT_OK = ("attnkit.app",)
#: Modules another change is moving out of the library (issue 24: corpus/, dev/ for train and bench, verify's
#: CLI): their known breaches are tolerated until that lands. Remove an entry once its module is fixed or
#: gone — test_exemptions_are_still_needed fails on an entry that is no longer needed.
EXEMPT: set[str] = set()     # every module obeys the rules now; an entry here would need a reason


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(pkg: Path = PKG) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> attnkit modules it imports, module -> other top-level packages it imports)."""
    files = [p for p in pkg.rglob("*.py") if "models" not in p.relative_to(pkg).parts]
    trees = {module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in files}
    graph, external = {}, {}
    for name, tree in trees.items():
        is_pkg = any(k.startswith(name + ".") for k in trees)
        here = name if is_pkg else name.rsplit(".", 1)[0]
        deps, ext = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                cands = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                cands = [a.name for a in node.names]
            else:
                continue
            for c in cands:
                if not c.startswith("attnkit"):
                    ext.add(c.split(".")[0])
                    continue
                while c and c not in trees:
                    c = c.rsplit(".", 1)[0] if "." in c else ""
                if c and c != name:
                    deps.add(c)
        graph[name], external[name] = deps, ext
    return graph, external


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan). A package's edges to its own
    children (re-exports in __init__) are not counted: the children import the package's siblings, not it."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w.startswith(v + "."):
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def front_end_breaches(graph, external) -> list[str]:
    out = []
    for name in sorted(graph):
        if name.startswith(FRONT):
            continue
        out += [f"{name} imports {d}" for d in sorted(graph[name]) if d.startswith(FRONT)]
        if "streamlit" in external[name] and not name.startswith(STREAMLIT_OK):
            out.append(f"{name} imports streamlit")
    return out


def test_the_checker_finds_a_loop_and_a_breach(tmp_path):
    """On a made-up package: a ↔ b is a loop, core importing the CLI and Streamlit are breaches."""
    pkg = tmp_path / "attnkit"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "__init__.py").write_text("from ..a import x\n")
    (pkg / "a.py").write_text("from .b import y\nx = 1\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\nimport streamlit as st\ny = 2\n")
    (pkg / "core.py").write_text("from .cli import main\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        graph, external = import_graph(pkg)
    finally:
        ROOT = saved
    assert cycles(graph) == [["attnkit.a", "attnkit.b"]]
    assert front_end_breaches(graph, external) == ["attnkit.b imports streamlit", "attnkit.core imports attnkit.cli"]


def test_no_import_loops():
    graph, _ = import_graph()
    loops = [c for c in cycles(graph) if not set(c) <= EXEMPT]
    assert not loops, "import loops: " + "; ".join(" <-> ".join(c) for c in loops)


def test_core_and_analyses_never_import_a_front_end():
    graph, external = import_graph()
    bad = [b for b in front_end_breaches(graph, external) if b.split(" ")[0] not in EXEMPT]
    assert not bad, "\n".join(bad)


def test_exemptions_are_still_needed():
    graph, external = import_graph()
    breaching = {b.split(" ")[0] for b in front_end_breaches(graph, external)} | {m for c in cycles(graph) for m in c}
    stale = sorted(m for m in EXEMPT if m not in breaching)
    assert not stale, f"remove from EXEMPT in tests/test_layers.py (fixed or gone): {stale}"
