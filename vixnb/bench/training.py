"""``vixnb bench train``: training images/s of the Table 1 models, our engine's path against a straightforward
reference loop like the authors', both measured in the same run."""
import time

import torch
from PIL import Image
from torchvision import transforms

from .. import papers
from ..data import dataset_spec, load_split, normalize
from ..layers import fused_attn
from ..measure import as_dtype, dtype_name, local_rng
from ..models import create_model
from ..profiles import run_config
from ..validate import checked


def _reference_loader(images, labels, batch_size, workers):
    """What the authors' scripts do: a torchvision-style dataset (PIL image -> ToTensor -> Normalize per
    item) behind a shuffling DataLoader."""
    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    pil = [Image.fromarray(img.permute(1, 2, 0).numpy()) for img in images]

    class PILDataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(pil)

        def __getitem__(self, i):
            return to_tensor(pil[i]), int(labels[i])

    return torch.utils.data.DataLoader(PILDataset(), batch_size=batch_size, shuffle=True, num_workers=workers,
                                       drop_last=True, persistent_workers=workers > 0)


def _time_steps(step, steps, warmup, device):
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


def _adamw(params, device, *, fused=True):
    """The benchmarks' AdamW (lr 1e-3, weight decay 0.01), fused on a GPU unless ``fused=False``."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=fused and device.type == "cuda")


def _ours_step(model, images, labels, *, bs, dtype, forward=None):
    """Our engine's training step as timed here: a random batch of the uint8 ``images`` / ``labels`` resident on
    the device, normalised there, ``dtype`` autocast, fused AdamW on a GPU; ``forward`` (default ``model``)
    makes the logits, e.g. ``torch.compile(model)``."""
    forward, device = model if forward is None else forward, images.device
    opt = _adamw(model.parameters(), device)
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
        step = _ours_step(model, images.to(device), labels.to(device), bs=bs, dtype=path_dt)
    else:
        opt = _adamw(model.parameters(), device, fused=False)
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
        seconds = _time_steps(step, steps, warmup, device)
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
        paper = run_config(name, profile="paper")
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


