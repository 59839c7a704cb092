"""Tests of isocal.venn_abers: IVAP against the refit definition and the venn-abers package, CVAP and Lemma 2,
the scikit-learn calibrator, bad input."""
from fractions import Fraction

import numpy as np
import pytest
import venn_abers
from hypothesis import given, strategies as st
from scipy.optimize import isotonic_regression as scipy_isotonic

from isocal.venn_abers import CrossVennAbers, VennAbers, VennAbersCalibrator, fold_ids, merge_intervals


# ---------------------------------------------------------------- independent references

def refit_interval(cal_s, cal_y, test_s):
    "(p0, p1) by refitting SciPy's isotonic regression on the tie-pooled calibration set plus the test point."
    cal_s, cal_y = np.asarray(cal_s, float), np.asarray(cal_y, float)
    out = np.empty((2, len(test_s)))
    for q, s in enumerate(test_s):
        for label in (0, 1):
            ux, inv = np.unique(np.append(cal_s, s), return_inverse=True)
            sums = np.bincount(inv, weights=np.append(cal_y, label))
            counts = np.bincount(inv).astype(float)
            out[label, q] = scipy_isotonic(sums / counts, weights=counts).x[np.searchsorted(ux, s)]
    return out


def exact_isotonic_at(xs, ys, s):
    "Exact (Fraction) isotonic fit at score s by the min-max formula over tie groups: max_a min_b mean[a..b]."
    ux = sorted(set(xs))
    sums = [sum(Fraction(int(y)) for x, y in zip(xs, ys) if x == u) for u in ux]
    cnts = [sum(1 for x in xs if x == u) for u in ux]
    i = ux.index(s)
    return max(min(sum(sums[a:b + 1]) / sum(cnts[a:b + 1]) for b in range(i, len(ux))) for a in range(i + 1))


def exact_interval(cal_s, cal_y, s):
    return tuple(exact_isotonic_at(list(cal_s) + [s], list(cal_y) + [label], s) for label in (0, 1))


def grid_tests(cal_s):
    "Test scores at, between, below and above the calibration scores."
    u = np.unique(cal_s)
    mids = (u[:-1] + u[1:]) / 2 if len(u) > 1 else np.empty(0)
    return np.r_[u, mids, u[0] - 1.0, u[-1] + 1.0, -1e300, 1e300]


tied_data = st.integers(1, 30).flatmap(lambda k: st.tuples(
    st.lists(st.integers(0, 6), min_size=k, max_size=k),
    st.lists(st.integers(0, 1), min_size=k, max_size=k)))


# ---------------------------------------------------------------- IVAP exactness

@given(tied_data)
def test_ivap_equals_exact_fraction_refit(data):
    s, y = data
    s = np.array(s, float) / 2
    va = VennAbers().fit(s, y)
    tests = grid_tests(s)[:-2]
    p0, p1 = va.predict_interval(tests)
    for q, t in enumerate(tests):
        e0, e1 = exact_interval(list(s), y, float(t))
        assert abs(p0[q] - float(e0)) <= 1e-12 and abs(p1[q] - float(e1)) <= 1e-12


