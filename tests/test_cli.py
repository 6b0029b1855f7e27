import json

import pytest
import torch

from vixnb.cli import main


def test_train_json_last_line(capsys):
    assert main(["train", "fnet", "--profile", "smoke", "--json", "--quiet", "--seed", "2"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("model", "dataset", "profile", "seed", "top1", "top5", "params_paper", "params_true", "epochs",
                "seconds"):
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
    assert main(["train", "vit", "--profile", "paper", "--quiet"]) == 1  # an error, not a usage error
    assert "not yet run" in (err := capsys.readouterr().err) and "needs a CUDA GPU" in err and "Traceback" not in err


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


def _fresh_python(code):
    """Run ``code`` in a fresh interpreter with this checkout first on the path; return its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_models_imports_neither_matplotlib_nor_pandas():
    out = _fresh_python("import sys\nfrom vixnb.cli import main\nassert main(['models', 'vit']) == 0\n"
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'pandas')))")
    lines = out.strip().splitlines()
    assert "530,442" in lines[1] and "ViT" in lines[1] and "vix" in lines[1]
    assert lines[-1] == "[]"


def test_building_the_parser_and_importing_vixnb_import_no_torch():
    out = _fresh_python("import sys\nimport vixnb\nfrom vixnb.cli import parser\nparser()\n"
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas', 'matplotlib')))")
    assert out.strip() == "[]"


def test_the_parser_offers_the_choices_of_the_modules_it_runs():
    from vixnb import cli
    from vixnb.layers.nystrom import COMPILE_MODES
    from vixnb.measure import DTYPES
    from vixnb.measure.flops import GPUS
    from vixnb.plan.plan import ORDERS
    from vixnb.runs.spec import OPTIMIZERS, PRECISIONS, PROTOCOLS, STOPS
    from vixnb.results.pack import TRAVEL_MB

    assert cli.TRAVEL_MB == TRAVEL_MB
    assert sorted(cli.DTYPE_NAMES) == sorted(DTYPES)
    assert cli.COMPILE_MODES == COMPILE_MODES
    assert (cli.PROTOCOLS, cli.OPTIMIZERS, cli.PRECISIONS, cli.STOPS) == (PROTOCOLS, OPTIMIZERS, PRECISIONS, STOPS)
    assert (cli.ORDERS, cli.GPUS) == (ORDERS, tuple(GPUS))


def test_models_shows_label_and_paper(capsys):
    assert main(["models", "vit"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "label", "paper", "paper", "params", "true", "params"]
    assert out[1].split() == ["vit", "ViT", "vix", "530,442", "661,770"]


def test_vixnb_counts_lazily():
    import vixnb

    assert "count_params" in dir(vixnb) and vixnb.count_params is vixnb.models.counting.count_params
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        vixnb.nothing  # noqa: B018


def test_plan_refuses_a_paper_file_with_an_unknown_key_in_one_line(paper_dir, capsys):
    path = paper_dir / "shaped.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("    keep_weights:", "    keep_weight:"), encoding="utf-8")
    assert main(["plan", "--profile", "budget"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("vixnb plan: error: vixnb/papers/shaped.yaml: book[0] has an unknown key 'keep_weight'; "
                          "allowed: notebook, ")
