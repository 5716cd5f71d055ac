"""Heatmaps: one head's attention pattern (or pre-softmax scores), a layer's heads, a head through the layers,
and the prompt as text coloured by one token's attention (the Tokens view)."""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import metrics
from attnkit.standard import parse_head
from attnkit.charts import heatmaps as hm
from attnkit.charts import tokens as tk

CAPTURE = ("pattern", "scores")        # the same capture as the Compare page: one cached run serves both
VIEWS = ["One head", "All heads of a layer", "One head through all layers", "Tokens"]
SCALE_NAMES = {"linear": "linear", "sqrt": "square root", "log": "log (3 decades)"}
TOKEN_HEADS = {"one": "the chosen head", "mean": "mean of the layer's heads", "max": "max of the layer's heads"}
TOKEN_DIRS = {"to": "what the chosen token attends to", "from": "what attends to the chosen token"}
KINDS = {"pattern (after softmax)": "pattern", "scores (before softmax)": "scores"}


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys hm_*, URL parameters by field name)."""

    prefix = "hm"
    view: str = VIEWS[0]
    values: str = next(iter(KINDS))
    layer: int = 0
    head: int = 0
    scale: str = ui.param(None)                  # the length's default until the user picks one
    tok_dir: str = "to"
    tok_heads: str = "one"
    tok_follow: str = "click"
    shared: bool = False
    win: int = ui.param(32)
    q0: int = ui.param(0)
    k0: int = ui.param(0)


ctx = ui.page("heatmaps")

cfg = ctx.model.config
if ctx.all_selected:
    st.info(f"Heatmaps show one prompt at a time: this is prompt 1 of {len(ctx.prompts)}. "
            "Pick a prompt in the sidebar to see another; the Compare page averages over all of them.", icon="ℹ️")
ids = ctx.ids
T = len(ids)
labels = ui.token_labels(ctx.model.token_texts(ids))
with st.spinner("Running the model (once per prompt; switching layer or head reuses the run) …"):
    tr = ui.trace(ctx, capture=CAPTURE)
masked_full = hm.causal_masked(T)
state = Inputs.load(scale=hm.default_scale(T))
for name, opts, why in (("view", VIEWS, "not a view of this page"), ("values", list(KINDS), "not a kind of values"),
                        ("tok_dir", list(TOKEN_DIRS), "not a choice"), ("tok_heads", list(TOKEN_HEADS), "not a choice"),
                        ("tok_follow", ["click", "hover"], "not a choice")):
    state.fit(name, opts, opts[0], what=name.replace("_", " ").capitalize(), because=why)
state.fit("layer", range(cfg.n_layers), 0, what="Layer", because=f"the model has {cfg.n_layers} layers",
          basis=ctx.model_name)
state.fit("head", range(cfg.n_heads), 0, what="Head", because=f"the model has {cfg.n_heads} heads per layer",
          basis=ctx.model_name)


# A click on a grid panel (in the previous run) opens that head in the single-head view.
picked = ui.new_click("hm_grid", "open", "head")
if picked:
    try:
        pl, ph = parse_head(picked[-1])
        if pl < cfg.n_layers and ph < cfg.n_heads:
            st.session_state.update(hm_view=VIEWS[0], hm_layer=pl, hm_head=ph)
    except ValueError:
        pass

# The colour scale starts at the default for this length (log above 64 tokens) until the user picks one.
auto_scale = hm.default_scale(T)
if st.session_state.get("hm_scale") not in (*hm.SCALES, None) or \
        st.session_state.get("hm_scale") in (None, st.session_state.get("hm_scale_auto")):
    st.session_state["hm_scale"] = auto_scale
st.session_state["hm_scale_auto"] = auto_scale

c1, c2, c3, c4, c5 = st.columns([2.2, 2, 0.9, 1.3, 1.5])
view = c1.radio("View", VIEWS, key="hm_view")
tokens_view = view == VIEWS[3]
kind = KINDS[c2.radio("Values", list(KINDS), key="hm_values", disabled=tokens_view,
                      help="Scores are q·k/√d before the mask: the grey cells still hold a number there, "
                           "but the mask sets them to −∞ so their weight after softmax is exactly 0. "
                           "The Tokens view shows weights.")]
kind = "pattern" if tokens_view else kind
layer = c3.selectbox("Layer", range(cfg.n_layers), key="hm_layer", disabled=view == VIEWS[2])
head = ui.select(c4, "Head", range(cfg.n_heads), state, "head", lambda h: f"{h} ({hm.head_name(layer, h)})",
                disabled=view == VIEWS[1], help="The head's number in its layer, with its name L{layer}H{head}.")
scale = c5.radio("Colour scale", list(hm.SCALES), key="hm_scale", disabled=kind != "pattern",
                 format_func=SCALE_NAMES.get,
                 help=f"Patterns only. Above {hm.MARK_LIMIT} tokens most weights are tiny and a linear scale draws "
                      f"them all dark, so the page starts on the log scale there (linear below). "
                      "Square root is in between.")
scale = scale if kind == "pattern" else "linear"
name = hm.head_name(layer, head)

def matrix(l: int, h: int) -> np.ndarray:
    # a copy of one head: holding a view would keep the layer's whole [H, T, T] capture alive after the cache
    # let it go (a layer-by-layer trace of a large model)
    return tr[kind, l][0, h].float().cpu().numpy().copy()


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


def meta(**extra) -> dict:
    return token_meta() | {"colour scale": scale} | extra


def token_view():
    """The prompt as text; the chosen token's attention colours the others."""
    st.caption("The prompt as text. **Click a token** to choose it (the red one); every other token is coloured by "
               "the chosen token's attention, and hovering a token shows its weight. Greyed tokens are hidden from "
               "the chosen one by the causal mask.")
    if T > tk.TOKEN_LIMIT:
        st.info(f"{T} tokens: the token view is for prompts of up to {tk.TOKEN_LIMIT} tokens (it sends every weight "
                "to the browser). Use *One head* for the whole matrix.", icon="ℹ️")
        return
    a1, a2, a3 = st.columns([1.6, 1.4, 1.2])
    direction = a1.radio("Colour the other tokens by", list(TOKEN_DIRS), key="hm_tok_dir", format_func=TOKEN_DIRS.get)
    heads = a2.radio("Weights of", list(TOKEN_HEADS), key="hm_tok_heads", format_func=TOKEN_HEADS.get,
                     help="One head (Layer and Head above), or every head of the layer combined: their mean "
                          "(the average pattern) or their max (any head attending strongly).")
    follow = a3.radio("Choose the token by", ["click", "hover"], key="hm_tok_follow",
                      format_func={"click": "clicking it", "hover": "pointing at it"}.get,
                      help="Pointing: the colours follow the mouse and return to the clicked token when it leaves the text.")
    layer_p = tr["pattern", layer][0].float().cpu().numpy()           # [H, T, T], read only
    if heads == "one":
        A, which = layer_p[head], f"head {name}"
    elif heads == "mean":
        A, which = layer_p.mean(0), f"mean of layer {layer}'s {cfg.n_heads} heads"
    else:
        A, which = layer_p.max(0), f"max of layer {layer}'s {cfg.n_heads} heads"
    chart = tk.token_chart(A, ctx.model.token_strs(ids), direction=direction, follow=follow, scale=scale,
                           title=f"{which}: {TOKEN_DIRS[direction]}", groups=ctx.model.token_groups(ids), ids=ids)
    st.altair_chart(chart, width="content", key="hm_tokens")
    st.caption(ui.plain(tk.scale_caption(scale)) + " The last token is the one chosen at first; a character split "
               "over several byte-level tokens is drawn once across them (its tooltip lists the pieces).")
    tbl = pd.DataFrame(A, columns=[f"k{j}" for j in range(T)])
    tbl.insert(0, "query_token", ctx.model.token_strs(ids))
    tbl.insert(0, "query_pos", range(T))
    ui.download_buttons(tbl, None, f"pattern_L{layer}_{heads if heads != 'one' else f'H{head}'}",
                        meta(layer=layer, heads=TOKEN_HEADS[heads]), key="tok")


