"""Direct logit attribution, per-head contributions between positions, and the logit lens.

**Direct logit attribution (DLA).** The final residual stream at a position is a sum of parts:

    x = embed + pos_embed + Σ_l (Σ_h L{l}H{h} + L{l} b_O + MLP{l})

(the parts of :mod:`attnkit.parts`, named as everywhere). The final LayerNorm is (x − μ(x))/σ(x)·w + b.
Holding σ at its actual value (as is standard), it is linear in x, so each part contributes
((part − μ(part))/σ)·w (RMSNorm: part/σ·w, no centring; :func:`attnkit.parts.held_norm`), and
b ("final norm bias") is its own part. Projected on W_U[answer] − W_U[distractor] (plus b_U's difference, its own part),
the parts add up to the model's actual logit difference.

**Contributions.** Head h of layer l moves ``pattern[i, j] · v_j·W_O[h]`` from source position j into
position i. Its size ‖·‖ = pattern_ij·‖v_j·W_O[h]‖, divided by the total size of everything added
to position i in that layer (every head's every source, plus the residual stream it is added to), is
the share plotted in the contribution graph (after Ferrando & Voita 2024, with norms).

**Logit lens.** The residual stream after each layer, at each position, read through the final norm
and the unembedding: top tokens, the answer's rank and probability. And each head's output at one
position projected onto the vocabulary the same way as DLA: the tokens it pushes up and down.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from . import attention, parts
from .i18n import msg
from .model import generate, norm, run
from .pieces import printable_token
from .standard import split_node
from .weights import Weights, head_name

__all__ = ["DLA", "direct_logit_attribution", "Contributions", "contributions", "graph_edges", "GRAPH_TOP",
           "Lens", "logit_lens", "lens_logits", "HeadVocab", "head_vocab", "Prediction", "next_tokens"]


# ----------------------------------------------------------------------------- DLA

@dataclass
class DLA:
    labels: list[str]                 # "embed", "pos_embed", "L3H7", "L3 b_O", "MLP3", "final norm bias", "b_U"
    kinds: list[str]                  # embed / pos_embed / head / attn_bias / mlp / norm_bias / unembed_bias
    layers: list                      # layer of each part (None for global parts)
    heads: list                       # head of each part (None unless a head)
    values: np.ndarray                # contribution of each part to the logit difference
    actual: float                     # the model's logit(answer) − logit(distractor) at pos
    pos: int
    n_layers: int
    n_heads: int

    @property
    def total(self) -> float:
        return float(self.values.sum())

    @property
    def head_map(self) -> np.ndarray:
        """[L, H] each head's direct contribution."""
        out = np.zeros((self.n_layers, self.n_heads))
        for k, l, h, v in zip(self.kinds, self.layers, self.heads, self.values):
            if k == "head":
                out[l, h] = v
        return out

    def head_frame(self) -> pd.DataFrame:
        """One row per head: layer, head, its direct contribution (logit_diff)."""
        hm = self.head_map
        return pd.DataFrame([{"layer": l, "head": h, "logit_diff": float(hm[l, h])}
                             for l in range(self.n_layers) for h in range(self.n_heads)])

    def frame(self):
        return pd.DataFrame({"part": self.labels, "kind": self.kinds,
                             "layer": pd.array(self.layers, dtype="Int64"),
                             "head": pd.array(self.heads, dtype="Int64"), "logit_diff": self.values})


#: DLA's kind of each part of the stream (by :func:`attnkit.standard.split_node`'s kind).
_DLA_KIND = {"embed": "embed", "pos_embed": "pos_embed", "head": "head", "b_O": "attn_bias", "mlp": "mlp"}


