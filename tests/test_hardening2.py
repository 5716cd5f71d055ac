"""Issue 15, "hostile input, round two": one section per class of failure.

1. user text reaches the page only through ui.plain (and a source scan catches a new unescaped call)
2. a config that asks for too much is refused from headers and memory, before the model is built
3. parsers: deep JSON, UTF-16, CSV without a header, lone surrogates become messages naming file and line
4. every CSV export neutralises spreadsheet formulas
5. tokenizer larger than the embedding, malformed tokenizer.json, shard index pointing outside its folder
6. command-line values: one line, exit 2, before any work; --device cuda without CUDA runs on the CPU
7. a paste longer than the limit is cut with a notice (Streamlit's max_chars would drop it silently)
+ weak spots: NaN/Inf weights named, no verdict on NaN, missing tensors refused
"""
from __future__ import annotations

import ast
import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from helpers import ROOT, apptest, make_checkpoint

HOSTILE = ":red[X] **B** ![i](https://example.com/x.png) [a](https://example.com) <b>h</b> $x$"


def messages(at) -> list[str]:
    return [e.value for kind in ("error", "warning", "info", "success", "caption", "markdown")
            for e in getattr(at, kind)]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("tiny"), n_layer=2, n_head=2, n_embd=32, n_positions=64,
                           vocab_size=500)


def variant(tiny_dir, tmp_path, config=None, edit=None) -> Path:
    d = tmp_path / "ckpt"
    shutil.copytree(tiny_dir, d)
    if config:
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(config)
        (d / "config.json").write_text(json.dumps(cfg))
    if edit:
        edit(d)
    return d


def edit_weights(fn):
    def edit(d):
        from safetensors.torch import load_file, save_file

        sd = load_file(d / "model.safetensors")
        sd = fn(sd) or sd
        save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
    return edit


def refused(folder, *parts, within: float = 2.0) -> str:
    from attnkit.loading import LoadError, load

    t0 = time.perf_counter()
    with pytest.raises(LoadError) as e:
        load(str(folder), "cpu")
    took = time.perf_counter() - t0
    msg = str(e.value)
    assert took < within, (took, msg)
    assert "\n" not in msg
    for p in parts:
        assert p in msg, (p, msg)
    return msg


# ----------------------------------------------------------------------------- 1. Markdown

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
    "head_i", "tail", "rows", "df", "np", "devices", "n_rows", "n_all",
}
#: attributes that are internal whatever they are read from (the device chosen from a fixed list, a class name).
INTERNAL_ATTRS = {"device", "config", "hf_model", "__class__", "__name__"}
#: attributes that are user text even on an internal object.
USER_ATTRS = {"name", "text", "prompts", "model_name", "source", "folder", "column"}
#: methods that, called on an internal value, give internal values.
INTERNAL_METHODS = {"items", "keys", "values", "itertuples", "isfinite", "sum", "mean", "head", "sort_values"}
SAFE_FUNCS = {"plain", "len", "int", "float", "round", "sum", "min", "max", "abs", "range", "sqrt", "nunique"}


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


def dashboard_sources() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "attnkit" / "app").glob("*.py")), *sorted((ROOT / "pages").glob("*.py"))]


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


def assert_literal(markdown: str):
    """No link, image, emphasis or HTML once rendered (and no unescaped '[' for Streamlit's :red[…])."""
    md = pytest.importorskip("markdown_it")
    html = md.MarkdownIt("commonmark").enable("strikethrough").render(markdown)
    for tag in ("<a ", "<img", "<strong", "<em>", "<b>", "<del>", "<script"):
        assert tag not in html, (tag, markdown)
    assert ":red[" not in markdown, markdown


