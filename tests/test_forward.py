"""Tests of isocal.forward against independent references.

References (no expected value below was produced by isocal.forward): the minimax formula (4) of the paper evaluated by
brute force over all block boundaries (`minimax_fit`, O(t³), with tied x pooled), the formulas of Prop. 2.2 and Appendix
B, numerical integration (trapezoid rule on a uniform grid) and, for larger t, the naive one-refit-per-point leave-one-out built on
isocal.pava.isotonic_regression (itself tested against SciPy in tests/test_pava.py). For Section 3: exponential
weights over the explicitly enumerated grid class F_K, eq. (3) averaged over explicit permutations, and the regret
over all t! orders.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from isocal.forward import (METHODS, ForwardLearner, excess_loo, forward_predict, isotonic_loss, loo_all,
                            loo_predictions, loo_predictions_naive, regret_increment, segment_sequence,
                            simulate_regret)
from isocal.pava import isotonic_regression


def minimax_fit(sums, weights):
    "Fitted level of each group by y*_i = max_{l<=i} min_{r>=i} mean(l..r) (eq. 4), brute force."
    G = len(sums)
    cs, cw = np.concatenate(([0.0], np.cumsum(sums))), np.concatenate(([0.0], np.cumsum(weights)))
    mean = lambda l, r: (cs[r + 1] - cs[l]) / (cw[r + 1] - cw[l])
    return np.array([max(min(mean(l, r) for r in range(i, G)) for l in range(i + 1)) for i in range(G)])


def reference_fit(x, y, w):
    "(fitted value of each point, weighted loss) of the isotonic fit of y on x, tied x pooled, via `minimax_fit`."
    ux, inv = np.unique(x, return_inverse=True)
    sums, wts = np.bincount(inv, w * y), np.bincount(inv, w)
    fitted = minimax_fit(sums, wts)[inv]
    return fitted, float(np.sum(w * (y - fitted) ** 2))


def reference_point(x, y, i, z, w):
    "ŷᵢ and L* after replacing point i's label by z with weight w."
    yz, wz = y.copy(), np.ones(len(y))
    yz[i], wz[i] = z, w
    fitted, loss = reference_fit(x, yz, wz)
    return fitted[i], loss


def reference_loo(x, y, method, c=None, gamma=0.5, lam=0.5):
    t = len(x)
    c = t ** (1 / 3) if c is None else c
    out = np.empty(t)
    for i in range(t):
        if method == "ir-int":
            keep = np.arange(t) != i
            fitted, _ = reference_fit(x[keep], y[keep], np.ones(t - 1))
            xs = x[keep]
            if np.any(xs == x[i]): out[i] = fitted[xs == x[i]][0]
            else:
                left = fitted[xs < x[i]].max() if np.any(xs < x[i]) else 0.0
                right = fitted[xs > x[i]].min() if np.any(xs > x[i]) else 1.0
                out[i] = (left + right) / 2
            continue
        if method == "heavy":
            out[i] = reference_point(x, y, i, gamma, c)[0]
            continue
        (y0, l0), (y1, l1) = reference_point(x, y, i, 0.0, 1.0), reference_point(x, y, i, 1.0, 1.0)
        out[i] = {"log-ivap": y1 / (y1 + 1 - y0), "brier-ivap": (1 + y0 ** 2 - (1 - y1) ** 2) / 2,
                  "lsm": (1 + l0 - l1) / 2, "direct": lam * y0 + (1 - lam) * y1}[method]
    return out


labels = st.sampled_from([0.0, 1.0, 0.25, 0.5, 0.3, 0.9])
datasets = st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 8), min_size=n, max_size=n),
    st.lists(st.one_of(labels, st.floats(0, 1)), min_size=n, max_size=n)))
options = st.tuples(st.one_of(st.none(), st.floats(0.05, 20)), st.floats(0, 1), st.floats(0, 1))


@given(datasets, options)
def test_loo_matches_minimax_brute_force(data, opts):
    x, y = (np.array(a, float) for a in data)
    c, gamma, lam = opts
    table = loo_all(x, y, c=c, gamma=gamma, lam=lam)
    for m in METHODS:
        expected = reference_loo(x, y, m, c=c, gamma=gamma, lam=lam)
        np.testing.assert_allclose(table[m], expected, rtol=0, atol=1e-12, err_msg=m)
        np.testing.assert_allclose(loo_predictions(x, y, m, c=c, gamma=gamma, lam=lam), expected, rtol=0,
                                   atol=1e-12, err_msg=m)


@given(datasets)
def test_forward_algorithms_lie_between_y0_and_y1(data):
    x, y = (np.array(a, float) for a in data)
    table = loo_all(x, y)
    assert np.all(table["y0"] <= table["y1"] + 1e-12)
    for m in ("ir-int", "log-ivap", "brier-ivap", "lsm", "direct"):
        assert np.all(table["y0"] - 1e-12 <= table[m]) and np.all(table[m] <= table["y1"] + 1e-12), m


@pytest.mark.parametrize("kind", ["noisy", "binary", "increasing", "ties"])
def test_loo_matches_naive_refits_at_moderate_size(kind):
    rng = np.random.default_rng(len(kind))
    t = 400
    x = np.sort(rng.random(t))
    y = {"noisy": np.clip(x + rng.normal(0, 0.3, t), 0, 1), "binary": (rng.random(t) < x).astype(float),
         "increasing": np.sort(rng.random(t)), "ties": np.round(rng.random(t) * 4) / 4}[kind]
    if kind == "ties": x = np.round(x * 30)
    perm = rng.permutation(t)                       # the input order must not matter
    x, y = x[perm], y[perm]
    table = loo_all(x, y, lam=0.2)
    for m in METHODS:
        np.testing.assert_allclose(table[m], loo_predictions_naive(x, y, m, lam=0.2), rtol=0, atol=1e-12,
                                   err_msg=m)


def test_large_noise_free_increasing_against_naive_subset():
    "Long pooled runs (the worst case for local merging): check a sample of points against single refits."
    t = 20_000
    x, y = np.arange(t, dtype=float), np.linspace(0, 1, t) ** 2
    table = loo_all(x, y)
    keep = np.ones(t, bool)
    for i in np.random.default_rng(0).choice(t, 25, replace=False):
        keep[i] = False
        for m in ("lsm", "heavy", "log-ivap"):
            assert abs(table[m][i] - forward_predict(x[keep], y[keep], x[i], m, c=t ** (1 / 3))) < 1e-12, (m, i)
        keep[i] = True


def integral_of_forward_prediction(x, y, i):
    """∫₀¹ ŷᵢ(z) dz exactly: ŷᵢ(z) = max_l min_r (S'_lr + z)/W_lr (eq. 4) is piecewise linear, with kinks only where
    two candidate lines cross, so the trapezoid rule on all crossings in [0, 1] is exact."""
    ux, inv = np.unique(x, return_inverse=True)
    g = inv[i]
    sums, wts = np.bincount(inv, y) - np.bincount([g], [y[i]], len(ux)), np.bincount(inv).astype(float)
    lines = [(sums[l:r + 1].sum(), wts[l:r + 1].sum()) for l in range(g + 1) for r in range(g, len(ux))]
    knots = {0.0, 1.0}
    for s1, w1 in lines:
        for s2, w2 in lines:
            if w1 != w2:
                z = (s2 * w1 - s1 * w2) / (w2 - w1)
                if 0 < z < 1: knots.add(z)
    zs = np.array(sorted(knots))
    vals = np.array([reference_point(x, y, i, z, 1.0)[0] for z in zs])
    return float(np.sum((vals[1:] + vals[:-1]) / 2 * np.diff(zs)))


@given(datasets)
def test_lsm_is_the_integral_of_the_forward_prediction(data):
    "Appendix B / the envelope theorem: (1 + L0* - L1*)/2 = ∫₀¹ ŷᵢ(z) dz."
    x, y = (np.array(a, float) for a in data)
    lsm = loo_predictions(x, y, "lsm")
    for i in range(len(x)):
        assert abs(lsm[i] - integral_of_forward_prediction(x, y, i)) < 1e-12
    # An independent cross-check that needs no kinks: the trapezoid rule on a uniform grid of step h. ŷ₀(z) is
    # piecewise linear with slopes 1/W in (0, 1], so each kink adds at most h²/8 = 1.2e-7 to the error (adaptive quad
    # misjudges kinks); 1e-6 allows eight kinks, a wrong integral is off by far more.
    zs = np.linspace(0.0, 1.0, 1025)
    vals = np.array([reference_point(x, y, 0, z, 1.0)[0] for z in zs])
    assert abs(lsm[0] - float(np.sum((vals[1:] + vals[:-1]) / 2 * np.diff(zs)))) < 1e-6


def test_lsm_is_last_step_minimax():
    "LSM minimises max over y in [0, 1] of (ŷ - y)² - L*(y) (checked on a grid)."
    rng = np.random.default_rng(5)
    x, y = rng.random(9), rng.random(9)
    lsm = loo_predictions(x, y, "lsm")
    zs = np.linspace(0, 1, 101)
    for i in (0, 4, 8):
        losses = np.array([reference_point(x, y, i, z, 1.0)[1] for z in zs])
        worst = lambda p: np.max((p - zs) ** 2 - losses)
        grid = np.linspace(0, 1, 401)
        assert abs(grid[np.argmin([worst(p) for p in grid])] - lsm[i]) <= 0.0026


def test_excess_loo_definition_and_entropic_loss():
    rng = np.random.default_rng(6)
    t = 25
    x, y = rng.random(t), (rng.random(t) < 0.4).astype(float)
    fitted, lstar = reference_fit(x, y, np.ones(t))
    for m in ("ir-int", "log-ivap", "lsm"):
        pred = reference_loo(x, y, m)
        assert excess_loo(x, y, m) == pytest.approx((np.sum((y - pred) ** 2) - lstar) / t, abs=1e-12)
    ent = lambda y, p: -np.sum(y * np.log(np.where(y > 0, p, 1)) + (1 - y) * np.log(np.where(y < 1, 1 - p, 1)))
    pred = reference_loo(x, y, "log-ivap")
    expected = (ent(y, pred) - ent(y, fitted)) / t
    assert excess_loo(x, y, "log-ivap", loss="entropic") == pytest.approx(expected, abs=1e-12)
    assert isotonic_loss(x, y) == pytest.approx(lstar, abs=1e-12)


@given(datasets, st.sampled_from(METHODS))
def test_regret_increment_is_below_excess_loo(data, method):
    "r_t(D) by its definition (L*(D₋ᵢ) by refits), and Lemma 2.1: r_t(D) ≤ loo_t(D)."
    x, y = (np.array(a, float) for a in data)
    t = len(x)
    pred = reference_loo(x, y, method)
    l_minus = [reference_fit(np.delete(x, i), np.delete(y, i), np.ones(t - 1))[1] for i in range(t)]
    lstar = reference_fit(x, y, np.ones(t))[1]
    expected = np.mean((y - pred) ** 2 + np.array(l_minus)) - lstar
    r = regret_increment(x, y, method)
    assert r == pytest.approx(expected, abs=1e-12)
    assert r <= excess_loo(x, y, method) + 1e-12


def test_noise_free_interpolation_prop_2_2():
    "IR-Int on isotonic labels is linear interpolation: loo_t = (1/4t) Σ (δ_{i+1} - δ_i)² ≤ 1/(2t)."
    rng = np.random.default_rng(7)
    for t in (5, 50, 500):
        for y in (np.sort(rng.random(t)), (np.arange(t) >= t // 3).astype(float)):
            d = np.diff(np.concatenate(([0.0], y, [1.0])))
            expected = np.sum(np.diff(d) ** 2) / (4 * t)
            got = excess_loo(np.arange(t, dtype=float), y, "ir-int")
            assert got == pytest.approx(expected, abs=1e-13) and got <= 1 / (2 * t) + 1e-15
    x, y = np.arange(100.0), (np.arange(100) >= 50).astype(float)
    assert excess_loo(x, y, "ir-int") == pytest.approx(1 / 200, abs=1e-14)
    for m in ("log-ivap", "brier-ivap", "lsm"): assert excess_loo(x, y, m) > 1 / 200


def test_segment_sequence_levels_and_rate():
    x, y = segment_sequence(6)
    assert len(x) == 36 and y[:6].tolist() == [1, 0, 0, 0, 0, 0] and y[-6:].tolist() == [1] * 6
    np.testing.assert_allclose(isotonic_regression(y).x, np.repeat(np.arange(1, 7) / 6, 6), atol=1e-15)
    x, y = segment_sequence(100)
    for m in ("ir-int", "log-ivap", "brier-ivap", "lsm"):
        assert 0.30 < excess_loo(x, y, m) * 100 < 0.37, m       # √t·loo_t → 1/3 (Lemma 4.4, Appendix F)


def test_default_heavy_weight_is_cube_root_of_t():
    rng = np.random.default_rng(8)
    x, y = rng.random(50), rng.random(50)
    np.testing.assert_array_equal(loo_predictions(x, y, "heavy"), loo_predictions(x, y, "heavy", c=50 ** (1 / 3)))


def test_learner_plays_leave_one_out_of_each_prefix():
    rng = np.random.default_rng(9)
    x, y = rng.integers(0, 10, 30).astype(float), rng.random(30)
    for m in METHODS:
        learner = ForwardLearner(m)
        for t in range(30):
            p = learner.predict(x[t])
            if t == 0: assert p == {"ir-int": 0.5, "direct": 0.5, "heavy": 0.5}.get(m, 0.5)
            else: assert abs(p - reference_loo(x[:t + 1], y[:t + 1], m)[t]) < 1e-12, (m, t)
            learner.update(x[t], y[t])
        assert learner.n_seen == 30


def test_simulate_regret_matches_a_hand_played_permutation():
    rng = np.random.default_rng(10)
    x, y = rng.random(25), (rng.random(25) < 0.5).astype(float)
    res = simulate_regret(x, y, "lsm", n_perm=1, seed=3, progress=False)
    sigma = np.random.default_rng(3).permutation(25)
    learner, losses = ForwardLearner("lsm"), []
    for i in sigma:
        losses.append((learner.predict(x[i]) - y[i]) ** 2)
        learner.update(x[i], y[i])
    assert res.regret[-1] == pytest.approx(np.sum(losses) - isotonic_loss(x, y), abs=1e-12)
    assert res.max_gap <= 1e-12
    res = simulate_regret(x, y, "heavy", n_perm=3, seed=1, progress=False)
    assert res.max_gap <= 1e-12 and len(res.regret) == 25
    assert not hasattr(res, "nope") and set(dir(res)) >= {"t", "regret", "increment", "r", "loo", "max_gap"}


def test_bad_input():
    ok = ([0.0, 1.0, 2.0], [0.0, 0.5, 1.0])
    cases = [
        (lambda: loo_predictions([0, 1], [0, 1.5]), ValueError, "`y` must lie in [0, 1]"),
        (lambda: loo_predictions([0, 1], [-0.1, 1]), ValueError, "`y`"),
        (lambda: loo_predictions([0, np.nan], [0, 1]), ValueError, "`x` must be finite"),
        (lambda: loo_predictions([0, 1], [0, np.inf]), ValueError, "`y` must be finite"),
        (lambda: loo_predictions([0, 1, 2], [0, 1]), ValueError, "length mismatch"),
        (lambda: loo_predictions([0.0], [1.0]), ValueError, "t ≥ 2"),
        (lambda: loo_predictions([], []), ValueError, "`x` is empty"),
        (lambda: loo_predictions([[0, 1]], [[0, 1]]), ValueError, "`x` must be one-dimensional"),
        (lambda: loo_predictions(["a", "b"], [0, 1]), TypeError, "`x`"),
        (lambda: loo_predictions(*ok, "ivap"), ValueError, "`method` must be one of"),
        (lambda: loo_predictions(*ok, "heavy", c=0), ValueError, "`c`"),
        (lambda: loo_predictions(*ok, "heavy", c=-1.0), ValueError, "`c`"),
        (lambda: loo_predictions(*ok, "heavy", c=np.inf), ValueError, "`c`"),
        (lambda: loo_predictions(*ok, "heavy", c="big"), TypeError, "`c`"),
        (lambda: loo_predictions(*ok, "heavy", gamma=1.5), ValueError, "`gamma`"),
        (lambda: loo_predictions(*ok, "heavy", gamma=-0.1), ValueError, "`gamma`"),
        (lambda: loo_predictions(*ok, "direct", lam=2.0), ValueError, "`lam`"),
        (lambda: excess_loo(*ok, loss="hinge"), ValueError, "`loss`"),
        (lambda: excess_loo([0.0], [0.0]), ValueError, "t ≥ 2"),
        (lambda: regret_increment([0, 1], [0, 2]), ValueError, "`y`"),
        (lambda: forward_predict([0, 1], [0, 1], np.nan), ValueError, "`x_new`"),
        (lambda: forward_predict([0, 1], [0, 1], "a"), TypeError, "`x_new`"),
        (lambda: forward_predict([0, 1], [0, 2], 0.5), ValueError, "`y_past`"),
        (lambda: forward_predict([0, 1], [0], 0.5), ValueError, "length mismatch"),
        (lambda: forward_predict([0, 1], [0, 1], 0.5, "heavy", c=0.0), ValueError, "`c`"),
        (lambda: ForwardLearner("nope"), ValueError, "`method`"),
        (lambda: ForwardLearner("lsm").update(0.0, 1.5), ValueError, "`y`"),
        (lambda: ForwardLearner("lsm").update(np.nan, 0.5), ValueError, "`x`"),
        (lambda: simulate_regret(*ok, n_perm=0, progress=False), ValueError, "`n_perm`"),
        (lambda: segment_sequence(0), ValueError, "`n`"),
    ]
    for f, err, text in cases:
        with pytest.raises(err) as info:
            f()
        assert text in str(info.value), (text, str(info.value))


def test_progress_bars_do_not_change_results(capsys):
    rng = np.random.default_rng(11)
    x, y = rng.random(20), rng.random(20)
    np.testing.assert_array_equal(loo_predictions_naive(x, y, "lsm", progress=True),
                                  loo_predictions_naive(x, y, "lsm"))
    a = simulate_regret(x, y, "ir-int", n_perm=2, seed=0, progress=True)
    b = simulate_regret(x, y, "ir-int", n_perm=2, seed=0, progress=False)
    np.testing.assert_array_equal(a.regret, b.regret)
    assert "regret (ir-int)" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 12: arguments named as the user passed them
from fractions import Fraction  # noqa: E402

from isocal.forward import heavy_weight  # noqa: E402


@pytest.mark.parametrize("call, err, text", [
    (lambda: heavy_weight(-1), ValueError, "`t` must be a positive integer, got -1"),
    (lambda: heavy_weight(0), ValueError, "`t` must be a positive integer, got 0"),
    (lambda: heavy_weight(2.5), TypeError, "`t` must be an integer, got 2.5"),
    (lambda: heavy_weight("a"), TypeError, "`t` must be an integer, got 'a'"),
    (lambda: heavy_weight(True), TypeError, "`t` must be an integer, got True"),
    (lambda: heavy_weight(5, c="x"), TypeError, "`c`"),
    (lambda: ForwardLearner().predict(np.nan), ValueError, "`x` must be finite"),
    (lambda: ForwardLearner().predict("a"), TypeError, "`x` must be a real number"),
    (lambda: ForwardLearner("lsm").update(0.0, 1.5), ValueError, "`y` must lie in [0, 1], got 1.5"),
    (lambda: simulate_regret([0., 1.], [0., 1.], seed=-1, progress=False), ValueError, "`seed`"),
    (lambda: simulate_regret([0., 1.], [0., 1.], seed="a", progress=False), TypeError, "`seed`"),
    (lambda: simulate_regret([0., 1.], [0., 1.], n_perm=2.0, progress=False), TypeError, "`n_perm`"),
    (lambda: segment_sequence(2.0), TypeError, "`n`"),
])
def test_messages_name_the_users_argument(call, err, text):
    with pytest.raises(err) as info:
        call()
    assert text in str(info.value), str(info.value)
    assert "x_new" not in str(info.value) and "index 0" not in str(info.value)


@given(st.integers(-10, 10**7))
def test_heavy_weight_domain(t):
    "Defined exactly on the positive integers, where it is the real cube root t^(1/3)."
    if t < 1:
        with pytest.raises(ValueError, match="`t`"):
            heavy_weight(t)
    else:
        v = heavy_weight(t)
        assert isinstance(v, float) and v > 0 and v ** 3 == pytest.approx(t, rel=1e-14)


# ---------------------------------------------------------------- issue 12: losses without cancellation
def exact_isotonic_loss(y):
    "L* of labels y (already in x order, no ties) by PAVA in exact rational arithmetic."
    blocks = []                                            # [sum, count, sum of squares]
    for v in (Fraction(float(u)) for u in y):
        blocks.append([v, 1, v * v])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] >= blocks[-1][0] * blocks[-2][1]:
            s, n, q = blocks.pop()
            blocks[-1] = [blocks[-1][0] + s, blocks[-1][1] + n, blocks[-1][2] + q]
    return sum(q - s * s / n for s, n, q in blocks)


shifted_labels = st.tuples(st.integers(4, 25), st.integers(0, 2**32 - 1),
                           st.sampled_from([0.0, 0.5, 1.0 - 2.0 ** -20, 1.0]), st.sampled_from([1e-12, 1e-7, 1e-3, 0.5]))


def make_shifted(t, seed, centre, spread):
    rng = np.random.default_rng(seed)
    y = np.clip(centre + spread * (rng.random(t) - 0.5), 0.0, 1.0)
    return np.arange(t, dtype=float), y


@given(shifted_labels)
def test_loo_losses_exact_for_labels_close_together(data):
    """L*(D₋ᵢ), L₀*, L₁* of `loo_all` against exact rational PAVA, for labels clustered around a value (spread down to
    1e-12): error ≤ 1e-9 × the loss plus 64 eps × Σ(label − ȳ)² over the configuration's labels, ȳ the mean of the
    data's labels — rounding at the scale of the labels' spread about their mean, not of Σy² (before the fix the
    error was eps·Σy²). A plugged-in label far from ȳ (0 or 1 into labels near 0.5) keeps its own (z − ȳ)² term."""
    t, seed, centre, spread = data
    x, y = make_shifted(t, seed, centre, spread)
    res = loo_all(x, y)
    ybar = Fraction(float(np.mean(y)))
    for i in range(0, t, max(1, t // 5)):
        rest = np.delete(y, i)
        for key, labels in (("L_minus", rest), ("L0", np.insert(rest, i, 0.0)), ("L1", np.insert(rest, i, 1.0))):
            exact = exact_isotonic_loss(labels)
            spread2 = sum((Fraction(float(v)) - ybar) ** 2 for v in labels)
            assert abs(Fraction(float(res[key][i])) - exact) <= Fraction(1, 10**9) * exact \
                + 64 * Fraction(2.0 ** -52) * spread2 + Fraction(1e-300), (key, i, float(res[key][i]), float(exact))


@given(shifted_labels, st.sampled_from(["ir-int", "lsm", "log-ivap"]), st.sampled_from(["squared", "entropic"]))
def test_excess_loo_exact_for_labels_close_together(data, method, loss):
    "excess_loo against the exact sum of per-point differences at the returned predictions (mpmath for logs)."
    import mpmath
    mpmath.mp.dps = 50
    t, seed, centre, spread = data
    x, y = make_shifted(t, seed, centre, spread)
    pred = loo_predictions(x, y, method)
    fitted = isotonic_regression(y).x
    if loss == "squared":
        exact = (sum((Fraction(float(a)) - Fraction(float(p))) ** 2 for a, p in zip(y, pred))
                 - exact_isotonic_loss(y)) / t
        size = sum((Fraction(float(a)) - Fraction(float(p))) ** 2 for a, p in zip(y, pred)) / t
        assert abs(Fraction(excess_loo(x, y, method)) - exact) <= Fraction(1, 10**9) * size * Fraction(1, 10**3) \
            + Fraction(1, 10**12) * abs(exact) + Fraction(1e-300)
    else:
        if np.any((pred <= 0) | (pred >= 1)): return
        ent = lambda a, p: -(a * mpmath.log(p) if a else 0) - ((1 - a) * mpmath.log(1 - p) if a != 1 else 0)
        terms = [ent(mpmath.mpf(float(a)), mpmath.mpf(float(p))) - ent(mpmath.mpf(float(a)), mpmath.mpf(float(f)))
                 for a, p, f in zip(y, pred, fitted)]
        exact = mpmath.fsum(terms) / t
        got = excess_loo(x, y, method, loss="entropic")
        assert abs(mpmath.mpf(got) - exact) <= 1e-10 * abs(exact) + mpmath.mpf(1e-300), (got, exact)


# ---------------------------------------------------------------- issue 14: online-to-batch (Section 3)
import itertools  # noqa: E402

from hypothesis import settings  # noqa: E402

from isocal.online_to_batch import O2BResult, ew_levels, ew_predict, ew_regret_bound, o2b_loo, o2b_predict  # noqa: E402


def ew_by_enumeration(x_design, x_seen, y_seen, K, eta=0.5):
    """Exponential weights written out: every non-decreasing map f from the design's distinct x to {0, 1/K, …, 1},
    weight exp(-η Σ_seen (f(x) − y)²) (in log space, so thousands of labels do not underflow); the posterior mean
    at every design point."""
    ux = np.unique(x_design)
    at = np.searchsorted(ux, np.asarray(x_seen, float))
    paths = np.array(list(itertools.combinations_with_replacement(range(K + 1), len(ux)))) / K
    logw = -eta * np.array([np.sum((f[at] - y_seen) ** 2) for f in paths])
    w = np.exp(logw - logw.max())
    return (w @ paths / w.sum())[np.searchsorted(ux, x_design)]


def o2b_by_permutations(x, y, i, K, eta=0.5):
    """Eq. (3) verbatim: over j = 1..t and every order σ of the points with σ_t = i (the others in any order first),
    the mean of the fixed-design prediction at x_i after the labels σ_1..σ_{j-1}."""
    others = [k for k in range(len(x)) if k != i]
    preds = [ew_by_enumeration(x, x[list(p[:j])], y[list(p[:j])], K, eta)[i]
             for p in itertools.permutations(others) for j in range(len(x))]
    return float(np.mean(preds))


def regrets_over_all_orders(x, y, K, eta=0.5):
    "Regret of the fixed-design learner (horizon t, design x) in every order of revelation."
    lstar = reference_fit(x, y, np.ones(len(x)))[1]
    out = []
    for order in itertools.permutations(range(len(x))):
        seen = list(order)
        loss = sum((ew_by_enumeration(x, x[seen[:j]], y[seen[:j]], K, eta)[i] - y[i]) ** 2 for j, i in enumerate(seen))
        out.append(loss - lstar)
    return np.array(out)


designs = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 4), min_size=n, max_size=n),
    st.lists(st.tuples(st.integers(0, n - 1), st.one_of(labels, st.floats(0, 1)), st.integers(1, 3)), max_size=6),
    st.integers(1, 4), st.floats(0.01, 0.5)))


@given(designs)
def test_ew_predict_matches_enumeration(data):
    "The forward-backward pass against exponential weights over the explicitly listed class F_K (ties, repeats)."
    xd, seen, K, eta = data
    xd = np.array(xd, float)
    xs = np.array([xd[i] for i, _, c in seen for _ in range(c)])
    ys = np.array([v for _, v, c in seen for _ in range(c)])
    np.testing.assert_allclose(ew_predict(xd, xs, ys, levels=K, eta=eta), ew_by_enumeration(xd, xs, ys, K, eta),
                               rtol=0, atol=1e-12)


def test_ew_predict_many_tied_labels():
    "Thousands of labels at a few x: the bump factors stay finite (the reference works in log space)."
    rng = np.random.default_rng(12)
    xd = np.repeat([0.0, 1.0, 2.0], 2000)
    ys = np.clip(np.repeat([0.2, 0.7, 0.4], 2000) + rng.normal(0, 0.05, 6000), 0, 1)
    for K in (3, 10):
        got = ew_predict(xd, xd, ys, levels=K)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ew_by_enumeration(xd, xd, ys, K), rtol=0, atol=1e-12)


small_sets = st.integers(2, 5).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 3), min_size=n, max_size=n),
    st.lists(st.one_of(labels, st.floats(0, 1)), min_size=n, max_size=n),
    st.integers(1, 3), st.sampled_from([0.5, 0.2])))


@settings(max_examples=25, deadline=None)
@given(small_sets)
def test_theorem_3_1_by_brute_force(data):
    """Eq. (3) over explicit permutations, E_σ Reg_t over all t! orders: the randomised learner's loo_t equals
    E_σ[Reg_t]/t (the proof's identity), (3)'s is at most that (Theorem 3.1), every order's regret is at most
    `ew_regret_bound`, and the grid's best loss is within t/(4K²) of L*."""
    x, y, K, eta = np.array(data[0], float), np.array(data[1], float), data[2], data[3]
    t, G = len(x), len(np.unique(x))
    res = o2b_loo(x, y, levels=K, eta=eta, exact=True)
    assert isinstance(res, O2BResult) and res.exact and res.levels == K
    expected = np.array([o2b_by_permutations(x, y, i, K, eta) for i in range(t)])
    np.testing.assert_allclose(res.predictions, expected, rtol=0, atol=1e-12)
    regrets = regrets_over_all_orders(x, y, K, eta)
    lstar = reference_fit(x, y, np.ones(t))[1]
    assert res.loo == pytest.approx((np.sum((y - expected) ** 2) - lstar) / t, abs=1e-12)
    assert res.randomized_loo * t == pytest.approx(regrets.mean(), abs=1e-12)
    assert res.loo <= res.randomized_loo + 1e-15
    bound = ew_regret_bound(t, K, n_distinct=G, eta=eta)
    assert regrets.max() <= bound + 1e-12 and res.bound == pytest.approx(bound / t, rel=1e-15)
    keep = np.arange(t) != np.arange(t)[:, None]
    np.testing.assert_allclose(res.last_term, [ew_by_enumeration(x, x[k], y[k], K, eta)[i] for i, k in enumerate(keep)],
                               rtol=0, atol=1e-12)
    ux = np.unique(x)
    grid_best = min(np.sum((np.array(f)[np.searchsorted(ux, x)] / K - y) ** 2)
                    for f in itertools.combinations_with_replacement(range(K + 1), G))
    assert grid_best <= lstar + t / (4 * K * K) + 1e-12


def test_o2b_predict_readable_against_the_kernel():
    rng = np.random.default_rng(13)
    x, y = rng.integers(0, 6, 9).astype(float), rng.random(9)
    res = o2b_loo(x, y)                                     # t ≤ 12: exact by default
    assert res.exact
    for i in range(9):
        keep = np.arange(9) != i
        assert o2b_predict(x[keep], y[keep], x[i]) == pytest.approx(res.predictions[i], abs=1e-12)
    # footnote 2: single draws of (j, S) average to (3); a draw lies in [0, 1]
    draws = [o2b_predict(x[1:], y[1:], x[0], n_samples=1, seed=s) for s in range(3000)]
    assert all(0 <= d <= 1 for d in draws)
    assert abs(np.mean(draws) - res.predictions[0]) < 4 * np.std(draws) / np.sqrt(3000)
    same = [o2b_predict(x[1:], y[1:], x[0], n_samples=50, seed=1) for _ in range(2)]
    assert same[0] == same[1]


def test_o2b_monte_carlo_is_unbiased():
    "The estimate against exact enumeration (16 points, ties): means of 40 independent runs within 4 standard errors."
    rng = np.random.default_rng(14)
    x, y = rng.integers(0, 10, 16).astype(float), (rng.random(16) < 0.5).astype(float)
    ex = o2b_loo(x, y, exact=True)
    runs = [o2b_loo(x, y, exact=False, n_rounds=50, seed=s) for s in range(40)]
    for key in ("loo", "randomized_loo"):
        vals = np.array([r[key] for r in runs])
        assert abs(vals.mean() - ex[key]) < 4 * vals.std(ddof=1) / np.sqrt(len(vals)), key
    preds = np.array([r.predictions for r in runs])
    assert np.all(np.abs(preds.mean(0) - ex.predictions) < 4 * preds.std(0, ddof=1) / np.sqrt(len(runs)) + 1e-12)
    np.testing.assert_allclose(runs[0].last_term, ex.last_term, rtol=0, atol=1e-15)
    again = o2b_loo(x, y, exact=False, n_rounds=50, seed=0)
    assert again.loo == runs[0].loo and np.array_equal(again.predictions, runs[0].predictions)


def test_o2b_exact_does_not_depend_on_input_order():
    rng = np.random.default_rng(15)
    x, y = rng.integers(0, 5, 10).astype(float), rng.random(10)
    perm = rng.permutation(10)
    a, b = o2b_loo(x, y, exact=True), o2b_loo(x[perm], y[perm], exact=True)
    np.testing.assert_allclose(b.predictions, a.predictions[perm], rtol=0, atol=1e-13)
    assert b.loo == pytest.approx(a.loo, abs=1e-13)


def test_ew_levels_minimises_the_bound():
    for t, g in ((1, None), (2, None), (10, None), (1000, None), (1000, 20), (100_000, None), (400, 1)):
        G = t if g is None else g
        bound = lambda k: math.log(math.comb(G + k, k)) / 0.5 + t / (4 * k * k)
        best = min(range(1, 2000), key=bound)
        assert ew_levels(t, n_distinct=g) == best, (t, g)
        assert ew_regret_bound(t, best, n_distinct=g) == pytest.approx(bound(best), rel=1e-12)
    assert ew_levels(10**6) == min(range(1, 200), key=lambda k: math.lgamma(10**6 + k + 1) - math.lgamma(k + 1)
                                   - math.lgamma(10**6 + 1) + 10**6 / (8 * k * k))


def test_o2b_rate_on_the_segment_sequence():
    "Below IR-Int on the hard sequence of Section 4.5 and below the bound B_t (values from the notebook's run)."
    x, y = segment_sequence(64)
    res = o2b_loo(x, y, n_rounds=16, seed=0)
    assert res.loo <= res.bound and res.randomized_loo <= res.bound
    assert res.loo < 0.75 * excess_loo(x, y, "ir-int")


@pytest.mark.parametrize("call, err, text", [
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], eta=0.0), ValueError, "`eta` must lie in (0, 0.5]"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], eta=0.6), ValueError, "`eta`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], eta=np.nan), ValueError, "`eta`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], eta="a"), TypeError, "`eta`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], eta=True), TypeError, "`eta`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], levels=0), ValueError, "`levels` must be a positive integer"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], levels=2.5), TypeError, "`levels`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], n_rounds=1), ValueError, "`n_rounds` must be at least 2"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], n_rounds=4.0), TypeError, "`n_rounds`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], exact="yes"), TypeError, "`exact`"),
    (lambda: o2b_loo(np.arange(21.0), np.zeros(21), exact=True), ValueError, "t ≤ 20"),
    (lambda: o2b_loo([0, 1, 2], [0, 1, 1], seed=-1), ValueError, "`seed`"),
    (lambda: o2b_loo([0, 1, 2], [0, 1.5, 1]), ValueError, "`y` must lie in [0, 1]"),
    (lambda: o2b_loo([0, np.inf, 2], [0, 1, 1]), ValueError, "`x` must be finite"),
    (lambda: o2b_loo([0, 1], [0, 1, 1]), ValueError, "length mismatch"),
    (lambda: o2b_loo([0.0], [1.0]), ValueError, "t ≥ 2"),
    (lambda: ew_predict([0, 1, 2], [0.5], [1.0]), ValueError, "found 0.5 at index 0"),
    (lambda: ew_predict([0, 1, 2], [3.0], [1.0]), ValueError, "`x_seen` must hold design points"),
    (lambda: ew_predict([0, 1, 2], [1.0], [1.5]), ValueError, "`y_seen` must lie in [0, 1]"),
    (lambda: ew_predict([0, 1, 2], [1.0, 2.0], [1.0]), ValueError, "length mismatch"),
    (lambda: ew_predict([], [], []), ValueError, "`x_design` is empty"),
    (lambda: ew_predict([[0, 1]], [], []), ValueError, "`x_design` must be one-dimensional"),
    (lambda: ew_predict([0, 1], [0], [np.nan]), ValueError, "`y_seen` must be finite"),
    (lambda: ew_predict([0, 1], [0], [1], levels=-2), ValueError, "`levels`"),
    (lambda: o2b_predict(np.arange(16.0), np.zeros(16), 3.5), ValueError, "pass `n_samples`"),
    (lambda: o2b_predict([0, 1], [0, 1], 0.5, n_samples=0), ValueError, "`n_samples` must be a positive integer"),
    (lambda: o2b_predict([0, 1], [0, 1], np.nan), ValueError, "`x_new` must be finite"),
    (lambda: o2b_predict([0, 1], [0, 2], 0.5), ValueError, "`y_past`"),
    (lambda: o2b_predict([0, 1], [0, 1], 0.5, n_samples=3, seed="a"), TypeError, "`seed`"),
    (lambda: ew_levels(0), ValueError, "`t` must be a positive integer"),
    (lambda: ew_levels(10, n_distinct=11), ValueError, "`n_distinct` must be at most `t`"),
    (lambda: ew_levels(10, n_distinct=0), ValueError, "`n_distinct`"),
    (lambda: ew_regret_bound(10, 0), ValueError, "`levels`"),
    (lambda: ew_regret_bound(10, 3, eta=1.0), ValueError, "`eta`"),
])
def test_o2b_bad_input(call, err, text):
    with pytest.raises(err) as info:
        call()
    assert text in str(info.value), str(info.value)


