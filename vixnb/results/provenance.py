"""Provenance: the one function that says where, when and from what code a result was made."""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import platform
import subprocess
import time
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

import torch

from .. import __version__
from ..paths import checkout_root
from ..validate import env_text

#: the engine's version, recorded in each result's provenance and compared (``runs.policy.other_engine``), not
#: in the key: a bump flags stored results stale (still shown, with the reason) instead of hiding them. Bump it by
#: hand for what the CPU probe (``runs.probe``) cannot see: GPU-only paths (bf16, fused AdamW, compile) and
#: logic after the probe's steps.
ENGINE_VERSION = 1


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
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def now():
    """The current UTC time as stored in results (ISO 8601, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_EXECUTION = ContextVar("vixnb_execution", default=None)  # None: no batch said how


@contextmanager
def execution(*, concurrent_jobs, executor):
    """While this holds, ``provenance`` records how the result was executed: ``concurrent_jobs`` (how many jobs
    shared the device: 1 alone; the estimates read only runs made alone) and ``executor`` (``inline``: in the
    batch's own process; ``local``: a submitit process of its own; ``slurm``). Neither enters a run's key."""
    token = _EXECUTION.set({"concurrent_jobs": int(concurrent_jobs), "executor": executor})
    try:
        yield
    finally:
        _EXECUTION.reset(token)


#: the commits whose stored runs shared their GPU with other training runs, from before provenance recorded
#: ``concurrent_jobs``: ``tools/gpu_session.sh`` at those commits trained the Table 1 models several at a time
#: (``PARALLEL``) on one H100, which stretched each run's epochs (``vit``: 186 s there, about 82-95 s alone)
SHARED_GPU_COMMITS = ("2a2d461", "3b79c466")


def made_alone(result):
    """Whether a stored run had its device to itself, so that its seconds are its own: not a member of an ensemble
    (``execution`` with ``members``, or "ensemble of N seeds" before the modes: its seconds are all its members'),
    its ``concurrent_jobs`` 1 (a group of
    runs trained at once records how many), or, for a run from before that record, not made at one of
    ``SHARED_GPU_COMMITS``. The time estimates and the pages' seconds read only these."""
    prov = result.get("provenance") or {}
    execution = prov.get("execution")
    if str(execution or "").startswith("ensemble") or (isinstance(execution, dict) and execution.get("members", 1) > 1):
        return False
    if "concurrent_jobs" in prov:
        return prov["concurrent_jobs"] == 1
    return not str(prov.get("commit", "")).startswith(SHARED_GPU_COMMITS)


def provenance(device=None, *, stamp="date", **fields):
    """Where, when and from what a result was made: device (name and type), torch / CUDA / vixnb versions,
    the commit, the engine's version (``ENGINE_VERSION``), how it was executed (``execution``, where a
    batch said), the UTC time under ``stamp``, and the caller's ``fields`` (profile, seed, dtype, batch size,
    data, ...). ``device`` defaults to the GPU when there is one."""
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    return {"device": device_name(device), "device_type": device.type, "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "vixnb": __version__, "commit": git_commit(),
            "engine_version": ENGINE_VERSION, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32 if cuda else None,
            **(_EXECUTION.get() or {}), **fields, stamp: now()}


def made_on(prov):
    """The UTC day a result was made, whichever key its provenance used (``date``, ``finished``, ``measured``)."""
    when = prov.get("date") or prov.get("finished") or prov.get("measured")
    return str(when)[:10] if when else None


#: the training engine's modules, whose source the ``engine`` hash covers: the loop, the optimizers and
#: schedules, evaluation and checkpoints (``train``), the step (``steps``), runs of one shape as one vectorised job
#: (``ensemble``), and the data pipeline they feed (``augment``, ``data``)
ENGINE_MODULES = ("vixnb.engine.train", "vixnb.engine.steps", "vixnb.engine.augment", "vixnb.engine.ensemble",
                  "vixnb.data")


@cache
def module_source(name):
    """The source text of module ``name`` (what the source hashes digest)."""
    return inspect.getsource(importlib.import_module(name))


def _is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _defining_module(package, name):
    """The vixnb module that defines ``name`` as ``package`` exports it (a package re-exports its modules' names), or
    ``package`` itself."""
    where = getattr(getattr(importlib.import_module(package), name, None), "__module__", None)
    return where if isinstance(where, str) and where.split(".")[0] == "vixnb" else package


@cache
def _imports(name):
    """The vixnb modules whose code module ``name``'s source imports (anywhere in it, relative imports resolved; a
    name a package re-exports, the module that defines it)."""
    module = importlib.import_module(name)
    package = name if hasattr(module, "__path__") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(module_source(name))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "vixnb")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if base.split(".")[0] != "vixnb":
                continue
            for a in node.names:
                found.add(f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else _defining_module(base, a.name))
    return frozenset(n for n in found if _is_module(n))


def imported_modules(names):
    """``names`` and every vixnb module whose code they import, directly or through one another, with the packages
    they live in (their ``__init__``: its source, not all it imports): what a run's code is made of."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        seen.update(".".join(parts[:i]) for i in range(1, len(parts)))  # the packages it lives in
        if not hasattr(importlib.import_module(name), "__path__"):
            todo += _imports(name)
    return seen


def _digest(names):
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        digest.update(f"{name}\n{module_source(name)}\n".encode())
    return digest.hexdigest()[:12]


def source_hashes(model_modules):
    """``{"model": ..., "engine": ...}``: 12 hex digits of SHA-256 over the source of ``model_modules`` (the vixnb
    modules that define a model's module classes and register it: ``models.model_modules``) and every vixnb module
    they import (``imported_modules``: helpers such as ``layers/blocks.py`` and the packages' ``__init__``); and over
    the training engine's modules (``ENGINE_MODULES``) and what they import. A stored result records them. They are a
    cache key only: any edit changes them, a comment too; where they differ from today's, the behavioural probe
    (``runs.probe``) decides whether the result is still current (``runs.policy.code_changed``)."""
    own = imported_modules(m for m in model_modules if m.split(".")[0] == "vixnb")
    return {"model": _digest(own), "engine": _digest(imported_modules(ENGINE_MODULES))}
