"""Benchmark of isocal.online.OnlineIsotonic (issue 4): run `python bench/online.py [n]`.

* `extend` over n samples (squared loss) vs offline `isotonic_regression` on the same data, same process: ratio;
* `add` one sample at a time: per-call cost, Python call overhead included;
* peak traced memory while streaming n samples in chunks (few blocks): O(blocks), not O(n);
* a loss without a closed-form merge (pseudo-Huber): the cost of a join grows with the joined block (Remark 6),
  measured as time per sample and samples re-read per sample at growing n.

Next to each time, its peak memory: traced by tracemalloc in one more, untimed run (bench/timing.py), in arrays of n
float64 (8n bytes; n the samples of that run) and MB; what the run returns or keeps (the stream) is counted.
"""
import sys
import time

import numpy as np

from isocal.convex import PseudoHuber
from isocal.online import OnlineIsotonic
from isocal.pava import isotonic_regression
from timing import arrays, best_and_peak, peak_bytes


def main(n=10_000_000):
    rng = np.random.default_rng(0)
    y = np.cumsum(rng.normal(0, 1, n)) * 0.01 + rng.normal(0, 1, n)       # monotone-ish trend + noise
    OnlineIsotonic().extend(y[:1000]); isotonic_regression(y[:1000])      # compile / load caches
    mem = lambda peak, k: f"{arrays(peak, k):.2f} arrays of n, {peak / 1e6:.3g} MB"
    t_off, p_off = best_and_peak(lambda: isotonic_regression(y))
    t_on, p_on = best_and_peak(lambda: OnlineIsotonic().extend(y))
    s = OnlineIsotonic().extend(y)
    # the same fit, up to rounding: the stream pools block means (overflow-safe), the batch pools sums
    np.testing.assert_allclose(s.fitted_values(), isotonic_regression(y).x, rtol=1e-12, atol=1e-12)
    print(f"extend, n={n:.0e}: {n / t_on / 1e6:.1f} M samples/s ({t_on:.3f} s, peak {mem(p_on, n)}); offline "
          f"isotonic_regression {n / t_off / 1e6:.1f} M samples/s ({t_off:.3f} s, peak {mem(p_off, n)}); ratio "
          f"online/offline throughput {t_off / t_on:.2f}")

    m = 1_000_000
    vals = rng.normal(size=m).tolist()
    for label, kw in (("add(y)", {}), ("add(y, x=...)", {"x": True})):
        def add_all():
            stream = OnlineIsotonic()
            add = stream.add
            if kw:
                for i, v in enumerate(vals): add(v, 1.0, x=float(i))
            else:
                for v in vals: add(v)
            return stream
        t0 = time.perf_counter()
        stream = add_all()
        per = (time.perf_counter() - t0) / m
        peak = peak_bytes(add_all)
        print(f"{label}: {per * 1e6:.2f} µs per call over {m:.0e} calls (loop overhead included), {stream.n_blocks} "
              f"blocks; peak {mem(peak, m)} (n = {m:.0e} calls)")

    chunk = 100_000
    gen = np.random.default_rng(1)
    streams = []

    def stream_all():
        stream = OnlineIsotonic()
        for _ in range(n // chunk):
            stream.extend(gen.normal(0, 1, chunk))    # iid noise around a constant: few blocks
        streams.append(stream)

    peak = peak_bytes(stream_all)
    stream = streams[0]
    state = stream._F.nbytes + stream._starts.nbytes
    print(f"memory, n={n:.0e} streamed in chunks of {chunk:.0e}: {stream.n_blocks} blocks, state {state / 1e3:.1f} kB, "
          f"peak traced {peak / 1e6:.2f} MB (one chunk of input = {chunk * 8 / 1e6:.1f} MB; n samples would be "
          f"{n * 8 / 1e6:.0f} MB)")

    for k in (1_000, 3_000, 10_000, 30_000):
        yk = np.linspace(0, 3, k) + np.random.default_rng(2).normal(0, 1, k)
        def add_all():
            stream = OnlineIsotonic(PseudoHuber(1.0))
            for v in yk.tolist(): stream.add(v)
            return stream
        t0 = time.perf_counter()
        stream = add_all()
        t = time.perf_counter() - t0
        peak = peak_bytes(add_all)
        print(f"pseudo-Huber add, n={k:.0e}: {t / k * 1e6:.0f} µs per sample, {stream.n_merges / k:.2f} joins per "
              f"sample, {stream.n_blocks} blocks (a join re-solves the joined block: O(block size)); peak "
              f"{mem(peak, k)}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000)
