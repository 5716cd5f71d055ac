"""Heatmaps: one head's attention pattern (or pre-softmax scores), a layer's heads, a head through the layers."""
import numpy as np
import pandas as pd
import streamlit as st
import torch

from attnkit import metrics, ui
from attnkit.charts import heatmaps as hm

CAPTURE = ("pattern", "scores")        # the same capture as the Compare page: one cached run serves both
VIEWS = ["One head", "All heads of a layer", "One head through all layers"]
KINDS = {"pattern (after softmax)": "pattern", "scores (before softmax)": "scores"}



ctx = ui.page("Heatmaps")

cfg = ctx.model.config
if ctx.all_selected:
    st.info(f"Heatmaps show one prompt at a time: this is prompt 1 of {len(ctx.prompts)}. "
            "Pick a prompt in the sidebar to see another; the Compare page averages over all of them.", icon="ℹ️")
ids = ctx.ids
T = len(ids)
labels = ui.token_labels(ctx.model.token_strs(ids))
with st.spinner("Running the model (once per prompt; switching layer or head reuses the run) …"):
    tr = ui.trace(ctx, capture=CAPTURE)
masked_full = hm.causal_masked(T)

c1, c2, c3, c4, c5 = st.columns([2.2, 2, 1, 1, 1.3])
view = c1.radio("View", VIEWS, key="hm_view")
kind = KINDS[c2.radio("Values", list(KINDS), key="hm_values",
                      help="Scores are q·k/√d before the mask: the grey cells still hold a number there, "
                           "but the mask sets them to −∞ so their weight after softmax is exactly 0.")]
layer = c3.selectbox("Layer", range(cfg.n_layers), key="hm_layer", disabled=view == VIEWS[2])
head = c4.selectbox("Head", range(cfg.n_heads), key="hm_head", disabled=view == VIEWS[1])
scale = c5.radio("Colour scale", ["linear", "sqrt"], key="hm_scale", disabled=kind != "pattern",
                 help="Patterns only. sqrt spreads the small weights of long prompts over more colours.")
scale = scale if kind == "pattern" else "linear"


def matrix(l: int, h: int) -> np.ndarray:
    return tr[kind, l][0, h].float().cpu().numpy()    # on the CPU a view of the cached run: read only


def token_meta() -> dict:
    return ui.meta_for(ctx, values=kind, n_tokens=T)


@st.cache_data(show_spinner=False, max_entries=64)
def head_png(key: tuple, _values: np.ndarray, kind: str, scale: str) -> bytes:
    """The PNG of one full matrix; ``key`` = (model, device, ids, layer, head) identifies ``_values``."""
    return hm.to_png(_values, hm.causal_masked(_values.shape[0]), kind, None, scale)


def long_table(values: np.ndarray, q0: int = 0, k0: int = 0) -> pd.DataFrame:
    R, C = values.shape
    df = hm.cells_frame(values, labels, labels, hm.causal_masked(T, T, q0, k0, R, C), q0, k0)
    toks = ctx.model.token_strs(ids)
    df["query_token"] = [toks[i] for i in df["query_pos"]]
    df["key_token"] = [toks[j] for j in df["key_pos"]]
    df = df.drop(columns=["query", "key"]).rename(columns={"value": "weight" if kind == "pattern" else "score"})
    return df


def full_csv(values: np.ndarray) -> bytes:
    """The whole matrix, one row per query position, as CSV (built only when clicked)."""
    df = pd.DataFrame(values, columns=[f"k{j}" for j in range(values.shape[1])])
    df.insert(0, "query_token", ctx.model.token_strs(ids))
    df.insert(0, "query_pos", range(values.shape[0]))
    return ui.csv_bytes(df, comments=token_meta())


what = "weight" if kind == "pattern" else "pre-softmax score"
st.caption(f"{T} tokens · rows are queries (the position attending), columns keys (the position attended to) · "
           f"**grey = masked** (a future key, hidden by the causal mask{'; its weight is exactly 0' if kind == 'pattern' else '; its score is replaced by −∞ before the softmax'}), "
           f"distinct from a visible {what} of 0." +
           (" Colours run from 0 to the largest weight outside row 0 (query 0 can only put its whole weight, 1, "
            "on itself); anything larger takes the top colour." if kind == "pattern" and T > 2 else
            " Colours are centred on 0 (white), ± the largest visible score." if kind == "scores" else ""))

