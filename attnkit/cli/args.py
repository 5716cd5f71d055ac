"""Argument types shared by every ``python -m attnkit`` command.

A bad value is refused while the arguments are parsed — before any model is loaded or any file
written — with one line on stderr and exit code 2 (exit 1 stays "out of tolerance" for verify)::

    p = args.Parser(prog="python -m attnkit verify")
    p.add_argument("--tokens", type=args.positive_int)
    p.add_argument("--json", type=args.writable_path)
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from . import outputs

__all__ = ["Parser", "positive_int", "nonneg_int", "int_at_least", "positive_float", "nonneg_float", "fraction",
           "utf8_text", "writable_path", "writable_dir", "new_or_own_dir", "existing_file", "existing_nonempty_text_file",
           "device", "whole_number", "int_in", "int_list", "seed", "MAX_SEED", "INPUT_DESTS"]

Err = argparse.ArgumentTypeError


#: Options that name what a command reads, by their dest, whatever their type (a model or series may be a
#: name or a folder); options of an input type (:func:`existing_file`, …) are inputs too.
INPUT_DESTS = {"model", "series", "input", "corpus"}


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line: ``prog: error: argument --x: why`` (exit 2), no usage block; and
    every output option is checked against the command's inputs once all are parsed (:mod:`.outputs`).

    ``shipped_ok``: True, or the dest of a flag (train-default's ``overwrite_shipped``), when an output folder
    may be a shipped model's (the tools that rebuild them)."""

    def __init__(self, *a, shipped_ok: bool | str = False, **kw):
        super().__init__(*a, **kw)
        self.shipped_ok = shipped_ok

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        self.check_outputs(ns)
        return ns

    def check_outputs(self, ns) -> None:
        """Every output option's value against every input option's (exit 2, one line, on the first clash)."""
        role = {a.dest: getattr(a.type, "role", None) or ("input" if a.dest in INPUT_DESTS else None)
                for a in self._actions}
        name = {a.dest: (max(a.option_strings, key=len) if a.option_strings else a.metavar or a.dest) for a in self._actions}
        given = {d: getattr(ns, d, None) for d in role if getattr(ns, d, None) not in (None, [], "")}
        inputs = {name[d]: outputs.local_paths(v) for d, v in given.items() if role[d] == "input"}
        folders = {name[d]: v for d, v in given.items() if role[d] == "folder"}
        ok = self.shipped_ok if isinstance(self.shipped_ok, bool) else bool(getattr(ns, self.shipped_ok, False))
        flag = "" if isinstance(self.shipped_ok, bool) else "--" + self.shipped_ok.replace("_", "-")
        try:
            for opt, v in folders.items():
                outputs.check_folder(v, inputs, shipped_ok=ok)
            for d in (d for d in given if role[d] == "file"):
                opt = name[d]
                outputs.check_file(given[d], inputs, folders, shipped_ok=ok)
        except outputs.OutputError as e:
            also = f" (the shipped model is replaced only with {flag})" if flag and "shipped models'" in str(e) else ""
            self.error(f"argument {opt}: {e}{also}")


_INT = re.compile(r"^[+-]?[0-9][0-9_]*$", re.ASCII)


def _int(s: str) -> int:
    """A whole number in ASCII digits (Python's int() also reads '３' and other scripts' digits)."""
    text = str(s).strip()
    if not _INT.match(text) or len(text) > 40:
        raise Err(f"expected a whole number (ASCII digits, at most 40), got {_shown(text)[:40]!r}")
    return int(text)


def positive_int(s: str) -> int:
    """An integer ≥ 1 (counts, lengths, sizes)."""
    n = _int(s)
    if n < 1:
        raise Err(f"must be at least 1, got {n}")
    return n


def nonneg_int(s: str) -> int:
    """An integer ≥ 0."""
    n = _int(s)
    if n < 0:
        raise Err(f"must be 0 or more, got {n}")
    return n


def whole_number(s: str) -> int:
    """Any whole number in ASCII digits (the range is checked elsewhere)."""
    return _int(s)


def _float(s: str) -> float:
    """A number in ASCII characters (Python's float() also reads '１.５')."""
    if not str(s).isascii():
        raise ValueError(s)
    return float(s)


def positive_float(s: str) -> float:
    """A finite number > 0."""
    try:
        x = _float(s)
    except ValueError:
        raise Err(f"expected a number, got {s!r}") from None
    if not (x > 0 and x != float("inf")):
        raise Err(f"must be a finite number > 0, got {s!r}")
    return x


def nonneg_float(s: str) -> float:
    """A finite number ≥ 0 (not nan, not inf)."""
    try:
        x = _float(s)
    except ValueError:
        raise Err(f"expected a number, got {s!r}") from None
    if not (0 <= x < float("inf")):
        raise Err(f"must be a finite number ≥ 0, got {s!r}")
    return x


def fraction(s: str) -> float:
    """A share: a number from 0 to 1."""
    x = nonneg_float(s)
    if x > 1:
        raise Err(f"must be a share from 0 to 1, got {s!r}")
    return x


