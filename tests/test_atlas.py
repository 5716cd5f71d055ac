"""The head atlas (issue 45): verdicts that a decoy cannot fool, effects equal to an exact mean ablation, statistics
checked against float64, the offline folder and its JSON against the schema in docs/atlas.md, local = Ray, and the
command's refusals. Every corpus here is small: the atlas of one costs seconds."""
from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from attnkit import ablations, atlas, metrics
from attnkit.atlas_result import (EFFECT_ONLY, LABELS, LOWERS, MARGIN, NEITHER, NO_EFFECT, PATTERN_AND_EFFECT,
                                  PATTERN_ONLY, RAISES, direction, label, redundant)
from attnkit.cli import main
from attnkit.corpus import CorpusError, load_atlas, read_inputs, run_atlas
from attnkit.dev.planted import decoys
from attnkit.entropy import documents
from attnkit.loading import SHIPPED, load
from attnkit.model import run
from attnkit.tolerances import TOL_ATLAS_F64

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "atlas.md"


def _words_corpus(folder: Path, n_docs: int = 12, seed: int = 0) -> Path:
    """Documents of the planted task: 20 distinct words t0 … t39, then the same 20 again (one file each)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        half = rng.sample([f"t{i}" for i in range(40)], 20)
        (folder / f"doc{d:02d}.txt").write_text(" ".join(half + half), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    return _words_corpus(tmp_path_factory.mktemp("words"))


def _verdicts(res, head: str) -> dict[str, str]:
    return {r["role"]: r["verdict"] for r in res.card(head)["roles"]}


def _check_decoy_verdicts(res, circuit: dict) -> None:
    """The real heads hold their roles by pattern and effect; every decoy holds its pattern only (inert, or — the
    negative head — lowering the loss), though each decoy's pattern is sharper than the real head's."""
    prev, ind = circuit["heads"]
    assert _verdicts(res, prev)["previous-token"] == PATTERN_AND_EFFECT
    assert _verdicts(res, ind)["induction"] == PATTERN_AND_EFFECT
    for head, d in circuit["decoys"].items():
        assert _verdicts(res, head)[d["pattern"]] == PATTERN_ONLY, (head, res.card(head)["summary"])
        want = LOWERS if d["effect"] == "negative" else NO_EFFECT
        assert res.card(head)["effect"]["direction"] == want, head
        if d["outranks"]:
            stat = d["pattern"]
            assert res.card(head)["statistics"][stat]["mean"] > res.card(d["outranks"])["statistics"][stat]["mean"]
    neg = next(h for h, d in circuit["decoys"].items() if d["effect"] == "negative")
    assert "lowers the corpus loss" in res.card(neg)["summary"]
    decoy = next(h for h, d in circuit["decoys"].items() if d["effect"] == "none")
    assert "inert on this corpus" in res.card(decoy)["summary"]


def test_the_decoys_do_not_fool_the_atlas(words, tmp_path):
    res = run_atlas(words, tmp_path / "atlas", "planted-decoys")
    _check_decoy_verdicts(res, json.loads((SHIPPED["planted-decoys"] / "CIRCUIT.json").read_text(encoding="utf-8")))
    assert all(h["float64"]["ok"] and h["float64"]["windows"] >= 1 for h in res.heads)


def test_nor_on_a_decoy_model_the_shipped_one_does_not_share(words, tmp_path):
    """Another layout (every part on another head) and another seed, built here: the same verdicts."""
    layout = ({"sink": 0, "prev": 1, "sink2": 2, "decoy_prev": 3}, {"negative": 0, "sink": 1, "decoy_induction": 2,
                                                                    "induction": 3})
    folder = decoys.write(tmp_path / "other-decoys", layout=layout, seed=4545)
    circuit = json.loads((folder / "CIRCUIT.json").read_text(encoding="utf-8"))
    assert circuit["heads"] == ["L0H1", "L1H3"] and (folder / "model.safetensors").read_bytes() != \
        (SHIPPED["planted-decoys"] / "model.safetensors").read_bytes()
    res = run_atlas(_words_corpus(tmp_path / "words", seed=7), tmp_path / "atlas", str(folder))
    _check_decoy_verdicts(res, circuit)


@pytest.fixture(scope="module")
def tiny_atlas(tmp_path_factory):
    """attnkit-tiny over 8 documents of its held-out evaluation text, 96-token windows."""
    text = (ROOT / "attnkit" / "models" / "attnkit-tiny-steps" / "eval.txt").read_text(encoding="utf-8")
    folder = tmp_path_factory.mktemp("tiny-corpus")
    paras = [p for p in text.split("\n\n") if len(p) > 300][:8]
    for i, p in enumerate(paras):
        (folder / f"d{i}.txt").write_text(p, encoding="utf-8")
    out = tmp_path_factory.mktemp("tiny-atlas") / "atlas"
    return folder, out, run_atlas(folder, out, "attnkit-tiny", window=96)


def test_tiny_effects_equal_an_exact_mean_ablation_of_each_head(tiny_atlas):
    """L2H0, L2H1 (previous token) and L3H0, L3H2 (induction): the atlas's effect is the loss change of the ablations
    module's own mean ablation (MeanHead, its head_means) on the same windows, and the verdicts follow from it."""
    folder, _, res = tiny_atlas
    m = load("attnkit-tiny", "cpu")
    docs, _ = read_inputs(folder)
    windows = [w for d in docs for w in atlas_windows(m, d["text"], 96)]
    means = ablations.head_means(m.weights, windows)
    base = ablations.loss(m.weights, windows)
    for name, role in (("L2H0", "previous-token"), ("L2H1", "previous-token"), ("L3H0", "induction"),
                       ("L3H2", "induction")):
        l, h = int(name[1]), int(name[3])
        abl = ablations.loss(m.weights, windows, ablations.MeanHead(means, heads=[(l, h)]))
        exact = (sum(a.sum() for a in abl.nll) - sum(b.sum() for b in base.nll)) / base.tokens
        card = res.card(name)
        e = card["effect"]
        assert e["value"] == pytest.approx(exact, abs=2e-5), name
        assert e["low"] <= e["value"] <= e["high"]
        r = next(r for r in card["roles"] if r["role"] == role)
        assert r["verdict"] == label(r["pattern"], direction(exact, e["low"], e["high"]) == RAISES), name


