"""Class 8's library part: the cost of each long Circuits computation from the model's shape before it
starts, exact patching on the top edges by default (every edge on request), and an answer token that is not
one token named in the 猫[1/2] form."""
from __future__ import annotations

import numpy as np
import pytest

from attnkit import patching as P
from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import cost
from attnkit.standard import ModelConfig

CLEAN = "Install the kernel source and the module binary. Install the kernel"
CORRUPT = "Install the module source and the kernel binary. Install the kernel"


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load("attnkit-tiny", "cpu")


def test_forward_flops_by_hand():
    cfg = ModelConfig(n_layers=2, n_heads=4, d_model=64, n_ctx=128, d_vocab=1000, d_mlp=256)
    blocks = 2 * (64 * 4 * 16 * 2 + 64 * 4 * 16 * 2 + 64 * 256 * 2)          # Q, O; K, V; MLP in and out
    assert cost.forward_flops(cfg, 10) == 2 * blocks * 10 + 4 * 2 * 100 * 64 + 2 * 64 * 1000 * 10
    assert cost.forward_flops(cfg, 10, logits=False) == 2 * blocks * 10 + 4 * 2 * 100 * 64


def test_estimates_follow_the_work(tiny):
    cfg = tiny.config
    top, full = cost.exact_cost(cfg, 16, rate=1e9), cost.exact_cost(cfg, 16, top=None, rate=1e9)
    assert top.seconds < full.seconds and "top 200 edges" in top.text() and "every edge" in full.text()
    one, five = cost.discovery_cost(cfg, 16, 1, rate=1e9), cost.discovery_cost(cfg, 16, 5, rate=1e9)
    assert five.seconds == pytest.approx(5 * one.seconds)
    assert cost.discovery_cost(cfg, 16, steps=1, rate=1e9).seconds < one.seconds
    assert cost.path_map_cost(cfg, 16, 10, rate=2e9).seconds == pytest.approx(
        cost.path_map_cost(cfg, 16, 10, rate=1e9).seconds / 2)
    small = ModelConfig(n_layers=12, n_heads=12, d_model=768, n_ctx=1024, d_vocab=50257, d_mlp=3072)
    assert cost.composition_cost(small).seconds > 10 * cost.composition_cost(cfg).seconds
    assert cost.measured_rate(tiny.weights) > 1e6


def test_exact_comparison_on_the_top_edges_by_default(tiny):
    pair = P.make_pair(tiny, CLEAN, CORRUPT, " source", " binary")
    ea = AP.edge_attribution(tiny.weights, pair, "noise", exact=True, exact_top=5)
    done = np.isfinite(ea.exact)
    assert done.sum() == 5
    est = np.where(np.isfinite(ea.scores), np.abs(ea.scores), -1)
    assert set(np.flatnonzero(done)) == set(np.argsort(-est, axis=None)[:5])
    assert any("5 edges of largest |estimate|" in n for n in ea.notes)
    assert AP.exact_edge_count(tiny.config) == AP.EXACT_TOP
    assert AP.exact_edge_count(tiny.config, top=None) == int(np.isfinite(ea.scores).sum())


def test_a_split_character_answer_is_named_as_on_the_pages(tiny):
    with pytest.raises(P.PatchError) as e:
        P.resolve_token(tiny, "猫")
    assert "猫[1/2] + 猫[2/2]" in str(e.value) and "\\x" not in str(e.value)
