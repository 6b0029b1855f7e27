"""``vixnb bench train``: training images/s of the Table 1 models, our engine's path against a straightforward
reference loop like the authors', both measured in the same run; ``vixnb bench train --engine``: the engine's own
step eager, as one CUDA graph, and as several runs at once (``bench_engine``)."""
import time

import torch
from PIL import Image

from .. import papers
from ..data import dataset_spec, load_split, normalize
from ..measure.flops import GPUS, RATE_CAP
from ..layers import fused_attn
from ..measure import as_dtype, dtype_name, local_rng
from ..measure.flops import flops
from ..models import create_model
from ..runs.asked import run_of
from ..engine.modes import PROBE_STEPS, probe_modes
from ..validate import checked


def _reference_loader(images, labels, batch_size, workers):
    """What the authors' scripts do: a torchvision-style dataset (PIL image -> ToTensor -> Normalize per
    item) behind a shuffling DataLoader."""
    from torchvision import transforms  # torchvision loads torch._dynamo (~2 s): only this loop needs it
    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    pil = [Image.fromarray(img.permute(1, 2, 0).numpy()) for img in images]

    class PILDataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(pil)

        def __getitem__(self, i):
            return to_tensor(pil[i]), int(labels[i])

    return torch.utils.data.DataLoader(PILDataset(), batch_size=batch_size, shuffle=True, num_workers=workers,
                                       drop_last=True, persistent_workers=workers > 0)


def time_steps(step, steps, warmup, device):
    """Seconds per call of ``step``: ``steps`` calls after ``warmup``, synchronised on a GPU."""
    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / steps


def bench_adamw(params, device, *, fused=True):
    """The benchmarks' AdamW (lr 1e-3, weight decay 0.01), fused on a GPU unless ``fused=False``."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=fused and device.type == "cuda")


def ours_step(model, images, labels, *, bs, dtype, forward=None):
    """Our engine's training step as timed here: a random batch of the uint8 ``images`` / ``labels`` resident on
    the device, normalised there, ``dtype`` autocast, fused AdamW on a GPU; ``forward`` (default ``model``)
    makes the logits, e.g. ``torch.compile(model)``."""
    forward, device = model if forward is None else forward, images.device
    opt = bench_adamw(model.parameters(), device)
    cast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)

    def step():
        idx = torch.randint(len(images), (bs,), device=device)
        with cast:
            loss = torch.nn.functional.cross_entropy(forward(normalize(images[idx])), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _time_path(row, path, path_dt, *, name, images, labels, bs, device, steps, warmup, workers):
    """Time one path of ``bench_train`` (``"reference"``, or ours in ``path_dt``) into ``row``."""
    model = create_model(name).to(device)
    if path != "reference":
        step = ours_step(model, images.to(device), labels.to(device), bs=bs, dtype=path_dt)
    else:
        opt = bench_adamw(model.parameters(), device, fused=False)
        loader = _reference_loader(images, labels, bs, workers)
        batches = iter(())

        def step():
            nonlocal batches
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
            with fused_attn(model, False):
                loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    try:
        seconds = time_steps(step, steps, warmup, device)
        row[f"{path}_images_per_s"] = bs / seconds
    except torch.OutOfMemoryError:
        row[f"{path}_images_per_s"] = None
        row[f"{path}_status"] = "oom"
    model = opt = step = None  # free this path's memory before the next
    if device.type == "cuda":
        torch.cuda.empty_cache()


@checked("batch", "steps", "warmup", "workers")
def bench_train(models=None, *, device=None, dtype=None, batch=None, steps=10, warmup=3, workers=None):
    """Training images/s of each model at its paper batch size: the engine's path (uint8 data resident on
    the device, normalised there, fused attention, ``dtype`` autocast, fused AdamW on a GPU) against a
    reference loop (DataLoader over PIL images, materialised softmax, fp32 forward, eager), both measured
    here in the same run. Includes data handling; ``ratio`` = ours / reference.

    ``projected_paper_minutes``: the ``paper`` profile's epochs x (its training images + a third of its test
    images, a test pass costing about a third of a training step) at our path's speed in the paper profile's
    precision (``projected_dtype``). When ``dtype`` is not that precision (bf16 on a GPU; the paper profile
    trains in fp32) our path is timed a second time in it (``ours_paper_dtype_images_per_s``). ``models``
    defaults to the models of the `vix` paper's Table 1."""
    if models is None:
        models = papers.table_models("vix", "table1")

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dt = as_dtype(dtype or ("bf16" if device.type == "cuda" else "fp32"))
    workers = (4 if device.type == "cuda" else 0) if workers is None else workers
    rows = []
    for name in models:
        paper = run_of(name, profile="paper").config
        paper_dt = as_dtype(paper["precision"])
        bs = batch or paper["batch_size"]
        images, labels = load_split("synthetic", "train", size=max(bs * (steps + warmup), bs))
        row = {"model": name, "batch_size": bs, "device": str(device), "dtype": str(dt).removeprefix("torch."),
               "steps": steps, "torch": torch.__version__}
        paths = {"reference": None, "ours": dt, **({"ours_paper_dtype": paper_dt} if paper_dt != dt else {})}
        for path, path_dt in paths.items():
            with local_rng(device):  # weights, batches and shuffling from seed 0; the caller's RNG state kept
                _time_path(row, path, path_dt, name=name, images=images, labels=labels, bs=bs, device=device,
                           steps=steps, warmup=warmup, workers=workers)
        ours, ref = row.get("ours_images_per_s"), row.get("reference_images_per_s")
        row["ratio"] = ours / ref if ours and ref else None
        at_paper_dtype = row.get("ours_paper_dtype_images_per_s", ours)
        spec = dataset_spec(paper["dataset"])
        train_images = paper["train_size"] or spec.train_images
        test_images = paper["test_size"] or spec.test_images
        row.update(projected_dtype=dtype_name(paper_dt), paper_epochs=paper["epochs"],
                   paper_train_images=train_images, paper_test_images=test_images)
        if at_paper_dtype:
            row["projected_paper_minutes"] = paper["epochs"] * (train_images + test_images / 3) / at_paper_dtype / 60
        rows.append(row)
    return rows




