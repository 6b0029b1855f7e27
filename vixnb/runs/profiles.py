"""Run profiles (smoke / budget / paper, each with its ``-rehearsal``: ``profiles.yaml``) and what each means for
the machine that makes its results. A run's configuration is ``spec.run_config``'s; which runs a chapter makes of
a table, ``asked.table_runs``."""
from functools import cache
from importlib import resources

import torch
import yaml

from ..data import source_fingerprint


@cache
def profiles_file():
    """``profiles.yaml`` as read (every profile's settings)."""
    return yaml.safe_load(resources.files(__package__).joinpath("profiles.yaml").read_text())


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
