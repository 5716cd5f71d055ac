"""attnkit's cache folder on disk: ``$XDG_CACHE_HOME/attnkit`` (default ``~/.cache/attnkit``; an ``ATTNKIT_CACHE``
folder overrides it), the same base the dashboard's prompt store uses (``…/attnkit/prompts``), and small
content-addressed files in it, written atomically. Keys are made of the *content* of the files they stand for
(:func:`file_digest`: SHA-256 of the bytes, remembered per :func:`stamp`, which changes whenever a file is
replaced or written). Core: imports only :mod:`attnkit.files` (a FIFO or device is never hashed).

``ATTNKIT_CACHE`` must be an absolute folder (``~`` is expanded): a relative one would name another folder in
every working directory, so it is refused (:class:`CacheError`, one line) rather than ignored; a folder that
cannot be made or written is reported by :func:`cache_problem` (a command refuses it before any work; the
library then only keeps nothing: a cache that cannot be written costs time, not results)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .files import open_regular

__all__ = ["CacheError", "cache_folder", "cache_problem", "file_digest", "forget_digests", "key_of", "stamp"]

_DIGESTS: dict[tuple, str] = {}


class CacheError(ValueError):
    """``ATTNKIT_CACHE`` names no usable folder; ``str(err)`` is one line."""


def cache_folder(*parts: str) -> Path:
    """``ATTNKIT_CACHE``, else ``$XDG_CACHE_HOME/attnkit``, else ``~/.cache/attnkit``; joined with ``parts``.
    CacheError for a relative ``ATTNKIT_CACHE`` (a relative ``XDG_CACHE_HOME`` is ignored, as its spec says)."""
    own = os.environ.get("ATTNKIT_CACHE", "").strip()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if own and not Path(own).expanduser().is_absolute():
        raise CacheError(f"ATTNKIT_CACHE={own!r} is a relative path; set it to an absolute folder "
                         "(or unset it: ~/.cache/attnkit)")
    root = Path(own).expanduser() if own else (
        (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "attnkit")
    return root.joinpath(*parts)


def cache_problem() -> str | None:
    """Why the cache folder cannot be used, in one line (relative, a file, not writable), or None."""
    try:
        root = cache_folder()
    except CacheError as e:
        return str(e)
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"the cache folder {root} cannot be made: {probe} is not a folder (set ATTNKIT_CACHE to a folder)"
    try:
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=".attnkit-probe-"))
    except OSError as e:
        return f"the cache folder {root} cannot be written: {e.strerror or e} (set ATTNKIT_CACHE to a writable folder)"
    return None


def stamp(path: Path) -> tuple:
    """What tells whether a file changed: its real path, device, inode, size, modification and change times
    (the change time moves on every write and rename, and cannot be set back)."""
    real = Path(path).resolve()
    st = real.stat()
    return str(real), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def file_digest(path: Path) -> str:
    """SHA-256 of a regular file's bytes, remembered per :func:`stamp` in this process. A blob of the
    HuggingFace cache (``models--…/blobs/<sha256>``, named by its content's hash when downloaded) is taken by
    its name. FileError for a FIFO, socket or device (never read)."""
    real = Path(path).resolve()
    if (real.parent.name == "blobs" and real.parent.parent.name.startswith("models--") and len(real.name) == 64
            and all(c in "0123456789abcdef" for c in real.name)):
        return real.name
    key = stamp(real)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open_regular(real) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def forget_digests() -> None:
    """Forget the remembered digests (as a new process starts)."""
    _DIGESTS.clear()


def key_of(*parts) -> str:
    """A stable hex key of JSON-able ``parts`` (settings, digests)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:40]
