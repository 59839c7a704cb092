"""Tests of isocal.distributed: Dask fits against the single-machine fit on the concatenated data.

Reference: `isocal.pava.fit_staircase` on the concatenated NumPy arrays (an independent, in-memory algorithm, itself
tested against exact rational PAVA and KKT certificates in test_pava.py), plus an exact rational PAVA over the
distinct scores for 0/1 labels, where the sums are integers and the levels must agree exactly. Most tests use the
synchronous or threaded scheduler; one runs a LocalCluster of two worker processes and kills one mid-computation.
"""
import os
import signal
import threading
import time
from fractions import Fraction

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.callbacks import Callback
from hypothesis import given
from hypothesis import strategies as st

from isocal.distributed import fit_isotonic_dask, is_dask_collection, predict_dask
from isocal import IsotonicCalibrator, Staircase, fit_staircase


@pytest.fixture(autouse=True)
def sync_scheduler():
    with dask.config.set(scheduler='sync'):
        yield


def joined_steps(st):
    "(x_lo, x_hi, levels) of `st` with neighbouring steps whose levels are within 4 ulps joined (a rounding split)."
    keep = [0]
    for i in range(1, st.n_steps):
        a, b = st.levels[keep[-1]], st.levels[i]
        if abs(b - a) > 4 * np.finfo(float).eps * max(abs(a), abs(b)): keep.append(i)
    ends = [k - 1 for k in keep[1:]] + [st.n_steps - 1]
    return st.x_lo[keep], st.x_hi[ends], st.levels[keep]


def assert_same_staircase(got, ref, exact=False):
    assert isinstance(got, Staircase) and got.increasing == ref.increasing
    if not exact:       # equal block means can be split by rounding in one order of summation and not in another
        (glo, ghi, glv), (rlo, rhi, rlv) = joined_steps(got), joined_steps(ref)
        assert len(glv) == len(rlv) == got.n_steps, (len(glv), len(rlv), got.n_steps)   # got: no rounding splits
        np.testing.assert_array_equal(glo, rlo)
        np.testing.assert_array_equal(ghi, rhi)
        # relative 1e-12, except where a block's mean cancels to ~0 (targets here are O(1): ~n·eps absolute)
        np.testing.assert_allclose(glv, rlv, rtol=1e-12, atol=1e-13)
        return
    assert got.n_steps == ref.n_steps, (got.n_steps, ref.n_steps)
    np.testing.assert_array_equal(got.x_lo, ref.x_lo)
    np.testing.assert_array_equal(got.x_hi, ref.x_hi)
    np.testing.assert_array_equal(got.levels, ref.levels)


def chunked(a, chunks):
    return None if a is None else da.from_array(np.asarray(a, float), chunks=(tuple(chunks),))


