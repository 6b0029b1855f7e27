"""The dress rehearsal (``vixnb batch --rehearse``): which jobs it chooses from a plan, its profile, and the whole
rehearsal of the budget plan on this CPU against the offline CIFAR-10 copy beside the checkout (skipped where that
copy is not there), leaving ``results/`` as it was."""
import hashlib
import tarfile
from pathlib import Path

import pytest

from vixnb.plan import plan
from vixnb.cli import main
from vixnb.plan.entries import BenchEntry, MeasureEntry, TrainEntry
from vixnb.plan.jobs import RecordJob, TrainJob
from vixnb.record_kinds import Request
from vixnb.runs.profiles import get_profile
from vixnb.runs.spec import run_config
from vixnb.plan.rehearsal import PROTOCOLS, rehearsal_jobs
from vixnb.runs.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]
CIFAR10 = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"


def test_the_rehearsal_profile_is_two_one_step_epochs_on_the_device_at_hand():
    profile = get_profile("budget-rehearsal")
    assert profile["rehearsal"] == "budget" and profile["epochs"] == 2 and profile["seeds"] == [0, 1]
    assert profile["train_size"] == profile["batch_size"] == profile["test_size"]
    config = run_config("cnv_5_4", profile="budget-rehearsal")
    assert config["dualopt"]["adamw_epochs"] == 1  # one epoch with AdamW, one with SGD
    with pytest.raises(ValueError, match=r"unknown profile 'budgets'; .* \(and each with -rehearsal"):
        get_profile("budgets")


def test_the_rehearsal_runs_every_model_protocol_and_record_kind_of_the_plan():
    entries = plan.build("budget-rehearsal", machine=True, order="rows")
    jobs, skipped = rehearsal_jobs(entries)
    runs = [e for j in jobs for e in j.entries if e.job == "train"]
    here = {e.model for e in entries if e.job == "train" and not e.blocked}
    assert {e.model for e in runs} == here  # every model the data here lets run
    for name, uses in PROTOCOLS.items():  # every protocol the plan has
        in_plan = any(uses(e.config) for e in entries if e.job == "train" and not e.blocked)
        assert any(uses(e.config) for e in runs) == in_plan, name
    assert any(e.keep_weights != "no" for e in runs)
    assert any(len(j.entries) == 2 for j in jobs)  # one ensemble of two seeds
    records = {e.name for e in entries if e.job != "train"}
    rehearsed = {j.entries[0].name for j in jobs if j.entries[0].job != "train"}
    assert rehearsed | {what.removeprefix("bench ") for what, _ in skipped} >= records
    # a measurement that reads weights comes after the runs it reads
    needed = set().union(*(e.needs for j in jobs for e in j.entries if e.job != "train"))
    assert needed <= {e.key for e in runs}


