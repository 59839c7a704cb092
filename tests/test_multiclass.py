"""Tests of isocal.multiclass: agreement with scikit-learn's CalibratedClassifierCV (one-vs-rest isotonic), valid
probability rows for every method and strategy, top-label calibration against a direct reference, clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import KFold, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from isocal.multiclass import MulticlassCalibrator

METHODS, STRATEGIES = ("isotonic", "ivap", "cvap"), ("ovr", "pairwise", "top-label")


class MatrixModel(ClassifierMixin, BaseEstimator):
    """A 'fitted classifier' whose predict_proba of row X[i] = [j] is the stored matrix row P[j] (no decision_function)."""

    def __init__(self, P=None):
        self.P = P

    def fit(self, X, y):
        self.classes_ = np.arange(self.P.shape[1])
        return self

    def predict_proba(self, X):
        return self.P[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


@st.composite
def grid_matrices(draw, max_n=60):
    """A labelled probability matrix on a 1e-6 grid (no two distinct values closer than scikit-learn's 1e-15 tie
    tolerance), every class at least twice among the labels."""
    K = draw(st.integers(3, 5))
    n = draw(st.integers(2 * K, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    P = np.round(rng.dirichlet(np.full(K, draw(st.sampled_from([0.3, 1.0, 3.0]))), size=n), 6)
    P[:, -1] = np.round(1.0 - P[:, :-1].sum(axis=1), 6)
    P = np.clip(P, 0, 1)
    y = np.r_[np.arange(K), np.arange(K), [rng.choice(K, p=row / row.sum()) for row in P[2 * K:]]]
    return P, y, rng


@settings(max_examples=40)
@given(grid_matrices())
def test_ovr_isotonic_matches_calibrated_classifier_cv(data):
    P, y, rng = data
    n = len(P)
    cal_rows, test_rows = np.arange(n), rng.permutation(n)
    model = MatrixModel(P).fit(None, y)
    X = np.arange(n)[:, None]
    # the model is frozen, so the folds (KFold: no class-count requirement) only re-score the same rows
    sk = CalibratedClassifierCV(FrozenEstimator(model), method="isotonic", cv=KFold(2), ensemble=False).fit(
        X[cal_rows], y[cal_rows])
    assert len(sk.calibrated_classifiers_) == 1
    ours = MulticlassCalibrator("isotonic", "ovr").fit(P[cal_rows], y[cal_rows])
    # test on the calibration rows and on fresh rows in and beyond the calibration range
    fresh = np.clip(rng.dirichlet(np.ones(P.shape[1]), size=20), 0, 1)
    fresh = np.round(fresh, 6); fresh[:, -1] = np.round(1 - fresh[:, :-1].sum(axis=1), 6); fresh = np.clip(fresh, 0, 1)
    everything = np.r_[P, fresh]
    model_all = MatrixModel(everything).fit(None, y)
    sk.calibrated_classifiers_[0].estimator = model_all
    got = ours.predict_proba(everything)
    want = sk.predict_proba(np.arange(len(everything))[:, None])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_ovr_isotonic_matches_scikit_learn_on_wine_knn():
    X, y = load_wine(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.4, stratify=y, random_state=1)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=1)
    knn = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=15)).fit(X_tr, y_tr)
    sk = CalibratedClassifierCV(FrozenEstimator(knn), method="isotonic").fit(X_cal, y_cal)
    ours = MulticlassCalibrator().fit(knn.predict_proba(X_cal), y_cal)
    np.testing.assert_allclose(ours.predict_proba(knn.predict_proba(X_te)), sk.predict_proba(X_te), rtol=0, atol=1e-12)


def test_rows_summing_to_zero_become_uniform_as_in_scikit_learn():
    # found by search: on [0.36, 0.11, 0.53] every class's isotonic map is 0 (class 2's only positive is at 0.78,
    # its negatives reach 0.55), so the row sums to 0 before renormalisation
    P = np.array([[0.89, 0.1, 0.01], [0.36, 0.62, 0.02], [0.17, 0.05, 0.78], [0.11, 0.87, 0.02], [0.01, 0.44, 0.55],
                  [0.79, 0.19, 0.02]])
    y = [0, 1, 2, 1, 1, 0]
    cal = MulticlassCalibrator().fit(P, y)
    row = np.array([[0.36, 0.11, 0.53]])
    assert all(IsotonicRegression(out_of_bounds="clip").fit(P[:, k], np.equal(y, k)).predict(row[:, k])[0] == 0
               for k in range(3))
    np.testing.assert_array_equal(cal.predict_proba(row), [[1 / 3, 1 / 3, 1 / 3]])


@settings(max_examples=25)
@given(grid_matrices(max_n=40), st.sampled_from(METHODS), st.sampled_from(STRATEGIES))
def test_predicted_rows_are_probabilities(data, method, strategy):
    P, y, rng = data
    cal = MulticlassCalibrator(method, strategy, n_splits=2, min_samples=3, random_state=0).fit(P, y)
    Q = cal.predict_proba(np.r_[P, rng.dirichlet(np.ones(P.shape[1]), size=10)])
    assert Q.shape == (len(P) + 10, P.shape[1])
    assert np.all((Q >= 0) & (Q <= 1))
    np.testing.assert_allclose(Q.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_top_label_confidence_is_per_class_isotonic_of_the_confidence():
    rng = np.random.default_rng(5)
    P = np.round(rng.dirichlet([0.5, 0.5, 0.5], size=400), 6)
    P[:, 2] = np.round(1 - P[:, 0] - P[:, 1], 6)
    y = np.array([rng.choice(3, p=np.clip(r, 0, None) / np.clip(r, 0, None).sum()) for r in P])
    cal = MulticlassCalibrator("isotonic", "top-label").fit(P, y)
    pred, conf = P.argmax(axis=1), P.max(axis=1)
    P_new = np.round(rng.dirichlet([0.5, 0.5, 0.5], size=50), 6)
    P_new[:, 2] = np.round(1 - P_new[:, 0] - P_new[:, 1], 6)
    labels, got = cal.predict_confidence(P_new)
    for c in range(3):
        ref = IsotonicRegression(out_of_bounds="clip").fit(conf[pred == c], (y[pred == c] == c).astype(float))
        rows = P_new.argmax(axis=1) == c
        np.testing.assert_allclose(got[rows], ref.predict(P_new[rows].max(axis=1)), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(labels, P_new.argmax(axis=1))
    Q = cal.predict_proba(P_new)
    np.testing.assert_array_equal(Q[np.arange(50), labels], got)
    # the other classes keep their proportions
    k = (labels + 1) % 3
    j = (labels + 2) % 3
    idx = np.arange(50)
    ok = (P_new[idx, j] > 0) & (got < 1)          # a confidence of 1 leaves nothing to share
    np.testing.assert_allclose(Q[idx, k][ok] / Q[idx, j][ok], P_new[idx, k][ok] / P_new[idx, j][ok], rtol=1e-9)


def test_logits_input_is_the_softmax():
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(200, 4)) * 3
    y = rng.integers(0, 4, 200)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    P = E / E.sum(axis=1, keepdims=True)
    for strategy in STRATEGIES:
        a = MulticlassCalibrator(strategy=strategy, input="logits").fit(Z, y).predict_proba(Z[:20])
        b = MulticlassCalibrator(strategy=strategy).fit(P, y).predict_proba(P[:20])
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_classes_map_labels_to_columns():
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]] * 5)
    y = np.array(["a", "b", "c"] * 5)
    cal = MulticlassCalibrator(classes=["a", "b", "c"]).fit(P, y)
    np.testing.assert_array_equal(cal.predict(P[:3]), ["a", "b", "c"])
    with pytest.raises(ValueError, match="`y` holds the label 'd'"):
        MulticlassCalibrator(classes=["a", "b", "c"]).fit(P[:3], ["a", "b", "d"])
    with pytest.raises(ValueError, match="`classes` must list the 3 distinct labels"):
        MulticlassCalibrator(classes=["a", "b"]).fit(P, y)


def test_get_params_and_clone():
    cal = MulticlassCalibrator("ivap", "pairwise", merge="brier")
    assert cal.get_params()["strategy"] == "pairwise" and cal.get_params()["merge"] == "brier"
    twin = clone(cal)
    assert twin is not cal and twin.get_params() == cal.get_params()
    with pytest.raises(ValueError, match="invalid parameter 'methods'"):
        cal.set_params(methods="x")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_bad_input_names_the_argument(strategy):
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    y = np.array([0, 1, 2, 2])
    cal = MulticlassCalibrator(strategy=strategy, min_samples=1)
    with pytest.raises(ValueError, match="`P` must be a 2-D array"):
        cal.fit(P[:, 0], y)
    with pytest.raises(ValueError, match="the rows of `P` must sum to 1"):
        cal.fit(P * 0.9, y)
    bad = P.copy(); bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="`P` must be finite"):
        cal.fit(bad, y)
    with pytest.raises(ValueError, match="`P` must be finite"):
        MulticlassCalibrator(strategy=strategy, input="logits").fit(bad, y)
    with pytest.raises(ValueError, match="`y` must hold class numbers 0 to 2"):
        cal.fit(P, [0, 1, 3, 2])
    with pytest.raises(ValueError, match="length mismatch"):
        cal.fit(P, [0, 1, 2])
    cal.fit(P, y)
    with pytest.raises(ValueError, match="`P` has 4 columns, but the calibrator was fitted with 3 classes"):
        cal.predict_proba(np.full((2, 4), 0.25))
    with pytest.raises(ValueError, match="`method` must be one of"):
        MulticlassCalibrator(method="platt", strategy=strategy).fit(P, y)


def test_pairwise_needs_every_class():
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1]])
    with pytest.raises(ValueError, match="needs every class in `y`; class 2 is absent"):
        MulticlassCalibrator(strategy="pairwise").fit(P, [0, 1])


def test_import_is_light():
    import subprocess, sys
    # scikit-learn (and Venn–Abers) are imported on first use; numba comes with isocal.core, as for every module
    code = "import sys, isocal.multiclass; print('sklearn' in sys.modules, 'isocal.venn_abers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# ---- portable (JSON) save / load ----------------------------------------------------------------------------------

import json  # noqa: E402
import math  # noqa: E402

import isocal.portable as portable  # noqa: E402


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def _plain_json(v):
    if isinstance(v, dict): return all(isinstance(k, str) and _plain_json(x) for k, x in v.items())
    if isinstance(v, list): return all(_plain_json(x) for x in v)
    if isinstance(v, float): return math.isfinite(v)
    return v is None or isinstance(v, (str, bool, int))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=10, deadline=None)
@given(grid_matrices(max_n=30), st.sampled_from(["log", "brier"]), st.booleans())
def test_portable_round_trip_bit_exact(tmp_path_factory, method, strategy, data, merge, named):
    "Saved and loaded (typed and generic), the calibrator predicts the same float bits; the file is plain JSON."
    P, y, rng = data
    K = P.shape[1]
    classes = np.array([f"c{k}" for k in range(K)]) if named else None
    cal = MulticlassCalibrator(method, strategy, merge=merge, n_splits=2, min_samples=3, classes=classes,
                               random_state=int(rng.integers(100))).fit(P, y if classes is None else classes[y.astype(int)])
    path = tmp_path_factory.mktemp("mc") / "model.json"
    cal.save(path)
    d = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in the file"))
    assert _plain_json(d) and d == cal.to_dict() and d["class"] == "MulticlassCalibrator"
    T = np.vstack([P, rng.dirichlet(np.ones(K), size=8)])
    for back in (MulticlassCalibrator.load(path), portable.load(path),
                 MulticlassCalibrator.from_dict(json.loads(json.dumps(cal.to_dict())))):
        assert type(back) is MulticlassCalibrator
        assert back.get_params().keys() == cal.get_params().keys()
        np.testing.assert_array_equal(_bits(back.predict_proba(T)), _bits(cal.predict_proba(T)))
        np.testing.assert_array_equal(back.predict(T), cal.predict(T))
        assert back.classes_.dtype == cal.classes_.dtype


@pytest.fixture
def saved_mc(tmp_path):
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(3), size=40)
    y = np.r_[0, 1, 2, rng.integers(0, 3, 37)]
    cal = MulticlassCalibrator("ivap", "ovr").fit(P, y)
    path = tmp_path / "mc.json"
    cal.save(path)
    return path, cal.to_dict()


def _write(path, d):
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["params"].update(method="svm"), r"`params\.method` must be one of"),
    (lambda d: d["params"].update(n_splits=1), r"`params\.n_splits` must be at least 2"),
    (lambda d: d["params"].pop("strategy"), r"`params` is missing the key\(s\) 'strategy'"),
    (lambda d: d["state"].update(n_classes_=2), r"`state\.classes_` must hold n_classes_=2 distinct"),
    (lambda d: d["state"]["calibrators"].pop(), r"`state\.calibrators` must hold 3"),
    (lambda d: d["state"]["calibrators"][1].update(scores="x"), r"`state\.calibrators\[1\]\.scores` must be a list"),
    (lambda d: d["state"]["calibrators"][2].pop("n_ones"), r"`state\.calibrators\[2\]` is missing the key"),
    (lambda d: d["state"].update(classes_={"dtype": "int64", "values": [0, 1]}), r"`state\.classes_`"),
])
def test_portable_bad_content_names_file_and_key(saved_mc, edit, match):
    path, d = saved_mc
    edit(d)
    for read in (MulticlassCalibrator.load, portable.load):
        with pytest.raises(ValueError, match=r"mc\.json: " + match): read(_write(path, d))


def test_portable_newer_other_class_and_corrupt_files(saved_mc):
    path, d = saved_mc
    with pytest.raises(ValueError, match=r"mc\.json: written by isocal .*schema 99.*upgrade isocal"):
        MulticlassCalibrator.load(_write(path, dict(d, schema_version=99)))
    from isocal.venn_abers import VennAbers
    VennAbers().fit([0.1, 0.2], [0, 1]).save(path)
    with pytest.raises(ValueError, match=r"mc\.json: `class` is \"VennAbers\", but MulticlassCalibrator\.load"):
        MulticlassCalibrator.load(path)
    path.write_text(json.dumps(d)[:-7])
    with pytest.raises(ValueError, match=r"mc\.json: corrupt or truncated JSON"): MulticlassCalibrator.load(path)


def test_portable_unfitted_and_generator_seed():
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError): MulticlassCalibrator().to_dict()
    P = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]])
    cal = MulticlassCalibrator(random_state=np.random.default_rng(0)).fit(P, [0, 1, 0, 1])
    assert cal.to_dict()["params"]["random_state"] is None   # a Generator only seeds `fit`; it is not stored


# ---------------------------------------------------------------- issue 30: sample_weight, options

@settings(max_examples=30, deadline=None)
@given(grid_matrices(), st.sampled_from(STRATEGIES), st.integers(0, 2**32 - 1))
def test_isotonic_sample_weight_is_row_repetition(data, strategy, seed):
    """Integer weights give the calibrator of the rows repeated that many times (weight 0: left out)."""
    P, y, _ = data
    reps = np.random.default_rng(seed).integers(0, 4, size=len(y))
    if not reps.any(): reps[0] = 1
    rows = np.repeat(np.arange(len(y)), reps)
    if strategy == "pairwise" and len(np.unique(y[rows])) < P.shape[1]:
        return                                         # pairwise needs every class among the kept rows
    weighted = MulticlassCalibrator("isotonic", strategy, min_samples=1).fit(P, y, sample_weight=reps)
    repeated = MulticlassCalibrator("isotonic", strategy, min_samples=1).fit(P[rows], y[rows])
    np.testing.assert_allclose(weighted.predict_proba(P), repeated.predict_proba(P), rtol=1e-12, atol=1e-12)


def test_sample_weight_changes_the_isotonic_fit():
    """The weights are used (before issue 30 `fit` took no sample_weight at all)."""
    P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8]])
    y = np.array([0, 1, 1, 0])
    plain = MulticlassCalibrator().fit(P, y).predict_proba(P)
    heavy = MulticlassCalibrator().fit(P, y, sample_weight=[1, 1, 1, 9]).predict_proba(P)
    assert not np.allclose(plain, heavy)


@pytest.mark.parametrize("method", ["ivap", "cvap"])
def test_venn_abers_methods_take_a_mask_and_refuse_other_weights(method):
    rng = np.random.default_rng(0)
    P = rng.dirichlet([1, 1, 1], size=60)
    y = np.r_[np.arange(3).repeat(5), rng.integers(0, 3, 45)]
    keep = rng.random(60) < 0.7
    keep[:15] = True
    a = MulticlassCalibrator(method, random_state=0).fit(P, y, sample_weight=3.0 * keep).predict_proba(P)
    b = MulticlassCalibrator(method, random_state=0).fit(P[keep], y[keep]).predict_proba(P)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"`sample_weight` must be 0 or one common positive value"):
        MulticlassCalibrator(method).fit(P, y, sample_weight=np.arange(60.0))


@pytest.mark.parametrize("kwargs, fit_kwargs, message", [
    ({"n_splits": 2**70}, {}, r"`n_splits` must be an integer of at most 2\*\*63 - 1"),
    ({"n_splits": 2.0}, {}, r"`n_splits` must be an integer, got 2.0"),
    ({"min_samples": 0}, {}, r"`min_samples` must be a positive integer, got 0"),
    ({"random_state": -1}, {}, r"`random_state` must be None, a non-negative integer"),
    ({}, {"sample_weight": [1.0, -1.0, 1.0, 1.0]}, r"`sample_weight` must be non-negative"),
    ({}, {"sample_weight": [1.0, 1.0]}, r"length mismatch: `sample_weight` has 2"),
    ({"classes": [[0, 1], [2]]}, {}, r"`classes` is ragged"),
])
def test_bad_options_and_weights_name_the_argument(kwargs, fit_kwargs, message):
    P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8]])
    with pytest.raises((ValueError, TypeError), match=message):
        MulticlassCalibrator(**kwargs).fit(P, [0, 1, 1, 0], **fit_kwargs)