def atlas_windows(m, text: str, window: int) -> list[list[int]]:
    return documents(m.encode, [text], window, split=True)[0]


def test_verdict_rules_by_hand():
    assert direction(0.05, 0.02, 0.08) == RAISES and direction(0.05, 0.005, 0.08) == NO_EFFECT
    assert direction(-0.05, -0.08, -0.02) == LOWERS and direction(0.002, -0.001, 0.004) == NO_EFFECT
    assert direction(math.nan, 0, 1) == NO_EFFECT
    assert [label(p, e) for p, e in ((1, 1), (1, 0), (0, 1), (0, 0))] == \
        [PATTERN_AND_EFFECT, PATTERN_ONLY, EFFECT_ONLY, NEITHER] == list(LABELS)
    group = {"direction": RAISES, "low": 0.30}
    assert redundant(group, [0.05, 0.06]) and not redundant(group, [0.2, 0.09])     # 0.30 > 0.11 + margin; ≯ 0.30
    assert not redundant({"direction": NO_EFFECT, "low": 0.3}, [0.0, 0.0]) and MARGIN == ablations.MIN_EFFECT


def test_statistics_without_position_0_by_hand():
    """A head with 0.9 on the sink and 0.1 on the previous token (query 1: on itself): previous-token
    (0.9 + 4·0.1)/5 as it is, 1 without position 0 (its queries from 2 on), the sink share 0.9 kept as it is."""
    T = 6
    p = torch.zeros(1, T, T)
    p[0, 0, 0] = 1.0
    p[0, 1, 0], p[0, 1, 1] = 0.9, 0.1
    for i in range(2, T):
        p[0, i, 0], p[0, i, i - 1] = 0.9, 0.1
    sub, _ = metrics.without_first(p)
    assert torch.allclose(sub.sum(-1), torch.ones(1, T - 1)) and sub[0, 0, 0] == 1.0
    s = atlas._scores(p, torch.arange(T), None)
    assert s["previous-token"].item() == pytest.approx((0.9 + 4 * 0.1) / 5)
    assert s["previous-token" + atlas.NO_FIRST].item() == pytest.approx(1.0)
    assert s["first-token" + atlas.NO_FIRST].item() == s["first-token"].item() == pytest.approx(0.9)


def test_the_float64_check_catches_a_wrong_recomputation():
    """The check compares with a float64 run of the same weights (error ≤ TOL_ATLAS_F64); run against other weights
    (one W_Q entry changed) it reports an error far above the tolerance."""
    m = load("planted-decoys", "cpu")
    ids = torch.tensor([[int(i) for i in torch.randperm(40)[:20]] * 2])
    pieces = lambda x: [str(i) for i in x]          # noqa: E731
    good = atlas.scan(m.weights, ids, [0], [0], pieces, weights64=atlas.float64_copy(m.weights))
    assert 0 <= max(good["f64_error"]) <= TOL_ATLAS_F64
    bad_w = atlas.float64_copy(m.weights)
    bad_w.layers[0].W_Q[0] *= 0.5
    bad = atlas.scan(m.weights, ids, [0], [0], pieces, weights64=bad_w)
    assert max(bad["f64_error"]) > 100 * TOL_ATLAS_F64