if view == VIEWS[0]:
    vals = matrix(layer, head)
    stem = f"{kind}_L{layer}H{head}"
    title = f"Layer {layer}, head {head}: {kind}"
    if T <= hm.MARK_LIMIT:
        chart = hm.cell_chart(vals, labels, labels, masked=masked_full, kind=kind, scale=scale, title=title)
        st.altair_chart(chart, width="content")
        ui.download_buttons(long_table(vals), chart, stem, token_meta() | {"layer": layer, "head": head}, key="one")
    else:
        png = head_png((ctx.model_name, ctx.device, tuple(ids), layer, head, kind, scale), vals, kind, scale)
        domain = hm.colour_domain(vals, masked_full, kind)            # one colour scale for image and window
        full = hm.image_chart(vals, masked=masked_full, kind=kind, scale=scale, png=png, size=430, domain=domain,
                              legend=False, title=f"All {T}×{T} cells, one pixel each")
        st.markdown(f"**{title}**")
        st.info(f"{T} tokens is more than the {hm.MARK_LIMIT} drawn cell by cell: the whole matrix is shown as one "
                f"image (one pixel per cell, no token labels or tooltips), and a focus window of at most "
                f"{hm.MARK_LIMIT}×{hm.MARK_LIMIT} cells is drawn beside it with tokens and tooltips, in the same "
                f"colours.", icon="🔎")
        left, right = st.columns([1, 1])
        with left:
            st.altair_chart(full, width="content")
            ui.download_buttons(pd.DataFrame({"query_pos": range(T), "query_token": ctx.model.token_strs(ids)}),
                                full, stem + "_full", token_meta() | {"layer": layer, "head": head}, key="full")
            st.download_button(f"Whole matrix as CSV ({T}×{T})", lambda: full_csv(vals), file_name=f"{stem}_matrix.csv",
                               mime="text/csv", key="full-matrix-csv", on_click="ignore")
        with right:
            size = st.slider("Window size", 8, hm.MARK_LIMIT, min(32, hm.MARK_LIMIT), step=4, key="hm_win")
            q0 = st.slider("Query rows from", 0, T - size, T - size, key="hm_q0")
            same = st.checkbox("Keys: the same positions as the rows (the diagonal block)", True, key="hm_same")
            k0 = q0 if same else st.slider("Key columns from", 0, T - size, 0, key="hm_k0")
            block = vals[q0 : q0 + size, k0 : k0 + size]
            bmask = hm.causal_masked(T, T, q0, k0, size, size)
            wchart = hm.cell_chart(block, labels, labels, masked=bmask, q0=q0, k0=k0, kind=kind, scale=scale,
                                   title=f"Window: queries {q0}–{q0 + size - 1}, keys {k0}–{k0 + size - 1}",
                                   size=400, domain=domain)
            st.altair_chart(wchart, width="content")
            if kind == "pattern":
                share = float(block.sum(1).mean())
                st.caption(f"Window of {size}×{size} out of {T}×{T}. The shown keys hold {share:.1%} of these rows' "
                           f"attention on average; the rest goes to keys outside the window.")
            else:
                st.caption(f"Window of {size}×{size} out of {T}×{T}.")
            ui.download_buttons(long_table(block, q0, k0), wchart, stem + f"_q{q0}_k{k0}",
                                token_meta() | {"layer": layer, "head": head}, key="win")
else:
    if view == VIEWS[1]:
        panels = [(layer, h) for h in range(cfg.n_heads)]
        titles = [f"head {h}" for h in range(cfg.n_heads)]
        stem, what_grid = f"{kind}_L{layer}_all_heads", f"the {cfg.n_heads} heads of layer {layer}"
    else:
        panels = [(l, head) for l in range(cfg.n_layers)]
        titles = [f"layer {l}" for l in range(cfg.n_layers)]
        stem, what_grid = f"{kind}_H{head}_all_layers", f"head {head} in each of the {cfg.n_layers} layers"
    shared = st.checkbox("One colour range for all panels", False, key="hm_shared",
                         help="Off: each panel spans its own range (shapes stand out). On: colours are comparable.")
    mats = [matrix(l, h) for l, h in panels]
    chart, k = hm.grid_chart(mats, titles, labels, masked=masked_full, kind=kind, scale=scale,
                             columns=3 if len(mats) in (3, 6, 9) else min(4, len(mats)), shared=shared)
    note = f"Showing {what_grid}."
    if T > hm.GRID_MARK_LIMIT:
        note += (f" {T} tokens: each panel is an image" +
                 (f" where one pixel is the maximum over a {k}×{k} block of cells" if k > 1 else ", one pixel per cell") +
                 ". Pick the head under *One head* for tokens, tooltips and a focus window.")
    st.caption(note)
    st.altair_chart(chart, width="content")
    if T <= hm.MARK_LIMIT:
        df = pd.concat([long_table(m).assign(layer=l, head=h) for m, (l, h) in zip(mats, panels)], ignore_index=True)
    else:                                     # a million cells per panel: export per-panel statistics instead
        rows = []
        for m, (l, h) in zip(mats, panels):
            row = {"layer": l, "head": h}
            if kind == "pattern":
                sc = metrics.head_scores(torch.from_numpy(m), ids)         # m is already on the CPU
                row.update({s: float(v) for s, v in sc.items()})
            else:
                row.update({"max score": float(m[~masked_full].max()), "min score": float(m[~masked_full].min())})
            rows.append(row)
        df = pd.DataFrame(rows)
        st.caption("CSV: one row of statistics per panel (the full matrices are too large; export a single head "
                   "from *One head*).")
    ui.download_buttons(df, chart, stem, token_meta(), key="grid")
