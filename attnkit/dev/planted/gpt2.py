"""Planted-circuit models: small checkpoints whose mechanism is set by hand, so every explanation method
can be scored against a circuit known by construction (``python -m attnkit.dev.planted`` rebuilds them). This module: the GPT-2 family ones and
what every planted model shares (the tokenizer, the residual layout, the card).

Every model is an ordinary HuggingFace checkpoint (GPT-2 family, untied unembedding) with a word-level
tokenizer of 40 words ``t0`` … ``t39`` (+ ``<unk>``). The residual stream (d = 256) is split into
subspaces, one-hot inside each::

    TOK  0–39     the token (embedding)            MID  80–119   a head's or MLP's intermediate result
    PREV 40–79    the previous token (written)     OUT  120–159  what the unembedding reads
    POS  160–207  the position (embedding)         SCR  208–255  scratch: distractors write here, nobody planted reads it

Each norm's scale is set to 1/γ with γ the median of ‖x‖/√d over a probe batch at that norm's input, so a
one-hot feature reads ≈ 1 after the norm. Distractor heads (first token, self, uniform) and the MLPs'
spare units have random weights (``torch.Generator`` seeded) of the same Frobenius norm as the planted
heads' and write only into SCR. Attention logits of planted matches are ≈ ``MATCH`` (others ≈ 0).

Models (``BUILDERS``): ``planted-induction`` (previous-token head L0H0, induction head L1H0 reading it
through its key: K-composition); ``planted-mlp`` (L0H0 previous token, L1H0 previous token reading
L0H0's output through its value — V-composition, so L1H0 carries the token two back — and MLP1 mapping
it to its successor t → t+7 mod 40); ``planted-competing`` (two induction heads L1H0 and L1H1, each
writing half the answer's logit).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...calibration import planted_word

V, P, D, H = 40, 48, 256, 4
E = D // H
TOK, PREV, MID, OUT, POS, SCR = 0, 40, 80, 120, 160, 208
N_INNER = 64
MATCH = 30.0              # attention logit of a planted match
LOGIT = 12.0              # unembedding scale: the answer's logit when the circuit writes 1 into OUT
SUCC = 7                  # planted-mlp: the answer is token (t + SUCC) mod V for t two positions back
INDUCTION_METRIC = ("induction: on repeated random tokens the second half's next-token loss ≪ the first's; on a "
                    "clean/corrupted pair, logit difference answer (what followed the last token's earlier "
                    "occurrence) − distractor at the last position")
MODELS_DIR = Path(__file__).resolve().parents[2] / "models"


def words() -> list[str]:
    return [planted_word(i) for i in range(V)]


def save_tokenizer(folder: Path) -> None:
    """A word-level tokenizer (whitespace-separated ``t0`` … ``t39``, id = index; ``<unk>`` last)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(words())}
    vocab["<unk>"] = V
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.save_pretrained(str(folder))


def config(n_layers: int = 2):
    from transformers import GPT2Config

    return GPT2Config(vocab_size=V + 1, n_positions=P, n_embd=D, n_layer=n_layers, n_head=H, n_inner=N_INNER,
                      activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      layer_norm_epsilon=1e-5, tie_word_embeddings=False, bos_token_id=V, eos_token_id=V)


def _eye(n: int, rows: int, cols: int, scale: float = 1.0, shift: int = 0) -> torch.Tensor:
    """A [rows-block, cols-block] map sending feature i of a subspace to feature i + shift."""
    m = torch.zeros(rows, cols)
    for i in range(n):
        if 0 <= i + shift < cols:
            m[i, i + shift] = scale
    return m


@dataclass
class Head:
    """A head's four maps in residual coordinates: W_Q, W_K, W_V [D, E] and W_O [E, D]."""

    q: torch.Tensor = field(default_factory=lambda: torch.zeros(D, E))
    k: torch.Tensor = field(default_factory=lambda: torch.zeros(D, E))
    v: torch.Tensor = field(default_factory=lambda: torch.zeros(D, E))
    o: torch.Tensor = field(default_factory=lambda: torch.zeros(E, D))


AMP = math.sqrt(MATCH * math.sqrt(E))     # W_Q and W_K entries: a match scores AMP² / √E = MATCH


