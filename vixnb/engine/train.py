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
import statistics
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F  # noqa: F401  (the tests patch engine.F.cross_entropy)
from torch import nn
from tqdm.auto import tqdm

from .augment import augment_generator
from .ensemble import (Ensemble, EnsembleStep, MemberAdamW, can_ensemble, check_members, ensemble_alpha_beta,
                       member_state)
from ..data import describe_source, load_split, source_fingerprint
from ..layers import alpha_beta
from ..models import create_model, default_dtype, model_fact, model_modules, settings_from_key
from ..models.counting import recorded_counts
from ..models.warm_start import transfer
from ..results import config_key, load_checkpoint, provenance, save_checkpoint
from ..results.checkpoints import other_architecture
from ..results.provenance import source_hashes
from .steps import (Evaluation, TrainStep, check_attention, drain, evaluate, execution, graph_blocker,  # noqa: F401
                    layer_grad_norms, lr_at, portable_state, set_epoch_lr, set_lr, topk_fraction, with_attention)


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
    """The protocol's AdamW over ``params`` (tensors, or parameter groups: dicts of ``params`` and their own settings;
    fused on a GPU)."""
    params = list(params)
    first = params[0]["params"][0] if isinstance(params[0], dict) else params[0]
    return torch.optim.AdamW(params, lr=config["lr"], betas=tuple(config["betas"]), eps=config["eps"],
                             weight_decay=config["weight_decay"], fused=first.is_cuda)


#: what weight decay applies to (a run's ``weight_decay_on``): every parameter (the papers' protocols), or only
#: weight matrices and kernels (two or more dimensions: not biases, norms' weights or gains; He & Hofmann's recipe)
DECAY_SCOPES = ("all", "matrices")


def decay_groups(model, config):
    """``model``'s parameters for AdamW under the run's ``weight_decay_on`` (``DECAY_SCOPES``): all of them, or two
    groups, the decayed matrices and the rest with weight decay 0."""
    if config.get("weight_decay_on", "all") == "all":
        return model.parameters()
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def first_phase(config):
    """The optimizer a run starts with: SGD for optimizer ``sgd`` (SGD alone), else AdamW (DualOpT's first phase)."""
    return "sgd" if config["optimizer"] == "sgd" else "adamw"


def make_optimizer(model, config, phase):
    """The optimizer of a training ``phase``: SGD for the DualOpt switch's ``"sgd"`` phase, else ``adamw``."""
    if phase == "sgd":
        d = config["dualopt"]
        return torch.optim.SGD(model.parameters(), lr=d["sgd_lr"], momentum=d["sgd_momentum"])
    return adamw(decay_groups(model, config), config)


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
#: step, and after its last step, before the epoch's host reads (``sync_checked`` checks what lies between)
EPOCH_START, STEP, STEPS_DONE = "epoch start", "step", "steps done"


