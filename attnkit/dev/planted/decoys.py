"""planted-decoys: planted-induction's circuit among heads whose patterns are sharper than the circuit's own but
whose outputs nobody reads — a model on which a pattern is not a role (issue 45).

Layer 0: the **real previous-token head** attends to i − 1 with a soft match (logit ``SOFT_PREV``: about 0.85 of
its attention) and copies the token into PREV; the **decoy previous-token head** attends to i − 1 sharply (logit
``MATCH``) and copies the token into DPREV (residual 80–119, the MID slot), which only the decoy induction head
reads. Layer 1: the **real induction head** matches the current token against PREV (K-composition with the real
previous-token head; logit ``SOFT_IND``) and copies the attended token into OUT, which the unembedding reads; the
**decoy induction head** matches it against DPREV, sharply (K-composition with the decoy: the same maps, so the
two edges' composition scores tie), and writes into SCR (208–255), which nothing reads; the **negative head**
attends to itself and writes the current token into OUT at ``NEG`` of the scale: it raises the current token's
logit, which on this task (no token twice in a row) is never the answer, so removing it *lowers* the loss. The
fourth head of each layer is a **sink** (every query on position 0) writing random values into SCR.

Decoys and sinks write at ``QUIET`` of a planted head's scale and the MLPs are off, so nothing they write moves
a norm's σ enough to reach the loss (a distractor writing at full scale into SCR does, through the final norm:
see planted-induction's distractors in its atlas). Which head index holds which part is the ``layout``; the
tests build a second model with another layout and seed that this shipped one does not share.
"""
from __future__ import annotations

import math

import torch

from ...standard import head_name
from .gpt2 import (AMP, D, E, H, LOGIT, MATCH, N_INNER, OUT, P, POS, PREV, SCR, TOK, V, Head, INDUCTION_METRIC,
                   _eye, _random_ov, _set_heads, config, save, scale_norms)

DPREV = 80                 # the decoy previous-token head's subspace (planted-induction's MID)
SOFT_PREV = 4.5            # the real previous-token head's match logit (the decoy's: MATCH)
SOFT_IND = 7.0             # the real induction head's match logit (at a fully written key; the decoy's: MATCH)
QUIET = 0.05               # decoys and sinks write at this fraction of a planted head's output scale
NEG = 0.15                 # the negative head's write into OUT, as a fraction of the induction head's
#: layer -> part -> head index: the shipped layout (the tests build another)
LAYOUT = ({"prev": 0, "decoy_prev": 1, "sink": 2, "sink2": 3}, {"induction": 0, "decoy_induction": 1, "negative": 2,
                                                                 "sink": 3})
SEED = 45


def _amp(match: float) -> float:
    """The W_Q and W_K entries that give a fully written one-hot match the attention logit ``match``."""
    return math.sqrt(match * math.sqrt(E))


def previous(match: float, write_to: int, out_scale: float) -> Head:
    """Attends from i to i − 1 (positions) with logit ``match``; copies TOK into ``write_to`` at ``out_scale``."""
    hd, a = Head(), _amp(match)
    hd.q[POS:POS + P, :P] = _eye(P, P, P, a)
    hd.k[POS:POS + P, :P] = _eye(P, P, P, a, shift=1)
    hd.v[TOK:TOK + V, :V] = _eye(V, V, V)
    hd.o[:V, write_to:write_to + V] = _eye(V, V, V, out_scale)
    return hd


def induction(key_from: int, match: float, key_gain: float, write_to: int, out_scale: float) -> Head:
    """Query: the current token; key: the previous token as written into ``key_from`` (read ``key_gain`` times
    louder when it was written quietly); OV copies the attended token into ``write_to`` at ``out_scale``."""
    hd, a = Head(), _amp(match)
    hd.q[TOK:TOK + V, :V] = _eye(V, V, V, a)
    hd.k[key_from:key_from + V, :V] = _eye(V, V, V, a * key_gain)
    hd.v[TOK:TOK + V, :V] = _eye(V, V, V)
    hd.o[:V, write_to:write_to + V] = _eye(V, V, V, out_scale)
    return hd


def negative() -> Head:
    """Attends to itself; writes the current token into OUT at NEG: a wrong guess, so its removal helps."""
    hd = Head()
    hd.q[POS:POS + P, :P] = _eye(P, P, P, AMP)
    hd.k[POS:POS + P, :P] = _eye(P, P, P, AMP)
    hd.v[TOK:TOK + V, :V] = _eye(V, V, V)
    hd.o[:V, OUT:OUT + V] = _eye(V, V, V, NEG)
    return hd


def sink(gen: torch.Generator) -> Head:
    """Every query on position 0; a random value of the token written quietly into SCR."""
    hd = Head()
    hd.q[POS:POS + P, 0] = AMP
    hd.k[POS, 0] = AMP
    hd = _random_ov(hd, [TOK], gen)
    hd.o = hd.o * QUIET
    return hd


def parts(gen: torch.Generator) -> tuple[dict, dict]:
    """The heads of layer 0 and layer 1 by part name."""
    l0 = {"prev": previous(SOFT_PREV, PREV, 1.0), "decoy_prev": previous(MATCH, DPREV, QUIET),
          "sink": sink(gen), "sink2": sink(gen)}
    l1 = {"induction": induction(PREV, SOFT_IND, 1.0, OUT, 1.0),
          "decoy_induction": induction(DPREV, MATCH, 1.0 / QUIET, SCR, QUIET),
          "negative": negative(), "sink": sink(gen)}
    return l0, l1