def previous_token(value_from: int, write_to: int) -> Head:
    """Attends from position i to i − 1 (positions), copies subspace ``value_from`` into ``write_to``."""
    hd = Head()
    hd.q[POS:POS + P, :P] = _eye(P, P, P, AMP)
    hd.k[POS:POS + P, :P] = _eye(P, P, P, AMP, shift=1)
    hd.v[value_from:value_from + V, :V] = _eye(V, V, V)
    hd.o[:V, write_to:write_to + V] = _eye(V, V, V)
    return hd


def induction(out_scale: float = 1.0) -> Head:
    """Query: the current token; key: the previous token written into PREV (K-composition); OV copies the
    attended token into OUT."""
    hd = Head()
    hd.q[TOK:TOK + V, :V] = _eye(V, V, V, AMP)
    hd.k[PREV:PREV + V, :V] = _eye(V, V, V, AMP)
    hd.v[TOK:TOK + V, :V] = _eye(V, V, V)
    hd.o[:V, OUT:OUT + V] = _eye(V, V, V, out_scale)
    return hd


def _random_ov(hd: Head, reads: list[int], gen: torch.Generator) -> Head:
    """Random W_V (reading the subspaces ``reads``) and W_O (writing SCR only), each of the Frobenius norm
    of a planted head's (√V)."""
    v = torch.zeros(D, E)
    for r in reads:
        v[r:r + V] = torch.randn(V, E, generator=gen)
    o = torch.zeros(E, D)
    o[:, SCR:] = torch.randn(E, D - SCR, generator=gen)
    hd.v, hd.o = v * math.sqrt(V) / v.norm(), o * math.sqrt(V) / o.norm()
    return hd


def distractor(kind: str, reads: list[int], gen: torch.Generator) -> Head:
    """``first`` (every query attends to position 0), ``self`` (to itself) or ``uniform`` (random W_Q/W_K of
    the planted norm reading SCR only — empty in layer 0, so its pattern is near uniform there)."""
    hd = Head()
    if kind == "first":
        hd.q[POS:POS + P, 0] = AMP
        hd.k[POS, 0] = AMP
    elif kind == "self":
        hd.q[POS:POS + P, :P] = _eye(P, P, P, AMP)
        hd.k[POS:POS + P, :P] = _eye(P, P, P, AMP)
    else:
        q, k = torch.randn(D - SCR, E, generator=gen), torch.randn(D - SCR, E, generator=gen)
        hd.q[SCR:], hd.k[SCR:] = q * 0.05 * AMP * math.sqrt(P) / q.norm(), k * 0.05 * AMP * math.sqrt(P) / k.norm()
    return _random_ov(hd, reads, gen)


@dataclass
class Spec:
    """A planted model: heads per layer (H each), MLP units (layer -> (W_in [D, n], b_in [n], W_out [n, D])),
    the stated circuit and its behaviour."""

    name: str
    layers: list[list[Head]]
    mlps: dict
    circuit: dict
    card: str


