"""The Sinks page's text: the sidebar's prompt(s) or a text shipped with attnkit, cut into cache windows of the
model's context (each window starts its own cache, its first token the sink; :func:`attnkit.sinks.text_windows`)."""
from __future__ import annotations

import functools
import hashlib

import streamlit as st

from attnkit.app.caches import budgeted
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.corpus.atlas import SHIPPED_CORPORA
from attnkit.corpus.inputs import read_inputs
from attnkit.i18n import msg, t
from attnkit.loading import CHINESE_MODEL, SHIPPED
from attnkit.series import SHIPPED_SERIES, SHIPPED_SERIES_NAME
from attnkit.sinks import text_windows

__all__ = ["SOURCES", "MAX_TOKENS", "source_label", "windows", "describe"]

#: Where the text comes from: the sidebar, or a text shipped inside the package (never written).
FILES = {"eval": SHIPPED_SERIES[SHIPPED_SERIES_NAME] / "eval.txt",
         "debian-man": SHIPPED_CORPORA["debian-man"],
         "zh": SHIPPED[CHINESE_MODEL] / "sample_zh.txt"}
SOURCES = ("prompt", *FILES)
NAMES = {"prompt": msg("the sidebar's prompt"),
         "eval": msg("attnkit-tiny's held-out text (attnkit-tiny-steps/eval.txt)"),
         "debian-man": msg("the debian-man corpus's first documents (manual pages)"),
         "zh": msg("a Chinese sample (attnkit-tiny-zh/sample_zh.txt)")}
#: Tokens the page measures at most (the command line takes more: ``attnkit sinks --tokens``).
MAX_TOKENS = 32_768
#: debian-man's documents read at most (about 1,000 tokens each: more than MAX_TOKENS).
CORPUS_DOCS = 64


def source_label(source: str) -> str:
    return str(NAMES.get(source, source))


@functools.lru_cache(maxsize=None)
def _shipped(source: str) -> tuple[str, ...]:
    """A shipped text's documents (read once per process: the files ship with attnkit and never change)."""
    docs, _ = read_inputs(FILES[source], max_docs=CORPUS_DOCS)
    return tuple(d["text"] for d in docs if d["text"])


def texts(ctx: Context, source: str) -> list[str]:
    if source == "prompt":
        return list(ctx.prompts) if ctx.all_selected else [ctx.text]
    return list(_shipped(source))


@budgeted
def _windows(model: str, digest: str, tokens: int, context: int, bos: int | None, _texts: list, _ctx) -> tuple:
    encode = _ctx.model.encode if bos is None else (lambda text: [bos] + _ctx.model.encode(text))
    return text_windows(encode, _texts, context, tokens)


def windows(ctx: Context, source: str, tokens: int) -> tuple[list[list[int]], int]:
    """(cache windows, tokens the text holds) for ``source``'s first ``tokens`` tokens."""
    bos = ctx.bos_id if ctx.prepend_bos else None
    chosen = texts(ctx, source)
    digest = hashlib.sha1("\x1e".join(chosen).encode("utf-8", "replace")).hexdigest()
    return _windows(ctx.model_name, digest, int(tokens), ctx.model.config.n_ctx, bos, chosen, ctx)


def describe(docs: list, have: int, tokens: int, context: int) -> None:
    """One caption: how many tokens in how many windows, and what was short."""
    parts = [t("{n} tokens in {w} cache window(s) of at most {ctx} tokens; each window starts its own cache, its "
               "first token the sink.", n=f"{sum(map(len, docs)):,}", w=len(docs), ctx=f"{context:,}")]
    if have < tokens:
        parts.append(t("The text holds {have} tokens, fewer than the {n} asked for: all of them are used.",
                       have=f"{have:,}", n=f"{tokens:,}"))
    st.caption(plain(" ".join(parts)))
