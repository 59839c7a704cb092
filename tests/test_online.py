"""Tests of isocal.online against independent references.

References (no expected value below was produced by the online code): the paper's printed Example 3 states, and the
offline fits `isotonic_regression`, `isotonic_convex` and `fit_staircase(..., ties="secondary")` of every prefix.
"""
import pickle
import re
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from isocal.convex import Expectile, PseudoHuber, isotonic_convex
from isocal.online import OnlineIsotonic, merge_trace
from isocal import fit_staircase, isotonic_regression

EXAMPLE = [44, 52, 18, 14, 93, 37, 96, 8, 1, 95, 21, 77, 46, 36, 69]
# Example 3 of the paper, transcribed: the state after each arrival, then after each join.
PAPER = [
    [[44]], [[44, 52]], [[44, 52, 18], [44, 35, 35], [38, 38, 38]],
    [[38, 38, 38, 14], [32] * 4], [[32] * 4 + [93]],
    [[32] * 4 + [93, 37], [32] * 4 + [65, 65]], [[32] * 4 + [65, 65, 96]],
    [[32] * 4 + [65, 65, 96, 8], [32] * 4 + [65, 65, 52, 52], [32] * 4 + [58.5] * 4],
    [[32] * 4 + [58.5] * 4 + [1], [32] * 4 + [47] * 5], [[32] * 4 + [47] * 5 + [95]],
    [[32] * 4 + [47] * 5 + [95, 21], [32] * 4 + [47] * 5 + [58, 58]], [[32] * 4 + [47] * 5 + [58, 58, 77]],
    [[32] * 4 + [47] * 5 + [58, 58, 77, 46], [32] * 4 + [47] * 5 + [58, 58, 61.5, 61.5]],
    [[32] * 4 + [47] * 5 + [58, 58, 61.5, 61.5, 36], [32] * 4 + [47] * 5 + [58, 58, 53, 53, 53],
     [32] * 4 + [47] * 5 + [55] * 5],
    [[32] * 4 + [47] * 5 + [55] * 5 + [69]],
]


def test_example3_trace_matches_paper():
    assert merge_trace(EXAMPLE) == PAPER


def test_example3_stream_after_every_arrival():
    s = OnlineIsotonic()
    for t, y in enumerate(EXAMPLE):
        before = s.n_merges
        s.add(y)
        np.testing.assert_allclose(s.fitted_values(), PAPER[t][-1], rtol=4e-16, atol=1e-15)
        assert s.n_merges - before == len(PAPER[t]) - 1
    assert (s.n_merges, s.max_merges, s.n_blocks) == (11, 2, 4)
    np.testing.assert_allclose(s.levels, [32, 47, 55, 69], rtol=4e-16, atol=1e-15)
    np.testing.assert_array_equal(s.block_starts, [0, 4, 9, 14, 15])
    assert s.current_loss() == pytest.approx(0.5 * np.sum((np.array(EXAMPLE) - np.array(PAPER[-1][-1])) ** 2))


streams = st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-5, 5), min_size=n, max_size=n),
    st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0]), min_size=n, max_size=n),
    st.booleans(), st.booleans()))


@given(streams)
def test_squared_every_prefix_equals_offline(data):
    y, w, weighted, increasing = data
    y = np.array(y, float)
    w = np.array(w) if weighted else None
    if w is not None: w[0] = 1.0
    add, ext = OnlineIsotonic(increasing=increasing), OnlineIsotonic(increasing=increasing)
    for i in range(len(y)):
        add.add(y[i], 1.0 if w is None else w[i])
        ext.extend(y[i:i + 1], None if w is None else w[i:i + 1])
        ref = isotonic_regression(y[:i + 1], None if w is None else w[:i + 1], increasing=increasing)
        np.testing.assert_allclose(add.fitted_values(), ref.x, rtol=4e-16, atol=1e-15)
        np.testing.assert_allclose(ext.fitted_values(), ref.x, rtol=4e-16, atol=1e-15)
        np.testing.assert_array_equal(add.block_starts, ref.blocks)
        np.testing.assert_array_equal(add.block_weights, ref.weights)
    whole = OnlineIsotonic(increasing=increasing).extend(y, w)
    np.testing.assert_array_equal(whole.fitted_values(), add.fitted_values())
    assert (whole.n_merges, whole.max_merges) == (add.n_merges, add.max_merges)


CLOSED = {'logloss': lambda r: r.uniform(0, 1, r.integers(1, 25)).round(1),
          'poisson': lambda r: r.poisson(2.0, r.integers(1, 25)).astype(float),
          'gamma': lambda r: r.gamma(2.0, 1.0, r.integers(1, 25)) + 0.01}
