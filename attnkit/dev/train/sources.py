"""The shipped model's training text: Debian packages' prose and documentation, read from the local
file system, cut into documents, shuffled and split (see :mod:`attnkit.dev.train` for the list)."""
from __future__ import annotations

import glob
import gzip
import random
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

EOT = "<|endoftext|>"
VAL_EVERY = 50
MAX_DOC_CHARS = 4000


class TrainError(RuntimeError):
    """The training cannot go on (no corpus, a tokenizer that loses text, a model that does not fit);
    ``str(err)`` says why."""


FORTUNES = "/usr/share/games/fortunes"
#: the English files of the ``fortunes`` package (fortune-mod's full set, not the offensive one;
#: ``ascii-art`` left out: pictures, not text)
FORTUNE_FILES = ["art", "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education",
                 "ethnic", "food", "goedel", "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie",
                 "love", "magic", "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people",
                 "perl", "pets", "platitudes", "politics", "pratchett", "science", "songs-poems", "sports",
                 "startrek", "tao", "translate-me", "wisdom", "work", "zippy"]
PYDOC = "/usr/share/doc/python3.11/html/_sources"
WORDNET = "/usr/share/wordnet"
SOURCES = [
    # (apt package, licence, glob patterns, kind)
    ("fortunes", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/{f}" for f in FORTUNE_FILES], "fortune"),
    ("fortunes-min", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/fortunes", f"{FORTUNES}/literature", f"{FORTUNES}/riddles"], "fortune"),
    ("dict-devil", "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)",
     ["/usr/share/dictd/devil.dict.dz"], "gz"),
    ("jargon-text", "public domain (the Jargon File 4.4.7)",
     ["/usr/share/doc/jargon-text/jargon.txt.gz"], "gz"),
    ("wordnet-base", "WordNet 3.0 licence (Princeton University; permissive, BSD-like)",
     [f"{WORDNET}/data.noun", f"{WORDNET}/data.verb", f"{WORDNET}/data.adj", f"{WORDNET}/data.adv"],
     "wordnet"),
    ("debian-handbook", "GPL-2.0+ or CC-BY-SA-3.0 (Raphaël Hertzog, Roland Mas)",
     ["/usr/share/doc/debian-handbook/html/en-US/*.html"], "html"),
    ("debian-faq", "verbatim/modified copies permitted (Software in the Public Interest)",
     ["/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"], "gz"),
    ("debian-reference-en", "GPL-2+ (Osamu Aoki)",
     ["/usr/share/debian-reference/*.en.html"], "html"),
    ("python3.11-doc", "Python License (PSF License Version 2)",
     [f"{PYDOC}/tutorial/*.txt", f"{PYDOC}/faq/*.txt", f"{PYDOC}/howto/*.txt"], "text"),
    ("fortunes-zh", "GPL-3.0+ (Yu Guanghui)",
     [f"{FORTUNES}/chinese", f"{FORTUNES}/tang300", f"{FORTUNES}/song100"], "fortune"),
]

#: attnkit-tiny-zh's sources: the Chinese documentation Debian ships (reference, FAQ, maintainer's guide,
#: Debian Edu manual, manual pages) and Chinese fortunes, with English prose (fortunes, The Devil's
#: Dictionary) so English prompts still read as text.
ZH_SOURCES = [
    ("debian-reference-zh-cn", "GPL-2+ (Osamu Aoki and the translators)",
     ["/usr/share/debian-reference/*.zh-cn.html"], "html"),
    ("debian-faq-zh-cn", "verbatim/modified copies permitted (Software in the Public Interest)",
     ["/usr/share/doc/debian/FAQ/debian-faq.zh-cn.txt.gz"], "gz"),
    ("maint-guide-zh-cn", "GPL-2+ or MIT-style (Josip Rodin, Osamu Aoki and the translators)",
     ["/usr/share/doc/maint-guide-zh-cn/html/*.zh-cn.html"], "html"),
    ("debian-edu-doc-zh-cn", "GPL-2+ (the Debian Edu documentation team)",
     ["/usr/share/doc/debian-edu-doc-zh-cn/debian-edu-bookworm-manual.html"], "html"),
    ("manpages-zh", "GPL-2+ / GFDL (the Chinese Man Pages Project; per page as stated in it)",
     ["/usr/share/man/zh_CN/man*/*.gz"], "man"),
    ("fortunes-zh", "GPL-3.0+ (Yu Guanghui)",
     [f"{FORTUNES}/chinese", f"{FORTUNES}/tang300", f"{FORTUNES}/song100"], "fortune"),
    ("fortunes-min", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/fortunes", f"{FORTUNES}/literature", f"{FORTUNES}/riddles"], "fortune"),
    ("fortunes", "BSD-3-Clause (Regents of the University of California)",
     [f"{FORTUNES}/{f}" for f in ("people", "wisdom", "humorists", "literature", "love", "pets", "science", "work")],
     "fortune"),
    ("dict-devil", "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)",
     ["/usr/share/dictd/devil.dict.dz"], "gz"),
]
CORPORA = {"en": SOURCES, "zh": ZH_SOURCES}

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _HTMLText(HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "pre", "h1", "h2", "h3", "h4", "h5", "h6",
             "dt", "dd", "table", "title", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in {"script", "style"}:
            self.skip += 1
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in {"script", "style"}:
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_to_text(raw: str) -> str:
    parser = _HTMLText()
    parser.feed(raw)
    text = "".join(parser.parts)
    text = re.sub(r"[ \t\r\f\v]+\n", "\n", text)
    text = re.sub(r"\n\t+", "\n", text)   # HTML source indentation (tabs), not content
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def chunk(text: str, max_chars: int = MAX_DOC_CHARS) -> list[str]:
    """Cut ``text`` into documents of at most ~max_chars at blank-line boundaries."""
    docs, cur, size = [], [], 0
    for para in re.split(r"\n\s*\n", text):
        para = para.strip("\n")
        if not para.strip():
            continue
        if cur and size + len(para) > max_chars:
            docs.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(para)
        size += len(para) + 2
    if cur:
        docs.append("\n\n".join(cur))
    return docs


def wordnet_lines(raw: str) -> list[str]:
    """``lemma, lemma: gloss; "example"`` for every WordNet synset whose gloss has an example sentence."""
    lines = []
    for line in raw.splitlines():
        if line.startswith("  ") or " | " not in line:
            continue
        head, gloss = line.split(" | ", 1)
        if '"' not in gloss:
            continue
        f = head.split()
        words = [re.sub(r"\(\w+\)$", "", f[4 + 2 * i]).replace("_", " ") for i in range(int(f[3], 16))]
        lines.append(f"{', '.join(dict.fromkeys(words))}: {gloss.strip()}")
    return lines


ROFF_FONT = re.compile(r"\\f[BIRP1-4]|\\f\(..|\\s[-+]?\d+|\\&|\\\(..|\\[|^,/]")


def man_to_text(raw: str) -> str:
    """A manual page's prose: roff requests (lines starting with ``.`` or ``'``) dropped, except the text
    of headings and font macros; font and size escapes removed."""
    lines = []
    for line in raw.splitlines():
        if line.startswith((".\\\"", "'\\\"", '.\\"')):
            continue
        if line.startswith((".SH", ".SS", ".B ", ".I ", ".BR ", ".IR ", ".BI ", ".RB ", ".IP ", ".TP ")):
            line = line.split(" ", 1)[1].replace('"', "") if " " in line else ""
        elif line.startswith((".", "'")):
            lines.append("")
            continue
        lines.append(ROFF_FONT.sub("", line).replace("\\-", "-").replace("\\e", "\\"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def read_source(kind: str, path: str) -> list[str]:
    if kind == "man":
        return chunk(man_to_text(gzip.decompress(Path(path).read_bytes()).decode("utf-8", errors="replace")))
    if kind == "gz":
        return chunk(gzip.decompress(Path(path).read_bytes()).decode("utf-8", errors="replace"))
    raw = Path(path).read_text(encoding="utf-8", errors="replace")
    if kind == "wordnet":   # 40 synsets a document, in the file's (topical) order
        lines = wordnet_lines(raw)
        return ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    if kind == "fortune":
        raw = ANSI.sub("", raw)
        return [d.strip("\n") for d in re.split(r"^%\s*$", raw, flags=re.M) if d.strip()]
    if kind == "html":
        return chunk(html_to_text(raw))
    return chunk(raw)


def collect_documents(corpus_file: str | None = None, corpus: str = "en") -> list[tuple[str, str]]:
    """(source, text) pairs in a fixed order. ``corpus_file``: one text file, documents
    separated by blank lines (used by tests and for custom corpora)."""
    if corpus_file:
        text = Path(corpus_file).read_text(encoding="utf-8")
        return [("custom", d) for d in chunk(text, max_chars=1)]
    docs = []
    for package, _licence, patterns, kind in CORPORA[corpus]:
        paths = sorted({p for pat in patterns for p in glob.glob(pat, recursive=True)})
        for path in paths:
            docs.extend((package, d) for d in read_source(kind, path))
    return docs


def build_corpus(seed: int, corpus_limit: int | None, corpus_file: str | None, corpus: str = "en"):
    """(train, validation) documents: shuffled with ``seed``, cut at ``corpus_limit`` characters, every
    ``VAL_EVERY``-th held out."""
    docs = collect_documents(corpus_file, corpus)
    if not docs:
        raise TrainError("no corpus found (install the Debian packages listed in attnkit/dev/train/sources.py "
                         "or pass --corpus-file)")
    random.Random(seed).shuffle(docs)
    if corpus_limit:
        kept, total = [], 0
        for d in docs:
            if total >= corpus_limit:
                break
            kept.append(d)
            total += len(d[1])
        docs = kept
    train = [d for i, d in enumerate(docs) if i % VAL_EVERY != VAL_EVERY - 1]
    val = [d for i, d in enumerate(docs) if i % VAL_EVERY == VAL_EVERY - 1]
    if not val:  # tiny corpora: still hold something out
        val = [docs[-1]]
        train = docs[:-1] or docs
    return train, val




#: Sources by kind, for the card's shares.
PROSE = ("fortunes", "fortunes-min", "dict-devil", "jargon-text", "wordnet-base")
DOCS = ("debian-handbook", "debian-faq", "debian-reference-en", "python3.11-doc")


def package_versions() -> dict[str, str]:
    """The installed versions of the source packages (dpkg), or {} where dpkg cannot tell."""
    try:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Version}\\n"] + sorted({s[0] for s in SOURCES + ZH_SOURCES}),
                             capture_output=True, text=True, timeout=20)
        return dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)
    except (OSError, subprocess.SubprocessError):
        return {}
