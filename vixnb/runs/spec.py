"""One training run's identity, made once (from a paper row, a chapter's table, the maps study or the command line)
and carried unchanged to the batch, the store and the page: ``RunSpec``.

A ``RunSpec`` is its model, dataset, profile, seed and settings (a paper row's, a chapter's profile settings, a
study's: ``FrozenSettings``) and where its trained weights are kept (``Keep``). Its ``config`` is the resolved
configuration (``run_config``), its ``key`` the store key (``results.store.config_key``) and its ``path`` the
result file's path in the store. Where the weights are kept is not part of the identity: the same run keeps them or
not, under the same key.
"""
from __future__ import annotations

import copy
import inspect
import json
import numbers
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cache, cached_property

from .. import papers
from ..data import dataset_spec
from ..models import list_models, model_cfg, settings_from_key, settings_in_key
from ..results.store import config_key, result_path
from ..engine.train import DECAY_SCOPES
from ..validate import Choice, checked
from .profiles import get_profile


def _first(*values):
    """The first value that is not None (0 is a value)."""
    return next((v for v in values if v is not None), None)


PROTOCOLS, OPTIMIZERS, SCHEDULES = ("paper", "fixed"), ("adamw", "dualopt", "sgd"), ("constant", "cosine", "linear")
#: how a run of optimizer ``sgd`` (SGD alone) ends: after its ``epochs``, or by DualOpT's patience rule
STOPS = ("epochs", "patience")
PRECISIONS = ("fp32", "bf16", "fp16")
AUGMENT_KEYS = ("hflip", "vflip", "rotate")
#: the run config's ``engine_version`` field: fixed, part of every run's key (it was the engine's version when
#: results were keyed on it; every stored result keeps its key and file name). Never change it.
KEY_VERSION = 1


def _augment(value):
    """``augment`` normalised to all of ``AUGMENT_KEYS`` (None for no flip and no rotation), or a one-line error."""
    if value is None or value is False or value == {}:
        return None
    fix = ("give a mapping of hflip and vflip (true/false) and rotate (the most degrees, 0 to 180), e.g. "
           "{hflip: true, vflip: true, rotate: 15}, or augment=False for none")
    if not isinstance(value, dict) or set(value) - set(AUGMENT_KEYS):
        raise ValueError(f"augment={value!r}: {fix}")
    flips, rotate = [value.get(k, False) for k in AUGMENT_KEYS[:2]], value.get("rotate", 0)
    if not all(isinstance(f, bool) for f in flips) or isinstance(rotate, bool) or \
            not isinstance(rotate, (int, float)) or not 0 <= rotate <= 180:
        raise ValueError(f"augment={value!r}: {fix}")
    return {"hflip": flips[0], "vflip": flips[1], "rotate": float(rotate)} if any(flips) or rotate else None


def settings_of_model(settings):
    """The ``create_model`` settings among a run's ``settings`` (a paper row's): those ``run_config`` does not take
    as options of the run (epochs, optimizer, ...)."""
    options = inspect.signature(run_config).parameters
    return {k: v for k, v in (settings or {}).items() if k not in options}


#: RandAugment's magnitudes (torchvision's 31 bins)
RANDAUGMENT_MAGNITUDES = range(0, 31)


def check_randaugment(randaugment):
    """``randaugment`` (None, or [num_ops, magnitude]: whole numbers, num_ops >= 0, magnitude 0 to 30), else a
    ``ValueError`` naming it and its values (``vixnb train --randaugment NUM_OPS MAGNITUDE``)."""
    if not randaugment:
        return
    whole = lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)  # noqa: E731
    if not (isinstance(randaugment, (list, tuple)) and len(randaugment) == 2 and all(map(whole, randaugment))
            and randaugment[0] >= 0 and randaugment[1] in RANDAUGMENT_MAGNITUDES):
        raise ValueError(f"randaugment={randaugment!r}: give [NUM_OPS, MAGNITUDE], whole numbers with NUM_OPS >= 0 "
                         "and MAGNITUDE from 0 to 30 (--randaugment 2 9)")


