"""The Verify page: attnkit against HuggingFace on the chosen model and prompt, on request."""
import json

import pandas as pd
import torch

import attnkit.tolerances as TOL
import attnkit.verify as V
from attnkit.charts.verify import WHO, plotted, verify_chart
from attnkit.verify import checks as verify_frame
from helpers import apptest

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _checks_table(at):
    for d in at.dataframe:
        if "attnkit error" in d.value.columns:
            return d.value
    raise AssertionError("no checks table")


def test_verify_runs_only_on_request_and_passes(odd_dir, odd):
    text = "Verify me: the animal didn't cross the street."
    at = apptest("verify", odd_dir, text=text).run()
    assert not at.exception and not at.error
    assert not at.success and not at.dataframe               # nothing computed before the button
    at.button(key="vf_run").click().run()
    assert not at.exception and not at.error
    assert any(s.value.startswith("PASS") for s in at.success)
    assert [h.value.split(" ·")[0] for h in at.subheader] == DEVICES
    table = _checks_table(at)
    L = odd.config.n_layers
    assert list(table["layer"]) == [str(l) for l in range(L) for _ in (0, 1)] + ["final", "final", "generation"]
    assert table["ok"].all() and (table["attnkit error"] <= table["allowed"]).all()
    assert (table["HF error"] > 0).all() and (table["float64 |Δ|"] <= TOL.TOL_F64).all()
    # the numbers shown are a real comparison of the two implementations on this prompt
    ref = V.compare(odd.hf_model, odd.weights, odd.encode(text))
    shown = table[table["quantity"] == V.QUANTITIES["pattern"]]
    assert shown["attnkit error"].tolist() == [l.pattern.ours for l in ref.layers]
    assert shown["HF error"].tolist() == [l.pattern.hf for l in ref.layers]
    versions = next(d.value for d in at.dataframe if "device" in list(d.value.iloc[:, 0]))
    vals = dict(zip(versions.iloc[:, 0], versions["value"]))
    assert vals["device"] == "cpu" and vals["torch"] == torch.__version__ and "transformers" in vals
    assert vals["reference"].startswith("float64 on the CPU")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert '"type": "log"' in json.dumps(spec) and "allowed for attnkit" in json.dumps(spec)
    assert any(b.proto.label == "Report (JSON)" for b in at.get("download_button"))
    # another widget run reuses the stored result (no button press needed to keep it on screen)
    at.run()
    assert any(s.value.startswith("PASS") for s in at.success)


def test_verify_shows_fail_when_out_of_tolerance(odd_dir, monkeypatch):
    monkeypatch.setattr(TOL, "FLOOR", -1.0)                  # no error can be below HF's own minus 1
    at = apptest("verify", odd_dir, text="A prompt only this test uses, to miss the cache.").run()
    at.button(key="vf_run").click().run()
    assert not at.exception
    assert any(e.value.startswith("FAIL") and "larger than HuggingFace's own allows" in e.value for e in at.error)
    assert not _checks_table(at)["ok"].any()


def test_verify_frame_and_chart_from_a_report():
    rep = {"checks": [
        {"layer": "0", "quantity": "pattern", "ours": 3e-8, "hf": 3e-8, "allowed": 1e-6, "f64": 0.0, "ok": True},
        {"layer": "0", "quantity": "hidden", "ours": 2e-5, "hf": 1e-7, "allowed": 1.4e-6, "f64": 1e-15, "ok": False},
        {"layer": "final", "quantity": "logits", "ours": 5e-6, "hf": 4e-6, "allowed": 1.7e-5, "f64": 2e-15,
         "ok": True}]}
    df = verify_frame(rep, "cpu")
    assert len(df) == 3 and df["ok"].tolist() == [True, False, True]
    assert list(df.columns[:7]) == ["layer", "quantity", "attnkit error", "HF error", "allowed", "float64 |Δ|", "ok"]
    long = plotted(df)
    assert len(long) == 3 * len(WHO) and long["plotted"].min() > 0    # an exact 0 still fits on the log axis
    spec = verify_chart(df).to_dict()
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    assert spec["encoding"]["shape"]["scale"]["domain"] == list(WHO.values())
    data = pd.DataFrame(next(iter(spec["datasets"].values())))
    assert sorted(set(data["where"])) == ["0 hidden", "0 pattern", "logits"]