def _schemas() -> dict[str, dict]:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)\n```", text, re.S)
    out = {}
    for b in blocks:
        obj = json.loads(b)
        if isinstance(obj, dict) and "$id" in obj:
            out[obj["$id"]] = obj
    return out


def test_the_folder_and_the_json_follow_the_schemas_in_the_docs(tiny_atlas, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    folder, out, _ = tiny_atlas
    schemas = _schemas()
    assert {"attnkit-atlas-json", "attnkit-atlas-head"} <= set(schemas)
    res_json = tmp_path / "atlas.json"
    assert main(["atlas", "--model", "attnkit-tiny", "--corpus", str(folder), "--out", str(out), "--window", "96",
                 "--json", str(res_json)]) == 0                     # a rerun: both passes resume, nothing recomputed
    answer = json.loads(res_json.read_text(encoding="utf-8"))
    jsonschema.validate(answer, schemas["attnkit-atlas-json"])
    assert [h["head"] for h in answer["heads"]] == [f"L{l}H{h}" for l in range(4) for h in range(8)]
    for f in sorted((out / "heads").glob("*.json")):
        jsonschema.validate(json.loads(f.read_text(encoding="utf-8")), schemas["attnkit-atlas-head"])
    with pytest.raises(jsonschema.ValidationError):                  # the schema can fail
        jsonschema.validate({**answer, "heads": [{**answer["heads"][0], "roles": [{"role": "induction", "score": 0.5,
                                                                                  "verdict": "maybe"}]}]},
                            schemas["attnkit-atlas-json"])


def test_the_html_file_fetches_nothing_and_holds_every_head(tiny_atlas):
    _, out, res = tiny_atlas
    page = (out / "atlas.html").read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    data = json.loads(re.search(r'<script type="application/json" id="atlas-data">(.*?)</script>', page, re.S)[1])
    assert [h["head"] for h in data["heads"]] == [h["head"] for h in res.heads]
    assert set(data["strings"]) == {"en", "zh"} and data["strings"]["zh"]["title"] != data["strings"]["en"]["title"]
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert man["kind"] == "attnkit atlas" and len(man["model"]["sha256"]) == 64 and len(man["corpus"]["sha256"]) == 64
    assert man["float64"]["ok"] and man["versions"]["torch"] == torch.__version__
    assert load_atlas(out).to_pandas()["head"].tolist() == [h["head"] for h in res.heads]


@pytest.mark.slow
def test_local_and_ray_atlases_are_identical(words, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed; the local engine is tested")
    local = run_atlas(words, tmp_path / "local", "planted-decoys", max_docs=6)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        far = run_atlas(words, tmp_path / "ray", "planted-decoys", engine="ray", workers=2, max_docs=6)
    finally:
        ray.shutdown()
    assert json.dumps(local.heads, sort_keys=True, default=str) == json.dumps(far.heads, sort_keys=True, default=str)
    for f in ("index.json", *(f"heads/{h['head']}.json" for h in local.heads)):
        assert (tmp_path / "local" / f).read_bytes() == (tmp_path / "ray" / f).read_bytes(), f


def test_the_command_refuses_bad_input_before_any_work(words, tmp_path, capsys):
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine", encoding="utf-8")
    doc = sorted(words.glob("*.txt"))[0]
    cases = [
        ["--corpus", str(tmp_path / "missing"), "--out", str(tmp_path / "a"), "--json", str(tmp_path / "a.json")],
        ["--corpus", str(words), "--out", str(stray), "--json", str(tmp_path / "b.json")],
        ["--corpus", str(doc), "--out", str(tmp_path / "c"), "--json", str(doc)],
        ["--corpus", str(words), "--out", str(tmp_path / "d"), "--json", str(tmp_path / "d.json"), "--effect-tokens", "0"],
        ["--corpus", str(words), "--out", str(tmp_path / "e"), "--json", str(tmp_path / "e.json"), "--window", "1"],
        ["--corpus", str(words), "--out", str(tmp_path / "f"), "--json", str(tmp_path / "f.json"), "--model", "nope"],
    ]
    for args in cases:
        assert main(["atlas", "--model", "planted-decoys", *args] if "--model" not in args else ["atlas", *args]) == 2, args
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == len(cases) and "Traceback" not in "\n".join(err)
    assert not any((tmp_path / x).exists() for x in "acdef") and (stray / "notes.txt").read_text() == "mine"
    assert doc.read_text(encoding="utf-8").startswith("t")
    with pytest.raises(CorpusError, match="not an atlas folder"):
        run_atlas(words, stray, "planted-decoys")


def test_a_stop_from_progress_keeps_the_finished_shards_and_a_rerun_resumes(words, tmp_path):
    """progress(done, total) raising stops the run after a shard; the rerun skips what is done and ends with the
    atlas a run without a stop makes."""
    seen = []

    def stop_early(done, total):
        seen.append((done, total))
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_atlas(words, tmp_path / "a", "planted-decoys", shard_docs=4, progress=stop_early)
    assert seen[0] == (4, 24) and not (tmp_path / "a" / "atlas.html").exists()
    marks = sorted((tmp_path / "a" / "work" / "scan" / "_done").glob("*.json"))
    assert len(marks) == 1
    stamp = marks[0].stat().st_mtime_ns
    again, seen[:] = [], []
    res = run_atlas(words, tmp_path / "a", "planted-decoys", shard_docs=4, progress=lambda d, t: again.append(d))
    assert marks[0].stat().st_mtime_ns == stamp and again[0] == 8 and again[-1] == 24
    whole = run_atlas(words, tmp_path / "b", "planted-decoys", shard_docs=4)
    assert json.dumps(res.heads, sort_keys=True, default=str) == json.dumps(whole.heads, sort_keys=True, default=str)