def random_chunks(rng, n, max_size):
    "Chunk sizes summing to n, with empty and one-point chunks mixed in."
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(min(n - sum(sizes), rng.choice([0, 1, rng.integers(max_size // 4, max_size + 1)]))))
    return sizes + [0]


def data(rng, n, *, kind, decimals=None, weighted=False, zero_weights=False):
    x = rng.normal(size=n)
    if decimals is not None: x = np.round(x, decimals)
    if kind == 'binary': y = (rng.random(n) < 1 / (1 + np.exp(-3 * x))).astype(float)
    else: y = x + rng.normal(size=n)
    w = None
    if weighted:
        w = rng.uniform(1e-3, 10, n)
        if zero_weights: w[rng.random(n) < 0.3] = 0.0
        if w.sum() == 0: w[0] = 1.0
    return x, y, w


# ================================================================================ exactness, Dask's own sort

@pytest.mark.parametrize('kind', ['noisy', 'binary'])
@pytest.mark.parametrize('decimals', [None, 1])
@pytest.mark.parametrize('weighted, increasing', [(False, True), (True, False)])
def test_sorted_by_dask_matches_fit_staircase(kind, decimals, weighted, increasing):
    rng = np.random.default_rng([7, decimals or 0, weighted, increasing, len(kind)])
    n = 5000
    x, y, w = data(rng, n, kind=kind, decimals=decimals, weighted=weighted, zero_weights=weighted)
    y = -y if not increasing else y
    ref = fit_staircase(x, y, w, increasing=increasing)
    chunks = random_chunks(rng, n, 500)
    assert len(chunks) >= 15 and 0 in chunks and 1 in chunks
    got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), increasing=increasing)
    assert_same_staircase(got, ref)
    assert got.fitted is None


def test_threads_scheduler_many_partitions():
    rng = np.random.default_rng(1)
    x, y, w = data(rng, 40_000, kind='noisy', decimals=2, weighted=True)
    ref = fit_staircase(x, y, w)
    with dask.config.set(scheduler='threads'):
        got = fit_isotonic_dask(chunked(x, [500] * 80), chunked(y, [500] * 80), chunked(w, [500] * 80),
                                shuffle_method='tasks')
    assert_same_staircase(got, ref)


def test_dataframe_columns_and_tertiary_and_logloss():
    rng = np.random.default_rng(2)
    x, y, w = data(rng, 3000, kind='binary', decimals=1, weighted=True)
    df = dd.from_pandas(pd.DataFrame({'s': x, 'label': y, 'w': w}), npartitions=13)
    for ties in ('secondary', 'tertiary'):
        for loss in ('squared', 'logloss'):
            ref = fit_staircase(x, y, w, ties=ties, loss=loss)
            assert_same_staircase(fit_isotonic_dask(df['s'], df['label'], df['w'], ties=ties, loss=loss), ref)
    ref = fit_staircase(x, y, interpolation='linear', out_of_bounds='nan')
    got = fit_isotonic_dask(df[['s']], df['label'], interpolation='linear', out_of_bounds='nan')
    assert_same_staircase(got, ref)
    assert (got.interpolation, got.out_of_bounds) == ('linear', 'nan')


# ================================================================================ the merge: controlled partitions

@st.composite
def sorted_problems(draw):
    "Score-sorted data with few distinct scores (long tie runs across partitions) and a random chunk layout."
    n = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = np.sort(rng.integers(0, draw(st.integers(1, 12)), n)).astype(float)
    y = rng.integers(0, 2, n).astype(float) if draw(st.booleans()) else rng.normal(size=n).round(1)
    w = None
    if draw(st.booleans()):
        w = rng.choice([0.0, 0.5, 1.0, 3.0], n)
        if w.sum() == 0: w[-1] = 2.0
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=30))
    chunks, left = [], n
    for s in sizes:
        chunks.append(min(s, left))
        left -= chunks[-1]
    chunks.append(left)
    return x, y, w, chunks, draw(st.booleans())


@given(sorted_problems(), st.sampled_from(['primary', 'secondary', 'tertiary']))
def test_presorted_partitions_with_ties_empty_and_single(problem, ties):
    x, y, w, chunks, increasing = problem
    if ties == 'primary':                         # presorted means sorted by score, then by target in fit order
        order = np.lexsort(((1 if increasing else -1) * y, x))
        x, y, w = x[order], y[order], None if w is None else w[order]
    ref = fit_staircase(x, y, w, increasing=increasing, ties=ties)
    got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), increasing=increasing,
                            ties=ties, presorted=True)
    assert_same_staircase(got, ref)


@pytest.mark.parametrize('increasing', [True, False])
def test_primary_ties_sorted_by_dask(increasing):
    rng = np.random.default_rng([8, increasing])
    n = 3000
    x, y, w = data(rng, n, kind='noisy', decimals=1, weighted=True, zero_weights=True)
    y = np.round(y if increasing else -y, 1)      # ties in (x, y) too
    ref = fit_staircase(x, y, w, increasing=increasing, ties='primary')
    assert np.any(ref.x_lo == ref.x_hi) and ref.n_steps > 5
    chunks = random_chunks(rng, n, 400)
    for weights in (None, w):
        ref = fit_staircase(x, y, weights, increasing=increasing, ties='primary')
        got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(weights, chunks),
                                increasing=increasing, ties='primary')
        assert_same_staircase(got, ref)


def test_primary_tie_split_over_blocks():
    # Score 1 holds targets 0 and 3: primary ties put them in different blocks, so its level is their blocks'
    # weighted mean; the seam inside the tie must not change that.
    x, y, w = np.array([0.0, 1.0, 1.0, 2.0]), np.array([2.0, 0.0, 3.0, 4.0]), np.array([1.0, 2.0, 1.0, 1.0])
    ref = fit_staircase(x, y, w, ties='primary')
    assert ref.n_steps == 3
    for chunks in ([2, 2], [1, 1, 1, 1], [3, 0, 1]):
        got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), ties='primary',
                                presorted=True)
        assert_same_staircase(got, ref)


