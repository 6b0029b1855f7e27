"""vixnb.report's pages from stored results: nothing trained or measured when ``stored_only``/``train_missing``
say so, even where a GPU is (faked as) available; the banner and provenance line of such pages."""
import pytest
import torch

from vixnb import measure as M
from vixnb import report
from vixnb import train as engine
from vixnb.profiles import run_config
from vixnb.results import ResultsStore


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch says a GPU is there; training or measuring anything fails the test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(engine, "train", lambda *a, **k: pytest.fail("trained although nothing may be trained"))
    monkeypatch.setattr(M, "gpu_memory_column", lambda *a, **k: pytest.fail("measured although stored_only"))


def _done(model, profile, top1):
    config = run_config(model, profile=profile)
    ResultsStore().put(config, {"status": "done", "top1": top1, "top5": 99.0,
                                "provenance": {"device": "fake GPU", "commit": "abc123", "seed": 0,
                                               "finished": "2025-03-04T05:06:07Z"}})


@pytest.mark.parametrize("profile", ["smoke", "budget"])
def test_collect_runs_with_compute_never_only_reads_the_store(fake_gpu, profile):
    _done("fnet", profile, 42.0)
    for _ in range(2):
        vit, fnet = report.collect_runs(["vit", "fnet"], dataset="cifar10", profile=profile, seeds=[0],
                                        compute="never", progress=False)
        assert vit["status"] == "not yet run" and "no stored result" in vit["reason"]
        assert fnet["status"] == "done" and fnet["top1"] == 42.0


def test_gpu_memory_table_stored_only_reads_the_saved_measurement(fake_gpu, monkeypatch):
    class Measured(Exception):
        pass

    def measuring(*a, **k):
        raise Measured

    table = report.gpu_memory_table(["vit"], profile="budget", stored_only=True)
    assert table.loc["ViT", "ours"].startswith("not measured") and table.attrs["provenance"] is None
    M.save_measurements({"rows": {"vit": {report.BATCH64_COLUMN: 1.5}},
                         "provenance": {"device": "fake GPU", "commit": "abc123", "measured": "2025-03-04T05:06:07Z"}},
                        "budget", "vix-gpu-memory-cifar10-b64")
    monkeypatch.setattr(M, "save_measurements", lambda *a, **k: pytest.fail("saved although stored_only"))
    table = report.gpu_memory_table(["vit"], profile="budget", stored_only=True)
    assert table.loc["ViT", report.BATCH64_COLUMN] == 1.5 and table.attrs["provenance"]["device"] == "fake GPU"
    monkeypatch.setattr(M, "gpu_memory_column", measuring)  # without stored_only this machine would measure
    with pytest.raises(Measured):
        report.gpu_memory_table(["vit"], profile="budget")


def test_banner_of_a_page_rendered_from_the_store():
    assert "results store" not in report.banner("budget")
    empty = report.banner("budget", stored_only=True)
    assert empty.startswith("> **Profile `budget`.**")
    assert ("Rendered from the results store (`results/budget/`): nothing was trained or measured when this page "
            "was built; each number's provenance (device, commit, seed, date) is shown with it.") in empty
    assert "holds no `budget` result yet" in empty and all(line.startswith(">") for line in empty.splitlines())
    _done("vit", "budget", 50.0)
    held = report.banner("budget", stored_only=True)
    assert "Rendered from the results store" in held and "holds no" not in held
    assert "holds no `paper` result yet" in report.banner("paper", stored_only=True)


def test_provenance_line_names_the_dates():
    _done("vit", "budget", 50.0)
    line = report.provenance_line(report.collect_runs(["vit"], dataset="cifar10", profile="budget", seeds=[0],
                                                      compute="never", progress=False))
    assert "device: fake GPU" in line and "commit: abc123" in line and "seed: 0" in line and "date: 2025-03-04" in line
    measured = {"provenance": {"device": "fake GPU", "measured": "2025-03-05T00:00:00Z"}}
    assert "date: 2025-03-05" in report.provenance_line([measured], profile="budget")


def test_hybrid_gains_subtract_plain_from_hybrid_ours_and_paper():
    import pandas as pd

    table = pd.DataFrame({"top-1 best": [50.0, 70.0, 40.0, "—"], "paper top-1": [56.81, 73.94, 50.87, 64.34]},
                         index=["ViT", "Hybrid ViT", "FNet", "Hybrid FNet"]).astype(object)
    gains = report.hybrid_gains(table)
    assert list(gains.index) == ["ViT", "FNet"]
    assert gains.loc["ViT", "gain"] == 20.0 and gains.loc["ViT", "paper gain"] == pytest.approx(17.13)
    assert gains.loc["FNet", "gain"] == "—" and gains.loc["FNet", "paper gain"] == pytest.approx(13.47)


def test_gpu_memory_table_shows_memory_and_the_measurement_note(isolated_results):
    rows = {"vit": {"GPU GB reserved, authors (fp32)": 9.4, "step ms, authors (fp32)": 40.0}}
    M.save_measurements({"rows": rows, "provenance": {"device": "fake GPU", "commit": "abc", "note": "shared GPU."}},
                        "budget", "vix-gpu-memory-cifar10-b64")
    frame = report.gpu_memory_table(["vit"], profile="budget", stored_only=True)
    assert list(frame.columns) == ["paper GPU GB", "GPU GB reserved, authors (fp32)"]
    assert report.provenance_line([frame.attrs], profile="budget").endswith("Note: shared GPU.")
