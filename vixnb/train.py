"""The training engine for the papers' protocols, and `run`, which loads a stored result or trains.

Data stay on the device as uint8 tensors; batches are indexed there and normalised there (no
DataLoader workers on the hot path). The authors' protocol (notes section 3): AdamW, no schedule, no
augmentation, the test set evaluated every epoch, the reported number is the best test epoch, and top-1 /
top-5 are means of per-batch accuracies. Their two quirks are flags in the profile:
``amp_loss_only`` (autocast around the loss alone, with a GradScaler; the forward stays fp32) and
``eval_mode=False`` (never switching to eval mode for evaluation).

Protocol ``fixed`` selects the epoch on a held-out validation split and evaluates the test set once;
optimizer ``dualopt`` is paper `cxv`'s AdamW-then-SGD rule (``DualOptSwitch``); ``randaugment`` augments
training batches only, and ``post_train_epochs`` continues from the best weights on un-augmented data
(paper `cxv`, Table 4). ``compile`` and ``channels_last`` are speed switches; CUDA graphs are not here yet.

The blog's protocol (paper `shaped`) adds, as config keys present only where set (``profiles.run_config``):
``schedule: cosine`` (per-epoch cosine annealing to 0 over ``epochs``, set statelessly before each epoch, so
a resumed run is exact; each history entry records its ``lr``), ``augment`` (random horizontal and vertical
flips and rotations of the main stage's training batches on the device, ``flip_rotate``, drawn from the run's
own generator, saved in the checkpoint) and ``grad_norm_every`` (the mean per-layer gradient norm over every
N-th step, ``grad_norms`` in each history entry). A model with shaped attention records each layer's
``alpha_beta`` after every epoch. ``run(..., keep_weights=True)`` stores the selected weights in float16 beside
the result (``ResultsStore.load_weights``, ``trained_model``).

Warm starts (paper `linattn`): a config with ``init_from`` starts from another run's selected weights
(``models.warm_start.transfer``), recorded under the result's ``transfer`` with the test accuracy right after it;
``run`` finds or trains the source and keeps its weights locally (``keep_weights="local"``). Every epoch records
the selection set's loss (``select_loss``) and the seconds of that evaluation (``eval_seconds``).
"""
import json
import math
import sys
import time
from contextlib import nullcontext
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.transforms import v2
from tqdm.auto import tqdm

from .data import describe_source, load_split, normalize, source_fingerprint
from .layers import alpha_beta
from .measure.counting import count_params, summary_size_mb
from .profiles import run_config
from .models import architecture_signature, create_model
from .results import ResultsStore, check_compute, load_checkpoint, provenance, remove_checkpoints, save_checkpoint
from .results.provenance import source_hashes


_now = time.time  # the clock a time budget (``deadline``) is read on; tests replace it
#: the keys of a history entry that are wall-clock times (they differ between otherwise identical runs)
TIMING_KEYS = ("seconds", "eval_seconds")


def without_timings(history):
    """A run's history without its wall-clock times (``TIMING_KEYS``): what two identical runs share exactly."""
    return [{k: v for k, v in entry.items() if k not in TIMING_KEYS} for entry in history]


def topk_fraction(logits, labels, ks=(1, 5)):
    """The fraction of a batch whose label is among the top k logits, for each k: a (..., len(ks)) tensor for
    ``logits`` (..., batch, classes) and ``labels`` (batch,) (leading dimensions: an ensemble's members)."""
    top = logits.topk(max(ks), dim=-1).indices
    hits = top == labels[..., None]
    return torch.stack([hits[..., :k].any(dim=-1).float().mean(dim=-1) for k in ks], dim=-1)


def evaluate(model, images, labels, *, batch_size, autocast, with_loss=False):
    """Authors' metric: the mean over test batches of each batch's top-1 / top-5 accuracy (%). A ``model``
    whose logits have leading dimensions (an ensemble's (members, batch, classes)) gets one pair per member.
    ``with_loss``: triples ``(top1, top5, loss)``, loss the mean over batches of each batch's mean cross-entropy
    (the `linattn` paper's test loss), computed alike for a model and an ensemble's members."""
    per_batch = []
    with torch.no_grad(), autocast():
        for start in range(0, len(images), batch_size):
            logits = model(normalize(images[start:start + batch_size])).float()
            batch_labels = labels[start:start + batch_size]
            scores = topk_fraction(logits, batch_labels)
            if with_loss:
                picked = logits.log_softmax(-1).gather(-1, batch_labels.expand(logits.shape[:-1]).unsqueeze(-1))
                scores = torch.cat([scores, -picked.squeeze(-1).mean(-1, keepdim=True)], dim=-1)
            per_batch.append(scores)
    rows_of = torch.stack(per_batch, dim=-2).tolist()  # (..., batches, 2 or 3): one device sync per evaluation

    def mean(rows):
        return tuple(sum(row[i] * (100 if i < 2 else 1) for row in rows) / len(rows) for i in range(len(rows[0])))

    return mean(rows_of) if per_batch[0].dim() == 1 else [mean(rows) for rows in rows_of]


