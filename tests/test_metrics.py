import math

import numpy as np
import pytest
import torch

from attnkit.metrics import entropy, head_scores, induction_on_text, induction_scores, normalised_entropy


def uniform_causal(T):
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]


def test_uniform_is_one_and_onehot_is_zero():
    T = 9
    h = normalised_entropy(uniform_causal(T), window=None)
    assert math.isnan(h[0])
    torch.testing.assert_close(h[1:], torch.ones(T - 1), rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy(uniform_causal(T)), torch.log(torch.arange(1, T + 1.0)), rtol=0, atol=1e-6)
    onehot = torch.eye(T)
    assert (normalised_entropy(onehot, window=None)[1:] == 0).all() and (entropy(onehot) == 0).all()


def test_head_scores_on_hand_made_patterns():
    T = 6
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1
    s = head_scores(prev, window=None)
    assert s["previous-token"] == 1 and s["self"] == 0 and s["mean distance"] == 5 / 6
    sink = torch.zeros(T, T)
    sink[:, 0] = 1
    s = head_scores(sink, window=None)
    assert s["first-token"] == 1 and s["previous-token"] == 1 / 5   # only query 1's previous token is 0


def test_duplicate_and_induction_on_text():
    ids = [5, 7, 9, 5, 7]   # A B C A B: at position 3 (A) an induction head looks at 1 (B)
    p = torch.zeros(5, 5)
    p[torch.arange(5), torch.arange(5)] = 1
    p[3] = 0
    p[3, 1] = 1
    p[4] = 0
    p[4, 2] = 1     # position 4 (B): the token after the earlier B is C at 2
    assert induction_on_text(p, ids) == 1
    s = head_scores(p, ids, window=None)
    assert s["duplicate-token"] == 0 and s["induction"] == 1


def test_induction_scores_shape(odd):
    sc = induction_scores(odd.weights, n=20, batch=2)
    assert sc.shape == (3, 6) and ((sc >= 0) & (sc <= 1)).all()


def test_heads_cli(odd_dir, capsys):
    from attnkit.cli import main

    assert main(["heads", "--model", str(odd_dir), "--top", "3", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "best heads by previous-token" in out and "| layer | head | previous-token |" in out
    assert main(["heads", "--model", str(odd_dir / "missing")]) == 2
    # the odd model has 256 positions: n = 500 cannot be repeated inside it, and the output says what was used
    assert main(["heads", "--model", str(odd_dir), "--induction-n", "500", "--top", "1"]) == 0
    assert "--induction-n 500 shrunk to 128" in capsys.readouterr().out


def test_induction_scores_tl_recipe(odd, monkeypatch):
    """TransformerLens's recipe: BOS + n random tokens twice, mean over the whole diagonal at −(n−1)."""
    from attnkit import metrics, model

    sc = metrics.induction_scores_tl(odd.weights, bos_id=0, n=20, batch=2)
    assert sc.shape == (3, 6) and ((sc >= 0) & (sc <= 1)).all()

    n = 10
    T = 2 * n + 1
    perfect = torch.eye(T)                       # first copy: each token on itself
    for i in range(n + 1, T):                    # second copy: on the token after the earlier copy
        perfect[i] = 0
        perfect[i, i - n + 1] = 1

    class FakeTrace:
        def stack(self, name):
            return perfect.expand(1, 2, 1, T, T)

    seen = {}

    def fake_run(weights, ids, capture):
        seen["ids"] = ids
        return FakeTrace()

    monkeypatch.setattr(metrics, "run", fake_run)          # metrics imports run at its top
    sc = metrics.induction_scores_tl(odd.weights, bos_id=7, n=n, batch=2)
    assert (seen["ids"][:, 0] == 7).all() and (seen["ids"][:, 1:n + 1] == seen["ids"][:, n + 1:]).all()
    assert float(sc[0, 0]) == pytest.approx(n / (n + 2))     # 2 of the n + 2 diagonal cells precede the repeat


# ----------------------------------------------------------------------------- windows: one definition

def test_windowed_bound_by_hand():
    """T = 4, window w = 2, attention uniform over the visible keys: every row i ≥ 1 is uniform over
    min(i + 1, 2) = 2 keys, so H_i = ln 2 and the normalised entropy is 1. Divided by ln(i + 1) instead
    (the causal bound), rows 2 and 3 would read ln 2 / ln 3 and ln 2 / ln 4 = 0.5."""
    from attnkit.metrics import visible_keys

    p = torch.tensor([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]])
    assert visible_keys(5, 3).tolist() == [1, 2, 3, 3, 3] and visible_keys(2, 3, S=6).tolist() == [3, 3]
    h = normalised_entropy(p, window=2)
    assert math.isnan(h[0]) and torch.allclose(h[1:], torch.ones(3), atol=1e-6)
    causal = normalised_entropy(p, window=None)
    assert causal[2] == pytest.approx(math.log(2) / math.log(3)) and causal[3] == pytest.approx(0.5)
    assert head_scores(p, window=2)["mean entropy"] == pytest.approx(1.0)
    assert head_scores(p, window=None)["mean entropy"] == pytest.approx((1 + math.log(2) / math.log(3) + 0.5) / 3)
    # stacked layers [L, H, T, T]: one window per layer
    both = head_scores(torch.stack([p, p])[:, None], window=(None, 2))["mean entropy"]
    assert both[0, 0] == pytest.approx((1 + math.log(2) / math.log(3) + 0.5) / 3) and both[1, 0] == pytest.approx(1)


def test_head_scores_require_the_windows():
    """No silent causal default: a statistic of a model's patterns takes the windows explicitly (the model's
    config, one per layer, or None for a causal layer); a wrong count of windows is refused."""
    p = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5.0)[:, None]
    with pytest.raises(TypeError, match="window"):
        head_scores(p)
    with pytest.raises(TypeError, match="window"):
        normalised_entropy(p)
    with pytest.raises(ValueError, match="3 windows for 2 stacked layers"):
        head_scores(torch.stack([p, p])[:, None], window=(None, 2, 2))


