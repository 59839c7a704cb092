"""The validation layer of issue 30: every public entry point converts its arrays through `isocal.core`, which names
the argument (a ragged list is refused as ragged, never with NumPy's "setting an array element with a sequence"),
and checks its options through core's checkers (`check_flag`, `check_integer`, `check_real`, `check_seed`): a
string 'False' is not a flag, 2**70 is not a count, -1 and True are not seeds. Each case failed before."""
import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from isocal import *  # noqa: F403 (the public API is what is checked)
from isocal import aum as A, diagnostics as D, forward as F, metrics as M, metrics_multiclass as MM  # noqa: E402
from isocal import online_to_batch as O, thresholds as T, venn_abers as V  # noqa: E402
from isocal.labeler import ThresholdLabeler  # noqa: E402
from isocal.pava import Staircase  # noqa: E402

warnings.simplefilter("ignore")

R = [[0.1, 0.2], [0.3]]         # ragged
x = np.array([0.1, 0.4, 0.35, 0.8]); y01 = np.array([0., 1, 0, 1]); p = np.array([.2, .6, .4, .9])
P = np.array([[.7, .3], [.4, .6], [.5, .5], [.2, .8]])
bp = A.binary_breakpoints([0, 1, 0, 1]); X2 = np.c_[x, x ** 2]
iso = IsotonicCalibrator().fit(x, y01); va = VennAbers().fit(x, y01)
cva = CrossVennAbers().fit(x, y01, [0, 1, 0, 1])
mc = MulticlassCalibrator().fit(P, [0, 1, 0, 1])
st = Staircase([0.0, 1.0], [0.5, 2.0], [0.1, 0.9])
lab = ThresholdLabeler().fit(x, [0, 1, 2, 1])
RAGGED = {
 'isotonic_regression y': lambda: isotonic_regression(R), 'isotonic_regression weights': lambda: isotonic_regression([1., 2.], R),
 'fit_staircase x': lambda: fit_staircase(R, [1., 2.]), 'fit_staircase y': lambda: fit_staircase([1., 2.], R),
 'fit_staircase weights': lambda: fit_staircase([1., 2.], [1., 2.], R),
 'Staircase x_lo': lambda: Staircase(R, [1.0], [1.0]), 'Staircase call': lambda: st(R),
 'IsoCal fit X': lambda: IsotonicCalibrator().fit(R, [1., 2.]), 'IsoCal fit y': lambda: IsotonicCalibrator().fit([1., 2.], R),
 'IsoCal fit sw': lambda: IsotonicCalibrator().fit([1., 2.], [1., 2.], R), 'IsoCal predict': lambda: iso.predict(R),
 'VA fit scores': lambda: VennAbers().fit(R, [0, 1]), 'VA fit labels': lambda: VennAbers().fit([0.1, 0.2], R),
 'VA predict': lambda: va.predict_interval(R), 'VA proba': lambda: va.predict_proba(R),
 'CVA fit folds': lambda: CrossVennAbers().fit(x, y01, R), 'CVA predict': lambda: cva.predict_interval(R),
 'merge_intervals p0': lambda: V.merge_intervals(R, [0.1, 0.2]), 'merge_intervals p1': lambda: V.merge_intervals([0.1, 0.2], R),
 'VAC fit X': lambda: VennAbersCalibrator().fit(R, [0, 1]), 'VAC fit y': lambda: VennAbersCalibrator().fit(X2, [[0, 1], [1]]),
 'forward_predict x_past': lambda: forward_predict(R, [0., 1.], 0.5), 'forward_predict y_past': lambda: forward_predict([0., 1.], R, 0.5),
 'loo x': lambda: loo_predictions(R, [0., 1.]), 'loo y': lambda: loo_predictions([0., 1.], R),
 'loo_all x': lambda: F.loo_all(R, [0., 1.]), 'naive x': lambda: F.loo_predictions_naive(R, [0., 1.]),
 'isotonic_loss x': lambda: F.isotonic_loss(R, [0., 1.]), 'excess_loo y': lambda: excess_loo([0., 1.], R),
 'regret_increment x': lambda: F.regret_increment(R, [0., 1.]), 'simulate_regret x': lambda: F.simulate_regret(R, [0., 1.], progress=False),
 'ew_predict x_design': lambda: O.ew_predict(R, [0.1], [1.0]), 'o2b_predict x_past': lambda: O.o2b_predict(R, [0., 1.], 0.5),
 'o2b_loo x': lambda: O.o2b_loo(R, [0., 1.]),
 'prepare a': lambda: T.prepare(R, [0, 1], 2), 'prepare y': lambda: T.prepare([0.1, 0.2], R, 2),
 'prepare sw': lambda: T.prepare([0.1, 0.2], [0, 1], 2, sample_weight=R),
 'optimal_thresholds a': lambda: optimal_thresholds(R, [0, 1], 2), 'threshold_labels u': lambda: T.threshold_labels(R, [0.5]),
 'threshold_labels t': lambda: T.threshold_labels([0.1], R), 'empirical_risk a': lambda: T.empirical_risk(R, [0, 1], [0.5], 2),
 'loss_matrix': lambda: T.loss_matrix(R, 2),
 'Labeler fit X': lambda: ThresholdLabeler().fit(R, [0, 1]), 'Labeler fit y': lambda: ThresholdLabeler().fit([0.1, 0.2], R),
 'Labeler predict': lambda: lab.predict(R),
 'make_breakpoints value': lambda: A.make_breakpoints(R, [1, 0], [0, -1], [0, 1]), 'make_breakpoints example': lambda: A.make_breakpoints([0., 1.], [1, 0], [0, -1], R),
 'binary_breakpoints y': lambda: A.binary_breakpoints(R), 'aum pred': lambda: A.aum(bp, R), 'roc_curve pred': lambda: A.roc_curve(bp, R),
 'aum_gradient X': lambda: A.aum_gradient(bp, R, [1.]), 'aum_gradient w': lambda: A.aum_gradient(bp, X2, R),
 'aum_line_search_lines intercept': lambda: A.aum_line_search_lines(R, [1., 2.], [1., 0.], [0., -1.]),
 'aum_line_search X': lambda: aum_line_search(bp, R, [1.]), 'aum_line_search direction': lambda: aum_line_search(bp, X2, [1., 1.], R),
 'aum_gd X': lambda: aum_gradient_descent(bp, R, [1.]), 'aum_gd weights': lambda: aum_gradient_descent(bp, X2, R),
 'error_function_breakpoints': lambda: A.error_function_breakpoints(R, [0., 1.], [0., 1.], [1., 0.]),
 'log_loss y_true': lambda: log_loss(R, [0.1, 0.2]), 'log_loss y_proba': lambda: log_loss([0, 1], R),
 'brier sw': lambda: brier_score([0, 1], [0.1, 0.2], sample_weight=R), 'ece y_proba': lambda: expected_calibration_error([0, 1], R),
 'curve y_true': lambda: M.reliability_curve(R, [0.1, 0.2]), 'band y_proba': lambda: M.reliability_band([0, 1], R),
 'report probs': lambda: calibration_report([0, 1], {'a': R}), 'diagram y_true': lambda: reliability_diagram(R, {'a': [0.1, 0.2]}),
 'classwise y_proba': lambda: MM.classwise_ece([0, 1], [[0.5, 0.5], [1.0]]), 'mc log y_true': lambda: MM.multiclass_log_loss(R, P[:2]),
 'bootstrap y_proba': lambda: MM.bootstrap_interval(MM.classwise_ece, [0, 1], [[0.5, 0.5], [1.0]]),
 'mc diagram': lambda: MM.multiclass_reliability_diagram([0, 1], {'a': [[0.5, 0.5], [1.0]]}),
 'corp y_true': lambda: corp_recalibrate(R, [0.1, 0.2]), 'corp y_proba': lambda: corp_recalibrate([0, 1], R),
 'decomp sw': lambda: score_decomposition([0, 1], [0.1, 0.2], sample_weight=R), 'mct y_proba': lambda: miscalibration_test([0, 1], R),
 'consistency y_proba': lambda: D.consistency_band(R), 'confidence y_true': lambda: D.confidence_band(R, [0.1, 0.2]),
 'corp diagram probs': lambda: corp_reliability_diagram([0, 1], {'a': R}), 'qrecal y_pred': lambda: D.quantile_recalibrate([1., 2.], R, 0.5),
 'qdecomp y_true': lambda: D.quantile_decomposition(R, [1., 2.], 0.5), 'qdiagram': lambda: D.quantile_reliability_diagram([1., 2.], {'a': R}, 0.5),
 'MC fit P': lambda: MulticlassCalibrator().fit([[0.5, 0.5], [1.0]], [0, 1]), 'MC fit y': lambda: MulticlassCalibrator().fit(P[:2], R),
 'MC predict': lambda: mc.predict_proba([[0.5, 0.5], [1.0]]), 'fold_ids': lambda: V.fold_ids(R),
}


