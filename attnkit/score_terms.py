"""Why does query i attend to key j? One attention score split exactly into query-part × key-part terms.

With each norm's scale held at the value it had on this prompt (as direct logit attribution does), the
input a head reads at a position is a sum of the residual stream's parts (:mod:`attnkit.parts`)

    embed, pos_embed (learned positions), L{l}H{h} (z_h·W_O[h]) and "L{l} b_O" of every earlier layer,
    MLP{l} of every earlier layer

each centred on its own (LayerNorm's centring is linear, so it belongs to each part; RMSNorm has none),
divided by σ at that position and multiplied by the norm's weight; the norm's bias ("ln1 bias") and the
head's W_Q / W_K bias ("b_Q", "b_K") are parts of their own, not divided by σ. q_i and k_j are linear in
the parts; rotary is a linear map at each position (each part is rotated at its own position: i for the
query side, j for the key side), so

    score_ij = scale · Σ_c Σ_c′ ⟨Q_c(i), K_c′(j)⟩          (scale = 1/√d_head; 1 for GPT-Neo)

exactly. Under grouped-query attention the key side is the key/value head the query head shares. A
contrast score_ij − score_ij′ (why j beats j′) is split the same way.

One run of the model up to the head's layer projects each part onto the head's query (position i only)
and key space as the forward pass produces it, keeps those projections and divides them by σ when the run
has reached the layer (σ is known only then). A whole query row would keep parts × keys × d_head numbers;
when that is more than the logits a forward allocates (T × vocab; GPT-2 xl at T = 1,024 has 1,271 parts),
the row takes two runs instead — the first for σ and the model's q_i, the second reducing each part at once
to its key-side total per key — so memory stays within a forward's. Nothing T × T × parts either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from . import attention as A
from . import parts as stream
from .i18n import Message, msg
from .model import run
from .parts import KINDS
from .parts import kind as part_kind
from .parts import layer_of as part_layer
from .standard import head_name, parse_head
from .weights import Weights

__all__ = ["ScoreTermsError", "ScoreTerms", "RowTerms", "score_terms", "part_kind", "part_layer", "KINDS",
           "grouped", "top_terms", "explain", "layer0_split", "layer0_average", "refusal", "cost",
           "kept_bytes", "two_runs", "runner_up", "layer0_top"]

#: The stated names of the bias parts of the head's own layer.
LN_BIAS, B_Q, B_K = "ln1 bias", "b_Q", "b_K"


class ScoreTermsError(ValueError):
    """A request that cannot be split (a key the query cannot see, a position or head out of range)."""


# ----------------------------------------------------------------------------- results

@dataclass
class ScoreTerms:
    """score_ij (or score_ij − score_ij′ with ``against``) = Σ values[c, c′], c a query part, c′ a key part."""

    head: str                     # "L3H0"
    kv_head: int                  # the key/value head the key side is read from (GQA)
    query: int
    key: int
    against: int | None
    query_parts: list[str]
    key_parts: list[str]
    values: np.ndarray            # [len(query_parts), len(key_parts)], float64
    score: float                  # the model's own score (the contrast's difference with ``against``)
    scores: dict = field(default_factory=dict)   # key position -> the model's own score_i,key

    @property
    def total(self) -> float:
        return float(self.values.sum())

    @property
    def key_side(self) -> pd.Series:
        """Each key part's share summed over the query parts (what the key carries that the query reads)."""
        return pd.Series(self.values.sum(0), index=self.key_parts)

    @property
    def query_side(self) -> pd.Series:
        return pd.Series(self.values.sum(1), index=self.query_parts)

    def frame(self) -> pd.DataFrame:
        """One row per term: query part, key part, value, and each side's kind and layer."""
        qi, ki = np.meshgrid(np.arange(len(self.query_parts)), np.arange(len(self.key_parts)), indexing="ij")
        q = [self.query_parts[i] for i in qi.ravel()]
        k = [self.key_parts[j] for j in ki.ravel()]
        return pd.DataFrame({"query": q, "key": k, "value": self.values.ravel(),
                             "query_kind": [part_kind(n) for n in q], "key_kind": [part_kind(n) for n in k],
                             "query_layer": [part_layer(n) for n in q], "key_layer": [part_layer(n) for n in k]})

    def to_json(self) -> dict:
        terms = [{"query": qn, "key": kn, "value": float(self.values[a, b])}
                 for a, qn in enumerate(self.query_parts) for b, kn in enumerate(self.key_parts)]
        return {"head": self.head, "kv_head": self.kv_head, "query": self.query, "key": self.key,
                "against": self.against, "score": float(self.score),
                "scores": {str(k): float(v) for k, v in self.scores.items()}, "terms": terms, "total": self.total}


