"""Tests of isocal.fit, the fit layer: `fit_staircase` against independent references, and input checked once.

References (no expected value below was produced by isocal):
* for `fit_staircase(ties=...)`: the KKT conditions of the constrained least-squares problem, checked with
  non-negative least squares for the multipliers (an optimality certificate; the problems are strictly convex, so
  the optimum is unique), plus `scipy.optimize.minimize(method="SLSQP")` on the same problem; for another loss
  (pseudo-Huber), the KKT conditions with that loss's gradient;
* hand-solved small examples.

Input checked once: `fit_staircase` and `IsotonicCalibrator.fit` call `isocal.core.as_float_array` once per array
argument, whatever the options (`checked_arrays` counts the calls from every isocal module that imported it and
fails on an array validated twice); the layers below take checked arrays through private entry points
(`_fit_staircase`, `_fit_blocks`, `_isotonic_fit`, `Staircase._of_blocks`), so the blocks those build must meet the
public `Staircase` constructor's checks, which they skip (`test_fitted_blocks_meet_the_staircase_checks`).
"""
import importlib
import pkgutil
from contextlib import ExitStack
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize, nnls

import isocal
import isocal.core
from isocal.convex import PseudoHuber, Quantile
from isocal.fit import fit_staircase
from isocal.isotonic import IsotonicCalibrator
from isocal.pava import Staircase, isotonic_regression

pytestmark = [pytest.mark.filterwarnings("ignore:Confidence interval of the Spearman"),
              pytest.mark.filterwarnings("ignore:An input array is constant")]


# ================================================================================ fit_staircase vs constrained LS

def tie_groups(x):
    return [np.flatnonzero(x == u) for u in np.unique(x)]


def constraints(x, w, ties, increasing=True):
    """(A, E): the fit f is feasible iff A @ f >= 0 and E @ f == 0, for each treatment of tied scores."""
    n, s = len(x), (1.0 if increasing else -1.0)
    groups = tie_groups(x)
    ineq, eq = [], []
    for g0, g1 in zip(groups[:-1], groups[1:]):
        if ties == "primary":            # any sample at a larger score is not below any at a smaller score
            for i in g0:
                for j in g1:
                    a = np.zeros(n)
                    a[j], a[i] = s, -s
                    ineq.append(a)
        elif ties == "secondary":        # tied samples share a value, the values are monotone
            a = np.zeros(n)
            a[g1[0]], a[g0[0]] = s, -s
            ineq.append(a)
        else:                            # tertiary: only the weighted means of the tie groups are monotone
            a = np.zeros(n)
            a[g1] = s * w[g1] / w[g1].sum()
            a[g0] = -s * w[g0] / w[g0].sum()
            ineq.append(a)
    if ties == "secondary":
        for g in groups:
            for i in g[1:]:
                a = np.zeros(n)
                a[i], a[g[0]] = 1.0, -1.0
                eq.append(a)
    return np.array(ineq).reshape(-1, n), np.array(eq).reshape(-1, n)


def kkt_violation(f, x, y, w, ties, increasing=True):
    """Largest violation of the KKT conditions of min sum w (y - f)^2 s.t. the constraints: infeasibility, or the
    residual of grad = A_active^T lam + E^T mu with lam >= 0 (found by NNLS). ~0 iff f is the (unique) optimum."""
    A, E = constraints(x, w, ties, increasing)
    scale = max(1.0, np.abs(y).max())
    infeas = max([0.0] + ([-(A @ f).min()] if len(A) else []) + ([np.abs(E @ f).max()] if len(E) else []))
    active = A[(A @ f) <= 1e-10 * scale] if len(A) else A
    grad = 2 * w * (f - y)
    M = np.vstack([active, E, -E]).T if len(active) + len(E) else np.zeros((len(f), 0))
    if M.shape[1] == 0:
        return max(infeas, np.abs(grad).max()) / scale
    lam, _ = nnls(M, grad, maxiter=20 * M.shape[1] + 100)
    return max(infeas, np.abs(M @ lam - grad).max()) / scale


