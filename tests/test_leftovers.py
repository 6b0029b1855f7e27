"""What an interrupted command leaves (issue 57, class 7): the temporary files and folders a process makes are named
with its PID (``files.temp_prefix``), and the next command that writes there removes those of a process that has
ended, naming each; SIGTERM ends every long command as Ctrl-C does (one line, exit 130, nothing left running or
half-written); a local job whose batch was killed stops itself."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

from vixnb.files import LEFTOVER_AGE_S, leftovers, process_alive
from vixnb.results import save_checkpoint
from vixnb.results.pack import unpack

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def processes():
    """``(dead PID, live PID)``: a process that has ended and one that runs (ended by its PID after the test)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield ended.pid, running.pid
    finally:
        running.kill()
        running.wait()


def _left(path, *, folder=False):
    """``path`` as a leftover of some age (older than ``LEFTOVER_AGE_S``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        path.mkdir()
        (path / "0").write_bytes(b"x" * 1000)
    else:
        path.write_bytes(b"half a file")
    old = time.time() - LEFTOVER_AGE_S - 5
    os.utime(path, (old, old))
    return path


def test_what_a_killed_process_left_is_removed_by_the_next_command_that_writes_there(isolated_results, processes,
                                                                                    capsys, tmp_path, monkeypatch):
    """A checkpoint's temporary file after a kill during its write, an unpack's staging folder, a rehearsal's
    scratch store: each named with the PID of the process that made it. The next write in that folder, the next
    unpack, the next rehearsal remove those of an ended process, and name each; a running process's stay."""
    from vixnb.plan import rehearsal

    dead, alive = processes
    checkpoints = isolated_results / "budget" / ".checkpoints"
    stem = "vit-cifar10-seed0-00000000000000aa"
    killed = _left(checkpoints / f".{stem}.pt.pid{dead}-k1ll3d00.tmp")
    writing = _left(checkpoints / f".{stem}.pt.pid{alive}-wr1t1ng0.tmp")
    fresh = checkpoints / f".{stem}.pt.pid{dead}-fr35h000.tmp"  # too young to be sure: left
    fresh.write_bytes(b"")
    staging = _left(isolated_results / f".unpack.pid{dead}-st4g1ng0", folder=True)
    scratch = _left(tmp_path / "memory" / f".vixnb-rehearsal.pid{dead}-scr4tch0", folder=True)
    assert set(leftovers(checkpoints)) == {killed}

    save_checkpoint(checkpoints / f"{stem}.pt", {"model": torch.zeros(3)})
    assert not killed.exists() and writing.exists() and fresh.exists()
    unpack([], root=isolated_results)
    assert not staging.exists()
    monkeypatch.setattr(rehearsal, "memory_folder", lambda: str(tmp_path / "memory"))
    with rehearsal.scratch_store() as store:
        assert store.root.parent == tmp_path / "memory"
        assert store.root.name.startswith(f".vixnb-rehearsal.pid{os.getpid()}-")
    assert not scratch.exists() and not list((tmp_path / "memory").iterdir())
    err = capsys.readouterr().err
    for gone in (killed, staging, scratch):
        assert err.count(f"removed {gone}, left by process {dead}, which ended before it finished") == 1


def _notebook(path, seconds):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell('profile = "smoke"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(f"import time\ntime.sleep({seconds})")]
    nbformat.write(nb, path)
    return path


def test_sigterm_ends_vixnb_run_as_ctrl_c_does(tmp_path):
    """`vixnb run` and `vixnb book` handled SIGTERM as they did not SIGINT: no message, and a `.running` copy left
    beside the executed one. Every command now ends on SIGTERM as on Ctrl-C: one line, exit 130, the kernel
    stopped and the unfinished copy removed."""
    source = _notebook(tmp_path / "sleeps.ipynb", 60)
    out = tmp_path / "out" / "sleeps.ipynb"
    run = subprocess.Popen([sys.executable, "-m", "vixnb", "run", str(source), "-o", str(out)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    from vixnb.plan.stopping import descendants

    try:
        deadline, kernels = time.time() + 60, []
        while time.time() < deadline and not (kernels and list(out.parent.glob(".sleeps.pid*.running.ipynb"))):
            time.sleep(0.2)
            kernels = descendants(run.pid)
        assert kernels, "no kernel started"
        time.sleep(1.5)  # the sleeping cell runs
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 130
    # the one line is the last; the kernel, stopped in its cell, may log its own teardown before it
    assert err.strip().splitlines()[-1] == "vixnb run: stopped by signal SIGTERM"
    assert f'File "{ROOT / "vixnb"}' not in err  # no traceback of vixnb's
    assert list(out.parent.iterdir()) == []  # no executed copy, no half-written one
    end = time.time() + 15
    while time.time() < end and any(process_alive(pid) for pid in kernels):
        time.sleep(0.2)
    assert not any(process_alive(pid) for pid in kernels), "a kernel outlived its run"


def test_a_local_job_whose_batch_was_killed_stops_itself(tmp_path):
    """A rehearsal's job still trained 90 s after its batch was killed. A local job knows its batch's PID (the
    variable ``VIXNB_BATCH_PID`` its executor sets) and stops itself, as on SIGTERM, once the batch has ended."""
    batch = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    code = ("import signal, sys, time\n"
            "from vixnb.plan.stopping import stop_when_orphaned\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
            "assert stop_when_orphaned(0.1) is not None\n"
            "print('watching', flush=True)\n"
            "time.sleep(60)\n")
    job = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env={**os.environ, "VIXNB_BATCH_PID": str(batch.pid)}, text=True)
    try:
        assert job.stdout.readline().strip() == "watching"
        time.sleep(0.3)
        assert job.poll() is None  # its batch runs: it goes on
        batch.kill()  # SIGKILL: the batch cannot stop its jobs
        batch.wait()
        _, err = job.communicate(timeout=15)
    finally:
        for p in (batch, job):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert job.returncode == 7 and f"the batch that started this job (PID {batch.pid}) has ended" in err
