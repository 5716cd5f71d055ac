"""planted-llama: the induction circuit of planted-induction in a Llama-family model — RMSNorm, rotary
positions (θ = 10000, no position embedding), grouped-query attention (4 query heads, 2 key/value heads,
d_head 128), gated SiLU MLPs, untied unembedding.

Positions exist only through the rotation, so the previous-token head L0H0 reads a constant feature
(CONST, residual dim 160, set in every token's embedding) on both sides: its query is 1 and its key
e^{iθ_f} in each of the 12 fastest rotary pairs (θ_f > 0.2), so its score Σ_f cos(θ_f (i − j − 1)) peaks at
j = i − 1 (margin ≥ 1.8 before scaling). The induction head L1H0 matches tokens in the 20 slowest
pairs (θ_f < 0.0021: at most 0.09 rad over the 48 positions, so a match scores ≥ 99.6 % at any
distance): query = the current token (TOK), key = PREV (written by L0H0 — K-composition); its value
(TOK) is copied into OUT. L0H1 and L1H1 share their key/value head with the planted heads (GQA) but
have W_Q = 0 (uniform attention) and a random W_O into SCR; key/value head 1 (query heads 2, 3) is a
random distractor: head 2 a random query, head 3 the key's own map (attends to copies of the token).
"""
from __future__ import annotations

import math

import torch

from .gpt2 import D, H, INDUCTION_METRIC, LOGIT, MATCH, N_INNER, OUT, P, PREV, SCR, TOK, V, scale_norms

KV, E = 2, 128
CONST = 160
THETA = 10000.0
FAST_CUT, SLOW_CUT = 0.2, 0.0021
CIRCUIT = {"heads": ["L0H0", "L1H0"], "roles": {"L0H0": "previous token", "L1H0": "induction"},
           "edges": [{"sender": "embed", "receiver": "L0H0.v"}, {"sender": "L0H0", "receiver": "L1H0.k"},
                     {"sender": "embed", "receiver": "L1H0.q"}, {"sender": "embed", "receiver": "L1H0.v"},
                     {"sender": "L1H0", "receiver": "logits"}],
           "task": "induction", "vocab": V, "metric": INDUCTION_METRIC}
MECHANISM = ("the previous-token head L0H0 finds position i − 1 by rotary positions alone (a constant feature "
             "on both sides, its key turned by one step in the 12 fastest rotary pairs) and copies the token "
             "into PREV; the induction head L1H0 (sharing key/value head 0 with L0H1 under grouped-query "
             "attention) matches the current token against PREV in the 20 slowest rotary pairs (K-composition) "
             "and copies the attended token into OUT")

DISTRACTORS = ("L0H1 and L1H1 share key/value head 0 with the planted heads but have W_Q = 0 (uniform attention) "
               "and a random W_O into SCR; key/value head 1 is random (seeded) of the planted norm: query head 2 "
               "random, query head 3 the key's own map (it attends to copies of its token); random MLP units read "
               "and write SCR only.")


def config():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=V + 1, hidden_size=D, intermediate_size=N_INNER, num_hidden_layers=2,
                       num_attention_heads=H, num_key_value_heads=KV, head_dim=E, max_position_embeddings=P,
                       rope_theta=THETA, rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
                       attention_bias=False, mlp_bias=False, bos_token_id=V, eos_token_id=V)


def frequencies() -> torch.Tensor:
    return 1.0 / (THETA ** (torch.arange(0, E, 2).double() / E))


