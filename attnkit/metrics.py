"""Numbers read off attention patterns: entropy per position, and per-head scores.

Patterns are ``[..., T, S]`` (query rows, key columns), usually a layer's
``[B, H, T, T]`` or all layers stacked ``[L, B, H, T, T]`` from ``Trace.stack('pattern')``.
Every score is a fraction of attention mass in [0, 1] unless said otherwise.
"""
from __future__ import annotations

import math

import torch

__all__ = [
    "entropy", "normalised_entropy", "first_token_mass", "diagonal_mass", "head_scores",
    "induction_scores", "induction_on_text", "HEAD_STATS", "repeated_random_tokens", "induction_scores_tl",
]

#: The head statistics offered by :func:`head_scores`, with a short description.
HEAD_STATS = {
    "mean entropy": "mean over query positions i ≥ 1 of −Σ_j a_ij·ln a_ij, divided by ln(i+1) (1 = uniform)",
    "previous-token": "mean attention of position i on i−1",
    "first-token": "mean attention on position 0 (the sink), over i ≥ 1",
    "self": "mean attention of position i on itself, over i ≥ 1",
    "mean distance": "mean over i of Σ_j a_ij·(i−j), in tokens",
    "duplicate-token": "mean attention on earlier copies of the current token (positions that have one)",
    "induction": "mean attention on the token after an earlier copy of the current token (A B … A → B)",
}


def entropy(pattern: torch.Tensor) -> torch.Tensor:
    """H_i = −Σ_j a_ij·ln a_ij in nats (0·ln 0 = 0): ``[..., T, S] -> [..., T]``."""
    p = pattern.double() if pattern.dtype in (torch.float16, torch.bfloat16) else pattern
    return -torch.special.xlogy(p, p).sum(-1)


def normalised_entropy(pattern: torch.Tensor) -> torch.Tensor:
    """H_i / ln(n_i) with n_i = visible keys of query i (i+1 under the causal mask without cache).

    1 means uniform over the visible keys, 0 one-hot. Position 0 (one key, no spread) is NaN.
    """
    T, S = pattern.shape[-2:]
    n = torch.arange(S - T + 1, S + 1, device=pattern.device, dtype=torch.float64)
    h = entropy(pattern).double() / torch.log(n)
    return torch.where(n > 1, h, torch.full_like(h, math.nan)).to(pattern.dtype if pattern.is_floating_point() else torch.float32)


def first_token_mass(pattern: torch.Tensor) -> torch.Tensor:
    """a_i0: attention on the first position, ``[..., T, S] -> [..., T]``."""
    return pattern[..., 0]


