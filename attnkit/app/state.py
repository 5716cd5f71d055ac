"""Page state: a page's inputs are one dataclass (a :class:`PageState`), read from the page's link once,
kept while the user visits other pages, validated against the model and prompt, and written back to the link.

A page declares its inputs::

    @dataclass
    class Inputs(ui.PageState):
        prefix = "st"                     # session keys st_layer, st_head, …; URL parameters layer, head, …
        layer: int = 0
        head: int = 0
        query: int = -1

    s = Inputs.load()
    s.fit("layer", range(L), 0, what="Layer", because=f"the model has {L} layers", basis=L)
    layer = st.selectbox("Layer", range(L), key="st_layer")
    query = ui.select(st, "Query token", range(T), s, "query", labels.__getitem__)   # labels from the prompt

A choice that depends on another input is re-validated by :meth:`PageState.fit` whenever what it depends on
(``basis``) changes: kept while it still means the same thing, otherwise reset to its default with a one-line
notice at the top of the page. A widget whose option labels depend on other inputs is drawn by :func:`select`,
whose widget identity follows its labels, so the browser can never keep showing an old label.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from typing import Any, Callable, ClassVar, Iterable

import streamlit as st

from ..i18n import t
from .escaping import plain

#: Session keys of the machinery (not inputs).
LINK = "_ak_link"          # the link the session was opened with: {"params": {...}, "page": path, "read": set()}
SAVED = "_ak_saved"        # last values of every page's inputs (Streamlit drops a widget's value off its page)
FITS = "_ak_fits"          # per dependent input: (basis, meaning, shown text, was the default)
WIDGETS = "_ak_widgets"    # input key -> the widget key that showed it last (see select)
FROM_LINK = "_ak_from_link"

#: Per script run: the page states loaded, where notices go, notices waiting for that place.
_run = threading.local()


def begin_run(page_path: str | None = None) -> None:
    """Start of a script run (the frame, or a page run on its own)."""
    _run.states, _run.area, _run.pending, _run.page = {}, None, [], page_path


def _states() -> dict:
    if not hasattr(_run, "states"):
        begin_run()
    return _run.states


# ----------------------------------------------------------------------------- notices

def notice(text: str) -> None:
    """A one-line notice at the top of the page (what changed and why); user text is escaped."""
    area = getattr(_run, "area", None)
    if area is None:
        _states()
        _run.pending.append(text)
        return
    area.info(plain(text), icon="🔄")


def open_notices() -> None:
    """The page's notice area (under its title); notices raised earlier in the run are shown there."""
    _states()
    _run.area = st.container()
    pending, _run.pending = _run.pending, []
    for text in pending:
        notice(text)


def flush_notices() -> None:
    """Notices still waiting at the end of a run (the page stopped before its title): the sidebar shows them."""
    pending, _run.pending = getattr(_run, "pending", []), []
    for text in pending:
        st.sidebar.info(plain(text), icon="🔄")


# ----------------------------------------------------------------------------- fields and their link form

@dataclasses.dataclass(frozen=True)
class Field:
    name: str          # the dataclass field
    key: str           # the session key (the widget's key)
    url: str | None    # the URL parameter (None: not in the link)
    kind: str          # int, float, str, bool, list[int], list[str]
    text: bool         # free text: longer than URL_PROMPT_MAX goes to the prompt store (``<url>_sha``)
    default: Any


def param(default=None, *, url: str | None | bool = True, key: str | None = None, text: bool = False):
    """A dataclass field with its session ``key`` (default ``<prefix>_<name>``) and URL parameter (default its
    name; ``url=False``: kept in the session only). ``text=True``: free text that may be too long for a link."""
    meta = {"url": url, "key": key, "text": text}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda d=tuple(default): list(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


_KINDS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "list[int]": "list[int]",
          "list[str]": "list[str]"}