WINDOWED = {   # small widths, a window of 8 keys, T = 40 tokens: every windowed row past 8 is exercised
    "gpt-neo": ("gpt-neo-125m", dict(hidden_size=64, num_heads=4, window_size=8)),
    "mistral": ("mistral-window", dict(sliding_window=8)),
    "qwen2": ("qwen2.5-0.5b", dict(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                                   num_key_value_heads=2, use_sliding_window=True, sliding_window=8,
                                   max_window_layers=1)),
}


@pytest.mark.parametrize("family", list(WINDOWED))
def test_streaming_and_full_pattern_agree_on_windowed_layers(family, tmp_path):
    """The streaming form (StreamStats.head_scores) and the full-pattern form (head_scores with the layers'
    windows) of every statistic agree on a windowed checkpoint; normalised entropy to 1e-5."""
    from helpers import make_family_checkpoint

    from attnkit.loading import load
    from attnkit.model import run
    from attnkit.streaming import stream_stats

    shape, overrides = WINDOWED[family]
    m = load(str(make_family_checkpoint(tmp_path / family, shape, **overrides)), "cpu")
    windows = m.config.windows
    assert any(w == 8 for w in windows), windows
    ids = torch.randint(0, 400, (40,), generator=torch.Generator().manual_seed(1))
    pats = run(m.weights, ids, capture=["pattern"]).stack("pattern")[:, 0]            # [L, H, T, T]
    full = head_scores(pats, ids, window=m.config)       # the windows taken from the model
    streamed = {k: v[:, 0] for k, v in stream_stats(m.weights, ids).head_scores().items()}
    assert set(streamed) == {"mean entropy", "previous-token", "first-token", "self", "mean distance"}
    for name, v in streamed.items():
        torch.testing.assert_close(v.double(), full[name].double(), rtol=0, atol=1e-5 if name != "mean distance" else 1e-4)
    # the windowed layers really differ from the causal bound (the test could fail)
    causal = head_scores(pats, ids, window=None)["mean entropy"]
    wl = [l for l, w in enumerate(windows) if w]
    assert (causal[wl] - full["mean entropy"][wl]).abs().max() > 0.05


# ----------------------------------------------------------------------------- a new statistic: one class

