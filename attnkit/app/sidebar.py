"""The sidebar: model, device, prompt (typed or uploaded), BOS; resolves the page :class:`Context`."""
from __future__ import annotations

import os

import streamlit as st

from .. import cjk
from .. import prompts as prompt_lib
from ..i18n import msg, t
from ..loading import MODEL_CHOICES, SHIPPED_MODEL, LoadError, resolve_device
from . import language
from .caches import budgeted, cached_default_model, cached_model
from .context import DEFAULT_PROMPT, DEFAULT_PROMPTS, KEPT_KEYS, LOCAL, Context, default_prompt
from .escaping import plain, show_error
from .planted import sidebar_note
from .state import keep
from .url import PENDING, confirm_folder

#: The prompt's sources (session values) -> what the radio shows.
_SOURCES = {"Type": msg("Type"), "Upload": msg("Upload")}


def ask_to_load(path: str, key: str, on_load, on_ignore, dg=st) -> None:
    """The one confirmation of a local folder named by a link: the path shown, "Load this folder" (``on_load``)
    and "Ignore it" (``on_ignore``), widget keys ``<key>_confirm_folder`` / ``<key>_ignore_folder``; drawn on ``dg``."""
    dg.warning(t("This link asks to load the local folder “{path}”. Nothing is loaded until you confirm.",
                 path=plain(path)), icon="📁")
    a, b = dg.columns(2)
    a.button(t("Load this folder"), key=f"{key}_confirm_folder", on_click=on_load, args=(path,), type="primary")
    b.button(t("Ignore it"), key=f"{key}_ignore_folder", on_click=on_ignore)


def _confirm_folder() -> bool:
    """A local folder named by the link: shown, loaded only on the user's click. True while it waits."""
    path = st.session_state.get(PENDING)
    if not path:
        return False
    ask_to_load(path, "ak", confirm_folder, lambda: st.session_state.pop(PENDING, None))
    return True


def _pick_model() -> tuple[str | None, str]:
    if _confirm_folder():
        return None, "auto"
    options = list(MODEL_CHOICES) + [LOCAL]
    forced = os.environ.get("ATTNKIT_MODEL", "").strip()     # e.g. ATTNKIT_MODEL=./my-ckpt streamlit run app.py
    if forced:
        default, notice = (forced if forced in options else LOCAL), None
        if forced not in options:
            st.session_state.setdefault("ak_folder", forced)
    else:
        default, notice = cached_default_model()
    if "ak_model" not in st.session_state:
        st.session_state["ak_model"] = default
    choice = st.selectbox(
        t("Model"), options, key="ak_model",
        format_func=lambda o: t("{model} (shipped, offline)", model=o) if o == SHIPPED_MODEL
        else t("Local folder…") if o == LOCAL else o,
        help=t("GPT-2 family checkpoints from the HuggingFace hub (or its local cache), the small model shipped "
               "with attnkit, or a local folder holding config.json + model.safetensors."),
    )
    if notice and choice == default == SHIPPED_MODEL:
        _offline_notice(notice)
    if choice == LOCAL:
        folder = st.text_input(t("Folder"), key="ak_folder", placeholder="/path/to/checkpoint")
        choice = folder.strip() or None
    device = st.selectbox(t("Device"), ["auto", "cpu", "cuda"], key="ak_device")
    return choice, device


def _offline_notice(notice: str):
    """The offline fallback in one line, its reason and the command to fetch GPT-2 in an expander."""
    st.caption("ℹ️ " + t("Offline: using the shipped {model} (not OpenAI's GPT-2).", model=plain(SHIPPED_MODEL)))
    with st.expander(t("Why, and how to get GPT-2")):
        st.text(notice)


def _start_prompt(model_name) -> None:
    """The prompt starts as the model's default (:func:`~attnkit.app.context.default_prompt`: Chinese on the
    Chinese model), and an untouched default follows the model when it changes; typed text is kept."""
    if st.session_state.get("ak_text") in (None, DEFAULT_PROMPT, *DEFAULT_PROMPTS.values()):
        st.session_state["ak_text"] = default_prompt(model_name)


