"""Groups of small training runs that a batch (``vixnb.plan.batch``) trains at once, in one process on one GPU
(``concurrent.train_concurrently``: each run exactly its solo run, on its own CUDA stream).

Which runs (``groupable``): a training job of one run (not an ensemble job), without a warm start (it trains its
source first), whose step is bound by the host: its training work per step (``estimates.step_gflop``: GFLOP per
image times the batch) is at most ``SMALL_STEP_GFLOP``. At 40 % of an H100's bf16 peak such a step keeps the GPU
busy for at most about 0.3 ms, while the host launches its hundreds of kernels (the blog's ``vit_small_*`` runs:
about 28 ms a step eagerly, some 500x their FLOP floor); several such runs at once fill the GPU that one leaves
idle. The plan's runs fall clearly on either side: ``vit_small_*`` and ``wavemix_5`` at 14-102 GFLOP a step,
``resnet18_cifar`` at 107, every other model at 220 or more.

How many at once (``group_jobs``): up to ``MAX_TOGETHER`` (issue 37's target: 8 at once give at least 6x the
images/s of one), and on a GPU only as many as fit in ``MEMORY_SHARE`` of its memory by the peak memory that
stored runs of their models recorded (``gpu_gb_reserved``), ``UNKNOWN_RUN_GB`` for a model with none. Runs of one
group share their data splits where they read the same ones (loaded once).

Where: ``together="auto"`` groups only where a lent machine's engine probe measured streams faster than its other
modes (``engine.modes``: streams parallelise GPU work, not the Python thread that launches it, so host-bound runs on
streams are that many times the host work; runs of one shape train as one ensemble instead), on a CUDA device under
the ``inline`` and ``local`` executors (one process per GPU); on a CPU, and under ``slurm`` (an array job per run,
requeued alone), runs train one at a time. A whole number forces groups of at most that many runs anywhere (1: never;
the tests train a CPU batch through groups).

Each run keeps its own result file, checkpoint, history and provenance; ``provenance["concurrent_jobs"]`` and
``provenance["execution"]["concurrent_runs"]`` say how many trained at once (execution facts, not in the run's
key). A time budget pauses each run at an epoch boundary, a signal stops them all, each with its last whole
epoch's checkpoint kept, as alone; a run that fails leaves the others training and removes only the checkpoint
it made itself.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import torch

from ..engine.concurrent import train_concurrently
from ..errors import one_line
from .estimates import step_gflop
from .jobs import Job, executing
from ..runs.profiles import gpu_profile
from ..results import ResultsStore, has_checkpoint, remove_failed_checkpoints
from ..runs.policy import unusable
from ..runs.make import Pending, kept_published, pending
from ..engine.train import TrainingPaused, splits, training_device

MAX_TOGETHER = 8  # the most runs a group trains at once
SMALL_STEP_GFLOP = 128  # the most training work per step (GFLOP) of a run that trains in a group
MEMORY_SHARE = 0.8  # of the GPU's memory, the most a group's runs may take together (their stored peaks)
UNKNOWN_RUN_GB = 4.0  # the memory taken to be a run's where no stored run of its model recorded its peak
GROUP_EXECUTORS = ("inline", "local")  # the executors that train a group in one process


def check_together(together):
    """``together`` as given: ``"auto"`` or a whole number >= 1; else a one-line error naming the parameter."""
    if together == "auto" or (isinstance(together, int) and not isinstance(together, bool) and together >= 1):
        return together
    raise ValueError(f"together={together!r}: give 'auto' (groups of up to {MAX_TOGETHER} on a CUDA GPU) or a whole "
                     "number >= 1 of runs trained at once (1: one at a time)")


def group_size(together, executor, jobs, streams=False):
    """The most runs a group of ``jobs`` holds under ``together`` (``check_together``) and ``executor``; ``auto`` groups
    only where the engine probe measured streams faster than its other modes (``streams``)."""
    if check_together(together) != "auto":
        return together
    on_gpu = executor in GROUP_EXECUTORS and torch.cuda.is_available()
    return MAX_TOGETHER if streams and on_gpu and any(gpu_profile(j.profile) for j in jobs) else 1


def groupable(job):
    """Whether a batch's job may train in a group: one run, no warm start, a step of at most ``SMALL_STEP_GFLOP``."""
    if len(job.entries) != 1 or not job.trains:
        return False
    config = job.entries[0].config
    return not config.get("init_from") and step_gflop(config) <= SMALL_STEP_GFLOP


def stored_peaks(store, profile):
    """``{model: GiB}``: the largest peak GPU memory (``gpu_gb_reserved``) a stored run of each model recorded."""
    peaks = {}
    for result in store.results(profile, unusable=unusable):
        if (gb := result.get("gpu_gb_reserved")) is not None:
            model = result["config"]["model"]
            peaks[model] = max(gb, peaks.get(model, 0.0))
    return peaks


def group_jobs(jobs, together="auto", *, executor="local", store=None, streams=False):
    """``jobs`` in order, where ``group_size`` allows several runs at once with the groupable ones (``groupable``)
    gathered into ``GroupJob`` s: each group stands where its first run stood and takes the next groupable runs of
    its profile, up to the size and, on a GPU, its memory (``MEMORY_SHARE``)."""
    size = group_size(together, executor, jobs, streams)
    if size <= 1:
        return list(jobs)
    cuda = torch.cuda.is_available()
    memory = torch.cuda.get_device_properties(0).total_memory / 2**30 if cuda else float("inf")
    store = store if store is not None else ResultsStore()
    peaks = {}

    def gb(job):
        e = job.entries[0]
        if not cuda:
            return 0.0
        if e.profile not in peaks:
            peaks[e.profile] = stored_peaks(store, e.profile)
        return peaks[e.profile].get(e.model, UNKNOWN_RUN_GB)

    out, taken = [], set()
    for i, job in enumerate(jobs):
        if i in taken:
            continue
        if not groupable(job):
            out.append(job)
            continue
        members, used = [job], gb(job)
        for j in range(i + 1, len(jobs)):
            other = jobs[j]
            if len(members) == size:
                break
            if j in taken or other.profile != job.profile or not groupable(other):
                continue
            if used + gb(other) <= MEMORY_SHARE * memory:
                members.append(other)
                used += gb(other)
                taken.add(j)
        out.append(GroupJob(members) if len(members) > 1 else job)
    return out


