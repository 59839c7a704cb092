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

from isocal.convex import (CustomLoss, Expectile, LogCosh, Lp, PseudoHuber, Quantile, SquaredQuartic, anytime_isotonic, anytime_iter,
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
    ref = scipy_ir(np.delete(y, 1), weights=np.delete(w, 1), increasing=False).x     # the zero weight joins its left
    np.testing.assert_allclose(np.repeat(lv, np.diff(starts)), np.insert(ref, 1, ref[0]))


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


# ---------------------------------------------------------------- issue 12: certified minimisers (mpmath reference)

import mpmath
from hypothesis import assume

MP_DIGITS = 50
MP_DERIV = {   # l'(z; y) of each loss, written from its formula, evaluated in mpmath (r = z - y exact at 50 digits)
    'logcosh': lambda r: mpmath.tanh(r),
    'PseudoHuber(delta=1)': lambda r: r / mpmath.sqrt(1 + r * r),
    'PseudoHuber(delta=0.2)': lambda r: r / mpmath.sqrt(1 + (r / mpmath.mpf(0.2)) ** 2),
    'Expectile(tau=0.9)': lambda r: r * (mpmath.mpf(0.1) if r > 0 else mpmath.mpf(0.9)),
    'Lp(p=1.5)': lambda r: mpmath.sign(r) * abs(r) ** mpmath.mpf(0.5),
    'Lp(p=3)': lambda r: mpmath.sign(r) * r * r,
    'SquaredQuartic(a=2)': lambda r: r + 2 * r ** 3,
}
LOSS_EVEN = dict(LOSSES)                      # the Lp losses twice more: the reported bug is theirs
LOSS_EVEN['Lp(p=1.25)'] = Lp(1.25)
MP_DERIV['Lp(p=1.25)'] = lambda r: mpmath.sign(r) * abs(r) ** mpmath.mpf(0.25)
CUBIC = CustomLoss(njit(lambda z, y: (z - y) + (z - y) ** 3), name='cubic')
LOSS_EVEN['cubic'] = CUBIC
MP_DERIV['cubic'] = lambda r: r + r ** 3
MP_DERIV['PseudoHuber(delta=4)'] = lambda r: r / mpmath.sqrt(1 + (r / 4) ** 2)
KAPPA = {'Lp(p=1.5)': 1.5, 'Lp(p=3)': 3, 'Lp(p=1.25)': 1.25, 'SquaredQuartic(a=2)': 3, 'cubic': 3}


def mp_sum(name, z, y, w):
    "(sum w l'(z; y), sum |w l'(z; y)|) in 50-digit arithmetic, z, y, w the exact doubles."
    with mpmath.workdps(MP_DIGITS):
        t = [mpmath.mpf(wi) * MP_DERIV[name](mpmath.mpf(z) - mpmath.mpf(yi)) for yi, wi in zip(y, w)]
        return mpmath.fsum(t), mpmath.fsum(abs(v) for v in t)


def mp_block_min(name, y, w):
    """The exact block minimiser by bisection at 50 digits on [min y, max y] (translation losses), until the bracket
    is below 2^-70 of its ends (far finer than a double's ulp) or below the smallest subnormal, or the midpoint is an
    exact root."""
    lo, hi = mpmath.mpf(float(np.min(y))), mpmath.mpf(float(np.max(y)))
    with mpmath.workdps(MP_DIGITS):
        for _ in range(4000):
            if hi - lo <= max(abs(lo), abs(hi)) * mpmath.mpf(2) ** -70 or hi - lo < mpmath.mpf(2) ** -1080: break
            mid = (lo + hi) / 2
            d = mp_sum(name, mid, y, w)[0]
            if d == 0: return mid
            if d > 0: hi = mid
            else: lo = mid
        return (lo + hi) / 2


def assert_certified(name, level, y, w):
    """`level` is the exact minimiser of the block (y, w) to within the resolution of its residuals (a forward check
    only): a neighbouring double, or 64 n ε max|y| away (rounding z - y forgets z below an ulp of y, so a level far
    from the targets' magnitude is pinned to that resolution and no finer)."""
    exact = mp_block_min(name, y, w)
    resolution = 64 * len(y) * 2.0 ** -52 * float(np.max(np.abs(y)))
    with mpmath.workdps(MP_DIGITS):
        err = abs(mpmath.mpf(level) - exact)
        near = err <= abs(np.spacing(level)) + abs(np.spacing(float(exact))) + resolution
    assert near, (name, level, float(exact), float(err), list(y), list(w))


def test_reported_lp_targets_at_roots():
    "Issue 12: the last block's summed derivative is exactly 0 at 0; Newton used to stop at -6.7e-6 and 4.9e-5."
    assert isotonic_convex(Lp(1.5), [2., -2, -2, -2, 1, 2, -2, 0, -1]).x[-1] == 0
    assert isotonic_convex(Lp(1.5), [-3., 0, 0, 1, -1, -1, 2, 0, -2, 1]).x[6] == 0


grid = st.sampled_from([-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0])     # repeated values: ties, roots at targets
scales = st.sampled_from([1e-3, 1e-2, 0.1, 1.0, 10.0, 1e2, 1e3])


@given(st.lists(st.one_of(grid, st.floats(-3, 3, allow_nan=False)), min_size=1, max_size=9),
       st.lists(st.sampled_from([1.0, 0.5, 2.0, 3.0, 0.25]), min_size=9, max_size=9), scales,
       st.sampled_from(sorted(LOSS_EVEN)), st.booleans())
def test_block_minimiser_certified_mpmath(values, weights, scale, name, weighted):
    "Every loss's block minimiser (one forced group) against a 50-digit bisection on the summed derivative."
    y = np.array(values) * scale
    w = np.array(weights[:len(y)]) if weighted else np.ones(len(y))
    if name.startswith('PseudoHuber') or name in ('logcosh', 'SquaredQuartic(a=2)', 'cubic'):
        assume(scale <= 10)                  # not scale-free: beyond, the levels are fine but the sqrt-scale of the
    lv, starts, _, _ = _convex_fit_sorted(LOSS_EVEN[name], y, w if weighted else None, 1.0,   # residuals saturates
                                          groups=np.array([0, len(y)], np.intp))
    assert list(starts) == [0, len(y)]
    assert_certified(name, float(lv[0]), y, w)


@given(st.lists(st.one_of(grid, st.floats(-3, 3, allow_nan=False)), min_size=1, max_size=9), scales,
       st.sampled_from(sorted(LOSS_EVEN)), st.booleans())
def test_whole_fit_certified_mpmath(values, scale, name, increasing):
    """Whole fits against 50-digit KKT conditions: every block's level certified for its samples, and every proper
    prefix of a block (every suffix for a decreasing fit) has exact summed derivative <= its rounding bound."""
    if name.startswith('PseudoHuber') or name in ('logcosh', 'SquaredQuartic(a=2)', 'cubic'):
        assume(scale <= 10)
    y = np.array(values) * scale
    res = isotonic_convex(LOSS_EVEN[name], y, increasing=increasing)
    x, b = res.x, res.blocks
    assert np.all(np.diff(x) >= 0) if increasing else np.all(np.diff(x) <= 0)
    for s, e in zip(b[:-1], b[1:]):
        yb, wb = y[s:e], np.ones(e - s)
        assert_certified(name, float(x[s]), yb, wb)
        bound = (e - s + 8 + KAPPA.get(name, 1)) * 2.0 ** -52 * float(mp_sum(name, x[s], yb, wb)[1])
        for k in range(1, e - s):
            part = yb[:k] if increasing else yb[k:]
            assert float(mp_sum(name, x[s], part, np.ones(len(part)))[0]) <= bound + 1e-300, (s, e, k)


# ---------------------------------------------------------------- issue 12: one zero-weight rule


def test_reported_zero_weights_decreasing():
    y, w = [3., 3, 4, 1, 1, 1], [0, 22, 0, 13.25, 0, 0]
    ref = isotonic_regression(y, w, increasing=False).x
    assert list(ref) == [3, 3, 3, 1, 1, 1]
    for loss in (Lp(3.0), PseudoHuber(1.0), 'logcosh', Expectile(0.5), SquaredQuartic(0.0)):
        np.testing.assert_allclose(isotonic_convex(loss, y, w, increasing=False).x, ref, rtol=1e-12)


@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0]), st.sampled_from([0.0, 0.0, 1.0, 2.5])),
                min_size=1, max_size=12),
       st.sampled_from(sorted(LOSS_EVEN) + ['logloss', 'poisson', 'gamma']), st.booleans())
