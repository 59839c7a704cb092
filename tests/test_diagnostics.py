"""Tests of isocal.diagnostics: CORP recalibration against scikit-learn and brute force, the exact score
decomposition, the miscalibration test's null distribution, bands, the diagram, and errors naming the argument."""
import itertools
import math
from fractions import Fraction

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.isotonic import IsotonicRegression

from isocal.diagnostics import (confidence_band, consistency_band, corp_recalibrate, corp_reliability_diagram,
                                miscalibration_test, quantile_decomposition, quantile_recalibrate,
                                quantile_reliability_diagram, score_decomposition)


@st.composite
def forecasts(draw, max_size=60, weighted=None, grid=None):
    """Forecasts in [0, 1] (from a small grid when `grid`, so that ties are common), labels, and weights or None."""
    n = draw(st.integers(1, max_size))
    if grid if grid is not None else draw(st.booleans()):
        p = draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0]), min_size=n, max_size=n))
    else:
        p = draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    use_w = draw(st.booleans()) if weighted is None else weighted
    w = draw(st.lists(st.floats(0.01, 50.0), min_size=n, max_size=n)) if use_w else None
    return np.array(p), np.array(y, float), None if w is None else np.array(w)


# --- recalibration against independent references -------------------------------------------------------------

@given(forecasts())
def test_recalibration_equals_sklearn_isotonic(data):
    p, y, w = data
    # scikit-learn pools forecasts closer than 1e-15 as ties (`_make_unique`); isocal's ties are exact equality
    p = np.round(p, 6)
    ref = IsotonicRegression(y_min=0, y_max=1).fit(p, y, sample_weight=w).predict(p)
    np.testing.assert_allclose(corp_recalibrate(y, p, sample_weight=w), ref, rtol=0, atol=1e-12)


def _mean(values, w):
    return sum(wi * v for wi, v in zip(w, values)) / sum(w)


def _brier(q, y, w):
    return _mean([(yi - qi) ** 2 for qi, yi in zip(q, y)], w)


def _log(q, y, w):
    def loss(qi, yi):
        prob = qi if yi == 1 else 1 - qi
        return math.inf if prob == 0 else -math.log(prob)
    return _mean([loss(qi, yi) for qi, yi in zip(q, y)], w)


def _brute_force_best(p, y, w, score):
    """Best isotonic recalibration by exhaustion: every split of the distinct forecasts into consecutive groups, each
    group given its weighted label frequency (the minimiser of any proper score on it), kept if non-decreasing."""
    xs = np.unique(p)
    groups = [np.flatnonzero(p == x) for x in xs]
    best = (math.inf, None)
    for cuts in itertools.product([False, True], repeat=len(xs) - 1):
        blocks, start = [], 0
        for k, cut in enumerate(cuts, 1):
            if cut: blocks.append(range(start, k)); start = k
        blocks.append(range(start, len(xs)))
        q, levels = np.empty(len(p)), []
        for b in blocks:
            idx = np.concatenate([groups[k] for k in b])
            levels.append(sum(Fraction(w[i]) * Fraction(y[i]) for i in idx) / sum(Fraction(w[i]) for i in idx))
            q[idx] = float(levels[-1])
        if all(a <= b for a, b in zip(levels, levels[1:])):
            s = score(q, y, w)
            if s < best[0] - 1e-12: best = (s, q)
    return best


@pytest.mark.parametrize("score", [_brier, _log])
@given(data=forecasts(max_size=8))
def test_recalibration_is_the_optimal_isotonic_map(score, data):
    p, y, w = data
    w = np.ones(len(p)) if w is None else w
    best_score, best_q = _brute_force_best(p, y, w, score)
    p_hat = corp_recalibrate(y, p, sample_weight=w)
    assert score(p_hat, y, w) == pytest.approx(best_score, abs=1e-12)
    np.testing.assert_allclose(p_hat, best_q, rtol=0, atol=1e-12)


