"""Checkpoints built on the spot: random-initialised GPT-2 configs saved with save_pretrained.

The HuggingFace hub is not reachable in CI, so these stand in for the real checkpoints:
the shapes are GPT-2's own, only the weights are random.
"""
from __future__ import annotations

import dataclasses
import hashlib
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
    # GPT-2's init gives tiny residual entries and zero biases; spread the LayerNorm gains and every bias
    # (attention's b_Q/b_K/b_V/b_O, the MLP's) a little so that the comparison is not trivially easy (real
    # checkpoints have entries in the thousands) and a dropped bias fails it.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(folder, safe_serialization=True)
    if tokenizer:
        make_tokenizer(folder)
    return folder


def cache_repo(hub: Path, repo: str, revisions: dict[str, Path]) -> dict[str, str]:
    """Lay out ``revisions`` (ref -> checkpoint folder) as the HF cache does: files in ``blobs/<sha256>``,
    ``snapshots/<commit>/<file>`` relative links to them, ``refs/<ref>`` holding the commit. {ref: commit}."""
    root = hub / ("models--" + repo.replace("/", "--"))
    commits = {}
    for ref, folder in revisions.items():
        commit = hashlib.sha1(ref.encode()).hexdigest()
        snap = root / "snapshots" / commit
        snap.mkdir(parents=True)
        (root / "blobs").mkdir(exist_ok=True)
        for f in sorted(folder.iterdir()):
            data = f.read_bytes()
            blob = hashlib.sha256(data).hexdigest()
            (root / "blobs" / blob).write_bytes(data)
            (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / blob)
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / ref).write_text(commit)
        commits[ref] = commit
    return commits


ROOT = Path(__file__).resolve().parents[1]


def apptest(page: str, model_dir=None, text: str | None = None, timeout: float = 120, **state):
    """An AppTest of app.py whose first run opens ``page`` (a key of ``PAGES``: "home", "heatmaps", …) inside
    the frame, as the page's address does in a browser, with the sidebar preset to a local model folder.

    Without ``model_dir`` the page uses its default model (the shipped attnkit-tiny when offline).
    Extra keyword arguments are put into session_state before the first run.
    """
    from attnkit.app.opening import app_test

    at = app_test(page, timeout)
    if model_dir is not None:
        at.session_state["ak_model"] = "Local folder…"
        at.session_state["ak_folder"] = str(model_dir)
    if text is not None:
        at.session_state["ak_text"] = text
    for k, v in state.items():
        at.session_state[k] = v
    return at


def dashboard_sources() -> list[Path]:
    """Every source file of the dashboard: app.py, pages/ (the frame's copies) and attnkit/app/ with its page
    folders."""
    return [ROOT / "app.py", *sorted((ROOT / "attnkit" / "app").rglob("*.py")), *sorted((ROOT / "pages").glob("*.py"))]


def selectbox(at, key: str):
    """The selectbox of input ``key``: drawn with that key, or by ``ui.select`` as ``key@<digest of its labels>``."""
    return next(s for s in at.selectbox if s.key == key or str(s.key).startswith(key + "@"))


# ----------------------------------------------------------------------------- other families

#: Per-layer shapes of real checkpoints (their config.json values), with 2 layers and a 512-token
#: vocabulary so that the tests stay fast; only the weights are random.
FAMILY_SHAPES = {
    "smollm2-135m": ("llama", dict(
        hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
        rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=8192,
        hidden_act="silu")),
    "qwen2.5-0.5b": ("qwen2", dict(
        hidden_size=896, intermediate_size=4864, num_attention_heads=14, num_key_value_heads=2,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=32768,
        use_sliding_window=False, sliding_window=32768, max_window_layers=21, hidden_act="silu")),
    "llama-3.2-1b": ("llama", dict(
        hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=131072, hidden_act="silu")),
    # Mistral-7B's layout (GQA 4:1, sliding window on every layer) at a small width and a short window
    "mistral-window": ("mistral", dict(
        hidden_size=256, intermediate_size=640, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
        rope_theta=1000000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, max_position_embeddings=1024,
        sliding_window=16, hidden_act="silu")),
    "pythia-70m": ("gpt_neox", dict(
        hidden_size=512, intermediate_size=2048, num_attention_heads=8, rotary_pct=0.25, rotary_emb_base=10000,
        use_parallel_residual=True, layer_norm_eps=1e-5, max_position_embeddings=2048, hidden_act="gelu",
        tie_word_embeddings=False)),
    "pythia-160m": ("gpt_neox", dict(
        hidden_size=768, intermediate_size=3072, num_attention_heads=12, rotary_pct=0.25, rotary_emb_base=10000,
        use_parallel_residual=True, layer_norm_eps=1e-5, max_position_embeddings=2048, hidden_act="gelu",
        tie_word_embeddings=False)),
    "gpt-neo-125m": ("gpt_neo", dict(
        hidden_size=768, num_heads=12, window_size=256, max_position_embeddings=2048,
        activation_function="gelu_new", layer_norm_epsilon=1e-5)),
}