# ----- the engine's own step: eager, graphed, several runs at once (``vixnb bench train --engine``) -----------------

#: the models ``bench_engine`` times by default: the ViX paper's ViT (GPU-bound), the blog's small ViT (bound by the
#: host's launches) and one `cxv` model
ENGINE_MODELS = ("vit", "vit_small_simplified", "cvt")
#: ``--smoke``: what a CPU runs in seconds (the blog's ViT shrunk to two blocks of width 16)
SMOKE = {"models": ("vit_small_simplified",), "overrides": dict(width=16, depth=2, heads=2, patch=8), "batch": 4,
         "steps": 8, "members": 3}


def _peak_tflops(device):
    """The dense matrix throughput of this GPU (``measure.flops.GPUS``; an H200 as an H100), or None."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).lower().replace("h200", "h100")
    return next((peak for key, (peak, _) in GPUS.items() if key in name), None)


def bench_engine(models=ENGINE_MODELS, *, device=None, batch=None, steps=PROBE_STEPS, members=15, overrides=None,
                 progress=print):
    """The engine's modes per model, as a lent machine's probe runs them (``engine.modes.probe_modes``: each mode's
    largest loss difference from eager over ``steps`` steps in float32, its tolerance, whether it passed, its member
    images/s), on synthetic images at the model's budget protocol (``batch``: another batch size; ``members``: the
    ensemble modes' runs of one shape), and each passing mode's share of the FLOP floor (3 x the forward's FLOPs an
    image at ``measure.flops.RATE_CAP`` of the GPU's peak: 1.0 is the floor, more is faster). ``overrides``: model
    settings (``SMOKE``). One row per model and mode; the choice is each model's ``chosen``."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    peak, rows = _peak_tflops(device), []
    for name in models:
        settings = dict(overrides or {})
        config = run_of(name, settings, profile="budget" if device.type == "cuda" else "smoke").config
        config = {**config, "dataset": "synthetic", "device": device.type,
                  **({"batch_size": batch} if batch else {})}
        record = probe_modes(config, device=device, steps=steps, members=members, progress=progress)
        train_flops = 3 * flops(create_model(name, **settings))["flops"]
        for r in record["rows"]:
            rate = r["images_per_s"]
            rows.append({**r, "batch_size": config["batch_size"], "device": record["device"], "steps": steps,
                         "torch": torch.__version__, "train_gflops_per_image": train_flops / 1e9,
                         "floor_share": rate * train_flops / (RATE_CAP * peak * 1e12) if peak and rate else None,
                         "chosen": record["chosen"]})
    return rows


def engine_table(rows):
    """A plain-text table of ``bench_engine`` rows, each model's choice after its rows."""
    head = ["model", "mode", "members", "batch", "max|dloss|", "tolerance", "img/s", "of floor", "check"]

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    lines, last = [head], None
    for r in rows:
        lines.append([r["model"], r["mode"], str(r["members"]), str(r["batch_size"]), fmt(r["max_dloss"], ".1e"),
                      fmt(r["tolerance"], ".1e"), fmt(r["images_per_s"], ",.0f"), fmt(r["floor_share"], ".2f"),
                      "pass" if r["passed"] else f"off: {r['why']}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = ["  ".join([*(cell.rjust(w) for cell, w in zip(line[:-1], widths)), line[-1]]) for line in lines]
    for r in rows:
        if r["model"] != last:
            last = r["model"]
            out.append(f"{last}: {r['chosen']['single']} for a run, {r['chosen']['group']} for runs of one shape")
    return "\n".join(out)
