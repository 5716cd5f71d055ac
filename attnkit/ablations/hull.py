"""Convex-hull geometry for the V = X ablation: how far points lie from the convex hull of others.

Two routes, both in float64 and both with an upper and a certified lower bound per row:

* :func:`certify_mixture` — when the row is *known* to be a mixture of the hull points (the V = X output is
  mean_h(pattern_h)·x̂ by definition), the given weights are a certificate: the distance is at most the
  residual ‖p − w·A‖ (float noise, ~1e-7 of the scale), at least 0. One matrix product, no solver.
* :func:`hull_distance` — a batched solver for every other row: accelerated projected gradient (FISTA with
  adaptive restart) on the simplex, all rows of a layer at once, with a stated stop rule and a cap.

:func:`participation_ratio` is the effective dimension of a point cloud; :func:`even_rows` the row sample.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

from ..i18n import msg

__all__ = ["HULL_ITERS", "HULL_MAX_ROWS", "HULL_RTOL", "HULL_ATOL", "hull_distance", "certify_mixture",
           "hull_check", "record", "sample_note", "participation_ratio", "even_rows"]

#: Cap of :func:`hull_distance`: FISTA iterations per layer (all rows at once).
HULL_ITERS = 300
#: At most this many query rows per text are tested against the hull (evenly spaced; all hull rows kept).
HULL_MAX_ROWS = 32
#: Stop rule of :func:`hull_distance`: a row is done once upper − lower ≤ RTOL·upper + ATOL·scale
#: (scale = RMS norm of the hull points), i.e. 3 significant digits, or "inside to 1e-4 of the scale".
HULL_RTOL = 1e-3
HULL_ATOL = 1e-4
#: Every POLISH_EVERY iterations the unfinished rows try the exact affine minimiser on their support.
POLISH_EVERY = 25
POLISH_MAX = 64


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64 through torch, so the products obey torch's thread setting (numpy's BLAS would use
    every core: measured 16× slower with 2 BLAS threads than 1 on a shared 2-core machine)."""
    return torch.matmul(torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))).numpy()


