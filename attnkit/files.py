"""Reading a file someone else made (a series folder, a planted model's folder, the disk cache): regular files
only, within a size cap, named paths kept inside their folder. The readers of each file kind (``series.json``,
``CIRCUIT.json``, ``MODEL_CARD.md``, a cache entry) are built on these.

- :func:`open_regular` opens without blocking (``O_NONBLOCK``) and then asks the open file what it is
  (``fstat``): a FIFO, socket or device is refused, never read (reading one can wait forever or never end), and a
  file swapped for a FIFO between a check and the open is caught too.
- :func:`read_bytes` / :func:`read_text` / :func:`read_json` refuse a file larger than their cap before reading
  it, and read at most cap + 1 bytes (a file that grows while being read is refused, not read without end).
- :func:`inside` resolves a path named *in* a file against that file's folder: no absolute path, no ``..``, and
  no symlink leading out.

Every refusal is a :class:`FileError` whose ``str`` is one line in the reader's language, naming the file.
Core: imports only :mod:`attnkit.i18n`.
"""
from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path, PurePath

from .i18n import msg

__all__ = ["FileError", "open_regular", "read_bytes", "read_text", "read_json", "inside", "exists", "shown", "short",
           "MB"]

MB = 2 ** 20


class FileError(ValueError):
    """A file that cannot be read as asked; ``str(err)`` is one line naming it (in the reader's language)."""


def shown(path) -> str:
    """A path as printable text (bytes that are not UTF-8 as \\xNN escapes)."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def exists(path) -> bool:
    """Whether anything is at ``path`` (a broken link, a FIFO included: those are refused when read, not
    taken for absent)."""
    return os.path.lexists(path)


def open_regular(path) -> io.BufferedReader:
    """``path`` opened for reading in binary, after checking on the open file that it is a regular file (links
    followed); FileError when it is absent, unreadable, or a FIFO, socket, device or folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileError(msg("{file} not found", file=shown(path))) from None
    except IsADirectoryError:
        raise FileError(msg("{file} is a folder, not a file", file=shown(path))) from None
    except OSError as e:
        raise FileError(msg("{file} cannot be read ({why})", file=shown(path), why=e.strerror or type(e).__name__)) \
            from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (msg("a folder") if stat.S_ISDIR(mode) else msg("a FIFO") if stat.S_ISFIFO(mode)
                else msg("a socket") if stat.S_ISSOCK(mode) else msg("a device"))
        raise FileError(msg("{file} is {kind}, not a regular file: not read", file=shown(path), kind=kind))
    try:
        os.set_blocking(fd, True)
    except OSError:                                     # pragma: no cover - regular files ignore the flag
        pass
    return os.fdopen(fd, "rb")


def read_bytes(path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; FileError otherwise."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise FileError(msg("{file} is larger than {limit} MB: not read", file=shown(path),
                            limit=f"{limit / MB:g}"))
    return data


def read_text(path, limit: int) -> str:
    """A regular UTF-8 text file of at most ``limit`` bytes (a UTF-8 BOM is dropped); FileError otherwise."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FileError(msg("{file} is not UTF-8 text (byte {byte} at offset {offset})", file=shown(path),
                            byte=f"0x{data[e.start]:02X}", offset=e.start)) from None


def read_json(path, limit: int):
    """The JSON value of a regular UTF-8 file of at most ``limit`` bytes; FileError naming the line and column
    of a syntax error (NaN and Infinity are not JSON, and are refused as such)."""
    text = read_text(path, limit)

    def constant(name):
        raise ValueError(f"{name} is not a JSON value")

    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise FileError(msg("{file} is not valid JSON (line {line}, column {col}: {why})", file=shown(path),
                            line=e.lineno, col=e.colno, why=e.msg)) from None
    except (ValueError, RecursionError) as e:
        why = str(e) if isinstance(e, ValueError) else "nested too deeply"
        raise FileError(msg("{file} is not valid JSON ({why})", file=shown(path), why=why)) from None


def inside(folder, name: str, file, field: str) -> Path:
    """``folder / name`` resolved, for a path ``name`` written in ``file``'s ``field``: relative, without ``..``,
    and not leading out of ``folder`` through a link; FileError naming the file and field otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise FileError(msg("{file}: {field} must be a relative path (text), got {value}", file=shown(file),
                            field=field, value=short(name)))
    pure = PurePath(name)
    if pure.is_absolute() or name.startswith(("/", "\\", "~")) or ".." in pure.parts or "\\" in name:
        raise FileError(msg("{file}: {field} = {value} points outside its folder (an absolute path or ..): "
                            "refused", file=shown(file), field=field, value=short(name)))
    root = Path(folder).resolve()
    try:
        target = (root / name).resolve()
    except (OSError, RuntimeError):
        target = None
    if target is None or not target.is_relative_to(root):
        raise FileError(msg("{file}: {field} = {value} leads out of its folder through a link: refused",
                            file=shown(file), field=field, value=short(name)))
    return target


def short(value) -> str:
    """A JSON value as at most 60 characters of text (for an error line)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "…"
