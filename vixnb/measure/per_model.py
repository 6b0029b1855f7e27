"""Every efficiency figure of a model as one record (``measure``, ``measure_model``, ``measure_many``), and
the ViX paper's "GPU (GB)" column (``gpu_memory_column``)."""
from __future__ import annotations

import time

import pandas as pd

from ..models import create_model
from ..models.counting import count_params, input_size_of, summary_size_mb
from .flops import flops
from .memory import inference_memory, training_memory
from .runtime import PATHS, dtype_name, local_rng, provenance, resolve_device
from .storage import jsonable
from .throughput import throughput
from ..validate import checked

PROTOCOL = "the favor paper (Nauen et al., 'Which Transformer to Favor'), re-implemented in vixnb.measure"


def default_batch_size(device):
    """64 on a GPU (the ViX paper's Figure 4), 4 on a CPU."""
    return 64 if device.type == "cuda" else 4


@checked("batch_size", "iters", "steps", "max_batch")
def measure(model_name, *, dataset="cifar10", device=None, batch_size=None, json_ready=True, paths=PATHS,
            dtype="fp32", inference_batch_sizes=(1, 32, 64, 128), iters=None, cpu_batch=None, steps=2, max_batch=4096,
            **overrides):
    """Every efficiency figure of one registered model, as one record.

    Parameters (``params_paper``, ``params_true``, ``params_trainable``: the favor paper's theta), Size (MB) on
    the authors' path and as built, ``flops`` (see ``flops``), and for each path in ``paths``: ``training``
    (``training_memory`` at ``batch_size``, ``steps`` steps), ``inference`` (``inference_memory``),
    ``throughput`` (``iters`` forwards at each of the largest batches that fit, up to ``max_batch``; on a CPU at a
    batch of ``cpu_batch``, default min(batch_size, 8)).
    ``flops`` counts the fused path, ``flops_authors_path`` the authors' (they differ only for Nystrom, whose
    unfused form multiplies in a different order). ``batch_size`` defaults to 64 on a GPU and 4 on a CPU.
    The authors' path always runs fp32; ``dtype`` applies to the fused path. ``overrides`` go to
    ``create_model`` (e.g. ``depth=1``); the model's weights come from seed 0 and the caller's RNG state is
    kept. With ``json_ready`` the record holds only JSON types."""
    with local_rng("cpu"):  # weights from seed 0; the caller's RNG state kept
        model = create_model(model_name, dataset=dataset, **overrides)
    return measure_model(model, name=model_name, device=device, batch_size=batch_size, json_ready=json_ready,
                         paths=paths, dtype=dtype, inference_batch_sizes=inference_batch_sizes, iters=iters,
                         cpu_batch=cpu_batch, steps=steps, dataset=dataset, overrides=dict(overrides),
                         max_batch=max_batch)


@checked("batch_size", "iters", "steps", "max_batch")
def measure_model(model, *, name, input_size=None, device=None, batch_size=None, json_ready=True, paths=PATHS,
                  dtype="fp32", inference_batch_sizes=(1, 32, 64, 128), iters=None, cpu_batch=None, steps=2,
                  dataset=None, overrides=None, max_batch=4096):
    """``measure`` for any image classifier ``model`` (e.g. a timm reference architecture), recorded as ``name``;
    ``input_size`` = (channels, height, width) unless the model was built by ``create_model``."""
    device = resolve_device(device)
    batch_size = batch_size or default_batch_size(device)
    size = input_size_of(model, input_size)
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
                                                cpu_batch=cpu_batch or min(batch_size, 8), input_size=size,
                                                max_batch=max_batch)
    return jsonable(record) if json_ready else record


def measure_many(models, *, progress=False, **kwargs):
    """``measure`` for each model name; a model that fails with an error other than OOM is recorded with
    ``status = "error: ..."`` so one broken model does not lose the others. ``progress`` prints one line per
    model as it is measured."""
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


@checked("batch_size")
def gpu_memory_column(models, *, dataset="cifar10", batch_size=64, device=None, dtype="fp32", **overrides):
    """Training memory of each model at ``batch_size`` on the authors' path (fp32) and ours (fused, ``dtype``):
    the ViX paper's "GPU (GB)" column. Returns a pandas DataFrame indexed by model; cells are GB (reserved
    and allocated peaks) or the record's status (``"skipped: ..."`` on a CPU, ``"oom"``)."""
    device = resolve_device(device)
    rows = {}
    for name in models:
        with local_rng("cpu"):
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
