"""Several seeds of one training configuration trained as ONE vectorised ensemble, so that small models fill a GPU.

The members' parameters and buffers are stacked (``torch.func.stack_module_state``: member i is index i of every
stacked tensor) and the model is called once for all of them through ``functional_call`` under ``vmap``. Each
member keeps what makes it a separate run of its seed (``vixnb.engine.train.train``): its initialisation (the model
built under ``torch.manual_seed(seed)``), its data order (its own ``torch.Generator`` drawing ``randperm`` each
epoch), its own selection epoch and best weights. One AdamW steps the stacked parameters: AdamW is elementwise,
so each member's update is its separate run's. The loss is the sum over members of each member's mean
cross-entropy, so each member's gradient is its separate run's. Every member is evaluated on the selection
split each epoch with the authors' metric (``train.evaluate``); protocol ``fixed`` evaluates each member's
selected weights once on the test set.

Exactness (``can_ensemble``): with AdamW, no RandAugment, no post-training, no ``amp_loss_only``, no ``compile``
and no active dropout, a member's history, metrics and final weights equal a separate run's up to
floating-point rounding (batched kernels sum in another order; ``tests/test_ensemble.py`` checks it on the CPU).
One exception, in the weights only: an element whose gradient is zero but for rounding (a bias that a following
LayerNorm cancels, e.g. MLP-Mixer's token-mixing output bias, or a few of FNet's LayerNorm elements) gets AdamW
steps of g / (sqrt(v) + eps) made of rounding noise, up to lr each, in a separate run as much as in an ensemble;
there the two differ by up to lr per step (the test allows it only where the gradient stayed below 1e-7).
With dropout, ``vmap(randomness="different")`` draws each member's own masks, which cannot equal a separate
run's draws: ``train_ensemble(..., exact=False)`` trains such models anyway, with independent masks per member,
and says so in each result's provenance (``ensemble_exact: False``). Those members are NOT equal to separate
runs of their seeds (they are valid runs of the same distribution of seeds, not the same runs).

BatchNorm (found with PyTorch 2.14 on a CPU with a conv + BatchNorm2d model, ``tests/test_ensemble.py``):
under ``vmap`` with stacked buffers, a BatchNorm layer in training mode normalises each member's batch by that
member's own batch statistics and updates that member's running mean, variance and ``num_batches_tracked`` in
place in the stacked buffers; in eval mode it uses each member's running statistics. Training, running
statistics and evaluation equal separate runs up to rounding, so BatchNorm models are supported, exactly like
the rest (not yet checked on a GPU, where cuDNN's batch norm has its own batching rule).

The blog's protocol (paper `shaped`) keeps members equal to separate runs: ``schedule: cosine`` sets the one
AdamW's lr each epoch (the same for every member), ``augment`` augments each member's batch from that member's
own generator, seeded as its separate run's (``augment.augment_generator``), ``grad_norm_every`` reduces the
stacked gradients of each layer (``blocks.<i>.…``) over all but the member dimension, and each member records
its own ``alpha_beta``; ``keep_weights`` gives each member's selected weights (``run_ensemble`` stores them).

Not supported (``can_ensemble`` says why): DualOpT (members would switch to SGD at different epochs),
RandAugment (per-image draws from the global RNG), post-training, the authors' AMP (one GradScaler would skip
every member's step when one overflows), ``compile``, and the Performer's feature redraw (a data-dependent
buffer update). ``channels_last`` is not applied (stacked tensors are contiguous). On a CPU, fused attention
(``scaled_dot_product_attention``) has no batching rule and runs member by member (PyTorch warns once).

Checkpoint (``checkpoint=``, saved atomically after every epoch through ``vixnb.results.save_checkpoint``):
the keys of a single run's checkpoint, where ``model`` and ``best_state`` hold every entry of the model's
``state_dict`` stacked over members (``member_state(state, i)`` is member i's, in the order of ``configs``,
loadable into the model), ``optimizer`` is the one AdamW's state, ``shuffle`` and ``augment_rng`` the lists of
the members' data-order and augmentation generator states, ``history`` the list of their histories, plus
``seeds`` (the ensemble it belongs to).
A result's ``seconds`` and GPU memory are those of the whole ensemble.
"""
import copy
import json
import math
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from .augment import augment_generator, flip_rotate
from ..data import normalize
from ..layers import ShapedAttention
from ..layers.blocks import DropPath
from ..models import meta_model, settings_from_key
from ..results import load_checkpoint, save_checkpoint
from .train import (TrainingInterrupted, TrainingPaused, adamw, autocasts, build_model, evaluate, layer_params,
                    out_of_time, run_result, set_epoch_lr, splits, training_device)


