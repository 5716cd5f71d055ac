"""Shared Streamlit widgets: the sidebar (model, device, prompt), cached loads and runs, exports.

The only module of the package that imports Streamlit. Pages stay thin::

    ctx = ui.sidebar()                 # None (with a message shown) when nothing can run yet
    if ctx is None: st.stop()
    tr = ui.trace(ctx, capture=("pattern",))

Caching: models with ``st.cache_resource`` (one copy per (model, device), at most 3,
shared by every browser session, read-only). Runs (Traces) in one process-wide LRU
cache keyed by (model, device, token ids, captures, layers) with a memory budget of
``ATTNKIT_TRACE_CACHE_MB`` (default 2048 MB): when the captured tensors of all kept
runs exceed it, the least recently used runs are evicted (the newest is always kept).
Traces are shared read-only between sessions: no page may modify a Trace in place.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st
import torch

from . import prompts as P
from .loading import MODEL_CHOICES, SHIPPED_MODEL, Loaded, LoadError, default_model, load, resolve_device
from .model import Trace, run

__all__ = ["Context", "sidebar", "trace", "traces_for_all", "cached_model", "show_error", "setup_page",
           "download_buttons", "token_labels", "show_tokens", "TRACE_CACHE_MB", "TraceCache"]

TRACE_CACHE_MB = float(os.environ.get("ATTNKIT_TRACE_CACHE_MB", "2048"))
LOCAL = "Local folder…"
DEFAULT_PROMPT = "The animal didn't cross the street because it was too tired."
# Session keys kept across pages (Streamlit forgets widget state when a page does not draw it).
_KEEP = ("ak_model", "ak_folder", "ak_device", "ak_source", "ak_text", "ak_column", "ak_pick", "ak_csv_header")


@dataclass
class Context:
    """What the sidebar resolved: the model and the prompt(s) to run on."""

    model: Loaded
    model_name: str
    device: str
    prompts: list[str]
    index: int | None              # the chosen prompt, None for "all prompts"
    notices: list[str] = field(default_factory=list)
    prepend_bos: bool = False      # put the tokenizer's <|endoftext|> (BOS) before every prompt

    @property
    def all_selected(self) -> bool:
        return self.index is None

    @property
    def text(self) -> str:
        return self.prompts[self.index or 0]

    def encode(self, text: str) -> tuple[list[int], int]:
        """(token ids cut to the model's context, number of tokens dropped); with ``prepend_bos`` the
        tokenizer's BOS token comes first (as TransformerLens does by default)."""
        ids = _encode(self.model, text)
        if self.prepend_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return P.truncate(ids, self.model.config.n_ctx)

    @property
    def bos_id(self) -> int | None:
        tok = self.model.tokenizer
        return tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id

    @property
    def ids(self) -> list[int]:
        return self.encode(self.text)[0]

    @property
    def dropped(self) -> int:
        return self.encode(self.text)[1]

    @property
    def tokens(self) -> list[str]:
        return self.model.token_strs(self.ids)

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_name, self.device)


def _encode(model: Loaded, text: str) -> list[int]:
    return model.encode(text[: P.MAX_PROMPT_CHARS])


@contextlib.contextmanager
def guard(view: str):
    """Run a page body; an unexpected error becomes a short message, and the session (prompt, uploads,
    selections) stays as it was. The traceback goes to the server log, not the page."""
    try:
        yield
    except Exception as e:                  # st.stop()/st.rerun() raise BaseExceptions and pass through
        logging.getLogger("attnkit").exception("%s failed", view)
        st.error(f"{plain(view)} could not be computed: {e.__class__.__name__}: {plain(str(e)[:300])}. "
                 "Your prompt, uploads and selections are kept; change the input and try again.", icon="⚠️")


def setup_page(title: str, icon: str = "🔍"):
    """Page config and title (inside the navigation frame the frame has set the config already)."""
    if not getattr(_frame, "active", False):
        st.set_page_config(page_title=f"{title} · attnkit", page_icon=icon, layout="wide")
    st.title(title)


#: Set by the navigation frame (app.py) for the duration of one script run.
_frame = threading.local()

#: URL query parameter -> session key: a view is shared by its link (the page is the URL's path).
URL_KEYS = {"model": "ak_model", "folder": "ak_folder", "prompt": "ak_text", "bos": "ak_bos",
            "layer": "hm_layer", "head": "hm_head", "view": "hm_view", "values": "hm_values", "scale": "hm_scale",
            "stat": "cmp_stat"}
