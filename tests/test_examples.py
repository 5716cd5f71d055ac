"""Example pairs checked against the model: the verdict, the default per model, the page's warning."""
from __future__ import annotations

import pytest
import torch

from attnkit import examples as EX
from attnkit import patching as P
from helpers import apptest

REPEATED, IOI = "A repeated phrase", "Indirect object, names swapped"


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load("attnkit-tiny", "cpu")


def _hf_ld(hf, ids, a, d):
    with torch.no_grad():
        lg = hf(torch.tensor([ids])).logits[0, -1].double()
    return float(lg[a] - lg[d])


@pytest.mark.parametrize("clean,corrupt,margin,solved,says", [
    (2.0, -0.5, 1.0, True, None),
    (-2.33, -1.70, 1.0, False, "clean run does not prefer"),
    (1.0, 0.3, 0.5, False, "corrupted run also prefers"),
    (0.4, -0.2, 1.0, False, "gap is only +0.60"),
    (0.4, -0.2, 0.5, True, None),
])
def test_verdict_on_hand_made_logit_differences(clean, corrupt, margin, solved, says):
    c = EX.Check("x", clean, corrupt, margin=margin)
    assert c.solved is solved
    w = c.warning()
    assert (w is None) == solved and (says is None or says in w)
    assert c.label() == ("x" if solved else "x (not solved)")


def test_check_equals_hf_logit_difference_and_tiny_solves_the_repeated_phrase(tiny):
    checks = EX.check_examples(tiny)
    assert set(checks) == set(EX.EXAMPLES)
    for name, ex in EX.EXAMPLES.items():
        pr = P.make_pair(tiny, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])
        for ids, got in ((pr.clean, checks[name].clean_ld), (pr.corrupt, checks[name].corrupt_ld)):
            assert abs(_hf_ld(tiny.hf_model, ids, pr.answer, pr.distractor) - got) < 1e-3
    assert checks[REPEATED].solved and not checks[IOI].solved and checks[IOI].clean_ld < 0
    assert EX.pick_default("attnkit-tiny", checks) == REPEATED


def test_default_per_model_falls_back_to_a_solved_one():
    ok, bad = (lambda n: EX.Check(n, 3.0, -1.0)), (lambda n: EX.Check(n, -1.0, 0.0))
    checks = {IOI: ok(IOI), "other": ok("other"), REPEATED: bad(REPEATED)}
    assert EX.pick_default("gpt2", checks) == IOI
    assert EX.pick_default("/cache/models/gpt2", checks) == IOI
    assert EX.pick_default("attnkit-tiny", checks) == IOI           # preferred one unsolved: first solved
    assert EX.pick_default("attnkit-tiny", {REPEATED: bad(REPEATED)}) == REPEATED   # none solved: warned
    checks[IOI] = EX.Check(IOI, problem="This tokenizer cannot make the pair: …")
    assert not checks[IOI].solved and EX.pick_default("gpt2", checks) == "other"


def test_page_defaults_to_a_solved_example_and_warns_on_an_unsolved_one():
    at = apptest("effects").run()                  # the shipped attnkit-tiny
    assert not at.exception, at.exception
    assert at.selectbox(key="he_example").value == REPEATED
    assert not any("does not solve" in w.value for w in at.warning)
    opts = at.selectbox(key="he_example").options
    assert any(o.startswith(IOI) and "not solved" in o for o in opts)
    at.selectbox(key="he_example").set_value(IOI).run()
    assert not at.exception
    assert any("clean run does not prefer the answer" in w.value for w in at.warning)


def test_solved_examples_are_offered_first_and_the_default_is_solved():
    """Issue 44, item 3: Circuits opened attnkit-tiny on an example the app itself marked "(not solved)", and the
    Example list put two unsolved examples first. The order is solved first (a page's preferred one first among
    them), then unsolved, then those the tokenizer cannot make; the default is the first of that order."""
    swapped = "A repeated phrase, match swapped"
    ok, bad = (lambda n: EX.Check(n, 3.0, -1.0)), (lambda n: EX.Check(n, 5.0, 0.4))
    checks = {IOI: bad(IOI), "animal": bad("animal"), REPEATED: ok(REPEATED), swapped: bad(swapped)}
    assert EX.ordered("attnkit-tiny", checks, EX.CIRCUITS_PREFERRED) == [REPEATED, swapped, IOI, "animal"]
    assert EX.pick_default("attnkit-tiny", checks, EX.CIRCUITS_PREFERRED) == REPEATED      # preferred one unsolved
    checks[swapped] = ok(swapped)
    assert EX.ordered("attnkit-tiny", checks, EX.CIRCUITS_PREFERRED)[:2] == [swapped, REPEATED]
    checks[IOI] = EX.Check(IOI, problem="This tokenizer cannot make the pair: …")
    assert EX.ordered("attnkit-tiny", checks)[-1] == IOI and EX.ordered("attnkit-tiny", checks)[0] == REPEATED


def test_every_example_tiny_offers_first_on_either_pair_page_is_solved(tiny):
    """On the shipped model itself: the registry's swapped match is solved (the earlier "kernel source / module
    binary" swap was not: corrupted LD +0.44), and both pages' first examples are solved ones."""
    checks = EX.check_examples(tiny)
    assert checks["A repeated phrase, match swapped"].solved, checks["A repeated phrase, match swapped"]
    for preferred in (None, EX.CIRCUITS_PREFERRED):
        order = EX.ordered("attnkit-tiny", checks, preferred)
        n_solved = sum(c.solved for c in checks.values())
        assert all(checks[n].solved for n in order[:n_solved]) and not any(checks[n].solved for n in order[n_solved:])
    assert EX.pick_default("attnkit-tiny", checks, EX.CIRCUITS_PREFERRED) == "A repeated phrase, match swapped"


def test_the_chinese_model_gets_chinese_pairs_it_solves_first():
    """Issue 44: the pair examples stayed English on attnkit-tiny-zh. Its own Chinese pairs come first, it solves
    every one of them (a clean run for the answer, a corrupted one against it, a gap of at least MARGIN logits),
    and the default on it is one of them; the English pairs are still offered after them."""
    from attnkit.loading import CHINESE_MODEL, load

    zh = load(CHINESE_MODEL, "cpu")
    checks = EX.check_examples(zh)
    own = list(EX.CHINESE_EXAMPLES)
    assert list(checks)[: len(own)] == own and set(EX.EXAMPLES) <= set(checks)
    assert all(checks[n].solved for n in own), {n: (checks[n].clean_ld, checks[n].corrupt_ld) for n in own}
    assert all(any("\u4e00" <= c <= "\u9fff" for c in EX.CHINESE_EXAMPLES[n]["clean"]) for n in own)
    assert EX.pick_default(CHINESE_MODEL, checks) == own[0]
    assert EX.pick_default(CHINESE_MODEL, checks, EX.CIRCUITS_PREFERRED) in own
