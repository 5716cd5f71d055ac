"""Heatmaps: one head's attention pattern (or pre-softmax scores), a layer's heads, a head through the layers,
and the prompt as text coloured by one token's attention (the Tokens view)."""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
import torch

from attnkit import app as ui
from attnkit import metrics
from attnkit.app.pages.heatmaps import focus
from attnkit.app.pages.heatmaps import why as why_view
from attnkit.app.pages.shared import matrices
from attnkit.app.pages.shared.labels import SCALE_NAMES, shown
from attnkit.charts import heatmaps as heatmap_charts
from attnkit.charts import tokens as token_charts
from attnkit.i18n import msg, t
from attnkit.standard import head_name, parse_head

CAPTURE = ("pattern", "scores")        # the same capture as the Compare page: one cached run serves both
VIEWS = ["One head", "All heads of a layer", "One head through all layers", "Tokens"]
VIEW_NAMES = dict(zip(VIEWS, (msg("One head"), msg("All heads of a layer"), msg("One head through all layers"),
                                msg("Tokens"))))
TOKEN_HEADS = {"one": msg("the chosen head"), "mean": msg("mean of the layer's heads"),
               "max": msg("max of the layer's heads")}
TOKEN_DIRS = {"to": msg("what the chosen token attends to"), "from": msg("what attends to the chosen token")}
KINDS = {"pattern (after softmax)": "pattern", "scores (before softmax)": "scores"}
KIND_NAMES = dict(zip(KINDS, (msg("pattern (after softmax)"), msg("scores (before softmax)"))))


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
    why_q: int = ui.param(None)                  # the why panel's query and key (None: not picked): in the link
    why_k: int = ui.param(None)


ctx = ui.page("heatmaps")

cfg = ctx.model.config
if ctx.all_selected:
    st.info(t("Heatmaps show one prompt at a time: this is prompt 1 of {n}. Pick a prompt in the sidebar to see "
              "another; the Compare page averages over all of them.", n=len(ctx.prompts)), icon="ℹ️")
ids = ctx.ids
T = len(ids)
labels = ui.token_labels(ctx.model.token_texts(ids))
with st.spinner(t("Running the model (once per prompt; switching layer or head reuses the run) …")):
    tr = ui.trace(ctx, capture=CAPTURE)
state = Inputs.load(scale=heatmap_charts.default_scale(T))
for field, opts, what, why in (("view", VIEWS, t("View"), t("not a view of this page")),
                               ("values", list(KINDS), t("Values"), t("not a kind of values")),
                               ("tok_dir", list(TOKEN_DIRS), t("Colour the other tokens by"), t("not a choice")),
                               ("tok_heads", list(TOKEN_HEADS), t("Weights of"), t("not a choice")),
                               ("tok_follow", ["click", "hover"], t("Choose the token by"), t("not a choice"))):
    state.fit(field, opts, opts[0], what=what, because=why)
state.fit_head(cfg, ctx.model_name)

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
auto_scale = heatmap_charts.default_scale(T)
if st.session_state.get("hm_scale") not in (*heatmap_charts.SCALES, None) or \
        st.session_state.get("hm_scale") in (None, st.session_state.get("hm_scale_auto")):
    st.session_state["hm_scale"] = auto_scale
st.session_state["hm_scale_auto"] = auto_scale


def choices() -> tuple[str, str, int, int, str]:
    """The row of inputs: (view, kind, layer, head, scale)."""
    c1, c2, c3, c4, c5 = st.columns([2.2, 2, 0.9, 1.3, 1.5])
    view = c1.radio(t("View"), VIEWS, key="hm_view", format_func=shown(VIEW_NAMES))
    kind = KINDS[c2.radio(t("Values"), list(KINDS), key="hm_values", disabled=view == VIEWS[3],
                          format_func=shown(KIND_NAMES),
                          help=t("Scores are q·k/√d before the mask; the mask replaces a grey cell's score by −∞, so "
                                 "its weight after softmax is exactly 0 and no number is shown for it. "
                                 "The Tokens view shows weights."))]
    kind = "pattern" if view == VIEWS[3] else kind
    layer = c3.selectbox(t("Layer"), range(cfg.n_layers), key="hm_layer", disabled=view == VIEWS[2])
    head = ui.select(c4, t("Head"), range(cfg.n_heads), state, "head", lambda h: f"{h} ({head_name(layer, h)})",
                     disabled=view == VIEWS[1],
                     help=t("The head's number in its layer, with its name {name}.", name="L{layer}H{head}"))
    scale = c5.radio(t("Colour scale"), list(heatmap_charts.SCALES), key="hm_scale", disabled=kind != "pattern",
                     format_func=shown(SCALE_NAMES),
                     help=t("Patterns only. Above {n} tokens most weights are tiny and a linear scale draws them all "
                            "dark, so the page starts on the log scale there (linear below). Square root is in "
                            "between.", n=heatmap_charts.MARK_LIMIT))
    return view, kind, layer, head, scale if kind == "pattern" else "linear"


