"""Benchmark `isocal calibrate` on real files, as a user runs it, against the I/O floor (issue 16, part 1).

Run from the repository root:

    .venv/bin/python bench/cli.py [--quick] [--sizes 2000000 10000000] [--methods isotonic ivap cvap] [--repeat 1]

Data: GaussianNB log-odds scores of `make_classification` samples (10 features, model fitted on 100,000 other rows)
with their labels, written once as a CSV file `score,label` (shortest round-trip float text) under `--dir`.

Each command runs in a fresh process, as a user would run it:
- the I/O floor: `python -c` that reads the file with pyarrow's CSV reader and writes two float columns back with
  pyarrow's CSV writer;
- `isocal calibrate FILE --method M --out OUT` for every method, by the `isocal` script's code (`console_main`) in
  `python -c` (the Numba cache is warmed first by one run on a small file, so the times are those of a user's second
  and later runs).

Reported per size and command: wall time (best of `--repeat`), ratio to the floor (target <= 2.5), the child's CPU
time (user + system, from GNU `/usr/bin/time`; above the wall time when it used more than one core), its peak RSS,
and the memory beyond a tiny run's RSS in arrays of n float64 (target <= 6 for isocal: the 2 parsed columns plus <= 4
arrays of n). The repeats take the commands in turn (floor, then each method, then the floor again, ...), so a change
of load during the run affects the floor and isocal alike. Other work on the machine changes the times, so the
1-minute load average is printed on every row (taken when that size's runs end) and before and after the run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATIO_TARGET = 2.5
ARRAYS_TARGET = 6  # the two parsed columns plus at most four arrays of n
FLOOR_CODE = ("import sys, pyarrow as pa, pyarrow.csv as c; t = c.read_csv(sys.argv[1]); s = t.column('score'); "
              "c.write_csv(pa.table({'score': s, 'probability': s}), sys.argv[2])")
TIME = "/usr/bin/time"  # GNU time: %M is the peak RSS of the command in KiB
ISOCAL_CODE = "import sys; from isocal.cli import console_main; sys.exit(console_main())"  # the `isocal` script's code


def make_scores(n: int, path: str) -> None:
    "Write `n` rows of GaussianNB scores with labels to the CSV file `path`."
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    from sklearn.datasets import make_classification
    from sklearn.naive_bayes import GaussianNB

    X, y = make_classification(n + 100_000, n_features=10, n_informative=5, random_state=0)
    model = GaussianNB().fit(X[n:], y[n:])
    joint = model.predict_joint_log_proba(X[:n])
    pa_csv.write_csv(pa.table({"score": joint[:, 1] - joint[:, 0], "label": y[:n].astype(np.int64)}), path)


def run(argv: list[str]) -> tuple[float, int, float]:
    """Wall time in seconds, peak RSS in bytes and CPU time (user + system) in seconds of a fresh process running
    `argv`; fails loudly on a non-zero exit."""
    # /usr/bin/time, not os.wait4 here: a child's ru_maxrss starts at its parent's peak, and this process is large.
    start = time.perf_counter()
    result = subprocess.run([TIME, "-f", "%M %U %S", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=ROOT, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"{argv} exited with {result.returncode}: {result.stderr}")
    kib, user, system = result.stderr.split()[-3:]
    return seconds, int(kib) * 1024, float(user) + float(system)


def best(runs: list[tuple[float, int, float]]) -> tuple[float, int, float]:
    "The fastest run's wall and CPU time, with the largest peak RSS of all the runs."
    fastest = min(runs)
    return fastest[0], max(m for _, m, _ in runs), fastest[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (100,000 and 300,000 rows)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000_000, 10_000_000])
    parser.add_argument("--methods", nargs="+", default=["isotonic", "ivap", "cvap"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "isocal-bench-cli"))
    args = parser.parse_args()
    sizes = [100_000, 300_000] if args.quick else args.sizes
    os.makedirs(args.dir, exist_ok=True)
    python = sys.executable
    out = os.path.join(args.dir, "out.csv")

    tiny = os.path.join(args.dir, "scores_1000.csv")
    if not os.path.exists(tiny):
        make_scores(1000, tiny)
    base_rss = {}
    for method in args.methods:
        tiny_run = [python, "-c", ISOCAL_CODE, "calibrate", tiny, "--method", method, "--out", out]
        run(tiny_run)                           # warms the Numba cache (a run that compiles has a larger RSS)
        base_rss[method] = run(tiny_run)[1]     # the RSS of the imports
    base_rss["floor"] = run([python, "-c", FLOOR_CODE, tiny, out])[1]

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    header = (f"{'rows':>10}  {'command':<16} {'time [s]':>9} {'x floor':>8} {'cpu [s]':>8} {'peak RSS [MB]':>14} "
              f"{'arrays of n':>12} {'load':>5}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        path = os.path.join(args.dir, f"scores_{n}.csv")
        if not os.path.exists(path):
            make_scores(n, path)
        commands = {"I/O floor": [python, "-c", FLOOR_CODE, path, out]}
        for method in args.methods:
            commands[f"isocal {method}"] = [python, "-c", ISOCAL_CODE, "calibrate", path, "--method", method,
                                            "--out", out]
        runs = {name: [] for name in commands}
        for _ in range(args.repeat):  # in turn, so that a change of load meets every command
            for name, argv in commands.items():
                runs[name].append(run(argv))
        load = os.getloadavg()[0]
        floor = best(runs["I/O floor"])[0]
        for name, command_runs in runs.items():
            seconds, rss, cpu = best(command_runs)
            base = base_rss["floor" if name == "I/O floor" else name.split()[-1]]
            print(f"{n:>10}  {name:<16} {seconds:>9.2f} {seconds / floor:>8.2f} {cpu:>8.2f} {rss / 1e6:>14.0f} "
                  f"{(rss - base) / (8 * n):>12.1f} {load:>5.2f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"targets: time <= {RATIO_TARGET}x the floor; isocal memory <= {ARRAYS_TARGET} arrays of n beyond a "
          f"1000-row run (2 parsed columns + 4)")
    os.remove(out)


if __name__ == "__main__":
    main()
