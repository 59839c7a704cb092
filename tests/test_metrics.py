"""Tests of isocal.metrics: exact values, properties, agreement with scikit-learn, and clear errors on bad input."""
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sk_log_loss

from isocal.metrics import (brier_loss, brier_score, calibration_report, expected_calibration_error, log_loss,
                            reliability_band, reliability_curve, reliability_diagram)

LN2 = np.log(2.0)


@st.composite
def labelled_probabilities(draw, low=0.0, high=1.0, max_size=80):
    """Labels, probabilities in [low, high] and positive weights, as three equal-length float arrays."""
    n = draw(st.integers(1, max_size))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    p = draw(st.lists(st.floats(low, high), min_size=n, max_size=n))
    w = draw(st.lists(st.floats(0.05, 20.0), min_size=n, max_size=n))
    return np.array(y, dtype=float), np.array(p), np.array(w)


strategies = st.sampled_from(["uniform", "quantile"])
bin_counts = st.integers(1, 15)


# ---------------------------------------------------------------- exact values

def test_log_loss_worked_examples():
    assert log_loss([0, 1], [0.5, 0.5]) == 1.0
    assert log_loss([1], [0.25]) == 2.0
    assert log_loss([1, 1], [0.75, 0.25]) == pytest.approx((np.log2(4 / 3) + 2) / 2, rel=1e-15)
    assert log_loss([0, 1], [0.5, 0.5], base=np.e) == pytest.approx(LN2, rel=1e-15)
    assert log_loss([0, 1], [0.0, 1.0], eps=0) == 0.0


def test_log_loss_clips_as_scikit_learn_by_default():
    """The default eps="auto" is the machine epsilon of the probabilities' floating type, scikit-learn's clipping:
    a calibrator's exact 0 or 1 on the wrong label costs log2(1/eps) bits, not inf, and agrees with scikit-learn."""
    eps64, eps32 = np.finfo(np.float64).eps, np.finfo(np.float32).eps
    assert log_loss([1], [0.0]) == pytest.approx(-np.log2(eps64), rel=1e-15)
    assert log_loss([1], np.float32([0.0])) == pytest.approx(-np.log2(eps32), rel=1e-15)
    assert log_loss([1], [0], base=np.e) == pytest.approx(sk_log_loss([1], [0.0], labels=[0, 1]), rel=1e-15)
    y = np.array([0, 1, 1, 0, 1, 0])
    for p, rel in ((np.array([0.0, 1.0, 0.0, 1.0, 0.3, 0.6]), 1e-12),     # scikit-learn computes float32 in float32
                   (np.float32([0.0, 1.0, 0.0, 1.0, 0.3, 0.6]), 1e-6)):
        assert log_loss(y, p, base=np.e) == pytest.approx(sk_log_loss(y, p), rel=rel)


def test_log_loss_of_a_certain_mistake_is_infinite_unless_clipped_or_weightless():
    assert log_loss([1, 0], [0.0, 0.0], eps=0) == np.inf
    assert log_loss([1, 0], [0.0, 0.0], eps=1e-3) == pytest.approx((np.log2(1e3) - np.log2(1 - 1e-3)) / 2)
    assert log_loss([1, 0], [0.0, 0.0], sample_weight=[0, 1], eps=0) == 0.0


def test_brier_and_ece_worked_examples():
    assert brier_score([1, 0], [0.9, 0.2]) == pytest.approx(0.025, rel=1e-14)
    assert brier_score([0, 1], [0.5, 0.5]) == 0.25
    y, p = [0, 1, 1, 1], [0.1, 0.1, 0.9, 0.9]
    assert expected_calibration_error(y, p) == pytest.approx(0.25, rel=1e-14)
    assert expected_calibration_error(y, p, sample_weight=[3, 1, 1, 1]) == pytest.approx(2 / 15, rel=1e-14)
    mean_p, freq, counts = reliability_curve(y, p)
    np.testing.assert_allclose(mean_p, [0.1, 0.9])
    np.testing.assert_array_equal(freq, [0.5, 1.0])
    np.testing.assert_array_equal(counts, [2, 2])


def test_bins_are_closed_on_the_right_like_sklearn():
    p = [0.0, 0.1, 0.2, 0.3, 1.0]
    np.testing.assert_array_equal(reliability_curve([0] * 5, p)[2], [2, 1, 1, 1])


def test_booleans_and_integer_arrays_are_accepted():
    y = np.array([False, True, True])
    assert brier_score(y, np.array([0, 1, 1])) == 0.0


