"""Reading a corpus: documents of a .jsonl/.txt/.md file or a folder of them, in a fixed order."""
from __future__ import annotations

import json
from pathlib import Path

from .. import prompts as P

#: File types a corpus is read from.
KINDS = (".jsonl", ".txt", ".md")


class CorpusError(ValueError):
    """Bad input or settings; ``str(err)`` says what is wrong (the CLI exits 2)."""


def _files(root: Path) -> tuple[list[Path], list[str], list[str]]:
    """(files, their names, notes) of a path: one file, or every corpus file below a folder."""
    notes: list[str] = []
    if not root.exists():
        raise CorpusError(f"input not found: {root}")
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in KINDS)
        other = sum(1 for p in root.rglob("*") if p.is_file() and p.suffix.lower() not in KINDS)
        if other:
            notes.append(f"{other} file(s) in {root} are not .jsonl/.txt/.md and were left out")
        if not files:
            raise CorpusError(f"{root} holds no .jsonl, .txt or .md files")
        return files, [p.relative_to(root).as_posix() for p in files], notes
    if root.suffix.lower() not in KINDS:
        raise CorpusError(f"{root.name}: unsupported input; give a .jsonl, .txt or .md file or a folder of them")
    return [root], [root.name], notes


def _jsonl_document(line: bytes, field: str) -> tuple[str | None, str | None]:
    """(text, error) of one non-blank .jsonl line."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, f"UnicodeDecodeError: not valid UTF-8 (byte {e.start} of the line)"
    except ValueError as e:
        return None, f"JSONDecodeError: {e}"
    if isinstance(obj, dict):
        if field not in obj:
            return None, f"KeyError: no field {field!r} (fields: {', '.join(map(str, obj)) or 'none'})"
        obj = obj[field]
    if not isinstance(obj, str):
        return None, f"TypeError: the document is a JSON {type(obj).__name__}, not a string"
    if not obj.strip():
        return None, "PromptError: the document is empty"
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
                add(name, text=P.check_text(P.decode_text(data, name)))
            except P.PromptError as e:
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
        raise CorpusError(f"{root} holds no documents (only blank lines?)")
    return docs, notes
