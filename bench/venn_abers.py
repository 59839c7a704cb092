"""Benchmark isocal's Venn–Abers predictors against the venn-abers package, np.argsort and np.searchsorted, in one process.

Run from the repository root:

    .venv/bin/python bench/venn_abers.py [--quick] [--repeat 5]

Rows (best of `--repeat` warm runs after a warm-up call; ratios are isocal / baseline from the same run):

a. k = 1e5 calibration scores of a sharp classifier (labels from a steep sigmoid of the score), m = 1e5 test scores:
   `VennAbers().fit(s, y).predict_interval(t)` vs `venn_abers.VennAbers().fit(...).predict_proba(...)` (1.5.4), which
   is timed once (it takes tens of seconds). Target: isocal at least 200x faster.
b. k = 1e6, m = 1e5: isocal fit + predict vs one `np.argsort` of the k scores. Target: <= 4x.
c. predict alone, m = 1e7 test scores into a fitted IVAP on k = 1e5 (its k' distinct scores) vs
   `np.searchsorted(distinct scores, test scores)`. Target: <= 2x.
d. CVAP with 5 folds on k = 1e6 (5 IVAPs on the out-of-fold scores, m = 1e5 test scores per fold model, merged) vs
   IVAP fit + predict on k = 1e6, m = 1e5. Target: <= 6x.
e. First call: the cold Numba compile of fit + predict (NUMBA_CACHE_DIR pointed at an empty directory, in a fresh
   subprocess) and the first call with a warm cache; peak extra resident memory of a k = 1e6 fit + predict in a
   subprocess (Linux: the peak VmHWM is reset through /proc/self/clear_refs just before; Numba's allocations are
   invisible to tracemalloc).

--quick shrinks the sizes by 10x (and times venn-abers on k = 1e4) for a smoke run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# This script is named like the venn-abers package: keep its own directory off the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

VA_TARGET, ARGSORT_TARGET, SEARCH_TARGET, CVAP_TARGET = 200.0, 4.0, 2.0, 6.0


def sharp_data(k, seed=0, steepness=20.0):
    "Scores of a sharp classifier: labels drawn from a steep sigmoid of the score."
    rng = np.random.default_rng(seed)
    s = rng.normal(size=k)
    y = (rng.uniform(size=k) < 1 / (1 + np.exp(-steepness * s))).astype(np.int64)
    return s, y


def best_time(fn, repeat):
    fn()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
    return best


def ivap_fit_predict(s, y, t):
    from isocal.venn_abers import VennAbers
    return VennAbers().fit(s, y).predict_interval(t)


def row(what, sizes, ours, base, base_name, target, larger_is_better=False):
    ratio = base / ours if larger_is_better else ours / base
    ok = ratio >= target if larger_is_better else ratio <= target
    sign = '>=' if larger_is_better else '<='
    print(f"{what:<34} {sizes:<18} {ours * 1e3:>10.1f} {base * 1e3:>11.1f}  {base_name:<18} "
          f"{ratio:>8.2f}x  target {sign} {target:g}x  {'PASS' if ok else 'MISS'}")
    return ok


def bench_venn_abers_package(k, m, repeat):
    import venn_abers
    s, y = sharp_data(k, 1)
    t = np.random.default_rng(2).normal(size=m)
    ours = best_time(lambda: ivap_fit_predict(s, y, t), repeat)
    t0 = time.perf_counter()
    _, p01 = venn_abers.VennAbers().fit(np.c_[1 - s, s], y).predict_proba(np.c_[1 - t, t])
    base = time.perf_counter() - t0
    p0, p1 = ivap_fit_predict(s, y, t)
    assert np.abs(p0 - p01[:, 0]).max() <= 1e-12 and np.abs(p1 - p01[:, 1]).max() <= 1e-12, "results differ"
    return row("a. fit+predict vs venn-abers", f"k={k:.0e} m={m:.0e}", ours, base, "venn-abers 1.5.4",
               VA_TARGET, larger_is_better=True)


def bench_argsort(k, m, repeat):
    s, y = sharp_data(k, 3)
    t = np.random.default_rng(4).normal(size=m)
    ours = best_time(lambda: ivap_fit_predict(s, y, t), repeat)
    base = best_time(lambda: np.argsort(s), repeat)
    return row("b. fit+predict vs one argsort", f"k={k:.0e} m={m:.0e}", ours, base, "np.argsort(k)",
               ARGSORT_TARGET)


def bench_predict(k, m, repeat):
    from isocal.venn_abers import VennAbers
    s, y = sharp_data(k, 5)
    va = VennAbers().fit(s, y)
    t = np.random.default_rng(6).normal(size=m)
    ours = best_time(lambda: va.predict_interval(t), repeat)
    base = best_time(lambda: np.searchsorted(va.scores_, t), repeat)
    return row("c. predict vs np.searchsorted", f"k={k:.0e} m={m:.0e}", ours, base, "np.searchsorted",
               SEARCH_TARGET)


def bench_cvap(k, m, repeat, n_splits=5):
    from isocal.venn_abers import CrossVennAbers, fold_ids
    s, y = sharp_data(k, 7)
    folds = fold_ids(k, n_splits, random_state=0)
    T = np.random.default_rng(8).normal(size=(m, n_splits))
    t = np.ascontiguousarray(T[:, 0])
    ours = best_time(lambda: CrossVennAbers().fit(s, y, folds).predict_proba(T), repeat)
    base = best_time(lambda: ivap_fit_predict(s, y, t), repeat)
    return row(f"d. CVAP {n_splits} folds vs IVAP", f"k={k:.0e} m={m:.0e}", ours, base, "IVAP fit+predict",
               CVAP_TARGET)


CHILD = """
import time, sys
import numpy as np
from isocal.core import _first_nonfinite
t0 = time.perf_counter()
_first_nonfinite(np.zeros(1))     # a trivial cached kernel: numba's own first-call start-up, for comparison
t1 = time.perf_counter()
from isocal.venn_abers import VennAbers
t2 = time.perf_counter()
VennAbers().fit(np.array([0.1, 0.2, 0.3]), np.array([0, 1, 1])).predict_proba(np.array([0.15]))
t3 = time.perf_counter()
k = int(sys.argv[1])
extra = 0.0
if k:
    rng = np.random.default_rng(0)
    s = np.empty(k); rng.standard_normal(out=s)
    y = np.empty(k, np.int64)
    for a in range(0, k, 1 << 16):      # in chunks: no temporary of size k raises the high-water mark first
        b = min(a + (1 << 16), k)
        y[a:b] = rng.uniform(size=b - a) < 1 / (1 + np.exp(-20 * s[a:b]))
    t = rng.normal(size=100_000)
    def status_kb(field):
        with open('/proc/self/status') as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field))
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')                    # Linux: reset the peak resident size (VmHWM) to the current one
    base = status_kb('VmRSS:')
    VennAbers().fit(s, y).predict_interval(t)
    extra = (status_kb('VmHWM:') - base) / 1024
