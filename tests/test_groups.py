"""`vixnb batch` trains small runs in groups at once (``vixnb.plan.groups``): which runs group, and on the CPU (groups
forced with ``together``) each run of a group gives bitwise its solo run, keeps its own result and provenance,
pauses at an epoch boundary and keeps its checkpoint when the batch is stopped mid-group."""

import pickle

import pytest

from vixnb.plan import batch

from vixnb.engine import concurrent

from vixnb.plan import groups

from vixnb.plan import plan

from vixnb.engine import train
from vixnb.plan.entries import TrainEntry
from vixnb.plan.jobs import TrainJob
from vixnb.results import ResultsStore
from vixnb.runs.spec import RunSpec
from vixnb.engine.steps import TrainStep
from vixnb.plan.stopping import BatchStopped

MODELS = ["fnet", "vil"]  # two models of the smoke profile (vil keeps its weights): a group of different models
SOLO = {}  # each run trained alone, once for the module: {key: result}


def _jobs(models=MODELS):
    return batch.jobs_from_plan(plan.build("smoke", only=models), ensemble="never")


def _solo(job):
    config = job.entries[0].config
    if job.entries[0].key not in SOLO:
        SOLO[job.entries[0].key] = train.train(config, progress=False, with_weights=True)
    return SOLO[job.entries[0].key]


def _same_as_solo(job, store):
    """The stored result of a grouped job's run against the run trained alone: history, metrics, kept weights."""
    config = job.entries[0].config
    stored, alone = store.get(config), _solo(job)
    assert train.without_timings(stored["history"]) == train.without_timings(alone["history"])
    assert (stored["top1"], stored["top5"]) == (alone["top1"], alone["top5"])
    if job.entries[0].keep_weights != "no":
        kept = store.load_weights(config)
        assert all(kept[k].equal(v.half()) for k, v in alone["best_state"].items())
    return stored


def test_a_batch_trains_a_group_at_once_and_each_run_is_its_solo_run():
    jobs = _jobs()
    lines = []
    done = batch.run_local(jobs, executor="inline", together=2, progress=lines.append)
    assert done is jobs and [j.outcome for j in jobs] == ["done"] * 2
    assert len(lines) == 1 and lines[0].startswith("vixnb batch: 2 runs at once: ")  # one job: the group
    store = ResultsStore()
    assert sorted(j.entries[0].model for j in jobs) == sorted(MODELS)
    assert any(j.entries[0].keep_weights != "no" for j in jobs)  # vil keeps its weights: compared too
    for job in jobs:
        stored = _same_as_solo(job, store)
        assert stored["provenance"]["concurrent_jobs"] == 2 and stored["provenance"]["executor"] == "inline"
        assert stored["provenance"]["execution"]["concurrent_runs"] == 2
        assert not store.checkpoint_path(job.entries[0].config).exists()


