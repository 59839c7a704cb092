"""Tests of isocal.core (input validation, the Numba cache fallback) and of the input contract of every public function.

* `as_float_array` and friends: accepted inputs (list/tuple/float32/int/bool/read-only/strided), no copies of clean
  float64 input, clear errors naming the argument (and, for NaN/inf, the first bad index).
* Public functions (`isotonic_regression`, `fit_staircase`, `IsotonicCalibrator.fit/predict`) never modify the
  caller's arrays -- checked bit for bit, including read-only arrays (which Numba would refuse to write to anyway).
* Bad input to the public functions: each error is a ValueError/TypeError whose message names the argument.
* The peers are silently wrong where isocal raises: scipy and scikit-learn behaviour is asserted as observed in the
  installed versions (scipy 1.17, scikit-learn 1.9).
* Numba cache fallback: isocal imported from a read-only directory by a user without a writable HOME must still work
  (numba itself raises "no locator available" in that setup, which the test checks first).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import isocal
from isocal.core import (_first_nonfinite, _scan_weights, as_float_array, check_choice, check_increasing,
                         check_same_length, check_weights)
from isocal.isotonic import IsotonicCalibrator
from isocal.fit import fit_staircase
from isocal.pava import isotonic_regression

ISOCAL_DIR = Path(isocal.__file__).resolve().parent


# ----------------------------------------------------------------------------------------------- as_float_array

VALUES = [3.0, 1.0, 2.0, 2.0, 0.0, 5.0]


def _readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def _strided(a, dtype=np.float64):
    base = np.zeros(2 * len(a), dtype=dtype)
    base[::2] = a
    return base[::2]


INPUT_KINDS = {
    "list": lambda v: list(v),
    "tuple": lambda v: tuple(v),
    "float64": lambda v: np.array(v, dtype=np.float64),
    "float32": lambda v: np.array(v, dtype=np.float32),
    "float16": lambda v: np.array(v, dtype=np.float16),
    "int64": lambda v: np.array(v, dtype=np.int64),
    "uint8": lambda v: np.array(v, dtype=np.uint8),
    "bool": lambda v: np.array(v, dtype=bool),
    "readonly": lambda v: _readonly(np.array(v, dtype=np.float64)),
    "readonly-int": lambda v: _readonly(np.array(v, dtype=np.int32)),
    "strided": lambda v: _strided(v),
    "readonly-strided": lambda v: _readonly_view(_strided(v)),
    "reversed-view": lambda v: np.array(v[::-1], dtype=np.float64)[::-1],
}


def _readonly_view(a):
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("kind", list(INPUT_KINDS))
def test_as_float_array_accepts(kind):
    values = [1, 0, 1, 1, 0] if kind == "bool" else VALUES
    a = INPUT_KINDS[kind](values)
    out = as_float_array(a, "y")
    assert out.dtype == np.float64 and out.ndim == 1 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.asarray(values, dtype=np.float64))
    if isinstance(a, np.ndarray) and not a.flags.writeable and np.shares_memory(out, a):
        assert not out.flags.writeable, "a view of a read-only array must stay read-only"


def test_as_float_array_does_not_copy_clean_input():
    a = np.array(VALUES)
    assert np.shares_memory(as_float_array(a, "y"), a)
    ro = _readonly(VALUES)
    assert np.shares_memory(as_float_array(ro, "y"), ro)


def test_as_float_array_empty():
    assert as_float_array([], "y").shape == (0,)
    with pytest.raises(ValueError, match="`y`.*empty"):
        as_float_array([], "y", allow_empty=False)


@pytest.mark.parametrize("bad_index", [0, 3, 5])
@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_as_float_array_rejects_nonfinite_with_name_and_first_index(bad_index, bad_value):
    a = np.array(VALUES)
    a[bad_index] = bad_value
    if bad_index < 5:
        a[5] = np.nan  # a later bad value must not be the one reported
    with pytest.raises(ValueError, match=rf"`scores`.*index {bad_index}\b"):
        as_float_array(a, "scores")


def test_as_float_array_rejects_nonfinite_float32():
    with pytest.raises(ValueError, match=r"`y`.*index 2\b"):
        as_float_array(np.array([1, 2, np.inf], dtype=np.float32), "y")


@pytest.mark.parametrize("bad", [
    ["a", "b"], np.array(["1.0", "2.0"]), np.array([1.0, "2.0"], dtype=object), [1.0, None], None,
    [1 + 2j, 3.0], np.array([1, 2], dtype=np.complex64), np.array(["2020-01-01"], dtype="datetime64[D]"),
    [b"x"], np.array([1.0, 2j], dtype=object), np.array([1.0, [2.0]], dtype=object),
    np.array([1.0, {}], dtype=object),
], ids=["str-list", "str-array", "object-str", "with-None", "None", "complex-list", "complex64", "datetime",
        "bytes", "object-complex", "object-list", "object-dict"])
def test_as_float_array_type_errors_name_argument(bad):
    with pytest.raises(TypeError, match="`weights`"):
        as_float_array(bad, "weights")


def test_as_float_array_converts_numeric_object_arrays():
    """Issue 12: object arrays of real numbers are converted, as scikit-learn and SciPy do."""
    from decimal import Decimal
    from fractions import Fraction
    a = np.array([1, 2.5, np.float32(0.5), np.int8(-3), True, Fraction(1, 4), Decimal("0.1")], dtype=object)
    np.testing.assert_array_equal(as_float_array(a, "y"), [1.0, 2.5, 0.5, -3.0, 1.0, 0.25, 0.1])
    with pytest.raises(ValueError, match=r"`y`.*index 1\b"):
        as_float_array(np.array([1.0, float("nan")], dtype=object), "y")


@given(hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e6, 1e6)), st.data())
def test_numeric_object_arrays_give_the_float_results(y, data):
    """Every public entry point gives the same result on an object array of numbers (Python floats and ints, NumPy
    scalars) as on the float64 array."""
    kinds = data.draw(st.lists(st.sampled_from([float, int, np.float64, np.float32]), min_size=len(y),
                               max_size=len(y)))
    y = np.array([kind(v) if kind is not int else int(v) for kind, v in zip(kinds, y)], dtype=float)
    as_obj = lambda a: np.array([k(v) if k is not int else int(v) for k, v in zip(kinds, a)], dtype=object)
    x, w = np.round(y[::-1] / 3.0), np.abs(y) + 1.0
    np.testing.assert_array_equal(as_float_array(as_obj(y), "y"), y)
    x, w = (np.array([float(v) for v in as_obj(a)]) for a in (x, w))   # the values the object arrays hold
    np.testing.assert_array_equal(isotonic_regression(as_obj(y), as_obj(w)).x, isotonic_regression(y, w).x)
    np.testing.assert_array_equal(fit_staircase(as_obj(x), as_obj(y)).fitted, fit_staircase(x, y).fitted)
    cal = IsotonicCalibrator(out_of_bounds="clip").fit(as_obj(x).reshape(-1, 1), as_obj(y), as_obj(w))
    ref = IsotonicCalibrator(out_of_bounds="clip").fit(x, y, w)
    np.testing.assert_array_equal(cal.predict(as_obj(y)), ref.predict(y))


@pytest.mark.parametrize("bad", [np.zeros((3, 2)), np.zeros((3, 1)), [[1.0, 2.0]], 3.0, np.float64(1.0)])
def test_as_float_array_rejects_wrong_ndim(bad):
    with pytest.raises(ValueError, match="`y`"):
        as_float_array(bad, "y")


@given(hnp.arrays(np.float64, st.integers(0, 50), elements=st.floats(allow_nan=True, allow_infinity=True)))
def test_as_float_array_property(a):
    bad = np.flatnonzero(~np.isfinite(a))
    before = a.copy()
    if bad.size:
        with pytest.raises(ValueError, match=rf"`a`.*index {bad[0]}\b"):
            as_float_array(a, "a")
    else:
        np.testing.assert_array_equal(as_float_array(a, "a"), a)
    np.testing.assert_array_equal(a, before)


# ----------------------------------------------------------------------------------------------- small helpers

def test_check_same_length():
    assert check_same_length(x=[1, 2], y=np.zeros(2), w=None) == 2
    assert check_same_length() == 0
    with pytest.raises(ValueError, match=r"`x` has 2.*`y` has 3"):
        check_same_length(x=[1, 2], y=[1, 2, 3])


def test_check_weights():
    assert check_weights(None, 3) is None
    np.testing.assert_array_equal(check_weights([1, 0, 2], 3), [1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match=r"`w`.*non-negative.*index 1\b"):
        check_weights([1.0, -0.5, -1.0], 3, "w")
    with pytest.raises(ValueError, match=r"`w`.*zero"):
        check_weights([0.0, 0.0], 2, "w")
    with pytest.raises(ValueError, match=r"`w`"):
        check_weights([1.0, 1.0], 3, "w")
    with pytest.raises(ValueError, match=r"`w`.*index 0\b"):
        check_weights([np.nan, 1.0], 2, "w")
    with pytest.raises(TypeError, match=r"`w`"):
        check_weights(["a", "b"], 2, "w")
    assert check_weights([-0.0, 1.0], 2) is not None  # negative zero is zero


EDGE_FLOATS = st.floats(width=64) | st.sampled_from([np.nan, np.inf, -np.inf, 1e308, -1e308, -0.0, 5e-324])


@given(hnp.arrays(np.float64, st.integers(0, 30), elements=EDGE_FLOATS))
@example(np.array([1e308, 1e308]))
@example(np.array([1.0, np.inf, -np.inf]))
def test_first_nonfinite_is_the_first_nan_or_inf(a):
    """The sum test against a scan: the first NaN or ±inf wherever it is, also when finite values overflow the sum
    or infinities of both signs cancel into NaN."""
    expected = next((i for i, v in enumerate(a) if not np.isfinite(v)), -1)
    assert _first_nonfinite(a) == expected


@given(hnp.arrays(np.float64, st.integers(0, 30), elements=EDGE_FLOATS))
@example(np.array([-0.0, 1.0, -1.0]))
@example(np.array([1e308, 1e308, 0.0]))
def test_scan_weights_is_the_first_bad_weight(w):
    "The first NaN, ±inf or negative weight (−0.0 is not negative), by a scan; all-zero weights total exactly 0."
    expected = next((i for i, v in enumerate(w) if not (np.isfinite(v) and v >= 0.0)), -1)
    bad, total = _scan_weights(w)
    assert bad == expected
    if bad < 0:
        assert (total == 0.0) == (not w.any())


def test_check_increasing():
    assert check_increasing(True) is True and check_increasing(np.bool_(False)) is False
    assert check_increasing("auto", allow_auto=True) == "auto"
    for bad in ["auto", 1, 0, None, "True", 1.0]:
        with pytest.raises(TypeError, match="`increasing`"):
            check_increasing(bad)
    for bad in ["Auto", 1, None]:
        with pytest.raises(TypeError, match="`increasing`"):
            check_increasing(bad, allow_auto=True)


def test_check_choice():
    assert check_choice("step", "interpolation", ("step", "linear")) == "step"
    for bad in ["Step", "", None, 1]:
        with pytest.raises(ValueError, match=r"`interpolation`.*'step'.*'linear'"):
            check_choice(bad, "interpolation", ("step", "linear"))


# ----------------------------------------------------------------------------------------------- no mutation

def _snapshot(a):
    if isinstance(a, np.ndarray):
        return (a.tobytes(), a.dtype, a.shape, a.strides, a.flags.writeable)
    return repr(a)


MUTATION_KINDS = ["list", "float64", "float32", "int64", "readonly", "readonly-int", "strided", "readonly-strided"]


def _make(kind, values):
    return INPUT_KINDS[kind](values)


@pytest.mark.filterwarnings("ignore:Confidence interval of the Spearman")
@pytest.mark.parametrize("kind", MUTATION_KINDS)
def test_public_functions_leave_inputs_untouched(kind):
    x_vals = [3, 1, 2, 2, 0, 5, 1, 3]       # unsorted, with ties
    y_vals = [5, 2, 1, 4, 0, 3, 3, 1]
    w_vals = [1, 2, 1, 3, 1, 1, 2, 1]
    x, y, w, t = (_make(kind, v) for v in (x_vals, y_vals, w_vals, [0, 4, 2, 1]))
    snaps = [_snapshot(a) for a in (x, y, w, t)]

    isotonic_regression(y, w)
    isotonic_regression(y, w, increasing=False)
    for ties in ("primary", "secondary", "tertiary"):
        # unit weights here: weighted ties="primary" can crash on rounding, see test_pava.py
        st_ = fit_staircase(x, y, None if ties == "primary" else w, ties=ties)
        st_(t)
    for ties in ("secondary", "tertiary"):
        cal = IsotonicCalibrator(ties=ties, increasing="auto").fit(x, y, sample_weight=w)
        cal.predict(t)
        cal.transform(t)
    IsotonicCalibrator().fit_transform(x, y)
    assert [_snapshot(a) for a in (x, y, w, t)] == snaps


def test_readonly_column_input_to_calibrator():
    X = _readonly(np.array([[3.0], [1.0], [2.0], [2.0]]))
    y = _readonly([1.0, 0.0, 1.0, 0.0])
    before = (X.tobytes(), y.tobytes())
    cal = IsotonicCalibrator().fit(X, y)
    cal.predict(X)
    assert (X.tobytes(), y.tobytes()) == before and not X.flags.writeable and not y.flags.writeable


@given(hnp.arrays(np.float64, st.integers(1, 40), elements=st.floats(-1e6, 1e6)),
       st.sampled_from(["secondary", "tertiary"]))   # ties="primary" has its own (failing) tests in test_pava.py
def test_no_mutation_property(y, ties):
    x = np.round(y[::-1] / 3.0)
    w = np.abs(y) + 1.0
    y0, x0, w0 = y.copy(), x.copy(), w.copy()
    isotonic_regression(y, w)
    fit_staircase(x, y, w, ties=ties)(y)
    IsotonicCalibrator(ties=ties, out_of_bounds="clip").fit(x, y, w).predict(y)
    for a, b in ((y, y0), (x, x0), (w, w0)):
        assert a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------------------------- bad input

Y = [3.0, 1.0, 2.0, 5.0]
X = [0.5, 0.1, 0.3, 0.2]
NAN_AT_2 = [3.0, 1.0, np.nan, 5.0]
INF_AT_1 = [3.0, np.inf, 2.0, 5.0]

BAD_CALLS = {
    # isotonic_regression
    "ir-nan-y": (lambda: isotonic_regression(NAN_AT_2), ValueError, r"`y`.*index 2\b"),
    "ir-inf-y": (lambda: isotonic_regression(INF_AT_1), ValueError, r"`y`.*index 1\b"),
    "ir-neginf-y": (lambda: isotonic_regression([-np.inf, 1.0]), ValueError, r"`y`.*index 0\b"),
    "ir-nan-w": (lambda: isotonic_regression(Y, NAN_AT_2), ValueError, r"`weights`.*index 2\b"),
    "ir-inf-w": (lambda: isotonic_regression(Y, INF_AT_1), ValueError, r"`weights`.*index 1\b"),
    "ir-neg-w": (lambda: isotonic_regression(Y, [1.0, 1.0, -1e-300, 1.0]), ValueError, r"`weights`.*negative"),
    "ir-zero-w": (lambda: isotonic_regression(Y, [0.0] * 4), ValueError, r"`weights`.*zero"),
    "ir-len-w": (lambda: isotonic_regression(Y, [1.0] * 3), ValueError, r"`weights`"),
    "ir-w-for-empty": (lambda: isotonic_regression([], [1.0]), ValueError, r"`weights`"),
    "ir-2d-y": (lambda: isotonic_regression(np.ones((4, 2))), ValueError, r"`y`"),
    "ir-column-y": (lambda: isotonic_regression(np.ones((4, 1))), ValueError, r"`y`"),
    "ir-2d-w": (lambda: isotonic_regression(Y, np.ones((4, 1))), ValueError, r"`weights`"),
    "ir-str-y": (lambda: isotonic_regression(["3", "1"]), TypeError, r"`y`"),
    "ir-obj-y": (lambda: isotonic_regression(np.array(Y + ["x"], dtype=object)), TypeError, r"`y`"),
    "ir-complex-y": (lambda: isotonic_regression(np.array(Y) + 1j), TypeError, r"`y`"),
    "ir-str-w": (lambda: isotonic_regression(Y, ["1"] * 4), TypeError, r"`weights`"),
    "ir-inc-auto": (lambda: isotonic_regression(Y, increasing="auto"), TypeError, r"`increasing`"),
    "ir-inc-int": (lambda: isotonic_regression(Y, increasing=1), TypeError, r"`increasing`"),
    "ir-inc-none": (lambda: isotonic_regression(Y, increasing=None), TypeError, r"`increasing`"),
    # fit_staircase
    "fs-empty": (lambda: fit_staircase([], []), ValueError, r"`x`.*empty"),
    "fs-empty-y": (lambda: fit_staircase([1.0], []), ValueError, r"`y`"),
    "fs-len": (lambda: fit_staircase(X, Y[:3]), ValueError, r"`x`.*`y`|`y`.*`x`"),
    "fs-len-w": (lambda: fit_staircase(X, Y, [1.0] * 5), ValueError, r"`weights`"),
    "fs-nan-x": (lambda: fit_staircase(NAN_AT_2, Y), ValueError, r"`x`.*index 2\b"),
    "fs-inf-y": (lambda: fit_staircase(X, INF_AT_1), ValueError, r"`y`.*index 1\b"),
    "fs-nan-w": (lambda: fit_staircase(X, Y, NAN_AT_2), ValueError, r"`weights`.*index 2\b"),
    "fs-neg-w": (lambda: fit_staircase(X, Y, [1.0, -2.0, 1.0, 1.0]), ValueError, r"`weights`.*index 1\b"),
    "fs-zero-w": (lambda: fit_staircase(X, Y, [0.0] * 4), ValueError, r"`weights`.*zero"),
    "fs-2d-x": (lambda: fit_staircase(np.ones((4, 2)), Y), ValueError, r"`x`"),
    "fs-str-x": (lambda: fit_staircase(["a", "b", "c", "d"], Y), TypeError, r"`x`"),
    "fs-obj-y": (lambda: fit_staircase(X, np.array(Y[:3] + [None], dtype=object)), TypeError, r"`y`"),
    "fs-ties": (lambda: fit_staircase(X, Y, ties="quaternary"), ValueError, r"`ties`"),
    "fs-interp": (lambda: fit_staircase(X, Y, interpolation="cubic"), ValueError, r"`interpolation`"),
    "fs-oob": (lambda: fit_staircase(X, Y, out_of_bounds="extrapolate"), ValueError, r"`out_of_bounds`"),
    "fs-inc": (lambda: fit_staircase(X, Y, increasing="auto"), TypeError, r"`increasing`"),
    # IsotonicCalibrator
    "cal-empty": (lambda: IsotonicCalibrator().fit([], []), ValueError, r"`X`.*empty"),
    "cal-len": (lambda: IsotonicCalibrator().fit(X, Y[:3]), ValueError, r"`X`.*`y`|`y`.*`X`"),
    "cal-nan-X": (lambda: IsotonicCalibrator().fit(NAN_AT_2, Y), ValueError, r"`X`.*index 2\b"),
    "cal-inf-y": (lambda: IsotonicCalibrator().fit(X, INF_AT_1), ValueError, r"`y`.*index 1\b"),
    "cal-nan-w": (lambda: IsotonicCalibrator().fit(X, Y, NAN_AT_2), ValueError, r"`sample_weight`.*index 2\b"),
    "cal-neg-w": (lambda: IsotonicCalibrator().fit(X, Y, [1, 1, 1, -1]), ValueError, r"`sample_weight`.*index 3\b"),
    "cal-zero-w": (lambda: IsotonicCalibrator().fit(X, Y, [0] * 4), ValueError, r"`sample_weight`.*zero"),
    "cal-len-w": (lambda: IsotonicCalibrator().fit(X, Y, [1] * 3), ValueError, r"`sample_weight`"),
    "cal-2col-X": (lambda: IsotonicCalibrator().fit(np.ones((4, 2)), Y), ValueError, r"`X`"),
    "cal-3d-X": (lambda: IsotonicCalibrator().fit(np.ones((4, 1, 1)), Y), ValueError, r"`X`"),
    "cal-2d-y": (lambda: IsotonicCalibrator().fit(X, np.ones((4, 1))), ValueError, r"`y`"),
    "cal-str-X": (lambda: IsotonicCalibrator().fit(["a", "b", "c", "d"], Y), TypeError, r"`X`"),
    "cal-obj-y": (lambda: IsotonicCalibrator().fit(X, np.array(Y[:3] + ["5"], dtype=object)), TypeError, r"`y`"),
    "cal-obj-X": (lambda: IsotonicCalibrator().fit(np.array(X[:3] + [1j], dtype=object), Y), TypeError, r"`X`"),
    "cal-sparse-X": (lambda: IsotonicCalibrator().fit(__import__("scipy.sparse").sparse.csr_matrix(
        np.reshape(X, (-1, 1))), Y), TypeError, r"`X`.*sparse"),
    "ir-sparse-y": (lambda: isotonic_regression(__import__("scipy.sparse").sparse.csr_array([Y])), TypeError,
                    r"`y`.*sparse"),
    "cal-ymin-gt-ymax": (lambda: IsotonicCalibrator(y_min=1.0, y_max=0.0).fit(X, Y), ValueError,
                         r"`y_min`.*`y_max`"),
    "cal-ymin-nan": (lambda: IsotonicCalibrator(y_min=np.nan).fit(X, Y), ValueError, r"`y_min`"),
    "cal-ymax-str": (lambda: IsotonicCalibrator(y_max="1").fit(X, Y), ValueError, r"`y_max`"),
    "cal-inc-str": (lambda: IsotonicCalibrator(increasing="yes").fit(X, Y), TypeError, r"`increasing`"),
    "cal-inc-int": (lambda: IsotonicCalibrator(increasing=1).fit(X, Y), TypeError, r"`increasing`"),
    "cal-ties": (lambda: IsotonicCalibrator(ties="none").fit(X, Y), ValueError, r"`ties`"),
    "cal-interp": (lambda: IsotonicCalibrator(interpolation="nearest").fit(X, Y), ValueError, r"`interpolation`"),
    "cal-oob": (lambda: IsotonicCalibrator(out_of_bounds="ignore").fit(X, Y), ValueError, r"`out_of_bounds`"),
    "cal-predict-nan": (lambda: IsotonicCalibrator().fit(X, Y).predict([0.2, np.nan]), ValueError,
                        r"`T`.*index 1\b"),
    "cal-predict-2col": (lambda: IsotonicCalibrator().fit(X, Y).predict(np.ones((2, 2))), ValueError, r"`T`"),
    "cal-predict-str": (lambda: IsotonicCalibrator().fit(X, Y).predict(["a"]), TypeError, r"`T`"),
    "cal-predict-raise": (lambda: IsotonicCalibrator(out_of_bounds="raise").fit(X, Y).predict([0.2, 0.6]),
                          ValueError, r"`T`.*index 1\b"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_input_raises_clear_error(case):
    call, exc, pattern = BAD_CALLS[case]
    with pytest.raises(exc, match=pattern):
        call()


def test_isotonic_regression_empty_result():
    for weights in (None, []):
        res = isotonic_regression([], weights)
        assert res.x.shape == (0,) and res.weights.shape == (0,)
        np.testing.assert_array_equal(res.blocks, [0])
    assert isotonic_regression(np.empty(0), increasing=False).blocks.tolist() == [0]


def test_predict_before_fit():
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        IsotonicCalibrator().predict([1.0])


# ----------------------------------------------------------------------------------------------- the peers

def test_scipy_passes_nan_through_and_returns_a_non_monotone_fit():
    from scipy.optimize import isotonic_regression as scipy_ir
    y = np.array([1.0, 3.0, np.nan, 2.0, 0.0, 5.0])
    fit = scipy_ir(y).x                       # no error, no warning
    finite = fit[np.isfinite(fit)]
    assert np.isnan(fit).sum() == 1
    assert np.any(np.diff(finite) < 0), "scipy's 'isotonic' fit is not monotone around the NaN"
    with pytest.raises(ValueError, match=r"`y`.*index 2\b"):
        isotonic_regression(y)


def test_scipy_accepts_infinite_y():
    from scipy.optimize import isotonic_regression as scipy_ir
    fit = scipy_ir([1.0, np.inf, 0.0]).x
    assert np.isinf(fit).sum() == 2           # 0.0 is "fitted" as +inf
    with pytest.raises(ValueError, match=r"`y`.*index 1\b"):
        isotonic_regression([1.0, np.inf, 0.0])


def test_nan_weights_peers():
    """scipy silently returns NaN fits for a NaN weight. scikit-learn 1.9 (unlike older versions) rejects it."""
    from scipy.optimize import isotonic_regression as scipy_ir
    from sklearn.isotonic import IsotonicRegression
    y = np.array([3.0, 1.0, 2.0, 5.0])
    w = np.array([1.0, np.nan, 1.0, 1.0])
    assert np.isnan(scipy_ir(y, weights=w).x).any()
    with pytest.raises(ValueError, match="NaN"):
        IsotonicRegression().fit([0.0, 1.0, 2.0, 3.0], y, sample_weight=w)
    with pytest.raises(ValueError, match=r"`weights`.*index 1\b"):
        isotonic_regression(y, w)
    with pytest.raises(ValueError, match=r"`sample_weight`.*index 1\b"):
        IsotonicCalibrator().fit([0.0, 1.0, 2.0, 3.0], y, sample_weight=w)


@pytest.mark.parametrize("dropped", [0.0, -1.0])
def test_sklearn_silently_drops_nonpositive_weights(dropped):
    """scikit-learn removes samples with weight <= 0 without a word; at the ends of the score range this shrinks
    [X_min_, X_max_], so predictions at the dropped samples' own scores become NaN (out_of_bounds='nan')."""
    from sklearn.isotonic import IsotonicRegression
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([3.0, 1.0, 2.0, 5.0])
    w = np.array([dropped, 1.0, 1.0, dropped])
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no warning either
        sk = IsotonicRegression(out_of_bounds="nan").fit(x, y, sample_weight=w)
    pred = sk.predict(x)
    assert np.isnan(pred[0]) and np.isnan(pred[3]) and (sk.X_min_, sk.X_max_) == (1.0, 2.0)
    np.testing.assert_allclose(pred[1:3], [1.0, 2.0])
    if dropped < 0:
        with pytest.raises(ValueError, match=r"`sample_weight`.*negative.*index 0\b"):
            IsotonicCalibrator().fit(x, y, sample_weight=w)
    else:
        # zero weights: IsotonicCalibrator follows scikit-learn, a zero-weight row is as if absent (issue 12);
        # fit_staircase keeps isocal's rule: the sample takes the level of the block on its left (first if none)
        cal = IsotonicCalibrator(out_of_bounds="nan").fit(x, y, sample_weight=w)
        np.testing.assert_array_equal(cal.predict(x), pred)
        assert (cal.X_min_, cal.X_max_) == (1.0, 2.0)
        np.testing.assert_array_equal(fit_staircase(x, y, w).fitted, [1.0, 1.0, 2.0, 2.0])


