"""Benchmark isocal.convex against squared-loss PAVA (isocal.pava.isotonic_regression), in one process.

Run from the repository root:

    .venv/bin/python bench/convex.py [--n 1000000] [--repeat 5] [--quick]

Data: x ~ U(0, 1) sorted, targets p(x) = 1/(1 + exp(-6(x - 1/2))) plus N(0, 0.25^2) noise (as bench/pava.py), and
0/1 labels drawn with probability p(x) for the log-loss row. Times are medians of warm runs (Numba compiled first).
Next to each time, its peak memory: traced by tracemalloc in one more, untimed call (bench/timing.py), in arrays of n
float64 (8n bytes) and MB; the result returned is counted.
Cold compile time: a fresh process with NUMBA_CACHE_DIR pointed at an empty directory, importing isocal.convex and
running each public function once on tiny input (minus the same process with a warm cache), with the peak RSS of each
process.

Targets (issue 3): closed-form loss <= 1.2x isotonic_regression; pseudo-Huber <= 20x; anytime (tol 1e-9) <= 60x.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from timing import arrays, peak_bytes, run_peak_rss

TARGETS = {'closed form (squared)': 1.2, 'closed form (logloss)': 1.2, 'pseudo-Huber(1)': 20.0,
           'anytime pseudo-Huber(1), tol 1e-9': 60.0}


def timed(f, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter(); out = f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


_WARMUP = ("import time; t0 = time.perf_counter(); import numpy as np; "
           "from isocal.convex import isotonic_convex, anytime_isotonic, PseudoHuber, Expectile; "
           "y = np.array([3.0, 1.0, 2.0]); isotonic_convex(PseudoHuber(1.0), y); isotonic_convex('squared', y); "
           "anytime_isotonic(PseudoHuber(1.0), y, tol=1e-6); print(time.perf_counter() - t0)")


def cold_compile():
    "(cold seconds, warm seconds, cold peak RSS bytes, warm peak RSS bytes); an RSS is None without /usr/bin/time."
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d)
        cold, cold_rss = run_peak_rss([sys.executable, '-c', _WARMUP], env=env, capture_output=True, text=True,
                                      check=True)
        warm, warm_rss = run_peak_rss([sys.executable, '-c', _WARMUP], env=env, capture_output=True, text=True,
                                      check=True)
    return float(cold.stdout), float(warm.stdout), cold_rss, warm_rss


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=float, default=1e6)
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--quick', action='store_true', help='n = 1e5, 3 repeats, no cold-compile measurement')
    a = ap.parse_args(argv)
    n, repeat = (100_000, 3) if a.quick else (int(a.n), a.repeat)
    from isocal.convex import PseudoHuber, anytime_isotonic, isotonic_convex
    from isocal.pava import isotonic_regression
    rng = np.random.default_rng(0)
    x = np.sort(rng.random(n))
    p = 1 / (1 + np.exp(-6 * (x - 0.5)))
    y = p + rng.normal(0, 0.25, n)
    labels = (rng.random(n) < p) * 1.0
    small = y[:100]
    isotonic_regression(small); isotonic_convex(PseudoHuber(1.0), small); anytime_isotonic(PseudoHuber(1.0), small, tol=1e-9)

    def timed_peak(f, repeat):
        "(median seconds, result, traced peak bytes of one more call)"
        t, out = timed(f, repeat)
        return t, out, peak_bytes(f)

    mem = lambda peak: f"{arrays(peak, n):.2f} ({peak / 1e6:.3g} MB)"
    t_sq, _, p_sq = timed_peak(lambda: isotonic_regression(y), repeat)
    t_lab, _, p_lab = timed_peak(lambda: isotonic_regression(labels), repeat)
    rows = []
    t, _, p = timed_peak(lambda: isotonic_convex('squared', y), repeat)
    rows.append(('closed form (squared)', t, p, t / t_sq, ''))
    t, _, p = timed_peak(lambda: isotonic_convex('logloss', labels), repeat)
    rows.append(('closed form (logloss)', t, p, t / t_lab, '(vs isotonic_regression on the labels)'))
    t, r, p = timed_peak(lambda: isotonic_convex(PseudoHuber(1.0), y), max(1, repeat // 2))
    rows.append(('pseudo-Huber(1)', t, p, t / t_sq, f'{int(r.n_evals) / n:.1f} derivative evals/sample, '
                                                     f'{len(r.weights)} blocks'))
    t, s, p = timed_peak(lambda: anytime_isotonic(PseudoHuber(1.0), y, tol=1e-9), max(1, repeat // 2))
    rows.append(('anytime pseudo-Huber(1), tol 1e-9', t, p, t / t_sq,
                 f'{s.iteration} iterations, {s.n_evals / n:.1f} evals/sample, '
                 f'max |anytime - exact| = {np.max(np.abs(s.x - r.x)):.1e}'))
    print(f'n = {n:,}; isotonic_regression (squared PAVA): {t_sq * 1e3:.1f} ms, peak {mem(p_sq)}; on 0/1 labels '
          f'{t_lab * 1e3:.1f} ms, peak {mem(p_lab)}  (peak: traced, arrays of n)')
    print(f"{'case':38s} {'time':>10s} {'peak, arrays of n':>20s} {'ratio':>7s} {'target':>7s}  verdict  notes")
    for name, t, p, ratio, note in rows:
        tgt = TARGETS[name]
        print(f"{name:38s} {t * 1e3:8.1f}ms {mem(p):>20s} {ratio:7.2f} {tgt:7.1f}  "
              f"{'PASS' if ratio <= tgt else 'MISS':7s}  {note}")
    if not a.quick:
        cold, warm, cold_rss, warm_rss = cold_compile()
        rss = lambda b: '-' if b is None else f'{b / 1e6:.0f} MB'
        print(f'first call incl. import: cold cache {cold:.1f} s (peak RSS {rss(cold_rss)}), warm cache {warm:.2f} s '
              f'(peak RSS {rss(warm_rss)}) (cold compile ~ {cold - warm:.1f} s)')


if __name__ == '__main__':
    main()
