"""Bad input and faults, as a new user meets them: every case is one line on stderr that names the file or
parameter and what to do, the right exit code (1 an error, 2 a usage error, 130 an interruption), no
traceback without --debug, and nothing already computed lost or corrupted.

Runs train on real image-folder data through a CPU profile (``cpu``) and a shrunken CIFAR-10 spec, so the
data checks, checkpoints and the store are exercised end to end on a CPU in seconds."""
import errno
import os
import threading
import time

import pytest
import torch
from PIL import Image

from vixnb import data, profiles, report
from vixnb import train as engine
from vixnb.cli import main
from vixnb.data import CIFAR10_CLASSES, DatasetSpec
from vixnb.files import atomic_write
from vixnb.results import ResultsStore, StoreError, load_checkpoint, previous_path
from vixnb.train import without_timings
from vixnb import runs

TINY = dict(depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64)
CPU_PROFILE = {"description": "CPU, real image folders (tests)", "page_title": "tests", "device": "cpu", "epochs": 2,
               "batch_size": 8, "model_overrides": TINY, "precision": "fp32", "amp_loss_only": False,
               "eval_mode": True, "protocol": "paper", "optimizer": "adamw"}


def _jpeg(path, value, size=32):
    image = torch.full((size, size, 3), value, dtype=torch.uint8)
    image[0, 0] = 255 - value
    Image.fromarray(image.numpy()).save(path, quality=95)


@pytest.fixture
def cpu_data(tmp_path, monkeypatch):
    """A CIFAR-10 image folder (2 train, 1 test image per class) under $VIXNB_DATA, the cifar10 spec shrunk to
    it, and a profile ``cpu`` that trains tiny models on it on the CPU."""
    root = tmp_path / "data"
    for split, per_class in (("train", 2), ("test", 1)):
        for c, name in enumerate(CIFAR10_CLASSES):
            (root / "cifar10" / split / name).mkdir(parents=True)
            for i in range(per_class):
                _jpeg(root / "cifar10" / split / name / f"{i:04d}.jpg", 20 * c + 7 * i)
    monkeypatch.setenv("VIXNB_DATA", str(root))
    monkeypatch.setitem(data.DATASETS, "cifar10", DatasetSpec("cifar10", 32, 10, train_images=20, test_images=10))
    table = profiles._profiles_file()
    monkeypatch.setattr(profiles, "_profiles_file", lambda: {**table, "profiles": {**table["profiles"], "cpu": CPU_PROFILE}})
    return root / "cifar10"


