"""Stopping a batch: SIGTERM (``timeout``, a batch system) and SIGHUP (its terminal closed) stop it as Ctrl-C does,
and the batch stops the job processes it started (``vixnb.plan.batch.run_local``): each is signalled, given
``STOP_GRACE_S`` to end (a training run keeps its last whole epoch's checkpoint), then killed with what it started.
Nothing keeps running after it. A local job runs in a session of its own (``local_executor``), so that a terminal's
Ctrl-C reaches the batch alone and the batch stops its jobs, each once."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import errors as _errors
from ..files import process_alive


class BatchStopped(KeyboardInterrupt):
    """``vixnb batch`` was stopped (SIGTERM, SIGINT, ``timeout``): its jobs were stopped, each training run with
    the checkpoint of its last whole epoch kept; the next batch resumes them."""


#: how long a stopped batch waits for its jobs to end after signalling them (an interrupted run keeps the
#: checkpoint of its last whole epoch) before it kills what is left: within 30 s of the signal nothing runs
STOP_GRACE_S = 20


#: the signals that stop a batch as SIGINT does, and the handlers that make them (``errors.stopped_by_signals``, every
#: command's): ``timeout`` and a batch system send SIGTERM, a closed terminal SIGHUP (its jobs, in sessions of their
#: own, would not get it)
STOP_SIGNALS, stopped_by_signals = _errors.STOP_SIGNALS, _errors.stopped_by_signals


def local_executor(folder, **kwargs):
    """submitit's ``LocalExecutor`` (``folder``, ``kwargs``) whose job controllers start in sessions of their own.
    A terminal's Ctrl-C (SIGINT to its foreground process group) then reaches the batch alone, which stops each job
    itself (``stop_jobs``: SIGTERM to the controller, which passes it on to the job), rather than each controller as
    well, which printed its own KeyboardInterrupt traceback and killed its job a second later."""
    return _own_session_executor()(folder, **kwargs)


@functools.cache
def _own_session_executor():
    import submitit  # optional dependency: the inline executor runs without it
    from submitit.local.local import LocalJob

    class OwnSessionExecutor(submitit.LocalExecutor):
        def _submit_command(self, command):
            # submitit's own (``submitit.local.local.start_controller``, 1.5), with start_new_session; one task
            # and no setup shell, whose process would be the job's id and would not pass SIGTERM on
            p = self.parameters
            if p.get("setup") or p.get("tasks_per_node", 1) != 1:
                raise ValueError("local_executor: a job runs one task and no setup commands")
            gpus, visible = p.get("gpus_per_node", 0), p.get("visible_gpus", ())
            env = {**os.environ, "SUBMITIT_LOCAL_NTASKS": "1", "SUBMITIT_LOCAL_COMMAND": command,
                   "SUBMITIT_LOCAL_TIMEOUT_S": str(int(60 * p.get("timeout_min", 2.0))),
                   "SUBMITIT_LOCAL_SIGNAL_DELAY_S": str(int(p.get("signal_delay_s", 30))),
                   "SUBMITIT_LOCAL_NODEID": "0", "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
                   "SUBMITIT_STDERR_TO_STDOUT": "1" if p.get("stderr_to_stdout") else "", "SUBMITIT_EXECUTOR": "local",
                   "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus) if visible == () else visible[:gpus])),
                   "SUBMITIT_LOCAL_WITH_SHELL": "", BATCH_PID: str(os.getpid())}
            process = subprocess.Popen([sys.executable, "-m", "submitit.local._local", str(self.folder)], env=env,
                                       start_new_session=True)
            return LocalJob(folder=self.folder, job_id=str(process.pid), process=process, tasks=[0])

    return OwnSessionExecutor


#: the variable through which a local job learns its batch's PID (``local_executor``), to end itself when the batch
#: has ended without stopping it (``stop_when_orphaned``)
BATCH_PID = "VIXNB_BATCH_PID"
#: how often a local job looks whether its batch still runs
ORPHAN_POLL_S = 1.0


def stop_when_orphaned(poll_s=ORPHAN_POLL_S):
    """In a local job's process: a daemon thread that stops the job (SIGTERM to itself, which stops it as Ctrl-C
    does: a training run keeps its last whole epoch's checkpoint) once the batch that started it (``BATCH_PID``) has
    ended without stopping it: killed (SIGKILL, out of memory), it could not stop its jobs, which would train on
    for nothing, holding the GPU and a scratch store. Returns the thread, or None outside a batch's job."""
    batch = os.environ.get(BATCH_PID, "")
    if not batch.isdigit() or int(batch) == os.getpid():
        return None

    def watch():
        while process_alive(int(batch)):
            time.sleep(poll_s)
        print(f"vixnb: the batch that started this job (PID {batch}) has ended; stopping the job", file=sys.stderr,
              flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="vixnb-batch-watch", daemon=True)
    thread.start()
    return thread


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
            for pid in descendants(h._process.pid) + [h._process.pid]:
                _signal(pid, signal.SIGKILL)
            h._process.wait()


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(pid):
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
