"""Markdown that a reader would see as literal characters: a catalog sentence written with Markdown (``**bold**``,
```code```) shown through a plain-text path — escaped by ``app.plain`` inside a Markdown element (Streamlit then
draws the asterisks) or put into ``st.text`` (never rendered). The class of round five's ``**grey = masked**``.

    from markdown_shown import literal_markdown
    assert literal_markdown(at) == []
"""
from __future__ import annotations

import re

__all__ = ["literal_markdown"]

#: Elements whose text Streamlit renders as Markdown …
MARKDOWN = {"markdown", "caption", "title", "header", "subheader", "warning", "info", "error", "success", "toast"}
#: … and those it shows as typed.
PLAIN = {"text", "code"}
#: Markdown escaped into a Markdown element: \*\* or \` (what plain() makes of ** and `) shows the marks themselves.
ESCAPED = re.compile(r"\\\*\\\*|\\`")
#: Markdown in a plain element: **bold** or `code` appears with its marks.
RAW = re.compile(r"\*\*[^*\n]+\*\*|`[^`\n]+`")


def literal_markdown(at) -> list[str]:
    """The texts of an AppTest run that show Markdown marks literally (each once, its type first)."""
    found, stack = [], [at._tree]
    while stack:
        node = stack.pop()
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
        kind = getattr(node, "type", None)
        texts = []
        for attr in ("value", "body", "label", "help", "caption"):
            try:
                v = getattr(node, attr, None)
            except Exception:          # a widget whose value needs a session (AppTest raises)
                continue
            if isinstance(v, str) and v:
                texts.append((attr, v))
        for attr, text in texts:
            shown_as_typed = kind in PLAIN and attr in ("value", "body")
            bad = RAW.search(text) if shown_as_typed else ESCAPED.search(text)
            if bad and (kind in MARKDOWN or shown_as_typed or attr in ("label", "help")):
                entry = f"{kind}: {text[:160]}"
                if entry not in found:
                    found.append(entry)
    return found
