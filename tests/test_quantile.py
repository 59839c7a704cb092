"""Quantile (pinball) isotonic regression: the smallest optimum, against exact rational min-max formulas and
linear programming, through every public route (isotonic_convex, fit_staircase, IsotonicCalibrator, OnlineIsotonic,
portable JSON)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.optimize import linprog

from isocal.convex import Quantile, anytime_isotonic, isotonic_convex
from isocal.isotonic import IsotonicCalibrator
from isocal.online import OnlineIsotonic
from isocal.fit import fit_staircase


def lower_quantile(values, weights, tau):
    "The smallest minimiser of sum w rho_tau(y - z) over z, in exact rational arithmetic (tau the double as given)."
    total = sum(map(Fraction, weights))
    for v in sorted(set(values)):
        below = sum(Fraction(w) for y, w in zip(values, weights) if y <= v)
        if below >= Fraction(tau) * total: return v
    raise AssertionError("unreachable")


def minmax_reference(groups_y, groups_w, tau):
    """z_g = max_{s<=g} min_{e>=g} q(s..e), q the exact lower weighted tau-quantile of the union of groups s..e:
    the smallest isotonic solution (per group)."""
    m = len(groups_y)
    q = {}
    for s in range(m):
        for e in range(s, m):
            ys = [y for g in range(s, e + 1) for y in groups_y[g]]
            ws = [w for g in range(s, e + 1) for w in groups_w[g]]
            q[s, e] = lower_quantile(ys, ws, tau)
    return [max(min(q[s, e] for e in range(g, m)) for s in range(g + 1)) for g in range(m)]


def lp_smallest(y, w, tau):
    "Optimal pinball loss by LP, then the least sum of levels among solutions within a hair of it (HiGHS)."
    n = len(y)
    cost = np.r_[np.zeros(n), tau * w, (1 - tau) * w]
    A_eq = np.hstack([np.eye(n), np.eye(n), -np.eye(n)])
    A_ub = np.hstack([np.eye(n)[:-1] - np.eye(n, k=1)[:-1], np.zeros((n - 1, 2 * n))])
    bounds = [(None, None)] * n + [(0, None)] * (2 * n)
    best = linprog(cost, A_ub, np.zeros(n - 1), A_eq, y, bounds=bounds)
    assert best.status == 0
    small = linprog(np.r_[np.ones(n), np.zeros(2 * n)], np.vstack([A_ub, cost]),
                    np.r_[np.zeros(n - 1), best.fun + 1e-9 * (1 + abs(best.fun))], A_eq, y, bounds=bounds)
    assert small.status == 0
    return small.x[:n], best.fun


def pinball(y, z, w, tau):
    return float(sum(Fraction(wi) * (Fraction(yi) - Fraction(zi)) * (Fraction(tau) - (yi < zi))
                     for yi, zi, wi in zip(y, z, w)))


taus = st.sampled_from([0.5, 0.25, 0.1, 0.3, 0.75, 0.9, 1 / 3, 0.999])
small_targets = st.lists(st.integers(-4, 4), min_size=1, max_size=9)


@given(small_targets, taus, st.data())
def test_unit_and_integer_weights_match_exact_minmax(ys, tau, data):
    w = data.draw(st.lists(st.integers(1, 5), min_size=len(ys), max_size=len(ys)))
    y = np.array(ys, float)
    for weights in (None, np.array(w, float)):
        ws = [1] * len(ys) if weights is None else w
        expect = minmax_reference([[v] for v in ys], [[x] for x in ws], tau)
        assert isotonic_convex(Quantile(tau), y, weights).x.tolist() == expect


@given(small_targets, taus, st.data())
def test_real_weights_match_exact_minmax(ys, tau, data):
    "Weights that no power of two makes integers take the error-bounded path and its exact fallback."
    w = data.draw(st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.7, 1 / 3, 2 / 3, 1e-3, 123.456]),
                           min_size=len(ys), max_size=len(ys)))
    expect = minmax_reference([[v] for v in ys], [[x] for x in w], tau)
    assert isotonic_convex(Quantile(tau), np.array(ys, float), np.array(w)).x.tolist() == expect


@given(st.lists(st.floats(-10, 10, allow_nan=False).map(lambda v: round(v, 1)), min_size=2, max_size=14),
       st.sampled_from([0.5, 0.25, 0.875]), st.data())
def test_optimal_and_smallest_by_linear_programming(ys, tau, data):
    """LP knows the problem in real numbers only, so weights and tau here are dyadic (exact as doubles): real ties are
    then ties for isocal too. (Double tau such as 0.2 is checked exactly against the rational min-max formula.)"""
    w = np.array(data.draw(st.lists(st.integers(1, 400), min_size=len(ys), max_size=len(ys)))) / 64
    y = np.array(ys)
    z = isotonic_convex(Quantile(tau), y, w).x
    z_lp, opt = lp_smallest(y, w, tau)
    assert np.all(np.diff(z) >= 0)
    assert pinball(y, z, w, tau) <= opt + 1e-9 * (1 + abs(opt))
    # No optimum is below ours anywhere. The second LP may go below by what its loss slack buys: every non-zero rate
    # of change of the loss is a multiple of 1/512 here.
    assert np.all(z <= z_lp + 2e-9 * (1 + abs(opt)) * 512)


@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.lists(st.integers(-3, 3), min_size=8, max_size=8),
       taus)
def test_tied_scores_share_the_smallest_level(xs, ys, tau):
    "fit_staircase(ties='secondary') forces tied scores into one level: the min-max formula over tie groups."
    x, y = np.array(xs, float), np.array(ys[:len(xs)], float)
    fitted = fit_staircase(x, y, loss=Quantile(tau)).fitted
    keys = sorted(set(xs))
    groups = [[float(v) for v, k in zip(y, xs) if k == key] for key in keys]
    expect = minmax_reference(groups, [[1] * len(g) for g in groups], tau)
    assert fitted.tolist() == [expect[keys.index(k)] for k in xs]


@given(small_targets, taus, st.integers(-300, 300))
def test_decreasing_zero_weights_and_power_of_two_scaling(ys, tau, k):
    y = np.array(ys, float)
    inc = isotonic_convex(Quantile(tau), y[::-1]).x[::-1]
    assert isotonic_convex(Quantile(tau), y, increasing=False).x.tolist() == inc.tolist()
    w = np.ldexp(np.arange(1.0, len(y) + 1), k)
    assert (isotonic_convex(Quantile(tau), y, w).x.tolist()
            == isotonic_convex(Quantile(tau), y, np.arange(1.0, len(y) + 1)).x.tolist())
    # a zero-weight sample takes the level on its left, as for every loss
    with_zero = isotonic_convex(Quantile(tau), np.r_[y, 100.0], np.r_[np.ones(len(y)), 0.0]).x
    assert with_zero[:-1].tolist() == isotonic_convex(Quantile(tau), y).x.tolist() and with_zero[-1] == with_zero[-2]


@given(small_targets, taus)
def test_online_stream_equals_batch(ys, tau):
    stream = OnlineIsotonic(Quantile(tau)).extend(np.array(ys, float))
    assert stream.fitted_values().tolist() == isotonic_convex(Quantile(tau), np.array(ys, float)).x.tolist()


def test_double_tau_is_taken_exactly():
    "0.1 as a double exceeds 1/10: of ten unit targets the second smallest is the lower quantile; 0.25 ties exactly."
    assert isotonic_convex(Quantile(0.1), np.arange(10.0)[::-1]).x.tolist() == [1.0] * 10
    assert isotonic_convex(Quantile(0.25), [4.0, 3, 2, 1]).x.tolist() == [1.0] * 4
    assert isotonic_convex(Quantile(0.5), [1.0, 0.0]).x.tolist() == [0.0, 0.0]


def test_tie_with_weights_summing_inexactly():
    "0.1 + 0.2 != 0.3 in floating point, yet these sums tie exactly in the weights as given: the fallback decides."
    w = np.array([0.1, 0.2, 0.3])
    y = np.array([2.0, 1.0, 0.0])
    expect = minmax_reference([[v] for v in y], [[x] for x in w], 0.5)
    assert isotonic_convex(Quantile(0.5), y, w).x.tolist() == expect


def test_a_close_call_stops_the_first_run_and_the_second_settles_it():
    """The kernel without `settle` (what a first call compiles) returns -1 at a cut only exact sums decide; with
    `settle` it finishes, and the fit gives the min-max answer."""
    from isocal.quantile import _quantile_kernel, _spread_weights
    y, w = np.array([2.0, 1.0, 0.0]), np.array([0.1, 0.2, 0.3])
    args = (y, _spread_weights(w), np.ones(4, np.bool_), np.unique(y), 0.5, False)
    z = np.full(3, np.nan)
    assert _quantile_kernel(*args, z, None) == -1
    assert _quantile_kernel(*args, z, True) > 0
    assert z.tolist() == minmax_reference([[v] for v in y], [[x] for x in w], 0.5)


def test_large_random_against_chunked_reference():
    "n = 3000 with many ties: the result is optimal (LP-free check: every block's level is its lower quantile, and "
    "the min-max formula holds at block boundaries) and monotone."
    rng = np.random.default_rng(5)
    y = np.round(np.linspace(0, 3, 3000) + rng.normal(size=3000), 1)
    res = isotonic_convex(Quantile(0.3), y)
    z, starts = res.x, res.blocks
    assert np.all(np.diff(z) >= 0)
    for s, e in zip(starts[:-1], starts[1:]):
        assert z[s] == lower_quantile(list(y[s:e]), [1] * (e - s), 0.3)


def test_calibrator_and_portable_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = x + rng.standard_t(3, size=400)
    cal = IsotonicCalibrator(loss=Quantile(0.9), out_of_bounds="clip").fit(x, y)
    assert np.all(np.diff(cal.predict(np.sort(x))) >= 0)
    assert np.mean(y <= cal.predict(x)) >= 0.9                      # in-sample: every block covers at least tau
    path = tmp_path / "q.json"
    cal.save(path)
    back = IsotonicCalibrator.load(path)
    assert back.loss.tau == 0.9 and np.array_equal(back.predict(x), cal.predict(x))


def test_bad_input_names_the_argument():
    for tau in (0.0, 1.0, -0.5, float("nan"), 2.0 ** -600):
        with pytest.raises(ValueError, match="tau"): Quantile(tau)
    with pytest.raises(ValueError, match="piecewise linear"): anytime_isotonic(Quantile(0.5), [1.0, 0.0])
    with pytest.raises(ValueError, match="weights"):
        isotonic_convex(Quantile(0.5), [1.0, 0.0, 2.0], [1e300, 1e-300, 0.1])


@given(st.lists(st.integers(0, 5), min_size=1, max_size=10), st.lists(st.integers(-5, 5), min_size=10, max_size=10),
       taus, st.booleans())
def test_quantile_decomposition_identity_and_signs(qs, ys, tau, weighted):
    from isocal.diagnostics import quantile_decomposition, quantile_recalibrate
    q, y = np.array(qs, float) / 2, np.array(ys[:len(qs)], float)
    w = np.arange(1.0, len(q) + 1) if weighted else None
    d = quantile_decomposition(y, q, tau, sample_weight=w)
    assert d.score == d.mcb - d.dsc + d.unc and d.mcb >= 0 and d.dsc >= 0
    keys = sorted(set(q))
    groups = [[v for v, k in zip(y, q) if k == key] for key in keys]
    gw = [[wi for wi, k in zip(np.ones(len(q)) if w is None else w, q) if k == key] for key in keys]
    expect = minmax_reference(groups, gw, tau)
    assert quantile_recalibrate(y, q, tau, sample_weight=w).tolist() == [expect[keys.index(k)] for k in q]
    # the pinball means, exactly: S(q_hat) is the least of the three
    s_hat = pinball(y, quantile_recalibrate(y, q, tau, sample_weight=w), np.ones(len(q)) if w is None else w, tau)
    assert s_hat <= pinball(y, q, np.ones(len(q)) if w is None else w, tau) + 1e-12


def test_dask_fit_quantile_is_the_in_memory_fit():
    "The pinball loss over Dask partitions (isocal.distributed_convex): fit_staircase's staircase, bit for bit."
    pytest.importorskip("dask")
    import dask.array as da
    from isocal.distributed import fit_isotonic_dask
    from isocal.fit import fit_staircase
    rng = np.random.default_rng(5)
    x, y, w = np.sort(rng.normal(size=300)), rng.normal(size=300), rng.uniform(0.5, 2.0, 300)
    got = fit_isotonic_dask(da.from_array(x, chunks=70), da.from_array(y, chunks=70), da.from_array(w, chunks=70),
                            loss=Quantile(0.5))
    ref = fit_staircase(x, y, w, loss=Quantile(0.5))
    np.testing.assert_array_equal(got.x_lo, ref.x_lo)
    np.testing.assert_array_equal(got.levels, ref.levels)

def test_weight_preparation_against_its_definition():
    """`_integral_weights`: w times the smallest power of two that makes every weight an integer, if their total then
    stays below 2^53, else None (checked with Fractions over more than one of its chunks, the weight that rules it
    out in the last one); `_spread_weights`: the weights themselves, no copy, where they lie in [2^-400, 2^401],
    else an exact power-of-two rescaling into that range, which leaves the fit unchanged."""
    from isocal.quantile import _integral_weights, _spread_weights
    rng = np.random.default_rng(2)
    n = (1 << 16) + 40
    for last in (0.375, 1.0 + 2.0 ** -40, 2.0 ** -60):
        w = np.ldexp(rng.integers(1, 64, n).astype(float), -3)
        w[-1] = last
        fr = [Fraction(float(v)) for v in w]
        k = max(0, max(f.denominator.bit_length() - 1 for f in fr))
        expect = None if sum(fr) * 2 ** k >= 2 ** 53 else np.array([float(f * 2 ** k) for f in fr])
        got = _integral_weights(w, n)
        assert (got is None) == (expect is None), last
        if expect is not None: assert got.tolist() == expect.tolist()
    w = rng.uniform(0.5, 2.0, 100)
    assert _spread_weights(w) is w
    y = rng.normal(size=100)
    for k in (-700, 700):
        big = np.ldexp(w, k)
        s = _spread_weights(big)
        assert s is not big and 2.0 ** -400 <= s.min() and s.max() < 2.0 ** 401
        assert np.all(np.frexp(s)[0] == np.frexp(big)[0]) and len(set((np.frexp(s)[1] - np.frexp(big)[1]).tolist())) == 1
        assert isotonic_convex(Quantile(0.3), y, big).x.tolist() == isotonic_convex(Quantile(0.3), y, w).x.tolist()