def _names(layout) -> list[dict[str, str]]:
    """Each layer's {part: head name} of a layout."""
    return [{part: head_name(l, h) for part, h in lay.items()} for l, lay in enumerate(layout)]


def circuit(layout=LAYOUT) -> dict:
    """CIRCUIT.json: the real circuit (as planted-induction's), and the decoys and the negative head stated."""
    n = _names(layout)
    prev, ind = n[0]["prev"], n[1]["induction"]
    return {
        "heads": [prev, ind], "roles": {prev: "previous token", ind: "induction"},
        "edges": [{"sender": "embed", "receiver": f"{prev}.v"}, {"sender": prev, "receiver": f"{ind}.k"},
                  {"sender": "embed", "receiver": f"{ind}.q"}, {"sender": "embed", "receiver": f"{ind}.v"},
                  {"sender": ind, "receiver": "logits"}],
        "task": "induction", "vocab": V, "metric": INDUCTION_METRIC,
        "decoys": {
            n[0]["decoy_prev"]: {"pattern": "previous-token", "effect": "none", "outranks": prev,
                                 "why": "attends to i − 1 more sharply than the real head, but writes into DPREV "
                                        "(80–119), which only the decoy induction head reads"},
            n[1]["decoy_induction"]: {"pattern": "induction", "effect": "none", "outranks": ind,
                                      "why": "an induction pattern sharper than the real head's (its key reads "
                                             "DPREV), written into SCR (208–255), which nothing reads"},
            n[1]["negative"]: {"pattern": "self", "effect": "negative", "outranks": None,
                               "why": "attends to itself and writes the current token into OUT: never the answer "
                                      "here, so removing the head lowers the loss"}},
        "decoy_edges": [{"sender": n[0]["decoy_prev"], "receiver": f"{n[1]['decoy_induction']}.k",
                         "ties_with": {"sender": prev, "receiver": f"{ind}.k"}}],
        "sinks": [n[0]["sink"], n[0]["sink2"], n[1]["sink"]],
    }


MECHANISM = ("planted-induction's circuit — the previous-token head {prev} (soft: logit {sp}) copies each token into "
             "PREV, the induction head {ind} (logit {si}) matches the current token against PREV (K-composition) and "
             "copies the attended token into OUT — among decoys whose patterns are sharper: {dprev} attends to i − 1 "
             "sharply and writes into DPREV (80–119), read only by {dind}, an induction head sharper than {ind} that "
             "writes into SCR, which nothing reads; {neg} attends to itself and writes the current token into OUT "
             "({neg_scale} of the scale), so removing it lowers the loss")


@torch.no_grad()
def build_model(layout=LAYOUT, seed: int = SEED):
    """The HF model (GPT2LMHeadModel, float32): the parts placed by ``layout``, MLPs off, norms scaled."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config(2)).eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    for p in model.parameters():
        p.zero_()
    tr = model.transformer
    tr.wte.weight[:V, TOK:TOK + V] = torch.eye(V)
    tr.wpe.weight[:, POS:POS + P] = torch.eye(P)
    for block, lay, heads in zip(tr.h, layout, parts(gen)):
        placed = [None] * H
        for part, h in lay.items():
            placed[h] = heads[part]
        _set_heads(block, placed)
        block.mlp.c_fc.bias.fill_(-10.0)                    # every unit off (its weights are 0)
        for ln in (block.ln_1, block.ln_2):
            ln.weight.fill_(1.0)
    tr.ln_f.weight.fill_(1.0)
    model.lm_head.weight[:V, OUT:OUT + V] = torch.eye(V) * LOGIT
    norms = [m for b in tr.h for m in (b.ln_1, b.ln_2)] + [tr.ln_f]
    scale_norms(model, norms, lambda x, ln: (x.var(-1, unbiased=False) + ln.eps).sqrt())
    return model


def write(folder, layout=LAYOUT, seed: int = SEED):
    """Build and save the model with its tokenizer, CIRCUIT.json and MODEL_CARD.md into ``folder``."""
    c = circuit(layout)
    n = _names(layout)
    mech = MECHANISM.format(prev=n[0]["prev"], ind=n[1]["induction"], dprev=n[0]["decoy_prev"],
                            dind=n[1]["decoy_induction"], neg=n[1]["negative"], sp=f"{SOFT_PREV:g}",
                            si=f"{SOFT_IND:g}", neg_scale=f"{NEG:g}")
    distractors = (f"sinks {', '.join(c['sinks'])} (every query on position 0, a random value written into SCR at "
                   f"{QUIET:g} of the scale); the decoys and the negative head are stated in CIRCUIT.json "
                   "(\"decoys\", \"decoy_edges\"); MLPs off.")
    return save(build_model(layout, seed), c, mech, folder, distractors=distractors)


__all__ = ["DPREV", "SOFT_PREV", "SOFT_IND", "QUIET", "NEG", "LAYOUT", "SEED", "previous", "induction", "negative",
           "sink", "parts", "circuit", "build_model", "write", "D", "N_INNER"]