def test_zero_weight_placement_is_the_squared_rule(pairs, name, increasing):
    """Zero-weight samples sit where isotonic_regression (squared loss) puts them: in the block on their left in the
    given order, whatever the loss and direction. Reference: the squared path's block membership."""
    y = np.array([p[0] for p in pairs]); w = np.array([p[1] for p in pairs])
    assume(w.sum() > 0)
    if name == 'logloss': y = y / 4
    if name == 'gamma': y = y + 1
    loss = LOSS_EVEN.get(name, name)
    res = isotonic_convex(loss, y, w, increasing=increasing)
    pos = np.flatnonzero(w > 0)
    owner = np.maximum.accumulate(np.where(w > 0, np.arange(len(w)), -1))
    owner[owner < 0] = pos[0]                   # leading zero weights: the first positive sample's block
    np.testing.assert_array_equal(res.x, res.x[owner])
    squared = isotonic_regression(y, w, increasing=increasing)
    zero_starts = set(squared.blocks[1:-1]) & set(np.flatnonzero(w == 0))
    assert not zero_starts                      # the squared path never starts a block at a zero weight (but index 0)
    assert not (set(res.blocks[1:-1]) & set(np.flatnonzero(w == 0)))


# ---------------------------------------------------------------- issue 12: options and extreme magnitudes

def test_numeric_options_named():
    for kw in ('lower', 'upper'):
        for bad in ('a', None if kw == 'x' else [1.0], np.nan, True):
            if bad is None: continue
            with pytest.raises((TypeError, ValueError), match=f'`{kw}`'):
                anytime_isotonic('squared', [1.0, 2.0], **{kw: bad})
    for bad in ('a', True, [1]):
        with pytest.raises((TypeError, ValueError), match='`tol`'): anytime_isotonic('squared', [1.0, 2.0], tol=bad)
        with pytest.raises((TypeError, ValueError), match='`tol`'): isotonic_convex(Lp(1.5), [1.0, 2.0], tol=bad)
        with pytest.raises((TypeError, ValueError), match='`max_iter`'):
            anytime_isotonic('squared', [1.0, 2.0], max_iter=bad)
    for cls, kw in ((PseudoHuber, 'delta'), (Expectile, 'tau'), (Lp, 'p'), (SquaredQuartic, 'a')):
        for bad in ('a', True, None, [1.0]):
            with pytest.raises((TypeError, ValueError), match=f'`{kw}`'): cls(bad)
    with pytest.raises(TypeError, match='callback'): anytime_isotonic('squared', [1.0, 2.0], callback=3)
    with pytest.raises((TypeError, ValueError), match='`loss`'): isotonic_convex(3.0, [1.0])


def test_custom_loss_signature():
    for bad in (lambda z: z, lambda: 0.0, lambda z, y, t: z):
        with pytest.raises(TypeError, match='`deriv`'): CustomLoss(bad)
    with pytest.raises(TypeError, match='`deriv2`'): CustomLoss(lambda z, y: z - y, lambda z: 1.0)
    with pytest.raises(TypeError, match='`deriv`'): CustomLoss(njit(lambda z, y: 'x'))
    with pytest.raises(TypeError, match='`name`'): CustomLoss(lambda z, y: z - y, name=3)
    with pytest.raises(TypeError, match='`value`'): CustomLoss(lambda z, y: z - y, value=3)


def test_anytime_huge_finite_targets():
    "Issue 12: finite targets are valid for squared loss; the doubling phase must not call them infinite."
    s = anytime_isotonic('squared', [2e300, 1e300])
    np.testing.assert_allclose(s.x, [1.5e300, 1.5e300], rtol=1e-12)
    # pseudo-Huber's derivative at residuals of 1e308 is its limit ±δ to within 1e-616: the limits cancel, and the
    # remainders, which underflow, are compared on the log scale (issue 28): exact twins, so the level is 0
    for fit in (anytime_isotonic, isotonic_convex):
        assert fit(PseudoHuber(1.0), [1e308, -1e308]).x.tolist() == [0.0, 0.0]


@pytest.mark.parametrize('name', sorted(LOSS_EVEN))
def test_extreme_weights_and_targets(name):
    "Weights near 1e308 and targets near ±1e308 give the representable answer (references: scale invariance)."
    loss = LOSS_EVEN[name]
    small = isotonic_convex(loss, [1.0, 0.0]).x
    np.testing.assert_allclose(isotonic_convex(loss, [1.0, 0.0], [1e308, 1e308]).x, small, rtol=1e-15)
    np.testing.assert_allclose(isotonic_convex(loss, [1.0, 0.0, 3.0], [1e308, 1e308, 1e-300]).x,
                               np.r_[small, 3.0], rtol=1e-15)
    if name in ('Expectile(tau=0.9)', 'Lp(p=1.5)', 'Lp(p=3)', 'Lp(p=1.25)'):     # scale-equivariant losses
        for big in (1e300, 1.5e308):
            y = np.array([1.0, -1.0, 0.5, 0.25]) * big
            ref = isotonic_convex(loss, y / big).x * big
            np.testing.assert_allclose(isotonic_convex(loss, y).x, ref, rtol=1e-14)


@given(st.sampled_from([-2.0, -0.5, 0.0, 0.75, 3.0]), st.lists(st.floats(0.01, 3), min_size=1, max_size=4),
       scales, st.sampled_from(sorted(n for n in LOSS_EVEN if not n.startswith('Expectile'))), st.randoms())