def test_ties_pooled_and_weights_honoured():
    np.testing.assert_array_equal(corp_recalibrate([1, 0, 1], [0.3, 0.3, 0.9], sample_weight=[3, 1, 1]),
                                  [0.75, 0.75, 1.0])
    # a zero weight neither moves the fit nor breaks it
    np.testing.assert_array_equal(corp_recalibrate([1, 0, 0], [0.1, 0.2, 0.3], sample_weight=[1, 0, 1]),
                                  [0.5, 0.5, 0.5])


# --- the decomposition ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("score", ["brier", "log"])
@given(data=forecasts())
def test_identity_exact_and_components_non_negative(score, data):
    p, y, w = data
    d = score_decomposition(y, p, score=score, sample_weight=w)
    assert d.mcb >= 0 and d.dsc >= 0 and d.unc >= 0
    assert d.score == d.mcb - d.dsc + d.unc
    if math.isfinite(d.score):
        assert Fraction(d.score) == Fraction(d.mcb) - Fraction(d.dsc) + Fraction(d.unc)


@pytest.mark.parametrize("score", ["brier", "log"])
@given(data=forecasts(max_size=8, weighted=False))
def test_components_match_exact_definitions(score, data):
    """MCB, DSC and UNC against the definitions computed independently (brute-force optimum, plain sums)."""
    p, y, _ = data
    w = np.ones(len(p))
    ref = _brier if score == "brier" else _log
    s_p, (s_hat, _), s_bar = ref(p, y, w), _brute_force_best(p, y, w, ref), ref([y.mean()] * len(p), y, w)
    d = score_decomposition(y, p, score=score)
    if math.isinf(s_p):
        assert d.score == d.mcb == math.inf
    else:
        assert d.score == pytest.approx(s_p, abs=1e-12) and d.mcb == pytest.approx(s_p - s_hat, abs=1e-12)
    assert d.dsc == pytest.approx(s_bar - s_hat, abs=1e-12) and d.unc == pytest.approx(s_bar, abs=1e-12)


def test_recalibrated_forecast_has_exactly_zero_mcb():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(size=40)
        y = (rng.uniform(size=40) < p).astype(float)
        w = rng.exponential(size=40)
        p_hat = corp_recalibrate(y, p, sample_weight=w)
        for score in ("brier", "log"):
            assert score_decomposition(y, p_hat, score=score, sample_weight=w).mcb == 0.0


@given(forecasts())
def test_recalibration_idempotent_monotone_and_exact_zeros(data):
    """Recalibrating p̂ gives p̂ bit for bit (so MCB(p̂) == 0 exactly); one block gives DSC == 0 exactly."""
    p, y, w = data
    p_hat = corp_recalibrate(y, p, sample_weight=w)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(p_hat[order]) >= 0) and np.all((0 <= p_hat) & (p_hat <= 1))
    np.testing.assert_array_equal(corp_recalibrate(y, p_hat, sample_weight=w), p_hat)
    for score in ("brier", "log"):
        d = score_decomposition(y, p, score=score, sample_weight=w)
        assert score_decomposition(y, p_hat, score=score, sample_weight=w).mcb == 0.0
        if np.all(p_hat == p_hat[0]):
            assert d.dsc == 0.0


@pytest.mark.parametrize("score", ["brier", "log"])
@given(data=forecasts(), up=st.booleans())
def test_non_negative_one_ulp_from_the_recalibration(score, data, up):
    """A forecast one ulp away from its recalibration can score (in floats) below the recalibration's computed score;
    MCB and DSC must still come out >= 0 with the identity exact."""
    p, y, w = data
    p = np.clip(np.nextafter(corp_recalibrate(y, p, sample_weight=w), 1.0 if up else 0.0), 0.0, 1.0)
    d = score_decomposition(y, p, score=score, sample_weight=w)
    assert d.mcb >= 0 and d.dsc >= 0 and d.score == d.mcb - d.dsc + d.unc


def test_infinite_log_score():
    d = score_decomposition([1, 0, 1], [0.0, 0.5, 1.0], score="log")
    assert d.score == d.mcb == math.inf and math.isfinite(d.dsc) and d.score == d.mcb - d.dsc + d.unc
    # a certain mistake of weight zero costs nothing
    d = score_decomposition([1, 0, 1], [0.0, 0.5, 1.0], score="log", sample_weight=[0, 1, 1])
    assert math.isfinite(d.score)


