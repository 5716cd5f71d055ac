"""The shipped corpora (``attnkit/corpora/``): held-out text for the head atlas.

    python -m attnkit.dev.corpora [FOLDER]       # rebuilds attnkit/corpora/debian-man (or FOLDER)

``debian-man``: the English manual pages that Debian packages install on this machine, from a fixed list of
packages, turned to prose by attnkit-tiny's own training code (:func:`attnkit.dev.train.sources.man_to_text`, then
:func:`~attnkit.dev.train.sources.chunk` into documents of at most ~4,000 characters at paragraph breaks). None of
this was in attnkit-tiny's training text (fortunes, dictionaries, WordNet, the Debian handbook, FAQ and reference,
the Python docs). ``documents.jsonl`` holds one document a line (``{"text", "source"}``); ``SOURCES.json`` lists
every page with its package, the package's version and licence (the ``Files: *`` stanza of
``/usr/share/doc/<package>/copyright``) and its characters. The pages are read in sorted order: the same
packages at the same versions give the same bytes.
"""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from .train.sources import chunk, man_to_text

#: Packages whose English manual pages make the corpus (GNU and Debian tools; licences in SOURCES.json).
PACKAGES = ["bash", "coreutils", "grep", "sed", "findutils", "diffutils", "tar", "gzip", "make", "apt", "dpkg",
            "man-db", "util-linux"]
#: A page shorter than this once turned to prose (a ``.so`` redirection, a stub) is left out.
MIN_CHARS = 400
OUT = Path(__file__).resolve().parents[1] / "corpora" / "debian-man"
_MAN = re.compile(r"^/usr/share/man/man[1-8]/[^/]+\.gz$")


def _query(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout


def licence(package: str) -> str:
    """The licence of the ``Files: *`` stanza of the package's machine-readable copyright file (else its first)."""
    try:
        text = Path(f"/usr/share/doc/{package}/copyright").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown (no /usr/share/doc copyright file)"
    for stanza in re.split(r"\n\s*\n", text):
        if re.search(r"^Files:\s*\*\s*$", stanza, re.M):
            m = re.search(r"^License:\s*(.+)$", stanza, re.M)
            if m:
                return m[1].strip()
    m = re.search(r"^License:\s*(.+)$", text, re.M)
    return m[1].strip() if m else "see /usr/share/doc/{}/copyright".format(package)


def pages(package: str) -> list[Path]:
    """The package's English manual pages (sections 1–8, not the translated ones), sorted."""
    return sorted(Path(p) for p in _query(["dpkg", "-L", package]).splitlines()
                  if _MAN.match(p) and Path(p).is_file() and not Path(p).is_symlink())


def build(out: Path = OUT) -> dict:
    """Write documents.jsonl and SOURCES.json into ``out``; returns the sources record."""
    out.mkdir(parents=True, exist_ok=True)
    docs, files, packages = [], [], {}
    for pkg in PACKAGES:
        version = _query(["dpkg-query", "-W", "-f=${Version}", pkg]).strip()
        packages[pkg] = {"version": version, "licence": licence(pkg), "copyright": f"/usr/share/doc/{pkg}/copyright"}
        for page in pages(pkg):
            text = man_to_text(gzip.decompress(page.read_bytes()).decode("utf-8", errors="replace"))
            if len(text) < MIN_CHARS:
                continue
            parts = chunk(text)
            docs += [{"text": d, "source": page.name} for d in parts]
            files.append({"path": str(page), "package": pkg, "characters": len(text), "documents": len(parts)})
    with open(out / "documents.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    record = {"name": "debian-man", "made_by": "python -m attnkit.dev.corpora (attnkit/dev/corpora.py)",
              "how": "English manual pages turned to prose by attnkit.dev.train.sources.man_to_text, cut into "
                     "documents of at most ~4,000 characters by attnkit.dev.train.sources.chunk",
              "held_out": "not in attnkit-tiny's training sources (attnkit/dev/train/sources.py SOURCES)",
              "documents": len(docs), "characters": sum(len(d["text"]) for d in docs),
              "packages": packages, "files": files}
    (out / "SOURCES.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rec = build(Path(argv[0]) if argv else OUT)
    print(f"{rec['documents']} documents, {rec['characters']:,} characters from {len(rec['files'])} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
