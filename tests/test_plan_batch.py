"""`vixnb plan` and `vixnb batch`: statuses against a store fixture, budget pause and resume, the local and
Slurm executors (fake sbatch), failures."""
import json
import time
import os
import pickle
import stat
import tarfile

import pytest

from vixnb import papers

from vixnb.plan import batch

from vixnb.plan import estimates

from vixnb.plan import plan

from vixnb.runs import profiles

from vixnb.runs import spec as runspec
from vixnb.engine import train
from vixnb.cli import main
from vixnb.results import ResultsStore
from vixnb.engine.train import without_timings
from vixnb.runs import policy

TABLE1 = ["vit", "vip", "vil", "vin", "fnet", "mlp_mixer", "hybrid_vit", "hybrid_vip", "hybrid_vil", "hybrid_vin",
          "hybrid_fnet", "hybrid_mlp_mixer"]


def _fake_result(config, **fields):
    sig, counts = policy.built_today(config["model"], config["dataset"],
                                     json.dumps(config["model_overrides"], sort_keys=True))
    return {"status": "done", "top1": 10.0, "top5": 50.0, **counts, "architecture": sig,
            "history": [{"epoch": 1, "seconds": 1.0}],
            "provenance": {"data_fingerprint": "synthetic-v1"}, **fields}


def _by_model(entries):
    return {e.model: e for e in entries if e.job == "train"}


def test_plan_lists_every_published_row_once_per_seed():
    entries = plan.build("budget")
    earlier = [e for e in entries if e.job == "train" and e.purpose == "vix earlier_reading"]
    train = [e for e in entries if e.job == "train" and e.paper == "vix" and not e.purpose.startswith("question")
             and e not in earlier]
    # the vix paper's three chapters: Tables 1-2 (12 models x 2 datasets), Tables 3-5 (12 x 2 + 6), Table 6 (8),
    # three seeds each (the shaped paper's studies: tests/test_shaped_chapter.py)
    assert len(train) == (12 * 2 + 12 * 2 + 6 + 8) * 3
    # and the run of our earlier reading of the Performer's key stabiliser, its first seed only, kept with its key
    assert [(e.model, e.dataset, e.seed, e.settings, e.key) for e in earlier] == [
        ("hybrid_vip", "cifar10", 0, {"key_max": "per_head"}, "fe61a1fafff996a0")]
    # one study of the vix paper in the budget profile: ViP as its text describes it, beside Table 1's ViP
    studied = [e for e in entries if e.paper == "vix" and e.purpose.startswith("question")]
    assert sorted((e.purpose, e.model, e.dataset, e.seed) for e in studied) == [
        ("question: vip_text", "vip_relu_local", "cifar10", s) for s in (0, 1, 2)]
    tables = {"vix_table1": ("table1", "table2"), "vix_families": ("table3", "table5", "table4"),
              "vix_rope": ("table6",)}
    for chapter, names in tables.items():
        rows = {(m, papers.table("vix", t)["dataset"]) for t in names for m in papers.table_models("vix", t)}
        assert {(e.model, e.dataset) for e in train if e.seed == 0 and e.chapter == chapter} == rows
    assert [c["notebook"] for _, c in plan.chapters()] == ["vix_table1", "vix_families", "vix_rope", "cxv_table1",
                                                        "cxv_ablations", "cxv_dualopt", "linattn", "efficiency",
                                                        "simplified"]
    measures = {e.name: e.chapter for e in entries if e.job == "measure"}
    assert {k: v for k, v in measures.items() if k.startswith("vix")} == {
        "vix-gpu-memory-cifar10-b64": "vix_table1", "vix-families-gpu-memory-cifar10-b64": "vix_families",
        "vix-rope-gpu-memory-cifar10-b64": "vix_rope"}
    assert all(e.level == 1 for e in train if e.seed == 0) and all(e.level == 3 for e in train if e.seed != 0)
    assert [e.priority for e in entries] == list(range(1, len(entries) + 1))
    assert all(e.status == "missing" for e in entries)  # an empty store
    # the precision study is asked for in the paper profile only: bf16 beside the profile's fp32 runs
    study = [e for e in plan.build("paper") if e.purpose == "question: precision"]
    assert sorted((e.model, e.seed) for e in study) == [(m, s) for m in ("hybrid_vin", "vit") for s in (0, 1, 2)]
    assert all(e.settings == {"precision": "bf16"} and e.level == 2 for e in study)