def _kind(tp) -> str:
    name = tp if isinstance(tp, str) else getattr(tp, "__name__", None) if not hasattr(tp, "__args__") else str(tp)
    name = str(name).replace("typing.", "").replace(" ", "")
    if name not in _KINDS:
        raise TypeError(f"page state fields are int, float, str, bool, list[int] or list[str], not {name}")
    return _KINDS[name]


def fields(cls) -> list[Field]:
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata or {}
        url = meta.get("url", True)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out.append(Field(f.name, meta.get("key") or f"{cls.prefix}_{f.name}",
                         None if url is False else (f.name if url is True else url), _kind(f.type),
                         bool(meta.get("text")), default))
    return out


def parse(kind: str, raw: str):
    """A URL parameter's text as a value of ``kind``; ValueError when it is not one (numbers in ASCII characters
    only: Python's int() and float() also read other scripts' digits, "２８００")."""
    if kind in ("int", "float", "list[int]") and not raw.isascii():
        raise ValueError(raw)
    if kind == "int":
        return int(raw)
    if kind == "float":
        v = float(raw)
        if not math.isfinite(v):
            raise ValueError(raw)
        return v
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if kind.startswith("list"):
        items = [x for x in raw.split(",") if x != ""]
        return [int(x) for x in items] if kind == "list[int]" else items
    return raw


def unparse(kind: str, value) -> str:
    if kind == "bool":
        return "1" if value else "0"
    if kind.startswith("list"):
        return ",".join(str(v) for v in value)
    return str(value)


# ----------------------------------------------------------------------------- the state

class PageState:
    """Base of a page's inputs dataclass; ``prefix`` names its session keys."""

    prefix: ClassVar[str] = ""
    #: the link's free text: stored text by hash (set by url.py: ``lookup(sha) -> str | None``)
    lookup: ClassVar[Callable[[str], str | None] | None] = None
    #: called when a page's inputs are loaded (set by url.py: the link is written at once, so that a link copied
    #: while the page still computes already names what is on screen; the end of the run writes it again)
    loaded: ClassVar[Callable[[], object] | None] = None

    @classmethod
    def load(cls, **defaults):
        """The page's inputs: from its link (the first time this page runs in the session), else as the user
        left them (also after visiting other pages), else ``defaults`` (model/prompt dependent) or the field's
        default. Registers the state so that the frame writes it into the link at the end of the run."""
        ss = st.session_state
        saved = ss.setdefault(SAVED, {})
        specs = [dataclasses.replace(f, default=defaults[f.name]) if f.name in defaults else f for f in fields(cls)]
        linked = _from_link(cls.prefix, specs)
        widgets = ss.get(WIDGETS, {})
        for f in specs:
            wk = widgets.get(f.key)
            if wk and wk in ss:                  # a select() widget drawn last run: the user's latest choice
                ss[f.key] = ss[wk]
            if f.key in linked:
                ss[f.key] = linked[f.key]
            elif f.key not in ss:
                ss[f.key] = saved[f.key] if f.key in saved else f.default
        self = cls(**{f.name: ss[f.key] for f in specs})
        _states()[cls.prefix] = specs
        remember(cls.prefix)
        if PageState.loaded is not None:
            PageState.loaded()
        return self

    def _field(self, name: str) -> Field:
        return next(f for f in fields(type(self)) if f.name == name)

    def set(self, name: str, value) -> None:
        """Change an input before its widget is drawn."""
        st.session_state[self._field(name).key] = value
        setattr(self, name, value)

    def fit(self, name: str, options: Iterable, default, *, what: str, because: str, basis=None,
            meaning: Callable | None = None, fmt: Callable = str):
        """Re-validate a dependent input before its widget is drawn; returns the value to use.

        Kept while it is one of ``options`` and — when ``basis`` (what it depends on) changed since the last
        run — still ``meaning`` the same (e.g. the same token at a position). A value that was the default
        follows the new default. Otherwise it is reset to ``default`` with a notice "{what} … : {because}"."""
        f = self._field(name)
        ss = st.session_state
        value, opts = ss.get(f.key), list(options)
        fits = ss.setdefault(FITS, {})
        rec = fits.get(f.key)
        new, old_shown = value, (rec[2] if rec else _shown(fmt, value, opts))
        changed = rec is not None and rec[0] != basis
        if value not in opts:
            new = default
        elif changed and rec[3]:
            new = default
        elif changed and meaning is not None and _safe(meaning, value) != rec[1]:
            new = default
        told = rec is not None or f.key in ss.get(FROM_LINK, set())
        if new != value and value is not None and told:
            notice(t("{what} changed from {old} to {new}: {because}.", what=what, old=old_shown,
                     new=_shown(fmt, new, opts), because=because))
        elif changed and rec[3] and meaning is not None and _safe(meaning, new) != rec[1]:
            notice(t("{what} is now {new} (was {old}): {because}.", what=what, old=old_shown,
                     new=_shown(fmt, new, opts), because=because))
        fits[f.key] = (basis, _safe(meaning, new) if meaning else None, _shown(fmt, new, opts), new == default)
        self.set(name, new)
        return new

    def fit_head(self, cfg, basis, layer: str = "layer", head: str = "head") -> None:
        """Re-validate the fields ``layer`` and ``head`` against the model (``cfg``; ``basis``: its name): each
        kept while the model has it, else 0 with a notice."""
        self.fit(layer, range(cfg.n_layers), 0, what=t("Layer"), basis=basis,
                 because=t("the model has {n} layers", n=cfg.n_layers))
        self.fit(head, range(cfg.n_heads), 0, what=t("Head"), basis=basis,
                 because=t("the model has {n} heads per layer", n=cfg.n_heads))

    def fit_many(self, name: str, options: Iterable, default: list, *, what: str, because: str,
                 fmt: Callable = str) -> list:
        """A multi-choice input: items no longer offered are dropped (with a notice); none left -> default."""
        f = self._field(name)
        value, opts = list(st.session_state.get(f.key) or []), list(options)
        kept = [v for v in value if v in opts]
        if value and not kept:
            kept = list(default)
        if len(kept) != len(value) or any(a != b for a, b in zip(kept, value)):
            gone = [v for v in value if v not in opts]
            if gone:
                notice(t("{what}: {items} left out: {because}.", what=what,
                         items=", ".join(map(str, (fmt(v) for v in gone))), because=because))
        self.set(name, kept)
        return kept