def slsqp(x, y, w, ties, increasing=True):
    A, E = constraints(x, w, ties, increasing)
    cons = [{"type": "ineq", "fun": lambda f: A @ f, "jac": lambda f: A}] if len(A) else []
    if len(E):
        cons.append({"type": "eq", "fun": lambda f: E @ f, "jac": lambda f: E})
    f0 = np.full(len(y), np.average(y, weights=w))
    return minimize(lambda f: np.sum(w * (f - y) ** 2), f0, jac=lambda f: 2 * w * (f - y), constraints=cons,
                    method="SLSQP", options={"ftol": 1e-15, "maxiter": 2000})


def test_kkt_certificate_rejects_wrong_answers():
    x, y, w = np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.5]), np.ones(3)
    primary = np.array([0.75, 0.0, 0.75])             # PAVA on y sorted by (x, y): 0, 1, 0.5 -> 0, .75, .75
    secondary = np.array([0.5, 0.5, 0.5])
    assert kkt_violation(primary, x, y, w, "primary") < 1e-12
    assert kkt_violation(secondary, x, y, w, "secondary") < 1e-12
    assert kkt_violation(secondary, x, y, w, "primary") > 1e-3          # feasible but not optimal
    assert kkt_violation(primary, x, y, w, "secondary") > 1e-3          # infeasible
    assert kkt_violation(primary + 1e-6, x, y, w, "primary") > 1e-7


@st.composite
def tied_problems(draw, max_n=12, weighted=None):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, 5))
    x = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), dtype=float) * 0.5 - 1
    y = np.array(draw(st.lists(st.floats(-10, 10).map(lambda v: round(v, 3)), min_size=n, max_size=n)))
    weighted = draw(st.booleans()) if weighted is None else weighted
    w = 10.0 ** np.array(draw(st.lists(st.floats(-2, 2), min_size=n, max_size=n))) if weighted else None
    return x, y, w, draw(st.booleans())


@pytest.mark.parametrize("ties", ["primary", "secondary", "tertiary"])
@given(problem=tied_problems())
def test_fit_staircase_is_the_constrained_optimum(ties, problem):
    x, y, w, increasing = problem
    st_ = fit_staircase(x, y, w, ties=ties, increasing=increasing)
    ww = np.ones(len(y)) if w is None else w
    assert kkt_violation(st_.fitted, x, y, ww, ties, increasing) < 1e-9


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weighted"])
@pytest.mark.parametrize("ties", ["primary", "secondary", "tertiary"])
def test_fit_staircase_matches_slsqp(ties, weighted):
    rng = np.random.default_rng(11)
    converged = 0
    for trial in range(60):
        n = int(rng.integers(1, 11))
        x = rng.integers(0, 4, n).astype(float)
        y = np.round(rng.normal(size=n), 3)
        w = 10 ** rng.uniform(-1, 1, n) if weighted else np.ones(n)
        increasing = bool(trial % 2)
        fitted = fit_staircase(x, y, w if weighted else None, ties=ties, increasing=increasing).fitted
        ref = slsqp(x, y, w, ties, increasing)
        if ref.success:
            converged += 1
            np.testing.assert_allclose(fitted, ref.x, rtol=0, atol=1e-6)
            assert np.sum(w * (fitted - y) ** 2) <= ref.fun + 1e-9
    assert converged >= 45


def test_primary_ties_staircase_minimal_reproducer():
    """BUG: ties="primary" builds each distinct score's level as the weighted mean of its samples' fitted values;
    for a block spanning several scores the rounded means differ in the last bit (0.1+0.1+0.1)/3 != 0.1, so the
    levels are not monotone and `Staircase` raises "`levels` must be non-decreasing" -- on constant data."""
    x, y = [0.0, 0.0, 0.0, 1.0], [0.1, 0.1, 0.1, 0.1]
    st_ = fit_staircase(x, y, ties="primary")
    np.testing.assert_array_equal(st_.fitted, y)
    np.testing.assert_array_equal(st_([0.0, 0.5, 1.0]), [0.1, 0.1, 0.1])


