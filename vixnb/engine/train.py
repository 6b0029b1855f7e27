"""The training engine for the papers' protocols: one run of a config (``spec.run_config``), epoch by epoch,
checkpointed after each (``train``). Whether a run is read from the store or trained, and what is kept of it, is
``vixnb.runs.make``.

Data stay on the device as uint8 tensors; batches are indexed there and normalised there (no DataLoader workers on the
hot path). The authors' protocol (notes section 3): AdamW, no schedule, no augmentation, the test set evaluated every
epoch, the reported number is the best test epoch, and top-1 / top-5 are means of per-batch accuracies. Their two quirks
are flags in the profile: ``amp_loss_only`` (autocast around the loss alone, with a GradScaler; the forward stays fp32)
and ``eval_mode=False`` (never switching to eval mode for evaluation).

Protocol ``fixed`` selects the epoch on a held-out validation split and evaluates the test set once; optimizer
``dualopt`` is paper `cxv`'s AdamW-then-SGD rule (``DualOptSwitch``), ``sgd`` its SGD phase's settings for the whole run
(section 5.1.1's "only SGD"; with ``stop: patience`` it ends as DualOpT's SGD phase does); ``randaugment`` augments
training batches only, and ``post_train_epochs`` continues from the best weights on un-augmented data (paper `cxv`,
Table 4). ``compile`` and ``channels_last`` are speed switches. The work per batch is ``vixnb.engine.steps``: no host
read inside an epoch, and on a GPU the whole training step as one CUDA graph (``train(graphs=...)``).

The blog's protocol (paper `shaped`) adds, as config keys present only where set (``spec.run_config``): ``schedule:
cosine`` (per-epoch cosine annealing to 0 over ``epochs``, set statelessly before each epoch, so a resumed run is exact;
each history entry records its ``lr``), ``augment`` (random horizontal and vertical flips and rotations of the main
stage's training batches on the device, ``augment.flip_rotate``, drawn from the run's own generator, saved in the
checkpoint) and ``grad_norm_every`` (the mean per-layer gradient norm over every N-th step, ``grad_norms`` in each
history entry). A model with shaped attention records each layer's ``alpha_beta`` after every epoch.

Warm starts (paper `linattn`): a config with ``init_from`` starts from another run's selected weights (``init_state``,
``models.warm_start.transfer``), recorded under the result's ``transfer`` with the test accuracy right after it. Every
epoch records the selection set's loss (``select_loss``) and the seconds of that evaluation (``eval_seconds``)."""
import json
import math
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F  # noqa: F401  (the tests patch engine.F.cross_entropy)
from torch import nn
from tqdm.auto import tqdm

from .augment import augment_batch, augment_generator, flip_rotate
from ..data import describe_source, load_split, normalize, source_fingerprint
from ..layers import alpha_beta
from ..models import create_model, model_fact, model_modules, settings_from_key
from ..models.counting import recorded_counts
from ..models.warm_start import transfer
from ..results import load_checkpoint, provenance, save_checkpoint
from ..results.checkpoints import other_architecture
from ..results.provenance import source_hashes
from .steps import (TrainStep, check_attention, drain, evaluate, execution, graph_blocker, layer_grad_norms,  # noqa: F401
                    lr_at, portable_state, set_epoch_lr, set_lr, topk_fraction, with_attention)


now = time.time  # the clock a time budget (``deadline``) is read on; tests replace it
#: the keys of a history entry that are wall-clock times (they differ between otherwise identical runs)
TIMING_KEYS = ("seconds", "eval_seconds")


def without_timings(history):
    """A run's history without its wall-clock times (``TIMING_KEYS``): what two identical runs share exactly."""
    return [{k: v for k, v in entry.items() if k not in TIMING_KEYS} for entry in history]


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


def dualopt_switch(config):
    """The run's patience rule, a ``DualOptSwitch``: DualOpT's (its patience, and the AdamW phase's cap where the run's
    length is capped); SGD alone's under ``stop: patience``, DualOpT's SGD phase from the first epoch; else None."""
    d = config["dualopt"]
    if config["optimizer"] == "dualopt":
        return DualOptSwitch(d["patience"], adamw_epochs=d.get("adamw_epochs"))
    return DualOptSwitch(d["patience"], phase="sgd") if config.get("stop") == "patience" else None


