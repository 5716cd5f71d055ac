"""Activation patching: against an independent HuggingFace implementation, the 0/1 anchors, inputs, CLI, page."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnkit import patching as P
from attnkit.app.navigation import GOTO
from attnkit.tolerances import ZERO_ATOL
from attnkit.cli.patch import cli as patch_cli
from helpers import apptest, selectbox

CLEAN = "The animal didn't cross the street because it was too tired."
CORRUPT = "The animal didn't cross the street because it was too tired!"


@pytest.fixture(scope="module")
def pair(odd):
    pr = P.make_pair(odd, CLEAN, CORRUPT, ".", "!")     # punctuation: taken as given
    assert (pr.answer_token, pr.distractor_token) == (".", "!")
    return pr


def _hf_ld(hf, ids, a, d, pos, hook=None):
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0, pos].double()
    return float(logits[a] - logits[d])


def _hf_head_patch(hf, recv_ids, src_ids, layer, head, a, d, pos, n_heads):
    """Independent: a forward pre-hook on block ``layer``'s attn.c_proj replaces head ``head``'s slice of
    its input (the merged z) with the source run's."""
    c_proj = hf.transformer.h[layer].attn.c_proj
    stored = {}
    e = hf.config.n_embd // n_heads
    sl = slice(head * e, (head + 1) * e)

    def grab(mod, args):
        stored["z"] = args[0].detach().clone()

    hk = c_proj.register_forward_pre_hook(grab)
    _hf_ld(hf, src_ids, a, d, pos)
    hk.remove()

    def put(mod, args):
        x = args[0].clone()
        x[..., sl] = stored["z"][..., sl]
        return (x,)

    hk = c_proj.register_forward_pre_hook(put)
    try:
        return _hf_ld(hf, recv_ids, a, d, pos)
    finally:
        hk.remove()


@pytest.mark.parametrize("direction", ["denoise", "noise"])
def test_head_patch_equals_hf_pre_hook(odd, pair, direction):
    res = P.patch(odd.weights, pair, "z", direction=direction)
    hf = odd.hf_model
    clean = _hf_ld(hf, pair.clean, pair.answer, pair.distractor, pair.pos)
    corrupt = _hf_ld(hf, pair.corrupt, pair.answer, pair.distractor, pair.pos)
    assert abs(res.clean_ld - clean) < 1e-5 and abs(res.corrupt_ld - corrupt) < 1e-5
    recv, src = (pair.corrupt, pair.clean) if direction == "denoise" else (pair.clean, pair.corrupt)
    H = odd.config.n_heads
    gap = abs(clean - corrupt)                         # 0.29 since the test checkpoints' biases are nonzero
    assert gap > 0.1                                   # a pair with a real gap: the normalised values mean something
    worst_raw = worst_norm = 0.0
    for layer in range(odd.config.n_layers):                 # every head
        for head in range(H):
            ref = _hf_head_patch(hf, recv, src, layer, head, pair.answer, pair.distractor, pair.pos, H)
            worst_raw = max(worst_raw, abs(res.raw[layer, head] - ref))
            worst_norm = max(worst_norm, abs(res.normalised[layer, head] - (ref - corrupt) / (clean - corrupt)))
    assert worst_raw <= 1e-5 and worst_norm <= 1e-5 / min(1.0, gap), (worst_raw, worst_norm)   # raw error ÷ gap


def test_head_patch_per_position_matches_hf(odd, pair):
    """Per-position z patching: one head at one position, HF pre-hook on that position's slice only."""
    res = P.patch(odd.weights, pair, "z", per_position=True)
    hf = odd.hf_model
    layer, head, p = 1, 2, pair.T - 1
    e = hf.config.n_embd // odd.config.n_heads
    stored = {}
    c_proj = hf.transformer.h[layer].attn.c_proj
    hk = c_proj.register_forward_pre_hook(lambda m, a: stored.__setitem__("z", a[0].clone()))
    _hf_ld(hf, pair.clean, pair.answer, pair.distractor, pair.pos)
    hk.remove()

    def put(m, a):
        x = a[0].clone()
        x[:, p, head * e:(head + 1) * e] = stored["z"][:, p, head * e:(head + 1) * e]
        return (x,)

    hk = c_proj.register_forward_pre_hook(put)
    ref = _hf_ld(hf, pair.corrupt, pair.answer, pair.distractor, pair.pos)
    hk.remove()
    assert abs(res.raw[layer, head, p] - ref) < 1e-5
    # the per-position patches of the only differing position equal the all-position patch
    assert np.allclose(res.raw[:, :, -1], P.patch(odd.weights, pair, "z").raw, atol=1e-5)