def test_primary_ties_weighted_minimal_reproducer():
    """BUG (same cause, no ties at all): the exact solution pools both samples at 0.4; the per-score levels
    (0.2*0.4)/0.2 and (0.3*0.4)/0.3 round to 0.4000000000000001 and 0.39999999999999997."""
    st_ = fit_staircase([0.0, 1.0], [1.0, 0.0], [0.2, 0.3], ties="primary")
    np.testing.assert_allclose(st_.fitted, [0.4, 0.4], rtol=1e-15)
    cal = IsotonicCalibrator(ties="primary").fit([0.0, 1.0], [1.0, 0.0], sample_weight=[0.2, 0.3])
    np.testing.assert_allclose(cal.predict([0.0, 0.5, 1.0]), [0.4] * 3, rtol=1e-15)


def test_primary_ties_single_level_is_one_step():
    """With the above bug the levels of one pooled block differ by an ulp and no longer collapse into one step."""
    st_ = fit_staircase([0.0, 1.0, 1.0, 1.0], [0.4, 0.0, 0.0, 0.0], ties="primary")
    np.testing.assert_allclose(st_.fitted, [0.1] * 4, rtol=1e-15)
    assert st_.n_steps == 1


@pytest.mark.parametrize("ties", ["secondary", "tertiary"])
@given(problem=tied_problems(max_n=30))
def test_tie_treatment_properties(ties, problem):
    x, y, w, increasing = problem
    ww = np.ones(len(y)) if w is None else w
    st_ = fit_staircase(x, y, w, ties=ties, increasing=increasing)
    f = st_.fitted
    sign = 1 if increasing else -1
    scale = max(1.0, np.abs(y).max())
    means = []
    for g in tie_groups(x):
        if ties == "secondary":
            assert np.all(f[g] == f[g[0]])                                  # tied scores share one value
        else:
            np.testing.assert_allclose(f[g] - y[g], f[g[0]] - y[g[0]], atol=1e-12 * scale)   # shifted group
        means.append(np.average(f[g], weights=ww[g]))
    assert np.all(sign * np.diff(means) >= -1e-12 * scale)
    # the staircase gives each distinct training score its group's (weighted mean) level
    ux = np.unique(x)
    np.testing.assert_allclose(st_(ux), means, rtol=0, atol=1e-12 * scale)
    if ties == "secondary":
        np.testing.assert_array_equal(st_(x), f)
    # permuting the samples permutes the fit
    perm = np.random.default_rng(len(x)).permutation(len(x))
    again = fit_staircase(x[perm], y[perm], None if w is None else w[perm], ties=ties, increasing=increasing)
    np.testing.assert_allclose(again.fitted, f[perm], rtol=0, atol=1e-12 * scale)


def test_tie_treatments_on_a_small_example():
    """x = 0, 0, 1 and y = 1, 0, 0.5 (unit weights), solved by hand:
    primary: sort the tie by y -> PAVA(0, 1, 0.5) = 0, .75, .75; secondary: means 0.5, 0.5 -> all 0.5;
    tertiary: group means 0.5, 0.5 are in order -> y unchanged."""
    x, y = [0.0, 0.0, 1.0], [1.0, 0.0, 0.5]
    np.testing.assert_allclose(fit_staircase(x, y, ties="secondary").fitted, [0.5, 0.5, 0.5])
    np.testing.assert_allclose(fit_staircase(x, y, ties="tertiary").fitted, [1.0, 0.0, 0.5])
    np.testing.assert_allclose(fit_staircase(x, y, ties="primary").fitted, [0.75, 0.0, 0.75])


def test_fit_staircase_evaluation_options():
    x = np.array([3.0, 0.0, 1.0, 1.0, 2.0, 5.0])
    y = np.array([4.0, 0.0, 2.0, 0.0, 1.0, 2.0])
    # secondary, by hand: scores 0, 1, 2, 3, 5 have means 0, 1, 1, 4, 2 (weights 1, 2, 1, 1, 1)
    # -> blocks [0, 0]: 0, [1, 2]: 1 (1 and 1 pool), [3, 5]: 3 (4 and 2 pool)
    t = [-1.0, 0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 9.0]
    expected = {"step": [0, 0, 1, 1, 1, 3, 3, 3], "linear": [0, 0.5, 1, 1, 2, 3, 3, 3]}   # clip at both ends
    for interpolation in ("step", "linear"):
        sc = fit_staircase(x, y, interpolation=interpolation, out_of_bounds="clip")
        np.testing.assert_array_equal(sc(t), expected[interpolation])
        np.testing.assert_array_equal(sc.fitted, [3.0, 0.0, 1.0, 1.0, 1.0, 3.0])
        np.testing.assert_array_equal(sc.x_lo, [0, 1, 3])
        np.testing.assert_array_equal(sc.x_hi, [0, 2, 5])
    sc = fit_staircase(x, y, out_of_bounds="nan")
    assert np.isnan(sc([-0.1, 5.1])).all()
    with pytest.raises(ValueError, match="`x_new`"):
        fit_staircase(x, y, out_of_bounds="raise")([5.5])


