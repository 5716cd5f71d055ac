"""The dashboard's pages, defined once, and the one way to send the user from one page to another.

:data:`PAGES` is the page list (file, title, icon, heading, session-key prefix) that app.py's navigation,
the frame's links, Home's prose and the tests all read: adding a page is one file in ``pages/`` plus one
line here. :func:`open_page` (and :func:`open_head`, a head on Heatmaps) is the only way a page opens
another page with some of its inputs set: no page writes another page's session keys by name.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import streamlit as st

from ..i18n import msg, t
from ..standard import head_name
from .escaping import plain
from .state import WIDGETS
from .url import choose_model

#: The repository root (pages/ and app.py live there).
ROOT = Path(__file__).resolve().parents[2]
#: Session key of a page switch asked for by :func:`open_page` and not yet done.
GOTO = "_ak_goto"


@dataclasses.dataclass(frozen=True)
class PageSpec:
    """One page of the dashboard."""

    key: str            # short name for code: open_page("heatmaps", …)
    path: str           # the script, relative to the repository root
    title: str          # the navigation's label (and the window title)
    icon: str
    prefix: str = ""    # the page's session-key prefix (its PageState's ``prefix``)
    heading: str = ""   # the page's title when it differs from ``title``
    summary: str = ""   # one line for Home's "Start here" list (Markdown: the app's own words)

    @property
    def url_path(self) -> str:
        """The page's address as Streamlit derives it from the file name (``5_Step_by_step.py`` ->
        ``Step_by_step``); the default page is at ``""``."""
        if self is PAGES[0]:
            return ""
        stem = Path(self.path).stem
        head, _, rest = stem.partition("_")
        return rest if head.isdigit() and rest else stem

    @property
    def shown_title(self) -> str:
        return self.heading or self.title


#: The pages in navigation order; the first is the default (Home).
PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "pages/0_Home.py", msg("Home"), "🏠", heading=msg("attnkit — attention, seen and checked")),
    PageSpec("heatmaps", "pages/1_Heatmaps.py", msg("Heatmaps"), "🔥", "hm", summary=msg(
        "the attention pattern (or pre-softmax scores) of any layer and head, a layer's heads as a grid, one head "
        "through all layers, and the prompt as text coloured by attention.")),
    PageSpec("compare", "pages/2_Compare_heads.py", msg("Compare heads"), "🧭", "cmp", summary=msg(
        "every head coloured by a statistic (previous-token, induction, …), heads side by side, which heads link "
        "two tokens.")),
    PageSpec("effects", "pages/7_Head_effects.py", msg("Head effects"), "🎯", "he", summary=msg(
        "which heads carry the answer on a clean/corrupted prompt pair — activation patching, direct logit "
        "attribution, the contribution graph and the logit lens.")),
    PageSpec("circuits", "pages/8_Circuits.py", msg("Circuits"), "🕸️", "ci", summary=msg(
        "how heads in different layers work together — composition scores, path patching, the discovered "
        "circuit.")),
    PageSpec("entropy", "pages/3_Entropy.py", msg("Entropy"), "📈", "ent", msg("Entropy versus context length"),
             summary=msg("does attention spread out as the context grows? (a seed's claim)")),
    PageSpec("ablations", "pages/4_Ablations.py", msg("Ablations"), "✂️", "ab", summary=msg(
        "V = X, W_K = W_Q, no scaling, no mask, heads removed — the seeds' claims measured, each with its "
        "verdict.")),
    PageSpec("steps", "pages/5_Step_by_step.py", msg("Step by step"), "🪜", "st", summary=msg(
        "one head's formula with its real numbers, the seeds' worked examples, the KV cache.")),
    PageSpec("verify", "pages/6_Verify.py", msg("Verify"), "✅", "vf", summary=msg(
        "attnkit against HuggingFace, layer by layer — why the numbers on the other pages can be trusted.")),
    PageSpec("glossary", "pages/9_Glossary.py", msg("Glossary"), "📖", summary=msg(
        "the terms these pages use, in English and in the seeds' Chinese (注意力, 查询/键/值, 掩码 …).")),
    PageSpec("training", "pages/10_Training.py", msg("Training"), "🌱", "tr", msg("Training: watching attention learn"),
             summary=msg("a series of training checkpoints: head scores and the ICL score over steps, the induction "
                         "phase change, a head's pattern step by step, any checkpoint opened on the other pages.")),
)


def page_spec(name: str) -> PageSpec:
    """The page by key (``"heatmaps"``), title (``"Heatmaps"``), heading or script path; KeyError names
    the keys when there is none."""
    for spec in PAGES:
        if name in (spec.key, spec.title, spec.heading, spec.path) or Path(name).name == Path(spec.path).name:
            return spec
    raise KeyError(f"no page {name!r}: one of {', '.join(p.key for p in PAGES)}")


def st_pages(pages: tuple[PageSpec, ...] = PAGES, absolute: bool = False) -> list:
    """The page list as ``st.Page`` objects for ``st.navigation`` (``absolute``: paths from the repository
    root, for a call made while another script is the main one); the first page is the default."""
    return [st.Page(ROOT / spec.path if absolute else spec.path, title=str(spec.title), icon=spec.icon,
                    default=i == 0) for i, spec in enumerate(pages)]


def spec_of(nav, pages: tuple[PageSpec, ...] = PAGES) -> PageSpec | None:
    """The PageSpec of the page ``st.navigation`` resolved (by its address: its title is translated)."""
    return next((spec for spec in pages if spec.url_path == getattr(nav, "url_path", None)), None)


def nav_links(pages: tuple[PageSpec, ...] = PAGES) -> None:
    """The navigation, drawn by the frame in the sidebar (Streamlit's own list is off:
    ``client.showSidebarNavigation = false``), one ``st.page_link`` per page."""
    with st.sidebar:
        for spec in pages:
            st.page_link(spec.path, label=str(spec.title), icon=spec.icon)
        st.divider()


# ----------------------------------------------------------------------------- opening another page

def open_page(page: str, prompt: str | None = None, **inputs) -> None:
    """Open ``page`` (a key of :data:`PAGES`) at the start of the next run, with some of its inputs set
    (``inputs``: field names of its PageState, e.g. ``layer=2``) and, with ``prompt``, that text typed in
    the sidebar.

    Call it from a widget callback (``on_click``, ``on_change``, ``on_select``): the values are written
    before any widget of the next run exists, and the frame switches page at the start of that run
    (:func:`follow`). Called from a page's body, follow it with ``st.rerun()``."""
    spec = page_spec(page)
    ss = st.session_state
    widgets = ss.get(WIDGETS, {})
    for name, value in inputs.items():
        key = f"{spec.prefix}_{name}"
        ss[key] = value
        widgets.pop(key, None)              # ui.select's widget must not bring back its older choice
    if prompt is not None:
        ss.update(ak_source="Type", ak_text=prompt)
    ss[GOTO] = (spec.key, dict(inputs))