def test_resid_anchors(odd, pair):
    """Patching the whole residual stream from the clean run at any layer gives 1; patching nothing, 0."""
    for direction, whole in (("denoise", 1.0), ("noise", 0.0)):
        res = P.patch(odd.weights, pair, "resid", direction=direction)
        assert np.allclose(res.normalised, whole, rtol=0, atol=ZERO_ATOL), (direction, res.normalised)
    res = P.patch(odd.weights, pair, "resid", per_position=True)
    # positions that do not differ between the prompts: patching them changes nothing (0 in exact arithmetic;
    # the batched sweep rounds differently from the single run it is compared with)
    assert np.abs(res.normalised[:, :-1]).max() <= ZERO_ATOL, res.normalised
    assert abs(res.normalised[0, -1] - 1.0) <= ZERO_ATOL     # the only differing position, at the embedding


def test_resid_row_after_the_last_block_equals_a_hf_final_norm_hook(odd, pair):
    """Row L of the residual map is the stream after the last block (what ln_f and the unembedding read):
    per position it equals HF with a forward pre-hook on ln_f writing the clean run's stream at that
    position; over all positions it is the clean run itself."""
    hf, L = odd.hf_model, odd.config.n_layers
    res = P.patch(odd.weights, pair, "resid", per_position=True)
    assert res.raw.shape == (L + 1, pair.T)
    assert list(res.frame()["row"].unique()) == [f"before L{l}" for l in range(L)] + [f"after L{L - 1} (final)"]
    stored = {}
    hk = hf.transformer.ln_f.register_forward_pre_hook(lambda m, a: stored.__setitem__("x", a[0].clone()))
    _hf_ld(hf, pair.clean, pair.answer, pair.distractor, pair.pos)
    hk.remove()
    for p in (pair.T - 1, 2):
        def put(m, a, p=p):
            x = a[0].clone()
            x[:, p] = stored["x"][:, p]
            return (x,)
        hk = hf.transformer.ln_f.register_forward_pre_hook(put)
        try:
            ref = _hf_ld(hf, pair.corrupt, pair.answer, pair.distractor, pair.pos)
        finally:
            hk.remove()
        assert abs(res.raw[L, p] - ref) < 1e-5, p
    assert abs(res.raw[L, pair.pos] - res.clean_ld) < 1e-5           # the read position carries everything
    whole = P.patch(odd.weights, pair, "resid")
    assert whole.raw.shape == (L + 1,) and abs(whole.normalised[L] - 1.0) <= ZERO_ATOL
    from attnkit.charts.effects import layer_pos_map

    spec = layer_pos_map(res.frame(), [str(i) for i in range(pair.T)]).to_dict()
    y = spec["layer"][0]["encoding"]["y"]
    assert y["field"] == "row" and y["sort"][-1] == f"after L{L - 1} (final)" and len(y["sort"]) == L + 1


def test_attn_mlp_targets_match_hooks(odd, pair):
    """attn/mlp per position equal a plain full run with the same replacement hook."""
    from attnkit.model import run

    res = P.patch(odd.weights, pair, "mlp", per_position=True)
    src = run(odd.weights, pair.clean, capture=["mlp_out", "attn_out"])
    for point, r in (("mlp_out", res), ("attn_out", P.patch(odd.weights, pair, "attn", per_position=True))):
        for layer, p in [(0, pair.T - 1), (2, pair.T - 1), (1, 3)]:
            def hook(t, l, layer=layer, p=p):
                if l == layer:
                    t = t.clone()
                    t[0, p] = src[point, layer][0, p]
                    return t
            lg = run(odd.weights, pair.corrupt, hooks={point: hook}).logits[0, pair.pos].double()
            assert abs(r.raw[layer, p] - float(lg[pair.answer] - lg[pair.distractor])) < 1e-5


