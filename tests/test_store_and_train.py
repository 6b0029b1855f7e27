"""Results store round trip and atomicity; the engine's determinism, NaN handling and load-if-present."""
import json
import subprocess
import sys

import pytest
import torch

from vixnb.engine import build, steps
from vixnb.engine import train as engine
from vixnb.runs.spec import RunSpec, run_config
from vixnb.results import ResultsStore, StoreError
from vixnb.engine.train import without_timings
from vixnb.runs import make as runs
from vixnb.engine import augment

TINY = dict(depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64)


def test_store_round_trip(tmp_path):
    store = ResultsStore(tmp_path)
    config = run_config("fnet", profile="smoke", seed=3)
    assert store.get(config) is None
    path = store.put(config, {"status": "done", "top1": 12.5})
    assert path.parent.name == "smoke" and path.name.startswith("fnet-synthetic-seed3-")
    assert store.get(config) == {"status": "done", "top1": 12.5, "config": config}
    assert store.get(run_config("fnet", profile="smoke", seed=4)) is None
    assert store.results("smoke") == [store.get(config)]


def test_store_write_is_atomic_under_a_crash(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    config = run_config("vit", profile="smoke")
    store.put(config, {"status": "done", "top1": 1.0})

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(json, "dump", crash)
    with pytest.raises(KeyboardInterrupt):
        store.put(config, {"status": "done", "top1": 2.0})
    monkeypatch.undo()
    assert store.get(config)["top1"] == 1.0
    assert [p.name for p in (tmp_path / "smoke").iterdir()] == [store.path(config).name]


def test_two_processes_writing_the_same_run_leave_one_whole_file(tmp_path):
    code = ("import sys; from vixnb.results import ResultsStore; from vixnb.runs.spec import run_config\n"
            "s = ResultsStore(sys.argv[1]); c = run_config('vit', profile='smoke')\n"
            "for i in range(30): s.put(c, {'status': 'done', 'top1': 50.0, 'writer': sys.argv[2], "
            "'pad': 'x' * 100000})")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), w]) for w in "ab"]
    assert all(p.wait() == 0 for p in procs)
    store = ResultsStore(tmp_path)
    assert store.get(run_config("vit", profile="smoke"))["writer"] in "ab"
    assert len(list((tmp_path / "smoke").iterdir())) == 1


def test_store_refuses_a_file_whose_config_does_not_match(tmp_path):
    store = ResultsStore(tmp_path)
    config = run_config("vit", profile="smoke")
    path = store.put(config, {"status": "done"})
    path.write_text(json.dumps({"status": "done", "config": {**config, "seed": 9}}))
    with pytest.raises(StoreError, match="holds a different configuration than its name says; delete it and run again"):
        store.get(config)


def test_training_is_deterministic_on_cpu():
    config = run_config("vit", profile="smoke", seed=1, **TINY)
    a, b = engine.train(config, progress=False), engine.train(config, progress=False)
    strip = lambda r: without_timings(r["history"])
    assert strip(a) == strip(b) and a["top1"] == b["top1"]
    assert a["provenance"]["seed"] == 1 and a["provenance"]["profile"] == "smoke"
    assert len(a["history"]) == config["epochs"]
    assert a["top1"] == max(h["select_top1"] for h in a["history"])  # best test epoch, authors' protocol


def test_training_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    engine.train(run_config("fnet", profile="smoke", **TINY), progress=False)
    assert torch.equal(before, torch.random.get_rng_state())


def test_nan_loss_stops_the_run_and_stores_nothing(monkeypatch, isolated_results):
    monkeypatch.setattr(steps, "normalize", lambda x: torch.full(x.shape, float("nan")))
    with pytest.raises(FloatingPointError, match="no result stored"):
        runs.run(RunSpec.of("fnet", profile="smoke", **TINY), progress=False)
    assert not list(isolated_results.rglob("*.json"))


def test_run_loads_stored_results_and_compute_always_forces_training(monkeypatch):
    first = runs.run(RunSpec.of("fnet", profile="smoke", **TINY), progress=False)
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained although a stored result exists"))
    assert runs.run(RunSpec.of("fnet", profile="smoke", **TINY), progress=False)["top1"] == first["top1"]
    monkeypatch.setattr(runs, "train", lambda config, **k: {"status": "done", "top1": -1.0})
    assert runs.run(RunSpec.of("fnet", profile="smoke", **TINY), compute="always", progress=False)["top1"] == -1.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_profile_on_cpu_is_not_yet_run():
    result = runs.run(RunSpec.of("vit", profile="paper"))
    assert result["status"] == "not yet run" and "CUDA" in result["reason"]


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="valid profiles: budget, paper, smoke"):
        run_config("vit", profile="full")


def _metrics(result):
    return without_timings(result["history"]), result["top1"], result["top5"]