def utf8_text(s: str) -> str:
    """Text that was valid UTF-8 on the command line (Python keeps invalid bytes as lone surrogates)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = s[e.start]
        what = f"byte 0x{ord(bad) - 0xDC00:02X}" if 0xDC80 <= ord(bad) <= 0xDCFF else f"U+{ord(bad):04X}"
        raise Err(f"is not valid UTF-8 text ({what} at character {e.start + 1})") from None
    return s


def _shown(s: str) -> str:
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def writable_path(s: str) -> str:
    """A file path that can be written: its folder exists and is writable, and it is not a folder.
    Nothing is created here."""
    p = _path(s)
    if p.is_dir():
        raise Err(f"{_shown(s)} is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise Err(f"cannot write {_shown(s)}: the folder {_shown(str(parent))} does not exist")
    try:     # really try (permission bits say little to root, or on /proc and read-only mounts)
        if p.exists():
            with open(p, "ab"):
                pass
        else:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".attnkit-probe-")
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:
        raise Err(f"cannot write {_shown(s)}: {e.strerror or e}") from None
    return s


writable_path.role = "file"


def _path(s: str) -> Path:
    """The path a value names (after checking it is valid UTF-8 text)."""
    utf8_text(s)
    return Path(s).expanduser()


def writable_dir(s: str) -> str:
    """A folder that exists and is writable, or can be created (its nearest existing parent is writable)."""
    p = _path(s)
    if p.exists() and not p.is_dir():
        raise Err(f"{_shown(s)} is a file, not a folder")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise Err(f"cannot write into {_shown(s)}: {_shown(str(probe))} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".attnkit-probe-"))
    except OSError as e:
        raise Err(f"cannot write into {_shown(s)}: {e.strerror or e}") from None
    return s


writable_dir.role = "folder"


def new_or_own_dir(marker: str, what: str):
    """An argparse type: a writable folder that is new, empty, or holds ``marker`` (a file only the
    command that writes the folder writes) — a command never writes into someone else's folder."""
    def check(s: str) -> str:
        writable_dir(s)
        p = _path(s)
        if p.is_dir() and not (p / marker).exists() and any(p.iterdir()):
            raise Err(f"{_shown(s)} is not empty and was not written by {what} (no {marker}); "
                      "give a new or empty folder")
        return s
    check.__name__ = "output folder"
    check.role = "folder"
    return check


def existing_file(s: str) -> str:
    """A readable, non-empty file."""
    p = _path(s)
    if not p.exists():
        raise Err(f"{_shown(s)}: no such file")
    if not p.is_file():
        raise Err(f"{_shown(s)} is not a file")
    if not os.access(p, os.R_OK):
        raise Err(f"{_shown(s)}: the file is not readable")
    if p.stat().st_size == 0:
        raise Err(f"{_shown(s)} is empty")
    return s


existing_file.role = "input"


def existing_nonempty_text_file(s: str) -> str:
    """A readable file that holds text (UTF-8, or UTF-16/32 with a byte-order mark), not only whitespace."""
    from ..prompts import MAX_UPLOAD_MB, PromptError, decode_text

    existing_file(s)
    p = Path(s).expanduser()
    if p.stat().st_size > 4 * MAX_UPLOAD_MB * 2**20:
        raise Err(f"{_shown(s)} is {p.stat().st_size / 2**20:.0f} MB; the limit is {4 * MAX_UPLOAD_MB} MB")
    try:
        text = decode_text(p.read_bytes(), _shown(s))
    except OSError as e:
        raise Err(f"cannot read {_shown(s)}: {e.strerror or e}") from None
    except PromptError as e:
        raise Err(str(e)) from None
    if not text.strip():
        raise Err(f"{_shown(s)} holds only whitespace: there is no text to run on")
    return s


existing_nonempty_text_file.role = "input"


def device(s: str) -> str:
    """auto, cpu, cuda[:N] or mps. One that this machine lacks becomes 'cpu', with a notice on stderr
    (as docs/what-happens.md says: "says so and runs on the CPU")."""
    from ..loading import LoadError, resolve_device

    name = str(s).strip().lower()
    if name not in ("auto", "cpu", "mps") and not (name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit())):
        raise Err(f"unknown device {s!r}; use auto, cpu, cuda (or cuda:N) or mps")
    try:
        resolve_device(name)
    except LoadError as e:
        print(f"attnkit: {e}; running on the CPU instead", file=sys.stderr)
        return "cpu"
    return name


def int_at_least(low: int):
    """An argparse type: an integer ≥ ``low``."""
    def check(s: str) -> int:
        n = _int(s)
        if n < low:
            raise Err(f"must be at least {low}, got {n}")
        return n
    check.__name__ = f"int_at_least_{low}"
    return check


MAX_SEED = 2**32 - 1         # numpy's and torch's generators both take it


def int_in(low: int, high: int, what: str = ""):
    """An argparse type: an integer from ``low`` to ``high`` (both included); ``what`` says why the top."""
    why = f" ({what})" if what else ""

    def check(s: str) -> int:
        n = _int(s)
        if not low <= n <= high:
            raise Err(f"must be from {low:,} to {high:,}{why}, got {n:,}" if abs(n) < 10**30
                      else f"must be from {low:,} to {high:,}{why}, got a number of {len(str(abs(n)))} digits")
        return n
    check.__name__ = f"integer from {low} to {high}"
    return check


seed = int_in(0, MAX_SEED, "a random seed")


def int_list(low: int, high: int):
    """An argparse type: comma-separated integers, each from ``low`` to ``high`` (at most 32 of them)."""
    one = int_in(low, high)

    def check(s: str) -> list[int]:
        parts = [x for x in str(s).split(",") if x.strip()]
        if not parts or len(parts) > 32:
            raise Err(f"expected 1 to 32 comma-separated whole numbers, e.g. {low},{max(low, min(high, 2 * low))}; "
                      f"got {_shown(str(s))[:60]!r}")
        return [one(x) for x in parts]
    check.__name__ = "list of integers"
    return check
