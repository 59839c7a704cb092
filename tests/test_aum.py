"""Tests of isocal.aum against independent references.

References (no expected value below was produced by isocal.aum itself): AUM and AUC recomputed by plain sorting in
exact `fractions.Fraction` arithmetic at every pairwise crossing step (itself a Fraction) and between crossings;
finite differences of that exact AUM for the directional derivatives; the stopping rules re-applied to the exact path.
"""
import os
import subprocess
import sys
import tempfile
import textwrap
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from isocal.aum import (Breakpoints, aum, aum_gradient, aum_gradient_descent, aum_line_search, aum_line_search_lines,
                        binary_breakpoints, error_function_breakpoints, make_breakpoints, roc_curve)


# --- exact references -------------------------------------------------------------------------------------------
def exact_lines(e, d, fp, fn):
    "Lines as Fractions, identical lines merged and lines without error jumps dropped (they change nothing)."
    merged = {}
    for a, b, c, g in zip(e, d, fp, fn):
        key = (F(a), F(b))
        old = merged.get(key, (F(0), F(0)))
        merged[key] = (old[0] + F(c), old[1] + F(g))
    return [(k[0], k[1], v[0], v[1]) for k, v in merged.items() if v != (0, 0)]


def sort_aum_auc(thr, fp, fn):
    "AUM and AUC by sorting; equal thresholds share one ROC point."
    order = sorted(range(len(thr)), key=lambda b: thr[b])
    fn_total = -sum(fn)
    fp_lo, fn_lo, area, auc, i, prev = F(0), fn_total, F(0), F(0), 0, None
    while i < len(order):
        t, j, fp_hi, fn_hi = thr[order[i]], i, fp_lo, fn_lo
        while j < len(order) and thr[order[j]] == t:
            fp_hi, fn_hi, j = fp_hi + fp[order[j]], fn_hi + fn[order[j]], j + 1
        if prev is not None:
            area += (t - prev) * min(fp_lo, fn_lo)
        auc += (fp_hi - fp_lo) * ((fn_total - fn_hi) + (fn_total - fn_lo)) / 2
        prev, fp_lo, fn_lo, i = t, fp_hi, fn_hi, j
    return area, auc


def lines_at(lines, s):
    return sort_aum_auc([a + s * b for a, b, _, _ in lines], [l[2] for l in lines], [l[3] for l in lines])


def exact_path(lines):
    "Rows (σ, AUM, slope after, AUC at, AUC after, #points where lines meet, #lines changing rank)."
    steps = {F(0)}
    for i in range(len(lines)):
        for j in range(i + 1, len(lines)):
            if lines[i][1] != lines[j][1]:
                s = (lines[j][0] - lines[i][0]) / (lines[i][1] - lines[j][1])
                if s > 0:
                    steps.add(s)
    steps = sorted(steps)
    rows = []
    for k, s in enumerate(steps):
        mid = (s + steps[k + 1]) / 2 if k + 1 < len(steps) else s + 1
        a0, c0 = lines_at(lines, s)
        a1, c1 = lines_at(lines, mid)
        T = [a + s * b for a, b, _, _ in lines]
        points = sum(1 for t in set(T) if T.count(t) > 1) if k else 0
        before = sorted(range(len(lines)), key=lambda b: (T[b], -lines[b][1]))
        after = sorted(range(len(lines)), key=lambda b: (T[b], lines[b][1]))
        moved = sum(x != y for x, y in zip(before, after)) if k else 0
        rows.append((s, a0, (a1 - a0) / (mid - s), c0, c1, points, moved))
    return rows


def assert_path_matches(res, rows, counts=True):
    assert len(res) == len(rows)
    got = np.column_stack([res.step_size, res.aum, res.aum_slope_after, res.auc_at, res.auc_after])
    np.testing.assert_allclose(got, np.array([r[:5] for r in rows], float), rtol=1e-9, atol=1e-9)
    if counts:
        np.testing.assert_array_equal(res.intersections, [r[5] for r in rows])
        np.testing.assert_array_equal(res.swaps, [r[6] for r in rows])


def first_min_rule(rows):
    "The first AUM minimum of an exact path: the first row after which AUM rises (midpoint of a flat stretch)."
    flat = None
    for s, _, slope, *_ in rows:
        if slope > 0:
            return s if flat is None else (flat + s) / 2
        if slope == 0:
            flat = s if flat is None else flat
        else:
            flat = None
    return rows[-1][0] if flat is None else (flat + rows[-1][0]) / 2


def max_auc_rule(rows):
    "The best AUC seen before the first AUC value below the running maximum (exact path), and its value."
    best, lo, hi = rows[0][4], F(0), None
    for s, _, _, at, after, *_ in rows[1:]:
        if hi is None:
            hi = s
        if at < best or after < best:
            break
        if at > best and at >= after:
            best, lo, hi = at, s, s
        elif after > best:
            best, lo, hi = after, s, None
    return best


# --- strategies -------------------------------------------------------------------------------------------------
def binary_jumps(labels):
    return [1.0 if y == 0 else 0.0 for y in labels], [-1.0 if y == 1 else 0.0 for y in labels]


grid_lines = st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-3, 3), min_size=n, max_size=n), st.lists(st.integers(-3, 3), min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n)))


@st.composite
def concurrent_lines(draw):
    "Several bundles of 2–5 lines, each bundle through one point (s0 > 0, t0) with exactly representable numbers."
    e, d, lab = [], [], []
    for _ in range(draw(st.integers(1, 3))):
        s0 = draw(st.sampled_from([0.25, 0.5, 1.0, 1.5, 3.0]))
        t0 = draw(st.integers(-4, 4))
        for slope in draw(st.lists(st.integers(-4, 4), min_size=2, max_size=5, unique=True)):
            e.append(t0 - s0 * slope)
            d.append(float(slope))
            lab.append(draw(st.integers(0, 1)))
    return e, d, lab


def binary_problem(data):
    "(e, d, fp, fn, exact lines) of a drawn binary problem; draws whose merged lines lack a class are rejected."
    e, d, lab = data
    fp, fn = binary_jumps(lab)
    lines = exact_lines(e, d, fp, fn)
    assume(sum(l[2] for l in lines) != 0 and sum(l[3] for l in lines) != 0)
    return e, d, fp, fn, lines


# --- the line search against exact sorting ----------------------------------------------------------------------
@given(grid_lines)
def test_integer_grid_binary_path_is_exact(data):
    e, d, fp, fn, lines = binary_problem(data)
    res = aum_line_search_lines(e, d, fp, fn, stop='quadratic')
    assert_path_matches(res, exact_path(lines))


@given(concurrent_lines())
def test_three_or_more_lines_meeting_at_one_point(data):
    e, d, lab = data
    lab[0], lab[-1] = 0, 1
    fp, fn = binary_jumps(lab)
    lines = exact_lines(e, d, fp, fn)
    res = aum_line_search_lines(e, d, fp, fn, stop='quadratic')
    rows = exact_path(lines)
    assert_path_matches(res, rows)
    assert min(res.aum) >= -1e-12


@given(st.integers(2, 7).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-3, 3), min_size=n, max_size=n), st.lists(st.integers(-3, 3), min_size=n, max_size=n),
    st.lists(st.integers(-1, 2), min_size=n, max_size=n), st.lists(st.integers(-2, 1), min_size=n, max_size=n))))
