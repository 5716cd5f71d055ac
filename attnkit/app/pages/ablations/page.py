"""Ablations: switch off one design choice of attention and see whether the claim made for it holds."""
from dataclasses import dataclass

import streamlit as st

from attnkit import ablations as ablation_lib
from attnkit import app as ui
from attnkit.charts import ablations as ablation_charts
from attnkit.i18n import status_label, t



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
    ui.show_error(t("The prompt has no tokens."))
    ui.stop()
if ctx.all_selected:
    st.caption(t("All {n} prompts: losses are pooled over every predicted token, per-layer numbers averaged over "
                 "the prompts.", n=len(ctx.prompts)))
ids_key = tuple(tuple(i) for i in texts)




def _on_demand(label: str, title: str, key: str, inputs: tuple, compute):
    """A job (``title``) started by a button labelled ``label``; its result (or the previous one, labelled stale, while a
    new one computes), or None."""
    return ui.job_result(key, inputs, title, compute, auto=False, button=label)


def _chart(df, ch, name: str, width: str = "stretch"):
    st.altair_chart(ch, width=width)
    ui.download_buttons(df, ch, name, meta, key=f"abl-{name}-")


# ----------------------------------------------------------------------------- choices

status = {k.name: k.available(cfg) for k in ablation_lib.kinds()}
usable = [n for n, (ok, _) in status.items() if ok]
for n, (ok, why) in status.items():
    if not ok:
        st.caption(t("Not available on this model: **{kind}** — {why}", kind=ablation_lib.get_kind(n).label, why=why))  # internal text: the registry's words
state = Inputs.load(kind=usable[0], layers=list(range(L)))
state.fit("kind", usable, usable[0], what=t("Intervention"), because=t("this model cannot take it (see above)"),
          fmt=lambda n: str(ablation_lib.get_kind(n).label))
c1, c2, c3 = st.columns(3)
name = c1.selectbox(t("Intervention"), usable, key="ab_kind", format_func=lambda n: str(ablation_lib.get_kind(n).label))
kind = ablation_lib.get_kind(name)
heads: list[tuple[int, int]] = []
layers = None
if kind.heads == "required":
    state.fit_head(cfg, ctx.model_name, layer="head_layer")
    hl = c2.selectbox(t("Layer"), range(L), key="ab_head_layer", format_func=lambda l: f"L{l}")
    hh = c3.selectbox(t("Head"), range(H), key="ab_head", format_func=lambda h: f"H{h}",
                      help=t("The head's number in its layer; the intervention applied is named below the claim."))
    heads = [(hl, hh)]
else:
    state.fit_many("layers", range(L), list(range(L)), what=t("Layers"), because=t("the model has {n} layers", n=L))
    chosen = c2.multiselect(t("Layers (scope)"), list(range(L)), key="ab_layers",
                            format_func=lambda l: f"L{l}", help=t("The layers the intervention is applied to."))
    if not chosen:
        st.warning(t("Choose at least one layer to ablate."), icon="⚠️")
        ui.stop()
    layers = None if len(chosen) == L else sorted(chosen)
    if kind.heads == "optional":
        state.fit("heads_opt", ["all"] + [str(h) for h in range(H)], "all", what=t("Heads"),
                  because=t("the model has {n} heads per layer", n=H))
        pick = c3.selectbox(t("Heads"), ["all"] + [str(h) for h in range(H)], key="ab_heads_opt",
                            format_func=lambda o: t("all heads") if o == "all" else t("head {h} of each layer", h=o),
                            help=t("Every head of the chosen layers, or one head in each of them."))
        heads = [] if pick == "all" else [(l, int(pick)) for l in (layers or range(L))]

spec = ablation_lib.parse_spec(name + (":" + ",".join(ablation_lib.head_name(l, h) for l, h in heads) if heads else ""), layers, L, H)
meta = ui.meta_for(ctx, intervention=str(spec))
stem = "ablation-" + str(spec).translate(str.maketrans({":": "_", "@": "_L", ",": "-", "=": ""}))

# ----------------------------------------------------------------------------- claim and verdict

st.markdown(t("**Claim tested.** {claim}", claim=kind.claim))
st.markdown(t("**Definition.** {definition}", definition=kind.definition))
if kind.latex:
    st.latex(kind.latex)
st.caption(t("Measured: {what} Applied as `{spec}`.", what=kind.measures, spec=spec))

w = ctx.model.weights


