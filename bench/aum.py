"""Benchmark isocal's exact AUM line search and AUM gradient, against one np.argsort of B floats, in one process.

Run from the repository root:

    .venv/bin/python bench/aum.py [--quick] [--repeat 3] [--json out.json]

Sections (best of `--repeat` warm runs; Numba is compiled before any timing). Next to each time: its peak memory,
traced by tracemalloc in a separate untimed call (bench/timing.py), in MB and in arrays of n float64 (8n bytes), where
n = B in a and b, and n = B + I for the line searches of c, d, f and g whose I rows (crossings) outnumber the B
examples; for the fresh processes of e, their peak RSS.

a. `aum_line_search(..., stop='linear')` (B rows) on binary data, B = 1e6 examples with 10 features, random weights,
   default direction — vs one `np.argsort` of B random floats. Target ≤ 40× (the C++ reference: ≈ 90×).
b. `aum_gradient` (AUM + sub-gradient w.r.t. the weights) at B = 1e6 — vs one argsort. Target ≤ 3×.
c. Events processed per second: crossings handled by the 'linear' run (a) and by a 'quadratic' run at B = 3000.
d. Rows of 'first_min' from random starting weights against B; the growth exponent from a log-log fit
   (the reference's grew roughly as B^2.2); sizes stop at 8000 since the count grows like B^2.
e. First call in fresh subprocesses: cold (empty NUMBA_CACHE_DIR: compile) and warm (cached) — the time of
   `import isocal.aum` plus one small line search and one aum().
f. One gradient-descent step at B = 5,000 (--quick: 2,000) from random weights: the step rule as the descent runs it
   (`_descent_search`: lines in NumPy, the gradient's sort reused, the short table) against the public path
   (`aum_line_search` + `_decreases`: checks, lines in NumPy, a fresh sort, the full table), for 'linear' and
   'first_min', and the default 25-point grid step; crossings visited per search.
g. Time against B and I (Section 4.4, O((B + I) log B)): B grows with I = B rows, then I grows at B = 10,000;
   log-log slopes of the time and of (B + I) log B itself over the same points.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from timing import arrays, peak_bytes, run_peak_rss  # noqa: E402
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
    "(best seconds, traced peak bytes) of one np.argsort of B random floats."
    x = np.random.default_rng(1).random(B)
    return best_time(lambda: np.argsort(x), repeat)[0], peak_bytes(lambda: np.argsort(x))


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
    "(seconds of the first call in a fresh process, that process's peak RSS in bytes or None)."
    env = dict(os.environ)
    if cache_dir is not None:
        env['NUMBA_CACHE_DIR'] = cache_dir
    out, rss = run_peak_rss([sys.executable, '-c', FIRST_CALL], env=env, capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if out.returncode:
        raise RuntimeError(out.stderr)
    return float(out.stdout.strip().splitlines()[-1]), rss


def descent_step(B, repeat):
    """f: seconds per step rule at one iterate, on the descent's path and on the public one, with the traced peak
    bytes of each (now_peak, old_peak); crossings visited."""
    X, y, w = binary_data(B, seed=4)
    bp = binary_breakpoints(y)
    pred = X @ w
    r, _, _, order = _aum_sorted(bp, pred)
    direction = -(X.T @ (0.5 * (r.left + r.right)))
    grid = np.logspace(-4, 2, 25)
    out = {}
    for method in ('linear', 'first_min'):
        f_now = lambda: _choose_step(method, bp, X, w, direction, None, 0.1, grid, None, pred, order)
        f_old = lambda: (lambda q: (q, _decreases(q.step_size, q.aum, q.aum_slope_after, q.aum_tol, q.step)))(
            aum_line_search(bp, X, w, direction, stop=method))
        now, res = best_time(f_now, repeat)
        old, ref = best_time(f_old, repeat)
        assert res[0] == ref[0].step
        out[method] = dict(now=now, old=old, crossings=int(res[2]), now_peak=peak_bytes(f_now),
                           old_peak=peak_bytes(f_old))
    f_grid = lambda: _choose_step('grid', bp, X, w, direction, None, 0.1, grid, None, pred, order)
    out['grid'] = dict(now=best_time(f_grid, repeat)[0], now_peak=peak_bytes(f_grid))
    return out


def bound_sweep(Bs, B_fixed, Is, repeat):
    """g: (B, I, seconds, traced peak bytes) of `aum_line_search_lines(stop=I + 1)` on B random lines, and the fitted
    log-log slopes."""
    def one(B, I):
        rng = np.random.default_rng(0)
        e, d = rng.standard_normal(B), rng.standard_normal(B)
        neg = rng.random(B) < 0.5
        f = lambda: aum_line_search_lines(e, d, np.where(neg, 1.0, 0.0), np.where(neg, 0.0, -1.0), stop=int(I) + 1)
        t, r = best_time(f, repeat)
        return B, len(r) - 1, t, peak_bytes(f)
    sweeps = {'B (I = B)': [one(B, B) for B in Bs], f'I (B = {B_fixed:,})': [one(B_fixed, I) for I in Is]}
    slopes = {}
    for name, pts in sweeps.items():
        B, I, t, _ = map(np.array, zip(*pts))
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
    t_sort, p_sort = argsort_time(B, 2 * args.repeat)
    f_lin = lambda: aum_line_search(bp, X, w, stop='linear')
    t_lin, res = best_time(f_lin, args.repeat)
    events = int(res.intersections.sum())
    f_grad = lambda: aum_gradient(bp, X, w)
    t_grad, _ = best_time(f_grad, 2 * args.repeat)
    p_lin, p_grad = peak_bytes(f_lin), peak_bytes(f_grad)
    results.update(B=B, argsort=t_sort, linear=t_lin, linear_rows=len(res), linear_events=events, gradient=t_grad,
                   argsort_peak=p_sort, linear_peak=p_lin, gradient_peak=p_grad)

    Xq, yq, wq = binary_data(3000, seed=2)
    f_quad = lambda: aum_line_search(binary_breakpoints(yq), Xq, wq, stop='quadratic')
    t_quad, rq = best_time(f_quad, 1)
    p_quad = peak_bytes(f_quad)
    results.update(quadratic_B=3000, quadratic=t_quad, quadratic_events=int(rq.intersections.sum()),
                   quadratic_peak=p_quad)

    fm = []
    for n in fm_sizes:
        rows = []
        for seed in range(3):
            Xf, yf, wf = binary_data(n, seed=10 + seed)
            t = time.perf_counter()
            r = aum_line_search(binary_breakpoints(yf), Xf, wf, stop='first_min')
            rows.append((len(r), int(r.intersections.sum()), time.perf_counter() - t))
            if seed == 0:   # the peak of the first seed's search, traced in one more (untimed) call
                peak = peak_bytes(lambda: aum_line_search(binary_breakpoints(yf), Xf, wf, stop='first_min'))
        fm.append((n, float(np.mean([r[0] for r in rows])), float(np.mean([r[1] for r in rows])),
                   float(np.mean([r[2] for r in rows])), peak, rows[0][0]))
    slope = float(np.polyfit(np.log([f[0] for f in fm]), np.log([f[1] for f in fm]), 1)[0])
    results.update(first_min=fm, first_min_exponent=slope)

    with tempfile.TemporaryDirectory() as cache:
        results['first_call_cold'], results['first_call_cold_rss'] = first_call(cache)
    results['first_call_warm'], results['first_call_warm_rss'] = first_call()

    results['descent_step'] = descent_step(2_000 if args.quick else 5_000, args.repeat)
    if args.quick:
        sweeps, slopes = bound_sweep((1_000, 3_000, 10_000, 30_000), 3_000, (3_000, 10_000, 30_000, 100_000), args.repeat)
    else:
        sweeps, slopes = bound_sweep((10_000, 30_000, 100_000, 300_000, 1_000_000), 10_000,
                                     (10_000, 30_000, 100_000, 300_000, 1_000_000), args.repeat)
    results.update(bound_sweeps={k: [list(map(float, p)) for p in v] for k, v in sweeps.items()}, bound_slopes=slopes)

    ok = lambda r, t: 'PASS' if r <= t else 'MISS'
    mem = lambda peak, n: f"{arrays(peak, n):.2f} ({peak / 1e6:.3g} MB)"
    rss = lambda b: '-' if b is None else f"{b / 1e6:.0f} MB"
    print(f"isocal.aum benchmark (B = {B:,}, 10 features, best of {args.repeat}; peak: traced, arrays of B (MB))")
    print(f"{'what':44s} {'isocal s':>10s} {'isocal peak':>18s} {'argsort s':>10s} {'argsort peak':>18s} "
          f"{'ratio':>8s} {'target':>8s}")
    r_lin, r_grad = t_lin / t_sort, t_grad / t_sort
    print(f"{'a. line search, linear (B rows)':44s} {t_lin:10.3f} {mem(p_lin, B):>18s} {t_sort:10.3f} "
          f"{mem(p_sort, B):>18s} {r_lin:8.1f} {'≤ 40':>8s} {ok(r_lin, LINEAR_TARGET)}")
    print(f"{'b. AUM + gradient':44s} {t_grad:10.3f} {mem(p_grad, B):>18s} {t_sort:10.3f} "
          f"{mem(p_sort, B):>18s} {r_grad:8.2f} {'≤ 3':>8s} {ok(r_grad, GRADIENT_TARGET)}")
    print(f"c. events/second: linear {events / t_lin:,.0f} ({events:,} crossings in {t_lin:.2f} s, peak "
          f"{arrays(p_lin, B):.2f} arrays of B, {p_lin / 1e6:.3g} MB); quadratic B=3000 "
          f"{results['quadratic_events'] / t_quad:,.0f} ({results['quadratic_events']:,} in {t_quad:.2f} s, peak "
          f"{arrays(p_quad, 3000 + len(rq)):.2f} arrays of B + I, {p_quad / 1e6:.3g} MB)")
    print("d. first_min from random starts (3 seeds):  B, rows, crossings, seconds, peak arrays of B + I (MB) of the "
          "first seed's search (I: its rows)")
    for n, rows, ev, sec, peak, rows0 in fm:
        print(f"   {n:>8,d} {rows:12,.0f} {ev:14,.0f} {sec:9.3f} {mem(peak, n + rows0):>18s}")
    print(f"   growth exponent of rows vs B: {slope:.2f} (reference ≈ 2.2)")
    print(f"e. first call (import + small line search + aum): cold {results['first_call_cold']:.1f} s "
          f"(peak RSS {rss(results['first_call_cold_rss'])}), warm cache {results['first_call_warm']:.2f} s "
          f"(peak RSS {rss(results['first_call_warm_rss'])})")
    ds = results['descent_step']
    Bf = 2_000 if args.quick else 5_000
    print(f"f. one descent step from random weights (B = {Bf:,}): step rule, ms descent / public path, "
          "crossings I, peak arrays of B + I (MB) descent / public")
    for m in ('linear', 'first_min'):
        n_mem = Bf + ds[m]['crossings']
        print(f"   {m:10s} {1e3 * ds[m]['now']:9.2f} {1e3 * ds[m]['old']:9.2f}   {ds[m]['crossings']:<8,} "
              f"{mem(ds[m]['now_peak'], n_mem):>18s} {mem(ds[m]['old_peak'], n_mem):>18s}")
    print(f"   {'grid (25)':10s} {1e3 * ds['grid']['now']:9.2f} {'':9s}   {'':8s} {mem(ds['grid']['now_peak'], Bf):>18s}"
          " (arrays of B)")
    print("g. time against B and I: sweep, points (B, I, seconds, peak arrays of B + I), log-log slope measured / "
          "of (B + I) log B")
    for name, pts in sweeps.items():
        print(f"   {name:16s} " + ' '.join(f"({b:,}, {i:,}, {t:.3f}, {arrays(p, b + i):.1f})" for b, i, t, p in pts))
        print(f"   {'':16s} slope {slopes[name][0]:.2f} / {slopes[name][1]:.2f}")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