def _bench_train(store):
    """A ``bench train`` record in ``store``: the Table 1 models at 1,000 to 12,000 images/s (bf16) on "GPU X"."""
    (store.root / "bench").mkdir(parents=True, exist_ok=True)
    rows = [{"model": m, "ours_images_per_s": 1000.0 * (i + 1), "ours_paper_dtype_images_per_s": 500.0 * (i + 1)}
            for i, m in enumerate(TABLE1)]
    (store.root / "bench" / "train.json").write_text(json.dumps({"rows": rows, "provenance": {"device": "GPU X"}}))


def test_plan_levels_then_cheaper_first(tmp_path):
    _bench_train(ResultsStore())
    entries = plan.build("budget", order="rows")
    levels = [e.level for e in entries]
    assert levels == sorted(levels)
    first = [e for e in entries if e.level == 1 and e.job == "train" and e.dataset == "cifar10" and e.model in TABLE1
             and e.name == e.model]  # Table 1's rows (not our earlier reading's stored run beside them)
    assert [e.model for e in first] == list(reversed(TABLE1))  # faster rate, fewer minutes, earlier
    vit = next(e for e in first if e.model == "vit")
    config = vit.config
    expected = config["epochs"] * (50000 + 10000 / 3) / 1000.0 + estimates.STARTUP_SECONDS
    assert vit.est_gpu_minutes == pytest.approx(expected / 60)
    assert vit.basis.startswith("bench train: 1,000 img/s (bf16, GPU X)")
    tiny = next(e for e in entries if e.model == "vit" and e.dataset == "tiny-imagenet" and e.seed == 0)
    assert tiny.basis.startswith("FLOPs:")  # no throughput measured on that dataset: FLOPs at the fitted rate
    assert "the rate fitted to measured runs" in tiny.basis


def test_the_plan_completes_whole_chapters_cheapest_first():
    _bench_train(ResultsStore())
    entries = plan.build("budget")
    left = [e for e in entries if e.status != "stored"]
    simplified = [e.priority for e in left if e.chapter == "simplified"]
    later = [e.priority for e in left if e.chapter in ("cxv_table1", "linattn")]
    assert simplified and later and max(simplified) < min(later)
    # a chapter's entries come together, runs and measurements, every seed
    chapters = [e.chapter for e in entries if e.chapter == "simplified" or e.chapter == "efficiency"]
    assert chapters == sorted(chapters, key=chapters.index)
    seeds = {e.seed for e in entries if e.chapter == "simplified" and e.job == "train"}
    assert seeds == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError, match="order='random': use one of chapters, rows"):
        plan.build("budget", order="random")


def test_estimates_for_another_gpu_scale_every_entry_up_on_a_slower_one():
    _bench_train(ResultsStore())
    gpu_made = lambda e: not getattr(e, "cpu_ok", False)  # noqa: E731  (a record a CPU makes takes no GPU time)
    h100 = {e.path: e.est_gpu_minutes for e in plan.build("budget", chapter=["simplified"], gpu="h100") if gpu_made(e)}
    t4 = {e.path: e for e in plan.build("budget", chapter=["simplified"], gpu="t4") if gpu_made(e)}
    assert h100 and all(t4[p].est_gpu_minutes > minutes for p, minutes in h100.items())
    assert all("scaled to a T4 by peak throughput" in e.basis for e in t4.values())
    cpu = [e for e in plan.build("budget", chapter=["simplified"], gpu="t4") if not gpu_made(e)]
    assert cpu and all(e.est_gpu_minutes == 0 and "a CPU makes it" in e.basis for e in cpu)
    with pytest.raises(ValueError, match="gpu='v100': use one of h100, a100, l4, t4, p100"):
        plan.build("budget", gpu="v100")