@checked("seed", "epochs", "batch_size", "post_train_epochs", "lr", "warmup_steps", stop=Choice(STOPS))
def run_config(model, *, dataset="cifar10", profile="smoke", seed=0, epochs=None, batch_size=None, protocol=None,
               optimizer=None, val_size=None, precision=None, randaugment=None, post_train_epochs=0, amp_loss_only=None,
               eval_mode=None, compile=False, channels_last=False, lr=None, allow_resize=False, schedule=None,
               augment=None, grad_norm_every=None, init_from=None, stop=None, warmup_steps=None, loss_fp32=None,
               weight_decay=None, weight_decay_on=None, grad_clip=None, **model_overrides):
    """Every setting of one training run, resolved from the profile and the authors' protocol.

    The returned dict is the run's identity: the results store keys on its hash. ``protocol="fixed"``
    defaults to bf16 autocast on a GPU profile; ``amp_loss_only`` / ``eval_mode`` reproduce the authors'
    quirks when set to True / False; ``compile`` (torch.compile) and ``channels_last`` are speed switches.

    ``precision``: ``fp32``, ``bf16`` (autocast), or ``fp16`` (autocast with a gradient scaler: a GPU without native
    bfloat16 trains a bf16 run in it, as another run, ``engine.precision.machine_precision``).

    ``schedule`` (``constant`` | ``cosine``), ``augment`` (``{hflip, vflip, rotate}``: random flips and rotations
    of training batches; False for none) and ``grad_norm_every`` (record per-layer gradient norms every N-th step;
    0 for none) default to the paper protocol's optional keys of those names; each enters the dict only where it
    is set (cosine, some augmentation, N >= 1), so that the identities of runs without them stay as they were.

    ``warmup_steps`` (a linear warm-up of the learning rate over the first N optimizer steps, from lr/N to the
    schedule's lr; 0 for none) and ``loss_fp32`` (the cross-entropy of float32 logits: under bf16 or fp16 autocast
    the loss is otherwise computed in the logits' half precision) default to the paper protocol's keys of those
    names and enter the dict only where set, as the keys above.

    ``weight_decay`` (AdamW's; default the paper protocol's), ``weight_decay_on`` (``all`` parameters, the papers'
    protocols; ``matrices``: weights of two or more dimensions only, not biases, norms' weights or gains) and
    ``grad_clip`` (each step's gradients clipped to this total norm; None for none: He & Hofmann's recipe clips at 1)
    default to the paper protocol's keys of those names; ``weight_decay_on`` and ``grad_clip`` enter the dict only
    where set (``matrices``, a norm), as the keys above.

    ``init_from`` starts the run from another run's trained weights (``models.warm_start.transfer``; paper
    `linattn`'s "from a ViT checkpoint"): a run row of the model's paper file (``"vit_scratch"``), or
    ``{"run": row, "model": name, "settings": {...}}`` (a chapter's run, its profile settings included). The source
    is the same dataset, profile and seed; the config keeps it as ``init_from`` with the source's own key, so a
    changed source is another run.

    ``stop`` (``epochs`` | ``patience``): how SGD alone (``optimizer="sgd"``) ends: after ``epochs`` (AdamW alone's
    length), or, ``patience``, by the rule that ends DualOpT's SGD phase (``train.DualOptSwitch``: the same patience
    on the same top-1, at most DualOpT's ``epochs``), the budget DualOpT is given. In the dict only where
    ``patience`` and the run is longer than the patience (a shorter cap leaves it the fixed-length run).
    """
    for name, value, least in (("epochs", epochs, 1), ("batch_size", batch_size, 1), ("val_size", val_size, 1),
                               ("post_train_epochs", post_train_epochs, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or int(value) != value
                                  or value < least):
            raise ValueError(f"{name}={value!r}: give a whole number >= {least} (or leave it out for the profile's "
                             "default)")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: use one of {', '.join(PRECISIONS)} (or leave it out for the "
                         "profile's)")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not lr > 0):
        raise ValueError(f"lr={lr!r}: give a learning rate > 0 (or leave it out for the paper's {model!r} default)")
    check_randaugment(randaugment)
    if model not in list_models():
        raise ValueError(f"unknown model {model!r}; valid names: {', '.join(list_models())}")
    prof, proto = get_profile(profile), papers.protocol(model_cfg(model)["paper"])
    dataset_spec(dataset)
    used = prof.get("dataset_override") or dataset
    # the optimizer: given here, else the paper protocol's (paper `cxv`: DualOpT), else the profile's
    protocol, optimizer = protocol or prof["protocol"], optimizer or proto.get("optimizer") or prof["optimizer"]
    if protocol not in PROTOCOLS or optimizer not in OPTIMIZERS:
        raise ValueError(f"protocol must be one of {PROTOCOLS} and optimizer one of {OPTIMIZERS}; "
                         f"got {protocol!r}, {optimizer!r}")
    overrides = settings_in_key(model, {**(papers.per_model(proto["model_overrides"], model) or {}),
                                        **prof.get("model_overrides", {}), **model_overrides})
    dualopt, sgd = optimizer == "dualopt", optimizer == "sgd"
    if sgd and not proto.get("dualopt"):
        raise ValueError(f"optimizer 'sgd' trains with the SGD settings of DualOpT's second phase (the protocol's "
                         f"`dualopt`, paper `cxv`); {model!r}'s paper protocol has none: use adamw")
    patience = stop == "patience"
    if patience and not sgd:
        raise ValueError(f"stop='patience' with optimizer={optimizer!r}: it ends SGD alone by DualOpT's patience rule; "
                         "use it with optimizer='sgd' (DualOpT stops on patience already) or leave stop out")
    length = _first(epochs, prof.get("epochs"))  # a run length given here or by the profile, not the paper's
    if patience and length is not None and int(length) <= proto["dualopt"]["patience"]:
        # the patience cannot end a run this short: it is the fixed-length SGD alone, one run with one identity
        patience = False
    # a length below DualOpT's ceiling caps the run: its AdamW phase and post-training at half of it
    capped = length is not None and length < (proto.get("dualopt") or {}).get("max_epochs", 0)
    half = -(-int(length) // 2) if capped else None  # the cap of the AdamW phase and of post-training
    schedule = _first(schedule, proto.get("schedule"), "constant")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r}: use one of {', '.join(SCHEDULES)}")
    if schedule != "constant" and (dualopt or sgd or post_train_epochs):
        name, value = ("optimizer", optimizer) if dualopt or sgd else ("post_train_epochs", post_train_epochs)
        raise ValueError(f"schedule {schedule!r} is not defined with {name}={value!r} (it stops on patience, not after "
                         f"a fixed number of epochs); use schedule='constant' or leave {name} out")
    augment = _augment(proto.get("augment") if augment is None else augment)
    if augment and randaugment:
        raise ValueError("randaugment and augment are both set: use one (augment=False turns off the paper protocol's "
                         "flips and rotations)")
    every = _first(grad_norm_every, proto.get("grad_norm_every"), 0)
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"grad_norm_every={every!r}: give a whole number of steps >= 1 (0 for none)")
    if every and (prof["amp_loss_only"] if amp_loss_only is None else amp_loss_only):
        raise ValueError("grad_norm_every is not supported with amp_loss_only (scaled gradients); "
                         "leave one of them out")
    warmup = _first(warmup_steps, proto.get("warmup_steps"), 0)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup_steps={warmup!r}: give a whole number of optimizer steps >= 1 (0 for none)")
    if warmup and (dualopt or sgd or post_train_epochs):
        name, value = ("optimizer", optimizer) if dualopt or sgd else ("post_train_epochs", post_train_epochs)
        raise ValueError(f"warmup_steps warms up AdamW's learning rate; it is not defined with {name}={value!r}: "
                         "leave one of them out")
    loss_fp32 = _first(loss_fp32, proto.get("loss_fp32"), False)
    if not isinstance(loss_fp32, bool):
        raise ValueError(f"loss_fp32={loss_fp32!r}: give true or false")
    decay = _first(weight_decay, proto["weight_decay"])
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not decay >= 0:
        raise ValueError(f"weight_decay={decay!r}: give a number >= 0 (or leave it out for the paper's)")
    decay_on = _first(weight_decay_on, proto.get("weight_decay_on"), "all")
    if decay_on not in DECAY_SCOPES:
        raise ValueError(f"weight_decay_on={decay_on!r}: use one of {', '.join(DECAY_SCOPES)}")
    clip = _first(grad_clip, proto.get("grad_clip"))
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, numbers.Real) or not clip > 0):
        raise ValueError(f"grad_clip={clip!r}: give a gradient norm > 0 (or leave it out for none)")
    if (clip is not None or decay_on != "all") and (dualopt or sgd or post_train_epochs):
        name = "grad_clip" if clip is not None else "weight_decay_on"
        raise ValueError(f"{name} is an AdamW setting of the engine's graphed steps; it is not defined with "
                         f"optimizer={optimizer!r} or post-training: leave one of them out")
    for name, given in (("epochs", length or dualopt or patience),
                        ("batch_size", _first(batch_size, prof.get("batch_size")))):
        if not given and papers.per_model(proto[name], model) is None:
            raise ValueError(f"{model!r}: the {model_cfg(model)['paper']} paper's protocol gives no {name} for it; "
                             f"pass {name}= (a run the maps study names: "
                             f"`settings: {{{name}: N}}` in its study.yaml entry)")
    return {
        "engine_version": KEY_VERSION,
        "model": model,
        "dataset": used,
        "profile": profile,
        "seed": int(seed),
        # DualOpT has no fixed length (it stops when patience runs out twice): the paper protocol caps it at
        # max_epochs; a length given here or by the profile caps the whole run and its AdamW phase at half of it
        "epochs": int(length or (proto["dualopt"]["max_epochs"] if dualopt or patience
                                 else papers.per_model(proto["epochs"], model))),
        "batch_size": int(_first(batch_size, prof.get("batch_size"), papers.per_model(proto["batch_size"], model))),
        "lr": proto["lr"] if lr is None else float(lr),
        "weight_decay": float(decay) if weight_decay is not None else proto["weight_decay"],
        "betas": list(proto["betas"]),
        "eps": proto["eps"],
        "protocol": protocol,
        "val_size": _first(val_size, prof.get("val_size"), 5000) if protocol == "fixed" else None,
        "optimizer": optimizer,
        "randaugment": list(randaugment) if randaugment else None,
        # a capped run (budget) caps post-training as each DualOpT phase: at half its length (at most)
        "post_train_epochs": min(int(post_train_epochs), half) if capped else int(post_train_epochs),
        # a capped DualOpT run: both phases run (a budget run); the paper profile's has no cap. SGD alone (section
        # 5.1.1's other comparison) trains with DualOpT's SGD settings for the run's length, as AdamW alone does,
        # or under stop 'patience' until DualOpT's SGD phase would stop, at most DualOpT's length
        "dualopt": ({**proto["dualopt"], **({"adamw_epochs": half} if dualopt and capped else {})}
                    if dualopt or sgd or post_train_epochs else None),
        "precision": precision or ("bf16" if protocol == "fixed" and prof["device"] == "cuda" else prof["precision"]),
        "amp_loss_only": bool(prof["amp_loss_only"] if amp_loss_only is None else amp_loss_only),
        "eval_mode": bool(prof["eval_mode"] if eval_mode is None else eval_mode),
        "compile": bool(compile),
        "channels_last": bool(channels_last),
        "train_size": prof.get("train_size"),
        "test_size": prof.get("test_size"),
        "device": prof["device"],
        "model_overrides": overrides,
        # only where set, so that the identities of earlier runs stay as they were
        **({"allow_resize": True} if allow_resize else {}),
        **({"schedule": schedule} if schedule != "constant" else {}),
        **({"augment": augment} if augment else {}),
        **({"grad_norm_every": every} if every else {}),
        **({"warmup_steps": warmup} if warmup else {}),
        **({"loss_fp32": True} if loss_fp32 else {}),
        **({"weight_decay_on": decay_on} if decay_on != "all" else {}),
        **({"grad_clip": float(clip)} if clip is not None else {}),
        **({"stop": "patience"} if patience else {}),
        **({"init_from": _init_source(init_from, model, dataset, profile, seed)} if init_from else {}),
    }


