"""Every chart builder of attnkit/charts/, rendered to its Vega-Lite spec (Altair ``to_dict()``), in English and in
简体中文, is held to the rules a reader at 1280 px needs (issue 44, items 2, 9, 10):

* every axis of a category scale (tokens, heads, parts) draws every label it is given (``labelOverlap`` off: the
  dashboard's Vega theme turns it on and silently drops labels);
* an axis of an integer quantity (positions, layers, heads, steps) has integer ticks only;
* every legend has a title, through the catalog: in Chinese no title, axis or legend is left in English;
* no chart has a fixed width beyond the page's content at 1280 px (the sidebar open);
* a continuous colour legend is drawn as colour squares, not as an SVG gradient (which refers to the page's
  address and loses its colours when the link changes after the chart is drawn);
* the score-split charts say what they plot: their values add up to the number their axis names.

``SAMPLES`` holds one call per builder on small hand-made inputs of the builder's documented shape; a builder
added without a sample fails :func:`test_every_builder_has_a_sample`.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import attnkit.charts as charts_pkg
from attnkit import score_terms as ST
from attnkit.charts import ablations as AB, atlas as AT, circuits as CI, effects as EF, entropy as EN, heatmaps as HM
from attnkit.charts import score_terms as TS, sinks as SK, steps as SP, tokens as TK, training as TR, verify as VF
from attnkit.charts.axes import CONTENT_WIDTH
from attnkit.ablations import get_kind
from attnkit.ablations.registry import HULL_DISTANCE
from attnkit.i18n import language, t
from untranslated import english_words, spec_texts, untranslated

TOKENS = ["0:The", "1:␣animal", "2:␣didn", "3:'t", "4:␣cross", "5:␣the", "6:␣street"]
RNG = np.random.default_rng(0)


# ----------------------------------------------------------------------------- hand-made inputs

def _pattern(T: int = 7) -> np.ndarray:
    a = np.tril(RNG.random((T, T)) + 0.1)
    return a / a.sum(1, keepdims=True)


def _terms(against=None) -> ST.ScoreTerms:
    q = ["embed", "pos_embed", "L0H0", "L0H1", "MLP0", "b_Q"]
    k = ["embed", "pos_embed", "L0H0", "L0H1", "MLP0", "b_K", "ln1 bias"]
    v = RNG.normal(size=(len(q), len(k)))
    return ST.ScoreTerms("L1H0", 0, 5, 2, against, q, k, v, float(v.sum()))


def _row() -> ST.RowTerms:
    q, k = ["embed", "pos_embed", "L0H0"], ["embed", "pos_embed", "L0H0", "b_K"]
    ks, qs = RNG.normal(size=(len(k), 6)), RNG.normal(size=(len(q), 6))
    return ST.RowTerms("L1H0", 0, 5, np.arange(6), ks.sum(0), q, k, ks, qs)


def _heads_frame(value: str, L: int = 3, H: int = 4) -> pd.DataFrame:
    return pd.DataFrame([{"layer": l, "head": h, value: float(RNG.normal()), "logit_diff": 0.5, "std": 0.1}
                         for l in range(L) for h in range(H)])


def _composition():
    labels = [f"L{l}H{h}" for l in range(2) for h in range(3)]
    s = np.full((6, 6), np.nan)
    s[:3, 3:] = RNG.random((3, 3))
    return SimpleNamespace(n_heads=3, labels=labels, scores={"k": s}, baseline={"mean": 0.1, "q99": 0.5})


def _circuit():
    curve = pd.DataFrame({"edges": [1, 2, 4, 8, 16], "faithfulness": [0.1, 0.3, 0.6, 0.85, 0.95]})
    return SimpleNamespace(curve_frame=lambda: curve, ablation="resample", target=0.8, empty_ld=0.2, clean_ld=2.0,
                           size=8, share=0.85)


def _series():
    from test_series import _hand_made
    from attnkit import training

    cps = [_hand_made(s, [v] * 3 + [v + 0.01], -v) for s, v in [(0, 0.1), (10, 0.2), (20, 0.9), (30, 0.95)]]
    return training.SeriesResult("hand", "hand", cps)


def _entropy_frame() -> pd.DataFrame:
    return pd.DataFrame([{"layer": l, "position": n - 1, "n": n, "mean": 0.1 * l + np.log(n) / 3, "std": 0.05,
                          "lo": 0.0, "hi": 1.0, "docs": 3, "bound": float(np.log(n))}
                         for l in range(2) for n in (1, 2, 4, 8, 16)])


def _kv_steps() -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "predicts position": 5 + s, "fed (cache)": 5 if s == 0 else 1} for s in range(4)])


def _lens() -> pd.DataFrame:
    rows = ["embed", "after 0", "after 1"]
    return pd.DataFrame([{"row": r, "position": p, "top_token": " the", "top_prob": 0.3 + 0.1 * p,
                          "top_k": "' the' ' a'", "answer_rank": 1 + 7 * p, "answer_prob": 0.1}
                         for r in rows for p in range(4)]), rows


def _graph():
    nodes = pd.DataFrame([{"layer": l, "position": p} for l in range(3) for p in range(4)])
    edges = pd.DataFrame([{"layer": 0, "from_pos": 0, "to_pos": 3, "share": 0.6, "kind": "attention", "top_head": "L0H1",
                           "top_head_share": 0.5},
                          {"layer": 1, "from_pos": 3, "to_pos": 3, "share": 0.4, "kind": "residual", "top_head": "",
                           "top_head_share": 0.0}])
    return nodes, edges


def _verify_frame() -> pd.DataFrame:
    rows = [("0", "attention pattern"), ("0", "hidden state (relative)"), ("final", "logits (relative)"),
            ("generation", "generation step logits (relative)")]
    return pd.DataFrame([{"run": "cpu", "layer": l, "quantity": q, "attnkit error": 3e-8, "HF error": 2e-8,
                          "allowed": 1e-6, "float64 |Δ|": 0.0, "ok": True} for l, q in rows])


def _sweep_frame() -> pd.DataFrame:
    return pd.DataFrame([{"scope": s, "nats/token": 3.2, "increase": d, "low": d - 0.1, "high": d + 0.1,
                          "perplexity": 24.5} for s, d in (("L0", 0.31), ("L1", -0.02), ("all", 1.23))])


def _ablation_heads() -> pd.DataFrame:
    from attnkit import ablations as A

    inc = RNG.normal(size=(2, 3)) * 0.3
    return AB.head_map_frame(A.HeadMap("zero-head", 3.0, 100, inc, inc - 0.1, inc + 0.1, 6))


def _atlas_frame() -> pd.DataFrame:
    rows = [{"head": f"L{l}H{h}", "layer": l, "induction": RNG.uniform(), "effect": RNG.normal() * 0.05,
             "verdict: induction": "pattern only" if h else "pattern and effect"} for l in range(2) for h in range(3)]
    return AT.scatter_frame(pd.DataFrame(rows), "induction")


def _qk_points() -> list[dict]:
    return [{"x": float(RNG.normal()), "y": float(RNG.normal()), "kind": k, "token": tok}
            for k in ("query", "key") for tok in TOKENS]


SAMPLES = {
    "atlas.scatter": lambda: (AT.scatter(_atlas_frame(), "induction", "effect"),
                              AT.scatter(_atlas_frame(), "induction", "effect", color="layer")),
    "atlas.qk_chart": lambda: AT.qk_chart(_qk_points(), [0.41, 0.22]),
    "ablations.layer_metric_chart": lambda: AB.layer_metric_chart(pd.DataFrame(
        [{"layer": l, "run": r, "value": 0.5 + l + (r == "ablated"), "in scope": True} for l in range(3)
         for r in ("baseline", "ablated")]), HULL_DISTANCE),
    "ablations.sweep_chart": lambda: AB.sweep_chart(_sweep_frame(), t("{kind}: loss change per layer (and all)",
                                                                      kind="V = X")),
    "ablations.head_map_chart": lambda: AB.head_map_chart(_ablation_heads(), t("{kind}: loss change per head",
                                                                               kind=get_kind("zero-head").label)),
    "ablations.position_chart": lambda: AB.position_chart(pd.DataFrame(
        {"position": range(5), "relative_change": [0.0, 0.1, 0.25, 0.3, 0.42], "top1_changed": 0.2, "texts": 1,
         "token": TOKENS[:5]})),
    "circuits.composition_matrix": lambda: CI.composition_matrix(_composition(), "k"),
    "circuits.circuit_graph": lambda: CI.circuit_graph(
        [("embed", "L0H1.v", 1.0), ("L0H1", "L1H2.k", 2.0), ("L1H2", "logits", 1.5), ("L0H1", "MLP1", 0.5)], 2, 4,
        marks={("embed", "L0H1.v"): "found", ("L0H1", "L1H2.k"): "missed"}, mark_labels=CI.mark_labels()),
    "circuits.faithfulness_curve": lambda: CI.faithfulness_curve(_circuit()),
    "circuits.estimate_vs_exact": lambda: CI.estimate_vs_exact(pd.DataFrame(
        {"name": ["L0H0", "L0H1", "L1H0"], "exact": [0.1, -0.2, 0.5], "estimate": [0.12, -0.15, 0.43]})),
    "effects.head_map": lambda: EF.head_map(_heads_frame("normalised"), "normalised", legend_title=t("normalised")),
    "effects.layer_pos_map": lambda: EF.layer_pos_map(pd.DataFrame(
        [{"layer": l, "position": p, "normalised": float(RNG.normal()), "row": f"before L{l}" if l < 2 else
          "after L1 (final)"} for l in range(3) for p in range(7)]), TOKENS, "normalised", legend_title=t("normalised")),
    "effects.layer_bars": lambda: EF.layer_bars(pd.DataFrame(
        {"layer": range(3), "mean": [0.1, 0.5, 0.9], "std": [0.05, 0.1, 0.02], "n": 4,
         "row": ["before L0", "before L1", "after L1 (final)"]})),
    "effects.attribution_bars": lambda: EF.attribution_bars(pd.DataFrame(
        {"part": ["L1H0", "MLP0", "embed", "L0H1"], "kind": ["head", "mlp", "embed", "head"],
         "logit_diff": [1.2, -0.4, 0.3, 0.05]})),
    "effects.contribution_graph": lambda: EF.contribution_graph(*_graph(), TOKENS[:4]),
    "effects.lens_chart": lambda: EF.lens_chart(_lens()[0], TOKENS[:4], _lens()[1], answer=" Mary"),
    "effects.head_tokens_chart": lambda: EF.head_tokens_chart(pd.DataFrame(
        {"token": [" Mary", " John", " the"], "token_id": [5, 6, 7], "logit": [2.0, -1.0, 0.4],
         "direction": ["promoted", "suppressed", "promoted"]})),
    "effects.set_average_charts": lambda: EF.set_average_charts(
        _heads_frame("mean").assign(std=0.2), ("layer", "head"), n=4, direction="denoise", what="z"),
    "entropy.curves": lambda: EN.curves(_entropy_frame(), t("entropy H (nats)")),
    "entropy.slope_map": lambda: EN.slope_map(pd.DataFrame(
        [{"layer": l, "head": h, "slope": float(RNG.normal()) * 0.5, "intercept": 0.1, "r2": 0.9}
         for l in range(2) for h in range(4)])),
    "entropy.compare": lambda: EN.compare(pd.concat([_entropy_frame().assign(variant=v)
                                                    for v in ("unmodified", "log-length")])),
    "entropy.loss_bins": lambda: EN.loss_bins(pd.DataFrame(
        {"bin": ["1–16", "17–64"], "n_from": [1, 17], "unmodified": [4.1, 3.2], "log-length": [4.0, 3.3],
         "change": [-0.1, 0.1], "tokens": [16, 48]})),
    "heatmaps.cell_chart": lambda: HM.cell_chart(_pattern(), TOKENS, TOKENS, masked=HM.masked_cells(7), title="L0H0",
                                                 name="L0H0"),
    "heatmaps.image_chart": lambda: HM.image_chart(_pattern(), masked=HM.masked_cells(7), labels=TOKENS, name="L0H0"),
    "heatmaps.grid_chart": lambda: HM.grid_chart([_pattern(), _pattern()], ["L0H0", "L0H1"], TOKENS,
                                                 masked=HM.masked_cells(7), shared=True, columns=2),
    "heatmaps.head_overview_chart": lambda: HM.head_overview_chart(pd.DataFrame(
        [{"head": f"L{l}H{h}", "layer": l, "head_index": h, "mean entropy": float(RNG.random())}
         for l in range(2) for h in range(4)]), "mean entropy", label=t("mean entropy")),
    "heatmaps.rank_chart": lambda: HM.rank_chart(pd.DataFrame(
        {"head": ["L1H0", "L0H1", "L1H2"], "layer": [1, 0, 1], "weight": [0.6, 0.3, 0.1], "rank_in_row": [1, 2, 3],
         "top_key": TOKENS[:3]}), title=t("Weight from {q} to {k}, top {top} of {n} heads", q=TOKENS[5], k=TOKENS[1],
                                          top=3, n=8)),
    "heatmaps.distance_chart": lambda: HM.distance_chart(RNG.random((4, 4)) * 0.5, ["L0H0", "L0H1", "L1H0", "L1H1"],
                                                         [0, 2, 1, 3]),
    "heatmaps.distance_image": lambda: HM.distance_image(RNG.random((80, 80)), list(range(80))),
    "score_terms.terms_grid": lambda: TS.terms_grid(_terms()),
    "score_terms.top_terms_bars": lambda: TS.top_terms_bars(_terms(), 5),
    "score_terms.side_bars": lambda: TS.side_bars(_terms(against=4), "key", 3),
    "score_terms.row_by_kind": lambda: TS.row_by_kind(_row(), TOKENS[:6]),
    "score_terms.layer0_bars": lambda: TS.layer0_bars(dict(zip(ST.L0_CELLS, [0.4, 0.2, -0.1, 0.3, 0.05]))),
    "sinks.loss_chart": lambda: SK.loss_chart(pd.DataFrame(
        [{"sinks": k, "window": w, "mode": "original", "loss": 3 + 1 / w + k * 0.01, "low": 2.9, "high": 3.2,
          "delta": 0.1} for k in (0, 4) for w in (8, 16, 64)]), {"loss": 3.0, "low": 2.95, "high": 3.05}),
    "sinks.share_heatmap": lambda: SK.share_heatmap(pd.DataFrame(
        [{"layer": l, "head": h, "name": f"L{l}H{h}", "first_token": 0.3, "first_4": 0.5, "write_ratio": 0.2,
          "sink": h == 0} for l in range(2) for h in range(4)]), 4),
    "sinks.share_by_position": lambda: SK.share_by_position(pd.DataFrame(
        [{"name": "L0H0", "n": n, "share": 0.5 + 0.01 * n} for n in (1, 2, 4, 8)])),
    "sinks.sink_writes": lambda: SK.sink_writes(pd.DataFrame(
        [{"name": f"L0H{h}", "first_token": 0.2 * h, "write_sink": 0.1 + h, "write_rest": 1.0, "write_ratio": 0.1 + h,
          "sink": h > 2} for h in range(4)])),
    "steps.matrix_chart": lambda: SP.matrix_chart(np.array([[0.8, 0.1, 0.2, 0.5], [0.3, 0.9, 0.1, 0.4]]),
                                                  ["0 猫", "1 坐"], ["d0", "d1", "d2", "d3"], "X",
                                                  row_title=t("token"), col_title=t("dimension")),
    "steps.weights_chart": lambda: SP.weights_chart(pd.DataFrame(
        {"position": range(5), "token": TOKENS[:5], "weight": [0.5, 0.2, 0.1, 0.1, 0.1], "q·k·scale": 0.3}), 4),
    "steps.kv_rows_chart": lambda: SP.kv_rows_chart(_kv_steps()),
    "tokens.token_chart": lambda: TK.token_chart(_pattern(), [t.split(":", 1)[1].replace("␣", " ") for t in TOKENS]),
    "training.curves_chart": lambda: TR.curves_chart(_series()),
    "training.head_curves_chart": lambda: TR.head_curves_chart(_series()),
    "training.pattern_strip": lambda: TR.pattern_strip(_series(), "L1H0", 10, neighbours=3),
    "verify.verify_chart": lambda: VF.verify_chart(_verify_frame()),
}


def _builders() -> list[str]:
    """``module.function`` of every function in attnkit/charts/ that returns a chart (by its annotation)."""
    out = []
    for m in pkgutil.iter_modules(charts_pkg.__path__):
        mod = importlib.import_module(f"attnkit.charts.{m.name}")
        for name in getattr(mod, "__all__", []):
            f = getattr(mod, name)
            if inspect.isfunction(f) and f.__module__ == mod.__name__ and "Chart" in str(inspect.signature(f).return_annotation):
                out.append(f"{m.name}.{name}")
    return out


def _specs(name: str, lang: str) -> list[dict]:
    with language(lang):
        got = SAMPLES[name]()
        charts = [c for c in (got if isinstance(got, tuple) else (got,)) if hasattr(c, "to_dict")]
        return [c.to_dict() for c in charts]


def test_every_builder_has_a_sample():
    assert sorted(_builders()) == sorted(SAMPLES)


# ----------------------------------------------------------------------------- walking a spec

def _channel(enc: dict, ch: str) -> dict:
    e = enc.get(ch) or {}
    return e["condition"] if "field" not in e and isinstance(e.get("condition"), dict) and "field" in e["condition"] else e


def _encodings(spec: dict):
    """(view, merged encoding, rows): a layer's children inherit the parent's encoding."""
    stack = [(spec, {}, [])]
    datasets = spec.get("datasets", {})
    while stack:
        node, enc, inherited = stack.pop()
        d = node.get("data")
        here = datasets.get(d["name"], []) if isinstance(d, dict) and "name" in d else \
            d["values"] if isinstance(d, dict) and "values" in d else inherited
        merged = {**enc, **node.get("encoding", {})}
        if "mark" in node:
            yield node, merged, here
        for key in ("layer", "hconcat", "vconcat", "concat"):
            stack += [(child, merged if key == "layer" else {}, here) for child in node.get(key, [])]
        if "spec" in node:
            stack.append((node["spec"], {}, here))


def _fixed_width(node: dict, datasets: dict) -> float:
    """The plot width a spec fixes (concatenations side by side summed, facets times their panels)."""
    if "hconcat" in node:
        return sum(_fixed_width(c, datasets) for c in node["hconcat"]) + 20 * (len(node["hconcat"]) - 1)
    if "vconcat" in node:
        return max((_fixed_width(c, datasets) for c in node["vconcat"]), default=0)
    if "facet" in node or "spec" in node:
        col = (node.get("facet") or {}).get("column") or (node.get("encoding") or {}).get("column") or {}
        rows = datasets.get((node.get("data") or {}).get("name"), [])
        n = len({r.get(col.get("field")) for r in rows}) if col else 1
        return n * _fixed_width(node.get("spec", {}), datasets) + 20 * (n - 1)
    w = node.get("width")
    widths = [w if isinstance(w, (int, float)) else 0]
    widths += [_fixed_width(c, datasets) for c in node.get("layer", [])]
    return max(widths)


# ----------------------------------------------------------------------------- the rules

@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_category_axes_draw_every_label_and_integer_axes_integer_ticks(name):
    for spec in _specs(name, "en"):
        for _view, enc, rows in _encodings(spec):
            for ch in ("x", "y"):
                e = enc.get(ch) or {}
                if "field" not in e or e.get("axis", {}) is None or "aggregate" in e:
                    continue
                axis = e.get("axis") or {}
                if e.get("type") in ("nominal", "ordinal") and axis.get("labels") is not False:
                    assert axis.get("labelOverlap") is False, f"{name}: the {ch} axis of {e['field']} may drop labels"
                elif e.get("type") == "quantitative":
                    vals = [r.get(e["field"]) for r in rows if isinstance(r.get(e["field"]), (int, float))]
                    if vals and all(float(v).is_integer() for v in vals) and len(set(vals)) > 1:
                        ticks = axis.get("values")
                        assert axis.get("format") == "d" or (ticks and all(float(v).is_integer() for v in ticks)), \
                            f"{name}: {e['field']} holds integers but its {ch} axis may show decimals"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_legends_have_titles_and_continuous_colour_legends_are_squares(name):
    for spec in _specs(name, "en"):
        for _view, enc, _rows in _encodings(spec):
            for ch in ("color", "fill", "stroke", "shape", "strokeDash", "strokeWidth", "size"):
                e = _channel(enc, ch)
                if "field" not in e or e.get("legend", {}) is None:
                    continue
                legend = e.get("legend") or {}
                title = legend.get("title", e.get("title"))
                assert title, f"{name}: the {ch} legend of {e['field']} has no title (Vega would show the field name)"
                if ch in ("color", "fill") and e.get("type") == "quantitative":
                    assert legend.get("type") == "symbol", f"{name}: {e['field']}'s colour legend is a gradient"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_no_fixed_width_beyond_the_page(name):
    for spec in _specs(name, "en"):
        assert _fixed_width(spec, spec.get("datasets", {})) <= CONTENT_WIDTH, name


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_in_chinese_no_title_axis_or_legend_is_english(name):
    """Every title (the chart's, each axis's and legend's, tooltips) and every category an axis or legend shows is
    Chinese under zh: no run of two English words, and no single English word in a title (identifiers, head and
    model names, formulas and the words the seeds keep — token, softmax, logit — allowed). Token labels are the
    model's (allowed)."""
    tokens = TOKENS + [" the", " Mary", " John", "' the'", "' the' ' a'", "猫", "坐"]
    for spec in _specs(name, "zh"):
        texts = spec_texts(spec)
        assert untranslated(texts, allow=tokens) == [], (name, texts)
        titles = spec_texts(spec, titles_only=True)
        words = [w for x in titles for w in english_words(x)]
        assert words == [], (name, words, titles)


# ----------------------------------------------------------------------------- item 2: what the score charts plot

def _bars(spec: dict, field: str) -> list[float]:
    rows = next(iter(spec["datasets"].values()))
    return [r[field] for r in rows]


def _axis_total(title: str) -> float:
    """The number an axis title says its bars add up to ("… (the bars add up to +0.8240)")."""
    m = re.search(r"([+−-]?\d+\.\d+)\)?\s*$", title.replace("−", "-"))
    assert m, title
    return float(m.group(1))


@pytest.mark.parametrize("against", [None, 3])
def test_score_bar_charts_add_up_to_the_number_their_axis_names(against):
    st = _terms(against)
    for spec, field in ((TS.side_bars(st, "key", 3).to_dict(), "value"),
                        (TS.side_bars(st, "query", 2).to_dict(), "value"),
                        (TS.top_terms_bars(st, 4).to_dict(), "value")):
        axis = spec["encoding"]["x"]["title"]
        assert "share" not in axis and _axis_total(axis) == pytest.approx(st.score, abs=5e-5)
        assert sum(_bars(spec, field)) == pytest.approx(st.score, abs=1e-9)       # the bars drawn add up to it
        assert ("−" in axis) == (against is not None)                             # a contrast says so
    cells = ST.layer0_split(ST.ScoreTerms("L0H1", 1, 4, 2, None, ["embed", "pos_embed", "b_Q"],
                                          ["embed", "pos_embed", "b_K"], np.array([[0.5, -0.2, 0.1], [0.3, 0.05, 0.0],
                                                                                    [0.02, 0.01, 0.04]]), 0.824))
    spec = TS.layer0_bars(cells).to_dict()
    axis = spec["layer"][0]["encoding"]["x"]["title"]
    assert "share" not in axis and _axis_total(axis) == pytest.approx(0.82, abs=1e-4)
    assert sum(_bars(spec, "mean")) == pytest.approx(0.82, abs=1e-12)


def test_the_score_axes_are_not_called_shares_in_either_language():
    """The bars are terms in the score's own units (they add up to the score, not to 1): no axis calls them shares."""
    for lang, share in (("en", "share"), ("zh", "比例")):
        for name in ("score_terms.side_bars", "score_terms.layer0_bars", "score_terms.top_terms_bars"):
            for spec in _specs(name, lang):
                axes = [(e.get("axis") or {}).get("title", e.get("title")) for _v, enc, _r in _encodings(spec)
                        for e in (enc.get("x", {}),) if e.get("type") == "quantitative"]
                assert axes and all(a and share not in a for a in axes), (name, lang, axes)
