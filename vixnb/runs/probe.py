"""The behavioural probe: whether today's code still makes a stored result, decided by running it, not by its source.

A stored run's source hashes (``provenance.source_hashes``: every vixnb module its model and the engine import)
are only a cache key. Where they differ from today's, the probe runs the engine on the result's stored config, on
the CPU in fp32, for ``STEPS`` optimizer steps on ``IMAGES`` fixed synthetic images (the CPU generator seeded at the
start, as training seeds it), once with the code of the result's commit (``git archive`` of ``provenance.commit`` into a
temporary folder) and once with today's, on the same machine and torch, and compares the two bitwise (a SHA-256
of the weights after the steps, and of the loss). The outcome goes in the committed ledger
(``results/probe-ledger.json``, ``policy.read_ledger``), keyed by ``<profile>/<config key>``, with the result's file
and today's source hashes:

- equal: the result is current (a refactor: comments, renames, moved code);
- different: it is stale, still shown, with the reason;
- cannot be checked (no commit recorded, a commit not in this clone, code that does not run): ``unverified``.

``vixnb probe`` (CI: ``vixnb probe --check``) probes every stored result whose code changed and writes the ledger.
What the CPU probe cannot see (bf16, fused AdamW, compile; logic after its steps) is
``results.provenance.ENGINE_VERSION``'s.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from ..files import atomic_write, remove_leftovers, temp_prefix
from ..paths import checkout_root
from .policy import (LEDGER, config_overrides_json, code_changed, ledger_key, read_ledger, source_today,
                     unusable)
from ..results.provenance import now
from ..results.layout import read_json

STEPS = 3
#: the probe's batch: two fixed images (four took twice the time and found nothing more: a numeric change shows in
#: the first step's loss, an optimizer's in the second step's weights)
IMAGES = 2

#: the probe as a script, run with one version of the package on ``PYTHONPATH``: it names only the engine's
#: entry points every stored result's commit has (``create_model``, from ``models`` or its earlier home
#: ``registry``; ``engine.train``, earlier the top-level ``train``; ``train.make_optimizer``, earlier
#: ``train._optimizer``; ``data.dataset_spec`` and ``data.normalize``), and ``models.settings_from_key`` where the
#: code has it (the settings a key means, ``register_model(changed_defaults=...)``); a move or rename of one of them
#: is followed here too
SCRIPT = r"""
import hashlib, json, sys
import torch
import torch.nn.functional as F
try:
    from vixnb.models import create_model
except ImportError:  # the registry's earlier home
    from vixnb.registry import create_model
try:  # a setting whose default changed: the key leaves the earlier default out
    from vixnb.models import settings_from_key
except ImportError:  # code from before any default changed: the key's settings are the model's
    def settings_from_key(name, keyed):
        return keyed
try:  # the engine's earlier home, a module of its own, first: an editable install would lend an old tree today's
    from vixnb import train  # vixnb.engine, which does not run on the old modules beside it
except ImportError:
    from vixnb.engine import train
from vixnb.data import dataset_spec, normalize
make_optimizer = getattr(train, "make_optimizer", None) or getattr(train, "_optimizer")  # its name before issue 40