def test_block_minimiser_target_at_root(centre, offsets, scale, name, rnd):
    """Targets placed symmetrically around a target c: the summed derivative of an odd l' is exactly 0 at c, where
    Lp with p < 2 has infinite curvature (Newton alone stalls there). The level must be c itself."""
    if name.startswith('PseudoHuber') or name in ('logcosh', 'SquaredQuartic(a=2)', 'cubic'):
        assume(scale <= 10)
    c = centre * scale
    y = [c] + [c + o * scale for o in offsets] + [c - o * scale for o in offsets]
    assume(all(v - c == c - u for v, u in zip(y[1:1 + len(offsets)], y[1 + len(offsets):])))   # exact symmetry
    rnd.shuffle(y)
    y = np.array(y)
    lv, _, _, _ = _convex_fit_sorted(LOSS_EVEN[name], y, None, 1.0, groups=np.array([0, len(y)], np.intp))
    assert_certified(name, float(lv[0]), y, np.ones(len(y)))
    if name.startswith('Lp(p=1.'): assert lv[0] == c
    for increasing in (True, False):          # through pooling: the brackets it leaves are not symmetric around c
        res = isotonic_convex(LOSS_EVEN[name], y, increasing=increasing)
        for s, e in zip(res.blocks[:-1], res.blocks[1:]):
            assert_certified(name, float(res.x[s]), y[s:e], np.ones(e - s))
            if name.startswith('Lp(p=1.') and (s, e) == (0, len(y)): assert res.x[0] == c


def test_extreme_parameters_and_spans():
    "Residuals far beyond delta, cubes beyond 1e308: no NaN, no false 'not convex', the representable answer."
    y = np.array([1.0, -1.0, 0.5, 3.0])
    for delta in (1e-310, 1e-300):           # (r/δ)² overflows: l' is ±δ to the last bit, and even its remainder
        assert isotonic_convex(PseudoHuber(delta), y).x.tolist() == [0.0, 0.0, 0.5, 3.0]   # δ³/r² underflows: the
        # pair {1, -1} has D = 0 on all of (-1, 1) in double precision; its remainders on the log scale decide
    x = isotonic_convex(PseudoHuber(1e-100), y).x                   # remainders ~1e-300 still resolve it exactly
    assert list(x) == [0.0, 0.0, 0.5, 3.0]                          # (odd l': the pair's minimiser is 0)
    for big in (1e100, 1e200, 1e300):        # symmetric pair: level exactly 0 (odd l'), then the third alone
        np.testing.assert_array_equal(isotonic_convex(SquaredQuartic(2.0), [big, -big, big / 2]).x, [0, 0, big / 2])
        np.testing.assert_array_equal(isotonic_convex(PseudoHuber(big / 4), [big, -big, big / 2]).x, [0, 0, big / 2])
    with pytest.raises(ValueError, match='`loss`'):          # a custom loss cannot be rescaled: refused, named
        isotonic_convex(CustomLoss(njit(lambda z, y: np.sinh(z - y))), [800.0, -800.0])
    with pytest.raises(ValueError, match='`targets`.*overflows'):   # 4^1999 even at scale 1: refused, named
        isotonic_convex(Lp(2000.0), [3.0, -3.0])


# ---------------------------------------------------------------- issue 12: saturating derivatives (flat D)

def test_reported_pseudo_huber_saturated():
    """Issue 12: once |r| > 1e8 δ the pseudo-Huber derivative rounds to ±δ, so the summed derivative of the block
    {1e100, -1e100} was exactly 0 on all of (-1e100, 1e100) and the pooling merged 5e99 into it. Exact answer: the
    pair's minimiser is 0 (the derivative is odd), below 5e99, so no further pooling."""
    assert list(isotonic_convex(PseudoHuber(1.0), [1e100, -1e100, 5e99]).x) == [0.0, 0.0, 5e99]
    # decreasing: {-1e100, 5e99} pools, and its minimiser is their midpoint -2.5e99 (odd derivative)
    assert list(isotonic_convex(PseudoHuber(1.0), [1e100, -1e100, 5e99], increasing=False).x) == [1e100, -2.5e99, -2.5e99]


def test_logcosh_far_remainders_decide():
    """Log-cosh past |r| = 372: e^(-2|r|) underflows and the summed derivative is exactly 0 on a whole interval; the
    remainders compared on the log scale (issue 28) give the exact answer the pooling engine refused."""
    for fit in (isotonic_convex, anytime_isotonic):
        assert fit('logcosh', [1e100, -1e100, 5e99]).x.tolist() == [0.0, 0.0, 5e99]


def test_flat_custom_loss_raises():
    """The one refusal left: a custom loss whose derivative, as computed, is exactly ±1 on a whole interval (tanh
    beyond |r| = 19.1). The engine sees only those values, so every point of the interval fits them equally well:
    the level is undetermined by the loss as given (in exact arithmetic it is 0), and no point is returned."""
    flat = CustomLoss(njit(lambda z, y: np.tanh(z - y)), name='tanh')
    for fit in (isotonic_convex, anytime_isotonic):
        with pytest.raises(ValueError, match='cannot be determined in double precision'):
            fit(flat, [100., -100., 50.])


def mp_split(name, r):
    """l'(r) as (saturation part, remainder) with exact sum: sign(r) δ (or sign(r)) for pseudo-Huber (log-cosh)
    beyond |r| > δ (1), so that 50 digits resolve the remainder even where it is 1e-200 of the whole; 0 otherwise."""
    if name.startswith('PseudoHuber'):
        d = mpmath.mpf(1.0 if name.endswith('=1)') else 0.2)
        if abs(r) <= d: return mpmath.mpf(0), MP_DERIV[name](r)
        s = d / r
        q = mpmath.sqrt(1 + s * s)
        return mpmath.sign(r) * d, -mpmath.sign(r) * d * s * s / (q * (1 + q))
    if name == 'logcosh' and abs(r) > 1:
        t = mpmath.exp(-2 * abs(r))
        return mpmath.sign(r), -mpmath.sign(r) * 2 * t / (1 + t)
    return mpmath.mpf(0), MP_DERIV[name](r)


def mp_sum_split(name, z, y, w):
    "Summed derivative at 50 digits, the saturation parts added first (they are exact)."
    with mpmath.workdps(MP_DIGITS):
        parts = [mp_split(name, mpmath.mpf(z) - mpmath.mpf(yi)) for yi in y]
        big = mpmath.fsum(mpmath.mpf(wi) * p[0] for wi, p in zip(w, parts))
        return big + mpmath.fsum(mpmath.mpf(wi) * p[1] for wi, p in zip(w, parts))


def mp_block_min_split(name, y, w):
    lo, hi = mpmath.mpf(float(np.min(y))), mpmath.mpf(float(np.max(y)))
    with mpmath.workdps(MP_DIGITS):         # bisection of the exponent first (ends 1e100 apart), then of the value
        while hi - lo > mpmath.mpf(10) ** -30 * max(abs(lo), abs(hi)):
            if lo < 0 < hi: mid = mpmath.mpf(0) if lo != -hi or mp_sum_split(name, 0, y, w) != 0 else None
            else: mid = None
            if mid is None or not lo < mid < hi:
                a, b = sorted([abs(lo), abs(hi)])
                mid = (lo + hi) / 2 if b <= 4 * a else mpmath.sign(hi) * mpmath.sqrt(max(a, mpmath.mpf(10) ** -300) * b)
                if not lo < mid < hi: mid = (lo + hi) / 2
            if mid == lo or mid == hi: break
            d = mp_sum_split(name, mid, y, w)
            if d == 0: return mid
            if d > 0: hi = mid
            else: lo = mid
        return (lo + hi) / 2