print(t2 - t1, t3 - t2, t1 - t0, extra)
"""


def first_call(k_mem):
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env['NUMBA_CACHE_DIR'] = cache
        cold = subprocess.run([sys.executable, '-c', CHILD, '0'], env=env, capture_output=True, text=True, check=True)
        warm = subprocess.run([sys.executable, '-c', CHILD, str(k_mem)], env=env, capture_output=True, text=True,
                              check=True)
    imp_c, first_c, numba_c, _ = map(float, cold.stdout.split())
    imp_w, first_w, numba_w, extra_mb = map(float, warm.stdout.split())
    print(f"e. import isocal.venn_abers {imp_w:.2f} s; first fit+predict: cold compile {first_c:.2f} s, "
          f"warm cache {first_w * 1e3:.0f} ms (numba's own first cached call in the same process: "
          f"{numba_w * 1e3:.0f} ms)")
    print(f"   peak extra resident memory, fit + predict k={k_mem:.0e} m=1e5: {extra_mb:.0f} MB "
          f"(one array of k float64 = {k_mem * 8 / 2**20:.0f} MB)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='10x smaller sizes')
    ap.add_argument('--repeat', type=int, default=5)
    args = ap.parse_args(argv)
    f = 10 if args.quick else 1
    print(f"{'what':<34} {'sizes':<18} {'isocal ms':>10} {'baseline ms':>11}  {'baseline':<18} {'ratio':>9}")
    ok = [bench_venn_abers_package(100_000 // f, 100_000 // f, args.repeat),
          bench_argsort(1_000_000 // f, 100_000 // f, args.repeat),
          bench_predict(100_000 // f, 10_000_000 // f, args.repeat),
          bench_cvap(1_000_000 // f, 100_000 // f, args.repeat)]
    first_call(1_000_000 // f)
    print(f"{sum(ok)}/{len(ok)} targets met")
    return 0


if __name__ == '__main__':
    sys.exit(main())
