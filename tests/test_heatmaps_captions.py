"""Round five, what a reader sees on Heatmaps: captions show no Markdown marks, name the colours of the scheme the
chart actually draws (in English and 简体中文), and the multi-head grid labels its tokens."""
import json

import numpy as np
import pytest

from attnkit.app.language import SESSION_KEY
from attnkit.charts import heatmaps as H
from attnkit.charts import tokens as token_charts
from attnkit.i18n import language
from helpers import apptest
from markdown_shown import literal_markdown


def _schemes(spec) -> set[str]:
    text = json.dumps(spec)
    return {s for s in H.SCHEME_ENDS if f'"scheme": "{s}"' in text}


@pytest.mark.parametrize("kind", ["pattern", "scores"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_caption_names_the_colours_the_chart_draws(kind, lang):
    v = np.tril(np.random.default_rng(0).random((5, 5)))
    chart = H.cell_chart(v, list("abcde"), list("abcde"), masked=H.masked_cells(5), kind=kind)
    (scheme,) = _schemes(chart.to_dict())
    with language(lang):
        caption = H.mask_caption(5, kind, "linear", [None])
        low, high = (str(w) for w in H.SCHEME_ENDS[scheme])
        assert H.colour_words(kind) == (low, high)
        assert high in caption and low in caption and "**" not in caption
        tokens = token_charts.scale_caption("linear")
        assert all(str(w) in tokens for w in H.SCHEME_ENDS[token_charts.SCHEME])
    if lang == "zh" and kind == "pattern":
        assert "亮黄" in caption and "最深" not in caption        # viridis' top is bright yellow, not the darkest


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heatmaps_shows_no_markdown_marks(lang):
    for view in ("One head", "All heads of a layer", "Tokens"):
        at = apptest("heatmaps", hm_view=view, **{SESSION_KEY: lang}).run()
        assert not at.exception, at.exception
        assert literal_markdown(at) == [], (lang, view)


def _axes(panel: dict) -> dict:
    enc = panel.get("encoding") or next(layer["encoding"] for layer in panel["layer"])
    return {side: enc[side].get("axis", {}) for side in ("x", "y")}


@pytest.mark.parametrize("T", [6, 40])          # one mark per cell, and images (past GRID_MARK_LIMIT)
def test_the_grid_labels_its_outer_panels(T):
    mats = [np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]] * 6
    labels = [f"{i}:tok{i}" for i in range(T)]
    chart, _ = H.grid_chart(mats, [f"L0H{h}" for h in range(6)], labels, masked=H.masked_cells(T), columns=3)
    rows = chart.to_dict()["vconcat"]
    panels = [[p for p in row["hconcat"]] for row in rows]
    for r, row in enumerate(panels):
        for c, panel in enumerate(row):
            ax = _axes(panel)
            assert (ax["y"] is not None) == (c == 0), (r, c)            # the first column: query labels …
            assert (ax["x"] is not None) == (r == len(panels) - 1), (r, c)   # … the bottom row: key labels
    if T <= H.GRID_MARK_LIMIT:                                           # token labels, not only positions
        assert _axes(panels[0][0])["y"].get("labelLimit") == 80