def test_a_time_budget_pauses_every_run_of_a_group_at_an_epoch_boundary_and_the_next_batch_resumes_them(monkeypatch):
    real = train.out_of_time
    monkeypatch.setattr(train, "out_of_time", lambda deadline, history, last_epoch=None: bool(history))
    jobs = batch.run_local(_jobs(), budget=3600, executor="inline", together=2, progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["paused"] * 2
    assert all("paused after epoch 1 of 2" in j.note for j in jobs)
    store = ResultsStore()
    for job in jobs:
        config = job.entries[0].config
        assert store.get(config) is None and store.checkpoint_path(config).exists()
    monkeypatch.setattr(train, "out_of_time", real)  # (not undo(): that would drop the test's own results store)
    jobs = batch.run_local(_jobs(), budget=3600, executor="inline", together=2, progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["resumed"] * 2
    for job in jobs:
        _same_as_solo(job, store)


def test_a_batch_stopped_mid_group_keeps_every_runs_checkpoint(monkeypatch):
    real, calls = TrainStep.__call__, []

    def stop_in_the_second_epoch(self, *args, **kwargs):  # one step an epoch: calls 1-2 are the two epochs 1
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("stopped by signal SIGTERM")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(TrainStep, "__call__", stop_in_the_second_epoch)
    jobs = _jobs()
    with pytest.raises(BatchStopped):
        batch.run_local(jobs, executor="inline", together=2, progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["stopped"] * 2
    store = ResultsStore()
    for job in jobs:
        config = job.entries[0].config
        assert store.get(config) is None and store.checkpoint_path(config).exists()
    monkeypatch.setattr(TrainStep, "__call__", real)
    jobs = batch.run_local(_jobs(), executor="inline", together=2, progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["resumed"] * 2
    for job in jobs:
        _same_as_solo(job, store)


def test_a_failing_run_of_a_group_fails_alone_and_removes_only_its_own_checkpoint(monkeypatch):
    real = concurrent.training_steps

    def vil_fails_in_epoch_2(configs, **kwargs):
        run = real(configs, **kwargs)
        if configs[0]["model"] != "vil":
            return run

        def failing():  # epoch 1 ran and saved its checkpoint
            starts = 0
            for what in run:
                starts += what == train.EPOCH_START
                if starts == 2:
                    raise FloatingPointError("vil: loss became nan at epoch 2, step 1; no result stored.")
                yield what
        return failing()

    monkeypatch.setattr(concurrent, "training_steps", vil_fails_in_epoch_2)
    jobs = batch.run_local(_jobs(), executor="inline", together=2, progress=lambda _: None)
    outcomes = {j.entries[0].model: (j.outcome, j.note) for j in jobs}
    assert outcomes["vil"] == ("failed", "vil: loss became nan at epoch 2, step 1; no result stored.")
    assert outcomes["fnet"] == ("done", "")
    store = ResultsStore()
    for job in jobs:
        config = job.entries[0].config
        assert (store.get(config) is None) == (config["model"] == "vil")
        assert not store.checkpoint_path(config).exists()


def _job(model, profile="budget", seed=0, **settings):
    entry = TrainEntry(chapter="c", paper="p", name=model, profile=profile,
                       spec=RunSpec.of(model, profile=profile, seed=seed, **settings))
    return TrainJob([entry])


def test_small_steps_group_in_order_and_large_ones_train_alone():
    small = [_job("vit_small_simplified", seed=s) for s in range(3)]
    vit = _job("vit")  # 637 GFLOP a step at its batch of 64: bound by the GPU's work
    assert [groups.groupable(j) for j in small + [vit]] == [True, True, True, False]
    out = groups.group_jobs([small[0], vit, small[1], small[2]], 2, executor="inline")
    assert [type(j).__name__ for j in out] == ["GroupJob", "TrainJob", "TrainJob"]
    assert out[0].members == small[:2] and out[1] is vit and out[2] is small[2]
    assert groups.group_jobs(small, 1) == small  # one at a time
    assert groups.group_jobs(small, "auto", executor="inline") == small  # no CUDA here: one at a time
    assert groups.group_size("auto", "slurm", small) == 1


def test_a_groups_outcome_reaches_each_member_and_settle_gives_each_its_own():
    members = [_job("vit_small_simplified", seed=s) for s in range(2)]
    group = groups.GroupJob(members)
    group.outcome, group.seconds = "running", 12.0
    assert [(m.outcome, m.seconds) for m in members] == [("running", 12.0)] * 2
    groups.settle(group, {"runs": [{"outcome": "done", "note": ""}, {"outcome": "paused", "note": "time"}]})
    assert [(m.outcome, m.note) for m in members] == [("done", ""), ("paused", "time")]
    again = pickle.loads(pickle.dumps(group))  # a local job's process receives the group itself
    again.outcome = "failed"
    assert [m.outcome for m in again.members] == ["failed"] * 2 and again.label == group.label


@pytest.mark.parametrize("together", [0, -1, 2.5, True, "eight"])
def test_a_bad_together_is_named(together):
    with pytest.raises(ValueError, match=r"^together=.*: give 'auto' .* or a whole number >= 1"):
        groups.check_together(together)
