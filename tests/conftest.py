import pytest


@pytest.fixture(autouse=True)
def isolated_results(tmp_path, monkeypatch):
    """Every test gets its own results store, so nothing reads or writes the repository's results/."""
    monkeypatch.setenv("VIXNB_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"
