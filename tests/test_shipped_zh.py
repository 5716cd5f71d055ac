"""The shipped Chinese model attnkit-tiny-zh: loads by name, equals HF, keeps the seeds' Chinese words whole,
and its card states its sources, licences, bits per character and the head scores its own weights give."""
import re

import pytest
import torch
from transformers import AutoModelForCausalLM

from attnkit.dev.train.sources import ZH_SOURCES
from attnkit.loading import CHINESE_MODEL, SHIPPED, load
from attnkit.metrics import head_table
from attnkit.model import run
from attnkit.prompts import SAMPLE_TEXT_ZH, truncate
from attnkit.tolerances import TOL_PATTERN

FOLDER = SHIPPED[CHINESE_MODEL]
pytestmark = pytest.mark.skipif(not (FOLDER / "model.safetensors").exists(), reason="the Chinese model is not present")


@pytest.fixture(scope="module")
def zh():
    return load(CHINESE_MODEL, "cpu")


def test_the_seeds_words_are_whole_tokens(zh):
    pieces = [zh.tokenizer.decode([i]) for i in zh.encode("猫坐在垫子上")]
    assert pieces == ["猫", "坐", "在", "垫子", "上"]                   # at most 6 tokens (issue 36): 5
    assert len(zh.encode("上海")) == 1 and len(zh.encode("注意力")) == 1
    text = "注意力机制让每个词看见上下文 and English too 🙂"
    assert zh.tokenizer.decode(zh.encode(text)) == text


def test_equals_huggingface(zh):
    ids = zh.encode(SAMPLE_TEXT_ZH)[:96]
    hf = AutoModelForCausalLM.from_pretrained(str(FOLDER), attn_implementation="eager").eval()
    with torch.no_grad():
        want = hf(torch.tensor([ids]), output_attentions=True)
    tr = run(zh.weights, ids, capture=["pattern"])
    for layer, att in enumerate(want.attentions):
        assert torch.allclose(tr["pattern", layer].float(), att.float(), atol=TOL_PATTERN)


def test_card_states_sources_licences_and_its_own_head_scores(zh):
    card = (FOLDER / "MODEL_CARD.md").read_text(encoding="utf-8")
    for package, licence, _, _ in ZH_SOURCES:
        assert f"`{package}`" in card and licence in card
    assert "bits/character" in card and "NOT OpenAI's GPT-2 weights" in card
    ids, _ = truncate(zh.encode((FOLDER / "sample_zh.txt").read_text(encoding="utf-8")), zh.config.n_ctx)
    df = head_table(zh.weights, ids, 50, bos_id=zh.tokenizer.bos_token_id)
    best_prev = float(df["previous-token"].max())
    row = re.search(r"\| previous-token \| ≥ [0-9.]+ \| ([0-9.]+) \(", card)
    assert row and abs(float(row[1]) - best_prev) < 2e-3       # the card's number is the weights' number
    # issue 36's heads: a previous-token head ≥ 0.8 on Chinese text and an induction head ≥ 0.9 by both recipes;
    # every target the weights miss would be named in the card's status paragraph, and none it meets
    from attnkit.dev.train.card import HEAD_TARGETS_ZH
    assert set(HEAD_TARGETS_ZH) == {"previous-token", "induction (random repeats)", "induction (TL recipe)"}
    for stat, target in HEAD_TARGETS_ZH.items():
        assert float(df[stat].max()) >= target, (stat, float(df[stat].max()))
    row = re.search(r"\| induction \(random repeats\) \| ≥ [0-9.]+ \| ([0-9.]+) \(", card)
    assert row and abs(float(row[1]) - float(df["induction (random repeats)"].max())) < 2e-3
    status = card.split("\n\n")[1]
    for stat, target in HEAD_TARGETS_ZH.items():
        missed = float(df[stat].max()) < target
        assert (f"best {stat} score" in status) == missed, (stat, status)
