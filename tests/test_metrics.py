import math

import pytest
import torch

from attnkit.metrics import entropy, head_scores, induction_on_text, induction_scores, normalised_entropy


def uniform_causal(T):
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]


def test_uniform_is_one_and_onehot_is_zero():
    T = 9
    h = normalised_entropy(uniform_causal(T))
    assert math.isnan(h[0])
    torch.testing.assert_close(h[1:], torch.ones(T - 1), rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy(uniform_causal(T)), torch.log(torch.arange(1, T + 1.0)), rtol=0, atol=1e-6)
    onehot = torch.eye(T)
    assert (normalised_entropy(onehot)[1:] == 0).all() and (entropy(onehot) == 0).all()


def test_head_scores_on_hand_made_patterns():
    T = 6
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1
    s = head_scores(prev)
    assert s["previous-token"] == 1 and s["self"] == 0 and s["mean distance"] == 5 / 6
    sink = torch.zeros(T, T)
    sink[:, 0] = 1
    s = head_scores(sink)
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
    s = head_scores(p, ids)
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