def _final_parts(weights: Weights, ids, pos: int) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The parts of the final stream at ``pos`` (:mod:`attnkit.parts`): their names, each one through the
    final norm with σ held at the real stream's (float64 [P, d], no bias), and the model's logits [T, V]."""
    L = weights.config.n_layers
    rows, final = parts.Rows([pos]), {}
    hooks = parts.hooks(weights, L, rows)
    hooks["resid_post"] = lambda t, l: final.__setitem__("x", t[0, pos]) if l == L - 1 else None
    logits = run(weights, list(ids), hooks=hooks).logits[0]
    sig = parts.sigma(final["x"], weights.config)
    return rows.names, parts.held_norm(rows.stack()[:, 0], sig, weights.lnf_w, weights.config), logits


@torch.inference_mode()
def direct_logit_attribution(weights: Weights, ids, answer: int, distractor: int, pos: int = -1) -> DLA:
    """Split logit(answer) − logit(distractor) at ``pos`` into the residual stream's parts."""
    cfg = weights.config
    pos = pos % len(list(ids))
    labels, normed, logits = _final_parts(weights, ids, pos)
    u = (weights.W_U[answer] - weights.W_U[distractor]).double()
    values = (normed @ u).cpu().numpy()
    nodes = [split_node(n) for n in labels]
    kinds = [_DLA_KIND[n[0]] for n in nodes]
    layers = [n[1] if len(n) > 1 else None for n in nodes]
    heads = [n[2] if n[0] == "head" else None for n in nodes]
    extra = []
    if weights.lnf_b is not None:
        labels.append("final norm bias"), kinds.append("norm_bias"), layers.append(None), heads.append(None)
        extra.append(float(weights.lnf_b.double() @ u))
    if weights.b_U is not None:
        labels.append("b_U"), kinds.append("unembed_bias"), layers.append(None), heads.append(None)
        extra.append(float(weights.b_U[answer].double() - weights.b_U[distractor].double()))
    values = np.concatenate([values, np.array(extra, dtype=np.float64)])
    actual = float(logits[pos, answer].double() - logits[pos, distractor].double())
    return DLA(labels, kinds, layers, heads, values, actual, pos, cfg.n_layers, cfg.n_heads)


# ----------------------------------------------------------------------------- contributions

@dataclass
class Contributions:
    """Shares of what is added to each position in each layer (see the module docstring).

    heads:   [L, H, T, T] share of head h's move from source j into position i (query i, key j)
    resid:   [L, T]       share of the residual stream entering the layer at position i
    """

    heads: np.ndarray
    resid: np.ndarray

    @property
    def edges(self) -> np.ndarray:
        """[L, T, T]: the share moved from j to i summed over heads."""
        return self.heads.sum(1)


#: Longest prompt for which contributions are computed (the [L, H, T, T] shares are kept).
CONTRIB_MAX_T = 128


@torch.inference_mode()
def contributions(weights: Weights, ids) -> Contributions:
    cfg = weights.config
    ids = list(ids)
    if len(ids) > CONTRIB_MAX_T:
        raise ValueError(f"contributions are computed for prompts of at most {CONTRIB_MAX_T} tokens "
                         f"(this one has {len(ids)})")
    tr = run(weights, ids, capture=["pattern", "v", "resid_pre"])
    heads, resid = [], []
    for l in range(cfg.n_layers):
        pat = tr["pattern", l][0].double()                                  # [H, T, T]
        v = attention.repeat_kv(tr["v", l], cfg.group)[0].double()                  # [H, T, e]
        vo = torch.einsum("hte,hed->htd", v, weights.layers[l].W_O.double()).norm(dim=-1)   # [H, T] ‖v_j W_O[h]‖
        c = pat * vo[:, None, :]                                            # [H, T(i), T(j)]
        r = tr["resid_pre", l][0].double().norm(dim=-1)                     # [T]
        denom = c.sum((0, 2)) + r
        heads.append((c / denom[None, :, None]).cpu().numpy())
        resid.append((r / denom).cpu().numpy())
    return Contributions(np.stack(heads), np.stack(resid))


#: Edges the contribution graph draws by default: the largest shares only (the LLM Transparency
#: Tool prunes its graph the same way); the page has a control for more.
GRAPH_TOP = 40


def graph_edges(con: Contributions, threshold: float, tokens: list[str] | None = None, top: int | None = None):
    """(nodes, edges) DataFrames for the contribution graph: a node (layer, position) is the residual
    stream at that position before ``layer`` (layer = L: after the last block); an edge from
    (l, j) to (l + 1, i) is attention (summed over heads, with the largest head named) or the residual
    stream itself (j = i), kept when its share is ≥ ``threshold``; with ``top``, only the ``top``
    edges of largest share among those (in their original order)."""
    L, H, T, _ = con.heads.shape
    tot = con.edges
    rows = []
    for l in range(L):
        ii, jj = np.nonzero(np.tril(tot[l] >= threshold))
        for i, j in zip(ii, jj):
            big = int(con.heads[l, :, i, j].argmax())
            rows.append({"layer": l, "from_pos": int(j), "to_pos": int(i), "share": float(tot[l, i, j]),
                         "kind": "attention", "top_head": head_name(l, big),
                         "top_head_share": float(con.heads[l, big, i, j])})
        for i in np.nonzero(con.resid[l] >= threshold)[0]:
            rows.append({"layer": l, "from_pos": int(i), "to_pos": int(i), "share": float(con.resid[l, i]),
                         "kind": "residual", "top_head": "", "top_head_share": float("nan")})
    edges = pd.DataFrame(rows, columns=["layer", "from_pos", "to_pos", "share", "kind", "top_head", "top_head_share"])
    if top is not None and len(edges) > top:
        keep = edges["share"].sort_values(ascending=False, kind="stable").index[:max(int(top), 0)]
        edges = edges.loc[sorted(keep)].reset_index(drop=True)
    nodes = pd.DataFrame([{"layer": l, "position": p} for l in range(L + 1) for p in range(T)])
    if tokens is not None:
        nodes["token"] = [tokens[p] for p in nodes["position"]]
        edges["from_token"] = [tokens[p] for p in edges["from_pos"]]
        edges["to_token"] = [tokens[p] for p in edges["to_pos"]]
    return nodes, edges


