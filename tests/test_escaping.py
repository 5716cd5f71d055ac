"""User text reaches a page only through ui.plain: never rendered as Markdown or HTML (a source scan
catches a new unescaped Streamlit call; hostile file and folder names are shown literally).
"""
from __future__ import annotations

import ast

import pytest

from helpers import apptest, dashboard_sources, ROOT


HOSTILE = ":red[X] **B** ![i](https://example.com/x.png) [a](https://example.com) <b>h</b> $x$"


def messages(at) -> list[str]:
    return [e.value for kind in ("error", "warning", "info", "success", "caption", "markdown")
            for e in getattr(at, kind)]


#: st.* calls whose text Streamlit renders as Markdown (messages, spinners, captions, titles, widget labels).
MARKDOWN_CALLS = {"error", "warning", "info", "success", "toast", "exception", "caption", "markdown", "write",
                  "title", "header", "subheader", "spinner", "status", "expander", "popover", "button",
                  "download_button", "link_button", "page_link", "selectbox", "multiselect", "radio", "slider",
                  "select_slider", "checkbox", "toggle", "text_input", "text_area", "number_input",
                  "file_uploader", "progress", "metric", "tabs"}


#: keyword arguments rendered as Markdown (tooltips included).
MARKDOWN_KWARGS = {"body", "label", "help", "text", "placeholder"}


#: Identifiers that only ever hold internal values: numbers, choices from constant lists, messages the code
#: builds itself. A user-derived string (prompt, file/column name, folder, model name, an exception's text)
#: must go through ui.plain instead: never add such a name here.
INTERNAL = {
    "T", "N", "L", "H", "e", "i", "k", "l", "h", "s", "v", "layer", "head", "query", "size", "q0", "k0", "n_vis",
    "n_new", "n_map", "n_texts", "n_prompt", "skipped", "share", "dev", "device", "stat", "kind", "metric",
    "label", "note", "notes", "what", "what_grid", "band_note", "icon", "title", "verdict", "why", "summary",
    "base", "change", "which", "ranked", "names", "order", "res", "lo", "r", "row", "ex", "hs", "cfg", "kv",
    "mode", "view", "per_layer", "max_docs", "top", "scale", "domain", "S", "V", "A", "C", "hm", "LABELS",
    "STATS", "MARK_LIMIT", "COMPACT_DIMS", "spec", "stem", "fmt", "counts", "total", "d_model",
    "head_i", "tail", "rows", "df", "np", "devices", "n_rows", "n_all", "how", "kb", "limit", "n_layers",
}


#: attributes that are internal whatever they are read from (the device chosen from a fixed list, a class name).
INTERNAL_ATTRS = {"device", "config", "hf_model", "__class__", "__name__"}


#: attributes that are user text even on an internal object.
USER_ATTRS = {"name", "text", "prompts", "model_name", "source", "folder", "column"}


#: methods that, called on an internal value, give internal values.
INTERNAL_METHODS = {"items", "keys", "values", "itertuples", "isfinite", "sum", "mean", "head", "sort_values"}


#: the message catalog's functions (attnkit.i18n): a literal id is attnkit's own text; its fields are checked.
TRANSLATE_FUNCS = {"t", "nt", "msg", "nmsg"}


SAFE_FUNCS = {"plain", "shown", "status_label", "punctuation", "len", "int", "float", "round", "sum", "min", "max", "abs", "range", "sqrt", "nunique"}