@pytest.fixture
def toy_statistic():
    """Register a toy statistic (one class + one registration line), and remove it afterwards."""
    from attnkit.metrics import HEAD_STATS, STATISTICS, HeadStatistic, register

    @register
    class SinkOrSelf(HeadStatistic):
        name = "sink or self"
        description = "mean over i ≥ 1 of a_i0 + a_ii"

        def full(self, p, ids, visible):
            return (p[..., 0] + torch.diagonal(p, dim1=-2, dim2=-1))[..., 1:].mean(-1)

        def streamed(self, st):
            return (st.first_token + st.self_mass)[..., 1:].mean(-1)

    yield SinkOrSelf.name
    STATISTICS.pop(SinkOrSelf.name)
    HEAD_STATS.pop(SinkOrSelf.name)


def test_a_registered_statistic_reaches_scores_streaming_and_the_cli(toy_statistic, odd, odd_dir, capsys):
    from attnkit.cli import main
    from attnkit.model import run
    from attnkit.streaming import stream_stats

    ids = odd.encode("The cat sat on the mat and the cat sat again.")
    pats = run(odd.weights, ids, capture=["pattern"]).stack("pattern")[:, 0]
    sc = head_scores(pats, ids, window=odd.config)
    torch.testing.assert_close(sc[toy_statistic], sc["first-token"] + sc["self"], rtol=0, atol=1e-6)
    st = stream_stats(odd.weights, ids).head_scores()
    torch.testing.assert_close(st[toy_statistic][:, 0], sc[toy_statistic], rtol=0, atol=1e-5)
    assert main(["heads", "--model", str(odd_dir), "--top", "2"]) == 0
    assert f"best heads by {toy_statistic}" in capsys.readouterr().out


def test_a_registered_statistic_is_in_the_compare_overview(toy_statistic, odd_dir):
    from helpers import apptest

    at = apptest("compare", odd_dir, text="A toy statistic shows up in Compare's overview.",
                 cmp_stat=toy_statistic).run()
    assert not at.exception and not at.error
    assert toy_statistic in at.selectbox(key="cmp_stat").options
    assert any("a_i0 + a_ii" in c.value for c in at.caption)


def test_a_registered_statistic_reaches_a_corpus_run(toy_statistic, tmp_path):
    """The corpus's heads table takes its columns from the registry when the run starts: the toy statistic
    gets a column, equal to first-token + self computed by the same run."""
    import json

    import pandas as pd

    from attnkit import corpus as C

    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"text": t}) for t in
                              ["The cat sat on the mat and the cat sat again.", "A dog ran in the park today."]) + "\n")
    rep = C.run_corpus(docs, tmp_path / "out", model="attnkit-tiny", analyses=("heads",), window=16, batch=2,
                       shard_docs=2, bootstrap=20)
    assert rep.docs == 2
    heads = pd.read_parquet(tmp_path / "out" / "heads")
    assert toy_statistic in heads.columns
    np.testing.assert_allclose(heads[toy_statistic], heads["first-token"] + heads["self"], rtol=0, atol=1e-6)


def test_entropy_summaries_use_the_window_too(tmp_path):
    """The Entropy page's numbers (entropy.profile_documents -> Summary.normalised, DocCurves.normalised) divide
    by the same ln(min(i + 1, w)) as metrics.normalised_entropy."""
    from helpers import make_family_checkpoint

    from attnkit import entropy as E
    from attnkit.loading import load
    from attnkit.model import run

    shape, overrides = WINDOWED["gpt-neo"]
    m = load(str(make_family_checkpoint(tmp_path / "neo", shape, **overrides)), "cpu")
    ids = torch.randint(0, 400, (30,), generator=torch.Generator().manual_seed(2))
    want = normalised_entropy(run(m.weights, ids, capture=["pattern"]).stack("pattern")[:, 0].double(),
                              window=m.config.windows)                                  # [L, H, T]
    s = E.profile_documents(m.weights, [ids.tolist()])
    H = m.config.n_heads
    np.testing.assert_allclose(s.normalised()[:, :H, 1:], want[..., 1:].numpy(), rtol=0, atol=1e-5)
    curves = E.entropy_profile(m.weights, ids)
    torch.testing.assert_close(curves.normalised[0, :, :, 1:].double(), want[..., 1:], rtol=0, atol=1e-5)
    assert s.layer_bound(1)[-1] == pytest.approx(math.log(8)) and s.layer_bound(0)[-1] == pytest.approx(math.log(30))
