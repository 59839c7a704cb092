"""Benchmark isocal.distributed.fit_isotonic_dask on a LocalCluster against single-machine fit_staircase.

Run from the repository root:

    .venv/bin/python bench/distributed.py [--quick] [--n 1e8] [--single-n 2e7] [--memory-limit 1.2GiB]
                                          [--partition 1e6] [--shuffle p2p] [--loss squared] [--json out.json]

`--loss pseudohuber` (PseudoHuber(1)), `logcosh`, `lp` (Lp(1.5)) or `quantile` (Quantile(0.5)) runs sections a and b
for a loss without a closed-form block minimiser, fitted by threshold decomposition over the partitions
(isocal.distributed_convex); section c (summaries) is the squared loss's and is skipped then.

Sections:

a. Scale: n float64 (x, y) points (default 1e8 = 1.6 GB) on a LocalCluster of 2 worker processes (1 thread each,
   loopback) whose per-worker memory limit is below the data size. The data is generated inside Dask from a seed,
   partition by partition (x ~ N(0, 1), y ~ Bernoulli(sigmoid(2x))), and never materialised on the client. Reports
   wall time, throughput and the peak resident memory of each worker process (polled every 0.25 s).
b. Throughput ratio: the same fit on the largest n that fits comfortably in one process, on the cluster and with
   `fit_staircase` on NumPy arrays (data generated beforehand, not timed; best of 3 after a warm-up). The cluster's
   time includes generating the data on the workers (three passes: validation, Dask's quantiles, the shuffle).
   Memory, each in one more, untimed run: the peak resident memory of each worker (polled as in a, next to its
   resident memory before that run), and `fit_staircase`'s traced peak (tracemalloc, bench/timing.py) in arrays of n
   float64 (8n bytes) and MB.
c. Summary size vs n for calibration-like data: units per partition summary, units of the root summary, final steps.
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time

import sys

# This file is called distributed.py: keep its directory off sys.path so `import distributed` finds the package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402

sys.path.insert(0, _HERE)
from timing import arrays, peak_bytes  # noqa: E402  (bench/timing.py; bench/ then leaves the path again)
sys.path.remove(_HERE)


def calibration_block(block_info=None, seed=0, column='x'):
    "One partition of (x, y): scores x ~ N(0, 1), labels y ~ Bernoulli(sigmoid(2x)), reproducible from the seed."
    (start, stop), = block_info[None]['array-location']
    rng = np.random.default_rng([seed, start])
    x = rng.standard_normal(stop - start)
    if column == 'x': return x
    return (rng.random(stop - start) < 1.0 / (1.0 + np.exp(-2.0 * x))).astype(np.float64)


def dask_data(n, partition, seed=0):
    import dask.array as da
    chunks = ((partition,) * (n // partition) + ((n % partition,) if n % partition else ()),)
    x = da.map_blocks(calibration_block, chunks=chunks, dtype=np.float64, seed=seed, column='x')
    y = da.map_blocks(calibration_block, chunks=chunks, dtype=np.float64, seed=seed, column='y')
    return x, y


def numpy_data(n, partition, seed=0):
    x, y = np.empty(n), np.empty(n)
    for start in range(0, n, partition):
        stop = min(n, start + partition)
        info = {None: {'array-location': [(start, stop)]}}
        x[start:stop] = calibration_block(info, seed, 'x')
        y[start:stop] = calibration_block(info, seed, 'y')
    return x, y


class PeakRSS:
    "Poll each worker's resident memory in a background thread; `.peaks` maps worker address to the maximum seen."
    def __init__(self, client, every=0.25):
        self.client, self.every, self.peaks, self._stop = client, every, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil
        while not self._stop.is_set():
            try:
                for addr, rss in self.client.run(lambda: psutil.Process().memory_info().rss).items():
                    self.peaks[addr] = max(self.peaks.get(addr, 0), rss)
            except Exception:
                pass          # a worker restarting or the cluster closing: skip this sample
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def best_of(f, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def summary_sizes(ns, partition):
    "Units per partition summary, units of the root summary and final steps, computed with the library's pieces."
    from isocal.distributed import _final_blocks, _merge_summaries, _partition_summary, _tree_reduce
    rows = []
    for n in ns:
        x, y = numpy_data(n, partition)
        order = np.argsort(x)
        xs, ys = x[order], y[order]
        parts = [_partition_summary(xs[i:i + partition], ys[i:i + partition], None, 1.0)
                 for i in range(0, n, partition)]
        root = _tree_reduce(parts, lambda a, b: _merge_summaries(a, b, 1.0))
        steps = len(_final_blocks(root, 1.0)[0])
        rows.append(dict(n=n, partitions=len(parts), units_per_partition=float(np.mean([p[0].shape[1] for p in parts])),
                         root_units=root[0].shape[1], steps=steps, root_bytes=root[0].nbytes))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='small sizes (n = 2e6, single n = 1e6)')
    ap.add_argument('--n', type=float, default=1e8)
    ap.add_argument('--single-n', type=float, default=2e7)
    ap.add_argument('--partition', type=float, default=1e6)
    ap.add_argument('--memory-limit', default='1.2GiB')
    ap.add_argument('--shuffle', default='p2p')
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--skip-scale', action='store_true', help='skip section a')
    ap.add_argument('--loss', default='squared', choices=['squared', 'pseudohuber', 'logcosh', 'lp', 'quantile'])
    ap.add_argument('--json')
    args = ap.parse_args()
    if args.quick: args.n, args.single_n, args.partition, args.repeat = 2e6, 1e6, 1e5, 2
    n, single_n, partition = int(args.n), int(args.single_n), int(args.partition)

    import dask
    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster
    from isocal.distributed import fit_isotonic_dask
    from isocal.fit import fit_staircase
    from isocal.convex import Lp, PseudoHuber, Quantile
    loss = {'squared': 'squared', 'pseudohuber': PseudoHuber(1.0), 'logcosh': 'logcosh', 'lp': Lp(1.5),
            'quantile': Quantile(0.5)}[args.loss]

    report = {'n': n, 'single_n': single_n, 'partition': partition, 'memory_limit': args.memory_limit,
              'shuffle': args.shuffle, 'loss': str(loss)}
    data_bytes = 16 * n
    print(f"machine: {os.cpu_count()} cores; LocalCluster: 2 worker processes x 1 thread, memory_limit "
          f"{args.memory_limit} each; shuffle={args.shuffle}; partitions of {partition:,} rows; loss {loss}")
    with dask.config.set({'distributed.worker.memory.target': 0.5, 'distributed.worker.memory.spill': 0.6}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host='127.0.0.1',
                         dashboard_address=None, memory_limit=args.memory_limit, silence_logs=40,
                         local_directory=os.environ.get('TMPDIR', '/tmp')) as cluster, Client(cluster) as client:
        x, y = dask_data(100_000, 10_000)
        fit_isotonic_dask(x, y, shuffle_method=args.shuffle, loss=loss)      # warm-up: imports and Numba cache on the workers

        if not args.skip_scale:
            if data_bytes <= parse_bytes(args.memory_limit):
                print("note: the data fit in one worker's memory limit (only the full run tests the opposite)")
            x, y = dask_data(n, partition)
            with PeakRSS(client) as mem:
                t = time.perf_counter()
                st = fit_isotonic_dask(x, y, shuffle_method=args.shuffle, loss=loss)
                wall = time.perf_counter() - t
            peaks = sorted(mem.peaks.values())
            report['scale'] = dict(wall=wall, steps=st.n_steps, peak_rss=peaks, data_bytes=data_bytes)
            print(f"\na. n = {n:.0e} ({format_bytes(data_bytes)} of x, y): wall {wall:.1f} s, "
                  f"{n / wall / 1e6:.2f} M points/s, {st.n_steps} steps; peak RSS per worker: "
                  + ', '.join(format_bytes(p) for p in peaks) + f" (limit {args.memory_limit})")

        x, y = dask_data(single_n, partition)
        t_dask, st_dask = best_of(lambda: fit_isotonic_dask(x, y, shuffle_method=args.shuffle, loss=loss), args.repeat)
        import psutil
        rss_before = sorted(client.run(lambda: psutil.Process().memory_info().rss).values())
        with PeakRSS(client) as mem:                              # one more run, untimed, polled
            fit_isotonic_dask(x, y, shuffle_method=args.shuffle, loss=loss)
        dask_peaks = sorted(mem.peaks.values())
    xs, ys = numpy_data(single_n, partition)
    fit_staircase(xs[:1000], ys[:1000], loss=loss)
    t_single, st_single = best_of(lambda: fit_staircase(xs, ys, loss=loss), args.repeat)
    p_single = peak_bytes(lambda: fit_staircase(xs, ys, loss=loss))
    assert st_single.n_steps == st_dask.n_steps and np.array_equal(st_single.x_lo, st_dask.x_lo)
    assert np.allclose(st_single.levels, st_dask.levels, rtol=1e-12, atol=0)
    report['throughput'] = dict(n=single_n, dask=t_dask, single=t_single, ratio=t_single / t_dask,
                                dask_peak_rss=dask_peaks, dask_rss_before=rss_before, single_peak=p_single)
    print(f"\nb. n = {single_n:.0e}: cluster {t_dask:.2f} s ({single_n / t_dask / 1e6:.2f} M/s; peak RSS per worker "
          + ', '.join(format_bytes(p) for p in dask_peaks) + " from " + ', '.join(format_bytes(p) for p in rss_before)
          + f" before), fit_staircase {t_single:.2f} s ({single_n / t_single / 1e6:.2f} M/s; traced peak "
          f"{arrays(p_single, single_n):.2f} arrays of n, {format_bytes(p_single)}); throughput ratio cluster/single = "
          f"{t_single / t_dask:.3f}; same staircase ({st_dask.n_steps} steps)")
    del xs, ys

    ns = [10**k for k in range(4, 8 if not args.quick else 7)] if args.loss == 'squared' else []
    rows = summary_sizes(ns, min(partition, 10**6)) if ns else []
    report['summaries'] = rows
    if rows: print("\nc. summary size vs n (calibration-like data, partitions of "
                   f"{min(partition, 10**6):,} rows)\n{'n':>10} {'partitions':>10} {'units/partition':>16} "
                   f"{'root units':>11} {'steps':>6} {'root bytes':>11}  steps/n^(1/3)")
    for r in rows:
        print(f"{r['n']:>10.0e} {r['partitions']:>10} {r['units_per_partition']:>16.1f} {r['root_units']:>11} "
              f"{r['steps']:>6} {r['root_bytes']:>11}  {r['steps'] / r['n'] ** (1 / 3):.2f}")
    if args.json:                                # written to a temporary file, then renamed into place
        tmp = f'{args.json}.{os.getpid()}.tmp'
        with open(tmp, 'w') as f: json.dump(report, f, indent=1)
        os.replace(tmp, args.json)


if __name__ == '__main__':
    main()