# ================================================================================ fit_staircase(loss=...) with ties

def pseudo_huber_grad(f, y, w, delta=0.7):
    r = f - y
    return w * r / np.sqrt(1.0 + (r / delta) ** 2)


def kkt_violation_loss(f, x, y, w, ties, grad, increasing=True):
    "As `kkt_violation`, for the gradient `grad` of another separable convex loss."
    A, E = constraints(x, w, ties, increasing)
    scale = max(1.0, np.abs(y).max())
    infeas = max([0.0] + ([-(A @ f).min()] if len(A) else []) + ([np.abs(E @ f).max()] if len(E) else []))
    active = A[(A @ f) <= 1e-10 * scale] if len(A) else A
    M = np.vstack([active, E, -E]).T if len(active) + len(E) else np.zeros((len(f), 0))
    if M.shape[1] == 0:
        return max(infeas, np.abs(grad).max()) / scale
    lam, _ = nnls(M, grad, maxiter=20 * M.shape[1] + 100)
    return max(infeas, np.abs(M @ lam - grad).max()) / scale


@pytest.mark.parametrize("ties", ["primary", "secondary"])
@pytest.mark.parametrize("increasing", [True, False])
def test_fit_staircase_general_loss_is_the_constrained_optimum(ties, increasing):
    from isocal.convex import PseudoHuber
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 12))
        x = rng.integers(0, 4, n).astype(float)
        y = rng.normal(size=n).round(1) * 3
        w = rng.uniform(0.2, 3.0, n)
        f = fit_staircase(x, y, w, ties=ties, increasing=increasing, loss=PseudoHuber(delta=0.7)).fitted
        assert kkt_violation_loss(f, x, y, w, ties, pseudo_huber_grad(f, y, w), increasing) < 1e-9


def test_weighted_mean_losses_give_the_squared_fit_and_check_their_domain():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 30, 300) / 3.0, (rng.random(300) < 0.5).astype(float)
    squared = fit_staircase(x, y).fitted
    for loss in ("logloss", "poisson"):
        np.testing.assert_array_equal(fit_staircase(x, y, loss=loss).fitted, squared)
        np.testing.assert_array_equal(IsotonicCalibrator(loss=loss).fit(x, y).predict(x),
                                      IsotonicCalibrator().fit(x, y).predict(x))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        fit_staircase(x, y + 1.5, loss="logloss")
    with pytest.raises(ValueError, match="tertiary"):
        fit_staircase(x, y, ties="tertiary", loss="logcosh")
    with pytest.raises(ValueError, match="`loss`"):
        IsotonicCalibrator(loss="hinge").fit(x, y)


def test_calibrator_with_general_loss_predicts_its_staircase():
    from isocal.convex import PseudoHuber
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=500).round(2), rng.normal(size=500)
    y[::50] += 40                                                   # outliers
    cal = IsotonicCalibrator(loss=PseudoHuber(1.0), out_of_bounds="clip", interpolation="step").fit(x, y)
    st = fit_staircase(x, y, loss=PseudoHuber(1.0))
    t = np.linspace(-4, 4, 301)
    np.testing.assert_array_equal(cal.predict(t), st(t))


# ================================================================================ input checked once

MODULES = [importlib.import_module(f"isocal.{m.name}") for m in pkgutil.iter_modules(isocal.__path__)
           if m.name != "_modidx"]      # all imported now, so that a module imported lazily is patched too