def _internal(node) -> bool:
    """Whether an expression can only produce internal (non-user) text."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in INTERNAL or node.id.isupper()
    if isinstance(node, ast.Attribute):
        if node.attr in INTERNAL_ATTRS or node.attr.isupper():
            return True
        return _internal(node.value) and node.attr not in USER_ATTRS
    if isinstance(node, ast.Subscript):
        return _internal(node.value)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name in SAFE_FUNCS:
            return True
        if name in TRANSLATE_FUNCS:      # t("literal id {x}", x=…): the catalog's text, internal when its fields are
            return all(_internal(x) for x in node.args) and all(_internal(k.value) for k in node.keywords)
        if name == "str" and len(node.args) == 1:
            return _internal(node.args[0])
        if name in INTERNAL_METHODS and isinstance(f, ast.Attribute) and _internal(f.value):
            return True
        if name == "join" and isinstance(f, ast.Attribute):       # "sep".join(internal items)
            return _internal(f.value) and all(_internal(a) for a in node.args)
        return False
    if isinstance(node, ast.JoinedStr):
        return all(_internal(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        spec = node.format_spec
        if isinstance(spec, ast.JoinedStr) and spec.values and all(isinstance(v, ast.Constant) for v in spec.values):
            if "".join(v.value for v in spec.values)[-1:] in tuple("deEfFgGn%xXob,"):
                return True                                      # a number, formatted
        return _internal(node.value)
    if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare)):
        parts = [node.left, node.right] if isinstance(node, ast.BinOp) else \
            node.values if isinstance(node, ast.BoolOp) else [node.left, *node.comparators]
        return all(_internal(p) for p in parts)
    if isinstance(node, ast.UnaryOp):
        return _internal(node.operand)
    if isinstance(node, ast.IfExp):
        return _internal(node.body) and _internal(node.orelse)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_internal(x) for x in node.elts)
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return _internal(node.elt) and all(_internal(g.iter) and all(_internal(c) for c in g.ifs)
                                           for g in node.generators)
    return False


def unescaped_markdown_calls(src: str, where: str = "") -> list[str]:
    """'file:line: call(arg)' for every st.* Markdown call whose text is not internal and not wrapped in plain.
    A line with '# internal text' (and the reason) is skipped: its author vouches the text is attnkit's."""
    out = []
    lines = src.splitlines()
    for node in ast.walk(ast.parse(src)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in MARKDOWN_CALLS):
            continue
        if "# internal text" in lines[node.lineno - 1]:
            continue
        args = list(node.args[:1]) + [k.value for k in node.keywords if k.arg in MARKDOWN_KWARGS]
        for a in args:
            if not _internal(a):
                out.append(f"{where}:{node.lineno}: {node.func.attr}({ast.unparse(a)[:80]})")
    return out


def assert_literal(markdown: str):
    """No link, image, emphasis or HTML once rendered (and no unescaped '[' for Streamlit's :red[…])."""
    md = pytest.importorskip("markdown_it")
    html = md.MarkdownIt("commonmark").enable("strikethrough").render(markdown)
    for tag in ("<a ", "<img", "<strong", "<em>", "<b>", "<del>", "<script"):
        assert tag not in html, (tag, markdown)
    assert ":red[" not in markdown, markdown


def test_no_st_call_shows_unescaped_user_text():
    found = []
    for f in dashboard_sources():
        found += unescaped_markdown_calls(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))
    assert not found, "wrap user-derived text in ui.plain():\n" + "\n".join(found)


def test_the_scan_catches_new_unescaped_calls():
    bad = '''
st.error(f"cannot read {up.name}")
st.spinner(f"Loading {name} …")
st.warning(w)
st.caption("Model " + ctx.model_name)
st.info(str(err))
col.download_button("x", data, help=f"from {folder}")
st.progress(0.5, text=f"{ctx.text[:20]}")
'''
    good = '''
st.error(f"cannot read {ui.plain(up.name)}")
st.spinner(f"Loading {plain(name)} …")
st.caption(f"{T:,} tokens, layer {layer}")
st.warning(plain(w))
st.caption(n)  # internal text: notes written by attnkit
'''
    assert len(unescaped_markdown_calls(bad)) == 7
    assert unescaped_markdown_calls(good) == []


def test_plain_renders_literally():
    md = pytest.importorskip("markdown_it")
    from attnkit.app import plain

    for text in (HOSTILE, "# heading", "1. item", "- item", "> quote", "a\nb\n\n---", "www.example.com",
                 "mail a@b.example", "`code` ~~s~~ _i_ &amp; \\*", "C:\\Users\\x", "<script>alert(1)</script>"):
        html = md.MarkdownIt("commonmark").enable("strikethrough").render(plain(text))
        assert html.startswith("<p>") and html.count("<") == 2, (text, html)     # <p> and </p>, nothing else
        assert "<a" not in html and "<img" not in html and "<strong" not in html and "<h1" not in html
    assert "\\[X\\]" in plain(HOSTILE)           # Streamlit's :red[…] needs the bracket
    assert plain("a\nb") == "a b"


def test_hostile_file_name_and_folder_are_shown_literally(odd_dir):
    name = HOSTILE + ".txt"
    at = apptest("home", odd_dir, ak_source="Upload", ak_upload_data=(name, b"\x00\x01binary")).run()
    assert not at.exception
    from attnkit.app import plain

    shown = messages(at)
    assert any(plain(name) in m for m in shown), shown
    for m in shown:
        assert_literal(m)

    folder = "/no/such/" + HOSTILE
    at = apptest("home", folder).run()
    assert not at.exception
    shown = messages(at)
    assert any("model folder not found" in m and plain("**B**") in m for m in shown), shown
    for m in shown:
        assert_literal(m)
