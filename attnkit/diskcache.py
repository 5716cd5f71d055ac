"""attnkit's cache folder on disk: ``$XDG_CACHE_HOME/attnkit`` (default ``~/.cache/attnkit``; an ``ATTNKIT_CACHE``
folder overrides it), the same base the dashboard's prompt store uses (``…/attnkit/prompts``), and small
content-addressed files in it, written atomically. Core: imports nothing of attnkit."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["cache_folder", "file_digest", "forget_digests", "key_of"]

_DIGESTS: dict[tuple, str] = {}


def cache_folder(*parts: str) -> Path:
    """``ATTNKIT_CACHE``, else ``$XDG_CACHE_HOME/attnkit``, else ``~/.cache/attnkit``; joined with ``parts``."""
    own = os.environ.get("ATTNKIT_CACHE", "").strip()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(own) if own and Path(own).is_absolute() else (
        (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "attnkit")
    return root.joinpath(*parts)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (a HuggingFace cache blob is named by it: the name is taken as it is),
    remembered per (path, size, mtime) in this process."""
    real = Path(path).resolve()
    if len(real.name) == 64 and all(c in "0123456789abcdef" for c in real.name):
        return real.name
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(real, "rb") as f:
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
