"""Benchmark the threshold-decomposition engine of isocal.convex against SciPy's squared-loss isotonic regression
(issue 28, "Convex losses at the speed of squared loss"), on the same targets, in one process.

Run from the repository root:

    .venv/bin/python bench/convex.py [--full | --sizes 1e5,1e6,...] [--repeat 3] [--json PATH]
                                     [--sections fits,quantile,anytime,memory,compile]

Sizes: n = 1e5, 3e5, 1e6 by default; `--full` adds 3e6 and 1e7; `--sizes` gives any list. Times are medians of
`--repeat` warm runs (every kernel compiled first on small input; one run at n >= 3e6, except in the quantile
section, whose fits and argsorts are both timed at least three times).

Inputs (fixed seeds; the same arrays for every loss, for SciPy and for the sort):
  normal      y = N(0, 1);
  walk        y = |cumsum(N(0, 1)) * 0.01 + N(0, 1)| + 0.1 (random walk plus noise, positive);
  decreasing  y = -arange(n)/n + U(0, 0.25/n) noise: strictly decreasing, so the increasing fit is one block that
              absorbs every sample, point by point (the adversarial case for pooling with iterative block minimisers);
  ties        y = integers(0, 5, n) as float with weights 10**U(-6, 6) (heavy ties, weights over 12 decades).

Sections (a markdown table each):
  fits      isotonic_convex(loss, y, w) for PseudoHuber(1), 'logcosh', Lp(1.5), Lp(3), Expectile(0.9),
            SquaredQuartic(1) on every input, against scipy.optimize.isotonic_regression(y, weights=w) on the same
            y: time, ratio, derivative evaluations per sample (n_evals / n), blocks; then the log-log slope of time
            against n (np.polyfit on log n, log t) per (loss, input), with SciPy's and n log n's for reference.
  quantile  isotonic_convex(Quantile(0.3), y, w) with real weights w = U(0.5, 2) and with unit weights, against
            np.argsort(y, kind='stable') on the same y (normal and walk); ratios and slopes.
  anytime   anytime_isotonic(PseudoHuber(1), y, tol=1e-9) at n = 1e3, 1e4, 1e5, 1e6 on normal and decreasing
            targets: evaluations per sample (state.n_evals / n), iterations, and the largest distance to the exact
            fit; the log-log slope of evaluations per sample against n (0 if constant).
  memory    traced peak (tracemalloc, bench/timing.py's peak_bytes: one untimed call, the result counted) of
            isotonic_convex at n = 1e6 (`--mem-n`), in arrays of n float64 (8n bytes), and of SciPy's on the same y.
  compile   the first call as a user meets it, the approach bench/startup.py uses: a fresh process with
            NUMBA_CACHE_DIR an empty temporary directory times `import isocal.convex;
            isotonic_convex(PseudoHuber(1.0), [3., 1., 2.])` and then one call for each other built-in loss
            (logcosh, Lp, Expectile, SquaredQuartic, Quantile, and the closed-form squared, logloss, poisson,
            gamma); then the same with the cache that run filled (warm); minus a baseline process that only does
            `import numba; from numba import njit; njit(lambda x: x+1)(1)` (all times inside the process, from
            before the first import; peak RSS by GNU time). anytime_isotonic's first call is timed after, apart; the
            whole process's wall time (interpreter start-up and that call included) is printed too. Then what those
            first calls compile: one more cold process, each function's own compile seconds (bench/startup.py's
            listener), by module and the slowest; and the floor, bench/bare_decomposition.py's uncertified
            decomposition of the same losses compiled the same way.

Targets (issue 28): convex fits <= 20x SciPy at n = 1e6 and 1e7; slope of time against n <= 1.1 on every input
(n log n over 1e5..1e7 has slope ~1.07); Quantile with real weights <= 3x the stable argsort (slope <= 1.15);
anytime evaluations per sample constant in n; traced peak <= 4 arrays of n; first call (cold cache) <= 3 s above
the numba baseline.

The machine's load changes absolute times; ratios are measured in the same run, on the same arrays. With
`--json PATH` every number is written as JSON (to a temporary file, then renamed over PATH) after each section.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from timing import arrays, peak_bytes, run_peak_rss

QUICK_SIZES = [100_000, 300_000, 1_000_000]
FULL_SIZES = [100_000, 300_000, 1_000_000, 3_000_000, 10_000_000]
ANYTIME_SIZES = [1_000, 10_000, 100_000, 1_000_000]
INPUTS = ['normal', 'walk', 'decreasing', 'ties']
QUANTILE_INPUTS = ['normal', 'walk']
ANYTIME_INPUTS = ['normal', 'decreasing']
SECTIONS = ['fits', 'quantile', 'anytime', 'memory', 'compile']
SEED = 0

TARGET_RATIO = 20.0         # isotonic_convex / SciPy, at n >= RATIO_FROM
RATIO_FROM = 1_000_000
TARGET_SLOPE = 1.1              # convex fits (issue 28, item 1)
TARGET_QUANTILE_SLOPE = 1.15    # the quantile fit with real weights (item 3)
TARGET_QUANTILE = 3.0       # Quantile(0.3) with real weights / stable argsort
TARGET_ARRAYS = 4.0
TARGET_COMPILE = 3.0        # seconds above the numba baseline
ANYTIME_TOL = 1e-9


def losses():
    "(label, loss) for the fits section."
    from isocal.convex import Expectile, Lp, PseudoHuber, SquaredQuartic
    return [('PseudoHuber(1)', PseudoHuber(1.0)), ('logcosh', 'logcosh'), ('Lp(1.5)', Lp(1.5)), ('Lp(3)', Lp(3.0)),
            ('Expectile(0.9)', Expectile(0.9)), ('SquaredQuartic(1)', SquaredQuartic(1.0))]


def make_input(kind, n):
    "(targets, weights or None) of the named input at size n; the same arrays for the same (kind, n)."
    rng = np.random.default_rng([SEED, INPUTS.index(kind), n])
    if kind == 'normal':
        return rng.normal(size=n), None
    if kind == 'walk':
        walk = np.cumsum(rng.normal(size=n)) * 0.01
        return np.abs(walk + rng.normal(size=n)) + 0.1, None
    if kind == 'decreasing':
        return -np.arange(n) / n + rng.uniform(0, 0.25 / n, n), None
    if kind == 'ties':
        y = rng.integers(0, 5, n).astype(float)
        return y, 10.0 ** rng.uniform(-6, 6, n)
    raise ValueError(kind)


def quantile_weights(n):
    return np.random.default_rng([SEED, 99, n]).uniform(0.5, 2.0, n)


def timed(f, repeat):
    "(median seconds of `repeat` calls, the last result)."
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter(); out = f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def slope(ns, ts):
    "Log-log slope of ts against ns (np.polyfit on log n, log t); None with fewer than two sizes."
    ok = [(n, t) for n, t in zip(ns, ts) if t is not None and t > 0]
    if len(ok) < 2:
        return None
    x, y = np.log([n for n, _ in ok]), np.log([t for _, t in ok])
    return float(np.polyfit(x, y, 1)[0])


def nlogn_slope(ns):
    return slope(ns, [n * math.log(n) for n in ns])


def fmt_n(n):
    e = int(math.floor(math.log10(n)))
    m = n / 10 ** e
    return f'1e{e}' if m == 1 else f'{m:g}e{e}'


def fmt_s(v, digits=3):
    return '-' if v is None else f'{v:.{digits}g}'


def ms(t):
    return '-' if t is None else (f'{t * 1e3:.1f}' if t < 10 else f'{t * 1e3:.0f}')


def verdict(ok):
    return '-' if ok is None else ('PASS' if ok else 'MISS')


def table(header, rows):
    "A markdown table."
    out = ['| ' + ' | '.join(header) + ' |', '|' + '|'.join('---' for _ in header) + '|']
    out += ['| ' + ' | '.join(str(c) for c in r) + ' |' for r in rows]
    return '\n'.join(out)


def write_json(path, data):
    "Write `data` to a temporary file next to `path`, then rename it over `path`."
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.convex-bench-', suffix='.json', dir=d)
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(data, f, indent=1)
        umask = os.umask(0); os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)            # mkstemp's 0600 otherwise survives the rename
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def warm_up():
    "Compile every kernel the sections use, on small input (unweighted and weighted paths)."
    from isocal.convex import PseudoHuber, Quantile, anytime_isotonic, isotonic_convex
    from scipy.optimize import isotonic_regression as scipy_iso
    for kind in INPUTS:
        y, w = make_input(kind, 1000)
        scipy_iso(y, weights=w)
        for _, loss in losses():
            isotonic_convex(loss, y, w)
    y, _ = make_input('normal', 1000)
    isotonic_convex(Quantile(0.3), y, quantile_weights(1000)); isotonic_convex(Quantile(0.3), y)
    anytime_isotonic(PseudoHuber(1.0), y, tol=ANYTIME_TOL)
    np.argsort(y, kind='stable')


def reps(n, repeat):
    return 1 if n >= 3_000_000 else repeat


def section_fits(sizes, repeat, out):
    from isocal.convex import isotonic_convex
    from scipy.optimize import isotonic_regression as scipy_iso
    rows, records = [], []
    for kind in INPUTS:
        for n in sizes:
            y, w = make_input(kind, n)
            t_sp, _ = timed(lambda: scipy_iso(y, weights=w), max(3, reps(n, repeat)))
            for label, loss in losses():
                f = lambda: isotonic_convex(loss, y, w)
                if n < 3_000_000:
                    f()                                  # one untimed warm run at this size
                try:
                    t, r = timed(f, reps(n, repeat))
                except Exception as e:                   # report, go on
                    rec = dict(input=kind, loss=label, n=n, error=f'{type(e).__name__}: {e}')
                    records.append(rec)
                    rows.append([kind, label, fmt_n(n), 'ERROR', ms(t_sp), '-', '-', '-', rec['error'][:60]])
                    print(f'  ERROR {kind} {label} {n}: {rec["error"]}', file=sys.stderr, flush=True)
                    continue
                evals = int(r.n_evals)
                ratio = t / t_sp
                monotone = bool(np.all(np.diff(r.x) >= 0))
                ok = (ratio <= TARGET_RATIO) if n >= RATIO_FROM else None
                rec = dict(input=kind, loss=label, n=n, seconds=t, scipy_seconds=t_sp, ratio=ratio, n_evals=evals,
                           evals_per_sample=evals / n, blocks=int(len(r.weights)), monotone=monotone,
                           repeats=reps(n, repeat), target_ratio=TARGET_RATIO if ok is not None else None, ok=ok)
                records.append(rec)
                rows.append([kind, label, fmt_n(n), ms(t), ms(t_sp), f'{ratio:.1f}', f'{evals / n:.2f}',
                             len(r.weights), verdict(ok) + ('' if monotone else ' NOT MONOTONE')])
                print(f'  {kind:10s} {label:18s} n={fmt_n(n):5s} {ms(t):>8s} ms  scipy {ms(t_sp):>7s} ms  '
                      f'ratio {ratio:5.1f}  evals/n {evals / n:5.2f}', file=sys.stderr, flush=True)
                del r
    out['fits'] = records
    print(f'\n### Convex fits against scipy.optimize.isotonic_regression (same y; target <= {TARGET_RATIO:g}x '
          f'at n >= {fmt_n(RATIO_FROM)})\n')
    print(table(['input', 'loss', 'n', 'ms', 'SciPy ms', 'ratio', 'evals/n', 'blocks', 'verdict'], rows))

    # slopes
    srows, slopes = [], []
    ref = nlogn_slope(sizes)
    for kind in INPUTS:
        sp = [next((r['scipy_seconds'] for r in records if r['input'] == kind and r['n'] == n
                    and 'scipy_seconds' in r), None) for n in sizes]
        s_sp = slope(sizes, sp)
        for label, _ in losses():
            ts = [next((r['seconds'] for r in records if r['input'] == kind and r['loss'] == label and r['n'] == n
                        and 'seconds' in r), None) for n in sizes]
            ev = [next((r['evals_per_sample'] for r in records if r['input'] == kind and r['loss'] == label
                        and r['n'] == n and 'seconds' in r), None) for n in sizes]
            s = slope(sizes, ts)
            s_ev = slope(sizes, ev)
            ok = None if s is None else s <= TARGET_SLOPE
            slopes.append(dict(input=kind, loss=label, slope=s, scipy_slope=s_sp, nlogn_slope=ref,
                               evals_per_sample_slope=s_ev, target=TARGET_SLOPE, ok=ok))
            srows.append([kind, label, fmt_s(s), fmt_s(s_sp), fmt_s(ref), fmt_s(s_ev, 2), verdict(ok)])
    out['fit_slopes'] = slopes
    print(f'\n### Log-log slope of time against n, n = {", ".join(map(fmt_n, sizes))} (target <= {TARGET_SLOPE})\n')
    print(table(['input', 'loss', 'slope', 'SciPy slope', 'n log n slope', 'evals/n slope', 'verdict'], srows))


def section_quantile(sizes, repeat, out):
    from isocal.convex import Quantile, isotonic_convex
    rows, records = [], []
    loss = Quantile(0.3)
    for kind in QUANTILE_INPUTS:
        for n in sizes:
            y, _ = make_input(kind, n)
            t_sort, _ = timed(lambda: np.argsort(y, kind='stable'), max(3, reps(n, repeat)))
            for wname, w in [('real U(0.5, 2)', quantile_weights(n)), ('unit', None)]:
                f = lambda: isotonic_convex(loss, y, w)
                if n < 3_000_000:
                    f()
                try:                             # (timed as often as the argsort it is compared with)
                    t, r = timed(f, max(3, reps(n, repeat)))
                except Exception as e:
                    err = f'{type(e).__name__}: {e}'
                    records.append(dict(input=kind, weights=wname, n=n, error=err))
                    rows.append([kind, wname, fmt_n(n), 'ERROR', ms(t_sort), '-', '-', '-', err[:60]])
                    print(f'  ERROR quantile {kind} {wname} {n}: {err}', file=sys.stderr, flush=True)
                    continue
                ratio = t / t_sort
                ok = (ratio <= TARGET_QUANTILE) if w is not None else None
                records.append(dict(input=kind, weights=wname, n=n, seconds=t, argsort_seconds=t_sort, ratio=ratio,
                                    n_evals=int(r.n_evals), blocks=int(len(r.weights)), repeats=max(3, reps(n, repeat)),
                                    ok=ok))
                rows.append([kind, wname, fmt_n(n), ms(t), ms(t_sort), f'{ratio:.2f}', len(r.weights),
                             verdict(ok)])
                print(f'  quantile {kind:8s} {wname:14s} n={fmt_n(n):5s} {ms(t):>8s} ms  argsort {ms(t_sort):>7s} ms'
                      f'  ratio {ratio:5.2f}', file=sys.stderr, flush=True)
                del r
    out['quantile'] = records
    print(f"\n### Quantile(0.3) against np.argsort(y, kind='stable') on the same y (target <= {TARGET_QUANTILE:g}x "
          f"with real weights)\n")
    print(table(['input', 'weights', 'n', 'ms', 'argsort ms', 'ratio', 'blocks', 'verdict'], rows))
    srows, slopes = [], []
    for kind in QUANTILE_INPUTS:
        ts_sort = [next((r['argsort_seconds'] for r in records if r['input'] == kind and r['n'] == n
                         and 'seconds' in r), None) for n in sizes]
        for wname in ['real U(0.5, 2)', 'unit']:
            ts = [next((r['seconds'] for r in records if r['input'] == kind and r['weights'] == wname
                        and r['n'] == n and 'seconds' in r), None) for n in sizes]
            s, s_sort = slope(sizes, ts), slope(sizes, ts_sort)
            ok = None if s is None else s <= TARGET_QUANTILE_SLOPE
            slopes.append(dict(input=kind, weights=wname, slope=s, argsort_slope=s_sort, target=TARGET_QUANTILE_SLOPE,
                               ok=ok))
            srows.append([kind, wname, fmt_s(s), fmt_s(s_sort), verdict(ok)])
    out['quantile_slopes'] = slopes
    print(f'\n### Quantile: log-log slope of time against n (target <= {TARGET_QUANTILE_SLOPE})\n')
    print(table(['input', 'weights', 'slope', 'argsort slope', 'verdict'], srows))


def section_anytime(repeat, out):
    from isocal.convex import PseudoHuber, anytime_isotonic, isotonic_convex
    from scipy.optimize import isotonic_regression as scipy_iso
    rows, records = [], []
    loss = PseudoHuber(1.0)
    for kind in ANYTIME_INPUTS:
        for n in ANYTIME_SIZES:
            y, _ = make_input(kind, n)
            f = lambda: anytime_isotonic(loss, y, tol=ANYTIME_TOL)
            try:
                f()
                t, s = timed(f, reps(n, repeat) if n < 1_000_000 else 1)
            except Exception as e:
                err = f'{type(e).__name__}: {e}'
                records.append(dict(input=kind, n=n, error=err))
                rows.append([kind, fmt_n(n), 'ERROR', '-', '-', '-', '-', '-', err[:60]])
                print(f'  ERROR anytime {kind} {n}: {err}', file=sys.stderr, flush=True)
                continue
            t_sp, _ = timed(lambda: scipy_iso(y), 3)
            exact = isotonic_convex(loss, y).x
            dist = float(np.max(np.abs(s.x - exact)))
            rec = dict(input=kind, n=n, seconds=t, scipy_seconds=t_sp, ratio=t / t_sp, iterations=int(s.iteration),
                       n_evals=int(s.n_evals), evals_per_sample=int(s.n_evals) / n, converged=bool(s.converged),
                       width=float(s.width), max_abs_diff_exact=dist)
            records.append(rec)
            rows.append([kind, fmt_n(n), ms(t), f'{t / t_sp:.1f}', s.iteration, f'{int(s.n_evals) / n:.2f}',
                         s.converged, f'{s.width:.1e}', f'{dist:.1e}'])
            print(f'  anytime {kind:10s} n={fmt_n(n):5s} {ms(t):>8s} ms  it {s.iteration}  '
                  f'evals/n {int(s.n_evals) / n:.2f}', file=sys.stderr, flush=True)
    slopes = {}
    for kind in ANYTIME_INPUTS:
        ev = [next((r['evals_per_sample'] for r in records if r['input'] == kind and r['n'] == n and 'seconds' in r),
                   None) for n in ANYTIME_SIZES]
        ts = [next((r['seconds'] for r in records if r['input'] == kind and r['n'] == n and 'seconds' in r), None)
              for n in ANYTIME_SIZES]
        slopes[kind] = dict(evals_per_sample_slope=slope(ANYTIME_SIZES, ev), time_slope=slope(ANYTIME_SIZES, ts))
    out['anytime'] = records
    out['anytime_slopes'] = slopes
    print(f'\n### anytime_isotonic(PseudoHuber(1), y, tol={ANYTIME_TOL:g}): evaluations per sample (target: constant '
          f'in n)\n')
    print(table(['input', 'n', 'ms', 'x SciPy', 'iterations', 'evals/n', 'converged', 'width',
                 'max abs diff to exact'], rows))
    print()
    print(table(['input', 'slope of evals/n vs n', 'slope of time vs n'],
                [[k, fmt_s(v['evals_per_sample_slope'], 2), fmt_s(v['time_slope'])] for k, v in slopes.items()]))


def section_memory(mem_n, out):
    from isocal.convex import PseudoHuber, Quantile, isotonic_convex
    from scipy.optimize import isotonic_regression as scipy_iso
    n = mem_n
    rows, records = [], []
    cases = [(kind, 'PseudoHuber(1)', PseudoHuber(1.0)) for kind in INPUTS]
    cases += [('normal', label, loss) for label, loss in losses() if label != 'PseudoHuber(1)']
    cases += [('normal', 'Quantile(0.3), real weights', Quantile(0.3))]
    scipy_peaks = {}
    for kind, label, loss in cases:
        y, w = make_input(kind, n)
        if label.startswith('Quantile'):
            w = quantile_weights(n)
        key = (kind, label.startswith('Quantile'))
        if key not in scipy_peaks:
            scipy_peaks[key] = peak_bytes(lambda: scipy_iso(y, weights=w))
        p_sp = scipy_peaks[key]
        try:
            p = peak_bytes(lambda: isotonic_convex(loss, y, w))
        except Exception as e:
            err = f'{type(e).__name__}: {e}'
            records.append(dict(input=kind, loss=label, n=n, error=err))
            rows.append([kind, label, 'ERROR', '-', '-', '-', err[:60]])
            continue
        a, a_sp = arrays(p, n), arrays(p_sp, n)
        ok = a <= TARGET_ARRAYS
        records.append(dict(input=kind, loss=label, n=n, peak_bytes=p, arrays=a, scipy_peak_bytes=p_sp,
                            scipy_arrays=a_sp, target=TARGET_ARRAYS, ok=ok))
        rows.append([kind, label, f'{a:.2f}', f'{p / 1e6:.1f}', f'{a_sp:.2f}', f'{p_sp / 1e6:.1f}', verdict(ok)])
    out['memory'] = records
    print(f'\n### Traced peak memory of one call at n = {fmt_n(n)}, in arrays of n float64 (target <= '
          f'{TARGET_ARRAYS:g}; the result counted)\n')
    print(table(['input', 'loss', 'isocal arrays', 'isocal MB', 'SciPy arrays', 'SciPy MB', 'verdict'], rows))


_FITS = r'''
import json, time
t0 = time.perf_counter()
import isocal.convex
from isocal.convex import (isotonic_convex, anytime_isotonic, PseudoHuber, Lp, Expectile, SquaredQuartic,
                           Quantile)
steps = {'import isocal.convex': time.perf_counter() - t0}
def step(name, f):
    t = time.perf_counter(); f(); steps[name] = time.perf_counter() - t
step('PseudoHuber(1.0)', lambda: isotonic_convex(PseudoHuber(1.0), [3., 1., 2.]))
step('logcosh', lambda: isotonic_convex('logcosh', [3., 1., 2.]))
step('Lp(1.5)', lambda: isotonic_convex(Lp(1.5), [3., 1., 2.]))
step('Expectile(0.9)', lambda: isotonic_convex(Expectile(0.9), [3., 1., 2.]))
step('SquaredQuartic(1.0)', lambda: isotonic_convex(SquaredQuartic(1.0), [3., 1., 2.]))
step('Quantile(0.3)', lambda: isotonic_convex(Quantile(0.3), [3., 1., 2.]))
step('squared', lambda: isotonic_convex('squared', [3., 1., 2.]))
step('logloss', lambda: isotonic_convex('logloss', [0.3, 0.1, 0.2]))
step('poisson', lambda: isotonic_convex('poisson', [3., 1., 2.]))
step('gamma', lambda: isotonic_convex('gamma', [3., 1., 2.]))
'''
_FIRST_CALL = _FITS + r'''
total = time.perf_counter() - t0
step('anytime_isotonic PseudoHuber(1.0) (apart)', lambda: anytime_isotonic(PseudoHuber(1.0), [3., 1., 2.], tol=1e-6))
print(json.dumps({'total': total, 'steps': steps}))
'''

_BASELINE = r'''
import json, time
t0 = time.perf_counter()
import numba; from numba import njit; njit(lambda x: x+1)(1)
print(json.dumps({'total': time.perf_counter() - t0, 'steps': {}}))
'''


def _run(code, env):
    "(in-process report, wall seconds of the whole process, peak RSS bytes or None)."
    t0 = time.perf_counter()
    proc, rss = run_peak_rss([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = ' | '.join(proc.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f'subprocess exited with {proc.returncode}: {tail}')
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall, rss


def _first_calls():
    with tempfile.TemporaryDirectory(prefix='isocal-numba-cache-') as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d)
        base = [_run(_BASELINE, env) for _ in range(2)]
        cold = _run(_FIRST_CALL, env)
        warm = _run(_FIRST_CALL, env)
    return base, cold, warm


def section_compile(out, attempts=3, wait=60):
    "Retried (after `wait` s, with a fresh cache) when a process fails: modules being edited can fail to import."
    errors = []
    for attempt in range(attempts):
        try:
            base, cold, warm = _first_calls()
            break
        except RuntimeError as e:
            errors.append(str(e))
            print(f'  compile: attempt {attempt + 1} failed: {e}', file=sys.stderr, flush=True)
            if attempt + 1 < attempts:
                time.sleep(wait)
    else:
        out['compile'] = dict(errors=errors)
        print(f'\n### First call in a fresh process: FAILED {attempts} times: {errors[-1]}')
        return
    b_in = min(b[0]['total'] for b in base)
    b_wall = min(b[1] for b in base)
    b_rss = base[0][2]
    rss = lambda b: '-' if b is None else f'{b / 1e6:.0f}'
    rows, recs = [], {}
    for name, (rep, wall, r) in [('cold cache', cold), ('warm cache', warm)]:
        above = rep['total'] - b_in
        ok = above <= TARGET_COMPILE
        recs[name] = dict(seconds=rep['total'], wall_seconds=wall, peak_rss_bytes=r, above_baseline=above,
                          wall_above_baseline=wall - b_wall, steps=rep['steps'], target=TARGET_COMPILE, ok=ok)
        rows.append([name, f"{rep['total']:.2f}", f'{above:.2f}', f'{wall:.2f}', f'{wall - b_wall:.2f}', rss(r),
                     verdict(ok)])
    rows.append(['numba baseline', f'{b_in:.2f}', '-', f'{b_wall:.2f}', '-', rss(b_rss), '-'])
    recs['baseline'] = dict(seconds=b_in, wall_seconds=b_wall, peak_rss_bytes=b_rss,
                            runs=[dict(seconds=b[0]['total'], wall_seconds=b[1]) for b in base])
    recs['failed_attempts'] = errors
    out['compile'] = recs
    print(f'\n### First call in a fresh process (NUMBA_CACHE_DIR empty, then filled by that run); target <= '
          f'{TARGET_COMPILE:g} s above the numba baseline\n')
    print(table(['process', 'import + calls s', 'above baseline s', 'process wall s (incl. anytime)',
                 'wall above baseline s',
                 'peak RSS MB', 'verdict'], rows))
    print()
    names = list(cold[0]['steps'])
    print(table(['step', 'cold s', 'warm s'],
                [[k, f"{cold[0]['steps'][k]:.2f}", f"{warm[0]['steps'][k]:.3f}"] for k in names]))
    what_it_compiles(out)


def what_it_compiles(out, top=16):
    """The fits' first calls (without anytime) once more in a fresh process on an empty cache, with each compiled
    function's own seconds (Numba's compile events, bench/startup.py's listener: nested compiles excluded), by
    module and the slowest `top`; and the floor: bench/bare_decomposition.py's uncertified engine compiled the same
    way."""
    from bare_decomposition import FIRST_CALL as BARE
    from startup import kernel_compile_times
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        own, bare = kernel_compile_times(_FITS, cwd=root), kernel_compile_times(BARE, cwd=root)
    except RuntimeError as e:
        out['compile']['kernels'] = dict(error=str(e))
        print(f'\n(what the first call compiles: FAILED: {e})')
        return
    modules = {}
    for k, t in own.items():
        m = k.rsplit('.', 1)[0] if k.startswith('isocal.') else 'numba and numpy (their own overloads)'
        modules[m] = modules.get(m, 0.0) + t
    out['compile']['kernels'], out['compile']['bare_floor'] = own, bare
    print(f'\n### What the first calls compile: {len(own)} functions, {sum(own.values()):.2f} s of their own compile '
          f'time (one more cold process; each function without the functions it compiles in turn)\n')
    print(table(['module', 'own compile s'],
                [[m, f'{t:.2f}'] for m, t in sorted(modules.items(), key=lambda kv: -kv[1])]))
    print()
    print(table(['function', 'own compile s'],
                [[k, f'{t:.2f}'] for k, t in sorted(own.items(), key=lambda kv: -kv[1])[:top]]))
    print(f'\nFloor: bench/bare_decomposition.py, the same decomposition with Newton steps and no certification, '
          f'compiles {len(bare)} functions in {sum(bare.values()):.2f} s.')


def environment():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    import numba
    import scipy
    git = lambda *a: subprocess.run(['git', *a], cwd=root, capture_output=True, text=True).stdout
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    sources = {}
    for f in ['convex.py', 'decomposition.py', 'derivatives.py', 'quantile.py', 'pava.py']:
        try:
            with open(os.path.join(root, 'isocal', f), 'rb') as fh:
                sources[f] = hashlib.sha1(fh.read()).hexdigest()[:12]
        except OSError:
            pass
    return dict(python=platform.python_version(), numpy=np.__version__, scipy=scipy.__version__, source_sha1=sources,
                numba=numba.__version__, commit=git('rev-parse', 'HEAD').strip(),
                dirty_files=[l.split(maxsplit=1)[1] for l in git('status', '--porcelain', 'isocal').splitlines()
                             if l.strip()],
                cpus=os.cpu_count(), loadavg_start=load, argv=sys.argv)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--full', action='store_true', help='n = 1e5, 3e5, 1e6, 3e6, 1e7')
    ap.add_argument('--sizes', help='comma-separated sizes, e.g. 3e6,1e7 (overrides --full)')
    ap.add_argument('--repeat', type=int, default=3, help='warm runs per time below n = 3e6 (median)')
    ap.add_argument('--mem-n', type=float, default=1e6)
    ap.add_argument('--sections', default=','.join(SECTIONS), help=f'comma-separated subset of {SECTIONS}')
    ap.add_argument('--json', help='write every number here (atomically)')
    a = ap.parse_args(argv)
    sizes = ([int(float(s)) for s in a.sizes.split(',')] if a.sizes else FULL_SIZES if a.full else QUICK_SIZES)
    sections = [s.strip() for s in a.sections.split(',') if s.strip()]
    bad = set(sections) - set(SECTIONS)
    if bad:
        ap.error(f'unknown sections {sorted(bad)}')
    t_start = time.perf_counter()
    out = dict(environment=environment(), sizes=sizes, repeat=a.repeat,
               targets=dict(ratio=TARGET_RATIO, ratio_from_n=RATIO_FROM, slope=TARGET_SLOPE,
                            quantile_slope=TARGET_QUANTILE_SLOPE,
                            quantile_ratio=TARGET_QUANTILE, arrays=TARGET_ARRAYS, compile_seconds=TARGET_COMPILE))
    env = out['environment']
    print(f"## isocal.convex vs SciPy (issue 28): n = {', '.join(map(fmt_n, sizes))}; commit {env['commit'][:10]}"
          f"{' + uncommitted changes in ' + ', '.join(env['dirty_files']) if env['dirty_files'] else ''}; "
          f"numpy {env['numpy']}, scipy {env['scipy']}, numba {env['numba']}; {env['cpus']} CPUs, "
          f"load {env['loadavg_start']}", flush=True)
    save = (lambda: write_json(a.json, out)) if a.json else (lambda: None)
    if set(sections) & {'fits', 'quantile', 'anytime', 'memory'}:
        t0 = time.perf_counter(); warm_up()
        out['warm_up_seconds'] = time.perf_counter() - t0
    for name in sections:
        t0 = time.perf_counter()
        if name == 'fits':
            section_fits(sizes, a.repeat, out)
        elif name == 'quantile':
            section_quantile(sizes, a.repeat, out)
        elif name == 'anytime':
            section_anytime(a.repeat, out)
        elif name == 'memory':
            section_memory(int(a.mem_n), out)
        elif name == 'compile':
            section_compile(out)
        out.setdefault('section_seconds', {})[name] = time.perf_counter() - t0
        sys.stdout.flush()
        save()
    out['total_seconds'] = time.perf_counter() - t_start
    try:
        out['environment']['loadavg_end'] = os.getloadavg()
    except OSError:
        pass
    save()
    print(f'\n(total {out["total_seconds"]:.0f} s; load average at the end {out["environment"].get("loadavg_end")})')


if __name__ == '__main__':
    main()
