"""Benchmark isocal's exact AUM line search and AUM gradient, against one np.argsort of B floats, in one process.

Run from the repository root:

    .venv/bin/python bench/aum.py [--quick] [--repeat 3] [--json out.json]

Sections (best of `--repeat` warm runs; Numba is compiled before any timing):

a. `aum_line_search(..., stop='linear')` (B rows) on binary data, B = 1e6 examples with 10 features, random weights,
   default direction — vs one `np.argsort` of B random floats. Target ≤ 40× (the C++ reference: ≈ 90×).
b. `aum_gradient` (AUM + sub-gradient w.r.t. the weights) at B = 1e6 — vs one argsort. Target ≤ 3×.
c. Events processed per second: crossings handled by the 'linear' run (a) and by a 'quadratic' run at B = 3000.
d. Rows of 'first_min' from random starting weights against B; the growth exponent from a log-log fit
   (the reference's grew roughly as B^2.2); sizes stop at 8000 since the count grows like B^2.
e. First call in fresh subprocesses: cold (empty NUMBA_CACHE_DIR: compile) and warm (cached) — the time of
   `import isocal.aum` plus one small line search and one aum().
f. One gradient-descent step at B = 5,000 (--quick: 2,000) from random weights: the step rule as the descent runs it now (one
   `_descent_search` call, reusing the gradient's sort) against the per-call path it used before
   (`aum_line_search` + `_decreases`: checks, lines in NumPy, a fresh sort, the full table), for 'linear' and
   'first_min', and the default 25-point grid step; crossings visited per search.
g. Time against B and I (Section 4.4, O((B + I) log B)): B grows with I = B rows, then I grows at B = 10,000;
   log-log slopes of the time and of (B + I) log B itself over the same points.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from isocal.aum import (_aum_sorted, _check_stop, _choose_step, _decreases, aum_gradient, aum_line_search,  # noqa: E402
                        aum_line_search_lines, binary_breakpoints)

LINEAR_TARGET = 40.0
GRADIENT_TARGET = 3.0


def binary_data(B, p=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((B, p))
    y = (X @ np.linspace(1.0, 0.1, p) + rng.standard_normal(B) > 2.0).astype(int)   # ~10% positives
    return X, y, rng.standard_normal(p)


def best_time(f, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def argsort_time(B, repeat):
    x = np.random.default_rng(1).random(B)
    return best_time(lambda: np.argsort(x), repeat)[0]


def warm_up():
    X, y, w = binary_data(200)
    bp = binary_breakpoints(y)
    for stop in ('linear', 'first_min', 'quadratic', 'max_auc'):
        aum_line_search(bp, X, w, stop=stop)
    aum_gradient(bp, X, w)


FIRST_CALL = """
import time; t = time.perf_counter()
import numpy as np
from isocal.aum import aum, aum_line_search, binary_breakpoints
X = np.random.default_rng(0).standard_normal((50, 3)); y = (X[:, 0] > 0).astype(int)
aum_line_search(binary_breakpoints(y), X, np.ones(3)); aum(binary_breakpoints(y), X[:, 0])
print(time.perf_counter() - t)
"""


def first_call(cache_dir=None):
    env = dict(os.environ)
    if cache_dir is not None:
        env['NUMBA_CACHE_DIR'] = cache_dir
    out = subprocess.run([sys.executable, '-c', FIRST_CALL], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if out.returncode:
        raise RuntimeError(out.stderr)
    return float(out.stdout.strip().splitlines()[-1])


def descent_step(B, repeat):
    "f: seconds per step rule at one iterate, now (one call) and on the old per-call path; crossings visited."
    X, y, w = binary_data(B, seed=4)
    bp = binary_breakpoints(y)
    pred = X @ w
    r, _, _, order = _aum_sorted(bp, pred)
    direction = -(X.T @ (0.5 * (r.left + r.right)))
    grid = np.logspace(-4, 2, 25)
    out = {}
    for method in ('linear', 'first_min'):
        now, res = best_time(lambda: _choose_step(method, bp, X, w, direction, None, 0.1, grid, None, pred, order),
                             repeat)
        old, ref = best_time(lambda: (lambda q: (q, _decreases(q)))(
            aum_line_search(bp, X, w, direction, stop=method)), repeat)
        assert res[0] == ref[0].step
        out[method] = dict(now=now, old=old, crossings=int(res[2]))
    out['grid'] = dict(now=best_time(lambda: _choose_step('grid', bp, X, w, direction, None, 0.1, grid, None, pred,
                                                          order), repeat)[0])
    return out


def bound_sweep(Bs, B_fixed, Is, repeat):
    "g: (B, I, seconds) of `aum_line_search_lines(stop=I + 1)` on B random lines, and the fitted log-log slopes."
    def one(B, I):
        rng = np.random.default_rng(0)
        e, d = rng.standard_normal(B), rng.standard_normal(B)
        neg = rng.random(B) < 0.5
        t, r = best_time(lambda: aum_line_search_lines(e, d, np.where(neg, 1.0, 0.0), np.where(neg, 0.0, -1.0),
                                                       stop=int(I) + 1), repeat)
        return B, len(r) - 1, t
    sweeps = {'B (I = B)': [one(B, B) for B in Bs], f'I (B = {B_fixed:,})': [one(B_fixed, I) for I in Is]}
    slopes = {}
    for name, pts in sweeps.items():
        B, I, t = map(np.array, zip(*pts))
        x = np.log(B if name.startswith('B') else I)
        slopes[name] = (float(np.polyfit(x, np.log(t), 1)[0]), float(np.polyfit(x, np.log((B + I) * np.log(B)), 1)[0]))
    return sweeps, slopes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--json')
    args = ap.parse_args()
    B = 100_000 if args.quick else 1_000_000
    fm_sizes = (500, 1_000, 2_000) if args.quick else (1_000, 2_000, 4_000, 8_000)
    results = {}
    warm_up()

    X, y, w = binary_data(B)
    bp = binary_breakpoints(y)
    t_sort = argsort_time(B, 2 * args.repeat)
    t_lin, res = best_time(lambda: aum_line_search(bp, X, w, stop='linear'), args.repeat)
    events = int(res.intersections.sum())
    t_grad, _ = best_time(lambda: aum_gradient(bp, X, w), 2 * args.repeat)
    results.update(B=B, argsort=t_sort, linear=t_lin, linear_rows=len(res), linear_events=events, gradient=t_grad)

    Xq, yq, wq = binary_data(3000, seed=2)
    t_quad, rq = best_time(lambda: aum_line_search(binary_breakpoints(yq), Xq, wq, stop='quadratic'), 1)
    results.update(quadratic_B=3000, quadratic=t_quad, quadratic_events=int(rq.intersections.sum()))

    fm = []
    for n in fm_sizes:
        rows = []
        for seed in range(3):
            Xf, yf, wf = binary_data(n, seed=10 + seed)
            t = time.perf_counter()
            r = aum_line_search(binary_breakpoints(yf), Xf, wf, stop='first_min')
            rows.append((len(r), int(r.intersections.sum()), time.perf_counter() - t))
        fm.append((n, float(np.mean([r[0] for r in rows])), float(np.mean([r[1] for r in rows])),
                   float(np.mean([r[2] for r in rows]))))
    slope = float(np.polyfit(np.log([f[0] for f in fm]), np.log([f[1] for f in fm]), 1)[0])
    results.update(first_min=fm, first_min_exponent=slope)

    with tempfile.TemporaryDirectory() as cache:
        results['first_call_cold'] = first_call(cache)
    results['first_call_warm'] = first_call()

    results['descent_step'] = descent_step(2_000 if args.quick else 5_000, args.repeat)
    if args.quick:
        sweeps, slopes = bound_sweep((1_000, 3_000, 10_000, 30_000), 3_000, (3_000, 10_000, 30_000, 100_000), args.repeat)
    else:
        sweeps, slopes = bound_sweep((10_000, 30_000, 100_000, 300_000, 1_000_000), 10_000,
                                     (10_000, 30_000, 100_000, 300_000, 1_000_000), args.repeat)
    results.update(bound_sweeps={k: [list(map(float, p)) for p in v] for k, v in sweeps.items()}, bound_slopes=slopes)

    ok = lambda r, t: 'PASS' if r <= t else 'MISS'
    print(f"isocal.aum benchmark (B = {B:,}, 10 features, best of {args.repeat})")
    print(f"{'what':44s} {'isocal s':>10s} {'argsort s':>10s} {'ratio':>8s} {'target':>8s}")
    r_lin, r_grad = t_lin / t_sort, t_grad / t_sort
    print(f"{'a. line search, linear (B rows)':44s} {t_lin:10.3f} {t_sort:10.3f} {r_lin:8.1f} "
          f"{'≤ 40':>8s} {ok(r_lin, LINEAR_TARGET)}")
    print(f"{'b. AUM + gradient':44s} {t_grad:10.3f} {t_sort:10.3f} {r_grad:8.2f} "
          f"{'≤ 3':>8s} {ok(r_grad, GRADIENT_TARGET)}")
    print(f"c. events/second: linear {events / t_lin:,.0f} ({events:,} crossings in {t_lin:.2f} s); "
          f"quadratic B=3000 {results['quadratic_events'] / t_quad:,.0f} ({results['quadratic_events']:,} in {t_quad:.2f} s)")
    print("d. first_min from random starts (3 seeds):  B, rows, crossings, seconds")
    for n, rows, ev, sec in fm:
        print(f"   {n:>8,d} {rows:12,.0f} {ev:14,.0f} {sec:9.3f}")
    print(f"   growth exponent of rows vs B: {slope:.2f} (reference ≈ 2.2)")
    print(f"e. first call (import + small line search + aum): cold {results['first_call_cold']:.1f} s, "
          f"warm cache {results['first_call_warm']:.2f} s")
    ds = results['descent_step']
    print(f"f. one descent step from random weights (B = {2_000 if args.quick else 5_000:,}): step rule, ms now / "
          "before (per-call path), crossings")
    for m in ('linear', 'first_min'):
        print(f"   {m:10s} {1e3 * ds[m]['now']:9.2f} {1e3 * ds[m]['old']:9.2f}   {ds[m]['crossings']:,}")
    print(f"   {'grid (25)':10s} {1e3 * ds['grid']['now']:9.2f}")
    print("g. time against B and I: sweep, points (B, I, seconds), log-log slope measured / of (B + I) log B")
    for name, pts in sweeps.items():
        print(f"   {name:16s} " + ' '.join(f"({b:,}, {i:,}, {t:.3f})" for b, i, t in pts))
        print(f"   {'':16s} slope {slopes[name][0]:.2f} / {slopes[name][1]:.2f}")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
