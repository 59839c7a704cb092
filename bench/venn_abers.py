"""Benchmark isocal's Venn–Abers predictors against the venn-abers package, np.argsort and np.searchsorted, in one process.

Run from the repository root:

    .venv/bin/python bench/venn_abers.py [--quick] [--repeat 5]

Rows (best of `--repeat` warm runs after a warm-up call; ratios are isocal / baseline from the same run). Next to
each time in rows a-d, its peak memory: traced by tracemalloc in one more, untimed call (bench/timing.py), in arrays of
k float64 (8k bytes; row c: of m, the test scores) and MB, the result returned counted:

a. k = 1e5 calibration scores of a sharp classifier (labels from a steep sigmoid of the score), m = 1e5 test scores:
   `VennAbers().fit(s, y).predict_interval(t)` vs `venn_abers.VennAbers().fit(...).predict_proba(...)` (1.5.4), which
   is timed once (it takes tens of seconds). Target: isocal at least 200x faster.
b. k = 1e6, m = 1e5: isocal fit + predict vs one `np.argsort` of the k scores. Target: <= 4x.
c. predict alone, m = 1e7 test scores into a fitted IVAP on k = 1e5 (its k' distinct scores) vs
   `np.searchsorted(distinct scores, test scores)`, in random order and sorted (where the search gallops). Target: <= 2x.
d. CVAP with 5 folds on k = 1e6 (5 IVAPs on the out-of-fold scores, m = 1e5 test scores per fold model, merged) vs
   IVAP fit + predict on k = 1e6, m = 1e5. Target: <= 6x.
e. First call: the cold Numba compile of fit + predict (NUMBA_CACHE_DIR pointed at an empty directory, in a fresh
   subprocess) and the first call with a warm cache, both on unsorted scores (the path real data takes: before, on
   sorted ones, the k = 1e6 fit below compiled the unsorted path inside its memory measurement), with the peak RSS
   of the cold process; peak extra resident memory of a k = 1e6 fit + predict in a subprocess (Linux: the peak VmHWM
   is reset through /proc/self/clear_refs just before).
f. Memory of `VennAbers().fit(s, y)` alone at k = 1e5 and 1e6 (float64 scores, int64 labels as in row e), each in a
   fresh subprocess, in "arrays of k" (one array = 8k bytes): the traced peak (tracemalloc, which sees NumPy's
   buffers and, with this Numba, its runtime's arrays too), what the fitted object keeps, the extra resident peak
   (VmHWM, measured first, without tracemalloc), and the best of 3 fit times. Target: traced peak <= 5 arrays.
   `--before FILE` adds the same rows for an older copy of isocal/venn_abers.py (e.g. saved with
   `git show HEAD:isocal/venn_abers.py > /tmp/venn_abers_before.py`), imported from FILE inside the isocal package.

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

from timing import arrays, peak_bytes, run_peak_rss   # bench/timing.py, imported before bench/ leaves the path

# This script is named like the venn-abers package: keep its own directory off the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

VA_TARGET, ARGSORT_TARGET, SEARCH_TARGET, CVAP_TARGET = 200.0, 4.0, 2.0, 6.0
MEMORY_TARGET = 5.0       # arrays of k, traced peak of a fit


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


def best_time_peak(fn, repeat):
    "(best_time(fn, repeat), traced peak bytes of one more call)."
    return best_time(fn, repeat), peak_bytes(fn)


def mem(peak, n):
    return f"{arrays(peak, n):.2f} ({peak / 1e6:.3g} MB)"


def row(what, sizes, ours, base, base_name, target, larger_is_better=False, peaks=None, n=None):
    "One table row; `peaks` = (isocal, baseline) traced peak bytes, shown in arrays of `n`."
    ratio = base / ours if larger_is_better else ours / base
    ok = ratio >= target if larger_is_better else ratio <= target
    sign = '>=' if larger_is_better else '<='
    print(f"{what:<34} {sizes:<18} {ours * 1e3:>10.1f} {mem(peaks[0], n):>17} {base * 1e3:>11.1f} "
          f"{mem(peaks[1], n):>17}  {base_name:<18} {ratio:>8.2f}x  target {sign} {target:g}x  "
          f"{'PASS' if ok else 'MISS'}")
    return ok


def bench_venn_abers_package(k, m, repeat):
    import venn_abers
    s, y = sharp_data(k, 1)
    t = np.random.default_rng(2).normal(size=m)
    ours, p_ours = best_time_peak(lambda: ivap_fit_predict(s, y, t), repeat)
    package = lambda: venn_abers.VennAbers().fit(np.c_[1 - s, s], y).predict_proba(np.c_[1 - t, t])
    t0 = time.perf_counter()
    _, p01 = package()
    base = time.perf_counter() - t0
    p_base = peak_bytes(package)          # one more call of the package: its time again, untimed
    p0, p1 = ivap_fit_predict(s, y, t)
    assert np.abs(p0 - p01[:, 0]).max() <= 1e-12 and np.abs(p1 - p01[:, 1]).max() <= 1e-12, "results differ"
    return row("a. fit+predict vs venn-abers", f"k={k:.0e} m={m:.0e}", ours, base, "venn-abers 1.5.4",
               VA_TARGET, larger_is_better=True, peaks=(p_ours, p_base), n=k)


def bench_argsort(k, m, repeat):
    s, y = sharp_data(k, 3)
    t = np.random.default_rng(4).normal(size=m)
    ours, p_ours = best_time_peak(lambda: ivap_fit_predict(s, y, t), repeat)
    base, p_base = best_time_peak(lambda: np.argsort(s), repeat)
    return row("b. fit+predict vs one argsort", f"k={k:.0e} m={m:.0e}", ours, base, "np.argsort(k)",
               ARGSORT_TARGET, peaks=(p_ours, p_base), n=k)


def bench_predict(k, m, repeat, ordered=False):
    "Row c: test scores in random order, or (`ordered`) sorted, where the search gallops from the previous answer."
    from isocal.venn_abers import VennAbers
    s, y = sharp_data(k, 5)
    va = VennAbers().fit(s, y)
    t = np.random.default_rng(6).normal(size=m)
    if ordered: t.sort()
    ours, p_ours = best_time_peak(lambda: va.predict_interval(t), repeat)
    base, p_base = best_time_peak(lambda: np.searchsorted(va.scores_, t), repeat)
    return row(f"c. predict vs np.searchsorted{', sorted' if ordered else ''}", f"k={k:.0e} m={m:.0e}", ours, base,
               "np.searchsorted", SEARCH_TARGET, peaks=(p_ours, p_base), n=m)


def bench_cvap(k, m, repeat, n_splits=5):
    from isocal.venn_abers import CrossVennAbers, fold_ids
    s, y = sharp_data(k, 7)
    folds = fold_ids(k, n_splits, random_state=0)
    T = np.random.default_rng(8).normal(size=(m, n_splits))
    t = np.ascontiguousarray(T[:, 0])
    ours, p_ours = best_time_peak(lambda: CrossVennAbers().fit(s, y, folds).predict_proba(T), repeat)
    base, p_base = best_time_peak(lambda: ivap_fit_predict(s, y, t), repeat)
    return row(f"d. CVAP {n_splits} folds vs IVAP", f"k={k:.0e} m={m:.0e}", ours, base, "IVAP fit+predict",
               CVAP_TARGET, peaks=(p_ours, p_base), n=k)


# Shared by the child scripts below: a sharp classifier's scores and labels, and the peak resident size (Linux).
CHILD_HELPERS = """
import numpy as np