def mp_isotonic(name, y, w):
    "The exact increasing fit by the min-max formula over 50-digit block minimisers (shares nothing with pooling)."
    n = len(y)
    m = {(s, e): mp_block_min_split(name, y[s:e + 1], w[s:e + 1]) for s in range(n) for e in range(s, n)}
    return [max(min(m[s, e] for e in range(i, n)) for s in range(i + 1)) for i in range(n)]


mantissas = st.one_of(st.sampled_from([-3.0, -1.0, -0.5, 0.5, 1.0, 3.0]), st.floats(-3, 3, allow_nan=False))
exponents = st.sampled_from([0, 1, 9, 20, 60, 100])
MAY_RAISE = {'logcosh', 'SquaredQuartic(a=2)', 'cubic',    # flat beyond |r| = 372; overflow of r³ near 1e100
             'Lp(p=3)', 'Lp(p=1.5)', 'Lp(p=1.25)'}            # a range that scaling cannot keep in double precision


@given(st.lists(st.tuples(mantissas, exponents), min_size=2, max_size=4),
       st.lists(st.sampled_from([1.0, 0.5, 2.0, 3.0]), min_size=4, max_size=4),
       st.sampled_from(sorted(LOSS_EVEN)), st.booleans())
def test_saturated_targets_exact_or_raise(pairs, weights, name, weighted):
    """Targets up to 1e100 times the loss's saturation scale: every fitted value within 1e-9 of the largest |y| in
    its exact block of the 50-digit exact fit (the bug returned 5e99 for 0), or a ValueError saying the level is not
    determined in double precision (allowed only where the derivative saturates beyond repair, or r³ overflows)."""
    y = np.array([m * 10.0 ** e for m, e in pairs])
    w = np.array(weights[:len(y)]) if weighted else np.ones(len(y))
    try:
        x = isotonic_convex(LOSS_EVEN[name], y, w if weighted else None).x
    except ValueError as err:
        assert name in MAY_RAISE and 'double precision' in str(err), (name, list(y), str(err))
        return
    exact = mp_isotonic(name, y, w)
    with mpmath.workdps(MP_DIGITS):
        for i in range(len(y)):
            block = [j for j in range(len(y)) if exact[j] == exact[i]]
            scale = max(abs(y[j]) for j in block)
            assert abs(mpmath.mpf(float(x[i])) - exact[i]) <= 1e-9 * scale + 1e-300, (
                name, list(y), list(w), list(x), [float(v) for v in exact])


# ------------------------------------------------ issue 12's class, found by the property above (fixed, kept exact)
def test_lp_huge_cancelling_targets():
    """The ±5e59 terms of the summed derivative cancel below their own ulp for every |z| < 1e44, so the rounded
    residuals z - y cannot tell -1 from 0; the group comparison used to call that a tie and pool everything to -3.
    Residuals carried exactly (TwoSum) see the difference."""
    assert isotonic_convex(Lp(1.25), [-3., -1., 5e59, -5e59]).x.tolist() == [-3., -1., 0., 0.]
    assert anytime_isotonic(Lp(1.25), [-3., -1., 5e59, -5e59]).x.tolist() == [-3., -1., 0., 0.]


def test_close_calls_go_to_the_exact_comparisons():
    """The decomposition's kernel stops at a close call (at 0 the pair 5e59, -5e59 cancels exactly) with its segment
    on the stack; the exact comparisons decide it, and ask first for the high-resolution sums (which a first call
    does not compile) since these targets dwarf the threshold; the fit gives the exact answer."""
    from isocal import decomposition as dc
    loss, y = Lp(1.25), np.array([-3., -1., 5e59, -5e59])
    n, w, cut = len(y), np.empty(0), np.empty(0, np.bool_)
    x, stats, stack = np.empty(n), np.zeros(2, np.int64), np.empty((64, dc._NCOL))
    dc._start(stack[0], 0, n, np.nextafter(-5e59, -np.inf), 5e59, 0.0, 0.0, 1.0)
    stack[0, dc._NCHEAP], stack[0, dc._FORCE] = 0.0, 0.0      # no cheap steps: the first checked pass at 0
    status, top = dc._decompose(loss.code, loss.params, y, w, y, cut, x, stack, 1, stats, 0.0, *dc._frozen_buffers(n))
    assert status == dc._NEED_EXACT and top == 1 and stack[0, dc._FORCE] == 0.0
    assert dc._exact_scan(loss.code, loss.params, y, w, cut, 0, n, 0.0, None, stats)[0] == dc._NEED_HIRES
    status, kb, Pb, tie, _ = dc._exact_scan(loss.code, loss.params, y, w, cut, 0, n, 0.0, True, stats)
    assert (status, kb, tie) == (0, n, False)           # the pair ties at 0: the largest maximising cut is n
    assert isotonic_convex(loss, y).x.tolist() == [-3., -1., 0., 0.]


def test_logcosh_far_pair_is_exact():
    """Past |r| = 370 tanh's remainder underflows: the pair (20, -3e9) has a summed derivative exactly 0 on a whole
    interval in double precision; on the log scale the remainders balance exactly at the midpoint -1.5e9 + 10, the
    pair's exact level (the pooling engine refused it). A remainder that underflows used to count as an unsplit
    term, whose rounding bound then hid the certain sign at -3."""
    for fit in (isotonic_convex, anytime_isotonic):
        assert fit('logcosh', [20., -3e9, -3.]).x.tolist() == [-1.5e9 + 10, -1.5e9 + 10, -3.0]


def test_symmetric_pair_beside_a_zero_is_exact():
    "Exact ties beside a group of zeros (the tie is pinned at the zeros' own scale, not refused)."
    for loss in (Lp(1.5), Lp(1.25), 'logcosh', PseudoHuber(0.5)):
        assert isotonic_convex(loss, [1., -1., 0.]).x.tolist() == [0., 0., 0.]
        assert anytime_isotonic(loss, [1., -1., 0.]).x.tolist() == [0., 0., 0.]


def test_anytime_joined_sign_is_summed_again():
    """anytime's join used to add two groups' derivative sums: tanh(-20) + tanh(3e9) rounds to 0 (exactly, it is
    +4e-18), which joined the next point too and returned -3 everywhere."""
    assert anytime_isotonic('logcosh', [20., -3e9, -3.]).x.tolist() == [-1.5e9 + 10, -1.5e9 + 10, -3.0]
    s = anytime_isotonic('logcosh', [20., -30., -3.])      # the same shape within tanh's resolution: exact
    ref = isotonic_convex('logcosh', [20., -30., -3.]).x
    assert np.allclose(s.x, ref, rtol=0, atol=1e-12) and s.converged


@given(st.lists(st.tuples(mantissas, exponents), min_size=2, max_size=4),
       st.sampled_from(sorted(LOSS_EVEN)), st.booleans())