def test_general_jumps_path_is_exact(data):
    "Non-monotone error functions (jumps of both signs): AUC may leave [0, 1], AUM may be negative; still exact."
    e, d, fp, fn = (list(map(float, x)) for x in data)
    lines = exact_lines(e, d, fp, fn)
    if not lines:
        return
    res = aum_line_search_lines(e, d, fp, fn, stop='quadratic')
    assert_path_matches(res, exact_path(lines))


@pytest.mark.parametrize('seed', range(6))
def test_random_float_lines_path_is_exact(seed):
    rng = np.random.default_rng(seed)
    n = 25
    e, d = rng.normal(size=n), rng.normal(size=n)
    fp, fn = rng.integers(0, 3, n).astype(float), -rng.integers(0, 3, n).astype(float)
    res = aum_line_search_lines(e, d, fp, fn, stop='quadratic')
    assert_path_matches(res, exact_path(exact_lines(e, d, fp, fn)))


@given(grid_lines)
def test_stop_rules_follow_the_exact_path(data):
    e, d, fp, fn, lines = binary_problem(data)
    rows = exact_path(lines)
    fm = aum_line_search_lines(e, d, fp, fn, stop='first_min')
    assert fm.step == pytest.approx(float(first_min_rule(rows)), rel=1e-12, abs=1e-12)
    ma = aum_line_search_lines(e, d, fp, fn, stop='max_auc')
    assert float(lines_at(lines, F(ma.step))[1]) == pytest.approx(float(max_auc_rule(rows)), abs=1e-12)
    lin = aum_line_search_lines(e, d, fp, fn, stop='linear')
    assert len(lin) == min(len(rows), len(e))
    assert_path_matches(lin, rows[:len(lin)])
    two = aum_line_search_lines(e, d, fp, fn, stop=2)
    assert len(two) == min(2, len(rows))


def test_no_events_parallel_zero_direction_and_past_crossings():
    for d in ([2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [-1.0, 0.0, 1.0]):
        res = aum_line_search_lines([0.0, 1.0, 2.0], d, [1.0, 0.0, 1.0], [0.0, -1.0, 0.0], stop='quadratic')
        assert len(res) == 1 and res.step_size[0] == 0


def test_max_step_ends_the_path_there():
    e, d, fp, fn = [0.0, 1, 2, 3], [3.0, 1, -1, -2], [1.0, 0, 1, 0], [0.0, -1, 0, -1]
    rows = exact_path(exact_lines(e, d, fp, fn))
    res = aum_line_search_lines(e, d, fp, fn, stop='quadratic', max_step=0.62)
    assert res.step_size[-1] == 0.62
    assert res.aum[-1] == pytest.approx(float(lines_at(exact_lines(e, d, fp, fn), F(0.62))[0]))
    np.testing.assert_allclose(res.aum[:-1], [float(r[1]) for r in rows if r[0] <= F(0.62)])


# --- AUM, AUC, derivatives ----------------------------------------------------------------------------------------
@given(st.integers(2, 10).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 1), min_size=n, max_size=n),
                                                      st.lists(st.integers(-2, 2), min_size=n, max_size=n))))
def test_aum_auc_and_derivatives_with_ties(data):
    y, pred = data
    if len(set(y)) < 2:
        return
    bp = binary_breakpoints(y)
    pred = np.array(pred, float)
    r = aum(bp, pred)
    fp, fn = [F(x) for x in bp.fp_diff.tolist()], [F(x) for x in bp.fn_diff.tolist()]
    thr = lambda p: [F(v) - F(p[i]) for v, i in zip(bp.value.tolist(), bp.example.tolist())]
    a0, c0 = sort_aum_auc(thr(pred.tolist()), fp, fn)
    assert r.aum == pytest.approx(float(a0), abs=1e-12) and r.auc == pytest.approx(float(c0), abs=1e-12)
    h = F(1, 1000)                      # integer predictions: the AUM is linear on [p - h, p + h] per side
    for i in range(len(y)):
        up = [F(p) for p in pred.tolist()]
        down = list(up)
        up[i] += h
        down[i] -= h
        assert r.right[i] == pytest.approx(float((sort_aum_auc(thr(up), fp, fn)[0] - a0) / h), abs=1e-12)
        assert r.left[i] == pytest.approx(float((a0 - sort_aum_auc(thr(down), fp, fn)[0]) / h), abs=1e-12)


@given(st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(-3, 3), st.integers(-2, 2), st.integers(-2, 2)),
             min_size=1, max_size=12),
    st.lists(st.integers(-2, 2), min_size=n, max_size=n))))
def test_roc_curve_matches_errors_counted_directly(data):
    """Issue 14 (the paper's Figure 1): every ROC point of `roc_curve` equals FP and FN counted directly at a constant
    inside its interval, in Fractions; the intervals are the distinct thresholds of the breakpoints that change an
    error; Σ min·width and the signed trapezoids are the exact AUM and AUC (ties, general and zero jumps; outside the
    thresholds that change an error min(FP, FN) is min(0, FN total) or min(FP total, 0): 0 for valid totals)."""
    rows, pred = data
    ex, v, fp, fn = (list(c) for c in zip(*rows))
    assume(sum(fp) >= 0 and sum(fn) <= 0)      # FP and FN totals ≥ 0 (make_breakpoints even asks for > 0)
    bp = Breakpoints(np.array(v, float), np.array(fp, float), np.array(fn, float), np.array(ex, np.int64), len(pred))
    roc = roc_curve(bp, np.array(pred, float))
    thr = [F(a) - F(pred[i]) for a, i in zip(v, ex)]
    live = sorted({t for t, a, b in zip(thr, fp, fn) if a != 0 or b != 0})
    assert roc.min_thresh[0] == -np.inf and roc.max_thresh[-1] == np.inf
    assert list(roc.min_thresh[1:]) == list(roc.max_thresh[:-1]) == [float(t) for t in live]
    fn_total = -sum(F(b) for b in fn)
    for k, (lo, hi) in enumerate(zip(roc.min_thresh, roc.max_thresh)):
        if np.isinf(lo) and np.isinf(hi):
            c = F(0)                                    # no breakpoint changes an error: one point
        else:
            c = F(hi) - 1 if lo == -np.inf else F(lo) + 1 if hi == np.inf else (F(lo) + F(hi)) / 2
        fp_c = sum(F(a) for t, a in zip(thr, fp) if t < c)
        fn_c = sum(-F(b) for t, b in zip(thr, fn) if t > c)
        assert (roc.fp[k], roc.fn[k], roc.tp[k], roc.min_fp_fn[k]) == (fp_c, fn_c, fn_total - fn_c, min(fp_c, fn_c))
    area, auc = sort_aum_auc(thr, [F(a) for a in fp], [F(b) for b in fn])
    finite = np.isfinite(roc.min_thresh) & np.isfinite(roc.max_thresh)
    assert np.sum(roc.min_fp_fn[finite] * (roc.max_thresh - roc.min_thresh)[finite]) == area
    assert np.sum(np.diff(roc.fp) * (roc.tp[1:] + roc.tp[:-1]) / 2) == auc