def test_tie_straddling_a_seam_is_one_unit():
    # Pooling the left partition alone would merge 0.5 with the partial tie (x = 1, y = 0); with the tie's other
    # samples (y = 10) the tied group's mean is far above 0.5 and the first sample stays on its own.
    x, y = np.array([0.0, 1.0, 1.0]), np.array([0.5, 0.0, 10.0])
    ref = fit_staircase(x, y)
    assert ref.n_steps == 2
    for chunks in ([2, 1], [1, 1, 1], [2, 0, 1], [0, 2, 0, 1, 0]):
        assert_same_staircase(fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), presorted=True), ref)
        assert_same_staircase(fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks)), ref)


def test_tie_run_over_many_partitions_and_zero_weights_at_seams():
    x = np.repeat([0.0, 1.0, 2.0, 3.0], [3, 17, 2, 5])
    y = np.tile([1.0, 0.0, 0.0, 2.0, -1.0], 6)[:len(x)]
    w = np.where(np.arange(len(x)) % 4 == 1, 0.0, 1.0 + np.arange(len(x)) % 3)
    for chunks in ([1] * len(x), [3, 0, 1, 1, 5, 0, 10, 7], [4, 4, 4, 4, 4, 4, 3]):
        for inc in (True, False):
            for weights in (None, w):
                ref = fit_staircase(x, y, weights, increasing=inc)
                got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(weights, chunks),
                                        increasing=inc, presorted=True)
                assert_same_staircase(got, ref)


def exact_binary_levels(x, y, increasing):
    "Rational PAVA over the distinct scores: (distinct-score block ranges, levels as Fractions)."
    ux = np.unique(x)
    sums = [Fraction(int(y[x == u].sum())) for u in ux]
    wts = [Fraction(int((x == u).sum())) for u in ux]
    blocks = []                                              # [sum, weight, first score, last score]
    for s, w, u in zip(sums, wts, ux):
        blocks.append([s, w, u, u])
        while len(blocks) > 1 and ((blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]) == increasing
                                   or blocks[-2][0] / blocks[-2][1] == blocks[-1][0] / blocks[-1][1]):
            s2, w2, _, hi = blocks.pop()
            blocks[-1][0] += s2; blocks[-1][1] += w2; blocks[-1][3] = hi
    return [b[2] for b in blocks], [b[3] for b in blocks], [b[0] / b[1] for b in blocks]


@pytest.mark.parametrize('increasing', [True, False])
def test_binary_labels_exact(increasing):
    rng = np.random.default_rng(3)
    x, y, _ = data(rng, 4000, kind='binary', decimals=2)
    if not increasing: x = -x
    lo, hi, levels = exact_binary_levels(x, y, increasing)
    chunks = random_chunks(rng, len(x), 300)
    got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), increasing=increasing)
    np.testing.assert_array_equal(got.x_lo, lo)
    np.testing.assert_array_equal(got.x_hi, hi)
    np.testing.assert_array_equal(got.levels, [float(v) for v in levels])


def test_single_point_and_single_score():
    one = fit_isotonic_dask(chunked([2.5], [0, 1, 0]), chunked([7.0], [0, 1, 0]))
    assert_same_staircase(one, fit_staircase([2.5], [7.0]))
    x, y = np.full(50, 3.0), np.arange(50.0)
    assert_same_staircase(fit_isotonic_dask(chunked(x, [10] * 5), chunked(y, [10] * 5)), fit_staircase(x, y))


# ================================================================================ prediction and the calibrator

def test_predict_dask_array_and_series():
    rng = np.random.default_rng(4)
    x, y, _ = data(rng, 2000, kind='binary')
    st_ = fit_staircase(x, y, interpolation='linear')
    t = rng.normal(scale=2, size=3000)
    out = predict_dask(st_, da.from_array(t, chunks=700))
    assert is_dask_collection(out)
    np.testing.assert_array_equal(out.compute(), st_(t))
    s = dd.from_pandas(pd.Series(t, name='score', index=np.arange(3000) * 2), npartitions=4)
    res = predict_dask(st_, s).compute()
    np.testing.assert_array_equal(res.to_numpy(), st_(t))
    np.testing.assert_array_equal(res.index, np.arange(3000) * 2)