class DualOptSwitch:
    """The DualOpT rule: count epochs since the last top-1 >= best (ties reset the count); after
    ``patience`` such epochs in the AdamW phase say "switch", in the SGD phase say "stop". ``adamw_epochs``
    (a run whose length is capped, e.g. the budget profile's): also switch once the AdamW phase has run that
    many epochs, so that a capped run reaches its SGD phase; ``reason`` says which rule switched."""

    def __init__(self, patience=20, *, phase="adamw", best=float("-inf"), adamw_epochs=None):
        self.patience, self.best, self.since, self.phase = patience, best, 0, phase
        self.adamw_epochs, self.epochs_in_phase, self.reason = adamw_epochs, 0, None

    def update(self, top1):
        if top1 >= self.best:
            self.best, self.since = top1, 0
        else:
            self.since += 1
        self.epochs_in_phase += 1
        patience = self.since >= self.patience
        capped = self.phase == "adamw" and self.adamw_epochs is not None and self.epochs_in_phase >= self.adamw_epochs
        if not (patience or capped):
            return "continue"
        self.since, self.epochs_in_phase = 0, 0
        if self.phase == "adamw":
            self.phase, self.reason = "sgd", "patience" if patience else "cap"
            return "switch"
        return "stop"

    def state_dict(self):
        return dict(vars(self))

    def load_state_dict(self, state):
        vars(self).update(state)


def dualopt_switch(config, **kwargs):
    """The run's ``DualOptSwitch`` (its patience, and the AdamW phase's cap where the run's length is capped)."""
    d = config["dualopt"]
    return DualOptSwitch(d["patience"], adamw_epochs=d.get("adamw_epochs"), **kwargs)


def adamw(params, config):
    """The protocol's AdamW over ``params`` (fused on a GPU)."""
    params = list(params)
    return torch.optim.AdamW(params, lr=config["lr"], betas=tuple(config["betas"]), eps=config["eps"],
                             weight_decay=config["weight_decay"], fused=params[0].is_cuda)


def _optimizer(model, config, phase):
    if phase == "sgd":
        d = config["dualopt"]
        return torch.optim.SGD(model.parameters(), lr=d["sgd_lr"], momentum=d["sgd_momentum"])
    return adamw(model.parameters(), config)


def augment_batch(images, randaugment):
    """RandAugment (torchvision), drawn independently per image, on uint8 images where they are.
    ``randaugment`` = [num_ops, magnitude]; paper `cxv` writes them as M and N, swapped (notes section 3b)."""
    if not randaugment:
        return images
    ra = v2.RandAugment(num_ops=randaugment[0], magnitude=randaugment[1])
    return torch.stack([ra(img) for img in images])


def lr_at(config, epoch):
    """The learning rate of main-stage epoch ``epoch`` (1-based): ``lr``, or under ``schedule: cosine`` what
    torch's CosineAnnealingLR(T_max=epochs, eta_min=0) stepped once per epoch gives, in closed form."""
    if config.get("schedule") != "cosine":
        return config["lr"]
    return config["lr"] * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / config["epochs"]))


def rotate_batch(images, angles):
    """Each image of a uint8 (b, c, h, w) batch rotated by its own angle (``angles``, degrees; positive is
    counter-clockwise) about its centre as torchvision's ``rotate`` does it: nearest pixel, zero fill, same size."""
    rad = torch.deg2rad(angles.double())
    cos, sin, zero = rad.cos(), rad.sin(), torch.zeros_like(rad)
    h, w = images.shape[-2:]
    # torchvision's inverse map in pixels about the centre, [[cos, -sin], [sin, cos]], in affine_grid's [-1, 1] units
    theta = torch.stack([torch.stack([cos, -sin * h / w, zero], -1), torch.stack([sin * w / h, cos, zero], -1)], -2)
    grid = F.affine_grid(theta.float(), list(images.shape), align_corners=False)
    out = F.grid_sample(images.float(), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return out.to(torch.uint8)


AUGMENT_SEED_OFFSET = 1_000_003  # a run's augmentation generator is seeded with its seed plus this


def flip_rotate(images, *, hflip, vflip, rotate, generator):
    """The blog's augmentation of a uint8 (b, c, h, w) batch, on its device, for all images at once: each image
    flipped horizontally (p=0.5), vertically (p=0.5) and rotated by its own angle uniform in [-rotate, rotate]
    degrees (``rotate_batch``), as torchvision's RandomHorizontalFlip, RandomVerticalFlip and RandomRotation.
    Every draw comes from ``generator`` (on the images' device): the same three per image whatever is on."""
    draws = torch.rand(3, len(images), generator=generator, device=images.device)
    for on, heads, dim in ((hflip, draws[0], -1), (vflip, draws[1], -2)):
        if on:
            images = torch.where((heads < 0.5)[:, None, None, None], images.flip(dim), images)
    return rotate_batch(images, (2 * draws[2] - 1) * rotate) if rotate else images


def layer_grad_norms(layers):
    """(layers,) tensor on the device: for each layer (a list of parameters), the L2 norm of all its gradients
    together (no device sync)."""
    norms = []
    for params in layers:
        grads = [p.grad for p in params if p.grad is not None]
        norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) if grads else params[0].new_zeros(()))
    return torch.stack(norms)


