"""Checkpoints built on the spot: random-initialised GPT-2 configs saved with save_pretrained.

The HuggingFace hub is not reachable in CI, so these stand in for the real checkpoints:
the shapes are GPT-2's own, only the weights are random.
"""
from __future__ import annotations

from pathlib import Path

import torch

SAMPLE_TEXT = [
    "The animal didn't cross the street because it was too tired.",
    "Attention lets every token look back at the tokens before it.",
    "注意力机制让每个词看见上下文。 🙂🚀 مرحبا",
    "def f(x):\n    return x * 2  # <script>alert(1)</script>",
]


def make_tokenizer(folder: Path, vocab_size: int = 400):
    """A small byte-level BPE (GPT-2 style) trained on a few sentences, saved into ``folder``."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SAMPLE_TEXT * 20, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                            eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    tok.save_pretrained(folder)
    return tok


def make_checkpoint(folder: Path, seed: int = 0, tokenizer: bool = True, **config) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(**config)
    model = GPT2LMHeadModel(cfg)
    # GPT-2's init gives tiny residual entries; spread the LayerNorm gains and biases a little
    # so that the comparison is not trivially easy (real checkpoints have entries in the thousands).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name:
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(folder, safe_serialization=True)
    if tokenizer:
        make_tokenizer(folder)
    return folder


ROOT = Path(__file__).resolve().parents[1]


def apptest(page: str, model_dir=None, text: str | None = None, timeout: float = 120, **state):
    """An AppTest of ``page`` ('app.py' or 'pages/….py') with the sidebar preset to a local model folder.

    Without ``model_dir`` the page uses its default model (the shipped attnkit-tiny when offline).
    Extra keyword arguments are put into session_state before the first run.
    """
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / page), default_timeout=timeout)
    if model_dir is not None:
        at.session_state["ak_model"] = "Local folder…"
        at.session_state["ak_folder"] = str(model_dir)
    if text is not None:
        at.session_state["ak_text"] = text
    for k, v in state.items():
        at.session_state[k] = v
    return at
