"""``vixnb batch``: run what the plan (``vixnb.plan.plan``) lacks, highest priority first, through submitit.

Executors:
- ``local``: submitit's ``LocalExecutor``, one job at a time per visible GPU (``CUDA_VISIBLE_DEVICES`` set per
  job before CUDA starts); a CPU profile (``smoke``) runs one CPU job at a time. Several training processes on
  one GPU time-slice it and finish later than the same runs one after another, so there is never more than one
  job per GPU: many small runs share a GPU as one ensemble job instead (``ensemble``).
- ``slurm``: submitit's ``SlurmExecutor``; one job array, a GPU per job, a time limit, a partition; a job
  preempted or at its time limit is requeued (``JobFunction.checkpoint``) and resumes from the engine's epoch
  checkpoint.
- ``inline``: in this process, one job after another (notebooks, Colab, debugging; no submitit).

Each job (``vixnb.plan.jobs``) runs itself (``run_job``): the job's process receives it pickled.

``budget`` (seconds) bounds a local or inline batch: a training run still going when time is up stops at an
epoch boundary with its checkpoint kept, and the next batch resumes it; a measurement or benchmark starts only
if its estimate fits the time left. Every job writes its results to the store atomically; a failed job leaves
no result, and removes only the checkpoints it made itself (an interrupted run's stays). ``pack`` puts what a lent
machine must send back (results and their kept weights, the checkpoints of paused runs, failed jobs' logs) into one
archive under a size limit.
"""
from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from pathlib import Path

import torch

from . import plan as planning
from .entries import BenchEntry, TrainEntry
from ..engine.modes import PROBE_STEPS, probe_modes
from ..errors import one_line
from ..files import atomic_write
from .estimates import PROBE_RECORD, STARTUP_SECONDS, expected_epochs, step_gflop
from .groups import GroupJob, group_jobs, settle
from .jobs import RecordJob, TrainJob
from ..runs.profiles import gpu_profile
from ..record_kinds import missing_script
from ..results import ResultsStore, default_root, provenance
from ..results.pack import TRAVEL_MB, pack  # noqa: F401  (batch.pack: what a lent machine sends back)
from ..runs.policy import cannot_make_here
from .stopping import (STOP_GRACE_S, BatchStopped, local_executor, stop_jobs, stop_when_orphaned,
                       stopped_by_signals)

EXECUTORS = ("local", "slurm", "inline")
ENSEMBLE_MODES = ("auto", "never", "always")
BUDGET_SIGNAL_S = 15  # a local job is signalled this long before its time budget's end, then stopped


def _store_root():
    return default_root()


# ----- what a job does (in the job's process) ----------------------------------------------------------

def run_job(job, deadline=None, *, store=None, download=False, executor=None, stop_on_sigterm=False):
    """Run one job (``vixnb.plan.jobs``: a training run or the seeds of one configuration as an ensemble, a record, a
    group of small runs trained at once, a rehearsal's jobs) into the store at ``store`` (default: the results store)
    by its own ``run``; returns its outcome, ``{"outcome": "done" | "resumed" | "paused", "note": ...}`` (a group's
    with each run's under ``"runs"``). A failure raises (the executor marks the job failed); a training run's
    checkpoint that the job itself made is removed then, one kept from an earlier run (an interrupted one) stays.
    ``stop_on_sigterm``: a local job's process, which SIGTERM stops as Ctrl-C does; ``executor``: recorded in each
    result's provenance."""
    if stop_on_sigterm:
        signal.signal(signal.SIGTERM, _interrupt_once)
        stop_when_orphaned()  # a batch killed without stopping its jobs: the job ends itself
    return job.run(ResultsStore(store), deadline, download, executor)


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the controller passes the signal on too: once is enough
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


try:  # submitit's requeue hook (Slurm preemption or time limit): resubmit the same job; the engine resumes
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # submitit is needed only for the local and slurm executors
    _Checkpointable = object


class JobFunction(_Checkpointable):
    """The callable a submitit job runs: ``run_job`` of a job into the store at ``store``; on preemption submitit
    requeues it with the same arguments, and the training run resumes from its last epoch checkpoint."""
    def __init__(self, store, download=False):
        self.store, self.download = store, download

    def __call__(self, job, deadline=None):
        return run_job(job, deadline, store=self.store, download=self.download)


# ----- choosing the jobs ---------------------------------------------------------------------------------

