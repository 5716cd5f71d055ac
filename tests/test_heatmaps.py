"""Heatmap chart builders (attnkit.charts.heatmaps) and the Heatmaps page."""
import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch
from PIL import Image

from attnkit.attention import causal_mask
from attnkit.charts import heatmaps as hm
from helpers import apptest, selectbox

PAGE = "heatmaps"
TEXT = "The animal didn't cross the street because it was too tired."


def _rgb(hexcolour):
    return tuple(int(hexcolour[i : i + 2], 16) for i in (1, 3, 5))


def test_masked_cells_are_the_model_mask_with_its_window():
    for T, S, w in [(5, 5, None), (3, 7, None), (9, 9, 3), (4, 10, 2)]:
        want = torch.isinf(causal_mask(T, S, window=w)).numpy()
        assert (hm.masked_cells(T, S, window=w) == want).all()
    m = hm.masked_cells(6, window=2)
    assert m[5].tolist() == [True, True, True, True, False, False]      # query 5 sees keys 4 and 5 only
    states = hm.mask_state(m, np.arange(6)[:, None].repeat(6, 1), np.arange(6)[None, :].repeat(6, 0))
    assert states[5, 0] == "masked (outside the window)" and states[2, 3] == "masked (future key)"
    assert states[5, 5] == "visible"


def test_png_one_pixel_per_cell_masked_grey_zero_not_grey():
    vals = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])
    masked = hm.masked_cells(3)
    img = Image.open(io.BytesIO(hm.to_png(vals, masked, "pattern"))).convert("RGB")
    assert img.size == (3, 3)
    px = np.array(img)
    grey = _rgb(hm.MASKED_COLOR)
    assert tuple(px[0, 1]) == grey and tuple(px[0, 2]) == grey and tuple(px[1, 2]) == grey
    assert tuple(px[1, 0]) == _rgb("#440154")           # a visible weight of exactly 0: viridis' low end
    assert tuple(px[0, 0]) == _rgb("#fde725")           # the maximum: viridis' high end
    assert tuple(px[1, 0]) != grey


def test_scores_png_is_centred_on_zero():
    vals = np.array([[-2.0, 9.0], [0.0, 2.0]])            # 9.0 is masked: it must not set the colour range
    masked = hm.masked_cells(2)
    assert hm.colour_domain(vals, masked, "scores") == (-2.0, 2.0)
    px = np.array(Image.open(io.BytesIO(hm.to_png(vals, masked, "scores"))).convert("RGB"))
    assert tuple(px[0, 0]) == _rgb("#053061") and tuple(px[1, 1]) == _rgb("#67001f")
    assert tuple(px[1, 0]) == _rgb("#f7f7f7")            # 0 is the neutral white
    assert tuple(px[0, 1]) == _rgb(hm.MASKED_COLOR)


def test_cell_chart_has_one_row_per_cell_with_tokens():
    labels = ["0:a", "1:b", "2:a"]
    vals = np.array([[1.0, 0, 0], [0.3, 0.7, 0], [0.2, 0.3, 0.5]])
    chart = hm.cell_chart(vals, labels, labels, masked=hm.masked_cells(3))
    spec = chart.to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 9
    cell = {(r["query"], r["key"]): r for r in rows}
    assert cell[("2:a", "1:b")]["value"] == pytest.approx(0.3)
    assert cell[("0:a", "2:a")]["masked"] and not cell[("2:a", "0:a")]["masked"]
    assert spec["encoding"]["color"]["condition"]["value"] == hm.MASKED_COLOR
    assert {t["field"] for t in spec["encoding"]["tooltip"]} >= {"query", "key", "value"}
    with pytest.raises(ValueError):
        hm.cell_chart(np.zeros((hm.MARK_LIMIT + 1, 2)), [str(i) for i in range(100)], ["a", "b"])


def test_full_context_image_is_small():
    T = 1024
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(T, T) * 2 + causal_mask(T), -1).numpy()
    spec = hm.image_chart(p, masked=hm.masked_cells(T)).to_json()
    # one image, not a million marks (a mark per cell would be tens of MB)
    assert len(spec) < 1_500_000
    assert '"image"' in spec and "data:image/png;base64," in spec


def test_block_max():
    v = np.arange(16, dtype=float).reshape(4, 4)
    m = np.zeros((4, 4), bool)
    m[0, 0] = m[0, 1] = m[1, 0] = m[1, 1] = True           # a fully masked block
    small, smask, k = hm.block_max(v, m, 2)
    assert k == 2
    assert smask.tolist() == [[True, False], [False, False]]
    assert small[0, 1] == 7 and small[1, 0] == 13 and small[1, 1] == 15
    same, _, k1 = hm.block_max(v, None, 4)
    assert k1 == 1 and same is v