GENERAL = {'logcosh': 'logcosh', 'pseudohuber': PseudoHuber(0.5), 'expectile': Expectile(0.8)}


@pytest.mark.parametrize('name', sorted(CLOSED))
@pytest.mark.parametrize('increasing', [True, False])
def test_weighted_mean_losses_every_prefix(name, increasing):
    r = np.random.default_rng(len(name))
    for _ in range(10):
        y = CLOSED[name](r)
        w = r.uniform(0.1, 2.0, len(y))
        s = OnlineIsotonic(name, increasing=increasing)
        for i in range(len(y)):
            s.add(y[i], w[i])
            ref = isotonic_convex(name, y[:i + 1], w[:i + 1], increasing=increasing).x
            np.testing.assert_allclose(s.fitted_values(), ref, rtol=1e-12, atol=1e-12)
        m = s.fitted_values()
        with np.errstate(divide='ignore', invalid='ignore'):
            direct = {'logloss': lambda: -np.sum(w * (np.where(y > 0, y * np.log(m), 0) + np.where(y < 1, (1 - y) * np.log(1 - m), 0))),
                      'poisson': lambda: np.sum(w * (m - np.where(y > 0, y * np.log(m), 0))),
                      'gamma': lambda: np.sum(w * (np.log(m) + y / m))}[name]()
        assert s.current_loss() == pytest.approx(direct, rel=1e-9, abs=1e-9)


@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=15), st.booleans(),
       st.sampled_from(sorted(GENERAL)), st.booleans())
def test_general_losses_every_prefix(y, increasing, name, weighted):
    y = np.array(y)
    w = np.linspace(0.5, 2.0, len(y)) if weighted else None
    s = OnlineIsotonic(GENERAL[name], increasing=increasing)
    for i in range(len(y)):
        s.add(y[i], 1.0 if w is None else w[i])
        ref = isotonic_convex(GENERAL[name], y[:i + 1], None if w is None else w[:i + 1], increasing=increasing).x
        np.testing.assert_allclose(s.fitted_values(), ref, rtol=1e-9, atol=1e-9)