what = "weight" if kind == "pattern" else "pre-softmax score"
if not tokens_view:
    st.caption(f"{T} tokens · rows are queries (the position attending), columns keys (the position attended to) · "  # internal text: the page's words and hm.scale_note
               f"**grey = masked** (a future key, hidden by the causal mask{'; its weight is exactly 0' if kind == 'pattern' else '; its score is replaced by −∞ before the softmax'}), "
               f"distinct from a visible {what} of 0. " + hm.scale_note(scale, kind) +
               (" The top colour is the largest weight outside row 0 (query 0 can only put its whole weight, 1, "
                "on itself); anything larger takes the top colour." if kind == "pattern" and T > 2 else
                " Colours are centred on 0 (white), ± the largest visible score." if kind == "scores" else ""))

if view != VIEWS[1] and view != VIEWS[2]:
    ui.forget_click("hm_grid", "open")              # back on a grid, the same panel can be clicked again

if tokens_view:
    token_view()
elif view == VIEWS[0]:
    vals = matrix(layer, head)
    stem = f"{kind}_{name}"
    title = f"{name} (layer {layer}, head {head}): {kind}"
    if T <= hm.MARK_LIMIT:
        side = min(hm.CONTENT_WIDTH - 200, max(420, 30 * T))     # room for the labels and legend
        chart = hm.cell_chart(vals, labels, labels, masked=masked_full, kind=kind, scale=scale, title=title,
                              size=side, name=name, legend_length=min(300, side))
        st.altair_chart(chart, width="content")
        ui.download_buttons(long_table(vals), chart, stem, meta(layer=layer, head=head), key="one")
    else:
        size = state.fit("win", range(8, hm.MARK_LIMIT + 1, 4), min(32, hm.MARK_LIMIT), what="Window size",
                         because=f"the window is 8 to {hm.MARK_LIMIT} tokens, in steps of 4")
        # the focus window starts on the block holding the most attention, for each head (until moved)
        auto_key = (tuple(ids), layer, head, kind, size)
        if "hm_win_auto" not in st.session_state and ui.from_link("hm_q0", "hm_k0"):
            st.session_state["hm_win_auto"] = auto_key          # the window the link names, not the densest
        if st.session_state.get("hm_win_auto") != auto_key:
            aq, ak, _ = hm.densest_block(vals, size, masked_full)
            st.session_state.update(hm_q0=aq, hm_k0=ak, hm_win_auto=auto_key, hm_win_start=(aq, ak))
        # a click on the image (in the previous run) centres the window on that block
        clicked = ui.new_click("hm_image", "cell")
        if clicked:
            try:
                by, bx = int(clicked[-1]["y"]), int(clicked[-1]["x"])
                kb = max(1, -(-T // hm.TOOLTIP_BLOCKS))
                st.session_state["hm_q0"] = int(np.clip(by + kb // 2 - size // 2, 0, T - size))
                st.session_state["hm_k0"] = int(np.clip(bx + kb // 2 - size // 2, 0, T - size))
            except (KeyError, TypeError, ValueError):
                pass
        for key in ("hm_q0", "hm_k0"):
            st.session_state[key] = int(np.clip(st.session_state.get(key, 0), 0, T - size))
        png = head_png((ctx.model_name, ctx.device, tuple(ids), layer, head, kind, scale), vals, kind, scale)
        domain = hm.colour_domain(vals, masked_full, kind)            # one colour scale for image and window
        q0, k0 = st.session_state["hm_q0"], st.session_state["hm_k0"]
        full = hm.image_chart(vals, masked=masked_full, kind=kind, scale=scale, png=png, size=360, domain=domain,
                              legend=False, title=f"All {T}×{T} cells · click to move the window", labels=labels,
                              select="cell", window=(q0, k0, size, size))
        st.markdown(f"**{title}**")
        st.info(f"{T} tokens is more than the {hm.MARK_LIMIT} drawn cell by cell: the whole matrix is one image "
                f"(one pixel per cell; hover it for the strongest cell of each "
                f"{max(1, -(-T // hm.TOOLTIP_BLOCKS))}×{max(1, -(-T // hm.TOOLTIP_BLOCKS))} block, click it to move "
                f"the window there), and a focus window of at most {hm.MARK_LIMIT}×{hm.MARK_LIMIT} cells (outlined "
                f"in red) is drawn beside it with tokens and tooltips, in the same colours.", icon="🔎")
        left, right = st.columns([0.92, 1.08])
        with left:
            st.altair_chart(full, width="content", on_select="rerun", selection_mode="cell", key="hm_image")
            ui.download_buttons(pd.DataFrame({"query_pos": range(T), "query_token": ctx.model.token_strs(ids)}),
                                full, stem + "_full", meta(layer=layer, head=head), key="full")
            st.download_button(f"Whole matrix as CSV ({T}×{T})", lambda: full_csv(vals), file_name=f"{stem}_matrix.csv",
                               mime="text/csv", key="full-matrix-csv", on_click="ignore")
        with right:
            s1, s2, s3 = st.columns(3)
            size = s1.select_slider("Window size", list(range(8, hm.MARK_LIMIT + 1, 4)), key="hm_win")
            q0 = s2.number_input("Query rows from", 0, T - size, key="hm_q0", step=size // 2)
            k0 = s3.number_input("Key columns from", 0, T - size, key="hm_k0", step=size // 2)
            block = vals[q0 : q0 + size, k0 : k0 + size]
            bmask = hm.causal_masked(T, T, q0, k0, size, size)
            wchart = hm.cell_chart(block, labels, labels, masked=bmask, q0=q0, k0=k0, kind=kind, scale=scale,
                                   title=f"Window: queries {q0}–{q0 + size - 1}, keys {k0}–{k0 + size - 1}",
                                   size=360, domain=domain, name=name, legend_orient="bottom", legend_length=260)
            st.altair_chart(wchart, width="content")
            start = st.session_state.get("hm_win_start")
            if kind == "pattern":
                share = float(block.sum(1).mean())
                st.caption(f"Window of {size}×{size} out of {T}×{T}. The shown keys hold {share:.1%} of these rows' "
                           f"attention on average; the rest goes to keys outside the window." +
                           (" It starts on the block that holds the most attention, not counting key 0 (the first "
                            "token, where many heads rest) and the diagonal (a token attending to itself)."
                            if start == (q0, k0) else ""))
            else:
                st.caption(f"Window of {size}×{size} out of {T}×{T}." +
                           (" It starts on the block that holds the most attention (key 0 and the diagonal not "
                            "counted)." if start == (q0, k0) else ""))
            ui.download_buttons(long_table(block, q0, k0), wchart, stem + f"_q{q0}_k{k0}",
                                meta(layer=layer, head=head), key="win")
else:
    if view == VIEWS[1]:
        panels = [(layer, h) for h in range(cfg.n_heads)]
        stem, what_grid = f"{kind}_L{layer}_all_heads", f"the {cfg.n_heads} heads of layer {layer}"
    else:
        panels = [(l, head) for l in range(cfg.n_layers)]
        stem, what_grid = f"{kind}_H{head}_all_layers", f"head {head} in each of the {cfg.n_layers} layers"
    titles = [hm.head_name(l, h) for l, h in panels]
    shared = st.checkbox("One colour range for all panels", key="hm_shared",
                         help="Off: each panel spans its own range (shapes stand out). On: colours are comparable, "
                              "with one legend.")
    mats = [matrix(l, h) for l, h in panels]
    columns = 3 if len(mats) in (3, 6, 9) else min(4, len(mats))
    chart, k = hm.grid_chart(mats, titles, labels, masked=masked_full, kind=kind, scale=scale, columns=columns,
                             shared=shared, select="open")
    note = f"Showing {what_grid}. Click a panel to open that head on its own; hover for values."
    if not shared:
        note += " Each panel has its own colour range (no legend): tick the box above for one shared range."
    if T > hm.GRID_MARK_LIMIT:
        note += (f" {T} tokens: each panel is an image" +
                 (f" where one pixel is the maximum over a {k}×{k} block of cells" if k > 1 else ", one pixel per cell") +
                 "; its tooltips name the strongest cell of each block.")
    st.caption(note)
    st.altair_chart(chart, width="content", on_select="rerun", selection_mode="open", key="hm_grid")
    if T <= hm.MARK_LIMIT:
        df = pd.concat([long_table(m).assign(layer=l, head=h) for m, (l, h) in zip(mats, panels)], ignore_index=True)
    else:                                     # a million cells per panel: export per-panel statistics instead
        rows = []
        for m, (l, h) in zip(mats, panels):
            row = {"layer": l, "head": h}
            if kind == "pattern":
                sc = metrics.head_scores(torch.from_numpy(m), ids, window=ctx.model.config.window(l))   # m: on the CPU
                row.update({s: float(v) for s, v in sc.items()})
            else:
                row.update({"max score": float(m[~masked_full].max()), "min score": float(m[~masked_full].min())})
            rows.append(row)
        df = pd.DataFrame(rows)
        st.caption("CSV: one row of statistics per panel (the full matrices are too large; export a single head "
                   "from *One head*).")
    ui.download_buttons(df, chart, stem, meta(), key="grid")
