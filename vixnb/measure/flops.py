"""Counting from shapes on the ``meta`` device: FLOPs (``torch.utils.flop_counter``) with the `favor` paper's
per-operation costs, the `cxv` paper's layer-only MACs (``paper_macs``), the allocation volume of a step, and the CPU
budget guard built on them."""
from __future__ import annotations

import copy
import math
from contextlib import ExitStack
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from ..models.counting import input_size_of
from ..validate import POSITIVE, checked, env_number
from .runtime import GB, execution_path, local_rng


RATE_CAP = 0.4  # of a GPU's peak matrix throughput: the most a rate fitted to FLOPs may reach (``plan.estimates``)
#: dense matrix throughput (TFLOP/s) of each GPU at the precision it trains a bf16 run in
#: (``engine.precision.machine_precision``), from the vendors' data sheets
GPUS = {"h100": (989.0, "bf16"), "a100": (312.0, "bf16"), "l4": (121.0, "bf16"), "t4": (65.0, "fp16"),
        "p100": (18.7, "fp16")}
CONVENTIONS = {
    "matmul_flops": "torch.utils.flop_counter: matrix products and convolutions, FLOPs = 2 x MACs",
    "macs": "matmul_flops / 2 (multiply-accumulates of matrix products and convolutions)",
    "extra_op_flops": "the favor paper's per-op costs: softmax 5/element, GELU 8/element, exp/log 20/element, "
                      "FFT 5 N log2 N (complex) or 2.5 N log2 N (real), N = points per transform",
    "flops": "matmul_flops + extra_op_flops (FLOPs = 2 x MACs convention, plus the favor paper's per-op costs)",
    "elementwise_flops": "the favor paper's element-wise handlers: add/sub/mul/div/reciprocal 1, pow 3, sigmoid 22, "
                         "layer norm 5, mean/sum/avg-pool ~1 per input element",
    "favor_flops": "macs + extra_op_flops + elementwise_flops: approximates the favor paper's fvcore convention "
                   "(one FLOP per MAC); the convention of their RAM ~ GFLOPs fit",
}

DEFAULT_CPU_BUDGET_GB = 4.0
DEFAULT_CPU_BUDGET_GFLOP = 100.0

_SDPA_KERNELS = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_fused_attention_overrideable"}
_SOFTMAX = {"_softmax", "_safe_softmax", "_log_softmax"}
_EXP_LOG = {"exp", "exp_", "log", "log_"}
_FFT = {"_fft_c2c": 5.0, "_fft_r2c": 2.5, "_fft_c2r": 2.5}
_ELEMENTWISE_1 = {"add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "reciprocal", "reciprocal_",
                  "scatter_add", "scatter_add_"}
_REDUCE_IN = {"mean", "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool1d"}