def run_model_settings(config):
    """The ``create_model`` settings of run config ``config`` (its ``model_overrides``, with the earlier default of a
    changed default that a config stored before the change leaves out: ``models.settings_from_key``)."""
    return settings_from_key(config["model"], config.get("model_overrides") or {})


def _init_source(init_from, model, dataset, profile, seed):
    """``{"run", "model", "settings", "key"}`` of the run whose weights ``init_from`` names (``run_config``)."""
    paper = model_cfg(model)["paper"]
    if isinstance(init_from, str):
        runs = papers.paper_runs(paper)
        if init_from not in runs:
            raise ValueError(f"init_from={init_from!r}: not a run of vixnb/papers/{paper}.yaml; its runs: "
                             f"{', '.join(runs) or 'none'}")
        source = row_source(runs, init_from)
    elif isinstance(init_from, dict) and isinstance(init_from.get("model"), str):
        source = {"run": init_from.get("run", init_from["model"]), "model": init_from["model"],
                  "settings": dict(init_from.get("settings") or {})}
    else:
        raise ValueError(f"init_from={init_from!r}: give a run of vixnb/papers/{paper}.yaml (e.g. 'vit_scratch') or "
                         "{model: NAME, settings: {...}}")
    if source["settings"].get("init_from"):
        raise ValueError(f"init_from={init_from!r}: that run starts from another run itself; name a run trained from "
                         "scratch")
    config = run_config(source["model"], dataset=dataset, profile=profile, seed=seed, **source["settings"])
    return {**source, "key": config_key(config)}