def jobs_from_plan(entries, *, ensemble="auto", max_jobs=None, download=False):
    """Jobs for the plan's missing and stale entries, in priority order. Runs of one shape (the plan's ``group``) train
    as one ensemble job standing where its first run stood: ``ensemble="auto"`` where the plan expects an ensemble
    (its ``mode``: two or more to make, a step small enough to gain), ``"always"`` wherever the plan groups them (any
    step), ``"never"``: one run per job. A job holds at most ``plan.MAX_MEMBERS`` runs and, under ``auto``,
    ``plan.ENSEMBLE_STEP_GFLOP`` of work a step; a larger group is cut into several jobs."""
    if ensemble not in ENSEMBLE_MODES:
        raise ValueError(f"ensemble={ensemble!r}: use one of {', '.join(ENSEMBLE_MODES)}")
    open_jobs, jobs = {}, []
    for e in planning.todo(entries):
        if not isinstance(e, TrainEntry):
            jobs.append(RecordJob(e, download=download))
            continue
        joins = ensemble != "never" and e.group and (ensemble == "always" or "ensemble" in e.mode)
        job = open_jobs.get(e.group) if joins else None
        if job is not None and len(job.entries) < planning.MAX_MEMBERS and (
                ensemble == "always" or (len(job.entries) + 1) * step_gflop(e.config) <= planning.ENSEMBLE_STEP_GFLOP):
            job.entries.append(e)
            continue
        jobs.append(TrainJob([e], download=download))
        if joins:
            open_jobs[e.group] = jobs[-1]
    return jobs[:max_jobs] if max_jobs else jobs


def engine_modes(jobs, choice):
    """``jobs`` in the engine modes of ``choice`` (the probe's: ``{"single": mode, "group": mode}``,
    ``engine.modes.choose``; None: the engine's defaults): a run in the single mode; runs of one shape as one ensemble
    in the group mode where it is an ensemble mode, at once on streams (``groups.GroupJob``) where it is ``streams``,
    else one after another in that mode."""
    if not choice:
        return jobs
    out = []
    for job in jobs:
        if not job.trains or not isinstance(job, TrainJob):
            out.append(job)
        elif len(job.entries) == 1:
            job.mode = choice["single"]
            out.append(job)
        elif choice["group"] in ("ensemble", "graphed ensemble"):
            job.mode = choice["group"]
            out.append(job)
        else:
            alone = [TrainJob([e], download=job.download, mode=choice["single"]) for e in job.entries]
            out += [GroupJob(alone)] if choice["group"] == "streams" else alone
    return out


def probe_engine(jobs, path, *, steps=PROBE_STEPS, progress=print):
    """A lent machine's first minute: ``engine.modes.probe_modes`` on the first training job's first run and the first
    job of runs of one shape, its table printed (``progress``) and its record written to ``path``
    (``engine_choice.json``: each mode's check and speed, the failed checks and why, the choice; on a GPU also into the
    results store, ``bench/engine-probe-<GPU>.json``, which the pack brings back and the plan's estimates read:
    ``estimates.mode_speeds``); returns the choice.
    A failed check switches its mode off, never the batch: a probe that fails as a whole is reported and the batch
    trains eager."""
    train = [j for j in jobs if j.trains and isinstance(j, TrainJob)]
    if not train:
        return None
    group = next((j for j in train if len(j.entries) > 1), None)
    try:
        record = probe_modes(train[0].entries[0].config, group and [e.config for e in group.entries], steps=steps,
                             progress=progress)
    except Exception as e:  # noqa: BLE001  (the probe decides modes; it never stops training)
        record = {"error": one_line(e), "rows": [], "chosen": {"single": "eager", "group": "eager"}}
        progress(f"the engine probe failed ({record['error']}); training eager")
    record["failed"] = {r["mode"]: r["why"] for r in record["rows"] if not r["passed"]}
    record["provenance"] = provenance(stamp="finished")
    if record.get("device", "cpu") != "cpu":  # a GPU's speeds: the plan's estimates refit from them (estimates)
        name = re.sub(r"[^a-z0-9]+", "-", record["device"].lower()).strip("-")
        ResultsStore().save_record("bench", f"{PROBE_RECORD}-{name}", record)
    if path:
        text = json.dumps(record, indent=1, default=str) + "\n"
        atomic_write(Path(path), lambda f: f.write(text))
    progress(f"engine: {record['chosen']['single']} for a run, {record['chosen']['group']} for runs of one shape" +
             (f"; switched off: {', '.join(f'{m} ({why})' for m, why in record['failed'].items())}"
              if record["failed"] else ""))
    return record["chosen"]


