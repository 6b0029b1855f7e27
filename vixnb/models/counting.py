"""Parameter counts and model size under the papers' convention (torchsummary 1.5.1) and the true one.

torchsummary hooks every module except ``nn.Sequential``, ``nn.ModuleList`` and the model itself, and
for each *call* adds the module's ``.weight`` and ``.bias`` sizes and records its output shape. So its
"Total params" leaves out other ``nn.Parameter`` attributes (position embedding, class token, Linformer's
projections), buffers and modules never called, and counts twice a module called twice. Its "Estimated
Total Size (MB)" is input bytes + 4 bytes per counted parameter + 2 x 4 bytes per element of every
hooked output, for one image. Notes section 1 explains the convention; this is our own re-implementation.
"""
import copy
import math
from contextlib import ExitStack

import torch
from torch import nn

from ..layers import fused_attn
from .registry import architecture_signature

MB = 1024**2


def _trace(model, input_size):
    """``(params, output elements)`` from one forward with torchsummary-style hooks: on a ``meta`` copy of the model
    (shapes only, nothing computed; the counts depend on shapes alone), or, where an op has no meta kernel or the
    forward reads values, on the model itself with a batch of 2 drawn from a local generator (counting leaves the
    global RNG as it was)."""
    try:
        meta = _meta_copy(model)
    except (NotImplementedError, RuntimeError, TypeError):
        meta = None
    if meta is not None:
        try:
            return _hooked_forward(meta, torch.empty(2, *input_size, device="meta"))
        except (NotImplementedError, RuntimeError, TypeError, ValueError):
            pass
    param = next(model.parameters(), None)
    x = torch.rand(2, *input_size, generator=torch.Generator().manual_seed(0))
    return _hooked_forward(model, x.to(param.device if param is not None else "cpu"))


def _meta_copy(model):
    """A copy of ``model`` whose parameters and buffers live on the ``meta`` device: their data is never copied
    (a ViT-B/16's 86 M weights included)."""
    memo = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        empty = torch.empty_like(tensor, device="meta")
        memo[id(tensor)] = nn.Parameter(empty, requires_grad=tensor.requires_grad) \
            if isinstance(tensor, nn.Parameter) else empty
    return copy.deepcopy(model, memo)


def _hooked_forward(model, x):
    records = []

    def hook(module, _inputs, output):
        params = sum(getattr(module, a).numel() for a in ("weight", "bias")
                     if isinstance(getattr(module, a, None), torch.Tensor))
        outs = output if isinstance(output, (list, tuple)) else [output]
        per_image = sum(o[0].numel() for o in outs if isinstance(o, torch.Tensor))
        records.append((params, per_image))

    targets = [m for m in model.modules() if m is not model and not isinstance(m, (nn.Sequential, nn.ModuleList))]
    was_training = model.training
    with ExitStack() as stack:
        for m in targets:
            stack.callback(m.register_forward_hook(hook).remove)
        stack.enter_context(torch.no_grad())
        model.eval()
        try:
            model(x)
        finally:
            model.train(was_training)
    return sum(p for p, _ in records), sum(o for _, o in records)


def input_size_of(model, input_size=None):
    """``input_size`` if given, else the (channels, height, width) that ``create_model`` recorded."""
    size = input_size or getattr(model, "default_cfg", {}).get("input_size")
    if size is None:
        raise ValueError("pass input_size=(channels, height, width); this model was not built by create_model")
    return tuple(int(s) for s in size)


def count_params(model, convention="paper", input_size=None):
    """'true': sum of every parameter's numel. 'paper': torchsummary's "Total params" (see module doc)."""
    if convention == "true":
        return sum(p.numel() for p in model.parameters())
    if convention == "paper":
        return _trace(model, input_size_of(model, input_size))[0]
    raise ValueError(f"convention must be 'paper' or 'true', got {convention!r}")


def paper_summary(model, input_size=None):
    """``(params, size_mb)``: torchsummary's "Total params" and "Estimated Total Size (MB)" from one trace, on the
    authors' path (materialised softmax: it has no weights, so the count is the same on either path)."""
    size = input_size_of(model, input_size)
    with fused_attn(model, False):
        params, outputs = _trace(model, size)
    return params, _size_mb(size, params, outputs)


def _size_mb(size, params, outputs):
    return (math.prod(size) * 4 + params * 4 + 2 * outputs * 4) / MB


def summary_size_mb(model, input_size=None, *, path="authors"):
    """The papers' "Size (MB)": torchsummary's Estimated Total Size for one image.

    ``path="authors"`` measures with materialised softmax attention (the module structure the papers
    measured); ``path="as-built"`` measures the model as configured (fused attention skips the Softmax module).
    """
    size = input_size_of(model, input_size)
    if path not in ("authors", "as-built"):
        raise ValueError(f"path must be 'authors' or 'as-built', got {path!r}")
    with fused_attn(model, False) if path == "authors" else ExitStack():
        params, outputs = _trace(model, size)
    return _size_mb(size, params, outputs)


def recorded_counts(model):
    """What a training result records of its model's structure: the papers' and the true parameter counts, the
    papers' size (two traced forwards) and the architecture signature."""
    return {"params_paper": count_params(model, "paper"), "params_true": count_params(model, "true"),
            "size_mb": summary_size_mb(model), "architecture": architecture_signature(model)}


def dropout_rates(model):
    """``[[rate, modules], ...]`` by rate: where dropout acts in ``model`` in training, each rate above 0 and how many
    modules apply it: an ``nn.Dropout`` (of any dimension), or a mixer's dropout on its attention weights
    (``attn_dropout``, CCT's, which the authors' code applies as a Dropout module). Stochastic depth (``DropPath``)
    drops whole branches, not units, and is left out. What a paper file's ``protocol.dropout`` states per model."""
    rates = {}
    for module in model.modules():
        rate = module.p if isinstance(module, nn.modules.dropout._DropoutNd) else getattr(module, "attn_dropout", 0)
        if isinstance(rate, (int, float)) and rate > 0:
            rates[float(rate)] = rates.get(float(rate), 0) + 1
    return [[rate, rates[rate]] for rate in sorted(rates)]


def dropout_text(rates):
    """``dropout_rates``' ``[[rate, modules], ...]`` in words: "0.25 in 8 module(s)", or "none"."""
    return ", ".join(f"{rate:g} in {count} module(s)" for rate, count in rates) or "none"