# ----------------------------------------------------------------------------- the page

def chart_data(at) -> list[pd.DataFrame]:
    out = []
    for el in at.get("vega_lite_chart"):
        if el.proto.HasField("data") and el.proto.data.data:
            out.append(pa.ipc.open_stream(el.proto.data.data).read_pandas())
        for d in el.proto.datasets:
            out.append(pa.ipc.open_stream(d.data.data).read_pandas())
    return out


def _cells(at):
    return next(f for f in chart_data(at) if {"query", "key", "value"} <= set(f.columns))


def test_page_shows_the_models_pattern_and_switching_head_changes_it(odd_dir, odd):
    from attnkit.model import run

    at = apptest(PAGE, odd_dir, text=TEXT).run()
    assert not at.exception and not at.error
    ids = odd.encode(TEXT)
    tr = run(odd.weights, ids, capture=["pattern", "scores"])
    first = _cells(at)
    T = len(ids)
    assert len(first) == T * T
    want = tr["pattern", 0][0, 0].numpy()
    got = first["value"].to_numpy().reshape(T, T)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert (first["masked"].to_numpy().reshape(T, T) == np.triu(np.ones((T, T), bool), 1)).all()

    selectbox(at, "hm_head").set_value(3).run()
    np.testing.assert_allclose(_cells(at)["value"].to_numpy().reshape(T, T), tr["pattern", 0][0, 3].numpy(), atol=1e-6)
    at.selectbox(key="hm_layer").set_value(2).run()
    np.testing.assert_allclose(_cells(at)["value"].to_numpy().reshape(T, T), tr["pattern", 2][0, 3].numpy(), atol=1e-6)
    at.radio(key="hm_values").set_value("scores (before softmax)").run()
    assert not at.exception
    np.testing.assert_allclose(_cells(at)["value"].to_numpy().reshape(T, T), tr["scores", 2][0, 3].numpy(), atol=1e-5)


def test_grid_and_strip_views(odd_dir):
    at = apptest(PAGE, odd_dir, text=TEXT, hm_view="All heads of a layer").run()
    assert not at.exception and not at.error
    frames = [f for f in chart_data(at) if "value" in f.columns]
    assert len(frames) == 6                                   # the odd model's 6 heads
    at.radio(key="hm_view").set_value("One head through all layers").run()
    assert not at.exception
    assert len([f for f in chart_data(at) if "value" in f.columns]) == 3


def test_long_prompt_is_an_image_plus_a_stated_window(odd_dir, odd):
    text = "attention lets every token look back " * 20
    at = apptest(PAGE, odd_dir, text=text, hm_win=16).run()
    assert not at.exception and not at.error
    T = len(odd.encode(text))
    assert T > hm.MARK_LIMIT
    sent = [el.proto.spec for el in at.get("vega_lite_chart")]
    sent += [str(v) for f in chart_data(at) if "url" in f.columns for v in f["url"]]
    assert any("data:image/png;base64," in s for s in sent)                 # the whole matrix: one image
    assert any(f"{T} tokens is more than the {hm.MARK_LIMIT}" in i.value for i in at.info)
    window = _cells(at)
    assert len(window) == 16 * 16                             # the focus window, cell by cell
    assert any("Window of 16×16" in c.value for c in at.caption)


def test_csv_upload_offers_its_prompts(odd_dir):
    at = apptest(PAGE, odd_dir, ak_source="Upload", ak_upload_data=("p.csv", b"text\nfirst prompt\nsecond prompt\n")).run()
    assert not at.exception and not at.error
    pick = at.selectbox(key="ak_pick")
    assert "all" in pick.options[0] and any("first prompt" in o for o in pick.options) \
        and any("second prompt" in o for o in pick.options)
    pick.set_value(1).run()
    assert not at.exception
    assert len(_cells(at)) > 0


def test_bad_upload_is_an_error_not_a_traceback(odd_dir):
    at = apptest(PAGE, odd_dir, ak_source="Upload", ak_upload_data=("bad.txt", b"\x00\x01binary")).run()
    assert not at.exception
    assert any("binary" in e.value for e in at.error)
    assert not at.get("vega_lite_chart")