def open_checkpoint(page: str, model: str, **inputs) -> None:
    """Open ``page`` with the sidebar's model set to ``model`` (a checkpoint's name: a folder or NAME@REVISION),
    as :func:`open_page` does (call it from a widget callback)."""
    choose_model(model)
    open_page(page, **inputs)


def open_head(layer: int, head: int, prompt: str | None = None) -> None:
    """Open head ``layer``/``head`` on Heatmaps, in its single-head view (see :func:`open_page`)."""
    open_page("heatmaps", prompt=prompt, view="One head", layer=int(layer), head=int(head))


def follow(in_frame: bool) -> None:
    """Do a page switch asked for by :func:`open_page` (the frame calls this before the page runs).

    Outside the navigation (a page run on its own by ``streamlit run pages/X.py`` or AppTest) the switch is
    tried too: it works wherever Streamlit knows the page (an app started from app.py, whose later runs
    of a page go without the frame); where it does not (``streamlit run pages/X.py``) a one-line note
    says where the choice went."""
    goto = st.session_state.pop(GOTO, None)
    if goto is None:
        return
    spec = page_spec(goto[0])
    try:
        st.switch_page(spec.path)
    except st.errors.StreamlitAPIException:
        if in_frame:                        # the frame's own page list: a missing page is a bug
            raise
    what = goto[1]
    if {"layer", "head"} <= set(what):
        text = t("Head {head} and the prompt are selected on the {page} page; open it from the navigation.",
                 head=head_name(what["layer"], what["head"]), page=spec.title)
    else:
        text = t("The choice is selected on the {page} page; open it from the navigation.", page=spec.title)
    st.info(plain(text), icon=spec.icon)
