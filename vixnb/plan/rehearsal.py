"""``vixnb batch --profile P --rehearse``: the dress rehearsal of a profile's plan on the machine at hand.

Every model of the plan at least once, every training protocol at least once (AdamW, DualOpT, RandAugment with
post-training, the blog's augmentation and schedule, per-layer gradient norms, the fixed protocol, a warm start,
kept weights, several seeds as one ensemble), every measurement and study record, and every benchmark that has a
small form, each run in the profile's rehearsal (``profiles.rehearsal_profile``: two one-step epochs and one test
batch at a small batch, on the device at hand, on CIFAR-10's copy where there is one; on a CPU each model with
two blocks where the run sets no depth: ``profiles.REHEARSAL_CPU_DEPTH``) through the batch's own job
path (``batch.run_job``: all of them as one job, ``RehearsalJob``, which the local executor runs as one submitit
job), into a scratch results store: nothing enters ``results/``. Then what a lent machine would send back is packed
and unpacked (``batch.pack``), and each file compared. It ends with a table (ok, skipped with the reason, failed
with the error) and fails where anything failed, so that a GPU window is not spent finding a broken path.

Given the batch's own selection (``--only``, ``--chapter``, ``--budget``, ``--order``), it rehearses only what that
batch would start: the models and records of the jobs it reaches within the budget (``reachable``). A lent GPU's
call then spends its minutes on a rehearsal of this call's work, not of the whole plan (measured on an H200: the
whole budget plan's rehearsal took 403 s of a 575 s call).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


from . import batch as runner
from . import plan as planning
from ..runs.make import can_ensemble_run
from .entries import BenchEntry, TrainEntry
from ..errors import one_line
from ..files import remove_leftovers, temp_prefix
from .jobs import Job, RecordJob, TrainJob
from ..runs.profiles import REHEARSAL, REHEARSAL_CPU_DEPTH, get_profile, gpu_profile
from ..results import ResultsStore
from ..results.pack import unpack
from ..runs.spec import Keep

#: the training protocols a rehearsal runs at least once: name -> whether a run's config uses it
PROTOCOLS = {
    "DualOpT": lambda c: c["optimizer"] == "dualopt",
    "SGD alone to patience": lambda c: c.get("stop") == "patience",
    "RandAugment": lambda c: bool(c["randaugment"]),
    "post-training": lambda c: c["post_train_epochs"] > 0,
    "flips and rotations": lambda c: bool(c.get("augment")),
    "cosine schedule": lambda c: c.get("schedule") == "cosine",
    "gradient norms": lambda c: bool(c.get("grad_norm_every")),
    "fixed protocol": lambda c: c["protocol"] == "fixed",
    "warm start": lambda c: bool(c.get("init_from")),
}


def rehearsal_jobs(entries):
    """``(jobs, skipped)``: the jobs of a rehearsal, chosen from the rehearsal profile's plan ``entries`` (in
    priority order): each model's first run on data that is here, the first run of each of ``PROTOCOLS`` and one
    that keeps its weights, one ensemble of two seeds, the runs whose weights a measurement reads, every
    measurement and every benchmark with a rehearsal command; ``skipped``: ``[(label, why)]`` of what cannot be
    rehearsed here."""
    runnable = [e for e in entries if isinstance(e, TrainEntry) and not e.blocked]
    chosen, seen_models, skipped = {}, set(), []
    for e in runnable:
        if e.model not in seen_models:
            seen_models.add(e.model)
            chosen.setdefault(e.key, e)
    for uses in PROTOCOLS.values():
        if not any(uses(e.config) for e in chosen.values()):
            first = next((e for e in runnable if uses(e.config)), None)
            if first is not None:
                chosen.setdefault(first.key, first)
    if not any(e.keep_weights != Keep.NONE for e in chosen.values()):
        first = next((e for e in runnable if e.keep_weights != Keep.NONE), None)
        if first is not None:
            chosen.setdefault(first.key, first)
    records = [e for e in entries if not isinstance(e, TrainEntry)]
    needed = set().union(*(e.needs for e in records))
    for e in runnable:
        if e.key in needed:
            chosen.setdefault(e.key, e)
    runs = sorted(chosen.values(), key=lambda e: e.priority)
    jobs = [TrainJob([e]) for e in runs]
    pair = ensemble_pair(runnable, chosen)
    if pair:
        jobs.append(TrainJob(pair))
    for e in records:
        if isinstance(e, BenchEntry) and not e.command:
            skipped.append((f"bench {e.name}", "not rehearsed: it compiles for minutes; its own run checks it"))
        else:
            jobs.append(RecordJob(e))
    skipped += [(TrainJob([e]).label, e.blocked) for e in entries if isinstance(e, TrainEntry) and e.blocked
                and e.model not in seen_models]
    return jobs, skipped


def ensemble_pair(runnable, chosen):
    """Two seeds of one configuration that trains exactly as an ensemble, not already rehearsed alone: of the
    configuration with the smallest checkpoint (``plan.checkpoint_mb``: its parameters, counted when the plan was
    built; the rehearsal profile's GPU minutes are all 0 on a CPU, which chose two ViT-B/16 runs at 224 px), since
    the ensemble's code path is one for every model."""
    by_config = {}
    for e in runnable:
        if e.key in chosen or not can_ensemble_run(e.config)[0]:
            continue
        ident = (e.model, e.dataset, tuple(sorted((k, str(v)) for k, v in e.settings.items())))
        by_config.setdefault(ident, []).append(e)
    pairs = [members[:2] for members in by_config.values() if len(members) >= 2]
    return min(pairs, key=lambda pair: planning.checkpoint_mb(pair[0].config), default=None)


@dataclass
class RehearsalJob(Job):
    """A rehearsal's ``jobs`` as one job: each run in turn in this process, into the store (on the data here:
    ``download`` and ``executor`` unused); ``{"outcome": "done", "note": "", "rows": [(label, "ok" | "failed",
    seconds, note)]}``, a failure being one row while the rest go on."""
    jobs: list
    label = "dress rehearsal"

    @property
    def entries(self):
        return [e for job in self.jobs for e in job.entries]

    def run(self, store, deadline=None, download=False, executor=None):
        rows = []
        for job in self.jobs:
            t0 = time.time()
            try:
                note = job.run(store).get("note", "")
                rows.append((job.label, "ok", time.time() - t0, note))
            except Exception as e:  # noqa: BLE001  (a rehearsal reports every failure)
                rows.append((job.label, "failed", time.time() - t0, one_line(e)))
        return {"outcome": "done", "note": "", "rows": rows}


#: a rehearsal's store goes to memory (/dev/shm) where this much is free there: its checkpoints are rewritten every
#: epoch and thrown away (measured on the project's 2-core machine: the B/16 runs spent 31 of their 47 s writing them)
MEMORY_FOLDER_GIB = 8


def memory_folder():
    """``/dev/shm`` where it is a folder with ``MEMORY_FOLDER_GIB`` free, else None (the system's temporary folder)."""
    try:
        return "/dev/shm" if shutil.disk_usage("/dev/shm").free >= MEMORY_FOLDER_GIB * 2**30 else None
    except OSError:
        return None


@contextlib.contextmanager
def scratch_store():
    """A temporary results store for the rehearsal, named by ``VIXNB_RESULTS`` while it runs (its jobs' processes
    inherit it); the variable is restored after. Named with this process's PID (``files.temp_prefix``): the next
    rehearsal removes the store of one that was killed."""
    before = os.environ.get("VIXNB_RESULTS")
    folder = memory_folder()
    remove_leftovers(folder or tempfile.gettempdir(), name="vixnb-rehearsal")  # a killed rehearsal's store
    with tempfile.TemporaryDirectory(prefix=temp_prefix("vixnb-rehearsal"), dir=folder) as root:
        os.environ["VIXNB_RESULTS"] = root
        try:
            yield ResultsStore(root)
        finally:
            if before is None:
                os.environ.pop("VIXNB_RESULTS", None)
            else:
                os.environ["VIXNB_RESULTS"] = before


def reachable(profile, *, budget=None, only=None, chapter=None, order="chapters", ensemble="auto",
              pack_limit_mb=None):
    """The names (models of training runs, names of records) of the jobs that ``vixnb batch --profile profile``
    with these options would start, in its order: with ``budget`` (seconds), those it reaches the way
    ``batch.run_local`` does, each job started only where its least time fits in what is left, which it then
    spends (a training run at most what is left: it pauses at an epoch boundary). None: no selection (the whole
    plan)."""
    if budget is None and not only and not chapter:
        return None
    jobs = _batch_jobs(profile, only=only, chapter=chapter, order=order, ensemble=ensemble)
    names, left = set(), budget if budget is not None else float("inf")
    for job in jobs:
        if runner.lacks_data(job):  # the batch's device need not be here; its data must be
            continue
        need = runner.least_seconds(job, pack_limit_mb)
        if need > left:
            continue
        left -= min(runner.estimated_seconds(job), left) if job.trains else need
        names.update(_name(e) for e in job.entries)
    return names


def _batch_jobs(profile, *, only, chapter, order, ensemble):
    """The jobs ``vixnb batch --profile profile`` with these options makes on a GPU (``batch.for_device``: not
    the records a CPU makes, which ``--device cpu`` makes)."""
    jobs = runner.jobs_from_plan(planning.build(profile, only=only, chapter=chapter, machine=True, order=order),
                                 ensemble=ensemble)
    return runner.for_device(jobs, "cuda") if gpu_profile(profile) else jobs


def why_nothing(profile, *, budget=None, only=None, chapter=None, order="chapters", ensemble="auto",
                pack_limit_mb=None):
    """Why ``reachable`` found nothing for these options, in words with the fix."""
    jobs = _batch_jobs(profile, only=only, chapter=chapter, order=order, ensemble=ensemble)
    if not jobs:
        return "no entry of the plan is left to run with these --only/--chapter; check the names with `vixnb plan`"
    if all(runner.lacks_data(job) for job in jobs):
        return "no copy of their data is here; set VIXNB_DATA to the folder that holds it"
    if budget is None:
        return "the rehearsal's plan holds none of the jobs selected; check the names with `vixnb plan`"
    least = min(runner.least_seconds(job, pack_limit_mb) for job in jobs if not runner.lacks_data(job))
    return f"the cheapest job needs {least:.0f} s, more than --budget {budget:.0f}; give a larger --budget"


def selected(entries, names):
    """The rehearsal plan's ``entries`` of the models and records ``names``, with the runs whose weights their
    measurements read."""
    keep = {id(e) for e in entries if _name(e) in names}
    needs = set().union(*(e.needs for e in entries if id(e) in keep))
    return [e for e in entries if id(e) in keep or (isinstance(e, TrainEntry) and e.key in needs)]


def _name(entry):
    """What ``reachable`` names of a plan entry: a training run's model, a record's name."""
    return entry.model if isinstance(entry, TrainEntry) else entry.name


def rehearse(profile, *, executor="local", folder=None, progress=print, **selection):
    """The dress rehearsal of ``profile`` (see the module's docstring): ``(rows, seconds)``, ``rows`` being
    ``[(what, outcome, seconds, note)]`` with outcome ``ok``, ``skipped`` or ``failed``. ``selection``: the
    batch's options (``budget``, ``only``, ``chapter``, ``order``, ``ensemble``, ``pack_limit_mb``); with any, only
    what that batch would start (``reachable``)."""
    if get_profile(profile).get("rehearsal"):
        raise ValueError(f"profile={profile!r}: name the profile to rehearse (budget), not its rehearsal")
    name, start = f"{profile}{REHEARSAL}", time.time()
    names = reachable(profile, **selection)
    with scratch_store() as store:
        entries = planning.build(name, store=store, machine=True, order="rows")
        if names is not None:
            entries = selected(entries, names)
            if not entries:
                progress("vixnb batch --rehearse: the batch with these options would start nothing "
                         f"({why_nothing(profile, **selection)}); nothing to rehearse")
                return [], time.time() - start
        jobs, skipped = rehearsal_jobs(entries)
        what = "the" if names is None else "what this batch would start of the"
        device = get_profile(name)["device"]
        blocks = f" (each model with {REHEARSAL_CPU_DEPTH} blocks where neither the profile nor the run sets " \
            "its depth)" if device == "cpu" else ""
        progress(f"vixnb batch --rehearse: {len(jobs)} jobs, {what} {profile} plan ({len(entries)} entries) on "
                 f"{device}{blocks}, into a scratch store")
        whole, running = RehearsalJob(jobs), {}
        try:
            with runner.stopped_by_signals():  # SIGTERM too: the job is stopped and the scratch store removed
                result = runner.execute(whole, None, None, executor, folder, running) if executor != "inline" \
                    else runner.run_job(whole, store=str(store.root))
            rows = [tuple(r) for r in result["rows"]]
        except KeyboardInterrupt:
            runner.stop_jobs(running)
            raise
        except Exception as e:  # noqa: BLE001  (the executor itself failed: every job with it)
            rows = [(j.label, "failed", 0.0, f"the executor failed: {one_line(e)}") for j in jobs]
        rows += [(what, "skipped", 0.0, why) for what, why in skipped]
        rows.append(_pack_round_trip(store, name, start))
    return rows, time.time() - start


def _pack_round_trip(store, profile, since):
    """``(what, outcome, seconds, note)`` of packing what the rehearsal wrote (``batch.pack``) and unpacking it
    elsewhere: every packed file back, byte for byte."""
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory() as out:
            parts, packed, left = runner.pack(Path(out) / "back.tar.gz", profile, since=since)
            unpack(parts, root=Path(out) / "unpacked" / "results")
            differ = [n for n in packed if n.startswith("results/") and  # results/<path in the store>
                      (Path(out) / "unpacked" / n).read_bytes() != (store.root / n[len("results/"):]).read_bytes()]
            if differ or not packed:
                return ("pack and unpack", "failed", time.time() - t0,
                        f"{len(differ)} of {len(packed)} files differ after the round trip" if packed
                        else "nothing packed")
            note = f"{len(packed)} files" + (f"; left out: {'; '.join(left)}" if left else "")
            return ("pack and unpack", "ok", time.time() - t0, note)
    except Exception as e:  # noqa: BLE001
        return ("pack and unpack", "failed", time.time() - t0, one_line(e))


def rehearsal_table(rows, seconds):
    """The rehearsal's outcome as plain text: one line per job, then the counts and the time it took."""
    widths = [max(len(r[0]) for r in rows + [("what",)]), max(len(r[1]) for r in rows + [("", "outcome")])]
    lines = [f"{'what':<{widths[0]}}  {'outcome':<{widths[1]}}  {'s':>6}  note"]
    lines += [f"{w:<{widths[0]}}  {o:<{widths[1]}}  {s:>6.1f}  {n}" for w, o, s, n in rows]
    counts = {o: sum(r[1] == o for r in rows) for o in ("ok", "skipped", "failed")}
    lines.append(f"\n{counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed, in {seconds:.0f} s")
    return "\n".join(lines)
