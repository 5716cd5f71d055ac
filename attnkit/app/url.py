"""The page's link: the sidebar's choices (model, prompt, BOS) and the page's inputs (:mod:`.state`) read
from the URL once per session and written back after each run.

Prompts longer than :data:`URL_PROMPT_MAX` are stored under the user's cache folder by content hash
(``$XDG_CACHE_HOME/attnkit/prompts/<sha256>.txt``, default ``~/.cache``) and the link names the hash
(``prompt_sha=``). A link never loads a local folder by itself: the sidebar shows the path and loads it
only when the user confirms (hub names, the shipped model and folders this session chose load as named).
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Callable

import streamlit as st

from .. import i18n
from ..loading import MODEL_CHOICES, split_revision
from .language import SESSION_KEY as LANG_KEY
from .context import LOCAL, default_prompt
from .state import LINK, FROM_LINK, PageState, from_link, link_params, link_text, remember

#: URL query parameter -> session key of the sidebar's choices (a page's own inputs come from its PageState).
URL_KEYS = {"model": "ak_model", "folder": "ak_folder", "prompt": "ak_text", "bos": "ak_bos", "lang": LANG_KEY}
#: Longer prompts are stored locally by hash; the link carries ``prompt_sha``.
URL_PROMPT_MAX = 400
#: A local folder named by the link, waiting for the user's confirmation; folders confirmed in this session.
PENDING = "ak_pending_folder"
CONFIRMED = "_ak_confirmed_folders"
_SHA = re.compile(r"^[0-9a-f]{64}$")


# ----------------------------------------------------------------------------- the prompt store

def prompt_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "attnkit" / "prompts"


def store_prompt(text: str) -> str | None:
    """Keep ``text`` under its sha256 in the prompt store; returns the hash (None when it cannot be written)."""
    data = text.encode("utf-8", "surrogatepass")
    sha = hashlib.sha256(data).hexdigest()
    path = prompt_folder() / f"{sha}.txt"
    try:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    except OSError:
        return None
    return sha


def stored_prompt(sha: str) -> str | None:
    """The stored text of a hash (None: not stored here, unreadable, or not a sha256)."""
    sha = str(sha).strip().lower()
    if not _SHA.match(sha):
        return None
    try:
        data = (prompt_folder() / f"{sha}.txt").read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != sha:
        return None
    return data.decode("utf-8", "replace")


def _store_long(text: str) -> str | None:
    """For a page's free-text input: the hash when the text is too long for a link (stored), else None."""
    if len(text) <= URL_PROMPT_MAX:
        return None
    return store_prompt(text) or None


PageState.lookup = staticmethod(stored_prompt)


# ----------------------------------------------------------------------------- local folders

def is_local(name: str) -> bool:
    """A model name from a link that names a path on this machine (not a hub id or a listed model)."""
    name = str(name).strip()
    if name in MODEL_CHOICES:
        return False
    try:
        base, _ = split_revision(name)
    except Exception:                          # a malformed NAME@REVISION: let the loader say so
        base = name
    p = Path(base).expanduser()
    return base.startswith((".", "~", "/")) or p.is_absolute() or "\\" in base or p.exists() or ".." in base


def _chosen(path: str) -> bool:
    """A folder the user chose already: the one the app was started on, or one confirmed in this session."""
    forced = os.environ.get("ATTNKIT_MODEL", "").strip()
    return path in st.session_state.get(CONFIRMED, set()) or (forced and _same(forced, path))


