"""``vixnb bench mixers``: forward + backward time and memory of every token mixer against the materialised
softmax measured in the same run, and the aten operators one step of each dispatches."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..layers import build
from ..layers.nystrom import COMPILE_MODES
from ..measure import (FUSED_SOFTMAX, MATERIALISED_SOFTMAX, as_dtype, dtype_name, jsonable, local_rng, provenance,
                       sweep_mechanisms, sweep_row, torch_threads)
from ..validate import checked

REFERENCE = MATERIALISED_SOFTMAX


def compile_mode(compile):
    """``compile`` (False/None, True = "default", or a ``torch.compile`` mode) as a mode name, or None."""
    if compile in (None, False):
        return None
    mode = "default" if compile is True else compile
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={compile!r}: use one of {', '.join(COMPILE_MODES)}")
    return mode


@checked("tokens", "batch", "warmup", "steps", "threads")
def bench_mixer(label, mixer, options, *, device, dtype, tokens, dim, heads, dim_head, batch, warmup, steps,
                cpu_memory=False, threads=None, compile=False):
    """Forward + backward of one mechanism (``measure.sweep_row``, no CPU budget guard), with the operators
    one step dispatches (``dispatched_ops``; not counted through ``torch.compile``). ``threads``:
    ``torch.set_num_threads`` while it runs (the caller's count restored after)."""
    mode = compile_mode(compile)
    if mode == "reduce-overhead":  # CUDA graphs: the first calls run eagerly and record, later ones replay
        warmup = max(warmup, 3)
    with torch_threads(threads):
        row = sweep_row(label, mixer, options, tokens, dim=dim, heads=heads, dim_head=dim_head, batch=batch,
                        device=torch.device(device), dt=as_dtype(dtype), backward=True, warmup=warmup, steps=steps,
                        budget_gb=math.inf, budget_gflop=math.inf, cpu_memory=cpu_memory, compile=mode or False)
        if not mode and row.get("ms") is not None:
            row.update(dispatched_ops(mixer, options, device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads,
                                      dim_head=dim_head))
    return row


@checked("tokens")
def dispatched_ops(mixer, options, *, device, dtype, tokens, dim, heads, dim_head):
    """How many aten operators one forward + backward of the mixer dispatches (batch 1: the count does not
    depend on the batch), on ``device`` in ``dtype`` (autocast): ``aten_ops`` all of them, ``aten_ops_compute``
    those that are not views (the kernels a GPU launches, about). A mixer made of many small operations is
    bound by their launches rather than by arithmetic; this is that count, device-independent up to the
    kernels the device picks (e.g. the fused attention variant)."""
    class Count(TorchDispatchMode):
        total = compute = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.total += 1  # _unsafe_view is a view in all but its flag
            self.compute += not (func.is_view or func.overloadpacket is torch.ops.aten._unsafe_view)
            return func(*args, **(kwargs or {}))

    dev, dt = torch.device(device), as_dtype(dtype)
    with local_rng(dev):
        module = build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=tokens, **options).to(dev)
        x = torch.randn(1, tokens, dim, device=dev, requires_grad=True)
        with Count() as count:
            with torch.autocast(dev.type, dtype=dt, enabled=dt != torch.float32):
                out = module(x)
            out.float().sum().backward()
    return {"aten_ops": count.total, "aten_ops_compute": count.compute}


@checked("tokens", "dim", "heads", "dim_head")
def operator_table(*, device="cpu", dtype="fp32", tokens=1025, dim=128, heads=4, dim_head=32):
    """aten operators one forward + backward of each mechanism dispatches (``dispatched_ops``), in the
    configuration of ``bench_mixers``, with the Nystrom mixer also with autograd's backward of its
    pseudo-inverse iterations (``pinv_backward="autograd"``); the ratio is of non-view operators to the fused
    softmax's. A page table with ``attrs["provenance"]`` (``measure.provenance``): counting computes one
    small step per mechanism on ``device`` (batch 1), it times nothing."""
    mechanisms = sweep_mechanisms()
    nystrom = next(options for label, _, options in mechanisms if label == "nystrom")
    after = max(i for i, (_, mixer, _) in enumerate(mechanisms) if mixer == "nystrom")
    autograd = {**nystrom, "pinv_backward": "autograd"}
    mechanisms.insert(after + 1, ("nystrom, autograd pinv backward", "nystrom", autograd))
    shape = dict(device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads, dim_head=dim_head)
    counts = {label: dispatched_ops(mixer, options, **shape) for label, mixer, options in mechanisms}
    fused = counts[FUSED_SOFTMAX]["aten_ops_compute"]
    frame = pd.DataFrame({"aten ops": [c["aten_ops"] for c in counts.values()],
                          "non-view": [c["aten_ops_compute"] for c in counts.values()],
                          "x fused softmax (non-view)": [c["aten_ops_compute"] / fused for c in counts.values()]},
                         index=list(counts))
    frame.attrs["provenance"] = provenance(device, dtype=dtype, batch_size=1)
    return frame


