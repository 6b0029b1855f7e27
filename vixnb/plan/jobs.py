"""A batch's jobs (``vixnb.plan.batch``), by type, each of which runs itself: a training run, or the seeds of one
configuration trained as one ensemble (``TrainJob``), and a measurement or a benchmark (``RecordJob``); a group of
small runs trained at once is ``groups.GroupJob``, a dress rehearsal's jobs one after another
``rehearsal.RehearsalJob``.

``run(store, deadline, download, executor)`` makes the job into a results store and returns its outcome,
``{"outcome": "done" | "resumed" | "paused", "note": ...}``; a failure raises. ``batch.run_job`` calls it in the
job's own process, which receives the job itself pickled (a plain dataclass, with its plan entries). What the batch
records of a job (its ``outcome``, ``note``, ``seconds`` and ``log``) it keeps on the job.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from ..runs.make import checkpoint_path, run_ensemble
from .plan import finite, shown_settings
from ..results import has_checkpoint, remove_failed_checkpoints
from ..results.provenance import execution
from ..runs.make import kept_published
from ..engine.train import TrainingPaused


@dataclass(kw_only=True)
class Job:
    """What every job has: the batch's record of it, and ``download`` (fetch missing data); ``entries``: its plan
    entries (each subclass says which)."""
    outcome: str = "pending"  # done, resumed, paused, skipped, failed, submitted, stopped, not started
    note: str = ""
    seconds: float = 0.0
    log: str = ""
    download: bool = False
    trains = False  # whether it trains (runs), rather than making a record

    @property
    def profile(self):
        return self.entries[0].profile

    @property
    def est_minutes(self):
        """The plan's estimate of the whole job, in GPU minutes (inf where unknown)."""
        return sum(finite(e.est_gpu_minutes) for e in self.entries)

    def run(self, store, deadline=None, download=False, executor=None):
        """Make it into ``store`` (a ``ResultsStore``) by ``deadline``, fetching missing data where ``download``;
        ``executor`` (``inline``, ``local``, ``slurm``; None: none) is recorded in each result's provenance."""
        raise NotImplementedError


def executing(executor, runs=1):
    """While it holds, the results made record ``executor`` and how many ``runs`` shared the device (nothing where
    no executor is named)."""
    return execution(concurrent_jobs=runs, executor=executor) if executor else nullcontext()


@dataclass
class TrainJob(Job):
    """One training run, or runs of one shape as one ensemble (``entries``: their ``TrainEntry`` s; the plan's
    ``group``), in the engine mode ``mode`` (``engine.modes.MODES``; "" for the engine's default: graphed on a GPU)."""
    entries: list
    mode: str = ""
    trains = True

    @property
    def label(self):
        e = self.entries[0]
        if all(x.settings == e.settings for x in self.entries):
            seeds = ",".join(str(x.seed) for x in self.entries)
            extra = "".join(f" {k}={v}" for k, v in shown_settings(e.settings).items())
            return f"{e.model} {e.dataset} seed {seeds}{extra}"
        runs = ", ".join(f"{x.name} seed {x.seed}" for x in self.entries)
        return f"{e.model} {e.dataset}, {len(self.entries)} runs of one shape: {runs}"

    @property
    def graphs(self):
        """The engine's ``graphs`` for its mode (None: the engine's default)."""
        return self.mode.startswith("graphed") if self.mode else None

    def run(self, store, deadline=None, download=False, executor=None):
        """Train it (an ensemble: ``runs.make.run_ensemble``): ``resumed`` where it went on from a checkpoint that no
        other process trains from, ``paused`` where ``deadline`` stopped it. A failure removes the checkpoints this
        job made itself, and raises; one kept from an earlier run (an interrupted one) stays. A run trained again
        for its weights keeps its published numbers where they differ (``runs.make.kept_published``)."""
        with executing(executor):
            return self._train(store, deadline, download)

    def _train(self, store, deadline, download):
        entries = self.entries
        configs = [e.config for e in entries]
        checkpoints = [store.checkpoint_path(c) for c in configs]
        if len(configs) > 1:
            checkpoints.append(checkpoint_path(store, configs))
        earlier = {p for p in checkpoints if has_checkpoint(p)}
        # a checkpoint another process is training from is its run, not one this job resumes (it waits for its result)
        resumed = bool(earlier) and not any(store.lock_held(c) for c in configs)
        wanted = any(e.status == "weights wanted" for e in entries)
        published = {store.path(c): store.get(c) for c in configs} if wanted else {}
        try:
            if len(configs) > 1:
                run_ensemble(configs, store=store, deadline=deadline, progress=False, download=download,
                             keep_weights=[e.keep_weights for e in entries], graphs=self.graphs)
            else:
                entries[0].run(store, deadline=deadline, download=download, graphs=self.graphs)
        except TrainingPaused as paused:
            return {"outcome": "paused", "note": str(paused)}
        except Exception:  # not SystemExit / KeyboardInterrupt: preemption, timeouts and Ctrl-C keep the checkpoint
            for p in set(checkpoints) - earlier:  # a failed job removes only the checkpoints it made itself
                remove_failed_checkpoints(p)
            raise
        return {"outcome": "resumed" if resumed else "done", "note": kept_published(store, configs, published)}


@dataclass
class RecordJob(Job):
    """A measurement or a benchmark (``entry``: its ``RecordEntry``), made whole or not at all (it cannot pause)."""
    entry: object

    @property
    def entries(self):
        return [self.entry]

    @property
    def label(self):
        return f"{self.entry.job} {self.entry.name}"

    def run(self, store, deadline=None, download=False, executor=None):
        """Make its record (the entry's ``run``)."""
        with executing(executor):
            self.entry.run(store, deadline=deadline, download=download)
        return {"outcome": "done", "note": ""}
