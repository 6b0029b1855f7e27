"""A lent GPU's call: stopping a batch stops its jobs, the GPU check, the `trained N s of M s` line, runs whose
checkpoint cannot travel, and the engine's version compared rather than keyed (issue 36)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from vixnb.plan import batch

from vixnb.plan import plan

from vixnb.runs import spec as runspec
import importlib
provenance_module = importlib.import_module("vixnb.results.provenance")  # the module (the package exports its function)
from vixnb.plan.entries import BenchEntry
from vixnb.plan.jobs import RecordJob
from vixnb.record_kinds import Request
from vixnb.results import ResultsStore
from vixnb.runs.policy import stale_reason


def _processes_naming(text):
    """Process ids whose command line names ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def _as_from_a_terminal():
    """In the child before it runs: SIGINT taken and not blocked, as a command a terminal starts has it. In the whole
    suite this process ignored SIGINT by then (a library of an earlier test set it, unseen by Python's getsignal), and
    a child inherits an ignored signal: the batch never saw its Ctrl-C (its stacks showed it joining its worker)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def _end_all(text):
    """Kill every process whose command line names ``text`` (what a failed test started must not run on and slow
    the rest of the suite)."""
    for pid in _processes_naming(text):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_timeout_on_a_batch_stops_its_local_job_and_keeps_its_checkpoint(tmp_path, isolated_results):
    """What ``timeout`` does to a running batch (SIGTERM), sent once its job has saved an epoch: within 30 s no job
    process is left and the checkpoint is kept. The signal waits for the first checkpoint, so a slow start-up on a
    busy machine cannot make the test race it."""
    script = ("import dataclasses\nfrom vixnb.plan import batch, plan\n"
              "jobs = batch.jobs_from_plan(plan.build('smoke', only=['fnet']), ensemble='never')[:1]\n"
              "entry = jobs[0].entries[0]\n"
              "entry.spec = dataclasses.replace(entry.spec, settings={'epochs': 5000})\n"
              "batch.run_local(jobs, executor='local', progress=print)\n")
    config = runspec.run_config("fnet", profile="smoke", epochs=5000)
    checkpoint = ResultsStore(isolated_results).checkpoint_path(config)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "VIXNB_RESULTS": str(isolated_results)},
                               cwd=Path(__file__).parents[1])
    try:
        deadline = time.time() + 240
        while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert checkpoint.exists(), "the run saved no epoch in 240 s"
        process.send_signal(signal.SIGTERM)  # what `timeout` sends
        start = time.time()
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        left = _processes_naming(str(isolated_results))
        _end_all(str(isolated_results))
    assert time.time() - start < 30  # stopped within 30 s of the signal
    assert process.returncode != 0 and "BatchStopped" in err, err[-2000:]
    assert left == []  # no job process left (those found were ended after, so that none slows the suite)
    assert checkpoint.exists()  # the last whole epoch's checkpoint is kept
    assert ResultsStore().get(config) is None


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_ctrl_c_on_a_batch_stops_its_local_job_and_prints_no_traceback(isolated_results):
    """Ctrl-C in a terminal: SIGINT to the foreground process group, here that of a `vixnb batch` started in a
    session of its own, sent once its local job has saved an epoch. The batch exits 130 saying "interrupted" once;
    no process prints a traceback (submitit's job controller, in the batch's group, printed one); the checkpoint is
    kept, and no process of the batch is left."""
    script = ("import dataclasses, faulthandler, signal, sys\n"
              "faulthandler.register(signal.SIGUSR2, all_threads=True)  # the test asks for its stacks if it hangs\n"
              "from vixnb.plan import batch\n"
              "from vixnb.cli import main\n"
              "planned = batch.jobs_from_plan\n"
              "def one_long_job(*args, **kwargs):\n"
              "    jobs = planned(*args, **kwargs)[:1]\n"
              "    entry = jobs[0].entries[0]\n"
              "    entry.spec = dataclasses.replace(entry.spec, settings={'epochs': 5000})\n"
              "    return jobs\n"
              "batch.jobs_from_plan = one_long_job\n"
              "sys.exit(main(['batch', '--profile', 'smoke', '--only', 'fnet', '--ensemble', 'never']))\n")
    checkpoint = ResultsStore(isolated_results).checkpoint_path(
        runspec.run_config("fnet", profile="smoke", epochs=5000))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "VIXNB_RESULTS": str(isolated_results)},
                               cwd=Path(__file__).parents[1], start_new_session=True, preexec_fn=_as_from_a_terminal)
    batch_pids = []
    try:
        deadline = time.time() + 240
        while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert checkpoint.exists(), "the run saved no epoch in 240 s"
        batch_pids = [process.pid] + _processes_naming(str(isolated_results))  # the batch, its controller, its job
        assert len(batch_pids) >= 3, batch_pids
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        start = time.time()
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # name where it hangs: every thread's stack, then fail
            os.kill(process.pid, signal.SIGUSR2)
            time.sleep(2)
            alive = [pid for pid in batch_pids if _alive(pid)]
            os.killpg(process.pid, signal.SIGKILL)
            _end_all(str(isolated_results))  # a job left running holds the batch's output pipes open
            out, err = process.communicate(timeout=30)
            pytest.fail(f"the batch did not end its job within 60 s of Ctrl-C (alive then: {alive}, the batch "
                        f"{process.pid}, exit {process.returncode}); its stacks and output:\n{err[-6000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        alive = [pid for pid in batch_pids if _alive(pid)]
        _end_all(str(isolated_results))  # its job, in a session of its own, never outlives the test
    assert time.time() - start < 30  # stopped within 30 s of the signal
    assert process.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == "vixnb batch: interrupted" and (out + err).count("interrupted") == 1, err
    assert "Traceback" not in out + err, err[-2000:]
    left = sorted(p.name for p in checkpoint.parent.iterdir()) if checkpoint.parent.is_dir() else []
    assert checkpoint.exists(), \
        f"the last whole epoch's checkpoint is gone (left: {left}); the batch said:\n{err[-3000:]}"
    assert alive == []  # no process of the batch left (those found were ended after)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="SIGHUP is POSIX")
def test_a_closed_terminal_stops_a_batch_as_sigterm_does():
    """A local job runs in a session of its own, so a closed terminal's SIGHUP reaches the batch alone: it stops
    the batch as SIGTERM does (``KeyboardInterrupt`` naming the signal), and the handlers before are restored."""
    from vixnb.plan.stopping import stopped_by_signals

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(KeyboardInterrupt, match=f"^stopped by signal {sig.name}$"):
            with stopped_by_signals():
                os.kill(os.getpid(), sig)
                time.sleep(5)  # the handler runs at once, in this (the main) thread
    assert {s: signal.getsignal(s) for s in before} == before


def _alive(pid):
    """Whether process ``pid`` runs (a zombie, ended and waiting to be reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _jobs(models, profile="smoke"):
    return batch.jobs_from_plan(plan.build(profile, only=models), ensemble="never")


def test_the_table_ends_with_the_time_spent_training():
    train_job, other = _jobs(["fnet"])[0], RecordJob(BenchEntry(chapter="c", paper="p", name="b", profile="smoke",
                                                                path="bench/b.json", request=Request("b")))
    train_job.outcome, train_job.seconds, other.outcome, other.seconds = "paused", 412.4, "done", 30.0
    assert batch.trained_line([train_job, other], 512.0) == "trained 412 s of 512 s"
    train_job.outcome = "failed"
    assert batch.trained_line([train_job, other], 512.0) == "trained 0 s of 512 s"


def test_a_run_whose_checkpoint_cannot_travel_needs_its_whole_time_in_one_call(monkeypatch):
    monkeypatch.setattr(batch, "cannot_run_here", lambda job, executor: None)  # as on a GPU
    job = _jobs(["mlp_mixer"], profile="budget")[0]
    for e in job.entries:
        e.est_gpu_minutes = 12.5
    assert batch.checkpoint_mb(job) > 100  # 8.5 M parameters: 16 bytes each
    assert batch.least_seconds(job, pack_limit_mb=60) == 750
    assert batch.whole_run_note(job).startswith("needs 13 minutes in one call")
    batch.run_local([job], budget=600, executor="inline", pack_limit_mb=60)
    assert job.outcome == "skipped" and "needs 13 minutes in one call" in job.note


def test_the_engine_version_is_compared_not_keyed(monkeypatch):
    config = runspec.run_config("fnet", profile="smoke")
    assert config["engine_version"] == runspec.KEY_VERSION == 1
    monkeypatch.setattr(provenance_module, "ENGINE_VERSION", 2)
    assert runspec.run_config("fnet", profile="smoke") == config  # the key stays: the result is found
    from vixnb.runs import policy

    monkeypatch.setattr(policy, "ENGINE_VERSION", 2)
    stored = {"config": config, "provenance": {}}  # stored before provenance recorded the engine's version
    assert stale_reason(stored) == "made by engine version 1, today 2 (bumped for a change the CPU probe cannot see)"
    assert stale_reason({"config": config, "provenance": {"engine_version": 2}}) is None


def test_the_estimates_read_only_runs_made_alone_and_provenance_says_how_a_run_was_executed():
    from vixnb.plan.estimates import stored_timings
    from vixnb.results.provenance import execution, made_alone, provenance

    assert made_alone({"provenance": {"commit": "d5fec8a4"}})
    # a run of today's engine records how it executed (``execution``: the attention kernel, the CUDA graph): alone
    assert made_alone({"provenance": {"concurrent_jobs": 1, "execution": {"attention": "auto"}}})
    assert not made_alone({"provenance": {"concurrent_jobs": 1, "execution": "ensemble of 3 seeds"}})
    history = [{"seconds": 9.0, "eval_seconds": 1.0}, {"seconds": 4.0, "eval_seconds": 0.5}]
    today = {"config": runspec.run_config("vit", profile="budget"), "history": history,
             "provenance": {"concurrent_jobs": 1, "device": "NVIDIA H100", "execution": {"attention": "auto"}}}
    shared = {**today, "provenance": {**today["provenance"], "concurrent_jobs": 4}}
    assert stored_timings(SimpleNamespace(results=lambda profile, unusable=None: [today]),
                          "budget")[1]["vit"]["epoch_s"] == 4.0
    assert stored_timings(SimpleNamespace(results=lambda profile, unusable=None: [shared]), "budget") == ({}, {})
    assert not made_alone({"provenance": {"commit": "2a2d461b"}})  # Table 1, several runs at a time on one H100
    assert not made_alone({"provenance": {"concurrent_jobs": 3}})
    assert made_alone({"provenance": {"concurrent_jobs": 1, "commit": "2a2d461b"}})
    with execution(concurrent_jobs=1, executor="inline"):
        inside = provenance("cpu")
    assert (inside["concurrent_jobs"], inside["executor"]) == (1, "inline")
    assert inside["engine_version"] == provenance_module.ENGINE_VERSION
    assert "executor" not in provenance("cpu")


def test_the_gpu_check_script_runs_phases_1_and_3_on_the_cpu_and_says_pass_or_fail(tmp_path):
    """``PHASES="1 3" tools/gpu_check.sh --dry-run``: the two phases a loan's first call runs, end to end on the CPU
    with tiny models, each ending in a PASS or FAIL line (on a CPU every run is reproducible, so both pass); the other
    phases are named as skipped. A phase outside 1-4 is refused in one line."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, OUT=str(tmp_path), PHASES="1 3", PYTHON=sys.executable)
    done = subprocess.run(["bash", "tools/gpu_check.sh", "--dry-run"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    log = (tmp_path / "gpu_check.log").read_text()
    assert done.returncode == 0, done.stdout[-2000:]
    assert "phase 1: PASS" in log and "phase 3: PASS" in log, log[-3000:]
    assert 'phase 2 skipped' in log and 'phase 4 skipped' in log
    assert "graphed equals eager bitwise" in log and "equals its run alone" in log
    bad = subprocess.run(["bash", "tools/gpu_check.sh", "--dry-run"], cwd=root, env=dict(env, PHASES="1 5"),
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "name phases 1 to 4" in bad.stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_timeout_on_a_rehearsal_ends_its_job_and_removes_its_scratch_store(isolated_results):
    """Issue 46: `timeout` (SIGTERM) on `vixnb batch --rehearse` with the local executor, sent once its job runs:
    the batch ends its job before it exits (its job kept training for about 55 s, and wrote a new scratch store after
    the old one was removed), and 10 s after the exit no process names the scratch store and the store is gone."""
    process = subprocess.Popen([sys.executable, "-m", "vixnb", "batch", "--profile", "budget", "--rehearse",
                                ], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "VIXNB_RESULTS": str(isolated_results)},
                               cwd=Path(__file__).parents[1])
    scratch = None
    try:
        deadline = time.time() + 180
        while scratch is None and process.poll() is None and time.time() < deadline:
            for pid in _processes_naming(".vixnb-rehearsal.pid"):
                line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
                if "submitit" in line:
                    scratch = next(w for w in line.split() if ".vixnb-rehearsal.pid" in w).split("/budget-rehearsal")[0]
            time.sleep(0.2)
        assert scratch, "the rehearsal started no job in 180 s"
        time.sleep(2)  # the job is training
        process.send_signal(signal.SIGTERM)
        start = time.time()
        _, err = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert time.time() - start < 30 and "stopped by signal SIGTERM" in err, err[-2000:]
    time.sleep(10)
    assert _processes_naming(scratch) == [] and not Path(scratch).exists()


def test_a_second_batch_on_a_store_is_refused_naming_the_first_ones_pid(isolated_results, capsys):
    from vixnb.cli import main

    with ResultsStore(isolated_results).batch_lock():
        assert main(["batch", "--profile", "smoke", "--only", "fnet", "--max-jobs", "1"]) == 1
        err = capsys.readouterr().err
        assert f"another vixnb batch (PID {os.getpid()}) is running on this store" in err and err.count("\n") == 1
        assert main(["batch", "--profile", "smoke", "--only", "fnet", "--dry-run"]) == 0  # a dry run writes nothing
    assert (isolated_results / ".locks" / "batch.lock").read_text() == ""  # released: the PID is gone with it
    with ResultsStore(isolated_results).batch_lock():
        pass