def test_inputs_are_not_modified():
    y, p = np.array([0.0, 1.0, 1.0]), np.array([0.2, 0.6, 0.9])
    y.flags.writeable = p.flags.writeable = False
    calibration_report(y, {"m": p}, eps=0.01)
    reliability_curve(y, p, strategy="quantile", n_bins=2)


# ---------------------------------------------------------------- agreement with scikit-learn

@settings(max_examples=150, deadline=None)
@given(labelled_probabilities(low=0.001, high=0.999))
def test_log_loss_matches_sklearn_in_bits(data):
    y, p, w = data
    assert log_loss(y, p) == pytest.approx(sk_log_loss(y, p, labels=[0, 1]) / LN2, rel=1e-12)
    assert log_loss(y, p, sample_weight=w) == pytest.approx(
        sk_log_loss(y, p, sample_weight=w, labels=[0, 1]) / LN2, rel=1e-12)
    assert log_loss(y, p, base=np.e) == pytest.approx(log_loss(y, p) * LN2, rel=1e-12)


@settings(max_examples=150, deadline=None)
@given(labelled_probabilities())
def test_brier_score_matches_sklearn(data):
    y, p, w = data
    assert brier_score(y, p) == pytest.approx(brier_score_loss(y, p, pos_label=1), rel=1e-12, abs=1e-15)
    assert brier_score(y, p, sample_weight=w) == pytest.approx(
        brier_score_loss(y, p, sample_weight=w, pos_label=1), rel=1e-12, abs=1e-15)


@settings(max_examples=150, deadline=None)
@given(labelled_probabilities(), bin_counts, strategies)
def test_reliability_curve_matches_sklearn_calibration_curve(data, n_bins, strategy):
    y, p, _ = data
    sk_freq, sk_mean = calibration_curve(y, p, n_bins=n_bins, strategy=strategy, pos_label=1)
    mean_p, freq, counts = reliability_curve(y, p, n_bins=n_bins, strategy=strategy)
    np.testing.assert_allclose(mean_p, sk_mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(freq, sk_freq, rtol=1e-12, atol=1e-15)
    assert counts.sum() == len(y) and np.all(counts > 0)


# ---------------------------------------------------------------- properties

@settings(max_examples=150, deadline=None)
@given(labelled_probabilities(), bin_counts, strategies)
def test_ece_is_the_count_weighted_gap_of_the_reliability_curve(data, n_bins, strategy):
    y, p, _ = data
    ece = expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy)
    mean_p, freq, counts = reliability_curve(y, p, n_bins=n_bins, strategy=strategy)
    assert ece == pytest.approx(np.sum(counts * np.abs(freq - mean_p)) / len(y), rel=1e-9, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(labelled_probabilities(), bin_counts, strategies)
def test_ece_bounds(data, n_bins, strategy):
    y, p, w = data
    ece = expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy, sample_weight=w)
    # Triangle inequality: binning can only cancel errors, never create them.
    assert 0.0 <= ece <= np.average(np.abs(y - p), weights=w) + 1e-12
    one_bin = expected_calibration_error(y, p, n_bins=1, sample_weight=w)
    assert one_bin == pytest.approx(abs(np.average(y - p, weights=w)), rel=1e-9, abs=1e-12)
    assert one_bin <= ece + 1e-12


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(max_size=30), st.data())
def test_integer_weights_equal_repetition(data, draw):
    y, p, _ = data
    reps = np.array(draw.draw(st.lists(st.integers(1, 4), min_size=len(y), max_size=len(y))))
    y_rep, p_rep = np.repeat(y, reps), np.repeat(p, reps)
    assert brier_score(y, p, sample_weight=reps) == pytest.approx(brier_score(y_rep, p_rep), rel=1e-12, abs=1e-15)
    assert expected_calibration_error(y, p, sample_weight=reps) == pytest.approx(
        expected_calibration_error(y_rep, p_rep), rel=1e-9, abs=1e-12)
    ll = log_loss(y, p, sample_weight=reps)
    assert ll == pytest.approx(log_loss(y_rep, p_rep), rel=1e-12, abs=1e-15) or ll == log_loss(y_rep, p_rep)


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(), st.floats(0.01, 100.0), st.randoms(use_true_random=False))
def test_invariant_to_weight_scale_and_sample_order(data, scale, random):
    y, p, w = data
    order = np.array(random.sample(range(len(y)), len(y)))
    for metric in (brier_score, expected_calibration_error,
                   lambda *a, **k: log_loss(*a, eps=1e-6, **k)):
        reference = metric(y, p, sample_weight=w)
        assert metric(y, p, sample_weight=scale * w) == pytest.approx(reference, rel=1e-9, abs=1e-12)
        assert metric(y[order], p[order], sample_weight=w[order]) == pytest.approx(reference, rel=1e-9, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities())