@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from(['squared', 'poisson', 'logcosh']), st.booleans())
def test_scores_with_ties_equal_fit_staircase(n, seed, loss, increasing):
    r = np.random.default_rng(seed)
    x = np.sort(r.integers(0, max(2, n // 2), n)).astype(float)
    y = r.poisson(3.0, n).astype(float)
    w = r.uniform(0.5, 2.0, n)
    s = OnlineIsotonic(loss, increasing=increasing)
    half = n // 2
    for i in range(half): s.add(y[i], w[i], x=x[i])
    s.extend(y[half:], w[half:], x=x[half:])
    ref = fit_staircase(x, y, w, increasing=increasing, loss=loss)
    np.testing.assert_allclose(s.fitted_values(), ref.fitted, rtol=1e-9, atol=1e-9)
    stc = s.staircase()
    np.testing.assert_array_equal(stc.x_lo, ref.x_lo)
    np.testing.assert_array_equal(stc.x_hi, ref.x_hi)
    np.testing.assert_allclose(stc.levels, ref.levels, rtol=1e-9, atol=1e-9)


def test_staircase_without_scores_uses_sample_indices():
    s = OnlineIsotonic().extend(EXAMPLE)
    stc = s.staircase()
    np.testing.assert_array_equal(stc.x_lo, [0, 4, 9, 14])
    np.testing.assert_array_equal(stc.x_hi, [3, 8, 13, 14])
    np.testing.assert_allclose(stc(np.arange(15.0)), PAPER[-1][-1], rtol=4e-16, atol=1e-15)


@pytest.mark.parametrize('loss', ['squared', 'logcosh'])
def test_pickle_mid_stream(loss):
    r = np.random.default_rng(5)
    y, x = r.normal(size=200), np.sort(r.uniform(0, 10, 200))
    s = OnlineIsotonic(loss)
    s.extend(y[:120], x=x[:120])
    blob = pickle.dumps(s)
    t = pickle.loads(blob)
    assert len(blob) < 20000
    s.extend(y[120:], x=x[120:])
    t.extend(y[120:], x=x[120:])
    np.testing.assert_array_equal(s.fitted_values(), t.fitted_values())
    np.testing.assert_array_equal(s.staircase().x_lo, t.staircase().x_lo)
    ref = fit_staircase(x, y, loss=loss).fitted
    np.testing.assert_allclose(t.fitted_values(), ref, rtol=1e-9, atol=1e-9)


def test_state_is_o_blocks():
    s = OnlineIsotonic().extend(np.random.default_rng(0).normal(size=100_000))
    assert s._F.nbytes + s._starts.nbytes < 100 * (s.n_blocks + 16) * 8
    assert s.n_merges == 100_000 - s.n_blocks and s.n_merges / s.n_samples <= 1


@pytest.mark.parametrize('loss', ['squared', 'logloss', 'logcosh'])
def test_from_fit_continues(loss):
    r = np.random.default_rng(1)
    y = r.uniform(0, 1, 60).round(2)
    x = np.arange(60.0)
    first = isotonic_convex(loss, y[:25])
    s = OnlineIsotonic.from_fit(first, y[:25], x=x[:25], loss=loss)
    assert s.n_samples == 25 and s.n_blocks == len(first.weights)
    s.extend(y[25:], x=x[25:])
    np.testing.assert_allclose(s.fitted_values(), isotonic_convex(loss, y).x, rtol=1e-9, atol=1e-12)
    if loss == 'squared':
        assert s.current_loss() == pytest.approx(0.5 * np.sum((y - isotonic_regression(y).x) ** 2), rel=1e-9)


def test_from_fit_bad_input():
    with pytest.raises(ValueError, match='`y` is required'):
        OnlineIsotonic.from_fit(isotonic_convex('logcosh', [1.0, 2.0]), loss='logcosh')
    with pytest.raises(ValueError, match='non-increasing'):
        OnlineIsotonic.from_fit(isotonic_regression([1.0, 2.0]), increasing=False)
    with pytest.raises(ValueError, match='tied scores'):
        OnlineIsotonic.from_fit(isotonic_regression([1.0, 2.0]), x=[0.0, 0.0])


BAD_ADDS = [
    ('squared', dict(y=float('nan')), ValueError, '`y` must be finite'),
    ('squared', dict(y=np.inf), ValueError, '`y` must be finite'),
    ('squared', dict(y='3'), TypeError, '`y` must be a real number'),
    ('squared', dict(y=1.0, weight=-0.5), ValueError, '`weight` must be non-negative'),
    ('squared', dict(y=1.0, weight=float('nan')), ValueError, '`weight` must be finite'),
    ('squared', dict(y=1.0, x=-5.0), ValueError, '`x` must be non-decreasing'),
    ('squared', dict(y=1.0), ValueError, '`x` is required'),
    ('logloss', dict(y=1.5, x=9.0), ValueError, r'in \[0, 1\]'),
    ('gamma', dict(y=0.0, x=9.0), ValueError, 'positive'),
    ('poisson', dict(y=-1.0, x=9.0), ValueError, 'non-negative'),
    ('logcosh', dict(y=np.nan, x=9.0), ValueError, '`y` must be finite'),
]


@pytest.mark.parametrize('loss,kwargs,err,msg', BAD_ADDS)
def test_rejected_add_leaves_state_unchanged(loss, kwargs, err, msg):
    s = OnlineIsotonic(loss)
    for i, v in enumerate([0.2, 0.9, 0.1, 0.5]): s.add(v, 1.0, x=float(i))
    before = pickle.dumps(s)
    with pytest.raises(err, match=msg):
        s.add(**kwargs)
    assert pickle.dumps(s) == before
    s.add(0.7, x=9.0)                                # still usable
    assert s.n_samples == 5


BAD_EXTENDS = [
    (dict(ys=[1.0, np.nan], x=[5.0, 6.0]), ValueError, '`ys` must be finite'),
    (dict(ys=[1.0, 2.0], weights=[1.0, -1.0], x=[5.0, 6.0]), ValueError, '`weights` must be non-negative'),
    (dict(ys=[1.0, 2.0], weights=[1.0], x=[5.0, 6.0]), ValueError, 'length mismatch'),
    (dict(ys=[1.0, 2.0], x=[6.0, 5.0]), ValueError, '`x` must be non-decreasing'),
    (dict(ys=[1.0, 2.0], x=[1.0, 5.0]), ValueError, '`x` must be non-decreasing'),
    (dict(ys=[1.0, 2.0]), ValueError, '`x` is required'),
    (dict(ys=[[1.0, 2.0]], x=[5.0, 6.0]), ValueError, 'one-dimensional'),
]


@pytest.mark.parametrize('kwargs,err,msg', BAD_EXTENDS)
def test_rejected_extend_leaves_state_unchanged(kwargs, err, msg):
    s = OnlineIsotonic().extend([3.0, 1.0, 2.0], x=[0.0, 1.0, 2.0])
    before = pickle.dumps(s)
    with pytest.raises(err, match=msg):
        s.extend(**kwargs)
    assert pickle.dumps(s) == before


def test_scores_given_after_unscored_samples_rejected():
    s = OnlineIsotonic().extend([1.0, 2.0])
    with pytest.raises(ValueError, match='had no scores'):
        s.add(3.0, x=1.0)


def test_empty_and_zero_weight_streams():
    s = OnlineIsotonic()
    assert (s.n_samples, s.n_blocks, len(s.fitted_values())) == (0, 0, 0)
    s.extend([])
    with pytest.raises(ValueError, match='no samples'):
        s.staircase()
    s.add(3.0, 0.0)
    assert np.isnan(s.fitted_values()[0])
    s.add(1.0, 2.0)
    np.testing.assert_array_equal(s.fitted_values(), [1.0, 1.0])   # the zero-weight sample takes its block's level


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match='`loss`'):
        OnlineIsotonic('hinge')
    with pytest.raises(TypeError, match='`increasing`'):
        OnlineIsotonic(increasing='yes')


# ---------------------------------------------------------------- issue 12: current_loss without cancellation
from fractions import Fraction  # noqa: E402

import mpmath  # noqa: E402

from isocal.convex import Lp, SquaredQuartic  # noqa: E402


def exact_half_squared(y, w, starts):
    "½ Σ w (y − mean)² over the blocks starts[b]..starts[b+1]-1 of the fit, each about its exact mean, in rationals."
    total = Fraction(0)
    for lo, hi in zip(starts[:-1], starts[1:]):
        yb = [Fraction(float(v)) for v in y[lo:hi]]
        wb = [Fraction(float(v)) for v in w[lo:hi]]
        W = sum(wb)
        if W == 0: continue
        mean = sum(a * b for a, b in zip(wb, yb)) / W
        total += sum(b * (a - mean) ** 2 for a, b in zip(yb, wb)) / 2
    return total


def test_current_loss_reported_cases():
    assert OnlineIsotonic().extend([1e9 + 1, 1e9]).current_loss() == pytest.approx(0.25, rel=1e-15)
    ys = 1e8 + np.random.default_rng(1).normal(size=1000)
    s = OnlineIsotonic().extend(ys)
    exact = exact_half_squared(ys, np.ones(1000), s.block_starts)
    assert abs(Fraction(s.current_loss()) - exact) <= Fraction(1, 10**12) * exact
    # ½((1e155 − 5e154)² + (0 − 5e154)²) = 2.5e309 exceeds the largest float: the rounded value is inf, not nan
    assert OnlineIsotonic().extend([1e155, 0.]).current_loss() == np.inf
    # ½ · 2 · (7.5e153)² = 5.625e307 is representable although y² overflows
    assert OnlineIsotonic().extend([1.5e154, 0.]).current_loss() == pytest.approx(5.625e307, rel=1e-15)


shifted_streams = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-6, 6), min_size=n, max_size=n),
    st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0]), min_size=n, max_size=n),
    st.lists(st.integers(0, 3), min_size=n, max_size=n),
    st.sampled_from([0.0, 1e8, -1e9, -9.47e11, 2.0 ** 52, 1e15, 3e200, 1e-140]),
    st.sampled_from([1e-150, 1e-3, 1.0, 1e150, 2.0 ** -30]),
    st.booleans(), st.sampled_from(['none', 'scores', 'from_fit'])))