def sharp_sample(k):
    "k normal scores with labels from a steep sigmoid of the score, made in chunks: no temporary of size k."
    rng = np.random.default_rng(0)
    s = np.empty(k); rng.standard_normal(out=s)
    y = np.empty(k, np.int64)
    for a in range(0, k, 1 << 16):
        b = min(a + (1 << 16), k)
        y[a:b] = rng.uniform(size=b - a) < 1 / (1 + np.exp(-20 * s[a:b]))
    return s, y

def status_kb(field):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))

def reset_peak_rss():
    "Reset the peak resident size (VmHWM) to the current one; the current resident size in KiB."
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    return status_kb('VmRSS:')
"""

CHILD = CHILD_HELPERS + """
import time, sys
import numpy as np
from isocal.pava import _is_sorted
t0 = time.perf_counter()
_is_sorted(np.zeros(1))     # a trivial cached kernel: numba's own first-call start-up, for comparison
t1 = time.perf_counter()
from isocal.venn_abers import VennAbers
t2 = time.perf_counter()
# unsorted scores: the path real data takes, so the k = 1e6 fit below compiles nothing
VennAbers().fit(np.array([0.3, 0.1, 0.2]), np.array([1, 0, 1])).predict_proba(np.array([0.15]))
t3 = time.perf_counter()
k = int(sys.argv[1])
extra = 0.0
if k:
    s, y = sharp_sample(k)
    t = np.random.default_rng(1).normal(size=100_000)
    base = reset_peak_rss()
    VennAbers().fit(s, y).predict_interval(t)
    extra = (status_kb('VmHWM:') - base) / 1024