def test_anytime_saturated_targets_exact_or_raise(pairs, name, increasing):
    "anytime_isotonic on the same wide-range targets: within 1e-9 of the exact fit's block scale, or a ValueError."
    y = np.array([m * 10.0 ** e for m, e in pairs])
    try: s = anytime_isotonic(LOSS_EVEN[name], y, increasing=increasing)
    except ValueError as err:
        assert 'double precision' in str(err) or 'not finite' in str(err), str(err)
        return
    exact = mp_isotonic(name, y if increasing else y[::-1], np.ones(len(y)))
    x = s.x if increasing else s.x[::-1]
    yy = y if increasing else y[::-1]
    with mpmath.workdps(MP_DIGITS):
        for i in range(len(y)):
            scale = max(abs(yy[j]) for j in range(len(y)) if exact[j] == exact[i])
            assert abs(mpmath.mpf(float(x[i])) - exact[i]) <= 1e-9 * scale + 1e-300, (
                name, list(y), increasing, list(s.x), [float(v) for v in exact])


def test_scaling_never_flushes_small_targets():
    """Lp(3) on targets near 3e100 must divide them by a power of two (r² would overflow); a target of 2.4e-227 would
    then become 0 and the fit returned 0 for it. Exact or raise: the scaling refuses to lose a target."""
    with pytest.raises(ValueError, match='span too wide a range'):
        isotonic_convex(Lp(3), [-3e100, 2.4e-227])
    with pytest.raises(ValueError, match='span too wide a range'):
        anytime_isotonic(Lp(3), [-3e100, 2.4e-227])
    assert isotonic_convex(Lp(3), [-3e100, 0.0, 5.0]).x.tolist() == [-3e100, 0.0, 5.0]    # zeros and 5 survive
    assert isotonic_convex(Lp(1.25), [-3e100, 2.4e-227]).x.tolist() == [-3e100, 2.4e-227]  # no scaling needed


# ---------------------------------------------------------------- issue 28: never refuse a well-posed fit

from fractions import Fraction

PROPERTY_PROBLEMS = 10_000                   # problems, each fitted under every built-in loss and both directions
PROPERTY_CHUNKS = 40
BUILT_IN = {name: loss for name, loss in LOSS_EVEN.items() if name != 'cubic'}


def random_problem(rng):
    """One problem of the property: n <= 50 targets (normal, integers or two values), scaled by up to 1e6, and
    weights log-uniform in [1e-6, 1e6] (or unit)."""
    n = int(rng.integers(1, 51))
    kind = rng.integers(3)
    if kind == 0: y = rng.normal(size=n)
    elif kind == 1: y = rng.integers(-5, 6, n).astype(float)
    else: y = rng.choice(np.round(rng.normal(size=2), 3), n)
    y = y * 10.0 ** rng.uniform(0, 6)
    w = 10.0 ** rng.uniform(-6, 6, n) if rng.random() < 0.75 else np.ones(n)
    return y, w


def mp_terms(name, z, y, w):
    """w l'(z; y) per sample at 50 digits; pseudo-Huber and log-cosh beyond their knee as the limit plus the remainder
    (as `mp_split`), the limits summed first, so that a remainder of 1e-200 of the whole is not lost."""
    with mpmath.workdps(MP_DIGITS):
        if not (name.startswith('PseudoHuber') or name == 'logcosh'):
            return [mpmath.mpf(wi) * MP_DERIV[name](mpmath.mpf(z) - mpmath.mpf(yi)) for yi, wi in zip(y, w)]
        d = mpmath.mpf(name[len('PseudoHuber(delta='):-1]) if name != 'logcosh' else None
        out = []
        for yi, wi in zip(y, w):
            r = mpmath.mpf(z) - mpmath.mpf(yi)
            if d is not None and abs(r) > d:
                s = d / r
                q = mpmath.sqrt(1 + s * s)
                big, rest = mpmath.sign(r) * d, -mpmath.sign(r) * d * s * s / (q * (1 + q))
            elif d is None and abs(r) > 1:
                t = mpmath.exp(-2 * abs(r))
                big, rest = mpmath.sign(r), -mpmath.sign(r) * 2 * t / (1 + t)
            else: big, rest = mpmath.mpf(0), MP_DERIV[name](r)
            out.append(SplitTerm(mpmath.mpf(wi) * big, mpmath.mpf(wi) * rest))
        return out


class SplitTerm:
    "A 50-digit term kept as (limit part, remainder): sums add the parts separately, so remainders survive."
    def __init__(self, big, rest): self.big, self.rest = big, rest
    def __add__(self, o):
        o = o if isinstance(o, SplitTerm) else SplitTerm(o, 0)
        return SplitTerm(self.big + o.big, self.rest + o.rest)
    __radd__ = __add__
    def value(self): return self.big + self.rest


def mp_total(terms):
    "The exact-to-50-digits sum of `mp_terms`' terms (limits first, then remainders)."
    if terms and isinstance(terms[0], SplitTerm):
        return mpmath.fsum(t.big for t in terms) + mpmath.fsum(t.rest for t in terms)
    return mpmath.fsum(terms)


def assert_fit_certified(name, x, y, w, cut_ok=None):
    """The whole increasing fit x of (y, w) certified against 50-digit derivatives: non-decreasing; each block's exact
    minimiser bracketed within `assert_certified`'s tolerance t of its level v (the summed derivative negative at
    v - t, positive at v + t); and at v - t, below the exact level, every proper prefix of the block has a summed
    derivative <= the rounding bound (KKT: <= 0 at the exact level; Lp with p < 2 moves a target's term by ~sqrt(ulp)
    per ulp, so the rounded level itself cannot be asked for it). `cut_ok[k]` (optional): may a block start at k
    (tied scores share a level, so only prefixes ending between groups count)."""
    assert np.all(np.diff(x) >= 0), (name, list(y), list(w), list(x))
    runs = np.flatnonzero(np.r_[True, x[1:] != x[:-1], True])
    for s, e in zip(runs[:-1], runs[1:]):
        v, yb, wb = float(x[s]), y[s:e], w[s:e]
        t = 1.5 * float(np.spacing(abs(v))) + 64 * (e - s) * 2.0 ** -52 * float(np.max(np.abs(yb)))
        with mpmath.workdps(MP_DIGITS):
            low = mp_terms(name, mpmath.mpf(v) - mpmath.mpf(t), yb, wb)
            above = mp_total(mp_terms(name, mpmath.mpf(v) + mpmath.mpf(t), yb, wb))
            assert mp_total(low) < 0 < above, (name, v, t, list(y), list(w))
            values = [u.value() if isinstance(u, SplitTerm) else u for u in low]
            bound = (e - s + 8 + KAPPA.get(name, 1)) * 2.0 ** -52 * float(mpmath.fsum(abs(u) for u in values))
            big = rest = mpmath.mpf(0)                 # the prefix sums, limits and remainders apart (as mp_total)
            for k in range(1, e - s):
                u = low[k - 1]
                if isinstance(u, SplitTerm): big, rest = big + u.big, rest + u.rest
                else: rest += u
                if cut_ok is not None and not cut_ok[s + k]: continue
                assert float(big + rest) <= bound + 1e-300, (name, v, list(y), list(w))


