"""Reading a corpus: documents of a .jsonl/.txt/.md file or a folder of them, in a fixed order."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .. import prompts

#: File types a corpus is read from.
KINDS = (".jsonl", ".txt", ".md")


class CorpusError(ValueError):
    """Bad input or settings; ``str(err)`` says what is wrong (the CLI exits 2)."""


def shown(name) -> str:
    """A path as text that can be stored and printed (bytes that are not UTF-8 as \\xNN escapes)."""
    return os.fsencode(str(name)).decode("utf-8", "backslashreplace")


def _regular(p: Path) -> bool:
    """A regular file (after links): FIFOs, sockets and devices such as /dev/zero are not read (they can
    block or never end)."""
    try:
        return stat.S_ISREG(p.stat().st_mode)
    except OSError:
        return False


def _files(root: Path) -> tuple[list[Path], list[str], list[str]]:
    """(files, their names, notes) of a path: one file, or every corpus file below a folder."""
    notes: list[str] = []
    if not root.exists():
        raise CorpusError(f"input not found: {shown(root)}")
    if root.is_dir():
        found = sorted(p for p in root.rglob("*") if not p.is_dir())
        files = [p for p in found if _regular(p) and p.suffix.lower() in KINDS]
        odd = sum(1 for p in found if not _regular(p))
        other = len(found) - len(files) - odd
        if other:
            notes.append(f"{other} file(s) in {shown(root)} are not .jsonl/.txt/.md and were left out")
        if odd:
            notes.append(f"{odd} entries in {shown(root)} are not regular files (FIFOs, devices, broken links) "
                         "and were left out")
        if not files:
            raise CorpusError(f"{shown(root)} holds no .jsonl, .txt or .md files")
        return files, [shown(p.relative_to(root).as_posix()) for p in files], notes
    if not _regular(root):
        raise CorpusError(f"{shown(root)} is not a regular file (a FIFO, socket or device is not read as a corpus)")
    if root.suffix.lower() not in KINDS:
        raise CorpusError(f"{shown(root.name)}: unsupported input; give a .jsonl, .txt or .md file or a folder of them")
    return [root], [shown(root.name)], notes


def _jsonl_document(line: bytes, field: str) -> tuple[str | None, str | None]:
    """(text, error) of one non-blank .jsonl line."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, f"UnicodeDecodeError: not valid UTF-8 (byte {e.start} of the line)"
    except ValueError as e:
        return None, f"JSONDecodeError: {e}"
    except RecursionError:
        return None, "RecursionError: the JSON is nested too deeply to read"
    if isinstance(obj, dict):
        if field not in obj:
            return None, f"KeyError: no field {field!r} (fields: {', '.join(map(str, obj)) or 'none'})"
        obj = obj[field]
    if not isinstance(obj, str):
        return None, f"TypeError: the document is a JSON {type(obj).__name__}, not a string"
    if not obj.strip():
        return None, "PromptError: the document is empty"
    try:
        obj.encode("utf-8")
    except UnicodeEncodeError as e:        # a JSON escape such as "\\ud800" with no partner
        return None, f"UnicodeError: a lone surrogate U+{ord(obj[e.start]):04X} at character {e.start + 1}"
    return obj, None


def read_inputs(path, field: str = "text", max_docs: int | None = None) -> tuple[list[dict], list[str]]:
    """Documents of a .jsonl/.txt/.md file or a folder of them, in a fixed order.

    Returns (docs, notes); each doc is ``{"doc": index, "doc_id": "file:line", "text": str | None,
    "error": None | "Type: message"}`` (a document that cannot be read keeps its place with an error).
    Raises CorpusError when the path is missing, of an unsupported type, or holds no document.
    """
    root = Path(path).expanduser()
    files, names, notes = _files(root)
    docs: list[dict] = []

    def add(doc_id, text=None, error=None):
        docs.append({"doc": len(docs), "doc_id": doc_id, "text": text, "error": error})

    full = lambda: max_docs is not None and len(docs) >= max_docs  # noqa: E731
    for p, name in zip(files, names):
        try:
            data = p.read_bytes()
        except OSError as e:
            add(name, error=f"OSError: {e.strerror or e}")
            continue
        if p.suffix.lower() != ".jsonl":
            try:
                add(name, text=prompts.check_text(prompts.decode_text(data, name)))
            except prompts.PromptError as e:
                add(name, error=f"PromptError: {e}")
        else:
            for n, line in enumerate(data.splitlines(), 1):
                if full():
                    break
                if line.strip():
                    text, error = _jsonl_document(line, field)
                    add(f"{name}:{n}", text, error)
        if full():
            break
    if max_docs is not None and len(docs) > max_docs:
        docs = docs[:max_docs]
    if not docs:
        raise CorpusError(f"{shown(root)} holds no documents (only blank lines?)")
    _some_readable(docs, field)
    return docs, notes


def _some_readable(docs: list[dict], field: str) -> None:
    """CorpusError when no document can be read (a run would "succeed" with nothing in it)."""
    if any(d["error"] is None for d in docs):
        return
    if all(d["error"].startswith("KeyError: no field") for d in docs):
        raise CorpusError(f"no document has the field {field!r} ({docs[0]['doc_id']}: {docs[0]['error'][10:]}); "
                          "name the field with --field")
    raise CorpusError(f"none of the {len(docs)} document(s) can be read (first: {docs[0]['doc_id']}: "
                      f"{docs[0]['error']})")