def _active_dropout(model):
    """(name, p) of every module of ``model`` that draws random numbers in training: dropout and stochastic depth
    (``layers.blocks.DropPath``) with p > 0, and mixers with dropout on their attention weights
    (``attn_dropout`` > 0, e.g. CCT's)."""
    found = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.modules.dropout._DropoutNd, DropPath)) and m.p > 0:
            found.append((name, m.p))
        elif getattr(m, "attn_dropout", 0) > 0:
            found.append((name, m.attn_dropout))
    return found


def can_ensemble(config, *, exact=True):
    """(True, None) where seeds of ``config`` can train as one ensemble (``train_ensemble``) whose members equal
    separate runs (with ``exact=False``: where they can train at all, dropout drawn per member); else (False,
    the reason)."""
    refused = [
        (config["optimizer"] == "dualopt", "optimizer 'dualopt' switches each member to SGD at its own epoch; use "
                                           "optimizer 'adamw' or train the seeds separately"),
        (config["optimizer"] == "sgd", "optimizer 'sgd': an ensemble trains with AdamW; use optimizer 'adamw' or train "
                                       "the seeds separately"),
        (config["randaugment"], "randaugment draws each image's augmentation from the global RNG, so a member "
                                "cannot see its separate run's images; leave it off or train the seeds separately"),
        (config["post_train_epochs"], "post_train_epochs: post-training stops each member at its own epoch; set it "
                                      "to 0 or train the seeds separately"),
        (config["amp_loss_only"], "amp_loss_only: one GradScaler would skip every member's step when one member "
                                  "overflows; leave it off or train the seeds separately"),
        (config["precision"] == "fp16", "precision fp16: one GradScaler would skip every member's step when one member "
                                        "overflows; train the seeds separately"),
        (config["compile"], "compile: the vmapped ensemble step is not compiled; leave compile off"),
        (config.get("init_from"), "init_from: each seed starts from its own source run's weights; train the seeds "
                                  "separately"),
        (config.get("warmup_steps"), "warmup_steps: the ensemble's step sets its learning rate once an epoch; train "
                                     "the seeds separately"),
        (config.get("loss_fp32"), "loss_fp32: the ensemble's step computes its members' losses in the logits' "
                                  "precision; train the seeds separately"),
    ]
    for bad, reason in refused:
        if bad:
            return False, reason
    model = meta_model(config["model"], config["dataset"],  # the structure only: no weights, no RNG draws
                       json.dumps(settings_from_key(config["model"], config["model_overrides"]), sort_keys=True))
    dropout = _active_dropout(model)
    if exact and dropout:
        where = f"p={dropout[0][1]} in {len(dropout)} modules, e.g. {dropout[0][0]}"
        return False, (f"{config['model']} has active dropout ({where}): under vmap each member draws its own masks, "
                       "which cannot equal a separate run's; train the seeds separately, or pass exact=False for "
                       "independent masks per member")
    if any(getattr(m, "feature_redraw_interval", None) is not None for m in model.modules()):
        return False, (f"{config['model']} redraws Performer features (a data-dependent buffer update vmap cannot "
                       "batch); train the seeds separately")
    return True, None


class Ensemble:
    """Models of one architecture as stacked parameters and buffers, called for all members at once through
    ``functional_call`` under ``vmap``: ``ensemble(x)`` with one batch per member (members, batch, ...),
    ``ensemble.shared(x)`` with one batch for all; both return logits (members, batch, classes). ``randomness``:
    vmap's ("error": a random operation is an error; "different": own draws per member)."""

    def __init__(self, models, *, randomness="error"):
        self.params, self.buffers = stack_module_state(list(models))
        self.keys = list(models[0].state_dict())  # what a member's state holds (not non-persistent buffers)
        self.template = copy.deepcopy(models[0]).to("meta")

        def call(params, buffers, x):
            return functional_call(self.template, (params, buffers), (x,))

        self._each = vmap(call, randomness=randomness)
        self._shared = vmap(call, in_dims=(0, 0, None), randomness=randomness)

    def __len__(self):
        return len(next(iter(self.params.values())))

    def __call__(self, x):
        return self._each(self.params, self.buffers, x)

    def shared(self, x):
        return self._shared(self.params, self.buffers, x)

    def train(self, mode=True):
        self.template.train(mode)
        return self

    def state_dict(self):
        """Every entry of a member's ``state_dict``, stacked over members (views of the live tensors)."""
        stacked = {**self.params, **self.buffers}
        return {k: stacked[k].detach() for k in self.keys}

    def load_state_dict(self, state):
        with torch.no_grad():
            for k, v in self.state_dict().items():
                v.copy_(state[k])