def test_o2b_small_edge_cases():
    assert o2b_predict([], [], 0.3) == 0.5                      # one point, no label: the prior mean
    res = o2b_loo([0.0, 0.0], [0.0, 1.0])                      # two tied points
    assert res.exact and res.levels >= 1 and np.all((0 <= res.predictions) & (res.predictions <= 1))
    assert ew_levels(1) == 1


@pytest.mark.parametrize("method", ["ir-int", "heavy", "lsm", "log-ivap", "direct"])
def test_loo_predictions_own_their_memory(method):
    "The predictions are an array of their own, not a row of the kernel's 8-row table (which would keep 8 t alive)."
    r = np.random.default_rng(0)
    x, y = r.uniform(size=50), (r.uniform(size=50) < 0.5).astype(float)
    pred = loo_predictions(x, y, method)
    assert pred.flags.owndata and pred.shape == (50,)


def test_no_kernel_raises_to_a_power():
    """`x ** 2` inside a Numba kernel compiles a power routine (not cached) into that kernel on the user's first call;
    the kernels of isocal.forward and isocal.online_to_batch multiply instead (see "The kernels, laid out for the
    first call" in nbs/05_forward.ipynb). Python code around the kernels may use `**`."""
    import ast
    import inspect
    import textwrap

    from numba.core.dispatcher import Dispatcher

    import isocal.forward
    import isocal.online_to_batch
    kernels = {name: k.py_func for module in (isocal.forward, isocal.online_to_batch) for name, k in vars(module).items()
               if isinstance(k, Dispatcher) and k.py_func.__module__ == module.__name__}
    assert {"_loo_kernel", "_pool_around", "_push", "_o2b_exact"} <= set(kernels)
    powers = [name for name, f in kernels.items()
              if any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
                     for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(f)))))]
    assert powers == []