@pytest.mark.parametrize('n_pos, n_neg', [(3, 7), (10, 10), (7, 3), (1, 5)])
def test_roc_curve_perfect_ranking_has_exact_zero_minima(n_pos, n_neg):
    "FP summed from the bottom and FN from the top, as in `aum`: rates like 1/3 and 1/7 leave no rounding residue."
    y = np.r_[np.zeros(n_neg, int), np.ones(n_pos, int)]
    roc = roc_curve(binary_breakpoints(y), np.r_[-np.arange(1.0, n_neg + 1), np.arange(1.0, n_pos + 1)])
    assert roc.fp[0] == 0.0 and roc.fn[-1] == 0.0 and np.all(roc.min_fp_fn == 0.0)
    assert roc.tp[-1] == roc.fn[0] and len(roc.fp) == n_pos + n_neg + 1


def test_roc_curve_bad_input_names_the_argument():
    bp = binary_breakpoints([0, 1, 1])
    with pytest.raises(ValueError, match='`pred`'):
        roc_curve(bp, [0.0, 1.0])
    with pytest.raises(ValueError, match='`pred`'):
        roc_curve(bp, [0.0, np.nan, 1.0])
    with pytest.raises(TypeError, match='`breakpoints`'):
        roc_curve((bp.value, bp.fp_diff), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='`breakpoints.example`'):
        roc_curve(bp._replace(example=np.array([0, 1, 3])), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='overflow'):
        roc_curve(bp._replace(value=np.array([0.0, 1e308, 0.0])), [0.0, -1e308, 0.0])
    with pytest.raises(ValueError, match='`breakpoints.fp_diff`'):
        roc_curve(bp._replace(fp_diff=np.array([1e308, 1e308, 0.0])), [0.0, 0.0, 0.0])


def test_binary_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    pred = np.round(rng.normal(size=300), 1)
    assert aum(binary_breakpoints(y), pred).auc == pytest.approx(roc_auc_score(y, pred), abs=1e-12)


def test_model_line_search_matches_aum_along_the_direction():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] + rng.normal(size=60) > 0.8).astype(int)
    w = rng.normal(size=4)
    bp = binary_breakpoints(y)
    res = aum_line_search(bp, X, w, stop='quadratic')
    val, grad = aum_gradient(bp, X, w)
    r = aum(bp, X @ w)
    np.testing.assert_allclose(grad, X.T @ (0.5 * (r.left + r.right)))
    assert res.aum[0] == pytest.approx(val)
    for s in np.linspace(0, res.step_size[-1] * 1.1, 40):
        ref = aum(bp, X @ (w - s * grad))
        assert res.aum_at(s) == pytest.approx(ref.aum, rel=1e-9, abs=1e-12)
    fm = aum_line_search(bp, X, w, stop='first_min')
    assert aum(bp, X @ (w - fm.step * grad)).aum <= val


def test_identical_lines_are_merged():
    # two examples with the same features and prediction give one line carrying both jumps
    bp = binary_breakpoints([0, 1, 0, 1])
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    res = aum_line_search(bp, X, np.array([0.3, -0.2]), np.array([1.0, -2.0]), stop='quadratic')
    assert res.n_lines == 3


def test_changepoint_breakpoints_non_monotone_auc():
    parts = [error_function_breakpoints(0, [-1.0, 0.0, 1.0], [0, 0, 0, 1], [1, 0, 1, 0]),
             error_function_breakpoints(1, [-0.5, 0.5, 1.5], [0, 1, 0, 1], [1, 0, 0, 0])]
    bp = make_breakpoints(*[np.concatenate(c) for c in zip(*parts)])
    assert bp.n_examples == 2 and len(bp.value) == 6
    # dyadic numbers: the float lines are the exact lines, so crossings that coincide in exact arithmetic coincide
    X, w, d = np.array([[1.0, 0.25], [1.0, -0.75]]), np.array([0.125, -0.5]), np.array([1.0, -2.0])
    res = aum_line_search(bp, X, w, d, stop='quadratic')
    lines = exact_lines(bp.value - (X @ w)[bp.example], -(X @ d)[bp.example], bp.fp_diff, bp.fn_diff)
    rows = exact_path(lines)
    assert_path_matches(res, rows)


def test_duplicate_breakpoints_of_one_example_are_summed():
    bp = make_breakpoints([0.0, 0.0, 1.0], [0.5, 0.5, 0.0], [0.0, 0.0, -1.0], [0, 0, 1])
    np.testing.assert_array_equal(bp.fp_diff, [1.0, 0.0])


# --- learning -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def small_problem():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    y = (X @ [1.0, -0.5, 0.2] + 0.5 * rng.normal(size=120) > 0.9).astype(int)
    return binary_breakpoints(y[:80]), X[:80], binary_breakpoints(y[80:]), X[80:]


@pytest.mark.parametrize('method', ['first_min', 'linear', 'quadratic', 'max_auc', 'constant', 'grid'])
def test_gradient_descent_methods(small_problem, method):
    bp, X, bv, Xv = small_problem
    r = aum_gradient_descent(bp, X, method=method, validation=(bv, Xv), max_iter=8, progress=False)
    h = r.history
    assert len(h['aum']) >= 2 and np.all(np.isfinite(h['aum']))
    # the best iterate is the first whose validation AUC ties with the largest (ties: within rounding)
    tied = np.flatnonzero(h['val_auc'] >= h['val_auc'].max() - 1e-12)
    assert r.best_iter == tied[0]
    np.testing.assert_allclose(aum(bv, Xv @ r.weights).auc, h['val_auc'].max(), rtol=0, atol=1e-12)
    if method in ('first_min', 'quadratic'):
        assert np.all(np.diff(h['aum']) <= 1e-12)       # exact line search never increases the subtrain AUM


def test_early_stopping_on_validation_auc(small_problem):
    bp, X, bv, Xv = small_problem
    r = aum_gradient_descent(bp, X, method='constant', step=50.0, validation=(bv, Xv), max_iter=200, patience=2)
    assert r.stopped in ('early stopping', 'aum converged')
    assert len(r.history['aum']) - 1 - r.best_iter <= 2 or r.stopped == 'aum converged'


# --- bad input ----------------------------------------------------------------------------------------------------
def test_bad_input_errors(small_problem):
    bp, X, _, _ = small_problem
    w = np.zeros(3)
    ok = ([0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, -1.0])
    with pytest.raises(ValueError, match='both classes'):
        binary_breakpoints([1, 1, 1])
    with pytest.raises(ValueError, match='`y`'):
        binary_breakpoints([0, 1, 2])
    with pytest.raises(ValueError, match='`X`'):
        aum_line_search(bp, np.where(np.arange(240).reshape(80, 3) == 5, np.nan, X), w)
    with pytest.raises(ValueError, match='`weights`'):
        aum_line_search(bp, X, [0.0, np.inf, 0.0])
    with pytest.raises(ValueError, match='`direction`'):
        aum_line_search(bp, X, w, [0.0, np.nan, 1.0])
    with pytest.raises(ValueError, match='`value`'):
        make_breakpoints([0.0, np.nan], [1.0, 0.0], [0.0, -1.0], [0, 1])
    with pytest.raises(ValueError, match='`fp_diff`'):
        make_breakpoints([0.0, 1.0], [np.inf, 0.0], [0.0, -1.0], [0, 1])
    with pytest.raises(ValueError, match='`X`'):
        aum_line_search(bp, X[:10], w)
    with pytest.raises(ValueError, match='`weights`'):
        aum_line_search(bp, X, np.zeros(4))
    with pytest.raises(ValueError, match='`direction`'):
        aum_line_search(bp, X, w, np.zeros(2))
    with pytest.raises(ValueError, match='length mismatch'):
        aum_line_search_lines([0.0, 1.0], [1.0], [1.0, 0.0], [0.0, -1.0])
    with pytest.raises(ValueError, match='`pred`'):
        aum(bp, np.zeros(3))
    for bad in (0, -1.0, np.nan):
        with pytest.raises(ValueError, match='max_step'):
            aum_line_search_lines(*ok, max_step=bad)
    for bad in ('fastest', True, 0, 1.5):
        with pytest.raises(ValueError, match='stop'):
            aum_line_search_lines(*ok, stop=bad)
    with pytest.raises(ValueError, match='method'):
        aum_gradient_descent(bp, X, method='newton')
    with pytest.raises(TypeError, match='breakpoints'):
        aum_line_search((1, 2), X, w)


