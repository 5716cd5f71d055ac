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

import json
import re

__all__ = ["MIN_WORDS", "untranslated", "apptest_texts", "english_words", "KEPT_WORDS", "spec_texts", "chart_texts"]

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


#: English words the Chinese interface keeps on purpose (the seeds write them in Chinese prose).
KEPT_WORDS = frozenset({"token", "tokens", "softmax", "logit", "logits", "attnkit", "float", "nats"})


def english_words(text, allow=KEPT_WORDS) -> list[str]:
    """Single English words (3 letters or more, not an identifier, acronym or allowed word) in ``text``: stricter
    than :func:`untranslated`, for short labels (a chart's title, an axis, a legend) where one word is all there is."""
    out = []
    for segment in _BREAK.split(_strip(str(text), ())):
        for w in segment.split():
            if _WORD.fullmatch(w) and len(w) >= 3 and w.lower() not in allow and w not in out:
                out.append(w)
    return out


_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')
_LEGEND_CHANNELS = ("color", "fill", "stroke", "shape", "strokeDash", "strokeWidth", "opacity", "size")


def _title_texts(title) -> list[str]:
    if title is None or title is False:
        return []
    if isinstance(title, dict):
        return _title_texts(title.get("text")) + _title_texts(title.get("subtitle"))
    if isinstance(title, (list, tuple)):
        return [" ".join(str(x) for x in title)]
    return [str(title)]


def _records(spec: dict, data: dict | None) -> dict[str, list]:
    """Every data value per field name, from the spec's datasets, inline values and ``data`` (name -> rows)."""
    fields: dict[str, list] = {}
    tables = list((spec.get("datasets") or {}).values()) + list((data or {}).values())
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            vals = node.get("values") if isinstance(node.get("values"), list) else None
            if vals and all(isinstance(v, dict) for v in vals):
                tables.append(vals)
            stack.extend(v for k, v in node.items() if k != "datasets")
        elif isinstance(node, list):
            stack.extend(node)
    for rows in tables:
        rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
        for r in rows:
            for k, v in r.items():
                fields.setdefault(k, []).append(v)
    return fields


def spec_texts(spec, data: dict | None = None, titles_only: bool = False) -> list[str]:
    """Every text a Vega-Lite spec shows: chart, axis, legend and header titles, tooltip names, the string
    literals of label expressions and, unless ``titles_only``, the category values on its axes and legends (from
    its datasets and ``data``: dataset name -> rows)."""
    spec = json.loads(spec) if isinstance(spec, str) else spec
    fields = {} if titles_only else _records(spec, data)
    out, stack = [], [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        out += _title_texts(node.get("title")) if not isinstance(node.get("title"), (int, float)) else []
        if isinstance(node.get("labelExpr"), str) and not titles_only:          # its string literals
            out += [a or b for a, b in _LITERAL.findall(node["labelExpr"])]
        enc = node.get("encoding")
        if isinstance(enc, dict) and not titles_only:
            for ch, e in enc.items():
                e = e.get("condition", e) if isinstance(e, dict) and "field" not in e else e
                if not isinstance(e, dict) or e.get("type") not in ("nominal", "ordinal"):
                    continue
                shown = e.get("axis", {}) is not None if ch in ("x", "y") else (
                    ch in _LEGEND_CHANNELS and e.get("legend", {}) is not None)
                if shown and e.get("field") in fields:
                    out += [str(v) for v in fields[e["field"]] if isinstance(v, str)]
        tip = node.get("tooltip") if isinstance(node.get("tooltip"), list) else []
        out += [str(x.get("title") or x.get("field", "")) if isinstance(x, dict) else str(x) for x in tip]
        stack.extend(v for k, v in node.items() if k not in ("datasets", "data", "title", "tooltip"))
    return [x for x in dict.fromkeys(out) if x]


def chart_texts(at) -> list[str]:
    """The texts of every Vega-Lite chart an AppTest run drew (:func:`spec_texts` of each, with its datasets)."""
    import pyarrow as pa

    out = []
    for el in at.get("vega_lite_chart"):
        data = {d.name: pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in el.proto.datasets}
        out += spec_texts(el.proto.spec, data)
    return out


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
                continue               # a choice's value is the option itself (an identifier); shown: its label in opts
            try:
                v = getattr(node, attr, None)
            except Exception:          # a widget whose value needs a session (AppTest raises)
                continue
            if isinstance(v, str) and v:
                out.append(v)
        if isinstance(opts, (list, tuple)):
            out += [o for o in opts if isinstance(o, str)]
    return out