def _worker():
    """Subprocess entry point: one measurement, config as JSON on stdin, result as JSON on stdout."""
    cfg = json.load(sys.stdin)
    row = bench_mixer(cfg.pop("label"), cfg.pop("mixer"), cfg.pop("options"), cpu_memory=True, **cfg)
    print("@@BENCH@@" + json.dumps(jsonable(row)))


def _bench_isolated(label, mixer, options, **cfg):
    """``bench_mixer`` in a fresh Python process, where peak RSS growth is this mechanism's alone."""
    payload = json.dumps({"label": label, "mixer": mixer, "options": options, **cfg, "dtype": dtype_name(cfg["dtype"])})
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the vixnb package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", f"from {__name__} import _worker; _worker()"], input=payload,
                          capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("@@BENCH@@"):
            return json.loads(line[len("@@BENCH@@"):])
    raise RuntimeError(f"benchmark of {label} failed:\n{proc.stderr[-2000:]}")


@checked("tokens", "dim", "heads", "dim_head", "batch", "warmup", "steps", "threads")
def bench_mixers(*, device=None, dtype=None, tokens=1025, dim=128, heads=4, dim_head=32, batch=64, warmup=2,
                 steps=5, mechanisms=None, isolate=None, threads=None, compile=False):
    """Forward + backward time and memory of every mechanism, with ratios to the materialised softmax.

    ``device``: ``"cuda"`` when available, else ``"cpu"``. ``dtype``: ``"fp32"`` (default), ``"bf16"`` or
    ``"fp16"`` (autocast). ``mechanisms``: labels of ``measure.sweep_mechanisms()`` to run, in that order (the
    reference, ``REFERENCE``, always runs first). ``isolate``: one fresh process per mechanism (default on
    CPU, where it is how memory is measured). ``threads``: ``torch.set_num_threads`` for the measurement
    (CPU; default: PyTorch's own choice; the caller's count is restored after). ``compile``: every mechanism,
    the reference included, through ``torch.compile`` (True or a mode of ``COMPILE_MODES``; "reduce-overhead"
    replays CUDA graphs; compiled in the untimed warm-up steps). Each row also counts the aten operators of
    one step (``dispatched_ops``). Returns one ``measure.sweep_row`` row per mechanism (mechanism, kind
    (the mixer's name), options, tokens, batch, dim, heads, dim_head, device, dtype, ms (median), ms_min, peak_mb,
    memory (what peak_mb is), params, gflops, estimate_gb, status, ...) plus ratio_vs_materialized_softmax and
    memory_ratio_vs_materialized_softmax; ``error`` when the mechanism failed (e.g. out of memory).
    """
    device = str(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype, compile = as_dtype(dtype), compile_mode(compile) or False
    isolate = torch.device(device).type == "cpu" if isolate is None else isolate
    known = {label: (label, mixer, options) for label, mixer, options in sweep_mechanisms()}
    wanted = list(known) if mechanisms is None else list(mechanisms)
    wanted = [REFERENCE] + [k for k in dict.fromkeys(wanted) if k != REFERENCE]
    unknown = [k for k in wanted if k not in known]
    if unknown:
        raise ValueError(f"unknown mechanisms {unknown}; choose from {', '.join(known)}")
    cfg = dict(device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads, dim_head=dim_head, batch=batch,
               warmup=warmup, steps=steps, threads=threads, compile=compile)
    rows = []
    for label in wanted:
        label, mixer, options = known[label]
        try:
            row = (_bench_isolated(label, mixer, options, **cfg) if isolate
                   else bench_mixer(label, mixer, options, **cfg))
        except RuntimeError as e:  # a failure other than out of memory (which sweep_row records)
            row = {"mechanism": label, "kind": mixer, "options": options, "tokens": tokens, "batch": batch, "dim": dim,
                   "heads": heads, "dim_head": dim_head, "device": device, "dtype": dtype_name(dtype), "ms": None,
                   "ms_min": None, "peak_mb": None, "memory": None, "params": None, "status": "error",
                   "error": str(e).strip().splitlines()[-1][:200]}
        finally:
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return with_ratios(rows)


def with_ratios(rows):
    """Set each row's ``ratio_vs_materialized_softmax`` and ``memory_ratio_vs_materialized_softmax`` (to the
    first row, the reference) and ``ratio_vs_fused_softmax`` (time, to the ``FUSED_SOFTMAX`` row when it ran:
    issue 4's target for the Nystrom mixer is at most 2); returns ``rows``."""
    ref = rows[0] if rows else {}
    fused = next((r["ms"] for r in rows if r["mechanism"] == FUSED_SOFTMAX), None)
    for r in rows:
        r["ratio_vs_materialized_softmax"] = r["ms"] / ref["ms"] if r["ms"] and ref["ms"] else None
        r["memory_ratio_vs_materialized_softmax"] = (r["peak_mb"] / ref["peak_mb"]
                                                     if r["peak_mb"] is not None and ref["peak_mb"] else None)
        r["ratio_vs_fused_softmax"] = r["ms"] / fused if r["ms"] and fused else None
    return rows
