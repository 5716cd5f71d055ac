"""The message catalog: English message ids, translated by stdlib :mod:`gettext` (``attnkit/locale``).

The language is not a process-wide setting: Streamlit serves many browser sessions from one process,
so the current language lives in a :class:`contextvars.ContextVar` that the front end sets for the
duration of one script run (the frame, from ``lang`` in the link/session) or one CLI call
(:func:`language`). Library code (core, analyses) never reads it at import time: it builds
:class:`Message` objects — a message id plus its format arguments — with :func:`msg` / :func:`nmsg`,
and they are rendered in the caller's language when shown (``str(m)``, an f-string, or
:meth:`Message.render` with an explicit language). Front ends translate immediately with :func:`t`
and :func:`nt`.

Message ids are the English text with ``str.format`` fields (``"{n} heads"``); arguments that are
themselves messages are rendered in the same language; numbers, token pieces, model names and head
names are passed as arguments and never translated. The strings are found in the source by
``python -m attnkit.dev.locale extract`` (calls of ``msg``, ``nmsg``, ``t`` and ``nt`` with literal
ids), which also fails on a zh entry missing.
"""
from __future__ import annotations

import contextvars
import gettext
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

__all__ = ["LANGUAGES", "DEFAULT", "DOMAIN", "LOCALE_DIR", "LanguageError", "Message", "Joined", "join", "punctuation",
           "msg", "nmsg", "t", "nt",
           "STATUS_LABELS", "status_label", "current", "set_language", "reset_language", "language", "parse_language", "translator", "render"]

#: The interface languages: code -> its own name (what the switch shows).
LANGUAGES = {"en": "English", "zh": "简体中文"}
DEFAULT = "en"
DOMAIN = "attnkit"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: gettext's locale folder per language (English is the message ids themselves).
_GETTEXT = {"zh": "zh_CN"}
_ALIASES = {"en": "en", "english": "en", "zh": "zh", "zh_cn": "zh", "zh-cn": "zh", "zh-hans": "zh", "cn": "zh",
            "简体中文": "zh", "中文": "zh"}

_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("attnkit_language", default=DEFAULT)


class LanguageError(ValueError):
    """An unknown language code; ``str(err)`` says which ones exist."""


def parse_language(text) -> str:
    """``"zh"``, ``"zh-CN"``, ``"en"`` … -> ``"en"``/``"zh"``; None or "" -> the default; else LanguageError."""
    if text is None or str(text).strip() == "":
        return DEFAULT
    code = _ALIASES.get(str(text).strip().lower())
    if code is None:
        raise LanguageError(f"unknown language {text!r}; choose one of {', '.join(LANGUAGES)}")
    return code