def checked_arrays(call):
    """The `name` of every array `isocal.core.as_float_array` checks during `call()` (one public call), sorted, from
    whichever isocal module it is called; an AssertionError if an array it returned is checked again."""
    check, names, returned = isocal.core.as_float_array, [], []

    def counting(a, name, **kwargs):
        assert not any(a is r for r in returned), f"`{name}` is checked a second time"
        names.append(name)
        returned.append(check(a, name, **kwargs))
        return returned[-1]

    with ExitStack() as stack:
        for m in MODULES:
            if getattr(m, "as_float_array", None) is check:
                stack.enter_context(mock.patch.object(m, "as_float_array", counting))
        call()
    return sorted(names)


def test_checked_arrays_catches_a_second_check():
    y = np.array([3.0, 1.0, 2.0])
    assert checked_arrays(lambda: isotonic_regression(y)) == ["y"]
    with pytest.raises(AssertionError, match="second time"):
        checked_arrays(lambda: isocal.core.as_float_array(isocal.core.as_float_array(y, "y"), "y"))


LOSSES = ["squared", "logloss", PseudoHuber(0.5), Quantile(0.3)]
RNG = np.random.default_rng(0)
X_TIED, Y_BINARY, W_ZEROS = RNG.integers(0, 8, 60) / 2.0, (RNG.random(60) < 0.5).astype(float), RNG.uniform(0, 2, 60)
W_ZEROS[::7] = 0.0


# tertiary ties are defined for the weighted-mean losses only (fit_staircase refuses the others): not a case here
LOSS_TIES = [pytest.param(loss, ties, id=f"{loss}-{ties}") for loss in LOSSES for ties in ("primary", "secondary", "tertiary")
             if ties != "tertiary" or loss in ("squared", "logloss")]


@pytest.mark.parametrize("loss, ties", LOSS_TIES)
@pytest.mark.parametrize("weights", [None, W_ZEROS], ids=["unit", "weighted"])
@pytest.mark.parametrize("increasing", [True, False])
def test_fit_staircase_checks_each_array_once(loss, ties, weights, increasing):
    names = checked_arrays(lambda: fit_staircase(X_TIED, Y_BINARY, weights, increasing=increasing, ties=ties,
                                                 interpolation="linear", loss=loss))
    assert names == (["x", "y"] if weights is None else ["weights", "x", "y"])


@pytest.mark.parametrize("loss, ties", LOSS_TIES)
@pytest.mark.parametrize("interpolation", ["linear", "step", "centered", "strict"])
@pytest.mark.parametrize("weights", [None, W_ZEROS], ids=["unit", "weighted"])
def test_calibrator_fit_checks_each_array_once(loss, ties, interpolation, weights):
    cal = IsotonicCalibrator(ties=ties, interpolation=interpolation, loss=loss, increasing="auto", y_max=0.9)
    names = checked_arrays(lambda: cal.fit(X_TIED[:, None], Y_BINARY, sample_weight=weights))
    assert names == (["X", "y"] if weights is None else ["X", "sample_weight", "y"])


@pytest.mark.parametrize("ties", ["primary", "secondary", "tertiary"])
@given(problem=tied_problems(max_n=30))
def test_fitted_blocks_meet_the_staircase_checks(ties, problem):
    """The fit layer builds its staircase without the public constructor's checks (`Staircase._of_blocks`): its
    blocks must pass them (float64, ordered and disjoint, monotone levels), for every treatment of ties."""
    x, y, w, increasing = problem
    staircases = [fit_staircase(x, y, w, ties=ties, increasing=increasing)]
    for interpolation in ("linear", "centered", "strict"):
        cal = IsotonicCalibrator(ties=ties, increasing=increasing, y_min=-5.0, out_of_bounds="clip",
                                 interpolation=interpolation)
        try: staircases.append(cal.fit(x, y, sample_weight=w).staircase_)
        except ValueError as err: assert "cannot separate" in str(err)       # strict, beyond float64: refused
    for fitted in staircases:
        again = Staircase(fitted.x_lo, fitted.x_hi, fitted.levels, increasing=fitted.increasing,
                          interpolation=fitted.interpolation, out_of_bounds=fitted.out_of_bounds)
        for a in ("x_lo", "x_hi", "levels"):
            assert getattr(fitted, a).dtype == np.float64 and getattr(fitted, a).flags.c_contiguous
            np.testing.assert_array_equal(getattr(again, a), getattr(fitted, a))
