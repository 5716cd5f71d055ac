"""Ablations: switch off one design choice of attention and see whether the claim made for it holds."""
from dataclasses import dataclass

import streamlit as st

from attnkit import ablations as ablation_lib
from attnkit import app as ui
from attnkit.charts import ablations as ablation_charts



@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys ab_*, URL parameters by field name)."""

    prefix = "ab"
    kind: str = ui.param(None)            # the first intervention the model can take
    head_layer: int = 0
    head: int = 0
    layers: list[int] = ui.param(None)    # every layer
    heads_opt: str = "all"
    map_mode: str = ui.param(None)        # the intervention above when it is a head ablation


ctx = ui.page("ablations")
cfg = ctx.model.config
L, H = cfg.n_layers, cfg.n_heads
texts = [ids for ids in (ctx.encode(t)[0] for t in ctx.prompts) if ids] if ctx.all_selected else [ctx.ids]
if not any(texts):
    ui.show_error("The prompt has no tokens.")
    ui.stop()
if ctx.all_selected:
    st.caption(f"All {len(ctx.prompts)} prompts: losses are pooled over every predicted token, per-layer numbers "
               "averaged over the prompts.")
ids_key = tuple(tuple(i) for i in texts)




def _on_demand(label: str, key: str, inputs: tuple, compute):
    """A job started by a button labelled ``label``; its result (or the previous one, labelled stale, while a
    new one computes), or None."""
    return ui.job_result(key, inputs, label.removeprefix("Run the ").capitalize(), compute, auto=False, button=label)


def _chart(df, ch, name: str, width: str = "stretch"):
    st.altair_chart(ch, width=width)
    ui.download_buttons(df, ch, name, meta, key=f"abl-{name}-")


# ----------------------------------------------------------------------------- choices

status = {k.name: k.available(cfg) for k in ablation_lib.kinds()}
usable = [n for n, (ok, _) in status.items() if ok]
for n, (ok, why) in status.items():
    if not ok:
        st.caption(f"Not available on this model: **{ablation_lib.get_kind(n).label}** — {why}")  # internal text: the registry's words
state = Inputs.load(kind=usable[0], layers=list(range(L)))
state.fit("kind", usable, usable[0], what="Intervention", because="this model cannot take it (see above)",
          fmt=lambda n: ablation_lib.get_kind(n).label)
c1, c2, c3 = st.columns(3)
name = c1.selectbox("Intervention", usable, key="ab_kind", format_func=lambda n: ablation_lib.get_kind(n).label)
kind = ablation_lib.get_kind(name)
heads: list[tuple[int, int]] = []
layers = None
if kind.heads == "required":
    state.fit("head_layer", range(L), 0, what="Layer", because=f"the model has {L} layers", basis=ctx.model_name)
    state.fit("head", range(H), 0, what="Head", because=f"the model has {H} heads per layer", basis=ctx.model_name)
    hl = c2.selectbox("Layer", range(L), key="ab_head_layer", format_func=lambda l: f"L{l}")
    hh = c3.selectbox("Head", range(H), key="ab_head", format_func=lambda h: f"H{h}",
                      help="The head's number in its layer; the intervention applied is named below the claim.")
    heads = [(hl, hh)]
else:
    state.fit_many("layers", range(L), list(range(L)), what="Layers", because=f"the model has {L} layers")
    chosen = c2.multiselect("Layers (scope)", list(range(L)), key="ab_layers",
                            format_func=lambda l: f"L{l}", help="The layers the intervention is applied to.")
    if not chosen:
        st.warning("Choose at least one layer to ablate.", icon="⚠️")
        ui.stop()
    layers = None if len(chosen) == L else sorted(chosen)
    if kind.heads == "optional":
        state.fit("heads_opt", ["all"] + [str(h) for h in range(H)], "all", what="Heads",
                  because=f"the model has {H} heads per layer")
        pick = c3.selectbox("Heads", ["all"] + [str(h) for h in range(H)], key="ab_heads_opt",
                            format_func=lambda o: "all heads" if o == "all" else f"head {o} of each layer",
                            help="Every head of the chosen layers, or one head in each of them.")
        heads = [] if pick == "all" else [(l, int(pick)) for l in (layers or range(L))]

spec = ablation_lib.parse_spec(name + (":" + ",".join(ablation_lib.head_name(l, h) for l, h in heads) if heads else ""), layers, L, H)
meta = ui.meta_for(ctx, intervention=str(spec))
stem = "ablation-" + str(spec).translate(str.maketrans({":": "_", "@": "_L", ",": "-", "=": ""}))

# ----------------------------------------------------------------------------- claim and verdict

st.markdown(f"**Claim tested.** {kind.claim}")
st.markdown(f"**Definition.** {kind.definition}")
if kind.latex:
    st.latex(kind.latex)
st.caption(f"Measured: {kind.measures} Applied as `{spec}`.")

w = ctx.model.weights


def _verdict(res) -> None:
    """The verdict, the loss change, the evidence and the per-layer charts of a :class:`ablation_lib.Result`."""
    v = res.verdict
    {ablation_lib.SUPPORTED: st.success, ablation_lib.NOT_SUPPORTED: st.error}.get(v.status, st.warning)(
        f"Verdict: {v.status}. {v.text}")
    if v.settle:
        st.info(f"What would settle it: {v.settle}.", icon="🔎")
    st.caption(f"Rule: {v.rule}")

    st.subheader("Next-token loss")
    if res.effect is None:
        st.info(ablation_lib.ONE_TOKEN_NOTE, icon="ℹ️")
    else:
        m1, m2, m3 = st.columns([1, 1, 1.6])      # the interval is two numbers
        m1.metric("baseline (nats/token)", f"{res.baseline.nats:.4f}", help=f"perplexity {res.baseline.perplexity:.2f}")
        m2.metric("ablated (nats/token)", f"{res.ablated.nats:.4f}", delta=f"{res.effect.delta:+.4f}",
                  delta_color="inverse", help=f"perplexity {res.ablated.perplexity:.2f}")
        m3.metric("95 % interval of the change", f"{res.effect.lo:+.4f} … {res.effect.hi:+.4f}",
                  help=f"bootstrap over {res.effect.units:,} {res.effect.over}")
    for n in res.notes:
        st.caption(n)  # internal text: notes written by attnkit.ablations.measure
    if res.evidence:
        st.dataframe(ablation_charts.evidence_frame(res), hide_index=True, width="stretch")

    charted = [m for m in ablation_lib.get_kind(res.kind).metrics if m.chart]
    if charted:
        st.subheader("Per layer, baseline vs ablated")
        st.caption("Faded bars: layers outside the scope (their numbers still change when an earlier layer is "
                   "ablated, since their input does).")
        for col, metric in zip(st.columns(len(charted)), charted):
            df = ablation_charts.layer_metric_frame(res, metric)
            with col:
                _chart(df, ablation_charts.layer_metric_chart(df, metric), f"{stem}-{metric.key}")
    if res.per_position:
        df = ablation_charts.position_frame(res, ui.token_labels(ctx.tokens) if len(texts) == 1 else None)
        _chart(df, ablation_charts.position_chart(df), f"{stem}-positions")
    st.download_button("All numbers (JSON)", ui.json_bytes(res.to_dict()), file_name=f"{stem}.json",
                       mime="application/json", key="abl-json")


with ui.guard("The ablation"):
    shown = ui.job("ab_measure", (ctx.key, ids_key, str(spec)), "Running the baseline and the ablated model",
                   lambda progress: ablation_lib.measure(w, texts, spec, progress=progress))
    if shown is not None:
        _verdict(shown.result)

    # ------------------------------------------------------------------------- sweeps
    st.subheader("Which layers matter: ablate each layer alone, then all")
    sweep = _on_demand("Run the layer sweep", "ab_sweep", (ctx.key, ids_key, name),
                       lambda progress: ablation_lib.layer_sweep(w, texts, spec, progress))
    if sweep is not None:
        df = ablation_charts.sweep_frame(sweep)
        _chart(df, ablation_charts.sweep_chart(df, f"{kind.label}: loss change per layer (and all)"), f"{stem}-sweep")

    st.subheader("Which heads matter: the layer × head map")
    modes = [k.name for k in ablation_lib.head_kinds()]
    state.fit("map_mode", modes, name if name in modes else modes[0], what="Head ablation",
              because="not a head ablation", fmt=lambda n: ablation_lib.get_kind(n).label)
    mode = st.selectbox("Head ablation", modes, key="ab_map_mode", format_func=lambda n: ablation_lib.get_kind(n).label)
    st.caption(f"Each of the {L}·{H} = {L * H} heads ablated alone ({L * H} runs per text); cells show the loss "
               "change in nats/token, the tooltip its 95 % interval.")
    hm = _on_demand("Run the head map", "ab_map", (ctx.key, ids_key, mode),
                    lambda progress: ablation_lib.head_sweep(w, texts, mode, progress))
    if hm is not None:
        df = ablation_charts.head_map_frame(hm)
        _chart(df, ablation_charts.head_map_chart(df, f"{ablation_lib.get_kind(mode).label}: loss change per head"),
               f"ablation-headmap-{mode}", width="content")
        st.caption("Largest increases: " + ", ".join(f"{n} ({x:+.4f})" for n, x in hm.top(5)))  # internal text: head names

    st.subheader("Every claim on this text")
    st.caption("Each layer-level intervention on all layers, with its verdict.")
    claims = _on_demand("Check every claim", "ab_all", (ctx.key, ids_key), lambda progress: ablation_lib.check_all(w, texts, progress))
    if claims is not None:
        df = ablation_charts.claims_frame(claims)
        st.dataframe(df, hide_index=True, width="stretch",          # the verdict first: never cut at 1280 px
                     column_order=("intervention", "verdict", "effect", "claim", "measured"),
                     column_config={"intervention": st.column_config.TextColumn(pinned=True),
                                    "verdict": st.column_config.TextColumn(width=150, pinned=True),
                                    "claim": st.column_config.TextColumn(width="medium"),
                                    "measured": st.column_config.TextColumn(width="large")})
        ui.download_buttons(df, None, "ablation-claims", meta, key="abl-claims-")