def test_html_in_the_prompt_stays_text(odd_dir):
    at = apptest(PAGE, odd_dir, text="<script>alert(1)</script> <b>bold</b>").run()
    assert not at.exception
    labels = set(_cells(at)["query"])
    assert any("<" in l for l in labels)                      # shown as characters in the labels
    assert all("<script>" not in m.value for m in at.markdown)


def test_pattern_colour_range_ignores_the_one_key_row():
    vals = np.array([[1.0, 0, 0], [0.6, 0.4, 0], [0.2, 0.3, 0.5]])
    masked = hm.masked_cells(3)
    assert hm.colour_domain(vals, masked, "pattern") == (0.0, 0.6)      # row 0 (weight 1 on itself) left out
    px = np.array(Image.open(io.BytesIO(hm.to_png(vals, masked, "pattern"))).convert("RGB"))
    assert tuple(px[0, 0]) == tuple(px[1, 0]) == _rgb("#fde725")       # 1.0 clipped to the top colour
    # a window without query 0 keeps its own maximum
    assert hm.colour_domain(vals[1:], masked[1:], "pattern") == (0.0, 0.6)


def test_switching_layer_head_and_view_never_reruns_the_model(odd_dir, monkeypatch):
    import attnkit.app.caches as ui_mod                # trace() runs the model through caches.run

    calls = []
    real = ui_mod.run

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(ui_mod, "run", counting)
    at = apptest(PAGE, odd_dir, text="A prompt seen by this test only: switching heads reuses one run.").run()
    assert not at.exception
    assert len(calls) == 1
    selectbox(at, "hm_head").set_value(4).run()
    at.selectbox(key="hm_layer").set_value(1).run()
    at.radio(key="hm_values").set_value("scores (before softmax)").run()
    at.radio(key="hm_view").set_value("All heads of a layer").run()
    assert not at.exception
    assert len(calls) == 1
    # the Compare page uses the same cached run (same captures)
    at2 = apptest("compare", odd_dir,
                  text="A prompt seen by this test only: switching heads reuses one run.").run()
    assert not at2.exception
    assert len(calls) == 1


def test_exports_render_to_png_and_svg():
    import vl_convert as vlc

    T = 100
    torch.manual_seed(1)
    p = torch.softmax(torch.randn(T, T) + causal_mask(T), -1).numpy()
    labels = [f"{i}:<b>t{i}</b>" for i in range(T)]
    for chart in (hm.image_chart(p, masked=hm.masked_cells(T)),
                  hm.cell_chart(p[:8, :8], labels, labels, masked=hm.masked_cells(T)[:8, :8])):
        spec = chart.to_json()
        png = vlc.vegalite_to_png(spec)
        assert Image.open(io.BytesIO(png)).size[0] > 200
        svg = vlc.vegalite_to_svg(spec)
        assert svg.lstrip().startswith("<svg")
    assert "&lt;b&gt;t1&lt;/b&gt;" in svg                  # token text escaped inside the SVG, not markup


def test_all_prompts_selected_shows_the_first_and_says_so(odd_dir):
    at = apptest(PAGE, odd_dir, ak_source="Upload", ak_upload_data=("p.csv", b"text\nfirst prompt\nsecond prompt\n"),
                 ak_pick="all").run()
    assert not at.exception and not at.error
    assert any("prompt 1 of 2" in i.value for i in at.info)
    assert len(_cells(at)) > 0


def test_long_prompt_grid_exports_statistics(odd_dir):
    text = "attention lets every token look back " * 20
    at = apptest(PAGE, odd_dir, text=text, hm_view="All heads of a layer").run()
    assert not at.exception and not at.error
    assert any("each panel is an image" in c.value for c in at.caption)
    assert any("one row of statistics per panel" in c.value for c in at.caption)


# ----------------------------------------------------------------------------- issue 16: reading long prompts