def _safe(fn, value):
    try:
        return fn(value)
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def _shown(fmt, value, opts) -> str:
    if value is None:
        return "none"
    try:
        return str(fmt(value)) if value in opts else str(value)
    except (IndexError, KeyError, TypeError, ValueError):
        return str(value)


def _from_link(prefix: str, specs: list[Field]) -> dict:
    """{session key: value} from the session's link, for the page it was opened on, the first time only."""
    ss = st.session_state
    link = ss.get(LINK)
    if not link or prefix in link["read"]:
        return {}
    here = getattr(_run, "page", None)
    if link["page"] is not None and here is not None and link["page"] != here:
        return {}
    link["read"].add(prefix)
    params, out = link["params"], {}
    for f in specs:
        if f.url is None:
            continue
        raw = link_text(params, f.url) if f.text else params.get(f.url)
        if raw is None:
            continue
        try:
            out[f.key] = parse(f.kind, raw)
        except ValueError:
            notice(t("The link's {field}={value} is not a valid {kind}; the default is used.", field=f.url,
                     value=repr(raw[:40]), kind=f.kind))
    ss.setdefault(FROM_LINK, set()).update(out)
    return out


def link_text(params: dict, name: str) -> str | None:
    """A free-text parameter of a link: ``name`` itself, or the text stored under its hash ``<name>_sha``.

    Said in one line, never silently: a hash not stored on this machine (None: the default is used), and a
    link naming both whose texts differ (the written text is used: it is what the link shows)."""
    raw, sha = params.get(name), params.get(name + "_sha")
    if not sha or PageState.lookup is None:
        return raw
    stored = PageState.lookup(sha)
    if raw is not None:
        if stored != raw:
            notice(t("The link names {name} twice, as text and by hash ({sha}…), and they differ; the text "
                     "written in the link is used.", name=name, sha=str(sha)[:12]))
        return raw
    if stored is None:
        notice(t("The link's {name} (stored by hash {sha}…) is not on this machine; the default is used and "
                 "everything else the link names is kept.", name=name, sha=str(sha)[:12]))
    return stored


