"""Compare heads: what its rankings measure — where each head *looks* (its attention pattern), not what it *does* —
and a ranked head's effect checked in one click: activation patching of that head on Head effects, on this prompt,
with a corrupted prompt built for the head (:func:`attnkit.examples.effect_pair`: the token the head attends to
most from the last position replaced; the registry's example pair when none can be built, and the page says
which)."""
from __future__ import annotations

import streamlit as st

from attnkit import app as ui
from attnkit import examples
from attnkit.app.pages.shared.pairs import CUSTOM
from attnkit.i18n import t
from attnkit.standard import parse_head

__all__ = ["pattern_note", "open_effects", "effect_button"]


def pattern_note() -> str:
    """The sentence beside every ranking of this page."""
    return t("These rank where each head looks (its attention pattern), not what it does: a head with a sharper "
             "pattern can have no effect on the output. “Check its effect” under an opened head patches it on Head "
             "effects.")


def open_effects(model_name: str, device: str, text: str, head: str, bos: int | None) -> None:
    """on_click: a pair built for ``head`` on ``text``, and Head effects opened on it with that head in focus (its
    activation patching in the noise direction: what breaks when the head sees the corrupted prompt)."""
    layer, h = parse_head(head)
    got = examples.effect_pair(ui.cached_model(model_name, device), text, layer, h, bos)
    built = f"@{got.example}" if got.example else got.texts["corrupt"]      # how Head effects says the pair was made
    ui.open_page("effects", example=got.example or CUSTOM, focus=head, head=head, direction="noise",
                 source="One prompt pair", built=built, **got.texts)


def effect_button(ctx, head: str) -> None:
    """The button under an opened head."""
    st.button(t("Check its effect"), key=f"cmp_effect_{head}", on_click=open_effects,
              args=(ctx.model_name, ctx.device, ctx.text, head, ctx.bos_id if ctx.prepend_bos else None),
              help=t("Opens Head effects on this prompt, {head} selected: its activation patching on a corrupted "
                     "prompt that replaces the token {head} attends to most from the last position.", head=head))
