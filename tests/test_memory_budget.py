"""Class 5 of the fourth hostile round: the server's memory beside the models is one stated budget
(attnkit/app/caches.py BUDGET: traces, results, jobs' results) that holds whatever the number of sessions."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnkit.app import caches, jobs
from helpers import ROOT, dashboard_sources


@dataclass
class _Result:
    maps: np.ndarray
    frame: pd.DataFrame
    extra: tuple


def test_sizeof_counts_what_a_result_holds():
    r = _Result(np.zeros((10, 10)), pd.DataFrame({"x": np.zeros(100)}), (torch.zeros(25), [np.ones(5)]))
    assert caches.sizeof(r) >= 800 + 800 + 100 + 40
    assert caches.sizeof(r) < 800 + 800 + 100 + 40 + 1000          # the frame's index and column names
    assert caches.sizeof(None) == 0


def test_many_sessions_results_stay_within_the_job_budget(monkeypatch):
    """Forty sessions each finishing a 1 MB result in two slots: the shared store never holds more than its
    budget (4 MB), each session's newest result is recalled while it fits, an evicted one reads as None (the
    page computes it again), and two sessions with the same inputs share one copy."""
    store = caches.TraceCache(4, sizeof=caches.sizeof)
    monkeypatch.setattr(jobs, "_SHARED", store)
    sessions = [{} for _ in range(40)]
    for i, results in enumerate(sessions):
        for slot in ("map", "curve"):
            jobs.remember(results, slot, ("prompt", i), np.full(2**17, i, dtype=np.float64), 1.0)   # 1 MB
            assert store.bytes <= store.budget
            assert jobs.recall(results, slot)[1][0] == i
    assert store.bytes <= 4 * 2**20 and len(store.items) == 3          # 1 MB and a few bytes of key each
    assert jobs.recall(sessions[0], "map") is None
    assert jobs.recall(sessions[-1], "map")[0] == ("prompt", 39)
    other = {}
    assert jobs.recall(other, "map", ("prompt", 39))[1][0] == 39 and other["map"] == ("prompt", 39)


def test_a_result_larger_than_the_budget_is_kept_alone(monkeypatch):
    store = caches.TraceCache(1, sizeof=caches.sizeof)
    monkeypatch.setattr(jobs, "_SHARED", store)
    a, b = {}, {}
    jobs.remember(a, "s", 1, np.zeros(2**16), 0.1)                # 0.5 MB
    jobs.remember(b, "s", 2, np.zeros(2**18), 0.1)                # 2 MB: alone
    assert list(store.items) == [("s", 2)] and jobs.recall(a, "s") is None
    jobs.remember(a, "s", 1, np.zeros(2**16), 0.1)
    assert list(store.items) == [("s", 1)] and store.bytes <= store.budget


def test_budget_is_stated_by_part():
    assert set(caches.BUDGET) == {"traces", "results", "job results"}
    assert caches.BUDGET["traces"] == caches.TRACE_CACHE_MB and caches._RESULTS.budget == caches.RESULT_CACHE_MB * 2**20
    assert jobs._SHARED.budget == caches.JOB_RESULTS_MB * 2**20


def test_a_bad_budget_in_the_environment_falls_back(monkeypatch):
    monkeypatch.setenv("ATTNKIT_TEST_MB", "lots")
    assert caches._mb("ATTNKIT_TEST_MB", 7.0) == 7.0
    monkeypatch.setenv("ATTNKIT_TEST_MB", "-1")
    assert caches._mb("ATTNKIT_TEST_MB", 7.0) == 7.0
    monkeypatch.setenv("ATTNKIT_TEST_MB", "64")
    assert caches._mb("ATTNKIT_TEST_MB", 7.0) == 64.0


def test_pages_memoised_functions_are_held_to_the_results_budget(monkeypatch):
    """The pages' memoised functions (once ``st.cache_data``, bounded by count) go into the shared results LRU:
    keyed by the function and its arguments (``_``-named ones left out, as st.cache_data does), computed once,
    and evicted by bytes, so 40 calls of 1 MB never hold more than the budget (4 MB)."""
    store = caches.TraceCache(4, sizeof=caches.sizeof)
    monkeypatch.setattr(caches, "_RESULTS", store)
    calls = []

    @caches.budgeted
    def page_result(model: str, ids: tuple, _weights) -> np.ndarray:
        calls.append(ids)
        return np.full(2**17, len(ids), dtype=np.float64)                  # 1 MB

    first = page_result("m", (1, 2), object())
    assert page_result("m", (1, 2), object()) is first and calls == [(1, 2)]   # _weights is not in the key
    page_result("m", [1, 2, 3], None)
    assert page_result("m", (1, 2, 3), None) is not None and len(calls) == 2   # a list and a tuple: one key
    for n in range(40):
        page_result("m", tuple(range(n + 4)), None)
        assert store.bytes <= store.budget
    assert len(store.items) <= 4


def test_no_page_caches_by_count():
    """No st.cache_data left in the pages and the app's modules: every cache is held by the byte budget."""
    found = [f"{p.relative_to(ROOT)}" for p in dashboard_sources()
             if "@st.cache_data" in p.read_text(encoding="utf-8")]
    assert not found, found
