"""Tests of isocal.pava (and of `IsotonicCalibrator`, built on it) against independent references.

References (no expected value below was produced by isocal):
* an exact PAVA in rational arithmetic (`fractions.Fraction`) and a brute force over all partitions of n <= 8
  samples into consecutive groups;
* `scipy.optimize.isotonic_regression` and `sklearn.isotonic.IsotonicRegression`;
* a reference evaluator (Fractions / `np.interp` on hand-built knots) for `Staircase.__call__`;
* Example 1/2 of Gokcesu & Gokcesu (levels and weights as printed in the paper).

scikit-learn's `check_estimator`: `IsotonicCalibrator` is tagged like `IsotonicRegression` (one_d_array=True,
two_d_array=False), and scikit-learn 1.9 then skips *every* check except `check_estimator_cloneable` (with one
SkipTestWarning "Can't test estimator ... which requires input of type ..."). `test_sklearn_checks_forced_2d` runs
the whole suite on a subclass tagged two_d_array=True; those checks feed X through `_enforce_estimator_tags_X`
(which takes X[:, 0] for one_d_array estimators) and pass. The remaining checks do not apply to a one-feature
estimator because they index X[:, j] for several features or fit on (n, k>1) data -- scikit-learn's own
IsotonicRegression fails them in the same way: check_dont_overwrite_parameters, check_n_features_in(_after_fitting),
check_sample_weights_shape, check_sample_weights_not_overwritten, check_sample_weight_equivalence_on_dense_data,
check_dtype_object, check_estimator_sparse_array, check_f_contiguous_array_estimator, check_regressors_train,
check_regressors_no_decision_function, check_supervised_y_2d, check_transformer_data_not_an_array,
check_transformer_general, check_methods_sample_order_invariance, check_methods_subset_invariance,
check_fit2d_1sample, check_fit2d_1feature, check_dict_unchanged, check_fit1d, check_fit2d_predict1d,
check_requires_y_none, and check_array_api_input (skipped: SCIPY_ARRAY_API unset). Five more pass for
IsotonicRegression but not for isocal on multi-column data, by design rather than by bug: check_complex_data (isocal
raises TypeError, not ValueError, for complex input), check_estimators_empty_data_messages, check_estimators_nan_inf
and check_estimator_sparse_tag/_matrix (isocal rejects the (n, k>1) shape or the sparse container with its own
message before looking at the values). The 1-D versions of what those checks are about are run by hand below
(`test_estimator_contract_by_hand`) and in test_core.py (NaN/inf, complex, empty input).
"""
import itertools
import pickle
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression as scipy_ir
from sklearn.base import clone
from sklearn.exceptions import NotFittedError, SkipTestWarning
from sklearn.isotonic import IsotonicRegression

from isocal.isotonic import IsotonicCalibrator
from isocal.fit import fit_staircase
from isocal.pava import Staircase, isotonic_regression

pytestmark = [pytest.mark.filterwarnings("ignore:Confidence interval of the Spearman"),
              pytest.mark.filterwarnings("ignore:An input array is constant")]


# ================================================================================ exact references

def exact_pava(y, w=None, increasing=True):
    """PAVA in exact rational arithmetic: (fitted levels, block starts + [n], block weights), all Fractions.
    Adjacent blocks with equal means are pooled, so blocks are the maximal runs of equal fitted values."""
    n = len(y)
    w = [1] * n if w is None else w
    sgn = 1 if increasing else -1
    stack = []
    for i in range(n):
        s, wt, start = Fraction(y[i]) * Fraction(w[i]), Fraction(w[i]), i
        while stack and sgn * stack[-1][0] / stack[-1][1] >= sgn * s / wt:
            ps, pw, pstart = stack.pop()
            s, wt, start = s + ps, wt + pw, pstart
        stack.append((s, wt, start))
    starts = [b[2] for b in stack] + [n]
    fit = [None] * n
    for b, (s, wt, _) in enumerate(stack):
        fit[starts[b]:starts[b + 1]] = [s / wt] * (starts[b + 1] - starts[b])
    return fit, starts, [b[1] for b in stack]


def runs(values):
    """Start indices of maximal runs of equal values, followed by len(values)."""
    if not len(values):
        return [0]
    return [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]] + [len(values)]


def brute_force(y, w=None, increasing=True):
    """Minimum weighted squared error over all partitions into consecutive groups whose (weighted-mean) levels are
    monotone; returns (minimum, set of fitted vectors attaining it), in exact arithmetic."""
    n = len(y)
    y = [Fraction(v) for v in y]
    w = [Fraction(1)] * n if w is None else [Fraction(v) for v in w]
    best, argbest = None, set()
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        levels = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            levels.append(sum(w[i] * y[i] for i in range(a, b)) / sum(w[a:b]))
        steps = [b - a for a, b in zip(levels[:-1], levels[1:])]
        if any((s < 0) if increasing else (s > 0) for s in steps):
            continue
        fit = tuple(levels[k] for k in range(len(levels)) for _ in range(bounds[k + 1] - bounds[k]))
        loss = sum(w[i] * (y[i] - fit[i]) ** 2 for i in range(n))
        if best is None or loss < best:
            best, argbest = loss, {fit}
        elif loss == best:
            argbest.add(fit)
    return best, argbest


def running_mean_pava(y, increasing=True):
    """The textbook float PAVA that keeps each block's running mean (as many implementations do)."""
    sgn = 1.0 if increasing else -1.0
    stack = []
    for i, v in enumerate(y):
        m, wt, start = float(v), 1.0, i
        while stack and sgn * stack[-1][0] >= sgn * m:
            pm, pw, pstart = stack.pop()
            m, wt, start = (pm * pw + m * wt) / (pw + wt), pw + wt, pstart
        stack.append((m, wt, start))
    starts = [b[2] for b in stack] + [len(y)]
    fit = np.empty(len(y))
    for b, (m, _, _) in enumerate(stack):
        fit[starts[b]:starts[b + 1]] = m
    return fit, starts


def as_floats(fractions):
    return np.array([float(f) for f in fractions])   # float(Fraction) is correctly rounded


# ================================================================================ isotonic_regression: exact

def test_paper_example():
    """Example 1/2 of Gokcesu & Gokcesu: four blocks with levels 32, 47, 55, 69 and weights 4, 5, 5, 1."""
    y = [44, 52, 18, 14, 93, 37, 96, 8, 1, 95, 21, 77, 46, 36, 69]
    res = isotonic_regression(y)
    np.testing.assert_array_equal(res.x, np.repeat([32.0, 47.0, 55.0, 69.0], [4, 5, 5, 1]))
    np.testing.assert_array_equal(res.weights, [4.0, 5.0, 5.0, 1.0])
    np.testing.assert_array_equal(res.blocks, [0, 4, 9, 14, 15])
    mirrored = isotonic_regression([-v for v in y], increasing=False)
    np.testing.assert_array_equal(mirrored.x, -res.x)
    np.testing.assert_array_equal(mirrored.blocks, res.blocks)
    fit, starts, wts = exact_pava(y)            # the reference agrees with the paper
    assert starts == [0, 4, 9, 14, 15] and wts == [4, 5, 5, 1]


def test_result_is_a_scipy_like_mapping():
    res = isotonic_regression([3.0, 1.0, 2.0])
    assert set(res) == {"x", "weights", "blocks"}
    assert res["x"] is res.x and res.blocks.dtype.kind == "i"
    assert "IsotonicResult" in repr(res)


small_ints = st.integers(-5, 5)


@given(st.lists(small_ints, min_size=0, max_size=60), st.booleans(), st.data())
def test_exact_on_integer_data(y, increasing, data):
    """Integer y and integer weights: sums are exact in float64, so isocal must reproduce the exact solution:
    correctly rounded levels, the exact blocks (maximal runs of equal levels) and exact block weights."""
    w = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=len(y), max_size=len(y))))
    fit, starts, wts = exact_pava(y, w, increasing)
    res = isotonic_regression(y, w, increasing=increasing)
    np.testing.assert_array_equal(res.x, as_floats(fit))
    assert res.blocks.tolist() == starts == runs(fit)
    np.testing.assert_array_equal(res.weights, as_floats(wts))