def succ_mlp() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One unit per token t: gelu(20·(MID_t − ½)) fires (≈ 10) only for t, and writes ≈ 1 into OUT_{t+7}."""
    w_in, b_in, w_out = torch.zeros(D, V), torch.full((V,), -10.0), torch.zeros(V, D)
    for t in range(V):
        w_in[MID + t, t] = 20.0
        w_out[t, OUT + (t + SUCC) % V] = 0.1
    return w_in, b_in, w_out


def _layer_distractors(planted: list[Head], reads: list[int], gen) -> list[Head]:
    kinds = ["first", "self", "uniform"]
    return planted + [distractor(kinds[i % 3], reads, gen) for i in range(H - len(planted))]


def specs() -> dict[str, Spec]:
    """The planted models, built from one seeded generator each (deterministic)."""
    out = {}
    gen = torch.Generator().manual_seed(35)
    out["planted-induction"] = Spec(
        "planted-induction",
        [_layer_distractors([previous_token(TOK, PREV)], [TOK], gen),
         _layer_distractors([induction()], [TOK, PREV], gen)], {},
        {"heads": ["L0H0", "L1H0"], "roles": {"L0H0": "previous token", "L1H0": "induction"},
         "edges": [{"sender": "embed", "receiver": "L0H0.v"}, {"sender": "L0H0", "receiver": "L1H0.k"},
                   {"sender": "embed", "receiver": "L1H0.q"}, {"sender": "embed", "receiver": "L1H0.v"},
                   {"sender": "L1H0", "receiver": "logits"}],
         "task": "induction", "vocab": V, "metric": INDUCTION_METRIC},
        "the previous-token head L0H0 copies each token into PREV at the next position; the induction head "
        "L1H0's query (the current token) matches its key (PREV, written by L0H0: K-composition) and its OV "
        "copies the attended token into OUT, which the unembedding reads")
    gen = torch.Generator().manual_seed(36)
    out["planted-mlp"] = Spec(
        "planted-mlp",
        [_layer_distractors([previous_token(TOK, PREV)], [TOK], gen),
         _layer_distractors([previous_token(PREV, MID)], [TOK, PREV], gen)], {1: succ_mlp()},
        {"heads": ["L0H0", "L1H0"], "roles": {"L0H0": "previous token", "L1H0": "previous token"},
         "edges": [{"sender": "embed", "receiver": "L0H0.v"}, {"sender": "L0H0", "receiver": "L1H0.v"},
                   {"sender": "L1H0", "receiver": "MLP1"}, {"sender": "MLP1", "receiver": "logits"}],
         "task": "successor", "shift": SUCC, "vocab": V,
         "metric": f"next-token prediction (token two back + {SUCC}) mod {V}: logit difference answer − distractor at "
                   "the last position; on random tokens the loss of that prediction"},
        f"L0H0 copies the previous token into PREV; L1H0 attends to the previous position and reads PREV through "
        f"its value (V-composition), writing the token two back into MID; MLP1 maps MID token t to OUT token "
        f"t+{SUCC} mod {V}, which the unembedding reads: the model predicts (token two back) + {SUCC}")
    gen = torch.Generator().manual_seed(37)
    out["planted-competing"] = Spec(
        "planted-competing",
        [_layer_distractors([previous_token(TOK, PREV)], [TOK], gen),
         _layer_distractors([induction(0.5), induction(0.5)], [TOK, PREV], gen)], {},
        {"heads": ["L0H0", "L1H0", "L1H1"],
         "roles": {"L0H0": "previous token", "L1H0": "induction", "L1H1": "induction"},
         "edges": [{"sender": "embed", "receiver": "L0H0.v"}, {"sender": "L0H0", "receiver": "L1H0.k"},
                   {"sender": "L0H0", "receiver": "L1H1.k"}, {"sender": "embed", "receiver": "L1H0.q"},
                   {"sender": "embed", "receiver": "L1H1.q"}, {"sender": "embed", "receiver": "L1H0.v"},
                   {"sender": "embed", "receiver": "L1H1.v"}, {"sender": "L1H0", "receiver": "logits"},
                   {"sender": "L1H1", "receiver": "logits"}],
         "task": "induction", "vocab": V, "metric": INDUCTION_METRIC},
        "as planted-induction, but two induction heads L1H0 and L1H1 (identical QK, each OV writing half the "
        "answer into OUT) share the work: ablating either one leaves about half the logit difference")
    return out


def _set_heads(block, heads: list[Head]) -> None:
    q, k, v = (torch.cat([getattr(hd, n) for hd in heads], 1) for n in "qkv")
    block.attn.c_attn.weight.copy_(torch.cat([q, k, v], 1))
    block.attn.c_proj.weight.copy_(torch.cat([hd.o for hd in heads], 0))


def _set_mlp(block, planted, gen: torch.Generator) -> None:
    """Planted units first (if any), the rest random, reading and writing SCR only, of the planted scale."""
    w_in, b_in, w_out = planted if planted is not None else (torch.zeros(D, 0), torch.zeros(0), torch.zeros(0, D))
    n = w_in.shape[1]
    r_in, r_out = torch.zeros(D, N_INNER - n), torch.zeros(N_INNER - n, D)
    r_in[SCR:] = torch.randn(D - SCR, N_INNER - n, generator=gen)
    r_out[:, SCR:] = torch.randn(N_INNER - n, D - SCR, generator=gen)
    r_in, r_out = r_in * 20.0 * math.sqrt(V) / r_in.norm(), r_out * 0.1 * math.sqrt(V) / r_out.norm()
    block.mlp.c_fc.weight.copy_(torch.cat([w_in, r_in], 1))
    block.mlp.c_fc.bias.copy_(torch.cat([b_in, torch.full((N_INNER - n,), -10.0)]))
    block.mlp.c_proj.weight.copy_(torch.cat([w_out, r_out], 0))


def probe(n: int = 20, batch: int = 8, seed: int = 0) -> torch.Tensor:
    """[batch, 2n] repeated random tokens, no token twice within a half: the probe the norms are scaled on."""
    g = torch.Generator().manual_seed(seed)
    half = torch.stack([torch.randperm(V, generator=g)[:n] for _ in range(batch)])
    return torch.cat([half, half], 1)


def scale_norms(model, norms: list, spread) -> None:
    """Each norm's weight := the median over the probe of ``spread(input, norm)`` (what it divides by), set in
    forward order, so a one-hot feature of size 1 reads ≈ 1 after it. Rounded to 4 decimals: the forward's
    last bits differ between CPUs (ln_f's median moved by 1.5e-8 on an AMD EPYC), the rebuild must not."""
    ids = probe()
    for norm in norms:
        seen = []
        hook = norm.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach()))
        model(ids)
        hook.remove()
        norm.weight.fill_(round(float(spread(seen[0], norm).median()), 4))


