"""Step by step: one head's attention with its real numbers, the seeds' examples, the KV cache, W_Q ≠ W_K."""
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch

from attnkit import steps as S
from attnkit import app as ui
from attnkit.charts import steps as C



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
stem = f"L{layer}H{head}q{query}"


@st.cache_data(show_spinner=False, max_entries=32)
def _steps(name: str, device: str, ids: tuple, layer: int, head: int, query: int, _resid) -> S.HeadSteps:
    return S.head_steps(ctx.model.weights, list(ids), layer, head, query, resid_pre=_resid)


@st.cache_data(show_spinner=False, max_entries=16)
def _symmetry(name: str, device: str, ids: tuple, layer: int, head: int, _resid) -> dict:
    r = S.xx_vs_qk(ctx.model.weights, list(ids), layer, head, resid_pre=_resid)
    return {"xx": r["xx"].cpu(), "qk": r["qk"].cpu(), "xx_stats": r["xx_stats"], "qk_stats": r["qk_stats"]}


def vec_row(name: str, t: torch.Tensor, n: int = S.COMPACT_DIMS) -> pd.DataFrame:
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
with tab_head:
    e, n_vis = cfg.d_head, query + 1
    st.markdown(f"Layer **{layer}**, head **{head}**, query position **{query}** · {n_vis:,} visible key(s), "
                f"{T - n_vis:,} future key(s) masked · d_model = {cfg.d_model}, d_head = {e}.")
    st.text(f"query token: {tokens[query]!r}")

    st.subheader("1 · x̂ = ln_1(x) for the tokens the query can see")
    xdf = S.vector_frame(hs, "x_hat", [ui.show_spaces(t) for t in tokens])
    first = ["position", "token"] + [f"x_hat[{j}]" for j in range(min(S.COMPACT_DIMS, cfg.d_model))]
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
    st.caption(f"The first {S.COMPACT_DIMS} of {e} dimensions and the norm; the full vectors are in the CSVs.")
    dl = st.columns(4)
    for col, which in zip(dl, ("x_hat", "q", "k", "v")):          # built only when clicked (x̂ can be 1024×768)
        col.download_button(f"{which} (CSV)", lambda which=which: ui.csv_bytes(S.vector_frame(hs, which, tokens)
                                                                                .assign(**meta)),
                            file_name=f"{stem}_{which}.csv", mime="text/csv", key=f"dl-{which}", on_click="ignore")

    st.subheader("3 · scores, mask and softmax over the visible keys")
    st.markdown(
        f"s_j = q·k_j × {hs.scale:.6g}  (÷ √{e} = ÷ {math.sqrt(e):.4f}"
        + ("" if abs(hs.scale - e ** -0.5) < 1e-12 else "; this checkpoint scales differently") + ")"
        f";  M_j = 0 for j ≤ {query}, −∞ for j > {query};  a_j = exp(s_j + M_j) / Σ exp(s + M).")
    if n_vis > 1:
        state.fit("topk", range(1, n_vis + 1), min(10, n_vis), what="Keys to list",
                  because=f"the query sees {n_vis} keys")
    top_k = st.slider("Keys to list (largest weights first)", 1, n_vis, key="st_topk") if n_vis > 1 else 1
    kdf = S.key_frame(hs, [ui.show_spaces(t) for t in tokens], top_k=top_k)
    st.dataframe(kdf, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in kdf.columns
                                if c not in ("position", "token")})
    c_a, c_b = st.columns(2)
    c_a.download_button("All visible keys, first 8 dims of k and v (CSV)",
                        lambda: ui.csv_bytes(S.key_frame(hs, tokens).assign(**meta)),
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
        "weight": [f"{float(hs.weights[j]):.4f}" if j <= query else "0 (exactly)" for j in around],
    }).set_index("key").T, width="stretch")
    st.caption(f"The mask row around the query: 0 on keys 0..{query}"
               + (f", −∞ on the {T - n_vis:,} future key(s) (all in the CSV), which softmax turns into weights of "
                  "exactly 0." if T > n_vis else "; the query is the last token, so no key lies in its future."))
    st.altair_chart(C.weights_chart(S.key_frame(hs, [ui.show_spaces(t) for t in tokens], dims=0), query,
                                    f"softmax weights of query {query}"), width="stretch")
    m1, m2, m3 = st.columns(3)
    m1.metric("Σ weights", f"{hs.weight_sum:.7f}")
    top = int(hs.weights.argmax())
    m2.metric("largest weight", f"{float(hs.weights[top]):.4f}")
    m3.metric("max raw q·k", f"{float(hs.dots.max()):.4f}")
    st.text(f"largest weight on key {labels[top]}")

    st.subheader("4 · z = Σ_j a_j·v_j, and this head's contribution z·W_O[h]")
    st.dataframe(pd.concat([vec_row("z", hs.z), vec_row(f"z·W_O[{head}]", hs.head_out)]),
                 hide_index=True, width="stretch")

    st.subheader("5 · concatenating the heads")
    st.markdown(
        f"concat(z) = [z_0 | z_1 | … | z_{cfg.n_heads - 1}] has {cfg.n_heads}·{e} = {cfg.n_heads * e} entries; "
        f"W_O is {cfg.n_heads * e}×{cfg.d_model}, so concat(z)·W_O + b_O = Σ_h z_h·W_O[h] + b_O = attn_out.")
    hdf = S.heads_frame(hs)
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
                tr = ui.trace(ctx, capture=S.TRACE_CAPTURES, layers=(layer,))
                st.dataframe(S.trace_differences(hs, tr), hide_index=True, width="stretch",
                             column_config={"max |Δ|": st.column_config.NumberColumn(format="%.2e")})

