"""The optimizers and learning-rate schedules of the papers' protocols, as the training loop (``engine.train``) uses
them: AdamW (fused on a GPU; weight decay on every parameter, or on the matrices only: ``decay_groups``), DualOpT's
switch to SGD (paper `cxv`), and the per-epoch schedules (``lr_at``: constant, cosine, linear), set from the epoch
number alone so that a resumed run is exact."""
import math

import torch


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


def set_lr(optimizer, lr):
    """Set every parameter group's learning rate to ``lr``: in place where it is a device tensor (a graphed step
    reads it there), else as a number."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def lr_at(config, epoch):
    """The learning rate of main-stage epoch ``epoch`` (1-based): ``lr``; under ``schedule: cosine`` what torch's
    CosineAnnealingLR(T_max=epochs, eta_min=0) stepped once per epoch gives, in closed form; under ``schedule:
    linear`` a linear decay to 0 after the last epoch, epoch by epoch (He and Hofmann's recipe decays step by step
    after its warm-up: per epoch here, as the cosine)."""
    schedule = config.get("schedule")
    if schedule == "cosine":
        return config["lr"] * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / config["epochs"]))
    if schedule == "linear":
        return config["lr"] * (1 - (epoch - 1) / config["epochs"])
    return config["lr"]


def set_epoch_lr(optimizer, config, epoch):
    """Under a schedule, set ``optimizer``'s lr for main-stage ``epoch`` (``lr_at``) from the epoch number alone
    (no scheduler state: a resumed run is exact) and return ``{"lr": ...}`` for the history entry; else ``{}``."""
    if not config.get("schedule"):
        return {}
    lr = lr_at(config, epoch)
    set_lr(optimizer, lr)
    return {"lr": lr}


def portable_state(optimizer):
    """``optimizer.state_dict()`` with a device-tensor learning rate as a number (a checkpoint that any
    optimizer, graphed or not, loads as it would any other)."""
    state = optimizer.state_dict()
    for group in state["param_groups"]:
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = group["lr"].item()
    return state