def _scale_norms(model) -> None:
    tr = model.transformer
    norms = [m for b in tr.h for m in (b.ln_1, b.ln_2)] + [tr.ln_f]
    scale_norms(model, norms, lambda x, ln: (x.var(-1, unbiased=False) + ln.eps).sqrt())


@torch.no_grad()
def build_model(spec: Spec, seed: int):
    """The HF model of ``spec`` (GPT2LMHeadModel, float32)."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config(len(spec.layers))).eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    for p in model.parameters():
        p.zero_()
    tr = model.transformer
    tr.wte.weight[:V, TOK:TOK + V] = torch.eye(V)
    tr.wpe.weight[:, POS:POS + P] = torch.eye(P)
    for l, (block, heads) in enumerate(zip(tr.h, spec.layers)):
        _set_heads(block, heads)
        _set_mlp(block, spec.mlps.get(l), gen)
        for ln in (block.ln_1, block.ln_2):
            ln.weight.fill_(1.0)
    tr.ln_f.weight.fill_(1.0)
    model.lm_head.weight[:V, OUT:OUT + V] = torch.eye(V) * LOGIT
    _scale_norms(model)
    return model


CARD = """# {name}

A planted-circuit model of attnkit (issue 35): its weights are **set by hand** by
`attnkit/dev/planted/` (rebuild: `python -m attnkit.dev.planted`), so the mechanism is known exactly and
stated as data in `CIRCUIT.json`. Not trained; not a language model.

- Family: {family} ({layers} layers, {heads} heads, d_model {d}, d_head {e}, MLP width {inner}, context {ctx},
  untied unembedding{extra}). Tokenizer: word level, `t0` … `t{last}` separated by spaces (+ `<unk>`).
- Mechanism: {mechanism}.
- Residual layout (one-hot inside each subspace): TOK 0–39 token, PREV 40–79 previous token, MID 80–119
  intermediate, OUT 120–159 read by the unembedding, {pos}, SCR 208–255 scratch.
- Distractors: {distractors}
- Each norm's scale is the median σ of its input over a probe batch, so a one-hot feature reads ≈ 1.
- Stated circuit: heads {circuit_heads}; edges as path patching names them (see CIRCUIT.json).
"""


DISTRACTORS = ("heads attending to the first token, to themselves, or near-uniformly, and spare MLP units, with "
               "random weights (seeded torch generator) of the planted heads' Frobenius norm, writing only into SCR.")


def save(model, circuit: dict, mechanism: str, folder: Path, family: str = "GPT-2", extra: str = "",
         pos: str = "POS 160–207 position", distractors: str = DISTRACTORS) -> Path:
    """Write ``model`` with the tokenizer, CIRCUIT.json and MODEL_CARD.md into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    save_tokenizer(folder)
    (folder / "CIRCUIT.json").write_text(json.dumps(circuit, indent=1) + "\n", encoding="utf-8")
    (folder / "MODEL_CARD.md").write_text(CARD.format(
        name=folder.name, family=family, layers=model.config.num_hidden_layers, heads=H, d=D, e=getattr(model.config, "head_dim", None) or E,
        inner=N_INNER, distractors=distractors,
        ctx=P, last=V - 1, extra=extra, pos=pos, mechanism=mechanism, circuit_heads=", ".join(circuit["heads"])),
        encoding="utf-8")
    return folder


def write(spec: Spec, folder: Path, seed: int) -> Path:
    return save(build_model(spec, seed), spec.circuit, spec.card, folder)