def lacks_data(job):
    """Whether a training job's dataset has no copy here (the synthetic set is always here)."""
    e = job.entries[0]
    return job.trains and e.dataset != "synthetic" and not planning.data_here(e.dataset)


def cpu_makes(job):
    """Whether a CPU makes ``job`` as a GPU would: each of its entries is a record that times nothing
    (``MeasureEntry.cpu_ok``: attention maps of stored weights, a question's first steps)."""
    return all(getattr(e, "cpu_ok", False) for e in job.entries)


def for_device(jobs, device):
    """The ``jobs`` a batch on ``device`` makes: on ``"cpu"`` only what a CPU makes as a GPU would (``cpu_makes``),
    on ``"cuda"`` only what needs the GPU (GPU time is not spent on the others)."""
    return [job for job in jobs if cpu_makes(job) == (device == "cpu")]


def cannot_run_here(job, executor):
    """Why a job cannot run on this machine (local and inline executors), or None."""
    e = job.entries[0]
    if executor == "slurm":
        return None
    if (why := cannot_make_here(job.profile, cpu_ok=cpu_makes(job))) is not None:
        return f"{why}; none here"
    if lacks_data(job) and not job.download:
        return f"no {e.dataset} copy here (set VIXNB_DATA, or `{e.command} --download` where online)"
    if isinstance(e, BenchEntry) and (script := missing_script(e.command)):
        return f"{script} is not here (run from the checkout's root)"
    return None


# ----- running them --------------------------------------------------------------------------------------

def run_local(jobs, *, budget=None, executor="local", folder=None, progress=print, pack_limit_mb=None,
              together="auto", choice=None):
    """Run ``jobs`` in order here, one at a time per GPU (or one CPU job), within ``budget`` seconds; returns the jobs
    as they ran (``engine_modes``: an ensemble job the probe's choice trains run by run is several jobs). With
    ``pack_limit_mb`` (the largest checkpoint that travels back), a run whose checkpoint is larger starts only if
    the whole run fits in the time left: a paused run's epochs would be lost.

    ``executor="inline"`` runs every job in this process (one CUDA context, each dataset loaded once): what a lent
    GPU's call uses. One job at a time on a device; a job of runs of one shape trains them as one ensemble. ``choice``:
    the engine modes the probe chose (``probe_engine``; ``engine_modes``); where it chose streams, small runs of other
    shapes train at once too (``together``: ``groups.group_jobs``; each run keeps its own result and records how many
    shared the device).

    Stopped (SIGTERM, SIGINT, ``timeout``): no job is started after that; running jobs are signalled and given
    ``STOP_GRACE_S`` to end (a training run keeps its last epoch's checkpoint), then killed; the jobs are marked
    ``stopped`` / ``not started`` and ``BatchStopped`` is raised."""
    deadline = time.time() + budget if budget else None
    jobs, runnable = engine_modes(jobs, choice), []
    for job in jobs:
        if (why := cannot_run_here(job, executor)) is not None:
            job.outcome, job.note = "skipped", why
        else:
            runnable.append(job)
    runnable = group_jobs(runnable, together, executor=executor, streams=bool(choice) and choice["group"] == "streams")
    slots = [None] if executor == "inline" else _gpu_slots(runnable)
    queue, lock, stop, running = list(runnable), threading.Lock(), threading.Event(), {}

    def worker(slot):
        while not stop.is_set():
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            left = deadline - time.time() if deadline else None
            if left is not None and left < (need := least_seconds(job, pack_limit_mb)):
                job.outcome, job.note = "skipped", f"not started: needs {need:.0f} s, {max(left, 0):.0f} s left"
                if job.trains and pack_limit_mb and checkpoint_mb(job) > pack_limit_mb:
                    job.note += f" ({whole_run_note(job)})"
                continue
            progress(f"vixnb batch: {job.label} ({'GPU ' + str(slot) if slot is not None else 'CPU'})")
            t0 = time.time()
            job.outcome = "running"
            try:
                result = execute(job, slot, deadline, executor, folder, running)
                job.outcome, job.note = result["outcome"], result.get("note", "")
                settle(job, result)
            except Exception as e:  # noqa: BLE001  (a failed job is reported, the batch goes on)
                job.outcome, job.note = ("stopped", _STOPPED) if stop.is_set() else ("failed", one_line(e))
            except KeyboardInterrupt as e:  # inline: the run itself was interrupted (its checkpoint is kept)
                job.outcome, job.note = "stopped", one_line(e) if str(e) else _STOPPED
                raise
            finally:
                job.seconds = time.time() - t0

    threads = [threading.Thread(target=worker, args=(slot,), daemon=True) for slot in slots]
    try:
        with stopped_by_signals():
            if executor == "inline":  # in the calling thread, so that Ctrl-C and SIGTERM reach the run
                worker(None)
                return jobs
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
    except KeyboardInterrupt as e:
        stop.set()
        stop_jobs(running)
        for t in threads:
            if t.ident is not None:
                t.join(STOP_GRACE_S + 5)
        for job in jobs:
            if job.outcome in ("pending", "running"):
                job.outcome, job.note = (("stopped", _STOPPED) if job.outcome == "running"
                                         else ("not started", "the batch was stopped"))
        raise BatchStopped(str(e) or "interrupted") from None  # Ctrl-C: as the other commands say it
    return jobs


