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
import re
from dataclasses import dataclass, field

__all__ = [
    "PromptError", "Table", "MAX_UPLOAD_MB", "MAX_PROMPTS", "MAX_PROMPT_CHARS",
    "check_text", "cut_text", "replace_surrogates", "decode_text", "read_upload", "prompts_from", "truncate", "windows",
    "SAMPLE_TEXT", "SAMPLE_TEXT_ZH", "PAIR_FIELDS", "PAIR_ALIASES", "MAX_PAIRS", "PairRow", "PairSet", "read_pairs",
]

#: A built-in English paragraph (the ``heads`` command's default text, the shipped model card's measurements).
SAMPLE_TEXT = (
    "The animal didn't cross the street because it was too tired. Python is a programming language that "
    "lets you work quickly and integrate systems more effectively. The quick brown fox jumps over the lazy "
    "dog. A list is a mutable sequence; a tuple is an immutable sequence. When the interpreter reads a "
    "module, it executes the statements in it, and the names it defines become attributes of the module. "
    "Debian is a free operating system, developed by thousands of volunteers. "
) * 3

#: attnkit's own Chinese paragraph (the heads command and attnkit-tiny-zh's card measure Chinese text on it)
SAMPLE_TEXT_ZH = (
    "猫坐在垫子上，看着窗外的小鸟。上海是一座很大的城市，每天都有很多人来来往往。"
    "注意力机制让每个词都能看见前面的词：查询和键算出分数，分数经过掩码和归一化，再去加权求和值向量。"
    "多头注意力让模型同时从几个角度看同一句话。一个软件包安装以后，系统会把它的文件放到对应的目录里。"
    "如果命令出错了，先读一读手册页，再看看日志文件。"
) * 3

MAX_UPLOAD_MB = 10            # keep equal to server.maxUploadSize in .streamlit/config.toml
MAX_PROMPTS = 1000            # prompts taken from one upload
MAX_PROMPT_CHARS = 200_000    # characters of one prompt that are tokenized (≈ 50k tokens)
EXTENSIONS = ("txt", "md", "csv", "jsonl")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

#: The fields of a prompt pair in a prompt-set file (CSV columns or JSONL keys), and the other names accepted.
PAIR_FIELDS = ("clean", "corrupted", "answer", "distractor")
PAIR_ALIASES = {"corrupt": "corrupted"}
MAX_PAIRS = 100               # pairs taken from one prompt-set file


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
    header: bool | None = None      # CSV: whether the first row was taken as column names


def check_text(text: str | None) -> str:
    """The prompt itself, or PromptError when there is nothing to run on."""
    if text is None or not text.strip():
        raise PromptError("The prompt is empty: type some text or upload a file.")
    if "\x00" in text:
        raise PromptError("The prompt contains NUL bytes: is it a binary file?")
    bad = _LONE_SURROGATE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise PromptError(
            f"The prompt contains an unpaired surrogate (U+{ord(bad.group()):04X}) at character {bad.start() + 1:,} "
            f"(line {line:,}): half of an emoji or other character that is not valid text. Remove it or paste "
            "the text again.")
    return text


def replace_surrogates(text, what: str = "The prompt") -> tuple[str, str | None]:
    """(text with unpaired surrogates replaced by U+FFFD, a notice saying where, or None)."""
    if not isinstance(text, str):
        return text, None
    bad = _LONE_SURROGATE.search(text)
    if not bad:
        return text, None
    n = len(_LONE_SURROGATE.findall(text))
    return _LONE_SURROGATE.sub("\ufffd", text), (
        f"{what} contained {n} unpaired surrogate(s) (first U+{ord(bad.group()):04X} at character "
        f"{bad.start() + 1:,}): half of an emoji or other character, not valid text; replaced by \ufffd.")


