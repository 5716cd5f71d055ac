"""Home: the model, its parameters, and the tokens of the prompt."""
import pandas as pd
import streamlit as st

from attnkit import app as ui
from attnkit.app import planted as planted_view
from attnkit.weights import attention_weight_count, param_counts


ctx = ui.page("home")

cfg = ctx.model.config
st.caption(f"Model **{ui.plain(ctx.model_name)}** on **{ctx.device}** · every number on these pages is computed by attnkit's "
           "own implementation of the model and checked against HuggingFace on the *Verify* page.")

left, right = st.columns([1, 1])
with left:
    st.subheader("Model card")
    st.dataframe(pd.DataFrame({
        "": ["family", "layers", "heads per layer", "key/value heads", "d_model", "d_head", "context (positions)",
             "vocabulary", "MLP width", "norm (ε)", "positions", "MLP", "attention and MLP"],
        "value": [cfg.family] + [f"{v:,}" for v in (cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_model, cfg.d_head,
                                                   cfg.n_ctx, cfg.d_vocab, cfg.d_mlp)]
                 + [f"{cfg.norm} ({cfg.layer_norm_eps:g})",
                    cfg.position + (f" (first {cfg.rotary_dim} dims of each head)" if cfg.rotary_dim else ""),
                    f"{cfg.mlp} ({cfg.act_fn})", "in parallel" if cfg.parallel else "one after the other"],
    }), hide_index=True, width="stretch")
with right:
    st.subheader("Parameters per component")
    counts = param_counts(cfg, ctx.model.weights)
    total = counts["total"]
    st.dataframe(pd.DataFrame({
        "component": list(counts),
        "parameters": [f"{n:,}" for n in counts.values()],
        "share": [f"{n / total:.1%}" for n in counts.values()],
    }), hide_index=True, width="stretch")
    if cfg.kv_heads == cfg.n_heads and cfg.d_head * cfg.n_heads == cfg.d_model:
        per_layer = attention_weight_count(cfg.d_model, cfg.n_heads)
        st.caption(f"One layer's Q/K/V/O weights: {cfg.n_heads}·(3·{cfg.d_model}·{cfg.d_head}) + "
                   f"{cfg.d_model}·{cfg.d_model} = {per_layer:,}.")
    else:
        st.caption(f"One layer's Q/O weights: 2·{cfg.n_heads}·{cfg.d_model}·{cfg.d_head}; K/V weights: "
                   f"2·{cfg.kv_heads}·{cfg.d_model}·{cfg.d_head} (grouped-query attention: {cfg.group} query heads "
                   "share each key/value head).")
planted_view.card_section(ctx)                  # a planted model: its card and stated circuit

st.subheader("Tokens")
if ctx.all_selected:
    st.write(f"{len(ctx.prompts)} prompts selected; the first one is shown.")
ids = ctx.ids
st.write(f"{len(ids)} tokens (␣ marks a space, ↵ a line break).")
ui.show_tokens(ctx, ids)

st.subheader("Start here")
st.markdown(  # internal text: the page list's own words
    "attnkit grew from a few short **seed** write-ups about attention. They make claims that can be tested on a "
    "real model — that V = X would do, that W_K could equal W_Q, that the 1/√d scaling and the causal mask "
    "matter, that attention spreads out as the context grows — and these pages measure each one on the model "
    "in the sidebar, with a verdict and the numbers behind it.\n\n"
    + "\n".join(f"{i}. **{spec.title}**: {spec.summary}" for i, spec in enumerate(ui.PAGES[1:], 1))
)