# --- memory safety ------------------------------------------------------------------------------------------------
BOUNDSCHECK_SCRIPT = textwrap.dedent("""
    import numba, numpy as np
    assert numba.config.BOUNDSCHECK == 1
    from isocal.aum import aum_line_search_lines, aum_line_search, binary_breakpoints, aum_gradient_descent
    rng = np.random.default_rng(0)
    total = 0
    for trial in range(300):
        n = int(rng.integers(2, 30))
        if trial % 3 == 0:    # bundles of lines through common points
            s0, t0 = rng.choice([0.5, 1.0, 2.0], n), rng.integers(-3, 4, n).astype(float)
            d = rng.integers(-4, 5, n).astype(float)
            e = t0 - s0 * d
        elif trial % 3 == 1:
            e, d = rng.integers(-3, 4, n).astype(float), rng.integers(-3, 4, n).astype(float)
        else:
            e, d = rng.normal(size=n), rng.normal(size=n)
        fp, fn = rng.integers(-1, 3, n).astype(float), -rng.integers(-1, 3, n).astype(float)
        if not (fp.any() or fn.any()): fp[0] = 1.0
        for stop in ('quadratic', 'first_min', 'max_auc', 'linear', 3):
            total += len(aum_line_search_lines(e, d, fp, fn, stop=stop))
        total += len(aum_line_search_lines(e, d, fp, fn, stop='quadratic', max_step=0.7))
    X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0.5).astype(int)
    r = aum_gradient_descent(binary_breakpoints(y), X, method='first_min', max_iter=5)
    print('ok', total)
""")


def test_kernels_with_numba_boundscheck():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_BOUNDSCHECK='1', NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, '-c', BOUNDSCHECK_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith('ok')


def test_nearly_concurrent_float_lines_follow_sorting():
    "Bundles of lines through points that floats cannot represent: the AUM path still matches sorting at any s."
    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(3, 40))
        s0, t0 = rng.choice([1 / 3, 0.7, np.pi / 5], n), rng.choice([0.1, 1 / 7, -2 / 3], n)
        d = rng.normal(size=n)
        e = t0 - s0 * d
        fp = (rng.random(n) < 0.5).astype(float)
        fn = -(fp == 0).astype(float)
        if fp.sum() == 0 or fn.sum() == 0:
            continue
        res = aum_line_search_lines(e, d, fp, fn, stop='quadratic')
        assert np.all(np.diff(res.step_size) > 0) and res.aum.min() >= 0
        lines = exact_lines(e, d, fp, fn)
        for s in rng.uniform(0, res.step_size[-1] * 1.2, 5):
            ref = float(lines_at(lines, F(s))[0])
            assert res.aum_at(s) == pytest.approx(ref, rel=1e-12, abs=1e-12)
        for k in rng.choice(len(res), min(len(res), 5), replace=False):      # the rounding bound holds here too
            assert abs(F(res.aum[k]) - lines_at(lines, F(res.step_size[k]))[0]) <= F(res.aum_tol[k])


def test_one_feature_all_lines_meet_in_one_event():
    "With one feature the direction is parallel to the weights: every threshold line passes through one point."
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 1))
    y = (X[:, 0] + rng.normal(size=500) > 1).astype(int)
    bp = binary_breakpoints(y)
    res = aum_line_search(bp, X, np.array([1.0]), stop='quadratic')
    assert len(res) == 2 and res.swaps[1] == len(np.unique(X[:, 0]))
    assert res.aum[1] == pytest.approx(0.0, abs=1e-9)
    direction = -aum_gradient(bp, X, np.array([1.0]))[1]
    for s in (0.5 * res.step_size[1], 2 * res.step_size[1]):
        ref = aum(bp, X @ (np.array([1.0]) + s * direction))
        assert res.aum_at(s) == pytest.approx(ref.aum, rel=1e-9, abs=1e-12)
    assert res.auc_after[1] == pytest.approx(aum(bp, X @ (1 + 2 * res.step_size[1] * direction)).auc)


@given(st.integers(2, 150).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(st.integers(-6, 6), st.integers(-6, 6)), min_size=n, max_size=n, unique=True),
    st.permutations(range(n)), st.integers(0, n - 2), st.integers(1, n - 1), st.booleans())))
def test_resort_group_orders_the_group_by_slope_then_intercept(data):
    """`_resort_group` against Python's sort: small groups and large ones (over 32 lines, where a merge sort takes
    over from the insertion sort), in random order or in the reverse of the sorted order (lines through one point).
    A pair is always crossing lines, in the reverse order."""
    from isocal.aum_kernel import _resort_group
    pairs, perm, lo, span, reverse_sorted = data
    e, d = (np.array(v, dtype=float) for v in zip(*pairs))
    hi = min(lo + span, len(pairs) - 1)
    q = np.array(perm, dtype=np.int64)
    if reverse_sorted or hi == lo + 1:
        q[lo:hi + 1] = sorted(q[lo:hi + 1], key=lambda b: (d[b], e[b]), reverse=True)
    before = q.copy()
    pos = np.empty_like(q)
    pos[q] = np.arange(len(q))
    moved = _resort_group(e, d, q, pos, lo, hi, np.empty(len(q), np.int64))
    expected = sorted(before[lo:hi + 1], key=lambda b: (d[b], e[b]))
    assert list(q[lo:hi + 1]) == expected
    assert np.array_equal(q[:lo], before[:lo]) and np.array_equal(q[hi + 1:], before[hi + 1:])
    assert np.array_equal(pos[q], np.arange(len(q)))
    assert moved == np.count_nonzero(before[lo:hi + 1] != np.array(expected))


# --- issue 12: ties of running sums, scale invariance, descent stopping, input checks ------------------------------
SCALES = [2.0 ** -3, 2.0 ** 7, 1 / 3, 3.0]


def exact_rule_positions(rows, n_rows_rule):
    "Exact chosen positions of every stop rule: ('at', k) = at crossing row k, ('in', k) = inside (row k−1, row k)."
    steps = [r[0] for r in rows]
    fm = first_min_rule(rows)
    best, lo, hi = rows[0][4], 0, None        # max_auc: indices of the best interval / point
    for k, (s, _, _, at, after, *_) in enumerate(rows[1:], 1):
        if hi is None:
            hi = k
        if at < best or after < best:
            break
        if at > best and at >= after:
            best, lo, hi = at, k, k
        elif after > best:
            best, lo, hi = after, k, None
    ma = ('at', lo) if lo == hi else ('in', len(rows) if hi is None else hi)
    rows_pos = {}
    for name, m in n_rows_rule.items():
        aums = [r[1] for r in rows[:m]]
        rows_pos[name] = ('at', aums.index(min(aums)))
    return dict(first_min=position(fm, steps), max_auc=ma, **rows_pos)