def test_ranges_and_perfect_predictions(data):
    y, p, w = data
    assert 0.0 <= brier_score(y, p, sample_weight=w) <= 1.0
    assert log_loss(y, p, sample_weight=w) >= 0.0
    assert log_loss(y, y, eps=0) == 0.0 and brier_score(y, y) == 0.0 and expected_calibration_error(y, y) == 0.0


@settings(max_examples=50, deadline=None)
@given(labelled_probabilities(), strategies)
def test_calibration_report_agrees_with_the_metrics(data, strategy):
    y, p, w = data
    [row] = calibration_report(y, {"m": p}, n_bins=5, strategy=strategy, sample_weight=w, eps=1e-4)
    assert row == {"name": "m", "log_loss_bits": log_loss(y, p, sample_weight=w, eps=1e-4),
                   "brier": brier_score(y, p, sample_weight=w),
                   "ece": expected_calibration_error(y, p, n_bins=5, strategy=strategy, sample_weight=w)}


def test_quantile_bins_hold_equal_counts():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=1000) ** 3
    y = (rng.uniform(size=1000) < p).astype(int)
    np.testing.assert_array_equal(reliability_curve(y, p, n_bins=8, strategy="quantile")[2], [125] * 8)


# ---------------------------------------------------------------- bad input

ALL_METRICS = [log_loss, brier_score, brier_loss, expected_calibration_error, reliability_curve, reliability_band,
               lambda y, p, **k: calibration_report(y, {"p": p}, **k)]
BAD_INPUTS = [
    ([1, 2, 2], [0.5, 0.5, 0.5], ValueError, r"`y_true` must contain only the labels 0 and 1, got labels \{1, 2\}"),
    ([0, 1, -1], [0.5, 0.5, 0.5], ValueError, r"`y_true`.*labels \{-1, 0, 1\}"),
    ([0, 1], [0.5, 1.5], ValueError, r"`y_proba` must lie in \[0, 1\], found 1.5 at index 1"),
    ([0, 1], [-0.1, 0.5], ValueError, r"`y_proba` must lie in \[0, 1\], found -0.1 at index 0"),
    ([0, 1], [0.5, np.nan], ValueError, r"`y_proba` must be finite"),
    ([0, np.inf], [0.5, 0.5], ValueError, r"`y_true` must be finite"),
    ([0, 1], [0.5, 0.5, 0.5], ValueError, r"length mismatch: `y_true` has 2, `y_proba` has 3"),
    (["0", "1"], [0.5, 0.5], TypeError, r"`y_true` must hold real numbers"),
    ([0, 1], ["a", "b"], TypeError, r"`y_proba` must hold real numbers"),
    ([0, 1], [[0.5, 0.5]], ValueError, r"`y_proba` must be one-dimensional"),
    ([], [], ValueError, r"`y_true` is empty"),
]


@pytest.mark.parametrize("metric", ALL_METRICS)
@pytest.mark.parametrize("y, p, error, message", BAD_INPUTS)
def test_bad_labels_and_probabilities_name_the_argument(metric, y, p, error, message):
    if metric is ALL_METRICS[-1]:
        message = message.replace("`y_proba`", r"`probs\['p'\]`")
    with pytest.raises(error, match=message):
        metric(y, p)


@pytest.mark.parametrize("metric", ALL_METRICS)
@pytest.mark.parametrize("weights, message", [
    ([1, -1], r"`sample_weight` must be non-negative"),
    ([0, 0], r"`sample_weight` are all zero"),
    ([1, 1, 1], r"length mismatch: `sample_weight` has 3"),
    ([1, np.nan], r"`sample_weight` must be finite"),
])
def test_bad_weights_name_the_argument(metric, weights, message):
    with pytest.raises(ValueError, match=message):
        metric([0, 1], [0.5, 0.5], sample_weight=weights)


