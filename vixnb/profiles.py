"""Run profiles (smoke / budget / paper), the resolved configuration that identifies one training run, and the
runs a chapter makes of a paper table in a profile (``table_runs``)."""
import hashlib
import inspect
import json
import numbers
from functools import cache
from importlib import resources

import torch
import yaml

from .data import dataset_spec, source_fingerprint
from . import papers
from .models import list_models, model_cfg, settings_from_key, settings_in_key
from .validate import Choice, checked


@cache
def profiles_file():
    """``profiles.yaml`` as read (every profile's settings)."""
    return yaml.safe_load(resources.files("vixnb").joinpath("profiles.yaml").read_text())


def list_profiles():
    """Names of the run profiles (profiles.yaml), sorted."""
    return sorted(profiles_file()["profiles"])


#: the suffix of a profile's dress rehearsal (``rehearsal_profile``): ``budget-rehearsal``
REHEARSAL = "-rehearsal"
REHEARSAL_BATCH = {"cpu": 2, "cuda": 8}  # a rehearsal's batch, on the device at hand
#: the blocks of each model in a rehearsal on a CPU, where the profile sets none (a GPU's rehearsal builds the models
#: whole): every code path of a run (a loop over layers included) at a sixth of a ViT-B/16's cost
REHEARSAL_CPU_DEPTH = 2


def get_profile(name):
    base = name.removesuffix(REHEARSAL) if isinstance(name, str) else name
    if base not in list_profiles():
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(list_profiles())} (and each with "
                         f"{REHEARSAL}, its dress rehearsal)")
    profile = dict(profiles_file()["profiles"][base], name=name)
    return rehearsal_profile(profile) if base != name else profile


def small_sizes(name):
    """Whether profile ``name`` measures at a CPU's small sizes (the smoke profile, and any dress rehearsal) rather
    than the papers' (a GPU profile)."""
    profile = get_profile(name)
    return profile["device"] != "cuda" or bool(profile.get("rehearsal"))


def rehearsal_profile(profile):
    """The dress rehearsal of ``profile`` (``vixnb batch --rehearse``): every run of it on the device at hand, in its
    precision there (fp32 on a CPU), for two epochs of one step each (a DualOpT run: one with AdamW, one with SGD)
    and one test batch, at a small batch, seeds 0 and 1 (an ensemble needs two), on the data here: CIFAR-10's copy
    where there is one, else the synthetic set; on a CPU each model has ``REHEARSAL_CPU_DEPTH`` blocks unless the
    profile or the run sets its depth. Its results prove that a run works, nothing about the models."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    batch = REHEARSAL_BATCH[device]
    if device == "cpu":
        profile = {**profile, "model_overrides": {"depth": REHEARSAL_CPU_DEPTH, **profile.get("model_overrides", {})}}
    return {**profile, "page_title": f"dress rehearsal of the {profile['name'].removesuffix(REHEARSAL)} profile",
            "description": "every run, measurement and benchmark of the profile for a couple of steps: a check that "
                           "each works on this machine, not a result",
            "rehearsal": profile["name"].removesuffix(REHEARSAL), "device": device,
            "precision": profile["precision"] if device == "cuda" else "fp32",
            "epochs": 2, "batch_size": batch, "train_size": batch, "test_size": batch, "val_size": batch,
            "seeds": [0, 1], **({} if source_fingerprint("cifar10") else {"dataset_override": "synthetic"})}


def gpu_profile(name):
    """Whether profile ``name`` trains and measures on a CUDA GPU (its results are committed; a CPU renders them)."""
    return get_profile(name)["device"] == "cuda"


def _first(*values):
    """The first value that is not None (0 is a value)."""
    return next((v for v in values if v is not None), None)


PROTOCOLS, OPTIMIZERS, SCHEDULES = ("paper", "fixed"), ("adamw", "dualopt", "sgd"), ("constant", "cosine")
#: how a run of optimizer ``sgd`` (SGD alone) ends: after its ``epochs``, or by DualOpT's patience rule
STOPS = ("epochs", "patience")
PRECISIONS = ("fp32", "bf16", "fp16")
AUGMENT_KEYS = ("hflip", "vflip", "rotate")
#: the run config's ``engine_version`` field: fixed, part of every run's key (it was the engine's version when
#: results were keyed on it; every stored result keeps its key and file name). Never change it.
KEY_VERSION = 1
#: the engine's version, recorded in each result's provenance and compared (``results.policy.other_engine``), not
#: in the key: a bump flags stored results stale (still shown, with the reason) instead of hiding them. Bump it by
#: hand for what the CPU probe (``results.probe``) cannot see: GPU-only paths (bf16, fused AdamW, compile) and
#: logic after the probe's steps.
ENGINE_VERSION = 1


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
               **model_overrides):
    """Every setting of one training run, resolved from the profile and the authors' protocol.

    The returned dict is the run's identity: the results store keys on its hash. ``protocol="fixed"``
    defaults to bf16 autocast on a GPU profile; ``amp_loss_only`` / ``eval_mode`` reproduce the authors'
    quirks when set to True / False; ``compile`` (torch.compile) and ``channels_last`` are speed switches.

    ``precision``: ``fp32``, ``bf16`` (autocast), or ``fp16`` (autocast with a gradient scaler: a GPU without native
    bfloat16 trains a bf16 run in it, as another run, ``runtime.machine_precision``).

    ``schedule`` (``constant`` | ``cosine``), ``augment`` (``{hflip, vflip, rotate}``: random flips and rotations
    of training batches; False for none) and ``grad_norm_every`` (record per-layer gradient norms every N-th step;
    0 for none) default to the paper protocol's optional keys of those names; each enters the dict only where it
    is set (cosine, some augmentation, N >= 1), so that the identities of runs without them stay as they were.

    ``warmup_steps`` (a linear warm-up of the learning rate over the first N optimizer steps, from lr/N to the
    schedule's lr; 0 for none) and ``loss_fp32`` (the cross-entropy of float32 logits: under bf16 or fp16 autocast
    the loss is otherwise computed in the logits' half precision) default to the paper protocol's keys of those
    names and enter the dict only where set, as the keys above.

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
        raise ValueError(f"protocol must be one of {PROTOCOLS} and optimizer one of {OPTIMIZERS}; got {protocol!r}, {optimizer!r}")
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
    if schedule == "cosine" and (dualopt or sgd or post_train_epochs):
        name, value = ("optimizer", optimizer) if dualopt or sgd else ("post_train_epochs", post_train_epochs)
        raise ValueError(f"schedule 'cosine' is not defined with {name}={value!r} (it stops on patience, not after a "
                         f"fixed number of epochs); use schedule='constant' or leave {name} out")
    augment = _augment(proto.get("augment") if augment is None else augment)
    if augment and randaugment:
        raise ValueError("randaugment and augment are both set: use one (augment=False turns off the paper protocol's "
                         "flips and rotations)")
    every = _first(grad_norm_every, proto.get("grad_norm_every"), 0)
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"grad_norm_every={every!r}: give a whole number of steps >= 1 (0 for none)")
    if every and (prof["amp_loss_only"] if amp_loss_only is None else amp_loss_only):
        raise ValueError("grad_norm_every is not supported with amp_loss_only (scaled gradients); leave one of them out")
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
        "weight_decay": proto["weight_decay"],
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
        **({"schedule": "cosine"} if schedule == "cosine" else {}),
        **({"augment": augment} if augment else {}),
        **({"grad_norm_every": every} if every else {}),
        **({"warmup_steps": warmup} if warmup else {}),
        **({"loss_fp32": True} if loss_fp32 else {}),
        **({"stop": "patience"} if patience else {}),
        **({"init_from": _init_source(init_from, model, dataset, profile, seed)} if init_from else {}),
    }