def test_exact_on_binary_labels():
    """0/1 labels (the calibration case): isocal's blocks and levels equal exact rational PAVA, bit for bit."""
    rng = np.random.default_rng(20240501)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        p = np.sort(rng.random(n)) if trial % 2 else np.full(n, rng.random())
        y = (rng.random(n) < p).astype(int)
        fit, starts, wts = exact_pava(list(y))
        res = isotonic_regression(y.astype(float))
        assert res.blocks.tolist() == starts
        np.testing.assert_array_equal(res.x, as_floats(fit))
        np.testing.assert_array_equal(res.weights, as_floats(wts))
        dec = isotonic_regression(y, increasing=False)
        fit_d, starts_d, _ = exact_pava(list(y), increasing=False)
        assert dec.blocks.tolist() == starts_d
        np.testing.assert_array_equal(dec.x, as_floats(fit_d))


def test_running_mean_float_pava_can_split_a_block():
    """A running-mean PAVA in floats leaves two adjacent blocks whose exact levels are both 1/2 (it rounds one of
    them to just below 1/2 and stops pooling); isocal's cross-multiplied integer sums get the exact blocks."""
    y = [0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    fit, starts, _ = exact_pava(y)
    rm_fit, rm_starts = running_mean_pava(y)
    assert rm_starts != starts                       # the float implementation is wrong here...
    assert not np.array_equal(rm_fit, as_floats(fit))
    res = isotonic_regression(y)                     # ...and isocal is exact
    assert res.blocks.tolist() == starts
    np.testing.assert_array_equal(res.x, as_floats(fit))


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=8), st.booleans(), st.data())
def test_brute_force_optimal_and_unique_integers(y, increasing, data):
    w = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 4), min_size=len(y), max_size=len(y))))
    best, argbest = brute_force(y, w, increasing)
    assert len(argbest) == 1, "positive weights: the minimiser is unique"
    (exact,) = argbest
    res = isotonic_regression(y, w, increasing=increasing)
    np.testing.assert_array_equal(res.x, as_floats(exact))
    assert res.blocks.tolist() == runs(exact)


@given(st.lists(st.floats(-1e3, 1e3, allow_subnormal=False), min_size=1, max_size=8), st.booleans(), st.data())
def test_brute_force_optimal_floats(y, increasing, data):
    w = data.draw(st.one_of(st.none(), st.lists(st.floats(1e-3, 1e3), min_size=len(y), max_size=len(y))))
    best, argbest = brute_force(y, w, increasing)
    assert len(argbest) == 1
    (exact,) = argbest
    res = isotonic_regression(y, w, increasing=increasing)
    scale = max(1.0, max(abs(v) for v in y))
    np.testing.assert_allclose(res.x, as_floats(exact), rtol=0, atol=1e-12 * scale)
    # the objective at isocal's solution is the minimum up to rounding
    ww = [Fraction(1)] * len(y) if w is None else [Fraction(v) for v in w]
    loss = sum(wi * (Fraction(yi) - Fraction(xi)) ** 2 for wi, yi, xi in zip(ww, y, res.x))
    assert float(loss - best) <= 1e-9 * scale ** 2 * float(sum(ww))


def test_brute_force_rejects_wrong_answers():
    """The brute force is a real check: a slightly different (still monotone) fit is not the minimiser."""
    y = [44, 52, 18, 14, 93]
    best, (exact,) = brute_force(y)
    wrong = list(exact)
    wrong[-1] += Fraction(1, 10**6)
    assert tuple(wrong) != exact
    assert sum((Fraction(a) - b) ** 2 for a, b in zip(y, wrong)) > best


# ================================================================================ isotonic_regression vs scipy

def _compare_with_scipy(y, w, increasing):
    ref = scipy_ir(y, weights=w, increasing=increasing)
    res = isotonic_regression(y, w, increasing=increasing)
    scale = float(np.abs(y).max())
    np.testing.assert_allclose(res.x, ref.x, rtol=0, atol=1e-12 * scale)
    assert res.blocks[0] == 0 and res.blocks[-1] == len(y)
    np.testing.assert_allclose(res.weights.sum(), len(y) if w is None else np.sum(w), rtol=1e-12)
    # compare the block structure where it is unambiguous: adjacent levels clearly apart in both
    gaps_ref = np.abs(np.diff(ref.x[ref.blocks[:-1]]))
    gaps_res = np.abs(np.diff(res.x[res.blocks[:-1]]))
    if np.all(gaps_ref > 1e-9 * scale) and np.all(gaps_res > 1e-9 * scale):
        np.testing.assert_array_equal(res.blocks, ref.blocks)
        np.testing.assert_allclose(res.weights, ref.weights, rtol=1e-12)
        return True
    return False


@st.composite
def scaled_problems(draw, max_n=300):
    n = draw(st.integers(1, max_n))
    tied = draw(st.booleans())
    if tied:
        y = np.array(draw(st.lists(st.integers(-4, 4), min_size=n, max_size=n)), dtype=float)
    else:   # values on a 1e-6 grid of [-1, 1]: the whole array is then scaled by 10**k
        y = np.array(draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n))) / 1e6
    y = y * 10.0 ** draw(st.integers(-12, 12))
    if draw(st.booleans()):
        w = 10.0 ** np.array(draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n)))
    else:
        w = None
    return y, w, draw(st.booleans())


@given(scaled_problems())
def test_matches_scipy_property(problem):
    y, w, increasing = problem
    assume(np.abs(y).max() > 0)
    _compare_with_scipy(y, w, increasing)


def test_matches_scipy_seeded_up_to_2000():
    rng = np.random.default_rng(7)
    compared_blocks = 0
    for trial in range(240):
        n = int(rng.integers(1, 2001))
        kind = trial % 4
        if kind == 0:
            y = rng.normal(size=n).cumsum() * 0.1 + rng.normal(size=n)
        elif kind == 1:
            y = rng.integers(-3, 4, n).astype(float)
        elif kind == 2:
            y = rng.standard_cauchy(n)
        else:
            y = (rng.random(n) < np.linspace(0.1, 0.9, n)).astype(float)
        y = y * 10.0 ** rng.uniform(-12, 12)
        if not np.abs(y).any():
            continue
        w = None if trial % 3 == 0 else 10.0 ** rng.uniform(-3, 3, n)
        compared_blocks += _compare_with_scipy(y, w, bool(trial % 2))
    assert compared_blocks > 100


def test_decreasing_is_exact_mirror():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 300))
        y, w = rng.normal(size=n), 10 ** rng.uniform(-3, 3, n)
        dec = isotonic_regression(y, w, increasing=False)
        inc = isotonic_regression(-y, w)
        np.testing.assert_array_equal(dec.x, -inc.x)
        np.testing.assert_array_equal(dec.blocks, inc.blocks)
        rev = isotonic_regression(y[::-1], w[::-1], increasing=False)
        np.testing.assert_allclose(rev.x[::-1], isotonic_regression(y, w).x, rtol=0, atol=1e-12 * np.abs(y).max())


@given(st.lists(st.floats(-1e6, 1e6).filter(lambda v: v == 0 or abs(v) > 1e-200), min_size=1, max_size=50),
       st.data(), st.integers(-60, 60),
       st.integers(-60, 60))
def test_power_of_two_scaling_is_exact(y, data, ky, kw):
    """Scaling y by 2**ky scales the fit exactly; scaling the weights by 2**kw changes nothing (exact in floats)."""
    w = np.array(data.draw(st.lists(st.floats(1e-3, 1e3), min_size=len(y), max_size=len(y))))
    y = np.array(y)
    base = isotonic_regression(y, w)
    scaled = isotonic_regression(y * 2.0 ** ky, w * 2.0 ** kw)
    np.testing.assert_array_equal(scaled.x, base.x * 2.0 ** ky)
    np.testing.assert_array_equal(scaled.blocks, base.blocks)


@pytest.mark.parametrize("scale", [1e-200, 1e-170, 1e160, 1e200])
def test_weights_scale_invariance_extreme(scale):
    """BUG: the pooling test compares cross products s_prev*w_new >= s_new*w_prev, which underflow to 0 (tiny
    weights) or overflow to inf (huge weights): 0 >= 0 and inf >= inf pool blocks that are in order.
    The fit must not depend on the unit of the weights (scipy gets this right)."""
    y = np.array([1.0, 2.0, 0.5, 3.0])
    w = np.array([1.0, 2.0, 1.0, 1.0]) * scale
    ref = scipy_ir(y, weights=w).x
    np.testing.assert_allclose(ref, [1.0, 1.5, 1.5, 3.0])        # scipy: unit-free
    np.testing.assert_allclose(isotonic_regression(y, w).x, ref, rtol=1e-12)