@pytest.mark.parametrize("metric", [expected_calibration_error, reliability_curve])
@pytest.mark.parametrize("kwargs, message", [
    ({"n_bins": 0}, r"`n_bins` must be a positive integer, got 0"),
    ({"n_bins": 2**70}, r"`n_bins` must be an integer of at most 16777216"),
    ({"n_bins": 2.5}, r"`n_bins` must be an integer, got 2.5"),
    ({"n_bins": True}, r"`n_bins` must be an integer, got True"),
    ({"strategy": "equal"}, r"`strategy` must be one of 'uniform', 'quantile'; got 'equal'"),
])
def test_bad_binning_options(metric, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        metric([0, 1], [0.5, 0.5], **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"base": 1}, r"`base` must be a positive number other than 1"),
    ({"base": -2}, r"`base` must be a positive number other than 1"),
    ({"eps": 0.5}, r"`eps` must lie in \[0, 0.5\)"),
    ({"eps": -1e-3}, r"`eps` must lie in \[0, 0.5\)"),
])
def test_bad_log_loss_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        log_loss([0, 1], [0.5, 0.5], **kwargs)


@pytest.mark.parametrize("function", [calibration_report, reliability_diagram])
def test_probs_must_be_a_non_empty_mapping(function):
    for probs in ([0.5, 0.5], {}):
        with pytest.raises(TypeError, match=r"`probs` must be a non-empty mapping"):
            function([0, 1], probs)
    with pytest.raises(ValueError, match=r"`probs\['bad'\]` must lie in \[0, 1\]"):
        function([0, 1], {"good": [0.5, 0.5], "bad": [0.5, 2.0]})


# ---------------------------------------------------------------- plotting

def test_reliability_diagram_draws_one_curve_per_model_and_a_histogram():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p).astype(int)
    fig, ax = plt.subplots()
    try:
        returned = reliability_diagram(y, {"a": p, "b": p ** 2}, ax=ax, title="t", strategy="quantile", n_bins=5)
        assert returned is ax and ax.get_title() == "t"
        assert len(ax.lines) == 3  # the diagonal and two curves
        np.testing.assert_allclose(ax.lines[1].get_xdata(), reliability_curve(y, p, n_bins=5, strategy="quantile")[0])
        [hist] = ax.child_axes
        assert len(hist.patches) == 2
    finally:
        plt.close(fig)


def test_reliability_diagram_creates_a_figure_when_no_axes_is_given():
    ax = reliability_diagram([0, 1, 1], {"m": [0.2, 0.7, 0.9]})
    try:
        assert ax.figure is not None and [t.get_text() for t in ax.get_legend().get_texts()][-1] == "m"
    finally:
        plt.close(ax.figure)


def test_import_does_not_load_matplotlib():
    code = "import sys, isocal.metrics; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- the paper's Brier loss and confidence bands

@given(labelled_probabilities())
def test_brier_loss_is_four_times_sklearn_brier(data):
    y, p, w = data
    np.testing.assert_allclose(brier_loss(y, p), 4 * brier_score_loss(y, p), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(brier_loss(y, p, sample_weight=w), 4 * brier_score_loss(y, p, sample_weight=w),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_reliability_band_is_the_wilson_interval(strategy, level):
    from statsmodels.stats.proportion import proportion_confint
    rng = np.random.default_rng(5)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p).astype(int)
    mean_p, freq, lo, hi = reliability_band(y, p, n_bins=8, strategy=strategy, level=level)
    ref_p, ref_f, counts = reliability_curve(y, p, n_bins=8, strategy=strategy)
    np.testing.assert_array_equal(mean_p, ref_p); np.testing.assert_array_equal(freq, ref_f)
    ref_lo, ref_hi = proportion_confint(np.round(freq * counts), counts, alpha=1 - level, method="wilson")
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-10, atol=1e-12)


def test_reliability_band_effective_size_with_weights():
    y, p = [0, 1, 1, 0], [0.2, 0.3, 0.7, 0.9]
    unit = reliability_band(y, p, n_bins=2)
    doubled = reliability_band(y, p, n_bins=2, sample_weight=[2, 2, 2, 2])
    for a, b in zip(unit, doubled):
        np.testing.assert_allclose(a, b, rtol=1e-14)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, np.nan])
def test_reliability_band_bad_level(level):
    with pytest.raises(ValueError, match=r"`level` must (lie in \(0, 1\)|be finite)"):
        reliability_band([0, 1], [0.5, 0.5], level=level)


