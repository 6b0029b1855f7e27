"""``vixnb bench fill``: does training several seeds at once fill a GPU better than one seed at a time?

For each model, measured in ONE run (same process, same data, same dtype), training images/s of:

- ``one_seed``: one seed, our engine's step (``bench train``'s "ours" path, ``training._ours_step``);
- ``ensemble``: ``seeds`` seeds as one vmapped ensemble (``vixnb.engine.ensemble.EnsembleStep``, the step
  ``train_ensemble`` runs), counted as seeds x batch images per step;
- ``compiled``: the one-seed step with the model under ``torch.compile`` (mode default);
- ``cuda_graphs``: the same under ``mode="reduce-overhead"`` (CUDA graphs), on a GPU only.

Both compiled approaches compile in the untimed warm-up steps (with ``warmup=0`` the first timed step
compiles). Ratios: ``<approach>_vs_one_seed`` = its images/s / ``one_seed``'s, and
``<approach>_time_vs_separate`` = the time it takes to train ``seeds`` seeds / the time of ``seeds``
separate runs one after another at ``one_seed``'s speed (below 1: faster). ``winner`` is "ensemble" where
the ensemble's images/s beat every single-seed approach measured, else "separate" (None where the ensemble
or the one-seed step was not measured); ``fill_winner`` reads it back, for a batch runner choosing per model.
``can_ensemble`` says whether the model's paper-profile configuration can be ensembled exactly
(``runs.make.can_ensemble_run``: the engine's refusals and a warm start's source; dropout models need
``exact=False``).
"""
from contextlib import nullcontext

import torch

from .. import papers
from ..data import load_split
from ..engine.ensemble import Ensemble, EnsembleStep, MemberAdamW
from ..runs.make import can_ensemble_run
from ..measure import as_dtype, local_rng
from ..models import create_model
from ..runs.asked import run_of
from .training import ours_step, time_steps
from ..validate import COUNT_MAX, Whole, checked

APPROACHES = ("one_seed", "ensemble", "compiled", "cuda_graphs")
SEPARATE = ("one_seed", "compiled", "cuda_graphs")


