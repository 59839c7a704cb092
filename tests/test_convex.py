"""Tests of isocal.convex against independent references.

References (no expected value below was produced by isocal):
* each loss's derivative re-implemented here in NumPy from its formula, block minimisers by `scipy.optimize.brentq`,
  and a brute force over all 2^(n-1) partitions of n <= 10 samples into consecutive groups;
* the KKT conditions of the isotonic problem (every block's summed derivative is 0, every prefix of a block has a
  summed derivative <= 0), evaluated with `math.fsum`;
* `scipy.optimize.isotonic_regression` for the weighted-mean losses (log-loss, Poisson, gamma, squared).
"""
import math
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit
from scipy.optimize import brentq
from scipy.optimize import isotonic_regression as scipy_ir

from isocal.convex import (CustomLoss, Expectile, Lp, PseudoHuber, SquaredQuartic, anytime_isotonic, anytime_iter,
                           isotonic_convex, _convex_fit_sorted)
from isocal.pava import isotonic_regression

# ---------------------------------------------------------------- reference derivatives (translation losses, z - y)
REF = {
    'logcosh': lambda r: np.tanh(r),
    'PseudoHuber(delta=1)': lambda r: r / np.sqrt(1 + r * r),
    'PseudoHuber(delta=0.2)': lambda r: r / np.sqrt(1 + (r / 0.2) ** 2),
    'Expectile(tau=0.9)': lambda r: np.where(r > 0, 0.1 * r, 0.9 * r),
    'Lp(p=1.5)': lambda r: np.sign(r) * np.abs(r) ** 0.5,
    'Lp(p=3)': lambda r: np.sign(r) * r * r,
    'SquaredQuartic(a=2)': lambda r: r + 2 * r ** 3,
}
LOSSES = {'logcosh': 'logcosh', 'PseudoHuber(delta=1)': PseudoHuber(1.0), 'PseudoHuber(delta=0.2)': PseudoHuber(0.2),
          'Expectile(tau=0.9)': Expectile(0.9), 'Lp(p=1.5)': Lp(1.5), 'Lp(p=3)': Lp(3.0),
          'SquaredQuartic(a=2)': SquaredQuartic(2.0)}


def ref_block_min(d, y, w):
    if np.min(y) == np.max(y): return float(y[0])
    f = lambda z: math.fsum(w * d(z - y))
    return brentq(f, np.min(y), np.max(y), xtol=1e-15, rtol=1e-15, maxiter=500)


def brute_force(d, y, w):
    """Fitted values by the min-max formula z_i = max_{s<=i} min_{e>=i} m(s..e), m the block minimiser.

    It holds for every separable strictly convex loss (Robertson, Wright & Dykstra 1988, Thm 1.4.4 and
    Sec. 1.5), needs only block minimisers and no tolerance, and shares nothing with pooling."""
    n = len(y)
    m = [[ref_block_min(d, y[s:e + 1], w[s:e + 1]) if e >= s else None for e in range(n)] for s in range(n)]
    return np.array([max(min(m[s][e] for e in range(i, n)) for s in range(i + 1)) for i in range(n)])


def kkt_residual(d, y, w, z, ulps=2):
    """Largest violation of the KKT conditions of the increasing isotonic problem, relative to sum |w d|, for the
    best fitted values within `ulps` ulps of z (a one-ulp change of z moves |r|^(p-1) by about sqrt(ulp) for Lp with
    p < 2, so exact KKT at the rounded z cannot be asked for)."""
    du = ulps * np.abs(np.spacing(z))
    g_lo, g_hi = w * d(z - du - y), w * d(z + du - y)
    scale = math.fsum(np.abs(w * d(z - y))) + 1e-300
    worst = 0.0
    runs = np.flatnonzero(np.r_[True, z[1:] != z[:-1], True])
    for s, e in zip(runs, runs[1:]):
        worst = max(worst, math.fsum(g_lo[s:e]), -math.fsum(g_hi[s:e]))
        pre = np.cumsum(g_lo[s:e])[:-1]
        if len(pre): worst = max(worst, float(np.max(pre)))
    return worst / scale