# ================================================================================ zero weights

@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0]),
                          st.floats(-1e300, 1e300)), min_size=1, max_size=40), st.booleans())
def test_zero_weights(samples, increasing):
    y = np.array([s[0] for s in samples])
    w = np.array([s[1] for s in samples])
    assume(w.any())
    y[w == 0] = [s[2] for s in samples if s[1] == 0]      # a zero-weight sample's value must not matter at all
    pos = np.flatnonzero(w > 0)
    res = isotonic_regression(y, w, increasing=increasing)
    reduced = isotonic_regression(y[pos], w[pos], increasing=increasing)
    np.testing.assert_array_equal(res.x[pos], reduced.x)
    np.testing.assert_allclose(reduced.x, scipy_ir(y[pos], weights=w[pos], increasing=increasing).x,
                               rtol=0, atol=1e-12 * np.abs(y[pos]).max())
    for i in np.flatnonzero(w == 0):
        left = pos[pos < i]
        source = left[-1] if left.size else pos[0]        # level of the block on its left, else the first block
        assert res.x[i] == res.x[source]
    np.testing.assert_allclose(res.weights.sum(), w.sum())
    assert np.all(np.diff(res.x) >= 0) if increasing else np.all(np.diff(res.x) <= 0)


def test_zero_weights_examples():
    res = isotonic_regression([5.0, 1.0, 9.0, 2.0, 7.0], [0.0, 1.0, 0.0, 1.0, 0.0])
    # positive-weight samples 1.0, 2.0 stay apart; the zero-weight ones copy their left neighbour (first: right)
    np.testing.assert_array_equal(res.x, [1.0, 1.0, 1.0, 2.0, 2.0])
    res = isotonic_regression([3.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(res.x, [2.0, 2.0, 2.0])


# ================================================================================ Staircase evaluation

def reference_eval(lo, hi, levels, t, interpolation, oob):
    """The documented semantics, in exact arithmetic: constant on [lo_b, hi_b]; between hi_b and lo_{b+1} either
    the left level (step) or the straight line (linear); outside [lo_0, hi_last]: NaN, clip, or ValueError."""
    out = []
    for v in t:
        if v < lo[0] or v > hi[-1]:
            if oob == "raise":
                raise ValueError
            out.append(np.nan if oob == "nan" else float(levels[0] if v < lo[0] else levels[-1]))
            continue
        b = max(i for i in range(len(lo)) if lo[i] <= v)
        if v <= hi[b] or interpolation == "step":
            out.append(float(levels[b]))
        else:
            frac = (Fraction(v) - Fraction(hi[b])) / (Fraction(lo[b + 1]) - Fraction(hi[b]))
            out.append(float(Fraction(levels[b]) + (Fraction(levels[b + 1]) - Fraction(levels[b])) * frac))
    return np.array(out)


LO, HI, LEVELS = [0.0, 2.0, 5.0], [1.0, 2.0, 7.0], [0.0, 1.0, 3.0]
QUERIES = [-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.5, 5.0, 6.0, 7.0, 8.0]
# hand-computed: step holds the left level in gaps; linear: 1.5 -> 0.5, 3.5 -> 1 + 2 * (1.5 / 3) = 2
HAND = {"step": [0, 0, 0, 0, 0, 1, 1, 3, 3, 3, 3], "linear": [0, 0, 0, 0, 0.5, 1, 2, 3, 3, 3, 3]}


@pytest.mark.parametrize("interpolation", ["step", "linear"])
@pytest.mark.parametrize("oob", ["nan", "clip", "raise"])
def test_staircase_hand_example(interpolation, oob):
    sc = Staircase(LO, HI, LEVELS, interpolation=interpolation, out_of_bounds=oob)
    expected = np.array(HAND[interpolation], dtype=float)
    if oob == "nan":
        expected[[0, -1]] = np.nan
    inside = QUERIES[1:-1]
    if oob == "raise":
        np.testing.assert_array_equal(sc(inside), expected[1:-1])
        for i, bad in [(0, -1.0), (1, 8.0), (1, np.nextafter(7.0, 8.0)), (1, np.nextafter(0.0, -1.0))]:
            with pytest.raises(ValueError, match=rf"`x_new`.*index {i}\b"):
                sc([3.0, bad] if i == 1 else [bad, 3.0])
    else:
        np.testing.assert_array_equal(sc(QUERIES), expected)
    np.testing.assert_array_equal(sc(inside), reference_eval(LO, HI, LEVELS, inside, interpolation, oob))
    # decreasing mirror
    dec = Staircase(LO, HI, [-v for v in LEVELS], increasing=False, interpolation=interpolation,
                    out_of_bounds=oob)
    np.testing.assert_array_equal(dec(inside), -expected[1:-1])
    assert sc.n_steps == 3 and list(sc.thresholds) == LO


def _query_orders(lo, hi, rng):
    "Queries inside [lo[0], hi[-1]] (every block's ends, gaps, random points) in orders that exercise every search path."
    t = np.concatenate([lo, hi, (hi[:-1] + lo[1:]) / 2, rng.uniform(lo[0], hi[-1], 3000)])
    s = np.sort(t)
    strided = np.concatenate([s[::k] for k in (1, 3, 40, 63, 64, 65, 129, 700)])   # in order, jumps around _GALLOP
    return {"sorted": s, "reversed": s[::-1], "random": rng.permutation(t), "strided": strided,
            "zigzag": np.concatenate([s[i::50] for i in range(50)])}


@pytest.mark.parametrize("n_blocks", [1, 2, 70, 3000])
def test_staircase_finds_every_block_in_any_query_order(n_blocks):
    """Block lookup (bisection, reuse of the last block, galloping after short forward moves) against
    `np.searchsorted`; levels 0, 1, 2, ... make the step value the block index itself."""
    rng = np.random.default_rng(n_blocks)
    edges = np.sort(rng.choice(10 * n_blocks + 10, size=2 * n_blocks, replace=False)).astype(float)
    lo, hi = edges[0::2], edges[1::2]
    hi[::3] = lo[::3]                                       # some single-score blocks
    step = Staircase(lo, hi, np.arange(n_blocks, dtype=float))
    linear = Staircase(lo, hi, np.arange(n_blocks, dtype=float) ** 2, interpolation="linear")
    for order, t in _query_orders(lo, hi, rng).items():
        block = np.searchsorted(lo, t, side="right") - 1
        np.testing.assert_array_equal(step(t), block, err_msg=order)
        gap = t > hi[block]
        expected = block.astype(float) ** 2
        nxt = np.minimum(block + 1, n_blocks - 1)
        expected[gap] += (2 * block[gap] + 1) * (t[gap] - hi[block[gap]]) / (lo[nxt[gap]] - hi[block[gap]])
        np.testing.assert_allclose(linear(t), expected, rtol=1e-12, err_msg=order)

@pytest.mark.parametrize("oob", ["nan", "clip", "raise"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_staircase_rejects_nonfinite_queries(oob, bad):
    sc = Staircase(LO, HI, LEVELS, out_of_bounds=oob)
    with pytest.raises(ValueError, match=r"`x_new`.*finite.*index 2\b"):
        sc([0.5, 1.0, bad, 2.0])


def test_staircase_validation():
    with pytest.raises(ValueError):
        Staircase([0.0, 1.0], [1.5, 2.0], [0.0, 1.0])        # overlapping blocks
    with pytest.raises(ValueError):
        Staircase([0.0, 1.0], [0.5, 2.0], [1.0, 0.0])        # decreasing levels, increasing staircase
    with pytest.raises(ValueError):
        Staircase([0.0, 1.0], [0.5], [1.0, 0.0])
    with pytest.raises(ValueError, match="`x_lo`"):
        Staircase([], [], [])
    with pytest.raises(ValueError, match="`interpolation`"):
        Staircase([0.0], [1.0], [0.0], interpolation="cubic")
    sc = Staircase([0.0], [0.0], [2.5], out_of_bounds="clip")   # a single point
    np.testing.assert_array_equal(sc([-1.0, 0.0, 1.0]), [2.5, 2.5, 2.5])


@st.composite
def staircases(draw):
    k = draw(st.integers(1, 6))
    pts = sorted(set(draw(st.lists(st.integers(-50, 50), min_size=2 * k, max_size=2 * k + 6))))
    assume(len(pts) >= 1)
    # choose blocks: each block uses one or two consecutive breakpoints
    lo, hi, i = [], [], 0
    while i < len(pts) and len(lo) < k:
        single = draw(st.booleans()) or i + 1 == len(pts)
        lo.append(pts[i] / 4)
        hi.append(pts[i] / 4 if single else pts[i + 1] / 4)
        i += 1 if single else 2
    levels = sorted(draw(st.lists(st.integers(-20, 20), min_size=len(lo), max_size=len(lo))))
    levels = [v / 8 for v in levels]
    return lo, hi, levels


@given(staircases(), st.sampled_from(["step", "linear"]), st.sampled_from(["nan", "clip", "raise"]),
       st.lists(st.floats(-20, 20), max_size=10))
def test_staircase_matches_reference(sc_def, interpolation, oob, extra):
    lo, hi, levels = sc_def
    sc = Staircase(lo, hi, levels, interpolation=interpolation, out_of_bounds=oob)
    ends = lo + hi
    mids = [(a + b) / 2 for a, b in zip(hi[:-1], lo[1:])]
    t = np.array(ends + mids + extra + [lo[0] - 1, hi[-1] + 1, np.nextafter(hi[-1], np.inf)])
    t = np.random.default_rng(len(t)).permutation(t)         # unsorted queries
    outside = (t < lo[0]) | (t > hi[-1])
    if oob == "raise" and outside.any():
        with pytest.raises(ValueError, match=rf"`x_new`.*index {np.argmax(outside)}\b"):
            sc(t)
        t = t[~outside]
    expected = reference_eval(lo, hi, levels, t, interpolation, oob)
    got = sc(t)
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-14, equal_nan=True)
    np.testing.assert_array_equal(sc(np.array(ends)), reference_eval(lo, hi, levels, ends, interpolation, oob))
    if interpolation == "linear":   # independent float reference: np.interp on hand-built knots
        kx = [v for a, b in zip(lo, hi) for v in ((a,) if a == b else (a, b))]
        ky = [l for a, b, l in zip(lo, hi, levels) for _ in ((a,) if a == b else (a, b))]
        inside = ~((t < lo[0]) | (t > hi[-1]))
        np.testing.assert_allclose(got[inside], np.interp(t[inside], kx, ky), rtol=1e-14, atol=1e-14)


# ================================================================================ IsotonicCalibrator vs sklearn

@st.composite
def calibration_problems(draw, max_n=60):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, 12))
    x = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), dtype=float) * 0.37 - 1.1
    if draw(st.booleans()):
        y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=float)
    else:
        y = np.array(draw(st.lists(st.floats(-5, 5), min_size=n, max_size=n)))
    w = 10.0 ** np.array(draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n))) if draw(st.booleans()) else None
    kw = dict(increasing=draw(st.sampled_from([True, False, "auto"])),
              out_of_bounds=draw(st.sampled_from(["nan", "clip", "raise"])))
    bounds = draw(st.sampled_from([(None, None), (-0.5, None), (None, 0.5), (0.2, 0.7), (-1.0, -1.0)]))
    kw["y_min"], kw["y_max"] = bounds
    return x, y, w, kw