def position(step, steps):
    "Where `step` lies among the exact crossing steps: ('at', k) or ('in', k) (between steps k−1 and k)."
    x = F(step)
    for k, s in enumerate(steps):
        if abs(x - s) <= F(1, 10 ** 9) * max(1, s):
            return ('at', k)
    return ('in', sum(1 for s in steps if s < x))


def check_scale_invariance(e, d, fp, fn, lines):
    rows = exact_path(lines)
    steps = [r[0] for r in rows]
    n_lin = min(len(rows), len(e))
    ref = exact_rule_positions(rows, dict(linear=n_lin, quadratic=len(rows), **{'3': min(3, len(rows))}))
    for c in [1.0] + SCALES:
        scaled = [(a, b, g * F(c), h * F(c)) for a, b, g, h in lines]
        for stop in ('first_min', 'max_auc', 'linear', 'quadratic', 3):
            res = aum_line_search_lines(e, d, np.array(fp) * c, np.array(fn) * c, stop=stop)
            assert position(res.step, steps) == ref[str(stop)], (c, stop, res.step)
            a_ref, c_ref = lines_at(scaled, F(res.step))
            mass = float(sum(abs(g) + abs(h) for _, _, g, h in scaled))
            assert res.aum_at(res.step) == pytest.approx(float(a_ref), abs=1e-12 * mass * (1 + res.step) * 10)


def test_max_auc_does_not_stop_on_rounding_noise():
    "Issue 12: with rates 1/3 the AUC ties 4/9 at rows that differ in the last bit; the exact AUC never decreases."
    ic, sl = [-3., -1, -1, 3, 3, 3], [-2., 1, 2, -3, -2, -1]
    fp, fn = np.array([1., 0, 1, 0, 1, 0]), np.array([0., -1, 0, -1, 0, -1])
    counts = exact_lines(ic, sl, fp, fn)
    for c in (1 / 3, 1.0):
        res = aum_line_search_lines(ic, sl, fp * c, fn * c, stop='max_auc')
        assert res.step == 9.0
        assert lines_at(counts, F(res.step))[1] / 9 == F(5, 9)      # the AUC in rates (3 negatives, 3 positives)


@given(grid_lines)
def test_stop_rules_are_invariant_to_the_scale_of_the_rates(data):
    e, d, fp, fn, lines = binary_problem(data)
    check_scale_invariance(e, d, fp, fn, lines)


@given(st.integers(2, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-3, 3), min_size=n, max_size=n), st.lists(st.integers(-3, 3), min_size=n, max_size=n),
    st.lists(st.integers(-1, 2), min_size=n, max_size=n), st.lists(st.integers(-2, 1), min_size=n, max_size=n))))
def test_stop_rules_scale_invariant_general_jumps(data):
    e, d, fp, fn = (list(map(float, x)) for x in data)
    lines = exact_lines(e, d, fp, fn)
    assume(lines)
    check_scale_invariance(e, d, fp, fn, lines)


@given(st.integers(2, 12).flatmap(lambda n: st.tuples(st.integers(1, n - 1), st.integers(0, 2 ** 20),
                                                      st.sampled_from([1.0, 1 / 3, 0.1, 2.0 ** -5]))))
def test_aum_of_a_perfect_ranking_is_exactly_zero(data):
    "AUM ≥ 0 exactly for monotone error functions, and exactly 0 for a perfect ranking, whatever the rates."
    n_pos, seed, c = data
    n = n_pos + data[0] % 3 + 1
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.r_[np.ones(n_pos, int), np.zeros(n - n_pos, int)])
    pred = np.where(y == 1, 1.0, -1.0) + rng.normal(size=n) * 0.3 * c
    bp = binary_breakpoints(y)
    bp = bp._replace(fp_diff=bp.fp_diff * c, fn_diff=bp.fn_diff * c)
    assert aum(bp, pred).aum == 0.0
    assert aum(bp, rng.normal(size=n)).aum >= 0.0


@pytest.fixture(scope='module')
def digits01():
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    return (X - X.mean(0)) / (X.std(0) + 1e-9), (y != 0).astype(int)


@pytest.mark.parametrize('n', [100, 200, 400])
def test_descent_on_digits_stops_before_max_iter(digits01, n):
    """Issue 12: once the AUM is 0 up to rounding every rule stops, with a reason; no zero-length or absurd steps.
    (The 'linear' and 'constant' rules need up to ~150 iterations at n = 400: slow progress, not rounding.)"""
    X, y = digits01
    idx = np.random.default_rng(0).choice(len(y), n + 200, replace=False)
    sub, val = idx[:n], idx[n:]
    bp, bv = binary_breakpoints(y[sub]), binary_breakpoints(y[val])
    max_iter = 300
    for method in ('first_min', 'linear', 'quadratic', 'max_auc', 'constant', 'grid'):
        r = aum_gradient_descent(bp, X[sub], method=method, max_iter=max_iter, random_state=0,
                                 validation=(bv, X[val]) if method == 'max_auc' else None)
        steps = r.history['step'][1:]
        assert len(steps) < max_iter and r.stopped != 'max_iter', (method, r.stopped)
        assert np.all(steps > 0) and np.all(steps < 1e6), (method, steps)
        assert np.all(r.history['aum'] >= 0)


def test_descent_stop_reasons_at_zero_aum():
    "Separable data: the AUM reaches 0 (exactly, or within its rounding bound) and the descent says so."
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    bp = binary_breakpoints(y)
    r = aum_gradient_descent(bp, X, np.array([1.0, 0.0, 0.0]), method='first_min', max_iter=5)
    assert r.stopped == 'aum is zero' and len(r.history['aum']) == 1


def test_bad_breakpoints_and_options_name_the_argument(small_problem):
    bp, X, _, _ = small_problem
    bad = Breakpoints(np.zeros(3), np.array([1.0, 0, 0]), np.array([0.0, -1, 0]), np.array([0, 1, 5]), 3)
    for call in (lambda: aum(bad, np.zeros(3)), lambda: aum_gradient(bad, np.zeros((3, 1)), [1.0]),
                 lambda: aum_line_search(bad, np.zeros((3, 1)), [1.0], [1.0])):
        with pytest.raises(ValueError, match='`breakpoints.example`'):
            call()
    for bad in (Breakpoints(np.zeros(2), np.array([1.0, 0]), np.array([0.0, -1]), np.array([0, 1]), 2.5),
                Breakpoints(np.zeros(2), np.array([1.0, np.nan]), np.array([0.0, -1]), np.array([0, 1]), 2),
                Breakpoints(np.zeros(2), np.array([1.0, 0]), np.array([0.0, -1, 0]), np.array([0, 1]), 2),
                Breakpoints(np.zeros(2), np.array([1.0, 0]), np.array([0.0, -1]), np.array([0.5, 1]), 2),
                Breakpoints(np.zeros(2), np.array([1.0, 0]), np.array([0.0, -1]), np.array([-1, 1]), 2)):
        with pytest.raises((ValueError, TypeError), match='`breakpoints'):
            aum(bad, np.zeros(2))
    for kw, word in [(dict(method='constant', step=None), '`step`'), (dict(method='constant', step='a'), '`step`'),
                     (dict(method='constant', step=np.inf), '`step`'), (dict(tol=None), '`tol`'),
                     (dict(tol=-1.0), '`tol`'), (dict(tol=np.nan), '`tol`'), (dict(max_iter=2.5), '`max_iter`'),
                     (dict(max_iter=True), '`max_iter`'), (dict(method='grid', grid=['a']), '`grid`'),
                     (dict(method='grid', grid=[0.1, np.nan]), '`grid`'), (dict(method='grid', grid=[0.0]), '`grid`'),
                     (dict(patience=0), '`patience`'), (dict(patience='a'), '`patience`'),
                     (dict(random_state='a'), '`random_state`'), (dict(max_step='a'), '`max_step`'),
                     (dict(validation=(bp, X[:5])), '`X`'), (dict(method=None), '`method`')]:
        with pytest.raises((ValueError, TypeError), match=word):
            aum_gradient_descent(bp, X, **dict(dict(max_iter=1), **kw))
    with pytest.raises(TypeError, match='`max_step`'):
        aum_line_search_lines([0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, -1.0], max_step='a')
    with pytest.raises(ValueError, match='`X`'):
        aum_gradient_descent(bp, X[:, :1].ravel())