def _read_prompts(model_name) -> tuple[list[str] | None, int | None, list[str]]:
    """(prompts, chosen index or None for all, warnings); prompts None when there is nothing valid."""
    source = st.radio(t("Prompt"), list(_SOURCES), key="ak_source", horizontal=True, format_func=lambda o: str(_SOURCES[o]))
    if source == "Type":
        _start_prompt(model_name)
        fixed, note = prompt_lib.replace_surrogates(st.session_state["ak_text"])   # before the widget: it cannot hold them
        if note:
            st.session_state["ak_text"] = fixed
        # A form: the prompt runs on the Run button (or Ctrl+Enter), not on every keystroke or blur.
        # No max_chars: Streamlit's browser side silently ignores a paste that would exceed it (the old
        # prompt keeps running). Everything arrives; past the limit it is cut here, and the page says so.
        with st.form("ak_prompt_form", border=False):
            text = st.text_area(t("Text"), key="ak_text", height=160, label_visibility="collapsed")
            st.form_submit_button(t("Run"), type="primary", help=t("Run the model on this prompt (Ctrl+Enter also runs it)"))
        st.caption(t("Up to {n} characters are used; longer text is cut, with a notice.", n=f"{prompt_lib.MAX_PROMPT_CHARS:,}"))
        try:
            text, warnings = prompt_lib.cut_text(prompt_lib.check_text(text), t("The typed text"))
            return [text], 0, ([note] if note else []) + warnings
        except prompt_lib.PromptError as e:
            show_error(e)
            return None, None, []
    up = st.file_uploader(t("Upload .txt/.md (one prompt) or .csv/.jsonl (many)"), type=list(prompt_lib.EXTENSIONS),
                          key="ak_upload")
    if up is not None:                       # keep it: Streamlit drops uploads when the page changes
        st.session_state["ak_upload_data"] = (up.name, up.getvalue())
    stored = st.session_state.get("ak_upload_data")
    if stored is None:
        st.caption(t("No file yet."))
        return None, None, []
    name, data = stored
    if up is None:
        st.caption(t("Using the earlier upload “{name}” ({n} bytes).", name=plain(name), n=f"{len(data):,}"))
    try:
        same_file = st.session_state.get("ak_csv_for") == (name, len(data))
        table = prompt_lib.read_upload(name, data, header=st.session_state.get("ak_csv_header") if same_file else None)
        if table.kind == "csv":                  # a CSV without a header row: guessed, and the user can say
            st.session_state["ak_csv_for"] = (name, len(data))
            st.session_state["ak_csv_header"] = table.header
            st.checkbox(t("First row names the columns"), key="ak_csv_header",
                        help=t("Untick when the first row is already a prompt (the file has no header row)."))
        column = None
        if table.columns:
            guess = next((c for c in table.columns if c.lower() in {"text", "prompt", "content"}), table.columns[0])
            if st.session_state.get("ak_column") not in table.columns:
                st.session_state["ak_column"] = guess
            column = st.selectbox(t("Column / field"), table.columns, key="ak_column")
        prompts, warnings = prompt_lib.prompts_from(table, column)
    except prompt_lib.PromptError as e:
        show_error(e)
        return None, None, []
    options = ["all"] + list(range(len(prompts))) if len(prompts) > 1 else [0]
    if st.session_state.get("ak_pick") not in options:
        st.session_state["ak_pick"] = options[0] if len(options) == 1 else 0
    pick = st.selectbox(
        t("Which prompt"), options, key="ak_pick",
        format_func=lambda o: t("all {n} prompts (aggregate views)", n=len(prompts)) if o == "all"
        else f"{o + 1}: {_preview(prompts[o])}",
    )
    return prompts, None if pick == "all" else int(pick), warnings