def _compare_with_sklearn(x, y, w, kw, rng):
    sk = IsotonicRegression(**kw).fit(x, y, sample_weight=w)
    cal = IsotonicCalibrator(**kw).fit(x, y, sample_weight=w)
    assert cal.X_min_ == sk.X_min_ and cal.X_max_ == sk.X_max_
    assert cal.increasing_ == sk.increasing_
    scale = max(1.0, np.abs(y).max())
    xr = x if w is None else x[w > 0]                      # zero-weight rows are as if absent (scikit-learn)
    lo, hi = xr.min(), xr.max()
    ux = np.unique(xr)
    t = np.concatenate([xr, ux, (ux[1:] + ux[:-1]) / 2, rng.uniform(lo, hi, 7), [lo, hi]])
    np.testing.assert_allclose(cal.predict(t), sk.predict(t), rtol=0, atol=1e-12 * scale, equal_nan=True)
    np.testing.assert_allclose(cal.transform(t.reshape(-1, 1)), sk.transform(t.reshape(-1, 1)), rtol=0,
                               atol=1e-12 * scale, equal_nan=True)
    if len(ux) > 1:     # sklearn ignores out_of_bounds with a single distinct score, see test_core.py
        outside = np.array([lo - 1.0, hi + 1.0, np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)])
        if kw["out_of_bounds"] == "raise":
            for v in outside:
                with pytest.raises(ValueError):
                    sk.predict([v])
                with pytest.raises(ValueError, match="`T`"):
                    cal.predict([v])
        else:
            np.testing.assert_allclose(cal.predict(outside), sk.predict(outside), rtol=0, atol=1e-12 * scale,
                                       equal_nan=True)
    return sk, cal


@given(calibration_problems())
def test_calibrator_matches_sklearn_property(problem):
    x, y, w, kw = problem
    _compare_with_sklearn(x, y, w, kw, np.random.default_rng(len(x)))


def test_calibrator_matches_sklearn_seeded():
    rng = np.random.default_rng(2024)
    combos = list(itertools.product([True, False, "auto"], ["nan", "clip", "raise"],
                                    [(None, None), (0.1, None), (None, 0.6), (0.25, 0.75)]))
    thresholds_checked = 0
    for trial, (increasing, oob, (ymin, ymax)) in enumerate(combos * 3):
        n = int(rng.integers(2, 500))
        x = np.round(rng.normal(size=n), int(rng.integers(0, 3)))       # unsorted, many ties
        logits = (1.0 if increasing is not False else -1.0) * 2 * x
        y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(float) if trial % 2 else \
            np.tanh(logits) + rng.normal(scale=0.5, size=n)
        w = 10 ** rng.uniform(-3, 3, n) if trial % 3 else None
        kw = dict(increasing=increasing, out_of_bounds=oob, y_min=ymin, y_max=ymax)
        sk, cal = _compare_with_sklearn(x, y, w, kw, rng)
        if trial % 2 == 0 and ymin is None and ymax is None:            # continuous y: unambiguous blocks
            np.testing.assert_array_equal(cal.X_thresholds_, sk.X_thresholds_)
            np.testing.assert_allclose(cal.y_thresholds_, sk.y_thresholds_, rtol=0, atol=1e-12 * np.abs(y).max())
            thresholds_checked += 1
    assert thresholds_checked >= 6


def test_calibrator_column_input_and_fit_transform():
    rng = np.random.default_rng(5)
    x = rng.normal(size=50)
    y = (rng.random(50) < 1 / (1 + np.exp(-x))).astype(float)
    a = IsotonicCalibrator().fit(x, y)
    b = IsotonicCalibrator().fit(x.reshape(-1, 1), y)
    np.testing.assert_array_equal(a.predict(x), b.predict(x.reshape(-1, 1)))
    np.testing.assert_array_equal(IsotonicCalibrator().fit_transform(x, y), a.predict(x))
    np.testing.assert_array_equal(IsotonicCalibrator().fit(x, y, np.ones(50)).predict(x), a.predict(x))
    np.testing.assert_allclose(a.predict(x), IsotonicRegression().fit(x, y).predict(x), rtol=0, atol=1e-15)


@pytest.mark.parametrize("ties", ["primary", "tertiary"])
def test_calibrator_other_tie_treatments_use_fit_staircase(ties):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 6, 40).astype(float)
    y = rng.integers(0, 2, 40).astype(float)      # this seed does not trigger the ties="primary" rounding bug
    cal = IsotonicCalibrator(ties=ties, interpolation="step", out_of_bounds="clip").fit(x, y)
    st_ = fit_staircase(x, y, ties=ties, interpolation="step", out_of_bounds="clip")
    t = np.linspace(-1, 7, 33)
    np.testing.assert_array_equal(cal.predict(t), st_(t))


# ================================================================================ scikit-learn estimator checks

def _check_name(result):
    name = result["check_name"]
    return name if isinstance(name, str) else getattr(name, "func", name).__name__