view, kind, layer, head, scale = choices()
name = head_name(layer, head)


def matrix(layer: int, head: int) -> np.ndarray:
    # a copy of one head: holding a view would keep the layer's whole [H, T, T] capture alive after the cache
    # let it go (a layer-by-layer trace of a large model)
    return tr[kind, layer][0, head].float().cpu().numpy().copy()


def masked(layer: int) -> np.ndarray:
    """The cells the model's mask hides in ``layer`` (its local window included): drawn grey."""
    return heatmap_charts.masked_cells(T, window=cfg.window(layer))


def meta(**extra) -> dict:
    return ui.meta_for(ctx, values=kind, n_tokens=T) | {"colour scale": scale} | extra


@ui.budgeted
def head_png(key: tuple, _values: np.ndarray, kind: str, scale: str, window: int | None) -> bytes:
    """The PNG of one full matrix; ``key`` = (model, device, ids, layer, head) identifies ``_values``."""
    return heatmap_charts.to_png(_values, heatmap_charts.masked_cells(_values.shape[0], window=window), kind, None,
                                 scale)


def long_table(values: np.ndarray, layer: int, q0: int = 0, k0: int = 0) -> pd.DataFrame:
    return matrices.cell_rows(values, ctx.model.token_strs(ids), masked(layer), "weight" if kind == "pattern" else
                              "score", q0, k0)


def full_csv(values: np.ndarray) -> bytes:
    """The whole matrix, one row per query position, as CSV (built only when clicked)."""
    return ui.csv_bytes(matrices.matrix_rows(values, ctx.model.token_strs(ids)),
                        comments=ui.meta_for(ctx, values=kind, n_tokens=T))


def token_view():
    """The prompt as text; the chosen token's attention colours the others."""
    st.caption(t("The prompt as text. **Click a token** to choose it (the red one); every other token is coloured "
                 "by the chosen token's attention, and hovering a token shows its weight. Greyed tokens are hidden "
                 "from the chosen one by the mask."))
    if T > token_charts.TOKEN_LIMIT:
        st.info(t("{T} tokens: the token view is for prompts of up to {n} tokens (it sends every weight to the "
                  "browser). Use *One head* for the whole matrix.", T=T, n=token_charts.TOKEN_LIMIT), icon="ℹ️")
        return
    a1, a2, a3 = st.columns([1.6, 1.4, 1.2])
    direction = a1.radio(t("Colour the other tokens by"), list(TOKEN_DIRS), key="hm_tok_dir",
                         format_func=shown(TOKEN_DIRS))
    heads = a2.radio(t("Weights of"), list(TOKEN_HEADS), key="hm_tok_heads", format_func=shown(TOKEN_HEADS),
                     help=t("One head (Layer and Head above), or every head of the layer combined: their mean "
                            "(the average pattern) or their max (any head attending strongly)."))
    follow = a3.radio(t("Choose the token by"), ["click", "hover"], key="hm_tok_follow",
                      format_func=shown({"click": msg("clicking it"), "hover": msg("pointing at it")}),
                      help=t("Pointing: the colours follow the mouse and return to the clicked token when it leaves "
                             "the text."))
    layer_p = tr["pattern", layer][0].float().cpu().numpy()           # [H, T, T], read only
    weights, which = {"one": (layer_p[head], t("head {name}", name=name)),
                      "mean": (layer_p.mean(0), t("mean of layer {l}'s {n} heads", l=layer, n=cfg.n_heads)),
                      "max": (layer_p.max(0), t("max of layer {l}'s {n} heads", l=layer, n=cfg.n_heads))}[heads]
    chart = token_charts.token_chart(weights, ctx.model.token_strs(ids), direction=direction, follow=follow,
                                     scale=scale, title=f"{which}: {TOKEN_DIRS[direction]}",
                                     groups=ctx.model.token_groups(ids), ids=ids)
    st.altair_chart(chart, width="content", key="hm_tokens")
    st.caption(ui.plain(token_charts.scale_caption(scale)) + t(" The last token is the one chosen at first; a "
               "character split over several byte-level tokens is drawn once across them (its tooltip lists the "
               "pieces)."))
    ui.download_buttons(matrices.matrix_rows(weights, ctx.model.token_strs(ids)), None, f"pattern_L{layer}_{heads if heads != 'one' else f'H{head}'}",
                        meta(layer=layer, heads=TOKEN_HEADS[heads]), key="tok")


