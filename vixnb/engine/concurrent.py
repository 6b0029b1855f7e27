"""Several training runs at once in one process (``train_concurrently``), each exactly its solo run.

Each run keeps its own model, optimizer, step (graphed on a GPU: ``steps.TrainStep``), data order and augmentation
generators, checkpoint and deadline, and the global CPU and CUDA random states it would have alone (dropout,
RandAugment draw from those): the driver swaps them in before it resumes a run and out after. The runs advance one
training step each in turn, each on its own CUDA stream, so that a GPU overlaps the kernels of small runs that
alone leave it idle. Unlike a vmapped ensemble (``vixnb.engine.ensemble``) nothing is shared between the runs: dropout,
DualOpT and different models and settings are all allowed. On a CPU the runs simply interleave (the tests check
that each gives bitwise its solo history).

For a batch: ``train_concurrently([{"config": c, "checkpoint": store.checkpoint_path(c)}, ...], deadline=...)``
gives one outcome per job, in order: the result dict ``train`` would give, or the exception the run ended with
(``TrainingPaused``, a ``FloatingPointError``, ...), so one run's failure leaves the others running; store each
result as ``runs.make.run`` does. ``sync_checked`` trains one run with ``torch.cuda.set_sync_debug_mode("error")`` over
every epoch's steps after the first (the GPU check of "no host synchronisation inside an epoch").
"""
import contextlib

import torch

from .train import EPOCH_START, STEPS_DONE, training_device, training_steps


def train_concurrently(jobs, *, device=None, graphs=None, progress=False):
    """Train ``jobs`` (each a dict of ``train``'s keyword arguments, with ``config``) at once, one step of each in
    turn, each on its own CUDA stream; returns one outcome per job (a result dict, or the exception its run ended
    with). A ``KeyboardInterrupt`` stops them all. The caller's random states are left as they were."""
    jobs = [dict(job) for job in jobs]
    if not jobs:
        return []
    device = training_device(jobs[0]["config"], device)
    cuda = device.type == "cuda"
    runs = []
    for job in jobs:
        config = job.pop("config")
        options = {**dict(progress=progress, checkpoint=None, download=False, deadline=None, with_weights=False,
                          init_state=None, init_sha256=None, graphs=graphs), **job}
        runs.append({"run": training_steps([config], device=device, interleave=True, concurrent_runs=len(jobs),
                                           **options),
                     "stream": torch.cuda.Stream(device) if cuda else None, "rng": None, "done": False})
    outcomes = [None] * len(runs)
    with torch.random.fork_rng(devices=[device] if cuda else []), _closing_on_interrupt(runs):
        while not all(r["done"] for r in runs):
            for i, r in enumerate(runs):
                if r["done"]:
                    continue
                if r["rng"] is not None:
                    torch.random.set_rng_state(r["rng"][0])
                    if cuda:
                        torch.cuda.set_rng_state(r["rng"][1], device)
                try:
                    with torch.cuda.stream(r["stream"]) if cuda else _nothing():
                        next(r["run"])
                except StopIteration as done:
                    outcomes[i], r["done"] = done.value[0], True
                except Exception as error:  # this run's end; the others go on
                    outcomes[i], r["done"] = error, True
                r["rng"] = (torch.random.get_rng_state(), torch.cuda.get_rng_state(device) if cuda else None)
        if cuda:
            torch.cuda.synchronize(device)
    return outcomes


@contextlib.contextmanager
def _closing_on_interrupt(runs):
    """A ``KeyboardInterrupt`` (Ctrl-C, a batch's SIGTERM) anywhere in the loop closes every run, each with the
    checkpoint of its last whole epoch kept, and goes on up."""
    try:
        yield
    except KeyboardInterrupt:
        for r in runs:
            r["run"].close()
        raise


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def sync_checked(config, *, device=None, graphs=None):
    """Train ``config`` alone with ``torch.cuda.set_sync_debug_mode("error")`` over every epoch after the first
    (from the epoch's start to its last step; the first epoch warms up and captures the graph), so that a host
    synchronisation inside those epochs raises; returns the result. The caller's mode is restored afterwards. On a
    CPU it trains the run unchecked."""
    device = training_device(config, device)
    cuda = device.type == "cuda"
    run = training_steps([config], progress=False, device=device, checkpoint=None, download=False, deadline=None,
               with_weights=False, init_state=None, init_sha256=None, graphs=graphs, interleave=True)
    before, started = torch.cuda.get_sync_debug_mode() if cuda else 0, 0
    with torch.random.fork_rng(devices=[device] if cuda else []):
        try:
            while True:
                try:
                    what = next(run)
                except StopIteration as done:
                    return done.value[0]
                started += what == EPOCH_START
                if cuda:
                    checking = started >= 2 and what != STEPS_DONE
                    torch.cuda.set_sync_debug_mode("error" if checking else before)
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode(before)
