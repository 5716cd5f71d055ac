"""Widgets shared by the pages that take a clean/corrupted prompt pair (Head effects, Circuits): the example
picker (every example checked against the loaded model), the pair's inputs, the pair built from them (or its
one-line error and the two tokenizations side by side), and a prompt-set upload read by the one reader
(:func:`attnkit.prompts.read_pairs`). Session keys are ``{prefix}_example``, ``{prefix}_clean``,
``{prefix}_corrupt``, ``{prefix}_more``, ``{prefix}_answer``, ``{prefix}_distractor``, ``{prefix}_upload``
(the uploader) and ``{prefix}_upload_data`` (the last upload's name and bytes)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnkit import examples
from attnkit import patching
from attnkit import prompts
from attnkit.i18n import msg, t
from attnkit.app.caches import budgeted, cached_model
from attnkit.app.escaping import plain, show_error
from attnkit.app.frame import stop
from attnkit.app.jobs import job_result
from attnkit.app.state import match_choice, notice
from attnkit.app.tables import show_table
from attnkit.app.tokens import show_spaces

__all__ = ["CUSTOM", "SET_LIMIT_NOTE", "PromptSet", "pair_key", "patch_job", "patch_set_job", "example_checks",
           "example_names", "example_state", "fit_example", "direction_radio", "describe_pair", "gap_warning", "pair_inputs", "pairs_from_inputs", "pair_error",
           "prompt_set_upload"]

CUSTOM = msg("Your own")
SET_LIMIT_NOTE = 20            # problems of an upload shown one by one; the rest are counted


@budgeted
def _checks(model_name: str, device: str, bos: int | None) -> dict:
    return examples.check_examples(cached_model(model_name, device), bos=bos)


def example_checks(model_name: str, device: str, bos: int | None, preferred_by_model: dict | None = None) -> dict:
    """{example name: examples.Check} on the loaded model (solved or not, and why), in the order the Example box
    offers them (:func:`attnkit.examples.ordered`: the solved ones first, the page's preferred one first among
    them)."""
    checks = _checks(model_name, device, bos)
    return {n: checks[n] for n in examples.ordered(model_name, checks, preferred_by_model)}


def example_names(checks: dict | None = None) -> list[str]:
    """The options of the Example box: the examples checked on the model (every registered example offered on
    it, :func:`attnkit.examples.examples_for`; without ``checks`` the general ones), then :data:`CUSTOM`."""
    return list(examples.EXAMPLES if checks is None else checks) + [CUSTOM]


def example_state(ctx, checks: dict, preferred_by_model: dict | None = None) -> dict:
    """The page state's defaults for the example and its texts: the example offered first for the loaded model
    (:func:`attnkit.examples.pick_default`: a solved one whenever the model solves any)."""
    first = examples.pick_default(ctx.model_name, checks, preferred_by_model) or next(iter(examples.EXAMPLES))
    return {"example": first, **{f: examples.texts(first)[f] for f in examples.FIELDS}}


def fit_example(state, first: str, checks: dict | None = None) -> None:
    """Keep the state's example true to its texts (a changed text makes it :data:`CUSTOM`), and one of the
    options (``checks``' examples; else ``first``)."""
    offered = {n: examples.texts(n) for n in example_names(checks)[:-1]}
    other = examples.texts(state.example)
    if state.example not in offered and other and all(getattr(state, f) == other[f] for f in examples.FIELDS):
        notice(t("Example “{name}” belongs to another model; this model's first example is loaded.", name=state.example))
        for f, text in (("example", first), *((f, examples.texts(first)[f]) for f in examples.FIELDS)):
            state.set(f, text)
    match_choice(state, "example", offered, examples.FIELDS, CUSTOM)
    state.fit("example", example_names(checks), first, what=t("Example"), because=t("not one of the choices"))


def _example_label(name: str, checks: dict) -> str:
    """An example's name in the reader's language (the names are catalog ids), marked when the model does not
    solve it."""
    return t(name) if name not in checks or checks[name].solved else t("{name} (not solved)", name=t(name))


def _apply_example(prefix: str, more: bool) -> None:
    ex = examples.texts(st.session_state.get(f"{prefix}_example"))
    if ex:
        st.session_state.update({f"{prefix}_{f}": ex[f] for f in examples.FIELDS})
        if more:
            st.session_state[f"{prefix}_more"] = ""


def pair_inputs(prefix: str, checks: dict, *, more: bool = False):
    """The Example box (each option marked when the model does not solve it), the clean and corrupted prompts
    (and, with ``more``, another corrupted prompt), the answer and distractor tokens. Returns the row's last
    column, for a page's own control beside them."""
    c0, c1 = st.columns([2.1, 3])          # the Example box holds "Indirect object, names swapped (not solved)"
    c0.selectbox(t("Example"), example_names(checks), key=f"{prefix}_example", on_change=_apply_example,
                 args=(prefix, more), format_func=lambda n: _example_label(n, checks),
                 help=t("Each example is checked against the loaded model: it is solved when the clean run prefers "
                        "the answer, the corrupted run does not, and the gap is at least {margin} logits. Examples "
                        "the model does not solve are marked.", margin=f"{examples.MARGIN:g}"))
    c1.text_input(t("Clean prompt"), key=f"{prefix}_clean", max_chars=4000)
    c1.text_input(t("Corrupted prompt (same number of tokens)"), key=f"{prefix}_corrupt", max_chars=4000)
    if more:
        c1.text_input(t("Another corrupted prompt (optional: discovery then runs on both pairs)"),
                      key=f"{prefix}_more", max_chars=4000)
    c2, c3, c4 = st.columns([1, 1, 2])
    c2.text_input(t("Answer token"), key=f"{prefix}_answer", max_chars=100,
                  help=t("One token. Without a leading space, ' word' is tried first; the token used is shown."))
    c3.text_input(t("Distractor token"), key=f"{prefix}_distractor", max_chars=100)
    return c4


def direction_radio(dg, key: str) -> str:
    """The patching direction (denoise / noise), with what each means."""
    return dg.radio(t("Direction"), list(patching.DIRECTIONS), key=key, horizontal=True, format_func=word,
                    help=t("denoise: run the corrupted prompt and patch one clean activation in (what restores the "
                           "answer?). noise: run the clean prompt and patch one corrupted activation in (what breaks "
                           "it?)."))


#: The identifiers of runs and directions, as shown (the values stay the identifiers).
WORDS = {"clean": msg("clean"), "corrupted": msg("corrupted"), "denoise": msg("denoise"), "noise": msg("noise")}


def word(name: str) -> str:
    """A run ("clean", "corrupted") or direction ("denoise", "noise") in the reader's language."""
    return str(WORDS.get(name, name))


def describe_pair(model, pair: patching.Pair) -> None:
    """The pair's notes (the answer token used, …), its length and where its prompts differ."""
    for n in pair.notes:
        st.caption(plain(n))
    clean, corrupt = ([show_spaces(t) for t in model.token_texts(ids)] for ids in (pair.clean, pair.corrupt))
    differ = [f"{i} ({clean[i]} → {corrupt[i]})" for i in range(pair.T) if pair.clean[i] != pair.corrupt[i]]
    st.caption(t("{n} tokens; the prompts differ at position(s) {where}.", n=pair.T,
                 where=plain(", ".join(differ[:8]) or t("none"))))


def gap_warning(clean_ld: float, corrupt_ld: float) -> None:
    """A warning when the logit differences leave nothing (or too little) to normalise by."""
    if abs(clean_ld - corrupt_ld) < patching.MIN_GAP:
        st.warning(t("The clean and corrupted runs give the same logit difference: nothing to normalise against "
                     "(the maps show NaN). Pick prompts that differ in what the answer depends on."), icon="⚠️")
    elif (why := examples.Check("", clean_ld, corrupt_ld).warning()) is not None:
        st.warning(plain(why), icon="⚠️")


def pair_error(err: patching.PatchError) -> str:
    """A PatchError's first line (without the tokenizations it appends)."""
    return str(err).split(" clean: ")[0]


def _show_pair_error(err: patching.PatchError) -> None:
    show_error(pair_error(err))
    if err.table is not None:
        st.caption(t("The two tokenizations side by side (✗ marks positions that differ):"))
        show_table(pd.DataFrame(err.table).assign(same=lambda d: np.where(d["same"], "", "✗")),
                   hide_index=True, width="stretch", height=min(420, 38 + 35 * len(err.table)))


def pairs_from_inputs(model, prefix: str, bos: int | None = None, *, more: bool = False) -> list:
    """[the pair] (and, with ``more`` and a second corrupted prompt, [the pair, the other pair]) from the
    inputs; on a pair the tokenizer cannot make, its one-line error (and the tokenizations) and the page stops."""
    get = st.session_state.get
    corrupted = [get(f"{prefix}_corrupt")]
    if more and (get(f"{prefix}_more") or "").strip():
        corrupted.append(get(f"{prefix}_more"))
    try:
        return [patching.make_pair(model, get(f"{prefix}_clean"), k, get(f"{prefix}_answer"),
                                   get(f"{prefix}_distractor"), bos=bos) for k in corrupted]
    except patching.PatchError as e:
        _show_pair_error(e)
        stop()


@dataclass
class PromptSet:
    """An uploaded prompt set: its file name, the pairs the model can take and where each came from."""

    name: str
    pairs: list
    rows: list[str]


def _make_pairs(model, got: prompts.PairSet, bos: int | None) -> tuple[PromptSet, list[str]]:
    pairs, rows, problems = [], [], list(got.problems)
    for n, r in enumerate(got.rows, 1):
        try:
            pairs.append(patching.make_pair(model, r.clean, r.corrupted, r.answer, r.distractor, bos=bos))
            rows.append(r.where)
        except patching.PatchError as e:
            problems.append(f"row {n} ({r.where}): {pair_error(e)}")
    return PromptSet(got.name, pairs, rows), problems + got.notes


def prompt_set_upload(prefix: str, model, bos: int | None = None) -> PromptSet | None:
    """The upload of a prompt set (.csv / .jsonl with the fields of :data:`attnkit.prompts.PAIR_FIELDS`),
    kept in the session; rows left out are warned about one line each. None until a usable file is there."""
    up = st.file_uploader(t("Prompt set: .csv or .jsonl with columns {fields}", fields=", ".join(prompts.PAIR_FIELDS)), type=["csv", "jsonl"],
                          key=f"{prefix}_upload")
    if up is not None:
        st.session_state[f"{prefix}_upload_data"] = (up.name, up.getvalue())
    stored = st.session_state.get(f"{prefix}_upload_data")
    if stored is None:
        st.caption(t("No file yet. Each row: a clean prompt, a corrupted prompt of the same token length, an answer "
                     "token and a distractor token (at most {n} pairs are used).", n=prompts.MAX_PAIRS))
        return None
    try:
        got = prompts.read_pairs(*stored)
    except prompts.PromptError as e:
        show_error(e)
        return None
    pset, problems = _make_pairs(model, got, bos)
    for p in problems[:SET_LIMIT_NOTE]:
        st.warning(plain(p), icon="⚠️")
    if len(problems) > SET_LIMIT_NOTE:
        st.caption(t("… and {n} more rows skipped.", n=len(problems) - SET_LIMIT_NOTE))
    if not pset.pairs:
        show_error(t("No usable pairs in the file."))
        return None
    return pset


# ----------------------------------------------------------------------------- patching as a job

def pair_key(pair: patching.Pair) -> tuple:
    """What a pair's results are keyed on (with the model and the device): the token ids, answer, distractor,
    position."""
    return tuple(pair.clean), tuple(pair.corrupt), pair.answer, pair.distractor, pair.pos


def patch_job(ctx, slot: str, pair: patching.Pair, target: str, per_position: bool, direction: str, label: str, *,
              auto: bool = True) -> patching.PatchResult | None:
    """Activation patching as a job (progress, Stop, the last result kept and marked stale), or None until run."""
    w = cached_model(ctx.model_name, ctx.device).weights
    return job_result(slot, (ctx.model_name, ctx.device, pair_key(pair), target, per_position, direction), label,
                      lambda progress: patching.patch(w, pair, target, per_position=per_position, direction=direction,
                                                      progress=progress), auto=auto)


def patch_set_job(ctx, slot: str, pairs: list, target: str, per_position: bool, direction: str) -> list | None:
    """Every pair of a prompt set patched, as one job whose progress counts the patched runs of all pairs."""
    w = cached_model(ctx.model_name, ctx.device).weights

    def work(progress):
        return [patching.patch(w, pr, target, per_position=per_position, direction=direction,
                               progress=lambda d, t, i=i: progress(i * t + d, len(pairs) * t))
                for i, pr in enumerate(pairs)]
    return job_result(slot, (ctx.model_name, ctx.device, tuple(map(pair_key, pairs)), target, per_position, direction),
                      t("Patching {n} pairs", n=len(pairs)), work)
