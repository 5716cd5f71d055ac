"""Measuring a model during and after training: losses over whole splits, bits per byte, a unigram
baseline, and a quick previous-token/induction probe of HF's attention weights."""
from __future__ import annotations

import math

import torch
from torch.nn import functional

from .mixture import sample_batch
from .sources import EOT
from .tokenizer import encode_stream

def unigram_baseline(train_ids, targets, vocab_size: int) -> float:
    """Cross-entropy (nats/token) of an add-one-smoothed unigram model fit on train."""
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0
    logp = counts.log() - counts.sum().log()
    return float(-logp[targets].mean())


def eval_windows(ids, block: int):
    """Non-overlapping (input, target) windows covering the whole stream."""
    n = (len(ids) - 1) // block
    x = ids[: n * block].view(n, block)
    y = ids[1: n * block + 1].view(n, block)
    rest = len(ids) - 1 - n * block
    extra = None
    if rest > 0:
        extra = (ids[n * block: n * block + rest].unsqueeze(0), ids[n * block + 1:].unsqueeze(0))
    return x, y, extra


def nll_sum(model, ids, block: int, batch: int = 16, skip_target: int | None = None) -> tuple[float, int]:
    """Summed cross-entropy (nats) over non-overlapping ``block`` windows covering ``ids``, and the
    number of targets scored (targets equal to ``skip_target`` are not scored)."""
    x, y, extra = eval_windows(ids, block)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        chunks = [(x[i:i + batch], y[i:i + batch]) for i in range(0, len(x), batch)]
        if extra is not None:
            chunks.append(extra)
        for xb, yb in chunks:
            logits = model(input_ids=xb).logits
            if skip_target is not None:
                yb = yb.masked_fill(yb == skip_target, -100)
            total += float(functional.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum", ignore_index=-100))
            count += int((yb != -100).sum())
    model.train()
    return total, count


def full_loss(model, ids, block: int, batch: int = 16) -> float:
    total, count = nll_sum(model, ids, block, batch)
    return total / max(count, 1)


def bits_per_byte(model, tokenizer, docs: list[tuple[str, str]], block: int) -> float:
    """Bits per UTF-8 byte of ``docs`` (each after an ``<|endoftext|>``, in ``block``-token windows):
    the nats of every text token over ln 2 and the documents' byte count. Separators are given, not
    scored, so models with different tokenizers are compared on the same bytes."""
    ids = encode_stream(tokenizer, docs)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    total, _ = nll_sum(model, ids, block, skip_target=eot)
    return total / math.log(2) / sum(len(d.encode("utf-8")) for _, d in docs)


def prev_induction_scores(model, vocab_size: int, val_ids=None, seed: int = 0, batch: int = 8,
                          rep_len: int | None = None, bos_id: int | None = None):
    """Per (layer, head) of a HF model being trained: previous-token and induction scores from HF's own
    eager attention weights (a quick probe for the training log; the card's head figures are measured
    by :mod:`attnkit.metrics` on the saved model).

    previous-token: mean over query positions i >= 1 of attention on i-1
    (on validation text windows, or random tokens when ``val_ids`` is None).
    induction: on random token sequences of length T repeated twice (after a BOS),
    mean attention from each position i of the second copy onto i-T+1, the token
    that followed the current token's earlier occurrence.
    """
    n_pos = model.config.n_positions
    T = rep_len or (n_pos - 1) // 2
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    attn_impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    with torch.no_grad():
        if val_ids is not None and len(val_ids) > n_pos + 1:
            x, _ = sample_batch(val_ids, batch, n_pos, gen)
        else:
            x = torch.randint(0, vocab_size, (batch, n_pos), generator=gen)
        att = model(input_ids=x, output_attentions=True).attentions  # L x [B,H,S,S]
        prev = torch.stack([a.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2)) for a in att])

        low = 1 if bos_id == 0 else 0
        seq = torch.randint(low, vocab_size, (batch, T), generator=gen)
        parts = [seq, seq]
        off = 0
        if bos_id is not None:
            parts.insert(0, torch.full((batch, 1), bos_id, dtype=torch.long))
            off = 1
        rep = torch.cat(parts, dim=1)
        att = model(input_ids=rep, output_attentions=True).attentions
        q = torch.arange(off + T, off + 2 * T)
        k = q - T + 1
        ind = torch.stack([a[:, :, q, k].mean(dim=(0, 2)) for a in att])
    model.set_attn_implementation(attn_impl)
    model.train()
    return prev.tolist(), ind.tolist()


def format_head_table(prev, ind) -> str:
    """The probe's scores as a plain-text table."""
    lines = ["layer head  prev-token  induction"]
    for layer, (pl, il) in enumerate(zip(prev, ind)):
        for head, (p, i) in enumerate(zip(pl, il)):
            lines.append(f"{layer:>5} {head:>4}  {p:>10.3f}  {i:>9.3f}")
    return "\n".join(lines)