_URL_INTS = {"hm_layer", "hm_head"}
_URL_BOOLS = {"ak_bos"}
#: Longer prompts are not put in the URL (the page says so).
URL_PROMPT_MAX = 400


def url_restore() -> None:
    """Once per browser session: selections named in the URL's query parameters become the session's
    (a value a widget does not offer falls back to its default)."""
    if st.session_state.get("_ak_url_restored"):
        return
    st.session_state["_ak_url_restored"] = True
    for q, key in URL_KEYS.items():
        if q not in st.query_params or key in st.session_state:
            continue
        raw = st.query_params[q]
        try:
            value = int(raw) if key in _URL_INTS else (raw in ("1", "true", "yes")) if key in _URL_BOOLS else raw
        except ValueError:
            continue
        if key == "ak_model" and value not in MODEL_CHOICES:          # a folder given by the link
            st.session_state["ak_folder"] = str(value)
            value = LOCAL
        st.session_state[key] = value


def url_save() -> str | None:
    """Write the current selections into the URL; returns a notice when the prompt is too long for it."""
    notice = None
    for q, key in URL_KEYS.items():
        value = st.session_state.get(key)
        if key == "ak_folder" and st.session_state.get("ak_model") != LOCAL:
            value = None
        if key == "ak_text" and (st.session_state.get("ak_source", "Type") != "Type" or value == DEFAULT_PROMPT):
            value = None
        if key == "ak_text" and value is not None and len(value) > URL_PROMPT_MAX:
            notice = (f"The prompt ({len(value):,} characters) is longer than {URL_PROMPT_MAX} and is not kept in the "
                      "page's link; a shared link opens with the default prompt.")
            value = None
        if value is None or value == "":
            st.query_params.pop(q, None)
        else:
            st.query_params[q] = ("1" if value else "0") if key in _URL_BOOLS else str(value)
    return notice


def run_frame(pages: list) -> None:
    """app.py: page config, the navigation, the sidebar drawn once, then the chosen page under :func:`guard`.

    Pages call :func:`page`, which returns the Context the frame resolved."""
    st.set_page_config(page_title="attnkit", page_icon="🔍", layout="wide")
    nav = st.navigation(pages)
    url_restore()
    _frame.active, _frame.ctx = True, sidebar()
    try:
        with guard(nav.title):
            nav.run()
    finally:
        _frame.active, _frame.ctx = False, None
        notice = url_save()
        if notice:
            st.sidebar.caption(plain(notice))


def page(title: str, icon: str = "🔍") -> Context:
    """Start a page: its title, and the Context (model + prompt) from the sidebar; stops the page
    (after the sidebar has said why) when there is nothing to run on.

    Inside the frame the sidebar has been drawn once already; run on its own (``streamlit run
    pages/X.py`` or AppTest) the page draws it itself."""
    setup_page(title, icon)
    if not getattr(_frame, "active", False):
        url_restore()
    ctx = _frame.ctx if getattr(_frame, "active", False) else sidebar()
    if ctx is None:
        st.stop()
    return ctx


def show_error(err: Exception | str):
    """A one-line message, never a traceback. The text is escaped (it often names the user's files)."""
    st.error(plain(err), icon="⚠️")


# ----------------------------------------------------------------------------- caches

@st.cache_resource(show_spinner=False, ttl=600)
def _default_model() -> tuple[str, str | None]:
    return default_model(timeout=3.0)


@st.cache_resource(show_spinner=False, max_entries=3)
def cached_model(name: str, device: str) -> Loaded:
    return load(name, device)


class TraceCache:
    """A thread-safe LRU of Traces bounded by the bytes of their tensors."""

    def __init__(self, budget_mb: float):
        self.budget = budget_mb * 2**20
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    @staticmethod
    def nbytes(tr: Trace) -> int:
        return tr.logits.nbytes + sum(t.nbytes for t in tr.captures.values())

    def get(self, key, make):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
        value = make()                       # outside the lock: other sessions keep going
        size = self.nbytes(value)
        with self.lock:
            if key not in self.items:
                self.items[key] = (value, size)
                self.bytes += size
            while self.bytes > self.budget and len(self.items) > 1:
                _, (_, freed) = self.items.popitem(last=False)
                self.bytes -= freed
        return value


_TRACES = TraceCache(TRACE_CACHE_MB)


def trace(ctx: Context, capture=("pattern",), ids: list[int] | None = None, layers=None) -> Trace:
    """The (cached) attnkit run of the current prompt, or of ``ids``. Treat it as read-only."""
    ids = tuple(int(i) for i in (ctx.ids if ids is None else ids))
    capture = tuple(sorted(set(capture)))
    layers = None if layers is None else tuple(layers)
    model = ctx.model
    return _TRACES.get((ctx.model_name, ctx.device, ids, capture, layers),
                       lambda: run(model.weights, list(ids), capture=capture, layers=layers))


