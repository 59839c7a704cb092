"""Benchmark of isocal.forward (issue 6): run `python bench/forward.py [--quick]`.

* leave-one-out predictions of all five methods ("ir-int", "log-ivap", "brier-ivap", "lsm", "heavy") at t = 1e6:
  noisy labels (target ≤ 5 s in total) and noise-free increasing labels, the worst case for local merging (≤ 30 s);
  both as five `loo_predictions` calls and as one `loo_all` pass;
* at t = 1e4: the one-pass `loo_all` vs the naive leave-one-out that refits once per point and label estimate
  with isocal.pava.isotonic_regression (target ≥ 100x), same process, results checked equal;
* first-call (compile) time in a fresh subprocess with an empty numba cache, and the cached load time;
* the online-to-batch learner of Section 3 (issue 14): `o2b_loo` at t = 1e6 (seconds per round, passes per round),
  against the same estimator without shared passes (one `ew_predict` call per point and draw) at t = 2000, same
  process, both estimates of the randomised learner's excess loss shown with their standard errors.

Next to each time, its peak memory: traced by tracemalloc in one more, untimed call (bench/timing.py), in arrays of t
float64 (8t bytes) and MB, the result returned counted; for a row of several calls, the largest of their peaks; for
the fresh processes of the first-call times, their peak RSS.
"""
import os
import sys
import tempfile
import time

import numpy as np

from isocal.forward import isotonic_loss, loo_all, loo_predictions
from isocal.online_to_batch import ew_predict, o2b_loo
from isocal.pava import isotonic_regression
from timing import arrays, best_and_peak, peak_bytes, run_peak_rss

FIVE = ("ir-int", "log-ivap", "brier-ivap", "lsm", "heavy")


def naive_all(y, c, gamma=0.5):
    "Leave-one-out ŷ⁰, ŷ¹, L₀*, L₁*, Heavy-γ, IR-Int by refitting per point (x = 0..t-1, distinct): 4 fits a point."
    t = len(y)
    out = np.empty((6, t))
    ones = np.ones(t)
    for i in range(t):
        yy, ww = y.copy(), ones.copy()
        for z in (0, 1):
            yy[i] = z
            f = isotonic_regression(yy).x
            out[z, i], out[2 + z, i] = f[i], np.sum((yy - f) ** 2)
        yy[i], ww[i] = gamma, c
        out[4, i] = isotonic_regression(yy, ww).x[i]
        f = isotonic_regression(np.delete(y, i)).x
        left = f[i - 1] if i > 0 else 0.0
        right = f[i] if i < t - 1 else 1.0
        out[5, i] = (left + right) / 2
    return {"y0": out[0], "y1": out[1], "L0": out[2], "L1": out[3], "heavy": out[4], "ir-int": out[5],
            "log-ivap": out[1] / (out[1] + 1 - out[0]), "brier-ivap": (1 + out[0] ** 2 - (1 - out[1]) ** 2) / 2,
            "lsm": (1 + out[2] - out[3]) / 2}


