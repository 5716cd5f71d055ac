"""The layering of attnkit/ (README, "For developers"): imports go downward only.

The layers are data: README's layer table (core, analyses, corpus, front ends, each row listing its modules)
is read here, and every module of attnkit/ must fall in one row, and import nothing from a row below it. The
import graph is read from the source with ast (every import, at module top or not). It must have no cycle,
and nothing outside the front ends (attnkit.cli, attnkit.app, attnkit.dev, attnkit.__main__) may import a
front end or Streamlit (attnkit.charts draws with Altair and does not import Streamlit either).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "attnkit"
FRONT = ("attnkit.cli", "attnkit.app", "attnkit.dev", "attnkit.__main__")
STREAMLIT_OK = ("attnkit.app",)
#: Modules another change is moving out of the library (issue 24: corpus/, dev/ for train and bench, verify's
#: CLI): their known breaches are tolerated until that lands. Remove an entry once its module is fixed or
#: gone — test_exemptions_are_still_needed fails on an entry that is no longer needed.
EXEMPT: set[str] = set()     # every module obeys the rules now; an entry here would need a reason


def module_name(path: Path, root: Path | None = None) -> str:
    rel = path.relative_to(root or ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(pkg: Path = PKG) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> attnkit modules it imports, module -> other top-level packages it imports)."""
    files = [p for p in pkg.rglob("*.py") if "models" not in p.relative_to(pkg).parts]
    trees = {module_name(p, pkg.parent): ast.parse(p.read_text(encoding="utf-8")) for p in files}
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
    graph, external = import_graph(pkg)
    assert cycles(graph) == [["attnkit.a", "attnkit.b"]]
    assert front_end_breaches(graph, external) == ["attnkit.b imports streamlit", "attnkit.core imports attnkit.cli"]


@pytest.fixture(scope="module")
def real_graph():
    """attnkit/'s import graph, read once for the tests below (parsing every module takes seconds)."""
    return import_graph()


def test_no_import_loops(real_graph):
    graph, _ = real_graph
    loops = [c for c in cycles(graph) if not set(c) <= EXEMPT]
    assert not loops, "import loops: " + "; ".join(" <-> ".join(c) for c in loops)


def test_core_and_analyses_never_import_a_front_end(real_graph):
    graph, external = real_graph
    bad = [b for b in front_end_breaches(graph, external) if b.split(" ")[0] not in EXEMPT]
    assert not bad, "\n".join(bad)


def test_exemptions_are_still_needed(real_graph):
    graph, external = real_graph
    breaching = {b.split(" ")[0] for b in front_end_breaches(graph, external)} | {m for c in cycles(graph) for m in c}
    stale = sorted(m for m in EXEMPT if m not in breaching)
    assert not stale, f"remove from EXEMPT in tests/test_layers.py (fixed or gone): {stale}"


# ----------------------------------------------------------------------------- the layer table (README)

_ROW = re.compile(r"^\|\s*([a-z ]+?)\s*\|([^|]*)\|")


def layer_table(readme: str) -> list[tuple[str, list[str]]]:
    """README's layer table, bottom layer first: [(layer, [entry, …])]; an entry is ``NAME`` (attnkit/NAME.py),
    ``NAME/`` (a package), or a path outside the package (``pages/``, ``app.py``)."""
    dev = readme[readme.index("## For developers"):]
    start = dev.index("| layer | modules |")
    rows = []
    for line in dev[start:].splitlines()[2:]:
        m = _ROW.match(line)
        if not m:
            break
        rows.append((m[1], re.findall(r"`([^`]+)`", m[2])))
    return rows


def _entry_module(entry: str) -> str:
    return "attnkit" if entry == "__init__" else "attnkit." + entry.rstrip("/").replace("/", ".").removesuffix(".py")


def layer_of(module: str, table) -> int | None:
    """The row (0 = core) whose entry names ``module`` or a package above it; the longest entry wins."""
    best, rank = None, -1
    for i, (_, entries) in enumerate(table):
        for e in entries:
            name = _entry_module(e)
            hit = module == name if not e.endswith("/") else module == name or module.startswith(name + ".")
            if hit and len(name) > rank:
                best, rank = i, len(name)
    return best