@given(tied_data)
def test_ivap_equals_scipy_refit(data):
    s, y = np.array(data[0], float) - 3, np.array(data[1], float)
    tests = grid_tests(s)
    got = VennAbers().fit(s, y).predict_interval(tests)
    np.testing.assert_allclose(got, refit_interval(s, y, tests), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", ["k1_0", "k1_1", "all0", "all1", "heavy_ties", "one_score", "sharp"])
def test_ivap_edge_cases_against_refit(case):
    rng = np.random.default_rng(7)
    s, y = {
        "k1_0": ([0.3], [0]), "k1_1": ([0.3], [1]),
        "all0": (rng.normal(size=40), np.zeros(40)), "all1": (rng.normal(size=40), np.ones(40)),
        "heavy_ties": (rng.integers(0, 3, size=300).astype(float), rng.integers(0, 2, size=300)),
        "one_score": (np.full(25, 2.0), rng.integers(0, 2, size=25)),
        "sharp": (np.sort(rng.normal(size=300)), (np.sort(rng.normal(size=300)) > 0).astype(int)),
    }[case]
    s = np.asarray(s, float)
    tests = grid_tests(s)
    got = VennAbers().fit(s, y).predict_interval(tests)
    np.testing.assert_allclose(got, refit_interval(s, y, tests), rtol=0, atol=1e-12)


def test_ivap_larger_random_against_refit():
    rng = np.random.default_rng(11)
    s = np.round(rng.normal(size=2000), 2)
    y = (rng.uniform(size=2000) < 1 / (1 + np.exp(-4 * s))).astype(int)
    tests = np.r_[rng.choice(s, 100), np.round(rng.normal(size=100) * 2, 3), -9.0, 9.0]
    got = VennAbers().fit(s, y).predict_interval(tests)
    np.testing.assert_allclose(got, refit_interval(s, y, tests), rtol=0, atol=1e-12)


def test_ivap_above_maximum_p1_is_one_and_below_minimum_p0_is_zero():
    rng = np.random.default_rng(0)
    s, y = rng.normal(size=50), rng.integers(0, 2, size=50)
    p0, p1 = VennAbers().fit(s, y).predict_interval([s.min() - 1, s.max() + 1])
    assert p0[0] == 0.0 and p1[1] == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ivap_matches_the_venn_abers_package(seed):
    rng = np.random.default_rng(seed)
    k = 1500
    s = rng.uniform(size=k)
    if seed == 2: s = np.round(s, 2)   # ties
    y = (rng.uniform(size=k) < s ** 2).astype(int)
    t = np.r_[rng.uniform(size=500), s[:50], -0.5, 1.5]
    _, p01 = venn_abers.VennAbers().fit(np.c_[1 - s, s], y).predict_proba(np.c_[1 - t, t])
    p0, p1 = VennAbers().fit(s, y).predict_interval(t)
    np.testing.assert_allclose(p0, p01[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(p1, p01[:, 1], rtol=0, atol=1e-12)


@given(tied_data)
def test_predict_proba_merges(data):
    s, y = np.array(data[0], float), data[1]
    va = VennAbers().fit(s, y)
    t = grid_tests(s)
    p0, p1 = va.predict_interval(t)
    np.testing.assert_array_equal(va.predict_proba(t), p1 / (1 - p0 + p1))
    np.testing.assert_allclose(va.predict_proba(t, merge="brier"), p1 + p0 ** 2 / 2 - p1 ** 2 / 2, atol=1e-15)
    assert np.all(p0 < p1)   # the paper: p0 < p1 always


def test_fit_returns_self_and_tables_are_reused():
    va = VennAbers()
    assert va.fit([0.0, 1.0], [0, 1]) is va
    table = va.p1_table_
    va.predict_interval([0.5]); va.predict_proba([0.5])
    assert va.p1_table_ is table


def test_labels_may_be_bool_or_int_and_scores_int():
    a = VennAbers().fit([1, 2, 3], [False, True, True]).predict_interval([2])
    b = VennAbers().fit([1.0, 2.0, 3.0], [0.0, 1.0, 1.0]).predict_interval([2.0])
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- Lemma 2

@given(tied_data)
def test_lemma2_ivap_bounds(data):
    s, y = np.array(data[0], float), np.array(data[1])
    k1 = int(y.sum()); k0 = len(y) - k1
    va = VennAbers().fit(s, y)
    t = grid_tests(s)
    p0, p1 = va.predict_interval(t)
    assert np.all(p1 >= 1 / (k0 + 1) - 1e-15) and np.all(p0 <= 1 - 1 / (k1 + 1) + 1e-15)
    p = va.predict_proba(t)
    assert np.all(p >= 1 / (k0 + 2) - 1e-15) and np.all(p <= 1 - 1 / (k1 + 2) + 1e-15)


@given(st.integers(2, 5), st.integers(0, 2**31 - 1))
def test_lemma2_cvap_bounds(K, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(K, 40))
    folds = fold_ids(n, K, random_state=seed)
    s = rng.integers(0, 5, size=n).astype(float)
    y = rng.integers(0, 2, size=n)
    p = CrossVennAbers().fit(s, y, folds).predict_proba(rng.integers(-1, 7, size=(30, K)).astype(float))
    k = np.bincount(folds).max()
    assert np.all(p >= 1 / (k + 2) - 1e-15) and np.all(p <= 1 - 1 / (k + 2) + 1e-15)


# ---------------------------------------------------------------- CVAP

def test_cvap_is_per_fold_ivaps_merged_by_geometric_means():
    rng = np.random.default_rng(3)
    n, K = 200, 5
    folds = fold_ids(n, K, random_state=1)
    s = rng.normal(size=n); y = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * s))).astype(int)
    T = rng.normal(size=(40, K))
    cv = CrossVennAbers().fit(s, y, folds)
    p0, p1 = cv.predict_interval(T)
    for j in range(K):
        e0, e1 = refit_interval(s[folds == j], y[folds == j], T[:, j])
        np.testing.assert_allclose(p0[:, j], e0, atol=1e-12); np.testing.assert_allclose(p1[:, j], e1, atol=1e-12)
    gm = lambda a: np.prod(a, axis=1) ** (1 / K)
    np.testing.assert_allclose(cv.predict_proba(T), gm(p1) / (gm(1 - p0) + gm(p1)), rtol=1e-12)
    brier = np.mean(p1 + p0 ** 2 / 2 - p1 ** 2 / 2, axis=1)
    np.testing.assert_allclose(cv.predict_proba(T, merge="brier"), brier, rtol=1e-12)