# ----------------------------------------------------------------------------- seeds
with tab_seed:
    st.subheader("The 4×4 example: every score row is [1, 2, 3, 4], plus the causal mask")
    ex = S.seed_causal_4x4()
    cols = st.columns(4)
    for col, (key, title) in zip(cols, (("scores", "scores"), ("mask", "M (causal mask)"),
                                        ("masked", "scores + M"), ("pattern", "softmax(scores + M)"))):
        col.altair_chart(C.matrix_chart(ex[key], title=title, digits=3), width="content")
    st.caption("Row sums of the softmax: " + ", ".join(f"{float(s):.6f}" for s in ex["pattern"].sum(-1)) +
               ". The seed's rounded values: 1 · 0.269 0.731 · 0.090 0.245 0.665 · 0.032 0.087 0.237 0.644.")

    st.subheader("The three-token demo: X used directly as Q, K and V")
    st.markdown("X's rows are the seed's '猫', '坐', '垫子上' (4 dimensions). As in the seed's code "
                "(`scores = q·kᵀ / np.sqrt(d_k)`), the scores are divided by √d_k = √4 = 2. "
                "The seed runs it without a mask; with the causal mask added, token 0 can only see itself.")
    names = ["0 猫", "1 坐", "2 垫子上"]
    dims = [f"d{j}" for j in range(4)]
    plain, causal = S.seed_three_tokens(False), S.seed_three_tokens(True)
    c = st.columns(2)
    c[0].altair_chart(C.matrix_chart(plain["X"], names, dims, "X (= Q = K = V)"), width="content")
    c[1].altair_chart(C.matrix_chart(plain["scores"], names, names, "X·Xᵀ / √4"), width="content")
    for label, r in (("without mask", plain), ("with the causal mask", causal)):
        c = st.columns(2)
        c[0].altair_chart(C.matrix_chart(r["pattern"], names, names, f"softmax weights, {label}"), width="content")
        c[1].altair_chart(C.matrix_chart(r["output"], names, dims, f"output = weights·V, {label}"),
                          width="content")

