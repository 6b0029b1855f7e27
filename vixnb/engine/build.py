"""What a training run is built from (``engine.train``'s loop): its device, its data splits on the device, its model
(seeded, built in float32, its recorded counts), its autocast, the parameters of each of its layers, and the trainee the
loop drives: one run (``Solo``: its model, optimizer and steps, a warm start's transfer) or runs of one shape as one
ensemble (``Members``)."""
import json
from contextlib import nullcontext

import torch
from torch import nn

from .ensemble import Ensemble, MemberAdamW, ensemble_alpha_beta, member_state
from .optimizers import make_optimizer
from .steps import Evaluation, evaluate
from ..data import load_split
from ..layers import alpha_beta
from ..models import create_model, default_dtype, model_fact, model_modules, settings_from_key
from ..models.counting import recorded_counts
from ..models.warm_start import transfer
from ..results.provenance import source_hashes


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


class Solo:
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


class Members:
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


def warm_start(model, state, sha256, config, images, labels, autocast):
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