def member_state(state, member):
    """Member ``member``'s state dict (as a separate run's ``model.state_dict()``) from a stacked ensemble
    state: a checkpoint's ``model`` or ``best_state``, or ``Ensemble.state_dict()``."""
    return {k: v[member] for k, v in state.items()}


def member_grad_norms(layers):
    """(layers, members) tensor on the device: each member's L2 norm of all gradients of each layer's stacked
    parameters (``layers``: a list of stacked tensors per layer), reduced over all but the member dimension."""
    def norms(g):  # (members,): each member's norm of one stacked gradient
        return torch.linalg.vector_norm(g.reshape(len(g), -1), dim=1)

    return torch.stack([torch.linalg.vector_norm(torch.stack([norms(p.grad) for p in params if p.grad is not None]),
                                                 dim=0)
                        for params in layers])


def ensemble_step(ensemble, optimizer, *, autocast=nullcontext, layers=None):
    """The training step of every member on its own batch: ``step(images, labels)`` with uint8 ``images``
    (members, batch, C, H, W) and ``labels`` (members, batch) returns a (2, members) tensor of each member's
    loss and accuracy (fraction) on the device, without a device sync. ``step(..., norms=a_list)`` (with
    ``layers``, the stacked parameters of each layer) also appends each member's per-layer gradient norms
    (``member_grad_norms``), taken between the backward pass and the optimizer step."""
    cross_entropy = vmap(F.cross_entropy)

    def step(images, labels, norms=None):
        with autocast():
            logits = ensemble(normalize(images))
        losses = cross_entropy(logits, labels)  # each member's mean over its own batch
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # the sum: each member's gradient is that of its own mean loss
        if norms is not None:
            norms.append(member_grad_norms(layers))
        optimizer.step()
        hits = (logits.argmax(dim=-1) == labels).float().mean(dim=-1)
        return torch.stack([losses.detach().float(), hits])

    return step


def _epoch(step, images, labels, *, generators, config, seeds, epoch, augmenters=None):
    """One pass of every member over the training tensors in its own seeded order (as ``train.train_epoch``
    draws it), each member's batch augmented from its own generator (``augmenters``) where the config says;
    returns each member's history entry."""
    t0, bs, every = time.perf_counter(), config["batch_size"], config.get("grad_norm_every")
    orders = torch.stack([torch.randperm(len(images), device=images.device, generator=g) for g in generators])
    stats, norms = [], []
    for step_index, i in enumerate(range(0, orders.shape[1], bs)):
        idx = orders[:, i:i + bs]
        batch = images[idx]
        if config.get("augment"):
            batch = torch.stack([flip_rotate(b, **config["augment"], generator=g) for b, g in zip(batch, augmenters)])
        try:
            stats.append(step(batch, labels[idx], norms=norms if every and step_index % every == 0 else None))
        except torch.OutOfMemoryError as e:
            raise RuntimeError(f"{config['model']}: an ensemble of {len(seeds)} seeds ran out of memory at batch size "
                               f"{bs}; train fewer seeds together") from e
    losses, accuracies = torch.stack(stats, dim=-1).tolist()  # (members, steps) each: one device sync per epoch
    grad_norms = torch.stack(norms).mean(dim=0).T.tolist() if norms else [None] * len(seeds)  # (members, layers)
    seconds, entries = time.perf_counter() - t0, []
    for seed, loss, accuracy, grad_norm in zip(seeds, losses, accuracies, grad_norms):
        bad = next((i for i, value in enumerate(loss) if not math.isfinite(value)), None)
        if bad is not None:
            raise FloatingPointError(
                f"{config['model']} seed {seed}: loss became {loss[bad]} at epoch {epoch}, step {bad + 1}; no result "
                "stored. Try a lower learning rate (--lr) or fp32 precision (--precision fp32).")
        entries.append({"epoch": epoch, "train_loss": sum(loss) / len(loss),
                        "train_acc": 100 * sum(accuracy) / len(accuracy),
                        **({"grad_norms": grad_norm} if grad_norm is not None else {}), "seconds": seconds})
    return entries


