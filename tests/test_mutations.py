"""Audit 6(b, c): the cases a planted bug could pass the quick suite by — ties broken by float noise in
Spearman's ρ, softmax without the max subtracted (scores large enough to overflow), path patching's
``--source mean`` averaged over the wrong axis (an independent reference)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit import patching as P
from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import path as PA
from attnkit.model import run
from test_circuits import _hf_patched_ld, _hf_sender_out      # the hand-hooked HF reference


def test_spearman_keeps_ties_that_float_noise_breaks():
    """Hand-computed: the first three cells are exact ties (0) in one and ±1e-9 noise in the other; with the
    ties kept the ranks agree exactly (ρ = 1); broken by the noise they would not."""
    a = [0.0, 0.0, 0.0, 1.0, 2.0]
    b = [1e-9, -1e-9, 0.0, 1.0, 2.0]
    assert AP.spearman(a, b) == pytest.approx(1.0, abs=1e-12)
    assert AP.spearman(a, b, tie_rel=0.0) < 0.98
    assert AP.rank([3.0, 1.0, 2.0]).tolist() == [3.0, 1.0, 2.0]
    assert AP.rank([1.0, 1.0 + 1e-7, 5.0], tol=1e-6).tolist() == [1.5, 1.5, 3.0]


def test_attention_with_huge_scores_stays_finite(odd):
    """Scores in the thousands (a query and key scaled ×1e4): a softmax that does not subtract the row's
    maximum overflows exp() to inf and gives NaN patterns; attnkit's must stay a distribution."""
    w = odd.weights
    big = w.layers[0]
    saved = big.W_Q.clone()
    try:
        big.W_Q.mul_(1e4)
        tr = run(w, list(range(1, 20)), capture=["pattern", "scores"])
    finally:
        big.W_Q.copy_(saved)
    scores, pat = tr["scores", 0], tr["pattern", 0]
    assert torch.isfinite(scores[torch.isfinite(scores)]).all() and scores[torch.isfinite(scores)].abs().max() > 100
    assert torch.isfinite(pat).all()
    assert torch.allclose(pat.sum(-1), torch.ones_like(pat.sum(-1)), atol=1e-5)


# (embed → L1H0.v was replaced by embed → logits: with the test checkpoints' nonzero biases the two averages move
# that value's LD by only 6e-5 on this pair, below the comparison's tolerance, so it could not tell them apart)
@pytest.mark.parametrize("sender, receiver", [("embed", "logits"), ("MLP0", "MLP1"), ("L1H4", "logits")])
def test_path_patching_mean_source_equals_hand_hooked_hf(odd, sender, receiver):
    """--source mean: the sender's output replaced, for the receiver only, by its mean over the receiving run's
    positions. Reference: HF modules' own outputs averaged over the positions axis by hand, fed to the
    receiver through HF forward hooks (tests/test_circuits.py's hand-hooked HF)."""
    pair = P.make_pair(odd, "The animal didn't cross the street because it was too tired.",
                       "The animal didn't cross the street because it was too tired!", ".", "!")
    cfg, hf, H = odd.config, odd.hf_model, odd.config.n_heads
    s, r = PA.parse_node(sender, cfg), PA.parse_node(receiver, cfg, "receiver")
    out = _hf_sender_out(hf, pair.corrupt, s, H)                                      # [T, d], receiving run
    delta = out.mean(0, keepdim=True) - out                                           # over positions
    want = _hf_patched_ld(hf, pair.corrupt, r, delta, pair.answer, pair.distractor, pair.pos, H)
    got = PA.path_map(odd.weights, pair, receiver, "denoise", source="mean", senders=[sender], mlps=True)
    assert got.raw[0] == pytest.approx(want, abs=2e-4)
    wrong = _hf_patched_ld(hf, pair.corrupt, r, out.mean(1, keepdim=True) - out, pair.answer, pair.distractor,
                           pair.pos, H)
    assert abs(wrong - want) > 1e-3            # the wrong axis is told apart on this pair