_STOPPED = "stopped by a signal; a training run keeps its last epoch's checkpoint and the next batch resumes it"


def estimated_seconds(job):
    """The plan's estimate of a whole job, in seconds (every member of an ensemble; inf where unknown)."""
    return job.est_minutes * 60


def least_seconds(job, pack_limit_mb=None):
    """The time a job needs to be worth starting: a training run, its start-up and one epoch (it stops at an
    epoch boundary), or the whole run where its checkpoint would not fit in ``pack_limit_mb``; a measurement
    or benchmark, its whole estimate (it cannot pause)."""
    e = job.entries[0]
    whole = estimated_seconds(job)
    if not job.trains or (pack_limit_mb and checkpoint_mb(job) > pack_limit_mb):
        return whole
    if whole == float("inf"):
        return STARTUP_SECONDS + 60
    return STARTUP_SECONDS + max(whole - STARTUP_SECONDS * len(job.entries), 0) / expected_epochs(e.config)[0]


def whole_run_note(job):
    """What a run whose checkpoint cannot travel back needs: ``needs N minutes in one call``."""
    minutes = estimated_seconds(job) / 60
    return f"needs {math.ceil(minutes) if minutes < float('inf') else 'unknown'} minutes in one call: its checkpoint " \
           f"({checkpoint_mb(job):.0f} MiB) cannot travel back, so it runs whole or not at all"


def checkpoint_mb(job):
    """About how large a training job's checkpoint is, in MiB (``plan.checkpoint_mb``, every member)."""
    return planning.checkpoint_mb(job.entries[0].config, len(job.entries))


def _gpu_slots(jobs):
    """The visible GPUs' indices when any job needs a GPU, else ``[None]`` (one CPU job at a time)."""
    if not any(gpu_profile(j.profile) for j in jobs):
        return [None]

    return list(range(torch.cuda.device_count())) or [None]


def execute(job, slot, deadline, executor, folder, running=None):
    """Run ``job`` on GPU ``slot`` (None: the CPU) until ``deadline``: inline in this process, else as a local
    submitit job (its handle kept in ``running`` while it runs); returns its result, a paused outcome where the
    time budget stopped it."""
    if executor == "inline":
        return run_job(job, deadline, store=str(_store_root()), download=job.download, executor="inline")
    ex = local_executor(str(_job_folder(folder, job.profile)), max_num_timeout=0)
    # the job is stopped at the deadline (a training run pauses itself before it at an epoch boundary)
    timeout = max(0.5, (deadline - time.time()) / 60) if deadline else 24 * 60
    ex.update_parameters(timeout_min=timeout, signal_delay_s=BUDGET_SIGNAL_S, gpus_per_node=0 if slot is None else 1,
                         visible_gpus=() if slot is None else (slot,))
    # a plain function: a local job is never requeued; SIGTERM stops it (submitit's own handler ignores it)
    handle = ex.submit(run_job, job, deadline, store=str(_store_root()), download=job.download, executor="local",
                       stop_on_sigterm=True)
    job.log = str(handle.paths.stderr)
    if running is not None:
        running[job.label] = handle
    try:
        return handle.result()
    except KeyboardInterrupt:  # the batch is stopping (Ctrl-C, SIGTERM in this thread): its job ends before it does
        stop_jobs({job.label: handle})
        raise
    except Exception as e:  # submitit wraps the job's error with its traceback: keep the error's own line
        if deadline is not None and time.time() >= deadline - BUDGET_SIGNAL_S and "timed-out" in str(e):
            # the time budget ran out inside the job's first epoch (or a measurement): the job was stopped, not
            # failed; a training run keeps its last epoch's checkpoint and the next batch resumes it
            return {"outcome": "paused", "note": "stopped by the time budget before an epoch ended; the next batch "
                                                 "resumes it from its last checkpoint"}
        raise RuntimeError(_error_line(str(e))) from None
    finally:
        if running is not None:
            running.pop(job.label, None)