def test_inputs_rejected_with_messages(odd):
    with pytest.raises(P.PatchError, match="same length") as e:
        P.make_pair(odd, CLEAN, "The animal", " it", " the")
    assert e.value.table and {"position", "clean", "corrupted"} <= set(e.value.table[0])
    assert "\n" not in str(e.value)
    with pytest.raises(P.PatchError, match="single token.*\\+"):
        P.make_pair(odd, CLEAN, CORRUPT, "zebra", " the")         # several tokens with and without a space
    with pytest.raises(P.PatchError, match="same token"):
        P.make_pair(odd, CLEAN, CORRUPT, "it", " it")
    with pytest.raises(P.PatchError, match="outside"):
        P.make_pair(odd, CLEAN, CORRUPT, "it", " the", pos=99)
    with pytest.raises(P.PatchError, match="empty"):
        P.make_pair(odd, " ", CORRUPT, "it", " the")


def test_leading_space_is_reported(odd):
    pr = P.make_pair(odd, CLEAN, CORRUPT, "it", "the")
    assert pr.answer_token == " it" and "leading space" in pr.notes[0]


def test_patch_many_mean_and_spread(odd, pair):
    other = P.make_pair(odd, "The animal didn't cross the street.", "The animal didn't cross the street!", " it", " the")
    out = P.patch_many(odd.weights, [pair, other], "attn")
    assert out["mean"].shape == (odd.config.n_layers,) and out["n"] == 2
    assert np.allclose(out["mean"], out["per_pair"].mean(0))


