"""attnkit.compare (head similarity, ordering, token-pair ranking, averaging) and the Compare-heads page."""
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

from attnkit import compare, metrics
from attnkit.attention import causal_mask
from helpers import apptest, selectbox

PAGE = "compare"


def _np_js_distance(p, q):
    """Independent float64 NumPy JS distance (base 2) of two distributions."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = (p + q) / 2
    kl = lambda a, b: sum(x * math.log2(x / y) for x, y in zip(a, b) if x > 0)   # noqa: E731
    return math.sqrt(max(0.0, (kl(p, m) + kl(q, m)) / 2))


def _causal_patterns(n, T, seed=0, sharp=3.0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, T, T, generator=g) * sharp
    return torch.softmax(s + causal_mask(T), -1)


def test_js_hand_values():
    one_hot = torch.tensor([1.0, 0.0])
    half = torch.tensor([0.5, 0.5])
    assert compare.js_divergence_rows(one_hot, one_hot).item() == 0.0
    assert compare.js_divergence_rows(one_hot, torch.tensor([0.0, 1.0])).item() == pytest.approx(1.0, abs=1e-12)
    # M = (.75, .25): KL(P‖M) = log2(4/3) = 0.415037, KL(Q‖M) = ½·log2(2/3) + ½·log2(2) = 0.207519
    assert compare.js_divergence_rows(one_hot, half).item() == pytest.approx(0.5 * (0.415037 + 0.207519), abs=1e-6)
    assert compare.js_divergence_rows(one_hot, half).sqrt().item() == pytest.approx(0.557923, abs=1e-6)


def test_distance_matrix_matches_numpy():
    pats = _causal_patterns(5, 7)
    rows = [1, 3, 6]
    D = compare.distance_matrix(pats, rows)
    for a in range(5):
        for b in range(5):
            want = np.mean([_np_js_distance(pats[a, r], pats[b, r]) for r in rows])
            assert D[a, b].item() == pytest.approx(want, abs=1e-9)
    assert compare.js_distance(pats[0], pats[2], rows) == pytest.approx(D[0, 2].item(), abs=1e-12)
    # default rows: every row but the first
    full = compare.distance_matrix(pats)
    want = np.mean([_np_js_distance(pats[1, r], pats[4, r]) for r in range(1, 7)])
    assert full[1, 4].item() == pytest.approx(want, abs=1e-9)


def test_sample_rows():
    assert compare.sample_rows(6, None).tolist() == [1, 2, 3, 4, 5]
    r = compare.sample_rows(1024, 10)
    assert len(r) == 10 and r[0] == 1 and r[-1] == 1023 and (np.diff(r.numpy()) > 0).all()


def test_similarity_order_sorts_points_on_a_line():
    coords = np.array([30.0, 0.0, 11.0, 1.0, 31.0, 10.0])
    D = np.abs(coords[:, None] - coords[None, :])
    order = compare.similarity_order(D)
    assert sorted(order) == list(range(6))
    seq = coords[order]
    assert (np.diff(seq) > 0).all() or (np.diff(seq) < 0).all()


def test_similarity_order_keeps_similar_heads_together():
    T = 12
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1            # previous-token heads
    first = torch.zeros(T, T)
    first[:, 0] = 1                                                # first-token heads
    g = torch.Generator().manual_seed(3)
    heads = []
    kinds = [0, 1, 0, 1, 1, 0]
    for kind in kinds:
        base = prev if kind == 0 else first
        noise = torch.softmax(torch.randn(T, T, generator=g) + causal_mask(T), -1)
        heads.append(0.9 * base + 0.1 * noise)
    D = compare.distance_matrix(torch.stack(heads))
    order = compare.similarity_order(D)
    groups = [kinds[i] for i in order]
    assert groups in ([0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0])


def test_rank_heads_for_pair_hand_example():
    p = torch.zeros(2, 2, 3, 3)
    # query 2 rows for each (layer, head)
    p[0, 0, 2] = torch.tensor([0.2, 0.5, 0.3])
    p[0, 1, 2] = torch.tensor([0.1, 0.1, 0.8])
    p[1, 0, 2] = torch.tensor([0.6, 0.4, 0.0])
    p[1, 1, 2] = torch.tensor([0.0, 0.7, 0.3])
    df = compare.rank_heads_for_pair(p, query=2, key=1)
    assert list(df["head"]) == ["L1H1", "L0H0", "L1H0", "L0H1"]
    assert list(df["weight"]) == pytest.approx([0.7, 0.5, 0.4, 0.1])
    assert list(df["rank_in_row"]) == [1, 1, 2, 2]        # ties count as the same rank
    assert list(df["top_key"]) == [1, 1, 0, 2]
    with pytest.raises(ValueError):
        compare.rank_heads_for_pair(p, 3, 0)


def test_mean_scores_ignores_nan():
    a = {"x": torch.tensor([[1.0, math.nan]]), "y": torch.tensor([[2.0, 4.0]])}
    b = {"x": torch.tensor([[3.0, math.nan]]), "y": torch.tensor([[4.0, 8.0]])}
    c = {"x": torch.tensor([[math.nan, 5.0]]), "y": torch.tensor([[0.0, 0.0]])}
    means, counts = compare.mean_scores([a, b, c])
    assert means["x"][0, 0].item() == 2.0 and means["x"][0, 1].item() == 5.0
    assert means["y"][0].tolist() == pytest.approx([2.0, 4.0])
    assert counts["x"].tolist() == [[2, 1]]
    means, _ = compare.mean_scores([{"x": torch.tensor([[math.nan]])}])
    assert math.isnan(means["x"].item())


def test_labels_and_find_token():
    assert compare.head_name(3, 11) == "L3H11"
    assert compare.parse_head("L3H11") == compare.parse_head("3.11") == compare.parse_head(" l3h11 ") == (3, 11)
    for bad in ["3", "a.b", "1.2.3", "-1.2", "L3", "H3L1", "L-1H2"]:
        with pytest.raises(ValueError):
            compare.parse_head(bad)
    toks = ["The", " animal", " saw", " it", " and", " it"]
    assert compare.find_token(toks, "it") == 5
    assert compare.find_token(toks, "animal", before=4) == 1
    assert compare.find_token(toks, "dog") is None
    split = ["The", " anim", "al", " didn", "'t", " it", " itself", " animals"]
    assert compare.find_token(split, "animal") == 1          # a word over two tokens: its first token
    assert compare.find_token(split, "it") == 5              # not ' itself'
    assert compare.find_token(["it", "em"], "it") is None    # 'item' is not the word 'it'
    df = compare.scores_frame(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "s")
    assert list(df["head"]) == ["L0H0", "L0H1", "L1H0", "L1H1"] and list(df["s"]) == [1.0, 2.0, 3.0, 4.0]


# ----------------------------------------------------------------------------- the page

def chart_frames(at) -> list[list[pd.DataFrame]]:
    """The data sent with every Vega-Lite chart of the page, as DataFrames."""
    out = []
    for el in at.get("vega_lite_chart"):
        frames = [pa.ipc.open_stream(d.data.data).read_pandas() for d in el.proto.datasets]
        if el.proto.HasField("data") and el.proto.data.data:
            frames.append(pa.ipc.open_stream(el.proto.data.data).read_pandas())
        out.append(frames)
    return out


def _frame_with(at, column):
    for frames in chart_frames(at):
        for f in frames:
            if column in f.columns:
                return f
    raise AssertionError(f"no chart with a {column!r} column")


def test_page_runs_and_ranks_heads_for_it_animal(odd_dir, odd):
    from attnkit.model import run

    text = "The animal didn't cross the street because it was too tired."
    at = apptest(PAGE, odd_dir, text=text).run()
    assert not at.exception
    assert not at.error
    ids = odd.encode(text)
    toks = odd.token_strs(ids)
    q, k = selectbox(at, "cmp_q").value, selectbox(at, "cmp_k").value
    assert toks[q].strip() == "it" and toks[k].strip() in ("animal", "anim")     # the test tokenizer splits it
    pats = run(odd.weights, ids, capture=["pattern"]).stack("pattern")[:, 0, :, q, k]      # [L, H]
    bars = _frame_with(at, "rank_in_row")
    assert bars["weight"].iloc[0] == pytest.approx(pats.max().item(), abs=1e-6)
    best = divmod(int(pats.argmax()), pats.shape[1])
    assert bars["head"].iloc[0] == f"L{best[0]}H{best[1]}"
    # the overview shows the statistic of every head, equal to metrics.head_scores on the run
    over = _frame_with(at, "mean entropy")
    pat = run(odd.weights, ids, capture=["pattern"]).stack("pattern")[:, 0]
    want = metrics.head_scores(pat, ids, window=odd.config)["mean entropy"]
    got = over.sort_values(["layer", "head_index"])["mean entropy"].to_numpy()
    np.testing.assert_allclose(got, want.reshape(-1).numpy(), atol=1e-5)
    # head similarity (all 18 heads of the odd model): JS distance averaged over rows 1..T-1
    sim = _frame_with(at, "distance")
    d = sim[(sim["head A"] == "L0H0") & (sim["head B"] == "L2H3")]["distance"].item()
    T = len(ids)
    assert d == pytest.approx(np.mean([_np_js_distance(pat[0, 0, r], pat[2, 3, r]) for r in range(1, T)]), abs=1e-5)
    assert set(sim["head A"]) == {f"L{l}H{h}" for l in range(3) for h in range(6)}


def test_changing_the_query_changes_the_ranking(odd_dir):
    at = apptest(PAGE, odd_dir, text="The animal didn't cross the street because it was too tired.").run()
    before = _frame_with(at, "rank_in_row")["weight"].tolist()
    selectbox(at, "cmp_q").set_value(2).run()
    assert not at.exception
    after = _frame_with(at, "rank_in_row")["weight"].tolist()
    assert before != after


def test_all_prompts_average_over_the_csv(odd_dir, odd):
    from attnkit.model import run

    prompts = ["first prompt here and here", "the second one is a bit longer than the first one"]
    data = ("text\n" + "\n".join(prompts) + "\n").encode()
    at = apptest(PAGE, odd_dir, ak_source="Upload", ak_upload_data=("p.csv", data), ak_pick="all",
                 cmp_stat="previous-token").run()
    assert not at.exception and not at.error
    per = []
    for p in prompts:
        ids = odd.encode(p)
        per.append(metrics.head_scores(run(odd.weights, ids, capture=["pattern"]).stack("pattern")[:, 0], ids,
                                      window=odd.config)
                   ["previous-token"].double())
    want = ((per[0] + per[1]) / 2).reshape(-1).numpy()
    over = _frame_with(at, "previous-token").sort_values(["layer", "head_index"])
    np.testing.assert_allclose(over["previous-token"].to_numpy(), want, atol=1e-5)
    assert any("Mean over 2 of the 2 prompts" in c.value for c in at.caption)


def test_bad_upload_is_an_error_not_a_traceback(odd_dir):
    at = apptest(PAGE, odd_dir, ak_source="Upload", ak_upload_data=("bad.txt", b"\x00\x01binary")).run()
    assert not at.exception
    assert any("binary" in e.value for e in at.error)


def test_long_prompt_draws_images_and_offers_the_matrix_on_request(odd_dir, odd):
    text = "attention lets every token look back " * 20
    at = apptest(PAGE, odd_dir, text=text).run()
    assert not at.exception and not at.error
    T = len(odd.encode(text))
    assert T > 64
    assert any(f"{T} tokens: each head is drawn as an image" in c.value for c in at.caption)
    labels = [b.label for b in at.get("download_button")]
    assert sum(f"Matrix as CSV ({T}×{T})" in lab for lab in labels) == 2      # the two opened heads
