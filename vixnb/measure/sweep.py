"""The token-mixer scaling sweep: forward + backward time and memory of every token mixer against the number
of tokens (fused and materialised softmax included), and ``crossovers``, where a mechanism becomes cheaper
than softmax attention."""
from __future__ import annotations

import math
import statistics
import time

import torch

from . import timing
from ..layers import build, list_mixers
from ..models import paper_mixers
from .flops import budget_status, count_ops, estimate
from .runtime import (MB, as_dtype, autocast_for, dtype_name, is_oom, local_rng, oom_record, provenance,
                      release_memory, resolve_device)
from .storage import jsonable
from ..validate import checked

MATERIALISED_SOFTMAX = "softmax (materialised)"  # the reference of ``vixnb bench mixers`` (vixnb.bench)
FUSED_SOFTMAX = "softmax (fused)"
SHAPE_METRICS = ("gflops", "estimate_gb")


def sweep_mechanisms(include_materialized=True):
    """(label, mixer, options) of every mixer in the paper configuration; the softmax-type mixers twice
    (fused and materialised) when ``include_materialized``."""
    paper = {mixer: opts for mixer, opts in paper_mixers().values()}
    out = []
    for mixer in list_mixers():
        opts = dict(paper.get(mixer, {}))
        if mixer == "mlp":
            opts = {"expansion_factor": 1}
        if mixer in ("softmax", "shaped"):
            out.append((f"{mixer} (fused)", mixer, opts))
            if include_materialized:
                out.append((f"{mixer} (materialised)", mixer, {**opts, "fused": False}))
        elif mixer == "nystrom":
            out.append((mixer, mixer, opts))
            if include_materialized:  # the authors' code forms the three softmax matrices explicitly
                out.append(("nystrom (unfused)", mixer, {**opts, "fused": False}))
        else:
            out.append((mixer, mixer, opts))
    return out


def _build_mixer(mixer, options, *, on, dim, heads, dim_head, n):
    """The mixer with its weights drawn from seed 0 (the caller's RNG state kept)."""
    with local_rng(on if torch.device(on).type == "cuda" else "cpu"), torch.device(on):
        return build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=n, **options)


@checked("batch", "warmup", "steps")
def sweep_row(label, mixer, options, n, *, dim, heads, dim_head, batch, device, dt, backward, warmup, steps,
              budget_gb, budget_gflop, cpu_memory=False, compile=False):
    """Time and memory of ``steps`` steps (after ``warmup``) of one mechanism at ``n`` tokens: one row of
    ``scaling_sweep``, and of ``vixnb bench mixers``. Memory (``peak_mb``, what it is in ``memory``): on CUDA
    the peak allocated during the timed steps less what was allocated before them; on a CPU, with
    ``cpu_memory``, the growth of the process's peak resident set size over its size before the first step
    (meaningful only in a fresh process, see ``vixnb.bench``), else not measured (``estimate_gb`` is the
    shape-based estimate). ``compile``: time the mixer through ``torch.compile`` (True, or a mode name). The
    CPU budget guard (``budget_gb``, ``budget_gflop``) skips a step before it runs. The caller's RNG state
    is kept (weights and inputs come from seed 0)."""
    row = {"mechanism": label, "kind": mixer, "options": dict(options), "tokens": n, "batch": batch, "dim": dim,
           "heads": heads, "dim_head": dim_head, "device": str(device), "dtype": dtype_name(dt),
           "mode": "forward+backward" if backward else "forward", "ms": None, "ms_min": None, "peak_mb": None,
           "peak_reserved_mb": None, "timing": timing.timing_label(device), "compiled": compile}
    shape = dict(dim=dim, heads=heads, dim_head=dim_head, n=n)
    try:  # count and estimate from shapes, without allocating (a 16384-token MLP has 2 GB of weights)
        shapes = _build_mixer(mixer, options, on="meta", **shape)
    except (NotImplementedError, RuntimeError):
        shapes = _build_mixer(mixer, options, on="cpu", **shape)
    est = estimate(shapes, lambda d: torch.zeros(batch, n, dim, device=d), training=backward, optimizer_states=0)
    by_op, costs = count_ops(shapes, lambda d: torch.zeros(1, n, dim, device=d))
    row["params"] = sum(p.numel() for p in shapes.parameters())
    shapes = None
    row["gflops"] = (sum(by_op.values()) + sum(costs.extra.values())) * batch / 1e9  # forward, flops convention
    row["estimate_gb"] = est["gb"]
    if device.type == "cuda":
        row["memory"] = "cuda max_memory_allocated during the timed steps, less what was allocated before them"
    elif cpu_memory:
        row["memory"] = "cpu peak RSS growth (fresh process)"
    else:
        row["memory"] = "not measured on cpu (estimate_gb: shape-based estimate)"
    if device.type == "cpu":
        skip = budget_status(est, budget_gb=budget_gb, budget_gflop=budget_gflop)
        if skip:
            row["status"] = skip
            return row
    forward_context = autocast_for(device, dt)
    x = grad = module = None
    try:
        release_memory(device)
        module = _build_mixer(mixer, options, on=device, **shape).train(backward)
        if compile:  # the same module through torch.compile (compiled during the untimed warm-up step)
            module = torch.compile(module, mode=None if compile in (True, "default") else compile)
        with local_rng(device):
            x = torch.randn(batch, n, dim, device=device, requires_grad=backward)
            grad = torch.randn(batch, n, dim, device=device) if backward else None

        def clear_grads():
            x.grad = None
            module.zero_grad(set_to_none=True)

        def step():
            if backward:
                clear_grads()
                with forward_context():
                    out = module(x)
                out.backward(grad.to(out.dtype))
            else:
                with torch.no_grad(), forward_context():
                    module(x)

        with local_rng(device):  # dropout, feature redraws: from seed 0, not the caller's generator
            times = _time_steps(step, clear_grads, row, device, warmup=warmup, steps=steps, cpu_memory=cpu_memory)
        row["ms"], row["ms_min"] = statistics.median(times), min(times)
    except Exception as err:  # noqa: BLE001
        if not is_oom(err):
            raise
        row.update(oom_record(err))
    finally:
        x = grad = module = None
        release_memory(device)
    return row