def test_reliability_diagram_shades_one_band_per_model_unless_disabled():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    fig, (a, b) = plt.subplots(1, 2)
    try:
        reliability_diagram(y, {"a": p, "b": p ** 2}, ax=a)
        reliability_diagram(y, {"a": p, "b": p ** 2}, ax=b, confidence=None)
        assert len(a.collections) == 2 and len(b.collections) == 0
        assert len(a.lines) == len(b.lines) == 3
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- issue 12: options, extreme weights, cancellation

@pytest.mark.parametrize("call, kind, words", [
    (lambda: log_loss([0, 1], [0.5, 0.5], base="x"), TypeError, "`base`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], base=None), TypeError, "`base`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], base=True), TypeError, "`base`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], base=[2.0]), TypeError, "`base`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], eps="x"), TypeError, "`eps`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], eps=None), TypeError, "`eps`"),
    (lambda: log_loss([0, 1], [0.5, 0.5], eps=np.nan), ValueError, "`eps`"),
    (lambda: calibration_report([0, 1], {"a": [0.5, 0.5]}, eps="x"), TypeError, "`eps`"),
    (lambda: reliability_band([0, 1], [0.5, 0.5], level=None), TypeError, "`level`"),
    (lambda: reliability_band([0, 1], [0.5, 0.5], level=np.nan), ValueError, "`level`"),
    (lambda: reliability_diagram([0, 1], {"a": [0.5, 0.5]}, confidence="x"), TypeError, "`confidence`"),
    (lambda: reliability_diagram([0, 1], {"a": [0.5, 0.5]}, confidence=1.5), ValueError, "`confidence`"),
    (lambda: reliability_curve([0, 1], [0.5, 0.5], n_bins="3"), TypeError, "`n_bins`"),
    (lambda: reliability_diagram([0, 1], {"a": [0.5, 0.5]}, ax="x"), TypeError, "`ax`"),
])
def test_bad_options_name_the_argument(call, kind, words):
    with pytest.raises(kind) as err:
        call()
    assert words in str(err.value)
    assert "could not convert" not in str(err.value) and "not supported between" not in str(err.value)


def _exact_mean(values, w):
    "Σ w·v / Σ w in exact rational arithmetic over the float inputs (zero weights left out)."
    from fractions import Fraction
    num = sum(Fraction(float(wi)) * Fraction(float(v)) for wi, v in zip(w, values) if wi > 0)
    return float(num / sum(Fraction(float(wi)) for wi in w))


extreme_factors = st.sampled_from([2.0**-1070, 2.0**-1000, 1e-200, 1 / 3, 3.0, 1e200, 2.0**1000, 2.0**1015])


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(max_size=30), extreme_factors)
def test_brier_and_log_loss_extreme_weights_against_exact(data, factor):
    """Weights of 1e±200 or near the float limits give the weighted means of exact rational arithmetic."""
    y, p, w = data
    w = w * factor
    assert brier_score(y, p, sample_weight=w) == pytest.approx(_exact_mean((p - y) ** 2, w), rel=1e-13, abs=1e-300)
    import mpmath
    mpmath.mp.prec = 200
    nats = [-mpmath.log(mpmath.mpf(float(pi))) if yi == 1 else -mpmath.log1p(-mpmath.mpf(float(pi))) for yi, pi in zip(y, p)]
    if all(mpmath.isfinite(v) for v in nats):
        ref = _exact_mean([float(v / mpmath.log(2)) for v in nats], w)
        assert log_loss(y, p, sample_weight=w, eps=0) == pytest.approx(ref, rel=1e-13, abs=1e-300)


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(max_size=40), bin_counts, strategies, st.integers(-1070, 1015))
def test_binned_metrics_exactly_invariant_to_power_of_two_weights(data, n_bins, strategy, k):
    """Scaling every weight by 2^k changes no bit of the curve, the ECE or the band (scaling is exact when done as a
    power of two, and the metrics are defined by ratios of weights)."""
    y, p, w = data
    scaled = np.ldexp(w, k)        # rounds when it lands among the subnormals, so compare with its exact unscaling
    w = np.ldexp(scaled, -k)
    for f in (reliability_curve, reliability_band):
        for a, b in zip(f(y, p, n_bins=n_bins, strategy=strategy, sample_weight=w),
                        f(y, p, n_bins=n_bins, strategy=strategy, sample_weight=np.ldexp(w, k))):
            np.testing.assert_array_equal(a, b)
    assert expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy, sample_weight=w) == \
        expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy, sample_weight=np.ldexp(w, k))


