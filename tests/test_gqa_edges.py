"""Audit 6(a): under grouped-query attention every key/value edge is listed once (a group of query heads shares
one key/value head), so edge attribution's completeness holds on a GQA Llama and discovery's circuits drop
the shared key/value edge as one edge."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit import patching as P
from attnkit.circuits import attribution_patching as AP
from attnkit.circuits import discover as DI
from attnkit.circuits import path as PA
from attnkit.verify import as_dtype
from helpers import make_family_checkpoint

CLEAN = "Attention lets every token look back at the tokens before it."
CORRUPT = "Attention lets every token look back at the street before it."


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from attnkit.loading import load

    folder = make_family_checkpoint(tmp_path_factory.mktemp("gqa-8-2"), "smollm2-135m", hidden_size=64,
                                    intermediate_size=128, num_attention_heads=8, num_key_value_heads=2, head_dim=8)
    m = load(str(folder), "cpu")
    assert (m.config.n_heads, m.config.n_kv_heads) == (8, 2)
    return m


@pytest.fixture(scope="module")
def pair(llama):
    ids = llama.encode(CLEAN)
    vocab = sorted(set(range(5, 300)) - set(ids))
    return P.make_pair(llama, CLEAN, CORRUPT, llama.tokenizer.decode([vocab[0]]),
                       llama.tokenizer.decode([vocab[1]]))


def test_every_key_value_edge_is_listed_once(llama):
    cfg = llama.config
    R = PA.receiver_names(cfg)
    assert len(R) == len(set(R))
    for l in range(cfg.n_layers):
        assert sum(r.startswith(f"L{l}H") and r.endswith(".q") for r in R) == 8
        assert [r for r in R if r.startswith(f"L{l}H") and r.endswith(".k")] == [f"L{l}H0.k", f"L{l}H4.k"]


def test_integrated_edge_attribution_is_complete_under_gqa(llama, pair):
    """Σ over the embedding's edges of EAP-IG (16 points, float64) = LD(corrupted) − LD(clean), within the
    0.5 % it has on GPT-2 (tests/test_circuits.py); with each k/v edge counted once per query head it was
    off by the group's factor on the k/v part."""
    w64 = as_dtype(llama.weights)
    runs = PA.cache_runs(w64, pair)
    gap = runs.corrupt_ld - runs.clean_ld
    assert abs(gap) > 1e-3
    ea = AP.edge_attribution(w64, pair, "noise", steps=16, runs=runs)
    assert len(ea.receivers) == len(set(ea.receivers))
    assert np.nansum(ea.scores[ea.senders.index("embed")]) == pytest.approx(gap, rel=5e-3)


def test_discovery_drops_a_shared_key_value_edge_as_one_edge(llama, pair):
    """A circuit with every edge but one (embed → a shared key head) kept, resample-ablated, gives the exact
    path-patched value of that edge; all kept gives the clean run."""
    w64 = as_dtype(llama.weights)
    runs = PA.cache_runs(w64, pair)
    cfg = w64.config
    S = [PA.parse_node(n, cfg) for n in PA.sender_names(cfg, True)]
    R = [PA.parse_node(n, cfg, "receiver") for n in PA.receiver_names(cfg, True)]
    abl = DI.ablated_outputs(runs, S, "resample")
    keep = torch.ones((3, len(S), len(R)), dtype=torch.bool)
    edges = [(("embed",), ("k", 1, 4)), (("head", 0, 5), ("v", 1, 0))]
    for b, (s, r) in enumerate(edges, 1):
        keep[b, S.index(s), R.index(r)] = False
    got = DI.circuit_logit_diffs(runs, S, R, keep, abl)
    want = PA.edge_effects(runs, edges, "noise")
    assert got[0] == pytest.approx(runs.clean_ld, abs=1e-9)
    assert got[1:] == pytest.approx(want, abs=1e-9)
    assert abs(got[1] - runs.clean_ld) > 1e-6
    c = DI.discover(llama.weights, pair, 0.8, steps=2, points=6, refine=0)
    assert len({(s, r) for s, r, _ in c.ranked}) == len(c.ranked)