def _check_results(estimator):
    from sklearn.utils.estimator_checks import check_estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_skip=None, on_fail=None)
    return {_check_name(r): r["status"] for r in results}, results


def test_sklearn_check_estimator():
    """What check_estimator itself does with a one_d_array-only estimator: it runs check_estimator_cloneable and
    skips the rest with one SkipTestWarning (exactly as for sklearn's own IsotonicRegression)."""
    from sklearn.utils.estimator_checks import check_estimator
    with pytest.warns(SkipTestWarning, match="Can't test estimator IsotonicCalibrator"):
        results = check_estimator(IsotonicCalibrator(), on_fail=None)
    status = {_check_name(r): r["status"] for r in results}
    assert status == {"check_estimator_cloneable": "passed"}
    reference, _ = _check_results(IsotonicRegression())
    assert set(reference) == set(status)


APPLICABLE_CHECKS = [
    "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types", "check_estimator_repr",
    "check_no_attributes_set_in_init", "check_fit_score_takes_y", "check_estimators_overwrite_params",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order", "check_positive_only_tag_during_fit",
    "check_estimators_dtypes", "check_sample_weights_pandas_series", "check_sample_weights_not_an_array",
    "check_sample_weights_list", "check_all_zero_sample_weights_error", "check_pipeline_consistency",
    "check_estimators_pickle", "check_regressor_data_not_an_array", "check_estimators_partial_fit_n_features",
    "check_supervised_y_no_nan", "check_regressors_int", "check_non_transformer_estimators_n_iter",
    "check_transformer_preserve_dtypes", "check_transformers_unfitted", "check_transformer_n_iter",
    "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params",
    "check_fit_idempotent", "check_fit_check_is_fitted",
]


class _ForcedTwoD(IsotonicCalibrator):
    """IsotonicCalibrator tagged two_d_array=True so that check_estimator does not skip everything."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        return tags


def test_sklearn_checks_forced_2d():
    status, results = _check_results(_ForcedTwoD())
    failed = {name: s for name, s in status.items() if name in APPLICABLE_CHECKS and s != "passed"}
    details = [repr(r["exception"])[:300] for r in results
               if _check_name(r) in failed]
    assert not failed, details
    assert set(APPLICABLE_CHECKS) <= set(status)


def test_estimator_contract_by_hand():
    """The estimator checks that apply to a one-feature estimator, on 1-D input."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    y = (rng.random(40) < 1 / (1 + np.exp(-2 * x))).astype(float)
    t = np.linspace(-3, 3, 25)
    params = dict(y_min=0.05, y_max=0.95, increasing="auto", out_of_bounds="clip", ties="tertiary",
                  interpolation="step", loss="squared")
    est = IsotonicCalibrator(**params)
    # __init__ stores the parameters and nothing else
    assert vars(est) == params
    assert est.get_params() == params
    # clone / set_params / get_params round trip
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    assert twin.set_params(ties="secondary") is twin and twin.get_params()["ties"] == "secondary"
    assert est.get_params()["ties"] == "tertiary"
    assert IsotonicCalibrator().set_params(**params).get_params() == params
    # not fitted
    for method in (est.predict, est.transform):
        with pytest.raises(NotFittedError):
            method(t)
    # fit returns self and does not change the parameters
    assert est.fit(x, y) is est
    assert est.get_params() == params
    assert est.n_features_in_ == 1
    fitted_attrs = {k for k in vars(est) if k not in params}
    assert fitted_attrs and all(k.endswith("_") for k in fitted_attrs)
    for attr in ("X_min_", "X_max_", "X_thresholds_", "y_thresholds_", "increasing_", "staircase_"):
        assert hasattr(est, attr)
    pred = est.predict(t)
    # fitting twice is idempotent; refitting on other data replaces the fit
    np.testing.assert_array_equal(est.fit(x, y).predict(t), pred)
    est.fit(x[:20], y[:20])
    np.testing.assert_array_equal(est.fit(x, y).predict(t), pred)
    # pickling round trip
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(restored.predict(t), pred)
    assert restored.get_params() == params
    # a clone of a fitted estimator is unfitted
    with pytest.raises(NotFittedError):
        clone(est).predict(t)
    # sample order does not matter; a subset of queries gives the subset of predictions
    perm = rng.permutation(40)
    np.testing.assert_allclose(IsotonicCalibrator(**params).fit(x[perm], y[perm]).predict(t), pred, atol=1e-15)
    np.testing.assert_array_equal(est.predict(t[5:9]), pred[5:9])
    np.testing.assert_array_equal(est.get_feature_names_out(), ["isotoniccalibrator0"])
    # list input, int input and float32 input are accepted
    np.testing.assert_array_equal(IsotonicCalibrator(**params).fit(list(x), list(y)).predict(t), pred)
    np.testing.assert_allclose(IsotonicCalibrator().fit(np.arange(10), np.arange(10) % 3).predict([4.5]),
                               IsotonicRegression().fit(np.arange(10), np.arange(10) % 3).predict([4.5]))


# ================================================================================ the radix sort of the binary fast path

SPECIAL = [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 2.2250738585072014e-308, np.finfo(float).max,
           -np.finfo(float).max, 1.0, -1.0, 0.5, -0.5]


@given(st.lists(st.one_of(st.floats(allow_nan=False), st.sampled_from(SPECIAL)), max_size=300))
def test_radix_sort_equals_numpy_sort(values):
    from isocal.core import _radix_sort
    a = np.array(values, dtype=float)
    expected = np.sort(a)
    _radix_sort(a, np.empty(len(a)))
    np.testing.assert_array_equal(a, expected)   # -0.0 == 0.0, so tie order between them does not matter


@pytest.mark.parametrize("n_distinct", [1, 2, 7, 1000, None])
def test_binary_fast_path_equals_argsort_path(n_distinct):
    """The radix/merge path for 0/1 labels without weights gives the same fit as the general argsort path (forced
    by passing unit weights) and as scikit-learn."""
    rng = np.random.default_rng(n_distinct or 0)
    n = 5000
    x = rng.normal(size=n) * 1e3 if n_distinct is None else rng.integers(0, n_distinct, n) - n_distinct / 2
    y = (rng.random(n) < 1 / (1 + np.exp(-x / max(1, np.std(x))))).astype(float)
    fast = IsotonicCalibrator(out_of_bounds="clip").fit(x, y)
    general = IsotonicCalibrator(out_of_bounds="clip").fit(x, y, np.ones(n))
    t = np.linspace(x.min() - 1, x.max() + 1, 999)
    np.testing.assert_array_equal(fast.predict(t), general.predict(t))
    np.testing.assert_array_equal(fast.X_thresholds_, general.X_thresholds_)
    if n_distinct != 1:
        np.testing.assert_allclose(fast.predict(t), IsotonicRegression(out_of_bounds="clip").fit(x, y).predict(t),
                                   rtol=0, atol=1e-12)


# ================================================================================ issue 12: the scikit-learn contract

def test_calibrator_is_an_ordinary_class_in_isocal_isotonic():
    """The estimator is a class statement in `isocal.isotonic` (inspect can read its source, its methods are its
    own), and `isocal.IsotonicCalibrator` is the very same class."""
    import importlib
    import inspect
    isotonic = importlib.import_module("isocal.isotonic")
    cls = isotonic.IsotonicCalibrator
    assert cls is IsotonicCalibrator is importlib.import_module("isocal").IsotonicCalibrator
    assert cls.__module__ == "isocal.isotonic"
    assert inspect.getsource(cls).startswith("class IsotonicCalibrator(")
    for method in ("fit", "predict", "transform", "get_feature_names_out", "__sklearn_tags__"):
        assert method in vars(cls), method


