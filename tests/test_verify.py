"""Verify's float64 rule: attnkit passes where it is as close to the exact answer as HuggingFace is, and a
deliberately wrong formula fails at every length."""
import math

import pytest
import torch

from attnkit import tolerances as TOL
from attnkit import verify as V
from attnkit.loading import SHIPPED, SHIPPED_MODEL, load
from attnkit.model import Intervention

needs_shipped = pytest.mark.skipif(not (SHIPPED[SHIPPED_MODEL] / "model.safetensors").exists(),
                                   reason="the shipped model is not present")


class NoScale(Intervention):
    """Scores without the 1/√d factor in the chosen layers (a wrong formula)."""

    def __init__(self, layers, cfg):
        super().__init__(layers)
        self.cfg = cfg

    def hooks(self):
        return [("scores", lambda s, l: s / self.cfg.attn_scale(l) if self.on(l) else None)]


class MaskShift(Intervention):
    """The causal mask shifted by one key: query i also sees key i + 1 (a wrong formula)."""

    def hooks(self):
        def shift(m, l):
            if not self.on(l):
                return None
            m = m.roll(1, dims=-1).clone()
            m[..., 0] = 0
            return m
        return [("mask", shift)]


def ids(n, vocab, seed=0):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def tiny():
    return load(SHIPPED_MODEL, "cpu")


def test_verdict_rule_on_hand_numbers():
    assert TOL.allowed(0.0) == TOL.FLOOR and TOL.allowed(1e-5) == pytest.approx(TOL.FACTOR * 1e-5 + TOL.FLOOR)
    assert TOL.verdict(1e-5, 1e-5) and TOL.verdict(TOL.FLOOR, 0.0)
    assert not TOL.verdict(TOL.FACTOR * 1e-4 + TOL.FLOOR * 1.01, 1e-4)
    assert not TOL.verdict(math.nan, 1e-5) and not TOL.verdict(1e-6, math.inf)
    assert TOL.verdict(3e-4, 1e-4, factor=3, floor=0) and not TOL.verdict(3e-4, 1e-4, factor=2, floor=0)
    assert str(TOL.FACTOR).rstrip("0").rstrip(".") in TOL.RULE and f"{TOL.TOL_F64:g}" in TOL.RULE


@pytest.mark.parametrize("T", [8, 64, 256])
def test_wrong_formula_fails_at_every_length(odd, T):
    x = ids(T, odd.config.d_vocab, T)
    pair = V.float64_pair(odd.hf_model, odd.weights)
    good = V.compare(odd.hf_model, odd.weights, x, pair=pair)
    assert good.ok, good.table()
    assert max(c.f64 for _, c in good.all_checks()) <= TOL.TOL_F64
    for wrong in (NoScale([2], odd.config), MaskShift([0])):
        rep = V.compare(odd.hf_model, odd.weights, x, intervention=wrong, pair=pair)
        assert not rep.ok and "a formula differs" in rep.verdict_text(), rep.table()
        assert max(c.f64 for _, c in rep.all_checks()) > 1e3 * TOL.TOL_F64     # the float64 check alone fails
        bad = [w for w, c in rep.all_checks() if not c.ok]
        assert bad[-1] == "final"                                               # the logits are wrong too


@needs_shipped
@pytest.mark.slow
def test_shipped_model_at_full_context(tiny, capsys):
    """attnkit-tiny at 1,024 tokens: the direct float32 difference exceeds the old fixed tolerances, yet
    attnkit is as close to float64 HF as HF float32 is; a wrong formula in any one layer still fails."""
    from attnkit.cli import main

    assert main(["verify", "--model", SHIPPED_MODEL, "--tokens", "1024", "--generate", "0"]) == 0
    out = capsys.readouterr().out
    assert "attnkit f32" in out and "HF f32" in out and "f64 vs f64" in out
    assert "PASS — attnkit is as close to the exact answer as HuggingFace itself is" in out
    x = ids(1024, tiny.config.d_vocab)        # the CLI's --tokens 1024 --seed 0
    pair = V.float64_pair(tiny.hf_model, tiny.weights)
    wrong = [MaskShift([1]), NoScale([3], tiny.config)]       # two wrong formulas, one run (the suite's time)
    rep = V.compare(tiny.hf_model, tiny.weights, x, pair=pair, intervention=wrong)
    assert not rep.ok and rep.layers[0].ok and "a formula differs" in rep.verdict_text()
    assert not rep.layers[1].pattern.ok and not rep.layers[3].pattern.ok and not rep.logits.ok