def test_decomposition_invariant_to_weight_scale():
    p, y = [0.1, 0.4, 0.35, 0.8, 0.9], [0, 1, 0, 1, 1]
    ref = score_decomposition(y, p, sample_weight=[1, 2, 3, 4, 5])
    for f in (2.0 ** -1000, 2.0 ** 1000):
        assert score_decomposition(y, p, sample_weight=np.array([1, 2, 3, 4, 5]) * f) == ref


# --- the miscalibration test -----------------------------------------------------------------------------------

def test_calibrated_pvalues_roughly_uniform():
    pvalues = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        p = rng.uniform(size=40)
        y = rng.uniform(size=40) < p
        pvalues.append(miscalibration_test(y, p, n_resamples=99, seed=seed + 1000).pvalue)
    assert stats.kstest(pvalues, "uniform").pvalue > 0.01


@pytest.mark.parametrize("score", ["brier", "log"])
def test_miscalibrated_gives_small_pvalue(score):
    rng = np.random.default_rng(7)
    p = rng.uniform(0.01, 0.99, size=200)
    y = rng.uniform(size=200) < p ** 3        # p overstates the probability everywhere
    res = miscalibration_test(y, p, score=score, n_resamples=199, seed=0)
    assert res.pvalue == 1 / 200 and res.statistic == score_decomposition(y, p, score=score).mcb


def test_pvalue_formula():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=30)
    y = rng.uniform(size=30) < p
    res = miscalibration_test(y, p, n_resamples=50, seed=3)
    assert res.pvalue == (1 + np.sum(res.null_statistics >= res.statistic)) / 51
    assert res.pvalue == miscalibration_test(y, p, n_resamples=50, seed=3).pvalue


# --- bands and diagram -----------------------------------------------------------------------------------------

def test_asymptotic_band_formula_and_resampling_agreement():
    p = np.repeat([0.2, 0.7], 80)
    x, lo, hi = consistency_band(p, method="asymptotic", level=0.9)
    z = stats.norm.ppf(0.95)
    np.testing.assert_allclose(hi, x + z * np.sqrt(x * (1 - x) / 80), rtol=1e-12)
    # with distinct-valued forecasts, the resampled CORP curve is the per-value frequency: a binomial proportion
    _, lo_r, hi_r = consistency_band(p, n_resamples=4000, seed=0, level=0.9)
    np.testing.assert_allclose(lo_r, stats.binom.ppf(0.05, 80, x) / 80, atol=1 / 80 + 1e-12)
    np.testing.assert_allclose(hi_r, stats.binom.ppf(0.95, 80, x) / 80, atol=1 / 80 + 1e-12)


def test_chernoff_band_quantiles_and_width():
    """Chernoff's distribution: 0.975 quantile 0.998 (Groeneboom & Wellner 2001, Table 1: 0.998181); the cube-root band
    for continuous forecasts has the width of the resampling band, and "asymptotic" picks it for distinct forecasts."""
    from isocal.diagnostics import _chernoff_quantile
    assert abs(_chernoff_quantile(0.975) - 0.998181) < 2e-3
    assert abs(_chernoff_quantile(0.5)) < 1e-9
    p = np.random.default_rng(4).uniform(0.05, 0.95, 3000)
    x, lo, hi = consistency_band(p, method="asymptotic")
    x2, lo2, hi2 = consistency_band(p, method="chernoff")
    np.testing.assert_array_equal(lo, lo2)
    _, lo_r, hi_r = consistency_band(p, n_resamples=300, seed=0)
    mid = (x > 0.3) & (x < 0.7)
    assert 0.85 < np.median((hi - lo)[mid]) / np.median((hi_r - lo_r)[mid]) < 1.15