def test_import_pava_stays_light_and_does_not_reexport():
    """`import isocal.pava` imports neither scikit-learn nor isocal.distributed/isotonic/convex/fit, and does not
    re-export the estimator: its home is `isocal.isotonic` (and `isocal` the public path)."""
    import subprocess
    import sys
    code = ("import sys, isocal.pava as p; heavy = [m for m in ('sklearn', 'isocal.isotonic', 'isocal.distributed', "
            "'isocal.convex', 'isocal.fit') if m in sys.modules]; assert not heavy, heavy; "
            "assert not hasattr(p, 'IsotonicCalibrator') and 'IsotonicCalibrator' not in p.__all__; "
            "from isocal.pava import *; assert 'IsotonicCalibrator' not in dir(); print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


SET_OUTPUT = ["default", "pandas"] + (["polars"] if __import__("importlib.util").util.find_spec("polars") else [])


@pytest.mark.parametrize("container", SET_OUTPUT)
def test_set_output_wraps_transform_like_fit_transform(container):
    """scikit-learn wraps `transform` and `fit_transform` of classes that define them: both must honour
    set_output, in a ColumnTransformer too (this failed while the class was assembled at run time)."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    rng = np.random.default_rng(1)
    x = rng.normal(size=60)
    y = (rng.random(60) < 1 / (1 + np.exp(-x))).astype(float)
    cal = IsotonicCalibrator(out_of_bounds="clip").set_output(transform=container)
    a = cal.fit_transform(x.reshape(-1, 1), y)
    b = cal.transform(x.reshape(-1, 1))
    assert type(a) is type(b)
    np.testing.assert_array_equal(np.asarray(a).ravel(), np.asarray(b).ravel())
    np.testing.assert_allclose(np.asarray(b).ravel(), IsotonicRegression(out_of_bounds="clip").fit(x, y).predict(x),
                               rtol=0, atol=1e-12)
    if container == "default":
        return                # a ColumnTransformer needs 2-D blocks, which only set_output's containers give
    frame = pd.DataFrame({"score": x, "other": -x})
    ct = ColumnTransformer([("iso", IsotonicCalibrator(out_of_bounds="clip"), ["score"])]).set_output(
        transform=container)
    out = ct.fit(frame, y).transform(frame)
    np.testing.assert_array_equal(np.asarray(out).ravel(), np.asarray(b).ravel())
    if container == "pandas":
        assert isinstance(out, pd.DataFrame) and list(out.columns) == ["iso__isotoniccalibrator0"]


def test_zero_sample_weight_is_as_if_absent_example():
    """Issue 12: scikit-learn drops zero-weight rows; they must not create knots."""
    x, y, w, t = [0, 1, 2], [0, 5, 1], [1, 0, 1], [0.5, 1, 1.5]
    sk = IsotonicRegression().fit(x, y, sample_weight=w).predict(t)
    np.testing.assert_allclose(sk, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(IsotonicCalibrator().fit(x, y, sample_weight=w).predict(t), sk, rtol=0, atol=1e-15)


def test_zero_sample_weight_inside_calibrated_classifier_cv(monkeypatch):
    """CalibratedClassifierCV(method="isotonic") with 20% zero weights gives the same probabilities with
    IsotonicCalibrator in place of IsotonicRegression."""
    import sklearn.calibration as calibration
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import make_classification
    from sklearn.naive_bayes import GaussianNB
    X, y = make_classification(n_samples=600, n_features=6, random_state=0)
    w = np.where(np.random.default_rng(0).random(600) < 0.2, 0.0, 1.0)
    theirs = CalibratedClassifierCV(GaussianNB(), method="isotonic", cv=3).fit(X, y, sample_weight=w)
    monkeypatch.setattr(calibration, "IsotonicRegression", IsotonicCalibrator)
    ours = CalibratedClassifierCV(GaussianNB(), method="isotonic", cv=3).fit(X, y, sample_weight=w)
    assert isinstance(ours.calibrated_classifiers_[0].calibrators[0], IsotonicCalibrator)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=0, atol=1e-12)


@st.composite
def zero_weight_problems(draw):
    x, y, w, kw = draw(calibration_problems())
    w = np.ones(len(x)) if w is None else w
    zero = np.array(draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x))))
    assume(not zero.all())
    return x, y, np.where(zero, 0.0, w), kw


@given(zero_weight_problems(), st.sampled_from(["secondary", "primary", "tertiary"]))
def test_zero_sample_weight_rows_are_absent_property(problem, ties):
    """For every option: fitting with zero-weight rows is fitting without them (the same knots, range and
    predictions); with the default ties this is also scikit-learn's fit (the direction included)."""
    x, y, w, kw = problem
    keep = w > 0
    cal = IsotonicCalibrator(ties=ties, **kw).fit(x, y, sample_weight=w)
    # increasing="auto" is decided on all rows (an unweighted Spearman correlation), as scikit-learn does
    ref = IsotonicCalibrator(ties=ties, **{**kw, "increasing": cal.increasing_}).fit(x[keep], y[keep], w[keep])
    np.testing.assert_array_equal(cal.X_thresholds_, ref.X_thresholds_)
    np.testing.assert_array_equal(cal.y_thresholds_, ref.y_thresholds_)
    assert (cal.X_min_, cal.X_max_, cal.increasing_) == (ref.X_min_, ref.X_max_, ref.increasing_)
    t = np.unique(np.concatenate([x, (x[:-1] + x[1:]) / 2]))
    t = t[(t >= cal.X_min_) & (t <= cal.X_max_)] if kw["out_of_bounds"] == "raise" else t
    np.testing.assert_array_equal(cal.predict(t), ref.predict(t))
    if ties == "secondary":
        _compare_with_sklearn(x, y, w, kw, np.random.default_rng(len(x)))


@pytest.mark.parametrize("oob", ["nan", "clip", "raise"])
def test_single_distinct_score_predicts_its_level_everywhere(oob):
    """Issue 12: with one distinct training score scikit-learn's calibrator is the constant, whatever
    `out_of_bounds` says; isocal follows."""
    t = [0.0, 1.0, 2.0]
    sk = IsotonicRegression(out_of_bounds=oob).fit([1, 1], [3, 5]).predict(t)
    np.testing.assert_array_equal(sk, [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(IsotonicCalibrator(out_of_bounds=oob).fit([1, 1], [3, 5]).predict(t), sk)


@given(st.floats(-1e6, 1e6), st.lists(st.floats(-5, 5), min_size=1, max_size=20), st.data())
def test_single_distinct_score_property(score, y, data):
    """Any data with one distinct score (any weights, bounds, ties, interpolation): the calibrator is the constant
    scikit-learn gives, at any query."""
    n = len(y)
    w = data.draw(st.one_of(st.none(), st.lists(st.floats(0.01, 100), min_size=n, max_size=n)))
    kw = dict(out_of_bounds=data.draw(st.sampled_from(["nan", "clip", "raise"])),
              y_min=data.draw(st.sampled_from([None, -1.0])), y_max=data.draw(st.sampled_from([None, 1.0])))
    x = np.full(n, score)
    t = np.array([score - 1e3, score, score + 1e3, np.nextafter(score, np.inf)])
    sk = IsotonicRegression(**kw).fit(x, y, sample_weight=w).predict(t)
    for ties in ("secondary", "primary", "tertiary"):
        for interpolation in ("linear", "step"):
            cal = IsotonicCalibrator(ties=ties, interpolation=interpolation, **kw).fit(x, y, sample_weight=w)
            np.testing.assert_allclose(cal.predict(t), sk, rtol=1e-14, atol=1e-14)


def test_clipping_drops_redundant_knots_example():
    sk = IsotonicRegression(y_max=2).fit([0, 1, 2, 3, 4], [0, 3, 4, 5, 6])
    cal = IsotonicCalibrator(y_max=2).fit([0, 1, 2, 3, 4], [0, 3, 4, 5, 6])
    np.testing.assert_array_equal(sk.X_thresholds_, [0, 1, 4])
    np.testing.assert_array_equal(cal.X_thresholds_, sk.X_thresholds_)
    np.testing.assert_array_equal(cal.y_thresholds_, sk.y_thresholds_)


@given(calibration_problems(max_n=40))
def test_clipping_knots_match_sklearn_property(problem):
    """With y_min/y_max the knots are scikit-learn's: runs of levels made equal by clipping keep only their ends.
    Continuous targets make the blocks unambiguous, so the knots are compared exactly."""
    x, y, w, kw = problem
    assume(len(np.unique(y)) == len(y))                      # continuous targets: no exact ties between blocks
    sk, cal = _compare_with_sklearn(x, y, w, kw, np.random.default_rng(0))
    np.testing.assert_array_equal(cal.X_thresholds_, sk.X_thresholds_)
    np.testing.assert_allclose(cal.y_thresholds_, sk.y_thresholds_, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(cal.X_thresholds_) > 0)


@pytest.mark.parametrize("sparse", ["csr_matrix", "csr_array", "coo_matrix"])
def test_sparse_input_is_refused_clearly(sparse):
    import scipy.sparse as sp
    X = getattr(sp, sparse)(np.arange(4.0).reshape(-1, 1))
    with pytest.raises(TypeError, match="`X`.*sparse"):
        IsotonicCalibrator().fit(X, [0.0, 1.0, 0.0, 1.0])
    cal = IsotonicCalibrator().fit(np.arange(4.0), [0.0, 1.0, 0.0, 1.0])
    with pytest.raises(TypeError, match="`T`.*sparse"):
        cal.predict(X)
    with pytest.raises(TypeError, match="`y`.*sparse"):
        isotonic_regression(getattr(sp, sparse)(np.arange(4.0).reshape(1, -1)))


# ================================================================================ issue 12: IsotonicResult

def test_isotonic_result_behaves_like_optimize_result():
    import copy
    from scipy.optimize import OptimizeResult
    res = isotonic_regression([3.0, 1.0, 2.0])
    peer = OptimizeResult(x=res.x)
    for obj in (peer, res):
        assert not hasattr(obj, "success")
        assert getattr(obj, "x0", None) is None
        with pytest.raises(AttributeError):
            obj.nothing
    twin = copy.deepcopy(res)
    assert type(twin) is type(res) and twin.keys() == res.keys() and twin.x is not res.x
    np.testing.assert_array_equal(twin.x, res.x)
    again = pickle.loads(pickle.dumps(res))
    assert type(again) is type(res)
    np.testing.assert_array_equal(again.blocks, res.blocks)


@given(st.lists(st.floats(-10, 10), max_size=20), st.text(min_size=1, max_size=8))
def test_isotonic_result_attribute_protocol_property(y, name):
    """Any name: attribute access agrees with the mapping (AttributeError, never KeyError, when missing);
    setting and deleting attributes work like SciPy's OptimizeResult; copies are equal and independent."""
    import copy
    res = isotonic_regression(y)
    if name in res:
        assert getattr(res, name) is res[name]
    else:
        assert getattr(res, name, "missing") == "missing" and not hasattr(res, name)
    res.extra = 1
    assert res["extra"] == 1
    del res.extra
    assert "extra" not in res
    with pytest.raises(AttributeError):
        del res.extra
    for twin in (copy.copy(res), copy.deepcopy(res), pickle.loads(pickle.dumps(res))):
        assert type(twin) is type(res) and sorted(twin) == sorted(res)
        for k in res:
            np.testing.assert_array_equal(twin[k], res[k])


# ================================================================================ issue 12: extreme magnitudes

def test_extreme_weights_do_not_overflow_example():
    np.testing.assert_array_equal(isotonic_regression([1.0, 0.0], [1e308, 1e308]).x, [0.5, 0.5])
    np.testing.assert_array_equal(isotonic_regression([1e308, 1e308, -1e308]).x, [1e308 / 3] * 3)
    np.testing.assert_array_equal(isotonic_regression([1.7e308, 1.7e308]).x, [1.7e308] * 2)


def test_linear_interpolation_does_not_overflow_example():
    sc = Staircase([0.0, 1.0], [0.0, 1.0], [-1e308, 1e308], interpolation="linear")
    np.testing.assert_array_equal(sc([0.0, 0.5, 0.25, 1.0]), [-1e308, 0.0, -5e307, 1e308])
    dec = Staircase([0.0, 1.0], [0.0, 1.0], [1.7e308, -1.7e308], increasing=False, interpolation="linear")
    assert np.all(np.isfinite(dec(np.linspace(0, 1, 101))))


@st.composite
def magnitude_problems(draw):
    """Integer mantissas times one power of two for y and one for w, anywhere in the float range (including
    subnormals): every sum is exact once scaled, so the exact rational answer is the reference."""
    n = draw(st.integers(1, 25))
    ey = draw(st.sampled_from([-1074, -1060, -1022, -1000, -600, 0, 600, 990, 1000, 1010, 1015]))
    y = [k * 2.0 ** ey for k in draw(st.lists(st.integers(-8, 8), min_size=n, max_size=n))]
    if draw(st.booleans()):
        return y, None
    ew = draw(st.sampled_from([-1074, -1050, -1000, -600, -60, 0, 60, 600, 1000, 1015]))
    w = [j * 2.0 ** ew for j in draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))]
    return y, w


def _ulps(a, b):
    return np.abs(a - b) / np.spacing(np.maximum(np.abs(a), np.abs(b)))


@given(magnitude_problems(), st.booleans())
def test_huge_and_tiny_magnitudes_match_exact_pava(problem, increasing):
    """isotonic_regression over the whole float range against exact rational PAVA: levels within 2 ulps (a
    comparison of two levels within rounding may pool them), the total weight exact, nothing non-finite."""
    y, w = problem
    fit, starts, wts = exact_pava(y, w, increasing)
    res = isotonic_regression(y, w, increasing=increasing)
    assert np.all(np.isfinite(res.x))
    assert np.all(_ulps(res.x, as_floats(fit)) <= 2), (res.x, as_floats(fit))
    # a block's total weight is returned as it is: infinite only when it exceeds the float range
    expected_w = np.array([float(v) if v < 2 ** 1024 else np.inf for v in wts])
    assert res.weights.tolist() == expected_w.tolist()


@given(magnitude_problems())
def test_huge_and_tiny_magnitudes_calibrator_matches_exact(problem):
    """The same through the staircase fits (tie sums of distinct scores, the binary and weighted sort paths)."""
    y, w = problem
    x = np.arange(len(y)) // 2                                  # ties: pairs of samples share a score
    ux = np.unique(x)
    sums = [sum(Fraction(y[i]) * Fraction(1 if w is None else w[i]) for i in np.flatnonzero(x == u)) for u in ux]
    wsum = [sum(Fraction(1 if w is None else w[i]) for i in np.flatnonzero(x == u)) for u in ux]
    fit, _, _ = exact_pava([s / v for s, v in zip(sums, wsum)], wsum)
    expected = as_floats(fit)
    got = IsotonicCalibrator(out_of_bounds="clip").fit(x, y, sample_weight=w).predict(ux)
    assert np.all(_ulps(got, expected) <= 2), (got, expected)
    st_ = fit_staircase(x, y, w)
    assert np.all(_ulps(st_(ux), expected) <= 2)


@given(st.integers(1, 3), st.integers(1, 3), st.lists(st.integers(-3, 3), max_size=4),
       st.sampled_from([-1074, -1000, 0, 1000, 1021, 1022, 1022, 1022]), st.data())
@example(3, 2, [], 1022, None)
def test_linear_interpolation_extreme_levels_matches_exact(neg, pos, more, e, data):
    """Linear interpolation between levels anywhere in the float range (some below and some above 0, so that
    differences of levels may exceed the largest float), against exact rational evaluation."""
    levels = sorted(k * 2.0 ** e for k in [-neg, pos] + more)
    assume(np.all(np.isfinite(levels)))
    lo = np.arange(len(levels), dtype=float) * 2
    sc = Staircase(lo, lo, levels, interpolation="linear")
    drawn = [0.5, 1.0, 1.5] if data is None else data.draw(st.lists(st.floats(0, lo[-1]), min_size=1, max_size=10))
    t = np.array(drawn)
    got = sc(t)
    expected = reference_eval(list(lo), list(lo), levels, t, "linear", "clip")
    assert np.all(np.isfinite(got))
    # a + (b - a) * frac rounds at the scale of the levels, not of the result
    assert np.all(np.abs(got - expected) <= 4 * np.spacing(np.abs(levels).max())), (t, got, expected)


@pytest.mark.parametrize("container", ["array", "dataframe"])
def test_zero_sample_weight_rows_are_absent_with_dask_inputs(container):
    """The Dask route drops zero-weight rows too: the same knots and range as in memory (and as scikit-learn)."""
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd
    rng = np.random.default_rng(0)
    n = 300
    x = rng.integers(0, 40, n) / 4.0
    y = (rng.random(n) < x / 10).astype(float)
    w = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0.5, 2.0, n))
    w[x == x.max()] = 0.0                                   # the largest score only in zero-weight rows
    ref = IsotonicRegression(y_min=0.1).fit(x, y, sample_weight=w)
    if container == "array":
        args = (da.from_array(x.reshape(-1, 1), chunks=(50, 1)), da.from_array(y, chunks=50),
                da.from_array(w, chunks=50))
    else:
        frame = dd.from_pandas(pd.DataFrame({"s": x, "y": y, "w": w}), npartitions=4)
        args = (frame[["s"]], frame["y"], frame["w"])
    got = IsotonicCalibrator(y_min=0.1).fit(*args)
    assert (got.X_min_, got.X_max_) == (ref.X_min_, ref.X_max_) and got.X_max_ < x.max()
    np.testing.assert_array_equal(got.X_thresholds_, ref.X_thresholds_)
    np.testing.assert_allclose(got.y_thresholds_, ref.y_thresholds_, rtol=1e-12)


