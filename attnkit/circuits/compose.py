"""Prompt-free views of how heads in different layers can work together (Elhage et al. 2021).

A head h reads the residual stream through its QK circuit ``W_QK = W_Q·W_Kᵀ`` (d×d: query side ×
key side) and writes through its OV circuit ``W_OV = W_V·W_O`` (d×d). A head h1 in an earlier layer
*composes* with a head h2 in a later layer when what h1 writes lands where h2 reads:

    Q-composition   ‖W_OV^h1 · W_QK^h2‖_F   / (‖W_OV^h1‖_F · ‖W_QK^h2‖_F)     h1 feeds h2's queries
    K-composition   ‖W_OV^h1 · W_QK^h2ᵀ‖_F  / (‖W_OV^h1‖_F · ‖W_QK^h2‖_F)     h1 feeds h2's keys
    V-composition   ‖W_OV^h1 · W_OV^h2‖_F   / (‖W_OV^h1‖_F · ‖W_OV^h2‖_F)     h1 feeds h2's values

(right-multiplied layout: ``x·W``). A score lies in [0, 1]; random matrices of the same shapes give
a score well above 0 in high dimension, so every result carries a **random baseline**: the mean and
high quantiles of the score of i.i.d. Gaussian factors of the same shapes (seeded).

**Low rank.** Every circuit is a product ``A·B`` with A d×e and B e×d (e = d_head). With A = Q_A·R_A
(QR) ``‖A·B‖ = ‖R_A·B‖`` and with Bᵀ = Q_B·R_B ``‖A·B‖ = ‖A·R_Bᵀ‖``, so the numerator
‖A1·B1·A2·B2‖ = ‖(R_A1·B1)·(A2·R_B2ᵀ)‖: one [S·e, d] × [d, R·e] product for all pairs, never a d×d
matrix per pair.

**Norms.** The reading head's norm scale (ln_1's gain, :func:`attnkit.parts.gain`; for a parallel block the
same ln_1) is folded into W_Q, W_K and W_V: ``norm(x)·W = (x−μ)/σ · diag(w)·W + b·W``, so diag(w)·W is exact for
the part of the map that depends on the direction written. *Not folded:* the centring (x − μ) (a
projection all heads share), the division by σ (depends on the input), the norm's bias b and the
heads' own biases (constant offsets, not part of a bilinear map). For RMSNorm there is no centring
or bias: the scale fold is the whole of it except 1/rms. Rotary families: Q/K scores use W_Q·W_Kᵀ
without the rotation, exact for the relative offset 0 (and for the dimensions that do not rotate).
Grouped-query attention: a query head uses the key/value head its group shares.

**Per head.** The OV *copying score* is eigenvalue-based: with λ the eigenvalues of the full OV
circuit W_E·diag(w₁)·W_OV·diag(w_f)·W_Uᵀ (vocab × vocab; its non-zero eigenvalues are those of the
e×e matrix W_O·diag(w_f)·W_Uᵀ·W_E·diag(w₁)·W_V), ``copying = Re Σλ / Σ|λ|`` in [−1, 1]: near 1 a
head's output raises the logit of the token it attends to. ``qk_token`` is the same score for the
full QK circuit W_E·W_QK·W_Eᵀ (near 1: a token attends to itself / its copies). For learned
positions, ``qk_positional`` is the share of the within-row variance of the position×position scores
W_pos·W_QK·W_posᵀ (causal part, first ``n_pos`` positions; softmax ignores a row's constant) explained
by a function of the offset i − j alone (least squares with a constant per row; 1: a purely
relative-position head), and ``preferred_offset`` the offset that function scores highest (1: previous
token).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import parts
from ..i18n import msg
from ..progress import Progress, Steps
from ..weights import Weights, head_name

__all__ = ["MODES", "FORMULAS", "Composition", "HeadScores", "composition", "random_baseline", "head_scores", "head_name",
           "pair_scores"]

MODES = ("q", "k", "v")
#: Each composition score's formula, as the pages state it.
FORMULAS = {"q": "‖W_OV(sender)·W_QK(receiver)‖ / (‖W_OV‖·‖W_QK‖)", "k": "‖W_OV(sender)·W_QK(receiver)ᵀ‖ / (‖W_OV‖·‖W_QK‖)",
            "v": "‖W_OV(sender)·W_OV(receiver)‖ / (‖W_OV‖·‖W_OV‖)"}
#: Above this many multiply-adds the [S·e, d] × [d, R·e] product is done in float32 (else float64).
F64_LIMIT = 2e9


def _folded(w: Weights, l: int):
    """(W_Q, W_K, W_V, W_O) of layer l as [H, d, e] float64 (K, V expanded to the query heads for GQA),
    with ln_1's scale folded into the reading weights."""
    lw, cfg = w.layers[l], w.config
    s = parts.gain(lw.ln1_w, cfg).double()[None, :, None]
    rep = (lambda t: t if cfg.group == 1 else t.repeat_interleave(cfg.group, 0))   # noqa: E731
    return (s * lw.W_Q.double(), rep(s * lw.W_K.double()), rep(s * lw.W_V.double()), lw.W_O.double())


