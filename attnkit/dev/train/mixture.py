"""The training rows: random windows of the token stream, mixed with induction-friendly repeats."""
from __future__ import annotations

import torch


def sample_batch(ids, batch: int, block: int, gen):
    """``batch`` random windows of ``block`` tokens of ``ids``: (inputs, next-token targets)."""
    starts = torch.randint(0, len(ids) - block - 1, (batch,), generator=gen)
    offs = torch.arange(block + 1)
    w = ids[starts[:, None] + offs]
    return w[:, :-1], w[:, 1:]


SPAN = (8, 128)    # lengths of the repeated spans, at most half the window


def span_range(block: int, span=SPAN) -> tuple[int, int]:
    """The lengths a repeated span can take in a window of ``block`` tokens (one full repeat must fit)."""
    hi = min(span[1], max(span[0], block // 2))
    return min(span[0], hi), hi


def sample_mixed_batch(ids, batch: int, block: int, gen, vocab: int, p_text_rep: float = 0.0,
                       p_rand_rep: float = 0.0, bos: int | None = None, p_shift: float = 0.0,
                       n_positions: int | None = None, span=SPAN):
    """Training rows: natural windows of ``ids``, or (with probability ``p_text_rep``) a span of
    natural text repeated until the window is full, or (``p_rand_rep``) a span of uniformly random
    tokens repeated (its first copy is not scored: it cannot be predicted). Repeat rows start with
    the bos token half of the time. A natural row gets a random position offset in
    [0, n_positions - block] with probability ``p_shift`` (trains the positions beyond ``block``).

    Returns (x, y, position_ids or None); y = -100 where not scored.
    """
    x, y = sample_batch(ids, batch, block, gen)
    y = y.clone()
    u = torch.rand(batch, generator=gen)
    pos = None
    shift_max = (n_positions or block) - block
    for r in range(batch):
        kind = "text" if u[r] < p_text_rep else "rand" if u[r] < p_text_rep + p_rand_rep else "nat"
        if kind == "nat":
            if p_shift > 0 and shift_max > 0 and float(torch.rand(1, generator=gen)) < p_shift:
                if pos is None:
                    pos = torch.arange(block).repeat(batch, 1)
                pos[r] += int(torch.randint(0, shift_max + 1, (1,), generator=gen))
            continue
        lo, hi = span_range(block, span)   # at least one full repeat fits in the window
        L = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        if kind == "text":
            s0 = int(torch.randint(0, len(ids) - L, (1,), generator=gen))
            seg = ids[s0:s0 + L]
        else:
            seg = torch.randint(0, vocab, (L,), generator=gen)
        lead = [] if bos is None or float(torch.rand(1, generator=gen)) < 0.5 else [bos]
        w = torch.cat([torch.tensor(lead, dtype=torch.long), seg.repeat(block // L + 2)])[:block + 1]
        x[r], y[r] = w[:-1], w[1:]
        if kind == "rand":
            y[r, :len(lead) + L - 1] = -100
    return x, y, pos