def _error_line(text):
    """The line of a traceback that names the error (``SomeError: what``), else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Interrupted|Paused|Timeout)\b.*", ln)]
    return (named or lines or ["the job failed without a message"])[-1]


def _job_folder(folder, profile):
    return Path(folder) if folder else _store_root() / profile / ".batch" / "%j"


def submit_slurm(jobs, *, folder=None, partition=None, time_min=None, gpus_per_job=None, max_parallel=None,
                 dry_run=False):
    """Submit ``jobs`` as one Slurm job array (submitit); returns the submitit jobs ([] on a dry run). Each job
    asks for ``gpus_per_job`` GPUs (default: 1 for a GPU profile) and ``time_min`` minutes (default: twice the
    largest estimate, at least 30); preempted or timed-out jobs are requeued and resume."""
    profile = jobs[0].profile
    gpus = gpus_per_job if gpus_per_job is not None else (1 if gpu_profile(profile) else 0)
    known = [j.est_minutes for j in jobs if j.est_minutes != float("inf")]
    minutes = time_min or max(30, int(2 * max(known, default=50)) + 10)
    parameters = {"job_name": f"vixnb-{profile}", "gpus_per_node": gpus, "time": minutes,
                  "array_parallelism": max_parallel or len(jobs),
                  "cpus_per_task": 8 if gpus else 2, **({"partition": partition} if partition else {})}
    if dry_run:
        return parameters
    import submitit  # optional dependency: the inline executor runs without it

    ex = submitit.SlurmExecutor(folder=str(_job_folder(folder, profile)))
    ex.update_parameters(**parameters)
    handles = ex.map_array(JobFunction(str(_store_root()), any(j.download for j in jobs)), jobs, [None] * len(jobs))
    for job, handle in zip(jobs, handles):
        job.outcome, job.note, job.log = "submitted", f"slurm job {handle.job_id}", str(handle.paths.stderr)
    return parameters


# ----- reporting and packing -----------------------------------------------------------------------------

def stamp(line):
    """``line`` after the UTC time: every phase of a lent machine's call is timestamped in its log."""
    return f"[{time.strftime('%H:%M:%S', time.gmtime())}] {line}"


def trained_line(jobs, seconds):
    """The line that ends a batch's table: ``trained N s of M s``, N being the training jobs' wall time (done,
    resumed, paused or stopped runs) and M ``seconds`` (the command's whole time)."""
    trained = sum(j.seconds for j in jobs if j.trains and
                  j.outcome in ("done", "resumed", "paused", "stopped"))
    return f"trained {trained:.0f} s of {seconds:.0f} s"


def job_mode(job):
    """The engine mode a job trains in, as the table shows it: its own, ``streams`` for a group trained at once on
    streams, ``default`` for the engine's default (graphed on a GPU); "" for a record."""
    if not job.trains:
        return ""
    return getattr(job, "mode", "") or ("streams" if isinstance(job, GroupJob) else "default")


def status_table(jobs):
    """The batch's outcome, one line per job: job, outcome, seconds, engine mode, note or log."""
    rows = [(j.label, j.outcome, f"{j.seconds:.0f}" if j.seconds else "", job_mode(j), j.note + (f" (log: {j.log})"
             if j.outcome == "failed" and j.log and j.log not in j.note else "")) for j in jobs]
    widths = [max(len(r[i]) for r in rows + [("job", "outcome", "s", "mode", "")]) for i in range(4)]
    head = f"{'job':<{widths[0]}}  {'outcome':<{widths[1]}}  {'s':>{widths[2]}}  {'mode':<{widths[3]}}  note"
    return "\n".join([head] + [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}  {m:<{widths[3]}}  {d}"
                               for a, b, c, m, d in rows])
