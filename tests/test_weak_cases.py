"""The weak cases of the third round of faults: each a one-line message naming the problem and the fix, the right
exit code, found before any work starts, and the store left as it was."""
import pytest

from vixnb.cli import main


def _err(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_an_unwritable_pack_path_is_found_before_any_job(tmp_path, capsys, isolated_results):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["batch", "--profile", "smoke", "--only", "vit", "--pack", str(blocker / "out.tar.gz")]) == 2
    assert _err(capsys).startswith(f"vixnb batch: error: --pack {blocker / 'out.tar.gz'}: cannot write there (")
    assert not isolated_results.exists()  # no job ran


def test_a_gpu_batch_on_a_machine_without_one_says_so_and_runs_nothing(capsys, isolated_results, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["batch", "--profile", "budget", "--only", "vit", "--max-jobs", "1"]) == 1
    line = _err(capsys)
    assert line.startswith("vixnb batch: error: none of the 1 jobs of profile 'budget' can run on this machine "
                           "(profile 'budget' needs a CUDA GPU; none here); run the batch where they can")
    assert not any(p.suffix == ".json" for p in isolated_results.rglob("*"))


def test_a_missing_notebook_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.ipynb")]) == 2
    assert _err(capsys) == (f"vixnb run: error: notebook not found: {tmp_path / 'nope.ipynb'}; give a stem of "
                            "notebooks/ (e.g. vix_table1) or the path of an existing .ipynb file")
    assert main(["run", "no_such_chapter"]) == 2


def test_run_takes_an_output_path_checked_before_the_kernel(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", "plan", "--output", str(blocker / "out.ipynb")]) == 2
    assert _err(capsys).startswith(f"vixnb run: error: --output {blocker / 'out.ipynb'}: cannot write there (")


def test_create_model_names_a_setting_the_data_set_gives(capsys):
    from vixnb import create_model

    with pytest.raises(ValueError, match=r"^num_classes=0: model 'vit' takes its image size, classes and channels "
                                         r"from its data set"):
        create_model("vit", num_classes=0)


def test_a_rehearsal_that_reaches_nothing_says_why(isolated_results):
    from vixnb.plan.rehearsal import rehearse

    lines = []
    rows, _ = rehearse("budget", executor="inline", progress=lines.append, budget=1)
    assert rows == [] and len(lines) == 1
    assert lines[0].startswith("vixnb batch --rehearse: the batch with these options would start nothing (the "
                               "cheapest job needs ")
    assert lines[0].endswith(" s, more than --budget 1; give a larger --budget); nothing to rehearse")
    assert not isolated_results.exists()


def _hold(store, config, ready, done):
    with store.lock(config):
        ready.set()
        done.wait(10)


def test_a_run_held_by_another_process_is_not_called_resumed(isolated_results):
    """``batch`` labels a job "resumed" only where no other process holds its run (a second batch that waits for
    the first one's result did not resume it)."""
    import multiprocessing

    from vixnb.runs.spec import run_config
    from vixnb.results import ResultsStore

    store, config = ResultsStore(), run_config("vit")
    assert store.lock_held(config) is False
    fork = multiprocessing.get_context("fork")  # no fresh interpreter: the lock is all it does
    ready, done = fork.Event(), fork.Event()
    other = fork.Process(target=_hold, args=(store, config, ready, done))
    other.start()
    try:
        assert ready.wait(10)
        assert store.lock_held(config) is True
    finally:
        done.set()
        other.join(10)
    assert store.lock_held(config) is False