@dataclass
class RowTerms:
    """A whole query row: for every key the query sees, the model's score and its split by one side.

    key_side[c′, n] = ⟨q_i, K_c′(keys[n])⟩·scale (summed over the query parts);
    query_side[c, n] = ⟨Q_c(i), k_keys[n]⟩·scale (summed over the key parts). Each column adds up to the score."""

    head: str
    kv_head: int
    query: int
    keys: np.ndarray              # [J] key positions the query sees
    scores: np.ndarray            # [J] the model's own scores
    query_parts: list[str]
    key_parts: list[str]
    key_side: np.ndarray          # [Pk, J]
    query_side: np.ndarray        # [Pq, J]

    def frame(self, side: str = "key") -> pd.DataFrame:
        """Long table: key position, part, value (``side``: "key" or "query")."""
        vals, names = (self.key_side, self.key_parts) if side == "key" else (self.query_side, self.query_parts)
        P, J = vals.shape
        return pd.DataFrame({"key_pos": np.tile(self.keys, P), "part": np.repeat(names, J),
                             "kind": np.repeat([part_kind(n) for n in names], J), "value": vals.ravel()})


# ----------------------------------------------------------------------------- validation

def _check(cfg, T: int, layer: int, head: int, query: int, keys: list[int]) -> None:
    if not 0 <= layer < cfg.n_layers or not 0 <= head < cfg.n_heads:
        raise ScoreTermsError(f"no head {head_name(layer, head)}: the model has {cfg.n_layers} layers of "
                              f"{cfg.n_heads} heads")
    if not 0 <= query < T:
        raise ScoreTermsError(f"query position {query} is outside the prompt's {T} tokens (0 … {T - 1})")
    seen = A.key_range(query, cfg.window(layer))
    for j in keys:
        if not 0 <= j < T:
            raise ScoreTermsError(f"key position {j} is outside the prompt's {T} tokens (0 … {T - 1})")
        if j > query:
            raise ScoreTermsError(msg("key {key} comes after query {query}: a causal head cannot see it",
                                      key=j, query=query))
        if j not in seen:
            raise ScoreTermsError(msg("key {key} is outside layer {layer}'s window of {window} tokens: query {query} "
                                      "sees only keys {first} … {last}", key=j, layer=layer, window=cfg.window(layer),
                                      query=query, first=seen.start, last=seen.stop - 1))


def refusal(cfg, T: int, layer: int, head: int, query: int, key: int) -> str | None:
    """Why query ``query`` cannot be split against ``key`` (one line), or None when it can; no model run."""
    try:
        _check(cfg, T, layer, head, query, [key])
    except ScoreTermsError as e:
        return str(e)
    return None


def runner_up(trace, cfg, layer: int, head: int, query: int, key: int) -> int | None:
    """The key a split of ``key`` is contrasted with: the other key ``query`` scores highest in head
    ``layer``/``head``, read from ``trace`` (one prompt's run that captured ``scores``); None when the query sees
    no other key."""
    row = trace["scores", layer][0, head, query].double().cpu()
    seen = [j for j in A.key_range(query, cfg.window(layer)) if j != key]
    return None if not seen else seen[int(torch.argmax(row[seen]))]


