"""The first call on a fresh install (issue 16, part 2): Numba compile time as a user meets it.

Run from the repository root:

    .venv/bin/python bench/startup.py [--repeat 1] [--only pava convex ...] [--no-demo]

Every measurement runs in a fresh Python process with `NUMBA_CACHE_DIR` pointing at an empty temporary directory
(cold: everything compiles) or at a directory the same entry point has just filled (warm: everything loads from
the cache). Reported per module's main entry point:

- `cold`: seconds for `import` + the first call, empty cache;
- `warm`: the same with the cache filled;
- `baseline`: `import numba` + compiling and calling one trivial `@njit` function (what any Numba user pays; a
  function defined in `python -c` cannot be cached, so its cold and warm times are the same compile);
- `warm - numba`: the warm time less that of a process that only imports numba: what the entry point costs with
  every kernel cached (its imports, such as scikit-learn for `isotonic`, loading the kernels, the run itself), a part
  of `cold - baseline` that no kernel design removes;
- `cold - baseline` against the target of at most 2 s;
- `cold MB`, `warm MB`: the peak RSS of the cold and of the warm process (GNU time's %M, the largest of the repeats;
  `-` without /usr/bin/time), printed for the baseline and the demo too.

And `isocal demo` cold against warm (target: cold <= 2x warm). The load average is printed with the results, since
other work on the machine changes the times.

`--kernels N` also prints, for each entry point, the N kernels whose compilation took longest on its cold first call,
with their own compile seconds (Numba's compile events, without the nested compiles of the kernels they call), the
total, and the share of isocal's own kernels.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

TARGET_ABOVE_BASELINE = 2.0
DEMO_RATIO_TARGET = 2.0

BASELINE = """
import numba
@numba.njit
def f(x): return x + 1
f(1)
"""

# One representative first use per module: the call a user makes first.
ENTRY_POINTS = {
    "pava": """
import numpy as np
from isocal.pava import isotonic_regression
isotonic_regression(np.random.default_rng(0).normal(size=100))
""",
    "isotonic": """
import numpy as np
from isocal.isotonic import IsotonicCalibrator
r = np.random.default_rng(0); s = r.normal(size=200)
IsotonicCalibrator().fit(s, (r.uniform(size=200) < 0.5).astype(float)).predict(s)
""",
    "convex": """
import numpy as np
from isocal.convex import PseudoHuber, isotonic_convex
isotonic_convex(PseudoHuber(1.0), np.random.default_rng(0).normal(size=100))
""",
    "quantile": """
import numpy as np
from isocal.convex import Quantile, isotonic_convex
isotonic_convex(Quantile(0.9), np.random.default_rng(0).normal(size=100))
""",
    "online": """
import numpy as np
from isocal.online import OnlineIsotonic
OnlineIsotonic().extend(np.random.default_rng(0).normal(size=100)).fitted_values()
""",
    "venn_abers": """
import numpy as np
from isocal.venn_abers import VennAbers
r = np.random.default_rng(0); s = r.normal(size=200)
VennAbers().fit(s, (r.uniform(size=200) < 0.5).astype(int)).predict_proba(s)
""",
    "forward": """
import numpy as np
from isocal.forward import loo_all
r = np.random.default_rng(0)
loo_all(np.sort(r.uniform(size=200)), (r.uniform(size=200) < 0.5).astype(float))
""",
    "thresholds": """
import numpy as np
from isocal.thresholds import optimal_thresholds
r = np.random.default_rng(0)
optimal_thresholds(r.normal(size=300), r.integers(1, 4, 300), 3, loss="absolute")
""",
    "aum": """
import numpy as np
from isocal.aum import aum_gradient_descent, binary_breakpoints
r = np.random.default_rng(0)
X = r.normal(size=(200, 5)); y = (X[:, 0] + r.normal(size=200) > 0).astype(int)
aum_gradient_descent(binary_breakpoints(y), X, method="first_min", max_iter=3)
""",
}


KERNEL_TIMES = """
import collections, json, sys
from numba.core import event
record = event.RecordingListener()
event.register("numba:compile", record)
exec(sys.argv[1], {})
own, stack = collections.Counter(), []
for stamp, ev in record.buffer:          # start/end events nest: a kernel's own time excludes its callees' compiles
    f = ev.data["dispatcher"].py_func
    if ev.is_start:
        stack.append([f"{f.__module__}.{f.__qualname__}", stamp, 0.0])
    else:
        name, start, nested = stack.pop()
        own[name] += stamp - start - nested
        if stack: stack[-1][2] += stamp - start