def test_sklearn_single_distinct_score_ignores_out_of_bounds():
    """sklearn 1.9: with a single distinct training score, IsotonicRegression predicts the constant everywhere, even
    with out_of_bounds='nan' or 'raise'. IsotonicCalibrator follows (issue 12); a `Staircase` applies
    out_of_bounds as documented."""
    from sklearn.isotonic import IsotonicRegression
    x, y, t = [1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 1.0, 2.0]
    for oob in ("nan", "raise", "clip"):
        np.testing.assert_allclose(IsotonicRegression(out_of_bounds=oob).fit(x, y).predict(t), [2 / 3] * 3)
        np.testing.assert_allclose(IsotonicCalibrator(out_of_bounds=oob).fit(x, y).predict(t), [2 / 3] * 3)
    np.testing.assert_allclose(fit_staircase(x, y, out_of_bounds="nan")(t), [np.nan, 2 / 3, np.nan])


# ----------------------------------------------------------------------------------------------- Numba cache fallback

PROBE_MODULE = textwrap.dedent("""
    import numba

    @numba.njit(cache=True)
    def probe():
        return 1
""")

RUNNER = textwrap.dedent("""
    import json, os, sys
    out = {"uid": os.getuid(), "numba_cache_dir_env": os.environ.get("NUMBA_CACHE_DIR")}
    try:                                   # numba on its own, before isocal touches the configuration
        import numba_probe
        out["probe"] = "ok"
    except RuntimeError as err:
        out["probe"] = str(err)
    import isocal, isocal.core, isocal.fit, isocal.pava
    out["isocal_file"] = isocal.__file__
    out["fallback"] = isocal.core.NUMBA_CACHE_FALLBACK
    out["env_after"] = os.environ.get("NUMBA_CACHE_DIR")
    out["fit"] = isocal.pava.isotonic_regression([3, 1, 2]).x.tolist()
    out["staircase"] = isocal.fit.fit_staircase([2.0, 0.0, 1.0], [3.0, 1.0, 2.0])([0.5, 2.5]).tolist()
    print("RESULT" + json.dumps(out))
""")


