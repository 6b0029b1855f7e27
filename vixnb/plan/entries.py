"""The plan's entries (``vixnb.plan.plan``), by type: a training run (``TrainEntry``, of a ``runs.spec.RunSpec``), a
stored measurement (``MeasureEntry``) or a benchmark (``BenchEntry``), the last two ``RecordEntry``s of a
``record_kinds.Request``. Each says its status in a store (``stored_status``), estimates its GPU minutes
(``estimate``) and makes itself (``run``); a batch's job (``vixnb.plan.jobs``) holds its entries themselves, and the
batch pickles the job.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass, replace

from ..errors import one_line
from .estimates import estimate_record, estimate_run
from ..record_kinds import Request, kind_of, obtain
from ..results import StoreError, read_json
from ..runs.policy import code_changed, stale_reason
from ..runs.policy import unusable
from ..runs.make import run
from ..runs.spec import Keep, RunSpec, run_command

#: what ``Entry.to_dict`` (``vixnb plan --json``) holds of each entry, in this order
FIELDS = ("chapter", "paper", "kind", "name", "model", "dataset", "profile", "seed", "settings", "status", "reason",
          "blocked", "est_gpu_minutes", "basis", "level", "priority", "purpose", "command", "path", "key",
          "keep_weights", "group", "mode")
#: the fields of ``vixnb plan --json`` whose attribute has another name: ``kind`` is the entry's ``job``
JSON_FIELDS = {"kind": "job"}


@dataclass(eq=False, kw_only=True)
class Entry:
    """One thing the book needs, in one profile: what the plan found of it (``status``, ``reason``, ``blocked``),
    its estimate, its level and rank (``priority``), and the training runs it must come after (``needs``: their
    keys)."""
    chapter: str
    paper: str
    name: str              # the run (its table row: the model, or a paper's run name); the record's name
    profile: str
    level: int = 1
    purpose: str = ""      # the table, question or target it serves
    status: str = "missing"
    reason: str = ""       # why stale
    blocked: str = ""      # what stands in the way of running it on this machine's data, if anything
    est_gpu_minutes: float = 0.0
    basis: str = ""
    priority: int = 0
    needs: frozenset = frozenset()
    group: str = ""        # runs of one shape that train as one ensemble share it (``plan.ensemble_group``)
    mode: str = ""         # the engine mode it is expected to train in (``engine.modes.MODES``)
    members: int = 1       # the runs its job is expected to train at once (an ensemble's)

    job = ""  # what it does: train, measure or bench (listings name it; ``vixnb plan --json`` keeps the field's
    # name of earlier releases, ``kind``, for the scripts that read it)
    model = seed = None
    key = ""
    keep_weights = Keep.NONE

    @property
    def settings(self):
        return {}

    def to_dict(self):
        out = {name: getattr(self, JSON_FIELDS.get(name, name)) for name in FIELDS}
        return {**out, "keep_weights": Keep.of(out["keep_weights"]).value}


@dataclass(eq=False, kw_only=True)
class TrainEntry(Entry):
    """A training run (``spec``); a warm start ``needs`` the run it starts from."""
    spec: RunSpec
    job = "train"

    model = property(lambda self: self.spec.model)
    seed = property(lambda self: self.spec.seed)
    key = property(lambda self: self.spec.key)
    path = property(lambda self: self.spec.path)
    config = property(lambda self: self.spec.config)
    keep_weights = property(lambda self: self.spec.keep)

    @property
    def dataset(self):
        """The dataset it trains on (the profile's where it sets one: the smoke profile's synthetic set)."""
        return self.config["dataset"]

    @property
    def settings(self):
        return dict(self.spec.settings)

    @property
    def command(self):
        """The ``vixnb train`` command line that makes it."""
        return run_command(self.spec)

    def keeping(self, keep, dataset):
        """Keep its weights as ``keep`` (another table asked for them, on ``dataset``: the same run)."""
        self.spec = replace(self.spec, keep=keep, dataset=dataset)

    def stored_status(self, store, needed_paths=frozenset()):
        """``(status, reason)`` of its result in ``store`` (``plan.STATUSES``); ``needed_paths``: the result files
        that other entries need (not "other settings" of this one)."""
        config = self.config
        try:  # a truncated, foreign or hand-edited file (this run's, or its warm start source's): named and kept
            stored = store.get(config)
            why = stored is not None and (stale_reason(stored, store) or code_changed(stored, store.root))
            unkept = stored is not None and self.keep_weights != Keep.NONE and store.weights_missing(config, stored)
        except StoreError as e:
            return "damaged", one_line(e)
        if stored is not None:
            if why and why.startswith("unverified"):
                return "unverified", why
            return ("stale", why) if why else ("weights wanted", unkept) if unkept else ("stored", "")
        folder = store.root / self.profile
        for other in sorted(folder.glob(f"{config['model']}-{config['dataset']}-seed{config['seed']}-*.json")):
            if str(other.relative_to(store.root)) in needed_paths:
                continue
            try:
                old = read_json(other)["config"]
            except (StoreError, KeyError, TypeError):  # an unreadable file is no evidence either way
                continue
            if unusable(read_json(other)):  # a newer engine's, say: listed as "not used" (vixnb plan), never stale
                continue
            changed = [f"{k} {old.get(k)!r} -> {config.get(k)!r}" for k in sorted(set(config) | set(old))
                       if old.get(k) != config.get(k)]
            return "stale", f"{other.name} was made with other settings ({'; '.join(changed)})"
        return "missing", ""

    def estimate(self, **context):
        """``(GPU minutes, basis)``: ``estimates.estimate_run`` of its config in its expected ``mode`` (``context``: its
        keywords)."""
        return estimate_run(self.config, mode=self.mode, members=self.members, **context)

    def run(self, store, *, deadline=None, download=False, graphs=None):
        """Train it into ``store`` (``runs.make.run``, keeping its weights as its spec says; ``graphs``: the engine's
        mode, ``train.train``'s); a failure raises."""
        result = run(self.spec, store=store, progress=False, deadline=deadline, download=download, graphs=graphs)
        if result["status"] != "done":
            raise RuntimeError(f"{self.spec.model}: {result['status']}: {result.get('reason', '')}")
        return result


@dataclass(eq=False, kw_only=True)
class RecordEntry(Entry):
    """A record asked for (``request``): its file in the store (``path``), the command that makes it, and its kind's
    nominal GPU minutes."""
    request: Request
    path: str
    command: str = ""
    dataset: str | None = None
    nominal_minutes: float = 0.0

    def stored_status(self, store, needed_paths=frozenset()):
        """``(status, reason)`` of its record in ``store``: ``stored``, ``stale`` (its kind's ``stale``), ``missing``
        or ``damaged``."""
        kind = kind_of(self.request)
        try:
            record = store.load_record(kind.group, self.path.rsplit("/", 1)[1][:-len(".json")], profile=self.profile,
                                       strict=True)
        except StoreError as e:
            return "damaged", one_line(e)
        if record is None:
            return "missing", ""
        why = kind.stale(record, store) if kind.stale else None
        return ("stale", why) if why else ("stored", "")

    @property
    def cpu_ok(self):
        """Whether a CPU makes it as a GPU would (its kind times nothing: ``RecordKind.cpu_ok``)."""
        return kind_of(self.request).cpu_ok

    def estimate(self, *, gpu=None, **_):
        """``(GPU minutes, basis)``: its kind's nominal minutes (``estimates.estimate_record``); none for a record
        a CPU makes (``cpu_ok``), which ``vixnb batch --device cpu`` makes on any machine."""
        if self.cpu_ok:
            return 0.0, f"a CPU makes it (it times nothing): `vixnb batch --profile {self.profile} --device cpu`"
        return estimate_record(self.profile, self.nominal_minutes, gpu)


@dataclass(eq=False, kw_only=True)
class MeasureEntry(RecordEntry):
    """A stored measurement a chapter's pages (or the maps study) read."""
    job = "measure"

    def run(self, store, *, deadline=None, download=False):
        """Make it (``record_kinds.obtain`` under ``missing``: made where absent or stale, its kind's maker keeping what
        of a stale record still answers: a question's arms); the runs whose weights it reads were trained by their own
        entries, so it trains nothing."""
        record = obtain(self.request, profile=self.profile, compute="missing", train="never", required=True,
                        store=store)
        if record is None:
            raise RuntimeError(f"{self.name}: this measurement needs a CUDA GPU")
        return record


@dataclass(eq=False, kw_only=True)
class BenchEntry(RecordEntry):
    """A benchmark, made by its command line."""
    job = "bench"
    cpu_ok = False  # a benchmark times things: a CPU never makes it as a GPU would

    def run(self, store=None, *, deadline=None, download=False):
        """Run its command (``vixnb ...`` or ``python ...``) with this interpreter; a failure raises."""
        argv = shlex.split(self.command)
        argv = [sys.executable, "-m", "vixnb", *argv[1:]] if argv[0] == "vixnb" else [sys.executable, *argv[1:]]
        done = subprocess.run(argv, capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"`{self.command}` exited with {done.returncode}: {last}")