print(json.dumps(own))
"""


def kernel_compile_times(code: str, cwd: str | None = None) -> dict[str, float]:
    """Own compile seconds of every function Numba compiled for `code`, run once in a fresh process on an empty cache
    (in `cwd`, by default this one)."""
    import json
    with tempfile.TemporaryDirectory(prefix="isocal-bench-cache-") as cache:
        proc = subprocess.run([sys.executable, "-c", KERNEL_TIMES, code], env=dict(os.environ, NUMBA_CACHE_DIR=cache),
                              capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"entry point failed:\n{code}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def print_kernels(name: str, code: str, top: int) -> None:
    times = kernel_compile_times(code)
    total, own = sum(times.values()), sum(t for k, t in times.items() if k.startswith("isocal."))
    print(f"  {name}: {len(times)} functions compiled in {total:.2f} s, isocal's own kernels {own:.2f} s")
    for kernel, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {seconds:6.2f}  {kernel}")


def run(code: str, cache: str) -> tuple[float, int | None]:
    """Wall seconds and peak RSS in bytes (None without /usr/bin/time) of `python -c code` with NUMBA_CACHE_DIR=cache
    (raises with its stderr if it fails)."""
    from timing import run_peak_rss  # bench/timing.py, here: tests read ENTRY_POINTS through runpy, bench/ off the path
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    start = time.perf_counter()
    proc, rss = run_peak_rss([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"entry point failed:\n{code}\n{proc.stderr[-2000:]}")
    return elapsed, rss


def _max_rss(values):
    values = [v for v in values if v is not None]
    return max(values) if values else None


def cold_and_warm(code: str, repeat: int) -> tuple[float, float, int | None, int | None]:
    """Best-of-`repeat` cold (empty cache) and warm (cache just filled by the same code) times, and the largest peak
    RSS of the cold and of the warm processes."""
    cold, warm = [], []
    for _ in range(repeat):
        cache = tempfile.mkdtemp(prefix="isocal-bench-cache-")
        try:
            cold.append(run(code, cache))
            warm.append(run(code, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return (min(t for t, _ in cold), min(t for t, _ in warm), _max_rss(r for _, r in cold),
            _max_rss(r for _, r in warm))


def _mb(rss) -> str:
    return "-" if rss is None else f"{rss / 1e6:.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="best of this many cold/warm pairs (default 1)")
    ap.add_argument("--only", nargs="*", choices=sorted(ENTRY_POINTS), help="modules to measure (default: all)")
    ap.add_argument("--no-demo", action="store_true", help="skip `isocal demo`")
    ap.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="also print each entry point's N slowest kernels to compile (default 0: none)")
    args = ap.parse_args(argv)

    base_cold, base_warm, base_cold_rss, base_warm_rss = cold_and_warm(BASELINE, args.repeat)
    numba_only = cold_and_warm("import numba", args.repeat)[1]
    print(f"load average {os.getloadavg()[0]:.2f}, CPUs available {len(os.sched_getaffinity(0))}")
    print(f"baseline (import numba + one trivial @njit): cold {base_cold:.2f} s ({_mb(base_cold_rss)} MB peak RSS), "
          f"warm {base_warm:.2f} s ({_mb(base_warm_rss)} MB); import numba alone {numba_only:.2f} s\n")
    print(f"{'entry point':<12}{'cold s':>8}{'warm s':>8}{'warm-numba':>11}{'cold-base':>11}{'target':>8}  met"
          f"{'cold MB':>9}{'warm MB':>9}")
    for name in args.only or ENTRY_POINTS:
        cold, warm, cold_rss, warm_rss = cold_and_warm(ENTRY_POINTS[name], args.repeat)
        above = cold - base_cold
        print(f"{name:<12}{cold:>8.2f}{warm:>8.2f}{warm - numba_only:>11.2f}{above:>11.2f}{TARGET_ABOVE_BASELINE:>8.1f}  "
              f"{'yes' if above <= TARGET_ABOVE_BASELINE else 'NO':<3}{_mb(cold_rss):>9}{_mb(warm_rss):>9}")
    if not args.no_demo:
        with tempfile.TemporaryDirectory() as out:
            demo = (f"import sys; sys.argv[1:] = ['demo', '--out', {os.path.join(out, 'r.png')!r}]; "
                    f"from isocal.cli import console_main; sys.exit(console_main())")   # the `isocal` script's code
            cold, warm, cold_rss, warm_rss = cold_and_warm(demo, args.repeat)
        print(f"\nisocal demo: cold {cold:.2f} s ({_mb(cold_rss)} MB peak RSS), warm {warm:.2f} s ({_mb(warm_rss)} MB), "
              f"ratio {cold / warm:.2f} (target <= {DEMO_RATIO_TARGET:.1f}: "
              f"{'met' if cold / warm <= DEMO_RATIO_TARGET else 'NOT met'})")
    if args.kernels:
        print(f"\nslowest kernels to compile (own seconds, cold first call, load {os.getloadavg()[0]:.2f}):")
        for name in args.only or ENTRY_POINTS:
            print_kernels(name, ENTRY_POINTS[name], args.kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