def test_merge_intervals_reduces_to_ivap_for_one_fold():
    p0, p1 = np.array([[0.2], [0.5]]), np.array([[0.3], [0.9]])
    np.testing.assert_allclose(merge_intervals(p0, p1), (p1 / (1 - p0 + p1))[:, 0], rtol=1e-15)


def test_fold_ids_random_and_contiguous():
    ids = fold_ids(11, 3, shuffle=False)
    np.testing.assert_array_equal(ids, [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    r = fold_ids(11, 3, random_state=0)
    np.testing.assert_array_equal(np.sort(r), ids)
    np.testing.assert_array_equal(r, fold_ids(11, 3, random_state=0))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("scores, labels, error, message", [
    ([0.1, np.nan], [0, 1], ValueError, r"`scores` must be finite"),
    ([0.1, np.inf], [0, 1], ValueError, r"`scores` must be finite"),
    ([0.1, 0.2], [1, 2], ValueError, r"`labels` must contain only the labels 0 and 1, got labels \{1, 2\}"),
    ([0.1, 0.2], [0, 0.5], ValueError, r"`labels` must contain only the labels 0 and 1"),
    ([0.1, 0.2], [0, 1, 1], ValueError, r"length mismatch: `scores` has 2, `labels` has 3"),
    ([[0.1, 0.9], [0.2, 0.8]], [0, 1], ValueError, r"`scores` must be one-dimensional"),
    ([], [], ValueError, r"`scores` is empty"),
    (["a"], [0], TypeError, r"`scores` must hold real numbers"),
])
def test_fit_bad_input(scores, labels, error, message):
    with pytest.raises(error, match=message):
        VennAbers().fit(scores, labels)


def test_predict_bad_input():
    from sklearn.exceptions import NotFittedError
    va = VennAbers()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        va.predict_interval([0.1])
    with pytest.raises(NotFittedError, match="not fitted yet"):
        CrossVennAbers().predict_interval(np.zeros((1, 2)))
    va.fit([0.1, 0.2], [0, 1])
    with pytest.raises(ValueError, match=r"`scores` must be finite"):
        va.predict_proba([np.nan])
    with pytest.raises(ValueError, match=r"`scores` must be one-dimensional"):
        va.predict_interval([[0.1]])
    with pytest.raises(ValueError, match=r"`merge` must be one of 'log', 'brier'"):
        va.predict_proba([0.1], merge="geometric")
    assert va.predict_interval([])[0].shape == (0,)


@pytest.mark.parametrize("n_splits, message", [(1, "at least 2"), (0, "at least 2"), (2.0, "integer"),
                                               (21, r"cannot exceed the number of samples \(20\)")])
def test_bad_n_splits(n_splits, message):
    with pytest.raises(ValueError, match=f"`n_splits`.*{message}|{message}"):
        fold_ids(20, n_splits)
    X = np.random.default_rng(0).normal(size=(20, 2)); y = np.arange(20) % 2
    with pytest.raises(ValueError, match=message):
        VennAbersCalibrator(method="cvap", n_splits=n_splits).fit(X, y)


def test_cvap_bad_input():
    with pytest.raises(ValueError, match="`folds` must number the folds"):
        CrossVennAbers().fit([0.1, 0.2, 0.3], [0, 1, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="`folds` must number the folds"):
        CrossVennAbers().fit([0.1, 0.2, 0.3], [0, 1, 0], [0, 2, 2])
    with pytest.raises(TypeError, match="`folds` must be a 1-D array of integers"):
        CrossVennAbers().fit([0.1, 0.2], [0, 1], [0.0, 1.0])
    cv = CrossVennAbers().fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1], [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"`scores` must have shape \(m, 2\)"):
        cv.predict_interval([0.1, 0.2])


# ---------------------------------------------------------------- scikit-learn calibrator

class CountingLR:
    "A logistic regression that counts its fits and records its fit arguments."
    fits = 0

    def __new__(cls, *args, **kwargs):
        from sklearn.linear_model import LogisticRegression

        class _Counting(LogisticRegression):
            def fit(self, X, y, sample_weight=None):
                CountingLR.fits += 1
                self.seen_weight_ = sample_weight
                return super().fit(X, y, sample_weight=sample_weight)
        return _Counting(*args, **kwargs)


def binary_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(2 * X[:, 0] - X[:, 1])))).astype(int)
    return X, y