def _fft_points(shape, dims):
    dims = [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    return math.prod(int(shape[d]) for d in dims)


class OpCosts(TorchDispatchMode):
    """The favor paper's per-op costs by category (``extra``, ``elementwise``), plus the allocation volume
    (``volume``: bytes of every new tensor) of what runs under it."""

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
            self.extra["softmax"] += 5 * math.prod(q.shape[:-1]) * k.shape[-2]
        elif name == "gelu":
            self.extra["gelu"] += 8 * res.numel()
        elif name in _EXP_LOG:
            self.extra["exp_log"] += 20 * res.numel()
        elif name in _FFT:
            dims = args[1]
            signal = res.shape if name == "_fft_c2r" else first.shape  # the real-side / full signal
            points = _fft_points(signal, dims)
            self.extra["fft"] += int(_FFT[name] * math.prod(signal) * math.log2(max(points, 2)))
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
            rows = math.prod(q.shape[:-1])
            self.costs.volume += rows * v.shape[-1] * q.element_size() + rows * 4
            return out
        return func(*args, **kwargs)


def _sdpa_cpu_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    """Q K^T and A V of (b, h, Sq, d) queries, (b, h, Sk, d) keys, (b, h, Sk, dv) values: 2 FLOPs per MAC."""
    *lead, sq, d = query_shape
    sk, dv = key_shape[-2], value_shape[-1]
    return 2 * math.prod(lead) * sq * sk * d + 2 * math.prod(lead) * sq * sk * dv


@cache
def _custom_flop_formulas():
    """``torch.utils.flop_counter`` has no formula for the CPU flash kernel; it is the same count as the others."""
    if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
        return {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_flop}
    return {}


def count_ops(module, make_input, *, backward=False, on_meta=True):
    """Run ``module`` once on ``make_input(device)`` under the counters (on a ``meta`` copy by default: shapes
    only, nothing computed); return (``torch.utils.flop_counter`` counts by op, ``OpCosts``)."""
    costs = OpCosts()
    if on_meta:
        module = copy.deepcopy(module).to("meta")
        device = torch.device("meta")
    else:
        device = next((p.device for p in module.parameters()), torch.device("cpu"))
    counter = FlopCounterMode(display=False, custom_mapping=_custom_flop_formulas())
    with ExitStack() as stack:
        stack.enter_context(local_rng(device if device.type == "cuda" else "cpu"))
        x = make_input(device)
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

    Returns ``macs``, ``matmul_flops`` (= 2 x macs, torch.utils.flop_counter), ``extra_op_flops`` (the favor
    paper's softmax/GELU/exp-log/FFT costs; ``extra_ops`` by category), ``flops`` (matmul + extra: our
    headline, FLOPs = 2 x MACs), ``elementwise_flops`` and ``favor_flops`` (macs + extra + elementwise,
    approximating the favor paper's one-FLOP-per-MAC convention), their ``g*`` versions in units of 1e9,
    ``by_op`` (the flop counter's table) and ``conventions`` (what each number means). ``per_op_costs=False``
    leaves the per-op costs out (``extra_op_flops`` = ``elementwise_flops`` = 0). The count does not depend on
    ``path`` except through the ops each path calls (both form the same products)."""
    size = input_size_of(model, input_size)
    was_training = model.training
    model.eval()
    try:
        with execution_path(model, path):
            try:
                by_op, costs = count_ops(model, lambda d: torch.zeros(1, *size, device=d), on_meta=True)
                counted_on = "meta (shapes only)"
            except (NotImplementedError, RuntimeError):  # an op without a meta kernel: count for real
                by_op, costs = count_ops(model, lambda d: torch.zeros(1, *size, device=d), on_meta=False)
                counted_on = "real forward on the model's device"
    finally:
        model.train(was_training)
    matmul = sum(by_op.values())
    extra = dict(costs.extra) if per_op_costs else {k: 0 for k in costs.extra}
    extra_total = sum(extra.values())
    elementwise = costs.elementwise if per_op_costs else 0
    macs = matmul // 2
    favor = macs + extra_total + elementwise
    return {
        "input_size": list(size), "images": 1, "path": path, "counted_on": counted_on,
        "macs": macs, "matmul_flops": matmul, "extra_op_flops": extra_total, "extra_ops": extra,
        "flops": matmul + extra_total, "elementwise_flops": elementwise, "favor_flops": favor,
        "gmacs": macs / 1e9, "gflops": (matmul + extra_total) / 1e9, "favor_gflops": favor / 1e9,
        "by_op": by_op, "per_op_costs": per_op_costs, "conventions": CONVENTIONS,
    }


_PAPER_MAC_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                     nn.ConvTranspose3d)


def _layer_macs(module, output):
    """Multiply-accumulates of one call of a Linear (output elements x in_features) or a convolution, transposed ones
    included (output elements x in_channels / groups x kernel volume, as layer counters such as thop count them; a
    transposed convolution really computes input elements x out_channels / groups x kernel volume); biases add none."""
    if isinstance(module, nn.Linear):
        return output.numel() * module.in_features
    return output.numel() * (module.in_channels // module.groups) * math.prod(module.kernel_size)


def _hooked_macs(model, size, device):
    total = 0

    def hook(module, _inputs, output):
        nonlocal total
        total += _layer_macs(module, output)

    with ExitStack() as stack:
        for m in model.modules():
            if isinstance(m, _PAPER_MAC_LAYERS):
                stack.callback(m.register_forward_hook(hook).remove)
        stack.enter_context(local_rng(device if device.type == "cuda" else "cpu"))
        stack.enter_context(torch.no_grad())
        model(torch.zeros(1, *size, device=device))
    return total


def paper_macs(model, input_size=None):
    """The MACs the `cxv` paper's "MACs" column counts: every call of an ``nn.Linear`` (output elements x
    in_features) and of a convolution, ``nn.Conv1d``/``2d``/``3d`` and the transposed ones (output elements x
    in_channels / groups x kernel volume; subclasses such as Nystrom's residual ``TokenConv`` included), for one image
    in eval mode, counted by forward hooks on a ``meta`` copy of the model (shapes only; a real forward on the model's
    device if an op has no meta kernel). Biases, norms, activations, pooling and softmax add nothing.

    Matrix products that are not layers -- the attention products (Q K^T, A V; Nystrom's landmark products, the
    Performer's feature maps, the linear attention's K^T V) made by ``matmul``/``einsum``/SDPA -- are NOT counted:
    the paper's counter hooks modules, and its figures match this count (ViT-10/4: 1.343 G here, 1.34 G printed),
    not the true cost. ``flops(model)["macs"]`` counts every matrix product (ViT-10/4: about 2.69 G more, its
    attention products). The input size is resolved as ``count_params`` does (``input_size`` or the
    ``create_model`` record)."""
    size = input_size_of(model, input_size)
    was_training = model.training
    model.eval()
    try:
        try:
            copy_ = copy.deepcopy(model).to("meta")
            return _hooked_macs(copy_, size, torch.device("meta"))
        except (NotImplementedError, RuntimeError):  # an op without a meta kernel: count for real
            device = next((p.device for p in model.parameters()), torch.device("cpu"))
            return _hooked_macs(model, size, device)
    finally:
        model.train(was_training)


@checked("optimizer_states")
def estimate(module, make_input, *, training, optimizer_states=2):
    """Shape-based (meta) estimate of one step: ``{"gb", "gflop"}``.

    ``gb`` is an upper bound: the bytes of every tensor the forward allocates (fused attention counted as
    its kernel allocates: output and log-sum-exp), doubled for training (backward), plus the weights (and,
    for training, gradients and ``optimizer_states`` AdamW moments). ``gflop`` is the forward FLOPs
    (``flops`` convention), tripled for training."""
    by_op, costs = count_ops(module, make_input, on_meta=True)
    fwd = (sum(by_op.values()) + sum(costs.extra.values())) / 1e9
    weights = sum(p.numel() * p.element_size() for p in module.parameters())
    weights += sum(b.numel() * b.element_size() for b in module.buffers())
    if training:
        total = 2 * costs.volume + weights * (2 + optimizer_states)
        return {"gb": total / GB, "gflop": 3 * fwd}
    return {"gb": (costs.volume + weights) / GB, "gflop": fwd}


def cpu_budget():
    """The CPU budget guard's limits (GB, GFLOP per step), read when called: ``$VIXNB_CPU_BUDGET_GB`` (default
    4) and ``$VIXNB_CPU_BUDGET_GFLOP`` (default 100)."""
    return (env_number("VIXNB_CPU_BUDGET_GB", POSITIVE, default=DEFAULT_CPU_BUDGET_GB),
            env_number("VIXNB_CPU_BUDGET_GFLOP", POSITIVE, default=DEFAULT_CPU_BUDGET_GFLOP))


def budget_status(est, *, budget_gb=None, budget_gflop=None):
    """``"skipped: ..."`` when the ``estimate`` ``est`` exceeds the CPU budget (``cpu_budget()`` unless given),
    else None."""
    default_gb, default_gflop = cpu_budget()
    budget_gb = default_gb if budget_gb is None else budget_gb
    budget_gflop = default_gflop if budget_gflop is None else budget_gflop
    if est["gb"] > budget_gb:
        return f"skipped: estimated {est['gb']:.1f} GB exceeds the CPU budget of {budget_gb:g} GB"
    if est["gflop"] > budget_gflop:
        return f"skipped: estimated {est['gflop']:.0f} GFLOP per step exceeds the CPU budget of {budget_gflop:g} GFLOP"
    return None
