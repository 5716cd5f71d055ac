"""The dashboard's pages, defined once, and the one way to send the user from one page to another.

:data:`PAGES` is the page list (folder, address, title, icon, heading, session-key prefix) that app.py's
navigation, the frame's links, Home's prose and the tests all read: adding a page is one folder in
``attnkit/app/pages/`` (its script ``page.py``) plus one line here. :func:`open_page` (and :func:`open_head`, a
head on Heatmaps) is the only way a page opens another page with some of its inputs set: no page writes another
page's session keys by name.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import streamlit as st

from ..i18n import msg
from .state import WIDGETS
from .url import choose_model

#: The page folders: ``PAGE_DIR/<key>/page.py`` is a page's script (inside the package, so that an installed
#: attnkit runs its pages too).
PAGE_DIR = Path(__file__).resolve().parent / "pages"
#: Session key of a page switch asked for by :func:`open_page` and not yet done.
GOTO = "_ak_goto"


@dataclasses.dataclass(frozen=True)
class PageSpec:
    """One page of the dashboard."""

    key: str            # its folder in attnkit/app/pages/, and its name in code: open_page("heatmaps", …)
    address: str        # its URL path (/Heatmaps): links in the wild use it, so it never changes
    title: str          # the navigation's label (and the window title)
    icon: str
    prefix: str = ""    # the page's session-key prefix (its PageState's ``prefix``)
    heading: str = ""   # the page's title when it differs from ``title``
    summary: str = ""   # one line for Home's "Start here" list (Markdown: the app's own words)
    whole_text: bool = False   # reads the prompt whole (in windows): the sidebar does not say it was cut
    uses_model: bool = True    # runs on the sidebar's model (a checkpoint can be opened on it)

    @property
    def path(self) -> Path:
        """The page's script (absolute): ``attnkit/app/pages/<key>/page.py``."""
        return PAGE_DIR / self.key / "page.py"

    @property
    def url_path(self) -> str:
        """The page's address as ``st.navigation`` serves it; the default page (Home) is at ``""``."""
        return "" if self is PAGES[0] else self.address

    @property
    def shown_title(self) -> str:
        return self.heading or self.title


#: The pages in navigation order; the first is the default (Home).
PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "Home", msg("Home"), "🏠", heading=msg("attnkit — attention, seen and checked")),
    PageSpec("heatmaps", "Heatmaps", msg("Heatmaps"), "🔥", "hm", summary=msg(
        "the attention pattern (or pre-softmax scores) of any layer and head, a layer's heads as a grid, one head "
        "through all layers, and the prompt as text coloured by attention.")),
    PageSpec("compare", "Compare_heads", msg("Compare heads"), "🧭", "cmp", summary=msg(
        "every head coloured by a statistic (previous-token, induction, …), heads side by side, which heads link "
        "two tokens.")),
    PageSpec("effects", "Head_effects", msg("Head effects"), "🎯", "he", summary=msg(
        "which heads carry the answer on a clean/corrupted prompt pair — activation patching, direct logit "
        "attribution, the contribution graph and the logit lens.")),
    PageSpec("circuits", "Circuits", msg("Circuits"), "🕸️", "ci", summary=msg(
        "how heads in different layers work together — composition scores, path patching, the discovered "
        "circuit.")),
    PageSpec("report", "Report_card", msg("Report card"), "🧪", summary=msg(
        "every explanation method scored against planted models whose circuit is known by construction — the "
        "shipped models' card, and a planted model of your own.")),
    PageSpec("atlas", "Atlas", msg("Atlas"), "🗺️", "at", msg("Head atlas"), summary=msg(
        "every head over a corpus: its pattern statistics, top examples and effect on the loss, with a verdict per "
        "role — does the role hold by pattern, by effect, both or neither?")),
    PageSpec("entropy", "Entropy", msg("Entropy"), "📈", "ent", msg("Entropy versus context length"),
             summary=msg("does attention spread out as the context grows? (a seed's claim)"), whole_text=True),
    PageSpec("ablations", "Ablations", msg("Ablations"), "✂️", "ab", summary=msg(
        "V = X, W_K = W_Q, no scaling, no mask, heads removed — the seeds' claims measured, each with its "
        "verdict.")),
    PageSpec("sinks", "Sinks", msg("Attention sinks & KV cache"), "🕳️", "sk", summary=msg(
        "how much attention each head parks on the first tokens, and what the loss and generation do when the KV "
        "cache keeps only k first tokens and a window of w.")),
    PageSpec("steps", "Step_by_step", msg("Step by step"), "🪜", "st", summary=msg(
        "one head's formula with its real numbers, the seeds' worked examples, the KV cache.")),
    PageSpec("verify", "Verify", msg("Verify"), "✅", "vf", summary=msg(
        "attnkit against HuggingFace, layer by layer — why the numbers on the other pages can be trusted.")),
    PageSpec("glossary", "Glossary", msg("Glossary"), "📖", summary=msg(
        "the terms these pages use, in English and in the seeds' Chinese (注意力, 查询/键/值, 掩码 …)."), uses_model=False),
    PageSpec("training", "Training", msg("Training"), "🌱", "tr", msg("Training: watching attention learn"),
             summary=msg("a series of training checkpoints: head scores and the ICL score over steps, the induction "
                         "phase change, a head's pattern step by step, any checkpoint opened on the other pages.")),
)


