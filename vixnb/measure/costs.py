"""The cost records the pages and claims read: every cost of a list of models (registered ones, and timm
architectures as references) with the token-mixer scaling sweep (``efficiency_record``), counts from shapes alone
(``shape_records``), and every efficiency figure of a chapter's run configurations (``configuration_speeds``). The
sizes follow the profile's device: a GPU profile measures at the papers' sizes, the smoke profile at a CPU's."""
import importlib.util

import pandas as pd

from ..models import list_models
from ..runs.profiles import get_profile, small_sizes
from ..runs.spec import run_model_settings
from .frames import records_frame
from .per_model import measure, measure_many, measure_model
from .runtime import PATHS
from .storage import jsonable
from .sweep import scaling_sweep

#: a GPU's speed search: inference batches up to 256, 20 timed forwards each (ViT-B/16 at 224 px: about a minute per
#: model and path on an H100)
SPEED_MAX_BATCH, SPEED_ITERS = 256, 20


def _timm_model(name):
    if importlib.util.find_spec("timm") is None:
        return None
    import timm  # optional dependency (not one of vixnb's): here only where it is installed

    return timm.create_model(name, pretrained=False)


def cost_records(names, *, dataset, device, paths, overrides=None, batch_size=None, iters=None, steps=2,
             cpu_batch=None):
    """``measure`` records of ``names`` in their order: registered models (``measure.measure_many``, with the
    config ``overrides``) and, for any other name, the ``timm`` architecture at 224 px, untrained
    (``measure.measure_model``; the fused path only)."""
    registered = set(list_models())
    ours = [n for n in names if n in registered]
    measured = dict(zip(ours, measure_many(ours, dataset=dataset, device=device, paths=paths,
                                                   batch_size=batch_size, iters=iters, steps=steps,
                                                   cpu_batch=cpu_batch, **(overrides or {}))))
    records = []
    for name in names:
        if name in measured:
            records.append(measured[name])
        elif (model := _timm_model(name)) is None:
            records.append({"model": name, "status": "not measured: timm is not installed"})
        else:
            records.append(measure_model(model, name=name, input_size=(3, 224, 224), device=device,
                                                 batch_size=batch_size, iters=iters, steps=steps, cpu_batch=2,
                                                 paths=tuple(p for p in paths if p == "fused")))
    return records


def shape_records(names, *, dataset="cifar10"):
    """Parameters (both conventions), Size (MB) and FLOPs of ``names`` counted from shapes on the CPU: nothing
    timed, no GPU needed, the same on every machine. Registered models in their paper configuration for
    ``dataset``; other names as ``timm`` architectures (a record whose status says so where timm is missing)."""
    return cost_records(names, dataset=dataset, device="cpu", paths=())


def efficiency_record(names, *, profile, dataset="cifar10", batch_size=None, tokens=None, iters=None):
    """Every cost of ``names`` (``cost_records``: parameters, FLOPs, training and inference memory, throughput on
    both execution paths) and the token-mixer scaling sweep, on the profile's device: a GPU profile at training batch
    64 and a sweep up to 16,384 tokens; the smoke profile on the CPU (its small models, training batch 2, sweep at
    256 and 1,024 tokens). ``batch_size``, ``tokens``, ``iters``: those sizes where given."""
    prof = get_profile(profile)
    cpu = small_sizes(profile)
    device = "cpu" if cpu else "cuda"
    batch_size = batch_size or (2 if cpu else 64)
    records = cost_records(names, dataset=dataset, device=device, paths=PATHS,
                           overrides=prof.get("model_overrides", {}),
                           batch_size=batch_size, iters=iters or (2 if cpu else None), steps=1 if cpu else 2,
                           cpu_batch=2 if cpu else None)
    sweep = scaling_sweep(tokens=tuple(tokens or ((256, 1024) if cpu else (256, 1024, 4096, 16384))), device=device,
                          steps=2 if cpu else 10, warmup=1 if cpu else 3)
    return jsonable({"records": records, "sweep": sweep, "device": device, "batch_size": batch_size})


def configuration_speeds(runs, *, cpu):
    """``{"rows": {row: record}, "device", "batch_size"}``: every efficiency figure (``measure``: training memory and
    step time, inference memory, images/s) of each run configuration of ``runs`` (``[(row, model, config)]``), on
    the authors' path (fp32, attention materialised) and ours (bf16, fused): training at the run's batch size,
    inference at the largest batches up to ``SPEED_MAX_BATCH`` that fit, ``SPEED_ITERS`` timed forwards each. On a
    CPU (``cpu``; the smoke profile's small models) at batch 2 with two forwards."""
    rows = {}
    for row, model, config in runs:
        batch = 2 if cpu else config["batch_size"]
        rows[row] = measure(model, dataset=config["dataset"], device="cpu" if cpu else "cuda", batch_size=batch,
                            dtype="bf16", iters=2 if cpu else SPEED_ITERS, max_batch=SPEED_MAX_BATCH,
                            steps=1 if cpu else 2, cpu_batch=2 if cpu else None,
                            inference_batch_sizes=(1, batch) if cpu else (1, 32, 64, 128), **run_model_settings(config))
    return jsonable({"rows": rows, "device": "cpu" if cpu else "cuda", "batch_size": 2 if cpu else None})


def speed_table(record, labels=None):
    """A ``speed`` record as a page table: one row per measured run (named by ``labels``: row -> label), and for
    images/s, the training step's ms and its peak GB, one column per path (``authors``, ``fused``)."""
    rows = list(record["rows"])
    frame = records_frame([record["rows"][row] for row in rows])
    frame.index = [(labels or {}).get(row, row) for row in rows]
    headings = {"images/s": "img/s ({})", "train step ms": "train step ms ({})", "train GB": "train GB ({})"}
    table = pd.DataFrame({(heading, path): frame[column.format(path)] for heading, column in headings.items()
                          for path in ("authors", "fused") if column.format(path) in frame})
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table