@pytest.mark.parametrize('seed', range(8))
def test_rounding_bounds_hold_against_exact_arithmetic(seed):
    "`aum_tol` / `auc_tol` bound |computed − exact| (exact: Fractions at the computed step sizes)."
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    e, d = rng.normal(size=n) * 10.0 ** rng.integers(-3, 4), rng.normal(size=n)
    lab = rng.permutation(np.r_[0, 1, rng.integers(0, 2, n - 2)])
    scale = rng.choice([1 / 3, 0.1, 1 / 7, 2.0 ** -10])
    fp, fn = np.where(lab == 0, scale, 0.0), np.where(lab == 1, -scale * 3, 0.0)
    if seed % 2:
        fp, fn = fp + rng.choice([0.0, scale], n), fn - rng.choice([0.0, scale], n)     # non-binary jumps
    lines = exact_lines(e, d, fp, fn)
    for stop in ('quadratic', 'first_min', 'max_auc'):
        res = aum_line_search_lines(e, d, fp, fn, stop=stop)
        ends = list(res.step_size[1:]) + [res.step_size[-1] + 1.0]
        for k in range(len(res)):
            a, _ = lines_at(lines, F(res.step_size[k]))
            _, c = lines_at(lines, (F(res.step_size[k]) + F(ends[k])) / 2)
            assert abs(F(res.aum[k]) - a) <= F(res.aum_tol[k]), (k, res.aum[k], float(a), res.aum_tol[k])
            if k + 1 < len(res) or stop == 'quadratic':     # a stopped path does not know its next crossing
                assert abs(F(res.auc_after[k]) - c) <= F(res.auc_tol[k]), (k, res.auc_after[k], float(c))
        assert np.all(res.aum_tol <= 1e-12 * (1 + np.abs(res.aum).max()) * (1 + res.step_size[-1]))


def test_overflow_and_conversions_raise_naming_the_argument():
    "No silent inf/NaN and no raw conversion errors from the breakpoint builders and the line search."
    with pytest.raises(ValueError, match='overflow'):
        aum_line_search_lines([0.0, 1.0], [1.0, -1.0], [1e308, 0.0], [0.0, -1e308], stop='quadratic')
    with pytest.raises(ValueError, match='overflow'):
        aum_line_search_lines([-1e308, 1e308], [1e308, -1e308], [1.0, 0.0], [0.0, -1.0], stop='quadratic')
    with pytest.raises(ValueError, match='overflow'):
        aum(binary_breakpoints([0, 1]), [1e308, -1e308])
    with pytest.raises(ValueError, match='`fp_diff`'):
        make_breakpoints([0.0, 1.0], [1e308, 1e308], [0.0, -1.0], [0, 1])
    with pytest.raises(TypeError, match='`n_examples`'):
        make_breakpoints([0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [0, 1], n_examples='a')
    for bad in ('a', 1.5):
        with pytest.raises(TypeError, match='`example`'):
            error_function_breakpoints(bad, [0.0], [0, 1], [1, 0])
    with pytest.raises(TypeError, match='`rates`'):
        binary_breakpoints([0, 1], rates='yes')


# --- issue 14: the descent's step equals the public line search ------ ----------------------------------------------
def _decreases_on(res):
    "Does the public search's chosen step certainly lower the AUM (`_decreases` on its table)?"
    from isocal.aum import _decreases
    return _decreases(res.step_size, res.aum, res.aum_slope_after, res.aum_tol, res.step)


def _replay_against_public_search(bp, X, w0, method, r):
    "At every iterate of descent `r`, `aum_line_search` along the same direction picks the recorded step."
    w = np.asarray(w0, float).copy()
    steps, rows, crossings = r.history['step'][1:], r.history['ls_rows'][1:], r.history['ls_crossings'][1:]
    for s, n_rows, n_cross in zip(steps, rows, crossings):
        direction = -aum_gradient(bp, X, w)[1]
        ref = aum_line_search(bp, X, w, direction, stop=method)
        assert (ref.step, len(ref) + int(ref.omitted.sum()), int(ref.intersections.sum())) == (s, n_rows, n_cross)
        assert _decreases_on(ref)               # a step is taken only when it certainly lowers the AUM
        w = w + s * direction
    if r.stopped == 'no descent step':      # the public search finds no certain decrease at the last iterate either
        assert not _decreases_on(aum_line_search(bp, X, w, -aum_gradient(bp, X, w)[1], stop=method))


def _tied_binary(n=120, seed=1):
    "Half-integer features: many examples share a prediction, so thresholds tie during the descent."
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, 3)) * 2) / 2
    y = (X[:, 0] + rng.normal(size=n) > 0.5).astype(int)
    return binary_breakpoints(y), X


def _changepoint(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    centre = X @ rng.normal(size=3)
    parts = [error_function_breakpoints(i, centre[i] + np.array([-1.0, 0.0, 1.0]),
                                        [0, 0, 0, 1] if rng.random() < 0.5 else [0, 0, 1, 1],
                                        [1, 0, 1, 0] if rng.random() < 0.5 else [1, 0, 0, 0]) for i in range(n)]
    return make_breakpoints(*[np.concatenate(c) for c in zip(*parts)], n_examples=n), X


@pytest.mark.parametrize('problem', ['tied', 'changepoint', 'digits'])
@pytest.mark.parametrize('method', ['first_min', 'linear', 'quadratic'])
def test_descent_steps_equal_the_public_line_search(problem, method, digits01):
    if problem == 'tied':
        bp, X = _tied_binary()
    elif problem == 'changepoint':
        bp, X = _changepoint()
    else:
        Xd, yd = digits01
        idx = np.random.default_rng(1).choice(len(yd), 150, replace=False)
        bp, X = binary_breakpoints(yd[idx]), Xd[idx]
    w0 = np.random.default_rng(0).standard_normal(X.shape[1])
    r = aum_gradient_descent(bp, X, w0, method=method, max_iter=12, tol=1e-6)
    assert len(r.history['step']) >= 2
    _replay_against_public_search(bp, X, w0, method, r)


@given(st.integers(2, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(-2, 2), min_size=n, max_size=n), st.lists(st.integers(-2, 2), min_size=n, max_size=n),
    st.integers(0, 2 ** 16))))