@dataclass
class GroupJob(Job):
    """Several one-run training jobs of a batch (``members``: ``jobs.TrainJob`` s) as one job that trains them at
    once (``run``). What the batch sets on it (its outcome, note, seconds, log) it sets on each member too;
    ``settle`` then gives each member its own run's outcome and note."""
    members: list
    SHARED = ("outcome", "note", "seconds", "log")
    trains = True

    def __post_init__(self):
        self.download = any(m.download for m in self.members)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name in self.SHARED:
            for member in getattr(self, "members", ()):  # none yet while the dataclass sets the fields
                setattr(member, name, value)

    @property
    def entries(self):
        return [e for m in self.members for e in m.entries]

    @property
    def label(self):
        return f"{len(self.members)} runs at once: " + "; ".join(m.label for m in self.members)

    def run(self, store, deadline=None, download=False, executor=None):
        """Train its runs (each a ``TrainEntry``) at once into ``store``: ``{"outcome", "note", "runs": [{"outcome",
        "note"}]}``, a run's outcome ``done``, ``resumed``, ``paused`` or ``failed``; the group's outcome the worst
        of them. A signal (``KeyboardInterrupt``) stops every run with its last whole epoch's checkpoint kept, and
        is raised."""
        entries = self.entries
        with executing(executor or "inline", len(entries)):
            todos, earlier, resumed, published = [], [], [], []
            for e in entries:
                try:
                    todo = pending(e.spec, compute="missing", store=store, progress=False, download=download,
                                   deadline=deadline)
                except Exception as error:  # noqa: BLE001  (this run fails; the others train)
                    todo = error
                config = todo.config if isinstance(todo, Pending) else None
                path = store.checkpoint_path(config) if config else None
                earlier.append(path is not None and has_checkpoint(path))
                resumed.append(earlier[-1] and not store.lock_held(config))
                published.append({store.path(config): store.get(config)}
                                 if config and e.status == "weights wanted" else {})
                todos.append(todo)
            outcomes = _train_pending(todos, store, deadline, download)
        runs = []
        for todo, outcome, made_before, again, old in zip(todos, outcomes, earlier, resumed, published):
            if isinstance(outcome, TrainingPaused):
                runs.append({"outcome": "paused", "note": str(outcome)})
            elif isinstance(outcome, BaseException) or outcome.get("status") != "done":
                if isinstance(todo, Pending) and not made_before:  # only the checkpoint this run made itself
                    remove_failed_checkpoints(store.checkpoint_path(todo.config))
                why = one_line(outcome) if isinstance(outcome, BaseException) else \
                    f"{outcome['config']['model']}: {outcome['status']}: {outcome.get('reason', '')}"
                runs.append({"outcome": "failed", "note": why})
            else:
                runs.append({"outcome": "resumed" if again else "done",
                             "note": kept_published(store, [outcome["config"]], old)})
        worst = next((o for o in ("failed", "paused", "resumed") if any(r["outcome"] == o for r in runs)), "done")
        counts = {o: sum(r["outcome"] == o for r in runs) for o in ("done", "resumed", "paused", "failed")}
        return {"outcome": worst, "note": ", ".join(f"{n} {o}" for o, n in counts.items() if n), "runs": runs}


def settle(job, result):
    """After a group's job: each member's outcome and note, its own run's (``result["runs"]``)."""
    for member, own in zip(getattr(job, "members", ()), result.get("runs", ())):
        member.outcome, member.note = own["outcome"], own["note"]


def _train_pending(todos, store, deadline, download):
    """One outcome per item of ``todos`` (``runs.make.pending``'s: a result dict, a ``Pending`` run, or the error it
    raised): the result, the error, or the ``Pending`` run trained with the others at once, under their locks."""
    outcomes, trainers = list(todos), []
    with ExitStack() as locks:
        for i, todo in enumerate(todos):
            if not isinstance(todo, Pending):
                continue
            waited = locks.enter_context(store.lock(todo.config))
            if (done := todo.done_meanwhile(waited)) is not None:
                outcomes[i] = done
            else:
                trainers.append(i)
        loaded, jobs = {}, []
        for i in trainers:
            config = todos[i].config
            where = (config["dataset"], config["train_size"], config["test_size"], config["protocol"],
                     config["val_size"], config.get("allow_resize", False), config["device"])
            if where not in loaded:  # the runs of a group that read the same splits share one copy on the device
                loaded[where] = splits(config, training_device(config, None), download)
            jobs.append({"config": config, "download": download, "deadline": deadline, "data": loaded[where],
                         **todos[i].train_options()})
        for i, outcome in zip(trainers, train_concurrently(jobs)):
            try:
                outcomes[i] = outcome if isinstance(outcome, BaseException) else todos[i].keep(outcome)
            except Exception as e:  # noqa: BLE001  (storing one run failed; the others are stored)
                outcomes[i] = e
    return outcomes