@pytest.mark.parametrize("method, fits", [("ivap", 1), ("cvap", 4)])
def test_calibrator_trains_the_base_estimator_once_or_k_times(method, fits):
    X, y = binary_data()
    CountingLR.fits = 0
    cal = VennAbersCalibrator(CountingLR(), method=method, n_splits=4, random_state=0).fit(X, y)
    assert CountingLR.fits == fits and len(cal.estimators_) == fits


def test_calibrator_ivap_equals_venn_abers_on_the_calibration_scores():
    X, y = binary_data(seed=1)
    cal = VennAbersCalibrator(method="ivap", cal_size=0.25, random_state=0).fit(X, y)
    model = cal.estimators_[0]
    Xt, _ = binary_data(100, seed=2)
    ivap = cal.calibrators_[0][0]
    p0, p1 = ivap.predict_interval(model.decision_function(Xt))
    np.testing.assert_array_equal(cal.predict_interval(Xt), (p0, p1))
    np.testing.assert_allclose(cal.predict_proba(Xt)[:, 1], p1 / (1 - p0 + p1), rtol=1e-15)
    assert ivap.n_samples_ == 100


def test_calibrator_prefit_calibrates_on_the_given_data():
    from sklearn.linear_model import LogisticRegression
    X, y = binary_data(seed=3)
    model = LogisticRegression().fit(X[:200], y[:200])
    cal = VennAbersCalibrator(model, prefit=True).fit(X[200:], y[200:])
    Xt, _ = binary_data(50, seed=4)
    ref = VennAbers().fit(model.decision_function(X[200:]), y[200:]).predict_proba(model.decision_function(Xt))
    np.testing.assert_allclose(cal.predict_proba(Xt)[:, 1], ref, rtol=1e-15)
    assert cal.estimators_[0] is model


def test_calibrator_prefit_rejects_labels_the_estimator_does_not_know():
    from sklearn.linear_model import LogisticRegression
    X, y = binary_data(seed=3)
    model = LogisticRegression().fit(X[:200], y[:200])
    with pytest.raises(ValueError, match=r"`y` has labels \[2\] that the prefit estimator does not know"):
        VennAbersCalibrator(model, prefit=True).fit(X[200:], np.where(y[200:] == 1, 2, 0))


def test_calibrator_cvap_equals_crossvennabers_of_its_models():
    X, y = binary_data(seed=5)
    cal = VennAbersCalibrator(method="cvap", n_splits=3, merge="brier", random_state=0).fit(X, y)
    Xt, _ = binary_data(60, seed=6)
    S = np.column_stack([m.decision_function(Xt) for m in cal.estimators_])
    p0 = np.column_stack([c[0].predict_interval(S[:, j])[0] for j, c in enumerate(cal.calibrators_)])
    p1 = np.column_stack([c[0].predict_interval(S[:, j])[1] for j, c in enumerate(cal.calibrators_)])
    np.testing.assert_allclose(cal.predict_proba(Xt)[:, 1], merge_intervals(p0, p1, merge="brier"), rtol=1e-14)
    lo, hi = cal.predict_interval(Xt)
    assert np.all(lo <= hi)


def test_calibrator_string_labels_and_fit_params_pass_through():
    X, y = binary_data(seed=7)
    labels = np.where(y == 1, "spam", "ham")
    w = np.linspace(1, 2, len(y))
    cal = VennAbersCalibrator(CountingLR(), method="ivap", random_state=0).fit(X, labels, sample_weight=w)
    assert list(cal.classes_) == ["ham", "spam"] and set(cal.predict(X)) <= {"ham", "spam"}
    seen = cal.estimators_[0].seen_weight_
    assert seen is not None and len(seen) == 320 and set(seen) <= set(w)


def test_calibrator_scores_naive_bayes_by_log_odds():
    from sklearn.naive_bayes import GaussianNB
    X, y = binary_data(seed=8)
    X = X * 10   # a sharp model: predict_proba rounds many probabilities to 0 or 1, the log-odds stay distinct
    model = GaussianNB().fit(X[:200], y[:200])
    cal = VennAbersCalibrator(model, prefit=True).fit(X[200:], y[200:])
    jll = lambda X: model.predict_joint_log_proba(X)
    odds = lambda X: jll(X)[:, 1] - jll(X)[:, 0]
    ref = VennAbers().fit(odds(X[200:]), y[200:]).predict_proba(odds(X))
    np.testing.assert_allclose(cal.predict_proba(X)[:, 1], ref, rtol=1e-15)