@pytest.mark.parametrize('name', list(LOSSES))
def test_brute_force_and_kkt(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    d = REF[name]
    for trial in range(80):
        n = int(rng.integers(1, 11))
        y = np.round(rng.normal(size=n) * 2, 1)
        w = np.ones(n) if trial % 2 else rng.uniform(0.2, 3, n)
        res = isotonic_convex(LOSSES[name], y, None if trial % 2 else w)
        assert np.all(np.diff(res.x) >= 0)
        assert kkt_residual(d, y, w, res.x) <= 1e-10
        ref = brute_force(d, y, w)
        np.testing.assert_allclose(res.x, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('name', list(LOSSES))
def test_touching_brackets_regression(name):
    "Two groups whose brackets touched at one point were once merged although their levels were far apart."
    y = np.array([0.7, -1.1, -5.3, 2.9, -0.1, -4.4, 1.3, -1.4, 1.4])
    np.testing.assert_allclose(isotonic_convex(LOSSES[name], y).x, brute_force(REF[name], y, np.ones(9)),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('name', list(LOSSES))
def test_kkt_larger(name):
    rng = np.random.default_rng(5)
    x = np.sort(rng.random(3000))
    y = 3 * x + rng.standard_t(3, 3000)
    w = rng.uniform(0.1, 2, 3000)
    res = isotonic_convex(LOSSES[name], y, w)
    assert np.all(np.diff(res.x) >= 0)
    assert kkt_residual(REF[name], y, w, res.x) <= 1e-10


@pytest.mark.parametrize('loss,targets', [
    ('squared', lambda r: r.normal(size=200)),
    ('logloss', lambda r: (r.random(200) < np.linspace(0.1, 0.9, 200)) * 1.0),
    ('logloss', lambda r: r.random(200)),
    ('poisson', lambda r: r.poisson(np.linspace(0.5, 4, 200)) * 1.0),
    ('gamma', lambda r: r.gamma(2.0, np.linspace(1, 2, 200)))])
def test_weighted_mean_losses_are_pava(loss, targets):
    rng = np.random.default_rng(0)
    y = targets(rng)
    w = rng.uniform(0.1, 3, len(y))
    for inc in (True, False):
        res = isotonic_convex(loss, y, w, increasing=inc)
        ref = isotonic_regression(y, w, increasing=inc)
        assert np.array_equal(res.x, ref.x) and np.array_equal(res.blocks, ref.blocks)
        np.testing.assert_allclose(res.x, scipy_ir(y, weights=w, increasing=inc).x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('name', ['PseudoHuber(delta=1)', 'Expectile(tau=0.9)', 'Lp(p=1.5)', 'logcosh'])
def test_anytime_bounds_contain_solution(name):
    rng = np.random.default_rng(11)
    y = np.round(np.linspace(0, 3, 60) + rng.standard_t(2, 60), 2)
    exact = isotonic_convex(LOSSES[name], y).x
    last = None
    for s in anytime_iter(LOSSES[name], y):
        slack = 1e-12 * (1 + np.abs(exact))
        assert np.all(s.lower - slack <= exact) and np.all(exact <= s.upper + slack)
        assert np.all(np.diff(s.x) >= 0) and np.all(s.lower <= s.x) and np.all(s.x <= s.upper)
        last = s
    assert last.converged
    np.testing.assert_allclose(last.x, exact, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('tol', [1e-3, 1e-6, 1e-9])
def test_anytime_converges_within_tol(tol):
    rng = np.random.default_rng(2)
    y = np.linspace(-2, 2, 500) + rng.normal(size=500)
    for loss in (PseudoHuber(1.0), 'squared', Expectile(0.3)):
        s = anytime_isotonic(loss, y, tol=tol)
        assert s.converged and s.width <= tol
        assert np.max(np.abs(s.x - isotonic_convex(loss, y).x)) <= tol
    s = anytime_isotonic('squared', y, tol=tol, lower=-10, upper=10)
    assert np.max(np.abs(s.x - scipy_ir(y).x)) <= tol


def test_anytime_pitfalls():
    for y in ([1, 2, -10], [0, -1], [44, 52, 18, 14, 93, 37, 96, 8, 1, 95, 21, 77, 46, 36, 69]):
        s = anytime_isotonic('squared', y)
        assert np.all(np.diff(s.x) >= 0)
        np.testing.assert_allclose(s.x, scipy_ir(np.asarray(y, float)).x, rtol=1e-12)
    s = anytime_isotonic('squared', [44, 52, 18, 14, 93, 37, 96, 8, 1, 95, 21, 77, 46, 36, 69])
    assert list(np.unique(s.x)) == [32, 47, 55, 69]
    with pytest.raises(ValueError, match='infinite'):
        anytime_isotonic('logloss', [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='infinite'):
        anytime_isotonic('poisson', [0.0, 0.0, 1.0, 0.0])
    no_root = CustomLoss(njit(lambda z, y: np.exp(z)))        # increasing but never zero: minimiser at -inf
    with pytest.raises(ValueError):
        anytime_isotonic(no_root, [1.0, 2.0])


def test_anytime_callback_and_max_iter():
    seen = []
    s = anytime_isotonic(PseudoHuber(1.0), [3.3, 1.0, 2.1], callback=lambda st: seen.append(st.iteration) or len(seen) == 4)
    assert seen == [1, 2, 3, 4] and s.iteration == 4
    s = anytime_isotonic('squared', [3.0, 1.0, 2.0], max_iter=2)
    assert s.iteration == 2 and not s.converged


def test_custom_loss():
    d = njit(lambda z, y: np.sinh(z - y))             # strictly increasing, not in the library
    rng = np.random.default_rng(4)
    y = rng.normal(size=40)
    res = isotonic_convex(CustomLoss(d), y)
    assert kkt_residual(np.sinh, y, np.ones(40), res.x) <= 1e-10
    res2 = isotonic_convex(CustomLoss(d, njit(lambda z, y: np.cosh(z - y))), y)
    np.testing.assert_allclose(res.x, res2.x, rtol=1e-12, atol=1e-12)
    s = anytime_isotonic(CustomLoss(d), y, tol=1e-9)
    assert np.max(np.abs(s.x - res.x)) <= 1e-9
    for bad in (lambda z, y: y - z, lambda z, y: np.sin(z - y)):
        with pytest.raises(ValueError, match='not strictly convex'):
            isotonic_convex(CustomLoss(njit(bad)), y)


def test_integration_hook_ties_and_zero_weights():
    y = np.array([3.0, 1.0, 2.0, 0.5, 4.0])
    w = np.array([1.0, 0.0, 2.0, 1.0, 1.0])
    groups = np.array([0, 2, 3, 5])                  # x ties: {0,1}, {2}, {3,4}
    for loss in ('squared', PseudoHuber(1.0)):
        lv, starts, wts, _ = _convex_fit_sorted(loss, y, w, 1.0, groups=groups)
        assert set(starts) <= set(groups) and starts[0] == 0 and starts[-1] == 5
        assert np.all(np.diff(lv) > 0)
    lv, starts, wts, _ = _convex_fit_sorted('squared', y * w, w, -1.0, y_is_sum=True)
    np.testing.assert_allclose(np.repeat(lv, np.diff(starts)), scipy_ir(y, weights=w + 1e-300, increasing=False).x)


# ---------------------------------------------------------------- properties

floats = st.floats(-50, 50, allow_nan=False, allow_infinity=False)


@given(st.lists(floats, min_size=1, max_size=30), floats)
def test_squared_shift_invariance(y, c):
    y = np.array(y)
    np.testing.assert_allclose(isotonic_convex('squared', y + c).x, isotonic_convex('squared', y).x + c,
                               atol=1e-9 * (1 + abs(c) + np.max(np.abs(y))))


small = st.floats(-8, 8, allow_nan=False)     # log-cosh saturates (l'' ~ 1e-14) for residuals beyond ~16


@given(st.lists(st.tuples(small, st.floats(0, 8)), min_size=1, max_size=30),
       st.sampled_from(['logcosh', 'PseudoHuber(delta=1)', 'Expectile(tau=0.9)', 'Lp(p=1.5)']))
def test_monotone_in_targets(pairs, name):
    y = np.array([p[0] for p in pairs]); z = y + np.array([p[1] for p in pairs])
    fy, fz = isotonic_convex(LOSSES[name], y).x, isotonic_convex(LOSSES[name], z).x
    assert np.all(fy <= fz + 1e-9 * (1 + np.abs(fz)))


@given(st.lists(floats, min_size=1, max_size=30),
       st.sampled_from(['logcosh', 'PseudoHuber(delta=0.2)', 'Expectile(tau=0.9)', 'SquaredQuartic(a=2)']))
def test_decreasing_is_reversed_increasing(y, name):
    y = np.array(y)
    dec = isotonic_convex(LOSSES[name], y, increasing=False)
    inc = isotonic_convex(LOSSES[name], y[::-1])
    np.testing.assert_allclose(dec.x, inc.x[::-1], rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(dec.x) <= 0)


# ---------------------------------------------------------------- bad input

def test_bad_input():
    with pytest.raises(ValueError, match='targets'): isotonic_convex('squared', [1.0, np.nan])
    with pytest.raises(ValueError, match='targets'): isotonic_convex(PseudoHuber(1.0), [1.0, np.inf])
    with pytest.raises(ValueError, match='weights'): isotonic_convex('squared', [1.0, 2.0], [1.0, np.nan])
    with pytest.raises(ValueError, match='weights'): isotonic_convex('squared', [1.0, 2.0], [1.0, -1.0])
    with pytest.raises(ValueError, match=r'\[0, 1\]'): isotonic_convex('logloss', [0.2, 1.2])
    with pytest.raises(ValueError, match='non-negative'): isotonic_convex('poisson', [0.0, -1.0])
    with pytest.raises(ValueError, match='positive'): isotonic_convex('gamma', [0.0, 1.0])
    with pytest.raises(ValueError, match='loss'): isotonic_convex('l1', [1.0])
    with pytest.raises(ValueError, match='delta'): PseudoHuber(-1)
    with pytest.raises(ValueError, match='tau'): Expectile(1.0)
    with pytest.raises(ValueError, match='p'): Lp(1.0)
    with pytest.raises(ValueError, match='a'): SquaredQuartic(-1)
    with pytest.raises(TypeError, match='increasing'): isotonic_convex('squared', [1.0], increasing='yes')
    for tol in (0, -1e-3, np.nan):
        with pytest.raises(ValueError, match='tol'): anytime_isotonic('squared', [1.0, 2.0], tol=tol)
    for m in (0, -1, 1.5):
        with pytest.raises(ValueError, match='max_iter'): anytime_isotonic('squared', [1.0, 2.0], max_iter=m)
    with pytest.raises(ValueError, match='lower'): anytime_isotonic('squared', [1.0], lower=2, upper=1)
    with pytest.raises(TypeError, match='deriv'): CustomLoss(3.0)


def test_empty():
    r = isotonic_convex(PseudoHuber(1.0), [])
    assert len(r.x) == 0 and list(r.blocks) == [0]
    s = anytime_isotonic('squared', [])
    assert len(s.x) == 0 and s.converged


def test_isotonic_convex_tol():
    "A tolerance only loosens the levels (never the blocks), by at most tol; bad tol values are refused."
    rng = np.random.default_rng(11)
    y = np.cumsum(rng.normal(size=400)) * 0.1 + rng.standard_t(2, 400)
    exact = isotonic_convex(PseudoHuber(1.0), y)
    for tol in (1e-3, 1e-8):
        loose = isotonic_convex(PseudoHuber(1.0), y, tol=tol)
        np.testing.assert_array_equal(loose.blocks, exact.blocks)
        assert np.max(np.abs(loose.x - exact.x)) <= tol
    for bad in (0, -1e-3, np.nan, "1e-3"):
        with pytest.raises(ValueError, match="`tol`"):
            isotonic_convex(PseudoHuber(1.0), y, tol=bad)