@contextlib.contextmanager
def _one_thread():
    """torch on one thread in this thread while the solver runs: its thousands of small products each fork
    and join torch's threads, which on a busy machine wait for a core at every join (V = X on 902 tokens of
    attnkit-tiny, 2 shared cores: 26 s with 2 threads, 3–6 s with 1). Threads already using torch keep
    their own setting; one that starts using torch meanwhile takes 1 as its default (slower, and its sums
    added in another order)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of V onto the probability simplex (sort-based, O(n log n) a row)."""
    m, n = V.shape
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    rho = n - 1 - np.argmax((U * np.arange(1, n + 1) > css)[:, ::-1], axis=1)
    theta = css[np.arange(m), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def _lipschitz(A0: np.ndarray, steps: int = 30) -> float:
    """An estimate of σ_max(A0)² (power iteration, 2·n·d flops a step), padded 5 % against underestimation."""
    v = np.random.default_rng(0).normal(size=A0.shape[1])
    for _ in range(steps):
        v = _mm(A0.T, _mm(A0, v))
        nv = float(np.linalg.norm(v))
        if nv == 0:
            return 1.0
        v /= nv
    return max(1.05 * float(np.linalg.norm(_mm(A0, v))) ** 2, 1e-300)


def _bounds(X, G, P0):
    """Upper bound ‖x‖ and certified lower bound max(min_k x·(a_k − p), 0)/‖x‖ at a hull point p + x."""
    up = np.sqrt((X * X).sum(1))
    gmin = G.min(1) - (X * P0).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(up > 0, np.maximum(gmin, 0.0) / up, 0.0)
    return up, np.minimum(lo, up)


def _affine_min(B: np.ndarray) -> np.ndarray:
    """Weights λ (Σλ = 1) of the minimum-norm point of the affine hull of the rows of B (a KKT system)."""
    k = B.shape[0]
    kkt = np.ones((k + 1, k + 1))
    kkt[:-1, :-1], kkt[-1, -1] = _mm(B, B.T), 0.0
    rhs = np.zeros(k + 1)
    rhs[-1] = 1.0
    try:
        return np.linalg.solve(kkt, rhs)[:-1]
    except np.linalg.LinAlgError:                  # affinely dependent rows: least squares
        return np.linalg.lstsq(kkt, rhs, rcond=None)[0][:-1]


def _wolfe(B: np.ndarray, w: np.ndarray):
    """Wolfe's minor cycle from the positive weights ``w`` on the rows of B: step towards the affine
    minimiser, dropping the first vertex whose weight reaches 0, until the minimiser is inside (≤ |S| solves).
    Returns (kept rows, their weights): a point of the hull of B's rows no farther from 0 than w·B."""
    keep = np.arange(B.shape[0])
    for _ in range(B.shape[0]):
        lam = _affine_min(B[keep])
        if (lam > 0).all():
            return keep, lam
        neg = lam <= 0
        den = w[neg] - lam[neg]
        theta = float(np.min(np.where(den > 0, w[neg] / np.where(den > 0, den, 1.0), 0.0)))
        w = w + min(max(theta, 0.0), 1.0) * (lam - w)
        drop = w <= 0
        drop[int(np.argmin(np.where(neg, w, np.inf)))] = True
        keep, w = keep[~drop], np.maximum(w[~drop], 0.0)
        w = w / w.sum()
    return keep, w


def _polish(P0, A0, W, majors: int = 8):
    """A capped active-set finish per row, warm-started on the support S = {k: w_k > 0} FISTA has found:
    Wolfe's minor cycle on S, then up to ``majors`` Frank–Wolfe vertex additions each followed by a minor
    cycle. (upper, lower) per row; O(majors·(|S|²·d + |S|³ + n·d)) a row, skipped when |S| > POLISH_MAX."""
    m = P0.shape[0]
    up, lo = np.full(m, np.inf), np.zeros(m)
    for r in range(m):
        S = np.flatnonzero(W[r] > 0)
        if S.size > POLISH_MAX:
            continue
        w = W[r, S] / W[r, S].sum()
        for _ in range(majors + 1):
            keep, w = _wolfe(A0[S] - P0[r], w)
            S = S[keep]
            x = w @ A0[S] - P0[r]
            g = _mm(x, A0.T)
            u, l_ = _bounds(x[None], g[None], P0[r][None])
            up[r], lo[r] = min(up[r], u[0]), max(lo[r], l_[0])
            j = int(np.argmin(g))
            if j in S or S.size >= POLISH_MAX:
                break
            S, w = np.append(S, j), np.append(w, 0.0)
    return up, lo


def _fista(P0, A0, W, iters: int, rtol: float, atol: float):
    """FISTA on f(w) = ½‖w·A0 − p‖² over the simplex, every row of P0 at once; (upper, lower, iterations,
    done) per row. Keeps x = w·A0 − p and its gradient G = x·A0ᵀ for the iterate and the extrapolated point
    (both linear in w), so each iteration costs two products of 2·m_active·n·d flops plus a sort of m×n.
    The bounds are the best over all iterates (each iterate is a hull point; each x gives a valid bound)."""
    m = P0.shape[0]
    step = 1.0 / _lipschitz(A0)
    X = _mm(W, A0) - P0
    G = _mm(X, A0.T)
    Y, GY, t = W, G, np.ones(m)
    up, lo = np.full(m, np.inf), np.zeros(m)
    used, act = np.zeros(m, dtype=int), np.arange(m)
    for it in range(1, iters + 1):
        u, l_ = _bounds(X, G, P0[act])
        if it % POLISH_EVERY == 0:
            pu, pl = _polish(P0[act], A0, W)
            u, l_ = np.minimum(u, pu), np.maximum(l_, pl)
        up[act], lo[act] = np.minimum(up[act], u), np.maximum(lo[act], l_)
        used[act] = it
        keep = up[act] - lo[act] > rtol * up[act] + atol
        if not keep.all():
            act, W, X, G, Y, GY, t = act[keep], W[keep], X[keep], G[keep], Y[keep], GY[keep], t[keep]
        if act.size == 0:
            break
        Wn = _simplex(Y - step * GY)
        Xn = _mm(Wn, A0) - P0[act]
        Gn = _mm(Xn, A0.T)
        t = np.where(((Y - Wn) * (Wn - W)).sum(1) > 0, 1.0, t)      # adaptive restart (gradient scheme)
        tn = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
        beta = ((t - 1.0) / tn)[:, None]
        Y, GY = Wn + beta * (Wn - W), Gn + beta * (Gn - G)
        W, X, G, t = Wn, Xn, Gn, tn
    done = np.ones(m, dtype=bool)
    done[act] = up[act] - lo[act] <= rtol * up[act] + atol
    return up, np.minimum(lo, up), used, done


def hull_distance(points, hull, iters: int = HULL_ITERS, rtol: float = HULL_RTOL,
                  atol: float = HULL_ATOL, init=None) -> tuple[np.ndarray, dict]:
    """Euclidean distance of each row of ``points`` [m, d] from the convex hull of the rows of ``hull`` [n, d].

    Method: FISTA (accelerated projected gradient, adaptive restart) on min ½‖w·A − p‖² over the simplex,
    all m rows at once, in float64, after translating by the centroid of A; step 1/σ_max(A)² (power
    iteration). Start: ``init`` weights [m, n] (warm start) or, by default, the nearest hull point's vertex.
    Stop rule: a row is done once upper − lower ≤ ``rtol``·upper + ``atol``·scale, scale = RMS‖a_k‖.
    Cost: ≤ ``iters`` iterations, each 4·m·n·d flops (two products) + an m×n sort — O(iters·m·n·d), with
    m shrinking as rows finish; every POLISH_EVERY iterations the unfinished rows also get a capped
    active-set finish on their support (≤ 8 vertex additions, |S| ≤ POLISH_MAX: O(8·(|S|²·d + |S|³ + n·d))
    a row), which makes rows on a small face exact.

    Returns (distances [m], info). The distance is that of the best hull point found (an upper bound, ≥ the
    true one by at most the stated gap when ``done``); ``info['lower']`` holds certified lower bounds
    max(min_k x·(a_k − p), 0)/‖x‖ (a separating hyperplane), ``info['upper']`` the distances again,
    ``iterations`` (most used by a row), ``max_gap`` (largest upper − lower), ``converged`` (every row met the
    stop rule), ``done`` per row, ``budget``. Rows deep inside the hull converge slowly (upper bound
    ~1e-2·scale after 1,000 iterations); their lower bound stays 0, as it should.
    """
    P = np.asarray(points, dtype=np.float64)
    A = np.asarray(hull, dtype=np.float64)
    if P.ndim == 1:
        P = P[None]
    if A.ndim != 2 or A.shape[0] == 0 or P.shape[1] != A.shape[1]:
        raise ValueError(f"points {P.shape} and hull {A.shape} need the same width and at least one hull point")
    c = A.mean(0)
    A0, P0 = A - c, P - c
    scale = math.sqrt(float((A * A).sum(1).mean())) or 1.0
    if init is None:
        d2 = (A0 * A0).sum(1)[None, :] - 2.0 * _mm(P0, A0.T)
        W = np.zeros((P.shape[0], A.shape[0]))
        W[np.arange(P.shape[0]), d2.argmin(1)] = 1.0
    else:
        W = _simplex(np.asarray(init, dtype=np.float64))
    with _one_thread():
        up, lo, used, done = _fista(P0, A0, W, max(int(iters), 1), rtol, atol * scale)
    m = P.shape[0]
    return up, {"lower": lo, "upper": up, "iterations": int(used.max()) if m else 0,
                "max_gap": float((up - lo).max()) if m else 0.0, "converged": bool(done.all()), "done": done,
                "budget": int(iters), "method": "fista"}


def certify_mixture(points, hull, weights, tol: float = 1e-5) -> tuple[np.ndarray, dict]:
    """The distance of rows known to be mixtures ``weights`` [m, n] of the hull rows: the residual
    ‖p − w·A‖ is an upper bound (w·A is a hull point), 0 the lower bound. Float64, m·n·d flops, no solver.

    ``info['residual']`` is the largest residual, ``info['weight_error']`` the largest departure of the
    weights from the simplex (negative entries, |Σw − 1|); ``converged`` is False when that exceeds ``tol``
    (the weights are then no certificate and the caller should solve instead)."""
    P = np.asarray(points, dtype=np.float64)
    A = np.asarray(hull, dtype=np.float64)
    W = np.asarray(weights, dtype=np.float64)
    res = np.linalg.norm(P - _mm(W, A), axis=1)
    werr = float(max(np.abs(W.sum(1) - 1.0).max(), max(-W.min(), 0.0))) if W.size else 0.0
    return res, {"lower": np.zeros_like(res), "upper": res, "iterations": 0, "max_gap": float(res.max(initial=0)),
                 "converged": werr <= tol, "budget": 0, "method": "certificate",
                 "residual": float(res.max(initial=0)), "weight_error": werr}


def hull_check(out, x_hat, rows, weights=None, iters: int = HULL_ITERS) -> tuple[np.ndarray, dict]:
    """Distances of ``out[rows]`` from the hull of ``x_hat``: by :func:`certify_mixture` when the mixture
    ``weights`` [T, T] are known and valid, else by :func:`hull_distance` (``iters`` ≤ 0 skips: NaNs)."""
    if iters <= 0:
        nan = np.full(len(rows), math.nan)
        return nan, {"lower": nan, "upper": nan, "iterations": 0, "converged": True, "budget": 0, "method": "off"}
    if weights is not None:
        d, info = certify_mixture(out[rows], x_hat, weights[rows])
        if info["converged"]:
            return d, info
    return hull_distance(out[rows], x_hat, iters=iters)


def record(info: dict, h: dict, rows: int, T: int) -> None:
    """Fold one layer's hull ``h`` into a text's running ``info`` (for the notes)."""
    if h["method"] == "off":
        return
    key = "hull_certified" if h["method"] == "certificate" else "hull_solved"
    info[key] = info.get(key, 0) + rows
    if h["method"] == "certificate":
        info["hull_residual"] = max(info.get("hull_residual", 0.0), h["residual"])
    else:
        info["hull_iterations"] = max(info.get("hull_iterations", 0), h["iterations"])
        info["hull_converged"] = info.get("hull_converged", True) and h["converged"]
        info["hull_gap"] = max(info.get("hull_gap", 0.0), h["max_gap"])
    info["hull_rows"], info["hull_T"] = max(info.get("hull_rows", 0), rows), max(info.get("hull_T", 0), T)


def sample_note(rows: int, T: int, confidence: float = 0.95) -> str:
    """What a sample of ``rows`` of ``T`` query rows can miss, in words."""
    if rows >= T:
        return msg("all {T} query rows", T=T)
    share = 1.0 - (1.0 - confidence) ** (1.0 / rows)
    return msg("{rows} evenly spaced of {T} query rows (a systematic sample: with a random start it would catch, "
               "with {confidence} confidence, any behaviour shared by more than {share} of the rows)",
               rows=rows, T=T, confidence=f"{confidence:.0%}", share=f"{share:.0%}")


def participation_ratio(rows) -> float:
    """Effective dimension (Σσ²)²/Σσ⁴ of the rows after centring (NaN with fewer than 2 rows).

    Σσ² = ‖X‖_F² and Σσ⁴ = ‖XᵀX‖_F² (or ‖XXᵀ‖_F², the smaller Gram matrix): no SVD needed."""
    X = np.asarray(rows, dtype=np.float64)
    if X.shape[0] < 2:
        return math.nan
    X = X - X.mean(0, keepdims=True)
    s2 = float((X * X).sum())
    gram = _mm(X.T, X) if X.shape[1] <= X.shape[0] else _mm(X, X.T)
    s4 = float((gram * gram).sum())
    if s2 == 0 or s4 == 0:
        return math.nan
    return s2 * s2 / s4


def even_rows(T: int, limit: int = HULL_MAX_ROWS) -> np.ndarray:
    return np.arange(T) if T <= limit else np.unique(np.linspace(0, T - 1, limit).round().astype(int))