def _verdict(res) -> None:
    """The verdict, the loss change, the evidence and the per-layer charts of a :class:`ablation_lib.Result`."""
    v = res.verdict
    {ablation_lib.SUPPORTED: st.success, ablation_lib.NOT_SUPPORTED: st.error}.get(v.status, st.warning)(
        t("Verdict: {status}. {measured}", status=status_label(v.status), measured=v.text))
    if v.why:
        st.markdown(t("**Why.** {why}", why=v.why))
    if v.caveat:
        st.warning(t("**What the loss change measures.** {caveat}", caveat=v.caveat), icon="⚖️")
    if v.settle:
        st.info(t("What would settle it: {settle}.", settle=v.settle), icon="🔎")
    st.caption(t("Rule: {rule}", rule=v.rule))

    st.subheader(t("Next-token loss"))
    if res.effect is None:
        st.info(str(ablation_lib.ONE_TOKEN_NOTE), icon="ℹ️")  # internal text: the library's message
    else:
        m1, m2, m3 = st.columns([1, 1, 1.6])      # the interval is two numbers
        m1.metric(t("baseline (nats/token)"), f"{res.baseline.nats:.4f}", help=t("perplexity {p}", p=f"{res.baseline.perplexity:.2f}"))
        m2.metric(t("ablated (nats/token)"), f"{res.ablated.nats:.4f}", delta=f"{res.effect.delta:+.4f}",
                  delta_color="inverse", help=t("perplexity {p}", p=f"{res.ablated.perplexity:.2f}"))
        m3.metric(t("95 % interval of the change"), f"{res.effect.lo:+.4f} … {res.effect.hi:+.4f}",
                  help=(t("bootstrap over {n} prompts", n=f"{res.effect.units:,}") if res.effect.over == "prompts"
                        else t("bootstrap over {n} tokens", n=f"{res.effect.units:,}")))
    for n in res.notes:
        st.caption(str(n))  # internal text: notes written by attnkit.ablations.measure (messages)
    if res.evidence:
        ui.show_table(ablation_charts.evidence_frame(res), hide_index=True, wrap=True)

    charted = [m for m in ablation_lib.get_kind(res.kind).metrics if m.chart]
    if charted:
        st.subheader(t("Per layer, baseline vs ablated"))
        st.caption(t("Faded bars: layers outside the scope (their numbers still change when an earlier layer is "
                     "ablated, since their input does)."))
        for col, metric in zip(st.columns(len(charted)), charted):
            df = ablation_charts.layer_metric_frame(res, metric)
            with col:
                _chart(df, ablation_charts.layer_metric_chart(df, metric), f"{stem}-{metric.key}")
    if res.per_position:
        df = ablation_charts.position_frame(res, ui.token_labels(ctx.tokens) if len(texts) == 1 else None)
        _chart(df, ablation_charts.position_chart(df), f"{stem}-positions")
    st.download_button(t("All numbers (JSON)"), ui.json_bytes(res.to_dict()), file_name=f"{stem}.json",
                       mime="application/json", key="abl-json")


with ui.guard(t("The ablation")):
    shown = ui.job("ab_measure", (ctx.key, ids_key, str(spec)), t("Running the baseline and the ablated model"),
                   lambda progress: ablation_lib.measure(w, texts, spec, progress=progress))
    if shown is not None:
        _verdict(shown.result)

    # ------------------------------------------------------------------------- sweeps
    st.subheader(t("Which layers matter: ablate each layer alone, then all"))
    sweep = _on_demand(t("Run the layer sweep"), t("Layer sweep"), "ab_sweep", (ctx.key, ids_key, name),
                       lambda progress: ablation_lib.layer_sweep(w, texts, spec, progress))
    if sweep is not None:
        df = ablation_charts.sweep_frame(sweep)
        _chart(df, ablation_charts.sweep_chart(df, t("{kind}: loss change per layer (and all)", kind=kind.label)), f"{stem}-sweep")

    st.subheader(t("Which heads matter: the layer × head map"))
    modes = [k.name for k in ablation_lib.head_kinds()]
    state.fit("map_mode", modes, name if name in modes else modes[0], what=t("Head ablation"),
              because=t("not a head ablation"), fmt=lambda n: str(ablation_lib.get_kind(n).label))
    mode = st.selectbox(t("Head ablation"), modes, key="ab_map_mode", format_func=lambda n: str(ablation_lib.get_kind(n).label))
    st.caption(t("Each of the {L}·{H} = {n} heads ablated alone ({n} runs per text); cells show the loss change in "
                 "nats/token, the tooltip its 95 % interval.", L=L, H=H, n=L * H))
    hm = _on_demand(t("Run the head map"), t("Head map"), "ab_map", (ctx.key, ids_key, mode),
                    lambda progress: ablation_lib.head_sweep(w, texts, mode, progress))
    if hm is not None:
        df = ablation_charts.head_map_frame(hm)
        _chart(df, ablation_charts.head_map_chart(df, t("{kind}: loss change per head", kind=ablation_lib.get_kind(mode).label)),
               f"ablation-headmap-{mode}", width="content")
        st.caption(t("Largest increases: {heads}", heads=", ".join(f"{n} ({x:+.4f})" for n, x in hm.top(5))))  # internal text: head names

    st.subheader(t("Every claim on this text"))
    st.caption(t("Each layer-level intervention on all layers, with its verdict."))
    claims = _on_demand(t("Check every claim"), t("Check every claim"), "ab_all", (ctx.key, ids_key), lambda progress: ablation_lib.check_all(w, texts, progress))
    if claims is not None:
        df = ablation_charts.claims_frame(claims)
        ui.show_table(df, hide_index=True, width="stretch",          # the verdict first: never cut at 1280 px
                      column_order=("intervention", "verdict", "effect", "claim", "measured"),
                      column_config={"intervention": st.column_config.TextColumn(t("intervention"), pinned=True),
                                     "verdict": st.column_config.TextColumn(t("verdict"), width=150, pinned=True),
                                     "effect": t("effect"),
                                     "claim": st.column_config.TextColumn(t("claim"), width="medium"),
                                     "measured": st.column_config.TextColumn(t("measured"), width="large")})
        ui.download_buttons(df, None, "ablation-claims", meta, key="abl-claims-")