@given(shifted_streams)
def test_squared_current_loss_exact_on_shifted_huge_tiny(data):
    k, w, dx, shift, scale, increasing, mode = data
    y, w = shift + scale * np.array(k, float), np.array(w)
    x = np.cumsum(dx).astype(float)
    if mode == 'from_fit':
        half = len(y) // 2 + 1
        s = OnlineIsotonic.from_fit(isotonic_regression(y[:half], w[:half], increasing=increasing), y[:half],
                                    w[:half], increasing=increasing).extend(y[half:], w[half:])
    else:
        s = OnlineIsotonic(increasing=increasing)
        for i in range(len(y)):
            s.add(y[i], w[i], x=x[i] if mode == 'scores' else None)
            exact = exact_half_squared(y[:i + 1], w[:i + 1], s.block_starts)
            assert abs(Fraction(s.current_loss()) - exact) <= Fraction(1, 10**12) * exact + Fraction(1e-300)
    exact = exact_half_squared(y, w, s.block_starts)
    assert abs(Fraction(s.current_loss()) - exact) <= Fraction(1, 10**12) * exact + Fraction(1e-300)


def mp_sample_loss(name, f, y):
    """One sample's loss l(f; y) at 60 digits from its textbook formula, with the size of that formula's summands
    (Σ|summand|: the loss's own conditioning at (f, y), e.g. Poisson's f − y log f cancels near f = y = e)."""
    f, y = mpmath.mpf(float(f)), mpmath.mpf(float(y))
    if name == 'logloss':
        parts = (-(y * mpmath.log(f)) if y else 0, -((1 - y) * mpmath.log(1 - f)) if y != 1 else 0)
    elif name == 'poisson': parts = (f, -(y * mpmath.log(f)) if y else 0)
    elif name == 'gamma': parts = (mpmath.log(f), y / f)
    else:
        r = f - y
        parts = ({'logcosh': lambda: mpmath.log(mpmath.cosh(r)),
                  'huber': lambda: 0.25 * (mpmath.sqrt(1 + (r / 0.5) ** 2) - 1),
                  'expectile': lambda: 0.5 * (0.7 if r > 0 else 0.3) * r * r,
                  'lp': lambda: abs(r) ** mpmath.mpf(1.5) / mpmath.mpf(1.5),
                  'quartic': lambda: 0.5 * r * r + 0.25 * 2.0 * r ** 4}[name](),)
    return mpmath.fsum(parts), mpmath.fsum(abs(v) for v in parts)


