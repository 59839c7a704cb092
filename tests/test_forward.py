"""Tests of isocal.forward against independent references.

References (no expected value below was produced by isocal.forward): the minimax formula (4) of the paper evaluated by
brute force over all block boundaries (`minimax_fit`, O(t³), with tied x pooled), the formulas of Prop. 2.2 and Appendix
B, numerical integration (trapezoid rule on a uniform grid) and, for larger t, the naive one-refit-per-point leave-one-out built on
isocal.pava.isotonic_regression (itself tested against SciPy in tests/test_pava.py).
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
    (lambda: heavy_weight(2.5), TypeError, "`t` must be a positive integer, got 2.5"),
    (lambda: heavy_weight("a"), TypeError, "`t` must be a positive integer, got 'a'"),
    (lambda: heavy_weight(True), TypeError, "`t` must be a positive integer, got True"),
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