def _same(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except OSError:
        return a == b


def confirm_folder(path: str) -> None:
    """on_click of the sidebar's "Load this folder": the link's folder becomes the model."""
    st.session_state.setdefault(CONFIRMED, set()).add(path)
    st.session_state.update(ak_model=LOCAL, ak_folder=path)
    st.session_state.pop(PENDING, None)


def confirm_path(path: str) -> None:
    """A local path the user confirmed (a link's series folder, say): used as named from now on in this session."""
    st.session_state.setdefault(CONFIRMED, set()).add(path)


def link_path_waits(key: str, url_name: str, value: str, local: Callable[[str], bool] = is_local) -> bool:
    """Whether the page input ``key`` holds, as it came in the session's link (parameter ``url_name``), a local path
    (``local(value)``) this session has not confirmed: it is used only after the user's click, as the sidebar's
    model folder is (the page asks with :func:`attnkit.app.sidebar.ask_to_load`, then :func:`confirm_path`)."""
    link = st.session_state.get(LINK) or {}
    came = from_link(key) and (link.get("params") or {}).get(url_name) == value
    return bool(came and local(value) and not _chosen(value))


def choose_model(name: str) -> None:
    """The sidebar's model becomes ``name`` by the user's own click (a choice of the list, a hub id with its
    revision, or a local folder: confirmed, since the user picked it), e.g. a checkpoint of a series."""
    if name in MODEL_CHOICES:
        st.session_state["ak_model"] = name
    else:
        if is_local(name):
            st.session_state.setdefault(CONFIRMED, set()).add(name)
        st.session_state.update(ak_model=LOCAL, ak_folder=name)
    st.session_state.pop(PENDING, None)


def _link_model(params: dict) -> None:
    model, folder = params.get("model"), params.get("folder")
    name = folder if (model == LOCAL or model is None) and folder else model
    if not name:
        return
    if name in MODEL_CHOICES:
        st.session_state["ak_model"] = name
    elif is_local(name) and not _chosen(name):
        st.session_state[PENDING] = name       # shown by the sidebar; loaded only on the user's click
    else:                                      # a hub id (owner/name[@rev]) or a folder already chosen
        st.session_state.update(ak_model=LOCAL, ak_folder=name)


# ----------------------------------------------------------------------------- restore and save

def url_restore(page_path: str | None = None) -> None:
    """Once per browser session: keep the link's parameters (the page's own inputs are read by its
    PageState), and apply the sidebar's: model, prompt (or its hash), BOS."""
    ss = st.session_state
    if ss.get("_ak_url_restored"):
        return
    ss["_ak_url_restored"] = True
    params = {k: st.query_params[k] for k in st.query_params}
    ss[LINK] = {"params": params, "page": page_path, "read": set()}
    if "ak_model" not in ss:
        _link_model(params)
    if "ak_text" not in ss:
        text = link_text(params, "prompt")
        if text is not None:
            ss["ak_text"], ss["ak_source"] = text, "Type"
    if "bos" in params and "ak_bos" not in ss:
        ss["ak_bos"] = params["bos"].lower() in ("1", "true", "yes")
    ss.setdefault(FROM_LINK, set())


def _global_params() -> tuple[dict, str | None]:
    ss = st.session_state
    out: dict[str, str | None] = {"model": None, "folder": None, "prompt": None, "prompt_sha": None, "bos": None,
                                  "lang": None}
    msg = None
    pending = ss.get(PENDING)
    if pending:
        out["model"], out["folder"] = LOCAL, pending
    elif ss.get("ak_model"):
        out["model"] = str(ss["ak_model"])
        if ss["ak_model"] == LOCAL and ss.get("ak_folder"):
            out["folder"] = str(ss["ak_folder"])
    text = ss.get("ak_text")
    if ss.get("ak_source", "Type") == "Type" and text and text != default_prompt(ss.get("ak_model")):
        if len(text) <= URL_PROMPT_MAX:
            out["prompt"] = text
        else:
            out["prompt_sha"] = store_prompt(text)
            if out["prompt_sha"] is None:
                msg = i18n.t("The prompt ({n} characters) is longer than {limit} and could not be stored under "
                             "{folder}; a shared link opens with the default prompt.", n=f"{len(text):,}",
                             limit=URL_PROMPT_MAX, folder=str(prompt_folder()))
    if ss.get("ak_bos"):
        out["bos"] = "1"
    if ss.get(LANG_KEY, i18n.DEFAULT) != i18n.DEFAULT:      # the interface language (language.apply reads it)
        out["lang"] = str(ss[LANG_KEY])
    return out, msg


def url_save() -> str | None:
    """Write the sidebar's choices and the inputs of the page(s) run into the URL (parameters of other pages
    are dropped); returns a notice when the prompt could not be kept."""
    out, msg = _global_params()
    out.update(link_params(_store_long))
    if not st.session_state.get(PENDING):        # waiting for a confirmation: the link stays as it came
        for q in list(st.query_params):
            if q not in out:
                out[q] = None
    for q, value in out.items():
        if value is None or value == "":
            if q in st.query_params:
                del st.query_params[q]
        elif st.query_params.get(q) != value:
            st.query_params[q] = value
    remember()
    return msg


PageState.loaded = staticmethod(url_save)
