"""Series of checkpoints (attnkit/series.py), the training analysis (attnkit/training.py), its charts and CLI."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import constants as hf_constants

from attnkit import series as series_mod
from attnkit import training
from attnkit.cli.training import cli as training_cli
from attnkit.dev.train.snapshots import pick_along_curve
from attnkit.loading import load
from attnkit.metrics import head_table
from attnkit.prompts import SAMPLE_TEXT, truncate
from attnkit.tolerances import TOL_PATTERN
from helpers import cache_repo, make_checkpoint

SHAPE = dict(n_layer=2, n_head=2, n_embd=32, n_positions=128, vocab_size=400)
STEPS = [0, 100, 200]


def _series_folder(root: Path, steps=STEPS, odd: dict | None = None) -> Path:
    rows = []
    for k, step in enumerate(steps):
        shape = {**SHAPE, **((odd or {}) if k == len(steps) - 1 else {})}
        make_checkpoint(root / f"step-{step:06d}", seed=k, **shape)
        rows.append({"step": step, "folder": f"step-{step:06d}", "tokens_seen": step * 64, "val_loss": 6.0 - k})
    (root / "series.json").write_text(json.dumps({"checkpoints": rows}), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def folder_series(tmp_path_factory):
    return _series_folder(tmp_path_factory.mktemp("series") / "steps")


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_folder_series_numbers_equal_the_heads_command_and_come_back_from_the_disk_cache(folder_series, cache):
    s = series_mod.resolve(str(folder_series))
    assert s.steps == STEPS and [m.val_loss for m in s.members] == [6.0, 5.0, 4.0]
    seen = []
    res = training.analyse(s, progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    one = res.checkpoints[1]
    m = load(str(folder_series / "step-000100"), "cpu")               # the checkpoint on its own, as `heads` does
    ids, _ = truncate(m.encode(SAMPLE_TEXT), m.config.n_ctx)
    df = head_table(m.weights, ids, 50)
    for _, row in df.iterrows():                                      # float32 numbers, means taken in float64
        l, h = int(row["layer"]), int(row["head"])
        assert one.induction[l, h] == pytest.approx(row["induction (random repeats)"], abs=TOL_PATTERN)
        for stat in ("previous-token", "first-token", "mean entropy", "induction"):
            assert one.stats[stat][l, h] == pytest.approx(row[stat], abs=TOL_PATTERN, nan_ok=True)
    assert one.row()["induction"] == pytest.approx(df["induction (random repeats)"].max(), abs=TOL_PATTERN)
    assert one.row()["val_loss"] == 5.0 and one.folder == str((folder_series / "step-000100").resolve())
    again = training.analyse(s)
    assert [c.cached for c in again.checkpoints] == [True] * 3 and not any(c.cached for c in res.checkpoints)
    assert again.frame().drop(columns="cached").equals(res.frame().drop(columns="cached"))
    assert any(cache.rglob("*.npz"))


def test_series_whose_shapes_differ_is_refused_in_one_line(tmp_path, capsys):
    root = _series_folder(tmp_path / "steps", odd={"n_embd": 64})
    with pytest.raises(series_mod.SeriesError) as e:
        series_mod.check_consistent(series_mod.resolve(str(root)))
    msg = str(e.value)
    assert "\n" not in msg and "step-000200" in msg and "n_embd = 64, not 32" in msg
    assert training_cli(["--series", str(root)]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.strip() == f"attnkit training: {msg}"


def test_hub_series_in_a_cache_with_three_revisions(tmp_path, cache, monkeypatch):
    """owner/tiny at step0, step10, step20 in a HuggingFace cache laid out on disk (offline): a list of revisions
    and a range pick the same three, each loaded from its own snapshot."""
    folders = {f"step{k}": make_checkpoint(tmp_path / f"c{k}", seed=k, **SHAPE) for k in (0, 10, 20)}
    hub = tmp_path / "home" / "hub"
    commits = cache_repo(hub, "owner/tiny", folders)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(hub))        # read at call time by huggingface_hub and HF
    out = {}
    for spec in ("owner/tiny@step0,step10,step20", "owner/tiny@step0..step20/3"):
        js = tmp_path / f"{len(out)}.json"
        assert training_cli(["--series", spec, "--json", str(js)]) == 0
        out[spec] = json.loads(js.read_text(encoding="utf-8"))
    a, b = out.values()
    assert [c["step"] for c in a["checkpoints"]] == [0, 10, 20]
    assert [c["folder"] for c in a["checkpoints"]] == [
        str(hub / "models--owner--tiny" / "snapshots" / commits[f"step{k}"]) for k in (0, 10, 20)]
    assert [c["induction"] for c in a["checkpoints"]] == [c["induction"] for c in b["checkpoints"]]
    assert len({c["induction"] for c in a["checkpoints"]}) == 3          # three different weights
    assert "phase_change_step" in a and a["phase_change_step"] is None


def test_revision_ranges_without_a_cache_round_to_the_endpoints_power_of_ten():
    s = series_mod.resolve("someone/absent@step0..step143000/16")
    assert len(s) == 16 and s.steps[0] == 0 and s.steps[-1] == 143000
    assert all(st % 1000 == 0 for st in s.steps) and s.members[1].name == "someone/absent@step10000"
    for bad, words in [("someone/absent@step5..step1/3", "REV0 < REV1"), ("someone/absent@step0", "two revisions"),
                       ("someone/absent@step0,step0", "listed twice"), ("someone/absent@step9,step1", "training order")]:
        with pytest.raises(series_mod.SeriesError, match=words):
            series_mod.resolve(bad)


def test_pick_along_curve_on_a_hand_made_curve():
    """Flat at 0 to step 10, 0.5 at 11, 1 from 12 to 20: arc lengths (steps scaled by 1/20) are 0.05 a flat step
    and hypot(0.05, 0.5) = 0.5025 a rising one, 1.905 in all; five picks at 0, 0.476, 0.952, 1.429, 1.905 of it
    fall on steps 0, 10, 11, 12 and 20 (evenly spaced steps would be 0, 5, 10, 15, 20)."""
    curve = [(s, 0.0 if s <= 10 else 0.5 if s == 11 else 1.0) for s in range(21)]
    assert pick_along_curve(curve, 5) == [0, 10, 11, 12, 20]
    assert pick_along_curve(curve[:4], 9) == [0, 1, 2, 3]


def _hand_made(step: int, seq: list[float], icl: float, icl_se: float = 0.0) -> training.CheckpointResult:
    induction_seq = np.zeros((len(seq), 2, 2))
    induction_seq[:, 1, 0] = seq
    stats = {"previous-token": np.zeros((2, 2)), "first-token": np.zeros((2, 2)), "mean entropy": np.ones((2, 2))}
    return training.CheckpointResult(step, f"s{step}", f"s{step}", None, {}, stats, induction_seq, icl, 0.0, 0.0,
                                     icl_se, {"window": 4, "early": [1, 1], "late": [3, 3], "windows": 2}, 0.0, 0.0, ("L0H0", "L1H0"), 0.0, np.zeros((2, 2, 4, 4), np.float16), list("abcd"))


def test_phase_change_is_the_first_step_whose_interval_clears_the_threshold():
    """At step 20 the mean is 0.6 but the four values spread (sd 0.1633): 0.6 − 3.1824·0.1633/2 = 0.340 < 0.5;
    at step 30 they are 0.9 ± 0.01: the interval clears 0.5, so the phase change is step 30."""
    cps = [_hand_made(0, [0.1] * 4, 0.0), _hand_made(10, [0.2, 0.2, 0.2, 0.2], -0.1),
           _hand_made(20, [0.4, 0.6, 0.6, 0.8], -0.9), _hand_made(30, [0.89, 0.9, 0.91, 0.9], -1.0)]
    lo, hi = cps[2].induction_interval()
    assert lo == pytest.approx(0.6 - 3.182446305 * 0.163299316 / 2, abs=1e-6) and hi > 0.6
    assert training.phase_change(cps, 0.5) == 30 and training.phase_change(cps, 0.95) is None
    assert training.icl_drop(cps) == (10, 20)                       # −0.08 per step, the steepest
    res = training.SeriesResult("hand", "hand", cps)
    assert res.verdict().startswith("phase change at step 30: L1H0") and "0.200" not in res.verdict()


def test_charts_mark_the_phase_change_and_show_neighbouring_patterns():
    from attnkit.charts import training as charts

    cps = [_hand_made(s, [v] * 3 + [v + 0.01], -v) for s, v in [(0, 0.1), (10, 0.2), (20, 0.9)]]
    res = training.SeriesResult("hand", "hand", cps)
    spec = json.dumps(charts.curves_chart(res).to_dict())
    assert "phase change" in spec and '"step": 20' in spec
    frame = charts.pattern_frame(res, "L1H0", 10, neighbours=1)
    assert sorted(frame["step"].unique()) == [0, 10, 20] and len(frame) == 3 * 10       # 4 tokens: 10 causal cells
    assert res.default_head() == "L1H0" and charts.pattern_strip(res, "L1H0", 0).to_dict()


def test_train_default_snapshots_write_a_loadable_series(tmp_path, cache):
    from attnkit.cli.train_default import cli as train_cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The quick brown fox jumps over the lazy dog. Attention is a weighted average.\n\n" * 40,
                      encoding="utf-8")
    out = tmp_path / "model"
    assert train_cli(["--tiny-test", "--corpus-file", str(corpus), "--out", str(out), "--snapshots", "3"]) == 0
    s = series_mod.resolve(str(out / "steps"))
    assert len(s) == 3 and s.steps == sorted(s.steps) and s.members[0].tokens_seen == s.steps[0] * 4 * 32
    res = training.analyse(s)
    assert all(math.isfinite(c.row()["induction"]) for c in res.checkpoints)


def test_revision_ranges_pick_the_cached_revisions_nearest_to_even_targets(monkeypatch):
    """Targets 0, 10, 20 among cached step0, step9, step14, step20: step9 is nearest to 10."""
    monkeypatch.setattr(series_mod, "_cached_refs", lambda repo: ["main", "step0", "step14", "step20", "step9"])
    assert series_mod.resolve("o/n@step0..step20/3").steps == [0, 9, 20]


def test_shipped_series_loads_by_name_and_its_card_numbers_come_from_its_weights(cache):
    s = series_mod.resolve(series_mod.SHIPPED_SERIES_NAME)
    series_mod.check_consistent(s)
    folder = series_mod.SHIPPED_SERIES[series_mod.SHIPPED_SERIES_NAME]
    assert len(s) >= 8 and s.texts is not None and s.members[0].val_loss is not None
    assert sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) <= 30 * 2**20
    card = (folder / "MODEL_CARD.md").read_text(encoding="utf-8")
    ends = series_mod.Series(s.name, s.source, [s.members[0], s.members[-1]], texts=s.texts,
                             train_block=s.train_block)
    for c in training.analyse(ends).checkpoints:                        # measured again here, on the same text
        line = next(l for l in card.splitlines() if l.startswith(f"| {c.step:,} |"))
        r = c.row()
        assert f"| {r['induction']:.3f} [{r['induction_lo']:.3f}, {r['induction_hi']:.3f}] | {r['induction_head']} |" \
            in line and f"| {r['icl']:+.3f} ± {r['icl_se']:.3f} |" in line
        # the ICL score reads only the 128-token window the model was trained on (series.json train_block)
        assert (r["icl_window"], r["icl_early_positions"], r["icl_late_positions"]) == (128, [7, 19], [116, 127])
    last = training.analyse(ends).checkpoints[-1]                       # from the disk cache now
    assert last.cached and last.icl + 1.96 * last.icl_se < 0            # after the phase change: later is better


def test_corpus_series_runs_the_head_statistics_per_checkpoint(folder_series, tmp_path):
    from attnkit import corpus
    from attnkit.corpus.summary import load_result

    doc = tmp_path / "doc.txt"
    doc.write_text("The cat sat on the mat. The cat sat on the mat again, and the dog sat too.", encoding="utf-8")
    table = corpus.run_series(str(doc), tmp_path / "out", str(folder_series), "heads", bootstrap=20)
    assert sorted(table["step"].unique()) == STEPS and (tmp_path / "out" / "heads_by_step.csv").is_file()
    corpus.run_corpus(str(doc), tmp_path / "alone", str(folder_series / "step-000100"), "heads", bootstrap=20)
    alone = load_result(tmp_path / "alone").heads                          # the checkpoint run on its own
    mine = table[table["step"] == 100].drop(columns=["step", "checkpoint"]).reset_index(drop=True)
    assert mine.equals(alone.reset_index(drop=True))
    with pytest.raises(corpus.CorpusError, match="no step folders"):
        corpus.run_series(str(doc), tmp_path / "out2", str(tmp_path), "heads")


def test_icl_drop_names_no_fall_within_its_noise():
    """ICL 0.0, −0.1, −0.9 with standard errors 0.05, 0.05, 0.3: the first fall (0.1) is under 1.96·hypot(0.05,
    0.05) = 0.139; the second (0.8) is over 1.96·hypot(0.05, 0.3) = 0.596. With 0.45 at the end it is under
    1.96·hypot(0.05, 0.45) = 0.887: no drop is claimed. z = 1.5 and 1 put the first fall's noise at 0.106 and 0.071."""
    cps = [_hand_made(0, [0.1] * 4, 0.0, 0.05), _hand_made(10, [0.1] * 4, -0.1, 0.05),
           _hand_made(20, [0.1] * 4, -0.9, 0.3)]
    assert training.icl_drop(cps) == (10, 20)
    cps[2] = _hand_made(20, [0.1] * 4, -0.9, 0.45)
    assert training.icl_drop(cps) is None
    res = training.SeriesResult("hand", "hand", cps)
    note = res.icl_note()
    assert res.to_json()["icl_drop_steps"] is None and "no fall" in note and "positions 3–3" in note
    assert training.icl_drop(cps[:2], z=1.5) is None and training.icl_drop(cps[:2], z=1.0) == (0, 10)