def cost(cfg, T: int, layer: int, row: bool = True) -> float:
    """Floating-point operations of one split (a key, or a whole row with ``row``) of a head in ``layer`` at T
    tokens, roughly: the runs up to the layer (projections, attention, MLP; two for a row too large to keep,
    see :func:`two_runs`) and each part projected onto the query/key space."""
    d, e = cfg.d_model, cfg.d_head
    per_layer = T * (2 * (4 * d * d + 3 * d * cfg.d_mlp) + 4 * T * d)
    parts = layer * (cfg.n_heads + 2) + 4
    runs = layer + 1 + (layer if row and two_runs(cfg, T, layer, T) else 0)
    return float(runs * per_layer + parts * T * d * e * 4)


# ----------------------------------------------------------------------------- the parts

class _Parts:
    """Projects each residual-stream part onto the head's query (at i) and key (at ``keys``) spaces.

    ``fold`` is the norm held at σ (centring, weight: :func:`attnkit.parts.fold`) times W_Q[h] / W_K[g], [d, e],
    float64; a part x [.., d] (:class:`attnkit.parts.Part`) becomes x·fold / σ(position), then rotated at its
    position. With ``sigma`` None the projections are kept as they are and :meth:`finish` divides and rotates
    them once σ is known (one run); with ``sigma`` and ``q_total`` given (a row's second run), each key part is
    reduced at once to ⟨q_i, K_c′(j)⟩·scale per key."""

    def __init__(self, weights: Weights, layer: int, head: int, query: int, keys: list[int], sigma=None,
                 q_total=None, progress=None):
        cfg, lw = weights.config, weights.layers[layer]
        self.progress = progress
        self.w, self.cfg, self.scale = weights, cfg, cfg.attn_scale(layer)
        self.g = head // cfg.group
        self.query, self.keys, self.q_total = query, torch.tensor(keys), q_total
        self.fq, self.fk = stream.fold(lw.W_Q[head], lw.ln1_w, cfg), stream.fold(lw.W_K[self.g], lw.ln1_w, cfg)
        self.raw: list = []                   # (names, xq, xk, scaled) until σ is known (one run)
        self.sig_q = self.sig_k = None
        if sigma is not None:
            self.sig_q, self.sig_k = sigma[query], sigma[self.keys]             # [1], [J, 1]
        self.rot_q = self.rot_k = None
        if cfg.position == "rotary":
            self.rot_q = A.rotary_tables(weights.inv_freq, torch.tensor([query]), weights.rope_attention_scale,
                                         torch.float64)
            self.rot_k = A.rotary_tables(weights.inv_freq, self.keys, weights.rope_attention_scale, torch.float64)
        self.q_names, self.q_vals, self.k_names, self.k_vals = [], [], [], []

    def _rot(self, x: torch.Tensor, tables) -> torch.Tensor:
        return x if tables is None else A.rotate(x, *tables)

    def add(self, names: list[str], xq: torch.Tensor, xk: torch.Tensor, scaled: bool = True) -> None:
        """Parts already projected: xq [P, e] at the query, xk [P, J, e] at the keys (before σ and rotation)."""
        if self.sig_q is None:
            self.raw.append((names, xq, xk, scaled))
            return
        if scaled:
            xq, xk = xq / self.sig_q, xk / self.sig_k
        q = self._rot(xq[:, None, :], self.rot_q)[:, 0]
        k = self._rot(xk, self.rot_k)
        self.q_names += names
        self.q_vals.append(q)
        self.k_names += names
        self.k_vals.append(k if self.q_total is None else (k @ self.q_total) * self.scale)

    def finish(self, sigma: torch.Tensor, q_total=None) -> None:
        """One run: divide the kept projections by σ (now known) and rotate them, in the order they came."""
        self.sig_q, self.sig_k, self.q_total = sigma[self.query], sigma[self.keys], q_total
        raw, self.raw = self.raw, []
        for names, xq, xk, scaled in raw:
            self.add(names, xq, xk, scaled)

    def take(self, part: stream.Part) -> None:
        """One part of the stream projected at the query and at the keys (a head as z_h·(W_O[h]·fold), one
        head at a time: float64 copies of a whole layer's W_O and z, made and dropped layer after layer, left
        GPT-2 xl's process holding 0.8 GB more than it used, in the allocator's free lists)."""
        self.add([part.name], part.times(self.fq, [self.query]), part.times(self.fk, self.keys)[None])

    def biases(self, lw, head: int) -> None:
        """The head's own layer's norm bias and its W_Q / W_K biases (not divided by σ)."""
        e, J = self.fq.shape[1], len(self.keys)
        if lw.ln1_b is not None:
            bq = lw.ln1_b.double() @ lw.W_Q[head].double()
            bk = lw.ln1_b.double() @ lw.W_K[self.g].double()
            self.add([LN_BIAS], bq[None], bk[None, None].expand(1, J, e), scaled=False)
        zq, zk = torch.zeros(1, e, dtype=torch.float64), torch.zeros(1, J, e, dtype=torch.float64)
        if lw.b_Q is not None:
            self.add_one_side(B_Q, lw.b_Q[head].double(), "query", zq, zk)
        if lw.b_K is not None:
            self.add_one_side(B_K, lw.b_K[self.g].double(), "key", zq, zk)

    def add_one_side(self, name: str, vec: torch.Tensor, side: str, zq, zk) -> None:
        """A bias that lives on one side only: zero on the other (its terms there are all 0)."""
        if side == "query":
            self.add([name], vec[None], zk, scaled=False)
        else:
            self.add([name], zq, vec[None, None].expand(1, len(self.keys), -1), scaled=False)

    def hooks(self, layer: int) -> dict:
        """The parts' one hook set (:func:`attnkit.parts.hooks`), and a ``progress`` step after each earlier layer."""
        out = {name: [fn] for name, fn in stream.hooks(self.w, layer, self.take).items()}
        if self.progress is not None:
            out["z"].append(lambda t, l: self.progress(2 + l, layer + 2) if l < layer else None)
        return out


