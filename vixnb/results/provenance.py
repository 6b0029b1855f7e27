"""Provenance: the one function that says where, when and from what code a result was made."""
from __future__ import annotations

import hashlib
import importlib
import inspect
import platform
import subprocess
import time
from functools import cache

import torch

from .. import __version__
from ..models.registry import list_models, model_entrypoint
from ..paths import checkout_root
from ..validate import env_text


def device_name(device):
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def git_commit():
    """The checkout's commit (``-dirty`` with uncommitted changes to tracked files); "unknown" outside one.
    ``$VIXNB_COMMIT``, when set, is used instead: a copy of the tree without its git history (a lent GPU
    machine) is told the commit it was copied from."""
    if commit := env_text("VIXNB_COMMIT"):  # empty or blank: unset
        return commit.strip()
    repo = checkout_root()
    if repo is None:
        return "unknown"
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def now():
    """The current UTC time as stored in results (ISO 8601, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def provenance(device=None, *, stamp="date", **fields):
    """Where, when and from what a result was made: device (name and type), torch / CUDA / vixnb versions,
    the commit, the UTC time under ``stamp``, and the caller's ``fields`` (profile, seed, dtype, batch size,
    data, ...). ``device`` defaults to the GPU when there is one."""
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    return {"device": device_name(device), "device_type": device.type, "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "vixnb": __version__, "commit": git_commit(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32 if cuda else None, **fields, stamp: now()}


def made_on(prov):
    """The UTC day a result was made, whichever key its provenance used (``date``, ``finished``, ``measured``)."""
    when = prov.get("date") or prov.get("finished") or prov.get("measured")
    return str(when)[:10] if when else None


#: the training engine's modules, whose source the ``engine`` hash covers: the loop, the optimizers and
#: schedules, evaluation and checkpoints (``train``), several seeds as one vectorised job (``ensemble``), and the
#: data pipeline they feed (``data``)
ENGINE_MODULES = ("vixnb.train", "vixnb.augment", "vixnb.ensemble", "vixnb.data")


@cache
def _module_source(name):
    return inspect.getsource(importlib.import_module(name))


def _digest(names):
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        digest.update(f"{name}\n{_module_source(name)}\n".encode())
    return digest.hexdigest()[:12]


def source_hashes(model_name, model):
    """``{"model": ..., "engine": ...}``: 12 hex digits of SHA-256 over the source of every vixnb module that
    defines a module class of ``model`` or registers ``model_name`` (its family file), and over the training
    engine's modules (``ENGINE_MODULES``). A stored result records them; ``policy.code_changed`` compares them
    with today's. Any edit of those files changes them, a comment too: they say that the code differs, not that
    the numbers would."""
    modules = {type(m).__module__ for m in model.modules()}
    if model_name in list_models():
        modules.add(model_entrypoint(model_name).__module__)
    return {"model": _digest(m for m in modules if m.split(".")[0] == "vixnb"), "engine": _digest(ENGINE_MODULES)}