# ---------------------------------------------------------------- issue 30: Heavy-γ with a tiny c

def exact_plugged(x, y, i, z, w):
    """ŷᵢ after replacing point i's label by z with weight w: exact PAVA in rational arithmetic (tied x pooled)."""
    from fractions import Fraction
    groups = {}
    for j, (xj, yj) in enumerate(zip(x, y)):
        s, t = groups.get(xj, (Fraction(0), Fraction(0)))
        wj, lj = (Fraction(w), Fraction(z)) if j == i else (Fraction(1), Fraction(yj))
        groups[xj] = (s + wj * lj, t + wj)
    stack = []
    for xj in sorted(groups):
        s, t, xs = *groups[xj], [xj]
        while stack and stack[-1][0] / stack[-1][1] >= s / t:
            ps, pt, pxs = stack.pop()
            s, t, xs = s + ps, t + pt, pxs + xs
        stack.append((s, t, xs))
    return next(float(s / t) for s, t, xs in stack if x[i] in xs)


@pytest.mark.parametrize("c", [1e-300, 1e-200, 1e-17, 1e-5, 1e200])
def test_heavy_with_extreme_c_is_exact(c):
    x, y = np.array([.1, .2, .3, .4, .5]), np.array([0, 1, 0, 1, 1.0])
    expect = [exact_plugged(x, y, i, 0.5, c) for i in range(5)]
    np.testing.assert_allclose(loo_predictions(x, y, "heavy", c=c), expect, rtol=1e-14, atol=0)
    if c == 1e-300:
        np.testing.assert_array_equal(loo_predictions(x, y, "heavy", c=c), [0.5, 5e-301, 1.0, 0.5, 1.0])


@given(st.integers(2, 12).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 6), min_size=n, max_size=n),
                                                       st.lists(st.integers(0, 1), min_size=n, max_size=n))),
       st.sampled_from([1e-300, 1e-250, 1e-30, 1e-16, 1e250]), st.floats(0, 1))
def test_heavy_predictions_relative_to_exact_on_binary_labels(data, c, gamma):
    """On 0/1 labels every prediction agrees with exact rational arithmetic to relative rounding, however small:
    predictions are formed from the unshifted label sums, and a tiny c is not lost among the running totals."""
    x, y = (np.array(a, float) for a in data)
    got = loo_predictions(x, y, "heavy", c=c, gamma=gamma)
    expect = [exact_plugged(x, y, i, gamma, c) for i in range(len(x))]
    np.testing.assert_allclose(got, expect, rtol=1e-13, atol=0)
    np.testing.assert_allclose(loo_all(x, y, c=c, gamma=gamma)["heavy"], expect, rtol=1e-13, atol=0)
