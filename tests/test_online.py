"""Tests of isocal.online against independent references.

References (no expected value below was produced by the online code): the paper's printed Example 3 states, and the
offline fits `isotonic_regression`, `isotonic_convex` and `fit_staircase(..., ties="secondary")` of every prefix.
"""
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from isocal.convex import Expectile, PseudoHuber, isotonic_convex
from isocal.online import OnlineIsotonic, merge_trace
from isocal.pava import fit_staircase, isotonic_regression

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
        np.testing.assert_array_equal(s.fitted_values(), PAPER[t][-1])
        assert s.n_merges - before == len(PAPER[t]) - 1
    assert (s.n_merges, s.max_merges, s.n_blocks) == (11, 2, 4)
    np.testing.assert_array_equal(s.levels, [32, 47, 55, 69])
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
        np.testing.assert_array_equal(add.fitted_values(), ref.x)
        np.testing.assert_array_equal(ext.fitted_values(), ref.x)
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
    np.testing.assert_array_equal(stc(np.arange(15.0)), PAPER[-1][-1])


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