def _drop_empty(names: list[str], vals: torch.Tensor, side_bias: str) -> tuple[list[str], torch.Tensor]:
    """b_K has no query side and b_Q no key side: drop the part that is only zeros by construction."""
    keep = [n != side_bias for n in names]
    return [n for n, k in zip(names, keep) if k], vals[torch.tensor(keep)]


class _Reached(Exception):
    """Raised by a hook once the head's layer has projected its keys: the rest of the model is not needed."""


def _first_pass(weights: Weights, ids: list[int], layer: int, hooks: dict | None = None):
    """The residual stream entering ``layer`` (float64), σ of its norm at every position, and the model's
    own q and k there (rotated): blocks 0 … layer − 1 (with ``hooks``, point -> [fns]), then only ``layer``'s
    q/k/v projections — the run stops there."""
    q_name, k_name = ("q_rot", "k_rot") if weights.config.position == "rotary" else ("q", "k")
    got = {}

    def keep(name):
        def fn(t, l):
            if l == layer:
                got[name] = t[0]
                if name == k_name:
                    raise _Reached
        return fn

    points = {name: [keep(name)] for name in ("resid_pre", q_name, k_name)}
    for name, fns in (hooks or {}).items():
        points.setdefault(name, []).extend(fns)
    try:
        run(weights, ids, stop=layer + 1, logits=False, hooks=points)
    except _Reached:
        pass
    x = got["resid_pre"].double()
    return x, stream.sigma(x, weights.config), got[q_name], got[k_name]


def _held(weights: Weights, layer: int, x: torch.Tensor, sigma: torch.Tensor, W, b, positions) -> torch.Tensor:
    """q or k [n, e] in float64 from rows x [n, d] with the norm's σ held (what the parts add up to)."""
    lw, cfg = weights.layers[layer], weights.config
    xs = stream.held_norm(x, sigma, lw.ln1_w, cfg, lw.ln1_b)
    out = xs @ W.double() + (0 if b is None else b.double())
    if cfg.position != "rotary":
        return out
    tables = A.rotary_tables(weights.inv_freq, torch.tensor(positions), weights.rope_attention_scale, torch.float64)
    return A.rotate(out, *tables)


