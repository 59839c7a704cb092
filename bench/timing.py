"""Timing helper shared by the benchmark scripts (run them as `python bench/<name>.py`, which puts bench/ on sys.path)."""
import time


def best(f, repeat=3):
    "Smallest wall time of `repeat` calls of `f()`, in seconds (warm up separately where compilation matters)."
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)
