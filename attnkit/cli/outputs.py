"""Where a command may write: one guard for every output option, and writes that never leave half a file.

The guard (issue 44, class 12) runs while the arguments are parsed — :class:`attnkit.cli.args.Parser` calls
:func:`check_file` / :func:`check_folder` for every option whose type is an output type — so a refusal is one
line and exit 2, before any model is loaded or anything is written. An output (a ``--json`` file, an ``--out``
folder) may not

* be, or resolve to (a symbolic link, a hard link, ``..``), anything the command reads: an input file, a
  file inside an input folder (a model folder's ``config.json`` or ``model.safetensors``), an input folder;
* lie inside an input folder, or (a folder) hold an input;
* lie inside the shipped models' folder (``attnkit/models``: only the tools that rebuild the shipped models
  write there, when told to) or inside HuggingFace's cache (the files of every hub model, and of the
  default model ``gpt2``);
* start with ``-``: ``--out=--help`` is a mistyped option, not a folder name (write ``./-name`` for that).

An output folder must also be new, empty or one the command wrote itself (its marker file:
:func:`attnkit.cli.args.new_or_own_dir`). :func:`write_text` and :func:`write_json` write into a temporary
file beside the target and rename it over the target, so a failed write (a full disk, ``/dev/full``) leaves
the old file, or none, and is reported in one line.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

__all__ = ["OutputError", "SHIPPED_MODELS", "SHIPPED_CORPORA", "check_file", "check_folder", "local_paths", "write_text", "write_json",
           "swap_in"]

#: The shipped models (attnkit-tiny, the planted models, the series): read by every command's default.
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "models"
#: The shipped texts (the atlas's corpus): never written by a command (``python -m attnkit.dev.corpora`` rebuilds them).
SHIPPED_CORPORA = Path(__file__).resolve().parents[1] / "corpora"
#: Files of an input folder compared by device and inode with an existing output (a hard link to one of them).
MAX_SCANNED = 10_000


class OutputError(ValueError):
    """An output the command may not write; ``str(err)`` is one line."""


def _real(p) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(p))))


def _within(p: Path, folder: Path) -> bool:
    return p == folder or folder in p.parents


def _shown(s) -> str:
    return str(s).encode("utf-8", "backslashreplace").decode("utf-8")


def _hub_cache() -> Path | None:
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover
        return None
    return Path(constants.HF_HUB_CACHE)


def _protected(shipped_ok: bool) -> list[tuple[Path, str]]:
    areas = [(_real(SHIPPED_CORPORA), "the shipped corpora's folder")]
    areas += [] if shipped_ok else [(_real(SHIPPED_MODELS), "the shipped models' folder")]
    hub = _hub_cache()
    return areas + ([(_real(hub), "HuggingFace's cache")] if hub is not None else [])


def local_paths(value) -> list[Path]:
    """The existing files and folders an input option's value names (a list's items each; a prompt set by its
    ``name``). A hub model or series names none here: HuggingFace's cache is guarded as a whole."""
    out = []
    for v in value if isinstance(value, (list, tuple)) else [value]:
        name = getattr(v, "name", v)
        if isinstance(name, str) and name.strip() and Path(name).expanduser().exists():
            out.append(Path(name).expanduser())
    return out


def _inodes(paths: list[Path]) -> set[tuple[int, int]]:
    """(device, inode) of every input file (up to MAX_SCANNED under the input folders)."""
    seen: set[tuple[int, int]] = set()
    for p in paths:
        files = [p] if not p.is_dir() else (f for f in p.rglob("*") if f.is_file())
        for f in files:
            try:
                st = f.stat()
            except OSError:
                continue
            seen.add((st.st_dev, st.st_ino))
            if len(seen) >= MAX_SCANNED:
                return seen
    return seen


def _check_name(out: str) -> None:
    if str(out).startswith("-"):
        raise OutputError(f"{_shown(out)!r} looks like an option, not a name (a name that starts with '-' is "
                          f"written ./{_shown(out)})")