def page_spec(name: str) -> PageSpec:
    """The page by key (``"heatmaps"``), title (``"Heatmaps"``), heading or address (``"Step_by_step"``); KeyError
    names the keys when there is none."""
    for spec in PAGES:
        if name in (spec.key, spec.title, spec.heading, spec.address):
            return spec
    raise KeyError(f"no page {name!r}: one of {', '.join(p.key for p in PAGES)}")


def st_pages(pages: tuple[PageSpec, ...] = PAGES) -> list:
    """The page list as ``st.Page`` objects for ``st.navigation``: each page's script by its absolute path (the
    package's own folder, wherever attnkit is installed) at its fixed address; the first page is the default."""
    return [st.Page(spec.path, title=str(spec.title), icon=spec.icon, default=i == 0,
                    url_path=None if i == 0 else spec.address) for i, spec in enumerate(pages)]


def spec_of(nav, pages: tuple[PageSpec, ...] = PAGES) -> PageSpec | None:
    """The PageSpec of the page ``st.navigation`` resolved (by its address: its title is translated)."""
    return next((spec for spec in pages if spec.url_path == getattr(nav, "url_path", None)), None)


def nav_links(pages: tuple[PageSpec, ...] = PAGES) -> None:
    """The navigation, drawn by the frame in the sidebar (Streamlit's own list is off:
    ``client.showSidebarNavigation = false``), one ``st.page_link`` per page."""
    with st.sidebar:
        for spec in pages:
            st.page_link(str(spec.path), label=str(spec.title), icon=spec.icon)
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
    ss[GOTO] = spec.key


def open_checkpoint(page: str, model: str, **inputs) -> None:
    """Open ``page`` with the sidebar's model set to ``model`` (a checkpoint's name: a folder or NAME@REVISION),
    as :func:`open_page` does (call it from a widget callback)."""
    choose_model(model)
    open_page(page, **inputs)


def open_head(layer: int, head: int, prompt: str | None = None) -> None:
    """Open head ``layer``/``head`` on Heatmaps, in its single-head view (see :func:`open_page`)."""
    open_page("heatmaps", prompt=prompt, view="One head", layer=int(layer), head=int(head))


def follow() -> None:
    """Do a page switch asked for by :func:`open_page` (the frame calls this before the page runs)."""
    goto = st.session_state.pop(GOTO, None)
    if goto is not None:
        st.switch_page(str(page_spec(goto).path))
