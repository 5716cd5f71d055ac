"""Attention sinks: how much of each head's attention lands on the first tokens, what the sink writes, and
which heads are sinks on a text or a corpus.

For head h of layer l and the query at position i (a_ij its pattern row):

    share_k(i)  = Σ_{j < k} a_ij                  the share on the first k tokens (k = 1: a_i0)
    write_j     = ‖v_j · W_O[h]‖                  what key j adds to the residual stream per unit of attention
    write ratio = write_0 / mean_{j ≥ k} write_j  a sink is a place to park attention that writes little

share_k comes from :func:`attnkit.streaming.stream_stats` (``sinks=k``, block-wise: no T × T pattern, any length
up to the model's context) and write_j from the same forward (a hook on v, ‖v W_O‖² = v·(W_O W_Oᵀ)·v, an e × e
form per head), so a corpus of any size runs in memory bounded by one window. A causal model's query at
position i sees the same i + 1 keys whatever follows, so the share against position is also the share against
context length n = i + 1.

A head is a **sink head** when its mean share on the first token, over the queries from :data:`FROM_POSITION`
on, is at least :data:`SINK_SHARE` (see there why).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .charts import sinks as sink_charts
from .i18n import msg
from .model import Intervention
from .prompts import MAX_PROMPT_CHARS, windows as cut_windows
from .standard import head_name
from .streaming import stream_stats

__all__ = ["SINK_SHARE", "FROM_POSITION", "ValueWrites", "SinkStats", "measure_sinks", "text_windows"]

#: A sink head puts at least this share of its attention on the first token, on average over the queries from
#: FROM_POSITION on. Uniform attention would put 1/(i + 1) there (0.004 on average over positions 16 … 1,023),
#: so 0.3 is about 75 × that: a head for which the first token is the single largest place it looks.
SINK_SHARE = 0.3
#: Queries before this position are left out of a head's share: near the start the first token is simply one of
#: few keys (query 0 sees only it), which says nothing about a sink.
FROM_POSITION = 16


class ValueWrites(Intervention):
    """Records write_j = ‖v_j·W_O[h]‖ for every head h and position j of each layer, [B, H, T] per layer (a hook
    on v that changes nothing; under grouped-query attention query head h reads value head h // group)."""

    def __init__(self, weights):
        super().__init__()
        self.weights = weights
        self.writes: dict[int, torch.Tensor] = {}

    def v(self, v, layer):
        W_O = self.weights.layers[layer].W_O.double()                      # [H, e, d]
        gram = W_O @ W_O.transpose(-1, -2)                                 # [H, e, e]: ‖x W_O‖² = x G xᵀ
        group = self.weights.config.group
        vv = v.double().repeat_interleave(group, dim=1) if group > 1 else v.double()     # [B, H, T, e]
        sq = torch.einsum("bhte,hef,bhtf->bht", vv, gram, vv)
        self.writes[layer] = sq.clamp(min=0).sqrt().float().cpu()


@dataclass
class SinkStats:
    """Sink measurements on a set of token windows (each window's position 0 is its first token).

    share_pos  [L, H, T]  mean over windows of share_k(i) (NaN where no window is that long)
    first_pos  [L, H, T]  the same for the first token alone, a_i0
    windows_at [T]        windows that reach each position
    write_sink [L, H]     mean over windows of write_0
    write_rest [L, H]     mean over windows of mean_{j ≥ k} write_j
    """

    model: str
    k: int
    windows: int
    tokens: int
    share_pos: np.ndarray
    first_pos: np.ndarray
    windows_at: np.ndarray
    write_sink: np.ndarray
    write_rest: np.ndarray
    threshold: float = SINK_SHARE
    from_position: int = FROM_POSITION
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def n_layers(self) -> int:
        return self.share_pos.shape[0]

    @property
    def n_heads(self) -> int:
        return self.share_pos.shape[1]

    def _head_mean(self, per_pos: np.ndarray, start: int) -> np.ndarray:
        """[L, H]: the mean over queries i ≥ start, each position weighted by the windows that reach it."""
        w = self.windows_at[start:].astype(float)
        vals = np.nan_to_num(per_pos[..., start:])
        return (vals * w).sum(-1) / w.sum() if w.sum() else np.full(per_pos.shape[:2], np.nan)

    @property
    def first(self) -> np.ndarray:
        """[L, H] mean share on the first token over queries i ≥ from_position (or ≥ 1 in shorter windows)."""
        return self._head_mean(self.first_pos, self._start(1))

    @property
    def share(self) -> np.ndarray:
        """[L, H] mean share on the first k tokens over queries i ≥ max(k, from_position)."""
        return self._head_mean(self.share_pos, self._start(self.k))

    def _start(self, at_least: int) -> int:
        T = len(self.windows_at)
        return max(at_least, self.from_position) if T > max(at_least, self.from_position) else min(at_least, T - 1)

    def heads(self) -> list[tuple[str, float]]:
        """The sink heads (share on the first token ≥ threshold), largest share first: (L{l}H{h}, share)."""
        first = self.first
        out = [(head_name(l, h), float(first[l, h])) for l in range(self.n_layers) for h in range(self.n_heads)
               if first[l, h] >= self.threshold]
        return sorted(out, key=lambda x: -x[1])

    def to_pandas(self) -> pd.DataFrame:
        """One row per head: its shares, what the sink and the other keys write, and whether it is a sink head."""
        rows = []
        first, share = self.first, self.share
        for l in range(self.n_layers):
            for h in range(self.n_heads):
                rest = float(self.write_rest[l, h])
                rows.append({"layer": l, "head": h, "name": head_name(l, h), "first_token": float(first[l, h]),
                             f"first_{self.k}": float(share[l, h]), "write_sink": float(self.write_sink[l, h]),
                             "write_rest": rest,
                             "write_ratio": float(self.write_sink[l, h]) / rest if rest > 0 else np.nan,
                             "sink": bool(first[l, h] >= self.threshold)})
        return pd.DataFrame(rows)

    def by_position(self, bins: int = 32) -> pd.DataFrame:
        """Long table (layer, head, name, position, n, share): share_k against position in up to ``bins`` bins
        spaced evenly in log(i + 1) (each bin's mean weighted by the windows reaching each position)."""
        T = len(self.windows_at)
        edges = np.unique(np.round(np.geomspace(1, T, min(bins, T) + 1)).astype(int)) - 1
        edges[-1] = T
        rows = []
        for a, b in zip(edges[:-1], edges[1:]):
            w = self.windows_at[a:b].astype(float)
            if not w.sum():
                continue
            mean = (np.nan_to_num(self.share_pos[..., a:b]) * w).sum(-1) / w.sum()
            for l in range(self.n_layers):
                for h in range(self.n_heads):
                    rows.append({"layer": l, "head": h, "name": head_name(l, h), "position": int(a),
                                 "n": int(a) + 1, "share": float(mean[l, h])})
        return pd.DataFrame(rows)

    def chart(self, kind: str = "heads", heads: list[str] | None = None):
        """``kind="heads"``: the per-head heatmap of the share on the first k tokens
        (:func:`attnkit.charts.sinks.share_heatmap`); ``"position"``: that share against context length for
        ``heads`` (default: the sink heads, else the 4 heads with the largest share on the first token);
        ``"writes"``: what the sink writes against the other keys, per head."""
        if kind == "heads":
            return sink_charts.share_heatmap(self.to_pandas(), self.k)
        if kind == "position":
            return sink_charts.share_by_position(self.by_position(), heads or self.top_heads())
        if kind == "writes":
            return sink_charts.sink_writes(self.to_pandas())
        raise ValueError(f"kind is 'heads', 'position' or 'writes', not {kind!r}")

    def top_heads(self, n: int = 4) -> list[str]:
        """The sink heads, else the ``n`` heads with the largest share on the first token (largest first)."""
        sinks = [name for name, _ in self.heads()]
        if sinks:
            return sinks
        df = self.to_pandas().sort_values("first_token", ascending=False, na_position="last")
        return list(df["name"][:n])

    def to_dict(self) -> dict:
        df = self.to_pandas()
        return {"model": self.model, "k": self.k, "windows": self.windows, "tokens": self.tokens,
                "threshold": self.threshold, "from_position": self.from_position,
                "rule": str(sink_rule(self.threshold, self.from_position)),
                "sink_heads": [{"head": n, "share": round(s, 6)} for n, s in self.heads()],
                "heads": df.replace({np.nan: None}).to_dict("records"), "seconds": round(self.seconds, 3)}


def sink_rule(threshold: float = SINK_SHARE, start: int = FROM_POSITION):
    return msg("a sink head puts at least {share} of its attention on the first token, on average over the queries "
               "from position {start} on", share=f"{threshold:g}", start=start)


def measure_sinks(weights, windows, k: int = 4, *, model: str = "", progress: Callable[[int, int], None] | None = None,
                  block: int | None = None) -> SinkStats:
    """Sink measurements over token windows (lists of ids, each ≤ the model's context, ≥ 2 tokens): one streaming
    pass per window with the share on the first k tokens and every head's writes. ``progress(done, total)``
    after each window."""
    windows = [list(w) for w in windows if len(w) >= 2]
    if not windows:
        raise ValueError("no window of at least 2 tokens to measure")
    if k < 1:
        raise ValueError(f"k counts the first tokens and must be ≥ 1, got {k}")
    cfg = weights.config
    L, H, T = cfg.n_layers, cfg.n_heads, max(len(w) for w in windows)
    acc = {n: np.zeros((L, H, T)) for n in ("share", "first")}
    at = np.zeros(T, dtype=np.int64)
    w_sink, w_rest = np.zeros((L, H)), np.zeros((L, H))
    seconds = 0.0
    for n, ids in enumerate(windows):
        writes = ValueWrites(weights)
        kw = {} if block is None else {"block": block}
        st = stream_stats(weights, ids, sinks=k, intervention=writes, **kw)
        seconds += st.seconds
        t = len(ids)
        acc["share"][..., :t] += st.first_k[:, 0].double().cpu().numpy()
        acc["first"][..., :t] += st.first_token[:, 0].double().cpu().numpy()
        at[:t] += 1
        wr = torch.stack([writes.writes[l][0] for l in range(L)]).double().numpy()      # [L, H, t]
        w_sink += wr[..., 0]
        w_rest += wr[..., min(k, t - 1):].mean(-1)
        if progress:
            progress(n + 1, len(windows))
    with np.errstate(invalid="ignore", divide="ignore"):
        share, first = acc["share"] / at, acc["first"] / at
    return SinkStats(model, int(k), len(windows), sum(map(len, windows)), share, first, at,
                     w_sink / len(windows), w_rest / len(windows), seconds=seconds)


def text_windows(encode, texts, context: int, tokens: int | None = None) -> tuple[list[list[int]], int]:
    """(windows, tokens in the texts): each text encoded (its first :data:`attnkit.prompts.MAX_PROMPT_CHARS`
    characters) and cut into consecutive windows of ``context`` tokens, each its own cache (its first token the
    sink), keeping the first ``tokens`` tokens in all (None: every one); a window under 2 tokens has nothing to
    predict and is dropped. The second number is how many tokens the texts hold (to say when ``tokens`` asks for
    more; once ``tokens`` are taken the remaining texts are not read, so it is then at least ``tokens``)."""
    if context < 2:
        raise ValueError(f"a cache window holds at least 2 tokens, got {context}")
    out, have = [], 0
    for text in [texts] if isinstance(texts, str) else texts:
        room = None if tokens is None else tokens - have
        if room is not None and room < 2:
            break
        ids = encode(text[:MAX_PROMPT_CHARS])
        have += len(ids)
        out += cut_windows(ids if room is None else ids[:room], context, min_len=2)
    return out, have
