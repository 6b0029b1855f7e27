"""Precision by device: bf16 autocast where a GPU does bfloat16 natively, fp16 autocast with a gradient scaler below
(Colab's T4, Kaggle's P100 and T4), fp32 on a CPU; a run's precision is part of its identity, so a T4's fp16 run is
stored beside the H100's bf16 one, never in its place."""
import pytest
import torch

from vixnb.runs import make as runs
from vixnb.engine.ensemble import can_ensemble
from vixnb.results.store import config_key
from vixnb.runs.spec import RunSpec, run_config
from vixnb.results import ResultsStore
from vixnb.engine.precision import amp_dtype, machine_precision
from vixnb.engine.train import autocasts

TINY = dict(depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64)


def test_amp_dtype_by_compute_capability():
    assert (amp_dtype((9, 0)) is torch.bfloat16 and amp_dtype((8, 0)) is torch.bfloat16
            and amp_dtype((8, 9)) is torch.bfloat16)
    assert amp_dtype((7, 5)) is torch.float16 and amp_dtype((6, 0)) is torch.float16
    assert amp_dtype(None) is None


def test_a_bf16_run_becomes_fp16_only_on_a_gpu_without_bfloat16():
    assert machine_precision("bf16", (7, 5)) == "fp16" and machine_precision("bf16", (6, 0)) == "fp16"
    assert machine_precision("bf16", (9, 0)) == "bf16"
    assert machine_precision("fp32", (7, 5)) == "fp32"
    if not torch.cuda.is_available():
        assert machine_precision("bf16") == "bf16"  # a CPU: nothing is trained in bf16 here, the name stays


def test_precision_is_part_of_a_runs_identity_and_checked():
    bf16, fp16 = (run_config("vit", profile="budget", precision=p) for p in ("bf16", "fp16"))
    assert bf16["precision"] == "bf16" and fp16["precision"] == "fp16" and config_key(bf16) != config_key(fp16)
    with pytest.raises(ValueError, match=r"precision='fp8': use one of fp32, bf16, fp16"):
        run_config("vit", profile="budget", precision="fp8")


def test_fp16_autocasts_and_scales_the_loss_on_a_gpu_only():
    config = run_config("vit", profile="smoke", precision="fp16")
    autocast, loss_autocast, scaler = autocasts(config, torch.device("cpu"))
    with autocast():
        assert torch.get_autocast_dtype("cpu") == torch.float16
    assert not scaler.is_enabled()  # no gradient scaler on a CPU
    bf16 = autocasts(run_config("vit", profile="smoke", precision="bf16"), torch.device("cpu"))
    with bf16[0]():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16


def test_an_fp16_ensemble_is_refused():
    exact, why = can_ensemble(run_config("vit", profile="smoke", precision="fp16"))
    assert not exact and why.startswith("precision fp16: one GradScaler would skip every member's step")


def test_a_machine_without_bfloat16_trains_and_stores_the_fp16_run(monkeypatch, capsys):
    monkeypatch.setattr(runs, "machine_precision", lambda precision: "fp16" if precision == "bf16" else precision)
    result = runs.run(RunSpec.of("vit", profile="smoke", precision="bf16", epochs=1, **TINY), progress=False)
    assert result["status"] == "done" and result["config"]["precision"] == "fp16"
    store = ResultsStore()
    assert store.get(run_config("vit", profile="smoke", precision="fp16", epochs=1, **TINY)) is not None
    assert store.get(run_config("vit", profile="smoke", precision="bf16", epochs=1, **TINY)) is None
    assert "this GPU has no native bfloat16; training the fp16 run instead" in capsys.readouterr().err


def test_the_plan_of_a_machine_without_bfloat16_asks_its_fp16_runs(monkeypatch):
    from vixnb.plan import plan

    monkeypatch.setattr(plan, "machine_precision", lambda precision: "fp16" if precision == "bf16" else precision)
    # (a question's fp32 arm sets its own precision: left out)
    ours = [e for e in plan.build("budget", chapter=["simplified"], machine=True) if e.job == "train"
            and e.settings.get("precision") != "fp32"]
    pages = [e for e in plan.build("budget", chapter=["simplified"]) if e.job == "train"
             and e.settings.get("precision") != "fp32"]
    assert {e.config["precision"] for e in ours} == {"fp16"} and {e.config["precision"] for e in pages} == {"bf16"}
    assert all(e.command.endswith("--precision fp16") or "--precision fp16 " in e.command for e in ours)