def test_resume_through_the_dualopt_switch_and_post_training(tmp_path, monkeypatch, crash_after_checkpoint):
    """Stop after every epoch (a crash), resume from the checkpoint, and end exactly as an uninterrupted run:
    through the AdamW -> SGD switch and into the post-training stage. Loaded RNG states stay on the CPU."""
    config = run_config("vit", profile="smoke", epochs=3, optimizer="dualopt", randaugment=[1, 5],
                        post_train_epochs=2, **TINY)
    config["dualopt"] = {**config["dualopt"], "patience": 1}
    scores = [50.0, 40.0, 45.0, 55.0, 30.0]

    def scripted(model, *a, **k):
        return scripted.values.pop(0), 90.0

    monkeypatch.setattr(steps, "evaluate", scripted)
    scripted.values = list(scores)
    reference = engine.train(config, progress=False)

    ckpt, result = tmp_path / "run.pt", None
    Crash = crash_after_checkpoint()
    for _ in range(len(scores) + 1):  # five crashes, one per epoch, then a run that only finishes
        scripted.values = list(scores[len(torch.load(ckpt, weights_only=True)["history"]):] if ckpt.exists()
                               else scores)
        try:
            result = engine.train(config, progress=False, checkpoint=ckpt)
        except Crash:
            state = torch.load(ckpt, map_location="cpu", weights_only=True)
            assert state["cpu_rng"].device.type == "cpu" and state["cpu_rng"].dtype == torch.uint8
    stages = [(h["stage"], h["phase"]) for h in reference["history"]]
    assert stages == [("main", "adamw"), ("main", "adamw"), ("main", "sgd"), ("post", "sgd"), ("post", "sgd")]
    assert result is not None and _metrics(result) == _metrics(reference)


