import torch

from attnkit.model import Trace
from attnkit.app import TraceCache


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
    c.get("huge", make("huge", 10))                    # bigger than the budget: kept alone
    assert list(c.items) == ["huge"] and c.bytes == 10 * 2**20