def cli(capsys, *args, code):
    """Run ``vixnb ARGS``; assert the exit code and that stderr holds no traceback; return stderr."""
    assert main([*args]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def _files(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _config(**kw):
    return profiles.run_config("vit", dataset="cifar10", profile="cpu", **kw)


def _metrics(result):
    return without_timings(result["history"]), result["top1"], result["top5"]


# ----- numbers and names on the command line (usage errors: exit 2) ------------------------------

@pytest.mark.parametrize("option, value, says", [
    ("--epochs", "0", "argument --epochs: 0 is below 1"), ("--epochs", "-3", "argument --epochs: -3 is below 1"),
    ("--batch-size", "0", "argument --batch-size: 0 is below 1"),
    ("--batch-size", "-4", "argument --batch-size: -4 is below 1"),
    ("--post-train-epochs", "-2", "argument --post-train-epochs: -2 is below 0"),
    ("--lr", "0", "argument --lr: 0.0 is not > 0"), ("--seed", "x", "argument --seed: 'x' is not a whole number"),
])
def test_bad_numbers_are_usage_errors_naming_the_option(capsys, option, value, says):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "vit", option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_unknown_names_are_usage_errors(capsys):
    assert "unknown model 'vitt'; valid names:" in cli(capsys, "train", "vitt", code=2)
    assert "unknown profile 'full'; valid profiles:" in cli(capsys, "train", "vit", "--profile", "full", code=2)


def test_debug_shows_the_traceback(capsys, monkeypatch):
    assert main(["--debug", "train", "vitt"]) == 2
    assert "Traceback" in capsys.readouterr().err
    assert main(["train", "vitt", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("VIXNB_DEBUG", "1")
    assert main(["train", "vitt"]) == 2 and "Traceback" in capsys.readouterr().err


def test_an_unexpected_error_says_how_to_see_the_traceback(capsys, monkeypatch):
    def broken(*a, **k):
        raise TypeError("a bug")

    monkeypatch.setattr(runs, "run", broken)
    err = cli(capsys, "train", "vit", "--quiet", code=1)
    assert "error: a bug (an unexpected error: run again with --debug for the traceback)" in err


def test_lr_from_the_command_line_reaches_the_run(cpu_data, capsys):
    cli(capsys, "train", "vit", "--profile", "cpu", "--lr", "0.01", "--quiet", code=0)
    assert ResultsStore().get(_config(lr=0.01))["config"]["lr"] == 0.01


# ----- data on disk -------------------------------------------------------------------------------

def test_a_missing_class_folder_is_named(cpu_data, capsys):
    import shutil

    shutil.rmtree(cpu_data / "train" / "cat")
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"{cpu_data / 'train'}: class folder(s) cat missing (10 expected); restore them" in err
    assert not (ResultsStore().root / "cpu").exists() or not list((ResultsStore().root / "cpu").glob("*.json"))


def test_a_class_folder_with_too_few_images_is_named(cpu_data, capsys):
    (cpu_data / "train" / "dog" / "0001.jpg").unlink()
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert "1 class folder(s) do not hold 2 images (dog: 1)" in err and str(cpu_data / "train") in err


@pytest.mark.parametrize("content", [b"", b"not a jpeg at all" * 10], ids=["zero-byte", "garbage"])
def test_an_unreadable_image_is_named(cpu_data, capsys, content):
    bad = cpu_data / "test" / "frog" / "0000.jpg"
    bad.write_bytes(content)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"{bad}: unreadable image" in err and "replace or restore the file" in err


def test_an_image_of_another_size_is_refused_unless_resizing_is_allowed(cpu_data, capsys):
    odd = cpu_data / "train" / "ship" / "0000.jpg"
    _jpeg(odd, 90, size=16)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"{odd}: image is 16x16, the data set's are 32x32" in err and "--allow-resize" in err
    cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", "--allow-resize", code=0)
    assert ResultsStore().get(_config(allow_resize=True))["status"] == "done"
    assert ResultsStore().get(_config()) is None  # a resized run is another run


def test_vixnb_data_pointing_at_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("VIXNB_DATA", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("")
    with pytest.raises(data.DataError, match="is a file, not a folder; point VIXNB_DATA at the folder"):
        data.load_split("cifar10", "test")


@pytest.mark.parametrize("problem", ["missing", "malformed"])
def test_tiny_imagenet_annotations_missing_or_malformed(tmp_path, problem):
    folder = data.make_tiny_imagenet_miniature(tmp_path)
    annotations = folder / "val" / "val_annotations.txt"
    if problem == "missing":
        annotations.unlink()
        match = f"{annotations} is missing; re-extract tiny-imagenet-200.zip"
    else:
        annotations.write_text("only-a-file-name.JPEG\n")
        match = f"{annotations}, line 1: expected"
    with pytest.raises(data.DataError, match=match.replace(".", r"\.")):
        data.load_split("tiny-imagenet", "test", root=tmp_path)


def test_a_run_records_its_data_and_a_result_from_other_data_is_not_reused_silently(cpu_data, capsys):
    cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=0)
    first = ResultsStore().get(_config())
    assert first["provenance"]["data_fingerprint"] == data.source_fingerprint("cifar10")
    _jpeg(cpu_data / "train" / "bird" / "0000.jpg", 3)  # other pixels, other file size
    (cpu_data / "train").touch()
    data._listing_digest.cache_clear()
    stale = report.collect_runs(["vit"], dataset="cifar10", profile="cpu", seeds=[0], compute="never",
                                progress=False, store=None)
    assert stale[0]["stale"].startswith("made from other data than the copy here")
    assert main(["train", "vit", "--profile", "cpu", "--quiet"]) == 0
    assert "made from other data than the copy here" in capsys.readouterr().err
    assert ResultsStore().get(_config())["provenance"]["data_fingerprint"] == data.source_fingerprint("cifar10")


# ----- checkpoints ----------------------------------------------------------------------------------

class _Payload:
    """Unpickling this would run a shell command; ``weights_only=True`` must refuse it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_crafted_checkpoint_is_never_unpickled(cpu_data, capsys, tmp_path):
    marker = tmp_path / "code-ran"
    ckpt = ResultsStore().checkpoint_path(_config())
    ckpt.parent.mkdir(parents=True)
    torch.save({"model": _Payload(marker)}, ckpt)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=0)
    assert not marker.exists()
    assert f"checkpoint {ckpt} is unreadable" in err and "moved aside to" in err and "starting the run over" in err
    assert list(ckpt.parent.glob(f"{ckpt.name}.unreadable-*"))
    assert ResultsStore().get(_config())["status"] == "done"


@pytest.mark.parametrize("damage", ["truncated", "wrong keys"])
def test_a_damaged_checkpoint_is_set_aside_and_the_previous_one_resumed(cpu_data, capsys, monkeypatch, damage):
    config = _config(epochs=3)
    reference = engine.train(config, progress=False)
    real, saves = engine.save_checkpoint, []

    def save_then_stop(path, state):
        real(path, state)
        saves.append(path)
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(engine, "save_checkpoint", save_then_stop)
    assert main(["train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet"]) == 130
    capsys.readouterr()
    monkeypatch.setattr(engine, "save_checkpoint", real)
    ckpt = ResultsStore().checkpoint_path(config)
    assert ckpt.exists() and previous_path(ckpt).exists()
    if damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:100])
    else:
        torch.save({"model": {}}, ckpt)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet", code=0)
    assert f"checkpoint {ckpt} is unreadable" in err and "resuming from the previous checkpoint" in err
    assert _metrics(ResultsStore().get(config)) == _metrics(reference)
    assert not ckpt.exists() and not previous_path(ckpt).exists()  # a finished run leaves no checkpoint


def test_ctrl_c_says_after_which_epoch_and_the_same_command_resumes(cpu_data, capsys, monkeypatch):
    config = _config(epochs=3)
    reference = engine.train(config, progress=False)
    real, calls = engine._train_epoch, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(engine, "_train_epoch", interrupted)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet", code=130)
    assert "vixnb train: vit: interrupted after epoch 1 of 3; run the same command again to resume" in err
    monkeypatch.setattr(engine, "_train_epoch", real)
    cli(capsys, "train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet", code=0)
    assert _metrics(ResultsStore().get(config)) == _metrics(reference)


def test_recompute_starts_over_instead_of_resuming(cpu_data, capsys):
    ckpt = ResultsStore().checkpoint_path(_config())
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"an old checkpoint")
    cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", "--recompute", code=0)
    assert not list(ckpt.parent.glob("*.unreadable-*"))  # removed unread, not resumed from


def test_load_checkpoint_of_nothing_is_none(tmp_path):
    assert load_checkpoint(tmp_path / "none.pt") is None


# ----- the results store ----------------------------------------------------------------------------

def test_a_truncated_result_file_is_named_and_kept(cpu_data, capsys):
    cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=0)
    path = ResultsStore().path(_config())
    path.write_text(path.read_text()[:50])
    before = _files(ResultsStore().root)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"unreadable result file {path}" in err and "delete it and run again to recompute it" in err
    assert _files(ResultsStore().root) == before  # nothing deleted or rewritten behind the user's back


def test_an_unwritable_store_is_found_before_training(cpu_data, capsys, monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("VIXNB_RESULTS", str(tmp_path / "a-file" / "results"))
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained before finding the store unwritable"))
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"results store folder {tmp_path / 'a-file' / 'results' / 'cpu'} is not writable" in err
    assert "set VIXNB_RESULTS to a writable folder" in err


def test_a_full_disk_during_a_write_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "result.json"
    atomic_write(path, lambda f: f.write("old, whole"))

    def full(f):
        f.write("new, half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, full)
    assert path.read_text() == "old, whole" and [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_stored_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "r.json", lambda f: f.write("{}"))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_second_process_on_the_same_run_waits_for_the_first(cpu_data, capsys, monkeypatch):
    import fcntl

    config, store = _config(), ResultsStore()
    store.lock_path(config).parent.mkdir(parents=True)
    holder = open(store.lock_path(config), "a")
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is training this run
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained a run another process is training"))
    got = {}
    waiter = threading.Thread(target=lambda: got.update(r=runs.run("vit", dataset="cifar10", profile="cpu",
                                                                      progress=False)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # waiting, not training
    store.put(config, {"status": "done", "top1": 12.5})
    fcntl.flock(holder, fcntl.LOCK_UN)
    holder.close()
    waiter.join(10)
    assert got["r"]["top1"] == 12.5
    assert "is being computed by another process; waiting for it" in capsys.readouterr().err


# ----- the GPU and the numbers -----------------------------------------------------------------------

def test_out_of_memory_names_the_batch_size_and_a_smaller_one(cpu_data, capsys, monkeypatch):
    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(engine.F, "cross_entropy", oom)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert "vit: out of memory at batch size 8; try --batch-size 4" in err


def test_a_diverging_loss_suggests_a_lower_lr(cpu_data, capsys, monkeypatch):
    monkeypatch.setattr(engine.F, "cross_entropy", lambda *a, **k: torch.tensor(float("nan"), requires_grad=True))
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert "loss became nan at epoch 1" in err and "--lr" in err and "no result stored" in err
    assert ResultsStore().get(_config()) is None


def test_measure_exits_1_when_a_model_failed(capsys, monkeypatch):
    from vixnb.measure import per_model

    def failing(name, **kwargs):
        raise RuntimeError(f"{name} broke")

    monkeypatch.setattr(per_model, "measure", failing)
    err = cli(capsys, "measure", "fnet", "--device", "cpu", code=1)
    assert "measuring failed for fnet" in err


def test_store_errors_are_os_errors_with_the_path(tmp_path):
    assert issubclass(StoreError, OSError)


def test_a_chapter_interrupted_midway_leaves_the_store_consistent(tmp_path, capsys):
    """A notebook that stores one run and then fails: the stored run is whole and reused; nothing half-written."""
    import nbformat

    from vixnb.notebooks import run_notebook

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('profile = "smoke"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("from vixnb.runs import run\n"
                                  f"r = run('fnet', profile=profile, progress=False, **{TINY!r})"),
        nbformat.v4.new_code_cell("raise KeyboardInterrupt('stopped midway')")])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RuntimeError, match="stopped midway"):
        run_notebook(path, profile="smoke", output=tmp_path / "out" / "chapter.ipynb", progress=False)
    store = ResultsStore()
    files = [p for p in (store.root / "smoke").rglob("*") if p.is_file()]
    assert [p.suffix for p in files if p.suffix != ".lock"] == [".json"]  # one whole result, no temporary file
    config = profiles.run_config("fnet", profile="smoke", **TINY)
    assert store.get(config)["status"] == "done" and not store.checkpoint_path(config).exists()