def test_resume_after_kill_gives_identical_metrics(tmp_path):
    """A run killed (SIGKILL) after its first epoch resumes from the checkpoint and ends exactly as an
    uninterrupted run."""
    config = run_config("vit", profile="smoke", epochs=3, **TINY)
    reference = engine.train(config, progress=False)
    ckpt = tmp_path / "run.pt"
    code = (
        "import os, sys, signal, torch, vixnb.engine.train as t\n"
        "from vixnb.runs.spec import run_config\n"
        f"config = run_config('vit', profile='smoke', epochs=3, **{TINY!r})\n"
        "real = t.save_checkpoint\n"
        "def save_then_die(path, state):\n"
        "    real(path, state)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "t.save_checkpoint = save_then_die\n"
        "t.train(config, progress=False, checkpoint=sys.argv[1])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(ckpt)])
    assert proc.returncode == -9 and ckpt.exists()
    assert len(torch.load(ckpt, weights_only=True)["history"]) == 1
    resumed = engine.train(config, progress=False, checkpoint=ckpt)
    assert _metrics(resumed) == _metrics(reference)


def test_dualopt_switch_follows_the_rule():
    switch = engine.DualOptSwitch(patience=3)
    sequence = [10, 20, 20, 19, 18, 17, 21, 25, 25, 24, 23, 22]
    actions = [switch.update(a) for a in sequence]
    # ties (20 after 20, 25 after 25) reset the count; 3 epochs below best -> switch, then -> stop
    assert actions == ["continue"] * 5 + ["switch"] + ["continue"] * 5 + ["stop"]
    assert switch.phase == "sgd"


def test_dualopt_run_reloads_best_and_continues_with_sgd(monkeypatch):
    config = run_config("fnet", profile="smoke", epochs=6, optimizer="dualopt", **TINY)
    config["dualopt"] = {**config["dualopt"], "patience": 1}
    scores = iter([50.0, 40.0, 45.0, 60.0, 10.0, 10.0])
    snapshots, optimizers = [], []

    def fake_evaluate(model, *a, **k):
        snapshots.append({n: p.detach().clone() for n, p in model.state_dict().items()})
        return next(scores), 90.0

    real_optimizer = engine.make_optimizer

    def spy_optimizer(model, config, phase):
        optimizers.append(phase)
        opt = real_optimizer(model, config, phase)
        # the moment SGD is built, the model must hold the best (epoch-1) weights again
        if phase == "sgd":
            assert all(torch.equal(v, snapshots[0][n]) for n, v in model.state_dict().items())
        return opt

    monkeypatch.setattr(steps, "evaluate", fake_evaluate)
    monkeypatch.setattr(build, "make_optimizer", spy_optimizer)
    result = engine.train(config, progress=False)
    assert optimizers == ["adamw", "sgd"]
    phases = [h["phase"] for h in result["history"]]
    # 40 < 50: patience 1 spent -> reload the best, switch; 45 < 50 (best carries over) -> stop
    assert phases == ["adamw", "adamw", "sgd"] and result["epochs_run"] == 3
    assert result["history"][1].get("switched_to_sgd") and result["top1"] == 50.0


def test_fixed_protocol_selects_on_validation_and_tests_once(monkeypatch):
    config = run_config("fnet", profile="smoke", epochs=3, protocol="fixed", **TINY)
    sizes = []

    def fake_evaluate(model, images, labels, **kwargs):
        sizes.append(len(images))
        return [70.0, 80.0, 75.0, 55.0][len(sizes) - 1], 99.0

    monkeypatch.setattr(steps, "evaluate", fake_evaluate)
    result = engine.train(config, progress=False)
    # three validation evaluations on the held-out images (8), then one test evaluation on the test set (16)
    assert config["val_size"] != config["test_size"] and sizes == [config["val_size"]] * 3 + [config["test_size"]]
    assert result["best_epoch"] == 2 and result["val_top1"] == 80.0 and result["top1"] == 55.0


def test_randaugment_only_in_training_then_post_training_without_it(monkeypatch):
    config = run_config("fnet", profile="smoke", epochs=2, randaugment=[2, 9], post_train_epochs=1, **TINY)
    from vixnb.data import load_split

    test_images = load_split("synthetic", "test", size=config["test_size"])[0]
    calls, evaluated = [], []
    real_augment, real_evaluate = augment.augment_batch, steps.evaluate

    def spy_augment(images, randaugment):
        out = real_augment(images, randaugment)
        calls.append((randaugment, torch.equal(out, images)))
        return out

    def spy_evaluate(model, images, labels, **kwargs):
        evaluated.append(torch.equal(images, test_images))
        return real_evaluate(model, images, labels, **kwargs)

    monkeypatch.setattr(steps, "augment_batch", spy_augment)
    monkeypatch.setattr(steps, "evaluate", spy_evaluate)
    result = engine.train(config, progress=False)
    steps_per_epoch = -(-config["train_size"] // config["batch_size"])
    assert [h["stage"] for h in result["history"]] == ["main", "main", "post"]
    assert len(calls) == 2 * steps_per_epoch  # augmented batches in the main stage only
    assert all(ra == [2, 9] for ra, _ in calls) and not all(same for _, same in calls)
    assert evaluated == [True, True, True]  # evaluation always sees the un-augmented images


def test_authors_quirks_and_speed_switches_are_explicit_config():
    default = run_config("vit", profile="paper")
    assert (default["amp_loss_only"], default["eval_mode"], default["compile"],
            default["precision"]) == (False, True, False, "fp32")
    quirks = run_config("vit", profile="paper", amp_loss_only=True, eval_mode=False)
    assert (quirks["amp_loss_only"], quirks["eval_mode"]) == (True, False)
    assert run_config("vit", profile="paper", protocol="fixed")["precision"] == "bf16"
    assert run_config("vit", profile="smoke", protocol="fixed")["precision"] == "fp32"
    assert run_config("vit", profile="budget")["precision"] == "bf16"  # the cheap GPU look; the paper profile is fp32
    assert len({ResultsStore().path(c).name for c in (default, quirks)}) == 2


def test_without_eval_mode_dropout_stays_on_during_evaluation(monkeypatch):
    """ViT carries the authors' dropout 0.25; without eval mode two evaluations of the same weights differ."""
    seen = []
    real = steps.evaluate

    def spy(model, images, labels, **kwargs):
        with torch.no_grad():
            first, second = (model(steps.normalize(images[:4])) for _ in range(2))
        seen.append((model.training, torch.equal(first, second)))
        return real(model, images, labels, **kwargs)

    monkeypatch.setattr(steps, "evaluate", spy)
    config = run_config("vit", profile="smoke", epochs=1, **TINY)
    assert (config["model_overrides"]["dropout"] == 0.25
            and config["model_overrides"]["mixer_options"]["dropout"] == 0.25)
    engine.train({**config, "eval_mode": False}, progress=False)
    engine.train(config, progress=False)
    assert seen == [(True, False), (False, True)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to compare with the CPU path")
def test_cpu_and_gpu_paths_agree_on_a_tiny_model():
    config = run_config("fnet", profile="smoke", epochs=1, batch_size=32, **TINY)  # one batch: the order cannot differ
    cpu, gpu = engine.train(config, progress=False, device="cpu"), engine.train(config, progress=False, device="cuda")
    assert abs(cpu["history"][0]["train_loss"] - gpu["history"][0]["train_loss"]) < 1e-3


def test_channels_last_switch_keeps_the_math():
    config = run_config("hybrid_fnet", profile="smoke", epochs=1, **TINY)
    plain = engine.train(config, progress=False)
    fast = engine.train({**config, "channels_last": True}, progress=False)
    assert abs(plain["history"][0]["train_loss"] - fast["history"][0]["train_loss"]) < 1e-4
