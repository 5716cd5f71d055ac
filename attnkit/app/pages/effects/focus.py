"""Head effects' clicks, and one head asked for by another page: Compare heads' "check the effect" opens this page
on a pair built for that head (:func:`attnkit.examples.effect_pair`) with the head in ``focus``; its cell is outlined
in the patching map, it is the head whose promoted tokens are shown, and one line says what patching it did and
how the pair was made."""
from __future__ import annotations

import streamlit as st

from attnkit import app as ui
from attnkit import examples
from attnkit.app.pages.shared.pairs import word
from attnkit.i18n import t
from attnkit.standard import head_name, parse_head

__all__ = ["open_heatmap", "bar_clicked", "focus_head", "focus_note"]


def open_heatmap():
    """on_select of the patching map: the clicked head opens on Heatmaps with the clean prompt."""
    for cell in ui.clicked("he_map", "pick", "cell")[:1]:
        ui.open_head(*parse_head(cell), prompt=st.session_state.get("he_clean", ""))


def bar_clicked():
    """on_select of the attribution bars: a head's bar (the others are embed, MLP3, …) picks that head."""
    for part in ui.clicked("he_bars", "part", "part")[:1]:
        try:
            st.session_state["he_head"] = head_name(*parse_head(part))
        except ValueError:
            pass


def focus_head(state, cfg) -> str | None:
    """The head asked for (``state.focus``) when this model has it, else None."""
    try:
        layer, head = parse_head(state.focus)
    except ValueError:
        return None
    return head_name(layer, head) if layer < cfg.n_layers and head < cfg.n_heads else None


def _how(state) -> str:
    """How the pair on the page was made, when it is still the one built for the head (else "")."""
    texts = {f: getattr(state, f) for f in examples.FIELDS}
    if state.built and state.built == state.corrupt:
        return t("The corrupted prompt is the clean one with the token this head attends to most from the last "
                 "position replaced by another word (where they differ is listed above); the answer is the clean "
                 "run's top next token, the distractor the corrupted run's.")
    name = examples.matching_example(texts)
    if name is not None and state.built == f"@{name}":          # the registry's pair, because none could be built
        return t("The pair is the example “{name}”: no corrupted prompt could be made from your prompt for this head.",
                 name=t(name))
    return ""


def focus_note(state, zres, focus: str) -> None:
    """One line under the patching map: what patching ``focus``'s z did on this pair, and how the pair was made."""
    df = zres.frame().assign(cell=lambda d: [head_name(int(l), int(h)) for l, h in zip(d["layer"], d["head"])])
    row = df[df["cell"] == focus].iloc[0]
    receiving = zres.corrupt_ld if zres.direction == "denoise" else zres.clean_ld
    st.info(ui.plain(t(
        "{head}, opened to check its effect: with its z from the {source} run, the {runs} run's logit difference goes "
        "from {before} to {after} ({normalised} on the normalised scale). A head statistic ranks where a head looks; "
        "this measures what it does here.", head=focus, source=word("clean" if zres.direction == "denoise" else
                                                                     "corrupted"),
        runs=word("corrupted" if zres.direction == "denoise" else "clean"), before=f"{receiving:+.3f}",
        after=f"{row['logit_diff']:+.3f}", normalised=f"{row['normalised']:+.3f}") + " " + _how(state)), icon="🎯")
