"""Issue 44, item 6: head statistics and composition scores were presented as if they named a head's role. Every
ranking now says it measures the pattern or the weights, not an effect, and a ranked head's effect is one click
away: Compare heads' "Check its effect" opens Head effects' activation patching on the same prompt, with a corrupted
prompt built for that head (:func:`attnkit.examples.effect_pair`) and the head selected.

On planted-induction the distractor L1H2 attends to itself (a perfectly sharp pattern) and writes only into a
subspace nobody reads: by its pattern a role, by its effect none — what the effect check has to show."""
from __future__ import annotations

import pytest
import torch

from attnkit import examples as EX
from attnkit import metrics
from attnkit import patching as P
from attnkit.cli import main
from attnkit.loading import load
from attnkit.model import run
from helpers import apptest

MODEL = "planted-induction"
TEXT = EX.texts(next(iter(EX.MODEL_EXAMPLES[MODEL])))["clean"]


@pytest.fixture(scope="module")
def planted():
    return load(MODEL, "cpu")


def _hf_top_key(model, ids, layer, head) -> int:
    with torch.no_grad():
        att = model.hf_model(torch.tensor([ids]), output_attentions=True).attentions[layer][0, head, -1]
    return int(att.argmax())


@pytest.mark.parametrize("layer,head", [(1, 0), (1, 2), (0, 0)])
def test_the_pair_replaces_the_token_the_head_attends_to_most(planted, layer, head):
    got = EX.effect_pair(planted, TEXT, layer, head)
    assert got.example is None and got.texts["clean"] == TEXT
    clean, corrupt = planted.encode(TEXT), planted.encode(got.texts["corrupt"])
    differ = [i for i in range(len(clean)) if clean[i] != corrupt[i]]
    assert len(clean) == len(corrupt) and differ == [_hf_top_key(planted, clean, layer, head)]
    with torch.no_grad():
        top = int(planted.hf_model(torch.tensor([clean])).logits[0, -1].argmax())
    assert planted.encode(got.texts["answer"]) == [top] and got.texts["answer"] != got.texts["distractor"]


def test_a_sharp_pattern_without_an_effect_is_told_apart_by_patching(planted):
    """L1H2 (self-attention distractor) has a sharper pattern than the induction head, whose role it is not; on
    the pairs built for each, patching moves the logit difference by ≈ the whole gap for L1H0 and by nothing for
    L1H2."""
    ids = planted.encode(TEXT)
    pats = run(planted.weights, torch.tensor([ids]), capture=["pattern"]).stack("pattern")[:, 0]   # [L, H, T, T]
    self_mass = metrics.diagonal_mass(pats, 0)[..., 1:].mean(-1)                                    # [L, H]
    assert self_mass[1, 2] > 0.99 and self_mass[1, 2] > self_mass[1, 0]
    effect = {}
    for head in (0, 2):
        t = EX.effect_pair(planted, TEXT, 1, head).texts
        res = P.patch(planted.weights, P.make_pair(planted, t["clean"], t["corrupt"], t["answer"], t["distractor"]),
                      "z", direction="noise")
        effect[head] = float(res.normalised[1, head])
    assert effect[0] < 0.2 and abs(1 - effect[2]) < 0.01        # noise: 1 = unchanged clean run, 0 = corrupted


def test_a_text_too_short_to_corrupt_gets_the_registrys_pair(planted):
    got = EX.effect_pair(planted, "t3", 1, 0)
    assert got.example == EX.pick_default(MODEL, EX.check_examples(planted))
    assert got.texts == EX.texts(got.example) and EX.matching_example(got.texts) == got.example


def test_compare_says_what_it_ranks_and_opens_the_effect_check_on_head_effects(planted):
    at = apptest("compare", text=TEXT, ak_model=MODEL).run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("These rank where each head looks") for c in at.caption)
    assert any(c.value.startswith("Attention weights (where each head looks") for c in at.caption)
    head = at.session_state["cmp_open"][0]
    at.button(key=f"cmp_effect_{head}").click().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Head effects"]
    built = EX.effect_pair(planted, TEXT, *map(int, head[1:].split("H")))
    ss = at.session_state
    assert (ss["he_clean"], ss["he_corrupt"], ss["he_answer"], ss["he_distractor"]) == \
        tuple(built.texts[f] for f in EX.FIELDS)
    assert ss["he_focus"] == head and at.selectbox(key="he_head").value == head
    note = next(i.value for i in at.info if "opened to check its effect" in i.value)
    assert note.startswith(head) and "replaced by another word" in note


def test_the_clis_and_the_notebook_say_what_they_rank(capsys):
    assert main(["heads", "--model", MODEL, "--top", "1"]) == 0
    assert "These rank where each head looks (its attention pattern), not what it does" in capsys.readouterr().out
    assert main(["compose", "--model", MODEL, "--samples", "10", "--top", "1"]) == 0
    assert "not that it does on any prompt — a real edge and a decoy's can score alike" in capsys.readouterr().out
    import attnkit

    m = attnkit.load(MODEL)
    assert "not an effect" in m.composition().summary()
    assert "not what it does" in m.heads("t1 t2 t3 t1 t2 t3").summary()