def test_primary_ties_with_huge_values_and_weights():
    """Tie runs' levels (weighted means of fitted values) at the edge of the float range, by hand: x = 0 holds
    targets -1e308 and 1e308 with equal weights, whose mean is 0; x = 1 holds 1.7e308."""
    st_ = fit_staircase([0.0, 0.0, 1.0], [1e308, -1e308, 1.7e308], [1e308, 1e308, 1e308], ties="primary")
    np.testing.assert_array_equal(st_.levels, [0.0, 1.7e308])
    np.testing.assert_array_equal(st_.fitted, [1e308, -1e308, 1.7e308])
    st_ = fit_staircase([0.0, 0.0, 1.0], [1.7e308, 1.6e308, 1.7e308], ties="primary")
    np.testing.assert_array_equal(st_.levels, [float((Fraction(1.7e308) + Fraction(1.6e308)) / 2), 1.7e308])
    tert = fit_staircase([0.0, 0.0, 1.0], [1.7e308, 1.6e308, 1.7e308], ties="tertiary")
    np.testing.assert_array_equal(tert.fitted, [1.7e308, 1.6e308, 1.7e308])


# ================================================================================ issue 30: float32, tampered files

@pytest.mark.parametrize("x_dtype, expect", [(np.float32, np.float32), (np.float64, np.float64), (np.int32, np.float64),
                                             (np.float16, np.float64)])