def test_hostile_file_name_and_folder_are_shown_literally(odd_dir):
    name = HOSTILE + ".txt"
    at = apptest("app.py", odd_dir, ak_source="Upload", ak_upload_data=(name, b"\x00\x01binary")).run()
    assert not at.exception
    from attnkit.app import plain

    shown = messages(at)
    assert any(plain(name) in m for m in shown), shown
    for m in shown:
        assert_literal(m)

    folder = "/no/such/" + HOSTILE
    at = apptest("app.py", folder).run()
    assert not at.exception
    shown = messages(at)
    assert any("model folder not found" in m and plain("**B**") in m for m in shown), shown
    for m in shown:
        assert_literal(m)


# ----------------------------------------------------------------------------- 2. configs that ask too much

def test_hundred_thousand_layers_refused_in_a_second(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_layer": 100_000})
    msg = refused(d, "100,000 layers")
    assert ("memory" in msg and "GB" in msg) or ("lacks" in msg and "transformer.h.2." in msg)


def test_huge_width_refused_with_both_numbers(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_embd": 10**7, "n_head": 2})
    msg = refused(d, "parameters", "float32", "memory available")
    assert msg.count("GB") >= 2 or msg.count("MB") >= 2


def test_memory_check_uses_the_machine_numbers(tiny_dir):
    from transformers import AutoConfig

    from attnkit import checkpoint as CK

    cfg = AutoConfig.from_pretrained(tiny_dir)
    need = CK.estimate_bytes(cfg)
    assert need == 4 * sum(p.numel() for p in _meta(cfg).parameters())
    with pytest.raises(CK.CheckpointError, match=r"parameters .* but this machine has only .* available"):
        CK.check_config(cfg, memory=need // 2)
    CK.check_config(cfg, memory=need * 2)
    avail = CK.available_memory()
    assert avail is None or avail > 0


def _meta(cfg):
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    return m


def test_layer_template_matches_the_full_meta_model(tiny_dir):
    """Above FULL_META_LAYERS the names come from a 2-layer template: the same as building it all."""
    from transformers import AutoConfig

    from attnkit import checkpoint as CK

    cfg = AutoConfig.from_pretrained(tiny_dir)
    cfg.num_hidden_layers = CK.FULL_META_LAYERS + 3
    it, count, nbytes, _ = CK.expected_tensors(cfg)
    full, prefix = CK._tensors(_meta(cfg))
    assert sorted(it()) == sorted(full) and count == len(full)
    assert nbytes == sum(4 * torch.Size(s).numel() for _, s in full) and prefix == "transformer"


def test_shape_mismatch_is_one_plain_sentence(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, {"n_embd": 64})
    msg = refused(d, "does not fit config.json", "transformer.wte.weight", "[500, 32]", "[500, 64]")
    assert "ignore_mismatched_sizes" not in msg


def test_missing_tensor_is_named_not_random(tiny_dir, tmp_path):
    def drop(sd):
        del sd["transformer.h.1.attn.c_proj.weight"]
    d = variant(tiny_dir, tmp_path, edit=edit_weights(drop))
    refused(d, "lacks 1 ", "transformer.h.1.attn.c_proj.weight")


def test_tied_and_unprefixed_checkpoints_load(tiny_dir, tmp_path):
    """openai-community/gpt2 stores 'h.0…' without 'transformer.' and no lm_head (tied): that is fine."""
    from attnkit.loading import load

    d = variant(tiny_dir, tmp_path, edit=edit_weights(
        lambda sd: {k.removeprefix("transformer."): v for k, v in sd.items() if k != "lm_head.weight"}))
    m = load(str(d), "cpu")
    assert m.hf_model.lm_head.weight.data_ptr() == m.hf_model.transformer.wte.weight.data_ptr()


def test_truncated_weights_and_unsupported_activation(tiny_dir, tmp_path):
    def cut(d):
        b = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(b[: len(b) // 2])
    refused(variant(tiny_dir, tmp_path, edit=cut), "truncated")
    shutil.rmtree(tmp_path / "ckpt")
    from attnkit.families import family_for

    msg = refused(variant(tiny_dir, tmp_path, {"activation_function": "mish"}), "'mish'", "supported:")
    assert all(a in msg for a in family_for("gpt2").activations)


# ----------------------------------------------------------------------------- 3. parsers

def test_deeply_nested_jsonl_line_is_named():
    from attnkit import prompts as P

    deep = "[" * 100_000 + "]" * 100_000
    data = "\n".join(['{"text": "first"}', deep, '"third"']).encode()
    t = P.read_upload("deep.jsonl", data)
    prompts, warnings = P.prompts_from(t, "text")
    assert prompts == ["first", "third"]
    assert any("deep.jsonl" in w and "skipped 1 malformed line(s)" in w and ": 2." in w for w in warnings)
    with pytest.raises(P.PromptError, match="only.jsonl has no valid JSON lines"):
        P.read_upload("only.jsonl", deep.encode())


def test_utf16_and_utf32_with_bom_are_decoded():
    from attnkit import prompts as P

    text = "Hello, 注意力 🙂"
    for enc in ("utf-16", "utf-16-be", "utf-32"):
        data = text.encode(enc)
        if enc == "utf-16-be":
            data = b"\xfe\xff" + data
        assert P.read_upload("u.txt", data).rows == [text], enc
    with pytest.raises(P.PromptError, match="u.txt starts with a UTF-16 byte-order mark"):
        P.read_upload("u.txt", b"\xff\xfe\x00\xd8")           # a lone surrogate in UTF-16


def test_csv_without_header_is_detected_and_the_user_can_say():
    from attnkit import prompts as P

    data = b"The animal didn't cross the street.\nAttention lets tokens look back.\nA third prompt here.\n"
    t = P.read_upload("p.csv", data)
    assert t.header is False and t.columns == ["column 1"]
    prompts, warnings = P.prompts_from(t, "column 1")
    assert prompts[0] == "The animal didn't cross the street." and len(prompts) == 3
    assert any("p.csv" in w and "looks like data" in w for w in warnings)
    t = P.read_upload("p.csv", data, header=True)             # the user says: it has a header
    assert t.columns == ["The animal didn't cross the street."] and len(t.rows) == 2
    t = P.read_upload("h.csv", b"text,id\nHello world this is long,1\nAnother one here,2\n")
    assert t.header is True and t.columns == ["text", "id"] and not t.warnings


def test_csv_errors_name_the_line(monkeypatch):
    import csv

    from attnkit import prompts as P

    class Broken:
        line_num = 7

        def __iter__(self):
            raise csv.Error("field larger than field limit")
    monkeypatch.setattr(P.csv, "reader", lambda *a, **k: Broken())
    with pytest.raises(P.PromptError, match=r"bad.csv, line 7: not a readable CSV file"):
        P.read_upload("bad.csv", b"text\nhello\n")


def test_any_parser_failure_names_the_file(monkeypatch):
    from attnkit import prompts as P

    def explode(*a, **k):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(P, "_read_jsonl", explode)
    with pytest.raises(P.PromptError, match=r"x.jsonl could not be read \(RecursionError"):
        P.read_upload("x.jsonl", b'"a"\n')


def test_lone_surrogate_is_a_message():
    from attnkit import prompts as P

    with pytest.raises(P.PromptError, match=r"unpaired surrogate \(U\+D83D\) at character 7"):
        P.check_text("hello \ud83d world")
    t = P.read_upload("s.jsonl", b'"fine"\n"\\ud83d alone"\n')
    prompts, warnings = P.prompts_from(t)
    assert prompts == ["fine"] and any(": 2." in w for w in warnings)


def test_lone_surrogate_in_the_prompt_box_is_shown(odd_dir):
    at = apptest("app.py", odd_dir, text="ok \ud83d then").run()
    assert not at.exception
    assert any("unpaired surrogate" in w.value and "U+D83D" in w.value for w in at.warning)
    assert at.text_area(key="ak_text").value == "ok \ufffd then"
    assert any("tokens (" in m.value for m in at.markdown)          # and the page runs on the repaired text


def test_cli_reports_a_deep_jsonl_without_traceback(tmp_path, capsys):
    from attnkit.cli.ablate import cli

    f = tmp_path / "deep.jsonl"
    f.write_text("[" * 50_000 + "]" * 50_000 + "\n")
    assert cli(["--model", "attnkit-tiny", "--text-file", str(f), "--intervention", "v=x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("attnkit ablate:") and "deep.jsonl" in err[-1]


# ----------------------------------------------------------------------------- 4. CSV injection

def test_csv_exports_neutralise_formulas():
    import csv
    import io

    import pandas as pd

    from attnkit import app as ui

    cells = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx", "plain", "'quoted", "a=b"]
    df = pd.DataFrame({"token": cells, "value": [-1.5] * len(cells)})
    raw = ui.csv_bytes(df, comments={"prompt": "=HYPERLINK(\"http://x\")\n=2+2,=3", "model": "m"}).decode()
    rows = list(csv.reader(io.StringIO(raw)))
    assert rows[0] == ['# prompt: =HYPERLINK("http://x")\\n=2+2,=3'] and rows[1] == ["# model: m"]
    body = rows[3:]
    assert [r[0] for r in body] == ["'=1+1", "'+SUM(A1)", "'-2+3", "'@cmd", "'\tx", "'\rx", "plain", "'quoted",
                                    "a=b"]
    assert all(r[1] == "-1.5" for r in body)                  # numbers stay numbers
    for line in raw.splitlines():
        assert not line.startswith(ui.FORMULA_START)


def test_every_csv_export_goes_through_the_helper():
    offenders = []
    for f in dashboard_sources():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "to_csv":
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert len(offenders) == 1 and offenders[0].startswith("attnkit/app/exports.py:"), offenders   # inside csv_bytes


# ----------------------------------------------------------------------------- 5. tokenizer and model

def test_tokenizer_larger_than_the_embedding(tmp_path):
    d = make_checkpoint(tmp_path / "small-vocab", n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=300)
    msg = refused(d, "400", "300", within=10)              # make_tokenizer trains 400 tokens
    assert "tokenizer" in msg and "embedding" in msg


def test_malformed_tokenizer_json_is_named(tiny_dir, tmp_path):
    d = variant(tiny_dir, tmp_path, edit=lambda d: (d / "tokenizer.json").write_text('{"model": {'))
    refused(d, str(d / "tokenizer.json"), "malformed")


def test_shard_index_outside_its_folder_is_refused(tiny_dir, tmp_path):
    def shard(d):
        shutil.copy(d / "model.safetensors", d / "model-00001-of-00002.safetensors")
        (d / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors",
                                        "transformer.wpe.weight": "../elsewhere.safetensors"}}))
    refused(variant(tiny_dir, tmp_path, edit=shard), "points outside its folder", "elsewhere.safetensors")


def test_sharded_checkpoint_inside_its_folder_loads(tiny_dir, tmp_path):
    from attnkit.loading import load

    d = tmp_path / "sharded"
    m = load(str(tiny_dir), "cpu")
    m.hf_model.save_pretrained(d, max_shard_size="20KB")
    shutil.copy(tiny_dir / "tokenizer.json", d)
    assert (d / "model.safetensors.index.json").is_file()
    assert load(str(d), "cpu").config.n_layers == 2


# ----------------------------------------------------------------------------- 6. command-line values

BAD_VALUES = [
    ("verify", ["--tokens", "-5"], "--tokens"),
    ("verify", ["--tokens", "0"], "--tokens"),
    ("heads", ["--induction-n", "0"], "--induction-n"),
    ("bench", ["--threads", "-1"], "--threads"),
    ("entropy", ["--text-file", "{txt}", "--window", "0"], "--window"),
    ("entropy", ["--text-file", "{txt}", "--batch", "0"], "--batch"),
    ("entropy", ["--text-file", "{txt}", "--max-docs", "0"], "--max-docs"),
    ("ablate", ["--text-file", "{txt}", "--intervention", "v=x", "--hull-iters", "-1"], "--hull-iters"),
    ("verify", ["--text", "abc\udcff"], "not valid UTF-8"),
    ("heads", ["--text-file", "{empty}"], "is empty"),
    ("heads", ["--text-file", "{blank}"], "only whitespace"),
    ("verify", ["--json", "/no/such/folder/r.json"], "does not exist"),
    ("verify", ["--json", "{dir}"], "is a folder"),
    ("entropy", ["--text-file", "{txt}", "--json", "/proc/attnkit.json"], "cannot write"),
    ("train-default", ["--out", "/proc/attnkit-out"], "cannot write"),
    ("train-default", ["--steps", "0"], "--steps"),
    ("verify", ["--device", "tpu"], "unknown device"),
]


@pytest.mark.parametrize("command,args,expect", BAD_VALUES, ids=[f"{c} {' '.join(a)}" for c, a, _ in BAD_VALUES])
def test_bad_cli_values_exit_2_with_one_line(command, args, expect, tmp_path, capsys, monkeypatch):
    from attnkit import loading
    from attnkit.cli import main

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    (tmp_path / "t.txt").write_text("some text " * 20)
    (tmp_path / "e.txt").write_text("")
    (tmp_path / "b.txt").write_text("  \n\t\n")
    paths = {"txt": tmp_path / "t.txt", "empty": tmp_path / "e.txt", "blank": tmp_path / "b.txt", "dir": tmp_path}
    args = [a.format(**paths) for a in args]
    assert main([command, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0] and "Traceback" not in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_cuda_without_cuda_runs_on_cpu(capsys):
    from attnkit.cli.verify import cli

    assert cli(["--model", "attnkit-tiny", "--device", "cuda", "--text", "Hello there, attention."]) == 0
    out = capsys.readouterr()
    assert "not available" in out.err and "running on the CPU" in out.err and "on cpu" in out.out


# ----------------------------------------------------------------------------- 7. pasting past the limit

def test_paste_longer_than_the_limit_is_cut_with_a_notice(odd_dir):
    from attnkit import prompts as P

    at = apptest("app.py", odd_dir, text="attention " * 25_000).run()     # 250,000 characters
    assert not at.exception
    box = at.text_area(key="ak_text")
    assert not box.max_chars                                # the browser would drop it silently
    assert any(f"Up to {P.MAX_PROMPT_CHARS:,} characters" in c.value for c in at.sidebar.caption)
    assert any("250,000 characters" in w.value and f"{P.MAX_PROMPT_CHARS:,}" in w.value for w in at.warning)


# ----------------------------------------------------------------------------- weak spots: NaN/Inf

def test_nan_weights_are_refused_naming_the_tensor(tiny_dir, tmp_path):
    def poison(sd):
        sd["transformer.h.1.mlp.c_fc.weight"][0, 0] = float("nan")
    refused(variant(tiny_dir, tmp_path, edit=edit_weights(poison)), "NaN", "transformer.h.1.mlp.c_fc.weight")


def test_verify_names_where_nan_first_appears(odd):
    from attnkit import verify as V

    rep = V.compare(odd.hf_model, odd.weights, torch.tensor(odd.encode("Hello there")))
    rep.layers[1].hidden.ours = float("nan")
    assert rep.first_nonfinite == "layer 1" and not rep.ok
    assert "NaN/Inf first appears at layer 1" in rep.table()


def test_entropy_gives_no_verdict_on_nan(odd):
    import numpy as np

    from attnkit import entropy as E

    ids = odd.encode("Attention lets every token look back at the tokens before it.")
    s = E.profile_documents(odd.weights, [ids])
    s.mean["entropy"] = s.mean["entropy"].copy()
    s.mean["entropy"][2, 0, 3] = np.nan
    verdict, why = E.claim_check(s)
    assert verdict == "undetermined" and "layer 2" in why