def exact_lower_quantile_fit(y, w, tau):
    "The smallest isotonic tau-quantile fit by the min-max formula over exact (rational) lower block quantiles."
    n = len(y)
    tau = Fraction(tau)
    def q(s, e):
        pairs = sorted(zip(y[s:e + 1], map(Fraction, w[s:e + 1])))
        total, run = sum(p[1] for p in pairs), Fraction(0)
        for v, wi in pairs:
            run += wi
            if run >= tau * total: return v
    m = {(s, e): q(s, e) for s in range(n) for e in range(s, n)}
    return np.array([max(min(m[s, e] for e in range(i, n)) for s in range(i + 1)) for i in range(n)])


@pytest.mark.parametrize('chunk', range(PROPERTY_CHUNKS))
def test_never_refuses_a_well_posed_fit(chunk):
    """Issue 28, part 7: 10,000 random problems (see `random_problem`), each under every built-in loss and in both
    directions: no fit raises, and every fit is certified against 50-digit derivatives (the pinball loss: equal to
    the exact smallest optimum)."""
    per = PROPERTY_PROBLEMS // PROPERTY_CHUNKS
    for k in range(chunk * per, (chunk + 1) * per):
        rng = np.random.default_rng(k)
        y, w = random_problem(rng)
        for increasing in (True, False):
            yy, ww = (y, w) if increasing else (y[::-1], w[::-1])
            for name, loss in BUILT_IN.items():
                x = isotonic_convex(loss, y, w, increasing=increasing).x
                assert_fit_certified(name, x if increasing else x[::-1], yy, ww)
            tau = float(rng.choice([0.1, 0.5, 0.9]))
            x = isotonic_convex(Quantile(tau), y, w, increasing=increasing).x
            ref = exact_lower_quantile_fit(yy, ww, tau) if len(y) <= 30 else None
            if ref is not None: np.testing.assert_array_equal(x if increasing else x[::-1], ref)


def test_reported_refusals_are_fits():
    "Issue 28: two ordinary problems the pooling engine refused ('cannot be determined in double precision')."
    y = np.array([0, 0, 2.5, 2.5, 0, 2.5, 2.5, 0, 0, 2.5])
    w = np.array([0.002521163808368092, 0.004888406578531095, 3.003380846341256, 2.2275639219322403,
                  0.005821152498924297, 8.386481626103697, 23.650166037404105, 3.0665182792299883,
                  0.3878461791163936, 35.264857919330595])
    assert_fit_certified('PseudoHuber(delta=4)', isotonic_convex(PseudoHuber(4), y, w).x, y, w)
    y = np.array([0, 0, 2.5, 1, 0, 2.5])
    w = np.array([0.006133903268654635, 0.000665496850027263, 0.039628511747757514, 0.0027219170332236325,
                  0.386069831103829, 8.26691797908006e-06])
    assert_fit_certified('logcosh', isotonic_convex('logcosh', y, w).x, y, w)


@pytest.mark.parametrize('y', [[0., 0, 0, 0, 0, 0, 1, 0, 1, 0, 0], [3e-163, 1e-163, 0], [3e-163, 1e-163, 0, 5],
                               [1e30 + 1e14, 1e30, 3e-163, 1e-163, 0, 1e-100], [3e-300, 1e-300, 0, 2.0],
                               [1.5e-323, 5e-324, 0.0], [0.0, 0.0, 1e-320, 0.0, 1.0]])   # (subnormal residuals)
@pytest.mark.parametrize('name', ['Lp(p=3)', 'Lp(p=4.5)'])
def test_lp_powers_that_underflow(name, y):
    MP_DERIV.setdefault('Lp(p=4.5)', lambda r: mpmath.sign(r) * abs(r) ** mpmath.mpf(3.5))
    KAPPA.setdefault('Lp(p=4.5)', 4.5)
    """Lp's |r|^(p-1) underflows below |r| ~ 1e-162 (p = 3): a block of zeros is not 'exactly balanced' at a level
    of 1e-162 (the fit once stopped there), and residuals of 1e-163 still decide their block's level."""
    y = np.asarray(y, float)
    for increasing in (True, False):
        yy = y if increasing else y[::-1]
        x = isotonic_convex(Lp(float(name[5:-1])), y, increasing=increasing).x
        assert_fit_certified(name, x if increasing else x[::-1], yy, np.ones(len(y)))


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0])),
                min_size=1, max_size=20),
       st.sampled_from(['PseudoHuber(delta=1)', 'Expectile(tau=0.9)', 'Lp(p=1.5)', 'quantile']), st.booleans())
def test_zero_weights_in_tied_groups_change_nothing(rows, name, increasing):
    """With tied scores (ties="secondary"), a zero weight in a group with a positive weight takes its group's level:
    the staircase at the positive-weight samples is the staircase fitted without the zero weights (which cannot
    change the optimum). A zero weight opening a tied group once split the group between two blocks."""
    from isocal.fit import fit_staircase
    x, y, w = (np.array(v, float) for v in zip(*rows))
    assume(np.any(w > 0))
    loss = Quantile(0.3) if name == 'quantile' else LOSSES[name]
    k = w > 0
    full = fit_staircase(x, y, w, loss=loss, increasing=increasing)
    pos = fit_staircase(x[k], y[k], w[k], loss=loss, increasing=increasing)
    np.testing.assert_array_equal(full(x[k]), pos(x[k]))


def test_anytime_refuses_bounds_that_exclude_the_fit():
    """Issue 30: a `lower` above the fit (or `upper` below it) once converged to the wrong bound; bounds that hold the
    fit though not every target (the pooled pair [5, -2] sits at 1.004 > 0) still run."""
    with pytest.raises(ValueError, match='`lower`'):
        anytime_isotonic('logcosh', [-2., -2., 1.], lower=0.0)
    with pytest.raises(ValueError, match='`upper`'):
        anytime_isotonic('logcosh', [-2., -2., 1.], upper=0.0)
    s = anytime_isotonic('logcosh', [5., -2., 1.], lower=0.0)
    np.testing.assert_allclose(s.x, isotonic_convex('logcosh', [5., -2., 1.]).x, rtol=1e-12)


@pytest.mark.parametrize('y', [[-1.7e308, 1.7e308], [1.7e308, -1.7e308], [5e-324, 1e-323, 0.0], [-1e-323, 5e-324]])
@pytest.mark.parametrize('increasing', [True, False])
def test_anytime_at_the_ends_of_the_double_range(y, increasing):
    """Issue 30: targets ±1.7e308 once gave [-inf, inf] 'converged' (the doubling trick overflowed), and subnormal
    targets an estimate outside its own bounds (½lo + ½hi rounds below lo there). The estimate lies within its
    bounds, and the bounds contain the exact fit."""
    s = anytime_isotonic(PseudoHuber(1.0), y, increasing=increasing)
    exact = isotonic_convex(PseudoHuber(1.0), y, increasing=increasing).x
    assert s.converged and np.all(np.isfinite(s.x))
    assert np.all((s.lower <= s.x) & (s.x <= s.upper))
    assert np.all((s.lower <= exact) & (exact <= s.upper))


def test_loss_deriv_refuses_none():
    "Issue 30: `Lp(1.5).deriv([0., 1.], None)` returned [nan, nan] (NumPy turns None into nan)."
    with pytest.raises(TypeError, match='`y`'):
        Lp(1.5).deriv(np.array([0.0, 1.0]), None)
    with pytest.raises(TypeError, match='`z`'):
        Lp(1.5).deriv([0.0, None], 1.0)
    np.testing.assert_allclose(Lp(1.5).deriv([0.0, 1.0], 0.5), [-np.sqrt(0.5), np.sqrt(0.5)])


