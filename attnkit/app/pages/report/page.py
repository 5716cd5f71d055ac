"""Report card: every explanation method run on planted-circuit models — whose circuit is known by construction
(CIRCUIT.json) — and scored against it (:mod:`attnkit.calibration`). The shipped models' card is computed once per
process and kept on disk (:mod:`attnkit.report_card`); when it is not there yet a button computes it as a job
(progress and Stop), never holding the page. A model loaded from a folder of one's own that states a circuit is
scored on request (a button: minutes of work never start unasked)."""
from pathlib import Path

import pandas as pd
import streamlit as st

from attnkit import app as ui
from attnkit import calibration, planted_files, report_card
from attnkit.app.jobs import duration
from attnkit.i18n import t

ctx = ui.page("report")


def _mark(row: dict) -> str:
    """✓ pass, ✗ miss, or nothing (a method that does not apply): read from the verdict's message id."""
    kind = str(getattr(row["verdict"], "id", row["verdict"])).split(":")[0]
    return {"pass": " ✓", "miss": " ✗"}.get(kind, "")


def card_table(card: dict) -> pd.DataFrame:
    """One row per (method, metric), one column per model: the value with ✓ (pass) or ✗ (miss)."""
    rows: dict = {}
    for m in card["models"]:
        for r in m["methods"]:
            key = (str(calibration.METHOD_LABELS.get(r["method"], r["method"])), str(r["metric"]))
            value = "—" if r["value"] is None else f"{r['value']:.3g}"
            rows.setdefault(key, {})[m["name"]] = value + _mark(r)
    index = pd.MultiIndex.from_tuples(list(rows), names=[t("method"), t("metric")])
    return pd.DataFrame(list(rows.values()), index=index).reset_index().fillna("")


def verdicts(card: dict) -> None:
    """Each model's verdicts in full (what each pass or miss rests on), one expander per model."""
    for m in card["models"]:
        with st.expander(ui.plain(t("{model}: every verdict", model=m["name"]))):
            ui.show_table(pd.DataFrame({
                t("method"): [str(calibration.METHOD_LABELS.get(r["method"], r["method"])) for r in m["methods"]],
                t("metric"): [str(r["metric"]) for r in m["methods"]],
                t("verdict"): [str(r["verdict"]) for r in m["methods"]]}), hide_index=True, width="stretch")


def show_card(card: dict, name: str) -> None:
    table = card_table(card)
    ui.show_table(table, hide_index=True, width="stretch", height=38 + 35 * len(table))
    how = t("from the cache (computed once in {time})", time=duration(card["seconds"])) if card.get("cached") \
        else t("computed in {time}", time=duration(card["seconds"]))
    text = t("{n} model(s), {pairs} prompt pairs each; {how}.", n=len(card["models"]), pairs=card["pairs"], how=how)
    st.caption(text)  # internal text: numbers and the catalog's
    verdicts(card)
    ui.download_buttons(table, None, name, ui.meta_for(ctx), key=f"rc_{name}")


def shipped_section() -> None:
    st.subheader(t("The shipped planted models"))
    card = report_card.peek()
    if card is None:          # minutes of work: asked for with the button (progress and Stop while it runs)
        models = report_card.shipped()
        st.caption(t("Not computed on this machine yet: every method on {n} models takes minutes on a CPU. Once "
                     "computed, the card is kept (on disk, keyed by the models' content) for every later visit.",
                     n=len(models)))
        card = ui.job_result("rc_card", report_card.card_key(models), t("Compute the report card"),
                             lambda progress: report_card.report_card(progress=progress), auto=False)
    if card is not None:
        show_card(card, "report_card")


def own_section() -> None:
    """The sidebar's model, when it is a folder of one's own that states a circuit: scored on request."""
    st.subheader(t("A planted model of your own"))
    folder = planted_files.planted_folder(ctx.model.source)
    shipped = {Path(f).resolve() for _, f in report_card.shipped()}
    if folder is None or folder.resolve() in shipped:
        st.caption(t("Write a CIRCUIT.json into a model folder (docs/formats.md), then open the folder with the "
                     "sidebar's “Local folder…” to score it here, or run {command}.",
                     command="python -m attnkit calibrate --model FOLDER"))
        return
    models = [(folder.resolve().name, folder)]
    try:
        calibration.read_circuit(folder, ctx.model.config)
    except ValueError as e:
        ui.show_error(e)
        return
    card = ui.job_result("rc_own", report_card.card_key(models), t("Scoring every method on {model}",
                                                                     model=models[0][0]),
                         lambda progress: report_card.report_card(models, progress=progress), auto=False)
    if card is not None:
        show_card(card, "report_card_own")


st.caption(t("Each method is run on models whose weights were set by hand, so the circuit is known (CIRCUIT.json), "
             "and scored against it: ✓ pass, ✗ miss, with the bar each verdict uses below. Discovery's recall counts "
             "the edges the stated circuit needs (its required ones): an edge marked optional or negative that "
             "discovery can do without is not a miss."))
shipped_section()
own_section()
