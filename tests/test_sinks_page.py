"""The Sinks page (issue 46) under AppTest, in English and 简体中文: its numbers are the library's (the sink heads,
the (k, w) grid, generation with an evicting cache), its lab job stops on Stop; the "exclude position 0" switches of
Compare heads and Entropy give what the library gives; Step by step's KV-cache tab opens the page on the same
prompt; the Ablations page shows no-sink like every kind; and the notebook API's Model.sinks / Model.eviction."""
import time
import numpy as np
import pytest

import attnkit
from attnkit import ablations as A
from attnkit import entropy as entropy_lib
from attnkit import eviction as E
from attnkit import metrics as M
from attnkit.app.language import SESSION_KEY
from attnkit.app.pages.shared import labels as choice_labels
from attnkit.app.pages.sinks.lab import K_CHOICES
from attnkit.attention import Keep
from attnkit.model import generate, run
from attnkit.sinks import measure_sinks, text_windows
from attnkit.standard import parse_head
from helpers import apptest, make_family_checkpoint
from untranslated import apptest_texts, untranslated

TEXT = ("The animal didn't cross the street because it was too tired. Attention lets every token look back at "
        "the tokens before it. ") * 5             # 150 tokens on the test tokenizer: 149 predicted, 3 blocks
#: A small grid and a short text: the page costs seconds on the 3-layer test model.
SMALL = dict(sk_sinks=[0, 2], sk_windows=[8, 32], sk_gen_n=6, sk_gen_k=2, sk_gen_w=8)


def docs_of(model, text=TEXT):
    return text_windows(model.encode, [text], model.config.n_ctx)[0]


