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