LOSS_OBJECTS = {'logloss': 'logloss', 'poisson': 'poisson', 'gamma': 'gamma', 'logcosh': 'logcosh',
                'huber': PseudoHuber(0.5), 'expectile': Expectile(0.3), 'lp': Lp(1.5), 'quartic': SquaredQuartic(2.0)}


@pytest.mark.parametrize('name', sorted(LOSS_OBJECTS))
@given(st.lists(st.integers(0, 8), min_size=1, max_size=12), st.sampled_from([1e-12, 1e-6, 1.0, 1e3]),
       st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=12, max_size=12), st.booleans(),
       st.sampled_from(['extend', 'scores', 'from_fit']))
def test_every_loss_current_loss_matches_high_precision(name, k, scale, w, increasing, mode):
    """Σ w·l(f; y) at the reported fitted values, summed sample by sample at 60 digits: agreement to 1e-12 relative
    to the size of the formula's summands (the loss's own conditioning), with targets close to each other (tiny residuals) and to the domain's
    edge (log-loss near 0 and 1)."""
    mpmath.mp.dps = 60
    k = np.array(k, float)
    y = {'logloss': k * scale / (8 * max(scale, 1.0)), 'poisson': k * scale, 'gamma': (k + 1) * scale}.get(name, k * scale)
    if name == 'logloss' and scale == 1e3: y = 1 - y * 1e-9            # targets just below 1
    w = np.array(w[:len(y)])
    loss = LOSS_OBJECTS[name]
    try: s = _stream(loss, y, w, increasing, mode)
    except ValueError as e:   # log-cosh saturates (tanh is ±1 in doubles past |r| ≈ 370): such a level is refused
        assert name == 'logcosh' and 'cannot be determined in double precision' in str(e) and np.ptp(y) > 700, e
        return
    if s is None: return
    f = s.fitted_values()
    terms = [(mpmath.mpf(float(wi)) * v, mpmath.mpf(float(wi)) * a)
             for yi, wi, fi in zip(y, w, f) if wi > 0 for v, a in [mp_sample_loss(name, fi, yi)]]
    exact, size = mpmath.fsum(t for t, _ in terms), mpmath.fsum(a for _, a in terms)
    assert abs(mpmath.mpf(s.current_loss()) - exact) <= 1e-12 * size + mpmath.mpf(1e-300)


