import torch

from attnkit.model import Trace
from attnkit.app import TraceCache
from attnkit.tolerances import TOL_HIDDEN_REL, TOL_LOGITS, TOL_PATTERN


def fake_trace(mb):
    return Trace(logits=torch.zeros(int(mb * 2**20) // 4))


def test_trace_cache_evicts_least_recently_used_by_bytes():
    c = TraceCache(budget_mb=3)
    made = []

    def make(k, mb):
        return lambda: made.append(k) or fake_trace(mb)

    a = c.get("a", make("a", 1))
    c.get("b", make("b", 1))
    assert c.get("a", make("a", 1)) is a               # a hit: not recomputed
    c.get("c", make("c", 1.5))                         # 3.5 MB > 3: evict the least recently used (b)
    assert list(c.items) == ["a", "c"] and made == ["a", "b", "c"]
    huge = c.get("huge", make("huge", 10))             # bigger than the whole budget: returned, not kept
    assert huge.logits.nbytes == 10 * 2**20 and "huge" not in c.items and c.bytes <= c.budget


def test_trace_cache_evicts_before_computing_when_told_the_size():
    c = TraceCache(budget_mb=3)
    c.get("a", lambda: fake_trace(1))
    c.get("b", lambda: fake_trace(1))
    seen = {}

    def make():
        seen["held"] = (list(c.items), c.bytes)          # what the cache holds while the new one is built
        return fake_trace(2)

    c.get("c", make, size=2 * 2**20)
    assert seen["held"] == (["b"], 2**20)                # a went first, so a, b and c never coexist
    assert list(c.items) == ["b", "c"] and c.bytes == 3 * 2**20 <= c.budget


def test_a_trace_over_the_budget_is_read_layer_by_layer_with_the_same_numbers(odd, monkeypatch):
    """The Heatmaps/Compare trace of a run too large for the cache: each layer from the cached residual stream,
    equal to the full run's capture; the cache stays within its budget."""
    from attnkit.app import caches
    from attnkit.model import run

    ids = list(range(1, 41))
    cfg = odd.weights.config
    full = run(odd.weights, ids, capture=["pattern", "scores"])
    layer_bytes = caches.trace_bytes(cfg, len(ids), ("pattern", "scores"), 1, logits=False)
    small = TraceCache(budget_mb=(caches.trace_bytes(cfg, len(ids), ("resid_pre",)) + 1.5 * layer_bytes) / 2**20)
    monkeypatch.setattr(caches, "_TRACES", small)

    class Ctx:
        model_name, device, model = "odd", "cpu", odd
    tr = caches.trace(Ctx(), capture=("pattern", "scores"), ids=ids)
    assert isinstance(tr, caches.LayerTrace)
    for l in range(cfg.n_layers):
        for name in ("pattern", "scores"):
            # the same block on the same input, resumed from the stored stream: equal to float noise
            torch.testing.assert_close(tr[name, l], full[name, l], rtol=TOL_HIDDEN_REL, atol=TOL_PATTERN)
        assert small.bytes <= small.budget
    torch.testing.assert_close(tr.logits, full.logits, rtol=0, atol=TOL_LOGITS)