def frame_with(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_text_windows_by_hand():
    """Each text its own windows of `context` ids, the first `tokens` in all; a window under 2 tokens dropped."""
    enc = lambda s: list(range(len(s)))                                     # noqa: E731 - one id per character
    assert text_windows(enc, ["abcde", "xyz"], 2) == ([[0, 1], [2, 3], [0, 1]], 8)
    assert text_windows(enc, ["abcde", "xyz"], 2, tokens=4) == ([[0, 1], [2, 3]], 5)      # xyz never read
    assert text_windows(enc, "abcdefg", 3, tokens=6) == ([[0, 1, 2], [3, 4, 5]], 7)
    with pytest.raises(ValueError, match="at least 2"):
        text_windows(enc, "ab", 1)


def test_page_shows_the_librarys_sinks_grid_verdict_and_generation(odd_dir, odd):
    at = apptest("sinks", odd_dir, text=TEXT, **SMALL).run()
    assert not at.exception, at.exception
    assert [x.value for x in at.title] == ["Attention sinks & KV cache"]
    docs = docs_of(odd)
    stats = measure_sinks(odd.weights, docs, k=4)
    heads = frame_with(at, "share on the first token")
    expect = stats.to_pandas().sort_values("first_token", ascending=False)
    assert list(heads["head"]) == list(expect["name"])
    assert np.allclose(heads["share on the first token"], expect["first_token"], atol=1e-6)
    lab = E.eviction_lab(odd.weights, docs, [0, 2], [8, 32], sink_stats=stats)
    grid = frame_with(at, "loss (nats/token)")
    assert list(zip(grid["sinks k"], grid["window w"])) == [(0, 8), (0, 32), (2, 8), (2, 32)]
    assert np.allclose(grid["loss (nats/token)"], [r["loss"] for r in lab.rows], atol=1e-9)
    assert np.allclose(grid["95 % low"], [r["low"] for r in lab.rows], atol=1e-9)
    assert [m.value for m in at.metric][0] == f"{lab.full['loss']:.4f}"
    verdict = [x.value for x in list(at.success) + list(at.error) + list(at.warning) if x.value.startswith("Verdict")]
    assert verdict == [f"Verdict: {lab.verdict.status}. {lab.verdict.text}"]
    assert any(c.value.startswith("Rule: Judged in the original-positions mode") for c in at.caption)
    assert any("Rolling is not run here" in c.value and "learned positions" in c.value for c in at.caption)
    assert not at.main.text                                   # generation waits for its button
    at.button(key="_ak_run_sk_gen").click().run()
    assert not at.exception, at.exception
    full, kept = generate(odd.weights, docs[0][:256], 6), generate(odd.weights, docs[0][:256], 6, keep=Keep(2, 8))
    texts = [x.value for x in at.text]
    assert any(s.endswith(repr("".join(odd.token_strs(full.tokens)))) for s in texts), texts
    assert any(s.endswith(repr("".join(odd.token_strs(kept.tokens)))) for s in texts), texts


def test_page_runs_the_rolling_cache_on_a_rotary_model(tmp_path):
    from attnkit.loading import load

    folder = make_family_checkpoint(tmp_path / "llama", "smollm2-135m")
    llama = load(str(folder), "cpu")
    at = apptest("sinks", folder, text=TEXT, sk_rolling=True, sk_gen_len=20, **SMALL).run()
    assert not at.exception, at.exception
    assert at.checkbox(key="sk_rolling").value
    docs = docs_of(llama)
    lab = E.eviction_lab(llama.weights, docs, [0, 2], [8, 32], (E.ORIGINAL, E.ROLLING))
    grid = frame_with(at, "loss (nats/token)")
    assert list(grid["positions"]) == [E.ORIGINAL] * 4 + [E.ROLLING] * 4
    assert np.allclose(grid["loss (nats/token)"], [r["loss"] for r in lab.rows], atol=1e-9)
    at.button(key="_ak_run_sk_gen").click().run()
    assert not at.exception, at.exception
    kept = generate(llama.weights, docs[0][:20], 6, keep=Keep(2, 8), rolling=True)   # the prompt fed one by one
    assert any(x.value.endswith(repr("".join(llama.token_strs(kept.tokens)))) for x in at.main.text)
    assert any("rolling positions" in c.value for c in at.caption)


def test_page_in_zh_on_the_shipped_chinese_sample(odd_dir):
    at = apptest("sinks", odd_dir, text=TEXT, sk_source="zh", sk_tokens=600, **SMALL, **{SESSION_KEY: "zh"}).run()
    assert not at.exception, at.exception
    assert [x.value for x in at.title] == ["注意力汇聚点与 KV 缓存"]
    texts = apptest_texts(at)
    assert any(s.startswith("结论：") for s in texts), texts
    model_output = [x.value for x in at.text] + [str(odd_dir), TEXT]          # model output, the sidebar prompt
    assert untranslated(texts, allow=model_output) == []


def test_a_short_prompt_says_what_the_lab_needs(odd_dir):
    at = apptest("sinks", odd_dir, text="The animal didn't cross.", **{**SMALL, "sk_windows": [32]}).run()
    assert not at.exception, at.exception
    assert any("nearly every head looks like a sink" in w.value for w in at.warning)
    assert any("Choose a shipped text above for the lab" in i.value for i in at.info)
    assert not [m for m in at.metric] and at.button(key="_ak_run_sk_lab").label == "Run the grid anyway"
    at.button(key="_ak_run_sk_lab").click().run()                # run anyway: every window holds the whole text
    loss = [m.value for m in at.metric][0]
    assert set(frame_with(at, "loss (nats/token)")["loss (nats/token)"].map("{:.4f}".format)) == {loss}


def test_stop_ends_the_lab_job(odd_dir, monkeypatch):
    at = apptest("sinks", odd_dir, text=TEXT, sk_source="eval", sk_tokens=4096, **SMALL).run()
    assert not at.exception, at.exception
    monkeypatch.setenv("ATTNKIT_JOB_WAIT", "0")            # the page no longer waits for its jobs
    at.multiselect(key="sk_sinks").set_value(list(K_CHOICES))
    at.multiselect(key="sk_windows").set_value([4, 8, 16, 32, 64, 128, 256]).run()
    job = at.session_state["_ak_jobs"]["sk_lab"]
    try:
        assert job.alive and any("Stale" in c.value for c in at.caption)      # the last grid kept, marked stale
        for _ in range(200):                        # its first progress report (under load it can take a while)
            if job.total or not job.alive:
                break
            time.sleep(0.05)
        at.button(key="_ak_stop_sk_lab").click().run()
        job.join(5)
        assert job.state == "stopped" and job.done < job.total
        assert any("stopped after" in i.value for i in at.info)
        assert at.button(key="_ak_run_sk_lab")                                 # and "Run again" is offered
    finally:
        job.stop(wait=5)


def test_compare_exclude_position_0_gives_the_librarys_statistics(odd_dir, odd):
    at = apptest("compare", odd_dir, text=TEXT, cmp_stat="previous-token", cmp_no_first=True).run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("Position 0 is taken out") for c in at.caption)
    ids = odd.encode(TEXT)
    pats = run(odd.weights, ids, capture=["pattern"])
    shown = choice_labels.shown(choice_labels.COMPARE_NAMES)
    for name in at.session_state["cmp_open"]:
        l, h = parse_head(name)
        for exclude in (True, False):
            row = {s: float(v[h]) for s, v in M.head_scores(pats["pattern", l][0], ids, window=None,
                                                             exclude_first=exclude).items()}
            line = " · ".join(f"{shown(s)} {v:.2f}" for s, v in row.items() if np.isfinite(v))
            assert (line in [c.value for c in at.caption]) == exclude, (name, exclude, line)


