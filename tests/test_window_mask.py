"""Local attention windows on the pages: on Mistral, Qwen2 (sliding layers) and GPT-Neo (local layers),
every cell the model gives weight exactly 0 because of the window is drawn masked on Heatmaps and Compare,
in the pattern and the scores view (no number shown), and Step by step's captions state the window."""
import numpy as np
import pyarrow as pa
import pytest
import torch

from attnkit.attention import causal_mask
from attnkit.charts import heatmaps as heatmap_charts
from attnkit.charts import steps as step_charts
from attnkit.loading import load
from attnkit.model import run
from helpers import apptest, make_family_checkpoint

W = 4
TEXT = "one two three four five"
SMALL = dict(hidden_size=64, num_attention_heads=4)
SHAPES = {
    "mistral": ("mistral-window", dict(SMALL, intermediate_size=128, num_key_value_heads=2, head_dim=16,
                                       sliding_window=W)),
    "qwen2": ("qwen2.5-0.5b", dict(SMALL, intermediate_size=128, num_key_value_heads=2, use_sliding_window=True,
                                   sliding_window=W, max_window_layers=1)),
    "gpt-neo": ("gpt-neo-125m", dict(hidden_size=64, num_heads=4, window_size=W)),
}


@pytest.fixture(scope="module", params=list(SHAPES))
def windowed(request, tmp_path_factory):
    """(folder, Loaded, a layer with the window, token ids of TEXT)."""
    shape, kw = SHAPES[request.param]
    folder = make_family_checkpoint(tmp_path_factory.mktemp(request.param), shape, **kw)
    model = load(str(folder), "cpu")
    layer = next(l for l in range(model.config.n_layers) if model.config.window(l) == W)
    ids = model.encode(TEXT)
    assert W + 2 < len(ids) <= heatmap_charts.GRID_MARK_LIMIT       # drawn cell by cell, also in grids
    return folder, model, layer, ids


def _frames(at):
    out = []
    for el in at.get("vega_lite_chart"):
        datasets = [el.proto.data.data] if el.proto.HasField("data") and el.proto.data.data else []
        datasets += [d.data.data for d in el.proto.datasets]
        out += [pa.ipc.open_stream(d).read_pandas() for d in datasets]
    return [f for f in out if {"query", "key", "value", "masked"} <= set(f.columns)]


def _window_zero(model, layer: int, ids: list[int], head: int) -> tuple[np.ndarray, np.ndarray]:
    """(the model's pattern, the cells hidden by the window only) for one head."""
    pattern = run(model.weights, ids, capture=["pattern"])["pattern", layer][0, head].numpy()
    T = len(ids)
    by_window = torch.isinf(causal_mask(T, window=W)).numpy() & ~torch.isinf(causal_mask(T)).numpy()
    return pattern, by_window


def test_heatmaps_draw_the_window_masked_in_both_views(windowed):
    folder, model, layer, ids = windowed
    T = len(ids)
    pattern, by_window = _window_zero(model, layer, ids, 1)
    assert by_window.sum() > 0 and (pattern[by_window] == 0).all()
    at = apptest("heatmaps", folder, text=TEXT, hm_layer=layer, hm_head=1).run()
    assert not at.exception, at.exception
    cells = _frames(at)[0]
    masked = cells["masked"].to_numpy().reshape(T, T)
    assert masked[by_window].all()                                    # every window-hidden cell is grey
    assert (masked == (pattern == 0)).all()                           # and nothing the model lets through
    assert set(cells["state"][by_window.reshape(-1)]) == {"masked (outside the window)"}
    assert any(f"local window of {W}" in c.value for c in at.caption)
    at.radio(key="hm_values").set_value("scores (before softmax)").run()
    cells = _frames(at)[0]
    assert cells["masked"].to_numpy().reshape(T, T)[by_window].all()
    assert cells["shown"].to_numpy().reshape(T, T)[by_window].tolist() == [None] * int(by_window.sum()) or \
        np.isnan(cells["shown"].to_numpy().reshape(T, T)[by_window].astype(float)).all()
    assert np.isfinite(cells["shown"].to_numpy()[~cells["masked"].to_numpy()].astype(float)).all()


def test_grid_panels_and_compare_draw_the_window_masked(windowed):
    folder, model, layer, ids = windowed
    T = len(ids)
    _, by_window = _window_zero(model, layer, ids, 0)
    at = apptest("heatmaps", folder, text=TEXT, hm_layer=layer, hm_head=0,
                 hm_view="One head through all layers").run()
    assert not at.exception, at.exception
    panels = _frames(at)
    assert len(panels) == model.config.n_layers
    for l, cells in enumerate(panels):
        want = torch.isinf(causal_mask(T, window=model.config.window(l))).numpy()
        assert (cells["masked"].to_numpy().reshape(T, T) == want).all(), l
    at = apptest("compare", folder, text=TEXT, cmp_open=[f"L{layer}H0"]).run()
    assert not at.exception, at.exception
    side = [f for f in _frames(at) if len(f) == T * T]
    assert side and side[0]["masked"].to_numpy().reshape(T, T)[by_window].all()


def test_step_by_step_states_the_window(windowed):
    folder, model, layer, ids = windowed
    T = len(ids)
    at = apptest("steps", folder, text=TEXT, st_layer=layer).run()
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    q = T - 1
    assert f"n_vis = min(query+1, w) = min({q + 1}, {W})" in text
    assert "M_j = −∞ for j > query or j ≤ query − w" in text and f"j ≤ {q - W}" in text
    assert f"outside the local window of {W}" in text


def test_the_window_captions_on_hand_computed_cases():
    assert step_charts.visible_count(9, None) == 10 and step_charts.visible_count(9, 4) == 4
    assert step_charts.visible_count(2, 4) == 3                   # near the start the window is not full
    assert step_charts.mask_formula(5, None) == "M_j = 0 for j ≤ 5, −∞ for j > 5"
    assert step_charts.mask_formula(9, 4).startswith("M_j = 0 for 6 ≤ j ≤ 9, ")
    assert step_charts.mask_row_caption(9, 10, 4).startswith("The mask row around the query: 0 on keys 6..9, "
                                                             "−∞ on the 6 key(s) 0..5 outside the local window of 4")
    assert "window" not in step_charts.visible_header(3, 10, None)
