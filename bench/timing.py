"""Timing and memory helpers shared by the benchmark scripts (run them as `python bench/<name>.py`, which puts bench/ on
sys.path).

Memory convention: in-process measurements report the traced peak (`tracemalloc`, which sees NumPy's buffers and,
with the Numba installed here, the arrays its runtime allocates inside jitted functions) of one call, above the traced
memory just before it, in "arrays of n" (bytes / 8n, n the problem size) and MB. The peak is measured in a separate,
untimed call, so tracing never slows a timed one. Measurements of fresh processes report their peak RSS instead.
"""
import gc
import os
import shutil
import subprocess
import tempfile
import time
import tracemalloc

TIME = "/usr/bin/time"  # GNU time: %M is the peak RSS of the command it runs, in KiB


def best(f, repeat=3):
    "Smallest wall time of `repeat` calls of `f()`, in seconds (warm up separately where compilation matters)."
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def peak_bytes(f):
    """Traced peak memory of one call of `f()` above the traced memory just before it, in bytes. What `f` returns is
    alive at the end of the call, so it is counted. Nests: under an enclosing trace the peak is reset, not restarted."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = f()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if started:
            tracemalloc.stop()
    del out
    return peak - base


def best_and_peak(f, repeat=3):
    "(smallest wall time of `repeat` untraced calls of `f()` in seconds, traced peak bytes of one more call)."
    return best(f, repeat), peak_bytes(f)


def arrays(peak, n):
    "`peak` bytes in arrays of n float64 (8n bytes each)."
    return peak / (8 * n)


def run_peak_rss(argv, **kwargs):
    """`subprocess.run(argv, **kwargs)` under GNU time: (the CompletedProcess, the command's peak RSS in bytes, or
    None without /usr/bin/time). Not `os.wait4`: a child's ru_maxrss starts at its parent's peak, which can be large."""
    if not shutil.which(TIME):
        return subprocess.run(argv, **kwargs), None
    fd, path = tempfile.mkstemp(prefix="isocal-bench-rss-")
    os.close(fd)
    try:
        out = subprocess.run([TIME, "-f", "%M", "-o", path, *argv], **kwargs)
        with open(path) as f:
            last = f.read().split()
        rss = int(last[-1]) * 1024 if last and last[-1].isdigit() else None
    finally:
        os.remove(path)
    return out, rss