def _pairs() -> tuple[list[int], list[int]]:
    f = frequencies()
    fast = [i for i in range(E // 2) if f[i] > FAST_CUT]
    slow = [i for i in range(E // 2) if f[i] < SLOW_CUT]
    return fast, slow


def _content_dims() -> list[int]:
    """The V head dims with (almost) no rotation: both halves of the slowest pairs."""
    _, slow = _pairs()
    dims = [i for i in slow] + [i + E // 2 for i in slow]
    assert len(dims) >= V, "not enough slow rotary dims for the vocabulary"
    return dims[:V]


def _amp(margin: float) -> float:
    """Entry size on each side so that a score ``margin`` (before scaling) is worth MATCH logits."""
    return math.sqrt(MATCH * math.sqrt(E) / margin)


def prev_token_qk() -> tuple[torch.Tensor, torch.Tensor]:
    """W_Q, W_K [D, E]: CONST -> 1 / e^{iθ_f} in the fast pairs (score Σ cos(θ_f (i − j − 1)))."""
    fast, _ = _pairs()
    f = frequencies()
    amp = _amp(1.8)
    q, k = torch.zeros(D, E), torch.zeros(D, E)
    for i in fast:
        q[CONST, i] = amp
        k[CONST, i] = amp * math.cos(f[i])
        k[CONST, i + E // 2] = amp * math.sin(f[i])
    return q, k


def _one_hot(rows_from: int, dims: list[int], scale: float) -> torch.Tensor:
    m = torch.zeros(D, E)
    for t, c in enumerate(dims[:V]):
        m[rows_from + t, c] = scale
    return m


def _random(shape, gen, norm: float, rows: slice | None = None) -> torch.Tensor:
    m = torch.zeros(shape)
    r = torch.randn(shape, generator=gen)
    if rows is not None:
        m[rows] = r[rows]
    else:
        m = r
    return m * norm / m.norm()


def _layer(block, planted_q, kv_planted: tuple, planted_o: torch.Tensor, reads: slice, gen) -> None:
    """Query heads: 0 planted, 1 uniform (W_Q = 0), 2 random, 3 = its key's map; kv heads: 0 planted, 1 random."""
    k0, v0 = kv_planted
    qn, on = planted_q.norm(), planted_o.norm()
    k1 = _random((D, E), gen, k0.norm(), reads)
    v1 = _random((D, E), gen, v0.norm(), reads)
    qs = [planted_q, torch.zeros(D, E), _random((D, E), gen, qn, reads), k1.clone()]
    outs = [planted_o] + [_random((E, D), gen, on, None) * _scr_mask() for _ in range(3)]
    block.self_attn.q_proj.weight.copy_(torch.cat(qs, 1).T)
    block.self_attn.k_proj.weight.copy_(torch.cat([k0, k1], 1).T)
    block.self_attn.v_proj.weight.copy_(torch.cat([v0, v1], 1).T)
    block.self_attn.o_proj.weight.copy_(torch.cat(outs, 0).T)


def _scr_mask() -> torch.Tensor:
    m = torch.zeros(1, D)
    m[0, SCR:] = 1.0
    return m


def _mlp(block, gen) -> None:
    """Random units reading and writing SCR only."""
    for lin, shape in ((block.mlp.gate_proj, (N_INNER, D)), (block.mlp.up_proj, (N_INNER, D))):
        w = torch.zeros(shape)
        w[:, SCR:] = torch.randn(N_INNER, D - SCR, generator=gen)
        lin.weight.copy_(w * math.sqrt(V) / w.norm())
    w = torch.zeros(D, N_INNER)
    w[SCR:] = torch.randn(D - SCR, N_INNER, generator=gen)
    block.mlp.down_proj.weight.copy_(w * math.sqrt(V) / w.norm())


def _scale_norms(model) -> None:
    """Each RMSNorm's weight := the median rms of its input over the probe, in forward order."""
    inner = model.model
    norms = [m for b in inner.layers for m in (b.input_layernorm, b.post_attention_layernorm)] + [inner.norm]
    scale_norms(model, norms, lambda x, nm: (x.pow(2).mean(-1) + nm.variance_epsilon).sqrt())


@torch.no_grad()
def build_model(seed: int = 3):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(config()).eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    for p in model.parameters():
        p.zero_()
    inner = model.model
    inner.embed_tokens.weight[:V, TOK:TOK + V] = torch.eye(V)
    inner.embed_tokens.weight[:, CONST] = 1.0
    content = _content_dims()
    eye_v = torch.zeros(E, D)
    for t in range(V):
        eye_v[t, PREV + t] = 1.0
    q0, k0 = prev_token_qk()
    _layer(inner.layers[0], q0, (k0, _one_hot(TOK, list(range(V)), 1.0)), eye_v, slice(TOK, TOK + V), gen)
    amp = _amp(1.0)
    out = torch.zeros(E, D)
    for t in range(V):
        out[t, OUT + t] = 1.0
    _layer(inner.layers[1], _one_hot(TOK, content, amp), (_one_hot(PREV, content, amp), _one_hot(TOK, list(range(V)), 1.0)),
           out, slice(TOK, PREV + V), gen)
    for block in inner.layers:
        _mlp(block, gen)
        block.input_layernorm.weight.fill_(1.0)
        block.post_attention_layernorm.weight.fill_(1.0)
    inner.norm.weight.fill_(1.0)
    model.lm_head.weight[:V, OUT:OUT + V] = torch.eye(V) * LOGIT
    _scale_norms(model)
    return model