def kept_bytes(cfg, layer: int, n_keys: int) -> int:
    """Bytes one run keeps for a split of a head in ``layer`` against ``n_keys`` keys: every part's key-side
    projection (float64, d_head numbers per key)."""
    parts = 2 + layer * (cfg.n_heads + 2)                    # embed, pos_embed; per layer: heads, b_O, MLP
    return parts * n_keys * cfg.d_head * 8


#: Parts kept up to this many bytes never take a second run, whatever the model's vocabulary.
KEEP_FLOOR = 64 * 2**20


def two_runs(cfg, T: int, layer: int, n_keys: int) -> bool:
    """Whether the split takes two runs: when one run would keep more than the logits a forward allocates
    (T × vocab float32) and more than :data:`KEEP_FLOOR`."""
    return kept_bytes(cfg, layer, n_keys) > max(T * cfg.d_vocab * 4, KEEP_FLOOR)


@torch.inference_mode()
def _collect(weights: Weights, ids: list[int], layer: int, head: int, query: int, keys: list[int], row: bool,
             progress=None):
    step = progress or (lambda done, total: None)
    step(0, layer + 2)
    cfg, lw = weights.config, weights.layers[layer]
    g = head // cfg.group
    second = row and two_runs(cfg, len(ids), layer, len(keys))
    if second:                       # σ and q_i first, then each part reduced as it comes
        x, sigma, q, k = _first_pass(weights, ids, layer)
        step(1, layer + 2)
        parts = None
    else:                            # one run: the parts kept, divided by σ at the end
        parts = _Parts(weights, layer, head, query, keys, progress=progress)
        x, sigma, q, k = _first_pass(weights, ids, layer, hooks=parts.hooks(layer))
    own = A.scores(q[head, query][None].double(), k[g, keys].double(), cfg.attn_scale(layer))[0]
    q_held = _held(weights, layer, x[[query]], sigma[[query]], lw.W_Q[head], _row(lw.b_Q, head), [query])[0]
    k_held = _held(weights, layer, x[keys], sigma[keys], lw.W_K[g], _row(lw.b_K, g), keys)
    del x, q, k
    if second:
        parts = _Parts(weights, layer, head, query, keys, sigma, q_held, progress)
        run(weights, ids, stop=layer, hooks=parts.hooks(layer))
    else:
        parts.finish(sigma, q_held if row else None)
    parts.biases(lw, head)
    Q = torch.cat(parts.q_vals)                                                   # [P, e]
    K = torch.cat(parts.k_vals)                                                   # [P, J, e] or [P, J]
    qn, Q = _drop_empty(parts.q_names, Q, B_K)
    kn, K = _drop_empty(parts.k_names, K, B_Q)
    step(layer + 2, layer + 2)
    return dict(own=own, q_names=qn, Q=Q, k_names=kn, K=K, k_total=k_held, scale=parts.scale, g=g)


def _row(b, h):
    return None if b is None else b[h]


# ----------------------------------------------------------------------------- the entry point