@pytest.mark.parametrize("name", ["knn", "forest"])
def test_calibrator_falls_back_to_predict_proba(name):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neighbors import KNeighborsClassifier
    X, y = binary_data(seed=9)
    model = {"knn": KNeighborsClassifier(7), "forest": RandomForestClassifier(20, random_state=0)}[name]
    model.fit(X[:200], y[:200])   # the forest's predict_log_proba has -inf: not usable
    cal = VennAbersCalibrator(model, prefit=True).fit(X[200:], y[200:])
    p = lambda X: model.predict_proba(X)[:, 1]
    # IVAP depends only on the order and ties of the scores, so p1 itself is an equivalent score
    ref = VennAbers().fit(p(X[200:]), y[200:]).predict_interval(p(X))
    np.testing.assert_allclose(cal.predict_interval(X), ref, rtol=1e-15)


@pytest.mark.parametrize("multiclass", ["ovr", "pairwise"])
@pytest.mark.parametrize("method", ["ivap", "cvap"])
def test_calibrator_multiclass(multiclass, method):
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    X, y = load_iris(return_X_y=True)
    cal = VennAbersCalibrator(LogisticRegression(max_iter=500), method=method, multiclass=multiclass,
                              random_state=0).fit(X, y)
    P = cal.predict_proba(X)
    assert P.shape == (150, 3) and np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    assert (cal.predict(X) == y).mean() > 0.85
    if multiclass == "ovr":
        lo, hi = cal.predict_interval(X)
        assert lo.shape == (150, 3) and np.all(lo <= hi)
    else:
        with pytest.raises(ValueError, match="multiclass='ovr'"):
            cal.predict_interval(X)


def test_pairwise_coupling_recovers_consistent_probabilities():
    from isocal.venn_abers import _couple_pairwise
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    r = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    np.testing.assert_allclose(_couple_pairwise(r), p, rtol=1e-12)


def test_calibrator_bad_input():
    X, y = binary_data(40)
    with pytest.raises(ValueError, match="only one class"):
        VennAbersCalibrator().fit(X, np.zeros(40))
    with pytest.raises(ValueError, match="`method` must be one of"):
        VennAbersCalibrator(method="platt").fit(X, y)
    with pytest.raises(ValueError, match="`cal_size`"):
        VennAbersCalibrator(cal_size=1.5).fit(X, y)
    with pytest.raises(ValueError, match="Input X contains NaN|NaN"):
        VennAbersCalibrator().fit(np.where(X > 1, np.nan, X), y)
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        VennAbersCalibrator().predict_proba(X)


# Checks that genuinely do not apply: the calibrator splits the rows at random into proper training and calibration
# sets, so a row repeated twice is not the same as a row of weight 2 (the split sees two rows); the calibration
# itself is the unweighted IVAP of the paper.
NOT_APPLICABLE = {
    "check_sample_weight_equivalence_on_dense_data": "a random proper-train/calibration split of rows: a repeated "
                                                     "row is not equivalent to a weight of 2",
    "check_sample_weight_equivalence_on_sparse_data": "same as the dense version",
}


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator
    results = check_estimator(VennAbersCalibrator(), on_fail=None, expected_failed_checks=NOT_APPLICABLE)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert failed == []
    xfailed = {r["check_name"] for r in results if r["status"] == "xfail"}
    assert xfailed == set(NOT_APPLICABLE)   # they do fail, for the reason given
    assert sum(r["status"] == "passed" for r in results) > 40


@given(tied_data)
def test_ivap_depends_only_on_the_order_of_the_scores(data):
    s, y = np.array(data[0], float), data[1]
    t = grid_tests(s)[:-2]
    a = VennAbers().fit(s, y).predict_interval(t)
    b = VennAbers().fit(np.exp(s / 3) - 7, y).predict_interval(np.exp(t / 3) - 7)   # strictly increasing map
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("method", ["ivap", "cvap"])
def test_calibrator_never_outputs_0_or_1(method):
    X, y = binary_data(300, seed=10)
    X = X * 50    # a very sharp base model
    cal = VennAbersCalibrator(method=method, shuffle=False, random_state=0).fit(X, y)
    P = cal.predict_proba(np.r_[X, X * 100])
    assert np.all((P > 0) & (P < 1))