def _hf_config(model_type: str, n_layers: int, vocab_size: int, **kw):
    from transformers import AutoConfig

    if model_type == "gpt_neo":
        kw.setdefault("attention_types", [[["global", "local"], max(n_layers // 2, 1)]])
        kw.setdefault("num_layers", n_layers)
    else:
        kw.setdefault("num_hidden_layers", n_layers)
    kw.setdefault("bos_token_id", 0)         # make_tokenizer's <|endoftext|> is id 0
    kw.setdefault("eos_token_id", 0)
    return AutoConfig.for_model(model_type, vocab_size=vocab_size, **kw)


def make_family_checkpoint(folder: Path, shape: str, *, n_layers: int = 2, vocab_size: int = 512, seed: int = 0,
                           tokenizer: bool = True, **overrides) -> Path:
    """A random-weight checkpoint with the per-layer shape of ``shape`` (a key of FAMILY_SHAPES),
    ``n_layers`` layers and a small vocabulary, saved with save_pretrained (+ a small tokenizer)."""
    from transformers import AutoModelForCausalLM

    model_type, kw = FAMILY_SHAPES[shape]
    cfg = _hf_config(model_type, n_layers, vocab_size, **{**kw, **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    # as in make_checkpoint: spread the norm gains and biases so that the comparison is not trivially easy
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln" in name or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(folder, safe_serialization=True)
    if tokenizer:
        make_tokenizer(folder, vocab_size=min(400, vocab_size))
    return folder


def with_biases(w, dtype, seed=0):
    """``w`` in ``dtype`` with every bias that exists (and the norms) given random nonzero entries."""
    g = torch.Generator().manual_seed(seed)

    def f(t, name):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return t
        t = t.to(dtype)
        if name.startswith("b_") or name.endswith("_b"):
            t = t + 0.3 * torch.randn(t.shape, generator=g, dtype=dtype)
        return t

    layers = [dataclasses.replace(lw, **{k: f(getattr(lw, k), k) for k in lw.__dataclass_fields__})
              for lw in w.layers]
    top = {k: f(getattr(w, k), k) for k in w.__dataclass_fields__ if k not in ("config", "layers")}
    return dataclasses.replace(w, layers=layers, **top)


# ----------------------------------------------------------------------------- a planted model of one's own

#: The circuit of :func:`make_planted_negative`: planted-induction's, plus a suppressing induction head L1H1 whose
#: edges are stated as ``negative`` (the behaviour does not need them).
NEGATIVE_CIRCUIT = {
    "heads": ["L0H0", "L1H0", "L1H1"],
    "roles": {"L0H0": "previous token", "L1H0": "induction", "L1H1": "negative induction"},
    "edges": [{"sender": "embed", "receiver": "L0H0.v"}, {"sender": "L0H0", "receiver": "L1H0.k"},
              {"sender": "embed", "receiver": "L1H0.q"}, {"sender": "embed", "receiver": "L1H0.v"},
              {"sender": "L1H0", "receiver": "logits"},
              {"sender": "L0H0", "receiver": "L1H1.k", "kind": "negative"},
              {"sender": "embed", "receiver": "L1H1.q", "kind": "negative"},
              {"sender": "embed", "receiver": "L1H1.v", "kind": "negative"},
              {"sender": "L1H1", "receiver": "logits", "kind": "negative"}],
    "task": "induction", "vocab": 40, "metric": "logit difference answer − distractor at the last position"}


def make_planted_negative(folder: Path, suppress: float = 0.3) -> Path:
    """A planted-circuit model the tests build themselves (not shipped): attnkit/dev/planted's induction circuit
    (previous-token L0H0 → induction L1H0 by K-composition) with a second induction head L1H1 that copies the
    attended token into OUT with weight −``suppress``: a negative head, lowering the answer's logit."""
    from attnkit.dev.planted import gpt2 as G

    gen = torch.Generator().manual_seed(44)
    layers = [G._layer_distractors([G.previous_token(G.TOK, G.PREV)], [G.TOK], gen),
              G._layer_distractors([G.induction(), G.induction(-suppress)], [G.TOK, G.PREV], gen)]
    spec = G.Spec(folder.name, layers, {}, NEGATIVE_CIRCUIT,
                  f"planted-induction's circuit, plus an induction head L1H1 writing −{suppress} of the answer into OUT")
    return G.write(spec, folder, seed=44)


def family_weights(tmp_path_factory, shapes: dict, transform=lambda w: w):
    """A getter name -> the loaded Weights of a small checkpoint of that family, built once: ``shapes[name]`` is
    None for a GPT-2 (3 layers, 4 heads, d 64) or the keyword arguments of :func:`make_family_checkpoint` (GPT-Neo
    gets 4 layers: it alternates global and local layers in pairs); ``transform`` is applied to the weights."""
    from attnkit.loading import load

    built = {}

    def get(name):
        if name not in built:
            folder = tmp_path_factory.mktemp(name)
            if shapes[name] is None:
                make_checkpoint(folder, seed=3, n_layer=3, n_head=4, n_embd=64, n_positions=64, vocab_size=400)
            else:
                make_family_checkpoint(folder, name, n_layers=4 if name == "gpt-neo-125m" else 3, **shapes[name])
            built[name] = transform(load(str(folder), "cpu").weights)
        return built[name]

    return get
