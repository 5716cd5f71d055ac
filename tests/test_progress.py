"""attnkit.progress.Steps: the one counter behind every long analysis's progress(done, total)."""
from attnkit.progress import Steps


def test_steps_count_clamp_and_pieces():
    seen = []
    s = Steps(lambda d, t: seen.append((d, t)), 10, start=True)
    assert s.after("x") == "x"                     # one step, the value passed through
    s.add(3)
    inner = s.part(4)                              # a piece whose own count starts at 4 here
    inner(2, 99)                                   # its own total is ignored: the whole's is reported
    s.add(50)                                      # never past the total
    assert seen == [(0, 10), (1, 10), (4, 10), (6, 10), (10, 10)]


def test_steps_without_a_callback_do_nothing():
    s = Steps(None, 3)
    s.add()
    assert s.done == 1 and s.part(0) is None and s.hooks() == []