def layer_names(model, config):
    """The parameter names of each layer of ``model`` (each child of ``model.blocks``, first layer first:
    ``blocks.<i>.…``), for ``grad_norm_every``; an error naming the model where it has no ``blocks``."""
    blocks = list(getattr(model, "blocks", nn.Sequential()).named_children())
    if not blocks:
        raise ValueError(f"{config['model']} has no `blocks` (its sequence of layers), which grad_norm_every needs; "
                         "leave grad_norm_every out for this model")
    return [[f"blocks.{i}.{n}" for n, _ in block.named_parameters()] for i, block in blocks]


def layer_params(params, model, config):
    """The parameters of each layer of ``model`` (``layer_names``), taken from ``params`` (name -> tensor: the
    model's own, or an ensemble's stacked ones)."""
    return [[params[n] for n in names if n in params] for names in layer_names(model, config)]


def augment_generator(seed, device):
    """A run's augmentation generator: seeded from the run's seed, but not the data order's stream."""
    return torch.Generator(device=device).manual_seed(seed + AUGMENT_SEED_OFFSET)


def set_epoch_lr(optimizer, config, epoch):
    """Under a schedule, set ``optimizer``'s lr for main-stage ``epoch`` (``lr_at``) from the epoch number alone
    (no scheduler state: a resumed run is exact) and return ``{"lr": ...}`` for the history entry; else ``{}``."""
    if not config.get("schedule"):
        return {}
    lr = lr_at(config, epoch)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return {"lr": lr}


def _splits(config, device, download=False):
    """(train, selection, test) tensors on ``device``. Protocol `paper` selects on the test set itself;
    `fixed` holds out the last ``val_size`` images of a fixed (seed 0) permutation of the training set."""
    move = lambda pair: tuple(t.to(device) for t in pair)
    options = {"download": download, "allow_resize": config.get("allow_resize", False)}
    train_x, train_y = load_split(config["dataset"], "train", size=config["train_size"], **options)
    test = move(load_split(config["dataset"], "test", size=config["test_size"], **options))
    if config["protocol"] != "fixed":
        return move((train_x, train_y)), test, test  # selection on the test set itself, one copy on the device
    if config["val_size"] >= len(train_x):
        raise ValueError(f"val_size {config['val_size']} leaves no training images out of {len(train_x)}")
    order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(0))
    keep, held = order[:-config["val_size"]], order[-config["val_size"]:]
    return move((train_x[keep], train_y[keep])), move((train_x[held], train_y[held])), test


def _train_epoch(model, optimizer, scaler, images, labels, *, order_generator, config, augment, autocast, loss_autocast, epoch,
                 augment_generator=None, layers=None):
    """One pass over the training tensors in a seeded random order; returns the epoch's history entry. ``augment``:
    RandAugment or ``flip_rotate`` (from ``augment_generator``) as the config says; ``layers`` (``layer_params``): record
    the per-layer gradient norms every ``grad_norm_every``-th step."""
    t0, bs = time.perf_counter(), config["batch_size"]
    model.train()
    order = torch.randperm(len(images), device=images.device, generator=order_generator)
    loss_sum, correct, steps, norm_sum, sampled = 0.0, 0.0, 0, 0.0, 0
    for i in range(0, len(order), bs):
        idx = order[i:i + bs]
        batch = augment_batch(images[idx], config["randaugment"]) if augment else images[idx]
        if augment and config.get("augment"):
            batch = flip_rotate(batch, **config["augment"], generator=augment_generator)
        try:
            with autocast():
                logits = model(normalize(batch))
            with loss_autocast():
                loss = F.cross_entropy(logits, labels[idx])
        except torch.OutOfMemoryError as e:
            raise RuntimeError(f"{config['model']}: out of memory at batch size {bs}; try --batch-size {bs // 2} "
                               "or precision bf16") from e
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"{config['model']}: loss became {loss.item()} at epoch {epoch}, step {steps + 1}; no result stored. "
                "Try a lower learning rate (--lr) or fp32 precision (--precision fp32).")
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if layers is not None and steps % config["grad_norm_every"] == 0:  # unscaled: no amp_loss_only (run_config)
            norm_sum, sampled = norm_sum + layer_grad_norms(layers), sampled + 1
        scaler.step(optimizer)
        scaler.update()
        loss_sum += loss.item()
        correct += (logits.argmax(dim=1) == labels[idx]).float().mean().item()
        steps += 1
    entry = {"epoch": epoch, "train_loss": loss_sum / steps, "train_acc": 100 * correct / steps}
    if layers is not None:
        entry["grad_norms"] = (norm_sum / sampled).tolist()
    return {**entry, "seconds": time.perf_counter() - t0}