@pytest.mark.parametrize('w', [5e-324, 1e-320, 1e-200])
def test_uniform_tiny_weights_change_nothing(w):
    "Issue 30: uniform weights of 5e-324 or 1e-320 changed the Lp fit (their products with l' underflowed)."
    y = np.array([-0.23, 0.05, 0.67, -0.58, 0.53, -0.42])
    for name in ('Lp(p=1.5)', 'Expectile(tau=0.9)', 'PseudoHuber(delta=0.2)'):
        x = isotonic_convex(LOSSES[name], y, [w] * 6).x
        assert_fit_certified(name, x, y, np.full(6, w))
        np.testing.assert_allclose(x, isotonic_convex(LOSSES[name], y).x, rtol=1e-13)   # (and no block lost)


def test_newton_across_a_steep_root_stays_bounded():
    """Lp(1.5) on integer targets with weights spanning 1e±6: Newton's step from either side of a root where
    l' ~ sqrt|r| lands about as far on the other side, and the bracket shrank by ~1e-6 per pass (n = 200 took 7.7
    million derivative evaluations per sample, n = 1e7 440 s). A pass that jumps across the root without halving the
    bracket is followed by a bisection. Evaluation counts are deterministic: no timing involved."""
    worst = 0.0
    for seed in range(60):
        rng = np.random.default_rng([0, 3, 200, seed])
        y, w = rng.integers(0, 5, 200).astype(float), 10.0 ** rng.uniform(-6, 6, 200)
        r = isotonic_convex(Lp(1.5), y, w)
        if seed < 6: assert_fit_certified('Lp(p=1.5)', r.x, y, w)
        worst = max(worst, r.n_evals / 200)
    assert worst < 100, worst


def test_one_growing_block_settles_in_a_few_passes():
    """Strictly decreasing targets make the increasing fit one block. Once its bounds are a few ulps apart the next
    threshold is the regula falsi point of the two bracketing sums (Illinois rule), not a bisection: Expectile(0.8)
    took 13 evaluations per sample at n = 1e6 with bisection, 7 now; the others 3-5. Deterministic counts."""
    n = 20_000
    y = -np.arange(n) / n + np.random.default_rng(1).uniform(0, 0.25 / n, n)
    for loss in (PseudoHuber(1.0), 'logcosh', Lp(1.5), Lp(3.0), Expectile(0.8), Expectile(0.1), SquaredQuartic(1.0)):
        r = isotonic_convex(loss, y)
        assert len(r.blocks) == 2 and r.n_evals / n <= 8, (loss, r.n_evals / n)


def _d_exact(loss, y, z):
    "The exact sum of the engine's own computed terms w l'(z; y) (Shewchuk's partials: `_split_sum`, checked in 02a)."
    from isocal.derivatives import _split_sum
    return _split_sum(loss.code, loss.params, y, np.empty(0), 0, len(y), z)


@pytest.mark.parametrize('loss', [PseudoHuber(1.0), LogCosh(), Lp(1.5), Expectile(0.9)], ids=repr)
def test_frozen_sums_keep_every_level_a_sign_change(loss, monkeypatch):
    """Where targets dwarf a level (N(0, 1) targets, levels near 1e-4) the summed derivative is a staircase in z, and
    a block's last passes sum only the samples whose residuals still change (`_frozen_pass`) and probe its coarse
    points. Every block's level must still be where the exact sum of its computed terms changes sign (at the level
    or at a neighbouring double), and the frozen sums must save evaluations against the same fit without them."""
    from isocal import decomposition as dc
    y = np.random.default_rng(7).normal(size=20_000)
    r = isotonic_convex(loss, y)
    for a, b in zip(r.blocks[:-1], r.blocks[1:]):              # (blocks: their starts, and n)
        v, yb = float(r.x[a]), y[a:b]
        below, at, above = (_d_exact(loss, yb, z) for z in (np.nextafter(v, -np.inf), v, np.nextafter(v, np.inf)))
        assert (below <= 0.0 <= at) or (at <= 0.0 <= above), (a, b, v, below, at, above)
    monkeypatch.setattr(dc, '_FREEZE', False)
    plain = isotonic_convex(loss, y)
    assert r.n_evals < plain.n_evals, (r.n_evals, plain.n_evals)
    np.testing.assert_array_equal(r.blocks, plain.blocks)
    assert np.all(np.abs(r.x - plain.x) <= 64 * np.spacing(np.abs(plain.x)) + 64 * len(y) * 2.0 ** -52 * 4.0)


def test_staircase_rules_keep_pass_counts_bounded():
    """The staircase rules (secant slope, coarse-point probes) act only where a frozen pass has seen residuals stand
    still; applied wherever two passes saw the sum move less than the curvature predicts, they made log-cosh take 40
    evaluations per sample on the normal targets below (12 now) and the squared-quartic 32 on centred ones (18 now).
    Deterministic counts, with room above."""
    for seed in range(4):
        y = np.random.default_rng(seed).normal(size=100_000)
        y -= y.mean()
        for loss in (PseudoHuber(1.0), LogCosh(), Lp(1.5), Expectile(0.9), SquaredQuartic(1.0), Lp(1.25)):
            assert isotonic_convex(loss, y).n_evals / len(y) <= 25, (seed, loss)
    y = np.random.default_rng(11).normal(size=300_000)
    assert isotonic_convex(LogCosh(), y).n_evals / len(y) <= 20


@pytest.mark.parametrize('kind', ['normal', 'decreasing'])
@pytest.mark.parametrize('loss', [Expectile(0.9), Expectile(0.2),
                                  CustomLoss(njit(lambda z, y: (z - y) * (0.15 if z > y else 0.85)))], ids=repr)
def test_sampled_first_threshold(loss, kind, monkeypatch):
    """A long fit under a loss whose l' is not odd starts at the pooled root of 4096 evenly spaced samples
    (`_sampled_root`), not at the targets' mean. Only the first threshold moves: the blocks must be those of the fit
    from the mean, every level where the exact sum of its block's computed terms changes sign, and the expectile
    fits must cost no more evaluations (fewer for Expectile(0.9) on normal targets, whose concave summed derivative
    Newton climbs slowly from the mean)."""
    from isocal import decomposition as dc
    rng = np.random.default_rng(3)
    n = 8 * dc._SAMPLE + 77
    y = rng.normal(size=n) if kind == 'normal' else -np.arange(n) / n + rng.uniform(0.0, 0.25 / n, n)
    r = isotonic_convex(loss, y)
    from isocal.derivatives import _split_sum
    for a, b in zip(r.blocks[:-1], r.blocks[1:]):
        v, yb = float(r.x[a]), y[a:b]
        f = (loss.kernels()._split_sum if isinstance(loss, CustomLoss) else _split_sum)
        below, at, above = (f(loss.code, loss.params, yb, np.empty(0), 0, len(yb), z)
                            for z in (np.nextafter(v, -np.inf), v, np.nextafter(v, np.inf)))
        assert (below <= 0.0 <= at) or (at <= 0.0 <= above), (a, b, v, below, at, above)
    monkeypatch.setattr(dc, '_SAMPLE', n)                      # (8 * _SAMPLE > n: the mean, as for short fits)
    plain = isotonic_convex(loss, y)
    np.testing.assert_array_equal(r.blocks, plain.blocks)
    assert np.all(np.abs(r.x - plain.x) <= 4 * np.spacing(np.abs(plain.x)))
    if not isinstance(loss, CustomLoss):
        assert r.n_evals <= plain.n_evals, (r.n_evals, plain.n_evals)
    if kind == 'normal' and repr(loss) == 'Expectile(tau=0.9)':   # (Newton creeps up to it from the mean's side)
        assert r.n_evals < plain.n_evals, (r.n_evals, plain.n_evals)


