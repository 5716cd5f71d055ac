"""The planted-circuit models (attnkit/models/planted-*) show their behaviour with HuggingFace alone, lose it
when the planted heads' outputs are zeroed by HF forward hooks, keep it when every other head is zeroed,
and are rebuilt bit for bit by attnkit/dev/planted."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = Path(__file__).resolve().parents[1] / "attnkit" / "models"
NAMES = ["planted-induction", "planted-llama", "planted-mlp", "planted-competing", "planted-decoys"]
V = 40


def _hf(name: str):
    folder = MODELS / name
    model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return model, tok, json.loads((folder / "CIRCUIT.json").read_text(encoding="utf-8"))


def _text(n: int = 20, batch: int = 8, seed: int = 1) -> list[str]:
    """Random words t0 … t39 (no word twice in a half), each half repeated: the induction probe as text."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(batch):
        half = [f"t{int(i)}" for i in torch.randperm(V, generator=g)[:n]]
        out.append(" ".join(half + half))
    return out


def _out_proj(model, layer: int):
    """The module whose input is the concatenation of the heads' outputs (z), for a forward pre-hook."""
    if hasattr(model, "transformer"):
        return model.transformer.h[layer].attn.c_proj
    return model.model.layers[layer].self_attn.o_proj


def _losses(model, ids: torch.Tensor, task: str, zero: list[str] = ()) -> tuple[float, float]:
    """(loss of the first half, loss of the second half) of the task's next-token prediction, with the heads
    in ``zero`` (``L{l}H{h}``) zeroed in the input of the attention's output projection."""
    cfg = model.config
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    hooks = []
    for name in zero:
        l, h = (int(x) for x in name[1:].split("H"))

        def hook(mod, args, h=h):
            x = args[0].clone()
            x[..., h * d_head:(h + 1) * d_head] = 0
            return (x,)
        hooks.append(_out_proj(model, l).register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits, -1)
    finally:
        for hk in hooks:
            hk.remove()
    n = ids.shape[1] // 2
    if task == "induction":
        lp = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]            # position i predicts token i + 1
        return float(-lp[:, : n - 1].mean()), float(-lp[:, n:].mean())
    target = (ids[:, :-2] + 7) % V                                        # position i predicts token i − 2, + 7
    lp = logp[:, 2:].gather(-1, target[..., None])[..., 0]
    return float(-lp[:, : n - 2].mean()), float(-lp[:, n - 2:].mean())


def _others(model, circuit) -> list[str]:
    cfg = model.config
    return [f"L{l}H{h}" for l in range(cfg.num_hidden_layers) for h in range(cfg.num_attention_heads)
            if f"L{l}H{h}" not in circuit["heads"]]


@pytest.mark.parametrize("name", NAMES)
def test_behaviour_with_huggingface_alone(name):
    model, tok, circuit = _hf(name)
    ids = torch.tensor(tok(_text()).input_ids)
    assert ids.shape == (8, 40) and int(ids.max()) < V          # the word-level tokenizer: one id per word
    first, second = _losses(model, ids, circuit["task"])
    if circuit["task"] == "induction":
        assert second < 0.15 and first > 3.0, (first, second)   # second half ≪ first (ln 41 = 3.71)
    else:
        assert first < 0.05 and second < 0.05, (first, second)
    # zeroing the planted heads removes the behaviour; zeroing every other head keeps it
    assert min(_losses(model, ids, circuit["task"], circuit["heads"])) > 3.0
    kept = _losses(model, ids, circuit["task"], _others(model, circuit))[1]
    assert kept < 0.15, kept


@pytest.mark.parametrize("name", NAMES)
def test_each_planted_head_is_necessary(name):
    model, tok, circuit = _hf(name)
    ids = torch.tensor(tok(_text(seed=2)).input_ids)
    if name == "planted-competing":
        return                                       # two redundant heads: tested by the half-and-half test
    for head in circuit["heads"]:
        assert _losses(model, ids, circuit["task"], [head])[1] > 2.5, head


def test_competing_heads_each_carry_half():
    """planted-competing: the answer's logit margin with one induction head zeroed is about half of the full one."""
    model, tok, circuit = _hf("planted-competing")
    ids = torch.tensor(tok(_text(seed=3)).input_ids)

    def margin(zero):
        hooks = []
        for name in zero:
            h = int(name.split("H")[1])

            def hook(mod, args, h=h):
                x = args[0].clone()
                x[..., h * 64:(h + 1) * 64] = 0
                return (x,)
            hooks.append(_out_proj(model, 1).register_forward_pre_hook(hook))
        with torch.no_grad():
            logits = model(ids).logits[:, 20:-1]
        for hk in hooks:
            hk.remove()
        right = logits.gather(-1, ids[:, 21:, None])[..., 0]
        return float((right - logits[..., :V].mean(-1)).mean())

    full, only0, only1, none = margin([]), margin(["L1H1"]), margin(["L1H0"]), margin(["L1H0", "L1H1"])
    assert full > 8
    assert 0.4 < only0 / full < 0.6 and 0.4 < only1 / full < 0.6, (full, only0, only1)
    assert abs(none) < 0.05 * full


def test_attnkit_loads_them_by_name_and_matches_huggingface():
    from attnkit.loading import MODEL_CHOICES, PLANTED_MODELS, load
    from attnkit.model import run
    from attnkit.tolerances import TOL_LOGITS

    assert set(NAMES) == set(PLANTED_MODELS) and set(NAMES) <= set(MODEL_CHOICES)
    for name in NAMES:
        m = load(name, "cpu")
        ids = torch.tensor([m.encode(_text(batch=1)[0])])
        with torch.no_grad():
            hf = m.hf_model(ids).logits
        assert torch.allclose(run(m.weights, ids).logits, hf, atol=TOL_LOGITS, rtol=0)


def test_the_builder_rebuilds_the_shipped_checkpoints(tmp_path):
    from attnkit.dev.planted import NAMES as BUILT, build_all

    assert sorted(BUILT) == sorted(NAMES)
    build_all(tmp_path)
    for name in NAMES:
        new, old = load_file(tmp_path / name / "model.safetensors"), load_file(MODELS / name / "model.safetensors")
        assert new.keys() == old.keys() and all(torch.equal(new[k], old[k]) for k in new), name
        for f in ("CIRCUIT.json", "MODEL_CARD.md", "config.json", "tokenizer.json"):
            assert (tmp_path / name / f).read_text(encoding="utf-8") == (MODELS / name / f).read_text(encoding="utf-8")
        assert (MODELS / name / "model.safetensors").stat().st_size < 4_000_000