def test_entropy_exclude_position_0_gives_the_librarys_curves(odd_dir, odd):
    at = apptest("entropy", odd_dir, text=TEXT, ent_no_first=True).run()
    assert not at.exception, at.exception
    assert any(i.value.startswith("Position 0 is excluded") for i in at.info)
    ids = odd.encode(TEXT)
    expect = {}
    for exclude in (True, False):
        agg = entropy_lib.Aggregate(odd.config.windows)
        c = entropy_lib.doc_curves(odd.weights, ids, exclude_first=exclude)
        agg.add(c.entropy[0], c.first_token[0], c.loss[0])
        expect[exclude] = entropy_lib.slope_frame(agg.result())["slope"].to_numpy()
    slopes = frame_with(at, "slope")["slope"].to_numpy()
    assert np.allclose(slopes, expect[True], atol=1e-9)
    assert np.abs(slopes - expect[False]).max() > 1e-5      # a random model is near uniform: small, real changes


def test_step_by_step_opens_the_sinks_page_on_its_prompt(odd_dir):
    at = apptest("steps", odd_dir, text=TEXT, **SMALL).run()
    assert not at.exception, at.exception
    at.button(key="st_kv_sinks").click().run()
    assert not at.exception, at.exception
    assert [x.value for x in at.title] == ["Attention sinks & KV cache"]
    assert at.session_state["sk_source"] == "prompt" and at.session_state["ak_text"] == TEXT


def test_ablations_page_lists_no_sink_with_its_claim_and_verdict(odd_dir):
    at = apptest("ablations", odd_dir, text=TEXT, ab_kind="no-sink").run()
    assert not at.exception, at.exception
    kind = A.get_kind("no-sink")
    assert at.selectbox(key="ab_kind").value == "no-sink"
    assert any(str(kind.claim) in m.value for m in at.markdown)
    shown = [x.value for x in list(at.success) + list(at.error) + list(at.warning)]
    assert any(v.startswith("Verdict: ") for v in shown), shown
    assert any(c.value.startswith("Rule:") for c in at.caption)


def test_notebook_sinks_and_eviction(odd_dir, odd, tmp_path):
    m = attnkit.load(str(odd_dir))
    s = m.sinks(TEXT, k=2)
    expect = measure_sinks(odd.weights, docs_of(odd), k=2)
    assert np.allclose(s.to_pandas()["first_2"], expect.to_pandas()["first_2"], atol=1e-9)
    assert [n for n, _ in s.heads()] == [n for n, _ in expect.heads()]
    assert set(s.chart("position").data["name"]) == set(expect.top_heads())
    assert s.save(tmp_path / "sinks.csv").read_text().startswith("layer,head,name")
    e = m.eviction(TEXT, sinks=(0, 2), windows=(8, 100_000), resamples=50)
    df = e.to_pandas()
    whole = df[(df["sinks"] == 0) & (df["window"] == 100_000)]["loss"].item()
    assert whole == e.full["loss"]                        # k = 0, w ≥ T: the full cache exactly
    assert e.verdict.status in A.STATUSES and e.summary().startswith(m.name)
    assert (tmp_path / "grid.html").exists() is False and e.save(tmp_path / "grid.html").stat().st_size > 1000
    refused = m.eviction(TEXT, windows=(8,), modes=(E.ROLLING,), resamples=10)
    assert list(refused.lab.refused) == [E.ROLLING] and refused.to_pandas().empty     # learned positions: no rolling
    zh = attnkit.load(str(odd_dir), lang="zh").eviction(TEXT, sinks=(0, 2), windows=(8,), resamples=20)
    assert "结论" in zh.summary()
