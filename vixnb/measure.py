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

Command line: ``python -m vixnb.measure MODEL [MODEL ...] [--dataset D] [--json]`` (``add_arguments`` /
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
from .report import NOT_YET_RUN, _paper_file, page_table, provenance_line, short_name, text_cell
from .store import atomic_write

GB = 1024**3
MB = 1024**2
PROTOCOL = "seed 003 (Nauen et al., 'Which Transformer to Favor'), re-implemented in vixnb.measure"
CPU_BUDGET_GB = float(os.environ.get("VIXNB_CPU_BUDGET_GB", 4.0))
CPU_BUDGET_GFLOP = float(os.environ.get("VIXNB_CPU_BUDGET_GFLOP", 100.0))
CPU_MEMORY_NOTE = "skipped: CUDA memory statistics need a GPU"
PATHS = ("authors", "fused")
# Seed 003's published numbers live in vixnb/paper_results.yaml (key `favor`), as seed 000's do.
def _favor():
    return _paper_file()["favor"]


SEED003_RAM_FIT = {**_favor()["ram_fit"],
                   "source": "Nauen et al., 'Which Transformer to Favor': RAM[GB] ~ 25.43 * GFLOPs + 25.50"}
SEED003_TABLE2 = {row: {c: v for c, v in zip(_favor()["table2"]["columns"], values) if v is not None}
                  for row, values in _favor()["table2"]["rows"].items()}

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


@lru_cache(maxsize=1)
def _commit():
    from .train import git_commit
    return git_commit()


def resolve_device(device=None):
    return torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))