def _band_reference(y, p, w, n_bins, level):
    "Wilson interval of statsmodels at the Kish effective size (Σw)²/Σw², both computed in exact rationals."
    from fractions import Fraction
    from statsmodels.stats.proportion import proportion_confint
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.searchsorted(edges[1:-1], p, side="left")
    lo, hi = [], []
    for b in range(n_bins):
        sel = [i for i in range(len(p)) if idx[i] == b and w[i] > 0]
        if not sel: continue
        W = sum(Fraction(float(w[i])) for i in sel)
        n_eff = float(W * W / sum(Fraction(float(w[i])) ** 2 for i in sel))
        freq = float(sum(Fraction(float(w[i])) for i in sel if y[i] == 1) / W)
        a, b_ = proportion_confint(freq * n_eff, n_eff, alpha=1 - level, method="wilson")
        lo.append(max(a, 0.0)); hi.append(min(b_, 1.0))
    return np.array(lo), np.array(hi)


@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(max_size=40), bin_counts, extreme_factors, st.sampled_from([0.8, 0.95, 0.99]))
def test_reliability_band_extreme_weights_against_statsmodels(data, n_bins, factor, level):
    y, p, w = data
    _, _, lo, hi = reliability_band(y, p, n_bins=n_bins, level=level, sample_weight=w * factor)
    ref_lo, ref_hi = _band_reference(y, p, w * factor, n_bins, level)
    np.testing.assert_allclose(lo, ref_lo, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, rtol=1e-9, atol=1e-12)


def test_reliability_band_reported_extremes():
    y, p = [0, 1, 1, 0, 1], [0.1, 0.15, 0.6, 0.65, 0.9]
    unit = reliability_band(y, p, n_bins=3)
    for factor in (1e-200, 1e200, 1e-320, 1.5e308 / 5):
        got = reliability_band(y, p, n_bins=3, sample_weight=[factor] * 5)
        for a, b in zip(unit, got):
            np.testing.assert_allclose(b, a, rtol=1e-14)


def test_log_loss_near_zero_probability_of_the_label_one():
    """y = 0 with a tiny p costs −log2(1 − p) ≈ p/ln 2: computed as 1 − p first it rounds to 0 bits."""
    import mpmath
    mpmath.mp.prec = 200
    for p in (1e-20, 3e-17, 1e-9, 0.3):
        ref = float(-mpmath.log(1 - mpmath.mpf(p)) / mpmath.log(2))
        assert log_loss([0], [p], eps=0) == pytest.approx(ref, rel=1e-15, abs=0)
        assert log_loss([0], [p], base=np.e, eps=0) == pytest.approx(ref * float(mpmath.log(2)), rel=1e-15, abs=0)


def test_wilson_lower_bound_has_no_cancellation():
    """A bin whose frequency is far below z²/n: the lower bound f²/(1 + z²/n)/(centre + half) against mpmath (the
    textbook centre − half loses every digit)."""
    import mpmath
    mpmath.mp.prec = 200
    w = [1.0, 1e-12]
    _, freq, lo, hi = reliability_band([0, 1], [0.5, 0.5], n_bins=1, level=0.95, sample_weight=w)
    f, n = mpmath.mpf(float(freq[0])), (mpmath.mpf(1) + mpmath.mpf(1e-12)) ** 2 / (1 + mpmath.mpf(1e-12) ** 2)
    z = mpmath.sqrt(2) * mpmath.erfinv(mpmath.mpf(0.95))
    centre = (f + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * mpmath.sqrt(f * (1 - f) / n + z * z / (4 * n * n))
    assert lo[0] == pytest.approx(float(centre - half), rel=1e-12, abs=0)
    assert hi[0] == pytest.approx(float(centre + half), rel=1e-12, abs=0)


# ---------------------------------------------------------------- multiclass metrics (issue 13, part 4)

from isocal.metrics_multiclass import (bootstrap_interval, classwise_ece, multiclass_brier_score,  # noqa: E402
                                       multiclass_log_loss, multiclass_reliability_diagram, top_label_ece)


def _reference_binary_ece(target, p, n_bins, strategy, w=None):
    """ECE straight from the definition: bins (e_{b-1}, e_b], the first one closed, loops over samples."""
    w = np.ones(len(p)) if w is None else w
    edges = (np.linspace(0, 1, n_bins + 1) if strategy == "uniform"
             else np.percentile(p, np.linspace(0, 1, n_bins + 1) * 100))   # sklearn's edges, same rounding
    total, ece = sum(w), 0.0
    for b in range(n_bins):
        members = [i for i in range(len(p)) if _bin_of(p[i], edges) == b]
        if sum(w[i] for i in members) > 0:
            ece += abs(sum(w[i] * (target[i] - p[i]) for i in members)) / total
    return ece


def _bin_of(v, edges):
    "The first bin b with v <= e_{b+1} (the last bin if none: v above every inner edge)."
    for b in range(len(edges) - 2):
        if v <= edges[b + 1]:
            return b
    return len(edges) - 2


@st.composite
def labelled_matrices(draw, max_n=40):
    """Labels 0..K-1 and an (n, K) probability matrix whose rows sum to 1 (normalised positive draws)."""
    n, K = draw(st.integers(1, max_n)), draw(st.integers(2, 5))
    raw = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n * K, max_size=n * K))).reshape(n, K) + 1e-3
    y = np.array(draw(st.lists(st.integers(0, K - 1), min_size=n, max_size=n)))
    return y, raw / raw.sum(axis=1, keepdims=True)


