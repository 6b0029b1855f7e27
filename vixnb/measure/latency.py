"""Batch-1 inference latency: the time of one no-grad forward of one image, the case the `favor` paper's protocol
starts its inference measurements from (batch 1 of 1/32/64/128) and a deployed model answering one request meets.
On both execution paths (``runtime.PATHS``), fp32, of each model of a chapter in the profile's configuration; on a
GPU with CUDA events, on a CPU (the smoke profile's small models) with ``time.perf_counter``, whose times are not
comparable with GPU figures (the provenance says which device; the verdict rules never set one against the other)."""
import statistics

import pandas as pd
import torch

from ..models import create_model, list_models
from ..models.counting import input_size_of
from ..runs.profiles import get_profile, small_sizes
from .runtime import PATHS, execution_path, is_oom, local_rng, oom_record, provenance, release_memory
from .storage import jsonable
from .timing import time_ms, timing_label

#: untimed forwards, timed forwards: on a GPU as the favor paper times inference (100 forwards), on a CPU a few
GPU_FORWARDS, CPU_FORWARDS = (10, 100), (1, 3)


def latency_record(names, *, profile, dataset="cifar10"):
    """``{"rows": {model: {"ms (authors)", "ms (fused)", "min ms (authors)", "min ms (fused)"}}, "provenance",
    "timing", "forwards"}``: the median and the least time in ms of one no-grad forward of one image, per path, of
    each registered model of ``names`` (another name's row says it is not measured). The profile's device: a GPU
    profile's configuration on CUDA, the smoke profile's small models on the CPU."""
    cpu = small_sizes(profile)
    device = torch.device("cpu" if cpu else "cuda")
    warmup, iters = CPU_FORWARDS if cpu else GPU_FORWARDS
    overrides = get_profile(profile).get("model_overrides", {})
    rows = {}
    for name in names:
        if name not in list_models():
            rows[name] = {"status": "not measured: not a vixnb model"}
            continue
        with local_rng("cpu"):
            model = create_model(name, dataset=dataset, **overrides).eval().to(device)
        image = torch.zeros(1, *input_size_of(model), device=device)
        row = {}
        for path in PATHS:
            try:
                with execution_path(model, path), torch.no_grad():
                    times = time_ms(lambda m=model, image=image: m(image), device, warmup=warmup, iters=iters)
                row[f"ms ({path})"] = round(statistics.median(times), 3)
                row[f"min ms ({path})"] = round(min(times), 3)
            except RuntimeError as e:
                if not is_oom(e):
                    raise
                row[f"ms ({path})"] = oom_record(e)["status"]
        rows[name] = row
        del model
        release_memory(device)
    return jsonable({"rows": rows, "provenance": provenance(device, dtype="fp32", batch_size=1),
                     "timing": timing_label(device), "forwards": {"untimed": warmup, "timed": iters}})


def latency_table(record):
    """A latency record as a page table: one row per model, the median and least ms per path."""
    frame = pd.DataFrame.from_dict(record.get("rows") or {}, orient="index")
    return frame.reindex(columns=[c for c in (f"{what} ({path})" for what in ("ms", "min ms") for path in PATHS)
                                  if c in frame] + [c for c in frame if c == "status"])