def cut_text(text: str, what: str = "The prompt") -> tuple[str, list[str]]:
    """(the first MAX_PROMPT_CHARS characters, [the notice when text was cut])."""
    if len(text) <= MAX_PROMPT_CHARS:
        return text, []
    return text[:MAX_PROMPT_CHARS], [
        f"{what} has {len(text):,} characters; only the first {MAX_PROMPT_CHARS:,} (the limit) are used."]


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def decode_text(data: bytes, name: str = "file") -> str:
    """UTF-8 text (a BOM is dropped); UTF-16/UTF-32 with a byte-order mark is decoded too. PromptError for
    binary or undecodable content, naming the file and where."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _not_binary(data.decode(codec), name)
            except UnicodeDecodeError as e:
                raise PromptError(
                    f"{name} starts with a {codec.upper()} byte-order mark but does not decode as {codec.upper()} "
                    f"(bad bytes at offset {e.start}): it looks like a binary file, or save it as UTF-8."
                ) from None
    head = data[:8192]
    if b"\x00" in head:
        raise PromptError(f"{name} looks like a binary file (it contains NUL bytes), not text.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise PromptError(
            f"{name} is not valid UTF-8 (first bad byte at offset {e.start}); save it as UTF-8 and upload again."
        ) from None
    return _not_binary(text, name)


def _not_binary(text: str, name: str) -> str:
    ctrl = sum(1 for c in text[:8192] if ord(c) < 32 and c not in "\t\n\r\f\v")
    if "\x00" in text[:8192] or (text and ctrl > 0.1 * min(len(text), 8192)):
        raise PromptError(f"{name} looks like a binary file (mostly control characters), not text.")
    return text


def read_upload(name: str, data: bytes, header: bool | None = None) -> Table:
    """Parse an uploaded file by its extension. ``header``: whether a CSV's first row names the columns
    (None: guess, and say so when it is taken as data). Any failure is a PromptError naming the file."""
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
    try:
        if ext == "csv":
            return _read_csv(name, text, header)
        return _read_jsonl(name, text)
    except PromptError:
        raise
    except (RecursionError, MemoryError, ValueError, TypeError) as e:   # whatever a parser did not expect
        raise PromptError(f"{name} could not be read ({e.__class__.__name__}: {str(e)[:120]}).") from None


#: First-row cells that are surely column names.
_HEADER_WORDS = {"text", "prompt", "prompts", "content", "question", "input", "sentence", "document", "body",
                 "id", "label", "title", "source", "name", "output", "answer", "completion"}
_NAME_LIKE = re.compile(r"^[\w .\-/()#]{1,40}$")


def guess_header(first: list[str], rest: list[list[str]]) -> bool:
    """Whether a CSV's first row names the columns. Yes when a cell is a usual column name (text, prompt, …);
    else when every cell is short and name-like (≤ 40 characters, ≤ 4 words, unique) and the values below are
    on average at least twice as long as it; otherwise the first row is taken as data."""
    cells = [c.strip() for c in first]
    if not cells or any(not c for c in cells) or len(set(cells)) != len(cells):
        return False
    if any(c.lower() in _HEADER_WORDS for c in cells):
        return True
    if not all(_NAME_LIKE.match(c) and len(c.split()) <= 4 for c in cells):
        return False
    for j, c in enumerate(cells):
        below = [len(r[j]) for r in rest[:200] if j < len(r) and r[j].strip()]
        if below and sum(below) / len(below) >= 2 * len(c):
            return True
    return not rest


def _read_csv(name: str, text: str, header: bool | None = None) -> Table:
    """``header``: True/False as the user says, None to guess (and say what was guessed)."""
    csv.field_size_limit(max(csv.field_size_limit(), MAX_UPLOAD_MB * 2**20))     # one prompt may be long
    reader = csv.reader(io.StringIO(text, newline=""))
    raw = []
    try:
        for row in reader:
            raw.append(row)
    except csv.Error as e:
        raise PromptError(f"{name}, line {reader.line_num}: not a readable CSV file ({e}).") from None
    raw = [r for r in raw if any(c.strip() for c in r)]
    if not raw:
        raise PromptError(f"{name} is empty: no rows.")
    warnings = []
    guessed = header is None
    if guessed:
        header = guess_header(raw[0], raw[1:])
    width = max(len(r) for r in raw)
    if header:
        columns, seen = [], set()
        for j in range(width):
            c = raw[0][j].strip() if j < len(raw[0]) else ""
            c = c or f"column {j + 1}"
            while c in seen:
                c += "'"
            seen.add(c)
            columns.append(c)
        body = raw[1:]
        if not body:
            raise PromptError(f"{name} has a header but no rows (if the first row is a prompt, say that the file "
                              "has no header).")
    else:
        columns = [f"column {j + 1}" for j in range(width)]
        body = raw
        if guessed:
            warnings.append(f"{name}: the first row looks like data, not column names, so it is used as a prompt "
                            "and the columns are numbered; say so if the file does have a header row.")
    rows = [{c: (r[j] if j < len(r) else None) for j, c in enumerate(columns)} for r in body]
    return Table(name=name, kind="csv", rows=rows, columns=columns, warnings=warnings, header=header)


def _read_jsonl(name: str, text: str) -> Table:
    rows, bad, columns = [], [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):     # RecursionError: a value nested thousands of levels deep
            bad.append(n)
            continue
        if isinstance(value, dict):
            if any(_LONE_SURROGATE.search(k) for k in value):
                bad.append(n)
                continue
            for k, v in value.items():
                if isinstance(v, str):
                    columns.setdefault(k, None)
        elif not isinstance(value, str) or _LONE_SURROGATE.search(value):
            bad.append(n)
            continue
        rows.append(value)
    t = Table(name=name, kind="jsonl", rows=rows, columns=list(columns))
    if bad:
        shown = ", ".join(map(str, bad[:20])) + (f" and {len(bad) - 20} more" if len(bad) > 20 else "")
        t.warnings.append(f"{name}: skipped {len(bad)} malformed line(s) (not a JSON object or string, nested too deeply, or not valid text): {shown}.")
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
        if value is None or not isinstance(value, str) or _LONE_SURROGATE.search(value):
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


# ----------------------------------------------------------------------------- prompt pairs and prompt sets

@dataclass(frozen=True)
class PairRow:
    """One pair's texts from a prompt-set file; ``where`` says where it came from ("line 3", "row 3")."""

    clean: str
    corrupted: str
    answer: str
    distractor: str
    where: str


