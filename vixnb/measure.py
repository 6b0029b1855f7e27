"""Efficiency measurements by a named protocol: parameters, FLOPs, training and inference memory,
throughput, and the token-mixer scaling sweep.

The protocol is that of seed 003 (Nauen et al., "Which Transformer to Favor"; reproduction notes
section 4), re-implemented here with ``torch.utils.flop_counter`` and no third-party counter:

- **Parameters** under both conventions (``vixnb.count_params``: "paper" = torchsummary's Total params,
  "true" = every parameter; seed 003's theta is the trainable count) and the papers' **Size (MB)**.
- **FLOPs** of one image, eval mode, fp32, counted from shapes on the ``meta`` device (nothing is computed).
  ``matmul_flops`` is ``torch.utils.flop_counter``'s count of matrix products and convolutions, which
  follows **FLOPs = 2 x MACs**; ``macs`` is half of it. ``extra_op_flops`` adds seed 003's per-operation
  costs (softmax 5 per element, GELU 8, exp/log 20, FFT 5 N log2 N for complex and 2.5 N log2 N for real
  transforms), counted by a ``TorchDispatchMode`` that sees every aten call inside the model, the softmax
  inside fused attention kernels included. ``flops = matmul_flops + extra_op_flops`` (our headline).
  Seed 003's own counter (fvcore) counts **one FLOP per MAC** and also charges element-wise ops
  (add/mul/div 1, pow 3, sigmoid 22, layer norm 5, mean/sum ~1 per input element);
  ``seed003_flops = macs + extra_op_flops + elementwise_flops`` approximates their convention, and it is
  the one their fit RAM[GB] ~ 25.43 GFLOPs + 25.50 uses.
- **Training memory**: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over one
  forward + backward + AdamW step (the second of two, so optimizer state exists), from a reset of the
  peak statistics with the weights already on the device. ``path="authors"`` is the authors' execution
  path (softmax attention materialised through ``nn.Softmax``, Nystrom's three softmax matrices formed,
  fp32 forward, ``torch.optim.AdamW`` defaults); ``path="fused"`` is ours (``scaled_dot_product_attention``,
  fused AdamW on CUDA). Reserved memory is the figure closest to an nvidia-smi reading (which adds the
  CUDA context, about 0.5 GB).
- **Inference memory**: peak allocated after a reset, one no-grad forward at batch 1/32/64/128.
- **Throughput**: seed 003's memory-fit batch search (probe memory against batch size, fit a line,
  try the power-of-two batch sizes that fit), ``iters`` no-grad forwards per batch size timed with CUDA
  events, the best images/s reported with its batch size.
- **Scaling sweep**: forward + backward time and memory of every token mixer against the number of tokens,
  fused and materialised softmax included, and ``crossovers`` where a mechanism becomes cheaper than
  softmax attention.

On a CPU the same functions run and say what they could not measure: memory figures carry the status
``"skipped: CUDA memory statistics need a GPU"`` and CPU timings (``time.perf_counter``, a fixed small batch)
are labelled as such. Out of memory is a recorded outcome (``{"status": "oom", ...}``), never a crash; on a
CPU a budget guard skips, before running, any step whose shape-based estimate exceeds ``CPU_BUDGET_GB``
(env ``VIXNB_CPU_BUDGET_GB``, default 4) or ``CPU_BUDGET_GFLOP`` (env ``VIXNB_CPU_BUDGET_GFLOP``, default
100) -- a 16384-token materialised softmax is skipped, not run. Every record carries the device, dtype,
batch size, torch version and commit.

The efficiency chapter's settings, tables, notes and figures built from these records are in
``vixnb.efficiency``. Command line: ``python -m vixnb.measure MODEL [MODEL ...] [--dataset D] [--json]`` (``add_arguments`` /
``run`` for ``vixnb measure``). Default batch size: 64 on a GPU (the ViX paper's Figure 4), 4 on a CPU.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import time
from contextlib import ExitStack, contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from . import __version__
from .counting import input_size_of as _input_size
from .results import atomic_write

GB = 1024**3


def text_cell(value, spec, *, blank="-"):
    """A cell of a plain-text table: ``blank`` for None, text as it is, a number formatted by ``spec``."""
    if value is None:
        return blank
    if isinstance(value, str):
        return value
    return format(value, spec)

MB = 1024**2
PROTOCOL = "seed 003 (Nauen et al., 'Which Transformer to Favor'), re-implemented in vixnb.measure"
CPU_BUDGET_GB = float(os.environ.get("VIXNB_CPU_BUDGET_GB", 4.0))
CPU_BUDGET_GFLOP = float(os.environ.get("VIXNB_CPU_BUDGET_GFLOP", 100.0))
CPU_MEMORY_NOTE = "skipped: CUDA memory statistics need a GPU"
PATHS = ("authors", "fused")

CONVENTIONS = {
    "matmul_flops": "torch.utils.flop_counter: matrix products and convolutions, FLOPs = 2 x MACs",
    "macs": "matmul_flops / 2 (multiply-accumulates of matrix products and convolutions)",
    "extra_op_flops": "seed 003's per-op costs: softmax 5/element, GELU 8/element, exp/log 20/element, "
                      "FFT 5 N log2 N (complex) or 2.5 N log2 N (real), N = points per transform",
    "flops": "matmul_flops + extra_op_flops (FLOPs = 2 x MACs convention, plus seed 003's per-op costs)",
    "elementwise_flops": "seed 003's element-wise handlers: add/sub/mul/div/reciprocal 1, pow 3, sigmoid 22, "
                         "layer norm 5, mean/sum/avg-pool ~1 per input element",
    "seed003_flops": "macs + extra_op_flops + elementwise_flops: approximates seed 003's fvcore convention "
                     "(one FLOP per MAC); the convention of their RAM ~ GFLOPs fit",
}


# --------------------------------------------------------------------------------------------------
# provenance and helpers

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16}


def as_dtype(dtype):
    """A torch dtype from a name of ``DTYPES`` (or a torch dtype); None is fp32."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}") from None


def dtype_name(dtype):
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[as_dtype(dtype)]


def resolve_device(device=None):
    return torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))