def test_calibrator_delegates_dask_inputs():
    rng = np.random.default_rng(5)
    x, y, w = data(rng, 3000, kind='binary', decimals=2, weighted=True)
    ref = IsotonicCalibrator(y_min=0.1, y_max=0.9).fit(x.reshape(-1, 1), y, sample_weight=w)
    X = da.from_array(x.reshape(-1, 1), chunks=(250, 1))
    got = IsotonicCalibrator(y_min=0.1, y_max=0.9).fit(X, chunked(y, [250] * 12), sample_weight=chunked(w, [250] * 12))
    np.testing.assert_array_equal(got.X_thresholds_, ref.X_thresholds_)
    np.testing.assert_allclose(got.y_thresholds_, ref.y_thresholds_, rtol=1e-12, atol=0)
    t = rng.normal(size=500)
    pred = got.predict(da.from_array(t, chunks=100))
    assert is_dask_collection(pred)
    np.testing.assert_allclose(pred.compute(), ref.predict(t), rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match='increasing'):
        IsotonicCalibrator(increasing='auto').fit(X, chunked(y, [250] * 12))


# ================================================================================ bad input, before heavy work

class TaskLog(Callback):
    def __init__(self): self.keys = []
    def _start_state(self, dsk, state): self.keys.extend(map(str, dsk))


def test_errors_before_the_sort():
    x = np.arange(100.0)
    y = np.ones(100)
    x_bad = x.copy(); x_bad[73] = np.nan
    with TaskLog() as log, pytest.raises(ValueError, match=r'`x` must be finite.*index 73'):
        fit_isotonic_dask(chunked(x_bad, [30, 30, 40]), chunked(y, [30, 30, 40]))
    assert log.keys and not any('sort' in k or 'shuffle' in k or 'summar' in k for k in log.keys)


@pytest.mark.parametrize('case, exc, pattern', [
    ('y_inf', ValueError, r'`y` must be finite.*index 55'),
    ('negative_weight', ValueError, r'`weights` must be non-negative.*index 61'),
    ('nan_weight', ValueError, r'`weights` must be finite.*index 5'),
    ('zero_weights', ValueError, r'`weights` are all zero'),
    ('chunks', ValueError, r'mismatched chunks.*`y`'),
    ('partitions', ValueError, r'mismatched chunks.*partitions'),
    ('length', ValueError, r'length mismatch.*`y` has 90'),
    ('unknown_length', ValueError, r'length mismatch.*`y` has 99'),
    ('numpy', TypeError, r'`x` must be a dask array'),
    ('two_d', ValueError, r'`x` must be one-dimensional'),
    ('strings', TypeError, r'`y` must hold real numbers'),
    ('unsorted', ValueError, r'`x` is not sorted.*index 40'),
    ('unsorted_primary', ValueError, r'`x` is not sorted.*index 60.*then by increasing `y`'),
    ('domain', ValueError, r'`y` must be in \[0, 1\].*index 12'),
    ('loss', NotImplementedError, r'custom loss'),
    ('loss_ties', NotImplementedError, r"ties='secondary'"),
    ('ties', ValueError, r'`ties` must be one of'),
    ('increasing', TypeError, r'`increasing` must be'),
])
def test_bad_input(case, exc, pattern):
    n = 100
    x, y, w = np.arange(float(n)), np.linspace(0, 1, n), np.ones(n)
    kw = {}
    chunks_y = chunks = [40, 0, 60]
    if case == 'y_inf': y[55] = np.inf
    if case == 'negative_weight': w[61] = -1.0
    if case == 'nan_weight': w[5] = np.nan
    if case == 'zero_weights': w[:] = 0.0
    if case == 'chunks': chunks_y = [50, 50]
    if case == 'unsorted': x[40] = -1.0; kw['presorted'] = True
    if case == 'domain': y[12] = 1.5; kw['loss'] = 'logloss'
    if case == 'loss':                           # a custom loss's compiled derivative stays in this process
        from isocal.convex import CustomLoss
        from numba import njit
        kw['loss'] = CustomLoss(njit(lambda z, y: (z - y) + (z - y) ** 3), name='cubic')
    if case == 'loss_ties': kw.update(loss='logcosh', ties='primary')
    if case == 'unsorted_primary': x[60] = x[59]; y[60] = y[59] - 1; kw.update(presorted=True, ties='primary')
    if case == 'ties': kw['ties'] = 'quaternary'
    if case == 'increasing': kw['increasing'] = 'yes'
    X, Y, W = chunked(x, chunks), chunked(y, chunks_y), chunked(w, chunks)
    if case == 'length': Y = chunked(y[:90], [30, 0, 60])
    if case == 'unknown_length':
        X = dd.from_pandas(pd.Series(x), npartitions=3)
        Y = dd.from_pandas(pd.Series(y[:99]), npartitions=3)
        W = None
    if case == 'partitions': Y = dd.from_pandas(pd.Series(y), npartitions=4); X = dd.from_pandas(pd.Series(x), npartitions=3)
    if case == 'numpy': X = x
    if case == 'two_d': X = da.ones((n, 2), chunks=(40, 2))
    if case == 'strings': Y = da.from_array(np.array(['a'] * n), chunks=40)
    with pytest.raises(exc, match=pattern):
        fit_isotonic_dask(X, Y, W, **kw)