def test_cli_json(odd_dir, tmp_path, capsys):
    out = tmp_path / "patch.json"
    rc = patch_cli(["--model", str(odd_dir), "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "it",
                "--distractor", "the", "--target", "z", "--json", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["dims"] == ["layer", "head"] and len(res["normalised"]) == 3 and len(res["normalised"][0]) == 6
    assert res["answer"] == " it"
    rc = patch_cli(["--model", str(odd_dir), "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "it",
                "--distractor", "the", "--target", "resid", "--per-position", "--json", str(out)])
    assert rc == 0 and json.loads(out.read_text())["dims"] == ["layer", "position"]
    capsys.readouterr()
    rc = patch_cli(["--model", str(odd_dir), "--clean", CLEAN, "--corrupt", "The animal", "--answer", "it",
                "--distractor", "the"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "same length" in err


def test_main_registry_has_patch_and_attribute():
    from attnkit.cli import COMMANDS

    assert COMMANDS["patch"][0] == "attnkit.cli.patch" and COMMANDS["attribute"][0] == "attnkit.cli.attribute"


def test_page_renders_every_section(odd_dir):
    at = apptest("effects", odd_dir, he_clean=CLEAN, he_corrupt=CORRUPT, he_answer="it",
                 he_distractor="the", he_example="Your own").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    heads = [s.value for s in at.subheader]
    assert any("Which heads" in h for h in heads) and any("Logit lens" in h for h in heads)
    assert any("Contribution graph" in h for h in heads)
    assert any("leading space" in c.value for c in at.caption)
    at.radio(key="he_lp_target").set_value("MLP output").run()
    at.radio(key="he_direction").set_value("noise").run()
    at.radio(key="he_dla_run").set_value("corrupted").run()
    at.selectbox(key="he_head").set_value("L2H5").run()
    at.slider(key="he_thresh").set_value(0.3).run()
    assert not at.exception and not at.error


def test_page_mismatch_shows_both_tokenizations(odd_dir):
    at = apptest("effects", odd_dir, he_clean=CLEAN, he_corrupt="The animal <b>x</b>",
                 he_answer="it", he_distractor="the", he_example="Your own").run()
    assert not at.exception
    assert any("same length" in e.value for e in at.error)
    table = at.dataframe[0].value
    assert {"clean", "corrupted"} <= set(table.columns) and len(table) >= 8
    at = apptest("effects", odd_dir, he_clean=CLEAN, he_corrupt=CORRUPT,
                 he_answer="zebra", he_distractor="the", he_example="Your own").run()
    assert any("single token" in e.value for e in at.error)


def test_page_prompt_set_averages(odd_dir):
    rows = [{"clean": CLEAN, "corrupted": CORRUPT, "answer": "it", "distractor": "the"},
            {"clean": "The animal didn't cross the street.", "corrupted": "The animal didn't cross the street!",
             "answer": " it", "distractor": " the"},
            {"clean": CLEAN, "corrupted": "too short", "answer": "it", "distractor": "the"}]
    data = "\n".join(json.dumps(r) for r in rows).encode()
    at = apptest("effects", odd_dir, he_source="A prompt set (upload)",
                 he_upload_data=("set.jsonl", data)).run()
    assert not at.exception, at.exception
    assert any("row 3" in w.value for w in at.warning)
    assert any("2 pairs" in c.value for c in at.caption)
    at.selectbox(key="he_set_target").set_value("MLP output").run()
    assert not at.exception and not at.error


def test_page_in_the_app_opens_a_clicked_head_in_heatmaps(odd_dir):
    """What a click on the patching map leaves behind (the chart's callback calls ui.open_head: the Heatmaps
    page's inputs and the page switch asked for) switches to Heatmaps on that head at the next run."""
    at = apptest("effects", odd_dir, he_clean=CLEAN, he_corrupt=CORRUPT, he_answer="it", he_distractor="the",
                 he_example="Your own").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Head effects"]
    at.session_state["hm_layer"], at.session_state["hm_head"], at.session_state["hm_view"] = 2, 4, "One head"
    at.session_state[GOTO] = "heatmaps"
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Heatmaps"]
    assert at.selectbox(key="hm_layer").value == 2 and selectbox(at, "hm_head").value == 4
    assert GOTO not in at.session_state


def test_page_one_token_pair(odd_dir):
    at = apptest("effects", odd_dir, he_clean="The", he_corrupt="it", he_answer="it",
                 he_distractor="the", he_example="Your own").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def test_positions_after_the_read_one_are_not_run(odd, pair):
    early = P.Pair(pair.clean, pair.corrupt, pair.answer, pair.distractor, pos=pair.T - 3)
    res = P.patch(odd.weights, early, "resid", per_position=True)
    assert np.all(res.raw[:, early.pos + 1:] == res.corrupt_ld)
    assert res.n_runs == (odd.config.n_layers + 1) * (early.pos + 1)      # + the stream after the last block
    from attnkit.model import run

    src = run(odd.weights, early.clean, capture=["resid_pre"])
    p = early.T - 1                               # brute force: patching a later position changes nothing

    def hook(t, l):
        if l == 1:
            t = t.clone()
            t[0, p] = src["resid_pre", 1][0, p]
            return t
    lg = run(odd.weights, early.corrupt, hooks={"resid_pre": hook}).logits[0, early.pos].double()
    assert abs(float(lg[early.answer] - lg[early.distractor]) - res.raw[1, p]) < 1e-5


@pytest.mark.parametrize("args,expect", [
    (["patch", "--json", "/no/such/folder/p.json"], "does not exist"),
    (["patch", "--target", "q"], "--target"),
    (["patch", "--device", "tpu"], "unknown device"),
    (["attribute", "--top", "0"], "--top"),
    (["attribute", "--answer", "abc\udcff"], "not valid UTF-8"),
])
def test_cli_bad_values_one_line_before_loading(args, expect, capsys, monkeypatch):
    from attnkit import loading
    from attnkit.cli import main

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    base = {"--clean": "a b", "--corrupt": "a c", "--answer": "b", "--distractor": "c"}
    for k, v in base.items():
        if k not in args:
            args = args + [k, v]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0], err


def test_page_prepends_bos_to_both_prompts_when_the_sidebar_says_so(odd_dir, odd):
    T = len(odd.encode(CLEAN))
    for bos, n in ((False, T), (True, T + 1)):
        at = apptest("effects", odd_dir, he_clean=CLEAN, he_corrupt=CORRUPT, he_answer=".",
                     he_distractor="!", he_example="Your own", ak_bos=bos).run()
        assert not at.exception and not at.error
        assert any(c.value.startswith(f"{n} tokens; the prompts differ") for c in at.caption), n


def test_normalise_and_set_average_on_hand_computed_values():
    """The one gap-normalised logit difference, and the per-cell mean/std over a set leaving NaN cells out."""
    np.testing.assert_array_equal(P.normalise([1.0, 3.0, -1.0], 3.0, 1.0), [0.0, 1.0, -1.0])
    assert P.normalise(2.0, 3.0, 1.0) == 0.5 and np.isnan(P.normalise(2.0, 1.0, 1.0 + 1e-7))
    assert str(P.normalise(np.array([1.0]), 3.0, 1.0)[0]) == "0.0"           # no −0.0
    avg = P.average([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan]], gaps=[1.0, 0.0])
    np.testing.assert_array_equal(avg.mean[:2], [2.0, 2.0])
    np.testing.assert_array_equal(avg.std[:2], [1.0, 0.0])
    assert np.isnan(avg.mean[2]) and np.isnan(avg.std[2]) and list(avg.n) == [2, 1, 0] and avg.undefined == 1
