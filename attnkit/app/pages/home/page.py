"""Home: the model, its parameters, and the tokens of the prompt."""
import pandas as pd
import streamlit as st

from attnkit import app as ui
from attnkit.i18n import t
from attnkit.app.pages.home.planted import card_section
from attnkit.app.pages.shared.next_token import next_token_table
from attnkit.weights import attention_weight_count, param_counts


ctx = ui.page("home")

cfg = ctx.model.config
st.caption(t("Model **{model}** on **{device}** · every number on these pages is computed by attnkit's own "
             "implementation of the model and checked against HuggingFace on the *Verify* page.",
             model=ui.plain(ctx.model_name), device=ctx.device))

left, right = st.columns([1, 1])
with left:
    st.subheader(t("Model card"))
    ui.show_table(pd.DataFrame({
        "": [t("family"), t("layers"), t("heads per layer"), t("key/value heads"), "d_model", "d_head",
             t("context (positions)"), t("vocabulary"), t("MLP width"), t("norm (ε)"), t("positions"), "MLP",
             t("attention and MLP")],
        t("value"): [cfg.family] + [f"{v:,}" for v in (cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_model, cfg.d_head,
                                                   cfg.n_ctx, cfg.d_vocab, cfg.d_mlp)]
                 + [f"{cfg.norm} ({cfg.layer_norm_eps:g})",
                    ui.tables.shown(cfg.position) + (t(" (first {n} dims of each head)", n=cfg.rotary_dim) if cfg.rotary_dim else ""),
                    f"{ui.tables.shown(cfg.mlp)} ({cfg.act_fn})", t("in parallel") if cfg.parallel else t("one after the other")],
    }), hide_index=True, width="stretch")
with right:
    st.subheader(t("Parameters per component"))
    counts = param_counts(cfg, ctx.model.weights)
    total = counts["total"]
    ui.show_table(pd.DataFrame({
        t("component"): [str(name) for name in counts],
        t("parameters"): [f"{n:,}" for n in counts.values()],
        t("share"): [f"{n / total:.1%}" for n in counts.values()],
    }), hide_index=True, width="stretch")
    if cfg.kv_heads == cfg.n_heads and cfg.d_head * cfg.n_heads == cfg.d_model:
        per_layer = attention_weight_count(cfg.d_model, cfg.n_heads)
        st.caption(t("One layer's Q/K/V/O weights: {formula}.",
                     formula=f"{cfg.n_heads}·(3·{cfg.d_model}·{cfg.d_head}) + {cfg.d_model}·{cfg.d_model} = {per_layer:,}"))
    else:
        st.caption(t("One layer's Q/O weights: {qo}; K/V weights: {kv} (grouped-query attention: {n} query heads "
                     "share each key/value head).", qo=f"2·{cfg.n_heads}·{cfg.d_model}·{cfg.d_head}",
                     kv=f"2·{cfg.kv_heads}·{cfg.d_model}·{cfg.d_head}", n=cfg.group))
card_section(ctx)                  # a planted model: its card and stated circuit

st.subheader(t("Tokens"))
if ctx.all_selected:
    st.write(t("{n} prompts selected; the first one is shown.", n=len(ctx.prompts)))
ids = ctx.ids
st.write(t("{n} tokens (␣ marks a space, ↵ a line break).", n=len(ids)))
ui.show_tokens(ctx, ids)
next_token_table(ctx)

st.subheader(t("Start here"))
st.markdown(  # internal text: the page list's own words
    t("attnkit grew from a few short **seed** write-ups about attention. They make claims that can be tested on a "
      "real model — that V = X would do, that W_K could equal W_Q, that the 1/√d scaling and the causal mask "
      "matter, that attention spreads out as the context grows — and these pages measure each one on the model "
      "in the sidebar, with a verdict and the numbers behind it.") + "\n\n"
    + "\n".join(f"{i}. **{spec.title}**: {spec.summary}" for i, spec in enumerate(ui.PAGES[1:], 1))
)