def test_scales_map_like_the_vega_scales_and_log_is_the_long_default():
    assert hm.default_scale(hm.MARK_LIMIT) == "linear" and hm.default_scale(hm.MARK_LIMIT + 1) == "log"
    assert hm.default_scale(500, "scores") == "linear"
    dom = (0.0, 1.0)
    v = np.array([0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0, np.nan])
    np.testing.assert_allclose(hm.shade(v, dom, "pattern", "log")[:6], [0, 0, 0, 1 / 3, 2 / 3, 1], atol=1e-12)
    np.testing.assert_allclose(hm.shade(v, dom, "pattern", "sqrt")[:6], np.sqrt(v[:6]))
    np.testing.assert_allclose(hm.shade(v, dom, "pattern", "linear")[:6], v[:6])
    assert np.isnan(hm.shade(v, dom, "pattern", "log")[6])
    sc = hm.colour_scale("pattern", dom, "log").to_dict()
    assert sc["type"] == "log" and sc["domain"] == [1e-3, 1.0] and sc["clamp"]
    assert hm.colour_values(np.array([0.0, 0.5]), dom, "pattern", "log").tolist() == [1e-3, 0.5]   # no log(0)
    for s in hm.SCALES:
        assert hm.scale_note(s)
    # a log PNG: a weight 1/100 of the top sits a third of the way down from the top colour
    px = np.array(Image.open(io.BytesIO(hm.to_png(np.array([[1.0, 0], [0.01, 1.0]]), None, "pattern", dom, "log"))))
    assert px[0, 0] == 254 and px[1, 0] == round(254 / 3) and px[0, 1] == 0


def test_blocks_frame_names_the_strongest_cell_of_each_block():
    T = 8
    v = np.zeros((T, T))
    v[5, 2] = 0.9
    v[1, 0] = 0.4
    labels = [f"{i}:t{i}" for i in range(T)]
    df, k = hm.blocks_frame(v, hm.masked_cells(T), labels, labels, blocks=2)
    assert k == 4
    assert len(df) == 3                                    # the upper-right block is all masked: no mark
    top_left = df[(df["y"] == 0) & (df["x"] == 0)].iloc[0]
    assert (top_left["query"], top_left["key"]) == ("1:t1", "0:t0") and top_left["weight"] == pytest.approx(0.4)
    low_left = df[(df["y"] == 4) & (df["x"] == 0)].iloc[0]
    assert (low_left["query"], low_left["key"], low_left["queries"], low_left["keys"]) == ("5:t5", "2:t2", "4–7", "0–3")
    one, k1 = hm.blocks_frame(v, hm.masked_cells(T), labels, labels, blocks=64)
    assert k1 == 1 and len(one) == T * (T + 1) // 2


def test_long_image_tooltips_are_tokens_and_weights_not_the_picture():
    T = 300
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(T, T) + causal_mask(T), -1).numpy()
    labels = [f"{i}:tok{i}" for i in range(T)]
    spec = hm.image_chart(p, masked=hm.masked_cells(T), labels=labels, select="cell").to_dict()
    image, over = spec["layer"][0], spec["layer"][1]
    assert image["mark"]["tooltip"] is None                                    # no x, y, x2, y2, url
    tips = {t["field"] for t in over["encoding"]["tooltip"]}
    assert {"query", "key", "weight"} <= tips and "url" not in tips
    rows = spec["datasets"][over["data"]["name"]]
    assert 0 < len(rows) <= hm.TOOLTIP_BLOCKS ** 2 < T * T                     # blocks, never a mark per cell
    assert rows[0]["query"].split(":")[1].startswith("tok")
    assert any(p_["name"] == "cell" for p_ in spec.get("params", []) + over.get("params", []))


def test_densest_block_skips_the_first_key_and_the_diagonal():
    T = 100
    a = np.full((T, T), 1e-4)
    a[:, 0] = 0.9                                          # an attention sink on the first token
    a[np.arange(T), np.arange(T)] = 0.5                    # and self-attention
    a[60:70, 20:30] = 0.3                                  # the structure worth looking at
    q0, k0, share = hm.densest_block(a, 16, hm.masked_cells(T))
    assert q0 <= 60 and q0 + 16 >= 70 and k0 <= 20 and k0 + 16 >= 30
    assert 0 < share < 1
    assert hm.densest_block(np.eye(4), 2)[:2] == (2, 2)   # nothing but trivial attention: the last diagonal block


def test_wrap_tokens_lays_text_out_in_lines():
    from attnkit.charts import tokens as tk

    toks = ["The", " cat", " sat", "\n", "注意", "🙂", " on", "mat", " " + "x" * 30]
    lay = tk.wrap_tokens(toks, budget=12)
    assert list(lay["text"][:4]) == ["The", "cat", "sat", "↵"]
    assert list(lay["x0"][:3]) == [0, 4, 8] and lay["line"][:3].tolist() == [0, 0, 0]
    assert lay["line"][3] == 0 or lay["line"][3] == 1                     # ↵ fits or wraps, then the line ends
    r = lay.set_index("text")
    assert r.loc["注意", "line"] > r.loc["sat", "line"] and r.loc["注意", "x0"] == 0
    assert r.loc["注意", "x1"] - r.loc["注意", "x0"] == 4                 # wide characters take two columns
    assert r.loc["mat", "x0"] == r.loc["on", "x1"]                         # no space: no gap
    assert (lay["x1"] <= 12).all()
    assert lay["text"].iloc[-1].endswith("…")                              # longer than a line: cut
    assert tk.char_columns("ab注🙂") == 6


