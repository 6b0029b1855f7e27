import json

import pytest
import torch

from vixnb.cli import main


def test_train_json_last_line(capsys):
    assert main(["train", "fnet", "--profile", "smoke", "--json", "--quiet", "--seed", "2"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("model", "dataset", "profile", "seed", "top1", "top5", "params_paper", "params_true", "epochs", "seconds"):
        assert key in record
    assert (record["model"], record["dataset"], record["profile"], record["seed"]) == ("fnet", "synthetic", "smoke", 2)
    # the paper count is of the model actually trained (the smoke profile trains one-block models)
    assert record["params_paper"] < record["params_true"]


def test_models_table(capsys):
    assert main(["models", "hybrid_vi*"]) == 0
    out = capsys.readouterr().out
    assert "hybrid_vit" in out and "623,178" in out and "754,506" in out and "hybrid_fnet" not in out


def test_errors_are_reported_without_a_traceback(capsys):
    assert main(["train", "vitt", "--profile", "smoke"]) == 2
    assert "valid names" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_profile_on_cpu_says_not_yet_run(capsys):
    assert main(["train", "vit", "--profile", "paper", "--quiet"]) == 2
    assert "not yet run" in capsys.readouterr().err


def test_bench_train_prints_ratios_measured_in_one_run(capsys):
    assert main(["bench", "train", "fnet", "--batch", "4", "--steps", "1", "--warmup", "0", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    rows = json.loads(out[-1])
    assert [r["model"] for r in rows] == ["fnet"]
    row = rows[0]
    assert all(0 < row[k] < float("inf") for k in ("ours_images_per_s", "reference_images_per_s", "ratio"))
    assert "projected Table 1 total" in "\n".join(out)


def test_missing_data_error_names_the_download_flag(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VIXNB_DATA", str(tmp_path / "nothing"))
    assert main(["train", "vit", "--profile", "smoke", "--dataset", "cifar10", "--quiet"]) == 0  # smoke: synthetic
    from vixnb.data import load_split

    with pytest.raises(FileNotFoundError, match="--download"):
        load_split("cifar10", "train")