def test_first_fit_compiles_no_cold_checks(tmp_path):
    """The checks an exact 0 may need (remainders or powers that underflowed, high-resolution sums, a custom loss's
    pin) and the called loss switch are compiled only when a fit needs them. A first fit on [3, 1, 2], whose exact
    tie at 2 is decided by the exact comparisons, compiles none of them (a fresh process on an empty Numba cache,
    where compiling a kernel compiles every kernel it calls)."""
    import os, subprocess, sys
    code = ("from isocal.convex import isotonic_convex, PseudoHuber; import isocal.derivatives as dv, "
            "isocal.decomposition as dc; isotonic_convex(PseudoHuber(1.0), [3., 1., 2.]); "
            "print(sorted(k for k in ('_far_sign', '_lp_scaled_sign', '_pinned', '_hires_sum', '_taylor_sign', "
            "'_split_sum', '_deriv12') if getattr(dv, k).signatures), [str(s[-2]) for s in dc._range_sign.signatures])")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "[] ['none']", out


def test_cusp_root_model():
    """`_cusp_root` recovers the root of W sign(θ − v)|θ − v|^q + R (the summed Lp derivative, p = 1 + q, near a
    heavy target v) from (D, H) at two points on either side of it; that root is v + sign(−R/W)|R/W|^(1/q) in closed
    form. For p >= 2 or another loss it returns nan; where the sum is not one cusp (two heavy targets), nan or a
    point between the two, never one outside them (the caller's bracket)."""
    from isocal.derivatives import _LP, _PSEUDO_HUBER, _cusp_root
    rng = np.random.default_rng(5)
    for _ in range(300):
        p, v, W = 1.0 + rng.uniform(0.05, 0.95), rng.normal(), 10.0 ** rng.uniform(-3, 3)
        q, params = p - 1.0, np.array([p])
        R = W * rng.uniform(-0.8, 0.8)
        root = v + np.sign(-R / W) * abs(R / W) ** (1.0 / q)
        D = lambda t: W * np.sign(t - v) * abs(t - v) ** q + R
        H = lambda t: W * q * abs(t - v) ** (q - 1.0)
        t1, t2 = min(v, root) - rng.uniform(0.01, 2.0), max(v, root) + rng.uniform(0.01, 2.0)
        th = _cusp_root(_LP, params, t1, D(t1), H(t1), t2, D(t2), H(t2))
        assert abs(th - root) <= 1e-9 * (t2 - t1), (q, v, W, R, t1, t2, th, root)
        assert np.isnan(_cusp_root(_LP, np.array([2.0]), t1, D(t1), H(t1), t2, D(t2), H(t2)))       # no cusp
        assert np.isnan(_cusp_root(_PSEUDO_HUBER, params, t1, D(t1), H(t1), t2, D(t2), H(t2)))
        v2, W2 = v + rng.uniform(-1.0, 1.0), W * 10.0 ** rng.uniform(-1, 1)        # a second heavy target
        D2 = lambda t: D(t) + W2 * np.sign(t - v2) * abs(t - v2) ** q
        H2 = lambda t: H(t) + W2 * q * abs(t - v2) ** (q - 1.0)
        if D2(t1) < 0.0 < D2(t2):
            th = _cusp_root(_LP, params, t1, D2(t1), H2(t1), t2, D2(t2), H2(t2))
            assert np.isnan(th) or t1 < th < t2, (th, t1, t2)


@pytest.mark.parametrize('p', [1.1, 1.25])
def test_lp_heavy_ties(p):
    """Lp with p < 2 on heavy ties (integer targets 0..4, weights over 12 decades): l' ~ |r|^(p-1) is infinitely
    steep at a tied target, Newton's steps on the pooled derivative bounce across it, and the cheap passes aim at
    `_cusp_root` instead. Every level is certified against the 50-digit reference (both directions), and at n = 1e5
    the evaluations per sample stay well below what Newton alone needed on these targets (88.1 for p = 1.1 and 28.9
    for p = 1.25 without the cusp fit; 33.4 and 14.4 with it)."""
    name = f'Lp(p={p:g})'
    MP_DERIV.setdefault(name, lambda r: mpmath.sign(r) * abs(r) ** mpmath.mpf(p - 1.0))
    rng = np.random.default_rng(7)
    for inc in (True, False):
        y, w = rng.integers(0, 5, 300).astype(float), 10.0 ** rng.uniform(-6, 6, 300)
        r = isotonic_convex(Lp(p), y, w, increasing=inc)
        for a, b in zip(r.blocks[:-1], r.blocks[1:]):
            assert_certified(name, float(r.x[a]), y[a:b], w[a:b])
    rng = np.random.default_rng(7)
    rng.integers(0, 5, 2000), rng.uniform(-6, 6, 2000)
    n = 100_000
    y, w = rng.integers(0, 5, n).astype(float), 10.0 ** rng.uniform(-6, 6, n)
    assert isotonic_convex(Lp(p), y, w).n_evals / n <= {1.1: 45.0, 1.25: 20.0}[p]


def test_one_block_three_passes():
    """A long strictly decreasing sequence is one block. The cheap pass sums its derivative in blocks whose sums are
    added in a double-double, so that Newton's next point is within an ulp of the block's root although the terms
    cancel to 1e-10 of their magnitude: one cheap pass and two checked ones (at the two doubles around the root), 3
    evaluations per sample. (A plain running sum there moved Newton's point by a few ulps: 4 for pseudo-Huber and
    log-cosh on these targets.) The level is where the exact sum of the computed terms changes sign."""
    from isocal.derivatives import _split_sum
    n = 1_000_000
    y = -np.arange(n) / n + np.random.default_rng(3).uniform(0.0, 0.25 / n, n)
    for loss in (PseudoHuber(1.0), LogCosh(), Lp(1.5), SquaredQuartic(1.0)):
        r = isotonic_convex(loss, y)
        assert len(r.weights) == 1 and r.n_evals == 3 * n, (loss, r.n_evals / n)
        v = float(r.x[0])
        below, above = (_split_sum(loss.code, loss.params, y, np.empty(0), 0, n, z)
                        for z in (np.nextafter(v, -np.inf), np.nextafter(v, np.inf)))
        at = _split_sum(loss.code, loss.params, y, np.empty(0), 0, n, v)
        assert (below <= 0.0 <= at) or (at <= 0.0 <= above), (loss, below, at, above)
