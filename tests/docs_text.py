"""What the manual shows: the code blocks and inline commands of README.md and docs/**/*.md.

Read by tests/test_docs.py, which parses every command line with the real parser of its command and runs the
Python blocks marked runnable, so that the manual cannot drift from the code.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A fenced block is runnable when the line before it (blank lines aside) is this HTML comment: invisible on
#: GitHub and in the site, and the block is then run top to bottom by tests/test_docs.py.
RUNNABLE = "<!-- runnable -->"

#: Inline code that is a command line (after any leading ``NAME=value`` environment settings).
INLINE_COMMANDS = ("python -m attnkit", "attnkit ", "streamlit run", "pip install", "mkdocs ", "python -m pytest")

#: Fence languages whose lines are shell commands; in ``console`` only the lines after ``$ `` are.
SHELLS = {"bash", "sh", "shell", "console"}

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def doc_files() -> list[Path]:
    """README.md and every page of the site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass
class Block:
    """A fenced code block: its language, its text (dedented to the fence) and the line its fence opens on."""

    path: Path
    line: int
    lang: str
    text: str
    runnable: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def split(path: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """(fenced blocks, paragraphs outside them as (first line, text joined by spaces))."""
    blocks, paras, prose, body, fence = [], [], [], [], None
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if fence is None and m:
            before = [p for _, p in prose if p.strip()]
            fence = (m[1], m[2], m[3].lower(), n, bool(before) and before[-1].strip() == RUNNABLE)
            paras += _paragraphs(prose)
            prose, body = [], []
        elif fence is not None and line.strip() == fence[1]:
            indent, _, lang, start, runnable = fence
            text = "\n".join(b[len(indent):] if b.startswith(indent) else b.lstrip() for b in body)
            blocks.append(Block(path, start, lang, text + "\n", runnable))
            fence = None
        elif fence is not None:
            body.append(line)
        else:
            prose.append((n, line))
    return blocks, paras + _paragraphs(prose)


def _paragraphs(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out, cur = [], []
    for n, line in lines + [(0, "")]:
        if line.strip():
            cur.append((n, line.strip()))
        elif cur:
            out.append((cur[0][0], " ".join(t for _, t in cur)))
            cur = []
    return out


def inline_commands(path: Path) -> list[tuple[str, str]]:
    """Inline code that is a command line: [(where, command)]."""
    out = []
    for n, text in split(path)[1]:
        for m in _INLINE.finditer(text):
            words = without_env(shlex_split(m[2].strip()))
            if words and " ".join(words).startswith(INLINE_COMMANDS):
                out.append((f"{path.relative_to(ROOT)}:{n}", m[2].strip()))
    return out


def shlex_split(line: str) -> list[str]:
    """The words of a shell line, comments dropped ([] when it does not split, e.g. an open quote)."""
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return []


def without_env(words: list[str]) -> list[str]:
    """The words after any leading ``NAME=value`` settings."""
    i = 0
    while i < len(words) and _ENV.match(words[i]):
        i += 1
    return words[i:]


def block_commands(block: Block) -> list[str]:
    """The command lines of a shell block, continuation lines joined; a console block's output left out."""
    lines, cur = [], ""
    for raw in block.text.splitlines():
        if block.lang == "console":
            if not (raw.startswith("$ ") or cur):
                continue
            raw = raw[2:] if raw.startswith("$ ") and not cur else raw
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        lines.append(cur + raw)
        cur = ""
    return [line for line in lines if shlex_split(line)]


def commands_of(line: str) -> list[list[str]]:
    """One shell line's commands (split at ``&&``, ``||``, ``;`` and ``|``), each without its environment
    settings: ``A=1 x && y | z`` -> [[x], [y], [z]]."""
    out, cur = [], []
    for w in shlex_split(line) + [";"]:
        if w in {"&&", "||", ";", "|"}:
            if cur:
                out.append(without_env(cur))
            cur = []
        else:
            cur.append(w)
    return [c for c in out if c]


def env_names(line: str) -> list[str]:
    """The ``NAME`` of every ``NAME=value`` setting that starts a command of the line."""
    out, start = [], True
    for w in shlex_split(line):
        if start and _ENV.match(w):
            out.append(w.split("=", 1)[0])
            continue
        start = w in {"&&", "||", ";", "|"}
    return out
