"""User prompts: typed text and uploads, validated with messages a person can act on.

* ``.txt`` / ``.md``: the whole file is one prompt.
* ``.csv``: one prompt per row, from a column the user picks.
* ``.jsonl``: one JSON value per line: an object (the user picks a field) or a plain string.
  Malformed lines are reported by number and skipped; the valid ones are kept.

Limits are stated, never silent: more than ``MAX_PROMPTS`` prompts keeps the first
``MAX_PROMPTS`` and says how many were left out; a prompt longer than the model's
context is truncated (or split into windows) and the number of dropped tokens is given.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

__all__ = [
    "PromptError", "Table", "MAX_UPLOAD_MB", "MAX_PROMPTS", "MAX_PROMPT_CHARS",
    "check_text", "decode_text", "read_upload", "prompts_from", "truncate", "windows",
]

MAX_UPLOAD_MB = 10            # keep equal to server.maxUploadSize in .streamlit/config.toml
MAX_PROMPTS = 1000            # prompts taken from one upload
MAX_PROMPT_CHARS = 200_000    # characters of one prompt that are tokenized (≈ 50k tokens)
EXTENSIONS = ("txt", "md", "csv", "jsonl")


class PromptError(ValueError):
    """Input that cannot be used; ``str(err)`` says why and what to do."""


@dataclass
class Table:
    """An upload, parsed: ``rows`` are strings (text/jsonl strings) or dicts (csv/jsonl objects)."""

    name: str
    kind: str                       # "text", "csv" or "jsonl"
    rows: list = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_text(text: str | None) -> str:
    """The prompt itself, or PromptError when there is nothing to run on."""
    if text is None or not text.strip():
        raise PromptError("The prompt is empty: type some text or upload a file.")
    if "\x00" in text:
        raise PromptError("The prompt contains NUL bytes: is it a binary file?")
    return text


def decode_text(data: bytes, name: str = "file") -> str:
    """UTF-8 text (a BOM is dropped), or PromptError for binary or non-UTF-8 content."""
    head = data[:8192]
    if b"\x00" in head:
        raise PromptError(f"{name} looks like a binary file (it contains NUL bytes), not text.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise PromptError(
            f"{name} is not valid UTF-8 (first bad byte at offset {e.start}); save it as UTF-8 and upload again."
        ) from None
    ctrl = sum(1 for c in text[:8192] if ord(c) < 32 and c not in "\t\n\r\f\v")
    if text and ctrl > 0.1 * min(len(text), 8192):
        raise PromptError(f"{name} looks like a binary file (mostly control characters), not text.")
    return text


def read_upload(name: str, data: bytes) -> Table:
    """Parse an uploaded file by its extension."""
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext not in EXTENSIONS:
        raise PromptError(f"{name}: unsupported file type; upload .txt, .md, .csv or .jsonl.")
    if len(data) > MAX_UPLOAD_MB * 1024 * 1024:
        raise PromptError(f"{name} is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB.")
    text = decode_text(data, name)
    if ext in ("txt", "md"):
        check_text(text)
        t = Table(name=name, kind="text", rows=[text])
        if len(text) > MAX_PROMPT_CHARS:
            t.warnings.append(f"{name} has {len(text):,} characters; only the first {MAX_PROMPT_CHARS:,} are used.")
            t.rows = [text[:MAX_PROMPT_CHARS]]
        return t
    if ext == "csv":
        return _read_csv(name, text)
    return _read_jsonl(name, text)


def _read_csv(name: str, text: str) -> Table:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        columns = [c for c in (reader.fieldnames or []) if c is not None]
        rows = [{k: v for k, v in r.items() if k is not None} for r in reader]
    except csv.Error as e:
        raise PromptError(f"{name} is not a readable CSV file ({e}).") from None
    if not columns:
        raise PromptError(f"{name} has no header row: the first line must name the columns.")
    if not rows:
        raise PromptError(f"{name} has a header but no rows.")
    return Table(name=name, kind="csv", rows=rows, columns=columns)


def _read_jsonl(name: str, text: str) -> Table:
    rows, bad, columns = [], [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            bad.append(n)
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, str):
                    columns.setdefault(k, None)
        elif not isinstance(value, str):
            bad.append(n)
            continue
        rows.append(value)
    t = Table(name=name, kind="jsonl", rows=rows, columns=list(columns))
    if bad:
        shown = ", ".join(map(str, bad[:20])) + (f" and {len(bad) - 20} more" if len(bad) > 20 else "")
        t.warnings.append(f"{name}: skipped {len(bad)} malformed line(s) (not a JSON object or string): {shown}.")
    if not rows:
        raise PromptError(f"{name} has no valid JSON lines.")
    return t


def prompts_from(table: Table, column: str | None = None) -> tuple[list[str], list[str]]:
    """(prompts, warnings) from a parsed upload; ``column`` names the CSV column / JSONL field."""
    warnings = list(table.warnings)
    if table.kind == "text":
        return list(table.rows), warnings
    needs_column = any(isinstance(r, dict) for r in table.rows)
    if needs_column:
        if column is None:
            raise PromptError(f"{table.name}: choose the column that holds the prompts.")
        if column not in table.columns:
            raise PromptError(
                f"{table.name} has no column {column!r}; its columns are: {', '.join(table.columns) or 'none'}."
            )
    prompts, empty, missing = [], 0, 0
    for r in table.rows:
        value = r if isinstance(r, str) else r.get(column)
        if value is None or not isinstance(value, str):
            missing += 1
        elif not value.strip():
            empty += 1
        else:
            prompts.append(value[:MAX_PROMPT_CHARS])
    if empty or missing:
        warnings.append(f"{table.name}: skipped {empty} empty and {missing} missing value(s) of {column or 'the rows'}.")
    if not prompts:
        raise PromptError(f"{table.name}: no non-empty prompts in {column or 'the file'}.")
    if len(prompts) > MAX_PROMPTS:
        warnings.append(
            f"{table.name} has {len(prompts):,} prompts; the first {MAX_PROMPTS:,} are used and "
            f"{len(prompts) - MAX_PROMPTS:,} are left out (limit {MAX_PROMPTS:,})."
        )
        prompts = prompts[:MAX_PROMPTS]
    return prompts, warnings


def truncate(ids: list[int], limit: int) -> tuple[list[int], int]:
    """(the first ``limit`` ids, how many were dropped)."""
    ids = list(ids)
    return ids[:limit], max(0, len(ids) - limit)


def windows(ids: list[int], size: int, min_len: int = 2) -> list[list[int]]:
    """Split a long token list into consecutive windows of at most ``size`` tokens.

    A last window shorter than ``min_len`` is dropped (nothing to attend over).
    """
    out = [list(ids[i:i + size]) for i in range(0, len(ids), size)]
    return [w for w in out if len(w) >= min_len]