def provenance(device, *, dtype=None, batch_size=None):
    """Device name, dtype, batch size, torch / CUDA / vixnb versions, commit and time of a measurement."""
    from .train import device_name

    device = resolve_device(device)
    return {"device": device_name(device), "device_type": device.type,
            "dtype": dtype_name(dtype) if dtype is not None else None, "batch_size": batch_size,
            "torch": torch.__version__, "cuda": torch.version.cuda if device.type == "cuda" else None,
            "vixnb": __version__, "commit": _commit(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32 if device.type == "cuda" else None,
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


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


def _jsonable(obj):
    """Plain JSON types: dicts with string keys, lists, finite floats (non-finite -> None), str for the rest."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, torch.dtype):
        return dtype_name(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return _jsonable(obj.item())
    return str(obj)


@contextmanager
def execution_path(model, path):
    """``"authors"``: materialised softmax (and Nystrom's explicit softmax matrices); ``"fused"``: SDPA."""
    from .attention import NystromAttention, materialized

    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    nystrom = [m for m in model.modules() if isinstance(m, NystromAttention)]
    before = [m.fused for m in nystrom]
    for m in nystrom:
        m.fused = path == "fused"
    try:
        with materialized(model, path == "authors"):
            yield model
    finally:
        for m, b in zip(nystrom, before):
            m.fused = b


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
    return _jsonable(record) if json_ready else record


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
    from .attention import list_kinds
    from .models import VIX_MIXERS

    paper = {kind: opts for kind, opts in VIX_MIXERS.values()}
    out = []
    for kind in list_kinds():
        opts = dict(paper.get(kind, {}))
        if kind == "mlp":
            opts = {"expansion_factor": 1}
        if kind in ("softmax", "shaped"):
            out.append((f"{kind} (fused)", kind, opts))
            if include_materialized:
                out.append((f"{kind} (materialised)", kind, {**opts, "materialize": True}))
        elif kind == "nystrom":
            out.append((kind, kind, opts))
            if include_materialized:  # the authors' code forms the three softmax matrices explicitly
                out.append(("nystrom (unfused)", kind, {**opts, "fused": False}))
        else:
            out.append((kind, kind, opts))
    return out


MATERIALISED_SOFTMAX = "softmax (materialised)"  # the reference of ``vixnb bench mixers`` (vixnb.bench)


def _sweep_row(label, kind, options, n, *, dim, heads, dim_head, batch, device, dt, backward, warmup, steps,
               budget_gb, budget_gflop, cpu_memory=False, compile=False):
    """Time and memory of ``steps`` steps (after ``warmup``) of one mechanism at ``n`` tokens: one row of
    ``scaling_sweep``, and of ``vixnb bench mixers``. Memory (``peak_mb``, what it is in ``memory``): on CUDA
    the peak allocated during the timed steps less what was allocated before them; on a CPU, with
    ``cpu_memory``, the growth of the process's peak resident set size over its size before the first step
    (meaningful only in a fresh process, see ``vixnb.bench``), else not measured (``estimate_gb`` is the
    shape-based estimate). ``compile``: time the mixer through ``torch.compile`` (True, or a mode name). The CPU budget guard
    (``budget_gb``, ``budget_gflop``) skips a step before it runs."""
    from .attention import build

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

    ``kinds``: mixer kinds or mechanism labels to include (default: every kind of ``vixnb.attention``, with
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
            row = _sweep_row(label, kind, options, int(n), dim=dim, heads=heads, dim_head=dim_head, batch=batch,
                             device=device, dt=dt, backward=backward, warmup=warmup, steps=steps,
                             budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            row["provenance"] = prov
            rows.append(_jsonable(row))
            if progress:
                print(f"{label:<24} {n:>6} tokens: {row['status']} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows


SHAPE_METRICS = ("gflops", "estimate_gb")


def _value(row, metric):
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
                    a, b = _value(pts[n], metric), _value(by[ref][n], metric)
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
# tables, analysis and figures for the chapter

def _short_status(status):
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
        row[f"train GB ({path})"] = tr.get("peak_reserved_gb") if tr["status"] == "ok" else _short_status(tr["status"])
        row[f"train GB alloc ({path})"] = tr.get("peak_allocated_gb") if tr["status"] == "ok" else _short_status(tr["status"])
        row[f"train step ms ({path})"] = tr.get("step_ms")
        b64 = next((b for b in inf.get("batches", []) if b["batch_size"] == 64), None)
        row[f"infer GB @64 ({path})"] = (b64.get("peak_allocated_gb") if b64 and b64["status"] == "ok"
                                         else _short_status(b64["status"] if b64 else None))
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


def pareto_front(xs, ys, *, x_lower_is_better=True, y_higher_is_better=True):
    """Indices of the points no other point beats in both coordinates (None values are never on the front)."""
    pts = [(i, float(x), float(y)) for i, (x, y) in enumerate(zip(xs, ys)) if x is not None and y is not None
           and not (isinstance(x, float) and math.isnan(x)) and not (isinstance(y, float) and math.isnan(y))]
    sx = 1 if x_lower_is_better else -1
    sy = 1 if y_higher_is_better else -1

    def dominates(a, b):
        better_eq = sx * a[1] <= sx * b[1] and sy * a[2] >= sy * b[2]
        strictly = sx * a[1] < sx * b[1] or sy * a[2] > sy * b[2]
        return better_eq and strictly

    return sorted(i for i, *p in pts if not any(dominates(q, (i, *p)) for q in pts if q[0] != i))


def seed003_table2():
    """Seed 003's Table 2 (correlations between efficiency metrics) as a DataFrame, as printed."""
    import pandas as pd

    cols = ["θ", "FT Time", "FFwd Time", "FFwd Mem", "Train Mem"]
    return pd.DataFrame([[SEED003_TABLE2[r].get(c) for c in cols] for r in SEED003_TABLE2],
                        index=list(SEED003_TABLE2), columns=cols)


CORRELATION_COLUMNS = {  # seed 003's Table 2 label -> our column (training-step time stands in for FT Time)
    "FLOPS": "GFLOPs (seed 003 conv.)",
    "θ": "params (true)",
    "FT Time": "train step ms ({path})",
    "FFwd Time": "ms per image ({path})",
    "FFwd Mem": "infer GB @64 ({path})",
    "Train Mem": "train GB alloc ({path})",
}


def correlation_table(frame, *, path="fused", min_points=3):
    """Pearson correlations between our efficiency metrics under seed 003's Table 2 labels (upper triangle).
    Columns with fewer than ``min_points`` numeric values (e.g. GPU memory on a CPU) are left out;
    "FT Time" is our training-step time (seed 003 measured fine-tuning time), "FFwd Time" is 1 / throughput."""
    import pandas as pd

    data = {}
    for label, col in CORRELATION_COLUMNS.items():
        col = col.format(path=path)
        values = pd.to_numeric(frame[col], errors="coerce") if col in frame else None
        if values is not None and values.notna().sum() >= min_points:
            data[label] = values
    corr = pd.DataFrame(data).astype(float).corr()
    labels = list(corr.columns)
    rows = {a: {b: (round(corr.loc[a, b], 2) if labels.index(b) > labels.index(a) else None) for b in labels[1:]}
            for a in labels[:-1]}
    return pd.DataFrame.from_dict(rows, orient="index")


def _label(name):
    """The short model name of a figure or table (ViT, Hybrid ViN); reference architectures keep theirs."""
    return short_name(str(name))


def plot_pareto_fronts(frame, accuracy, *, path="fused", title=None):
    """Seed 003's Pareto fronts: accuracy against throughput, inference memory, training memory and
    parameters, two by two. ``accuracy``: model -> top-1 (or None), or ``accuracy_records`` output. Panels
    without numbers say why ("not measured on this device"); an empty ``frame`` (not yet run) draws nothing
    and returns None."""
    import matplotlib.pyplot as plt
    import pandas as pd

    if frame.empty:
        return None

    if not isinstance(accuracy, dict):
        accuracy = {a["model"]: a["top1"] for a in accuracy}
    panels = [(f"img/s ({path})", "throughput (images/s)", False), (f"infer GB @64 ({path})", "inference memory @64 (GB)", True),
              (f"train GB alloc ({path})", "training memory (GB allocated)", True), ("params (true)", "parameters", True)]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    acc = pd.Series({m: accuracy.get(m) for m in frame.index}, dtype="float64")
    for ax, (col, label, lower) in zip(axes.flat, panels):
        xs = pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(dtype="float64")
        pts = pd.DataFrame({"x": xs, "y": acc}).dropna()
        ax.set_xlabel(label)
        ax.set_ylabel("top-1 (%)")
        if pts.empty:
            why = "not measured on this device" if xs.isna().all() else "no accuracy yet"
            ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        front = pareto_front(list(pts["x"]), list(pts["y"]), x_lower_is_better=lower)
        on = pts.iloc[front].sort_values("x")
        ax.scatter(pts["x"], pts["y"], s=18, color="tab:blue")
        ax.scatter(on["x"], on["y"], s=60, facecolors="none", edgecolors="tab:red")
        if len(on) > 1:
            ax.step(on["x"], on["y"], where="post" if lower else "pre", color="tab:red", lw=1)
        if col == "params (true)":
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        for name, (x, y) in pts.iterrows():
            ax.annotate(_label(name), (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax.margins(x=0.12, y=0.12)
        if "img/s" in col and frame.get("device") is not None and str(frame["device"].iloc[0]).startswith("cpu"):
            ax.set_title("CPU timing, fixed batch", fontsize=9)
    fig.suptitle(title or "accuracy against efficiency (red circles: the Pareto front)", fontsize=11)
    fig.tight_layout()
    return fig


def plot_memory_fit(frame, *, path="authors", title=None):
    """Training memory (GB allocated) against GFLOPs (seed 003 convention) with our least-squares line and
    seed 003's RAM[GB] ~ 25.43 GFLOPs + 25.50. Returns (figure, fit dict or None); (None, None) for an
    empty ``frame`` (not yet run)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    if frame.empty:
        return None, None

    column = "GFLOPs (seed 003 conv.)"
    x = pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(dtype="float64")
    y = pd.to_numeric(frame.get(f"train GB alloc ({path})"), errors="coerce") if f"train GB alloc ({path})" in frame else None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    fit = None
    grid = [0, float(x.max()) * 1.1] if x.notna().any() else [0, 1]
    ax.plot(grid, [SEED003_RAM_FIT["slope_gb_per_gflop"] * g + SEED003_RAM_FIT["intercept_gb"] for g in grid],
            color="grey", ls="--", label="seed 003: 25.43 x + 25.50")
    if y is None or y.notna().sum() < 2:
        ax.text(0.5, 0.3, "our training memory is not measured on this device", ha="center", va="center",
                transform=ax.transAxes)
    else:
        pts = pd.DataFrame({"x": x, "y": y}).dropna()
        slope, intercept = fit_line(pts["x"], pts["y"])
        r = float(pts["x"].corr(pts["y"])) if len(pts) > 2 else None
        fit = {"slope_gb_per_gflop": slope, "intercept_gb": intercept, "pearson_r": r, "points": len(pts)}
        ax.scatter(pts["x"], pts["y"], s=18)
        for name, (px, py) in pts.iterrows():
            ax.annotate(_label(name), (px, py), fontsize=7, xytext=(2, 2), textcoords="offset points")
        ax.plot(grid, [slope * g + intercept for g in grid], color="tab:red", label=f"ours: {slope:.2f} x + {intercept:.2f}")
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_xlabel("GFLOPs per image (seed 003 convention)")
    ax.set_ylabel(f"training memory, GB allocated ({path} path)")
    ax.set_title(title or "training memory against FLOPs", fontsize=10)
    fig.tight_layout()
    return fig, fit


def plot_scaling(rows, *, metrics=("ms", "peak_mb", "estimate_gb"), title=None):
    """Log-log curves of each mechanism against tokens, one panel per metric with any values (None without
    ``rows``: not yet run)."""
    import matplotlib.pyplot as plt

    if not rows:
        return None

    labels = {"ms": "time per step (ms)", "peak_mb": "peak memory (MB, measured)",
              "estimate_gb": "memory estimate (GB, from shapes)", "gflops": "forward GFLOPs"}
    panels = [m for m in metrics if any(r.get(m) is not None for r in rows)]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5.2 * max(len(panels), 1), 4), squeeze=False)
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    colors = plt.get_cmap("tab20").colors
    for ax, metric in zip(axes[0], panels):
        for i, mech in enumerate(mechs):
            pts = [(r["tokens"], r[metric]) for r in rows if r["mechanism"] == mech and r.get(metric) is not None]
            if pts:
                style = "--" if "materialised" in mech or "unfused" in mech else "-"
                ax.plot(*zip(*pts), style, marker="os^Dv"[i % 5], ms=3, color=colors[(2 * i) % 20 + (i >= 10)],
                        label=mech)
            oom = [r["tokens"] for r in rows if r["mechanism"] == mech and r.get("status") == "oom"]
            for n in oom:
                ax.axvline(n, color="grey", lw=0.5, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel(labels.get(metric, metric))
    if not panels:
        axes[0][0].text(0.5, 0.5, "nothing measured", ha="center", va="center",
                        transform=axes[0][0].transAxes)
        axes[0][0].set_xticks([])
        axes[0][0].set_yticks([])
    else:
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if rows:
        r0 = rows[0]
        fig.suptitle(title or f"token mixers, {r0['mode']}, batch {r0['batch']}, dim {r0['dim']}, "
                     f"{r0['provenance']['device']} {r0['dtype']}", fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------
# stored measurements (for GPU profiles read back on a CPU) and accuracy from the results store

def measurement_path(profile, name, root=None):
    from .store import default_root

    return Path(root or default_root()) / profile / "measure" / f"{name}.json"


def save_measurements(obj, profile, name, root=None):
    data = json.dumps(_jsonable(obj), indent=1, sort_keys=True)
    return atomic_write(measurement_path(profile, name, root), lambda f: f.write(data))


def load_measurements(profile, name, root=None):
    path = measurement_path(profile, name, root)
    return json.loads(path.read_text()) if path.exists() else None


def accuracy_records(models, *, dataset="cifar10", profile="smoke", seed=0, train=False, root=None):
    """Top-1 of each model from the results store at ``root`` (default: ``store.default_root``), looked up by
    ``train.run``: ``{"model", "top1", "status"}``. Missing runs are trained only when ``train`` (and the
    profile can run here); otherwise they are "not yet run"."""
    from .store import ResultsStore
    from .train import run

    store = ResultsStore(root)
    out = []
    for name in models:
        res = run(name, dataset=dataset, profile=profile, seed=seed, store=store, progress=False, train_missing=train)
        if res.get("status") != "done":
            out.append({"model": name, "top1": None, "status": "not yet run"})
        else:
            out.append({"model": name, "top1": res["top1"], "status": "done", "dataset": res["config"]["dataset"],
                        "device": res["provenance"]["device"], "commit": res["provenance"]["commit"]})
    return out


# --------------------------------------------------------------------------------------------------
# the efficiency chapter (notebooks/efficiency.ipynb): settings, measurements and display-ready tables

NOT_ON_CPU = "**not measured on this device** (CUDA memory statistics need a GPU)"
# Efficiency views: (column label on the page, column of ``records_frame``); "{path}" columns come once per path.
EFFICIENCY_VIEWS = {
    "size": [("params (ViX conv.)", "params (paper)"), ("params (true)", "params (true)"), ("Size MB", "Size MB"),
             ("GMACs", "GMACs"), ("GFLOPs", "GFLOPs"), ("GFLOPs (seed 003)", "GFLOPs (seed 003 conv.)")],
    "memory": [("train GB", "train GB ({path})"), ("train GB alloc", "train GB alloc ({path})"),
               ("infer GB @64", "infer GB @64 ({path})")],
    "speed": [("train step ms", "train step ms ({path})"), ("img/s", "img/s ({path})"),
              ("img/s batch", "img/s batch ({path})")],
    "paths": [("train GB", "train GB ({path})"), ("train step ms", "train step ms ({path})")],
}
SWEEP_LABELS = {"ms": "ms per step", "peak_mb": "peak MB", "gflops": "GFLOPs", "estimate_gb": "estimate GB"}


def efficiency_chapter_settings(profile="smoke", *, models=None, batch_size=None, tokens=None, iters=None,
                                accuracy_models=None, gpu=None):
    """The efficiency chapter's parameters resolved from ``profile``: a dict of ``profile``, ``smoke``,
    ``device`` ("cuda" for a GPU profile on a machine with a GPU (``gpu``, default: detected), else "cpu"),
    ``models`` (default every registered model), ``overrides`` (the smoke profile's one-block models),
    ``batch_size`` (training memory: 2 in smoke, else 64, the ViX paper's Figure 4), ``tokens`` of the scaling
    sweep (256 and 1024 on a CPU; up to 16384 on a GPU), ``iters`` (throughput forwards: 2 on a CPU, None =
    seed 003's 100 on a GPU) and ``accuracy_models`` (default all; smoke: vit and fnet, to stay fast)."""
    from .profiles import get_profile
    from .registry import list_models

    prof = get_profile(profile)
    smoke = profile == "smoke"
    gpu = torch.cuda.is_available() if gpu is None else gpu
    device = "cuda" if gpu and not smoke else "cpu"
    models = list(models or list_models())
    return {"profile": profile, "smoke": smoke, "device": device, "models": models,
            "overrides": dict(prof.get("model_overrides", {})) if smoke else {},
            "batch_size": batch_size or (2 if smoke else 64),
            "tokens": tuple(tokens or ((256, 1024) if device == "cpu" else (256, 1024, 4096, 16384))),
            "iters": iters or (2 if device == "cpu" else None),
            "accuracy_models": list(accuracy_models or (["vit", "fnet"] if smoke else models))}


def load_or_measure(settings, *, dataset="cifar10", remeasure=False, measure_missing=True, name="efficiency",
                    root=None):
    """The chapter's measurements: ``settings`` (``efficiency_chapter_settings``) plus ``records``
    (``measure_many``), ``sweep`` (``scaling_sweep``), ``frame`` (``records_frame``), ``source``, ``root``
    (the results store the measurements, and ``chapter_accuracy``'s training runs, are read from) and
    ``measure_missing``.

    A GPU profile reads its stored measurements (``load_measurements``) unless ``remeasure``; without them
    it measures when it runs on a GPU and saves them (``save_measurements``), and on a CPU it measures
    nothing: ``source`` starts with "not yet run". The smoke profile always measures, on the CPU, and saves
    nothing. Stored measurements bring their own device, batch size and sweep sizes.
    ``measure_missing=False`` measures nothing on any device (``remeasure`` is ignored): stored measurements,
    else "not yet run"; ``chapter_accuracy`` then trains nothing either."""
    run = dict(settings)
    smoke, device = run["smoke"], run["device"]
    stored = None if smoke or (remeasure and measure_missing) else load_measurements(run["profile"], name, root)
    if stored is not None:
        records, sweep = stored["records"], stored["sweep"]
        run.update(device=stored["device"], batch_size=stored["batch_size"],
                   tokens=tuple(sorted({r["tokens"] for r in sweep})) or run["tokens"],
                   source="stored measurements of this profile (results store)")
    elif measure_missing and (smoke or device == "cuda"):
        cpu = device == "cpu"
        records = measure_many(run["models"], dataset=dataset, device=device, batch_size=run["batch_size"],
                               iters=run["iters"], steps=1 if cpu else 2, cpu_batch=2 if cpu else None,
                               **run["overrides"])
        sweep = scaling_sweep(tokens=run["tokens"], device=device, steps=2 if cpu else 10, warmup=1 if cpu else 3)
        if not smoke:
            save_measurements({"records": records, "sweep": sweep, "device": device,
                               "batch_size": run["batch_size"]}, run["profile"], name, root)
        run["source"] = "measured in this run"
    else:
        records, sweep = [], []
        why = "this profile needs a GPU" if measure_missing else "this page measures nothing"
        run["source"] = f"not yet run: {why} and no stored measurements exist"
    run.update(records=records, sweep=sweep, frame=records_frame(records), root=root, measure_missing=measure_missing)
    return run


def measure_references(names, settings, *, cpu_only=False):
    """Seed 003's kind of model beside ours: the ``timm`` architectures ``names`` (random weights, 224 x 224),
    measured like ``load_or_measure``'s models (on a CPU parameters and FLOPs only). ``cpu_only`` runs on the
    CPU whatever ``settings["device"]``, so nothing is measured on a GPU (pages rendered from stored results).
    Returns a dict like ``load_or_measure``'s; ``source`` says when ``timm`` is not installed."""
    import importlib.util

    device = "cpu" if cpu_only else settings["device"]
    run = {**settings, "device": device, "names": list(names), "sweep": []}
    if importlib.util.find_spec("timm") is None:
        records = []
        run["source"] = (f"`timm` is not installed here: the reference architectures ({', '.join(names)}) are "
                         "**not measured** on this page.")
    else:
        import timm

        cpu = device == "cpu"
        records = [measure_model(timm.create_model(n, pretrained=False), name=n, input_size=(3, 224, 224),
                                 device=device, batch_size=settings["batch_size"], iters=settings["iters"],
                                 paths=() if cpu else ("fused",), cpu_batch=2) for n in names]
        run["source"] = "measured in this run" + (": on a CPU only parameters and FLOPs" if cpu else "")
    run.update(records=records, frame=records_frame(records))
    return run


def _device_of(run):
    prov = next((r["provenance"] for r in run["records"] if r.get("provenance")), None)
    return prov["device"] if prov else provenance(run["device"])["device"]


def _empty_note(run):
    return NOT_YET_RUN if run["source"].startswith("not yet run") else run["source"]


def measurement_note(run):
    """Markdown: where the chapter's numbers come from (measured, stored, not yet run), device, batch, sweep
    (only the first when nothing was measured: no device, batch or sweep is behind the page)."""
    if run["source"].startswith("not yet run"):
        return f"Measurements: {run['source']}."
    note = (f"Measurements: {run['source']}; device: **{_device_of(run)}**; training batch {run['batch_size']}; "
            f"sweep tokens {list(run['tokens'])}.")
    if run["overrides"]:
        note += f" Model overrides {run['overrides']}: the smoke profile's one-block models."
    return note


def provenance_note(run, part="records"):
    """Markdown: ``report.provenance_line`` of a run's ``records`` or ``sweep`` (it says so when nothing was
    measured)."""
    return provenance_line(run[part], profile=run["profile"])


def _has_number(frame):
    import pandas as pd

    return bool(frame.apply(pd.to_numeric, errors="coerce").notna().to_numpy().any())


def efficiency_view(run, view):
    """One narrow view of ``run["frame"]`` with short model names: ``view`` is "size" (parameters, Size MB,
    FLOPs), "memory" (training and inference GB per path), "speed" (training step and throughput per path),
    "paths" (training GB and step time, authors' path against fused) or "all" (every column, flat labels,
    for a few models shown transposed); per-path views have (path, metric) columns. Columns the records do
    not have are left out."""
    import pandas as pd

    frame = run["frame"]
    if view == "all":
        parts = [efficiency_view(run, v) for v in ("size", "memory", "speed")]
        for part in parts[1:]:
            part.columns = [f"{metric} ({path})" for path, metric in part.columns]
        return pd.concat(parts, axis=1)
    spec = EFFICIENCY_VIEWS[view]
    if view == "size":
        cols = {label: col for label, col in spec if col in frame}
    else:
        order = [(p, label, col.format(path=p)) for p in PATHS for label, col in spec]
        if view == "paths":  # metric over path: both paths of one metric side by side
            order = [(label, p, col.format(path=p)) for label, col in spec for p in PATHS]
        cols = {(a, b): col for a, b, col in order if col in frame}
    out = pd.DataFrame({key: frame[col] for key, col in cols.items()}, index=frame.index)
    if view != "size":
        out.columns = pd.MultiIndex.from_tuples(list(out.columns), names=[None, None])
    out.index = [_label(m) for m in frame.index]
    return out


def efficiency_table(run, view, *, caption=None, transpose=False):
    """``efficiency_view`` for the page (``page_table``; ``transpose``: one column per model): "not yet run"
    when nothing was measured, and a one-line note instead of a table of "n/a (cpu)" when this device
    measured none of its numbers."""
    table = efficiency_view(run, view)
    table = table.T if transpose else table
    if run["frame"].empty:
        return page_table(table, empty=_empty_note(run))
    if not _has_number(table):
        what = {"memory": f"Training and inference memory: {NOT_ON_CPU}.",
                "speed": "Training-step time and throughput: **not measured** for these models on this device."}
        return page_table(None, empty=what.get(view, f"{view}: **not measured on this device**."))
    return page_table(table, caption=caption)


def memory_note(run):
    """Markdown: what fills the GPU-memory columns when this device cannot; else the provenance line."""
    if run["frame"].empty or run["device"] != "cpu":
        return provenance_note(run)
    return (f"GPU memory is {NOT_ON_CPU}; run the `budget` or `paper` profile on a GPU to fill these columns "
            "(and Table 1's GPU (GB) column via `vixnb.measure.gpu_memory_column`).")


def chapter_accuracy(run, *, dataset="cifar10"):
    """``accuracy_records`` of ``run["accuracy_models"]`` in the run's results store: stored runs of the profile;
    the smoke profile trains the missing ones (a few batches of synthetic data) unless the run measures
    nothing (``load_or_measure(..., measure_missing=False)``), other profiles mark them "not yet run"."""
    train = run["smoke"] and run.get("measure_missing", True)
    return accuracy_records(run["accuracy_models"], dataset=dataset, profile=run["profile"], train=train,
                            root=run.get("root"))


def accuracy_note(run, accuracy):
    """Markdown: how many models have an accuracy for the Pareto fronts, which are missing, and provenance."""
    missing = [a["model"] for a in accuracy if a["status"] != "done"]
    note = (f"Accuracy: {len(accuracy) - len(missing)} of {len(accuracy)} models have a stored `{run['profile']}` run"
            + (f"; not yet run: {', '.join(map(_label, missing))}" if missing else "") + ".")
    if run["smoke"]:
        note += " (In smoke, models not listed in `accuracy_models` are not trained, to keep the page fast.)"
    return note + " " + provenance_note(run)


def our_correlation_table(run, *, path="fused"):
    """``correlation_table`` of the run for the page, or a note when too few metrics were measured."""
    if run["frame"].empty:
        return page_table(None, empty=NOT_YET_RUN)
    ours = correlation_table(run["frame"], path=path)
    caption = f"Ours ({len(run['frame'])} models, {path} path)"
    return page_table(ours, caption=caption, blank="", decimals=2,
                      empty="Not enough measured metrics on this device for a correlation table.")


def correlation_note(run):
    """Markdown: the provenance line, and what CPU timings in the correlation table are worth."""
    note = provenance_note(run)
    if run["frame"].empty or run["device"] != "cpu":
        return note
    return ("On a CPU the timings are wall-clock times of tiny batches on a shared machine: their correlations "
            "say more about the machine's load than about the models. " + note)


def memory_fit_note(run, fit):
    """Markdown: our fit of training memory against GFLOPs (``plot_memory_fit``) beside seed 003's, and why
    there is none when there is none."""
    theirs = "Seed 003's line is RAM[GB] ≈ 25.43 · GFLOPs + 25.50"
    if run["frame"].empty:
        return f"{NOT_YET_RUN} {theirs}."
    if fit is None:
        note = f"Training memory is {NOT_ON_CPU}: no fit is made. {theirs}."
    else:
        note = (f"Ours (batch {run['batch_size']}, authors' path, {fit['points']} models): RAM[GB] ≈ "
                f"{fit['slope_gb_per_gflop']:.2f} · GFLOPs + {fit['intercept_gb']:.2f}"
                + (f", Pearson r = {fit['pearson_r']:.2f}" if fit["pearson_r"] is not None else "")
                + ". Seed 003: RAM[GB] ≈ 25.43 · GFLOPs + 25.50 (correlation 0.85).")
    return note + " " + provenance_note(run)


def _sweep_cell(row, metric):
    v = _value(row, metric)
    if v is None:
        return _short_status(row.get("status")) if not str(row.get("status", "ok")).startswith("ok") else None
    return "oom" if math.isinf(v) else v


def sweep_table(run, metrics=("ms", "peak_mb")):
    """The scaling sweep for the page: one row per mechanism, (metric, tokens) columns; "oom" and "skipped
    (budget)" where a step did not run, metrics without any value (GPU memory on a CPU) left out."""
    import pandas as pd

    rows = run["sweep"]
    metrics = [m for m in metrics if any(_value(r, m) is not None and math.isfinite(_value(r, m)) for r in rows)]
    columns = [(SWEEP_LABELS.get(m, m), n) for m in metrics for n in sorted({int(r["tokens"]) for r in rows})]
    cells = {}
    for metric in metrics:
        for r in rows:
            key = (SWEEP_LABELS.get(metric, metric), int(r["tokens"]))
            cells.setdefault(r["mechanism"], {})[key] = _sweep_cell(r, metric)
    frame = pd.DataFrame.from_dict(cells, orient="index")
    if not frame.empty:
        frame = frame[columns]
        frame.columns = pd.MultiIndex.from_tuples(columns, names=["", "tokens"])
    caption = f"batch {rows[0]['batch']}, dim {rows[0]['dim']}, {rows[0]['mode']}" if rows else None
    return page_table(frame, caption=caption, empty=_empty_note(run) if not rows else "Nothing measured.")


def crossover_table(run, reference="softmax (fused)"):
    """``crossover_frame`` against one ``reference`` for the page: time and shape-based metrics, and measured
    peak memory where the sweep ran on a GPU."""
    metrics = ["ms", "peak_mb", "gflops", "estimate_gb"] if run["device"] == "cuda" else ["ms", "gflops", "estimate_gb"]
    xs = crossovers(run["sweep"], references=(reference,))
    frame = crossover_frame(xs, metrics=metrics) if xs else None
    if frame is not None and not frame.empty:
        frame.columns = [SWEEP_LABELS.get(m, m) for _, m in frame.columns]
    return page_table(frame, caption=f"cheaper than {reference}", empty=_empty_note(run))


def _fused_memory(run):
    """Each mechanism at the sweep size nearest the ViX sequence length, relative to both softmax forms."""
    import pandas as pd

    if not run["sweep"]:
        return pd.DataFrame(), {}
    near = min(run["tokens"], key=lambda n: abs(n - 1025))
    at = {r["mechanism"]: r for r in run["sweep"] if r["tokens"] == near}
    gpu = run["device"] == "cuda"
    metric, column = ("peak_mb", "peak MB") if gpu else ("estimate_gb", "estimate GB")
    what = "measured peak memory (MB)" if gpu else "shape-based memory estimate (GB)"
    def measured(r, m):  # a finite number, None where the step did not run or ran out of memory
        v = _value(r, m)
        return v if v is not None and math.isfinite(v) else None

    mat, fus = (measured(at.get(f"softmax ({f})"), metric) for f in ("materialised", "fused"))
    rows = {}
    for mech, r in at.items():
        v = measured(r, metric)
        rows[mech] = {column: v, "ms per step": measured(r, "ms"),
                      "× materialised softmax": v / mat if v and mat else None,
                      "× fused softmax": v / fus if v and fus else None}
    meta = {"tokens": near, "batch": run["sweep"][0]["batch"], "what": what,
            "device": run["sweep"][0]["provenance"]["device"]}
    return pd.DataFrame.from_dict(rows, orient="index"), meta


def fused_memory_table(run):
    """The ViX memory claim with fused attention: each mechanism's memory at the sweep size nearest 1,025
    tokens, relative to the materialised and to the fused softmax."""
    table, meta = _fused_memory(run)
    caption = f"{meta['tokens']} tokens, batch {meta['batch']}, {meta['what']}" if meta else None
    return page_table(table, caption=caption, empty=_empty_note(run))


def fused_memory_note(run):
    """Markdown: how much memory the materialised softmax costs over the fused one, and where the
    linear-attention mechanisms fall against each; then the sweep's provenance line."""
    table, meta = _fused_memory(run)
    note = provenance_note(run, "sweep")
    if table.empty:
        return note
    rel = table["× fused softmax"]
    linear = rel[[m for m in table.index if m.startswith(("performer", "linformer", "nystrom", "linear"))]].dropna()
    ratio = rel.get("softmax (materialised)")
    if linear.empty or not ratio or math.isnan(ratio):
        return note
    return (f"At this size the materialised softmax needs {ratio:.1f}× the memory of the fused one "
            f"({meta['what']}, {meta['device']}). Relative to the materialised softmax the linear-attention "
            f"mechanisms need {linear.min() / ratio:.2f}–{linear.max() / ratio:.2f}×; relative to the fused "
            f"softmax, {linear.min():.2f}× ({linear.idxmin()}) to {linear.max():.2f}× ({linear.idxmax()}). " + note)


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