def test_a_stored_run_is_the_first_basis_of_an_estimate():
    from vixnb.plan.estimates import STARTUP_SECONDS

    store = ResultsStore()
    config = runspec.run_config("fnet", profile="budget")
    store.put(config, {**_fake_result(config), "history": [{"seconds": 30.0, "eval_seconds": 3.0}] +
                       [{"seconds": 10.0, "eval_seconds": 1.0}] * 3, "provenance": {"device": "GPU Y"}})
    other = next(e for e in plan.build("budget", store=store) if e.model == "fnet" and e.dataset == "cifar10"
                 and e.seed == 1 and e.chapter == "vix_table1")
    assert other.basis.startswith("stored run (this run's settings): 10.0 s/epoch + 1.0 s/test on GPU Y")
    assert other.est_gpu_minutes == pytest.approx((config["epochs"] * 11.0 + STARTUP_SECONDS) / 60)


def test_plan_status_stored_missing_and_stale():
    store = ResultsStore()
    # hybrid_fnet: a run that keeps no weights (vit's first seed keeps them for the maps study: without them, its
    # numbers stand and it wants its weights)
    configs = {m: runspec.run_config(m, profile="smoke") for m in ("hybrid_fnet", "vit", "vip", "vil", "vin", "fnet",
                                                                     "mlp_mixer")}
    store.put(configs["hybrid_fnet"], _fake_result(configs["hybrid_fnet"]))
    store.put(configs["vit"], _fake_result(configs["vit"]))
    store.put(configs["vip"], _fake_result(configs["vip"], architecture="0000000000000000"))
    old = _fake_result(configs["vil"])
    del old["architecture"]
    store.put(configs["vil"], {**old, "params_true": 12})
    store.put(configs["vin"], _fake_result(configs["vin"], provenance={"data_fingerprint": "other-data"}))
    other = runspec.run_config("fnet", profile="smoke", epochs=3)  # same model, dataset and seed; other settings
    store.put(other, _fake_result(other))
    entries = _by_model(plan.build("smoke"))
    assert entries["hybrid_fnet"].status == "stored"
    assert entries["vit"].status == "weights wanted" and entries["vit"].keep_weights == "store" and \
        entries["vit"].reason == "keeps no weights"
    assert entries["vip"].status == "stale" and "other model code (architecture" in entries["vip"].reason
    assert entries["vil"].status == "stale" and "params_true 12, today" in entries["vil"].reason
    assert entries["vin"].status == "stale" and "other data" in entries["vin"].reason
    assert entries["fnet"].status == "stale" and "epochs 3 -> 2" in entries["fnet"].reason
    assert entries["mlp_mixer"].status == "missing" and entries["mlp_mixer"].reason == ""
    assert {e.model for e in plan.todo(entries.values())} == set(entries) - {"hybrid_fnet"}
    counted = plan.counts(entries.values())
    assert {k: counted[k] for k in plan.STATUSES} == {"stored": 1, "unverified": 0, "weights wanted": 1, "stale": 4,
                                                      "missing": len(entries) - 6,
                                                      "damaged": 0}
    assert counted["reasons"][entries["vit"].path] == "keeps no weights" and entries["vip"].path in counted["reasons"]


def test_architecture_signature_on_meta_equals_the_trained_models():
    from vixnb.models import architecture_signature, create_model

    for name in ("vit", "hybrid_vin", "mlp_mixer"):
        sig, counts = policy.built_today(name, "cifar10", "{}")
        assert sig == architecture_signature(create_model(name))
        assert sig != policy.built_today(name, "cifar10", json.dumps({"depth": 1}))[0]