# ----------------------------------------------------------------------------- logit lens

def lens_logits(weights: Weights, resid: torch.Tensor) -> torch.Tensor:
    """Residual stream [..., d] through the final norm and the unembedding (what the model does at the end)."""
    x = norm(resid, weights.lnf_w, weights.lnf_b, weights.config)
    logits = torch.matmul(x, weights.W_U.T)
    return logits if weights.b_U is None else logits + weights.b_U


@dataclass
class Lens:
    """Rows: "embed" (before block 0), then after each block. top_* [rows, T, k]; answer_* [rows, T]."""

    rows: list[str]
    top_ids: np.ndarray
    top_probs: np.ndarray
    answer_rank: np.ndarray | None     # 1 = the top token
    answer_prob: np.ndarray | None
    answer_logit: np.ndarray | None

    def frame(self, tokens: list[str], decode) -> "object":
        """Long table: row, layer index, position, token, top token, its probability, answer rank/prob."""
        R, T, k = self.top_ids.shape
        dec = decode
        decode = (lambda t: printable_token(dec(t)))          # noqa: E731
        tokens = [printable_token(t) for t in tokens]
        recs = []
        for r in range(R):
            for p in range(T):
                rec = {"row": self.rows[r], "layer_index": r, "position": p, "token": tokens[p],
                       "top_token": decode(int(self.top_ids[r, p, 0])), "top_prob": float(self.top_probs[r, p, 0]),
                       "top_k": " | ".join(decode(int(t)) for t in self.top_ids[r, p])}
                if self.answer_rank is not None:
                    rec.update(answer_rank=int(self.answer_rank[r, p]), answer_prob=float(self.answer_prob[r, p]))
                recs.append(rec)
        return pd.DataFrame(recs)


@torch.inference_mode()
def logit_lens(weights: Weights, ids, answer: int | None = None, k: int = 5) -> Lens:
    cfg = weights.config
    tr = run(weights, list(ids), capture=["resid_post", "resid_pre"], layers=[0] + list(range(cfg.n_layers)))
    states = [tr["resid_pre", 0][0]] + [tr["resid_post", l][0] for l in range(cfg.n_layers)]
    tops, probs, ranks, aps, als = [], [], [], [], []
    for x in states:
        logits = lens_logits(weights, x).float()                 # [T, V], one layer at a time
        lp = torch.log_softmax(logits, -1)
        v, i = lp.topk(k, -1)
        tops.append(i.cpu().numpy()), probs.append(v.exp().cpu().numpy())
        if answer is not None:
            a = logits[:, answer]
            ranks.append((1 + (logits > a[:, None]).sum(-1)).cpu().numpy())
            aps.append(lp[:, answer].exp().cpu().numpy()), als.append(a.cpu().numpy())
    rows = ["embed"] + [f"after {l}" for l in range(cfg.n_layers)]
    st = (lambda xs: np.stack(xs) if answer is not None else None)
    return Lens(rows, np.stack(tops), np.stack(probs), st(ranks), st(aps), st(als))


@dataclass(frozen=True)
class Prediction:
    """One candidate next token: its id, its readable text and its probability (0–1). A byte-level token that is
    only a piece of a character (its bytes do not decode alone) also carries ``char``, the character(s) it
    starts as the model itself would finish them (its likeliest next tokens, greedily), and ``pieces``, how many
    tokens that took (this one included)."""

    token_id: int
    token: str
    prob: float
    char: str | None = None
    pieces: int = 1

    @property
    def shown(self) -> str:
        """The candidate as a reader reads it: its text, or for a piece of a character ``床[1/2]`` (the token
        labels' form, :func:`attnkit.pieces.token_texts`)."""
        return self.token if self.char is None else f"{self.char}[1/{self.pieces}]"