def _preview(text: str, n: int = 50) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def sidebar(spec=None) -> Context | None:
    """Draw the sidebar; return the resolved Context, or None after showing why nothing can run. ``spec``: the page
    about to run (its :class:`~attnkit.app.navigation.PageSpec`), for the notices above it."""
    keep(KEPT_KEYS)
    with st.sidebar:
        language.switch(st)
        name, device = _pick_model()
        sidebar_note(name)
        prompts, index, warnings = _read_prompts(name)
        for w in warnings:
            st.warning(plain(w), icon="⚠️")
        bos = st.toggle(t("Prepend {token}", token="<|endoftext|>"), key="ak_bos",
                        help=t("Put the tokenizer's beginning-of-text token before every prompt, as TransformerLens "
                               "does by default. Real GPT-2's first-token (attention-sink) heads behave differently "
                               "with it; exports record the choice."))
    if st.session_state.get(PENDING):
        st.info(t("The link names a local folder: confirm it in the sidebar (or ignore it) to start."), icon="📁")
        return None
    if not name:
        st.info(t("Enter the path of a local checkpoint folder in the sidebar."))
        return None
    notices = []
    try:
        dev = str(resolve_device(device))
    except LoadError as e:
        notices.append(t("{error}; running on the CPU instead.", error=str(e)))
        dev = "cpu"
    try:
        with st.spinner(t("Loading {model} …", model=plain(name))):
            model = cached_model(name, dev)
    except LoadError as e:
        show_error(e)
        return None
    except Exception as e:                   # never a traceback in the page
        show_error(t("Could not load {model}: {error}", model=name, error=f"{e.__class__.__name__}: {str(e)[:200]}"))
        return None
    if model.notice:
        notices.append(model.notice)
    for n in notices:
        st.warning(plain(n), icon="⚠️")
    if prompts is None:
        st.info(t("Give a prompt in the sidebar to start."))
        return None
    ctx = Context(model=model, model_name=name, device=dev, prompts=prompts, index=index, notices=notices,
                  prepend_bos=bool(bos))
    _prompt_notices(ctx, spec)
    return ctx


def _prompt_notices(ctx: Context, spec) -> None:
    """Above the page, where 1280×800 shows them: a Chinese prompt the model cannot read (with the one-click switch),
    a prompt cut to the context (not on a page that reads it whole, in windows: that page says what it used), and
    tokens the tokenizer does not know."""
    _cjk_notice(ctx)
    if ctx.all_selected:
        return
    ids, dropped = ctx.encode(ctx.text)
    if dropped and not getattr(spec, "whole_text", False):
        st.warning(t("The prompt has {n} tokens; the model's context is {ctx}, so the last {dropped} tokens "
                     "were dropped.", n=f"{len(ids) + dropped:,}", ctx=f"{ctx.model.config.n_ctx:,}",
                     dropped=f"{dropped:,}"), icon="✂️")
    unknown = ctx.model.unknown_notice(ids)
    if unknown is not None:
        st.warning(plain(str(unknown)), icon="❓")


def _load_chinese_model() -> None:
    st.session_state["ak_model"] = cjk.CHINESE_MODEL          # the prompt and every other choice are kept


@budgeted
def _vocab_cjk(key: tuple, _model) -> float:
    """The share of the vocabulary of the model ``key`` (name, device) that holds a CJK character (once per model)."""
    return cjk.vocab_cjk_share(_model.token_bytes(range(len(_model.tokenizer))))


def _cjk_notice(ctx: Context) -> None:
    """A mostly-CJK prompt on a model that cannot read it: the one-line notice and the one-click switch."""
    if ctx.model_name == cjk.CHINESE_MODEL or cjk.cjk_share(ctx.text) <= cjk.MOSTLY:
        return
    share = _vocab_cjk(ctx.key, ctx.model)
    notice = cjk.cjk_notice(ctx.text, ctx.model.token_groups(ctx.ids), ctx.model_name, share > 0, share)
    if notice is None:
        return
    st.warning(plain(str(notice)), icon="🀄")
    st.button(t("Load {model}", model=cjk.CHINESE_MODEL), key="ak_load_zh", on_click=_load_chinese_model,
              type="primary")