def provenance(device, *, dtype=None, batch_size=None):
    """The provenance of a measurement (``vixnb.results.provenance``), with its dtype and batch size."""
    from .results import provenance as made

    return made(resolve_device(device), stamp="measured", dtype=dtype_name(dtype) if dtype is not None else None,
                batch_size=batch_size)


def _is_oom(err):
    if isinstance(err, torch.OutOfMemoryError):
        return True
    msg = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in msg.lower() or "can't allocate memory" in msg)


def _oom_record(err):
    return {"status": "oom", "error": (str(err).strip().splitlines() or [type(err).__name__])[0][:300]}


def _free(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def jsonable(obj):
    """Plain JSON types: dicts with string keys, lists, finite floats (non-finite -> None), str for the rest."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, torch.dtype):
        return dtype_name(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return jsonable(obj.item())
    return str(obj)


@contextmanager
def execution_path(model, path):
    """``"authors"``: materialised softmax (and Nystrom's explicit softmax matrices); ``"fused"``: SDPA."""
    from .layers import fused_attn

    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    with fused_attn(model, path == "fused"):
        yield model


# --------------------------------------------------------------------------------------------------
# shape-based counting on the meta device: FLOPs, seed 003's per-op costs, allocation volume

_SDPA_KERNELS = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_fused_attention_overrideable"}
_SOFTMAX = {"_softmax", "_safe_softmax", "_log_softmax"}
_EXP_LOG = {"exp", "exp_", "log", "log_"}
_FFT = {"_fft_c2c": 5.0, "_fft_r2c": 2.5, "_fft_c2r": 2.5}
_ELEMENTWISE_1 = {"add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "reciprocal", "reciprocal_",
                  "scatter_add", "scatter_add_"}
_REDUCE_IN = {"mean", "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool1d"}


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _fft_points(shape, dims):
    dims = [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    return _numel([shape[d] for d in dims])


class _OpCosts(TorchDispatchMode):
    """Seed 003's per-op costs by category, plus the allocation volume (bytes of every new tensor)."""

    def __init__(self):
        super().__init__()
        self.extra = {"softmax": 0, "gelu": 0, "exp_log": 0, "fft": 0}
        self.elementwise = 0
        self.volume = 0
        self.suspend_volume = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        res = outs[0] if outs else None
        if name in _SOFTMAX:
            self.extra["softmax"] += 5 * res.numel()
        elif name in _SDPA_KERNELS:  # the softmax inside a fused kernel: batch x heads x Sq x Sk
            q, k = args[0], args[1]
            self.extra["softmax"] += 5 * _numel(q.shape[:-1]) * k.shape[-2]
        elif name == "gelu":
            self.extra["gelu"] += 8 * res.numel()
        elif name in _EXP_LOG:
            self.extra["exp_log"] += 20 * res.numel()
        elif name in _FFT:
            dims = args[1]
            signal = res.shape if name == "_fft_c2r" else first.shape  # the real-side / full signal
            points = _fft_points(signal, dims)
            self.extra["fft"] += int(_FFT[name] * _numel(signal) * math.log2(max(points, 2)))
        elif name in _ELEMENTWISE_1 and res is not None:
            self.elementwise += res.numel()
        elif name == "pow" and res is not None:
            self.elementwise += 3 * res.numel()
        elif name in ("sigmoid", "sigmoid_"):
            self.elementwise += 22 * res.numel()
        elif name in ("native_layer_norm", "layer_norm"):
            self.elementwise += 5 * first.numel()
        elif name in _REDUCE_IN and first is not None:
            self.elementwise += first.numel()
        elif name == "sum" and first is not None and res is not None:
            self.elementwise += max(first.numel() - res.numel(), 0)
        if not self.suspend_volume and not any(r.alias_info is not None for r in func._schema.returns):
            self.volume += sum(t.numel() * t.element_size() for t in outs)
        return out


class _FusedAttentionVolume(TorchFunctionMode):
    """On meta, SDPA decomposes into the math path (its FLOPs are counted as usual); for the allocation
    volume count what a fused kernel allocates instead: the output and the log-sum-exp, not the N x N matrix."""

    def __init__(self, costs):
        super().__init__()
        self.costs = costs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            q, v = args[0], args[2]
            self.costs.suspend_volume += 1
            try:
                out = func(*args, **kwargs)
            finally:
                self.costs.suspend_volume -= 1
            self.costs.volume += (_numel(q.shape[:-1]) * v.shape[-1] * q.element_size() + _numel(q.shape[:-1]) * 4)
            return out
        return func(*args, **kwargs)


def _sdpa_cpu_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    """Q K^T and A V of (b, h, Sq, d) queries, (b, h, Sk, d) keys, (b, h, Sk, dv) values: 2 FLOPs per MAC."""
    *lead, sq, d = query_shape
    sk, dv = key_shape[-2], value_shape[-1]
    return 2 * _numel(lead) * sq * sk * d + 2 * _numel(lead) * sq * sk * dv


# ``torch.utils.flop_counter`` has no formula for the CPU flash kernel; it is the same count as the others.
_CUSTOM_FLOPS = {}
if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
    _CUSTOM_FLOPS[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu_flop


def _count(module, make_input, *, backward=False, on_meta=True):
    """Run ``module`` once under the counters; return (torch flop counts by op, _OpCosts)."""
    costs = _OpCosts()
    if on_meta:
        module = copy.deepcopy(module).to("meta")
        device = torch.device("meta")
    else:
        device = next((p.device for p in module.parameters()), torch.device("cpu"))
    x = make_input(device)
    counter = FlopCounterMode(display=False, custom_mapping=_CUSTOM_FLOPS)
    with ExitStack() as stack:
        stack.enter_context(torch.set_grad_enabled(backward))
        stack.enter_context(counter)
        stack.enter_context(costs)
        stack.enter_context(_FusedAttentionVolume(costs))
        out = module(x)
        if backward:
            out.float().sum().backward()
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return by_op, costs


def flops(model, input_size=None, *, per_op_costs=True, path="fused"):
    """FLOPs and MACs of one image (eval mode, fp32), counted from shapes on the meta device.

    Returns ``macs``, ``matmul_flops`` (= 2 x macs, torch.utils.flop_counter), ``extra_op_flops`` (seed
    003's softmax/GELU/exp-log/FFT costs; ``extra_ops`` by category), ``flops`` (matmul + extra: our
    headline, FLOPs = 2 x MACs), ``elementwise_flops`` and ``seed003_flops`` (macs + extra + elementwise,
    approximating seed 003's one-FLOP-per-MAC convention), their ``g*`` versions in units of 1e9, ``by_op``
    (the flop counter's table) and ``conventions`` (what each number means). ``per_op_costs=False`` leaves
    the per-op costs out (``extra_op_flops`` = ``elementwise_flops`` = 0). The count does not depend on
    ``path`` except through the ops each path calls (both form the same products)."""
    size = _input_size(model, input_size)
    was_training = model.training
    model.eval()
    try:
        with execution_path(model, path):
            try:
                by_op, costs = _count(model, lambda d: torch.zeros(1, *size, device=d), on_meta=True)
                counted_on = "meta (shapes only)"
            except (NotImplementedError, RuntimeError):  # an op without a meta kernel: count for real
                by_op, costs = _count(model, lambda d: torch.zeros(1, *size, device=d), on_meta=False)
                counted_on = "real forward on the model's device"
    finally:
        model.train(was_training)
    matmul = sum(by_op.values())
    extra = dict(costs.extra) if per_op_costs else {k: 0 for k in costs.extra}
    extra_total = sum(extra.values())
    elementwise = costs.elementwise if per_op_costs else 0
    macs = matmul // 2
    seed003 = macs + extra_total + elementwise
    return {
        "input_size": list(size), "images": 1, "path": path, "counted_on": counted_on,
        "macs": macs, "matmul_flops": matmul, "extra_op_flops": extra_total, "extra_ops": extra,
        "flops": matmul + extra_total, "elementwise_flops": elementwise, "seed003_flops": seed003,
        "gmacs": macs / 1e9, "gflops": (matmul + extra_total) / 1e9, "seed003_gflops": seed003 / 1e9,
        "by_op": by_op, "per_op_costs": per_op_costs, "conventions": CONVENTIONS,
    }


def estimate(module, make_input, *, training, optimizer_states=2):
    """Shape-based (meta) estimate of one step: ``{"gb", "gflop"}``.

    ``gb`` is an upper bound: the bytes of every tensor the forward allocates (fused attention counted as
    its kernel allocates: output and log-sum-exp), doubled for training (backward), plus the weights (and,
    for training, gradients and ``optimizer_states`` AdamW moments). ``gflop`` is the forward FLOPs
    (``flops`` convention), tripled for training."""
    by_op, costs = _count(module, make_input, on_meta=True)
    fwd = (sum(by_op.values()) + sum(costs.extra.values())) / 1e9
    weights = sum(p.numel() * p.element_size() for p in module.parameters())
    weights += sum(b.numel() * b.element_size() for b in module.buffers())
    if training:
        total = 2 * costs.volume + weights * (2 + optimizer_states)
        return {"gb": total / GB, "gflop": 3 * fwd}
    return {"gb": (costs.volume + weights) / GB, "gflop": fwd}


def _budget_status(est, *, budget_gb=None, budget_gflop=None):
    budget_gb = CPU_BUDGET_GB if budget_gb is None else budget_gb
    budget_gflop = CPU_BUDGET_GFLOP if budget_gflop is None else budget_gflop
    if est["gb"] > budget_gb:
        return f"skipped: estimated {est['gb']:.1f} GB exceeds the CPU budget of {budget_gb:g} GB"
    if est["gflop"] > budget_gflop:
        return f"skipped: estimated {est['gflop']:.0f} GFLOP per step exceeds the CPU budget of {budget_gflop:g} GFLOP"
    return None


# --------------------------------------------------------------------------------------------------
# timing

def _time_ms(fn, device, *, warmup=1, iters=3):
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


def _timing_label(device):
    return "CUDA events" if device.type == "cuda" else "CPU time.perf_counter (not comparable to GPU figures)"


def _resident_bytes():
    """This process's resident set size now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_resident_bytes():
    """This process's peak resident set size so far (``ru_maxrss``, KiB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --------------------------------------------------------------------------------------------------
# training memory

def _make_optimizer(model, path, device):
    fused = path == "fused" and device.type == "cuda"
    # the authors' protocol: AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
    return torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                             **({"fused": True} if fused else {}))


def _train_step(model, x, y, optimizer, autocast):
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y)
    loss.backward()
    optimizer.step()
    return loss


def training_memory(model, *, batch_size, device=None, path="authors", dtype="fp32", steps=2, input_size=None,
                    num_classes=None, cpu_budget_gb=None, cpu_budget_gflop=None):
    """Peak memory and time of a training step (forward + backward + AdamW) at ``batch_size``.

    ``path="authors"``: materialised softmax, fp32 forward (pass ``dtype="fp32"``), ``torch.optim.AdamW``;
    ``path="fused"``: SDPA, fused AdamW on CUDA, forward under autocast when ``dtype`` is bf16/fp16.
    ``steps`` steps run (the first creates the optimizer state); the peaks cover all of them, the time is
    the last step's. The model is copied, never modified. On a CPU: status ``"skipped: CUDA memory
    statistics need a GPU"`` with the step still timed (``step_ms``), unless the shape-based estimate is over
    the CPU budget (then nothing runs). Out of memory: ``status == "oom"``."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = _input_size(model, input_size)
    classes = num_classes or _num_classes(model, size)
    record = {"measurement": "training_memory", "path": path, "batch_size": batch_size, "dtype": dtype_name(dt),
              "device": str(device), "steps": steps, "protocol": "one forward + backward + AdamW step; peak over "
              f"{steps} steps from a reset, weights on the device", "timing": _timing_label(device),
              "optimizer": "AdamW (fused)" if path == "fused" and device.type == "cuda" else "AdamW",
              "provenance": provenance(device, dtype=dt, batch_size=batch_size)}
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    work = copy.deepcopy(model).train()
    with execution_path(work, path):
        if device.type == "cpu":
            est = estimate(work, lambda d: torch.zeros(batch_size, *size, device=d), training=True)
            record["estimate_gb"], record["estimate_gflop"] = est["gb"], est["gflop"]
            skip = _budget_status(est, budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            if skip:
                return {**record, "status": skip}
        autocast = (lambda: torch.autocast(device.type, dtype=dt)) if dt != torch.float32 else nullcontext
        try:
            if device.type == "cuda":
                _free(device)
                torch.cuda.reset_peak_memory_stats(device)
            work.to(device)
            optimizer = _make_optimizer(work, path, device)
            gen = torch.Generator(device="cpu").manual_seed(0)
            x = torch.randn(batch_size, *size, generator=gen).to(device)
            y = torch.randint(0, classes, (batch_size,), generator=gen).to(device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                record["baseline_gb"] = torch.cuda.memory_allocated(device) / GB
                torch.cuda.reset_peak_memory_stats(device)
            times = _time_ms(lambda: _train_step(work, x, y, optimizer, autocast), device, warmup=steps - 1, iters=1)
            record["step_ms"] = times[-1]
            if device.type == "cuda":
                record["peak_allocated_gb"] = torch.cuda.max_memory_allocated(device) / GB
                record["peak_reserved_gb"] = torch.cuda.max_memory_reserved(device) / GB
                record["status"] = "ok"
            else:
                record["status"] = CPU_MEMORY_NOTE
        except Exception as err:  # noqa: BLE001 -- out of memory is an outcome; anything else is re-raised
            if not _is_oom(err):
                raise
            record.update(_oom_record(err))
        finally:
            work = optimizer = x = y = None
            _free(device)
    return record


def _num_classes(model, size):
    for m in reversed(list(model.modules())):
        if isinstance(m, nn.Linear):
            return m.out_features
    return 10


# --------------------------------------------------------------------------------------------------
# inference memory and throughput

def _forward(model, x, autocast):
    with torch.no_grad(), autocast():
        return model(x)


def inference_memory(model, *, batch_sizes=(1, 32, 64, 128), device=None, path="fused", dtype="fp32",
                     input_size=None):
    """Seed 003's inference memory: for each batch size, reset the peak statistics and run one no-grad
    forward; peak allocated and reserved GB (weights included). On a CPU every batch size is recorded as
    ``"skipped: CUDA memory statistics need a GPU"``. A batch size that runs out of memory is ``"oom"``."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = _input_size(model, input_size)
    record = {"measurement": "inference_memory", "path": path, "dtype": dtype_name(dt), "device": str(device),
              "protocol": "peak after a reset, one no-grad forward per batch size (seed 003)",
              "provenance": provenance(device, dtype=dt, batch_size=list(batch_sizes)), "batches": []}
    if device.type != "cuda":
        record["batches"] = [{"batch_size": bs, "status": CPU_MEMORY_NOTE} for bs in batch_sizes]
        record["status"] = CPU_MEMORY_NOTE
        return record
    work = copy.deepcopy(model).eval().to(device)
    autocast = (lambda: torch.autocast(device.type, dtype=dt)) if dt != torch.float32 else nullcontext
    with execution_path(work, path):
        for bs in sorted(batch_sizes, reverse=True):
            row = {"batch_size": bs}
            try:
                x = torch.randn(bs, *size, device=device)
                _free(device)
                torch.cuda.reset_peak_memory_stats(device)
                _forward(work, x, autocast)
                torch.cuda.synchronize(device)
                row.update(status="ok", peak_allocated_gb=torch.cuda.max_memory_allocated(device) / GB,
                           peak_reserved_gb=torch.cuda.max_memory_reserved(device) / GB)
            except Exception as err:  # noqa: BLE001
                if not _is_oom(err):
                    raise
                row.update(_oom_record(err))
            finally:
                x = None
                _free(device)
            record["batches"].append(row)
    record["batches"].sort(key=lambda r: r["batch_size"])
    record["status"] = "ok" if all(r["status"] == "ok" for r in record["batches"]) else "partial"
    work = None
    _free(device)
    return record


def fit_line(xs, ys):
    """Least-squares line: (slope, intercept)."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    if len(xs) < 2:
        return 0.0, (ys[0] if ys else 0.0)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def batch_candidates(probes, total_bytes, *, margins=(250 * MB, 100 * MB, 0), max_batch=None, min_batch=1):
    """Seed 003's candidate batch sizes from memory probes {batch: peak bytes}: fit a line through the
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


def throughput(model, *, device=None, path="fused", dtype="fp32", iters=None, warmup=3, max_batch=4096,
               max_candidates=4, cpu_batch=8, input_size=None, cpu_budget_gb=None, cpu_budget_gflop=None):
    """Inference throughput (images/s).

    GPU, seed 003's protocol: probe the peak memory of a no-grad forward at doubling batch sizes (4, 8,
    ...) while the line fitted through the probes predicts the next doubling fits (total memory - 0.5 GB)
    and the batch is at most ``max_batch``; then time ``iters`` (default 100) forwards with CUDA events at the
    ``max_candidates`` largest candidate batch sizes (``batch_candidates``) and report the best images/s and
    its batch size. CPU: a fixed batch of ``cpu_batch``, ``iters`` (default 3) forwards timed with
    ``time.perf_counter``, labelled as not seed 003's protocol."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = _input_size(model, input_size)
    autocast = (lambda: torch.autocast(device.type, dtype=dt)) if dt != torch.float32 else nullcontext
    record = {"measurement": "throughput", "path": path, "dtype": dtype_name(dt), "device": str(device),
              "timing": _timing_label(device)}
    work = copy.deepcopy(model).eval()
    with execution_path(work, path):
        if device.type != "cuda":
            iters = iters or 3
            record.update(protocol=f"CPU: fixed batch {cpu_batch}, {iters} no-grad forwards after 1 warm-up "
                          "(not seed 003's GPU protocol)", batch_size=cpu_batch, iters=iters,
                          provenance=provenance(device, dtype=dt, batch_size=cpu_batch))
            est = estimate(work, lambda d: torch.zeros(cpu_batch, *size, device=d), training=False)
            skip = _budget_status(est, budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            if skip:
                return {**record, "status": skip}
            try:
                x = torch.randn(cpu_batch, *size)
                times = _time_ms(lambda: _forward(work, x, autocast), device, warmup=1, iters=iters)
            except Exception as err:  # noqa: BLE001
                if not _is_oom(err):
                    raise
                return {**record, **_oom_record(err), "images_per_s": None}
            record.update(status="ok (cpu timing)", images_per_s=cpu_batch * 1e3 / statistics.median(times),
                          ms_per_batch=statistics.median(times))
            return record
        iters = iters or 100
        record.update(protocol=f"seed 003: memory-fit batch search, {iters} no-grad forwards per batch size "
                      "timed with CUDA events, best images/s", iters=iters)
        work.to(device)
        total = torch.cuda.get_device_properties(device).total_memory
        probes, bs = {}, 4
        try:
            while bs <= max_batch:
                x = torch.randn(bs, *size, device=device)
                _free(device)
                torch.cuda.reset_peak_memory_stats(device)
                _forward(work, x, autocast)
                probes[bs] = torch.cuda.max_memory_allocated(device)
                x = None
                if len(probes) >= 2:
                    slope, intercept = fit_line(list(probes), list(probes.values()))
                    if slope * 2 * bs + intercept > total - 500 * MB:
                        break
                bs *= 2
        except Exception as err:  # noqa: BLE001
            if not _is_oom(err):
                raise
            x = None
            _free(device)
        if not probes:
            work = None
            _free(device)
            return {**record, **_oom_record(RuntimeError("out of memory at batch 4")),
                    "provenance": provenance(device, dtype=dt, batch_size=4)}
        record["probes"] = [{"batch_size": b, "peak_allocated_gb": v / GB} for b, v in sorted(probes.items())]
        cands = batch_candidates(probes, total, max_batch=max_batch) if len(probes) >= 2 else sorted(probes)
        cands = cands[-max_candidates:]
        tried = []
        for b in cands:
            try:
                x = torch.randn(b, *size, device=device)
                times = _time_ms(lambda: _forward(work, x, autocast), device, warmup=warmup, iters=iters)
                tried.append({"batch_size": b, "status": "ok", "images_per_s": b * iters * 1e3 / sum(times)})
            except Exception as err:  # noqa: BLE001
                if not _is_oom(err):
                    raise
                tried.append({"batch_size": b, **_oom_record(err)})
                break
            finally:
                x = None
                _free(device)
        record["tried"] = tried
        ok = [t for t in tried if t["status"] == "ok"]
        if ok:
            best = max(ok, key=lambda t: t["images_per_s"])
            record.update(status="ok", images_per_s=best["images_per_s"], batch_size=best["batch_size"])
        else:
            record.update(status="oom", images_per_s=None, batch_size=None)
        record["provenance"] = provenance(device, dtype=dt, batch_size=record["batch_size"])
    work = None
    _free(device)
    return record


# --------------------------------------------------------------------------------------------------
# one model, many models

def _default_batch(device):
    return 64 if device.type == "cuda" else 4


def measure(model_name, *, dataset="cifar10", device=None, batch_size=None, json_ready=True, paths=PATHS,
            dtype="fp32", inference_batch_sizes=(1, 32, 64, 128), iters=None, cpu_batch=None, steps=2, **overrides):
    """Every efficiency figure of one registered model, as one record.

    Parameters (``params_paper``, ``params_true``, ``params_trainable``: seed 003's theta), Size (MB) on the
    authors' path and as built, ``flops`` (see ``flops``), and for each path in ``paths``: ``training``
    (``training_memory`` at ``batch_size``, ``steps`` steps), ``inference`` (``inference_memory``),
    ``throughput`` (``iters`` forwards; on a CPU at a batch of ``cpu_batch``, default min(batch_size, 8)).
    ``flops`` counts the fused path, ``flops_authors_path`` the authors' (they differ only for Nystrom, whose
    unfused form multiplies in a different order). ``batch_size`` defaults to 64 on a GPU and 4 on a CPU.
    The authors' path always runs fp32; ``dtype`` applies to the fused path. ``overrides`` go to
    ``create_model`` (e.g. ``depth=1``). With ``json_ready`` the record holds only JSON types."""
    from . import create_model

    model = create_model(model_name, dataset=dataset, **overrides)
    return measure_model(model, name=model_name, device=device, batch_size=batch_size, json_ready=json_ready,
                         paths=paths, dtype=dtype, inference_batch_sizes=inference_batch_sizes, iters=iters,
                         cpu_batch=cpu_batch, steps=steps, dataset=dataset, overrides=dict(overrides))


def measure_model(model, *, name, input_size=None, device=None, batch_size=None, json_ready=True, paths=PATHS,
                  dtype="fp32", inference_batch_sizes=(1, 32, 64, 128), iters=None, cpu_batch=None, steps=2,
                  dataset=None, overrides=None):
    """``measure`` for any image classifier ``model`` (e.g. a timm reference architecture), recorded as ``name``;
    ``input_size`` = (channels, height, width) unless the model has an ``input_size`` attribute."""
    from . import count_params, summary_size_mb

    device = resolve_device(device)
    batch_size = batch_size or _default_batch(device)
    size = _input_size(model, input_size)
    record = {
        "model": name, "dataset": dataset, "overrides": dict(overrides or {}), "input_size": list(size),
        "batch_size": batch_size, "dtype": {p: ("fp32" if p == "authors" else dtype_name(dtype)) for p in paths},
        "device": str(device), "protocol": PROTOCOL,
        "params_paper": count_params(model, "paper", input_size=size), "params_true": count_params(model, "true"),
        "params_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "size_mb": summary_size_mb(model, size), "size_mb_as_built": summary_size_mb(model, size, path="as-built"),
        "flops": flops(model, size, path="fused"), "flops_authors_path": flops(model, size, path="authors"),
        "training": {}, "inference": {}, "throughput": {},
        "provenance": provenance(device, dtype=dtype, batch_size=batch_size),
    }
    for path in paths:
        dt = "fp32" if path == "authors" else dtype
        record["training"][path] = training_memory(model, batch_size=batch_size, device=device, path=path, dtype=dt,
                                                   steps=steps, input_size=size)
        record["inference"][path] = inference_memory(model, batch_sizes=inference_batch_sizes, device=device,
                                                     path=path, dtype=dt, input_size=size)
        record["throughput"][path] = throughput(model, device=device, path=path, dtype=dt, iters=iters,
                                                cpu_batch=cpu_batch or min(batch_size, 8), input_size=size)
    return jsonable(record) if json_ready else record


def measure_many(models, *, progress=False, **kwargs):
    """``measure`` for each model name; a model that fails with an error other than OOM is recorded with
    ``status = "error: ..."`` so one broken model does not lose the others."""
    records = []
    for name in models:
        t0 = time.perf_counter()
        try:
            rec = measure(name, **kwargs)
        except (ValueError, TypeError, RuntimeError, NotImplementedError) as err:
            rec = {"model": name, "status": f"error: {type(err).__name__}: {str(err)[:200]}"}
        rec["seconds"] = time.perf_counter() - t0
        if progress:
            print(f"measured {name} in {rec['seconds']:.1f} s", flush=True)
        records.append(rec)
    return records


def gpu_memory_column(models, *, dataset="cifar10", batch_size=64, device=None, dtype="fp32", **overrides):
    """Training memory of each model at ``batch_size`` on the authors' path (fp32) and ours (fused, ``dtype``):
    the ViX paper's "GPU (GB)" column. Returns a pandas DataFrame indexed by model; cells are GB (reserved
    and allocated peaks) or the record's status (``"skipped: ..."`` on a CPU, ``"oom"``)."""
    import pandas as pd
    from . import create_model

    device = resolve_device(device)
    rows = {}
    for name in models:
        model = create_model(name, dataset=dataset, **overrides)
        row = {}
        for path, dt in (("authors", "fp32"), ("fused", dtype)):
            rec = training_memory(model, batch_size=batch_size, device=device, path=path, dtype=dt)
            ok = rec["status"] == "ok"
            label = f"{path} ({dtype_name(dt)})"
            row[f"GPU GB reserved, {label}"] = round(rec["peak_reserved_gb"], 2) if ok else rec["status"]
            row[f"GPU GB allocated, {label}"] = round(rec["peak_allocated_gb"], 2) if ok else rec["status"]
            row[f"step ms, {label}"] = round(rec["step_ms"], 1) if rec.get("step_ms") is not None else None
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.attrs["provenance"] = provenance(device, dtype=dtype, batch_size=batch_size)
    return frame


# --------------------------------------------------------------------------------------------------
# the scaling sweep

def sweep_mechanisms(include_materialized=True):
    """(label, kind, options) of every mixer kind in the paper configuration; softmax-type kinds twice
    (fused and materialised) when ``include_materialized``."""
    from .layers import list_kinds
    from .models import paper_mixers

    paper = {kind: opts for kind, opts in paper_mixers().values()}
    out = []
    for kind in list_kinds():
        opts = dict(paper.get(kind, {}))
        if kind == "mlp":
            opts = {"expansion_factor": 1}
        if kind in ("softmax", "shaped"):
            out.append((f"{kind} (fused)", kind, opts))
            if include_materialized:
                out.append((f"{kind} (materialised)", kind, {**opts, "fused": False}))
        elif kind == "nystrom":
            out.append((kind, kind, opts))
            if include_materialized:  # the authors' code forms the three softmax matrices explicitly
                out.append(("nystrom (unfused)", kind, {**opts, "fused": False}))
        else:
            out.append((kind, kind, opts))
    return out


MATERIALISED_SOFTMAX = "softmax (materialised)"  # the reference of ``vixnb bench mixers`` (vixnb.bench)
FUSED_SOFTMAX = "softmax (fused)"


def sweep_row(label, kind, options, n, *, dim, heads, dim_head, batch, device, dt, backward, warmup, steps,
               budget_gb, budget_gflop, cpu_memory=False, compile=False):
    """Time and memory of ``steps`` steps (after ``warmup``) of one mechanism at ``n`` tokens: one row of
    ``scaling_sweep``, and of ``vixnb bench mixers``. Memory (``peak_mb``, what it is in ``memory``): on CUDA
    the peak allocated during the timed steps less what was allocated before them; on a CPU, with
    ``cpu_memory``, the growth of the process's peak resident set size over its size before the first step
    (meaningful only in a fresh process, see ``vixnb.bench``), else not measured (``estimate_gb`` is the
    shape-based estimate). ``compile``: time the mixer through ``torch.compile`` (True, or a mode name). The CPU budget guard
    (``budget_gb``, ``budget_gflop``) skips a step before it runs."""
    from .layers import build

    row = {"mechanism": label, "kind": kind, "options": dict(options), "tokens": n, "batch": batch, "dim": dim,
           "heads": heads, "dim_head": dim_head, "device": str(device), "dtype": dtype_name(dt),
           "mode": "forward+backward" if backward else "forward", "ms": None, "ms_min": None, "peak_mb": None,
           "peak_reserved_mb": None, "timing": _timing_label(device), "compiled": compile}
    def make_mixer(on):
        torch.manual_seed(0)
        with torch.device(on):
            return build(kind, dim=dim, heads=heads, dim_head=dim_head, seq_len=n, **options)

    try:  # count and estimate from shapes, without allocating (a 16384-token MLP has 2 GB of weights)
        shapes = make_mixer("meta")
    except (NotImplementedError, RuntimeError):
        shapes = make_mixer("cpu")
    make = lambda d: torch.zeros(batch, n, dim, device=d)  # noqa: E731
    est = estimate(shapes, make, training=backward, optimizer_states=0)
    by_op, costs = _count(shapes, lambda d: torch.zeros(1, n, dim, device=d))
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
        skip = _budget_status(est, budget_gb=budget_gb, budget_gflop=budget_gflop)
        if skip:
            row["status"] = skip
            return row
    autocast = (lambda: torch.autocast(device.type, dtype=dt)) if dt != torch.float32 else nullcontext
    x = grad = None
    try:
        if device.type == "cuda":
            _free(device)
        mixer = make_mixer(device).train(backward)
        if compile:  # the same module through torch.compile (compiled during the untimed warm-up step)
            mixer = torch.compile(mixer, mode=None if compile in (True, "default") else compile)
        x = torch.randn(batch, n, dim, device=device, requires_grad=backward)
        grad = torch.randn(batch, n, dim, device=device) if backward else None

        def step():
            if backward:
                x.grad = None
                mixer.zero_grad(set_to_none=True)
                with autocast():
                    out = mixer(x)
                out.backward(grad.to(out.dtype))
            else:
                with torch.no_grad(), autocast():
                    mixer(x)

        if device.type == "cuda":
            step()  # warm-up outside the peak window
            x.grad = None
            mixer.zero_grad(set_to_none=True)
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)  # weights, input and output gradient
            torch.cuda.reset_peak_memory_stats(device)
            times = _time_ms(step, device, warmup=max(warmup - 1, 0), iters=steps)
            row["peak_mb"] = (torch.cuda.max_memory_allocated(device) - base) / MB
            row["peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / MB
            row["status"] = "ok"
        elif cpu_memory:
            resident = _resident_bytes()
            times = _time_ms(step, device, warmup=warmup, iters=steps)
            row["peak_mb"] = max(0, _peak_resident_bytes() - resident) / MB
            row["status"] = "ok (cpu: time, and peak RSS growth as memory)"
        else:
            times = _time_ms(step, device, warmup=warmup, iters=steps)
            row["status"] = "ok (cpu: time only; memory is the shape-based estimate)"
        row["ms"], row["ms_min"] = statistics.median(times), min(times)
    except Exception as err:  # noqa: BLE001
        if not _is_oom(err):
            raise
        row.update(_oom_record(err))
    finally:
        x = grad = mixer = None
        _free(device)
    return row


def scaling_sweep(kinds=None, tokens=(256, 1024, 4096, 16384), *, dim=128, heads=4, dim_head=32, batch=None,
                  device=None, dtype="fp32", include_materialized=True, backward=True, warmup=1, steps=3,
                  cpu_budget_gb=None, cpu_budget_gflop=None, progress=False):
    """Time and memory of every token mixer against the number of tokens: one row per (mechanism, tokens).

    ``kinds``: mixer kinds or mechanism labels to include (default: every kind of ``vixnb.layers``, with
    the ViX paper options; softmax and shaped attention both fused and materialised). Each row: mechanism,
    kind, options, tokens, batch, device, dtype, mode, ``ms`` (median of ``steps`` after ``warmup``),
    ``peak_mb`` (CUDA: peak allocated during the timed steps minus what was allocated before them;
    ``None`` on a CPU), ``peak_reserved_mb``, ``gflops`` (forward, ``flops`` convention, whole batch),
    ``estimate_gb`` (shape-based upper bound), ``status`` ("ok", "oom", "skipped: ..."), provenance.
    ``batch`` defaults to 8 on a GPU, 1 on a CPU."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    batch = batch or (8 if device.type == "cuda" else 1)
    mechs = sweep_mechanisms(include_materialized)
    if kinds is not None:
        wanted = set(kinds)
        known = {m[0] for m in mechs} | {m[1] for m in mechs}
        unknown = wanted - known
        if unknown:
            raise ValueError(f"unknown mechanisms {sorted(unknown)}; choose from {sorted(known)}")
        mechs = [m for m in mechs if m[0] in wanted or m[1] in wanted]
    prov = provenance(device, dtype=dt, batch_size=batch)
    rows = []
    for label, kind, options in mechs:
        for n in tokens:
            t0 = time.perf_counter()
            row = sweep_row(label, kind, options, int(n), dim=dim, heads=heads, dim_head=dim_head, batch=batch,
                             device=device, dt=dt, backward=backward, warmup=warmup, steps=steps,
                             budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            row["provenance"] = prov
            rows.append(jsonable(row))
            if progress:
                print(f"{label:<24} {n:>6} tokens: {row['status']} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows


SHAPE_METRICS = ("gflops", "estimate_gb")


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


def crossovers(rows, *, references=("softmax (fused)", "softmax (materialised)"), metrics=("ms", "peak_mb", "gflops",
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
                res = {"mechanism": mech, "reference": ref, "metric": metric, "tokens": [g[0] for g in grid],
                       "cheaper_at": [], "cheaper_from": None, "crossover_tokens": None}
                if len(grid) < 2:
                    out.append({**res, "status": "insufficient data"})
                    continue
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
                out.append(res)
    return out


def crossover_frame(xs, *, metrics=None):
    """``crossovers`` output as a table: one row per mechanism, one column per (reference, metric), cells
    "~N tokens" (interpolated crossover), "from N" (first measured size where cheaper, no interpolation),
    "all sizes", "none up to N", "only at N1, N2" (cheaper at those small sizes, not at the largest) or "-"."""
    import pandas as pd

    cells = {}
    for x in xs:
        if metrics and x["metric"] not in metrics:
            continue
        if x["status"] == "crosses":
            cell = f"~{x['crossover_tokens']:.0f} tokens" if x["crossover_tokens"] else f"from {x['cheaper_from']}"
        elif x["status"].startswith("cheaper at every"):
            cell = "all sizes"
        elif x["status"].startswith("not cheaper up to"):
            cell = f"none up to {x['tokens'][-1]}"
        elif x["status"].startswith("not cheaper at"):
            cell = f"only at {', '.join(map(str, x['cheaper_at']))}"
        else:
            cell = "-"
        cells.setdefault(x["mechanism"], {})[(f"vs {x['reference']}", x["metric"])] = cell
    frame = pd.DataFrame.from_dict(cells, orient="index")
    if not frame.empty:
        frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


# --------------------------------------------------------------------------------------------------
# records as rows and plain-text tables (``vixnb measure``; the chapter's tables are in ``vixnb.efficiency``)

def short_status(status):
    if status is None:
        return "-"
    if status.startswith("skipped: CUDA"):
        return "n/a (cpu)"
    if status.startswith("skipped"):
        return "skipped (budget)"
    return status


def summary_row(rec):
    """One flat dict of a ``measure`` record (for tables and DataFrames)."""
    if "flops" not in rec:
        return {"model": rec.get("model"), "status": rec.get("status")}
    row = {"model": rec["model"], "params (paper)": rec["params_paper"], "params (true)": rec["params_true"],
           "Size MB": rec["size_mb"], "GMACs": rec["flops"]["gmacs"], "GFLOPs": rec["flops"]["gflops"],
           "GFLOPs (seed 003 conv.)": rec["flops"]["seed003_gflops"], "batch": rec["batch_size"]}
    for path in rec.get("training", {}):
        tr, inf, tp = rec["training"][path], rec["inference"][path], rec["throughput"][path]
        row[f"train GB ({path})"] = tr.get("peak_reserved_gb") if tr["status"] == "ok" else short_status(tr["status"])
        row[f"train GB alloc ({path})"] = tr.get("peak_allocated_gb") if tr["status"] == "ok" else short_status(tr["status"])
        row[f"train step ms ({path})"] = tr.get("step_ms")
        b64 = next((b for b in inf.get("batches", []) if b["batch_size"] == 64), None)
        row[f"infer GB @64 ({path})"] = (b64.get("peak_allocated_gb") if b64 and b64["status"] == "ok"
                                         else short_status(b64["status"] if b64 else None))
        row[f"img/s ({path})"] = tp.get("images_per_s")
        row[f"ms per image ({path})"] = 1e3 / tp["images_per_s"] if tp.get("images_per_s") else None
        row[f"img/s batch ({path})"] = tp.get("batch_size")
    row["device"] = rec["provenance"]["device"]
    return row


def records_frame(records):
    """A pandas DataFrame of ``measure`` records, one row per model."""
    import pandas as pd

    if not records:
        return pd.DataFrame(index=pd.Index([], name="model"))
    return pd.DataFrame([summary_row(r) for r in records]).set_index("model")


def format_table(records):
    """A plain-text table of ``measure`` records, ``scaling_sweep`` rows or ``crossovers`` rows."""
    if not records:
        return "(no records)"
    first = records[0]
    if "metric" in first and "reference" in first:
        lines = [f"{'mechanism':<24}{'reference':<24}{'metric':<13}{'cheaper from':>13}{'crossover':>11}  status"]
        for r in records:
            lines.append(f"{r['mechanism']:<24}{r['reference']:<24}{r['metric']:<13}{text_cell(r['cheaper_from'], 'd'):>13}"
                         f"{text_cell(r['crossover_tokens'], '.0f'):>11}  {r['status']}")
        return "\n".join(lines)
    if "tokens" in first and "mechanism" in first:
        lines = [f"scaling sweep: batch {first['batch']}, dim {first['dim']}, {first['heads']} heads x {first['dim_head']}, "
                 f"{first['mode']}, {first['device']} {first['dtype']} ({first['provenance']['device']})",
                 f"{'mechanism':<24}{'tokens':>7}{'ms':>10}{'peak MB':>10}{'est GB':>9}{'GFLOPs':>10}  status"]
        for r in records:
            lines.append(f"{r['mechanism']:<24}{r['tokens']:>7}{text_cell(r['ms'], '.2f'):>10}{text_cell(r['peak_mb'], '.1f'):>10}"
                         f"{text_cell(r['estimate_gb'], '.3f'):>9}{text_cell(r['gflops'], '.2f'):>10}  {r['status']}")
        return "\n".join(lines)
    rows = [summary_row(r) for r in records]
    paths = [p for p in PATHS if any(f"train GB ({p})" in r for r in rows)]
    head = f"{'model':<18}{'paper params':>13}{'true params':>12}{'Size MB':>9}{'GMACs':>8}{'GFLOPs':>8}{'s003 GF':>8}"
    for p in paths:
        head += f"{'train GB ' + p:>19}{'step ms':>9}{'img/s':>9}"
    lines = [head]
    for r in rows:
        if "GFLOPs" not in r:
            lines.append(f"{r['model']:<18}  {r.get('status')}")
            continue
        line = (f"{r['model']:<18}{r['params (paper)']:>13,}{r['params (true)']:>12,}{r['Size MB']:>9.2f}"
                f"{r['GMACs']:>8.3f}{r['GFLOPs']:>8.3f}{r['GFLOPs (seed 003 conv.)']:>8.3f}")
        for p in paths:
            gb = r[f"train GB ({p})"]
            line += (f"{text_cell(gb, '.2f'):>19}{text_cell(r[f'train step ms ({p})'], '.1f'):>9}"
                     f"{text_cell(r[f'img/s ({p})'], '.1f'):>9}")
        lines.append(line)
    prov = records[0].get("provenance", {})
    lines.append(f"batch {rows[0].get('batch')}; device {prov.get('device')}; torch {prov.get('torch')}; "
                 f"commit {prov.get('commit')}; train GB = peak reserved; img/s on a CPU is a fixed-batch CPU timing")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# stored measurements (for GPU profiles read back on a CPU)

def measurement_path(profile, name, root=None):
    from .results import default_root

    return Path(root or default_root()) / profile / "measure" / f"{name}.json"


def save_measurements(obj, profile, name, root=None):
    data = json.dumps(jsonable(obj), indent=1, sort_keys=True)
    return atomic_write(measurement_path(profile, name, root), lambda f: f.write(data))


def load_measurements(profile, name, root=None):
    path = measurement_path(profile, name, root)
    return json.loads(path.read_text()) if path.exists() else None


# --------------------------------------------------------------------------------------------------
# command line

def add_arguments(parser):
    """The options of ``vixnb measure`` (for the command line in ``vixnb.cli``)."""
    parser.add_argument("models", nargs="+", help="registered model names (see `vixnb models`)")
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--json", action="store_true", help="print the records as JSON (one object per model)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--batch-size", type=int, default=None, help="training batch (default 64 on GPU, 4 on CPU)")
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="dtype of the fused path")
    parser.add_argument("--iters", type=int, default=None, help="throughput iterations (default 100 GPU, 3 CPU)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="model config override, VALUE parsed as YAML (e.g. --override depth=1)")
    return parser


def _overrides(pairs):
    import yaml

    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--override takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def run(args):
    from .registry import list_models

    unknown = [m for m in args.models if m not in list_models()]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)}; valid names: {', '.join(list_models())}")
    records = measure_many(args.models, dataset=args.dataset, device=args.device, batch_size=args.batch_size,
                           dtype=args.dtype, iters=args.iters, **_overrides(getattr(args, "override", None)))
    if args.json:
        for rec in records:
            print(json.dumps(rec))
    else:
        print(format_table(records))
    return records


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(prog="vixnb measure", description=__doc__.split("\n")[0]))
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
