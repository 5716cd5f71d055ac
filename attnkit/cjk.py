"""Is this prompt Chinese/Japanese/Korean, and can the loaded model read it?

A byte-level BPE trained on English splits each CJK character into two or three byte pieces; a model
trained on no CJK text then gives confident-looking attention patterns, entropy verdicts and a logit
lens that mean nothing. :func:`cjk_notice` returns the one-line notice (a catalog message naming the
Chinese model :data:`CHINESE_MODEL`) when a prompt is mostly CJK and the model splits most of its
characters into byte pieces, or its vocabulary holds no CJK character at all; else None.
"""
from __future__ import annotations

from .i18n import Message, msg
from .loading import CHINESE_MODEL
from .pieces import Group

__all__ = ["CHINESE_MODEL", "MOSTLY", "SPLIT_MOST", "is_cjk", "cjk_share", "split_share", "vocab_has_cjk",
           "cjk_notice", "LITTLE", "vocab_cjk_share"]

#: A prompt is "mostly CJK" when more than this share of its non-space characters are CJK …
MOSTLY = 0.5
#: … and the model "cannot read it" when more than this share of those characters are split into pieces.
SPLIT_MOST = 0.5

_RANGES = ((0x3040, 0x30FF), (0x3100, 0x312F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
           (0xF900, 0xFAFF), (0x20000, 0x2FA1F), (0x3000, 0x303F), (0xFF00, 0xFFEF))


def is_cjk(ch: str) -> bool:
    """A Han character, kana, hangul, or CJK/full-width punctuation."""
    o = ord(ch)
    return any(a <= o <= b for a, b in _RANGES)


def cjk_share(text: str) -> float:
    """The share of the non-space characters of ``text`` that are CJK (0 for an empty text)."""
    chars = [c for c in text if not c.isspace()]
    return sum(map(is_cjk, chars)) / len(chars) if chars else 0.0


def split_share(groups: list[Group]) -> float:
    """Of the CJK characters in the tokens (``Loaded.token_groups(ids)``), the share encoded by a run of
    several byte-piece tokens rather than by a token of its own (or a token holding several)."""
    split = whole = 0
    for g in groups:
        n = sum(map(is_cjk, g.text))
        if g.size > 1:
            split += n
        else:
            whole += n
    return split / (split + whole) if split + whole else 0.0


def vocab_has_cjk(pieces) -> bool:
    """Whether any vocabulary token (its bytes, ``Loaded.token_bytes(range(vocab))``) holds a CJK character."""
    for b in pieces:
        text = b.decode("utf-8", errors="ignore")
        if any(map(is_cjk, text)):
            return True
    return False


#: A vocabulary in which under this share of the tokens hold a CJK character was trained mostly on other
#: languages (attnkit-tiny: 13 %, from classical poems; attnkit-tiny-zh: 45 %)
LITTLE = 0.25


def vocab_cjk_share(pieces) -> float:
    """The share of vocabulary tokens (their bytes) that hold a CJK character."""
    pieces = list(pieces)
    hits = sum(1 for b in pieces if any(map(is_cjk, b.decode("utf-8", errors="ignore"))))
    return hits / max(1, len(pieces))


def cjk_notice(text: str, groups: list[Group], model: str, knows_cjk: bool | None = None,
               vocab_share: float | None = None) -> Message | None:
    """The notice for a mostly-CJK prompt on a model that cannot read it (None when there is nothing to say,
    or when the model is the Chinese one). ``knows_cjk``: whether its vocabulary holds CJK at all (when known);
    ``vocab_share``: the share of its vocabulary that does (:func:`vocab_cjk_share`, when known)."""
    if model == CHINESE_MODEL or cjk_share(text) <= MOSTLY:
        return None
    share = split_share(groups)
    if knows_cjk is False:
        return msg("This prompt is mostly Chinese, but {model} was trained on no Chinese text: its patterns, "
                   "verdicts and predictions here mean little. Load {zh}, which was trained on Chinese.",
                   model=model, zh=CHINESE_MODEL)
    if share > SPLIT_MOST:
        return msg("This prompt is mostly Chinese, but {model} splits {share} of its characters into byte pieces "
                   "(it was trained on little or no Chinese): its patterns, verdicts and predictions here mean "
                   "little. Load {zh}, which was trained on Chinese.",
                   model=model, share=f"{share:.0%}", zh=CHINESE_MODEL)
    if vocab_share is not None and vocab_share < LITTLE:
        return msg("This prompt is mostly Chinese, but {model} was trained mostly on other languages (only {share} "
                   "of its vocabulary is Chinese): its patterns, verdicts and predictions here say little about how "
                   "a model reads Chinese. Load {zh}, which was trained on Chinese.",
                   model=model, share=f"{vocab_share:.0%}", zh=CHINESE_MODEL)
    return None
