"""Verify: attnkit and HuggingFace in float32, each against HuggingFace in float64, layer by layer."""
import pandas as pd
import streamlit as st
import torch

from attnkit import tolerances as TOL
from attnkit import app as ui
from attnkit import verify as verify_lib
from attnkit.charts import verify as verify_charts
from attnkit.i18n import t

ctx = ui.page("verify")

ids = ctx.ids
if ctx.all_selected:
    st.caption(t("All prompts are selected: the first one is verified."))
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
st.markdown(t(
    "The exact answer is HuggingFace's `{cls}` run in **float64** on the CPU. On the same **{n} tokens**, attnkit "
    "and HuggingFace each run in float32 and their errors against it are measured for every layer's attention "
    "patterns and block output, the final norm and the logits (and generation's step logits). attnkit passes when "
    "its error is no larger than HuggingFace's own allows; attnkit run in float64 must also equal the reference: "
    "that check has no rounding in it and catches a wrong formula. Devices: {devices}.",
    cls=ctx.model.hf_model.__class__.__name__, n=f"{len(ids):,}", devices=", ".join(devices)))
st.caption(t("Rule: {rule}. Patterns are compared in absolute terms, the rest relative to the largest entry.",
             rule=str(TOL.RULE)))


def _verify(m, name: str, ids: tuple, progress) -> dict:
    """One device: the layer-by-layer report (and generation's), as a JSON-ready dict."""
    tokens = torch.tensor(ids, device=m.device)
    pair = verify_lib.float64_pair(m.hf_model, m.weights)
    n_new = min(8, m.config.n_ctx - len(ids))
    rep = verify_lib.compare(m.hf_model, m.weights, tokens, name=name, pair=pair,
                    progress=lambda d, n: progress(d, n + (4 if n_new > 0 else 0)))
    if n_new > 0:                      # greedy decoding with attnkit's KV cache against HF generate
        rep.generation = verify_lib.compare_generation(m.hf_model, m.weights, tokens, n_new, pair=pair,
                                              progress=lambda d, n: progress(5 + d, 5 + n))
    out = rep.to_dict()
    out["generation_line"] = rep.generation.line() if rep.generation is not None else None
    out["verdict"] = rep.verdict_text()
    return out


def _verify_all(models: dict, name: str, ids: tuple, progress) -> tuple[dict, list]:
    """Every device in turn (a job: progress counts the runs of all devices, Stop ends it between runs)."""
    results, failed = {}, []
    for k, (dev, m) in enumerate(models.items()):
        try:
            results[dev] = _verify(m, name, ids, lambda d, n, k=k: progress(k * n + d, len(models) * n))
        except Exception as e:           # a device that cannot run is a message, not a traceback
            failed.append(f"{dev}: {e.__class__.__name__}: {str(e)[:200]}")
    return results, failed


key = (ctx.model_name, tuple(ids), tuple(devices))
if st.button(t("Run verification"), key="vf_run", type="primary"):
    st.session_state["vf_requested"] = key
if st.session_state.get("vf_requested") != key:
    st.info(t("Press **Run verification** (results are kept per model, device and prompt)."))
    ui.stop()
models = {dev: ui.cached_model(ctx.model_name, dev) for dev in devices}     # loaded here, not in the job's thread
shown = ui.job("vf_job", key, t("Running HuggingFace and attnkit on {devices}", devices=", ".join(devices)),
               lambda progress: _verify_all(models, ctx.model_name, tuple(ids), progress))
if shown is None:                          # running (progress and Stop above), or stopped
    ui.stop()
results, failed = shown.result
for f in failed:
    ui.show_error(t("Verification could not run on {device}", device=f))
if not results:
    ui.stop()

ok = all(r["ok"] for r in results.values()) and not failed
summary = ", ".join(f"{dev}: {'PASS' if r['ok'] else 'FAIL'}" for dev, r in results.items())
if ok:
    st.success(t("PASS — attnkit is as close to the exact answer as HuggingFace itself is ({summary}).",
                 summary=summary), icon="✅")
else:
    why = " ".join(r["verdict"] for r in results.values() if not r["ok"])
    st.error(f"FAIL — {summary}. {why}", icon="❌")  # internal text: verdicts written by attnkit.verify

NUM = st.column_config.NumberColumn(format="%.2e")
frames = []
for dev, r in results.items():
    st.subheader(f"{dev} · {'PASS' if r['ok'] else 'FAIL'}")
    if r["reference"].get("note"):
        st.info(r["reference"]["note"])  # internal text: the memory note written by attnkit.verify
    rows = verify_lib.checks(r, dev)
    ui.show_table(rows.drop(columns=["run"]), cells=("layer", "quantity"), hide_index=True, width="stretch",
                  column_config={c: NUM for c in ("attnkit error", "HF error", "allowed", "float64 |Δ|")})
    st.altair_chart(verify_charts.verify_chart(rows, title=t("error against HuggingFace in float64 ({device})",
                                                             device=dev)), width="stretch")
    ui.show_table(pd.DataFrame({"": [t("device"), t("reference"), *r["versions"]],
                                t("value"): [r["device"], t("float64 on the CPU, {n} tokens",
                                                            n=f"{r['reference']['n_tokens']:,}"),
                                          *map(str, r["versions"].values())]}),
                  hide_index=True, width="stretch")
    frames.append(rows)
    if r.get("generation_line"):
        st.caption(r["generation_line"])  # internal text: numbers measured by attnkit.verify
st.caption(t("Circles: attnkit's float32 error; squares: HuggingFace's own; dashes: the most attnkit may have; "
             "crosses: attnkit in float64. Exact zeros are drawn at {floor}.", floor=f"{verify_charts.LOG_FLOOR:g}"))

df = pd.concat(frames, ignore_index=True)
chart = verify_charts.verify_chart(df)
payload = {"prompt": ctx.text, "n_tokens": len(ids), "ids": list(map(int, ids)), "ok": ok, "runs": results,
           "errors": failed, "rule": TOL.RULE}
c1, c2 = st.columns([1, 3])
c1.download_button(t("Report (JSON)"), ui.json_bytes(payload), file_name="attnkit_verify.json",
                   mime="application/json", key="vf_json")
with c2:
    ui.download_buttons(df, chart, stem="attnkit_verify", meta=ui.meta_for(ctx), key="vf")