def _strategies():
    """Ways to run Python as someone who cannot write to the package directory or to HOME."""
    found = []
    if os.geteuid() != 0:
        found.append("unprivileged")
    else:
        if shutil.which("setpriv"):
            found.append("setpriv-nobody")
        if shutil.which("unshare") and shutil.which("mount"):
            found.append("unshare-ro-bind")
    return found


@pytest.fixture
def sandbox():
    base = Path(tempfile.mkdtemp(prefix="isocal-ro-test-"))
    os.chmod(base, 0o755)                  # mkdtemp makes it 0700; `nobody` must traverse it
    pkg = base / "pkg"
    shutil.copytree(ISOCAL_DIR, pkg / "isocal", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (pkg / "numba_probe.py").write_text(PROBE_MODULE)
    home_ro, home_rw, tmp = base / "home_ro", base / "home_rw", base / "tmp"
    for d in (home_ro, home_rw, tmp):
        d.mkdir()
    (base / "run.py").write_text(RUNNER)
    for d in (home_rw, tmp):
        os.chmod(d, 0o777)
    for root, dirs, files in os.walk(pkg):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o555)
    os.chmod(pkg, 0o555)
    os.chmod(home_ro, 0o555)
    os.chmod(base / "run.py", 0o444)
    yield base
    for root, dirs, files in os.walk(base):
        os.chmod(root, 0o755)
    shutil.rmtree(base, ignore_errors=True)


