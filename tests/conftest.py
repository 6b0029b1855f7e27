import pytest


@pytest.fixture(autouse=True)
def isolated_results(tmp_path, monkeypatch):
    """Every test gets its own results store, so nothing reads or writes the repository's results/."""
    monkeypatch.setenv("VIXNB_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture
def paper_dir(tmp_path, monkeypatch):
    """Paper files read from a temporary folder (a copy of the package's ``papers/``)."""
    import shutil
    from importlib import resources

    from vixnb import papers

    folder = tmp_path / "papers"
    shutil.copytree(resources.files("vixnb").joinpath("papers"), folder)
    monkeypatch.setattr(papers, "_file", lambda key: folder / f"{key}.yaml")
    papers.load.cache_clear()
    yield folder
    papers.load.cache_clear()


@pytest.fixture
def paper_text():
    """``paper_text(key)``: the text of a paper's source document (``vixnb.papers.DOCUMENTS``) from the shared
    folder beside the checkout; the test is skipped where that folder is absent (a clone on its own)."""
    from pathlib import Path

    from vixnb.papers import DOCUMENTS

    def read(key):
        path = Path(__file__).resolve().parents[2] / "shared" / "seeds" / DOCUMENTS[key]
        if not path.exists():
            pytest.skip("the papers' source documents are not beside the checkout")
        return path.read_text(encoding="utf-8")

    return read


@pytest.fixture
def torchsummary_report():
    """``torchsummary_report(model)``: (Total params, Estimated Total Size (MB)) as torchsummary 1.5.1's ``summary``
    prints them for the model's ``default_cfg`` input on the CPU, with the softmax materialised as the authors ran
    it; the test is skipped where torchsummary is not installed."""
    import contextlib
    import io
    import re

    torchsummary = pytest.importorskip("torchsummary")
    from vixnb import layers

    def report(model):
        out = io.StringIO()
        with layers.fused_attn(model, False), contextlib.redirect_stdout(out):
            torchsummary.summary(model, tuple(model.default_cfg["input_size"]), device="cpu")
        text = out.getvalue()
        params = int(re.search(r"Total params: ([\d,]+)", text).group(1).replace(",", ""))
        return params, float(re.search(r"Estimated Total Size \(MB\): ([\d.]+)", text).group(1))

    return report


@pytest.fixture
def crash_after_checkpoint(monkeypatch):
    """A function that, once called, makes the training engine raise the exception class it returns right after
    every checkpoint it saves (a crash at each epoch boundary, the checkpoint on disk)."""
    from vixnb import train as engine

    class Crash(Exception):
        pass

    real = engine.save_checkpoint

    def save_then_crash(path, state):
        real(path, state)
        raise Crash

    def install():
        monkeypatch.setattr(engine, "save_checkpoint", save_then_crash)
        return Crash

    return install


def seeded_model(name, dataset="cifar10", **overrides):
    """``vixnb.create_model`` with the weights drawn from seed 0, the caller's RNG left as it was (the family tests'
    ``fresh``)."""
    import torch

    import vixnb

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return vixnb.create_model(name, dataset=dataset, **overrides)