def one_head():
    vals = matrix(layer, head)
    title = t("{name} (layer {l}, head {h}): {kind}", name=name, l=layer, h=head,
              kind=t("pattern") if kind == "pattern" else t("scores"))
    if T <= heatmap_charts.MARK_LIMIT:
        side = min(heatmap_charts.CONTENT_WIDTH - 200, max(420, 30 * T))     # room for the labels and legend
        chart = heatmap_charts.cell_chart(vals, labels, labels, masked=masked(layer), kind=kind, scale=scale,
                                          title=title, size=side, name=name, legend_length=min(300, side))
        why_view.draw_clickable(chart)
        ui.download_buttons(long_table(vals, layer), chart, f"{kind}_{name}", meta(layer=layer, head=head), key="one")
        why_view.panel(ctx, ids, layer, head, tr, labels)
        return
    state.fit("win", range(8, heatmap_charts.MARK_LIMIT + 1, 4), min(32, heatmap_charts.MARK_LIMIT),
              what=t("Window size"),
              because=t("the window is 8 to {n} tokens, in steps of 4", n=heatmap_charts.MARK_LIMIT))
    key = (ctx.model_name, ctx.device, tuple(ids), layer, head, kind)
    png = head_png(key + (scale,), vals, kind, scale, cfg.window(layer))
    m = focus.Matrix(vals, masked(layer), labels, kind, scale, name, title, key)
    focus.focus_view(m, png, lambda block, q0, k0: long_table(block, layer, q0, k0), meta(layer=layer, head=head),
                     lambda: full_csv(vals))
    why_view.panel(ctx, ids, layer, head, tr, labels)


def grid():
    if view == VIEWS[1]:
        panels = [(layer, h) for h in range(cfg.n_heads)]
        stem, what_grid = f"{kind}_L{layer}_all_heads", t("the {n} heads of layer {l}", n=cfg.n_heads, l=layer)
    else:
        panels = [(layer_, head) for layer_ in range(cfg.n_layers)]
        stem, what_grid = f"{kind}_H{head}_all_layers", t("head {h} in each of the {n} layers", h=head,
                                                            n=cfg.n_layers)
    shared = st.checkbox(t("One colour range for all panels"), key="hm_shared",
                         help=t("Off: each panel spans its own range (shapes stand out). On: colours are comparable, "
                                "with one legend."))
    mats = [matrix(l_, h) for l_, h in panels]
    masks = [masked(l_) for l_, _ in panels]
    columns = 3 if len(mats) in (3, 6, 9) else min(4, len(mats))
    chart, k = heatmap_charts.grid_chart(mats, [head_name(l_, h) for l_, h in panels], labels, masked=masks,
                                         kind=kind, scale=scale, columns=columns, shared=shared, select="open")
    note = t("Showing {what}. Click a panel to open that head on its own; hover for values.", what=what_grid)
    if not shared:
        note += t(" Each panel has its own colour range (no legend): tick the box above for one shared range.")
    if T > heatmap_charts.GRID_MARK_LIMIT:
        note += (t(" {T} tokens: each panel is an image where one pixel is the maximum over a {k}×{k} block of "
                   "cells; its tooltips name the strongest cell of each block.", T=T, k=k) if k > 1 else
                 t(" {T} tokens: each panel is an image, one pixel per cell; its tooltips name the strongest cell "
                   "of each block.", T=T))
    st.caption(note)
    st.altair_chart(chart, width="content", on_select="rerun", selection_mode="open", key="hm_grid")
    ui.download_buttons(grid_table(mats, masks, panels), chart, stem, meta(), key="grid")


def grid_table(mats: list, masks: list, panels: list) -> pd.DataFrame:
    """The grid's CSV: every cell when short; one row of statistics per panel for a long prompt."""
    if T <= heatmap_charts.MARK_LIMIT:
        return pd.concat([long_table(m, l_).assign(layer=l_, head=h) for m, (l_, h) in zip(mats, panels)],
                         ignore_index=True)
    rows = []                                 # a million cells per panel: per-panel statistics instead
    for m, hidden, (l_, h) in zip(mats, masks, panels):
        row = {"layer": l_, "head": h}
        if kind == "pattern":
            scores = metrics.head_scores(torch.from_numpy(m), ids, window=cfg.window(l_))   # m: on the CPU
            row.update({s: float(v) for s, v in scores.items()})
        else:
            row.update({"max score": float(m[~hidden].max()), "min score": float(m[~hidden].min())})
        rows.append(row)
    st.caption(t("CSV: one row of statistics per panel (the full matrices are too large; export a single head "
                 "from *One head*)."))
    return pd.DataFrame(rows)


if view != VIEWS[3]:
    drawn = range(cfg.n_layers) if view == VIEWS[2] else [layer]
    st.caption(ui.plain(heatmap_charts.mask_caption(T, kind, scale, [cfg.window(layer_) for layer_ in drawn])))
if view not in (VIEWS[1], VIEWS[2]):
    ui.forget_click("hm_grid", "open")              # back on a grid, the same panel can be clicked again
{VIEWS[0]: one_head, VIEWS[1]: grid, VIEWS[2]: grid, VIEWS[3]: token_view}[view]()