def traces_for_all(ctx: Context, fn, label: str = "Running the prompts"):
    """Apply ``fn(ids) -> value`` to every prompt of the set, with a progress bar; returns the values.

    One-token prompts are skipped (nothing to attend over) and counted in the message.
    """
    out, skipped = [], 0
    bar = st.progress(0.0, text=label)
    for i, text in enumerate(ctx.prompts):
        ids, _ = ctx.encode(text)
        if len(ids) < 2:
            skipped += 1
        else:
            out.append(fn(ids))
        bar.progress((i + 1) / len(ctx.prompts), text=f"{label}: {i + 1}/{len(ctx.prompts)}")
    bar.empty()
    if skipped:
        st.caption(f"{skipped:,} prompt(s) with fewer than 2 tokens were skipped.")
    return out


# ----------------------------------------------------------------------------- sidebar

def _keep_state():
    for k in _KEEP:
        if k in st.session_state:
            st.session_state[k] = st.session_state[k]


def _pick_model() -> tuple[str | None, str]:
    options = list(MODEL_CHOICES) + [LOCAL]
    forced = os.environ.get("ATTNKIT_MODEL", "").strip()     # e.g. ATTNKIT_MODEL=./my-ckpt streamlit run app.py
    if forced:
        default, notice = (forced if forced in options else LOCAL), None
        if forced not in options:
            st.session_state.setdefault("ak_folder", forced)
    else:
        default, notice = _default_model()
    if "ak_model" not in st.session_state:
        st.session_state["ak_model"] = default
    choice = st.selectbox(
        "Model", options, key="ak_model",
        format_func=lambda o: f"{o} (shipped, offline)" if o == SHIPPED_MODEL else o,
        help="GPT-2 family checkpoints from the HuggingFace hub (or its local cache), the small model shipped "
             "with attnkit, or a local folder holding config.json + model.safetensors.",
    )
    if notice and choice == default == SHIPPED_MODEL:
        st.info(plain(notice), icon="ℹ️")
    if choice == LOCAL:
        folder = st.text_input("Folder", key="ak_folder", placeholder="/path/to/checkpoint")
        choice = folder.strip() or None
    device = st.selectbox("Device", ["auto", "cpu", "cuda"], key="ak_device")
    return choice, device


def _read_prompts() -> tuple[list[str] | None, int | None, list[str]]:
    """(prompts, chosen index or None for all, warnings); prompts None when there is nothing valid."""
    source = st.radio("Prompt", ["Type", "Upload"], key="ak_source", horizontal=True)
    if source == "Type":
        if "ak_text" not in st.session_state:
            st.session_state["ak_text"] = DEFAULT_PROMPT
        fixed, note = P.replace_surrogates(st.session_state["ak_text"])   # before the widget: it cannot hold them
        if note:
            st.session_state["ak_text"] = fixed
        # A form: the prompt runs on the Run button (or Ctrl+Enter), not on every keystroke or blur.
        # No max_chars: Streamlit's browser side silently ignores a paste that would exceed it (the old
        # prompt keeps running). Everything arrives; past the limit it is cut here, and the page says so.
        with st.form("ak_prompt_form", border=False):
            text = st.text_area("Text", key="ak_text", height=160, label_visibility="collapsed")
            st.form_submit_button("Run", type="primary", help="Run the model on this prompt (Ctrl+Enter also runs it)")
        st.caption(f"Up to {P.MAX_PROMPT_CHARS:,} characters are used; longer text is cut, with a notice.")
        try:
            text, warnings = P.cut_text(P.check_text(text), "The typed text")
            return [text], 0, ([note] if note else []) + warnings
        except P.PromptError as e:
            show_error(e)
            return None, None, []
    up = st.file_uploader("Upload .txt/.md (one prompt) or .csv/.jsonl (many)", type=list(P.EXTENSIONS),
                          key="ak_upload")
    if up is not None:                       # keep it: Streamlit drops uploads when the page changes
        st.session_state["ak_upload_data"] = (up.name, up.getvalue())
    stored = st.session_state.get("ak_upload_data")
    if stored is None:
        st.caption("No file yet.")
        return None, None, []
    name, data = stored
    if up is None:
        st.caption(f"Using the earlier upload “{plain(name)}” ({len(data):,} bytes).")
    try:
        same_file = st.session_state.get("ak_csv_for") == (name, len(data))
        table = P.read_upload(name, data, header=st.session_state.get("ak_csv_header") if same_file else None)
        if table.kind == "csv":                  # a CSV without a header row: guessed, and the user can say
            st.session_state["ak_csv_for"] = (name, len(data))
            st.session_state["ak_csv_header"] = table.header
            st.checkbox("First row names the columns", key="ak_csv_header",
                        help="Untick when the first row is already a prompt (the file has no header row).")
        column = None
        if table.columns:
            guess = next((c for c in table.columns if c.lower() in {"text", "prompt", "content"}), table.columns[0])
            if st.session_state.get("ak_column") not in table.columns:
                st.session_state["ak_column"] = guess
            column = st.selectbox("Column / field", table.columns, key="ak_column")
        prompts, warnings = P.prompts_from(table, column)
    except P.PromptError as e:
        show_error(e)
        return None, None, []
    options = ["all"] + list(range(len(prompts))) if len(prompts) > 1 else [0]
    if st.session_state.get("ak_pick") not in options:
        st.session_state["ak_pick"] = options[0] if len(options) == 1 else 0
    pick = st.selectbox(
        "Which prompt", options, key="ak_pick",
        format_func=lambda o: f"all {len(prompts)} prompts (aggregate views)" if o == "all"
        else f"{o + 1}: {_preview(prompts[o])}",
    )
    return prompts, None if pick == "all" else int(pick), warnings


