"""The Verify page: attnkit against HuggingFace on the chosen model and prompt, on request."""
import json

import pandas as pd
import torch

import attnkit.verify as V
from attnkit.charts.verify import plotted, verify_chart
from attnkit.verify import checks as verify_frame
from helpers import apptest

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _layer_table(at):
    for d in at.dataframe:
        if "pattern max|Δ|" in d.value.columns:
            return d.value
    raise AssertionError("no per-layer table")


def _final_table(at):
    return next(d.value for d in at.dataframe if "after the last layer" in d.value.columns)


def test_verify_runs_only_on_request_and_passes(odd_dir, odd):
    text = "Verify me: the animal didn't cross the street."
    at = apptest("pages/6_Verify.py", odd_dir, text=text).run()
    assert not at.exception and not at.error
    assert not at.success and not at.dataframe               # nothing computed before the button
    at.button(key="vf_run").click().run()
    assert not at.exception and not at.error
    assert any(s.value.startswith("PASS") for s in at.success)
    assert [h.value.split(" ·")[0] for h in at.subheader] == DEVICES
    table = _layer_table(at)
    L = odd.config.n_layers
    assert list(table["layer"]) == list(range(L))
    assert table["ok"].all()
    final = _final_table(at)
    assert list(final["ok"]) == [True, True] and final["max |Δ|"].iloc[1] <= V.TOL_LOGITS
    # the numbers shown are a real comparison of the two implementations on this prompt
    ref = V.compare(odd.hf_model, odd.weights, odd.encode(text))
    assert table["pattern max|Δ|"][:L].tolist() == [l.pattern_abs for l in ref.layers]
    assert (table["hidden relative"][:L] <= V.TOL_HIDDEN_REL).all()
    versions = next(d.value for d in at.dataframe if "device" in list(d.value.iloc[:, 0]))
    vals = dict(zip(versions.iloc[:, 0], versions["value"]))
    assert vals["device"] == "cpu" and vals["torch"] == torch.__version__ and "transformers" in vals
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert '"type": "log"' in json.dumps(spec) and '"strokeDash"' in json.dumps(spec)
    assert any(b.proto.label == "Report (JSON)" for b in at.get("download_button"))
    # another widget run reuses the stored result (no button press needed to keep it on screen)
    at.run()
    assert any(s.value.startswith("PASS") for s in at.success)


def test_verify_shows_fail_when_out_of_tolerance(odd_dir, monkeypatch):
    monkeypatch.setattr(V, "TOL_LOGITS", -1.0)               # no difference can be below this
    at = apptest("pages/6_Verify.py", odd_dir, text="A prompt only this test uses, to miss the cache.").run()
    at.button(key="vf_run").click().run()
    assert not at.exception
    assert any(e.value.startswith("FAIL") for e in at.error)
    final = _final_table(at)
    assert list(final["ok"]) == [True, False]                 # the logits row fails, nothing else


def test_verify_frame_and_chart_from_a_report():
    rep = {"tolerances": {"pattern_abs": 1e-5, "logits_abs": 1e-4, "hidden_rel": 1e-5},
           "layers": [{"layer": 0, "hidden_rel": 0.0, "pattern_abs": 3e-8},
                      {"layer": 1, "hidden_rel": 2e-5, "pattern_abs": 1e-7}],
           "ln_final_rel": 1e-7, "logits_abs": 5e-5}
    df = verify_frame(rep, "cpu")
    assert len(df) == 2 * 2 + 2
    assert df.loc[(df["layer"] == "1") & df["quantity"].str.startswith("hidden"), "ok"].tolist() == [False]
    assert df["ok"].sum() == 5
    assert plotted(df)["plotted"].min() > 0                  # an exact 0 still fits on the log axis
    spec = verify_chart(df).to_dict()
    assert len(spec["layer"]) == 3                           # tolerance rules, their labels, the points
    assert spec["layer"][2]["encoding"]["y"]["scale"]["type"] == "log"
    rules = pd.DataFrame(next(v for v in spec["datasets"].values() if "label" in v[0]))
    assert sorted(rules["tolerance"]) == [1e-5, 1e-4]       # one line per distinct tolerance
