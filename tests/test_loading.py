"""Default model selection and the bounded hub check."""
import time

import pytest

from attnkit import loading


def test_offline_falls_back_to_shipped_with_notice(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading, "_cached", lambda repo: False)
    name, notice = loading.default_model()
    assert name == loading.SHIPPED_MODEL
    assert "HF_HUB_OFFLINE" in notice and "not OpenAI's weights" in notice


def test_unreachable_hub_falls_back_quickly(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "_cached", lambda repo: False)
    t0 = time.perf_counter()
    name, notice = loading.default_model(timeout=2.0)
    assert time.perf_counter() - t0 < 5
    if name == loading.SHIPPED_MODEL:            # no network here or in CI
        assert "cannot be reached" in notice


def test_hanging_hub_is_bounded(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, *a, **k: time.sleep(10))
    t0 = time.perf_counter()
    assert loading.hub_available("openai-community/gpt2", timeout=0.5) is False
    assert time.perf_counter() - t0 < 2


def test_cached_gpt2_is_the_default(monkeypatch):
    monkeypatch.setattr(loading, "_cached", lambda repo: True)
    assert loading.default_model() == ("gpt2", None)


def test_device_names():
    assert str(loading.resolve_device("cpu")) == "cpu"
    assert loading.resolve_device("auto").type in {"cpu", "cuda", "mps"}
    with pytest.raises(loading.LoadError, match="unknown device"):
        loading.resolve_device("tpu")


def test_folder_without_tokenizer(tmp_path):
    from helpers import make_checkpoint

    small_vocab = make_checkpoint(tmp_path / "bare", tokenizer=False, n_layer=1, n_head=2, n_embd=32,
                                  n_positions=64, vocab_size=50)
    with pytest.raises(loading.LoadError, match="no tokenizer files"):     # no tokenizer fits 50 ids
        loading.load(str(small_vocab))
    if not loading._has_tokenizer(loading.SHIPPED[loading.SHIPPED_MODEL]):
        pytest.skip("the shipped model is not present")
    gpt2_vocab = make_checkpoint(tmp_path / "bare2", tokenizer=False, n_layer=1, n_head=2, n_embd=32,
                                 n_positions=64)
    m = loading.load(str(gpt2_vocab))
    assert "no tokenizer files" in m.notice and max(m.encode("hello 🙂 世界")) < m.config.d_vocab