def layer_breaches(graph, table, root: Path = ROOT) -> list[str]:
    """Modules in no row, entries naming nothing, and imports from a row below ("core imports analyses")."""
    out = [f"{m} is in no layer of README's table" for m in sorted(graph) if layer_of(m, table) is None]
    for _, entries in table:
        for e in entries:
            path = root / "attnkit" / (e.rstrip("/") if e.endswith("/") else e + ".py")
            if e != "__init__" and not path.exists() and not (root / e).exists():
                out.append(f"README's layer table names {e!r}, which is not a module")
    for m in sorted(graph):
        lm = layer_of(m, table)
        for d in sorted(graph[m]):
            ld = layer_of(d, table)
            if lm is not None and ld is not None and ld > lm and not d.startswith(m + "."):
                out.append(f"{m} ({table[lm][0]}) imports {d} ({table[ld][0]})")
    return out


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_layer_table_is_read_from_the_readme():
    table = layer_table(_readme())
    assert [name for name, _ in table] == ["core", "analyses", "corpus", "front ends"]
    assert layer_of("attnkit.attention", table) == 0 and layer_of("attnkit.circuits.path", table) == 1
    assert layer_of("attnkit.corpus.store", table) == 2 and layer_of("attnkit.app.jobs", table) == 3


def test_every_module_is_in_one_layer_and_imports_go_downward(real_graph):
    graph, _ = real_graph
    bad = layer_breaches(graph, layer_table(_readme()))
    assert not bad, "\n".join(bad)


_PLANTED_README = """# x
## For developers
| layer | modules | what |
|---|---|---|
| core | `__init__`, `attention`, `families/` | . |
| analyses | `metrics` | . |
| front ends | `cli/`, `gone` | . |

## Layout
"""


@pytest.mark.parametrize("plant, want", [
    ({"attention.py": "from .metrics import x\n"}, "attnkit.attention (core) imports attnkit.metrics (analyses)"),
    ({"families/llama.py": "from ..cli import main\n"}, "attnkit.families.llama (core) imports attnkit.cli (front ends)"),
    ({"stray.py": "x = 1\n"}, "attnkit.stray is in no layer of README's table"),
])
def test_a_planted_breach_is_caught(tmp_path, plant, want):
    """A made-up tree with its own README: the clean tree passes (but for the stale entry ``gone``), and each
    planted breach — core importing analyses, a family importing the CLI, a module in no row — is named."""
    pkg = tmp_path / "attnkit"
    files = {"__init__.py": "", "attention.py": "x = 1\n", "metrics.py": "from .attention import x\n",
             "families/__init__.py": "", "families/llama.py": "from ..attention import x\n",
             "cli/__init__.py": "from ..metrics import x\nmain = 1\n"}
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    table = layer_table(_PLANTED_README)
    stale = "README's layer table names 'gone', which is not a module"
    assert layer_breaches(import_graph(pkg)[0], table, tmp_path) == [stale]
    for rel, text in plant.items():
        (pkg / rel).write_text(text)
    assert set(layer_breaches(import_graph(pkg)[0], table, tmp_path)) == {stale, want}


# ----------------------------------------------------------------------------- imports at the top

#: the only packages a library module (core, analyses, corpus) may import inside a function: transformers and
#: huggingface_hub cost more to import than torch and are needed only when a model is loaded; ray is optional
LAZY_OK = ("transformers", "huggingface_hub", "ray")


def lazy_imports(pkg: Path = PKG) -> list[tuple[str, int, str]]:
    """(module, line, imported name) for every import that is not at a module's top level."""
    out = []
    for p in sorted(pkg.rglob("*.py")):
        if "models" in p.relative_to(pkg).parts:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    ["." * node.level + (node.module or "")]
                out += [(module_name(p, pkg.parent), node.lineno, n) for n in names]
    return out


def test_library_imports_sit_at_the_top():
    table = layer_table(_readme())
    front = len(table) - 1
    bad = [f"{m}:{line} imports {n} inside a function" for m, line, n in lazy_imports()
           if layer_of(m, table) != front and n.split(".")[0] not in LAZY_OK]
    assert not bad, "\n".join(bad)
