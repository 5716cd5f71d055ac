"""Verify: attnkit's GPT-2 against HuggingFace's on the current model and prompt, layer by layer."""
import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import verify as V
from attnkit.charts import verify as C

ctx = ui.page("Verify", "✅")

ids = ctx.ids
if ctx.all_selected:
    st.caption("All prompts are selected: the first one is verified.")
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
st.markdown(
    f"Runs HuggingFace's `{ctx.model.hf_model.__class__.__name__}` (eager attention) and attnkit's own forward pass "
    f"on the same **{len(ids):,} tokens** and compares, for every layer, the block output (relative to its largest "
    "entry, since GPT-2's residual stream reaches the thousands) and every head's attention pattern, then the "
    "final LayerNorm and the logits. Devices: " + ", ".join(devices) + "."
)
st.caption(f"Tolerances: patterns ≤ {V.TOL_PATTERN:g} (absolute), hidden states ≤ {V.TOL_HIDDEN_REL:g} "
           f"(relative), logits ≤ {V.TOL_LOGITS:g} (absolute).")


@st.cache_data(show_spinner=False, max_entries=16)
def _verify(name: str, device: str, ids: tuple) -> dict:
    m = ui.cached_model(name, device)
    t = torch.tensor(ids, device=m.device)
    rep = V.compare(m.hf_model, m.weights, t, name=name)
    n_new = min(8, m.config.n_ctx - len(ids))
    if n_new > 0:                      # greedy decoding with attnkit's KV cache against HF generate
        rep.generation = V.compare_generation(m.hf_model, m.weights, t, n_new)
    out = rep.to_dict()
    out["generation_line"] = rep.generation.line() if rep.generation is not None else None
    return out


key = (ctx.model_name, tuple(ids), tuple(devices))
if st.button("Run verification", key="vf_run", type="primary"):
    results, failed = {}, []
    for dev in devices:
        with st.spinner(f"Running HuggingFace and attnkit on {dev} …"):
            try:
                results[dev] = _verify(ctx.model_name, dev, tuple(ids))
            except Exception as e:           # a device that cannot run is a message, not a traceback
                failed.append(f"{dev}: {e.__class__.__name__}: {str(e)[:200]}")
    st.session_state["vf_result"] = (key, results, failed)

stored = st.session_state.get("vf_result")
if stored is None or stored[0] != key:
    st.info("Press **Run verification** (results are cached per model, device and prompt).")
    st.stop()
_, results, failed = stored
for f in failed:
    ui.show_error(f"Verification could not run on {f}")
if not results:
    st.stop()

ok = all(r["ok"] for r in results.values()) and not failed
summary = ", ".join(f"{dev}: {'PASS' if r['ok'] else 'FAIL'}" for dev, r in results.items())
if ok:
    st.success(f"PASS — attnkit equals HuggingFace within tolerance ({summary}).", icon="✅")
else:
    st.error(f"FAIL — {summary}.", icon="❌")

frames = []
cols = st.columns(len(results))
for col, (dev, r) in zip(cols, results.items()):
    with col:
        st.subheader(f"{dev} · {'PASS' if r['ok'] else 'FAIL'}")
        table = pd.DataFrame(r["layers"]).rename(columns={
            "hidden_abs": "hidden max|Δ|", "hidden_max": "max|h|", "hidden_rel": "hidden relative",
            "pattern_abs": "pattern max|Δ|"})
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3e")
                                    for c in ("hidden max|Δ|", "max|h|", "hidden relative", "pattern max|Δ|")})
        rows = V.checks(r, dev)
        final = (rows[rows["layer"] == "final"].drop(columns=["layer", "run"])
                 .rename(columns={"quantity": "after the last layer"}))
        st.dataframe(final, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3e") for c in ("max |Δ|", "tolerance")})
        st.dataframe(pd.DataFrame({"": ["device", *r["versions"]],
                                   "value": [r["device"], *map(str, r["versions"].values())]}),
                     hide_index=True, width="stretch")
        frames.append(rows)
        if r.get("generation_line"):
            st.caption(r["generation_line"])  # internal text: numbers measured by attnkit.verify

df = pd.concat(frames, ignore_index=True)
chart = C.verify_chart(df)
st.altair_chart(chart, width="stretch")
st.caption(f"Dashed lines: each quantity's tolerance. Exact zeros are drawn at {C.LOG_FLOOR:g}.")

payload = {"prompt": ctx.text, "n_tokens": len(ids), "ids": list(map(int, ids)), "ok": ok, "runs": results,
           "errors": failed}
c1, c2 = st.columns([1, 3])
c1.download_button("Report (JSON)", ui.json_bytes(payload), file_name="attnkit_verify.json",
                   mime="application/json", key="vf_json")
with c2:
    ui.download_buttons(df, chart, stem="attnkit_verify", meta=ui.meta_for(ctx), key="vf")