def test_reference_on_fewer_tokens_when_memory_is_short(odd):
    cfg, n_params = odd.config, sum(p.numel() for p in odd.hf_model.parameters())
    full = V.reference_bytes(cfg, n_params, 200)
    assert V.reference_tokens(cfg, n_params, 200, available=2 * full) == (200, "")
    n, note = V.reference_tokens(cfg, n_params, 200, available=full)          # half of it is the budget
    assert 1 <= n < 200 and V.reference_bytes(cfg, n_params, n) <= full // 2
    assert f"first {n} of 200 tokens" in note and "GiB" in note
    rep = V.compare(odd.hf_model, odd.weights, ids(200, cfg.d_vocab), available=full)
    assert rep.n_tokens == 200 and rep.reference["n_tokens"] == n and rep.reference["note"] == note
    assert rep.ok and note in rep.table()


def test_generation_step_logits_against_float64(odd):
    g = V.compare_generation(odd.hf_model, odd.weights, ids(12, odd.config.d_vocab), 5)
    s = g.step_logits
    assert g.ok and s.ok and s.f64 <= TOL.TOL_F64 and 0 < s.hf and s.ours <= s.allowed
    assert "step logits error vs float64" in g.line()


class _Stop(BaseException):
    """Stands for the dashboard's jobs.Stopped (raised by a job's progress callback once Stop is pressed)."""


def test_verify_reports_progress_per_run_and_stops_between_runs(odd):
    """compare counts its five runs and compare_generation its four (the Verify page's job shows them);
    a progress call that raises ends the verification there."""
    x = ids(10, odd.config.d_vocab)
    seen = []
    rep = V.compare(odd.hf_model, odd.weights, x, progress=lambda d, n: seen.append((d, n)))
    assert seen == [(k, 5) for k in range(1, 6)] and rep.ok
    seen.clear()
    V.compare_generation(odd.hf_model, odd.weights, x, 3, progress=lambda d, n: seen.append((d, n)))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (4, 4) and {n for _, n in seen} == {4}

    def stop(d, n):
        seen.append(d)
        raise _Stop
    seen.clear()
    with pytest.raises(_Stop):
        V.compare(odd.hf_model, odd.weights, x, progress=stop)
    assert seen == [1]


def test_as_dtype_copies_without_touching_the_model(odd):
    w64 = V.as_dtype(odd.weights)
    assert w64.dtype == torch.float64 and odd.weights.dtype == torch.float32
    assert w64.layers[1].W_Q.dtype == torch.float64 and w64.layers[1].W_Q.data_ptr() != odd.weights.layers[1].W_Q.data_ptr()
    torch.testing.assert_close(w64.layers[1].W_Q.float(), odd.weights.layers[1].W_Q, rtol=0, atol=0)


def test_float64_copy_from_the_state_dict_equals_the_deep_copy(odd):
    """The path a CUDA model takes (rebuilt on the CPU from its state dict) gives the same float64 model."""
    a, b = V._hf_float64(odd.hf_model, copy_tensors=False), V._hf_float64(odd.hf_model, copy_tensors=True)
    x = ids(16, odd.config.d_vocab)[None]
    with torch.inference_mode():
        la, lb = a(x).logits, b(x).logits
    assert la.dtype == torch.float64 and torch.equal(la, lb) and next(odd.hf_model.parameters()).dtype == torch.float32