def test_plan_json_and_totals(capsys):
    assert main(["plan", "--profile", "smoke", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries and {"chapter", "model", "dataset", "profile", "seed", "status", "est_gpu_minutes",
                        "priority"} <= set(entries[0])
    assert main(["plan", "--profile", "budget"]) == 0
    out = capsys.readouterr().out
    assert "GPU-hours (budget, H100)" in out and "\nbook " in out and "vix_table1" in out and "efficiency" in out
    assert "window" not in out.lower()  # a user's units: GPU-hours on a named GPU, hours on N GPUs
    assert main(["plan", "--profile", "budget", "--gpu", "a100", "--gpus", "4"]) == 0
    out = capsys.readouterr().out
    assert "GPU-hours (budget, A100)" in out and "on 4 GPUs h" in out and "window" not in out.lower()


def test_hours_on_n_gpus_is_the_last_end_of_the_jobs_taken_in_order():
    assert plan.hours_on([60, 60, 60], 1) == 3.0 and plan.hours_on([60, 60, 60], 2) == 2.0
    assert plan.hours_on([120, 30, 30, 30], 2) == 2.0  # the long job bounds it
    assert plan.hours_on([float("nan"), 60], 3) == 1.0 and plan.hours_on([], 4) == 0.0


def _spec_jobs(models, profile="smoke", **kwargs):
    entries = plan.build(profile, only=models)
    return batch.jobs_from_plan(entries, ensemble="never", **kwargs)


def test_budget_pauses_at_an_epoch_boundary_and_resumes_to_identical_metrics(monkeypatch, tmp_path):
    clock = iter([0.0] + [1e9] * 100)  # the second epoch's check finds the budget spent
    real_now = train.now
    monkeypatch.setattr(train, "now", lambda: real_now() + next(clock))
    jobs = batch.run_local(_spec_jobs(["fnet"]), budget=3600, executor="inline", progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["paused"] and "paused after epoch 1 of 2" in jobs[0].note
    config = runspec.run_config("fnet", profile="smoke")
    store = ResultsStore()
    assert store.get(config) is None and store.checkpoint_path(config).exists()
    monkeypatch.setattr(train, "now", real_now)
    jobs = batch.run_local(_spec_jobs(["fnet"]), budget=3600, executor="inline", progress=lambda _: None)
    assert [j.outcome for j in jobs] == ["resumed"]
    resumed = store.get(config)
    assert not store.checkpoint_path(config).exists()
    fresh = train.train(config, progress=False)  # the same run, uninterrupted
    strip = without_timings
    assert strip(resumed["history"]) == strip(fresh["history"])
    assert resumed["top1"] == fresh["top1"] and resumed["top5"] == fresh["top5"]


def test_local_executor_runs_two_smoke_jobs_end_to_end(tmp_path, capsys):
    code = main(["batch", "--profile", "smoke", "--executor", "local", "--only", "fnet", "vil",
                 "--pack", str(tmp_path / "back.tar.gz")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fnet synthetic seed 0" in out and "vil synthetic seed 0" in out and out.count("done") == 2
    store = ResultsStore()
    for m in ("fnet", "vil"):
        result = store.get(runspec.run_config(m, profile="smoke"))
        assert result["status"] == "done" and result["provenance"]["device_type"] == "cpu"
    with tarfile.open(tmp_path / "back.tar.gz") as tar:
        names = tar.getnames()
    # vil's first seed keeps its weights (the maps study maps it): they come back beside its result
    assert sorted(n.split("/", 2)[2].split("-")[0] for n in names) == ["fnet", "vil", "weights/vil"]
    assert all(n.startswith("results/smoke/") for n in names)
    assert main(["batch", "--profile", "smoke", "--only", "fnet", "vil"]) == 0  # now nothing is left
    assert "nothing left to run" in capsys.readouterr().out


def test_a_failed_job_is_marked_failed_and_leaves_the_store_clean(monkeypatch, capsys):
    real = train.train_epoch

    def fail_second(*args, epoch, **kwargs):
        if epoch == 2 and kwargs["config"]["model"] == "fnet":
            raise FloatingPointError("fnet: loss became nan at epoch 2, step 1; no result stored.")
        return real(*args, epoch=epoch, **kwargs)

    monkeypatch.setattr(train, "train_epoch", fail_second)
    code = main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet", "vil"])
    captured = capsys.readouterr()
    assert code == 1 and "1 of 2 jobs failed: fnet synthetic seed 0" in captured.err
    assert "failed" in captured.out and "loss became nan" in captured.out
    store = ResultsStore()
    config = runspec.run_config("fnet", profile="smoke")
    assert store.get(config) is None and not store.checkpoint_path(config).exists()
    leftovers = [p.name for p in (store.root / "smoke").iterdir() if p.is_file()]
    assert leftovers == [store.path(runspec.run_config("vil", profile="smoke")).name]  # vil went on and finished


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch / squeue / sacct / srun on PATH that record their arguments (and sbatch the script it gets)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "slurm-log"
    bin_dir.mkdir()
    log.mkdir()
    (bin_dir / "sbatch").write_text(
        '#!/usr/bin/env bash\necho "$@" >> "$FAKE_SLURM_LOG/sbatch-args"\n'
        'for a in "$@"; do [ -f "$a" ] && cat "$a" >> "$FAKE_SLURM_LOG/sbatch-scripts"; done\n'
        'echo "Submitted batch job 4242"\n')
    for name in ("squeue", "sacct", "srun"):
        (bin_dir / name).write_text(f'#!/usr/bin/env bash\necho "{name} $@" >> "$FAKE_SLURM_LOG/other"\n')
    for f in bin_dir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_LOG", str(log))
    return log


def test_slurm_submits_one_job_array_with_gpus_and_time_limit(fake_slurm, capsys):
    args = ["batch", "--profile", "budget", "--executor", "slurm", "--only", "vit", "--partition", "gpu",
            "--time-min", "45", "--max-parallel", "2"]
    assert main(args + ["--dry-run"]) == 0
    assert "dry run: nothing submitted" in capsys.readouterr().out
    assert not (fake_slurm / "sbatch-args").exists()
    assert main(args) == 0
    out = capsys.readouterr().out
    script = (fake_slurm / "sbatch-scripts").read_text()
    assert len((fake_slurm / "sbatch-args").read_text().splitlines()) == 1  # one submission: one array
    assert "#SBATCH --array=0-5%2" in script  # vit: CIFAR-10 and Tiny ImageNet, three seeds each
    assert "#SBATCH --gpus-per-node=1" in script and "#SBATCH --time=45" in script
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --signal=USR2@" in script  # requeue on preemption
    assert out.count("submitted") == 6 and "slurm job 4242_5" in out


def test_slurm_job_function_requeues_itself():
    from submitit.helpers import Checkpointable, DelayedSubmission

    fn = batch.JobFunction("results", download=True)
    assert isinstance(fn, Checkpointable)
    job = _spec_jobs(["fnet"])[0]
    delayed = fn.checkpoint(job, None)  # the same job again, into the same store
    assert isinstance(delayed, DelayedSubmission) and delayed.args == (job, None)
    assert (delayed.function.store, delayed.function.download) == ("results", True)
    again = pickle.loads(pickle.dumps(delayed)).args[0]  # what the job's process receives: the job itself
    assert type(again) is type(job) and again.label == job.label and again.entries[0].key == job.entries[0].key


def test_batch_dry_run_runs_nothing(capsys):
    assert main(["batch", "--profile", "smoke", "--dry-run", "--only", "fnet"]) == 0
    out = capsys.readouterr().out
    assert "would run" in out and "vixnb train fnet" in out
    assert not any(ResultsStore().root.rglob("*.json"))


#: stored runs' names (``<model>-<dataset>-seed<N>-<key>``: a pack carries only the store's shapes)
RUN, BIG = "vit-cifar10-seed0-00000000000000aa", "fnet-cifar10-seed0-00000000000000bb"


def test_pack_keeps_checkpoints_under_the_limit(tmp_path):
    store = ResultsStore()
    folder = store.root / "budget"
    (folder / ".checkpoints").mkdir(parents=True)
    (folder / f"{RUN}.json").write_text("{}")
    (folder / ".checkpoints" / f"{RUN}.pt").write_bytes(b"x" * 1000)
    (folder / ".checkpoints" / f"{BIG}.pt").write_bytes(os.urandom(2 * 1024 * 1024))
    path, packed, left = batch.pack(tmp_path / "out.tar.gz", "budget", limit_mb=1)
    assert f"results/budget/{RUN}.json" in packed and f"results/budget/.checkpoints/{RUN}.pt" in packed
    assert len(left) == 1 and f"{BIG}.pt" in left[0] and "over the 1 MiB limit" in left[0]


def test_seeds_share_one_ensemble_job_only_where_it_is_exact():
    entries = plan.build("budget", only=["fnet", "vit"])
    jobs = batch.jobs_from_plan(entries, ensemble="always")
    by_label = {j.label: j for j in jobs}
    assert "fnet cifar10 seed 0,1,2" in by_label and "fnet tiny-imagenet seed 0,1,2" in by_label
    assert {"vit cifar10 seed 0", "vit cifar10 seed 1", "vit cifar10 seed 2"} <= set(by_label)  # dropout: separate
    assert len(jobs) == 2 + 6
    assert all(len(j.entries) == 1 for j in batch.jobs_from_plan(entries, ensemble="never"))
    # auto: where the plan expects an ensemble (a small step); FNet's at batch 512 is not small: one run a job
    assert all(len(j.entries) == 1 for j in batch.jobs_from_plan(entries, ensemble="auto"))
    assert {e.mode for e in entries if e.model == "fnet"} == {"graphed"}
    blog = plan.build("budget", chapter=["simplified"])
    shaped = [j for j in batch.jobs_from_plan(blog, ensemble="auto") if len(j.entries) > 1]
    assert shaped and all(len({e.group for e in j.entries}) == 1 and len(j.entries) <= plan.MAX_MEMBERS
                          for j in shaped)
    assert any("runs of one shape" in j.label for j in shaped)  # members of other settings (alpha/beta schemes)


def test_an_ensemble_job_stores_every_member_as_its_separate_run(monkeypatch, capsys):
    table = profiles.profiles_file()
    two_seeds = {**table["profiles"], "smoke": {**table["profiles"]["smoke"], "seeds": [0, 1]}}
    monkeypatch.setattr(profiles, "profiles_file", lambda: {**table, "profiles": two_seeds})
    assert main(["batch", "--profile", "smoke", "--executor", "inline", "--ensemble", "always", "--only", "fnet"]) == 0
    assert "fnet synthetic seed 0,1  done" in capsys.readouterr().out
    store = ResultsStore()
    for seed in (0, 1):
        config = runspec.run_config("fnet", profile="smoke", seed=seed)
        stored = store.get(config)
        assert stored["provenance"]["execution"]["mode"] == "ensemble"  # a CPU: the graphed path is the GPU's
        assert stored["provenance"]["execution"]["members"] == 2
        separate = train.train(config, progress=False)
        assert stored["top1"] == pytest.approx(separate["top1"]) and stored["best_epoch"] == separate["best_epoch"]
    assert not any((store.root / "smoke" / ".checkpoints").glob("*.pt"))


def test_batch_trains_a_stale_result_again_and_the_plan_then_holds_it(capsys):
    config = runspec.run_config("fnet", profile="smoke")
    store = ResultsStore()
    store.put(config, _fake_result(config, architecture="0000000000000000"))
    assert _by_model(plan.build("smoke", only=["fnet"]))["fnet"].status == "stale"
    assert main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet"]) == 0
    assert "fnet synthetic seed 0  done" in capsys.readouterr().out
    assert store.get(config)["architecture"] != "0000000000000000"
    assert _by_model(plan.build("smoke", only=["fnet"]))["fnet"].status == "stored"


def test_plan_names_unknown_only_names_and_writes_valid_json(capsys):
    with pytest.raises(ValueError, match=r"only=\['nosuch'\]: not in the 'smoke' plan"):
        plan.build("smoke", only=["nosuch"])
    assert main(["plan", "--profile", "budget", "--json"]) == 0  # an empty store: no throughput, no estimate
    entries = json.loads(capsys.readouterr().out)  # strict JSON: no NaN
    assert any(e["est_gpu_minutes"] is None for e in entries)
    bench = next(e for e in entries if e["kind"] == "bench" and e["name"] == "train")
    assert bench["command"].endswith("bench/train.json") and ResultsStore().root.name in bench["command"]


def test_an_interrupted_job_keeps_its_checkpoint(monkeypatch):
    real = train.train_epoch

    def interrupt_second(*args, epoch, **kwargs):
        if epoch == 2:
            raise SystemExit(-1)  # what submitit's timeout and preemption handler does
        return real(*args, epoch=epoch, **kwargs)

    monkeypatch.setattr(train, "train_epoch", interrupt_second)
    job = _spec_jobs(["fnet"])[0]
    with pytest.raises(SystemExit):
        batch.run_job(job)
    assert ResultsStore().checkpoint_path(runspec.run_config("fnet", profile="smoke")).exists()


def test_pack_brings_back_the_kept_weights_of_the_packed_results(tmp_path):
    folder = ResultsStore().root / "budget"
    (folder / "weights").mkdir(parents=True)
    (folder / f"{RUN}.json").write_text("{}")
    (folder / "weights" / f"{RUN}.pt").write_bytes(b"w")
    (folder / "weights" / f"{BIG}.pt").write_bytes(b"w")  # no result of its own: not packed
    _, packed, _ = batch.pack(tmp_path / "out.tar.gz", "budget")
    assert packed == [f"results/budget/{RUN}.json", f"results/budget/weights/{RUN}.pt"]


def test_pack_leaves_the_previous_checkpoint_out(tmp_path):
    folder = ResultsStore().root / "budget" / ".checkpoints"
    folder.mkdir(parents=True)
    (folder / f"{RUN}.pt").write_bytes(b"x")
    (folder / f"{RUN}.previous.pt").write_bytes(b"x")
    _, packed, _ = batch.pack(tmp_path / "out.tar.gz", "budget")
    assert packed == [f"results/budget/.checkpoints/{RUN}.pt"]


def test_a_run_whose_checkpoint_cannot_come_back_starts_only_if_it_fits_whole():
    job = _spec_jobs(["mlp_mixer"], profile="budget")[0]
    for e in job.entries:
        e.est_gpu_minutes = 10.0
    assert batch.checkpoint_mb(job) > 100  # 8.5 M parameters
    assert batch.least_seconds(job) == pytest.approx(estimates.STARTUP_SECONDS + (600 - estimates.STARTUP_SECONDS) / 10)
    assert batch.least_seconds(job, pack_limit_mb=15) == 600


def test_training_gflop_is_counted_once_and_kept_for_todays_code(tmp_path, monkeypatch):
    """A model's facts (here its FLOPs) are kept between processes for one version of the code: read back, not
    counted, in the next process; counted again for other settings or other code; a file that cannot be read or
    written is a cache miss, never an error."""
    import json
    import sys

    from vixnb.models import facts

    monkeypatch.setenv("VIXNB_CACHE", str(tmp_path))

    def new_process():
        estimates.training_gflop.cache_clear()
        facts.kept_facts.cache_clear()

    def counted(*args, **kwargs):
        raise AssertionError("counted again")

    new_process()
    first = estimates.training_gflop("vit", "cifar10")
    kept = json.loads((tmp_path / facts.FACTS_FILE).read_text())
    assert kept["code"] == facts.code_version() and first in [f["value"] for f in kept["facts"].values()] and first > 0
    new_process()
    with monkeypatch.context() as m:
        m.setattr(sys.modules["vixnb.measure.flops"], "count_ops", counted)  # the module, not the function
        assert estimates.training_gflop("vit", "cifar10") == first  # from the file: nothing counted
        new_process()
        with pytest.raises(AssertionError, match="counted again"):  # other settings: another fact
            estimates.training_gflop("vit", "cifar10", json.dumps({"depth": 2}))
        new_process()
        m.setattr(facts, "code_version", lambda: "other code")
        with pytest.raises(AssertionError, match="counted again"):  # other code: the file is started over
            estimates.training_gflop("vit", "cifar10")
    new_process()
    (tmp_path / facts.FACTS_FILE).write_text("{not json")
    assert estimates.training_gflop("vit", "cifar10") == first  # unreadable: counted again, and the file rewritten
    assert json.loads((tmp_path / facts.FACTS_FILE).read_text())["code"] == facts.code_version()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("VIXNB_CACHE", str(tmp_path / "a-file" / "cache"))  # cannot be written
    new_process()
    assert estimates.training_gflop("vit", "cifar10") == first
    new_process()


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def test_a_fact_is_kept_only_for_a_named_function_and_a_packaged_model(tmp_path, monkeypatch):
    import json

    from torch import nn

    from vixnb.models import facts, model_fact, register_model
    from vixnb.models.registry import MODELS

    monkeypatch.setenv("VIXNB_CACHE", str(tmp_path))
    facts.kept_facts.cache_clear()
    with pytest.raises(ValueError, match="give a module-level function"):
        model_fact(lambda model: 1, "vit")

    @register_model(paper="vix", label="a notebook's model")
    def notebooks_model(*, image_size, num_classes, channels):
        return nn.Linear(channels, num_classes)

    try:
        assert model_fact(parameter_count, "notebooks_model") == 3 * 10 + 10
        assert not (tmp_path / facts.FACTS_FILE).exists()  # it may change with no change to the package: not kept
        assert model_fact(parameter_count, "fnet") > 0
        assert len(json.loads((tmp_path / facts.FACTS_FILE).read_text())["facts"]) >= 1
    finally:
        MODELS.pop("notebooks_model")
        facts.kept_facts.cache_clear()


def test_a_chapter_asking_for_an_unknown_measurement_is_refused_naming_the_file():
    from vixnb.record_kinds import chapter_requests

    with pytest.raises(papers.PaperFileError, match=r"vixnb/papers/vix.yaml: chapter 'vix_table1' asks for an unknown "
                                                     r"measurement 'gpu_memroy'; the known ones: gpu_memory, speed"):
        chapter_requests("vix", {"notebook": "vix_table1", "measure": {"gpu_memroy": "cifar10"}})
    with pytest.raises(papers.PaperFileError, match=r"unknown benchmark 'trian'; the known ones: train, fill"):
        chapter_requests("favor", {"notebook": "efficiency", "bench": ["trian"]})


def test_a_job_stopped_by_the_time_budget_is_paused_not_failed(monkeypatch, tmp_path):
    """The budget ran out inside a job's first epoch (the local executor's timeout): paused, its checkpoint kept for
    the next batch, not a failure; a timeout before the budget's end is still a failure."""
    import submitit

    class Stopped:
        def update_parameters(self, **_):
            pass

        def submit(self, *a, **kw):
            class Handle:
                paths = type("Paths", (), {"stderr": tmp_path / "log.err"})

                def result(self):
                    raise submitit.core.utils.UncompletedJobError(
                        "Job not requeued because: timed-out too many times.")
            return Handle()

    monkeypatch.setattr(batch, "local_executor", lambda folder, **_: Stopped())
    job = _spec_jobs(["fnet"])[0]
    assert batch.execute(job, None, time.time() - 1, "local", tmp_path)["outcome"] == "paused"
    with pytest.raises(RuntimeError, match="timed-out too many times"):
        batch.execute(job, None, time.time() + 3600, "local", tmp_path)