def _run_sandboxed(strategy, base, home):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(base / "tmp"),
           "PYTHONPATH": str(base / "pkg"), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    py = [sys.executable, str(base / "run.py")]
    if strategy == "setpriv-nobody":
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *py]
    elif strategy == "unshare-ro-bind":
        binds = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}"
                            for d in (base / "pkg", base / "home_ro"))
        cmd = ["unshare", "-m", "sh", "-c", f'{binds} && exec "$0" "$@"', *py]
    else:
        cmd = py
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    return proc


def _result(proc):
    import json
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


def _strategy_usable(strategy, base):
    """The sandbox can start Python with numba (e.g. the venv must be readable by `nobody`)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(base / "home_ro")}
    check = [sys.executable, "-c", "import numba, numpy, sklearn"]
    if strategy == "setpriv-nobody":
        check = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *check]
    elif strategy == "unshare-ro-bind":
        check = ["unshare", "-m", "sh", "-c", f"mount --bind {base} {base} && mount -o remount,bind,ro {base} "
                 f"&& ! touch {base}/x 2>/dev/null && exec \"$0\" \"$@\"", *check]
    proc = subprocess.run(check, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode == 0, proc.stderr[-500:]


@pytest.mark.skipif(not _strategies(), reason="needs an unprivileged user, setpriv or unshare")
@pytest.mark.parametrize("strategy", _strategies() or ["none"])
def test_numba_cache_fallback_readonly_package(strategy, sandbox):
    ok, why = _strategy_usable(strategy, sandbox)
    if not ok:
        pytest.skip(f"{strategy} unusable here: {why}")

    # 1. HOME not writable, NUMBA_CACHE_DIR unset, package directory read-only
    res = _result(_run_sandboxed(strategy, sandbox, sandbox / "home_ro"))
    assert res["numba_cache_dir_env"] is None
    assert "no locator available" in res["probe"], "numba alone must fail here, or the test proves nothing"
    assert Path(res["isocal_file"]).resolve().parent == (sandbox / "pkg" / "isocal").resolve()
    fallback = res["fallback"]
    assert fallback and Path(fallback).resolve().parent == (sandbox / "tmp").resolve()
    assert res["env_after"] == fallback
    assert res["fit"] == [2.0, 2.0, 2.0]
    assert res["staircase"] == [1.0, 3.0]
    cached = list(Path(fallback).rglob("*.nbi"))
    assert any("pava" in p.name for p in cached), "the kernels must actually be cached in the fallback directory"
    assert not list((sandbox / "pkg").rglob("__pycache__"))

    # 2. the same with a writable HOME: numba's own user-wide cache works, no fallback needed
    res = _result(_run_sandboxed(strategy, sandbox, sandbox / "home_rw"))
    assert res["probe"] == "ok"
    assert res["fallback"] is None and res["env_after"] is None
    assert res["fit"] == [2.0, 2.0, 2.0]
    cached = list((sandbox / "home_rw").rglob("*.nbi"))
    assert any("pava" in p.name for p in cached)


# ---------------------------------------------------------------- issue 12: pooling a stream's means
from fractions import Fraction as _Fr
import math as _math

from hypothesis import given as _given, strategies as _st

from isocal.core import _means_violate, _pooled_mean, _shares

_extreme = _st.builds(lambda m, e, neg: (-1.0 if neg else 1.0) * _math.ldexp(m, e),
                      _st.floats(0.5, 1.0, exclude_max=True), _st.integers(-1073, 1024), _st.booleans())
_weights = _st.builds(lambda m, e: _math.ldexp(m, e), _st.floats(0.5, 1.0, exclude_max=True), _st.integers(-1073, 1023))


@_given(_extreme, _weights, _extreme, _weights)
def test_pooled_mean_matches_exact_rational_mean(ma, wa, mb, wb):
    "Means 2^-1074..2^1024 and weights over the float range: the pooled mean within a few roundings of the exact one."
    if not _math.isfinite(wa + wb): return       # streams refuse such totals before pooling
    W, ra, rb = _shares(wa, wb)
    got = _pooled_mean(ma, wa, mb, wb, ra, rb)
    exact = (_Fr(ma) * _Fr(wa) + _Fr(mb) * _Fr(wb)) / (_Fr(wa) + _Fr(wb))
    assert _math.isfinite(got)
    assert abs(_Fr(got) - exact) <= _Fr(4 * 2.0 ** -53) * max(abs(_Fr(ma)), abs(_Fr(mb))) + _Fr(2.0 ** -1070)


def test_pooled_mean_exact_for_integer_sums_and_means_violate_tie_rule():
    "Sums that are floats come back exactly (equal rational means are bit-identical); equal means pool."
    a = _pooled_mean(1.0, 1.0, 2.0, 2.0, *_shares(1.0, 2.0)[1:])          # 5/3 from sums 1 + 4
    b = _pooled_mean(2.0, 1.0, 1.5, 2.0, *_shares(1.0, 2.0)[1:])          # 5/3 from sums 2 + 3
    assert a == b == 5 / 3
    assert _means_violate(a, 3.0, b, 3.0, 1.0) and _means_violate(a, 3.0, b, 3.0, -1.0)
    assert not _means_violate(1.0, 1.0, 2.0, 1.0, 1.0) and _means_violate(1.0, 1.0, 2.0, 1.0, -1.0)
    assert _means_violate(5.0, 0.0, 1.0, 1.0, 1.0) and _means_violate(0.0, 1.0, 5.0, 0.0, -1.0)
    assert _pooled_mean(1.7e308, 1.0, 1.6e308, 1.0, 0.5, 0.5) == float((_Fr(1.7e308) + _Fr(1.6e308)) / 2)


# ------------------------------------------------------------------------------ kernels compiled once, not per literal

_LITERAL_SCAN = """
import pkgutil, runpy, sys
import isocal
from numba.core.registry import CPUDispatcher
entry_points = runpy.run_path(sys.argv[1])["ENTRY_POINTS"]
for code in entry_points.values():
    exec(code, {})
