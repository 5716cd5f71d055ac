"""The message catalog's tools: extract the marked strings, read a ``.po``, compile it to ``.mo``, check.

    python -m attnkit.dev.locale extract     # every marked id; the ids the zh catalog lacks (exit 1 if any)
    python -m attnkit.dev.locale update      # add new marked ids to every .po (empty msgstr), keep the rest
    python -m attnkit.dev.locale compile     # attnkit.po -> attnkit.mo for every language

The compiled ``.mo`` is committed beside its ``.po`` (the runtime loads it with stdlib gettext, no
compiling on import, no Babel); ``tests/test_i18n.py`` fails when the committed ``.mo`` is not exactly
``compile(po)`` or a marked id has no zh translation. A string is marked by calling ``msg``, ``nmsg``,
``t`` or ``nt`` (from :mod:`attnkit.i18n`) with a literal first argument (and literal plural).
"""
from __future__ import annotations

import ast
import struct
import sys
from pathlib import Path

from .. import i18n

__all__ = ["MARKERS", "extract", "read_po", "po_text", "mo_bytes", "po_path", "mo_path", "missing", "update",
           "compile_all", "main"]

HEADER = ("Project-Id-Version: attnkit\nLanguage: {lang}\nMIME-Version: 1.0\n"
          "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n"
          "Plural-Forms: nplurals=1; plural=0;\n")

MARKERS = {"msg": 1, "t": 1, "nmsg": 2, "nt": 2}          # function -> how many literal ids it takes
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("attnkit", "pages", "app.py")


def po_path(lang: str) -> Path:
    return i18n.LOCALE_DIR / i18n._GETTEXT[lang] / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"


def mo_path(lang: str) -> Path:
    return po_path(lang).with_suffix(".mo")


def _files(root: Path):
    for src in SOURCES:
        p = root / src
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")) if p.exists() else [])


def _call_ids(node: ast.Call):
    name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
    k = MARKERS.get(name)
    if not k or len(node.args) < k:
        return None
    lits = node.args[:k]
    if all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in lits):
        return tuple(a.value for a in lits)
    return None


def extract(root: Path = ROOT) -> dict[tuple, list[str]]:
    """Every marked id (a 1-tuple, or (singular, plural)) -> where it occurs (``path:line``)."""
    found: dict[tuple, list[str]] = {}
    for f in _files(root):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                ids = _call_ids(node)
                if ids:
                    found.setdefault(ids, []).append(f"{f.relative_to(root)}:{node.lineno}")
    return found


def _unquote(s: str) -> str:
    return ast.literal_eval(s)          # a .po string literal is a C string: Python reads the escapes we use


def read_po(text: str) -> dict:
    """``.po`` text -> {msgid: msgstr} (plural entries: {(msgid, msgid_plural): [msgstr[0], …]});
    the header is the entry with the empty id. Fuzzy entries are skipped."""
    out, entry, key, fuzzy = {}, {}, None, False

    def flush():
        nonlocal entry, fuzzy
        if "msgid" in entry and not fuzzy:
            if "msgid_plural" in entry:
                forms = [entry[k] for k in sorted(k for k in entry if k.startswith("msgstr["))]
                out[(entry["msgid"], entry["msgid_plural"])] = forms
            else:
                out[entry["msgid"]] = entry.get("msgstr", "")
        entry, fuzzy = {}, False

    for line in text.splitlines() + [""]:
        line = line.strip()
        if not line:
            flush()
            key = None
        elif line.startswith("#,") and "fuzzy" in line:
            fuzzy = True
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            entry[key] += _unquote(line)
        else:
            word, _, rest = line.partition(" ")
            if word == "msgid" and "msgid" in entry and ("msgstr" in entry or "msgstr[0]" in entry):
                flush()
            key = word
            entry[key] = _unquote(rest)
    return out


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def po_text(catalog: dict, where: dict, lang: str) -> str:
    """A ``.po`` file: the header, then every entry with its source locations as ``#:`` comments."""
    out = ['msgid ""', f"msgstr {_quote(HEADER.format(lang=i18n._GETTEXT[lang]))}", ""]
    for key, value in catalog.items():
        if key == "":
            continue
        ids = key if isinstance(key, tuple) else (key,)
        out += [f"#: {' '.join(where.get(ids, ['(unused)'])[:4])}", f"msgid {_quote(ids[0])}"]
        if len(ids) == 2:
            out += [f"msgid_plural {_quote(ids[1])}"] + [f"msgstr[{i}] {_quote(v)}" for i, v in enumerate(value)]
        else:
            out.append(f"msgstr {_quote(value)}")
        out.append("")
    return "\n".join(out)