def _device(config, device):
    """The device a run of ``config`` trains on (``device``, else the profile's); an error where it has no GPU."""
    device = torch.device(device or ("cuda" if config["device"] == "cuda" else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"profile {config['profile']!r} needs a CUDA GPU and none is available; use --profile smoke on a CPU")
    return device


def _build_model(config):
    """A new model of ``config`` from the global RNG as it is (the caller seeds it), and what a result records
    of it: both parameter counts, the papers' size and the architecture signature."""
    model = create_model(config["model"], dataset=config["dataset"], **config["model_overrides"])
    facts = {"params_paper": count_params(model, "paper"), "params_true": count_params(model, "true"),
             "size_mb": summary_size_mb(model), "architecture": architecture_signature(model),
             "source_hash": source_hashes(config["model"], model)}
    return model, facts


def _autocasts(config, device):
    """(autocast of the forward, autocast of the loss, GradScaler) of ``config``'s precision and AMP quirk."""
    bf16 = config["precision"] == "bf16"
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 else nullcontext
    amp = config["amp_loss_only"] and device.type == "cuda"
    loss_autocast = (lambda: torch.autocast("cuda")) if amp else nullcontext
    return autocast, loss_autocast, torch.amp.GradScaler("cuda", enabled=amp)


def _selected(history):
    """The last epoch reaching the best top-1: the one whose weights the best state holds (ties saved, as in
    the authors' scripts, which checkpoint on top-1 >= best)."""
    return max(reversed(history), key=lambda h: h["select_top1"])


def _result(config, device, history, facts, *, seconds, test=None, **provenance_fields):
    """The result of a finished run: the selected epoch's metrics (protocol ``fixed``: ``test``, the test set's
    (top-1, top-5) with the selected weights), the model's ``facts``, peak GPU memory, history and provenance."""
    best = _selected(history)
    if test is not None:
        metrics = {"top1": test[0], "top5": test[1], "val_top1": best["select_top1"], "val_top5": best["select_top5"]}
    else:
        metrics = {"top1": best["select_top1"], "top5": best["select_top5"]}
    gpu = {}
    if device.type == "cuda":
        gpu = {"gpu_gb_allocated": torch.cuda.max_memory_allocated(device) / 1024**3,
               "gpu_gb_reserved": torch.cuda.max_memory_reserved(device) / 1024**3}
    return {
        "status": "done", **metrics, "best_epoch": best["epoch"], "epochs_run": len(history),
        "final_top1": history[-1]["select_top1"], **facts, **gpu,
        "seconds": seconds,
        "history": history,
        "provenance": provenance(device, stamp="finished", profile=config["profile"], protocol=config["protocol"],
                                 data=describe_source(config["dataset"]), seed=config["seed"],
                                 data_fingerprint=source_fingerprint(config["dataset"]), **provenance_fields),
    }


def out_of_time(deadline, history, last_epoch=None):
    """Whether another epoch would end after ``deadline`` (a ``time.time()`` value; None: no limit), judged by
    ``last_epoch`` (the wall time of the last whole epoch: training, evaluation, checkpoint), else by the last
    history entry's training time with half again for the rest (``history`` may come from a checkpoint); with
    no epoch yet, only a passed deadline."""
    if deadline is None:
        return False
    last = last_epoch if last_epoch is not None else (1.5 * history[-1]["seconds"] if history else 0.0)
    return _now() + last > deadline


def train(config, *, progress=True, device=None, checkpoint=None, download=False, deadline=None, keep_weights=False,
          init_state=None, init_sha256=None):
    """Train one run described by ``config`` (from ``profiles.run_config``); return the result dict.

    With ``checkpoint`` (a path), the state is saved atomically after every epoch and a run
    interrupted at any point (even ``kill -9``) resumes from the last saved epoch, ending with the same
    metrics as an uninterrupted run on the CPU. With ``deadline`` (a ``time.time()`` value; needs
    ``checkpoint``), a run whose next epoch would end after it stops at the epoch boundary with
    ``TrainingPaused``; its checkpoint is kept, and the next call resumes it. ``keep_weights``: the weights'
    size is checked against ``WEIGHTS_LIMIT_MB`` first, and the result also holds ``best_state``, the
    selected weights (tensors, not JSON: ``run`` stores them and takes them out).

    ``init_state`` (a config with ``init_from``): the source run's weights, carried into the new model before
    epoch 1 (``models.warm_start.transfer``); the result's ``transfer`` records the report, the test top-1,
    top-5 and loss right after it, before any training, and ``init_sha256``, the SHA-256 of those weights."""
    if deadline is not None and checkpoint is None:
        raise ValueError("deadline needs a checkpoint path: without one a paused run would lose its epochs")
    if keep_weights is True:  # "local": kept on this machine only, uncapped
        check_weights_size(config)
    device = _device(config, device)
    (train_x, train_y), (sel_x, sel_y), (test_x, test_y) = _splits(config, device, download)
    seed, bs = config["seed"], config["batch_size"]
    cuda_rng = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_rng):
        torch.manual_seed(seed)
        model, facts = _build_model(config)
        model.to(device, memory_format=torch.channels_last) if config["channels_last"] else model.to(device)
        switch = dualopt_switch(config) if config["optimizer"] == "dualopt" else None
        optimizer = _optimizer(model, config, "adamw")
        autocast, loss_autocast, scaler = _autocasts(config, device)
        shuffle = torch.Generator(device=device).manual_seed(seed)
        augmenter = augment_generator(seed, device)
        layers = layer_params(dict(model.named_parameters()), model, config) if config.get("grad_norm_every") else None
        history, best_state, elapsed, transferred = [], None, 0.0, None
        # RNG states stay CPU ByteTensors; load_state_dict copies the rest onto the model's device
        state = load_checkpoint(checkpoint) if checkpoint is not None else None
        if state is not None:
            if state["switch"] is not None:
                switch = dualopt_switch(config)
                switch.load_state_dict(state["switch"])
            model.load_state_dict(state["model"])
            optimizer = _optimizer(model, config, switch.phase if switch else "adamw")
            optimizer.load_state_dict(state["optimizer"])
            scaler.load_state_dict(state["scaler"])
            shuffle.set_state(state["shuffle"])
            if state.get("augment_rng") is not None:
                augmenter.set_state(state["augment_rng"])
            torch.random.set_rng_state(state["cpu_rng"])
            if device.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            history, best_state, elapsed = state["history"], state["best_state"], state["elapsed"]
            transferred = state.get("transfer")
        elif config.get("init_from"):
            if init_state is None:
                raise ValueError(f"{config['model']}: init_from {config['init_from']['run']!r} needs the source's "
                                 "weights (init_state) where no checkpoint of the run is saved; train.run finds them")
            transferred = _warm_start(model, init_state, init_sha256, config, sel_x, sel_y, autocast)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        forward = torch.compile(model) if config["compile"] else model  # shares parameters and modes with model

        start = time.perf_counter() - elapsed
        last_epoch = None  # wall seconds of the last whole epoch of this call
        limits = {"main": config["epochs"], "post": config["post_train_epochs"]}
        stage = history[-1]["stage"] if history else "main"
        bar = tqdm(total=sum(limits.values()), initial=len(history), desc=f"{config['model']} seed {seed}",
                   disable=not progress, leave=False)
        while True:
            done_in_stage = [h for h in history if h["stage"] == stage]
            if len(done_in_stage) >= limits[stage] or (done_in_stage and done_in_stage[-1].get("stop")):
                if stage == "post" or not limits["post"]:
                    break
                # post-training (paper `cxv`; DualOpt's post_train): from the best weights, on un-augmented data,
                # with SGD, until `patience` epochs pass without a top-1 >= the best of the whole run
                stage = "post"
                model.load_state_dict(best_state)
                switch = DualOptSwitch(config["dualopt"]["patience"], phase="sgd",
                                       best=max(h["select_top1"] for h in history))
                optimizer = _optimizer(model, config, "sgd")
                continue
            if out_of_time(deadline, history, last_epoch):
                raise TrainingPaused(f"{config['model']} seed {seed}: paused after epoch {len(history)} of "
                                     f"{sum(limits.values())} (time budget); run it again to resume")
            epoch_start = _now()
            scheduled = set_epoch_lr(optimizer, config, len(history) + 1)
            try:
                entry = _train_epoch(forward, optimizer, scaler, train_x, train_y, order_generator=shuffle,
                                     config=config, augment=stage == "main", autocast=autocast,
                                     loss_autocast=loss_autocast, epoch=len(history) + 1, augment_generator=augmenter,
                                     layers=layers)
                entry.update(scheduled)
                if (shaped := alpha_beta(model)) is not None:
                    entry["alpha_beta"] = shaped
                if config["eval_mode"]:
                    model.eval()
                eval_start = time.perf_counter()
                top1, top5, *loss = evaluate(forward, sel_x, sel_y, batch_size=bs, autocast=autocast, with_loss=True)
                entry.update(**({"select_loss": loss[0]} if loss else {}), eval_seconds=time.perf_counter() - eval_start)
            except KeyboardInterrupt:
                saved = "run the same command again to resume" if checkpoint is not None else "nothing was saved"
                raise TrainingInterrupted(f"{config['model']}: interrupted after epoch {len(history)} of "
                                          f"{sum(limits.values())}; {saved}") from None
            entry.update(select_top1=top1, select_top5=top5, stage=stage, phase=switch.phase if switch else "adamw")
            if not history or top1 >= max(h["select_top1"] for h in history):
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            history.append(entry)
            bar.update()
            bar.set_postfix(loss=f"{entry['train_loss']:.3f}", top1=f"{top1:.2f}")
            action = switch.update(top1) if switch else "continue"
            if action == "switch":
                model.load_state_dict(best_state)
                optimizer = _optimizer(model, config, "sgd")
                entry["switched_to_sgd"] = switch.reason
            entry["stop"] = action == "stop"
            if checkpoint is not None:
                save_checkpoint(checkpoint, {
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
                    "shuffle": shuffle.get_state().cpu(), "augment_rng": augmenter.get_state().cpu(),
                    "cpu_rng": torch.random.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                    "history": history, "best_state": best_state, "elapsed": time.perf_counter() - start,
                    "switch": switch.state_dict() if switch else None, "transfer": transferred})
            last_epoch = _now() - epoch_start
        bar.close()

        test = None
        if config["protocol"] == "fixed":  # the selected weights (_selected), evaluated once on the test set
            model.load_state_dict(best_state)
            model.eval()
            test = evaluate(model, test_x, test_y, batch_size=bs, autocast=autocast)
    result = _result(config, device, history, facts, seconds=time.perf_counter() - start, test=test)
    if transferred is not None:
        result["transfer"] = transferred
    return {**result, "best_state": best_state} if keep_weights else result


