"""The report card as a result kept between runs: :func:`attnkit.calibration.calibrate` on planted-circuit models
(by default the shipped ones), computed once per process and kept on disk, keyed by the *content* of the models'
folders (the SHA-256 of each one's weights, config, CIRCUIT.json and tokenizer, :mod:`attnkit.diskcache`), the
prompt pairs per model and the methods' names — a changed weight file, CIRCUIT.json or method is a new card, never a
stale one.

The card's metrics and verdicts are messages (:class:`attnkit.i18n.Message`), shown in the reader's language; on
disk each is its message id and arguments (:func:`_data`), read back only when every id's fields are plain names
and every argument a number, a text or such a message (:func:`_message`). An entry that is absent, damaged,
too large, another format or another key's is treated as absent and computed again. Two sessions asking for the
same card at once compute it once: the second waits (its ``progress`` still called, so a Stop ends the wait).
"""
from __future__ import annotations

import json
import os
import string
import tempfile
import threading
import time
from pathlib import Path

from . import calibration, checkpoint, diskcache, files, loading
from .files import MB
from .i18n import Joined, Message

__all__ = ["FORMAT", "shipped", "card_key", "peek", "report_card"]

#: Bump when what is cached changes meaning.
FORMAT = 1
#: A cache entry larger than this is not one this module wrote.
CARD_MAX = 4 * MB
_MEMORY: dict[str, dict] = {}
_LOCK = threading.Lock()


def shipped() -> list[tuple[str, Path]]:
    """(name, folder) of every shipped planted model (:data:`attnkit.loading.PLANTED_MODELS`)."""
    return [(n, Path(loading.SHIPPED[n])) for n in loading.PLANTED_MODELS]


#: Besides the weights, the files of a planted folder its card depends on (those present are hashed).
KEY_FILES = ("config.json", "CIRCUIT.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def _digests(folder: Path) -> list:
    """(name, SHA-256) of the files a model's card depends on: its weights, config, CIRCUIT.json and tokenizer."""
    folder = Path(folder)
    paths = [*checkpoint.weight_files(folder), *(folder / f for f in KEY_FILES if (folder / f).is_file())]
    return [(p.name, diskcache.file_digest(p)) for p in paths]


def card_key(models: list[tuple[str, Path]], n_pairs: int = 4) -> str:
    """The key of the card of ``models`` ((name, folder) pairs) with ``n_pairs`` prompt pairs each."""
    return diskcache.key_of(FORMAT, [(name, _digests(folder)) for name, folder in models], n_pairs,
                            [name for name, _ in calibration.METHODS])


def _path(key: str) -> Path:
    return diskcache.cache_folder("report-card", f"{key}.json")


# ----------------------------------------------------------------------------- messages on disk

def _data(value):
    """A message as JSON data ({"id", "args", "plural", "n"}; a joined one {"parts", "sep"}); anything else as is."""
    if isinstance(value, Joined):
        return {"parts": [_data(p) for p in value.parts], "sep": value.sep}
    if isinstance(value, Message):
        return {"id": value.id, "args": {k: _data(v) for k, v in value.args.items()}, "plural": value.plural,
                "n": value.n}
    return value


def _plain_fields(text: str) -> bool:
    """Whether every format field of ``text`` is a plain name ("{n}"; no "{x.attr}", "{x[0]}", conversions)."""
    return all(f is None or (f.isidentifier() and not spec and conv is None)
               for _, f, spec, conv in string.Formatter().parse(text))


def _message(data):
    """:func:`_data`'s inverse; ValueError for anything this module would not have written."""
    if isinstance(data, (int, float, str)) and not isinstance(data, bool) or data is None:
        return data
    if not isinstance(data, dict):
        raise ValueError("not a message")
    if set(data) == {"parts", "sep"} and isinstance(data["parts"], list) and isinstance(data["sep"], str):
        return Joined(tuple(_message(p) if isinstance(p, dict) else str(p) for p in data["parts"]), data["sep"])
    if set(data) != {"id", "args", "plural", "n"} or not isinstance(data["id"], str) or not isinstance(data["args"], dict):
        raise ValueError("not a message")
    plural, n = data["plural"], data["n"]
    if not _plain_fields(data["id"]) or not (plural is None or isinstance(plural, str) and _plain_fields(plural)):
        raise ValueError("a message id with a field that is not a plain name")
    if not (n is None or isinstance(n, int) and not isinstance(n, bool)):
        raise ValueError("a count that is not a whole number")
    out = Message(data["id"], {str(k): _message(v) for k, v in data["args"].items()}, plural, n)
    str(out)                                  # every field has its argument
    return out


def _read(key: str) -> dict | None:
    """The card cached under ``key``, or None when there is none or it is damaged in any way."""
    path = _path(key)
    if not files.exists(path):
        return None
    try:
        data = files.read_json(path, CARD_MAX)
        if data.get("format") != FORMAT or data.get("key") != key or not isinstance(data.get("models"), list):
            return None
        models = [{"name": str(m["name"]), "folder": str(m["folder"]), "methods": [
            {"method": str(r["method"]), "metric": _message(r["metric"]), "verdict": _message(r["verdict"]),
             "value": None if r["value"] is None else float(r["value"])} for r in m["methods"]]}
            for m in data["models"]]
        return {"models": models, "key": key, "seconds": float(data["seconds"]), "pairs": int(data["pairs"]),
                "cached": True}
    except Exception:                  # noqa: BLE001 - whatever is wrong with an entry, it is computed again
        return None


def _write(key: str, card: dict) -> None:
    data = {"format": FORMAT, "key": key, "seconds": card["seconds"], "pairs": card["pairs"], "models": [
        {**m, "methods": [{k: _data(v) for k, v in r.items()} for r in m["methods"]]} for m in card["models"]]}
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f"{key}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = Path(f.name)
            json.dump(data, f, ensure_ascii=False)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):          # CacheError is a ValueError
        pass                           # a cache that cannot be written only costs time


# ----------------------------------------------------------------------------- the card

def peek(models: list[tuple[str, Path]] | None = None, n_pairs: int = 4) -> dict | None:
    """The card of ``models`` (default :func:`shipped`) if this process or the disk cache has it, else None
    (nothing is computed)."""
    key = card_key(shipped() if models is None else models, n_pairs)
    if key not in _MEMORY:
        got = _read(key)
        if got is not None:
            _MEMORY[key] = got
    return _MEMORY.get(key)


def report_card(models: list[tuple[str, Path]] | None = None, n_pairs: int = 4, progress=None,
                device: str = "cpu") -> dict:
    """``{"models": [...], "key", "seconds", "pairs", "cached"}``: :func:`attnkit.calibration.calibrate`'s card of
    ``models`` ((name, folder) pairs; default :func:`shipped`), from this process's memory or the disk cache when
    there, else computed (``progress(done, total)`` per method and model) and kept in both."""
    models = shipped() if models is None else models
    key = card_key(models, n_pairs)
    total = len(models) * len(calibration.METHODS)
    while not _LOCK.acquire(timeout=0.5):          # another session computes a card: wait (a Stop ends the wait)
        if progress:
            progress(0, total)
    try:
        got = peek(models, n_pairs)
        if got is not None:
            return got
        start = time.perf_counter()
        loaded = [(name, folder, loading.load(str(folder), device).weights) for name, folder in models]
        card = calibration.calibrate(loaded, n_pairs, progress=progress)
        card.update(key=key, seconds=time.perf_counter() - start, pairs=n_pairs, cached=False)
        _MEMORY[key] = card
        _write(key, card)
        return card
    finally:
        _LOCK.release()