def _stream(loss, y, w, increasing, mode):
    "The stream of `y` (weights `w`) fed by `extend`, with tied scores, or continued from an offline fit."
    if mode == 'extend': return OnlineIsotonic(loss, increasing=increasing).extend(y, w)
    if mode == 'scores':                                     # tied scores: pairs of samples share a score
        return OnlineIsotonic(loss, increasing=increasing).extend(y, w, x=np.arange(len(y)) // 2)
    half = len(y) // 2 + 1
    if sum(w[:half]) == 0: return None
    first = isotonic_convex(loss, y[:half], w[:half], increasing=increasing)
    return OnlineIsotonic.from_fit(first, y[:half], w[:half], loss=loss, increasing=increasing).extend(y[half:], w[half:])


# ---------------------------------------------------------------- issue 12: merge_trace input checks
@pytest.mark.parametrize('args, msg', [
    (([3., 1., 2.], [1., 1.]), 'length mismatch: `weights` has 2, `y` has 3'),
    (([3., 1.], [1., 1., 1.]), 'length mismatch: `weights` has 3, `y` has 2'),
    (([3., 1.], [1., -1.]), '`weights` must be non-negative, found -1.0 at index 1'),
    (([3., 1.], [1., np.nan]), '`weights` must be finite'),
    (([3., np.inf], None), '`y` must be finite'),
    ((['a', 'b'], None), '`y` must hold real numbers'),
])
def test_merge_trace_rejects_bad_input(args, msg):
    with pytest.raises(ValueError if 'real numbers' not in msg else TypeError, match=re.escape(msg)):
        merge_trace(*args)


@given(st.lists(st.floats(-5, 5), min_size=0, max_size=8), st.lists(st.floats(-2, 2), min_size=0, max_size=8))
def test_merge_trace_accepts_exactly_the_valid_weights(y, w):
    "Valid (same length, all ≥ 0) weights give the offline fit as the last state; anything else raises."
    if len(w) != len(y) or any(v < 0 for v in w):
        with pytest.raises(ValueError, match='`weights`'):
            merge_trace(y, w)
    elif y and sum(w) > 0:
        last = merge_trace(y, w)[-1][-1]
        ref = isotonic_regression(y, np.array(w)).x
        mask = np.array(w) > 0
        np.testing.assert_allclose(np.array(last)[mask], ref[mask], rtol=1e-12, atol=1e-12)


def test_from_fit_weights_without_targets_rejected():
    with pytest.raises(ValueError, match='`weights`.*`y`'):
        OnlineIsotonic.from_fit(isotonic_regression([1., 2.]), weights=[1., 1.])


def test_from_fit_weight_messages_name_the_argument():
    fit = isotonic_regression([1., 2.])
    with pytest.raises(ValueError, match=re.escape('length mismatch: `weights` has 3, `y` has 2')):
        OnlineIsotonic.from_fit(fit, [1., 2.], [1., 1., 1.])
    with pytest.raises(ValueError, match=re.escape('`weights` must be non-negative, found -1.0 at index 0')):
        OnlineIsotonic.from_fit(fit, [1., 2.], [-1., 1.])


@pytest.mark.parametrize('loss', ['squared', 'logloss'])
def test_stream_pickled_by_the_previous_layout_continues(loss):
    "The 4-row state of earlier versions (Σwy² kept in `_q`) loads: the fit continues; the squared loss says it is unknown."
    y = [0.2, 0.9, 0.1, 0.5, 0.7]
    s = OnlineIsotonic(loss).extend(y[:3], x=[0., 1., 1.])
    d = s.__getstate__()
    F = d['_F'][:4].copy()
    F[0] *= F[1]                                   # that layout kept sums Σw·y, not means
    d['_F'], d['_pend'], d['_q'] = F, [d['_pend'][0] * d['_pend'][1], *d['_pend'][1:4]], 1.0
    del d['_pivot'], d['_wsum']
    old = OnlineIsotonic.__new__(OnlineIsotonic)
    old.__setstate__(d)
    old.extend(y[3:], x=[2., 3.])
    ref = fit_staircase(np.array([0., 1., 1., 2., 3.]), np.array(y), np.ones(5), loss=loss)
    np.testing.assert_allclose(old.fitted_values(), ref.fitted, rtol=1e-12)
    if loss == 'squared':
        with pytest.raises(ValueError, match='older isocal'):
            old.current_loss()
    else:
        f, yy = ref.fitted, np.array(y)
        assert old.current_loss() == pytest.approx(-np.sum(yy * np.log(f) + (1 - yy) * np.log(1 - f)), rel=1e-12)


@pytest.mark.parametrize('loss', ['squared', 'logloss'])
def test_stream_pickled_with_block_sums_continues(loss):
    "The 7-row state that kept Σw·y and Σw(y − pivot) per block loads as means: fit and loss continue."
    y, w = np.array([0.2, 0.9, 0.1, 0.5, 0.7]), np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    s = OnlineIsotonic(loss).extend(y[:3], w[:3], x=[0., 1., 1.])
    d = s.__getstate__()
    F, p = d['_F'].copy(), list(d['_pend'])
    F[0] *= F[1]
    F[5] *= 2.0 * F[1]
    p[0], p[5] = p[0] * p[1], 2.0 * p[5] * p[1]
    d['_F'], d['_pend'] = F, p
    del d['_wsum']
    old = OnlineIsotonic.__new__(OnlineIsotonic)
    old.__setstate__(d)
    old.extend(y[3:], w[3:], x=[2., 3.])
    new = OnlineIsotonic(loss).extend(y, w, x=[0., 1., 1., 2., 3.])
    np.testing.assert_allclose(old.fitted_values(), new.fitted_values(), rtol=1e-15)
    assert old.current_loss() == pytest.approx(new.current_loss(), rel=1e-14)


# ---------------------------------------------------------------- issue 12: extreme magnitudes
from fractions import Fraction
import math

BIG = np.finfo(float).max


def exact_pava(y, w, increasing=True):
    "PAVA in exact rationals (equal means pooled, as isocal does): the fitted values as Fractions, and the blocks."
    sign, blocks = (1 if increasing else -1), []                 # [Σw·y, Σw, count]
    for yi, wi in zip(y, w):
        blocks.append([Fraction(wi) * Fraction(yi), Fraction(wi), 1])
        while len(blocks) > 1 and sign * blocks[-2][0] * blocks[-1][1] >= sign * blocks[-1][0] * blocks[-2][1]:
            s, v, c = blocks.pop()
            blocks[-1] = [blocks[-1][0] + s, blocks[-1][1] + v, blocks[-1][2] + c]
    return [b[0] / b[1] for b in blocks for _ in range(b[2])], [b[2] for b in blocks]


def exact_half_loss(y, w, fit):
    return sum(Fraction(wi) * (Fraction(yi) - f) ** 2 for yi, wi, f in zip(y, w, fit)) / 2


def run_stream(mode, y, w, increasing):
    s = OnlineIsotonic(increasing=increasing)
    if mode == 'add':
        for yi, wi in zip(y, w): s.add(yi, wi)
    elif mode == 'extend': s.extend(y, w)
    elif mode == 'extend-x': s.extend(y, w, x=np.arange(len(y)) // 2)     # pairs of tied scores
    else:
        for i, (yi, wi) in enumerate(zip(y, w)): s.add(yi, wi, x=float(i // 2))
    return s


def check_against_exact(s, y, w, increasing, scores):
    "Fitted values within a few roundings of the exact ones (scale: the largest target of the block and its neighbours)."
    yy, ww = list(y), list(w)
    if scores:   # tied scores share one value: pool each pair first, exactly as fit_staircase does
        groups = [(sum(Fraction(a) * Fraction(b) for a, b in zip(yy[i:i + 2], ww[i:i + 2])), sum(map(Fraction, ww[i:i + 2])), len(yy[i:i + 2]))
                  for i in range(0, len(yy), 2)]
        gy, gw = [g[0] / g[1] for g in groups], [g[1] for g in groups]
        gfit, _ = exact_pava(gy, gw, increasing)
        fit = [f for f, g in zip(gfit, groups) for _ in range(g[2])]
    else: fit, _ = exact_pava(yy, ww, increasing)
    got = s.fitted_values()
    block = [0]                                   # exact blocks are the runs of equal exact values
    for i in range(1, len(fit)): block.append(block[-1] + (fit[i] != fit[i - 1]))
    # scale: the largest target of the block and of its neighbours (a near-tie may pool either way)
    scale = [max(abs(v) for v, b in zip(yy, block) if abs(b - block[i]) <= 1) for i in range(len(yy))]
    for g, f, sc in zip(got, fit, scale):
        assert math.isfinite(g)
        assert abs(Fraction(g) - f) <= Fraction(1e-13) * Fraction(sc) + Fraction(2.0 ** -1060), (g, float(f))
    return fit


extreme_floats = st.builds(lambda m, e, neg: (-1.0 if neg else 1.0) * math.ldexp(m, e),
                           st.floats(0.5, 1.0, exclude_max=True), st.integers(-1073, 1024), st.booleans())
extreme_weights = st.builds(lambda m, e: math.ldexp(m, e), st.floats(0.5, 1.0, exclude_max=True), st.integers(-1073, 1024))


@given(st.integers(1, 10).flatmap(lambda n: st.tuples(st.lists(extreme_floats, min_size=n, max_size=n),
                                                      st.lists(extreme_weights, min_size=n, max_size=n))),
       st.sampled_from(['add', 'extend', 'extend-x', 'add-x']), st.booleans())
def test_extreme_magnitudes_match_exact_pava(data, mode, increasing):
    "Targets 2^-1074..2^1024 (either sign) and weights over the whole float range, against exact rational PAVA."
    y, w = data
    if sum(map(Fraction, w)) > Fraction(BIG) * Fraction(1 - 2.0 ** -20):
        with pytest.raises(ValueError, match='total weight'):
            run_stream(mode, y, w, increasing)
        return
    s = run_stream(mode, np.array(y), np.array(w), increasing)
    fit = check_against_exact(s, y, w, increasing, mode.endswith('-x'))
    exact = exact_half_loss(y, w, fit)
    got = s.current_loss()
    if exact > Fraction(BIG) * Fraction(1 + 1e-9):           # the loss itself exceeds the float range
        assert got == math.inf, str((y, w, mode, increasing))
    elif exact < Fraction(BIG) * Fraction(1 - 1e-9):         # (within rounding of the largest float either is right)
        assert math.isfinite(got)
        # Chan's update is exact up to roundings of the means, i.e. relative to the block's spread about 0 (condition)
        spread = sum(Fraction(wi) * Fraction(yi) ** 2 for yi, wi in zip(y, w)) / 2
        assert abs(Fraction(got) - exact) <= Fraction(1e-9) * exact + Fraction(1e-12) * spread + Fraction(2.0 ** -1000), \
            str((got, float(exact), y, w, mode, increasing))


@pytest.mark.parametrize('mode', ['add', 'extend', 'extend-x', 'add-x'])
@pytest.mark.parametrize('increasing', [True, False])
def test_issue12_huge_targets_pool_to_their_mean(mode, increasing):
    "Issue 12: 1.7e308 then 1.6e308 pool to 1.65e308 (the sum overflowed to inf); equal 1e308s stay 1e308, loss 0."
    y = [1.7e308, 1.6e308] if increasing else [1.6e308, 1.7e308]
    s = run_stream(mode, np.array(y), np.ones(2), increasing)
    np.testing.assert_array_equal(s.levels, [float((Fraction(1.7e308) + Fraction(1.6e308)) / 2)])   # ≈ 1.65e308
    assert s.current_loss() == math.inf       # ½·2·(5e306)² = 2.5e613: beyond the float range, legitimately inf
    t = run_stream(mode, np.array([1e308, 1e308]), np.ones(2), increasing)
    np.testing.assert_array_equal(t.fitted_values(), [1e308, 1e308])
    assert t.current_loss() == 0.0
    u = run_stream(mode, np.array([-1.7e308, 1.7e308, -1.7e308]), np.array([8e307, 1e-300, 8e307]), True)
    np.testing.assert_allclose(u.fitted_values(), [-1.7e308] * 3, rtol=1e-15)   # a 1e-300 share of 1.7e308 is nothing


def test_issue12_huge_weights_and_their_limit():
    "Weights near 1e308 pool; a total weight beyond the float range is refused, naming the argument, state unchanged."
    s = OnlineIsotonic().extend([3.0, 1.0], [1e308, 5e307])
    np.testing.assert_allclose(s.levels, [float((3 * Fraction(1e308) + Fraction(5e307)) / (Fraction(1e308) + Fraction(5e307)))], rtol=1e-15)
    assert s.current_loss() == pytest.approx(float(exact_half_loss([3.0, 1.0], [1e308, 5e307], [Fraction(7, 3)] * 2)), rel=1e-14)
    before = pickle.dumps(s)
    with pytest.raises(ValueError, match='`weight`: the stream.s total weight'):
        s.add(0.0, 1e308)
    with pytest.raises(ValueError, match='`weights`: the stream.s total weight'):
        s.extend([0.0], [1e308])
    assert pickle.dumps(s) == before
    with warnings.catch_warnings():                     # the error alone: no NumPy overflow warning before it
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match='`weights`: the stream.s total weight'):
            OnlineIsotonic().extend([1.0, 2.0], [1.7e308, 1.7e308])
    tiny = OnlineIsotonic().extend([2.0, 1.0, 5.0], [5e-324, 1e-323, 1e-300])
    np.testing.assert_allclose(tiny.fitted_values(), [4 / 3, 4 / 3, 5.0], rtol=1e-15)


def test_merge_trace_is_exact_at_the_ends_of_the_range():
    "Issue 30: sums of 1.7e308 overflowed to inf, and a subnormal weight gave -2.0 for the target -1.771."
    from fractions import Fraction
    assert merge_trace([1.7e308, 1.7e308, -1.7e308])[-1][-1] == [float(Fraction(1.7e308) / 3)] * 3
    assert merge_trace([-1.771], [5e-324]) == [[[-1.771]]]
    assert merge_trace([3.0, 1.0], [5e-324, 1e-323])[-1][-1] == [float(Fraction(5, 3))] * 2


def test_current_loss_exact_at_a_large_offset_issue_30():
    "Issue 30's report: 63 targets at offset −9.47e11 gave a relative error of 8e-5; now a few ulps, both ways in."
    rng = np.random.default_rng(30)
    for trial in range(40):
        y = -9.47e11 + rng.normal(size=63) * 10.0 ** rng.integers(-4, 4)
        w = rng.uniform(0.1, 3.0, 63) if trial % 2 else np.ones(63)
        one_by_one = OnlineIsotonic()
        for v, wt in zip(y, w): one_by_one.add(float(v), float(wt))
        for s in (one_by_one, OnlineIsotonic().extend(y, w)):
            exact = exact_half_squared(y, w, s.block_starts)
            assert abs(Fraction(s.current_loss()) - exact) <= Fraction(1, 10**14) * exact