def _warm_start(model, state, sha256, config, images, labels, autocast):
    """Carry the source run's weights ``state`` (their SHA-256: ``sha256``) into ``model`` (``transfer``) and
    evaluate it at once: the record a warm-started result keeps under ``transfer`` (the report's counts and its new
    and unused tensors; top-1, top-5 and loss on the selection set before any training)."""
    from .models.warm_start import transfer

    report = transfer({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, model)
    if config["eval_mode"]:
        model.eval()
    top1, top5, *loss = evaluate(model, images, labels, batch_size=config["batch_size"], autocast=autocast, with_loss=True)
    return {"source": config["init_from"]["run"], "source_key": config["init_from"]["key"],
            **({"source_weights_sha256": sha256} if sha256 else {}), **report.to_dict(),
            "top1": top1, "top5": top5, "loss": loss[0] if loss else None}


WEIGHTS_LIMIT_MB = 16  # the most a run's kept weights (float16) may take


def weights_bytes(config):
    """The bytes of ``config``'s model state in float16 (floating tensors 2 bytes an element, integer buffers as
    they are), from a build on the meta device (no memory, no random numbers)."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        model = create_model(config["model"], dataset=config["dataset"], **config["model_overrides"])
    return sum(v.numel() * (2 if v.is_floating_point() else v.element_size()) for v in model.state_dict().values())


def check_weights_size(config):
    """A one-line error, before any training, where ``config``'s weights are too large to keep."""
    size = weights_bytes(config) / 2**20
    if size > WEIGHTS_LIMIT_MB:
        raise ValueError(f"{config['model']}: its weights take {size:.1f} MiB in float16, over the {WEIGHTS_LIMIT_MB} "
                         "MiB cap on kept weights (train.WEIGHTS_LIMIT_MB); run it without keep_weights")


def can_run(config):
    return config["device"] != "cuda" or torch.cuda.is_available()


class TrainingInterrupted(KeyboardInterrupt):
    """Training was interrupted (Ctrl-C); the message says after which epoch and how to resume."""


class TrainingPaused(RuntimeError):
    """A time budget ran out at an epoch boundary; the checkpoint is kept and the next call resumes the run."""


@cache
def _built_today(model, dataset, overrides_json):
    """Today's architecture signature and parameter counts of a configured model, built on the meta device
    (no memory used, no random numbers drawn)."""
    with torch.device("meta"):
        built = create_model(model, dataset=dataset, **json.loads(overrides_json))
    return architecture_signature(built), {"params_paper": count_params(built, "paper"),
                                           "params_true": count_params(built, "true")}


def other_code(stored):
    """Why a stored run was made by other model code than today's, or None: its recorded architecture
    signature differs from today's model in the same configuration; for a result older than signatures, its
    parameter counts differ."""
    config = stored["config"]
    signature, counts = _built_today(config["model"], config["dataset"],
                                     json.dumps(config.get("model_overrides", {}), sort_keys=True))
    if "architecture" in stored:
        return None if stored["architecture"] == signature else \
            f"made by other model code (architecture {stored['architecture']}, today {signature})"
    changed = [f"{k} {stored[k]:,}, today {counts[k]:,}" for k in counts if k in stored and stored[k] != counts[k]]
    return f"made by other model code ({'; '.join(changed)})" if changed else None


@cache
def _source_today(model, dataset, overrides_json):
    with torch.random.fork_rng(), torch.device("meta"):
        return source_hashes(model, create_model(model, dataset=dataset, **json.loads(overrides_json)))


def code_changed(stored):
    """Why a stored run's model or engine code differs from today's (its recorded ``source_hash`` against
    ``source_hashes`` of today's model in the same configuration), or None; None too for a result stored
    before source hashes were recorded. A flag for the provenance page only: unlike ``stale_reason`` it never
    makes a run train again, since any edit of ``train.py`` would otherwise retrain every stored run."""
    recorded = stored.get("source_hash")
    if not recorded:
        return None
    config = stored["config"]
    today = _source_today(config["model"], config["dataset"],
                          json.dumps(config.get("model_overrides", {}), sort_keys=True))
    changed = [f"{part} code changed since it was stored (source {recorded.get(part)}, today {today[part]})"
               for part in ("model", "engine") if recorded.get(part) != today[part]]
    return "; ".join(changed) or None


def other_data(stored):
    """Why a stored run was made from other data than the copy here (its data fingerprint differs), or None
    (the same data, no copy here to compare with, or a run that recorded no fingerprint)."""
    recorded = stored.get("provenance", {}).get("data_fingerprint")
    here = source_fingerprint(stored["config"]["dataset"]) if recorded else None
    if recorded and here and recorded != here:
        return f"made from other data than the copy here (data fingerprint {recorded}, here {here})"
    return None


def stale_reason(stored):
    """Why a stored result no longer answers for its configuration (``other_code`` or ``other_data``), or None."""
    return other_code(stored) or other_data(stored)


def run(model, *, dataset="cifar10", profile="smoke", seed=0, compute="missing", store=None, progress=True,
        download=False, deadline=None, keep_weights=False, **overrides):
    """One training run under the compute policy: the stored result if there is one (``compute="never"`` or
    ``"missing"``), else train it where the profile can run here (``"missing"``; ``"always"`` trains anew,
    from epoch 1, even over a stored result), else a ``{"status": "not yet run"}`` record with the reason.

    A stored result made by other model code than today's or from other data than the copy here
    (``stale_reason``) is never reused silently: ``"missing"`` trains again; ``"never"`` returns it with the
    reason under ``"stale"``. Two processes on one run: the second
    waits for the first's result (a lock per run) instead of training it again. ``deadline``: see ``train``
    (a run stopped by it raises ``TrainingPaused`` and keeps its checkpoint).

    ``keep_weights=True``: the selected weights are stored too, in float16 (``ResultsStore.save_weights``; the
    result records them under ``"weights"``); ``"missing"`` trains again a stored result whose weights are
    missing, ``"never"`` (or a machine that cannot train the profile) returns it as it is, saying why under
    ``"weights_missing"``. ``keep_weights="local"``: kept in the profile's ``.weights-local/`` folder, which is
    never committed nor packed, with no size cap (a warm start's ViT-B/16 source on the machine that trains).

    A run with ``init_from`` first gets its source run (the stored result if its weights are here, else trained,
    keeping them locally) and starts from its weights; a run that some row of its paper file starts from
    (``warm_start_source``) keeps its weights locally when trained, so the warm starts find them."""
    check_compute(compute)
    config = run_config(model, dataset=dataset, profile=profile, seed=seed, **overrides)
    store = store if store is not None else ResultsStore()
    # a warm start's source keeps its weights locally when trained; a stored one is never retrained for them
    # here (only a warm start that needs them asks, through _source_weights)
    keep_local = not keep_weights and warm_start_source(config)
    stored = None if compute == "always" else store.get(config)
    stale = (stale_reason({**stored, "config": config}) or source_changed(stored, store)) if stored is not None else None
    unkept = store.weights_missing(config, stored) if keep_weights and stored is not None else None
    if stored is not None and (not (stale or unkept) or compute == "never"):
        return {**stored, "stale": stale} if stale else stored
    if compute == "never":
        return {"status": "not yet run", "config": config, "reason": "no stored result for this configuration"}
    if not can_run(config):
        if stored is not None and not stale:  # its metrics stand; only the weights cannot be had here
            return {**stored, "weights_missing": f"{unkept}; profile {profile!r} needs a CUDA GPU to train it again"}
        held = f"the stored result was {stale}" if stale else "no stored result for this configuration"
        return {"status": "not yet run", "config": config, "reason": f"profile {profile!r} needs a CUDA GPU; {held}"}
    if stale or unkept:
        print(f"vixnb: {store.path(config).name} was {stale}; training it again" if stale else
              f"vixnb: {store.path(config).name} {unkept}; training it again to keep them", file=sys.stderr, flush=True)
    store.check_writable(config)
    init_state = init_sha256 = None
    # a warm start needs its source's weights unless it resumes from its own checkpoint
    if config.get("init_from") and (compute == "always" or not store.checkpoint_path(config).exists()):
        init_state, init_sha256, why = _source_weights(config, store, progress=progress, download=download,
                                                       deadline=deadline)
        if init_state is None:
            return {"status": "not yet run", "config": config, "reason": why}
    keep_weights = keep_weights or ("local" if keep_local else False)
    with store.lock(config) as waited:
        if waited and compute != "always" and (done := store.get(config)) is not None and \
                not (keep_weights and store.weights_missing(config, done)):
            return done
        checkpoint = store.checkpoint_path(config)
        if compute == "always":
            remove_checkpoints(checkpoint)
        result = train(config, progress=progress, checkpoint=checkpoint, download=download, deadline=deadline,
                       keep_weights=keep_weights, init_state=init_state, init_sha256=init_sha256)
        if keep_weights:  # the weights first: a stored result's weights record always names a written file
            result["weights"] = store.save_weights(config, result.pop("best_state"), local=keep_weights == "local")
        store.put(config, result)
        remove_checkpoints(checkpoint)
    return {**result, "config": config}


def warm_start_source(config):
    """Whether a row of ``config``'s paper file starts from ``config``'s run: a row named by an ``init_from`` whose
    run, with ``config``'s model settings added (a chapter's profile settings), is ``config`` itself. Such a run
    keeps its weights locally (``run``), so that the warm starts find them."""
    from . import papers
    from .models import model_cfg
    from .results import config_key

    if config.get("init_from"):
        return False
    runs = papers.paper_runs(model_cfg(config["model"])["paper"])
    sources = {s["init_from"] for _, s in runs.values() if isinstance(s.get("init_from"), str)}
    for row in sources & set(runs):
        model, settings = runs[row]
        if model != config["model"]:
            continue
        candidate = run_config(model, dataset=config["dataset"], profile=config["profile"], seed=config["seed"],
                               **{**config["model_overrides"], **settings})
        if config_key(candidate) == config_key(config):
            return True
    return False


def _source_config(config):
    """The run config of ``config``'s ``init_from`` run: the same dataset, profile and seed."""
    source = config["init_from"]
    return run_config(source["model"], dataset=config["dataset"], profile=config["profile"], seed=config["seed"],
                      **source["settings"])


def _source_weights(config, store, **options):
    """``(state, sha256, None)``: the weights of ``config``'s ``init_from`` run (its stored ones, else trained now and
    kept locally) and their SHA-256, or ``(None, None, why)`` where they cannot be had."""
    from .results import config_key

    source, source_config = config["init_from"], _source_config(config)
    if config_key(source_config) != source["key"]:
        raise RuntimeError(f"{config['model']}: init_from {source['run']!r} resolved to another run than its config "
                           "records; rebuild the config (profiles.run_config)")
    keep = True if weights_bytes(source_config) <= WEIGHTS_LIMIT_MB * 2**20 else "local"
    result = run(source["model"], dataset=config["dataset"], profile=config["profile"], seed=config["seed"],
                 compute="missing", store=store, keep_weights=keep, **source["settings"], **options)
    if result["status"] != "done":
        return None, None, f"its source run {source['run']!r} is {result['status']}: {result.get('reason', '')}"
    state = store.load_weights(source_config)
    if state is None:
        return None, None, f"its source run {source['run']!r} {store.weights_missing(source_config, result)}"
    return state, result["weights"]["sha256"], None


def source_changed(stored, store):
    """Why a stored warm start no longer matches its source, or None: the source run's stored result now keeps other
    weights (SHA-256) than those the warm start was made from (the source was trained again), or is gone."""
    transfer = stored.get("transfer") or {}
    made_from = transfer.get("source_weights_sha256")
    init = (stored.get("config") or {}).get("init_from")
    if not made_from or not init:
        return None
    from .results import StoreError

    try:
        source = store.get(_source_config(stored["config"]))
    except StoreError:
        source = None
    now = ((source or {}).get("weights") or {}).get("sha256")
    if now == made_from:
        return None
    return (f"made from other weights of {init['run']!r} than those stored now" if now else
            f"made from weights of {init['run']!r} that no stored result keeps now")


def trained_model(model, *, dataset="cifar10", profile="smoke", seed=0, compute="never", store=None, **overrides):
    """``(module, result)``: the trained model of a run (``run(..., keep_weights=True)`` under ``compute``),
    built as ``_build_model`` builds it (under a forked, seeded RNG: the caller's is untouched), its kept
    weights loaded (cast back to float32), in eval mode; or ``(None, record)`` where there are no stored weights
    and ``compute`` does not allow training them (a ``{"status": "not yet run", "reason": ...}`` record)."""
    store = store if store is not None else ResultsStore()
    result = run(model, dataset=dataset, profile=profile, seed=seed, compute=compute, store=store, keep_weights=True,
                 **overrides)
    if result["status"] == "done" and result.get("stale"):  # weights of other model code or data: never loaded
        return None, {"status": "not yet run", "config": result["config"],
                      "reason": f"the stored result was {result['stale']}; train it again with compute='missing'"}
    state = store.load_weights(result["config"]) if result["status"] == "done" else None
    if state is None:
        return None, result if result["status"] != "done" else {
            "status": "not yet run", "config": result["config"],
            "reason": f"the stored result {store.weights_missing(result['config'], result)}; train it again with "
                      "compute='missing' (it keeps the weights)"}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(result["config"]["seed"])
        module, _ = _build_model(result["config"])
    module.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    return module.eval(), result
