"""Round five, what a learner met on Step by step: every claim a learner reads is checked against the numbers shown
beside it — the 上海 example's words (found by character span), its per-layer reading and its next-token note, the
猫 example's causal-mask sentence, the W_Q ≠ W_K verdict, the KV cache's timing note — and small percentages."""
import re

import numpy as np
import pytest

from attnkit import examples
from attnkit.app.pages.shared.next_token import percent
from attnkit.app.pages.steps import seeds
from attnkit.loading import CHINESE_MODEL
from helpers import apptest

zh_ready = pytest.mark.skipif(not seeds.zh_model_ready(), reason=f"{CHINESE_MODEL} is not installed")


def test_percent_is_one_formatter_with_a_floor():
    assert [percent(p) for p in (0.25, 0.0025, 2e-5, 2e-8, 0.0)] == ["25.00 %", "0.25 %", "0.002 %", "< 0.001 %",
                                                                      "0.00 %"]


def test_last_position_reading_by_hand():
    # 2 heads, 4 tokens "a b c a"; the last position's rows: head 0 [0.1, 0.6, 0.1, 0.2], head 1 [0.3, 0.2, 0.1, 0.4]
    p = np.zeros((2, 4, 4))
    p[0, -1], p[1, -1] = [0.1, 0.6, 0.1, 0.2], [0.3, 0.2, 0.1, 0.4]
    pieces, ids = [b"a", b"b", b"c", b"a"], [7, 8, 9, 7]
    (r,) = examples.last_position_reading([p], pieces, ("a", "bc", "x"))
    assert r.positions == {"a": [0, 3], "bc": [1, 2], "x": []}
    assert r.shares == pytest.approx({"a": (0.3 + 0.7) / 2, "bc": (0.7 + 0.3) / 2, "x": 0.0})
    assert (r.top, r.weight) == (1, pytest.approx(0.4))
    text = str(examples.reading_sentence(r, ids, ["a", "b", "c", "a"], "bc", percent))
    # "bc" ties with "a": not more than each other word; the top key 1 follows an earlier "a" (the last token)
    assert "does not get the most here" in text and "40.00 %" in text and "position 1" in text
    assert "followed an earlier a (position 0)" in text


def _captions(at) -> list[str]:
    return [c.value.replace("\\", "") for c in at.caption]        # plain() escapes [ ] in token labels


@zh_ready
def test_the_seed_examples_claims_match_their_numbers():
    at = apptest("steps", ak_model=CHINESE_MODEL, ak_text=seeds.ZH_CAT, timeout=300).run()
    assert not at.exception, at.exception
    caps = _captions(at)
    food = next(d.value for d in at.dataframe if "word" in d.value.columns)
    assert list(food["positions"]) == ["1, 2", "4", "15"]           # 今天's 天 (13) is not 昨天's
    layers = [c for c in food.columns if c.startswith("layer ")]
    assert len(layers) == 2
    for layer, col in enumerate(layers):
        line = next(c for c in caps if c.startswith(f"Layer {layer}:"))
        shown = dict(zip(food["word"], food[col]))
        for word, value in shown.items():                           # the sentence quotes the table's numbers
            assert f"{word} {value}" in line, (line, shown)
        best = max(shown, key=lambda w: float(shown[w].split()[0]))
        assert ("the seed's picture holds" in line) == (best == "上海"), line
    preds = next(d.value for d in at.dataframe if "next token" in d.value.columns)
    assert not any("\\x" in tok for tok in preds["next token"])      # characters, not byte escapes
    note = next(c for c in caps if "is not expected to answer" in c)
    assert f"predicts {preds['next token'][0]} first ({preds['probability'][0]})" in note
    mask = next(c for c in caps if c.startswith("Under the causal mask"))
    assert any("reads the sentence as 5 tokens: 猫 | 坐 | 在 | 垫子 | 上" in c for c in caps)
    assert "猫 (position 0) cannot see 垫子 (position 3)" in mask and "(position 4) to 坐 (position 1)" in mask


def test_the_symmetry_verdict_and_kv_note_quote_the_tables():
    at = apptest("steps", timeout=300, st_kv_n=8).run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "diagonal share" in d.value.columns)
    verdict = next(x.value for x in at.markdown if "the diagonal" in x.value)
    xx, qk = table.iloc[0], table.iloc[1]
    assert f"{qk['diagonal share']:.3f}" in verdict and f"{xx['diagonal share']:.3f}" in verdict
    assert f"{qk['diagonal margin']:+.2f}" in verdict
    kept = qk["diagonal share"] >= xx["diagonal share"] and qk["diagonal margin"] >= xx["diagonal margin"]
    assert ("kept the diagonal" in verdict) == kept
    at.button(key="st_kv_go").click().run()
    assert not at.exception, at.exception
    summary = next(d.value for d in at.dataframe if "seconds, steps 1…" in d.value.columns)
    c, f = summary["seconds, steps 1…"]
    note = next(x.value for x in at.text if "with the cache and" in x.value)
    assert re.search(rf"took {c:.4f} s with the cache and {f:.4f} s without", note), note
    assert ("× faster" in note) == (c < f) and ("not faster" in note) == (c >= f)