def _preview(text: str, n: int = 50) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


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
    tests/test_hardening2.py scans app.py, pages/ and this module for st.* calls that skip it."""
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


def sidebar() -> Context | None:
    """Draw the sidebar; return the resolved Context, or None after showing why nothing can run."""
    _keep_state()
    with st.sidebar:
        name, device = _pick_model()
        prompts, index, warnings = _read_prompts()
        for w in warnings:
            st.warning(plain(w), icon="⚠️")
        bos = st.toggle("Prepend <|endoftext|>", key="ak_bos",
                        help="Put the tokenizer's beginning-of-text token before every prompt, as TransformerLens does "
                             "by default. Real GPT-2's first-token (attention-sink) heads behave differently with it; "
                             "exports record the choice.")
    if not name:
        st.info("Enter the path of a local checkpoint folder in the sidebar.")
        return None
    notices = []
    try:
        dev = str(resolve_device(device))
    except LoadError as e:
        notices.append(f"{e}; running on the CPU instead.")
        dev = "cpu"
    try:
        with st.spinner(f"Loading {plain(name)} …"):
            model = cached_model(name, dev)
    except LoadError as e:
        show_error(e)
        return None
    except Exception as e:                   # never a traceback in the page
        show_error(f"Could not load {name}: {e.__class__.__name__}: {str(e)[:200]}")
        return None
    if model.notice:
        notices.append(model.notice)
    for n in notices:
        st.warning(plain(n), icon="⚠️")
    if prompts is None:
        st.info("Give a prompt in the sidebar to start.")
        return None
    ctx = Context(model=model, model_name=name, device=dev, prompts=prompts, index=index, notices=notices,
                  prepend_bos=bool(bos))
    if not ctx.all_selected:
        ids, dropped = ctx.encode(ctx.text)
        if dropped:
            st.warning(f"The prompt has {len(ids) + dropped:,} tokens; the model's context is "
                       f"{model.config.n_ctx:,}, so the last {dropped:,} tokens were dropped.", icon="✂️")
    return ctx


# ----------------------------------------------------------------------------- tokens and exports

def visible(tok: str) -> str:
    """A token with its spaces and line breaks made visible (GPT-2 tokens often start with a space)."""
    return tok.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def token_labels(tokens: list[str]) -> list[str]:
    """Unique axis labels 'position:token' (tokens repeat; positions don't)."""
    return [f"{i}:{visible(t)}" for i, t in enumerate(tokens)]


def tokens_inline(tokens: list[str]) -> str:
    """The tokens as one wrapped line of text, separated by a thin bar (spaces and breaks made visible)."""
    return " │ ".join(visible(t) for t in tokens)


def show_tokens(ctx: Context, ids: list[int] | None = None):
    """The tokens as wrapped plain text (never Markdown), with the table of positions and ids a click away."""
    ids = ctx.ids if ids is None else ids
    toks = ctx.model.token_strs(ids)
    with st.container(border=True, height=min(320, 40 + 26 * (1 + len(tokens_inline(toks)) // 120))):
        st.text(tokens_inline(toks))
    with st.expander("As a table (position, id, token)"):
        st.dataframe(pd.DataFrame({"position": range(len(ids)), "id": ids, "token": [visible(t) for t in toks]}),
                     hide_index=True, width="stretch", height=min(400, 38 + 35 * len(ids)))


def _meta_frame(df: pd.DataFrame, meta: dict) -> pd.DataFrame:
    df = df.copy()
    for k, v in meta.items():
        df[k] = v
    return df


#: Cells a spreadsheet would run as a formula (OWASP "CSV injection"): they get a leading single quote.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """A string cell starting with =, +, -, @, tab or CR, prefixed with ' so spreadsheets show it as text.
    Numbers stay numbers (a negative number is not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_bytes(df: pd.DataFrame, comments: dict | None = None) -> bytes:
    """THE CSV export: every text cell and column name neutralised (see :func:`neutralise`), and optional
    ``# key: value`` comment lines first (each one quoted cell, line breaks shown as \\n)."""
    df = df.copy()
    df.columns = [neutralise(str(c)) for c in df.columns]
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype) in ("string", "str"):
            df[c] = df[c].map(neutralise)
    buf = io.StringIO()
    if comments:
        w = csv.writer(buf, lineterminator="\r\n")
        for k, v in comments.items():
            w.writerow([f"# {k}: " + str(v).replace("\r", "\\r").replace("\n", "\\n")])
    df.to_csv(buf, index=False, lineterminator="\r\n")     # RFC 4180: a CR inside a cell is quoted too
    return buf.getvalue().encode("utf-8")


@st.cache_data(show_spinner=False, max_entries=32)
def _render(spec_json: str, fmt: str) -> bytes:
    import vl_convert as vlc

    if fmt == "svg":
        return vlc.vegalite_to_svg(spec_json).encode("utf-8")
    return vlc.vegalite_to_png(spec_json, scale=2)


def download_buttons(df: pd.DataFrame, chart=None, stem: str = "attnkit", meta: dict | None = None, key: str = ""):
    """CSV of the numbers (with model/prompt metadata columns), PNG and SVG of the chart.

    Every file is built only when its button is clicked.
    """
    meta = meta or {}
    with st.container(width=330):
        cols = st.columns(3)
        cols[0].download_button("CSV", lambda: csv_bytes(_meta_frame(df, meta)),
                                file_name=f"{stem}.csv", mime="text/csv", key=f"csv-{key}{stem}", on_click="ignore")
        if chart is None:
            return
        try:
            spec = chart.to_json()
            cols[1].download_button("PNG", lambda: _render(spec, "png"), file_name=f"{stem}.png",
                                    mime="image/png", key=f"png-{key}{stem}", on_click="ignore")
            cols[2].download_button("SVG", lambda: _render(spec, "svg"), file_name=f"{stem}.svg",
                                    mime="image/svg+xml", key=f"svg-{key}{stem}", on_click="ignore")
        except Exception as e:               # exports must never break the page
            cols[1].caption(f"picture export unavailable ({e.__class__.__name__})")


def meta_for(ctx: Context, **extra) -> dict:
    return {"model": ctx.model_name, "prompt": "all prompts" if ctx.all_selected else ctx.text[:500],
            "prepend_bos": ctx.prepend_bos, **extra}


def json_bytes(obj) -> bytes:
    return json.dumps(obj, indent=2, default=float).encode("utf-8")


def tensor_csv(t: torch.Tensor) -> bytes:
    return csv_bytes(pd.DataFrame(t.detach().cpu().float().numpy()))


# ----------------------------------------------------------------------------- corpus results

@st.cache_data(show_spinner="Reading the corpus result …", max_entries=4)
def _corpus_result(path: str, stamp: tuple):
    from .corpus import load_result

    return load_result(path)


def corpus_result(key: str):
    """A text box for a corpus result folder (``python -m attnkit corpus --out DIR``); returns the
    :class:`attnkit.corpus.CorpusResult`, or None (empty box, or a one-line message why not)."""
    from .corpus import CorpusError

    folder = st.text_input("Corpus result folder (from python -m attnkit corpus --out DIR)", key=key,
                           placeholder="/path/to/corpus-result").strip()
    if not folder:
        return None
    p = os.path.expanduser(folder)
    if not os.path.isdir(p):
        show_error(f"not a folder: {folder}")
        return None
    stamp = tuple(os.path.getmtime(os.path.join(p, f)) for f in ("summary.json", "_done") if os.path.exists(os.path.join(p, f)))
    try:
        return _corpus_result(p, stamp)
    except (CorpusError, OSError, ValueError, KeyError) as e:
        show_error(f"could not read the corpus result {folder}: {e}")
        return None
