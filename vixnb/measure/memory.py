"""Training memory (one forward + backward + AdamW step) and inference memory (one no-grad forward per batch
size), by the `favor` paper's protocol; on a CPU, what could not be measured is said in the record."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from . import timing
from ..models.counting import input_size_of
from .flops import budget_status, estimate
from .runtime import (CPU_MEMORY_NOTE, GB, PATHS, as_dtype, autocast_for, dtype_name, execution_path, is_oom,
                      local_rng, oom_record, provenance, release_memory, resolve_device)
from ..validate import checked


def make_optimizer(model, path, device):
    """The authors' AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01); fused on CUDA on our path."""
    fused = path == "fused" and device.type == "cuda"
    return torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                             **({"fused": True} if fused else {}))


def train_step(model, x, y, optimizer, autocast):
    """One forward (under ``autocast()``) + cross-entropy backward + optimizer step; returns the loss."""
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y)
    loss.backward()
    optimizer.step()
    return loss


def num_classes_of(model):
    """The output width of the model's last ``nn.Linear`` (its classes), else 10."""
    for m in reversed(list(model.modules())):
        if isinstance(m, nn.Linear):
            return m.out_features
    return 10


@checked("batch_size", "steps")
def training_memory(model, *, batch_size, device=None, path="authors", dtype="fp32", steps=2, input_size=None,
                    num_classes=None, cpu_budget_gb=None, cpu_budget_gflop=None):
    """Peak memory and time of a training step (forward + backward + AdamW) at ``batch_size``.

    ``path="authors"``: materialised softmax, fp32 forward (pass ``dtype="fp32"``), ``torch.optim.AdamW``;
    ``path="fused"``: SDPA, fused AdamW on CUDA, forward under autocast when ``dtype`` is bf16/fp16.
    ``steps`` steps run (the first creates the optimizer state); the peaks cover all of them, the time is
    the last step's. The model is copied, never modified; the caller's RNG state is kept. On a CPU: status
    ``"skipped: CUDA memory statistics need a GPU"`` with the step still timed (``step_ms``), unless the
    shape-based estimate is over the CPU budget (then nothing runs). Out of memory: ``status == "oom"``."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = input_size_of(model, input_size)
    classes = num_classes or num_classes_of(model)
    record = {"measurement": "training_memory", "path": path, "batch_size": batch_size, "dtype": dtype_name(dt),
              "device": str(device), "steps": steps, "protocol": "one forward + backward + AdamW step; peak over "
              f"{steps} steps from a reset, weights on the device", "timing": timing.timing_label(device),
              "optimizer": "AdamW (fused)" if path == "fused" and device.type == "cuda" else "AdamW",
              "provenance": provenance(device, dtype=dt, batch_size=batch_size)}
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    work = copy.deepcopy(model).train()
    with execution_path(work, path), local_rng(device):
        if device.type == "cpu":
            est = estimate(work, lambda d: torch.zeros(batch_size, *size, device=d), training=True)
            record["estimate_gb"], record["estimate_gflop"] = est["gb"], est["gflop"]
            skip = budget_status(est, budget_gb=cpu_budget_gb, budget_gflop=cpu_budget_gflop)
            if skip:
                return {**record, "status": skip}
        forward_context = autocast_for(device, dt)
        optimizer = x = y = None
        try:
            if device.type == "cuda":
                release_memory(device)
                torch.cuda.reset_peak_memory_stats(device)
            work.to(device)
            optimizer = make_optimizer(work, path, device)
            gen = torch.Generator(device="cpu").manual_seed(0)
            x = torch.randn(batch_size, *size, generator=gen).to(device)
            y = torch.randint(0, classes, (batch_size,), generator=gen).to(device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                record["baseline_gb"] = torch.cuda.memory_allocated(device) / GB
                torch.cuda.reset_peak_memory_stats(device)
            times = timing.time_ms(lambda: train_step(work, x, y, optimizer, forward_context), device,
                                   warmup=steps - 1, iters=1)
            record["step_ms"] = times[-1]
            if device.type == "cuda":
                record["peak_allocated_gb"] = torch.cuda.max_memory_allocated(device) / GB
                record["peak_reserved_gb"] = torch.cuda.max_memory_reserved(device) / GB
                record["status"] = "ok"
            else:
                record["status"] = CPU_MEMORY_NOTE
        except Exception as err:  # noqa: BLE001 -- out of memory is an outcome; anything else is re-raised
            if not is_oom(err):
                raise
            record.update(oom_record(err))
        finally:
            work = optimizer = x = y = None
            release_memory(device)
    return record


def forward(model, x, autocast):
    """One no-grad forward of ``x`` under ``autocast()``."""
    with torch.no_grad(), autocast():
        return model(x)


def inference_memory(model, *, batch_sizes=(1, 32, 64, 128), device=None, path="fused", dtype="fp32",
                     input_size=None):
    """The favor paper's inference memory: for each batch size, reset the peak statistics and run one no-grad
    forward; peak allocated and reserved GB (weights included). On a CPU every batch size is recorded as
    ``"skipped: CUDA memory statistics need a GPU"``. A batch size that runs out of memory is ``"oom"``."""
    device = resolve_device(device)
    dt = as_dtype(dtype)
    size = input_size_of(model, input_size)
    record = {"measurement": "inference_memory", "path": path, "dtype": dtype_name(dt), "device": str(device),
              "protocol": "peak after a reset, one no-grad forward per batch size (the favor paper)",
              "provenance": provenance(device, dtype=dt, batch_size=list(batch_sizes)), "batches": []}
    if device.type != "cuda":
        record["batches"] = [{"batch_size": bs, "status": CPU_MEMORY_NOTE} for bs in batch_sizes]
        record["status"] = CPU_MEMORY_NOTE
        return record
    work = copy.deepcopy(model).eval().to(device)
    forward_context = autocast_for(device, dt)
    with execution_path(work, path), local_rng(device):
        for bs in sorted(batch_sizes, reverse=True):
            row = {"batch_size": bs}
            x = None
            try:
                x = torch.randn(bs, *size, device=device)
                release_memory(device)
                torch.cuda.reset_peak_memory_stats(device)
                forward(work, x, forward_context)
                torch.cuda.synchronize(device)
                row.update(status="ok", peak_allocated_gb=torch.cuda.max_memory_allocated(device) / GB,
                           peak_reserved_gb=torch.cuda.max_memory_reserved(device) / GB)
            except Exception as err:  # noqa: BLE001
                if not is_oom(err):
                    raise
                row.update(oom_record(err))
            finally:
                x = None
                release_memory(device)
            record["batches"].append(row)
    record["batches"].sort(key=lambda r: r["batch_size"])
    record["status"] = "ok" if all(r["status"] == "ok" for r in record["batches"]) else "partial"
    work = None
    release_memory(device)
    return record
