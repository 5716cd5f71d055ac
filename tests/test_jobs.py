"""The job runner (attnkit/app/jobs.py): progress, Stop within 2 s on real library work, errors as one line,
the slots shared by every session; and the progress callbacks of the ablation functions it relies on."""
import threading
import time

import pytest
import torch

from attnkit import ablations as A
from attnkit.app import jobs as J
from helpers import make_checkpoint


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from attnkit.loading import load

    folder = make_checkpoint(tmp_path_factory.mktemp("jobs"), n_layer=4, n_head=8, n_embd=128,
                             n_positions=1024, vocab_size=1000)
    return load(str(folder), "cpu")


def long_ids(n=900, seed=0):
    return torch.randint(0, 1000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_progress_is_reported_and_result_kept():
    gate = threading.Event()

    def work(progress):
        for i in range(5):
            progress(i, 5)
            if i == 2:
                gate.wait(10)
        progress(5, 5)
        return "answer"

    j = J.Job("k", "Counting", work).start()
    wait_for(lambda: j.done == 2)
    assert j.alive and j.total == 5 and j.fraction == pytest.approx(0.4)
    assert "Counting · 2/5 ·" in j.status() and "elapsed" in j.status() and "left" in j.status()
    gate.set()
    j.join(10)
    assert j.state == "done" and j.result == "answer" and (j.done, j.total) == (5, 5) and j.remaining == 0


def test_an_exception_surfaces_as_one_line():
    def work(progress):
        raise ValueError("the prompt has no tokens\n  Traceback-like second line")

    j = J.Job("k", "Bad", work).start()
    j.join(10)
    assert j.state == "failed" and j.result is None
    assert j.error == "ValueError: the prompt has no tokens"


def test_stop_ends_a_real_head_sweep_within_2_s(model):
    ids = long_ids()
    j = J.Job("k", "Head map", lambda p: A.head_sweep(model.weights, [ids], "zero-head", p)).start()
    wait_for(lambda: j.done >= 2)               # in the middle of the map (32 forwards of 900 tokens)
    t0 = time.monotonic()
    assert j.stop(wait=2.0), "the job did not end within 2 s of Stop"
    assert time.monotonic() - t0 < 2.0
    assert j.state == "stopped" and j.result is None and j.done < j.total


def test_stop_ends_v_equals_x_within_2_s(model):
    ids = long_ids()
    j = J.Job("k", "V = X", lambda p: A.measure(model.weights, [ids], A.parse_spec("v=x"), progress=p)).start()
    wait_for(lambda: j.done >= 1)               # the baseline forward is done: in the ablated forward or hull
    t0 = time.monotonic()
    assert j.stop(wait=2.0)
    assert time.monotonic() - t0 < 2.0 and j.state == "stopped"


def test_jobs_beyond_the_slots_wait_their_turn():
    gate = threading.Event()
    blockers = [J.Job(i, "Blocker", lambda p: gate.wait(20)).start() for i in range(J.JOB_SLOTS)]
    wait_for(lambda: all(b.state == "running" for b in blockers))
    late = J.Job("late", "Late", lambda p: "ran").start()
    time.sleep(0.3)
    assert late.state == "waiting" and "waiting for a free slot" in late.status()
    gate.set()
    late.join(10)
    assert late.state == "done" and late.result == "ran"
    queued = J.Job("q", "Queued", lambda p: "never")
    gate2 = threading.Event()
    more = [J.Job(i, "Blocker", lambda p: gate2.wait(20)).start() for i in range(J.JOB_SLOTS)]
    wait_for(lambda: all(b.state == "running" for b in more))
    queued.start()
    assert queued.stop(wait=2.0) and queued.state == "stopped" and queued.result is None   # stopped while waiting
    gate2.set()


def test_measure_reports_every_step_and_stops_inside_a_forward(model):
    ids = long_ids(200)
    calls = []
    A.measure(model.weights, [ids, ids[:50]], A.parse_spec("v=x"), progress=lambda d, t: calls.append((d, t)))
    L = model.weights.config.n_layers
    assert {t for _, t in calls} == {2 * (L + 2)}
    assert calls[0][0] == 0 and calls[-1][0] == 2 * (L + 2)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)       # never goes back
    blocks = []

    def stop_at_second_block(done, total):
        blocks.append(done)
        if len(blocks) == 3:                    # the start, then two blocks of the baseline forward
            raise J.Stopped()

    with pytest.raises(J.Stopped):
        A.measure(model.weights, [ids], A.parse_spec("v=x"), progress=stop_at_second_block)
    assert blocks == [0, 0, 0]


@pytest.mark.parametrize("kind", ["v=x", "wk=wq", "no-scale", "no-mask"])
def test_each_layers_checks_report_progress(model, kind):
    """Stop is seen at the next progress call: every kind reports after each layer's mechanism checks (W_K =
    W_Q's took 3 s for all layers at once on attnkit-tiny at 902 tokens on a busy machine)."""
    calls = []
    A.measure(model.weights, [long_ids(60)], A.parse_spec(kind), progress=lambda d, t: calls.append(d))
    L = model.weights.config.n_layers
    assert sorted(set(calls)) == list(range(L + 3)), calls


def test_sweeps_report_progress_to_the_end(model):
    ids = long_ids(40)
    calls = []
    A.layer_sweep(model.weights, [ids], A.parse_spec("no-scale"), progress=lambda d, t: calls.append((d, t)))
    L = model.weights.config.n_layers
    assert calls[-1] == (L + 1, L + 1) and all(t == L + 1 for _, t in calls)
    assert J.one_line(KeyError("x")) == "KeyError: 'x'" and J.duration(185) == "3 min 05 s"


def test_streamlit_does_not_collect_garbage_after_every_poll():
    """Streamlit's gc.collect() after each script run (every 0.5 s progress poll included) holds the GIL
    0.1–0.4 s with torch loaded; a job with live progress then ran 5× slower (.streamlit/config.toml)."""
    import tomllib
    from pathlib import Path

    cfg = tomllib.loads((Path(__file__).parents[1] / ".streamlit" / "config.toml").read_text())
    assert cfg["runner"]["postScriptGC"] is False