def diagonal_mass(pattern: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """a_{i, i+offset} for every query that has such a key ([..., T − |offset|]); offset −1 = previous token."""
    return torch.diagonal(pattern, offset=offset, dim1=-2, dim2=-1)


def _mean_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Mean over the query positions selected by boolean ``rows`` [T] of values [..., T] (NaN if none)."""
    if rows.sum() == 0:
        return torch.full(values.shape[:-1], math.nan, dtype=values.dtype, device=values.device)
    return values[..., rows].mean(-1)


def _same_token(ids: torch.Tensor) -> torch.Tensor:
    """[T, T] bool: j < i and ids[j] == ids[i]."""
    ids = ids.reshape(-1)
    T = ids.shape[0]
    eq = ids[:, None] == ids[None, :]
    return eq & torch.ones(T, T, dtype=torch.bool, device=ids.device).tril(-1)


def induction_on_text(pattern: torch.Tensor, ids) -> torch.Tensor:
    """Attention from i to j+1 for every earlier copy j of token i (A B … A → B), mean over such i."""
    ids = torch.as_tensor(ids, device=pattern.device).reshape(-1)
    same = _same_token(ids)
    target = torch.zeros_like(same)
    target[:, 1:] = same[:, :-1]              # key j+1 for each earlier copy j
    target &= torch.ones_like(same).tril(-1)  # j+1 must still be in the past
    mass = (pattern * target.to(pattern.dtype)).sum(-1)
    return _mean_rows(mass, target.any(-1))


def head_scores(pattern: torch.Tensor, ids=None) -> dict[str, torch.Tensor]:
    """Every statistic of :data:`HEAD_STATS` for patterns ``[..., T, T]`` -> tensors ``[...]``.

    ``ids`` (the tokens) are needed for duplicate-token and induction; without them those are NaN.
    """
    T = pattern.shape[-1]
    p = pattern.float()
    later = torch.arange(T, device=p.device) >= 1
    out = {
        "mean entropy": torch.nanmean(normalised_entropy(p)[..., 1:], -1) if T > 1 else _nan(p),
        "previous-token": diagonal_mass(p, -1).mean(-1) if T > 1 else _nan(p),
        "first-token": _mean_rows(first_token_mass(p), later),
        "self": _mean_rows(diagonal_mass(p, 0), later),
        "mean distance": (p * (torch.arange(T, device=p.device)[:, None] - torch.arange(T, device=p.device)[None, :])
                          .clamp(min=0).to(p.dtype)).sum(-1).mean(-1),
    }
    if ids is not None:
        same = _same_token(torch.as_tensor(ids, device=p.device))
        out["duplicate-token"] = _mean_rows((p * same.to(p.dtype)).sum(-1), same.any(-1))
        out["induction"] = induction_on_text(p, ids)
    else:
        out["duplicate-token"] = out["induction"] = _nan(p)
    return out


def _nan(p: torch.Tensor) -> torch.Tensor:
    return torch.full(p.shape[:-2], math.nan, device=p.device)


def repeated_random_tokens(n: int, vocab: int, seed: int = 0, batch: int = 4, low: int = 0) -> torch.Tensor:
    """[batch, 2n]: n random tokens, then the same n again (the standard induction test input)."""
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(low, vocab, (batch, n), generator=g)
    return torch.cat([half, half], dim=1)


def induction_scores(weights, n: int = 50, batch: int = 4, seed: int = 0) -> torch.Tensor:
    """[L, H] induction score: on repeated random tokens, mean attention from position i in the
    second half to i − n + 1 (the token that followed the first copy of token i)."""
    from .model import run

    n = min(n, weights.config.n_ctx // 2)
    ids = repeated_random_tokens(n, weights.config.d_vocab, seed=seed, batch=batch).to(weights.device)
    pats = run(weights, ids, capture=["pattern"]).stack("pattern")      # [L, B, H, 2n, 2n]
    diag = torch.diagonal(pats, offset=-(n - 1), dim1=-2, dim2=-1)      # a_{i, i-n+1}, i = n-1 … 2n-1
    return diag[..., 1:].mean(dim=(-1, 1))                              # queries i ≥ n, mean over batch


def induction_scores_tl(weights, bos_id: int, n: int = 50, batch: int = 10, seed: int = 0) -> torch.Tensor:
    """[L, H] induction score by TransformerLens's recipe (as in its induction-head tutorials): a BOS
    token, then n random tokens, then the same n again; the mean over the batch and over the *whole*
    diagonal at offset −(n − 1), a_{i, i−n+1} for i = n−1 … 2n (2 of its n + 2 cells lie before the
    repeat, so a perfect head scores n/(n + 2))."""
    from .model import run

    n = min(n, (weights.config.n_ctx - 1) // 2)
    half = repeated_random_tokens(n, weights.config.d_vocab, seed=seed, batch=batch)
    ids = torch.cat([torch.full((batch, 1), int(bos_id), dtype=half.dtype), half], dim=1).to(weights.device)
    pats = run(weights, ids, capture=["pattern"]).stack("pattern")      # [L, B, H, 2n+1, 2n+1]
    return torch.diagonal(pats, offset=-(n - 1), dim1=-2, dim2=-1).mean(dim=(-1, 1))


def head_table(weights, ids, induction_n: int = 50, bos_id: int | None = None):
    """Per-head scores as rows (layer, head, stat…): on ``ids`` plus induction on repeated random tokens
    (and, given the model's ``bos_id``, by TransformerLens's recipe too)."""
    import pandas as pd

    from .model import run

    pats = run(weights, ids, capture=["pattern"]).stack("pattern")[:, 0]        # [L, H, T, T]
    scores = head_scores(pats, ids)
    ind = induction_scores(weights, n=induction_n)
    tl = None if bos_id is None else induction_scores_tl(weights, bos_id, n=induction_n)
    L, H = ind.shape
    rows = []
    for l in range(L):
        for h in range(H):
            row = {"layer": l, "head": h}
            row.update({k: float(v[l, h]) for k, v in scores.items()})
            row["induction (random repeats)"] = float(ind[l, h])
            if tl is not None:
                row["induction (TL recipe)"] = float(tl[l, h])
            rows.append(row)
    return pd.DataFrame(rows)


def cli(argv=None) -> int:
    """``python -m attnkit heads --model M [--text-file F] [--markdown]``: per-head scores."""
    import sys
    from pathlib import Path

    from .cli import args as T
    from .loading import LoadError, load
    from .prompts import PromptError, decode_text, truncate

    p = T.Parser(prog="python -m attnkit heads", description="per-head attention scores")
    p.add_argument("--model", default="attnkit-tiny", type=T.utf8_text)
    p.add_argument("--device", default="cpu", type=T.device)
    p.add_argument("--text-file", default=None, type=T.existing_nonempty_text_file,
                   help="UTF-8 text (default: a built-in English paragraph)")
    p.add_argument("--induction-n", type=T.positive_int, default=50, help="length of the random half that is repeated")
    p.add_argument("--top", type=T.positive_int, default=5, help="show the best heads per score")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    a = p.parse_args(argv)
    try:
        m = load(a.model, a.device)
        text = decode_text(Path(a.text_file).read_bytes(), a.text_file) if a.text_file else _DEFAULT_TEXT
    except (LoadError, PromptError, OSError) as e:
        print(f"attnkit heads: {e}", file=sys.stderr)
        return 2
    ids, dropped = truncate(m.encode(text), m.config.n_ctx)
    bos = getattr(m.tokenizer, "bos_token_id", None) if getattr(m, "tokenizer", None) is not None else None
    df = head_table(m.weights, ids, a.induction_n, bos_id=bos)
    n_used = min(a.induction_n, m.config.n_ctx // 2)          # what induction_scores can fit in the context
    shrunk = (f" (--induction-n {a.induction_n} shrunk to {n_used}: twice it must fit the context of "
              f"{m.config.n_ctx})") if n_used != a.induction_n else ""
    print(f"model {a.model}: {len(ids)} tokens of text" + (f" ({dropped} dropped)" if dropped else "")
          + f"; induction on {n_used} random tokens repeated twice (4 sequences){shrunk}"
          + ("" if bos is None else f"; TL recipe: BOS (id {bos}) + the same, 10 sequences, whole diagonal"))
    show = ["previous-token", "first-token", "self", "duplicate-token", "induction", "induction (random repeats)"]
    if bos is not None:
        show.append("induction (TL recipe)")
    for stat in show:
        best = df.nlargest(a.top, stat)[["layer", "head", stat]]
        print(f"\nbest heads by {stat}:")
        print(_markdown(best) if a.markdown else best.to_string(index=False, float_format="%.3f"))
    return 0


def _markdown(df) -> str:
    fmt = [lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)]
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt[0](v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


_DEFAULT_TEXT = (
    "The animal didn't cross the street because it was too tired. Python is a programming language that "
    "lets you work quickly and integrate systems more effectively. The quick brown fox jumps over the lazy "
    "dog. A list is a mutable sequence; a tuple is an immutable sequence. When the interpreter reads a "
    "module, it executes the statements in it, and the names it defines become attributes of the module. "
    "Debian is a free operating system, developed by thousands of volunteers. "
) * 3