def test_reused_sort_gives_the_order_of_sort_lines(data):
    "Any order that sorts the intercepts, reused by `_sort_lines`, gives the order of a fresh sort (`aum_line_search`'s)."
    from isocal.aum_kernel import _sort_lines
    e, d, seed = np.array(data[0], float), np.array(data[1], float), data[2]
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(e)), e))          # sorted by intercept, ties in a random order
    np.testing.assert_array_equal(_sort_lines(e, d, order), _sort_lines(e, d))


@pytest.mark.parametrize('seed', range(4))
def test_short_kernel_rows_are_the_full_table_columns(seed):
    "Without `full` the kernel computes the same path: its four columns and step equal those of the full table."
    from isocal.aum_kernel import _STOP_FIRST_MIN, _STOP_ROWS, _line_search_kernel, _merged_sorted_lines, _sort_lines
    rng = np.random.default_rng(seed)
    n = 60
    e, d = np.round(rng.normal(size=n), 1), np.round(rng.normal(size=n), 1)          # ties and 3+ lines meeting
    fp, fn = rng.integers(0, 2, n).astype(float) / 3, -rng.integers(0, 2, n).astype(float) / 7
    lines = _merged_sorted_lines(e, d, fp, fn, _sort_lines(e, d))
    for code, max_rows in ((_STOP_FIRST_MIN, 10 ** 9), (_STOP_ROWS, n), (_STOP_ROWS, 10 ** 9)):
        full_f, full_i, step, crossings, complete, visited = _line_search_kernel(*lines, code, max_rows, np.inf, True)
        short, none, step2, crossings2, complete2, visited2 = _line_search_kernel(*lines, code, max_rows, np.inf, False)
        np.testing.assert_array_equal(short, full_f[:, [0, 1, 2, 5]])
        assert step2 == step and crossings2 == crossings == full_i[:, 0].sum() and none.shape[0] == 0
        assert complete2 == complete and visited2 == visited == len(full_f) and not full_i[:, 2].any()


# ---------------------------------------------------------------- issue 30: aum_at on the searched path only