def _time_steps(step, clear_grads, row, device, *, warmup, steps, cpu_memory):
    """Time ``steps`` calls of ``step`` after ``warmup``; set the row's memory figures and status."""
    if device.type == "cuda":
        step()  # warm-up outside the peak window
        clear_grads()
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)  # weights, input and output gradient
        torch.cuda.reset_peak_memory_stats(device)
        times = timing.time_ms(step, device, warmup=max(warmup - 1, 0), iters=steps)
        row["peak_mb"] = (torch.cuda.max_memory_allocated(device) - base) / MB
        row["peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / MB
        row["status"] = "ok"
    elif cpu_memory:
        resident = timing.resident_bytes()
        times = timing.time_ms(step, device, warmup=warmup, iters=steps)
        row["peak_mb"] = max(0, timing.peak_resident_bytes() - resident) / MB
        row["status"] = "ok (cpu: time, and peak RSS growth as memory)"
    else:
        times = timing.time_ms(step, device, warmup=warmup, iters=steps)
        row["status"] = "ok (cpu: time only; memory is the shape-based estimate)"
    return times


@checked("tokens", "dim", "heads", "dim_head", "batch", "warmup", "steps")
def scaling_sweep(mechanisms=None, tokens=(256, 1024, 4096, 16384), *, dim=128, heads=4, dim_head=32, batch=None,
                  device=None, dtype="fp32", include_materialized=True, backward=True, warmup=1, steps=3,
                  cpu_budget_gb=None, cpu_budget_gflop=None, progress=False):
    """Time and memory of every token mixer against the number of tokens: one row per (mechanism, tokens).

    ``mechanisms``: mixers or mechanism labels to include (default: every mixer of ``vixnb.layers``, with
    the ViX paper options; softmax and shaped attention both fused and materialised). Each row: mechanism,
    kind (the mixer's name), options, tokens, batch, device, dtype, mode, ``ms`` (median of ``steps`` after ``warmup``),
    ``peak_mb`` (CUDA: peak allocated during the timed steps minus what was allocated before them;
    ``None`` on a CPU), ``peak_reserved_mb``, ``gflops`` (forward, ``flops`` convention, whole batch),
    ``estimate_gb`` (shape-based upper bound), ``status`` ("ok", "oom", "skipped: ..."), provenance.
    ``batch`` defaults to 8 on a GPU, 1 on a CPU. ``progress`` prints one line per row as it is measured."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    batch = batch or (8 if device.type == "cuda" else 1)
    mechs = sweep_mechanisms(include_materialized)
    if mechanisms is not None:
        wanted = set(mechanisms)
        known = {m[0] for m in mechs} | {m[1] for m in mechs}
        unknown = wanted - known
        if unknown:
            raise ValueError(f"unknown mechanisms {sorted(unknown)}; choose from {sorted(known)}")
        mechs = [m for m in mechs if m[0] in wanted or m[1] in wanted]
    prov = provenance(device, dtype=dt, batch_size=batch)
    rows = []
    for label, mixer, options in mechs:
        for n in tokens:
            t0 = time.perf_counter()
            row = sweep_row(label, mixer, options, int(n), dim=dim, heads=heads, dim_head=dim_head, batch=batch,
                            device=device, dt=dt, backward=backward, warmup=warmup, steps=steps,
                            budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            row["provenance"] = prov
            rows.append(jsonable(row))
            if progress:
                print(f"{label:<24} {n:>6} tokens: {row['status']} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows


def metric_value(row, metric):
    """A row's value for a metric: a number, +inf when it ran out of memory, None when not measured
    (skipped or failed); shape-based metrics (``SHAPE_METRICS``) always have their value."""
    if row is None:
        return None
    if metric in SHAPE_METRICS:  # computed from shapes: valid whether or not the step ran
        v = row.get(metric)
        return float(v) if v is not None else None
    status = row.get("status") or "ok"
    if status == "oom":
        return math.inf
    if not status.startswith("ok"):  # skipped by the budget guard, or failed: not measured
        return None
    v = row.get(metric)
    return float(v) if v is not None else None


def crossovers(rows, *, references=(FUSED_SOFTMAX, MATERIALISED_SOFTMAX), metrics=("ms", "peak_mb", "gflops",
               "estimate_gb")):
    """Where each mechanism becomes cheaper than each reference, per metric.

    For every (mechanism, reference, metric) with values at two or more common token counts: ``cheaper_from``
    is the smallest measured token count from which the mechanism is cheaper (value < reference) at every
    larger measured count; ``crossover_tokens`` interpolates where the ratio mechanism/reference crosses 1,
    linearly in log(tokens) and log(ratio) between that count and the one before it (``None`` when it is
    cheaper at every measured size, when it never becomes cheaper, or when a value there is out of memory:
    an OOM counts as infinitely expensive); ``cheaper_at`` lists every measured count where it is cheaper.
    ``status``: "crosses", "cheaper at every measured size", "not cheaper up to N tokens" (never cheaper),
    "not cheaper at N tokens (cheaper only at ...)" (cheaper at small sizes only), or "insufficient data"."""
    by = {}
    for r in rows:
        by.setdefault(r["mechanism"], {})[int(r["tokens"])] = r
    out = []
    for ref in references:
        if ref not in by:
            continue
        for mech, pts in by.items():
            if mech == ref:
                continue
            for metric in metrics:
                grid = []
                for n in sorted(set(pts) & set(by[ref])):
                    a, b = metric_value(pts[n], metric), metric_value(by[ref][n], metric)
                    if a is None or b is None or (math.isinf(a) and math.isinf(b)) or b == 0:
                        continue
                    grid.append((n, a, b))
                out.append(_crossover(mech, ref, metric, grid))
    return out


def _crossover(mech, ref, metric, grid):
    """One ``crossovers`` entry from the (tokens, value, reference value) points both have."""
    res = {"mechanism": mech, "reference": ref, "metric": metric, "tokens": [g[0] for g in grid],
           "cheaper_at": [], "cheaper_from": None, "crossover_tokens": None}
    if len(grid) < 2:
        return {**res, "status": "insufficient data"}
    cheaper = [a < b for _, a, b in grid]
    res["cheaper_at"] = [g[0] for g, c in zip(grid, cheaper) if c]
    if all(cheaper):
        res.update(status="cheaper at every measured size", cheaper_from=grid[0][0])
    elif not cheaper[-1]:
        last = grid[-1][0]
        res.update(status=f"not cheaper up to {last} tokens" if not res["cheaper_at"] else
                   f"not cheaper at {last} tokens (cheaper only at {', '.join(map(str, res['cheaper_at']))})")
    else:
        i = max(j for j, c in enumerate(cheaper) if not c)  # last count where it is not cheaper
        (n0, a0, b0), (n1, a1, b1) = grid[i], grid[i + 1]
        res.update(status="crosses", cheaper_from=n1)
        if all(math.isfinite(v) and v > 0 for v in (a0, b0, a1, b1)):
            r0, r1 = math.log(a0 / b0), math.log(a1 / b1)
            t = r0 / (r0 - r1) if r0 != r1 else 0.0
            res["crossover_tokens"] = math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return res