@lru_cache(maxsize=None)
def translator(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of ``lang`` (English: the ids themselves). Cached: loaded once per process."""
    lang = parse_language(lang)
    if lang == DEFAULT:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALE_DIR, languages=[_GETTEXT[lang]])


def current() -> str:
    """The language of this session/call."""
    return _LANG.get()


def set_language(lang) -> contextvars.Token:
    """Set this context's language (the Streamlit frame, at the top of every run); returns a reset token."""
    return _LANG.set(parse_language(lang))


def reset_language(token: contextvars.Token) -> None:
    _LANG.reset(token)


@contextmanager
def language(lang):
    """``with language("zh"): …`` — the language for one block (a CLI call, a test)."""
    token = set_language(lang)
    try:
        yield current()
    finally:
        _LANG.reset(token)


def _value(v, lang: str):
    return v.render(lang) if isinstance(v, Message) else v if not isinstance(v, str) else str.__str__(v)


class Message(str):
    """A translatable sentence: message id (+ plural id and count) and format arguments, rendered late.

    It is a ``str`` whose own characters are the English rendering, so code that only stores, compares
    or serialises it (JSON, DataFrames, ``in``) keeps working and gets English; showing it — ``str(m)``,
    an f-string, ``print``, Streamlit — renders it in this context's language. Table cells and chart
    titles must be passed through ``str()`` to be translated."""

    id: str
    args: dict
    plural: str | None
    n: int | None

    def __new__(cls, id: str, args: dict | None = None, plural: str | None = None, n: int | None = None):
        args = dict(args or {})
        obj = super().__new__(cls, _format(gettext.NullTranslations(), id, args, plural, n, DEFAULT))
        obj.id, obj.args, obj.plural, obj.n = id, args, plural, n
        return obj

    def render(self, lang: str | None = None) -> str:
        lang = current() if lang is None else parse_language(lang)
        if lang == DEFAULT:
            return str.__str__(self)
        return _format(translator(lang), self.id, self.args, self.plural, self.n, lang)

    def __str__(self) -> str:
        return self.render()

    def __format__(self, spec: str) -> str:
        return format(self.render(), spec)

    def __add__(self, other):
        return join(self, other)

    def __radd__(self, other):
        return join(other, self)

    def __repr__(self) -> str:
        return f"Message({self.id!r}, {self.args!r})"

    def __reduce__(self):
        return (Message, (self.id, self.args, self.plural, self.n))


def _format(cat, id: str, args: dict, plural, n, lang: str) -> str:
    text = cat.gettext(id) if plural is None else cat.ngettext(id, plural, n)
    values = {k: _value(v, lang) for k, v in args.items()}
    if n is not None:
        values.setdefault("n", n)
    return text.format(**values) if values else text


#: Punctuation joined in code, as Chinese writes it: the full-width mark and no space after it.
_ZH_MARKS = {";": "；", ",": "，", ".": "。", ":": "：", "!": "！", "?": "？"}
_ZH_END = tuple("。；，：！？）」』】")


def _is_cjk(ch: str) -> bool:
    return "\u2e80" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or "\uff00" <= ch <= "\uffef" or ch in "。；，：！？）"


def punctuation(mark: str, before: str = "", lang: str | None = None) -> str:
    """``mark`` (a separator such as "; ", ", ", a sentence's ". ", or a space) as ``lang`` writes it after the
    text ``before``: in Chinese the full-width mark with no space ("；", "，", "。"), nothing after a sentence
    that already ended ("。" then "."), and no space between two Chinese sentences (a space after Latin text
    stays); unchanged in English. Code that joins clauses with punctuation uses this (or :func:`join`)."""
    lang = current() if lang is None else parse_language(lang)
    core = mark.strip()
    tail = before.rstrip()
    if lang != "zh" or (core and core not in _ZH_MARKS):
        return mark
    if not core:                                       # a space: none between two Chinese sentences
        return "" if tail and _is_cjk(tail[-1]) else mark
    if tail.endswith(_ZH_END) and core in ".;":         # the sentence has ended already
        return ""
    return _ZH_MARKS[core]


class Joined(Message):
    """Messages (or plain strings: numbers, names) shown one after another, each in the same language; the
    separator, and any part that is only punctuation, as that language writes it (:func:`punctuation`)."""

    parts: tuple
    sep: str

    def __new__(cls, parts: tuple, sep: str = ""):
        parts = tuple(p for p in parts if str.__len__(p))
        obj = str.__new__(cls, sep.join(_value(p, DEFAULT) for p in parts))
        obj.id, obj.args, obj.plural, obj.n, obj.parts, obj.sep = "", {}, None, None, parts, sep
        return obj

    def render(self, lang: str | None = None) -> str:
        lang = current() if lang is None else parse_language(lang)
        out = ""
        for i, p in enumerate(self.parts):
            text = _value(p, lang)
            if i:
                out += punctuation(self.sep, out, lang) if self.sep else ""
            if not isinstance(p, Message) and isinstance(text, str) and not text.strip(" .;,:!?"):
                text = punctuation(text, out, lang)          # "; ", "." or " " joined in code
            out += text
        return out

    def __repr__(self) -> str:
        return f"Joined({self.parts!r})"

    def __reduce__(self):
        return (Joined, (self.parts, self.sep))


def join(*parts, sep: str = "") -> Message:
    """Messages and strings in a row (a sentence list); ``sep`` goes between them untranslated; empty and
    None parts are left out."""
    return Joined(tuple(p if isinstance(p, str) else str(p) for p in parts if p is not None), sep)


def msg(text: str, **args) -> Message:
    """A lazy message (library code): ``msg("{n} tokens", n=5)``; rendered when shown."""
    return Message(text, args)


def nmsg(singular: str, plural: str, n: int, **args) -> Message:
    """A lazy message with a plural form chosen by ``n`` (``{n}`` is available in the text)."""
    return Message(singular, args, plural, int(n))


def t(text: str, **args) -> str:
    """Translate now, into this session's language (front ends): ``t("Layer {l}", l=3)``."""
    return Message(text, args).render()


def nt(singular: str, plural: str, n: int, **args) -> str:
    """Translate now with a plural form: ``nt("{n} head", "{n} heads", 3)``."""
    return Message(singular, args, plural, int(n)).render()


#: Verdict statuses (identifiers shared by every verdict in the library) -> what is shown.
STATUS_LABELS = {"supported": msg("supported"), "not supported": msg("not supported"),
                 "not enough evidence": msg("not enough evidence"), "undetermined": msg("undetermined"),
                 "unavailable": msg("unavailable")}


def status_label(status: str) -> Message:
    """A verdict status (an English identifier such as "not supported") as a message to show."""
    return STATUS_LABELS.get(status, Message(status))


def render(value, lang: str | None = None):
    """A message rendered (in ``lang`` or this context's language); anything else unchanged. For JSON."""
    return value.render(lang) if isinstance(value, Message) else value