def compile_times():
    """((seconds, peak RSS bytes) of the first call with an empty numba cache, the same with the cache filled), each
    in a fresh interpreter; an RSS is None without /usr/bin/time."""
    code = ("import time, numpy as np; t0 = time.perf_counter(); from isocal.forward import loo_all; "
            "t1 = time.perf_counter(); loo_all(np.arange(5.0), np.array([0, 1, .5, 0, 1.])); "
            "print(time.perf_counter() - t1)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        def run():
            out, rss = run_peak_rss([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            return float(out.stdout.split()[-1]), rss
        return run(), run()


def data(kind, t, rng):
    x = np.arange(t, dtype=float)
    if kind == "noisy": return x, np.clip(np.linspace(0, 1, t) + rng.normal(0, 0.3, t), 0, 1)
    if kind == "binary": return x, (rng.random(t) < np.linspace(0, 1, t)).astype(float)
    return x, np.linspace(0, 1, t)


def o2b_per_point(x, y, rounds, rng):
    """The randomised learner's excess loss estimated without shared passes: per round and point, one uniform draw of
    m and of an m-subset S of the others, one `ew_predict` call. Returns (estimate, standard error over rounds)."""
    t = len(x)
    lstar, per_round = isotonic_loss(x, y), []
    for _ in range(rounds):
        loss = 0.0
        for i in range(t):
            others = np.delete(np.arange(t), i)
            S = rng.choice(others, int(rng.integers(0, t)), replace=False)
            loss += (ew_predict(x, x[S], y[S])[i] - y[i]) ** 2
        per_round.append((loss - lstar) / t)
    return float(np.mean(per_round)), float(np.std(per_round, ddof=1) / np.sqrt(rounds))


def o2b_rows(quick):
    """(t, seconds per round, passes per round) of `o2b_loo` at a large t, and the per-point comparison at t = 2000;
    the traced peak bytes of each of the three timed runs (one more, untimed run each) last."""
    rng = np.random.default_rng(1)
    big = 100_000 if quick else 1_000_000
    x = np.sort(rng.random(big))
    y = (rng.random(big) < x).astype(float)
    o2b_loo(x[:200], y[:200], n_rounds=2, seed=0)                       # compile
    rounds = 8
    t0 = time.perf_counter()
    res = o2b_loo(x, y, n_rounds=rounds, seed=0)
    per_round = (time.perf_counter() - t0) / rounds
    p_big = peak_bytes(lambda: o2b_loo(x, y, n_rounds=rounds, seed=0))
    small = 2000
    xs = np.sort(rng.random(small))
    ys = (rng.random(small) < xs).astype(float)
    t0 = time.perf_counter()
    shared = o2b_loo(xs, ys, n_rounds=64, seed=0)
    t_shared = (time.perf_counter() - t0) / 64
    p_shared = peak_bytes(lambda: o2b_loo(xs, ys, n_rounds=64, seed=0))
    t0 = time.perf_counter()
    naive, naive_se = o2b_per_point(xs, ys, 2, rng)
    t_naive = (time.perf_counter() - t0) / 2
    p_naive = peak_bytes(lambda: o2b_per_point(xs, ys, 2, np.random.default_rng(2)))
    return (big, per_round, res.passes / rounds, res.levels, small, t_shared, t_naive, shared, (naive, naive_se),
            (p_big, p_shared, p_naive))


def main(quick=False):
    rng = np.random.default_rng(0)
    big, small = (100_000, 2_000) if quick else (1_000_000, 10_000)
    first, cached = compile_times()
    loo_all(*data("noisy", 1000, rng))                                   # warm-up in this process
    rows = []
    for kind, target in (("noisy", 5.0), ("binary", 5.0), ("increasing", 30.0)):
        x, y = data(kind, big, rng)
        per_method = {m: best_and_peak(lambda: loo_predictions(x, y, m), repeat=2) for m in FIVE}
        one_pass = best_and_peak(lambda: loo_all(x, y), repeat=2)
        rows.append((kind, big, sum(t for t, _ in per_method.values()), max(p for _, p in per_method.values()),
                     one_pass, target, per_method))
    x, y = data("noisy", small, rng)
    t_fast, p_fast = best_and_peak(lambda: loo_all(x, y))
    t0 = time.perf_counter()
    ref = naive_all(y, c=small ** (1 / 3))
    t_naive = time.perf_counter() - t0
    p_naive = peak_bytes(lambda: naive_all(y, c=small ** (1 / 3)))
    fast = loo_all(x, y)
    err = max(np.max(np.abs(fast[m] - ref[m])) for m in FIVE)

    rss = lambda b: "-" if b is None else f"{b / 1e6:.0f} MB"
    print(f"first call (compile, empty numba cache): {first[0]:.1f} s (peak RSS {rss(first[1])}); with the cache: "
          f"{cached[0]:.2f} s (peak RSS {rss(cached[1])})\n")
    mem = lambda peak, t: f"{arrays(peak, t):.2f} ({peak / 1e6:.3g} MB)"
    print(f"{'what':<46} {'t':>9} {'isocal s':>9} {'isocal peak':>17} {'baseline s':>11} {'baseline peak':>17} "
          f"{'ratio':>8}  target   (peak: traced, arrays of t)")
    for kind, t, total, p_total, (one_pass, p_one), target, per_method in rows:
        print(f"{'loo, 5 methods, 5 calls, ' + kind:<46} {t:>9.0e} {total:>9.3f} {mem(p_total, t):>17} {'':>11} "
              f"{'':>17} {'':>8}  ≤ {target:.0f} s: {'met' if total <= target else 'MISSED'}")
        print(f"{'loo, 5 methods, one loo_all pass, ' + kind:<46} {t:>9.0e} {one_pass:>9.3f} {mem(p_one, t):>17} "
              f"{'':>11} {'':>17} {'':>8}  ≤ {target:.0f} s: {'met' if one_pass <= target else 'MISSED'}")
        print("    per method (s, peak arrays of t): " + ", ".join(f"{m} {s:.2f} s {arrays(p, t):.2f}"
                                                             for m, (s, p) in per_method.items()))
    ratio = t_naive / t_fast
    print(f"{'loo, 5 methods vs naive per-point refits':<46} {small:>9.0e} {t_fast:>9.4f} {mem(p_fast, small):>17} "
          f"{t_naive:>11.2f} {mem(p_naive, small):>17} {ratio:>7.0f}x  ≥ 100x: {'met' if ratio >= 100 else 'MISSED'} "
          f"(max |diff| {err:.1e})")
    big, per_round, passes, K, small, t_shared, t_naive, shared, naive, (p_big, p_shared, p_naive) = o2b_rows(quick)
    print("\nonline-to-batch (Section 3), well-specified Bernoulli(x) labels (peak: traced, arrays of t):")
    print(f"  o2b_loo at t = {big:.0e}, K = {K}: {per_round:.2f} s per round (set-up included), "
          f"{passes:.1f} forward-backward passes per round; peak of the 8-round call {mem(p_big, big)}")
    print(f"  t = {small}: o2b_loo {t_shared * 1e3:.1f} ms per round (peak of the 64-round call {mem(p_shared, small)}), "
          f"one ew_predict per point and draw {t_naive:.2f} s per round (peak {mem(p_naive, small)}), ratio "
          f"{t_naive / t_shared:.0f}x")
    print(f"  randomised learner's excess loss: o2b_loo {shared.randomized_loo:.5f} ± {shared.randomized_se:.5f} "
          f"(64 rounds), per point {naive[0]:.5f} ± {naive[1]:.5f} (2 rounds)")
    if quick: print("\n(--quick: sizes reduced; the targets are for t = 1e6 and 1e4)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