def _same_configuration(configs):
    """The seeds of ``configs``, or an error where they differ in anything but ``seed`` or repeat a seed."""
    if not configs:
        raise ValueError("configs is empty: give one run_config(..., seed=s) per seed")
    differ = sorted({k for c in configs for k in set(c) | set(configs[0])
                     if k != "seed" and c.get(k) != configs[0].get(k)})
    if differ:
        raise ValueError(f"configs differ in {', '.join(differ)}: an ensemble trains seeds of one configuration; "
                         "build them with run_config(..., seed=s), changing only the seed")
    seeds = [c["seed"] for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"configs repeat a seed ({seeds}): give each seed once")
    return seeds


def _keep_best(best, current, improved):
    """The stacked best state with the members ``improved`` (indices) taking ``current``'s weights."""
    if best is None:
        return {k: v.clone() for k, v in current.items()}
    if improved:
        rows = torch.tensor(improved, device=next(iter(current.values())).device)
        for k, v in current.items():
            best[k][rows] = v[rows]
    return best


@torch.no_grad()
def _alpha_beta(ensemble):
    """Each member's [[alpha, beta], ...] of its ``ShapedAttention`` layers in module order, or None (one sync)."""
    names = [n for n, m in ensemble.template.named_modules() if isinstance(m, ShapedAttention)]
    if not names:
        return None
    p = ensemble.params
    return torch.stack([torch.stack([p[f"{n}.alpha"], p[f"{n}.beta"]], -1) for n in names], 1).tolist()