for info in pkgutil.iter_modules(isocal.__path__):
    module = sys.modules.get("isocal." + info.name)
    for name, value in (vars(module) if module else {}).items():
        if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__:
            for sig in value.signatures:
                if "Literal" in str(sig):
                    print(f"{module.__name__}.{name}{sig}")
"""


def test_no_kernel_is_compiled_for_a_literal_argument(tmp_path):
    """Every module's first call (bench/startup.py's entry points) in a fresh process with an empty Numba cache: no
    isocal kernel may be compiled for a `Literal` argument type, since each such specialisation compiles the kernel
    and its callees once more on the user's first call (see "Three kernel rules" in nbs/00_core.ipynb)."""
    script = ISOCAL_DIR.parent / "bench" / "startup.py"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", _LITERAL_SCAN, str(script)], env=env, capture_output=True, text=True,
                          check=True)
    assert proc.stdout == "", f"kernels compiled for literal arguments:\n{proc.stdout}"


# ---------------------------------------------------------------- issue 30: the last small edges of core

def test_not_finite_error_never_raises_itself():
    from isocal.core import not_finite_error
    err = not_finite_error('v', np.array([np.nan]), 5)          # used to raise IndexError
    assert isinstance(err, ValueError) and "`v` must be finite" in str(err) and "index 5" in str(err)
    assert str(not_finite_error('v', np.array([1.0, np.inf]), 1)) == "`v` must be finite (no NaN or inf), found inf at index 1"
    assert "index 0" in str(not_finite_error('v', np.array([[np.nan]]), 0))