def _check_areas(real: Path, out: str, shipped_ok: bool) -> None:
    for area, what in _protected(shipped_ok):
        if _within(real, area):
            raise OutputError(f"{_shown(out)} is inside {what} ({_shown(area)}), whose files are models' inputs; "
                              "write elsewhere")


def check_file(out: str, inputs: dict[str, list[Path]], folders: dict[str, str] | None = None,
               shipped_ok: bool = False) -> None:
    """Refuse (OutputError) an output file that is, or resolves to, an input or a file inside an input folder
    (``inputs``: option -> the paths it names), that lies inside a protected area or inside one of the
    command's own output ``folders`` (option -> folder)."""
    _check_name(out)
    real = _real(out)
    _check_areas(real, out, shipped_ok)
    for opt, paths in inputs.items():
        for p in paths:
            rp = _real(p)
            if real == rp:
                raise OutputError(f"{_shown(out)} is the {opt} file; writing the results there would overwrite "
                                  "the input — give another file name")
            if rp.is_dir() and _within(real, rp):
                raise OutputError(f"{_shown(out)} is inside the {opt} folder {_shown(p)}, which this command reads; "
                                  "write elsewhere")
    if real.is_file():
        st = real.stat()
        hits = [opt for opt, paths in inputs.items() if (st.st_dev, st.st_ino) in _inodes(paths)]
        if hits:
            raise OutputError(f"{_shown(out)} is a hard link to a file of {hits[0]}, which this command reads; "
                              "give another file name")
    for opt, folder in (folders or {}).items():
        if folder and _within(real, _real(folder)):
            raise OutputError(f"{_shown(out)} is inside the {opt} folder, which this command writes; write elsewhere")


def check_folder(out: str, inputs: dict[str, list[Path]], shipped_ok: bool = False) -> None:
    """Refuse (OutputError) an output folder that is an input, lies inside an input folder or holds an input,
    or lies inside a protected area (the shipped models' folder only unless ``shipped_ok``)."""
    _check_name(out)
    real = _real(out)
    _check_areas(real, out, shipped_ok)
    for opt, paths in inputs.items():
        for p in paths:
            rp = _real(p)
            if _within(real, rp):
                what = "is" if real == rp else "is inside"
                raise OutputError(f"{_shown(out)} {what} the {opt} input {_shown(p)}, which this command reads; "
                                  "give another folder")
            if _within(rp, real):
                raise OutputError(f"{_shown(out)} holds the {opt} input {_shown(p)}; this command replaces what "
                                  "it writes there — give another folder")


def write_text(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: into a temporary file in the target's folder,
    renamed over the target (a link is followed: its target is replaced). A target that is not a regular
    file (``/dev/null``, ``/dev/full``, a pipe) is written directly. OSError when it cannot be written."""
    real = _real(path)
    if real.exists() and not stat.S_ISREG(real.stat().st_mode):
        with open(real, "w", encoding="utf-8") as f:
            f.write(text)
        return
    mode = stat.S_IMODE(real.stat().st_mode) if real.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def swap_in(work: Path, out: Path) -> Path:
    """Move a finished folder ``work`` (built beside ``out``, on the same file system) to ``out``: an earlier
    folder there is replaced only now, when the new one is complete, so a failed build leaves ``out`` as it
    was."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        os.rename(out, old)
    os.rename(work, out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def _plain(x):
    """JSON for what json cannot write itself: numbers (numpy, torch) as floats, anything else as text."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def write_json(path: str, obj, prog: str, **dump) -> bool:
    """Write ``obj`` as JSON to ``path`` (:func:`write_text`; ``dump``: json.dumps options, default an indent
    of 1); False after one line on stderr when it cannot be written (a full disk, /dev/full, a folder that
    went away)."""
    text = json.dumps(obj, default=_plain, **({"indent": 1} | dump))
    try:
        write_text(path, text)
        return True
    except OSError as e:
        print(f"{prog}: cannot write {_shown(path)}: {e.strerror or e}", file=sys.stderr)
        return False