torch.set_num_threads(1)
out = []
for config in json.load(sys.stdin):
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config["seed"])
            settings = settings_from_key(config["model"], config["model_overrides"])
            model = create_model(config["model"], dataset=config["dataset"], **settings).train()
            optimizer = make_optimizer(model, config, "sgd" if config["optimizer"] == "sgd" else "adamw")
            spec = dataset_spec(config["dataset"])
            fixed = torch.Generator().manual_seed(0)
            images = torch.randint(0, 256, (IMAGES, 3, spec.image_size, spec.image_size), generator=fixed,
                                   dtype=torch.uint8)
            labels = torch.randint(0, spec.num_classes, (IMAGES,), generator=fixed)
            torch.manual_seed(config["seed"])
            digest = hashlib.sha256()
            for _ in range(STEPS):
                optimizer.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(normalize(images)).float(), labels)
                loss.backward()
                optimizer.step()
                digest.update(loss.detach().double().numpy().tobytes())
            for name, value in sorted(model.state_dict().items()):
                digest.update(name.encode() + value.detach().cpu().contiguous().numpy().tobytes())
        out.append({"digest": digest.hexdigest()[:32]})
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"[:300]})
print(json.dumps(out))
""".replace("STEPS", str(STEPS)).replace("IMAGES", str(IMAGES))


def digests(configs, code_root, *, processes=None):
    """The probe's ``[{"digest"} | {"error"}]`` of each of ``configs`` with the package at ``code_root``. The probe
    runs on one thread per process (each config seeded on its own, so a digest does not depend on its neighbours):
    ``configs`` are shared out, in order, among ``processes`` processes at once (default: one per CPU core this
    process may use)."""
    processes = max(1, min(processes or _cores(), len(configs)))
    size = -(-len(configs) // processes)
    chunks = [configs[i:i + size] for i in range(0, len(configs), size)]
    if len(chunks) == 1:
        return _digests(chunks[0], code_root)
    with ThreadPoolExecutor(len(chunks)) as pool:  # each thread waits on its own process
        return [d for part in pool.map(lambda chunk: _digests(chunk, code_root), chunks) for d in part]


def _cores():
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _digests(configs, code_root):
    """``digests`` of ``configs`` in one process."""
    env = {**os.environ, "PYTHONPATH": str(code_root), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(configs), capture_output=True, text=True,
                          env=env, cwd=tempfile.gettempdir())
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"error": f"the probe did not run with this code: {last}"}] * len(configs)
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def code_at(commit, repo=None):
    """A temporary folder holding ``vixnb/`` as it was at ``commit`` (``git archive``), or None where the commit is
    unknown here (no clone, a commit it lacks)."""
    repo = repo or checkout_root()
    commit = str(commit or "").removesuffix("-dirty")
    remove_leftovers(tempfile.gettempdir(), name="vixnb-probe")  # a killed probe's copy of the code
    with tempfile.TemporaryDirectory(prefix=temp_prefix("vixnb-probe")) as folder:
        if repo is None or not commit or commit == "unknown":
            yield None
            return
        archive = Path(folder) / "code.tar"
        done = subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), commit, "vixnb"], cwd=repo,
                              capture_output=True, text=True)
        if done.returncode:
            yield None
            return
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


def ledger_path(store):
    return Path(store.root) / LEDGER


def probe(store, results, *, head_root=None):
    """Probe ``results`` (``{result path relative to the store: stored result}``) at their commits and with today's
    code (``head_root``: the package's folder's parent; default this package's), and return their ledger entries:
    ``{ledger key: {"file", "code", "equal" (True / False / None: unverified), "why", "commit", "probed"}}``."""
    head_root = Path(head_root) if head_root else Path(__file__).resolve().parents[2]  # vixnb/runs/probe.py
    paths = sorted(results)
    today = digests([results[p]["config"] for p in paths], head_root)
    entries = {}
    by_commit = {}
    for p in paths:
        by_commit.setdefault((results[p].get("provenance") or {}).get("commit"), []).append(p)
    for commit, members in by_commit.items():
        with code_at(commit) as old_root:
            then = digests([results[p]["config"] for p in members], old_root) if old_root else \
                [{"error": f"commit {commit!r} is not in this clone"}] * len(members)
        for p, old in zip(members, then):
            new = today[paths.index(p)]
            config = results[p]["config"]
            if "error" in old or "error" in new:
                equal, why = None, f"unverified: {old.get('error') or new.get('error')}"
            else:
                equal = old["digest"] == new["digest"]
                why = "" if equal else (f"the behavioural probe differs from {str(commit)[:8]}'s code ({STEPS} CPU "
                                        "fp32 steps on fixed input): today's code makes other numbers")
            entries[ledger_key(config)] = {
                          "file": p,
                          "code": source_today(config["model"], config["dataset"], config_overrides_json(config)),
                          "equal": equal, "why": why, "commit": commit, "probed": now()}
    return entries


def probe_store(store, profile, *, only_changed=True, write=True):
    """Probe the stored results of ``profile`` whose code changed (``policy.code_changed``; all with
    ``only_changed=False``), update the ledger (``write``) and return the new entries."""
    results = {}
    for path in sorted((Path(store.root) / profile).glob("*.json")):
        try:
            stored = read_json(path)
        except StoreError:  # a file the store does not use (``vixnb plan`` lists it as not used): nothing to probe
            continue
        if unusable(stored):  # nor one this vixnb cannot use (a model no longer registered, a newer engine)
            continue
        rel = path.relative_to(store.root).as_posix()
        if not only_changed or code_changed(stored, store.root):
            results[rel] = stored
    entries = probe(store, results) if results else {}
    if write and entries:
        ledger = {**read_ledger(store.root), **entries}
        text = json.dumps(ledger, indent=1, sort_keys=True) + "\n"
        atomic_write(ledger_path(store), lambda f: f.write(text), size=len(text.encode()))
    return entries
