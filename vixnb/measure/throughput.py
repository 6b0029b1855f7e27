"""Inference throughput (images/s) by the `favor` paper's memory-fit batch search on a GPU; a fixed-batch
timing, labelled as such, on a CPU."""
from __future__ import annotations

import copy
import math
import statistics

import torch

from . import timing
from ..models.counting import input_size_of
from .flops import budget_status, estimate
from .memory import forward
from .runtime import (GB, MB, as_dtype, autocast_for, dtype_name, execution_path, is_oom, local_rng, oom_record,
                      provenance, release_memory, resolve_device)
from ..validate import checked


def fit_line(xs, ys):
    """Least-squares line: (slope, intercept); a flat line through the mean when the xs do not vary."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    if len(xs) < 2:
        return 0.0, (ys[0] if ys else 0.0)
    if len(set(xs)) == 1:
        return 0.0, statistics.fmean(ys)
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, intercept


@checked("min_batch")
def batch_candidates(probes, total_bytes, *, margins=(250 * MB, 100 * MB, 0), max_batch=None, min_batch=1):
    """The favor paper's candidate batch sizes from memory probes {batch: peak bytes}: fit a line through the
    probes, take the largest batch that fits under ``total_bytes`` minus each margin, and try the power of two
    at or below each and those of 2/i x the largest probed batch (i = 1..8), capped at ``max_batch``."""
    slope, intercept = fit_line(list(probes), list(probes.values()))
    largest = max(probes)
    fits = [int((total_bytes - m - intercept) / slope) for m in margins] if slope > 0 else [largest]
    raw = [f for f in fits if f >= 1] + [max(1, 2 * largest // i) for i in range(1, 9)]
    if max_batch:
        raw = [min(b, max_batch) for b in raw]
    cands = {2 ** int(math.floor(math.log2(b))) for b in raw}
    return sorted(b for b in cands if b >= min_batch)


@checked("iters", "warmup", "max_batch", "max_candidates", "cpu_batch")
def throughput(model, *, device=None, path="fused", dtype="fp32", iters=None, warmup=3, max_batch=4096,
               max_candidates=4, cpu_batch=8, input_size=None, cpu_budget_gb=None, cpu_budget_gflop=None):
    """Inference throughput (images/s).

    GPU, the favor paper's protocol: probe the peak memory of a no-grad forward at doubling batch sizes (4, 8,
    ...) while the line fitted through the probes predicts the next doubling fits (total memory - 0.5 GB)
    and the batch is at most ``max_batch``; then time ``iters`` (default 100) forwards with CUDA events at the
    ``max_candidates`` largest candidate batch sizes (``batch_candidates``) and report the best images/s and
    its batch size. CPU: a fixed batch of ``cpu_batch``, ``iters`` (default 3) forwards timed with
    ``time.perf_counter``, labelled as not the favor paper's protocol."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = input_size_of(model, input_size)
    forward_context = autocast_for(device, dt)
    record = {"measurement": "throughput", "path": path, "dtype": dtype_name(dt), "device": str(device),
              "timing": timing.timing_label(device)}
    work = copy.deepcopy(model).eval()
    with execution_path(work, path), local_rng(device):
        if device.type != "cuda":
            return _cpu_throughput(work, record, size=size, cpu_batch=cpu_batch, iters=iters or 3,
                                   forward_context=forward_context, device=device, dt=dt,
                                   budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
        iters = iters or 100
        record.update(protocol=f"the favor paper: memory-fit batch search, {iters} no-grad forwards per batch size "
                      "timed with CUDA events, best images/s", iters=iters)
        work.to(device)
        total = torch.cuda.get_device_properties(device).total_memory
        probes = _probe_memory(work, size, device, forward_context, total=total, max_batch=max_batch)
        if not probes:
            work = None
            release_memory(device)
            return {**record, **oom_record(RuntimeError("out of memory at batch 4")),
                    "provenance": provenance(device, dtype=dt, batch_size=4)}
        record["probes"] = [{"batch_size": b, "peak_allocated_gb": v / GB} for b, v in sorted(probes.items())]
        cands = batch_candidates(probes, total, max_batch=max_batch) if len(probes) >= 2 else sorted(probes)
        tried = []
        for b in cands[-max_candidates:]:
            x = None
            try:
                x = torch.randn(b, *size, device=device)
                times = timing.time_ms(lambda x=x: forward(work, x, forward_context), device, warmup=warmup,
                                       iters=iters)
                tried.append({"batch_size": b, "status": "ok", "images_per_s": b * iters * 1e3 / sum(times)})
            except Exception as err:  # noqa: BLE001
                if not is_oom(err):
                    raise
                tried.append({"batch_size": b, **oom_record(err)})
                break
            finally:
                x = None
                release_memory(device)
        record["tried"] = tried
        ok = [t for t in tried if t["status"] == "ok"]
        if ok:
            best = max(ok, key=lambda t: t["images_per_s"])
            record.update(status="ok", images_per_s=best["images_per_s"], batch_size=best["batch_size"])
        else:
            record.update(status="oom", images_per_s=None, batch_size=None)
        record["provenance"] = provenance(device, dtype=dt, batch_size=record["batch_size"])
    work = None
    release_memory(device)
    return record


def _cpu_throughput(work, record, *, size, cpu_batch, iters, forward_context, device, dt, budget_gb, budget_gflop):
    record.update(protocol=f"CPU: fixed batch {cpu_batch}, {iters} no-grad forwards after 1 warm-up "
                  "(not the favor paper's GPU protocol)", batch_size=cpu_batch, iters=iters,
                  provenance=provenance(device, dtype=dt, batch_size=cpu_batch))
    est = estimate(work, lambda d: torch.zeros(cpu_batch, *size, device=d), training=False)
    skip = budget_status(est, budget_gb=budget_gb, budget_gflop=budget_gflop)
    if skip:
        return {**record, "status": skip}
    try:
        x = torch.randn(cpu_batch, *size)
        times = timing.time_ms(lambda: forward(work, x, forward_context), device, warmup=1, iters=iters)
    except Exception as err:  # noqa: BLE001
        if not is_oom(err):
            raise
        return {**record, **oom_record(err), "images_per_s": None}
    record.update(status="ok (cpu timing)", images_per_s=cpu_batch * 1e3 / statistics.median(times),
                  ms_per_batch=statistics.median(times))
    return record


def _probe_memory(work, size, device, forward_context, *, total, max_batch):
    """{batch: peak allocated bytes} of one no-grad forward at doubling batch sizes from 4, while the line
    through the probes predicts that the next doubling fits (total - 0.5 GB); stops at out of memory."""
    probes, bs = {}, 4
    x = None
    try:
        while bs <= max_batch:
            x = torch.randn(bs, *size, device=device)
            release_memory(device)
            torch.cuda.reset_peak_memory_stats(device)
            forward(work, x, forward_context)
            probes[bs] = torch.cuda.max_memory_allocated(device)
            x = None
            if len(probes) >= 2:
                slope, intercept = fit_line(list(probes), list(probes.values()))
                if slope * 2 * bs + intercept > total - 500 * MB:
                    break
            bs *= 2
    except Exception as err:  # noqa: BLE001
        if not is_oom(err):
            raise
        x = None
        release_memory(device)
    return probes