@pytest.mark.parametrize("bad", [[[1.0, 2.0], [3.0]], [1.0, [2.0, 3.0]], [[[1.0]], [2.0]]])
def test_ragged_input_names_the_argument(bad):
    from isocal.core import as_float_array, as_real_array
    for convert in (as_float_array, as_real_array):
        with pytest.raises(ValueError, match=r"`y` is ragged: its nested sequences have different lengths"):
            convert(bad, 'y')


@pytest.mark.parametrize("call, kind, message", [
    (lambda c: c.check_flag('False', 'progress'), TypeError, "`progress` must be True or False, got 'False'"),
    (lambda c: c.check_flag(1, 'progress', allow_none=True), TypeError, "`progress` must be True, False or None, got 1"),
    (lambda c: c.check_integer(2**70, 'n_bins'), ValueError, "`n_bins` must be an integer of at most 2**63 - 1"),
    (lambda c: c.check_integer(np.float64(3.0), 'n_bins'), TypeError, "`n_bins` must be an integer, got"),
    (lambda c: c.check_integer(np.True_, 'n_bins'), TypeError, "`n_bins` must be an integer"),
    (lambda c: c.check_integer(-1, 'n', low=0), ValueError, "`n` must be a non-negative integer, got -1"),
    (lambda c: c.check_real(0, 'panel_size', low=0, low_open=True), ValueError, "`panel_size` must lie in (0, inf), got 0.0"),
    (lambda c: c.check_real(np.inf, 'eps'), ValueError, "`eps` must be finite, got inf"),
    (lambda c: c.check_real(None, 'eps'), TypeError, "`eps` must be a real number, got None"),
    (lambda c: c.check_seed(-1), ValueError, "`seed` must be None, a non-negative integer"),
    (lambda c: c.check_seed(True, 'random_state'), TypeError, "`random_state` must be None, a non-negative integer"),
    (lambda c: c.check_seed(2.0), TypeError, "`seed` must be None"),
])
def test_option_checkers(call, kind, message):
    import isocal.core as c
    with pytest.raises(kind) as err:
        call(c)
    assert message in str(err.value), str(err.value)


def test_option_checkers_pass_good_values():
    import isocal.core as c
    assert c.check_flag(np.False_, 'f') is False and c.check_integer(np.int8(4), 'k') == 4
    assert c.check_real(np.float32(0.5), 'x', low=0, high=1) == 0.5
    g = np.random.default_rng(1)
    assert c.check_seed(g) is g and c.check_seed(np.random.SeedSequence(3)).random() == np.random.default_rng(
        np.random.SeedSequence(3)).random()
    assert c.check_seed(2**100).random() == np.random.default_rng(2**100).random()