def score_terms(weights: Weights, ids, layer: int, head: int, query: int, key: int | None = None,
                against: int | None = None, progress=None) -> ScoreTerms | RowTerms:
    """Split head ``(layer, head)``'s score from ``query`` to ``key`` into query-part × key-part terms.

    ``key=None``: the whole row (a :class:`RowTerms`: every key the query sees, each side's split);
    ``against=j′``: the split of score_i,key − score_i,j′. Positions are 0-based token positions. A key the
    query cannot see (after it, or outside a local window) raises :class:`ScoreTermsError` with the reason.
    ``progress(done, total)``: called after the first run and after each earlier layer of the second (a
    job's callback may raise to stop the work there)."""
    ids = [int(t) for t in (ids.flatten().tolist() if isinstance(ids, torch.Tensor) else ids)]
    cfg, T = weights.config, len(ids)
    if against is not None and key is None:
        raise ScoreTermsError("a contrast (against) needs a key to compare with")
    wanted = [j for j in (key, against) if j is not None]
    _check(cfg, T, layer, head, query, wanted)
    ids = ids[: query + 1]                       # causal: nothing after the query changes its row
    name = head_name(layer, head)
    if key is None:
        keys = list(A.key_range(query, cfg.window(layer)))
        got = _collect(weights, ids, layer, head, query, keys, row=True, progress=progress)
        query_side = (got["Q"] @ got["k_total"].T) * got["scale"]                # [Pq, J]
        return RowTerms(name, got["g"], query, np.array(keys), got["own"].numpy(), got["q_names"],
                        got["k_names"], got["K"].numpy(), query_side.numpy())
    got = _collect(weights, ids, layer, head, query, wanted, row=False, progress=progress)
    grid = torch.einsum("pe,cje->pcj", got["Q"], got["K"]) * got["scale"]       # [Pq, Pk, J]
    own = got["own"].tolist()
    values = grid[..., 0] - (grid[..., 1] if against is not None else 0)
    score = own[0] - (own[1] if against is not None else 0.0)
    return ScoreTerms(name, got["g"], query, key, against, got["q_names"], got["k_names"], values.numpy(),
                      float(score), dict(zip(wanted, own)))


# ----------------------------------------------------------------------------- views

def grouped(st: ScoreTerms, by: str = "kind") -> pd.DataFrame:
    """The terms summed by group on each side: ``by="kind"`` (embeddings / heads / MLPs / biases) or
    ``by="layer"`` (embed, L0, L1, …, bias). Columns query_group, key_group, value (every pair, zeros kept)."""
    if by not in ("kind", "layer"):
        raise ValueError(f"group by 'kind' or 'layer', not {by!r}")
    of = part_kind if by == "kind" else part_layer
    df = st.frame()
    df["query_group"], df["key_group"] = [of(n) for n in df["query"]], [of(n) for n in df["key"]]
    out = df.groupby(["query_group", "key_group"], sort=False, as_index=False)["value"].sum()
    order = {g: n for n, g in enumerate(dict.fromkeys([of(n) for n in st.query_parts + st.key_parts]))}
    rank = out["query_group"].map(order) * len(order) + out["key_group"].map(order)
    return out.iloc[np.argsort(rank.to_numpy(), kind="stable")].reset_index(drop=True)