@settings(max_examples=40)
@given(labelled_matrices(), bin_counts, strategies)
def test_classwise_and_top_label_ece_match_the_definition(data, n_bins, strategy):
    y, P = data
    K = P.shape[1]
    ref_cw = np.mean([_reference_binary_ece((y == k).astype(float), P[:, k], n_bins, strategy) for k in range(K)])
    assert classwise_ece(y, P, n_bins=n_bins, strategy=strategy) == pytest.approx(ref_cw, abs=1e-12)
    pred = np.argmax(P, axis=1)
    conf, right = P[np.arange(len(y)), pred], (pred == y).astype(float)
    ref_tl = _reference_binary_ece(right, conf, n_bins, strategy)
    assert top_label_ece(y, P, n_bins=n_bins, strategy=strategy) == pytest.approx(ref_tl, abs=1e-12)
    ref_cond = sum(np.mean(pred == c) * _reference_binary_ece(right[pred == c], conf[pred == c], n_bins, strategy)
                   for c in np.unique(pred))
    assert top_label_ece(y, P, n_bins=n_bins, strategy=strategy, conditional=True) == pytest.approx(ref_cond, abs=1e-12)


def test_multiclass_ece_hand_computed():
    P = np.tile([0.8, 0.1, 0.1], (4, 1))
    assert top_label_ece([0, 0, 1, 0], P) == pytest.approx(0.05, abs=1e-15)
    assert classwise_ece([0, 0, 1, 0], P) == pytest.approx((0.05 + 0.15 + 0.1) / 3, abs=1e-15)
    # two predicted classes: confidence 0.6 (right 1 of 2) and 0.9 (right 2 of 2), one uniform bin each
    P2 = [[0.6, 0.4, 0.0], [0.6, 0.4, 0.0], [0.05, 0.05, 0.9], [0.05, 0.05, 0.9]]
    assert top_label_ece([0, 1, 2, 2], P2) == pytest.approx((0.1 + 0.1) / 2, abs=1e-15)
    assert top_label_ece([0, 1, 2, 2], P2, n_bins=1) == pytest.approx(abs(0.75 - 0.75), abs=1e-15)
    assert top_label_ece([0, 1, 2, 2], P2, n_bins=1, conditional=True) == pytest.approx(0.1, abs=1e-15)


@settings(max_examples=40)
@given(labelled_matrices())
def test_multiclass_brier_and_log_loss_match_scikit_learn(data):
    from sklearn.metrics import log_loss as sk_ll
    y, P = data
    K = P.shape[1]
    onehot = np.eye(K)[y]
    assert multiclass_brier_score(y, P) == pytest.approx(np.mean(((onehot - P) ** 2).sum(axis=1)), abs=1e-14)
    assert multiclass_log_loss(y, P, base=np.e) == pytest.approx(sk_ll(y, P, labels=range(K)), rel=1e-12)


def test_binary_case_of_the_multiclass_scores():
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.2, 0.7, 0.9, 0.4, 0.35])
    P = np.c_[1 - p, p]
    assert multiclass_log_loss(y, P) == pytest.approx(log_loss(y, p), rel=1e-14)
    assert multiclass_brier_score(y, P) == pytest.approx(2 * brier_score(y, p), rel=1e-14)