def _epoch_steps(model, optimizer, step, *, generators, config, epoch, seeds=None, live=None):
    """One pass over the training tensors in each member's seeded random order (``generators``: one per member), one
    ``step`` (``steps.TrainStep``, ``ensemble.EnsembleStep``: it takes and augments its own batch) a batch, yielding
    ``EPOCH_START`` first, ``STEP`` after each and ``STEPS_DONE`` after the last; returns each member's history entry,
    from one read of the device (losses and accuracies summed in step order), or for a member whose loss stopped being
    finite the ``FloatingPointError`` naming its step (a single run raises it). A run's warm-up sets its learning rate
    before each of its first ``warmup_steps`` steps here; an ensemble's optimizer ramps each member's on the device.
    ``seeds``: the members' (named in an ensemble's error); ``live``: the members still training (the others' entries
    are None)."""
    yield EPOCH_START
    t0, bs, images = time.perf_counter(), config["batch_size"], step.images
    model.train()
    orders = [torch.randperm(len(images), device=images.device, generator=g) for g in generators]
    step.begin_epoch(orders[0] if len(orders) == 1 else torch.stack(orders))
    solo = len(generators) == 1
    warmup, before = config.get("warmup_steps", 0), (epoch - 1) * -(-len(images) // bs)  # optimizer steps so far
    for i in range(0, len(images), bs):
        if solo and warmup and before + i // bs <= warmup:  # linear warm-up of the epoch's lr (lr_at), then the lr
            set_lr(optimizer, lr_at(config, epoch) * min(1.0, (before + i // bs + 1) / warmup))
        try:
            step()
        except torch.OutOfMemoryError as e:
            what = "" if solo else f"an ensemble of {len(generators)} runs "
            raise RuntimeError(f"{config['model']}: {what}out of memory at batch size {bs}; try --batch-size {bs // 2}"
                               f"{' or precision bf16' if solo else ', or train fewer runs together'}") from e
        yield STEP
    yield STEPS_DONE
    rows, norms = step.end_epoch(), step.epoch_norms()
    seconds = time.perf_counter() - t0
    per_member = [rows] if solo else [[row[m] for row in rows] for m in range(len(generators))]
    norms = None if norms is None else [norms.tolist()] if solo else norms.tolist()
    entries = []
    for m, member_rows in enumerate(per_member):
        if live is not None and m not in live:
            entries.append(None)
            continue
        loss_sum, correct, bad = 0.0, 0.0, None
        for n, (loss, accuracy) in enumerate(member_rows, 1):
            if not math.isfinite(loss) and bad is None:
                bad = FloatingPointError(
                    f"{config['model']}{'' if solo else ' seed ' + str(seeds[m])}: loss became {loss} at "
                    f"epoch {epoch}, step {n}; no result stored. Try a lower learning rate (--lr) or fp32 precision "
                    "(--precision fp32).")
            loss_sum, correct = loss_sum + loss, correct + accuracy
        if bad is not None:
            if solo:
                raise bad
            entries.append(bad)
            continue
        steps = len(member_rows)
        entry = {"epoch": epoch, "train_loss": loss_sum / steps, "train_acc": 100 * correct / steps}
        if norms is not None:
            entry["grad_norms"] = norms[m]
        entries.append({**entry, "seconds": seconds})
    return entries


def train_epoch(*args, **kwargs):
    """``_epoch_steps`` run to its end: each member's history entry."""
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
    with default_dtype(torch.float32):  # the initial values a run draws, whatever the default float type
        model = create_model(config["model"], dataset=config["dataset"], **settings)
        counts = model_fact(recorded_counts, config["model"], config["dataset"], json.dumps(settings, sort_keys=True),
                            built=model)  # counted on this model where not kept yet: no meta build
    facts = {**counts, "source_hash": source_hashes(model_modules(config["model"], model))}
    return model.to(torch.get_default_dtype()), facts  # float32 itself, or float64 where a probe or a test trains in it


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

    ``graphs``: the step as one CUDA graph (``steps.Step``) where nothing blocks it (``steps.graph_blocker``);
    None (the default) means on a GPU, True on a CPU runs the graphed path eagerly. An execution choice, not part
    of the run's identity: the result records it under ``provenance["execution"]`` (its ``mode``, ``steps.MODES``), as
    it does ``attention`` (``steps.ATTENTION``; None: torch's pick) and ``compile`` (None: the config's, False in
    every stored run). Several runs of one shape as one ensemble: ``train_ensemble``."""
    device = training_device(config, device)
    data = splits(config, device, download)  # before the RNG is forked: a missing data set is named first
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return drain(training_steps([config], progress=progress, device=device, checkpoint=checkpoint,
                                    download=download, deadline=deadline, with_weights=with_weights,
                                    init_state=init_state, init_sha256=init_sha256, graphs=graphs, data=data,
                                    attention=attention, compile=compile))[0]


def train_ensemble(configs, *, progress=True, device=None, checkpoint=None, deadline=None, download=False, exact=True,
                   with_weights=False, graphs=None):
    """Train runs of one shape (``configs``: ``run_config(...)`` each, differing only in ``ensemble.MEMBER_SETTINGS``
    and initial values: ``ensemble.check_members``) as one vectorised ensemble (``ensemble.Ensemble``); return one
    outcome per config, in order: its result, in the form ``train`` returns, with ``mode`` ``ensemble`` or ``graphed
    ensemble`` and the members under ``provenance["execution"]``, or the ``FloatingPointError`` of a member whose loss
    stopped being finite (stopped alone: the others train on).

    ``exact=True`` (default) refuses what ``ensemble.can_ensemble`` refuses: its members equal separate runs up to
    floating-point rounding. ``exact=False`` also trains dropout models, each member drawing its own masks;
    those members are not equal to separate runs of their seeds (the provenance says so). ``checkpoint`` /
    ``deadline`` / ``graphs``: as ``train`` (a deadline pauses at an epoch boundary with ``TrainingPaused`` and keeps
    the checkpoint). The caller's RNG state is left as it was. ``with_weights``: as ``train``, each result also holds
    its member's ``best_state``."""
    configs = list(configs)
    check_members(configs)
    ok, reason = can_ensemble(configs[0], exact=exact)
    if not ok:
        raise ValueError(f"{configs[0]['model']}: cannot train these runs as an ensemble: {reason}")
    exact = exact or can_ensemble(configs[0])[0]  # exact=False changes nothing for a model without dropout
    device = training_device(configs[0], device)
    data = splits(configs[0], device, download)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return drain(training_steps(configs, progress=progress, device=device, checkpoint=checkpoint,
                                    download=download, deadline=deadline, with_weights=with_weights, init_state=None,
                                    init_sha256=None, graphs=graphs, data=data, exact=exact))


class _Solo:
    """A single run as the training loop drives it: its model, optimizer (AdamW, or SGD for DualOpT's second phase and
    post-training), gradient scaler and step; its checkpoint holds one member's state as it always has."""

    def __init__(self, config, model, device):
        self.config, self.model, self.members = config, model, 1
        self.model.to(device, memory_format=torch.channels_last) if config["channels_last"] else model.to(device)
        self.forward = self.model

    def optimizer(self, phase):
        return make_optimizer(self.model, self.config, phase)

    def layers(self):
        return layer_params(dict(self.model.named_parameters()), self.model, self.config)

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, state):
        self.model.load_state_dict(state)

    def evaluation(self, images, labels, **options):
        """A split's ``steps.Evaluation`` for the run: each call, ``[(top1, top5[, loss])]``."""
        made = Evaluation(self.forward, images, labels, **options)
        return lambda: [made()], made

    def alpha_beta(self):
        return [alpha_beta(self.model)]

    def member_weights(self, best, m):
        return best

    def keep_best(self, best, improved):
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()} if improved else best


class _Members:
    """Runs of one shape as one ensemble as the training loop drives it (``ensemble.Ensemble``, ``MemberAdamW``)."""

    def __init__(self, configs, models, randomness):
        self.configs, self.members = configs, len(configs)
        self.model = Ensemble(models, randomness=randomness)
        self.forward = self.model

    def optimizer(self, phase):
        decay = self.model.decay_mask(self.configs[0].get("weight_decay_on", "all"))
        return MemberAdamW(self.model, self.configs, decay)

    def layers(self):
        return self.model.layer_spans(layer_names(self.model.template, self.configs[0]))

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, state):
        self.model.load_state_dict(state)

    def evaluation(self, images, labels, **options):
        """A split's ``steps.Evaluation`` of every member at once (one batch for all): a triple a member each call."""
        made = Evaluation(self.model.shared, images, labels, **options)
        return made, made

    def alpha_beta(self):
        return ensemble_alpha_beta(self.model) or [None] * self.members

    def member_weights(self, best, m):
        return member_state(best, m)

    def keep_best(self, best, improved):
        """The stacked best state with the members ``improved`` (indices) taking the current weights."""
        current = self.model.state_dict()
        if best is None:
            return {k: v.clone() for k, v in current.items()}
        if improved:
            rows = torch.tensor(improved, device=next(iter(current.values())).device)
            for k, v in current.items():
                best[k][rows] = v[rows]
        return best


def _mode(members, graphed):
    """The engine mode a run was made in (``steps.MODES``)."""
    return {(False, False): "eager", (False, True): "graphed", (True, False): "ensemble",
            (True, True): "graphed ensemble"}[(members > 1, bool(graphed))]


def training_steps(configs, *, progress, device, checkpoint, download, deadline, with_weights, init_state, init_sha256,
                   graphs, interleave=False, concurrent_runs=1, data=None, attention=None, compile=None, on_step=None,
                   exact=True):
    """``train`` (one config) or ``train_ensemble`` (several) as a generator on the global RNG as it finds it (the
    caller forks it; it seeds each member first), yielding ``STEP`` / ``STEPS_DONE`` inside epochs when ``interleave``
    (else only ``STEPS_DONE``) and returning one outcome per config (a result, or an ensemble member's error): what
    ``train``, ``train_ensemble``, ``concurrent.train_concurrently`` and ``analysis.first_steps`` drive. One loop for a
    run and an ensemble: only the model, optimizer and step differ (``_Solo``, ``_Members``). ``data``: ``splits``
    already loaded. ``on_step``: called with each ``steps.Step`` the run makes (a reader of its per-step records
    between yields)."""
    configs = list(configs)
    config, k = configs[0], len(configs)
    solo = k == 1
    if deadline is not None and checkpoint is None:
        raise ValueError("deadline needs a checkpoint path: without one a paused run would lose its epochs")
    attention = check_attention(attention, device)
    compiled = bool(config["compile"] if compile is None else compile) and solo
    (train_x, train_y), (sel_x, sel_y), (test_x, test_y) = data or splits(config, device, download)
    seeds, bs = [c["seed"] for c in configs], config["batch_size"]
    models, facts = [], []
    for c in configs:  # each member as its separate run builds it
        torch.manual_seed(c["seed"])
        model, fact = build_model(c)
        models.append(model)
        facts.append(fact)
    if solo:
        trainee = _Solo(config, models[0], device)
    else:
        trainee = _Members(configs, [m.to(device) for m in models], "error" if exact else "different")
    del models
    switch = dualopt_switch(config) if solo else None
    optimizer = trainee.optimizer(first_phase(config))
    want_graphs = device.type == "cuda" if graphs is None else bool(graphs)
    autocast, loss_autocast, scaler = autocasts(config, device, cache=not want_graphs)
    autocast = with_attention(autocast, attention, trainee.model.template if not solo else trainee.model)
    shuffles = [torch.Generator(device=device).manual_seed(s) for s in seeds]
    augmenters = [augment_generator(s, device) for s in seeds]  # each member's as its separate run's
    layers = trainee.layers() if config.get("grad_norm_every") else None
    histories, best_state, elapsed, transferred, stopped = [[] for _ in configs], None, 0.0, None, {}
    # RNG states stay CPU ByteTensors; load_state_dict copies the rest onto the model's device
    state = load_checkpoint(checkpoint, check=lambda s: other_architecture(trainee.model, s["model"])
                            if solo else None) if checkpoint is not None else None
    if state is not None:
        if not solo and state.get("keys") != [config_key(c) for c in configs]:
            raise ValueError(f"checkpoint {checkpoint} is not of this ensemble of seeds {seeds} (it holds "
                             f"{state.get('seeds') or 'a single run'}); remove it or give another checkpoint path")
        if state["switch"] is not None:
            switch = dualopt_switch(config)
            switch.load_state_dict(state["switch"])
        trainee.load_state_dict(state["model"])
        optimizer = trainee.optimizer(switch.phase if switch else first_phase(config))
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        shuffle_states = [state["shuffle"]] if solo else state["shuffle"]
        augment_states = [state.get("augment_rng")] if solo else (state.get("augment_rng") or [None] * k)
        for generator, saved in zip(shuffles + augmenters, shuffle_states + augment_states):
            if saved is not None:
                generator.set_state(saved)
        torch.random.set_rng_state(state["cpu_rng"])
        if device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        histories = [state["history"]] if solo else state["history"]
        best_state, elapsed = state["best_state"], state["elapsed"]
        if not solo:
            best_state = {key: v.to(device) for key, v in best_state.items()}
            stopped = {int(m): FloatingPointError(why) for m, why in (state.get("stopped") or {}).items()}
        transferred = state.get("transfer")
    elif config.get("init_from"):
        if init_state is None:
            raise ValueError(f"{config['model']}: init_from {config['init_from']['run']!r} needs the source's "
                             "weights (init_state) where no checkpoint of the run is saved; runs.make.run finds them")
        transferred = _warm_start(trainee.model, init_state, init_sha256, config, sel_x, sel_y, autocast)
    if device.type == "cuda" and concurrent_runs == 1:
        torch.cuda.reset_peak_memory_stats(device)
    if compiled:
        trainee.forward = torch.compile(trainee.model)  # shares parameters and modes with the model
    graphed_phases, made = set(), []
    # the selection split's evaluation, every epoch: graphed where the steps may be (from its second call, on a GPU)
    select, selecting = trainee.evaluation(sel_x, sel_y, batch_size=bs, autocast=autocast, with_loss=True,
                                           graphed=want_graphs and not compiled)
    clip = config.get("grad_clip") if solo else (
        torch.tensor([[c.get("grad_clip") or math.inf] for c in configs], dtype=trainee.model.flat.dtype,
                     device=device) if any(c.get("grad_clip") for c in configs) else None)

    def make_step(optimizer, stage):
        blocker = graph_blocker(config, optimizer, scaler, compiled=compiled) if want_graphs else None
        if want_graphs and blocker is None:
            graphed_phases.add(type(optimizer).__name__)
        main = stage == "main"  # post-training trains on un-augmented data
        common = dict(batch_size=bs, device=device, graphed=want_graphs and blocker is None,
                      augment=config.get("augment") if main else None, augmenters=augmenters, layers=layers,
                      grad_norm_every=config.get("grad_norm_every", 0), autocast=autocast,
                      loss_fp32=config.get("loss_fp32", False), grad_clip=clip)
        if solo:
            step = TrainStep(trainee.forward, optimizer, scaler, train_x, train_y, loss_autocast=loss_autocast,
                             randaugment=config["randaugment"] if main else None, **common)
        else:
            step = EnsembleStep(trainee.model, optimizer, train_x, train_y, **common)
        made.append(step)
        if on_step is not None:
            on_step(step)
        return step

    start = time.perf_counter() - elapsed
    last_epoch = None  # wall seconds of the last whole epoch of this call
    limits = {"main": config["epochs"], "post": config["post_train_epochs"]}
    live = [m for m in range(k) if m not in stopped]
    lead = histories[live[0]] if live else histories[0]  # a member still training: its history counts the epochs
    stage = lead[-1]["stage"] if lead else "main"
    step = make_step(optimizer, stage)
    name = f"{config['model']} seed {seeds[0]}" if solo else f"{config['model']} seeds {', '.join(map(str, seeds))}"
    bar = tqdm(total=sum(limits.values()), initial=len(lead), desc=name, disable=not progress, leave=False)
    while live:
        done_in_stage = [h for h in lead if h["stage"] == stage]
        if len(done_in_stage) >= limits[stage] or (done_in_stage and done_in_stage[-1].get("stop")):
            if stage == "post" or not limits["post"]:
                break
            # post-training (paper `cxv`; DualOpt's post_train): from the best weights, on un-augmented data,
            # with SGD, until `patience` epochs pass without a top-1 >= the best of the whole run
            stage = "post"
            trainee.load_state_dict(best_state)
            switch = DualOptSwitch(config["dualopt"]["patience"], phase="sgd",
                                   best=max(h["select_top1"] for h in lead))
            optimizer = trainee.optimizer("sgd")
            step = make_step(optimizer, stage)
            continue
        if out_of_time(deadline, lead, last_epoch):
            raise TrainingPaused(f"{name}: paused after epoch {len(lead)} of "
                                 f"{sum(limits.values())} (time budget); run it again to resume")
        epoch_start, epoch = now(), len(lead) + 1
        if solo:
            scheduled = set_epoch_lr(optimizer, config, epoch)
        else:  # each member's own lr (a stopped member's 0), the same schedule
            scheduled = {"lr": lr_at(config, epoch)} if config.get("schedule") else {}
            optimizer.set_epoch([lr_at(c, epoch) if m in live else 0.0 for m, c in enumerate(configs)])
        try:
            options = dict(generators=shuffles, config=config, epoch=epoch, seeds=seeds, live=live)
            if interleave:
                entries = yield from _epoch_steps(trainee.forward, optimizer, step, **options)
            else:
                entries = train_epoch(trainee.forward, optimizer, step, **options)
            shaped = trainee.alpha_beta()
            if config["eval_mode"]:
                trainee.model.eval()
            eval_start = time.perf_counter()
            scores = select()
            eval_seconds = time.perf_counter() - eval_start  # an ensemble's: the whole ensemble's, as its "seconds"
        except KeyboardInterrupt:
            saved = "run the same command again to resume" if checkpoint is not None else "nothing was saved"
            raise TrainingInterrupted(f"{config['model'] if solo else name}: interrupted after epoch {len(lead)} of "
                                      f"{sum(limits.values())}; {saved}") from None
        improved = []
        for m, (history, entry, (top1, top5, *loss), ab) in enumerate(zip(histories, entries, scores, shaped)):
            if m not in live:
                continue
            if isinstance(entry, FloatingPointError):  # this member stops here; the others train on
                stopped[m] = entry
                continue
            own_lr = {"lr": lr_at(configs[m], epoch)} if scheduled else {}
            entry.update(scheduled if solo else own_lr)
            if ab is not None:
                entry["alpha_beta"] = ab
            entry.update(**({"select_loss": loss[0]} if loss else {}), eval_seconds=eval_seconds)
            entry.update(select_top1=top1, select_top5=top5, stage=stage,
                         phase=switch.phase if switch else first_phase(config))
            if not history or top1 >= max(h["select_top1"] for h in history):
                improved.append(m)
            history.append(entry)
        live = [m for m in range(k) if m not in stopped]
        best_state = trainee.keep_best(best_state, improved)
        bar.update()
        bar.set_postfix(loss=f"{statistics.fmean(histories[m][-1]['train_loss'] for m in live):.3f}" if live else "-",
                        top1=f"{histories[live[0]][-1]['select_top1']:.2f}" if live else "-")
        if not live:
            break
        lead = histories[live[0]]
        action = switch.update(lead[-1]["select_top1"]) if switch else "continue"
        if action == "switch":
            trainee.load_state_dict(best_state)
            optimizer = trainee.optimizer("sgd")
            step = make_step(optimizer, stage)
            lead[-1]["switched_to_sgd"] = switch.reason
        lead[-1]["stop"] = action == "stop"
        for m in live[1:]:
            histories[m][-1]["stop"] = False
        if checkpoint is not None:
            saved = {"model": trainee.state_dict(), "optimizer": portable_state(optimizer) if solo else
                     optimizer.state_dict(), "scaler": scaler.state_dict(),
                     "shuffle": shuffles[0].get_state().cpu() if solo else [s.get_state().cpu() for s in shuffles],
                     "augment_rng": augmenters[0].get_state().cpu() if solo else
                     [a.get_state().cpu() for a in augmenters],
                     "cpu_rng": torch.random.get_rng_state(),
                     "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                     "history": histories[0] if solo else histories, "best_state": best_state,
                     "elapsed": time.perf_counter() - start, "switch": switch.state_dict() if switch else None}
            saved.update({"transfer": transferred} if solo else
                         {"seeds": seeds, "keys": [config_key(c) for c in configs],
                          "stopped": {str(m): str(e) for m, e in stopped.items()}})
            save_checkpoint(checkpoint, saved)
        last_epoch = now() - epoch_start
    bar.close()

    tests = [None] * k
    if config["protocol"] == "fixed" and live:  # the selected weights (selected_epoch), evaluated once on the test set
        trainee.load_state_dict(best_state)
        trainee.model.eval()
        tests = trainee.evaluation(test_x, test_y, batch_size=bs, autocast=autocast)[0]()
    seconds = time.perf_counter() - start
    fallbacks = [s.fallback for s in [*made, selecting] if s.fallback]
    how = execution(device, graphed_phases, concurrent_runs, fallbacks, compiled=compiled, attention=attention)
    how["mode"] = _mode(k, graphed_phases)  # the graphed path (on a CPU, run eagerly): ``cuda_graphs`` says what ran
    extra = {}
    if not solo:
        how["members"] = k
        note = ("equal to separate runs of these configurations up to floating-point rounding" if exact else
                "own dropout masks per member (vmap randomness='different'): not equal to separate runs")
        extra = dict(ensemble_seeds=seeds, ensemble_exact=exact, ensemble_note=note)
    outcomes = []
    for m, (c, history, fact, test) in enumerate(zip(configs, histories, facts, tests)):
        if m in stopped:
            outcomes.append(stopped[m])
            continue
        result = run_result(c, device, history, fact, seconds=seconds, test=test, execution=how, **extra)
        if transferred is not None:
            result["transfer"] = transferred
        outcomes.append({**result, "best_state": trainee.member_weights(best_state, m)} if with_weights else result)
    return outcomes


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


