"""The focus window: one head's whole matrix as an image beside a window of at most ``MARK_LIMIT`` cells a
side, drawn cell by cell with tokens and tooltips (Heatmaps' *One head* view for a long prompt).

The window starts on the block that holds the most attention (for each head, until the user moves it),
or where the page's link put it; a click on the image centres it on the clicked block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnkit.charts import heatmaps as heatmap_charts
from attnkit.i18n import t
from attnkit.app.escaping import plain
from attnkit.app.clicks import new_click
from attnkit.app.exports import download_buttons
from attnkit.app.state import from_link


@dataclass
class Matrix:
    """One head's matrix as the page shows it."""

    values: np.ndarray        # [T, T]
    masked: np.ndarray        # [T, T] bool (attention.causal_mask with the layer's window)
    labels: list[str]         # token labels, one per position
    kind: str                 # "pattern" or "scores"
    scale: str
    name: str                 # the head's name, L{l}H{h}
    title: str
    key: tuple                # identifies ``values`` (model, device, ids, layer, head, …) for caches

    @property
    def size(self) -> int:
        return self.values.shape[0]


def place_window(m: Matrix, size: int) -> tuple[int, int]:
    """The window's top-left (q0, k0) in session keys hm_q0/hm_k0: the densest block for a new head, the
    link's position, or centred on a click on the image (from the previous run); always inside the matrix."""
    ss, T = st.session_state, m.size
    auto_key = m.key + (size,)
    if "hm_win_auto" not in ss and from_link("hm_q0", "hm_k0"):
        ss["hm_win_auto"] = auto_key                          # the window the link names, not the densest
    if ss.get("hm_win_auto") != auto_key:
        aq, ak, _ = heatmap_charts.densest_block(m.values, size, m.masked)
        ss.update(hm_q0=aq, hm_k0=ak, hm_win_auto=auto_key, hm_win_start=(aq, ak))
    clicked = new_click("hm_image", "cell")
    if clicked:
        try:
            by, bx = int(clicked[-1]["y"]), int(clicked[-1]["x"])
            kb = block_side(T)
            ss["hm_q0"] = int(np.clip(by + kb // 2 - size // 2, 0, T - size))
            ss["hm_k0"] = int(np.clip(bx + kb // 2 - size // 2, 0, T - size))
        except (KeyError, TypeError, ValueError):
            pass
    for key in ("hm_q0", "hm_k0"):
        ss[key] = int(np.clip(ss.get(key, 0), 0, T - size))
    return ss["hm_q0"], ss["hm_k0"]


def block_side(T: int) -> int:
    """The side of the blocks the image's tooltips and clicks name."""
    return max(1, -(-T // heatmap_charts.TOOLTIP_BLOCKS))


def window_caption(m: Matrix, size: int, block: np.ndarray, at_start: bool) -> str:
    T = m.size
    if m.kind == "pattern":
        share = float(block.sum(1).mean())
        return (t("Window of {size}×{size} out of {T}×{T}. The shown keys hold {share} of these rows' attention on "
                  "average; the rest goes to keys outside the window.", size=size, T=T, share=f"{share:.1%}") +
                (t(" It starts on the block that holds the most attention, not counting key 0 (the first token, "
                   "where many heads rest) and the diagonal (a token attending to itself).") if at_start else ""))
    return (t("Window of {size}×{size} out of {T}×{T}.", size=size, T=T) +
            (t(" It starts on the block that holds the most attention (key 0 and the diagonal not counted).")
             if at_start else ""))


def focus_view(m: Matrix, png: bytes, table, meta: dict, matrix_csv) -> None:
    """Draw the image (click to move the window) and the window beside it, with their downloads.

    ``table(block, q0, k0)``: the long CSV table of a block; ``matrix_csv()``: the whole matrix as CSV bytes."""
    T, kb = m.size, block_side(m.size)
    size = st.session_state.get("hm_win", 32)
    q0, k0 = place_window(m, size)
    domain = heatmap_charts.colour_domain(m.values, m.masked, m.kind)      # one colour scale for image and window
    full = heatmap_charts.image_chart(m.values, masked=m.masked, kind=m.kind, scale=m.scale, png=png, size=360,
                                      domain=domain, legend=False, labels=m.labels, select="cell",
                                      title=t("All {T}×{T} cells · click to move the window", T=T),
                                      window=(q0, k0, size, size))
    st.markdown(f"**{plain(m.title)}**")
    limit = heatmap_charts.MARK_LIMIT
    st.info(plain(t("{T} tokens is more than the {limit} drawn cell by cell: the whole matrix is one image (one pixel per "
              "cell; hover it for the strongest cell of each {kb}×{kb} block, click it to move the window there), "
              "and a focus window of at most {limit}×{limit} cells (outlined in red) is drawn beside it with tokens "
              "and tooltips, in the same colours.", T=T, limit=limit, kb=kb)), icon="🔎")
    left, right = st.columns([0.92, 1.08])
    stem = f"{m.kind}_{m.name}"
    with left:
        st.altair_chart(full, width="content", on_select="rerun", selection_mode="cell", key="hm_image")
        download_buttons(pd.DataFrame({"query_pos": range(T), "query_token": m.labels}), full, stem + "_full",
                         meta, key="full")
        st.download_button(t("Whole matrix as CSV ({T}×{T})", T=T), matrix_csv, file_name=f"{stem}_matrix.csv",
                           mime="text/csv", key="full-matrix-csv", on_click="ignore")
    with right:
        _window(m, domain, table, meta)


def _window(m: Matrix, domain, table, meta: dict) -> None:
    T, limit = m.size, heatmap_charts.MARK_LIMIT
    s1, s2, s3 = st.columns(3)
    size = s1.select_slider(t("Window size"), list(range(8, limit + 1, 4)), key="hm_win")
    q0 = s2.number_input(t("Query rows from"), 0, T - size, key="hm_q0", step=size // 2)
    k0 = s3.number_input(t("Key columns from"), 0, T - size, key="hm_k0", step=size // 2)
    block = m.values[q0 : q0 + size, k0 : k0 + size]
    chart = heatmap_charts.cell_chart(block, m.labels, m.labels, masked=m.masked[q0 : q0 + size, k0 : k0 + size],
                                      q0=q0, k0=k0, kind=m.kind, scale=m.scale, size=360, domain=domain,
                                      title=t("Window: queries {q}, keys {k}", q=f"{q0}–{q0 + size - 1}",
                                              k=f"{k0}–{k0 + size - 1}"),
                                      name=m.name, legend_orient="bottom", legend_length=260)
    st.altair_chart(chart, width="content")
    st.caption(plain(window_caption(m, size, block, st.session_state.get("hm_win_start") == (q0, k0))))
    download_buttons(table(block, q0, k0), chart, f"{m.kind}_{m.name}_q{q0}_k{k0}", meta, key="win")