def test_calibrator_keeps_float32_like_scikit_learn(x_dtype, expect):
    rng = np.random.default_rng(0)
    x, y = (rng.random(50) * 100).astype(x_dtype), rng.random(50)
    ours, theirs = IsotonicCalibrator().fit(x, y), IsotonicRegression().fit(x, y)
    for a, b in ((ours.predict(x), theirs.predict(x)), (ours.transform(x), theirs.transform(x)),
                 (ours.X_thresholds_, theirs.X_thresholds_), (ours.y_thresholds_, theirs.y_thresholds_)):
        assert a.dtype == b.dtype == expect
    # one rounding at the end: the float64 prediction rounded to float32
    np.testing.assert_array_equal(ours.predict(x), IsotonicCalibrator().fit(x.astype(float), y).predict(x).astype(expect))


@pytest.mark.parametrize("key, value", [("X_max_", "inf"), ("X_min_", "-inf"), ("X_max_", 1e300), ("X_min_", 0.0)])
def test_from_dict_refuses_a_training_range_that_is_not_the_staircase(key, value):
    from isocal.portable import PortableError
    d = IsotonicCalibrator().fit([0.1, 0.4, 0.35, 0.8], [0.0, 1.0, 0.0, 1.0]).to_dict()
    d["state"][key] = value
    with pytest.raises(PortableError, match=rf"`state.{key}` must equal the staircase's"):
        IsotonicCalibrator.from_dict(d)


# ================================================================================ issue 30: sums beyond the float range

from hypothesis import settings as hypothesis_settings  # noqa: E402

WIDE_WEIGHTS = [7.0, 1e300, 1e-300, 1.7e308, 3e-250, 1e308, 0.5]


@st.composite
def wide_range_problems(draw):
    """Weights from 1e-300 to 1.7e308 and targets up to ±4e306 (where w·y overflows), or tiny targets with weights
    from 1e-244 to 1e261 (where w·y underflows): data for which no power-of-two rescaling keeps the sums in range."""
    n = draw(st.integers(2, 8))
    if draw(st.booleans()):
        w = draw(st.lists(st.sampled_from(WIDE_WEIGHTS), min_size=n, max_size=n))
        y = draw(st.lists(st.floats(-4.2e306, 4.2e306).filter(lambda v: abs(v) > 1e290 or v == 0), min_size=n, max_size=n))
    else:
        w = draw(st.lists(st.sampled_from([1e-244, 1e261, 1e-81, 3.0, 1e200]), min_size=n, max_size=n))
        y = [10.0 ** draw(st.integers(-200, -100)) * draw(st.floats(1, 9)) for _ in range(n)]
    # distinct targets: blocks of exactly equal means are a matter of rounding in any float PAVA (SciPy's too)
    assume(len(set(y)) == n)
    return np.array(y), np.array(w), draw(st.booleans())


def _exact_or_refused(y, w, increasing):
    try:
        res = isotonic_regression(y, w, increasing=increasing)
    except ValueError as err:                       # allowed: a clear error naming the weights
        assert "`weights` span too wide a range" in str(err)
        return None
    ref, starts, _ = exact_pava(list(y), list(w), increasing)
    np.testing.assert_array_equal(res.blocks, starts)
    np.testing.assert_allclose(res.x, as_floats(ref), rtol=1e-13, atol=0)
    return res


@hypothesis_settings(max_examples=300, deadline=None)
@given(wide_range_problems())
def test_pava_with_sums_beyond_the_float_range_is_exact(problem):
    y, w, increasing = problem
    _exact_or_refused(y, w, increasing)


@pytest.mark.parametrize("y, w, increasing, expect", [
    ([1.0806551870439025e+303, -4.146227836353979e+306, -3.884600653489523e+306, 1.2949766170397408e+303,
      1.3035574693908437e+301, -1.0071645991246597e+302], [7, 1e300, 1e-300, 7, 7, 7], True, [0, 2, 3, 6]),
    ([1e-149, 1e-184, 1e-106], [1e-244, 1e261, 1e-81], False, [0, 1, 3]),
])
def test_pava_issue_30_examples(y, w, increasing, expect):
    """The issue's two examples: the third point kept at -3.8846e306 (it used to be pooled into the first block, its
    weight rounded to 0 by the rescaling), and [1e-149, 1e-184, 1e-184] (it used to be [1e-184] * 3)."""
    res = _exact_or_refused(np.array(y), np.array(w, float), increasing)
    np.testing.assert_array_equal(res.blocks, expect)
    # the decreasing mirror, with the small weight on the last point
    res_down = isotonic_regression(-np.array(y)[::-1], np.array(w, float)[::-1], increasing=increasing)
    np.testing.assert_array_equal(res_down.x, -res.x[::-1])


def test_fit_staircase_and_calibrator_pool_means_too():
    y = np.array([1.0806551870439025e+303, -4.146227836353979e+306, -3.884600653489523e+306, 1.2949766170397408e+303,
                  1.3035574693908437e+301, -1.0071645991246597e+302])
    w = np.array([7, 1e300, 1e-300, 7, 7, 7])
    expect = isotonic_regression(y, w).x
    from isocal import fit_staircase
    for ties in ("primary", "secondary", "tertiary"):
        np.testing.assert_array_equal(fit_staircase(np.arange(6.0), y, w, ties=ties).fitted, expect)
    np.testing.assert_array_equal(IsotonicCalibrator(interpolation="step").fit(np.arange(6.0), y, w).predict(np.arange(6.0)),
                                  expect)
    # tied scores: the tie's mean first, then pooling of means
    x = np.array([0.0, 1.0, 1.0, 2.0])
    st_ = fit_staircase(x, [1e306, -4e306, -3e306, 5e305], [7, 1e300, 1e-300, 7])
    assert st_.fitted[1] == st_.fitted[2] and np.isfinite(st_.fitted).all()


def test_weights_that_cannot_be_pooled_exactly_are_refused_by_name():
    with pytest.raises(ValueError, match=r"`weights` span too wide a range"):
        isotonic_regression([2.0, 1.0, 3.0], [5e-324, 1.7e308, 1.7e308])
    # weights that add up within the float range need no scaling: exact
    assert isotonic_regression([1.0, 2.0], [5e-324, 1.7e308]).x.tolist() == [1.0, 2.0]