# ----------------------------------------------------------------------------- KV cache
with tab_kv:
    st.markdown("Greedy decoding with and without the KV cache. With it, each step feeds only the newest token "
                "and reuses the keys and values of every earlier position; without it each step recomputes "
                "the whole sequence. Both must choose the same tokens.")
    room = cfg.n_ctx - 1
    k1, k2, k3 = st.columns(3)
    state.fit("kv_n", range(1, max(1, min(32, room)) + 1), min(8, room), what="Tokens to generate",
              because=f"1 to {max(1, min(32, room))} here")
    n_new = k1.number_input("Tokens to generate", 1, max(1, min(32, room)), key="st_kv_n")
    most = max(1, min(T, cfg.n_ctx - n_new))
    state.fit("kv_len", range(1, most + 1), min(most, 256), what="Prompt tokens used",
              because=f"the prompt and the new tokens fit in {most} + {n_new} positions")
    n_prompt = k2.number_input("Prompt tokens used", 1, most, key="st_kv_len",
                               help="Without the cache every step reruns the whole sequence: on a CPU a long "
                                    "prompt makes that slow (which is the point, but takes a while).")
    check = k3.checkbox("Also check the cached K/V rows against a full rerun", value=n_prompt <= 256,
                        key="st_kv_check")
    prompt = ids[: int(n_prompt)]
    if len(prompt) < len(ids):
        st.caption(f"Using the first {len(prompt):,} of the prompt's {T:,} tokens.")
    kv_key = (ctx.model_name, ctx.device, tuple(prompt), int(n_new), bool(check))
    if st.button("Generate both ways", key="st_kv_go", type="primary"):
        with st.spinner(f"Generating {n_new} tokens twice …"):
            try:
                st.session_state["st_kv_result"] = (kv_key, S.kv_cache_demo(ctx.model.weights, prompt, int(n_new),
                                                                            check_rows=bool(check)))
            except Exception as e:
                ui.show_error(f"Generation failed: {e.__class__.__name__}: {str(e)[:200]}")
    stored = st.session_state.get("st_kv_result")
    if stored is not None and stored[0] == kv_key:
        kv = stored[1]
        if kv.tokens_match:
            rows = ("" if kv.max_kv_diff != kv.max_kv_diff else
                    f"; cached K/V rows equal a fresh full run within {kv.max_kv_diff:.1e}")
            st.success(f"Same {n_new} tokens with and without the cache (largest next-token logit difference "
                       f"{kv.max_logit_diff:.1e}{rows}).", icon="✅")
        else:
            st.error("The tokens differ between the cached and the uncached run.", icon="❌")
        st.text("generated (cache):    " + repr("".join(ctx.model.token_strs(kv.tokens_cached))))
        st.text("generated (no cache): " + repr("".join(ctx.model.token_strs(kv.tokens_full))))
        st.dataframe(kv.summary(), hide_index=True, width="stretch",
                     column_config={"seconds": st.column_config.NumberColumn(format="%.4f"),
                                    "GFLOP": st.column_config.NumberColumn(format="%.4f")})
        st.caption("GFLOP counts the matrix products (2 per multiply-add): projections, q·kᵀ, weights·v, MLP "
                   "and the unembedding of every fed position. Seconds are wall-clock on a shared machine and "
                   "include step 0, which in both modes runs the whole prompt.")
        st.altair_chart(C.kv_rows_chart(kv.steps), width="stretch")
        shown = kv.steps[["step", "predicts position", "fed (cache)", "reused rows", "new rows",
                          "fed (no cache)", "GFLOP (cache)", "GFLOP (no cache)", "seconds (cache)",
                          "seconds (no cache)"]]
        st.dataframe(shown, hide_index=True, width="stretch")
        ui.download_buttons(kv.steps, None, stem="kv_cache_steps", meta=ui.meta_for(ctx, n_new=int(n_new)),
                            key="kv")
    else:
        st.info("Press the button to run both decodings.")

# ----------------------------------------------------------------------------- W_Q ≠ W_K
with tab_sym:
    st.markdown(
        "The seed's argument: scoring with the raw vectors, X·Xᵀ, gives a **symmetric** matrix (t_i·t_j = t_j·t_i, "
        "so 'A looks at B' equals 'B looks at A') with a **heavy diagonal** (a vector is most similar to itself). "
        f"Separate W_Q and W_K break both. Here on this prompt, layer {layer}: x̂·x̂ᵀ (x̂ = ln_1 of the layer input) "
        f"beside head {head}'s q·kᵀ (before scale and mask).")
    with st.spinner("Computing x̂·x̂ᵀ and q·kᵀ …"):
        sym = _symmetry(ctx.model_name, ctx.device, tuple(ids), layer, head, resid)
    table = pd.DataFrame([{"matrix": "x̂·x̂ᵀ", **sym["xx_stats"]}, {"matrix": f"q·kᵀ (head {head})",
                                                                    **sym["qk_stats"]}])
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"asymmetry": st.column_config.NumberColumn("‖S−Sᵀ‖/‖S‖", format="%.4f"),
                                "diagonal share": st.column_config.NumberColumn(
                                    "queries whose top visible key is itself", format="%.3f"),
                                "diagonal ratio": st.column_config.NumberColumn(
                                    "mean diagonal / mean |off-diagonal|", format="%.3f")})
    W = 32
    start = 0
    if T > W:
        state.fit("sym_start", range(0, T - W + 1), 0, what="Window start", because=f"the prompt has {T} tokens")
        start = st.slider("Window start (the matrices are drawn for 32 tokens at a time; the numbers above use "
                          "the whole prompt)", 0, T - W, key="st_sym_start")
    win = slice(start, start + W)
    wl = labels[win]
    c = st.columns(2)
    small = min(T, W) <= 10
    c[0].altair_chart(C.matrix_chart(sym["xx"][win, win], wl, wl, "x̂·x̂ᵀ (symmetric)", digits=1, text=small,
                                     diverging=True, size=18), width="content")
    c[1].altair_chart(C.matrix_chart(sym["qk"][win, win], wl, wl, f"q·kᵀ, head {head} (asymmetric)", digits=1,
                                     text=small, diverging=True, size=18), width="content")
