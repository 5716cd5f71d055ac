"""Escaping: user text reaches Streamlit only through :func:`plain` (and :func:`show_error`, which uses it)."""
from __future__ import annotations

import re

import streamlit as st

#: Characters with Markdown meaning anywhere in a line (emphasis, code, links/images, HTML, entities,
#: strikethrough, LaTeX, Streamlit's :color[…] directives need the brackets). CommonMark lets a backslash
#: escape any ASCII punctuation, so "\\*" shows "*".
_MD_INLINE = frozenset("\\`*_[]<>!~$&")
_AUTOLINK = re.compile(r"(?i)[a-z]:(?=//)|www\.|@")
_MD_BLOCK_START = re.compile(r"^(\s*)([#+\-=>|]|\d+(?=[.)]))")


def _intraword_underscore(text: str, i: int) -> bool:
    """'_' between two letters/digits (HF_HUB_OFFLINE, model_type) cannot start or end emphasis: kept as is."""
    return text[i] == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()


def plain(text) -> str:
    """THE escaping helper: any user-derived string (prompt, file name, column name, folder path, model name,
    an error message that quotes them) goes through it before it reaches Streamlit's Markdown — messages,
    spinners, captions, titles, tooltips — so it shows literally: no styling, links, images or HTML. Line
    breaks and other control characters become spaces (a message stays one line, so no block syntax can
    start inside it); a block marker at the very start (#, -, +, >, 1.) is escaped too.
    tests/test_escaping.py scans app.py, pages/ and attnkit/app/ for st.* calls that skip it."""
    text = "" if text is None else str(text)
    out = "".join("\\" + c if c in _MD_INLINE and not _intraword_underscore(text, i)
                  else (" " if c < " " or c == "\x7f" else c) for i, c in enumerate(text))
    out = _AUTOLINK.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], out)   # GFM bare URLs, e-mails
    m = _MD_BLOCK_START.match(out)
    if m:
        if m.group(2)[0].isdigit():      # "1. item": escape the "." / ")" after the number
            end = m.end()
            out = out[:end] + "\\" + out[end:]
        else:
            out = m.group(1) + "\\" + out[m.start(2):]
    return out


def show_error(err: Exception | str):
    """A one-line message, never a traceback. The text is escaped (it often names the user's files)."""
    st.error(plain(err), icon="⚠️")