def adamw(params, config):
    """The protocol's AdamW over ``params`` (fused on a GPU)."""
    params = list(params)
    return torch.optim.AdamW(params, lr=config["lr"], betas=tuple(config["betas"]), eps=config["eps"],
                             weight_decay=config["weight_decay"], fused=params[0].is_cuda)


def first_phase(config):
    """The optimizer a run starts with: SGD for optimizer ``sgd`` (SGD alone), else AdamW (DualOpT's first phase)."""
    return "sgd" if config["optimizer"] == "sgd" else "adamw"


def make_optimizer(model, config, phase):
    """The optimizer of a training ``phase``: SGD for the DualOpt switch's ``"sgd"`` phase, else ``adamw``."""
    if phase == "sgd":
        d = config["dualopt"]
        return torch.optim.SGD(model.parameters(), lr=d["sgd_lr"], momentum=d["sgd_momentum"])
    return adamw(model.parameters(), config)


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


def splits(config, device, download=False):
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


#: what a run yields while it trains (``training_steps`` with ``interleave``): at an epoch's start, after each training
#: step, and after its last step, before the epoch's host reads (``concurrent.sync_checked`` checks what lies between)
EPOCH_START, STEP, STEPS_DONE = "epoch start", "step", "steps done"


def _epoch_steps(model, optimizer, scaler, images, labels, *, order_generator, config, augment, autocast, loss_autocast,
                 epoch, step, augment_generator=None, layers=None):
    """One pass over the training tensors in a seeded random order, one ``step`` (``steps.TrainStep``) a batch,
    yielding ``EPOCH_START`` first, ``STEP`` after each and ``STEPS_DONE`` after the last; returns the epoch's
    history entry, from one read of the device (losses and accuracies summed in step order; a non-finite loss named by
    its step).
    ``augment``: RandAugment or ``flip_rotate`` (from ``augment_generator``) as the config says; ``layers``
    (``layer_params``): record the per-layer gradient norms every ``grad_norm_every``-th step."""
    yield EPOCH_START
    t0, bs = time.perf_counter(), config["batch_size"]
    model.train()
    order = torch.randperm(len(images), device=images.device, generator=order_generator)
    norms = {"sum": 0.0, "sampled": 0}

    def sample_norms():
        if scaler.is_enabled():  # fp16: the gradients' own norms, before the step (which then unscales no more)
            scaler.unscale_(optimizer)
        norms["sum"], norms["sampled"] = norms["sum"] + layer_grad_norms(layers), norms["sampled"] + 1

    step.begin_epoch()
    warmup, before = config.get("warmup_steps", 0), (epoch - 1) * -(-len(order) // bs)  # optimizer steps so far
    for i in range(0, len(order), bs):
        if before + i // bs <= warmup and warmup:  # linear warm-up of the epoch's lr (lr_at), then the lr itself
            set_lr(optimizer, lr_at(config, epoch) * min(1.0, (before + i // bs + 1) / warmup))
        idx = order[i:i + bs]
        batch = augment_batch(images[idx], config["randaugment"]) if augment else images[idx]
        if augment and config.get("augment"):
            batch = flip_rotate(batch, **config["augment"], generator=augment_generator)
        sampled = layers is not None and step.steps % config["grad_norm_every"] == 0
        try:
            step(batch, labels[idx], after_backward=sample_norms if sampled else None)
        except torch.OutOfMemoryError as e:
            raise RuntimeError(f"{config['model']}: out of memory at batch size {bs}; try --batch-size {bs // 2} "
                               "or precision bf16") from e
        yield STEP
    yield STEPS_DONE
    rows = step.end_epoch()
    loss_sum, correct = 0.0, 0.0
    for n, (loss, accuracy) in enumerate(rows, 1):
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"{config['model']}: loss became {loss} at epoch {epoch}, step {n}; no result stored. "
                "Try a lower learning rate (--lr) or fp32 precision (--precision fp32).")
        loss_sum, correct = loss_sum + loss, correct + accuracy
    entry = {"epoch": epoch, "train_loss": loss_sum / len(rows), "train_acc": 100 * correct / len(rows)}
    if layers is not None:
        entry["grad_norms"] = (norms["sum"] / norms["sampled"]).tolist()
    return {**entry, "seconds": time.perf_counter() - t0}


def train_epoch(*args, **kwargs):
    """``_epoch_steps`` run to its end: the epoch's history entry."""
    return drain(_epoch_steps(*args, **kwargs))


def training_device(config, device):
    """The device a run of ``config`` trains on (``device``, else the profile's); an error where it has no GPU."""
    device = torch.device(device or ("cuda" if config["device"] == "cuda" else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"profile {config['profile']!r} needs a CUDA GPU and none is available; "
                           "use --profile smoke on a CPU")
    return device


def build_model(config):
    """A new model of ``config`` from the global RNG as it is (the caller seeds it), and what a result records of it:
    ``models.counting.recorded_counts`` (kept between processes: ``models.model_fact``) and its source hashes."""
    settings = settings_from_key(config["model"], config["model_overrides"])
    model = create_model(config["model"], dataset=config["dataset"], **settings)
    counts = model_fact(recorded_counts, config["model"], config["dataset"], json.dumps(settings, sort_keys=True),
                        built=model)  # counted on this model where not kept yet: no meta build
    return model, {**counts, "source_hash": source_hashes(model_modules(config["model"], model))}


#: a config's precision -> the autocast dtype of its forward (fp32: none)
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocasts(config, device, *, cache=True):
    """(autocast of the forward, autocast of the loss, GradScaler) of ``config``'s precision and AMP quirk: bf16 and
    fp16 autocast the forward; fp16 (a GPU without native bfloat16: ``engine.precision.machine_precision``) and the
    authors' AMP (``amp_loss_only``) scale the loss. ``cache=False``: autocast keeps no cast weights (a CUDA graph's
    capture needs that; the numbers are the same)."""
    dtype = AUTOCAST_DTYPES.get(config["precision"])
    autocast = ((lambda: torch.autocast(device.type, dtype=dtype, cache_enabled=cache)) if dtype is not None
                else nullcontext)
    amp = config["amp_loss_only"] and device.type == "cuda"
    loss_autocast = (lambda: torch.autocast("cuda")) if amp else nullcontext
    scaled = (amp or config["precision"] == "fp16") and device.type == "cuda"
    return autocast, loss_autocast, torch.amp.GradScaler("cuda", enabled=scaled)


def selected_epoch(history):
    """The last epoch reaching the best top-1: the one whose weights the best state holds (ties saved, as in
    the authors' scripts, which checkpoint on top-1 >= best)."""
    return max(reversed(history), key=lambda h: h["select_top1"])


def run_result(config, device, history, facts, *, seconds, test=None, **provenance_fields):
    """The result of a finished run: the selected epoch's metrics (protocol ``fixed``: ``test``, the test set's
    (top-1, top-5) with the selected weights), the model's ``facts``, peak GPU memory, history and provenance."""
    best = selected_epoch(history)
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
    return now() + last > deadline


def train(config, *, progress=True, device=None, checkpoint=None, download=False, deadline=None, with_weights=False,
          init_state=None, init_sha256=None, graphs=None, attention=None, compile=None):
    """Train one run described by ``config`` (from ``spec.run_config``); return the result dict.

    With ``checkpoint`` (a path), the state is saved atomically after every epoch and a run
    interrupted at any point (even ``kill -9``) resumes from the last saved epoch, ending with the same
    metrics as an uninterrupted run on the CPU. With ``deadline`` (a ``time.time()`` value; needs
    ``checkpoint``), a run whose next epoch would end after it stops at the epoch boundary with
    ``TrainingPaused``; its checkpoint is kept, and the next call resumes it. ``with_weights``: the result also
    holds ``best_state``, the selected weights (tensors, not JSON: ``runs.make.run`` stores them and takes them out).

    ``init_state`` (a config with ``init_from``): the source run's weights, carried into the new model before
    epoch 1 (``models.warm_start.transfer``); the result's ``transfer`` records the report, the test top-1,
    top-5 and loss right after it, before any training, and ``init_sha256``, the SHA-256 of those weights.

    ``graphs``: the step as one CUDA graph (``steps.TrainStep``) where nothing blocks it (``steps.graph_blocker``);
    None (the default) means on a GPU, True on a CPU runs the graphed path eagerly. An execution choice, not part
    of the run's identity: the result records it under ``provenance["execution"]``, as it does ``attention``
    (``steps.ATTENTION``; None: torch's pick) and ``compile`` (None: the config's, False in every stored run).
    Several runs at once in one process: ``concurrent.train_concurrently``."""
    device = training_device(config, device)
    data = splits(config, device, download)  # before the RNG is forked: a missing data set is named first
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return drain(training_steps(config, progress=progress, device=device, checkpoint=checkpoint, download=download,
                          deadline=deadline, with_weights=with_weights, init_state=init_state, init_sha256=init_sha256,
                          graphs=graphs, data=data, attention=attention, compile=compile))


def training_steps(config, *, progress, device, checkpoint, download, deadline, with_weights, init_state, init_sha256,
         graphs, interleave=False, concurrent_runs=1, data=None, attention=None, compile=None, on_step=None):
    """``train`` as a generator on the global RNG as it finds it (the caller forks it; it seeds it first), yielding
    ``STEP`` / ``STEPS_DONE`` inside epochs when ``interleave`` (else only ``STEPS_DONE``) and returning the
    result: what ``train`` and ``concurrent.train_concurrently`` drive. ``data``: ``splits`` already loaded.
    ``on_step``: called with each ``steps.TrainStep`` the run makes (a reader of its per-step records between
    yields: ``analysis.first_steps``)."""
    if deadline is not None and checkpoint is None:
        raise ValueError("deadline needs a checkpoint path: without one a paused run would lose its epochs")
    attention = check_attention(attention, device)
    compiled = bool(config["compile"] if compile is None else compile)
    (train_x, train_y), (sel_x, sel_y), (test_x, test_y) = data or splits(config, device, download)
    seed, bs = config["seed"], config["batch_size"]
    torch.manual_seed(seed)
    model, facts = build_model(config)
    model.to(device, memory_format=torch.channels_last) if config["channels_last"] else model.to(device)
    switch = dualopt_switch(config)
    optimizer = make_optimizer(model, config, first_phase(config))
    want_graphs = device.type == "cuda" if graphs is None else bool(graphs)
    autocast, loss_autocast, scaler = autocasts(config, device, cache=not want_graphs)
    autocast = with_attention(autocast, attention, model)
    shuffle = torch.Generator(device=device).manual_seed(seed)
    augmenter = augment_generator(seed, device)
    layers = layer_params(dict(model.named_parameters()), model, config) if config.get("grad_norm_every") else None
    history, best_state, elapsed, transferred = [], None, 0.0, None
    # RNG states stay CPU ByteTensors; load_state_dict copies the rest onto the model's device
    state = load_checkpoint(checkpoint, check=lambda s: other_architecture(model, s["model"])) \
        if checkpoint is not None else None
    if state is not None:
        if state["switch"] is not None:
            switch = dualopt_switch(config)
            switch.load_state_dict(state["switch"])
        model.load_state_dict(state["model"])
        optimizer = make_optimizer(model, config, switch.phase if switch else first_phase(config))
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
                             "weights (init_state) where no checkpoint of the run is saved; runs.make.run finds them")
        transferred = _warm_start(model, init_state, init_sha256, config, sel_x, sel_y, autocast)
    if device.type == "cuda" and concurrent_runs == 1:
        torch.cuda.reset_peak_memory_stats(device)
    forward = torch.compile(model) if compiled else model  # shares parameters and modes with model
    graphed_phases, made = set(), []

    def make_step(optimizer):
        blocker = graph_blocker(config, optimizer, scaler, compiled=compiled) if want_graphs else None
        if want_graphs and blocker is None:
            graphed_phases.add(type(optimizer).__name__)
        made.append(TrainStep(forward, optimizer, scaler, capacity=-(-len(train_x) // bs), autocast=autocast,
                              loss_autocast=loss_autocast, device=device, graphed=want_graphs and blocker is None,
                              prepare=normalize, loss_fp32=config.get("loss_fp32", False)))
        if on_step is not None:
            on_step(made[-1])
        return made[-1]

    step = make_step(optimizer)
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
            optimizer = make_optimizer(model, config, "sgd")
            step = make_step(optimizer)
            continue
        if out_of_time(deadline, history, last_epoch):
            raise TrainingPaused(f"{config['model']} seed {seed}: paused after epoch {len(history)} of "
                                 f"{sum(limits.values())} (time budget); run it again to resume")
        epoch_start = now()
        scheduled = set_epoch_lr(optimizer, config, len(history) + 1)
        try:
            epoch = dict(order_generator=shuffle, config=config, augment=stage == "main", autocast=autocast,
                         loss_autocast=loss_autocast, epoch=len(history) + 1, step=step,
                         augment_generator=augmenter, layers=layers)
            if interleave:
                entry = yield from _epoch_steps(forward, optimizer, scaler, train_x, train_y, **epoch)
            else:
                entry = train_epoch(forward, optimizer, scaler, train_x, train_y, **epoch)
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
        entry.update(select_top1=top1, select_top5=top5, stage=stage,
                     phase=switch.phase if switch else first_phase(config))
        if not history or top1 >= max(h["select_top1"] for h in history):
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        history.append(entry)
        bar.update()
        bar.set_postfix(loss=f"{entry['train_loss']:.3f}", top1=f"{top1:.2f}")
        action = switch.update(top1) if switch else "continue"
        if action == "switch":
            model.load_state_dict(best_state)
            optimizer = make_optimizer(model, config, "sgd")
            step = make_step(optimizer)
            entry["switched_to_sgd"] = switch.reason
        entry["stop"] = action == "stop"
        if checkpoint is not None:
            save_checkpoint(checkpoint, {
                "model": model.state_dict(), "optimizer": portable_state(optimizer), "scaler": scaler.state_dict(),
                "shuffle": shuffle.get_state().cpu(), "augment_rng": augmenter.get_state().cpu(),
                "cpu_rng": torch.random.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                "history": history, "best_state": best_state, "elapsed": time.perf_counter() - start,
                "switch": switch.state_dict() if switch else None, "transfer": transferred})
        last_epoch = now() - epoch_start
    bar.close()

    test = None
    if config["protocol"] == "fixed":  # the selected weights (selected_epoch), evaluated once on the test set
        model.load_state_dict(best_state)
        model.eval()
        test = evaluate(model, test_x, test_y, batch_size=bs, autocast=autocast)
    result = run_result(config, device, history, facts, seconds=time.perf_counter() - start, test=test,
                        execution=execution(device, graphed_phases, concurrent_runs,
                                            [m.fallback for m in made if m.fallback], compiled=compiled,
                                            attention=attention))
    if transferred is not None:
        result["transfer"] = transferred
    return {**result, "best_state": best_state} if with_weights else result


def _warm_start(model, state, sha256, config, images, labels, autocast):
    """Carry the source run's weights ``state`` (their SHA-256: ``sha256``) into ``model`` (``transfer``) and
    evaluate it at once: the record a warm-started result keeps under ``transfer`` (the report's counts and its new
    and unused tensors; top-1, top-5 and loss on the selection set before any training)."""
    report = transfer({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, model)
    if config["eval_mode"]:
        model.eval()
    top1, top5, *loss = evaluate(model, images, labels, batch_size=config["batch_size"], autocast=autocast,
                                 with_loss=True)
    return {"source": config["init_from"]["run"], "source_key": config["init_from"]["key"],
            **({"source_weights_sha256": sha256} if sha256 else {}), **report.to_dict(),
            "top1": top1, "top5": top5, "loss": loss[0] if loss else None}


class TrainingInterrupted(KeyboardInterrupt):
    """Training was interrupted (Ctrl-C); the message says after which epoch and how to resume."""


class TrainingPaused(RuntimeError):
    """A time budget ran out at an epoch boundary; the checkpoint is kept and the next call resumes the run."""