def test_icl_positions_stay_inside_the_trained_window(folder_series, tmp_path):
    """A series.json train_block of 20 on models whose context is longer: the ICL score reads windows of 20 tokens,
    early positions ceil(1)…ceil(3)−1 = 1–2, late positions 18–19; the positions are in the JSON."""
    assert training.icl_positions(128) == (range(7, 20), range(116, 128))
    folder = tmp_path / "steps"
    shutil.copytree(folder_series, folder)
    index = folder / series_mod.SERIES_FILE
    data = json.loads(index.read_text(encoding="utf-8")) if index.is_file() else {"checkpoints": []}
    index.write_text(json.dumps({**data, "train_block": 20}), encoding="utf-8")
    s = series_mod.resolve(str(folder))
    assert s.train_block == 20
    res = training.analyse(s, "the cat sat on the mat and the dog sat on the log " * 12, use_cache=False)
    where = res.icl_positions
    assert where == {"window": 20, "early": [1, 2], "late": [18, 19], "windows": where["windows"]}
    assert where["windows"] >= 2 and all(math.isfinite(c.icl_se) for c in res.checkpoints)
    assert res.to_json()["checkpoints"][0]["icl_late_positions"] == [18, 19]


def test_t_quantile_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    from attnkit.training import t_quantile
    for df in (1, 2, 3, 5, 10, 30):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-6)