# ================================================================================ a real cluster, a worker killed

def slow_block(block_info=None, seed=0):
    "One partition of reproducible data, a little slowly (so that the computation is still running when killed)."
    (start, stop), = block_info[None]['array-location']
    time.sleep(0.05)
    rng = np.random.default_rng([seed, start])
    return np.round(rng.normal(size=stop - start), 2)


def test_worker_killed_mid_computation_result_still_exact():
    from distributed import Client, LocalCluster
    n, chunk = 100_000, 10_000
    x = da.map_blocks(slow_block, chunks=((chunk,) * (n // chunk),), dtype=float, seed=1)
    noise = da.map_blocks(slow_block, chunks=((chunk,) * (n // chunk),), dtype=float, seed=2)
    y = (x + noise > 0).astype(float)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        xs, ys = dask.compute(x, y)
        ref = fit_staircase(xs, ys)
        pids = list(client.run(os.getpid).values())
        state = {'done': False, 'killed_while_running': None}

        def kill_when_summarising():          # once the fit's sort or summaries run (not during validation)
            deadline = time.time() + 60
            while time.time() < deadline and not state['done']:
                busy = [k for keys in client.processing().values() for k in keys]
                if any(part in str(k) for k in busy for part in ('shuffle', 'frame', 'summary', 'merge')):
                    os.kill(pids[0], signal.SIGKILL)
                    state['killed_while_running'] = not state['done']
                    return
                time.sleep(0.02)

        killer = threading.Thread(target=kill_when_summarising)
        killer.start()
        got = fit_isotonic_dask(x, y, shuffle_method='tasks')
        state['done'] = True
        killer.join()
    assert state['killed_while_running'] is True
    assert_same_staircase(got, ref, exact=True)


# ================================================================================ issue 12: extreme magnitudes, options

@given(sorted_problems(), st.sampled_from(['primary', 'secondary']),
       st.sampled_from([2.0**-1070, 2.0**-600, 1e-300, 1 / 3, 1e300, 2.0**1000, 2.0**1020]),
       st.sampled_from([0, 1000, -1000, 1020]))
def test_extreme_weights_and_targets(problem, ties, w_factor, y_exp):
    """Weights scaled by a huge or tiny constant and targets by a power of two give the staircase of ordinary
    magnitudes (targets scaled back), as the in-memory fit on ordinary magnitudes: no sum overflows, no product is
    lost to underflow. (The targets here are multiples of 0.1 in [−3, 3], so 2^±1000 keeps them normal floats.)"""
    x, y, w, chunks, increasing = problem
    y = np.clip(y, -3, 3)
    if ties == 'primary':
        order = np.lexsort(((1 if increasing else -1) * y, x))
        x, y, w = x[order], y[order], None if w is None else w[order]
    w = np.ones_like(x) if w is None else w
    ref = fit_staircase(x, y, w, increasing=increasing, ties=ties)
    got = fit_isotonic_dask(chunked(x, chunks), chunked(np.ldexp(y, y_exp), chunks), chunked(w * w_factor, chunks),
                            increasing=increasing, ties=ties, presorted=True)
    back = Staircase(got.x_lo, got.x_hi, np.ldexp(got.levels, -y_exp), increasing=got.increasing)
    assert_same_staircase(back, ref)


def test_reported_extreme_weights():
    x, y = [0.0, 1.0, 2.0, 3.0], [1.0, 0.0, 3.0, 2.0]
    for w in ([1e308] * 4, [1e-320] * 4):
        got = fit_isotonic_dask(chunked(x, [2, 2]), chunked(y, [2, 2]), chunked(w, [2, 2]))
        np.testing.assert_array_equal(got.levels, [0.5, 2.5])
    got = fit_isotonic_dask(chunked([0.0, 1.0], [1, 1]), chunked([1.7e308, 1.6e308], [1, 1]))
    assert got.levels[0] == float((Fraction(1.7e308) + Fraction(1.6e308)) / 2)      # the exact mean, rounded once


@pytest.mark.parametrize('value', [5, 'bad'])
def test_bad_shuffle_method_names_the_argument(value):
    with pytest.raises(ValueError, match='`shuffle_method`'):
        fit_isotonic_dask(chunked([0.0, 1.0], [1, 1]), chunked([1.0, 0.0], [1, 1]), shuffle_method=value)


@given(st.lists(st.tuples(st.floats(1e-3, 1e3), st.floats(1e-3, 1e3), st.booleans()), min_size=1, max_size=12),
       st.lists(st.integers(0, 12), max_size=3), st.booleans(),
       st.sampled_from([-1060, -1000, -600, 0, 600, 1000]), st.sampled_from([-1060, -600, 0, 600, 1000]))
def test_weight_exponent_is_pavas_rule(rows, cuts, weighted, w_exp, y_exp):
    """The client's exponent from the partitions' reports is the k of `isocal.pava._weight_exponent` on the
    concatenated data (unit weights: on ones), over magnitudes from subnormal (2^-1070) to 1e304, zero targets included."""
    from isocal.distributed import _piece_report, _weight_exponent
    from isocal.pava import _weight_exponent as pava_weight_exponent
    y = np.ldexp(np.array([v if keep else 0.0 for v, _, keep in rows]), y_exp)
    w = np.ldexp(np.array([u for _, u, _ in rows]), w_exp)
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    reports = [_piece_report(np.zeros(s.stop - s.start), y[s], w[s] if weighted else None, None, None) for s in parts]
    expected = pava_weight_exponent(y, w if weighted else np.ones(len(rows)))
    assert _weight_exponent(reports, weighted) == expected


# ================================================================================ issue 28: every built-in loss

from isocal.convex import Expectile, LogCosh, Lp, PseudoHuber, Quantile, SquaredQuartic  # noqa: E402
import isocal.distributed_convex as dcx  # noqa: E402
from test_convex import assert_fit_certified, exact_lower_quantile_fit  # noqa: E402

GENERAL = {'PseudoHuber(delta=1)': PseudoHuber(1.0), 'logcosh': LogCosh(), 'Lp(p=1.5)': Lp(1.5),
           'Lp(p=3)': Lp(3.0), 'Expectile(tau=0.9)': Expectile(0.9), 'SquaredQuartic(a=2)': SquaredQuartic(2.0),
           'Quantile(0.3)': Quantile(0.3), 'Quantile(0.5)': Quantile(0.5)}


def per_sample(st, x, increasing):
    "The staircase's value at each sample (fit order: reversed for a decreasing fit, so the fit reads increasing)."
    v = st(x)
    return v if increasing else v[::-1]


def assert_general_fit(name, got, ref, x, y, w, increasing):
    """The Dask staircase has `fit_staircase`'s blocks, and its levels are certified on their own: against 50-digit
    derivatives (`test_convex.assert_fit_certified`), or for a quantile against the exact smallest fit by rationals."""
    np.testing.assert_array_equal(got.x_lo, ref.x_lo)
    np.testing.assert_array_equal(got.x_hi, ref.x_hi)
    wv = np.ones_like(y) if w is None else w
    keep = wv > 0
    fitted = per_sample(got, x, increasing)
    ys, ws = (y, wv) if increasing else (y[::-1], wv[::-1])
    k = keep if increasing else keep[::-1]
    if name.startswith('Quantile'):
        np.testing.assert_array_equal(got.levels, ref.levels)
        # secondary ties: tied scores form one group; the exact fit of the groups' (pooled) targets
        assert np.all(np.diff(fitted) >= 0)
        return
    # (a level whose exact value is 0 may end a few subnormal ulps from it over partitions, where the in-memory
    # scan sees the exact tie at 0: both certified below)
    np.testing.assert_allclose(got.levels, ref.levels, rtol=1e-12, atol=1e-320)
    xs = (x if increasing else x[::-1])[k]
    assert_fit_certified(name, fitted[k], ys[k], ws[k], np.r_[True, xs[1:] != xs[:-1], True])


@given(sorted_problems(), st.sampled_from(sorted(GENERAL)), st.sampled_from([1, 2, 3, 5, 8]))
def test_every_builtin_loss_over_partitions(problem, name, max_segment):
    """Every built-in loss without a closed-form block minimiser, decomposed over partitions (empty, one-point, tie
    runs across seams, zero weights) down to segments of `max_segment` samples: `fit_staircase`'s staircase."""
    x, y, w, chunks, increasing = problem
    loss = GENERAL[name]
    ref = fit_staircase(x, y, w, increasing=increasing, loss=loss)
    old, dcx.MAX_SEGMENT = dcx.MAX_SEGMENT, max_segment
    try:
        got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), increasing=increasing,
                                loss=loss, presorted=True)
    finally:
        dcx.MAX_SEGMENT = old
    assert_general_fit(name, got, ref, x, y, w, increasing)


@pytest.mark.parametrize('tau', [0.3, 0.5])
@pytest.mark.parametrize('increasing', [True, False])
def test_quantile_over_partitions_is_the_exact_smallest_fit(tau, increasing):
    "Distinct scores, real weights: the Dask quantile fit is the min-max formula over exact rational quantiles."
    rng = np.random.default_rng([28, int(tau * 10), increasing])
    for _ in range(20):
        n = int(rng.integers(2, 30))
        x = np.arange(n, dtype=float)
        y = rng.integers(0, 5, n).astype(float)
        w = 10.0 ** rng.uniform(-3, 3, n)
        chunks = random_chunks(rng, n, 8)
        old, dcx.MAX_SEGMENT = dcx.MAX_SEGMENT, int(rng.integers(1, 4))
        try:
            got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), increasing=increasing,
                                    loss=Quantile(tau), presorted=True)
        finally:
            dcx.MAX_SEGMENT = old
        yy, ww = (y, w) if increasing else (y[::-1], w[::-1])
        expected = exact_lower_quantile_fit(yy, ww, tau)
        np.testing.assert_array_equal(per_sample(got, x, increasing), expected)


@pytest.mark.parametrize('name', sorted(GENERAL))
def test_every_builtin_loss_sorted_by_dask(name):
    "Unsorted tied scores, real weights with zeros, Dask's own sort, segments well below the data: as in memory."
    rng = np.random.default_rng([28, len(name)])
    n = 3000
    x, y, w = data(rng, n, kind='noisy', decimals=1, weighted=True, zero_weights=True)
    loss = GENERAL[name]
    chunks = random_chunks(rng, n, 400)
    for increasing in (True, False):
        ref = fit_staircase(x, y, w, increasing=increasing, loss=loss)
        old, dcx.MAX_SEGMENT = dcx.MAX_SEGMENT, 200
        try:
            got = fit_isotonic_dask(chunked(x, chunks), chunked(y, chunks), chunked(w, chunks), increasing=increasing,
                                    loss=loss)
        finally:
            dcx.MAX_SEGMENT = old
        np.testing.assert_array_equal(got.x_lo, ref.x_lo)
        np.testing.assert_array_equal(got.x_hi, ref.x_hi)
        np.testing.assert_allclose(got.levels, ref.levels, rtol=0 if name.startswith('Quantile') else 1e-12)


def test_every_builtin_loss_on_a_local_cluster():
    "Two worker processes: each built-in loss's Dask fit is the in-memory staircase."
    from distributed import Client, LocalCluster
    rng = np.random.default_rng(2028)
    n = 20_000
    x, y, w = data(rng, n, kind='noisy', decimals=2, weighted=True, zero_weights=True)
    X, Y, W = (da.from_array(a, chunks=2_500) for a in (x, y, w))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster):
        old, dcx.MAX_SEGMENT = dcx.MAX_SEGMENT, 1_000       # (the client decides the segments: set here)
        try:
            for name, loss in GENERAL.items():
                ref = fit_staircase(x, y, w, loss=loss)
                got = fit_isotonic_dask(X, Y, W, loss=loss)
                np.testing.assert_array_equal(got.x_lo, ref.x_lo)
                np.testing.assert_allclose(got.levels, ref.levels, rtol=0 if name.startswith('Quantile') else 1e-12)
        finally:
            dcx.MAX_SEGMENT = old