def test_confidence_band_contains_the_curve_mostly():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=200)
    y = rng.uniform(size=200) < p
    x, lo, hi = confidence_band(y, p, n_resamples=200, seed=0)
    assert np.all(lo <= hi) and np.all(lo >= 0) and np.all(hi <= 1)
    p_hat = corp_recalibrate(y, p)[np.argsort(p)]
    assert np.mean((lo <= p_hat) & (p_hat <= hi)) > 0.8


def test_diagram_returns_figure_with_one_panel_per_forecast():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=100)
    y = rng.uniform(size=100) < p
    fig = corp_reliability_diagram(y, {"a": p, "b": p ** 2}, n_resamples=20)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len([ax for ax in fig.axes if ax.get_xlabel()]) == 2
    plt.close(fig)
    fig = corp_reliability_diagram(y, {"a": p, "b": p ** 2}, n_resamples=20, overlay=True,
                                   consistency="asymptotic", confidence=False)
    assert len([ax for ax in fig.axes if ax.get_xlabel()]) == 1
    plt.close(fig)


# --- errors name the argument ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: corp_recalibrate([0, 1], [0.2, 1.5]), "`y_proba` must lie in [0, 1]"),
    (lambda: corp_recalibrate([0, 1], [0.2, -0.1]), "`y_proba` must lie in [0, 1]"),
    (lambda: corp_recalibrate([0, 2], [0.2, 0.5]), "`y_true` must contain only the labels 0 and 1"),
    (lambda: corp_recalibrate([0, 1, 1], [0.2, 0.5]), "length mismatch"),
    (lambda: corp_recalibrate([0, 1], [0.2, np.nan]), "`y_proba` must be finite"),
    (lambda: corp_recalibrate([0, np.nan], [0.2, 0.5]), "`y_true` must be finite"),
    (lambda: corp_recalibrate([0, 1], [0.2, 0.5], sample_weight=[1, -1]), "`sample_weight` must be non-negative"),
    (lambda: corp_recalibrate([0, 1], [0.2, 0.5], sample_weight=[1, np.nan]), "`sample_weight` must be finite"),
    (lambda: corp_recalibrate([0, 1], [0.2, 0.5], sample_weight=[1]), "`sample_weight` has 1"),
    (lambda: corp_recalibrate([0, 1], [0.2, 0.5], sample_weight=[0, 0]), "`sample_weight` are all zero"),
    (lambda: corp_recalibrate([], []), "`y_true` is empty"),
    (lambda: score_decomposition([1], [0.5], score="crps"), "`score` must be one of"),
    (lambda: miscalibration_test([1], [0.5], n_resamples=0), "`n_resamples` must be a positive integer, got 0"),
    (lambda: miscalibration_test([1], [0.5], n_resamples=True), "`n_resamples` must be an integer, got True"),
    (lambda: consistency_band([0.5], level=0.0), "`level` must lie in (0, 1)"),
    (lambda: consistency_band([0.5], method="binned"), "`method` must be one of"),
    (lambda: corp_reliability_diagram([0, 1], [0.5, 0.5]), "`probs` must be a non-empty mapping"),
    (lambda: corp_reliability_diagram([0, 1], {"m": [0.5, 2.0]}), "`probs['m']` must lie in [0, 1]"),
    (lambda: corp_reliability_diagram([0, 1], {"m": [0.5, 0.5]}, consistency="x"), "`consistency` must be one of"),
    # issue 30: options through core's checkers, seeds, swaps
    (lambda: miscalibration_test([1], [0.5], seed=-1), "`seed` must be None, a non-negative integer"),
    (lambda: miscalibration_test([1], [0.5], seed=1.5), "`seed` must be None, a non-negative integer"),
    (lambda: miscalibration_test([1], [0.5], progress="False"), "`progress` must be True, False or None, got 'False'"),
    (lambda: confidence_band([1], [0.5], seed=-1), "`seed` must be None"),
    (lambda: consistency_band([0.5], seed=-1), "`seed` must be None"),
    (lambda: corp_reliability_diagram([0, 1], {"m": [0.5, 0.5]}, panel_size=0), "`panel_size` must lie in (0, inf)"),
    (lambda: corp_reliability_diagram([0, 1], {"m": [0.5, 0.5]}, overlay="yes"), "`overlay` must be True or False"),
    (lambda: corp_reliability_diagram([0, 1], {"m": [0.5, 0.5]}, seed=-1), "`seed` must be None"),
    (lambda: quantile_reliability_diagram([1.0, 2.0], {"m": [1.0, 2.0]}, 0.5, panel_size=0), "`panel_size` must lie in (0, inf)"),
    (lambda: miscalibration_test([1], [0.5], n_resamples=2**70), "`n_resamples` must be an integer of at most 2**63 - 1"),
    (lambda: corp_recalibrate([[0, 1], [1]], [0.2, 0.5]), "`y_true` is ragged"),
    (lambda: corp_recalibrate([0.2, 0.7, 0.4], [0, 1, 0]), "these look like probabilities, but the observed labels come first"),
    (lambda: score_decomposition([0.2, 0.7], [0, 1]), "the observed labels come first"),
    (lambda: miscalibration_test([0.2, 0.7], [0, 1]), "the observed labels come first"),
    (lambda: confidence_band([0.2, 0.7], [0, 1]), "the observed labels come first"),
    (lambda: corp_reliability_diagram(np.array([0.2, 0.7]), {"m": [0, 1]}), "the observed labels come first"),
    (lambda: corp_reliability_diagram([0, 1], np.array([0.2, 0.7])), "the observed labels come first"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert message in str(err.value)


# --- issue 30: per-forecast weight scales, argument order ------------------------------------------------------

@pytest.mark.parametrize("method", ["resampling", "normal", "chernoff", "asymptotic"])
def test_consistency_band_with_weights_spanning_1e300(method):
    """Weights 1e-300 beside 1e300: no NaN band and no RuntimeWarning (a single global weight scale turned the small
    weights into zeros: 0/0 frequencies in the resampling band, effective sizes of 0 in the normal band)."""
    import warnings
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    w = np.array([1e300, 1e300, 1e-300, 1e-300, 1e300, 1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, lo, hi = consistency_band(p, sample_weight=w, method=method, n_resamples=100, seed=0)
    assert np.isfinite(lo).all() and np.isfinite(hi).all() and np.all(lo <= hi)
    if method == "normal":                         # one sample per forecast: effective size 1, as with unit weights
        for a, b in zip((x, lo, hi), consistency_band(p, method="normal")):
            np.testing.assert_array_equal(a, b)


@settings(max_examples=50, deadline=None)
@given(data=forecasts(), k=st.integers(-1000, 1000))
def test_recalibration_depends_on_weight_ratios_within_groups_only(data, k):
    """Scaling the weights of the samples at one forecast value by 2^k (|k| up to 1000) never produces NaN or a value
    outside [0, 1]: each block's frequency is computed on its own weight scale (one global scale turned a block of
    tiny weights into 0/0)."""
    p, y, w = data
    w = np.ones(len(p)) if w is None else w
    first = p == p[0]
    w2 = w.copy()
    w2[first] = np.ldexp(w[first], k)
    p_hat = corp_recalibrate(y, p, sample_weight=w2)
    assert np.isfinite(p_hat).all() and np.all((0 <= p_hat) & (p_hat <= 1))


def test_quantile_functions_take_the_outcomes_first():
    """The outcomes come first, as in sklearn.metrics.mean_pinball_loss(y_true, y_pred): swapping them gives another
    (wrong) answer, which is why the order is the same as scikit-learn's everywhere."""
    y, q = [2., 1, 4, 3], [1., 2, 3, 4]
    assert quantile_recalibrate(y, q, 0.5).tolist() == [1., 1, 3, 3]
    y2 = [10., 1, 4, 3]
    assert quantile_recalibrate(y2, q, 0.5).tolist() != quantile_recalibrate(q, y2, 0.5).tolist()
    d = quantile_decomposition(y, q, 0.5)
    assert (d.score, d.mcb, d.dsc, d.unc) == (0.5, 0.25, 0.25, 0.5)
