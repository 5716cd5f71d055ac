"""Ablations: switch off one design choice of attention and measure what the seeds say would happen."""
import pandas as pd
import streamlit as st
import torch

from attnkit import ablations as A
from attnkit import ui
from attnkit.charts import ablations as C

ctx = ui.page("Ablations", "✂️")

cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads
if ctx.all_selected:
    ids_list = [ids for ids in (ctx.encode(t)[0] for t in ctx.prompts) if ids]
    st.caption(f"All {len(ctx.prompts)} prompts: losses are pooled over every predicted token, per-layer numbers "
               "averaged over the prompts.")
else:
    ids_list = [ctx.ids]
if not ids_list or not any(ids_list):
    ui.show_error("The prompt has no tokens.")
    st.stop()
ids_key = tuple(tuple(int(i) for i in ids) for ids in ids_list)
n_texts = len(ids_list)

LABELS = {
    "v=x": "V = X (no value/output projection)",
    "wk=wq": "W_K = W_Q (one projection for looking and being looked at)",
    "no-scale": "No 1/√d scaling",
    "no-mask": "No causal mask (future visible)",
    "zero-head": "Zero-ablate a head",
    "mean-head": "Mean-ablate a head",
}
CHARTS = {   # per-layer metrics drawn for each kind: (metric, log scale)
    "v=x": [("hull distance", True), ("effective dim of output", False), ("effective dim of x̂", False)],
    "wk=wq": [("asymmetry", False), ("attention on self", False), ("rows whose top key is self", False)],
    "no-scale": [("entropy, nats", False), ("largest weight", False)],
    "no-mask": [("attention on future keys", False)],
    "zero-head": [],
    "mean-head": [],
}


# ----------------------------------------------------------------------------- cached computations

def _model(name: str, device: str):
    return ui.cached_model(name, device)


@st.cache_data(show_spinner=False, max_entries=8)
def _means(name: str, device: str, ids: tuple) -> torch.Tensor:
    return A.head_means(_model(name, device).weights, [list(i) for i in ids])


@st.cache_data(show_spinner=False, max_entries=32)
def _measure(name: str, device: str, ids: tuple, spec: str) -> dict:
    sp = A.parse_spec(spec)
    means = _means(name, device, ids) if sp.kind == "mean-head" else None
    return A.measure(_model(name, device).weights, [list(i) for i in ids], sp, means=means)


@st.cache_data(show_spinner=False, max_entries=512)
def _loss(name: str, device: str, ids: tuple, spec: str) -> tuple[float, int]:
    """(nats/token, predicted tokens); spec '' = the unmodified model."""
    w = _model(name, device).weights
    iv = None
    if spec:
        sp = A.parse_spec(spec)
        iv = A.build(sp, means=_means(name, device, ids) if sp.kind == "mean-head" else None)
    lo = A.loss(w, [list(i) for i in ids], iv)
    return lo.nats, lo.tokens


