"""Byte-level BPE pieces merged back into the characters they encode.

GPT-2's tokenizer works on UTF-8 bytes, so one character can be split over several tokens: 床 is
``\\xe5\\xba`` + ``\\x8a``, 🙂 up to four single-byte tokens. Shown token by token those are byte
escapes; here consecutive tokens are grouped until their bytes decode, so a view can draw the
character once across the tokens that carry it, and name the pieces and ids beside it.
:func:`printable_token` writes one token's text with its spaces, line breaks and control characters visible.
:func:`char_spans` gives each token's character offsets in the decoded text, and :func:`word_positions` the
tokens that hold part of a word by those offsets (never by comparing token strings: 今天's 天 is not 昨天's).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_GROUP", "Group", "char_groups", "piece_text", "token_texts", "char_spans", "word_positions",
           "word_occurrences", "show_spaces", "token_labels", "printable_token"]

#: Tokens joined at most to finish a character (a UTF-8 character is ≤ 4 bytes; a run of split
#: characters can chain a few more); past this the tokens are shown one by one with \\xNN escapes.
MAX_GROUP = 8


@dataclass(frozen=True)
class Group:
    """Tokens ``start … end − 1`` whose bytes together decode to ``text``."""
    start: int
    end: int
    text: str

    @property
    def size(self) -> int:
        return self.end - self.start


def piece_text(piece: bytes) -> str:
    """One token's bytes as text, with bytes that are not whole UTF-8 characters shown as \\xNN."""
    return piece.decode("utf-8", errors="backslashreplace")


def _decodes(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def char_groups(pieces: list[bytes], max_group: int = MAX_GROUP) -> list[Group]:
    """Consecutive tokens grouped so that each group's bytes decode as UTF-8, in order, covering every
    token once. A token that decodes alone is its own group; a split character's tokens are joined
    (to the shortest run that decodes, at most ``max_group``); bytes that never decode stay single
    tokens with \\xNN escapes."""
    out, i, n = [], 0, len(pieces)
    while i < n:
        text = _decodes(pieces[i])
        j = i + 1
        if text is None:
            for k in range(i + 2, min(n, i + max_group) + 1):
                text = _decodes(b"".join(pieces[i:k]))
                if text is not None:
                    j = k
                    break
            else:
                text = piece_text(pieces[i])
        out.append(Group(i, j, text))
        i = j
    return out


def token_texts(pieces: list[bytes]) -> list[str]:
    """One readable string per token: the token's text, or for a piece of a split character the
    character(s) it helps encode with the piece's place, e.g. ``床[1/2]`` and ``床[2/2]``."""
    out = []
    for g in char_groups(pieces):
        if g.size == 1:
            out.append(g.text)
        else:
            out += [f"{g.text}[{k + 1}/{g.size}]" for k in range(g.size)]
    return out


def char_spans(pieces: list[bytes]) -> tuple[str, list[tuple[int, int]]]:
    """(the decoded text, each token's [start, end) character offsets in it). The text is the groups' texts of
    :func:`char_groups` in a row (the prompt itself for a byte-level tokenizer); the tokens of a character split
    over several tokens share that character's span."""
    text, spans = "", []
    for g in char_groups(pieces):
        start = len(text)
        text += g.text
        spans += [(start, len(text))] * g.size
    return text, spans


def word_occurrences(pieces: list[bytes], word: str) -> list[list[int]]:
    """For each occurrence of ``word`` in the decoded text (left to right, not overlapping), the positions of the
    tokens whose character span overlaps it: every token that holds part of the word, a token that straddles the
    word's edge included. Empty when the word does not occur (or is empty)."""
    text, spans = char_spans(pieces)
    out, at = [], text.find(word) if word else -1
    while at >= 0:
        end = at + len(word)
        out.append([i for i, (a, b) in enumerate(spans) if a < end and b > at])
        at = text.find(word, end)
    return out


def word_positions(pieces: list[bytes], word: str) -> list[int]:
    """The positions of the tokens that hold part of any occurrence of ``word`` (:func:`word_occurrences`), sorted."""
    return sorted({i for occ in word_occurrences(pieces, word) for i in occ})


def show_spaces(tok: str) -> str:
    """A token with its spaces and line breaks made visible (GPT-2 tokens often start with a space)."""
    return tok.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def token_labels(tokens: list[str]) -> list[str]:
    """Unique axis labels 'position:token' (tokens repeat; positions don't)."""
    return [f"{i}:{show_spaces(t)}" for i, t in enumerate(tokens)]


def printable_token(tok: str) -> str:
    """A token with its spaces and line breaks visible (as the pages show them); other control
    characters as \\xNN (they cannot go into an SVG/PNG export)."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in show_spaces(tok))
