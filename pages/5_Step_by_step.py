"""Step by step: one head's attention with its real numbers, the seeds' examples, the KV cache, W_Q ≠ W_K."""
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import steps as head_steps
from attnkit.app import step_tabs
from attnkit.charts import steps as step_charts
from attnkit.standard import head_name

@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys st_*, URL parameters by field name)."""

    prefix = "st"
    layer: int = 0
    head: int = 0
    query: int = -1          # the last token
    topk: int = 10
    kv_n: int = 8
    kv_len: int = 256
    sym_start: int = 0


ctx = ui.page("steps")

cfg = ctx.model.config
ids = ctx.ids
if not ids:
    ui.show_error("The prompt has no tokens.")
    st.stop()
tokens = ctx.tokens
labels = ui.token_labels(tokens)
T = len(ids)
if ctx.all_selected:
    st.caption("All prompts are selected: this page walks through the first one.")

# ----------------------------------------------------------------------------- choices
state = Inputs.load()
state.fit("layer", range(cfg.n_layers), 0, what="Layer", because=f"the model has {cfg.n_layers} layers",
          basis=ctx.model_name)
state.fit("head", range(cfg.n_heads), 0, what="Head", because=f"the model has {cfg.n_heads} heads per layer",
          basis=ctx.model_name)
state.fit("query", range(T), T - 1, what="Query token", basis=tuple(ids), meaning=ids.__getitem__,
          fmt=labels.__getitem__, because="the prompt changed, so the last token is the query")
c1, c2, c3 = st.columns([1, 1, 3])
layer = c1.selectbox("Layer", range(cfg.n_layers), key="st_layer")
head = c2.selectbox("Head", range(cfg.n_heads), key="st_head")
query = ui.select(c3, "Query token", range(T), state, "query", labels.__getitem__,
                  help="The token whose attention row is computed; it sees itself and every earlier token.")
meta = ui.meta_for(ctx, layer=layer, head=head, query=query)
stem = f"{head_name(layer, head)}q{query}"


@st.cache_data(show_spinner=False, max_entries=32)
def _steps(name: str, device: str, ids: tuple, layer: int, head: int, query: int, _resid) -> head_steps.HeadSteps:
    return head_steps.head_steps(ctx.model.weights, list(ids), layer, head, query, resid_pre=_resid)


def vec_row(name: str, t: torch.Tensor, n: int = head_steps.COMPACT_DIMS) -> pd.DataFrame:
    t = t.detach().float().cpu()
    return pd.DataFrame([{"vector": name, **{f"[{j}]": float(t[j]) for j in range(min(n, t.numel()))},
                          "norm": float(t.norm()), "dims": t.numel()}])


def fmt(x: float) -> str:
    return "−∞" if x == float("-inf") else f"{x:.4f}"


try:
    resid = ui.trace(ctx, capture=("resid_pre",))["resid_pre", layer][0]
    hs = _steps(ctx.model_name, ctx.device, tuple(ids), layer, head, query, resid)
except Exception as e:                       # never a traceback
    ui.show_error(f"Could not compute the steps: {e.__class__.__name__}: {str(e)[:200]}")
    st.stop()

tab_head, tab_seed, tab_kv, tab_sym = st.tabs(["One head, one query", "Seed examples", "KV cache",
                                               "Why W_Q ≠ W_K"])

# ----------------------------------------------------------------------------- one head
def vectors_section(hs, e: int):
    st.subheader("1 · x̂ = ln_1(x) for the tokens the query can see")
    xdf = head_steps.vector_frame(hs, "x_hat", [ui.show_spaces(t) for t in tokens])
    first = ["position", "token"] + [f"x_hat[{j}]" for j in range(min(head_steps.COMPACT_DIMS, cfg.d_model))]
    compact = xdf[first].copy()
    compact["|x̂|"] = hs.x_hat.float().norm(dim=-1).cpu().numpy()
    st.dataframe(compact, hide_index=True, width="stretch", height=min(300, 38 + 35 * len(compact)))

    st.subheader("2 · q = x̂_i·W_Q[h] + b_Q[h];  k_j, v_j = x̂_j·W_K[h] + b_K[h], x̂_j·W_V[h] + b_V[h]")
    if hs.q_pre is not None:              # rotary families: q and k are rotated by their position before q·k
        st.dataframe(vec_row(f"q before rotation (position {query})", hs.q_pre), hide_index=True, width="stretch")
        st.caption(f"Rotary position embedding: dims (k, k + r/2) of q and every k_j are rotated by the angle "
                   f"position·θ_k (r = {cfg.rotary_dim or e} of {e} dims), so q·k_j depends on the distance i − j.")
    st.dataframe(vec_row(f"q (position {query})" + (", rotated" if hs.q_pre is not None else ""), hs.q),
                 hide_index=True, width="stretch")
    if hs.kv_head is not None:
        st.caption(f"Grouped-query attention: head {head} reads key/value head {hs.kv_head} "
                   f"(shared by {cfg.group} query heads).")
    st.caption(f"The first {head_steps.COMPACT_DIMS} of {e} dimensions and the norm; the full vectors are in the CSVs.")
    dl = st.columns(4)
    for col, which in zip(dl, ("x_hat", "q", "k", "v")):          # built only when clicked (x̂ can be 1024×768)
        col.download_button(f"{which} (CSV)", lambda which=which: ui.csv_bytes(
            head_steps.vector_frame(hs, which, tokens).assign(**meta)),
            file_name=f"{stem}_{which}.csv", mime="text/csv", key=f"dl-{which}", on_click="ignore")


def scores_section(hs, e: int, window: int | None):
    st.subheader("3 · scores, mask and softmax over the visible keys")
    st.markdown(                                    # internal text: numbers and formulas
        f"s_j = q·k_j × {hs.scale:.6g}  (÷ √{e} = ÷ {math.sqrt(e):.4f}"
        + ("" if abs(hs.scale - e ** -0.5) < 1e-12 else "; this checkpoint scales differently") + ")"
        f";  {step_charts.mask_formula(query, window)};  a_j = exp(s_j + M_j) / Σ exp(s + M).")
    n_vis = step_charts.visible_count(query, window)
    if n_vis > 1:
        state.fit("topk", range(1, n_vis + 1), min(10, n_vis), what="Keys to list",
                  because=f"the query sees {n_vis} keys")
    top_k = st.slider("Keys to list (largest weights first)", 1, n_vis, key="st_topk") if n_vis > 1 else 1
    kdf = head_steps.key_frame(hs, [ui.show_spaces(t) for t in tokens], top_k=top_k)
    st.dataframe(kdf, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in kdf.columns
                                if c not in ("position", "token")})
    c_a, c_b = st.columns(2)
    c_a.download_button("All visible keys, first 8 dims of k and v (CSV)",
                        lambda: ui.csv_bytes(head_steps.key_frame(hs, tokens).assign(**meta)),
                        file_name=f"{stem}_keys.csv", mime="text/csv", key="dl-keys", on_click="ignore")
    c_b.download_button("Full mask row incl. future keys (CSV)",
                        lambda: pd.DataFrame({"position": range(T), "token": tokens, "mask": hs.mask_row.cpu().numpy(),
                                              "scores + mask": hs.masked_row.cpu().numpy()}).assign(**meta)
                        .pipe(ui.csv_bytes),
                        file_name=f"{stem}_mask_row.csv", mime="text/csv", key="dl-mask", on_click="ignore")
    around = list(range(max(0, query - 3), min(T, query + 5)))
    st.dataframe(pd.DataFrame({
        "key": [labels[j] for j in around],
        "M (mask)": [fmt(float(hs.mask_row[j])) for j in around],
        "s + M": [fmt(float(hs.masked_row[j])) for j in around],
        "weight": [f"{float(hs.weights[j]):.4f}" if math.isfinite(float(hs.mask_row[j])) else "0 (exactly)"
                   for j in around],
    }).set_index("key").T, width="stretch")
    st.caption(step_charts.mask_row_caption(query, T, window))  # internal text: numbers
    st.altair_chart(step_charts.weights_chart(head_steps.key_frame(hs, [ui.show_spaces(t) for t in tokens], dims=0),
                                              query, f"softmax weights of query {query}"), width="stretch")
    m1, m2, m3 = st.columns(3)
    m1.metric("Σ weights", f"{hs.weight_sum:.7f}")
    top = int(hs.weights.argmax())
    m2.metric("largest weight", f"{float(hs.weights[top]):.4f}")
    m3.metric("max raw q·k", f"{float(hs.dots.max()):.4f}")
    st.text(f"largest weight on key {labels[top]}")


def heads_section(hs, e: int):
    st.subheader("4 · z = Σ_j a_j·v_j, and this head's contribution z·W_O[h]")
    st.dataframe(pd.concat([vec_row("z", hs.z), vec_row(f"z·W_O[{head}]", hs.head_out)]),
                 hide_index=True, width="stretch")

    st.subheader("5 · concatenating the heads")
    st.markdown(
        f"concat(z) = [z_0 | z_1 | … | z_{cfg.n_heads - 1}] has {cfg.n_heads}·{e} = {cfg.n_heads * e} entries; "
        f"W_O is {cfg.n_heads * e}×{cfg.d_model}, so concat(z)·W_O + b_O = Σ_h z_h·W_O[h] + b_O = attn_out.")
    hdf = head_steps.heads_frame(hs)
    st.dataframe(hdf.style.apply(lambda r: ["background-color: #fff3b0" if r["head"] == head else ""] * len(r),
                                 axis=1), hide_index=True, width="stretch")
    diff = float((hs.sum_of_heads - hs.attn_out).abs().max())
    st.dataframe(pd.concat([vec_row("Σ_h z_h·W_O[h] + b_O", hs.sum_of_heads),
                            vec_row("merge: concat(z)·W_O + b_O", hs.attn_out)]), hide_index=True, width="stretch")
    st.caption(f"max |Σ_h − merge| = {diff:.2e} (float32 rounding: the same sum in a different order).")

    with st.expander("Check every step against the model's own run"):
        st.write("Runs the model with the captures of this layer and compares each number above with them.")
        if st.button("Compare with the Trace", key="st_check"):
            with st.spinner("Running the model with captures …"):
                tr = ui.trace(ctx, capture=head_steps.TRACE_CAPTURES, layers=(layer,))
                st.dataframe(head_steps.trace_differences(hs, tr), hide_index=True, width="stretch",
                             column_config={"max |Δ|": st.column_config.NumberColumn(format="%.2e")})


def one_head_tab(hs):
    e, window = cfg.d_head, cfg.window(layer)
    st.markdown(f"Layer **{layer}**, head **{head}**, query position **{query}** · "  # internal text: numbers
                f"{step_charts.visible_header(query, T, window)} · d_model = {cfg.d_model}, d_head = {e}.")
    st.text(f"query token: {tokens[query]!r}")
    vectors_section(hs, e)
    scores_section(hs, e, window)
    heads_section(hs, e)


with tab_head:
    one_head_tab(hs)

with tab_seed:
    step_tabs.seed_examples()
with tab_kv:
    step_tabs.kv_cache(ctx, state)
with tab_sym:
    step_tabs.symmetry(ctx, state, layer, head, resid, labels)
