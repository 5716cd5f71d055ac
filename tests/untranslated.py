"""Find English sentences left in text that should be Chinese (for the zh page tests of phase 2).

    from untranslated import untranslated, apptest_texts
    assert not untranslated(apptest_texts(at)), "…"

A finding is a run of at least :data:`MIN_WORDS` consecutive English words. Allowed, and so never a
finding: head names (L3H0), model names (``attnkit-tiny``, ``org/name``), identifiers (W_Q, d_head,
snake_case, CamelCase with digits, --flags), acronyms (KV, QKV, GPT, RMS), numbers and formulas (a run
is broken by digits, operators and brackets), single English words (the seeds themselves write
“token”, “softmax” in Chinese prose), and anything in ``allow`` (token pieces, model output).
"""
from __future__ import annotations

import re

__all__ = ["MIN_WORDS", "untranslated", "apptest_texts"]

MIN_WORDS = 2
_CJK = r"\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_BREAK = re.compile(rf"[{_CJK}\d=+*/<>()\[\]{{}}|:;,.!?\"“”‘’…→←−–—·×÷√∑Σ^%#@$&\n\t]+|(?<!\w)-|-(?!\w)")
_SKIP = [
    re.compile(r"\bL\d+H\d+\b"),                                  # head names
    re.compile(r"\b[\w.-]+/[\w.-]+\b"),                           # hub names, paths
    re.compile(r"\battnkit[\w-]*\b"),                             # shipped model names
    re.compile(r"(?<![\w-])--[a-z][\w-]*"),                        # command-line flags
    re.compile(r"`[^`]*`"),                                       # code
    re.compile(r"\b\w*_\w*\b"),                                   # identifiers: W_Q, d_head, snake_case
    re.compile(r"\b(?=\w*[A-Z]\w*[a-z]|\w*[a-z]\w*[A-Z])(?=\w*\d)\w+\b"),   # CamelCase with digits
    re.compile(r"\b[A-Z]{2,}s?\b"),                               # acronyms: KV, QKV, GPT, RMS
    re.compile(r"\b(?![aAI]\b)[A-Za-z]\b"),                        # single letters: Q, K, V, d, n, x
]
_WORD = re.compile(r"(?:[A-Za-z][a-z]*|I)(?:[-'][a-z]+)*")


def _strip(text: str, allow) -> str:
    for piece in sorted(allow, key=len, reverse=True):
        if piece:
            text = text.replace(piece, " ")
    for pat in _SKIP:
        text = pat.sub(" ", text)
    return text


def untranslated(texts, allow=(), min_words: int = MIN_WORDS) -> list[str]:
    """The English phrases (runs of ≥ ``min_words`` English words) in ``texts`` (a string or strings),
    once each, in order of appearance."""
    if isinstance(texts, str):
        texts = [texts]
    found = []
    for text in texts:
        for segment in _BREAK.split(_strip(str(text), allow)):
            words = segment.split()
            run = []
            for w in words + [""]:
                if _WORD.fullmatch(w):
                    run.append(w)
                    continue
                if len(run) >= min_words and " ".join(run) not in found:
                    found.append(" ".join(run))
                run = []
    return found


_ATTRS = ("value", "label", "help", "body", "placeholder", "caption")


def apptest_texts(at) -> list[str]:
    """Every string a Streamlit AppTest run shows: element values, labels, help texts, option lists."""
    out = []
    stack = [at._tree]
    while stack:
        node = stack.pop()
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
        opts = getattr(node, "options", None)
        for attr in _ATTRS:
            if attr == "value" and isinstance(opts, (list, tuple)):
                continue                # a choice widget's value is the program's value; its options are shown
            try:
                v = getattr(node, attr, None)
            except Exception:          # a widget whose value needs a session (AppTest raises)
                continue
            if isinstance(v, str) and v:
                out.append(v)
        if isinstance(opts, (list, tuple)):
            out += [o for o in opts if isinstance(o, str)]
    return out