def _digest(folder):
    """Of the store's files, not of its hidden (git-ignored) caches and locks, which a test beside this one may write
    (`pytest -n`)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and
                       not any(part.startswith(".") for part in p.relative_to(folder).parts)):
        digest.update(f"{path.relative_to(folder)}\n".encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.skipif(not CIFAR10.is_file(), reason="the offline CIFAR-10 copy (shared/data beside the checkout) is "
                                                   "not here")
def test_the_budget_plan_rehearses_on_this_cpu_and_leaves_results_alone(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data" / "cifar10"
    data.mkdir(parents=True)
    with tarfile.open(CIFAR10) as tar:
        tar.extractall(data, filter="data")
    monkeypatch.setenv("VIXNB_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("VIXNB_RESULTS")  # the rehearsal makes its own scratch store; results/ must stay as it is
    before = _digest(ROOT / "results")
    code = main(["batch", "--profile", "budget", "--rehearse", "--executor", "inline"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert " 0 failed" in out and "pack and unpack" in out
    assert _digest(ROOT / "results") == before


def test_a_rehearsal_with_the_batch_options_rehearses_what_that_batch_would_start(monkeypatch):
    from vixnb.plan import batch as runner
    from vixnb.plan import rehearsal

    def train(model, minutes=0.0, dataset="cifar10"):
        return TrainEntry(chapter="c", paper="vix", name=model, profile="budget", est_gpu_minutes=minutes,
                          spec=RunSpec.of(model, dataset=dataset, profile="budget"))

    def record(kind, name, minutes=0.0, needs=()):
        return kind(chapter="c", paper="vix", name=name, profile="budget", est_gpu_minutes=minutes,
                    path=f"budget/{name}.json", request=Request(name), needs=frozenset(needs))

    plan_entries = [record(MeasureEntry, "efficiency", 8), record(BenchEntry, "mixers-bf16", 3),
                    train("vit", 2), train("cnv_5_4", 1, dataset="cifar100"),
                    train("vip", 4), record(BenchEntry, "fill", 1)]
    asked = {}
    monkeypatch.setattr(rehearsal.planning, "build", lambda profile, **kw: asked.update(kw) or plan_entries)
    monkeypatch.setattr(rehearsal.planning, "data_here", lambda dataset: dataset == "cifar10")
    monkeypatch.setattr(runner, "jobs_from_plan", lambda entries, **kw: [
        TrainJob([e]) if isinstance(e, TrainEntry) else RecordJob(e) for e in entries])
    # a measurement or benchmark needs its whole estimate; a training run a tenth of it (its first epoch)
    monkeypatch.setattr(runner, "least_seconds", lambda job, limit=None: job.entries[0].est_gpu_minutes * 60 *
                        (0.1 if job.trains else 1))
    assert rehearsal.reachable("budget") is None  # no selection: the whole plan
    # 7 minutes: efficiency (8) does not fit; mixers-bf16 (3) does; vit (2) fits and runs whole; cnv's data is not
    # here; vip needs 0.4 of the 2 left and spends them all (it pauses); fill (1) no longer fits
    assert rehearsal.reachable("budget", budget=7 * 60, chapter=["x"], order="rows") == {"mixers-bf16", "vit", "vip"}
    assert asked["chapter"] == ["x"] and asked["order"] == "rows"
    assert rehearsal.reachable("budget", budget=150) == {"vit", "vip"}  # vit whole, then vip until it pauses

    pit = train("pit")
    rehearsal_plan = [train("vit"), pit, record(MeasureEntry, "maps", needs={pit.key}), train("vip")]
    assert [e.name for e in rehearsal.selected(rehearsal_plan, {"vit", "maps"})] == ["vit", "pit", "maps"]


def test_the_rehearsal_ensembles_two_seeds_of_the_configuration_with_the_smallest_checkpoint(monkeypatch):
    from types import SimpleNamespace

    from vixnb.plan import rehearsal

    def run(model, seed, key, **settings):
        return SimpleNamespace(model=model, dataset="cifar10", seed=seed, key=key, settings=settings,
                               config={"model": model})

    # in plan order the B/16 pair comes first; the rehearsal profile's GPU minutes say nothing (all 0 on a CPU)
    big = [run("vit_b16_224", 0, "b0"), run("vit_b16_224", 1, "b1")]
    small = [run("vit", 0, "s0", depth=2), run("vit", 1, "s1", depth=2)]
    alone, rehearsed = run("fnet", 0, "f0"), [run("pit", 0, "p0"), run("pit", 1, "p1")]
    sizes = {"vit_b16_224": 1300.0, "vit": 20.0, "fnet": 1.0, "pit": 2.0}
    monkeypatch.setattr(rehearsal.planning, "checkpoint_mb", lambda config, members=1: sizes[config["model"]])
    monkeypatch.setattr(rehearsal, "can_ensemble_run", lambda config: (True, ""))
    runnable = [*big, alone, *small, *rehearsed]
    # fnet has one seed only; pit's seed 0 is rehearsed alone already
    assert rehearsal.ensemble_pair(runnable, chosen={"p0": rehearsed[0]}) == small
    monkeypatch.setattr(rehearsal, "can_ensemble_run", lambda config: (config["model"] == "vit_b16_224", "why"))
    assert rehearsal.ensemble_pair(runnable, chosen={}) == big
    assert rehearsal.ensemble_pair([alone], chosen={}) is None