def row_source(runs, row, shrink=None):
    """``{"run", "model", "settings"}``: the run of ``row`` (``runs``: ``papers.paper_runs``) that a warm start names,
    with the profile settings ``shrink`` its chapter applies."""
    model, settings = runs[row]
    return {"run": row, "model": model, "settings": {**settings, **(shrink or {})}}


class Keep(str, Enum):
    """What a run keeps of its selected weights: ``NONE`` nothing; ``STORE`` float16 beside the result in the store
    (committed with it; at most ``runs.make.WEIGHTS_LIMIT_MB``); ``LOCAL`` in the profile's ``.weights-local/`` folder
    on this machine only (never committed nor packed, no cap). The values are the command line's and the plan's
    (``vixnb plan --json``'s ``keep_weights``)."""
    NONE = "no"
    STORE = "store"
    LOCAL = "local"

    @classmethod
    def of(cls, value):
        """``value`` (a ``Keep`` or one of its values) as a ``Keep``, or a one-line error naming it and the values."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"keep_weights={value!r}: use one of {', '.join(repr(k.value) for k in cls)}") from None

    def __str__(self):
        return self.value


class FrozenSettings(Mapping):
    """A run's settings beyond its profile's, read-only: each value is a copy (a warm start's ``init_from`` is a
    mapping of its own), the order given is kept (commands show it), and equal settings hash alike."""
    __slots__ = ("_items",)

    def __init__(self, settings=None):
        object.__setattr__(self, "_items", copy.deepcopy(dict(settings or {})))

    def __setattr__(self, name, value):
        raise AttributeError("FrozenSettings are read-only: make another RunSpec with dataclasses.replace")

    def __getstate__(self):
        return self._items

    def __setstate__(self, state):
        object.__setattr__(self, "_items", state)

    def __getitem__(self, key):
        return copy.deepcopy(self._items[key])

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(json.dumps(self._items, sort_keys=True, default=str))

    def __repr__(self):
        return f"FrozenSettings({self._items!r})"


@dataclass(frozen=True)
class RunSpec:
    """One training run: ``model`` on ``dataset`` (as asked: the profile may train another, ``config["dataset"]``)
    in ``profile`` with ``seed`` and ``settings`` (``run_config``'s options and model settings), keeping its weights
    as ``keep`` says. Make it with ``RunSpec.of``."""
    model: str
    dataset: str
    profile: str
    seed: int
    settings: FrozenSettings = field(default_factory=FrozenSettings)
    keep: Keep = Keep.NONE

    def __post_init__(self):
        if not isinstance(self.settings, FrozenSettings):
            object.__setattr__(self, "settings", FrozenSettings(self.settings))
        object.__setattr__(self, "keep", Keep.of(self.keep))

    @classmethod
    def of(cls, model, *, dataset="cifar10", profile="smoke", seed=0, keep=Keep.NONE, **settings):
        """The run of ``model`` as ``spec.run_config`` takes it (its defaults too), keeping weights as ``keep``."""
        return cls(model, dataset, profile, seed, FrozenSettings(settings), keep)

    @cached_property
    def config(self):
        """The resolved configuration (``spec.run_config``): the run's whole identity."""
        return run_config(self.model, dataset=self.dataset, profile=self.profile, seed=self.seed, **self.settings)

    @cached_property
    def key(self):
        """The store key: 16 hex digits of the configuration's hash (``results.store.config_key``; computed once: the
        plan asks it of every entry many times)."""
        return config_key(self.config)

    @property
    def path(self):
        """The result file's path in the store (``<profile>/<model>-<dataset>-seed<seed>-<key>.json``)."""
        return result_path(self.config)


def run_beside(config, model, settings):
    """The ``RunSpec`` of ``model`` in ``settings`` beside run config ``config``: on its dataset, in its profile, with
    its seed (a warm start's source, a row that may be ``config``'s own run)."""
    return RunSpec.of(model, dataset=config["dataset"], profile=config["profile"], seed=config["seed"], **settings)


def warm_start_spec(config):
    """The ``RunSpec`` of run config ``config``'s warm-start source (its ``init_from``): the same dataset, profile and
    seed."""
    return run_beside(config, config["init_from"]["model"], config["init_from"]["settings"])


#: the keys a training run's configuration holds only where set (``run_config``); with those of a plain run's, every
#: key vixnb writes (tests/test_store_tolerance.py reads them from run_config's source)
OPTIONAL_CONFIG_KEYS = ("allow_resize", "schedule", "augment", "grad_norm_every", "init_from", "stop", "warmup_steps",
                        "loss_fp32", "weight_decay_on", "grad_clip")


@cache
def config_keys():
    """Every key of a training run's configuration that this vixnb writes (a plain run's and the optional ones)."""
    return frozenset(RunSpec.of("vit", profile="smoke").config) | set(OPTIONAL_CONFIG_KEYS)


def run_command(spec):
    """The ``vixnb train`` command line of ``spec`` (its settings as the command line takes them: run options as
    options, model settings as ``--override KEY=VALUE``; its ``keep`` as ``--keep-weights``)."""
    run_options = inspect.signature(run_config).parameters  # the rest are model settings: --override KEY=VALUE

    def option(key, value):  # a run option as the CLI takes it (a list as its items: --randaugment 1 1)
        shown = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        if isinstance(value, dict):  # a warm start: the row's name, or a chapter's run as '{"run": ..., "model": ...}'
            rows = papers.paper_runs(model_cfg(spec.model)["paper"])
            as_row = rows.get(value.get("run")) == (value.get("model"), value.get("settings"))
            shown = value["run"] if as_row else shlex.quote(json.dumps(value, separators=(",", ":")))
        if value is True:  # a switch: --loss-fp32
            return f" --{key.replace('_', '-')}"
        return f" --{key.replace('_', '-')} {shown}"

    extra = "".join(option(k, v) if k in run_options
                    else f" --override {k}={v if isinstance(v, str) else json.dumps(v)}"
                    for k, v in spec.settings.items())
    keep = {Keep.NONE: "", Keep.STORE: " --keep-weights", Keep.LOCAL: " --keep-weights local"}[spec.keep]
    dataset = spec.dataset
    trained_on = spec.config["dataset"]  # a profile's own data (the smoke profile's synthetic images)
    if trained_on != dataset and replace(spec, dataset=trained_on).key == spec.key:
        dataset = trained_on  # the same run, named by the data it trains on
    return (f"vixnb train {spec.model} --dataset {dataset} --profile {spec.profile} --seed {spec.seed}"
            f"{extra}{keep}")
