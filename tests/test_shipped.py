"""The shipped attnkit-tiny: loads offline by its short name, is GPT-2, and verifies against HF."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.loading import SHIPPED, SHIPPED_MODEL, load

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (SHIPPED[SHIPPED_MODEL] / "model.safetensors").exists(),
                                reason="the shipped model is not present")


def test_loads_offline_by_name_and_verifies(tmp_path):
    out = tmp_path / "verify.json"
    proc = subprocess.run([sys.executable, "-m", "attnkit", "verify", "--model", SHIPPED_MODEL, "--json", str(out)],
                          cwd=ROOT, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads(out.read_text())
    assert rep["ok"] and len(rep["layers"]) == 4


def test_shipped_model_is_trained_and_tokenizes_any_text():
    m = load(SHIPPED_MODEL, "cpu")
    assert m.config.n_layers == 4 and m.config.n_ctx >= 256 and m.config.d_vocab <= 8192
    for text in ("The animal didn't cross the street.", "注意力机制让每个词看见上下文", "🙂🚀 مرحبا"):
        ids = m.encode(text)
        assert m.tokenizer.decode(ids) == text
        assert b"".join(m.token_bytes(ids)).decode("utf-8") == text
    card = (SHIPPED[SHIPPED_MODEL] / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "NOT OpenAI's GPT-2 weights" in card


def test_default_is_shipped_when_offline(monkeypatch):
    from attnkit import loading

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading, "_cached", lambda repo: False)
    name, notice = loading.default_model()
    assert name == SHIPPED_MODEL and notice
    assert load(name).weights.config.n_layers == 4


MARGIN = 0.03     # the shipped model clears issue 14's targets by at least this (numerics differ a little by CPU)


def test_shipped_model_has_previous_token_and_induction_heads():
    """Measured exactly as `python -m attnkit heads --model attnkit-tiny` does (see MODEL_CARD.md)."""
    from attnkit.prompts import SAMPLE_TEXT as _DEFAULT_TEXT
    from attnkit.metrics import head_table
    from attnkit.prompts import truncate
    from attnkit.dev.train import HEAD_TARGETS

    m = load(SHIPPED_MODEL, "cpu")
    assert m.config.n_ctx == 1024                      # GPT-2's context length
    ids, _ = truncate(m.encode(_DEFAULT_TEXT), m.config.n_ctx)
    df = head_table(m.weights, ids, 50, bos_id=m.tokenizer.bos_token_id)
    for stat, target in HEAD_TARGETS.items():    # previous-token; induction by attnkit's and by TL's recipe
        assert df[stat].max() >= target + MARGIN, (stat, df[stat].max(), target)


def test_default_prompt_words_are_single_tokens():
    from attnkit.app import DEFAULT_PROMPT

    m = load(SHIPPED_MODEL, "cpu")
    assert DEFAULT_PROMPT == "The animal didn't cross the street because it was too tired."
    toks = m.token_strs(m.encode(DEFAULT_PROMPT))
    assert toks == ["The", " animal", " didn", "'t", " cross", " the", " street", " because", " it", " was",
                    " too", " tired", "."]
    for word in (" animal", " street", " because", " tired", " cross", " Mary", " John", " store"):
        assert len(m.encode(word)) == 1, word


def test_card_reports_quality_against_the_old_model_and_the_head_targets():
    card = (SHIPPED[SHIPPED_MODEL] / "MODEL_CARD.md").read_text(encoding="utf-8")
    log = json.loads((SHIPPED[SHIPPED_MODEL] / "training_log.json").read_text(encoding="utf-8"))
    bpb = log["bits_per_byte"]
    new = next(v for k, v in bpb.items() if k.startswith("attnkit-tiny (1024"))
    old = next(v for k, v in bpb.items() if k.startswith("previous model"))
    assert new < old < bpb["unigram baseline"]                        # the same validation bytes for all three
    assert log["final_val_loss"] < log["unigram_val"]
    assert f"| attnkit-tiny (1024-token windows) | {new:.3f} |" in card
    assert "Targets this model was trained for" in card and "not met" not in card
    assert "licence" in card and "First-token (attention sink) heads" in card
