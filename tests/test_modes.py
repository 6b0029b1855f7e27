"""The engine's modes and the probe that picks one on a lent machine (``vixnb.engine.modes``, ``vixnb batch --probe``):
a failed check switches its mode off and the batch trains in another, naming it; the choice is the fastest passing
mode; each result's provenance names its mode; the session script runs end to end on the CPU. Speed itself is the
probe's and the benchmark's to measure on a GPU, never a test's."""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from vixnb.cli import main
from vixnb.engine import modes, steps
from vixnb.engine.modes import choose
from vixnb.plan import plan
from vixnb.results import ResultsStore
from vixnb.runs.spec import run_config

ROOT = Path(__file__).resolve().parents[1]


def _row(mode, rate, passed=True):
    return {"mode": mode, "images_per_s": rate, "passed": passed}


def test_the_choice_is_the_fastest_passing_mode_and_eager_where_nothing_else_passed():
    rows = [_row("eager", 100), _row("graphed", 900), _row("ensemble", 2000), _row("graphed ensemble", 9000),
            _row("streams", 1500)]
    assert choose(rows) == {"single": "graphed", "group": "graphed ensemble"}
    rows[3]["passed"] = False  # the graphed ensemble's check failed: off
    assert choose(rows) == {"single": "graphed", "group": "ensemble"}
    assert choose([_row("eager", 100), _row("graphed", None, False), _row("ensemble", 50)]) == \
        {"single": "eager", "group": "eager"}  # an ensemble slower than one run after another: run by run
    assert choose([]) == {"single": "eager", "group": "eager"}  # nothing measured: eager, never no training


def _corrupt_graphed_steps(monkeypatch):
    """The graphed path of a run's step made wrong on purpose: each replayed step nudges a weight."""
    real = steps.Step.full_batch

    def wrong(self, sample):
        real(self, sample)
        if isinstance(self, steps.TrainStep):
            with torch.no_grad():
                next(self.model.parameters()).add_(1e-3)

    monkeypatch.setattr(steps.Step, "full_batch", wrong)


def test_a_failed_check_switches_its_mode_off_and_the_batch_trains_in_another_saying_why(monkeypatch, capsys,
                                                                                         tmp_path):
    _corrupt_graphed_steps(monkeypatch)
    choice = tmp_path / "engine_choice.json"
    code = main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet", "--probe", str(choice),
                 "--probe-steps", "8", "--ensemble", "never"])
    out = capsys.readouterr().out
    assert code == 0, out
    record = json.loads(choice.read_text())
    rows = {r["mode"]: r for r in record["rows"]}
    assert set(rows) == set(modes.MODES)
    assert not rows["graphed"]["passed"] and "strays from eager" in rows["graphed"]["why"]
    assert "graphed" in record["failed"] and rows["eager"]["passed"]
    assert record["chosen"]["single"] == "eager"
    assert "switched off: graphed (member 0 strays from eager" in out  # the session log names the failed check
    assert "fnet synthetic seed 0" in out and " done " in out  # and the batch trained anyway
    stored = ResultsStore().get(run_config("fnet", profile="smoke"))
    assert stored["provenance"]["execution"]["mode"] == "eager"  # the mode that made it


def test_a_probe_that_fails_as_a_whole_never_stops_the_batch(monkeypatch, capsys, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("no CUDA context")

    monkeypatch.setattr("vixnb.plan.batch.probe_modes", broken)
    assert main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet", "--probe",
                 str(tmp_path / "choice.json"), "--ensemble", "never"]) == 0
    out = capsys.readouterr().out
    assert "the engine probe failed (no CUDA context); training eager" in out
    assert json.loads((tmp_path / "choice.json").read_text())["chosen"] == {"single": "eager", "group": "eager"}
    assert ResultsStore().get(run_config("fnet", profile="smoke"))["provenance"]["execution"]["mode"] == "eager"


def test_an_earlier_probes_choice_is_read_and_a_file_that_is_not_one_is_named(tmp_path, capsys):
    bad = tmp_path / "choice.json"
    bad.write_text(json.dumps({"rows": []}))
    assert main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet", "--engine-choice",
                 str(bad)]) == 2
    assert f"--engine-choice {bad}: not a probe's record" in capsys.readouterr().err


def test_the_plan_says_each_runs_group_and_expected_mode():
    entries = [e for e in plan.as_json(plan.build("budget")) if e["kind"] == "train"]
    assert all({"group", "mode"} <= set(e) for e in entries)
    first = next(e for e in entries if e["name"] == "exp2_simplified" and e["settings"].get("width") == 128)
    w128 = [e for e in entries if e["group"] == first["group"]]  # the blog's width-128 depth-8 runs: 5 schemes x 3
    assert first["group"] and len(w128) == 15 and {e["seed"] for e in w128} == {0, 1, 2}
    assert {e["settings"].get("alpha_beta", "uniform") for e in w128} == {"uniform", "identity", "attention",
                                                                          "dynamic", "inverse-dynamic"}
    assert {e["mode"] for e in w128 if e["status"] != "stored"} == {"graphed ensemble"}
    vit = [e for e in entries if e["model"] == "vit"]  # the authors' dropout: alone, never an ensemble
    assert vit and all(e["group"] == "" and e["mode"] == "graphed" for e in vit)


def test_the_session_script_runs_the_probe_and_a_short_batch_on_the_cpu(tmp_path):
    """``tools/gpu_session.sh --dry-run``: the probe's table (every mode, its check, its speed, the choice), a short
    batch in the chosen modes, the pack and ``trained N s of M s``, end to end on the CPU, into a scratch store."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "VIXNB_RESULTS": str(tmp_path / "results"),
           "DRY_BUDGET_S": "240"}
    done = subprocess.run(["bash", "tools/gpu_session.sh", "--dry-run", "--max-jobs", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    log = (tmp_path / "session.log").read_text()
    assert done.returncode == 0, log + done.stderr[-2000:]
    for mode in modes.MODES:
        assert f"  {mode} " in log
    assert "chosen" in json.loads((tmp_path / "engine_choice.json").read_text())
    assert "engine: " in log and "trained " in log and " s of " in log and "batch ended with 0" in log
    assert (tmp_path / "results.tar.gz").exists() and not (ROOT / "results" / "smoke" / "engine_choice.json").exists()


def test_the_plans_estimates_refit_from_a_gpus_probe_of_the_modes(isolated_results):
    import shutil

    shutil.copytree(ROOT / "results", isolated_results, dirs_exist_ok=True)  # the stored runs' timings (eager)
    w128 = lambda entries: next(e for e in entries if e.job == "train" and e.mode == "graphed ensemble"  # noqa: E731
                                and e.status == "missing" and "stored run" in e.basis)
    before = w128(plan.build("budget"))
    assert "graphed ensemble expected, timed eager (no GPU's probe of the modes stored yet)" in before.basis
    rows = [{"mode": "eager", "images_per_s": 1000.0, "passed": True},
            {"mode": "graphed", "images_per_s": 4000.0, "passed": True},
            {"mode": "graphed ensemble", "images_per_s": 20000.0, "passed": True},
            {"mode": "streams", "images_per_s": 1.0, "passed": False}]
    ResultsStore().save_record("bench", "engine-probe-nvidia-h200", {
        "device": "NVIDIA H200", "rows": rows, "provenance": {"finished": "2026-11-29T10:00:00Z"}})
    after = next(e for e in plan.build("budget") if e.key == before.key)
    assert "graphed ensemble: 20.0x eager as a GPU's probe measured it" in after.basis
    assert after.est_gpu_minutes < before.est_gpu_minutes / 4  # the training part at a twentieth
