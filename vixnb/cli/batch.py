"""``vixnb batch``: the plan's missing entries run in priority order (here, on Slurm, or rehearsed), in the engine
modes a probe chose; it ends with a status table. Like ``commands``, each function imports what it needs when it
runs, so that building the parser imports none of it."""
import time
from pathlib import Path

from ..errors import StoreError
from .commands import name_unusable_files


def _check_runnable(jobs, args, runner):
    """Before any job starts: the store's profile folder can be written (else a ``StoreError`` naming it, as
    ``vixnb train`` says), and some job can run on this machine (else an error saying why none can, not a table
    of skipped jobs and exit 0)."""

    from ..results import ResultsStore
    from ..results.store import writable_folder

    writable_folder(ResultsStore().root / args.profile)
    reasons = [runner.cannot_run_here(job, args.executor) for job in jobs]
    if all(reasons):
        shown = "; ".join(dict.fromkeys(reasons))
        raise RuntimeError(f"none of the {len(jobs)} jobs of profile {args.profile!r} can run on this machine "
                           f"({shown}); run the batch where they can (a GPU machine, --executor slurm), or add "
                           "--dry-run to see what it would run")


def batch(args):
    """``vixnb batch``: run the plan's missing entries in priority order; ends with a status table."""
    from ..validate import writable_file

    started = time.time()  # the budget counts from here: building the plan is part of it
    if args.pack and not args.dry_run:  # an archive that cannot be written is found now, not after the jobs ran
        writable_file(args.pack, "--pack")
    from ..plan import batch as runner
    from ..plan import plan as planning
    from ..results import ResultsStore

    if args.dry_run:  # writes nothing, so waits for no other batch
        return _batch(args, runner, planning, started)
    with ResultsStore().batch_lock():  # a second batch on this store is refused, naming the first one's PID
        return _batch(args, runner, planning, started)


def _batch(args, runner, planning, started):
    """``vixnb batch``; with ``--device cpu`` no GPU is visible to it or its jobs while it runs (the caller's
    ``CUDA_VISIBLE_DEVICES`` restored after: ``main`` may run in a caller's process)."""
    if args.device != "cpu" or args.rehearse:
        return _batch_here(args, runner, planning, started)
    import os

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # what a CPU makes as a GPU would, on this machine's CPU
    try:
        return _batch_here(args, runner, planning, started)
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def _batch_here(args, runner, planning, started):
    import torch

    from ..runs.profiles import gpu_profile

    if args.rehearse:
        from ..plan.rehearsal import rehearsal_table, rehearse

        rows, seconds = rehearse(args.profile, executor=args.executor, folder=args.folder,
                                 progress=lambda line: print(line, flush=True), budget=args.budget, only=args.only,
                                 chapter=args.chapter, order=args.order, ensemble=args.ensemble,
                                 pack_limit_mb=args.pack_limit_mb if args.pack else None)
        print(rehearsal_table(rows, seconds))
        failed = [r[0] for r in rows if r[1] == "failed"]
        if failed:
            raise RuntimeError(f"the rehearsal failed in {len(failed)} of {len(rows)}: {', '.join(failed)}")
        return rows
    entries = planning.build(args.profile, only=args.only, chapter=args.chapter, machine=True, order=args.order)
    name_unusable_files(args.profile)
    jobs = runner.jobs_from_plan(entries, ensemble=args.ensemble, max_jobs=args.max_jobs, download=args.download)
    if args.device == "cpu":  # what a CPU makes as a GPU would (``_batch`` hides the GPU)
        jobs = runner.for_device(jobs, "cpu")
        if not jobs and not args.dry_run:
            print(f"vixnb batch --device cpu: nothing left in profile {args.profile!r} that a CPU makes")
    elif args.executor != "slurm" and gpu_profile(args.profile) and torch.cuda.is_available():
        jobs = runner.for_device(jobs, "cuda")  # GPU time only for what needs one
    if jobs and not args.dry_run and args.executor != "slurm":
        _check_runnable(jobs, args, runner)
    if not jobs:
        print(f"vixnb batch: nothing left to run in profile {args.profile!r}")
    elif args.executor == "slurm":
        parameters = runner.submit_slurm(jobs, folder=args.folder, partition=args.partition, time_min=args.time_min,
                                         gpus_per_job=args.gpus_per_job, max_parallel=args.max_parallel,
                                         dry_run=args.dry_run)
        print("slurm job array: " + ", ".join(f"{k}={v}" for k, v in parameters.items()) +
              f", {len(jobs)} jobs" + (" (dry run: nothing submitted)" if args.dry_run else ""))
    elif args.dry_run:
        for job in jobs:
            job.outcome, job.note = "would run", f"~{job.est_minutes:.1f} GPU min: " + \
                "; ".join(e.command for e in job.entries)
    else:
        try:
            choice = _engine_choice(args, runner, jobs)
            jobs[:] = runner.engine_modes(jobs, choice)  # the jobs as they run: the table reports these
            budget = max(args.budget - (time.time() - started), 1) if args.budget else None
            print(runner.stamp("batch"), flush=True)
            runner.run_local(jobs, budget=budget, executor=args.executor, folder=args.folder,
                             progress=lambda line: print(runner.stamp(line), flush=True),
                             pack_limit_mb=args.pack_limit_mb if args.pack else None, together=args.together,
                             choice=choice)
        finally:  # stopped too: the table says what each job reached, and what was made is packed
            _batch_end(args, runner, jobs, started)
        return jobs
    _batch_end(args, runner, jobs, started)
    return jobs


def _engine_choice(args, runner, jobs):
    """The engine modes the batch trains in: the probe's, run now (``--probe FILE``: ``batch.probe_engine``, its table
    printed and written to FILE), or an earlier probe's (``--engine-choice FILE``); None (the engine's defaults)."""
    if args.probe:
        print(runner.stamp("engine probe"), flush=True)
        return runner.probe_engine(jobs, args.probe, steps=args.probe_steps,
                                   progress=lambda line: print(runner.stamp(line), flush=True))
    if args.engine_choice:  # not a stored result: read as JSON only, then checked for the probe's choice
        from ..results import read_json

        try:
            chosen = read_json(Path(args.engine_choice), check=False).get("chosen")
        except (StoreError, AttributeError):
            chosen = None
        if not isinstance(chosen, dict) or not {"single", "group"} <= set(chosen):
            raise ValueError(f"--engine-choice {args.engine_choice}: not a probe's record (no 'chosen' with 'single' "
                             "and 'group'); give the engine_choice.json a `vixnb batch --probe` wrote")
        return chosen
    return None


def _batch_end(args, runner, jobs, started):
    if jobs:
        print(runner.status_table(jobs))
        if args.budget and not args.dry_run and args.executor != "slurm":
            since = args.clock_from if args.clock_from is not None else started
            print(runner.trained_line(jobs, time.time() - since))
    if args.pack and args.dry_run:
        print(f"vixnb batch --dry-run: nothing written (--pack {args.pack} would be written after a batch)")
    elif args.pack:
        print(runner.stamp("pack"), flush=True)
        parts, packed, left = runner.pack(args.pack, args.profile, limit_mb=args.pack_total_mb, jobs=jobs,
                                          since=args.pack_since if args.pack_since is not None else started - 1)
        print(f"packed {len(packed)} files into {', '.join(map(str, parts))}" +
              (f"; left out: {'; '.join(left)}" if left else ""))
    failed = [j for j in jobs if j.outcome == "failed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(jobs)} jobs failed: {', '.join(j.label for j in failed)}")