print(t2 - t1, t3 - t2, t1 - t0, extra)
"""


def first_call(k_mem):
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env['NUMBA_CACHE_DIR'] = cache
        cold, cold_rss = run_peak_rss([sys.executable, '-c', CHILD, '0'], env=env, capture_output=True, text=True,
                                      check=True)
        warm = subprocess.run([sys.executable, '-c', CHILD, str(k_mem)], env=env, capture_output=True, text=True,
                              check=True)
    imp_c, first_c, numba_c, _ = map(float, cold.stdout.split())
    imp_w, first_w, numba_w, extra_mb = map(float, warm.stdout.split())
    rss = '-' if cold_rss is None else f"{cold_rss / 1e6:.0f} MB"
    print(f"e. import isocal.venn_abers {imp_w:.2f} s; first fit+predict: cold compile {first_c:.2f} s (peak RSS of "
          f"that process {rss}), warm cache {first_w * 1e3:.0f} ms (numba's own first cached call in the same process: "
          f"{numba_w * 1e3:.0f} ms)")
    print(f"   peak extra resident memory, fit + predict k={k_mem:.0e} m=1e5: {extra_mb:.0f} MB "
          f"(one array of k float64 = {k_mem * 8 / 2**20:.0f} MB)")


MEMORY_CHILD = CHILD_HELPERS + """
import importlib.util, sys, time, tracemalloc
import numpy as np
path, k = sys.argv[1], int(sys.argv[2])
if path == '-':
    from isocal.venn_abers import VennAbers
else:                                   # an older copy of the module, inside the package for its relative imports
    import isocal
    spec = importlib.util.spec_from_file_location('isocal._venn_abers_before', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    VennAbers = module.VennAbers
s, y = sharp_sample(k)
VennAbers().fit(s[:1000], y[:1000])     # compiled (or loaded from the cache) outside the measurements
base = reset_peak_rss()
va = VennAbers().fit(s, y)
rss = (status_kb('VmHWM:') - base) * 1024
del va
tracemalloc.start()
va = VennAbers().fit(s, y)
kept, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
del va
best = float('inf')
for _ in range(3):
    t0 = time.perf_counter(); VennAbers().fit(s, y); best = min(best, time.perf_counter() - t0)
print(peak, kept, rss, best)
"""


def fit_memory(ks, before=None):
    "Row f: traced peak, kept and extra resident memory of one fit, in arrays of k, before (optional) and now."
    versions = ([('before', os.path.abspath(before))] if before else []) + [('now', '-')]
    print(f"f. VennAbers.fit memory (arrays of k float64; traced by tracemalloc; RSS = extra VmHWM), target traced "
          f"peak <= {MEMORY_TARGET:g}")
    print(f"   {'k':<6} {'version':<8} {'traced peak':>11} {'kept':>6} {'extra RSS':>17} {'fit ms':>8}")
    ok = True
    for k in ks:
        for name, path in versions:
            out = subprocess.run([sys.executable, '-c', MEMORY_CHILD, path, str(k)], capture_output=True, text=True,
                                 check=True).stdout.split()
            peak, kept, rss, seconds = (float(v) for v in out)
            one = 8.0 * k
            rss_text = f"{rss / one:.2f} ({rss / 2**20:.0f} MB)"
            print(f"   {k:<6.0e} {name:<8} {peak / one:>11.2f} {kept / one:>6.2f} {rss_text:>17} {seconds * 1e3:>8.1f}")
            if name == 'now': ok &= peak / one <= MEMORY_TARGET
    print(f"   traced peak now {'PASS' if ok else 'MISS'}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='10x smaller sizes')
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--before', metavar='FILE', help='an older copy of isocal/venn_abers.py for the memory rows (f)')
    ap.add_argument('--memory-only', action='store_true', help='run row f only')
    args = ap.parse_args(argv)
    if args.memory_only:
        return 0 if fit_memory([100_000, 1_000_000], args.before) else 1
    f = 10 if args.quick else 1
    print(f"{'what':<34} {'sizes':<18} {'isocal ms':>10} {'isocal peak':>17} {'baseline ms':>11} "
          f"{'baseline peak':>17}  {'baseline':<18} {'ratio':>9}   (peak: traced, arrays of k; c: of m)")
    ok = [bench_venn_abers_package(100_000 // f, 100_000 // f, args.repeat),
          bench_argsort(1_000_000 // f, 100_000 // f, args.repeat),
          bench_predict(100_000 // f, 10_000_000 // f, args.repeat),
          bench_predict(100_000 // f, 10_000_000 // f, args.repeat, ordered=True),
          bench_cvap(1_000_000 // f, 100_000 // f, args.repeat)]
    first_call(1_000_000 // f)
    ok.append(fit_memory([10_000, 100_000] if args.quick else [100_000, 1_000_000], args.before))
    print(f"{sum(ok)}/{len(ok)} targets met")
    return 0


if __name__ == '__main__':
    sys.exit(main())
