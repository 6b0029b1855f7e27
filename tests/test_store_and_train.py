"""Results store round trip and atomicity; the engine's determinism, NaN handling and load-if-present."""
import json
import subprocess
import sys

import pytest
import torch

from vixnb import train as engine
from vixnb.profiles import run_config
from vixnb.store import ResultsStore

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
    code = ("import sys; from vixnb.store import ResultsStore; from vixnb.profiles import run_config\n"
            "s = ResultsStore(sys.argv[1]); c = run_config('vit', profile='smoke')\n"
            "for i in range(30): s.put(c, {'status': 'done', 'writer': sys.argv[2], 'pad': 'x' * 100000})")
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
    with pytest.raises(ValueError, match="delete it and re-run"):
        store.get(config)


def test_training_is_deterministic_on_cpu():
    config = run_config("vit", profile="smoke", seed=1, **TINY)
    a, b = engine.train(config, progress=False), engine.train(config, progress=False)
    strip = lambda r: [{k: v for k, v in h.items() if k != "seconds"} for h in r["history"]]
    assert strip(a) == strip(b) and a["top1"] == b["top1"]
    assert a["provenance"]["seed"] == 1 and a["provenance"]["profile"] == "smoke"
    assert len(a["history"]) == config["epochs"]
    assert a["top1"] == max(h["test_top1"] for h in a["history"])  # best test epoch, authors' protocol


def test_training_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    engine.train(run_config("fnet", profile="smoke", **TINY), progress=False)
    assert torch.equal(before, torch.random.get_rng_state())


def test_nan_loss_stops_the_run_and_stores_nothing(monkeypatch, isolated_results):
    monkeypatch.setattr(engine, "normalize", lambda x: torch.full(x.shape, float("nan")))
    with pytest.raises(FloatingPointError, match="no result stored"):
        engine.run("fnet", profile="smoke", progress=False, **TINY)
    assert not list(isolated_results.rglob("*.json"))


def test_run_loads_stored_results_and_recompute_forces_training(monkeypatch):
    first = engine.run("fnet", profile="smoke", progress=False, **TINY)
    monkeypatch.setattr(engine, "train", lambda *a, **k: pytest.fail("trained although a stored result exists"))
    assert engine.run("fnet", profile="smoke", progress=False, **TINY)["top1"] == first["top1"]
    monkeypatch.setattr(engine, "train", lambda config, **k: {"status": "done", "top1": -1.0})
    assert engine.run("fnet", profile="smoke", recompute=True, progress=False, **TINY)["top1"] == -1.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_gpu_profile_on_cpu_is_not_yet_run():
    result = engine.run("vit", profile="paper")
    assert result["status"] == "not yet run" and "CUDA" in result["reason"]


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="valid profiles: budget, paper, smoke"):
        run_config("vit", profile="full")