def _ensemble_step(models, images, labels, *, bs, dtype):
    """The ensemble's training step as ``train_ensemble`` runs it (``engine.ensemble.EnsembleStep``: each member's own
    batch of a random order), at the protocol's AdamW settings for every member."""
    ensemble = Ensemble(models, randomness="different")  # dropout models too: the speed is the same
    cast = (lambda: torch.autocast(images.device.type, dtype=dtype)) if dtype != torch.float32 else nullcontext
    settings = {"lr": 1e-3, "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-8}
    step = EnsembleStep(ensemble, MemberAdamW(ensemble, [settings] * len(models)), images, labels, autocast=cast,
                        batch_size=bs, device=images.device)

    def run():
        if step.order is None or step.position + bs > len(images):  # a new epoch of random orders
            step.begin_epoch(torch.stack([torch.randperm(len(images), device=images.device) for _ in models]))
        step()

    return run


def _time_approach(row, approach, make_step, *, images_per_step, device, steps, warmup):
    """Time ``make_step()`` into ``row[<approach>_images_per_s]`` (None and a status on OOM or an error)."""
    try:
        seconds = time_steps(make_step(), steps, warmup, device)
        row[f"{approach}_images_per_s"] = images_per_step / seconds
    except torch.OutOfMemoryError:
        row[f"{approach}_images_per_s"], row[f"{approach}_status"] = None, "oom"
    except Exception as e:  # noqa: BLE001  (a compiler failure is a result of the benchmark, not its end)
        row[f"{approach}_images_per_s"] = None
        row[f"{approach}_status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    if device.type == "cuda":
        torch.cuda.empty_cache()


def ratios(row):
    """Add to a fill ``row``, in place, each approach's speed over one seed's (``<approach>_vs_one_seed``) and
    its time over separate runs' (``<approach>_time_vs_separate``)."""
    one = row.get("one_seed_images_per_s")
    for approach in APPROACHES:
        speed = row.get(f"{approach}_images_per_s")
        row[f"{approach}_vs_one_seed"] = speed / one if speed and one else None
        row[f"{approach}_time_vs_separate"] = one / speed if speed and one else None
    separate = {a: row[f"{a}_images_per_s"] for a in SEPARATE if row.get(f"{a}_images_per_s")}
    best = max(separate, key=separate.get) if separate else None
    ensemble = row.get("ensemble_images_per_s")
    row["best_separate"] = best
    row["winner"] = None if not (ensemble and one) else ("ensemble" if ensemble > separate[best] else "separate")


@checked("batch", "steps", "warmup", seeds=Whole(least=1, most=COUNT_MAX))  # seeds: how many, not which
def bench_fill(models=None, *, seeds=3, device=None, dtype=None, batch=None, steps=10, warmup=3, compile=True):
    """Training images/s of one seed, of ``seeds`` seeds as one ensemble and of the compiled one-seed step
    (default mode, and CUDA graphs on a GPU), per model at its paper batch size (``batch``: another), measured in
    one run; see the module doc for the ratios and ``winner``. ``compile=False`` skips the compiled approaches.
    ``models`` defaults to the `vix` paper's Table 1 models. The caller's RNG state is kept."""
    if models is None:
        models = papers.table_models("vix", "table1")
    if isinstance(seeds, bool) or int(seeds) != seeds or seeds < 1:
        raise ValueError(f"seeds={seeds!r}: give a whole number >= 1 of seeds to train at once")

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dt = as_dtype(dtype or ("bf16" if device.type == "cuda" else "fp32"))
    rows = []
    for name in models:
        paper = run_of(name, profile="paper").config
        bs = batch or paper["batch_size"]
        images, labels = load_split("synthetic", "train", size=max(bs * seeds, bs * 2))
        images, labels = images.to(device), labels.to(device)
        exact, reason = can_ensemble_run(paper)
        row = {"model": name, "batch_size": bs, "seeds": seeds, "device": str(device),
               "dtype": str(dt).removeprefix("torch."), "steps": steps, "torch": torch.__version__,
               "can_ensemble": exact, "can_ensemble_reason": reason}
        approaches = {
            "one_seed": (lambda name=name, images=images, labels=labels, bs=bs: ours_step(
                create_model(name).to(device), images, labels, bs=bs, dtype=dt), bs),
            "ensemble": (lambda name=name, images=images, labels=labels, bs=bs: _ensemble_step(
                [create_model(name).to(device) for _ in range(seeds)], images, labels, bs=bs, dtype=dt), seeds * bs)}
        if compile:
            for approach, mode in (("compiled", None), ("cuda_graphs", "reduce-overhead")):
                if mode is None or device.type == "cuda":
                    approaches[approach] = (lambda mode=mode, name=name, images=images, labels=labels, bs=bs:
                                            _compiled_step(name, images, labels, bs=bs, dtype=dt, mode=mode), bs)
        for approach, (make_step, images_per_step) in approaches.items():
            with local_rng(device):  # weights and batches from seed 0; the caller's RNG state kept
                _time_approach(row, approach, make_step, images_per_step=images_per_step, device=device,
                               steps=steps, warmup=warmup)
        ratios(row)
        rows.append(row)
    return rows


def _compiled_step(name, images, labels, *, bs, dtype, mode):
    model = create_model(name).to(images.device)
    return ours_step(model, images, labels, bs=bs, dtype=dtype, forward=torch.compile(model, mode=mode))


def fill_winner(record, model):
    """"ensemble" or "separate": which way of training several seeds of ``model`` was faster in a ``bench fill``
    run (``record``: its saved JSON, or its rows), or None where it was not measured."""
    rows = record["rows"] if isinstance(record, dict) else record
    return next((row.get("winner") for row in rows if row["model"] == model), None)