def _random_model(seed, n=40, p=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = (X[:, 0] + rng.normal(size=n) > 0).astype(int)
    return binary_breakpoints(y), X, rng.normal(size=p), rng.normal(size=p)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("stop", ["first_min", "max_auc", 1, 3, "linear"])
def test_aum_at_never_extrapolates_an_incomplete_path(seed, stop):
    """Within the searched path aum_at is the exact AUM; beyond the last row of a path that did not see every crossing
    it refuses (it used to extrapolate the last slope: 5.333 where the AUM was 14.0); a complete path is linear for
    ever beyond its last row, and then matches the AUM there too."""
    bp, X, w, d = _random_model(seed)
    res = aum_line_search(bp, X, w, d, stop=stop)
    full = aum_line_search(bp, X, w, d, stop="quadratic")
    assert full.complete
    last = res.step_size[-1]
    for s in np.linspace(0, last, 7):
        assert res.aum_at(s) == pytest.approx(aum(bp, X @ (w + s * d)).aum, rel=1e-9, abs=1e-12)
    far = 3 * full.step_size[-1] + 1.0
    assert full.aum_at(far) == pytest.approx(aum(bp, X @ (w + far * d)).aum, rel=1e-9, abs=1e-9)
    if res.complete:
        assert res.aum_at(far) == pytest.approx(full.aum_at(far), rel=1e-9, abs=1e-9)
    else:
        with pytest.raises(ValueError, match=r"`s` = .* lies beyond the searched path"):
            res.aum_at(last * 1.01 + 1e-9)
        with pytest.raises(ValueError, match=r"lies beyond the searched path"):
            res.aum_at([0.0, far])


def test_aum_at_stops_at_max_step():
    bp, X, w, d = _random_model(0)
    full = aum_line_search(bp, X, w, d, stop="quadratic")
    cut = aum_line_search(bp, X, w, d, stop="quadratic", max_step=full.step_size[-1] / 2)
    assert not cut.complete and cut.step_size[-1] == full.step_size[-1] / 2
    assert cut.aum_at(cut.step_size[-1]) == pytest.approx(full.aum_at(cut.step_size[-1]), rel=1e-12, abs=1e-12)
    with pytest.raises(ValueError, match="lies beyond the searched path"):
        cut.aum_at(full.step_size[-1])


@pytest.mark.parametrize("s, kind, message", [
    (np.nan, ValueError, "`s` must be finite"), (np.inf, ValueError, "`s` must be finite"),
    (None, TypeError, "`s` must hold real numbers"), ([[0.1]], ValueError, "`s` must be a number or one-dimensional"),
    (True, TypeError, "`s` must hold real step sizes"), (np.array([True, False]), TypeError, "real step sizes"),
    (np.datetime64("2020-01-01"), TypeError, "`s` must hold real numbers"), (-0.5, ValueError, "`s` must be >= 0"),
    ("0.1", TypeError, "`s` must hold real numbers"), ([[0.1], [0.2, 0.3]], ValueError, "`s` is ragged"),
])
def test_aum_at_validates_its_argument(s, kind, message):
    bp, X, w, d = _random_model(1)
    res = aum_line_search(bp, X, w, d, stop="quadratic")
    with pytest.raises(kind, match=message):
        res.aum_at(s)
    assert isinstance(res.aum_at(0), float) and res.aum_at([0, 0]).shape == (2,)


@pytest.mark.parametrize("weights, direction, name", [
    ([1.7e308, 1.7e308, 1.7e308], None, "`weights`"),
    ([1.7e308, 1.7e308, 1.7e308], [1.0, 0.0, 0.0], "`weights`"),
    ([1.0, 0.0, 0.0], [1.7e308, 1.7e308, 1.7e308], "`direction`"),
])
def test_aum_line_search_overflow_names_the_users_argument(weights, direction, name):
    """Weights near the float maximum overflow X @ weights: the error names `weights` (it used to blame `intercept`,
    an internal array the user never passed)."""
    bp, X, _, _ = _random_model(2)
    with pytest.raises(ValueError) as err:
        aum_line_search(bp, X, np.array(weights), None if direction is None else np.array(direction))
    assert name in str(err.value) and "intercept" not in str(err.value)


# ---------------------------------------------------------------- memory: O(B) however many crossings a search visits

def _fast_through_slow(B, seed=0):
    """Half the lines (random labels) nearly flat, meeting near s = 100; the other half negatives that sweep up through
    them early. The AUM falls until the slow lines meet, so a first-min search legitimately visits Θ(B²) crossings,
    and every fast line passing between two slow ones makes their heap entry stale, then pushes it again."""
    rng = np.random.default_rng(seed)
    h = B // 2
    es = rng.random(h)
    e = np.r_[es, -1 - rng.random(B - h)]
    d = np.r_[-es / 100 + rng.normal(size=h) * 1e-6, 10 + rng.random(B - h)]
    pos = np.r_[rng.random(h) < 0.5, np.zeros(B - h, bool)]
    return e, d, np.where(pos, 0.0, 1.0), np.where(pos, -1.0, 0.0)


def _traced_peak(f):
    "(result of f(), peak bytes traced by tracemalloc during the call)."
    import tracemalloc
    tracemalloc.start()
    try:
        out = f()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak


def test_first_min_memory_stays_O_B_however_many_crossings_it_visits():
    """A first-min search on 1600 lines visits about 960,000 rows (Θ(B²) crossings, before the first minimum). It
    used to keep every row (72 bytes each, grown by doubling) and every stale heap entry (~B²/8): 172 MB traced.
    The paper's Section 4 claims O(B) space; now the search keeps at most max(B, 16384) rows and one heap entry per
    gap: about 2.4 MB, whatever the number of crossings."""
    B = 1600
    e, d, fp, fn = _fast_through_slow(B)
    aum_line_search_lines(e[:50], d[:50], fp[:50], fn[:50], stop='first_min')       # compiled outside the measurement
    res, peak = _traced_peak(lambda: aum_line_search_lines(e, d, fp, fn, stop='first_min'))
    assert peak < 6_000_000, f"traced peak {peak / 1e6:.1f} MB, {len(res):,} rows kept"
    visited = len(res) + int(res.omitted.sum())
    assert visited > 500 * B and int(res.intersections.sum()) >= visited - 1          # the search did go far
    assert len(res) <= 2 ** 14 + 2


def test_heap_of_crossings_is_pruned_to_one_entry_per_gap():
    """Without row storage (the kernel keeping 64 rows), what is left is the state of Section 4 (O(B)) and the heap.
    Lazy deletion used to leave every stale entry and every re-pushed pair in it: ~B²/8 entries on these lines
    (78,000 at B = 800, 2.5 MB); pruned when full, it holds fewer than 2B + 16."""
    from isocal.aum_kernel import _STOP_FIRST_MIN, _line_search_kernel, _merged_sorted_lines, _sort_lines
    B = 800
    e, d, fp, fn = _fast_through_slow(B)
    lines = _merged_sorted_lines(e, d, fp, fn, _sort_lines(e, d))
    small = _merged_sorted_lines(*(a[:40] for a in (e, d, fp, fn)), _sort_lines(e[:40], d[:40]))
    _line_search_kernel(*small, _STOP_FIRST_MIN, 10 ** 9, np.inf, True, 64)
    out, peak = _traced_peak(lambda: _line_search_kernel(*lines, _STOP_FIRST_MIN, 10 ** 9, np.inf, True, 64))
    rows_f, rows_i, step, crossings, complete, visited = out
    assert visited > 200 * B and len(rows_f) <= 65
    assert peak < 400 * B, f"traced peak {peak / B:.0f} bytes per line"


@pytest.fixture
def row_budget(monkeypatch):
    "Set the rows a first_min / max_auc search keeps (small, to thin paths of a few hundred rows)."
    import isocal.aum as aum_module
    return lambda rows: monkeypatch.setattr(aum_module, '_row_budget', lambda n_lines: rows)


def _thinning_problems():
    rng = np.random.default_rng(7)
    for B in (30, 90):
        e, d = rng.standard_normal(B), rng.standard_normal(B)
        neg = rng.random(B) < 0.5
        yield e, d, np.where(neg, 1.0, 0.0), np.where(neg, 0.0, -1.0)
        yield _fast_through_slow(B, seed=B)
        e, d = rng.integers(-3, 4, B).astype(float), rng.integers(-3, 4, B).astype(float)       # ties, flat stretches
        yield e, d, rng.integers(0, 3, B) / 3, -rng.integers(0, 3, B) / 7
        yield e, rng.integers(-2, 3, B).astype(float), rng.integers(-1, 3, B).astype(float), -rng.integers(-1, 3, B).astype(float)


@pytest.mark.parametrize('stop', ['first_min', 'max_auc'])
@pytest.mark.parametrize('rows', [4, 9, 40])
def test_a_thinned_path_keeps_exact_rows_of_the_full_path(stop, rows, row_budget):
    """A search keeping fewer rows than it visits: the same step, crossings and completeness as the full path; every
    row kept is a row of the full path (bit for bit), plus at most one at the chosen step where the full path has
    none; intersections, swaps and rows visited add up to the full path's; aum_at is the full path's at the step and
    wherever no row was left out, and an error where one was."""
    n_thinned = n_extra = 0
    for e, d, fp, fn in _thinning_problems():
        for max_step in (None, 'half'):
            ref = aum_line_search_lines(e, d, fp, fn, stop=stop)
            ms = None if max_step is None else ref.step_size[-1] / 2 + np.pi * 1e-7     # (at no crossing)
            if ms is not None: ref = aum_line_search_lines(e, d, fp, fn, stop=stop, max_step=ms)
            full = aum_line_search_lines(e, d, fp, fn, stop=len(ref), max_step=ms)
            np.testing.assert_array_equal(full.step_size, ref.step_size)
            row_budget(rows)
            res = aum_line_search_lines(e, d, fp, fn, stop=stop, max_step=ms)
            row_budget(2 ** 14)
            assert (res.step, res.complete) == (ref.step, ref.complete)
            extra = ~np.isin(res.step_size, full.step_size)
            assert extra.sum() <= 1 and np.all(res.step_size[extra] == res.step)
            k = np.searchsorted(full.step_size, res.step_size[~extra])
            assert k[0] == 0 and k[-1] == len(full) - 1 and np.all(np.diff(k) > 0)
            for col in ('aum', 'aum_slope_after', 'auc_at', 'auc_after', 'aum_tol', 'auc_tol'):
                np.testing.assert_array_equal(getattr(res, col)[~extra], getattr(full, col)[k])
            assert len(res) - extra.sum() + res.omitted.sum() == len(full)
            np.testing.assert_array_equal(np.cumsum(res.intersections)[~extra], np.cumsum(full.intersections)[k])
            np.testing.assert_array_equal(np.cumsum(res.swaps)[~extra], np.cumsum(full.swaps)[k])
            assert res.aum_at(res.step) == full.aum_at(res.step)
            for j in range(1, len(res)):
                mid = 0.5 * (res.step_size[j - 1] + res.step_size[j])
                if res.omitted[j] == 0:
                    assert res.aum_at(mid) == pytest.approx(full.aum_at(mid), rel=1e-12, abs=1e-12)
                else:
                    with pytest.raises(ValueError, match='left out'):
                        res.aum_at(mid)
            n_thinned += bool(res.omitted.any())
            n_extra += int(extra.sum())
    assert n_thinned >= 4 and (n_extra >= 1 or stop == 'first_min' and rows > 4)   # the second sweep ran


@pytest.mark.parametrize('problem', ['tied', 'changepoint'])
def test_first_min_descent_is_the_same_with_thinned_searches(problem, row_budget):
    "The descent's steps, rows visited and crossings do not depend on how many rows its searches keep."
    bp, X = _tied_binary() if problem == 'tied' else _changepoint()
    w0 = np.random.default_rng(0).standard_normal(X.shape[1])
    full = aum_gradient_descent(bp, X, w0, method='first_min', max_iter=8, tol=1e-6)
    row_budget(4)
    thin = aum_gradient_descent(bp, X, w0, method='first_min', max_iter=8, tol=1e-6)
    for key in ('step', 'aum', 'ls_rows', 'ls_crossings'):
        np.testing.assert_array_equal(thin.history[key], full.history[key])
    assert thin.stopped == full.stopped and max(full.history['ls_rows']) > 4