def from_link(*keys: str) -> bool:
    """Whether any of these session keys was set from the session's link."""
    return any(k in st.session_state.get(FROM_LINK, set()) for k in keys)


def remember(prefix: str | None = None) -> None:
    """Copy the inputs of the page(s) loaded this run into the session's saved values."""
    ss = st.session_state
    saved = ss.setdefault(SAVED, {})
    for p, specs in _states().items():
        if prefix is None or p == prefix:
            for f in specs:
                if f.key in ss:
                    saved[f.key] = ss[f.key]


def keep(keys: Iterable[str]) -> None:
    """Inputs outside a PageState (the sidebar's): a value Streamlit dropped while its widget was not drawn
    comes back from the saved values; the current ones are saved.

    Each value is also written back under its key: a widget's identity includes the page script that was
    active when it was drawn, which differs between a session's first run and the next, so without the
    write the first change to a sidebar widget would reach a new widget and be lost."""
    ss = st.session_state
    saved = ss.setdefault(SAVED, {})
    for k in keys:
        if k not in ss and k in saved:
            ss[k] = saved[k]
        if k in ss:
            ss[k] = saved[k] = ss[k]


def link_params(store_text: Callable[[str], str | None]) -> dict[str, str | None]:
    """The URL parameters of the page states loaded this run ({param: text or None to remove});
    ``store_text(text)`` returns a hash for free text too long for a link (None: fits)."""
    ss = st.session_state
    out: dict[str, str | None] = {}
    for specs in _states().values():
        for f in specs:
            if f.url is None or f.key not in ss:
                continue
            value = ss[f.key]
            if value is None or value == f.default and not f.text:
                out[f.url] = None
                continue
            text = unparse(f.kind, value)
            sha = store_text(text) if f.text else None
            out[f.url], out[f.url + "_sha"] = (None, sha) if sha else (text, None)
    return out


def match_choice(state: PageState, name: str, presets: dict, fields: tuple[str, ...], custom: str) -> None:
    """Keep a preset's name (``state.name``, a key of ``presets``) true to the inputs it fills (``fields``, the
    keys of each preset): a link naming the preset but none of those inputs loads the preset's values (once,
    when the link is read); inputs that no longer equal the preset's make the choice ``custom``."""
    preset = presets.get(getattr(state, name))
    if preset is None or all(getattr(state, f) == preset[f] for f in fields):
        return
    key = state._field(name).key
    done = st.session_state.setdefault("_ak_presets_linked", set())
    keys = [state._field(f).key for f in fields]
    if from_link(key) and not from_link(*keys) and key not in done:
        for f in fields:
            state.set(f, preset[f])
    else:
        state.set(name, custom)
    done.add(key)


# ----------------------------------------------------------------------------- widgets with dependent labels

def select(dg, label: str, options, state: PageState, name: str, fmt: Callable, **kw):
    """A selectbox for ``state.name`` whose option labels ``fmt(option)`` depend on other inputs (tokens of
    the prompt, …). Its widget key carries a digest of the labels: when they change the browser draws a new
    widget (a kept key would keep showing the old label). The value lives in the state's key."""
    f = state._field(name)
    options = list(options)
    digest = hashlib.sha1("\x1f".join(str(fmt(o)) for o in options).encode("utf-8", "replace")).hexdigest()[:10]
    wkey = f"{f.key}@{digest}"
    ss = st.session_state
    if ss.get(f.key) in options:
        ss[wkey] = ss[f.key]
    value = dg.selectbox(label, options, key=wkey, format_func=fmt, **kw)
    ss.setdefault(WIDGETS, {})[f.key] = wkey
    state.set(name, value)
    return value