def top_terms(st: ScoreTerms, n: int = 10) -> pd.DataFrame:
    """The ``n`` terms of largest size, with each one's share of the score."""
    flat = st.values.ravel()
    order = np.argsort(-np.abs(flat), kind="stable")[:n]
    P = len(st.key_parts)
    rows = [{"query": st.query_parts[i // P], "key": st.key_parts[i % P], "value": float(flat[i]),
             "share": float(flat[i] / st.score) if st.score else float("nan")} for i in order]
    return pd.DataFrame(rows, columns=["query", "key", "value", "share"])


def _side_top(series: pd.Series) -> tuple[str, float]:
    name = series.abs().idxmax()
    return str(name), float(series[name])


def _carries(part: str):
    kind = part_kind(part)
    if kind in ("heads", "MLPs"):
        return msg("{part}'s output", part=part)
    if part == "embed":
        return msg("the token embedding")
    if part == "pos_embed":
        return msg("the position embedding")
    return part


def explain(st: ScoreTerms, tokens: list[str] | None = None) -> Message:
    """One plain-text sentence from the real numbers: the key part that matters most (its key-side total: summed
    over the query parts), the query part reading it most and that one term (query part × key part). Each number
    is named by what it is — a side total or a single term — the same words as the "why" panel's head buttons
    (side totals). Not Markdown: show it as text. A :class:`~attnkit.i18n.Message`: English as a str, shown in
    the session's language.

    A single score reads "towards" or "away from" by the sign of that key part (it raises or lowers the
    score); a contrast (``against``) reads by the sign of the difference itself: which key wins, by how much,
    and the key part whose difference between the two keys matters most."""
    def tok(p):
        return f"{p} ({tokens[p]!r})" if tokens is not None else str(p)
    kpart, kval = _side_top(st.key_side)
    col = pd.Series(st.values[:, st.key_parts.index(kpart)], index=st.query_parts)
    qpart, qval = _side_top(col)
    common = dict(head=st.head, query=tok(st.query), kpart=_carries(kpart), kval=f"{kval:+.3f}",
                  score=f"{st.score:+.3f}", qpart=_carries(qpart), qval=f"{qval:+.3f}", n=st.values.size,
                  total=f"{st.total:+.4f}", term=f"{qpart} × {kpart}")
    if st.against is not None:
        wins, loses = (st.key, st.against) if st.score >= 0 else (st.against, st.key)
        return msg("From {query}, {head} scores {wins} above {loses} (score_{query_pos},{key_pos} − "
                   "score_{query_pos},{against_pos} = {score}) above all because {kpart} differs between the two "
                   "keys (key side total {kval} of the difference), read most by the query's {qpart} (the single "
                   "term {term} = {qval}); the sum of all {n} terms is {total}.", wins=tok(wins), loses=tok(loses),
                   query_pos=st.query, key_pos=st.key, against_pos=st.against, **common)
    goes = msg("towards") if kval >= 0 else msg("away from")
    return msg("{head} attends from {query} {goes} {key} above all because its key carries {kpart} (key side total "
               "{kval} of the score {score}), read most by the query's {qpart} (the single term {term} = {qval}); the "
               "sum of all {n} terms is {total}.", goes=goes, key=tok(st.key), **common)


# ----------------------------------------------------------------------------- layer 0: the seeds' X·Xᵀ

L0_CELLS = ("token × token", "token × position", "position × token", "position × position", "biases")


def layer0_split(st: ScoreTerms) -> dict[str, float]:
    """A layer-0 score split into token × token, token × position, position × token, position × position
    (query side × key side) and the bias terms. Learned positions only: with rotary, positions are not a
    part (they rotate every part) and this split is refused with that reason."""
    if parse_head(st.head)[0] != 0:
        raise ScoreTermsError(f"{st.head} is not in layer 0: its input holds earlier heads and MLPs too")
    if "pos_embed" not in st.query_parts:
        raise ScoreTermsError(msg("this model has no position embedding (rotary): positions rotate every part, "
                                  "so there is no token × position split"))
    name = {"embed": "token", "pos_embed": "position"}
    out = dict.fromkeys(L0_CELLS, 0.0)
    for a, qn in enumerate(st.query_parts):
        for b, kn in enumerate(st.key_parts):
            cell = f"{name[qn]} × {name[kn]}" if qn in name and kn in name else "biases"
            out[cell] += float(st.values[a, b])
    return out


def layer0_top(weights: Weights, ids, head: int, query: int) -> tuple[dict[str, float], int]:
    """:func:`layer0_split` of head L0H``head``'s score from ``query`` to the key it scores highest: (the
    split, that key)."""
    row = score_terms(weights, ids, 0, head, query)
    best = int(row.keys[int(np.argmax(row.scores))])
    return layer0_split(score_terms(weights, ids, 0, head, query, best)), best


def layer0_average(weights: Weights, prompts: list[list[int]], head: int, query: int = -1,
                   progress=None) -> pd.DataFrame:
    """:func:`layer0_split` over a prompt set: in each prompt, head L0H``head``'s score from ``query``
    (default the last token) to the key it scores highest. Columns cell, mean, std, n (std over prompts).
    ``progress(done, total)``: called before each prompt."""
    rows = []
    for n, ids in enumerate(prompts):
        if progress is not None:
            progress(n, len(prompts))
        rows.append(layer0_top(weights, ids, head, query % len(ids))[0])
    df = pd.DataFrame(rows, columns=list(L0_CELLS))
    return pd.DataFrame({"cell": list(L0_CELLS), "mean": df.mean().to_numpy(),
                         "std": df.std(ddof=1).to_numpy() if len(df) > 1 else np.full(len(L0_CELLS), np.nan),
                         "n": len(df)})