def test_token_chart_carries_each_tokens_weights_to_every_focus():
    from attnkit.charts import tokens as tk

    T = 6
    torch.manual_seed(0)
    A = torch.softmax(torch.randn(T, T) + causal_mask(T), -1).numpy()
    toks = ["<b>x</b>", " a", " b", "c", " d", " e"]
    for direction, want in (("to", A.T), ("from", A)):
        spec = tk.token_chart(A, toks, direction=direction, focus=2).to_dict()
        rows = pd.DataFrame(next(iter(spec["datasets"].values())))
        got = rows[[f"w{i}" for i in range(T)]].to_numpy()
        np.testing.assert_allclose(got, want, atol=1e-5)
        assert rows["text"][0] == "<b>x</b>"                                  # drawn as text by Vega
        params = spec.get("params") or spec["layer"][0].get("params")
        assert params[0]["value"] == [{"pos": 2}]
    with pytest.raises(ValueError):
        tk.token_chart(np.zeros((tk.TOKEN_LIMIT + 1,) * 2), ["a"] * (tk.TOKEN_LIMIT + 1))


def test_page_token_view(odd_dir, odd):
    from attnkit.model import run

    at = apptest(PAGE, odd_dir, text=TEXT, hm_view="Tokens", hm_layer=1, hm_head=2).run()
    assert not at.exception and not at.error
    ids = odd.encode(TEXT)
    T = len(ids)
    frame = next(f for f in chart_data(at) if "w0" in f.columns)
    A = run(odd.weights, ids, capture=["pattern"])["pattern", 1][0, 2].numpy()
    np.testing.assert_allclose(frame[[f"w{i}" for i in range(T)]].to_numpy(), A.T, atol=1e-4)
    at.radio(key="hm_tok_heads").set_value("mean").run()
    at.radio(key="hm_tok_dir").set_value("from").run()
    assert not at.exception
    frame = next(f for f in chart_data(at) if "w0" in f.columns)
    mean = run(odd.weights, ids, capture=["pattern"])["pattern", 1][0].mean(0).numpy()
    np.testing.assert_allclose(frame[[f"w{i}" for i in range(T)]].to_numpy(), mean, atol=1e-4)


def test_page_long_prompt_defaults_to_log_and_the_densest_window(odd_dir, odd):
    from attnkit.model import run

    text = "attention lets every token look back " * 20
    at = apptest(PAGE, odd_dir, text=text).run()
    assert not at.exception and not at.error
    assert at.radio(key="hm_scale").value == "log"
    ids = odd.encode(text)
    vals = run(odd.weights, ids, capture=["pattern"])["pattern", 0][0, 0].numpy()
    q0, k0, _ = hm.densest_block(vals, 32, hm.masked_cells(len(ids)))
    assert (at.number_input(key="hm_q0").value, at.number_input(key="hm_k0").value) == (q0, k0)
    assert any("most attention" in c.value for c in at.caption)
    assert any("logarithmic" in c.value for c in at.caption)
    tips = [f for f in chart_data(at) if {"query", "key", "weight"} <= set(f.columns)]
    assert tips and len(tips[0]) <= hm.TOOLTIP_BLOCKS ** 2
    at.radio(key="hm_scale").set_value("linear").run()                # the user's choice sticks
    selectbox(at, "hm_head").set_value(1).run()
    assert at.radio(key="hm_scale").value == "linear" and not at.exception


def test_grid_names_heads_and_a_clicked_panel_opens_it(odd_dir):
    at = apptest(PAGE, odd_dir, text=TEXT, hm_view="All heads of a layer", hm_layer=2).run()
    assert not at.exception
    heads = set().union(*[set(f["head"]) for f in chart_data(at) if "head" in f.columns])
    assert heads == {f"L2H{h}" for h in range(6)}
    at.session_state["hm_grid"] = {"selection": {"open": [{"head": "L2H4"}]}}   # what a click on L2H4 sends
    at.run()
    assert not at.exception
    assert at.radio(key="hm_view").value == "One head"
    assert (at.selectbox(key="hm_layer").value, selectbox(at, "hm_head").value) == (2, 4)
