"""Stopping a batch: SIGTERM (``timeout``, a batch system) stops it as Ctrl-C does, and the batch stops the job
processes it started (``vixnb.batch.run_local``): each is signalled, given ``STOP_GRACE_S`` to end (a training run
keeps its last whole epoch's checkpoint), then killed with what it started. Nothing keeps running after it."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path


class BatchStopped(KeyboardInterrupt):
    """``vixnb batch`` was stopped (SIGTERM, SIGINT, ``timeout``): its jobs were stopped, each training run with
    the checkpoint of its last whole epoch kept; the next batch resumes them."""


#: how long a stopped batch waits for its jobs to end after signalling them (an interrupted run keeps the
#: checkpoint of its last whole epoch) before it kills what is left: within 30 s of the signal nothing runs
STOP_GRACE_S = 20


@contextlib.contextmanager
def stopped_by_signals():
    """SIGTERM raises ``KeyboardInterrupt`` in the main thread while this holds, as SIGINT does (``timeout`` and
    a batch system stop a batch that way); the handler before is restored after. Elsewhere than the main
    thread nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def stop_jobs(running):
    """Signal every running submitit job (``running``: job label -> handle) to stop, wait up to ``STOP_GRACE_S``,
    then kill what is left, the job's own processes first."""
    handles = list(running.values())
    for h in handles:
        _signal(h._process.pid, signal.SIGTERM)  # the controller passes it on to the job, which stops there
    end = time.time() + STOP_GRACE_S
    while time.time() < end and any(h._process.poll() is None for h in handles):
        time.sleep(0.2)
    for h in handles:
        if h._process.poll() is None:
            for pid in _descendants(h._process.pid) + [h._process.pid]:
                _signal(pid, signal.SIGKILL)
            h._process.wait()


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid):
    """The process ids below ``pid`` (children first), read from ``/proc`` (Linux); [] elsewhere."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [int(c) for t in Path(f"/proc/{parent}/task").iterdir()
                        for c in (t / "children").read_text().split()]
        except OSError:
            children = []
        out += children
        todo += children
    return out
