"""Timing of repeated calls (CUDA events on a GPU, ``time.perf_counter`` on a CPU) and the process's
resident memory (the CPU stand-in for CUDA's memory statistics)."""
import os
import resource
import time

import torch


def time_ms(fn, device, *, warmup=1, iters=3):
    """Per-call times in ms of ``iters`` calls of ``fn`` after ``warmup`` untimed ones: CUDA events on a GPU
    (each call synchronised), ``time.perf_counter`` on a CPU."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def timing_label(device):
    return "CUDA events" if device.type == "cuda" else "CPU time.perf_counter (not comparable to GPU figures)"


def resident_bytes():
    """This process's resident set size now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_resident_bytes():
    """This process's peak resident set size so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
