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
import math
import statistics
import time

import torch
import torch.nn.functional as F  # noqa: F401  (the tests patch engine.F.cross_entropy)
from tqdm.auto import tqdm

from .augment import augment_generator
from .build import (AUTOCAST_DTYPES, Members, Solo, autocasts, build_model, layer_names, layer_params,  # noqa: F401
                    splits, training_device, warm_start)
from .ensemble import EnsembleStep, can_ensemble, check_members
from .optimizers import (DECAY_SCOPES, DualOptSwitch, adamw, decay_groups, dualopt_switch, first_phase,  # noqa: F401
                         lr_at, make_optimizer, portable_state, set_epoch_lr, set_lr)
from ..data import describe_source, source_fingerprint
from ..results import config_key, load_checkpoint, provenance, save_checkpoint
from ..results.checkpoints import other_architecture
from .steps import (TrainStep, check_attention, drain, evaluate, execution, graph_blocker,  # noqa: F401
                    layer_grad_norms, topk_fraction, with_attention)


now = time.time  # the clock a time budget (``deadline``) is read on; tests replace it
#: the keys of a history entry that are wall-clock times (they differ between otherwise identical runs)
TIMING_KEYS = ("seconds", "eval_seconds")


def without_timings(history):
    """A run's history without its wall-clock times (``TIMING_KEYS``): what two identical runs share exactly."""
    return [{k: v for k, v in entry.items() if k not in TIMING_KEYS} for entry in history]


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
    run and an ensemble: only the model, optimizer and step differ (``build.Solo``, ``build.Members``). ``data``:
    ``splits`` already loaded. ``on_step``: called with each ``steps.Step`` the run makes (a reader of its per-step
    records between yields)."""
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
        trainee = Solo(config, models[0], device)
    else:
        trainee = Members(configs, [m.to(device) for m in models], "error" if exact else "different")
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
        transferred = warm_start(trainee.model, init_state, init_sha256, config, sel_x, sel_y, autocast)
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


class TrainingInterrupted(KeyboardInterrupt):
    """Training was interrupted (Ctrl-C); the message says after which epoch and how to resume."""


class TrainingPaused(RuntimeError):
    """A time budget ran out at an epoch boundary; the checkpoint is kept and the next call resumes the run."""