def test_bootstrap_interval_brackets_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(3)
    P = rng.dirichlet([1, 1, 1], size=300)
    y = np.array([rng.choice(3, p=row) for row in P])
    est = classwise_ece(y, P)
    lo, hi = bootstrap_interval(classwise_ece, y, P, n_resamples=200, random_state=1)
    assert lo < hi and lo <= est * 1.5 and (lo, hi) == bootstrap_interval(classwise_ece, y, P, n_resamples=200,
                                                                       random_state=1)
    with pytest.raises(ValueError, match="`n_resamples` must be a positive integer"):
        bootstrap_interval(classwise_ece, y, P, n_resamples=0)


@pytest.mark.parametrize("fn", [classwise_ece, top_label_ece, multiclass_brier_score, multiclass_log_loss])
def test_multiclass_metrics_name_the_bad_argument(fn):
    good = np.array([[0.5, 0.5], [0.2, 0.8]])
    with pytest.raises(ValueError, match="`y_proba` must be a 2-D array"):
        fn([0, 1], [0.5, 0.5])
    with pytest.raises(ValueError, match="the rows of `y_proba` must sum to 1"):
        fn([0, 1], [[0.5, 0.6], [0.2, 0.8]])
    with pytest.raises(ValueError, match="`y_proba` must be finite"):
        fn([0, 1], [[np.nan, 0.5], [0.2, 0.8]])
    with pytest.raises(ValueError, match="`y_true` must hold class numbers 0 to 1"):
        fn([0, 2], good)
    with pytest.raises(ValueError, match="`y_true` must hold class numbers"):
        fn([0, 0.5], good)
    with pytest.raises(ValueError, match="length mismatch"):
        fn([0, 1, 1], good)
    with pytest.raises(ValueError, match=r"`y_true` must be one-dimensional.*the observed labels come first"):
        fn(good, [0, 1])                            # swapped


def test_multiclass_reliability_diagram_has_a_panel_per_class_and_the_top_label():
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
    fig = multiclass_reliability_diagram([0, 1, 2, 2], {"a": P, "b": np.full((4, 3), 1 / 3)})
    assert [ax.get_title() for ax in fig.axes] == ["class 0", "class 1", "class 2", "top label"]
    assert len(fig.axes[3].lines) == 3          # diagonal + two models
    plt.close(fig)
    with pytest.raises(ValueError, match="same number of columns"):
        multiclass_reliability_diagram([0, 1], {"a": [[0.5, 0.5]] * 2, "b": [[0.5, 0.25, 0.25]] * 2})


# ---------------------------------------------------------------- issue 30: weighted quantile bins, argument order

@settings(max_examples=100, deadline=None)
@given(labelled_probabilities(max_size=60), st.integers(1, 8), st.integers(-60, 60))
def test_quantile_bins_honour_sample_weight(data, n_bins, k):
    """Quantile edges are weighted quantiles: each bin's weight is within one sample's weight of W / n_bins (the
    ideal), equal weights give the unweighted edges, and only the ratios of the weights matter (2^k scaling)."""
    from isocal.metrics import _bin_index
    y, p, w = data
    idx = _bin_index(p, n_bins, "quantile", w)
    np.testing.assert_array_equal(_bin_index(p, n_bins, "quantile", np.ldexp(w, k)), idx)
    np.testing.assert_array_equal(_bin_index(p, n_bins, "quantile", np.full(len(p), 0.7)),
                                  _bin_index(p, n_bins, "quantile"))
    per_bin = np.bincount(idx, weights=w, minlength=n_bins)
    cum = np.cumsum(per_bin)                       # the first b bins hold about b / n_bins of the weight
    ideal = w.sum() * np.arange(1, n_bins + 1) / n_bins
    ties = max(np.bincount(np.unique(p, return_inverse=True)[1], weights=w))   # a tie group cannot be split
    assert np.all(np.abs(cum - ideal) <= ties + w.max() + 1e-9 * w.sum())


def test_quantile_bins_used_to_ignore_weights():
    """Half the weight on the smallest probabilities: with two quantile bins the lower bin must hold those samples
    alone (the unweighted median would put half of the samples in each)."""
    p = np.linspace(0.05, 0.95, 10)
    w = np.r_[np.full(2, 4.0), np.ones(8)]
    assert reliability_curve(np.zeros(10), p, n_bins=2, strategy="quantile", sample_weight=w)[2].tolist() == [2, 8]


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_probabilities_passed_as_labels_are_refused(metric):
    y, p = np.array([0, 1, 1, 0]), np.array([0.2, 0.7, 0.9, 0.4])
    with pytest.raises(ValueError, match=r"these look like probabilities, but the observed labels come first"):
        metric(p, y)