def _r_of(a: torch.Tensor) -> torch.Tensor:
    """R of a = Q·R (reduced QR) for a batch [N, d, e]: ‖a·B‖ = ‖R·B‖."""
    return torch.linalg.qr(a, mode="r")[1]


def _left(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Factors of A·B ([N, d, e]·[N, e, d]) reduced to P = R_A·B [N, e, d] (same row space norms)."""
    return _r_of(A) @ B


def _right(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A·B reduced to Q = A·R_{Bᵀ}ᵀ [N, d, e]."""
    return A @ _r_of(B.transpose(-1, -2)).transpose(-1, -2)


def pair_scores(P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """‖P_s·Q_r‖_F / (‖P_s‖_F·‖Q_r‖_F) for every s, r: P [S, e, d], Q [R, d, e] -> [S, R]."""
    S, e1, d = P.shape
    R, _, e2 = Q.shape
    dt = torch.float64 if S * e1 * d * R * e2 <= F64_LIMIT else torch.float32
    big = P.to(dt).reshape(S * e1, d) @ Q.to(dt).permute(1, 0, 2).reshape(d, R * e2)
    num = big.view(S, e1, R, e2).double().pow(2).sum((1, 3)).sqrt()
    return num / (P.flatten(1).norm(dim=1)[:, None] * Q.flatten(1).norm(dim=1)[None, :])


def _circuits(w: Weights):
    """Per layer: P (senders' OV, [H, e, d]) and Q for each mode (receivers, [H, d, e])."""
    out = []
    for l in range(w.config.n_layers):
        WQ, WK, WV, WO = _folded(w, l)
        out.append({"P": _left(WV, WO),
                    "q": _right(WQ, WK.transpose(-1, -2)),      # W_QK = W_Q·W_Kᵀ
                    "k": _right(WK, WQ.transpose(-1, -2)),      # W_QKᵀ = W_K·W_Qᵀ
                    "v": _right(WV, WO)})                       # W_OV
    return out


@dataclass
class Composition:
    """Scores [L·H (sender), L·H (receiver)] per mode; NaN unless the sender's layer is earlier."""

    scores: dict                    # mode -> np.ndarray [L·H, L·H]
    n_layers: int
    n_heads: int
    baseline: dict                  # {"mean", "q95", "q99", "n", "seed"}
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return [head_name(l, h) for l in range(self.n_layers) for h in range(self.n_heads)]

    def block(self, mode: str, sender_layer: int, receiver_layer: int) -> np.ndarray:
        """[H (sender head), H (receiver head)] scores between two layers."""
        H = self.n_heads
        return self.scores[mode][sender_layer * H:(sender_layer + 1) * H, receiver_layer * H:(receiver_layer + 1) * H]

    def top(self, mode: str, k: int = 10) -> list[tuple[str, str, float]]:
        """The k largest scores of ``mode``: (sender, receiver, score)."""
        s = self.scores[mode]
        flat = np.where(np.isfinite(s), s, -np.inf).ravel()
        order = np.argsort(-flat)[:k]
        lab = self.labels
        return [(lab[i // s.shape[1]], lab[i % s.shape[1]], float(flat[i])) for i in order if np.isfinite(flat[i])]

    def frame(self):
        """Long table: mode, sender, receiver, their layers and heads, score, score above the baseline mean."""
        H, lab, rows = self.n_heads, self.labels, []
        for mode, s in self.scores.items():
            ii, jj = np.nonzero(np.isfinite(s))
            for i, j in zip(ii, jj):
                rows.append({"mode": mode, "sender": lab[i], "receiver": lab[j], "sender_layer": i // H,
                             "sender_head": i % H, "receiver_layer": j // H, "receiver_head": j % H,
                             "score": float(s[i, j]), "above_baseline": float(s[i, j] - self.baseline["mean"])})
        return pd.DataFrame(rows)

    def to_json(self) -> dict:
        return {"labels": self.labels, "baseline": self.baseline, "notes": self.notes,
                "scores": {m: [[None if not np.isfinite(x) else float(x) for x in row] for row in s]
                           for m, s in self.scores.items()}}


def random_baseline(d_model: int, d_head: int, n: int = 200, seed: int = 0) -> dict:
    """Scores of i.i.d. Gaussian factors of the shapes of a composition score: mean and quantiles."""
    g = torch.Generator().manual_seed(seed)
    rnd = (lambda *s: torch.randn(*s, generator=g, dtype=torch.float64))   # noqa: E731
    P = _left(rnd(n, d_model, d_head), rnd(n, d_head, d_model))
    Q = _right(rnd(n, d_model, d_head), rnd(n, d_head, d_model))
    s = torch.stack([pair_scores(P[i:i + 1], Q[i:i + 1])[0, 0] for i in range(n)]).numpy()
    return {"mean": float(s.mean()), "q95": float(np.quantile(s, 0.95)), "q99": float(np.quantile(s, 0.99)),
            "n": n, "seed": seed}


@torch.no_grad()
def composition(w: Weights, modes=MODES, *, baseline_samples: int = 200, seed: int = 0,
                progress: Progress | None = None) -> Composition:
    """Q-, K- and V-composition scores of every pair of heads in different layers (sender earlier).
    ``progress(done, total)`` after each receiving layer of each mode."""
    cfg = w.config
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ValueError(f"unknown composition mode(s) {bad}; choose from q, k, v")
    L, H = cfg.n_layers, cfg.n_heads
    circ = _circuits(w)
    scores, done, total = {}, 0, len(modes) * (L - 1)
    for m in modes:
        s = np.full((L * H, L * H), np.nan)
        for l2 in range(1, L):
            P = torch.cat([circ[l]["P"] for l in range(l2)])
            s[: l2 * H, l2 * H:(l2 + 1) * H] = pair_scores(P, circ[l2][m]).numpy()
            done += 1
            if progress:
                progress(done, total)
        scores[m] = s
    notes = [msg("ln_1's scale is folded into W_Q/W_K/W_V (exact); the norm's centring, its 1/σ (input-dependent), "
                 "its bias and the heads' biases are not folded")]
    if cfg.position == "rotary":
        notes.append(msg("rotary positions: Q/K composition uses W_Q·W_Kᵀ without the rotation (exact at offset 0 "
                         "and for dimensions that do not rotate)"))
    if cfg.group > 1:
        notes.append(msg("grouped-query attention: each query head uses its group's key/value head ({n} query heads "
                         "per key/value head)", n=cfg.group))
    return Composition(scores, L, H, random_baseline(cfg.d_model, cfg.d_head, baseline_samples, seed), notes)


@dataclass
class HeadScores:
    """Per head [L, H]: OV copying, QK same-token, QK positional structure and preferred offset."""

    copying: np.ndarray
    qk_token: np.ndarray
    qk_positional: np.ndarray          # NaN for rotary families (no position table)
    preferred_offset: np.ndarray       # -1 where not defined
    n_pos: int
    notes: list[str] = field(default_factory=list)

    def frame(self):
        L, H = self.copying.shape
        return pd.DataFrame([{"head": head_name(l, h), "layer": l, "index": h, "copying": float(self.copying[l, h]),
                              "qk_token": float(self.qk_token[l, h]),
                              "qk_positional": float(self.qk_positional[l, h]),
                              "preferred_offset": int(self.preferred_offset[l, h])}
                             for l in range(L) for h in range(H)])


def _eig_score(M: torch.Tensor) -> torch.Tensor:
    """Re Σλ / Σ|λ| for a batch of square matrices [N, e, e]."""
    lam = torch.linalg.eigvals(M)
    return lam.sum(-1).real / lam.abs().sum(-1).clamp_min(1e-300)


def _offset_structure(S: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """S [H, N, N] position scores (query i, key j ≤ i): the share of their within-row variance (softmax
    ignores a row's constant) explained by a function of the offset i − j (least squares with a constant
    per row), and the offset (≤ N/2) that function scores highest."""
    H, N, _ = S.shape
    i, j = torch.tril_indices(N, N)
    keep = i > 0
    i, j = i[keep], j[keep]
    y = S[:, i, j].double().T                                          # [P, H]
    X = torch.zeros(len(i), 2 * N, dtype=torch.float64)
    X[torch.arange(len(i)), i - j] = 1.0                               # the offset's value f(i − j)
    X[torch.arange(len(i)), N + i] = 1.0                               # the row's constant a_i
    coef = torch.linalg.lstsq(X, y, driver="gelsd").solution           # [2N, H]
    rss = ((X @ coef - y) ** 2).sum(0)
    count = torch.bincount(i, minlength=N).double()
    row_mean = torch.zeros(N, H, dtype=torch.float64).index_add_(0, i, y) / count.clamp_min(1)[:, None]
    tss = ((y - row_mean[i]) ** 2).sum(0)
    share = (1 - rss / tss.clamp_min(1e-300)).clamp(0, 1)
    best = coef[: N // 2 + 1].argmax(0)
    return share, best


@torch.no_grad()
def head_scores(w: Weights, n_pos: int = 64, progress: Progress | None = None) -> HeadScores:
    """Per-head copying, same-token and positional scores (see the module docstring); ``progress(done, total)``
    after each layer."""
    cfg = w.config
    L, H = cfg.n_layers, cfg.n_heads
    big = cfg.d_vocab * cfg.d_model ** 2 > F64_LIMIT
    dt = torch.float32 if big else torch.float64
    E, U = w.wte.to(dt), w.W_U.to(dt)
    UE = (U.T @ E).double() * parts.gain(w.lnf_w, cfg).double()[:, None]   # diag(w_f)·W_Uᵀ·W_E  [d, d]
    EE = (E.T @ E).double()                                          # W_Eᵀ·W_E
    n_pos = min(n_pos, cfg.n_ctx)
    copy, tok, pos, off = [], [], [], []
    for l in range(L):
        WQ, WK, WV, WO = _folded(w, l)
        copy.append(_eig_score(WO @ UE @ WV))                          # e×e: W_O·diag(w_f)·W_Uᵀ·W_E·diag(w₁)·W_V
        tok.append(_eig_score(WK.transpose(-1, -2) @ EE @ WQ))         # e×e: W_Kᵀ·W_Eᵀ·W_E·W_Q
        if w.wpe is not None:
            P = w.wpe[:n_pos].double()
            P = parts.centre(P, cfg)                                   # the norm's centring, exact for this part
            share, best = _offset_structure((P @ WQ) @ (P @ WK).transpose(-1, -2))
            pos.append(share), off.append(best)
        else:
            pos.append(torch.full((H,), float("nan"), dtype=torch.float64)), off.append(torch.full((H,), -1))
        if progress:
            progress(l + 1, L)
    notes = [msg("copying = Re Σλ / Σ|λ| over the eigenvalues of W_E·W_OV·W_Uᵀ (ln_1's and the final norm's scales "
                 "folded; MLPs, biases and 1/σ left out)"), msg("qk_token: the same score for W_E·W_QK·W_Eᵀ")]
    notes.append(msg("qk_positional: rotary family, positions enter by rotation, not scored") if w.wpe is None else
                 msg("qk_positional: share of the within-row variance of W_pos·W_QK·W_posᵀ over the first {n} "
                     "positions explained by a function of the offset i − j", n=n_pos))
    st = (lambda xs: torch.stack(xs).numpy())                           # noqa: E731
    return HeadScores(st(copy), st(tok), st(pos), st(off), n_pos, notes)


def weight_views(w: Weights, progress: Progress | None = None) -> tuple[Composition, HeadScores]:
    """What the Circuits page shows before any prompt: every mode's composition scores and the per-head scores,
    with one ``progress(done, total)`` count (receiving layers × modes, then layers)."""
    L = w.config.n_layers
    n_comp = len(MODES) * (L - 1)
    steps = Steps(progress, n_comp + L)
    return composition(w, progress=steps.part(0)), head_scores(w, progress=steps.part(n_comp))