def _show(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ----------------------------------------------------------------------------- choices

if st.session_state.get("ab_kind") not in A.KINDS:
    st.session_state["ab_kind"] = "v=x"
c1, c2, c3 = st.columns([2, 2, 2])
kind = c1.selectbox("Intervention", A.KINDS, key="ab_kind", format_func=LABELS.get)
heads: list[tuple[int, int]] = []
layers = None
if kind in A.HEAD_KINDS:
    if st.session_state.get("ab_head_layer") not in range(L):
        st.session_state["ab_head_layer"] = 0
    if st.session_state.get("ab_head") not in range(H):
        st.session_state["ab_head"] = 0
    hl = c2.selectbox("Layer", range(L), key="ab_head_layer")
    hh = c3.selectbox("Head", range(H), key="ab_head")
    heads = [(hl, hh)]
else:
    if "ab_layers" not in st.session_state or any(l not in range(L) for l in st.session_state["ab_layers"]):
        st.session_state["ab_layers"] = list(range(L))
    chosen = c2.multiselect("Layers (scope)", list(range(L)), key="ab_layers",
                            help="The layers the intervention is applied to (default: all).")
    if not chosen:
        st.warning("Choose at least one layer to ablate.", icon="⚠️")
        st.stop()
    layers = None if len(chosen) == L else sorted(chosen)
    if kind in ("wk=wq", "no-scale"):
        opts = ["all"] + list(range(H))
        if st.session_state.get("ab_heads_opt") not in opts:
            st.session_state["ab_heads_opt"] = "all"
        pick = c3.selectbox("Heads", opts, key="ab_heads_opt",
                            format_func=lambda o: "all heads" if o == "all" else f"head {o} only",
                            help="Apply to every head of the chosen layers, or to one head in each of them.")
        if pick != "all":
            heads = [(l, int(pick)) for l in (layers or range(L))]

try:
    spec = A.parse_spec(kind + (":" + ",".join(f"{l}.{h}" for l, h in heads) if heads else ""),
                        layers if kind not in A.HEAD_KINDS else None, L, H)
except A.AblationError as e:
    ui.show_error(e)
    st.stop()

st.markdown(f"**Definition.** {A.DEFINITIONS[kind]}")
if kind == "v=x":
    st.latex(r"\mathrm{attn\_out}_\ell = \frac{1}{H}\sum_{h=1}^{H} \mathrm{softmax}\!\Big(\frac{q_h k_h^\top}{\sqrt{d_{head}}}"
             r" + M\Big)\,\hat X_\ell,\qquad \hat X_\ell = \mathrm{ln}_1(X_\ell)\in\mathbb{R}^{T\times d_{model}}")
    st.caption("The mean over heads of row-stochastic patterns is row-stochastic, so each output row is a convex "
               "combination of the rows of x̂ (the scores still use the real W_Q and W_K).")

meta = ui.meta_for(ctx, intervention=str(spec))
stem = str(spec).replace(":", "_").replace("@", "_L").replace(",", "-").replace("=", "")

with ui.guard("The ablation"):
    with st.spinner("Running baseline and ablated model …"):
        res = _measure(ctx.model_name, ctx.device, ids_key, str(spec))

    # ------------------------------------------------------------------------- claim vs measurement
    st.subheader("The seed's claim, and what this model does")
    left, right = st.columns(2)
    with left:
        st.markdown("**Claim** (from the seed articles, in our words)")
        st.write(res["claim"])
    with right:
        v = res["verdict"]
        st.markdown(f"**Measured** — verdict: **{v['status']}**")
        shown = {"supported": st.success, "mixed": st.warning, "not supported": st.error}.get(v["status"], st.info)
        shown(v["text"])

    lo = res["loss"]
    st.subheader("Next-token loss")
    if lo["predicted tokens"] == 0:
        st.info(A.ONE_TOKEN_NOTE, icon="ℹ️")
    else:
        m1, m2, m3 = st.columns(3)
        m1.metric("baseline (nats/token)", f"{lo['baseline nats/token']:.4f}",
                  help=f"perplexity {lo['baseline perplexity']:.2f}")
        m2.metric("ablated (nats/token)", f"{lo['ablated nats/token']:.4f}",
                  delta=f"{lo['increase nats/token']:+.4f}", delta_color="inverse",
                  help=f"perplexity {lo['ablated perplexity']:.2f}")
        m3.metric("perplexity", f"{lo['baseline perplexity']:.2f} → {lo['ablated perplexity']:.2f}")
        st.caption(f"Cross-entropy of the next token, averaged over {lo['predicted tokens']:,} predicted tokens "
                   f"in {n_texts} text(s).")
        if lo["one-token texts skipped"]:
            st.caption(f"{lo['one-token texts skipped']} one-token text(s) predict nothing and were left out.")
    for n in res["notes"]:
        if n != A.ONE_TOKEN_NOTE:
            st.caption(n)  # internal text: notes written by attnkit.ablations.measure

    # ------------------------------------------------------------------------- per-layer numbers
    if res["per_layer"]:
        st.subheader("Per layer, baseline vs ablated")
        st.caption("Faded bars: layers outside the scope (their numbers still change when an earlier layer is "
                   "ablated, since their input does).")
        cols = st.columns(len(CHARTS[kind]) or 1)
        for i, (metric, log) in enumerate(CHARTS[kind]):
            df = C.layer_metric_frame(res["per_layer"], metric)
            if df["value"].notna().any():
                ch = C.layer_metric_chart(df, metric, log=log)
                with cols[i]:
                    st.altair_chart(ch, width="stretch")
                    ui.download_buttons(df, ch, f"ablation-{stem}-{i}", meta, key="abl-")
            else:
                cols[i].caption(f"{metric}: not defined here (needs at least two tokens).")
        table = pd.DataFrame(res["per_layer"])
        st.dataframe(table, hide_index=True, width="stretch")
        ui.download_buttons(table, None, f"ablation-{stem}-layers", meta, key="abl-table-")
    if kind == "no-mask" and res["per_position"]:
        labels = ui.token_labels(ctx.tokens) if n_texts == 1 else None
        ch = C.position_chart(res["per_position"], labels)
        st.altair_chart(ch, width="stretch")
        ui.download_buttons(pd.DataFrame(res["per_position"]), ch, f"ablation-{stem}-positions", meta,
                            key="abl-pos-")
    if res["summary"]:
        st.dataframe(pd.DataFrame({"measure": list(res["summary"]),
                                   "value": [_show(v) for v in res["summary"].values()]}),
                     hide_index=True, width="stretch")
    st.download_button("All numbers (JSON)", ui.json_bytes(res), file_name=f"ablation-{stem}.json",
                       mime="application/json", key="abl-json")

    # ------------------------------------------------------------------------- sweeps
    st.subheader("Which layers matter: ablate each layer alone, then all")
    jobs = A.sweep_specs(spec, L, H)
    n_fwd = len(jobs) * sum(1 for i in ids_list if len(i) > 1)
    st.caption(f"{len(jobs)} runs of the ablation ({'every head of ' if kind in A.HEAD_KINDS else ''}one layer at a "
               f"time, then all layers) · {n_fwd:,} forward passes.")
    if st.button("Run the layer sweep", key="ab_sweep_btn"):
        st.session_state["ab_sweep_on"] = True
    if st.session_state.get("ab_sweep_on"):
        base, ntok = _loss(ctx.model_name, ctx.device, ids_key, "")
        if ntok == 0:
            st.info(A.ONE_TOKEN_NOTE, icon="ℹ️")
        else:
            bar = st.progress(0.0, text="Layer sweep")
            rows = []
            for i, (label, sp) in enumerate(jobs):
                bar.progress(i / len(jobs), text=f"Layer sweep: {label} ({i + 1}/{len(jobs)})")
                nats, _ = _loss(ctx.model_name, ctx.device, ids_key, str(sp))
                rows.append({"scope": label, "nats/token": nats, "increase": nats - base,
                             "perplexity": float(torch.tensor(nats).exp())})
            bar.empty()
            ch = C.sweep_chart(rows, kind)
            st.altair_chart(ch, width="stretch")
            df = pd.DataFrame(rows)
            st.dataframe(df, hide_index=True, width="stretch")
            ui.download_buttons(df, ch, f"ablation-sweep-{kind.replace('=', '')}", meta, key="abl-sweep-")

    st.subheader("Which heads matter: the layer × head map")
    opts = list(A.HEAD_KINDS)
    if st.session_state.get("ab_map_mode") not in opts:
        st.session_state["ab_map_mode"] = kind if kind in opts else "zero-head"
    mode = st.selectbox("Head ablation", opts, key="ab_map_mode", format_func=LABELS.get)
    n_map = L * H * sum(1 for i in ids_list if len(i) > 1)
    st.caption(f"Each of the {L}·{H} = {L * H} heads ablated alone: {n_map:,} forward passes (plus the baseline); "
               "fine for small models, minutes for large ones on a CPU.")
    if st.button("Run the head map", key="ab_map_btn"):
        st.session_state["ab_map_on"] = True
    if st.session_state.get("ab_map_on"):
        base, ntok = _loss(ctx.model_name, ctx.device, ids_key, "")
        if ntok == 0:
            st.info(A.ONE_TOKEN_NOTE, icon="ℹ️")
        else:
            bar = st.progress(0.0, text="Head map")
            inc = [[0.0] * H for _ in range(L)]
            for l in range(L):
                for h in range(H):
                    bar.progress((l * H + h) / (L * H), text=f"Head map: head {l}.{h} ({l * H + h + 1}/{L * H})")
                    nats, _ = _loss(ctx.model_name, ctx.device, ids_key, f"{mode}:{l}.{h}")
                    inc[l][h] = nats - base
            bar.empty()
            df = C.head_map_frame(inc)
            ch = C.head_map_chart(df, mode)
            st.altair_chart(ch, width="content")
            top = df.sort_values("increase", ascending=False).head(5)
            st.caption("Largest increases: " + ", ".join(f"{int(r.layer)}.{int(r.head)} ({r.increase:+.4f})"
                                                         for r in top.itertuples()))
            ui.download_buttons(df, ch, f"ablation-headmap-{mode}", meta, key="abl-map-")

    # ------------------------------------------------------------------------- overview
    st.subheader("Every claim on this text")
    st.caption("Each layer-level intervention applied to all layers, with its verdict (cached per text).")
    if st.button("Check every claim", key="ab_all_btn"):
        st.session_state["ab_all_on"] = True
    if st.session_state.get("ab_all_on"):
        bar = st.progress(0.0, text="Claims")
        kinds = [k for k in A.KINDS if k not in A.HEAD_KINDS]
        recs = []
        for i, k in enumerate(kinds):
            bar.progress(i / len(kinds), text=f"Claims: {LABELS[k]} ({i + 1}/{len(kinds)})")
            r = _measure(ctx.model_name, ctx.device, ids_key, k)
            recs.append({"intervention": LABELS[k], "claim": r["claim"], "verdict": r["verdict"]["status"],
                         "measured": r["verdict"]["text"], "loss increase (nats/token)": r["loss"]["increase nats/token"]})
        bar.empty()
        df = pd.DataFrame(recs)
        st.dataframe(df, hide_index=True, width="stretch",
                     column_config={"claim": st.column_config.TextColumn(width="large"),
                                    "measured": st.column_config.TextColumn(width="large")})
        ui.download_buttons(df, None, "ablation-claims", meta, key="abl-all-")