def update(lang: str = "zh", root: Path = ROOT, extra: dict | None = None) -> dict:
    """Rewrite ``lang``'s ``.po``: every marked id in source order (new ones empty, or from ``extra``),
    translations kept; ids no longer marked are dropped. Returns the catalog."""
    path = po_path(lang)
    old = read_po(path.read_text(encoding="utf-8")) if path.exists() else {}
    extra = extra or {}
    where = extract(root)
    cat = {}
    for ids in sorted(where, key=lambda k: where[k][0]):
        key = ids[0] if len(ids) == 1 else ids
        cat[key] = next((v for v in (old.get(key), extra.get(key)) if _translated(v)), "" if len(ids) == 1 else [""])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(po_text(cat, where, lang), encoding="utf-8")
    return cat


def mo_bytes(catalog: dict) -> bytes:
    """A GNU ``.mo`` file (little-endian, revision 0, no hash table) of a :func:`read_po` catalog (a UTF-8
    header is added when the catalog has none: gettext reads a header-less catalog as ASCII)."""
    if "" not in catalog:
        catalog = {"": "Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=1; plural=0;\n", **catalog}
    pairs = []
    for k, v in catalog.items():
        if isinstance(k, tuple):
            if not any(v):
                continue
            pairs.append((f"{k[0]}\0{k[1]}".encode(), "\0".join(v).encode()))
        elif v or k == "":
            pairs.append((k.encode(), v.encode()))
    pairs.sort()
    n = len(pairs)
    ids_at, strs_at = 28, 28 + 8 * n
    data_at = 28 + 16 * n
    blob, ids_tab, strs_tab = b"", [], []
    for key, _ in pairs:
        ids_tab += [len(key), data_at + len(blob)]
        blob += key + b"\0"
    for _, val in pairs:
        strs_tab += [len(val), data_at + len(blob)]
        blob += val + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, n, ids_at, strs_at, 0, data_at)
    return head + struct.pack(f"<{2 * n}I", *ids_tab) + struct.pack(f"<{2 * n}I", *strs_tab) + blob


def _translated(value) -> bool:
    return bool(value) and (not isinstance(value, list) or all(value))


def missing(lang: str = "zh", root: Path = ROOT) -> list[str]:
    """The marked ids with no translation in ``lang``'s ``.po`` (with where they occur)."""
    cat = read_po(po_path(lang).read_text(encoding="utf-8"))
    out = []
    for ids, where in sorted(extract(root).items()):
        key = ids[0] if len(ids) == 1 else ids
        if not _translated(cat.get(key)):
            out.append(f"{' | '.join(ids)!r} ({', '.join(where[:3])})")
    return out


def compile_all() -> list[Path]:
    written = []
    for lang in i18n._GETTEXT:
        mo_path(lang).write_bytes(mo_bytes(read_po(po_path(lang).read_text(encoding="utf-8"))))
        written.append(mo_path(lang))
    return written


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compile"]:
        for p in compile_all():
            print(f"wrote {p.relative_to(ROOT)}")
        return 0
    if argv[:1] == ["update"]:
        for lang in i18n._GETTEXT:
            cat = update(lang)
            print(f"{po_path(lang).relative_to(ROOT)}: {len(cat)} entries, {sum(not v for v in cat.values())} empty")
        return 0
    if argv[:1] == ["extract"]:
        print(f"{len(extract())} marked strings")
        gaps = missing("zh")
        for g in gaps:
            print(f"missing zh: {g}")
        return 1 if gaps else 0
    print("usage: python -m attnkit.dev.locale extract|update|compile", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
