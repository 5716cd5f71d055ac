"""The hull check in bounded time: the batched solver against an exact solver (scipy's NNLS, an active-set
method) on small cases, its certified bounds, its cap, and the V = X certificate from the pattern mean."""
import numpy as np
import pytest

from attnkit.ablations import Spec, measure
from attnkit.ablations.hull import (
    HULL_ATOL, HULL_RTOL, certify_mixture, even_rows, hull_check, hull_distance, participation_ratio,
)
from attnkit.ablations.measure import hull_cost
from attnkit.ablations.registry import HULL_LOWER, HULL_MAX, HULL_RELATIVE

TEXT = "The animal didn't cross the street because it was too tired. The animal was tired."


def exact_distance(P, A):
    """Distance from the hull by Lawson–Hanson NNLS: min ‖[Aᵀ; μ1ᵀ]w − [p; μ]‖, w ≥ 0, with μ large enough that
    Σw = 1 holds to ~1e-12 (the sum constraint as a heavily weighted row); then the distance of w·A itself."""
    nnls = pytest.importorskip("scipy.optimize").nnls
    mu = 1e6 * max(1.0, float(np.abs(A).max()))
    M = np.vstack([A.T, mu * np.ones(A.shape[0])])
    out = []
    for p in P:
        w = nnls(M, np.append(p, mu), maxiter=50 * A.shape[0])[0]
        w = w / w.sum()
        out.append(np.linalg.norm(w @ A - p))
    return np.array(out)


def _case(seed, n, d, flat=None):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, d)) if flat is None else rng.normal(size=(n, flat)) @ rng.normal(size=(flat, d))
    A = A + 2 * rng.normal(size=d)
    inside = rng.dirichlet(np.ones(n) * 0.3, size=6) @ A
    near = inside + 0.05 * rng.normal(size=inside.shape)
    far = inside + 3 * rng.normal(size=inside.shape)
    return np.vstack([inside, near, far]), A


@pytest.mark.parametrize("seed,n,d,flat", [(0, 10, 3, None), (1, 25, 8, None), (2, 40, 30, None),
                                           (3, 60, 20, 4), (4, 8, 50, None)])
def test_distances_match_an_exact_solver_within_the_stated_tolerance(seed, n, d, flat):
    pytest.importorskip("scipy")
    P, A = _case(seed, n, d, flat)
    exact = exact_distance(P, A)
    dist, info = hull_distance(P, A)
    scale = np.sqrt((A ** 2).sum(1).mean())
    assert info["converged"] and info["iterations"] <= info["budget"]
    # the stated stop rule: upper − lower ≤ rtol·upper + atol·scale, and lower ≤ exact ≤ upper
    assert np.all(info["upper"] - info["lower"] <= HULL_RTOL * info["upper"] + HULL_ATOL * scale + 1e-12)
    slack = 1e-7 * scale                     # the exact solver's own error (the weighted sum row)
    assert np.all(info["lower"] <= exact + slack), (info["lower"] - exact).max()
    assert np.all(exact <= dist + slack), (exact - dist).max()
    assert np.all(np.abs(dist - exact) <= HULL_RTOL * exact + HULL_ATOL * scale + slack)
    far = exact > 0.5
    np.testing.assert_allclose(dist[far], exact[far], rtol=HULL_RTOL)


def test_tight_tolerances_reach_the_exact_distance():
    pytest.importorskip("scipy")
    P, A = _case(5, 30, 12)
    exact = exact_distance(P, A)
    dist, info = hull_distance(P, A, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dist, exact, atol=1e-6)
    assert np.all(info["lower"] <= exact + 1e-6)


def test_the_cap_bounds_the_work_and_the_bounds_stay_valid():
    pytest.importorskip("scipy")
    P, A = _case(6, 200, 10)                          # rows deep inside: slow for any first-order method
    exact = exact_distance(P, A)
    dist, info = hull_distance(P, A, iters=3, rtol=1e-12, atol=1e-12)
    assert info["iterations"] == 3 and info["budget"] == 3 and not info["converged"]
    assert np.all(info["lower"] <= exact + 1e-7) and np.all(exact <= dist + 1e-7)
    assert not info["done"].all() and info["max_gap"] > 0


def test_certificate_is_the_residual_and_refuses_weights_off_the_simplex():
    rng = np.random.default_rng(7)
    A = rng.normal(size=(15, 6))
    W = np.tril(rng.random((15, 15)))
    W /= W.sum(1, keepdims=True)
    P = W @ A
    d, info = certify_mixture(P, A, W)
    assert d.max() < 1e-12 and info["converged"] and info["method"] == "certificate"
    d, info = certify_mixture(P + 0.5 * np.eye(15, 6), A, W)        # moved off by a known amount
    np.testing.assert_allclose(d[:6], 0.5, atol=1e-12)
    bad = W.copy()
    bad[3] *= 1.2                                                    # sums to 1.2: no certificate
    _, info = certify_mixture(P, A, bad)
    assert not info["converged"] and info["weight_error"] == pytest.approx(0.2)
    neg = W.copy()
    neg[5, :2] += [-0.3, 0.3]                                        # sums to 1, one weight negative
    assert neg[5, 0] < 0
    assert certify_mixture(P, A, neg)[1]["weight_error"] == pytest.approx(-neg[5, 0])
    # hull_check then falls back on the solver (still inside, to its stated tolerance)
    d, info = hull_check(P, A, np.arange(15), bad)
    assert info["method"] == "fista" and d.max() <= HULL_ATOL * np.sqrt((A ** 2).sum(1).mean())


def test_bad_shapes_are_a_clear_error():
    with pytest.raises(ValueError, match="same width"):
        hull_distance(np.zeros((2, 3)), np.zeros((4, 5)))


def test_participation_ratio_from_gram_matrices_equals_the_svd_formula():
    rng = np.random.default_rng(8)
    for shape in ((40, 7), (7, 40)):
        X = rng.normal(size=shape) * rng.random(shape[1]) * 3
        Xc = X - X.mean(0)
        s2 = np.linalg.svd(Xc, compute_uv=False) ** 2
        assert participation_ratio(X) == pytest.approx(s2.sum() ** 2 / (s2 ** 2).sum(), rel=1e-10)
    assert np.array_equal(even_rows(5), np.arange(5)) and len(even_rows(1000)) == 32


def test_v_equals_x_is_certified_by_the_pattern_mean_and_the_baseline_solved(odd):
    ids = odd.encode(TEXT)
    r = measure(odd.weights, [ids], Spec("v=x"))
    for l in range(odd.config.n_layers):
        assert r.per_layer[HULL_MAX.key].ablated[l] < 1e-5                 # the residual: float noise
        assert r.per_layer[HULL_LOWER.key].ablated[l] == 0
        assert r.per_layer[HULL_LOWER.key].baseline[l] > 1e-2              # the real output leaves the hull
    assert r.per_layer[HULL_RELATIVE.key].ablated[0] < 1e-6
    note = next(n for n in r.notes if n.startswith("Hull distances"))
    assert "certified by their own weights" in note and "FISTA" in note and f"all {len(ids)} query rows" in note
    assert all(e.holds for e in r.evidence)
    off = measure(odd.weights, [ids], Spec("v=x"), hull_iters=0)          # no hull check: no hull numbers
    assert off.per_layer[HULL_MAX.key].ablated == [None] * odd.config.n_layers
    assert off.ablated.nats == pytest.approx(r.ablated.nats, rel=1e-6)
    cost = hull_cost(odd.weights, ids)
    assert set(cost) == {"with_hull_s", "without_hull_s", "ratio"} and cost["ratio"] > 0
