"""Benchmark isocal's PAVA against scipy and scikit-learn, in one process.

Run from the repository root:

    .venv/bin/python bench/pava.py [--sizes 1e3,1e4,1e5,1e6,1e7] [--repeat 7] [--quick] [--json out.json] [--detail]

It prints a compact summary with PASS/MISS against every target; --detail adds one line per case.

Sections (each row gives medians of repeated warm runs; Numba is compiled before any timing):

a. `isocal.pava.isotonic_regression(y[, weights])` on x-ordered y vs `scipy.optimize.isotonic_regression`:
   time ratio and peak extra memory (tracemalloc) of each.
b. `IsotonicCalibrator().fit(x, y)` vs `sklearn.isotonic.IsotonicRegression().fit`, plus one `np.argsort(x)`:
   time ratios and peak extra memory in units of "arrays of n float64".
c. `IsotonicCalibrator.predict` on 1e6 new scores vs `np.interp` on the same thresholds: time ratio and peak extra
   memory of each, in arrays of n float64 (n: the queries).
d. Start-up, in fresh subprocesses: `import isocal.pava`, the first call of isotonic_regression / fit / predict with
   a warm Numba cache (minus the start-up of a process that only imports numba), and the cold compile time
   (NUMBA_CACHE_DIR pointed at an empty temporary directory); next to each, the peak RSS of the process it ran in
   (from GNU time, the largest of the repeats).

Data: scores x ~ U(0, 1), either continuous or rounded to a grid of n/10 points (so ~n/10 distinct values with ties),
sorted or in random order; targets are 0/1 labels drawn with the monotone probability p(x) = 1/(1 + exp(-6(x - 1/2)))
("binary") or p(x) + N(0, 0.25^2) noise ("noisy"); weights are None or U(1e-3, 1e3).

Memory (a-c) is the traced peak of one more, untimed call (bench/timing.py's `peak_bytes`) above the memory traced just
before it, the result returned counted. tracemalloc sees every NumPy allocation (NumPy reports its data buffers to it)
and, with the Numba installed here (0.68), the arrays Numba's runtime allocates inside a jitted function too.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import zlib

import numpy as np

from timing import peak_bytes, run_peak_rss   # bench/timing.py (bench/ is on the path: run as a script, or appended)

# --- targets (from the isocal issue) -------------------------------------------------------------------------------
PAVA_TIME_TARGET = 1.0       # isocal / scipy, for n >= 1e4
PAVA_TIME_MIN_N = 10_000
FIT_SK_TARGET = 0.25         # isocal fit / sklearn fit, unsorted x with ties, n = 1e6
FIT_ARGSORT_TARGET = 4.0     # isocal fit / one np.argsort(x)
FIT_MEM_TARGET = 4.0         # peak extra memory of fit, in arrays of n float64
MEM_SLACK = 0.01             # memory comparisons allow 1% (a: of scipy's peak; b: of one array) for small objects
FIT_TARGET_N = 1_000_000
PREDICT_TARGET = 1.0         # isocal predict / np.interp
PREDICT_N = 1_000_000
IMPORT_TARGET = 1.0          # seconds for `import isocal.pava`
FIRST_CALL_TARGET = 0.3      # seconds above numba's own start-up: its import plus a trivial cached @njit's first call

FULL_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000, 10_000, 100_000)


# --- data ----------------------------------------------------------------------------------------------------------
def _rng(seed, *key):
    "A generator seeded by `seed` and a key (strings hashed stably, so runs are reproducible)."
    return np.random.default_rng([seed, *[zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in key]])

def p_true(x):
    "The monotone probability used for the labels."
    return 1.0 / (1.0 + np.exp(-6.0 * (x - 0.5)))

def make_scores(n, *, ties, order, seed=0):
    "Scores in [0, 1]: continuous or on a grid of ~n/10 points (`ties`), `order` 'sorted' or 'unsorted'."
    x = _rng(seed, 'x', n, ties).random(n)
    if ties:
        g = max(n // 10, 1)
        x = np.round(x * g) / g
    return np.sort(x) if order == 'sorted' else x

def make_targets(x, kind, *, seed=0):
    "0/1 labels with P(y=1|x) = p_true(x) ('binary') or p_true(x) plus Gaussian noise ('noisy')."
    rng = _rng(seed, 'y', len(x), kind)
    p = p_true(x)
    if kind == 'binary': return (rng.random(len(x)) < p).astype(np.float64)
    if kind == 'noisy': return p + rng.normal(0.0, 0.25, len(x))
    raise ValueError(kind)

def make_weights(n, weighted, *, seed=0):
    return _rng(seed, 'w', n).uniform(1e-3, 1e3, n) if weighted else None


# --- measurement ---------------------------------------------------------------------------------------------------
def time_interleaved(fns: dict, repeat: int, *, warm: bool = True, min_sample: float = 2e-3):
    """Median seconds per call of each callable, the contenders called in turn `repeat` times.

    With `warm`, each callable is first called once untimed: that call's result is returned for checking and its
    time sets how many calls make up one sample (at least `min_sample` seconds, so microsecond calls are timed
    reliably). Without it (for big inputs), one call is one sample and the first repetition's results are returned.
    Returns (medians, results).
    """
    number, outs = {k: 1 for k in fns}, {}
    if warm:
        for k, fn in fns.items():
            t0 = time.perf_counter()
            outs[k] = fn()
            number[k] = max(1, min(1000, int(min_sample / max(time.perf_counter() - t0, 1e-7))))
    times = {k: [] for k in fns}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()                     # as timeit does
    try:
        for rep in range(repeat):
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(number[k]):
                    out = fn()
                times[k].append((time.perf_counter() - t0) / number[k])
                if rep == 0 and k not in outs: outs[k] = out
                del out
    finally:
        if gc_was_enabled: gc.enable()
    return {k: statistics.median(v) for k, v in times.items()}, outs

def peak_extra_bytes(fn) -> int:
    "Peak traced memory during `fn()` minus the traced memory just before it (includes the result it returns)."
    return peak_bytes(fn)

def _reps(n, repeat):
    "Fewer repeats for the largest sizes so the full sweep stays within minutes."
    if n >= 10_000_000: return max(1, min(repeat, 3))
    return repeat

def _status(ok):
    return '-' if ok is None else ('PASS' if ok else 'MISS')

def warm_up():
    "Compile (or load from cache) every Numba kernel used below, on tiny inputs of the same types."
    from isocal.isotonic import IsotonicCalibrator
    from isocal.pava import isotonic_regression
    x = make_scores(100, ties=True, order='unsorted')
    y = make_targets(x, 'binary')
    w = make_weights(100, True)
    isotonic_regression(y); isotonic_regression(y, w)
    cal = IsotonicCalibrator().fit(x, y); IsotonicCalibrator().fit(x, y, sample_weight=w)
    cal.predict(x); cal.predict(np.sort(x))
    import sklearn.isotonic, scipy.optimize  # noqa: F401  (import the references before any timing)
    gc.collect()
    gc.freeze()   # the many long-lived objects of scipy/sklearn are not rescanned by every gc.collect() below


# --- a. isotonic_regression vs scipy -------------------------------------------------------------------------------
def bench_pava(sizes, repeat=7, *, seed=0, memory=True, log=print):
    from scipy.optimize import isotonic_regression as scipy_ir
    from isocal.pava import isotonic_regression
    rows = []
    for n in sizes:
        x = make_scores(n, ties=False, order='sorted', seed=seed)
        for ykind in ('binary', 'noisy'):
            y = make_targets(x, ykind, seed=seed)
            for weighted in (False, True):
                w = make_weights(n, weighted, seed=seed)
                fi, fs = (lambda: isotonic_regression(y, w)), (lambda: scipy_ir(y, weights=w))
                t, out = time_interleaved({'isocal': fi, 'scipy': fs}, _reps(n, repeat), warm=n < 1_000_000)
                r = out['isocal']
                maxdiff = float(np.max(np.abs(r.x - out['scipy'].x)))
                del out
                mi = peak_extra_bytes(fi) if memory else None
                ms = peak_extra_bytes(fs) if memory else None
                ratio = t['isocal'] / t['scipy']
                time_ok = ratio <= PAVA_TIME_TARGET if n >= PAVA_TIME_MIN_N else None
                mem_ok = None if mi is None else mi <= (1 + MEM_SLACK) * ms
                rows.append(dict(n=n, y=ykind, weights='U(1e-3,1e3)' if weighted else 'none',
                                 blocks=len(r.blocks) - 1, t_isocal=t['isocal'], t_scipy=t['scipy'], ratio=ratio,
                                 time_ok=time_ok, mem_isocal=mi, mem_scipy=ms,
                                 mem_isocal_arrays=None if mi is None else mi / (8 * n),
                                 mem_scipy_arrays=None if ms is None else ms / (8 * n), mem_ok=mem_ok,
                                 maxdiff=maxdiff))
                log(f"  a n={n:.0e} {ykind:6s} w={int(weighted)} ratio={ratio:.2f}")
    return rows


# --- b. fit vs sklearn ---------------------------------------------------------------------------------------------
FIT_CASES = (  # (x order, ties, y kind, weighted)
    ('unsorted', True, 'binary', False),
    ('unsorted', True, 'binary', True),
    ('unsorted', True, 'noisy', False),
    ('unsorted', False, 'binary', False),
    ('unsorted', False, 'noisy', True),
    ('sorted', True, 'binary', False),
    ('sorted', False, 'noisy', False),
)

def _is_target_case(order, ties): return order == 'unsorted' and ties

def bench_fit(sizes, repeat=7, *, seed=0, memory=True, memory_max_n=1_000_000, cases=FIT_CASES, log=print):
    from sklearn.isotonic import IsotonicRegression
    from isocal.isotonic import IsotonicCalibrator
    rows, argsort_cache = [], {}
    for n in sizes:
        for order, ties, ykind, weighted in cases:
            x = make_scores(n, ties=ties, order=order, seed=seed)
            y = make_targets(x, ykind, seed=seed)
            w = make_weights(n, weighted, seed=seed)
            fi = lambda: IsotonicCalibrator().fit(x, y, sample_weight=w)
            fk = lambda: IsotonicRegression().fit(x, y, sample_weight=w)
            fa = lambda: np.argsort(x)
            fns = {'isocal': fi, 'sklearn': fk}
            key = (n, order, ties)
            if key not in argsort_cache: fns['argsort'] = fa
            t, out = time_interleaved(fns, _reps(n, repeat), warm=n < 1_000_000)
            ci, ck = out['isocal'], out['sklearn']
            del out
            q = np.sort(_rng(seed, 'q', n).uniform(ci.X_min_, ci.X_max_, 1000))
            maxdiff = float(np.max(np.abs(ci.predict(q) - ck.predict(q))))
            del ci, ck
            argsort_cache.setdefault(key, t.get('argsort'))
            t_arg = argsort_cache[key]
            do_mem = memory and n <= memory_max_n
            mi = peak_extra_bytes(fi) / (8 * n) if do_mem else None
            mk = peak_extra_bytes(fk) / (8 * n) if do_mem else None
            r_sk, r_arg = t['isocal'] / t['sklearn'], t['isocal'] / t_arg
            rows.append(dict(n=n, x=f"{order},{'ties' if ties else 'cont'}", y=ykind,
                             weights='U(1e-3,1e3)' if weighted else 'none',
                             target_case=_is_target_case(order, ties) and n == FIT_TARGET_N,
                             t_isocal=t['isocal'], t_sklearn=t['sklearn'], t_argsort=t_arg,
                             ratio_sklearn=r_sk, ratio_argsort=r_arg,
                             sk_ok=r_sk <= FIT_SK_TARGET, argsort_ok=r_arg <= FIT_ARGSORT_TARGET,
                             mem_isocal_arrays=mi, mem_sklearn_arrays=mk,
                             mem_ok=None if mi is None else mi <= FIT_MEM_TARGET + MEM_SLACK, maxdiff=maxdiff))
            log(f"  b n={n:.0e} {order:8s} ties={int(ties)} {ykind:6s} w={int(weighted)} "
                f"/sk={r_sk:.2f} /argsort={r_arg:.2f}")
    return rows


# --- c. predict vs np.interp ---------------------------------------------------------------------------------------
def bench_predict(n_train, repeat=7, *, n_query=PREDICT_N, seed=0, log=print):
    from isocal.isotonic import IsotonicCalibrator
    rows = []
    for name, ties, ykind in (('binary,ties', True, 'binary'), ('noisy,cont', False, 'noisy')):
        x = make_scores(n_train, ties=ties, order='unsorted', seed=seed)
        cal = IsotonicCalibrator().fit(x, make_targets(x, ykind, seed=seed))
        X, Y = cal.X_thresholds_, cal.y_thresholds_
        T = _rng(seed, 'T', n_query).uniform(cal.X_min_, cal.X_max_, n_query)
        for qorder in ('unsorted', 'sorted'):
            Tq = np.sort(T) if qorder == 'sorted' else T
            fi, fn = (lambda: cal.predict(Tq)), (lambda: np.interp(Tq, X, Y))
            t, out = time_interleaved({'isocal': fi, 'interp': fn}, repeat)
            maxdiff = float(np.max(np.abs(out['isocal'] - out['interp'])))
            del out
            ratio = t['isocal'] / t['interp']
            mi, mn = peak_extra_bytes(fi) / (8 * n_query), peak_extra_bytes(fn) / (8 * n_query)
            rows.append(dict(model=f"fit on {n_train:.0e} {name}".replace('e+0', 'e'), knots=len(X), n_query=n_query, query=qorder,
                             t_isocal=t['isocal'], t_interp=t['interp'], ratio=ratio,
                             ok=ratio <= PREDICT_TARGET, mem_isocal_arrays=mi, mem_interp_arrays=mn,
                             maxdiff=maxdiff))
            log(f"  c {name} {qorder} ratio={ratio:.2f}")
    return rows


# --- d. import, first call, cold compile (fresh subprocesses) ------------------------------------------------------
_SETUP = ("import pickle\nimport numpy as np\n"
          "rng = np.random.default_rng(0)\n"
          "x = np.round(rng.random(1000) * 100) / 100\n"
          "y = (rng.random(1000) < x).astype(float)\n")
_CALLS = {  # name: (untimed set-up, timed first call)
    'isotonic_regression': ('', 'isocal.pava.isotonic_regression(y)'),
    'fit': ('', 'isocal.IsotonicCalibrator().fit(x, y)'),   # its module (and scikit-learn) imported on first use
    'predict': ('', 'pickle.loads(FITTED).predict(x)'),   # FITTED: a pickled calibrator, made by the parent
}

def _fitted_pickle():
    "A pickled IsotonicCalibrator fitted on the subprocesses' data: 'first predict' = load a model, then predict."
    import pickle
    from isocal.isotonic import IsotonicCalibrator
    ns = {}
    exec(_SETUP, ns)
    return pickle.dumps(IsotonicCalibrator().fit(ns['x'], ns['y']))
_PROBE = ("from numba import njit\n\n@njit(cache=True)\ndef probe(a):\n    return a.sum()\n")

def _script(module, steps=(), path=None):
    """A script that times `import module`, then for each (name, setup, call) step the set-up and the call, and prints
    the times as JSON (keys 'import', name, name + ':setup')."""
    lines = ["import time, json", "_t = {}"]
    if path: lines += ["import sys", f"sys.path.insert(0, {path!r})"]
    lines += ["_t0 = time.perf_counter()", f"import {module}", "_t['import'] = time.perf_counter() - _t0"]
    if steps: lines.append(_SETUP)
    for name, setup, call in steps:
        lines += ["_t0 = time.perf_counter()", setup, f"_t[{name + ':setup'!r}] = time.perf_counter() - _t0",
                  "_t0 = time.perf_counter()", call, f"_t[{name!r}] = time.perf_counter() - _t0"]
    lines.append("print(json.dumps(_t))")
    return "\n".join(lines)

def _run_py(code, env=None):
    """Run `code` in a fresh interpreter; (wall seconds of the whole process, its JSON output, its peak RSS in bytes
    or None without GNU time)."""
    t0 = time.perf_counter()
    out, rss = run_peak_rss([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"subprocess failed:\n{out.stderr}")
    return wall, json.loads(out.stdout.strip().splitlines()[-1]), rss

def _max_rss(values):
    "The largest peak RSS of several processes (None if none was measured)."
    values = [v for v in values if v is not None]
    return max(values) if values else None

def bench_startup(repeat=5, *, log=print):
    """Start-up costs in fresh interpreters (medians of `repeat`).

    Each first call runs in its own process: isotonic_regression(y), IsotonicCalibrator().fit(x, y), and for predict
    unpickling a fitted calibrator then predict (loading a model to use it). The targeted number is the wall time
    of that process minus the wall time of a process that only imports numba. Rows measured in one process carry its
    peak RSS ('rss', bytes; the largest of the repeats).
    """
    env = dict(os.environ)
    blob = _fitted_pickle()
    calls = {k: (s, c.replace('FITTED', repr(blob))) for k, (s, c) in _CALLS.items()}
    all_steps = [(k, s, c) for k, (s, c) in calls.items()]
    # warm isocal's cache, and ask where it lives (the in-tree __pycache__ unless NUMBA_CACHE_DIR is set or isocal
    # fell back to a temporary directory)
    _, info, _ = _run_py(_script('isocal.pava', all_steps).replace(
        "print(json.dumps(_t))", "import isocal.core\nprint(json.dumps({'cache_path': "
        "isocal.pava._pava_kernel._cache._cache_path, 'fallback': isocal.core.NUMBA_CACHE_FALLBACK}))"), env)
    probe_dir = tempfile.mkdtemp(prefix='isocal-bench-probe-')
    try:
        with open(os.path.join(probe_dir, '_isocal_bench_probe.py'), 'w') as f: f.write(_PROBE)
        probe = _script('_isocal_bench_probe', [('probe', '', '_isocal_bench_probe.probe(x)')], path=probe_dir)
        _run_py(probe, env)                                           # warm the probe's cache
        samples = {k: [] for k in ('numba_wall', 'numba_import', 'isocal_import', 'probe', *_CALLS)}
        extra = {k: [] for k in _CALLS}
        rss = {k: [] for k in ('numba', 'probe', *_CALLS)}
        for _ in range(repeat):
            w, t, r = _run_py(_script('numba'), env)
            samples['numba_wall'].append(w); samples['numba_import'].append(t['import']); rss['numba'].append(r)
            _, t, r = _run_py(probe, env)
            samples['probe'].append(t['probe']); rss['probe'].append(r)
            for k, (s, c) in calls.items():
                w, t, r = _run_py(_script('isocal.pava', [(k, s, c)]), env)
                samples[k].append(t[k]); extra[k].append(w - t[k + ':setup'])
                samples['isocal_import'].append(t['import']); rss[k].append(r)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in samples.items()}
    rss = {k: _max_rss(v) for k, v in rss.items()}
    rows = [dict(what='import numba (reference)', seconds=med['numba_import'], target=None, ok=None,
                 rss=rss['numba']),
            dict(what="first call of a trivial cached @njit (numba's own start-up, reference)", seconds=med['probe'],
                 target=None, ok=None, rss=rss['probe']),
            dict(what='import isocal.pava', seconds=med['isocal_import'], target=IMPORT_TARGET,
                 ok=med['isocal_import'] <= IMPORT_TARGET)]
    for k in _CALLS:
        label = 'unpickled model + first predict' if k == 'predict' else f'first {k}'
        rows.append(dict(what=f'{label}, warm cache (in-process)', seconds=med[k], target=None, ok=None, rss=rss[k]))
        e = statistics.median(extra[k]) - med['numba_wall']
        rows.append(dict(what=f'  process: import isocal.pava + first {k} - numba process', seconds=e,
                         target=None, ok=None))
        rows.append(dict(what=f'  the same minus numba\'s own first-call start-up', seconds=e - med['probe'],
                         target=FIRST_CALL_TARGET, ok=e - med['probe'] <= FIRST_CALL_TARGET))
    # cold compile: an empty cache directory, then the same directory again (should then be warm)
    tmp = tempfile.mkdtemp(prefix='isocal-bench-cache-')
    try:
        env_cold = dict(env, NUMBA_CACHE_DIR=tmp)
        _, cold, cold_rss = _run_py(_script('isocal.pava', all_steps), env_cold)
        _, rewarm, rewarm_rss = _run_py(_script('isocal.pava', all_steps), env_cold)
        info['cache_files_written'] = sum(len(f) for _, _, f in os.walk(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for k in _CALLS:
        rows.append(dict(what=f'cold compile (empty NUMBA_CACHE_DIR): first {k}', seconds=cold[k], target=None,
                         ok=None))
    cold_total = sum(cold[k] + cold[k + ':setup'] for k in _CALLS)
    warm_total = sum(rewarm[k] + rewarm[k + ':setup'] for k in _CALLS)
    rows.append(dict(what='cold compile: isotonic_regression, fit, predict in one process', seconds=cold_total,
                     target=None, ok=None, rss=cold_rss))
    rows.append(dict(what='  the same, next process, same NUMBA_CACHE_DIR', seconds=warm_total, target=None, ok=None,
                     rss=rewarm_rss))
    info['medians'] = med
    info['rss'] = rss
    log("  d done")
    return rows, info


# --- report --------------------------------------------------------------------------------------------------------
def _fmt(v, spec):
    if v is None: return '-'
    if spec == 'ms': return f"{1e3 * v:.3g}" if v < 0.1 else f"{1e3 * v:.0f}"
    if spec == 'n': return f"{v:.0e}".replace('e+0', 'e')
    if spec == 'x': return f"{v:.2f}"
    if spec == 'arr': return f"{v:.2f}"
    if spec == 's': return f"{v:.3f}"
    if spec == 'st': return _status(v)
    if spec == 'lst': return '-' if v is None else ('pass' if v else 'miss')
    if spec == 'e': return f"{v:.0e}"
    if spec == 'mb': return f"{v / 1e6:.0f}"
    return str(v)

def table(rows, cols):
    "Plain-text table: cols is a list of (header, key or callable, format)."
    body = [[_fmt(c(r) if callable(c) else r.get(c), f) for _, c, f in cols] for r in rows]
    heads = [h for h, _, _ in cols]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(heads)]
    line = lambda cells: '  '.join(c.rjust(w) for c, w in zip(cells, widths))
    return '\n'.join([line(heads), line(['-' * w for w in widths]), *map(line, body)])

def _nlabel(n): return _fmt(n, 'n')

def _all_ok(flags):
    "None if no flag applies, else whether all applicable flags pass."
    flags = [f for f in flags if f is not None]
    return None if not flags else all(flags)

def format_summary(res) -> str:
    "A compact report (one line per size or per case) with every target's PASS/MISS."
    out = []
    if res.get('pava'):
        rows = []
        for n in sorted({r['n'] for r in res['pava']}):
            rs = [r for r in res['pava'] if r['n'] == n]
            row = dict(n=n, iso=rs[0]['t_isocal'], sci=rs[0]['t_scipy'], time_ok=_all_ok(r['time_ok'] for r in rs),
                       mi=max(r['mem_isocal_arrays'] for r in rs), ms=max(r['mem_scipy_arrays'] for r in rs),
                       mem_ok=_all_ok(r['mem_ok'] for r in rs))
            for r in rs: row[f"{r['y']}{',w' if r['weights'] != 'none' else ''}"] = r['ratio']
            rows.append(row)
        out += [f"a. isotonic_regression / scipy.optimize.isotonic_regression, y in score order (time <= "
                f"{PAVA_TIME_TARGET}x for n >= 1e4; memory <= scipy's)",
                table(rows, [('n', 'n', 'n'), ('iso ms', 'iso', 'ms'), ('scipy ms', 'sci', 'ms'),
                             ('binary', 'binary', 'x'), ('binary,w', 'binary,w', 'x'), ('noisy', 'noisy', 'x'),
                             ('noisy,w', 'noisy,w', 'x'), ('time', 'time_ok', 'st'), ('mem iso', 'mi', 'arr'),
                             ('mem scipy', 'ms', 'arr'), ('mem', 'mem_ok', 'st')]),
                "   ms: binary, no weights; ratios: isocal/scipy per case (w = weights U(1e-3,1e3)); "
                "memory: worst case, arrays of n float64", ""]
    if res.get('fit'):
        sizes = sorted({r['n'] for r in res['fit']})
        target_n = FIT_TARGET_N if FIT_TARGET_N in sizes else sizes[-1]
        cases, rows = [], []
        for r in res['fit']:
            c = f"{r['x']},{r['y']}{',w' if r['weights'] != 'none' else ''}"
            if c not in cases: cases.append(c)
        for c in cases:
            rs = {r['n']: r for r in res['fit'] if f"{r['x']},{r['y']}{',w' if r['weights'] != 'none' else ''}" == c}
            t = rs[target_n]
            official = t['x'] == 'unsorted,ties' and target_n == FIT_TARGET_N
            st = (lambda ok: _status(ok)) if official else (lambda ok: ('pass' if ok else 'miss') if ok is not None else '-')
            row = dict(case=c, sk_st=st(t['sk_ok']), arg_st=st(t['argsort_ok']), mi=t['mem_isocal_arrays'],
                       mk=t['mem_sklearn_arrays'], mem_st=st(t['mem_ok']))
            for n, r in rs.items(): row[f"sk{n}"], row[f"arg{n}"] = r['ratio_sklearn'], r['ratio_argsort']
            rows.append(row)
        cols = [('case', 'case', '')]
        cols += [(_nlabel(n), f"sk{n}", 'x') for n in sizes] + [('/sk', 'sk_st', '')]
        cols += [(_nlabel(n), f"arg{n}", 'x') for n in sizes] + [('/argsort', 'arg_st', '')]
        cols += [('mem iso', 'mi', 'arr'), ('sk', 'mk', 'arr'), ('mem', 'mem_st', '')]
        tc = [r for r in res['fit'] if r['x'] == 'unsorted,ties' and r['y'] == 'binary' and r['weights'] == 'none']
        tc.sort(key=lambda r: r['n'])
        ms = lambda key: ' '.join(_fmt(r[key], 'ms') for r in tc)
        out += [f"b. IsotonicCalibrator.fit / sklearn IsotonicRegression.fit and / one np.argsort(x); targets at "
                f"n={_nlabel(target_n)} (upper case: unsorted,ties rows): <= {FIT_SK_TARGET}x sklearn, "
                f"<= {FIT_ARGSORT_TARGET}x argsort, <= {FIT_MEM_TARGET:g} arrays of n",
                table(rows, cols),
                f"   ms, unsorted,ties,binary at n = {' '.join(_nlabel(r['n']) for r in tc)}: isocal {ms('t_isocal')}"
                f" | sklearn {ms('t_sklearn')} | argsort {ms('t_argsort')}", ""]
    if res.get('predict'):
        p = res['predict']
        models = list(dict.fromkeys(r['model'] for r in p))
        parts = '; '.join(f"{m} ({[r for r in p if r['model'] == m][0]['knots']} knots): " + ', '.join(
            f"{r['query']} {r['ratio']:.2f}" for r in p if r['model'] == m) for m in models)
        out += [f"c. IsotonicCalibrator.predict / np.interp on the same knots, {_nlabel(p[0]['n_query'])} queries "
                f"(<= {PREDICT_TARGET}x): {_status(_all_ok(r['ok'] for r in p))}", f"   ratios, {parts}",
                f"   memory, worst case, arrays of n float64 (n: the queries): isocal "
                f"{max(r['mem_isocal_arrays'] for r in p):.2f}, np.interp {max(r['mem_interp_arrays'] for r in p):.2f}",
                ""]
    if res.get('startup'):
        med, si = res['startup_info']['medians'], res['startup_info']
        by = {r['what']: r for r in res['startup']}
        rows = [dict(what='import isocal.pava', inproc=med['isocal_import'], target=IMPORT_TARGET,
                     ok=med['isocal_import'] <= IMPORT_TARGET)]
        for k in _CALLS:
            label = 'unpickle + first predict' if k == 'predict' else f'first {k}'
            e = by[f'  process: import isocal.pava + first {k} - numba process']['seconds']
            rows.append(dict(what=label, inproc=med[k], extra=e, extra2=e - med['probe'], target=FIRST_CALL_TARGET,
                             ok=e - med['probe'] <= FIRST_CALL_TARGET, cold=by[f'cold compile (empty NUMBA_CACHE_DIR): first {k}']['seconds'],
                             rss=si.get('rss', {}).get(k)))
        cold_row = by['cold compile: isotonic_regression, fit, predict in one process']
        rewarm_row = by['  the same, next process, same NUMBA_CACHE_DIR']
        mb = lambda r: _fmt(r.get('rss'), 'mb')
        out += ["d. start-up, fresh processes, warm Numba cache (seconds; extra = process wall - wall of "
                "`python -c 'import numba'`)",
                table(rows, [('', 'what', ''), ('in-process', 'inproc', 's'), ('extra', 'extra', 's'),
                             ('extra - jit start-up', 'extra2', 's'), ('target', 'target', 's'), ('', 'ok', 'st'),
                             ('peak RSS MB', 'rss', 'mb'), ('cold compile, in-process', 'cold', 's')]),
                f"   reference: import numba {med['numba_import']:.3f} (peak RSS {mb(by['import numba (reference)'])} "
                f"MB); numba's own jit start-up (first call of a trivial cached @njit) {med['probe']:.3f}",
                f"   cold compile, all three in one process: {cold_row['seconds']:.2f} (peak RSS {mb(cold_row)} MB); "
                f"next process, same NUMBA_CACHE_DIR: {rewarm_row['seconds']:.2f} (peak RSS {mb(rewarm_row)} MB)",
                "   peak RSS MB: of the process of the first call (warm cache; the largest of the repeats)", ""]
    return '\n'.join(out)

def format_report(res) -> str:
    "The detailed report: one line per case."
    out = []
    if res.get('pava'):
        out += ["a. isotonic_regression(y[, w]) on x-ordered y vs scipy.optimize.isotonic_regression"
                f"   (time target <= {PAVA_TIME_TARGET}x for n >= 1e4; memory target <= scipy, within 1%)",
                table(res['pava'], [('n', 'n', 'n'), ('y', 'y', ''), ('weights', 'weights', ''),
                                    ('blocks', 'blocks', ''), ('isocal ms', 't_isocal', 'ms'),
                                    ('scipy ms', 't_scipy', 'ms'), ('ratio', 'ratio', 'x'),
                                    ('time', 'time_ok', 'st'), ('mem iso', 'mem_isocal_arrays', 'arr'),
                                    ('mem scipy', 'mem_scipy_arrays', 'arr'), ('mem', 'mem_ok', 'st'),
                                    ('maxdiff', 'maxdiff', 'e')]),
                "   (memory: peak extra bytes / 8n, i.e. arrays of n float64)", ""]
    if res.get('fit'):
        fmt = lambda key: (lambda r: r[key] if r['target_case'] else None)
        info = lambda key: (lambda r: None if r['target_case'] else r[key])
        out += ["b. IsotonicCalibrator().fit(x, y[, w]) vs sklearn IsotonicRegression().fit, and one np.argsort(x)",
                f"   targets (unsorted x with ties, n=1e6; upper case): <= {FIT_SK_TARGET}x sklearn, "
                f"<= {FIT_ARGSORT_TARGET}x argsort, <= {FIT_MEM_TARGET} (+{MEM_SLACK}) arrays of n;",
                "   lower case: the same targets on other rows, for information; memory measured for n <= 1e6",
                table(res['fit'], [('n', 'n', 'n'), ('x', 'x', ''), ('y', 'y', ''), ('weights', 'weights', ''),
                                   ('isocal ms', 't_isocal', 'ms'), ('sklearn ms', 't_sklearn', 'ms'),
                                   ('argsort ms', 't_argsort', 'ms'), ('/sk', 'ratio_sklearn', 'x'),
                                   ('', fmt('sk_ok'), 'st'), ('', info('sk_ok'), 'lst'),
                                   ('/argsort', 'ratio_argsort', 'x'),
                                   ('', fmt('argsort_ok'), 'st'), ('', info('argsort_ok'), 'lst'),
                                   ('mem iso', 'mem_isocal_arrays', 'arr'), ('mem sk', 'mem_sklearn_arrays', 'arr'),
                                   ('', fmt('mem_ok'), 'st'), ('', info('mem_ok'), 'lst'),
                                   ('maxdiff', 'maxdiff', 'e')]), ""]
    if res.get('predict'):
        out += [f"c. IsotonicCalibrator.predict vs np.interp(T, X_thresholds_, y_thresholds_) (target <= {PREDICT_TARGET}x)",
                table(res['predict'], [('model', 'model', ''), ('knots', 'knots', ''), ('queries', 'n_query', 'n'),
                                       ('order', 'query', ''), ('isocal ms', 't_isocal', 'ms'),
                                       ('interp ms', 't_interp', 'ms'), ('ratio', 'ratio', 'x'), ('', 'ok', 'st'),
                                       ('mem iso', 'mem_isocal_arrays', 'arr'), ('mem interp', 'mem_interp_arrays', 'arr'),
                                       ('maxdiff', 'maxdiff', 'e')]),
                "   (memory: peak extra bytes / 8n, n the queries)", ""]
    if res.get('startup'):
        si = res.get('startup_info', {})
        out += ["d. start-up in fresh subprocesses (medians; seconds)",
                table(res['startup'], [('what', 'what', ''), ('seconds', 'seconds', 's'), ('target', 'target', 's'),
                                       ('', 'ok', 'st'), ('peak RSS MB', 'rss', 'mb')]),
                f"   numba cache: {si.get('cache_path')}; isocal fallback dir: {si.get('fallback')}; "
                f"files written to an empty NUMBA_CACHE_DIR: {si.get('cache_files_written')}", ""]
    return '\n'.join(out)


# --- driver --------------------------------------------------------------------------------------------------------
def run(sizes=FULL_SIZES, repeat=7, *, quick=False, sections='abcd', seed=0, log=print) -> dict:
    "Run the chosen sections; returns a dict of row lists (JSON-serialisable) plus 'meta'."
    import numba, scipy, sklearn
    import isocal
    t_start = time.perf_counter()
    sizes = [int(s) for s in sizes]
    res = dict(meta=dict(sizes=sizes, repeat=repeat, quick=quick, seed=seed, python=platform.python_version(),
                         numpy=np.__version__, numba=numba.__version__, scipy=scipy.__version__,
                         sklearn=sklearn.__version__, isocal=isocal.__version__, machine=platform.machine(),
                         cpus=os.cpu_count(), load_before=os.getloadavg()[0]))
    warm_up()
    if 'a' in sections: res['pava'] = bench_pava(sizes, repeat, seed=seed, log=log)
    if 'b' in sections: res['fit'] = bench_fit(sizes, repeat, seed=seed, log=log)
    if 'c' in sections: res['predict'] = bench_predict(min(max(sizes), FIT_TARGET_N), repeat, seed=seed, log=log)
    if 'd' in sections:
        res['startup'], res['startup_info'] = bench_startup(1 if quick else min(repeat, 5), log=log)
    res['meta']['seconds'] = time.perf_counter() - t_start
    res['meta']['load_after'] = os.getloadavg()[0]
    return res

def _sizes(s): return [int(float(v)) for v in s.split(',') if v.strip()]

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sizes', type=_sizes, default=None, help='comma-separated n, e.g. 1e3,1e4 (default 1e3..1e7)')
    ap.add_argument('--repeat', type=int, default=None, help='timed repeats per case (default 7; fewer for n >= 1e6)')
    ap.add_argument('--quick', action='store_true', help='sizes up to 1e5, 3 repeats, one start-up sample')
    ap.add_argument('--sections', default='abcd', help='subset of abcd to run')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--json', default=None, help='write all numbers to this file')
    ap.add_argument('-q', '--silent', action='store_true', help='no progress lines')
    ap.add_argument('--detail', action='store_true', help='also print one line per case')
    a = ap.parse_args(argv)
    sizes = a.sizes or (QUICK_SIZES if a.quick else FULL_SIZES)
    repeat = a.repeat or (3 if a.quick else 7)
    log = (lambda *_: None) if a.silent else (lambda m: print(m, file=sys.stderr, flush=True))
    res = run(sizes, repeat, quick=a.quick, sections=a.sections, seed=a.seed, log=log)
    m = res['meta']
    print(f"isocal {m['isocal']} | numpy {m['numpy']} numba {m['numba']} scipy {m['scipy']} sklearn {m['sklearn']} | "
          f"python {m['python']} {m['machine']} x{m['cpus']} | repeat {repeat} (fewer for n >= 1e6), medians | "
          f"load average {m['load_before']:.1f} before\n")
    print(format_summary(res))
    if a.detail: print(format_report(res))
    print(f"total {m['seconds']:.0f} s; load average {m['load_after']:.1f} after")
    if a.json:
        with open(a.json, 'w') as f: json.dump(res, f, indent=1)
    return res

if __name__ == '__main__':
    main()