def run_model_settings(config):
    """The ``create_model`` settings of run config ``config`` (its ``model_overrides``, with the earlier default of a
    changed default that a config stored before the change leaves out: ``models.settings_from_key``)."""
    return settings_from_key(config["model"], config.get("model_overrides") or {})


def config_key(config):
    """The run's identity: 16 hex digits of SHA-256 over its whole configuration (``run_config``), which names its
    result file in the store."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


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


@checked("seeds")
def table_runs(key, chapter, table, profile, seeds=None):
    """``[(row, model, settings, seeds)]``: the runs a chapter (``chapter``, one chapter of paper ``key``'s ``book``
    section) makes of ``table`` in ``profile``. Settings are the table's (``papers.row_run``), then the chapter's
    ``profile_settings`` of the profile (the smoke profile's smaller models). Seeds are the profile's, or as many
    as the table's ``runs`` where the paper made more runs (GPU profiles only); a table with ``first_seed_only``
    (runs kept as they were made, not asked for again) takes only the first."""
    prof = get_profile(profile)
    seeds = list(seeds if seeds is not None else prof.get("seeds") or [0])
    if papers.table(key, table).get("first_seed_only"):
        seeds = seeds[:1]
    runs = papers.table(key, table).get("runs", 0)
    if prof["device"] == "cuda" and runs > len(seeds):
        seeds += [max(seeds) + 1 + i for i in range(runs - len(seeds))]
    shrink = (chapter.get("profile_settings") or {}).get(profile) or {}
    runs = papers.table_runs(key, table)
    if unknown := [(row, model) for row, model, _ in runs if model not in list_models()]:
        row, model = unknown[0]
        raise papers.PaperFileError(f"vixnb/papers/{key}.yaml: table {table!r}, row {row!r} names unknown model "
                                    f"{model!r}; give the row a registered model's name (or a `model:` one; `vixnb "
                                    "models` lists them)")
    return [(row, model, chapter_settings(key, settings, shrink), seeds) for row, model, settings in runs]


def row_runs(key, profile):
    """``{row: (model, settings)}``: every row of paper ``key``'s tables as the first chapter that trains its table
    makes it in ``profile`` (``table_runs``: the chapter's profile settings, a warm start resolved); a row no chapter
    trains, as its table gives it (``papers.row_run``). The one answer to "which run is this row" for the plan, the
    claims and the pages."""
    found = {}
    for chapter in papers.book_chapters(key):
        for table in chapter.get("train") or []:
            for row, model, settings, _ in table_runs(key, chapter, table, profile):
                found.setdefault(row, (model, settings))
    for row, run in papers.paper_runs(key).items():
        found.setdefault(row, run)
    return found


def chapter_settings(key, settings, shrink):
    """A run's ``settings`` (a row of paper ``key``) as a chapter makes it: with the chapter's profile settings
    ``shrink``, and a warm start from a row (``init_from: vit_scratch``) naming that row's run as the chapter makes
    it too (``{"run", "model", "settings"}``, the same ``shrink`` applied)."""
    settings = {**settings, **shrink}
    source = settings.get("init_from")
    runs = papers.paper_runs(key) if isinstance(source, str) else {}
    if source in runs:
        settings["init_from"] = row_source(runs, source, shrink)
    return settings


def row_source(runs, row, shrink=None):
    """``{"run", "model", "settings"}``: the run of ``row`` (``runs``: ``papers.paper_runs``) that a warm start names,
    with the profile settings ``shrink`` its chapter applies."""
    model, settings = runs[row]
    return {"run": row, "model": model, "settings": {**settings, **(shrink or {})}}

