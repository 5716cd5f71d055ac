"""Entropy's text and what was used of it: the sidebar's prompt(s) or a text that ships with attnkit (the Chinese
model's sample, the training series' evaluation text, …), the one note that says which tokens were measured (from
:func:`attnkit.entropy.documents`' account, the only one: the sidebar does not cut this page's text), and the
one-click step that follows the verdict's advice (:func:`attnkit.entropy.advice`)."""
from __future__ import annotations

import streamlit as st

from attnkit import entropy as entropy_lib
from attnkit.app.context import Context
from attnkit.app.escaping import plain
from attnkit.app.pages.shared.texts import entropy_inputs, read, shipped_tokens
from attnkit.app.state import PageState
from attnkit.i18n import t
from attnkit.loading import shipped_texts

__all__ = ["PROMPT", "KEY", "choices", "pick", "documents_note", "settle"]

#: The text choice meaning "the sidebar's prompt(s)"; the others are :func:`attnkit.loading.shipped_texts`' names.
PROMPT = "prompt"
#: The text choice's session key (the page state's field ``text``).
KEY = "ent_text"


def choices() -> list[str]:
    return [PROMPT, *shipped_texts()]


def _use(inputs: dict) -> None:
    """A widget callback: set the page's inputs (``text``, ``window``, ``split``)."""
    st.session_state.update({f"ent_{k}": v for k, v in inputs.items()})


def _chosen(ctx: Context) -> None:
    """The text box's callback: a shipped text opens with the advised window (MIN_DOCS windows, at most the
    model's context)."""
    name = st.session_state.get(KEY)
    if name != PROMPT:
        _use(entropy_inputs(ctx, name))


def pick(dg, ctx: Context, state: PageState) -> tuple[list[str], str]:
    """The Text box (the sidebar's prompt or a shipped text): (the texts to measure, what they are, for the note)."""
    counts = shipped_tokens(ctx)
    state.fit("text", choices(), PROMPT, what=t("Text"), because=t("not a text that ships with attnkit"))
    n = len(ctx.prompts) if ctx.all_selected else 1
    label = {PROMPT: t("the sidebar's prompt") if n == 1 else t("the sidebar's {n} prompts", n=n)}
    label.update({k: t("{name} (shipped, {n} tokens)", name=k, n=f"{v:,}") for k, v in counts.items()})
    name = dg.selectbox(t("Text"), choices(), key=KEY, format_func=label.__getitem__, on_change=_chosen,
                        args=(ctx,), help=t("The sidebar's prompt(s), or a text that ships with attnkit: long "
                                                   "enough for a verdict (it opens with the window that cuts it into "
                                                   "{n} windows).", n=entropy_lib.MIN_DOCS))
    if name == PROMPT:
        return (ctx.prompts if ctx.all_selected else [ctx.text]), label[PROMPT]
    return [read(shipped_texts()[name])], name


def documents_note(docs: list, info: dict, what: str, window: int, split: bool, max_docs: int) -> None:
    """The one line that says what was measured — tokens used of the text's, in how many windows — and what was
    not (every number from ``info``, :func:`attnkit.entropy.documents`' account)."""
    notes = [t("Measured: {used} of the {total} tokens of {what}, as {n} document(s) of 2–{longest} tokens",
               used=f"{info['used']:,}", total=f"{info['tokens']:,}", what=what, n=len(docs),
               longest=max(map(len, docs)))]
    if split and info["used"] + info["left_out_tokens"] > window:
        notes.append(t("a text longer than the window ({window}) is cut into windows and used whole", window=window))
    if info["short"]:
        notes.append(t("{n} text(s)/window(s) under 2 tokens skipped (nothing to attend over)", n=info["short"]))
    if info["dropped_tokens"]:
        notes.append(t("{n} tokens beyond the first window not used", n=f"{info['dropped_tokens']:,}"))
    if info["left_out"]:
        notes.append(t("{n} more document(s) ({tokens} tokens) left out (limit {limit})", n=info["left_out"],
                       tokens=f"{info['left_out_tokens']:,}", limit=max_docs))
    if info["chars_cut"]:
        notes.append(t("{n} characters past the prompt limit not read", n=f"{info['chars_cut']:,}"))
    st.caption(plain(" · ".join(notes) + "."))


def settle(ctx: Context, s, current: str) -> None:
    """Under a 'not enough evidence' verdict: the advice's step as one click — the window it names, or the longest
    shipped text when it asks for more text (none when the text measured is already the longest)."""
    adv = entropy_lib.advice(s, ctx.model.config.n_ctx)
    if adv.window is not None:
        st.button(plain(t("Set Window to {window} and measure", window=adv.window)), key="ent_settle_window",
                  on_click=_use, args=({"window": adv.window, "split": "split into windows"},), type="primary")
        return
    counts, inputs = shipped_tokens(ctx), entropy_inputs(ctx)
    longest = inputs.get("text")
    if longest is None or longest == current or counts[longest] <= int(s.count.sum()):
        return
    st.button(plain(t("Measure on {name} ({n} tokens, windows of {window})", name=longest, n=f"{counts[longest]:,}",
                      window=inputs["window"])), key="ent_settle_text", on_click=_use, args=(inputs,), type="primary")