@dataclass
class PairSet:
    """A prompt-set file, read: the usable rows, ``problems`` (one line per row left out, naming it) and
    ``notes`` (limits applied). A front end either warns and uses the rows or refuses on the first problem."""

    name: str
    rows: list[PairRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _pair_fields(obj) -> tuple[dict, list[str]]:
    """({field: text}, [missing or non-text fields]) of one CSV row / JSON object; keys are matched without
    case or surrounding spaces, and ``corrupt`` is taken for ``corrupted``."""
    if not isinstance(obj, dict):
        return {}, list(PAIR_FIELDS)
    keys = {}
    for k in obj:
        name = str(k).strip().lower()
        keys.setdefault(PAIR_ALIASES.get(name, name), k)
    got = {f: obj.get(keys[f]) for f in PAIR_FIELDS if f in keys}
    bad = [f for f in PAIR_FIELDS if not isinstance(got.get(f), str) or _LONE_SURROGATE.search(got[f])]
    return got, bad


def _pair_objects(name: str, text: str, kind: str) -> list[tuple[str, object]]:
    """[(where, row object or a one-line problem as a str)] of a prompt-set file."""
    if kind == "csv":
        table = _read_csv(name, text, header=True)
        missing = [f for f in PAIR_FIELDS if f not in _pair_fields({c: "" for c in table.columns})[0]]
        if missing:
            raise PromptError(f"{name} has no column(s) {', '.join(missing)}; its columns are: "
                              f"{', '.join(table.columns) or 'none'} (needed: {', '.join(PAIR_FIELDS)}).")
        return [(f"row {n}", r) for n, r in enumerate(table.rows, 1)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", json.loads(line, object_pairs_hook=_unique_keys)))
        except json.JSONDecodeError as e:
            out.append((f"line {n}", f"line {n}: not JSON ({e.msg})"))
        except ValueError as e:
            out.append((f"line {n}", f"line {n}: {e}; write each field once"))
        except RecursionError:
            out.append((f"line {n}", f"line {n}: not JSON (nested too deeply)"))
    return out


def _unique_keys(items):
    """A JSON object's pairs as a dict; ValueError when a key appears twice (json would keep the last)."""
    keys = [k for k, _ in items]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"the key {dup[0]!r} appears twice")
    return dict(items)


def read_pairs(name: str, data: bytes, limit: int = MAX_PAIRS) -> PairSet:
    """A prompt set from a .csv (a header row naming the columns) or JSON-lines file (any other name): one
    pair per row with the text fields clean, corrupted (or corrupt), answer and distractor. UTF-8 with or
    without a BOM, UTF-16/32 with one. The file as a whole is refused with a PromptError (too large, binary,
    no usable row, a CSV without the columns); a bad row is a one-line problem naming its line/row and the
    fields missing; more than ``limit`` usable rows keeps the first ``limit`` and says so."""
    if len(data) > MAX_UPLOAD_MB * 1024 * 1024:
        raise PromptError(f"{name} is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB.")
    text = decode_text(data, name)
    kind = "csv" if name.lower().endswith(".csv") else "jsonl"
    out = PairSet(name)
    for where, obj in _pair_objects(name, text, kind):
        if isinstance(obj, str):
            out.problems.append(obj)
            continue
        got, bad = _pair_fields(obj)
        if bad:
            out.problems.append(f"{where}: needs the text fields {', '.join(PAIR_FIELDS)} "
                                f"(missing or not text: {', '.join(bad)})")
        elif len(out.rows) == limit:
            out.notes.append(f"{name} has more than {limit} pairs; the first {limit} are used.")
            break
        else:
            out.rows.append(PairRow(**got, where=where))
    if not out.rows:
        raise PromptError(f"{name}: no usable pairs" + (f" ({out.problems[0]})." if out.problems else
                                                        " (the file has no rows)."))
    return out
