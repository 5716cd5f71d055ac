"""The "Why does this query attend to this key?" panel on Heatmaps and the layer-0 split on Step by step
(attnkit/app/pages/heatmaps/why.py, steps/page.py): the page shows the same terms as ``python -m attnkit why --json``."""
import json

import pandas as pd
import pytest

from attnkit import score_terms as terms_lib
from attnkit.app.pages.heatmaps import why as why_view
from attnkit.app.pages.shared import splits
from attnkit.cli.why import cli as why_cli
from helpers import apptest, make_family_checkpoint

HEATMAPS, STEPS = "heatmaps", "steps"
# docs/why.md's story: L3H0 from the second " kernel" (11) to " source" (3)
TEXT = "Install the kernel source and the module binary. Install the kernel"
Q, K = 11, 3


def _why(**state):
    return apptest(HEATMAPS, text=TEXT, hm_layer=3, hm_head=0, **state)


def _frame_with(at, column):
    return next(d.value for d in at.dataframe if column in getattr(d.value, "columns", []))


def test_the_page_and_the_cli_give_the_same_terms(tmp_path):
    out = tmp_path / "why.json"
    assert why_cli(["--model", "attnkit-tiny", "--text", TEXT, "--head", "L3H0", "--query", str(Q), "--key", str(K),
                    "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    by_pair = {(r["query"], r["key"]): r["value"] for r in cli["terms"]}
    at = _why(hm_why_q=Q, hm_why_k=K).run()
    assert not at.exception
    top = _frame_with(at, "query part")
    assert len(top) == 15
    for _, r in top.iterrows():
        assert r["term"] == pytest.approx(by_pair[(r["query part"], r["key part"])], abs=1e-9)
    # the 15 shown are the 15 largest of the CLI's terms
    assert sorted(abs(v) for v in top["term"]) == sorted(abs(v) for v in by_pair.values())[-15:]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["The model's score"] == f"{cli['score']:+.4f}"
    assert metrics["Sum of the terms"] == f"{cli['total']:+.4f}"
    texts = " ".join(x.value for x in at.text)
    assert "L3H0 attends from 11" in texts and "differs between the two keys" in texts  # the sentence, the contrast
    # the grouped view adds up to the score too
    grouped = next(d.value for d in at.dataframe if "query part" not in getattr(d.value, "columns", ["query part"]))
    assert float(grouped.data.to_numpy().sum() if hasattr(grouped, "data") else grouped.to_numpy().sum()) == \
        pytest.approx(cli["total"], abs=1e-9)


def test_a_clicked_cell_opens_the_panel_and_links_to_circuits():
    at = _why().run()
    assert not at.exception
    assert not at.metric                                  # nothing picked yet: no split
    at.session_state[why_view.CHART_KEY] = {"selection": {why_view.SELECT: [{"query": f"{Q}:␣kernel",
                                                                             "key": f"{K}:␣source"}]}}
    at.run()
    assert not at.exception
    assert (at.session_state[why_view.Q_KEY], at.session_state[why_view.K_KEY]) == (Q, K)
    assert at.metric, "the click did not open the split"
    path = [b for b in at.button if str(b.key).startswith("hm_why_path_")]
    assert path and "L3H0.k" in path[0].label
    path[0].click().run()
    assert not at.exception
    sender = path[0].key.removeprefix("hm_why_path_")
    assert at.session_state["ci_sender"] == sender
    assert (at.session_state["ci_recv_layer"], at.session_state["ci_recv_head"], at.session_state["ci_recv_input"]) \
        == (3, 0, "k")
    assert at.session_state["ci_clean"] == TEXT          # the prompt is an example's clean prompt: its pair comes


def test_one_label_per_quantity_in_the_sentence_and_the_head_buttons():
    """A side total (a part summed over the other side) and a single term (query part × key part) are different
    numbers: the sentence names each by what it is, and the head buttons show side totals, labelled so (issue 44:
    L0H7 +2.676 in the sentence was one term, +3.766 on its button the query-side total, under one label)."""
    import re
    from attnkit import loading

    m = loading.load("attnkit-tiny", "cpu")
    st = terms_lib.score_terms(m.weights, m.encode(TEXT), 3, 0, Q, K)
    at = _why(hm_why_q=Q, hm_why_k=K).run()
    assert not at.exception
    sentence = next(x.value for x in at.text if "attends from" in x.value)
    kpart = st.key_side.abs().idxmax()
    qpart = pd.Series(st.values[:, st.key_parts.index(kpart)], index=st.query_parts).abs().idxmax()
    assert f"key side total {st.key_side[kpart]:+.3f}" in sentence, sentence
    term = st.values[st.query_parts.index(qpart), st.key_parts.index(kpart)]
    assert f"the single term {qpart} × {kpart} = {term:+.3f}" in sentence, sentence
    sides = {"key side": st.key_side, "query side": st.query_side}
    shown = [(b.key, b.label) for b in at.button if str(b.key).startswith("hm_why_open_")]
    assert shown
    for key, label in shown:
        side, part = key.removeprefix("hm_why_open_").rsplit("_", 1)
        value = re.fullmatch(re.escape(part) + r" \(side total ([+-]\d+\.\d+)\): its pattern", label)
        assert value and value.group(1) == f"{sides[side][part]:+.3f}", (key, label)


def test_a_key_after_the_query_gives_the_reason():
    at = _why(hm_why_q=3, hm_why_k=Q).run()
    assert not at.exception
    assert any("comes after query 3" in i.value for i in at.info)
    assert not at.metric


@pytest.fixture(scope="module")
def window_dir(tmp_path_factory):
    return make_family_checkpoint(tmp_path_factory.mktemp("why-window"), "mistral-window", sliding_window=4)


def test_a_windowed_key_gives_the_librarys_reason(window_dir):
    at = apptest(HEATMAPS, window_dir, text="a b c d e f g h i j k l", hm_layer=1, hm_head=0,
                 hm_why_q=9, hm_why_k=1).run()
    assert not at.exception
    shown = [i.value for i in at.info if "window" in i.value]
    assert shown and "sees only keys" in shown[0]


def test_step_by_step_layer0_split_is_the_librarys_and_adds_up():
    from attnkit import loading
    m = loading.load("attnkit-tiny", "cpu")
    ids = m.encode(TEXT)
    q = len(ids) - 1
    row = terms_lib.score_terms(m.weights, ids, 0, 2, q)
    best = int(row.keys[row.scores.argmax()])
    cells = terms_lib.layer0_split(terms_lib.score_terms(m.weights, ids, 0, 2, q, best))
    at = apptest(STEPS, text=TEXT, st_head=2).run()
    assert not at.exception
    sentence = next(x.value for x in at.text if "In layer 0 a head reads only X" in x.value)
    assert f"to the key it scores highest, {best} " in sentence
    assert f"is {sum(cells.values()):+.3f}" in sentence
    assert f"token × token {cells['token × token']:+.3f}" in sentence
    assert sum(cells.values()) == pytest.approx(float(row.scores.max()), abs=1e-4)


def test_progress_is_reported_per_layer_and_a_raising_callback_stops_the_split():
    from attnkit import loading
    w = loading.load("attnkit-tiny", "cpu").weights
    ids = loading.load("attnkit-tiny", "cpu").encode(TEXT)
    calls = []
    row = terms_lib.score_terms(w, ids, 3, 0, Q, progress=lambda d, n: calls.append((d, n)))
    assert calls[0] == (0, 5) and calls[-1] == (5, 5)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) >= 5
    assert row.key_side.sum(0) == pytest.approx(row.scores, abs=1e-4)

    class Halt(BaseException):
        pass

    def halt(done, total):
        if done >= 2:
            raise Halt()
    with pytest.raises(Halt):
        terms_lib.score_terms(w, ids, 3, 0, Q, progress=halt)


def test_cost_grows_with_T_and_layer_and_the_page_estimate_is_seconds():
    from attnkit import loading
    cfg = loading.load("attnkit-tiny", "cpu").config
    assert terms_lib.cost(cfg, 64, 3) > terms_lib.cost(cfg, 32, 3) > terms_lib.cost(cfg, 32, 1)
    assert splits.seconds(cfg, 12, 3) < splits.JOB_SECONDS        # the tiny model's split: no job


def test_the_whole_row_runs_as_a_job_when_slow(monkeypatch):
    monkeypatch.setattr(splits, "JOB_SECONDS", -1.0)               # every split counts as slow: a job
    at = _why(hm_why_q=Q, hm_why_k=K, hm_why_row=True).run()
    assert not at.exception
    assert at.metric                                                  # the key's split came from its job
    jobs = at.session_state["_ak_results"]
    assert {"hm_why", "hm_why_row"} <= set(jobs)
    from attnkit.app import jobs as app_jobs                          # a session keeps keys; results are shared
    row = app_jobs.recall(dict(jobs), "hm_why_row", jobs["hm_why_row"])[1][0]
    assert list(row.keys) == list(range(Q + 1))
    assert row.key_side.sum(0) == pytest.approx(row.scores, abs=1e-4)


def test_step_by_step_averages_layer0_over_the_uploaded_prompts():
    """With a prompt set in the sidebar, Step by step shows layer 0's split averaged over it: the library's
    layer0_average on the same prompts (mean, std over prompts, n), the cells adding up to each prompt's score."""
    from attnkit import loading
    m = loading.load("attnkit-tiny", "cpu")
    texts = ["The cat sat on the mat because it was tired", "Install the kernel source and the module binary",
             "Mary and John went to the store"]
    data = "\n".join(json.dumps({"text": x}) for x in texts).encode()
    at = apptest(STEPS, ak_source="Upload", ak_upload_data=("set.jsonl", data), st_head=1).run()
    assert not at.exception
    shown = next(d.value for d in at.dataframe if "mean" in getattr(d.value, "columns", []))
    want = terms_lib.layer0_average(m.weights, [m.encode(x) for x in texts], 1)
    assert list(shown["cell"]) == list(want["cell"]) and set(shown["n"]) == {3}
    assert shown["mean"].to_numpy() == pytest.approx(want["mean"].to_numpy(), abs=1e-9)
    assert shown["std"].to_numpy() == pytest.approx(want["std"].to_numpy(), abs=1e-9)
    assert (want["std"] > 0).any()                       # three different prompts: a real spread
    # the mean of the cells is the mean of each prompt's top score (the split is exact)
    tops = [float(terms_lib.score_terms(m.weights, ids, 0, 1, len(ids) - 1).scores.max())
            for ids in (m.encode(x) for x in texts)]
    assert shown["mean"].sum() == pytest.approx(sum(tops) / 3, abs=1e-4)