#: Tokens after a byte piece tried to finish its character (a UTF-8 character is at most 4 bytes).
FINISH = 3


def _finish(weights: Weights, ids: list[int], first: int, token_bytes) -> tuple[str | None, int]:
    """(the character(s) the byte piece ``first`` starts, finished by the model's likeliest next tokens; the
    tokens used), or (None, 1) when ``first`` decodes alone or no greedy continuation within FINISH finishes it."""
    piece = token_bytes([first])[0]
    try:
        piece.decode("utf-8")
        return None, 1
    except UnicodeDecodeError:
        pass
    room = weights.config.n_ctx - len(ids) - 1
    if room < 1:
        return None, 1
    more = generate(weights, ids + [first], min(FINISH, room)).tokens
    for n in range(1, len(more) + 1):
        try:
            return printable_token(b"".join(token_bytes([first, *more[:n]])).decode("utf-8")), n + 1
        except UnicodeDecodeError:
            continue
    return None, 1


@torch.inference_mode()
def next_tokens(weights: Weights, ids, decode, k: int = 5, token_bytes=None) -> list[Prediction]:
    """The model's top-``k`` next tokens after the prompt ``ids`` with their probabilities: the logit lens's
    last row (after the last block) at the last position, softmaxed in float64. ``decode(id) -> str``.
    ``token_bytes(ids) -> list[bytes]`` (``Loaded.token_bytes``): a candidate that is a piece of a character is
    finished greedily (:class:`Prediction`'s ``char``); the probability stays the first token's."""
    ids = list(ids)
    if not ids:
        raise ValueError(msg("the prompt has no tokens: nothing to predict from"))
    logits = run(weights, ids).logits[0, -1].double()
    p, i = torch.softmax(logits, -1).topk(min(k, logits.shape[-1]))
    out = []
    for v, t in zip(p.cpu(), i.cpu()):
        char, n = _finish(weights, ids, int(t), token_bytes) if token_bytes is not None else (None, 1)
        out.append(Prediction(int(t), printable_token(decode(int(t))), float(v), char, n))
    return out


@dataclass
class HeadVocab:
    """Per head, at one position: the k tokens its output pushes up most and down most (direct effect
    on the logits, through the final norm with its scale held fixed)."""

    promoted_ids: np.ndarray      # [L, H, k]
    promoted: np.ndarray          # [L, H, k] logit contributions
    suppressed_ids: np.ndarray    # [L, H, k]
    suppressed: np.ndarray
    pos: int

    def frame(self, layer: int, head: int, decode):
        dec = decode
        decode = (lambda t: printable_token(dec(t)))          # noqa: E731
        up = [{"direction": "promoted", "rank": r + 1, "token": decode(int(t)), "token_id": int(t), "logit": float(v)}
              for r, (t, v) in enumerate(zip(self.promoted_ids[layer, head], self.promoted[layer, head]))]
        down = [{"direction": "suppressed", "rank": r + 1, "token": decode(int(t)), "token_id": int(t),
                 "logit": float(v)}
                for r, (t, v) in enumerate(zip(self.suppressed_ids[layer, head], self.suppressed[layer, head]))]
        return pd.DataFrame(up + down)


@torch.inference_mode()
def head_vocab(weights: Weights, ids, pos: int = -1, k: int = 10) -> HeadVocab:
    cfg = weights.config
    ids = list(ids)
    pos = pos % len(ids)
    labels, normed, _ = _final_parts(weights, ids, pos)
    W_U = weights.W_U.float()
    heads = {name: i for i, name in enumerate(labels)}
    pi, pv, si, sv = [], [], [], []
    for l in range(cfg.n_layers):
        rows = normed[[heads[head_name(l, h)] for h in range(cfg.n_heads)]]
        d = rows.float() @ W_U.T                                                 # [H, V]
        v, i = d.topk(k, -1)
        pi.append(i.cpu().numpy()), pv.append(v.cpu().numpy())
        v, i = (-d).topk(k, -1)
        si.append(i.cpu().numpy()), sv.append((-v).cpu().numpy())
    return HeadVocab(np.stack(pi), np.stack(pv), np.stack(si), np.stack(sv), pos)