def train_ensemble(configs, *, progress=True, device=None, checkpoint=None, deadline=None, download=False, exact=True,
                   with_weights=False):
    """Train the seeds of one configuration (``configs``: ``run_config(..., seed=s)`` each, identical but for
    the seed) as one vectorised ensemble; return one result per config, in the form ``train.train`` returns,
    with ``execution="ensemble of N seeds"`` in the provenance.

    ``exact=True`` (default) refuses what ``can_ensemble`` refuses: its members equal separate runs up to
    floating-point rounding. ``exact=False`` also trains dropout models, each member drawing its own masks;
    those members are not equal to separate runs of their seeds (the provenance says so). ``checkpoint`` /
    ``deadline``: as ``train.train`` (saved after every epoch, resumed; a deadline pauses at an epoch boundary
    with ``TrainingPaused`` and keeps the checkpoint). The caller's RNG state is left as it was. ``with_weights``:
    as ``train.train``, each result also holds its member's ``best_state``."""
    configs = list(configs)
    seeds = _same_configuration(configs)
    config, k = configs[0], len(configs)
    ok, reason = can_ensemble(config, exact=exact)
    if not ok:
        raise ValueError(f"{config['model']}: cannot train seeds as an ensemble: {reason}")
    exact = exact or can_ensemble(config)[0]  # exact=False changes nothing for a model without dropout
    if deadline is not None and checkpoint is None:
        raise ValueError("deadline needs a checkpoint path: without one a paused run would lose its epochs")
    device = training_device(config, device)
    (train_x, train_y), (sel_x, sel_y), (test_x, test_y) = splits(config, device, download)
    bs, name = config["batch_size"], f"{config['model']} seeds {', '.join(map(str, seeds))}"
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        models, facts = [], []
        for seed in seeds:  # each member as train.train builds it
            torch.manual_seed(seed)
            model, fact = build_model(config)
            models.append(model.to(device))
            facts.append(fact)
        ensemble = Ensemble(models, randomness="error" if exact else "different")
        del models
        optimizer = adamw(ensemble.params.values(), config)
        autocast, _, _ = autocasts(config, device)
        shuffles = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]
        augmenters = [augment_generator(seed, device) for seed in seeds]  # each member's as its separate run's
        layers = layer_params(ensemble.params, ensemble.template, config) if config.get("grad_norm_every") else None
        histories, best_state, elapsed = [[] for _ in seeds], None, 0.0
        state = load_checkpoint(checkpoint) if checkpoint is not None else None
        if state is not None:
            if state.get("seeds") != seeds:
                raise ValueError(f"checkpoint {checkpoint} is not of an ensemble of seeds {seeds} (it holds "
                                 f"{state.get('seeds') or 'a single run'}); remove it or give another checkpoint path")
            ensemble.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            for generator, saved in zip(shuffles + augmenters, state["shuffle"] + (state.get("augment_rng") or [])):
                generator.set_state(saved)
            torch.random.set_rng_state(state["cpu_rng"])
            if device.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            histories, elapsed = state["history"], state["elapsed"]
            best_state = {key: v.to(device) for key, v in state["best_state"].items()}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        step = ensemble_step(ensemble, optimizer, autocast=autocast, layers=layers)

        start = time.perf_counter() - elapsed
        bar = tqdm(total=config["epochs"], initial=len(histories[0]), desc=name, disable=not progress, leave=False)
        while len(histories[0]) < config["epochs"]:
            if out_of_time(deadline, histories[0]):
                raise TrainingPaused(f"{name}: paused after epoch {len(histories[0])} of {config['epochs']} (time "
                                     "budget); run it again to resume")
            epoch = len(histories[0]) + 1
            scheduled = set_epoch_lr(optimizer, config, epoch)  # the same lr for every member
            try:
                ensemble.train()
                entries = _epoch(step, train_x, train_y, generators=shuffles, config=config, seeds=seeds, epoch=epoch,
                                 augmenters=augmenters)
                shaped = _alpha_beta(ensemble) or [None] * k
                ensemble.train(not config["eval_mode"])
                eval_start = time.perf_counter()
                scores = evaluate(ensemble.shared, sel_x, sel_y, batch_size=bs, autocast=autocast, with_loss=True)
                eval_seconds = time.perf_counter() - eval_start  # the whole ensemble's, as its "seconds"
            except KeyboardInterrupt:
                saved = "run the same command again to resume" if checkpoint is not None else "nothing was saved"
                raise TrainingInterrupted(f"{name}: interrupted after epoch {len(histories[0])} of "
                                          f"{config['epochs']}; {saved}") from None
            improved = []
            for i, (history, entry, (top1, top5, *loss), ab) in enumerate(zip(histories, entries, scores, shaped)):
                entry.update(scheduled, **({"alpha_beta": ab} if ab is not None else {}))
                entry.update(**({"select_loss": loss[0]} if loss else {}), eval_seconds=eval_seconds)
                entry.update(select_top1=top1, select_top5=top5, stage="main", phase="adamw", stop=False)
                if not history or top1 >= max(h["select_top1"] for h in history):
                    improved.append(i)
                history.append(entry)
            best_state = _keep_best(best_state, ensemble.state_dict(), improved)
            bar.update()
            bar.set_postfix(loss=f"{sum(e['train_loss'] for e in entries) / k:.3f}")
            if checkpoint is not None:
                save_checkpoint(checkpoint, {
                    "model": ensemble.state_dict(), "optimizer": optimizer.state_dict(), "scaler": {},
                    "shuffle": [s.get_state().cpu() for s in shuffles],
                    "augment_rng": [a.get_state().cpu() for a in augmenters], "cpu_rng": torch.random.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                    "history": histories, "best_state": best_state, "elapsed": time.perf_counter() - start,
                    "switch": None, "seeds": seeds})
        bar.close()

        tests = [None] * k
        if config["protocol"] == "fixed":  # each member's selected weights, evaluated once on the test set
            ensemble.load_state_dict(best_state)
            ensemble.train(False)
            tests = evaluate(ensemble.shared, test_x, test_y, batch_size=bs, autocast=autocast)
    seconds = time.perf_counter() - start
    note = ("equal to separate runs of these seeds up to floating-point rounding" if exact else
            "own dropout masks per member (vmap randomness='different'): not equal to separate runs of these seeds")
    results = [run_result(c, device, history, fact, seconds=seconds, test=test, execution=f"ensemble of {k} seeds",
                       ensemble_seeds=seeds, ensemble_exact=exact, ensemble_note=note)
               for c, history, fact, test in zip(configs, histories, facts, tests)]
    return ([{**r, "best_state": member_state(best_state, i)} for i, r in enumerate(results)] if with_weights
            else results)