@pytest.mark.parametrize("case", sorted(RAGGED))
def test_ragged_input_is_refused_by_name(case):
    with pytest.raises((ValueError, TypeError)) as err:
        RAGGED[case]()
    message = str(err.value)
    assert "setting an array element" not in message and "`" in message, message


x12 = np.linspace(0.05, 0.95, 12)
y12 = np.array([0.0, 1.0] * 6)
X12 = np.c_[x12, x12 ** 2]
bp12 = A.binary_breakpoints(y12.astype(int))
OPTIONS = {   # (call, the argument the message must name)
    "loo_predictions_naive progress='False'": (lambda: F.loo_predictions_naive(x12, y12, progress="False"), "progress"),
    "simulate_regret progress=1": (lambda: F.simulate_regret(x12, y12, n_perm=1, progress=1), "progress"),
    "aum_gradient_descent progress='False'": (lambda: aum_gradient_descent(bp12, X12, [1.0, 1.0], max_iter=1, progress="False"), "progress"),
    "miscalibration_test progress='False'": (lambda: miscalibration_test(y12, x12, n_resamples=2, progress="False"), "progress"),
    "miscalibration_test seed=-1": (lambda: miscalibration_test(y12, x12, n_resamples=2, seed=-1), "seed"),
    "simulate_regret seed=True": (lambda: F.simulate_regret(x12, y12, n_perm=1, seed=True, progress=False), "seed"),
    "o2b_predict seed=True": (lambda: O.o2b_predict(x12, y12, 0.5, n_samples=2, seed=True), "seed"),
    "o2b_loo seed=-1": (lambda: O.o2b_loo(x12, y12, n_rounds=2, seed=-1), "seed"),
    "fold_ids random_state=True": (lambda: V.fold_ids(12, 3, random_state=True), "random_state"),
    "VennAbersCalibrator random_state=True": (lambda: VennAbersCalibrator(random_state=True).fit(X12, y12), "random_state"),
    "aum_gradient_descent random_state=True": (lambda: aum_gradient_descent(bp12, X12, None, max_iter=1, random_state=True), "random_state"),
    "bootstrap_interval random_state=-1": (lambda: MM.bootstrap_interval(MM.classwise_ece, [0, 1], [[.5, .5], [.2, .8]], n_resamples=2, random_state=-1), "random_state"),
    "confidence_band seed=1.5": (lambda: D.confidence_band(y12, x12, n_resamples=2, seed=1.5), "seed"),
    "simulate_regret n_perm=2**70": (lambda: F.simulate_regret(x12, y12, n_perm=2**70, progress=False), "n_perm"),
    "VennAbersCalibrator n_splits=2**70": (lambda: VennAbersCalibrator(n_splits=2**70).fit(X12, y12), "n_splits"),
    "MulticlassCalibrator n_splits=2**70": (lambda: MulticlassCalibrator(n_splits=2**70).fit(np.c_[1 - x12, x12], y12.astype(int)), "n_splits"),
    "o2b_loo n_rounds=2**70": (lambda: O.o2b_loo(x12, y12, n_rounds=2**70), "n_rounds"),
    "o2b_predict n_samples=2**70": (lambda: O.o2b_predict(x12, y12, 0.5, n_samples=2**70), "n_samples"),
    "aum_gradient_descent max_iter=2**70": (lambda: aum_gradient_descent(bp12, X12, [1.0, 1.0], max_iter=2**70), "max_iter"),
    "aum_gradient_descent patience=2**70": (lambda: aum_gradient_descent(bp12, X12, [1.0, 1.0], max_iter=1, patience=2**70), "patience"),
    "prepare n_classes=2**70": (lambda: T.prepare(np.linspace(0, 1, 6), [1, 2, 3] * 2, 2**70), "n_classes"),
    "segment_sequence n=2**70": (lambda: F.segment_sequence(2**70), "n"),
    "ew_levels t=2**70": (lambda: O.ew_levels(2**70), "t"),
    "make_breakpoints n_examples=2**70": (lambda: A.make_breakpoints([0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [0, 1], n_examples=2**70), "n_examples"),
    "expected_calibration_error n_bins=2**70": (lambda: expected_calibration_error(y12, x12, n_bins=2**70), "n_bins"),
    "corp_reliability_diagram panel_size=0": (lambda: corp_reliability_diagram(y12, {"a": x12}, panel_size=0, n_resamples=2), "panel_size"),
    "quantile_reliability_diagram panel_size=-1": (lambda: D.quantile_reliability_diagram([1.0, 2.0], {"a": [1.0, 2.0]}, 0.5, panel_size=-1), "panel_size"),
    "corp_reliability_diagram overlay='yes'": (lambda: corp_reliability_diagram(y12, {"a": x12}, overlay="yes", n_resamples=2), "overlay"),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_options_are_checked_by_name(case):
    call, name = OPTIONS[case]
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert f"`{name}`" in str(err.value), str(err.value)
