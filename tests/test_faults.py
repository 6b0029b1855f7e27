"""Bad input and faults, as a new user meets them: every case is one line on stderr that names the file or
parameter and what to do, the right exit code (1 an error, 2 a usage error, 130 an interruption), no
traceback without --debug, and nothing already computed lost or corrupted.

Runs train on real image-folder data through a CPU profile (``cpu``) and a shrunken CIFAR-10 spec, so the
data checks, checkpoints and the store are exercised end to end on a CPU in seconds."""
import errno
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from vixnb import data, report

from vixnb.runs import profiles
from vixnb.runs import spec as runspec
from vixnb.engine import train as engine
from vixnb.cli import main
from vixnb.data import CIFAR10_CLASSES, DatasetSpec
from vixnb.files import atomic_write
from vixnb.results import ResultsStore, StoreError, load_checkpoint, previous_path, save_checkpoint
from vixnb.engine.train import without_timings
from vixnb.runs import make as runs
from vixnb.runs.spec import RunSpec

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
    table = profiles.profiles_file()
    monkeypatch.setattr(profiles, "profiles_file",
                        lambda: {**table, "profiles": {**table["profiles"], "cpu": CPU_PROFILE}})
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
    return runspec.run_config("vit", dataset="cifar10", profile="cpu", **kw)


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
    with pytest.raises(SystemExit) as exit_:  # the one rule of every command's --profile (validate.PROFILE)
        main(["train", "vit", "--profile", "full"])
    assert exit_.value.code == 2
    assert "argument --profile: 'full' is not one; give a profile: 'budget'" in capsys.readouterr().err


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
    assert "error: a bug (an unexpected error: run again with --verbose for the traceback)" in err


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
    with pytest.raises(ValueError, match="is a file, not a folder; point VIXNB_DATA at the folder"):  # a usage error
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
    data.fingerprint.cache_clear()
    stale = report.records.collect_runs(["vit"], dataset="cifar10", profile="cpu", seeds=[0], compute="never",
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
    assert "it holds objects other than tensors: Trying to load unsupported GLOBAL" in err
    assert "weights_only" not in err and "False" not in err  # never the advice to load it unsafely
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
    real, calls = engine.train_epoch, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(engine, "train_epoch", interrupted)
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet", code=130)
    assert "vixnb train: vit: interrupted after epoch 1 of 3; run the same command again to resume" in err
    monkeypatch.setattr(engine, "train_epoch", real)
    cli(capsys, "train", "vit", "--profile", "cpu", "--epochs", "3", "--quiet", code=0)
    assert _metrics(ResultsStore().get(config)) == _metrics(reference)


def test_recompute_starts_over_instead_of_resuming(cpu_data, capsys):
    ckpt = ResultsStore().checkpoint_path(_config())
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"an old checkpoint")
    cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", "--recompute", code=0)
    assert not list(ckpt.parent.glob("*.unreadable-*"))  # removed unread, not resumed from


def test_a_signal_during_a_checkpoint_write_leaves_the_last_whole_checkpoint_in_place(tmp_path, monkeypatch):
    """A stop (SIGTERM raises KeyboardInterrupt) that lands while the next epoch's checkpoint is being written
    leaves the last whole one at the run's checkpoint path, and the one before it at ``previous_path``; CI once
    found the path empty after a stopped batch when the old checkpoint was moved aside before the write."""
    path = tmp_path / "run.pt"
    save_checkpoint(path, {"epoch": torch.tensor(1)})
    save_checkpoint(path, {"epoch": torch.tensor(2)})
    real_save = torch.save

    def stopped_midway(state, f):
        real_save(state, f)
        raise KeyboardInterrupt("stopped by signal SIGTERM")

    monkeypatch.setattr(torch, "save", stopped_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"epoch": torch.tensor(3)})
    monkeypatch.setattr(torch, "save", real_save)
    epoch = lambda p: int(torch.load(p, weights_only=True)["epoch"])  # noqa: E731
    assert (epoch(path), epoch(previous_path(path))) == (2, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.previous.pt", "run.pt"]  # no temporary file left
    save_checkpoint(path, {"epoch": torch.tensor(3)})
    assert (epoch(path), epoch(previous_path(path))) == (3, 2)


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

    with pytest.raises(OSError, match=re.escape(f"no space left to write {path} (needs about 0.01 MB, ")):
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
    waiter = threading.Thread(target=lambda: got.update(r=runs.run(RunSpec.of("vit", dataset="cifar10", profile="cpu"),
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

    from vixnb.book.execute import run_notebook

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('profile = "smoke"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("from vixnb.runs.make import run\nfrom vixnb.runs.spec import RunSpec\n"
                                  f"r = run(RunSpec.of('fnet', profile=profile, **{TINY!r}), progress=False)"),
        nbformat.v4.new_code_cell("raise KeyboardInterrupt('stopped midway')")])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RuntimeError, match="stopped midway"):
        run_notebook(path, profile="smoke", output=tmp_path / "out" / "chapter.ipynb", progress=False)
    store = ResultsStore()
    files = [p for p in (store.root / "smoke").rglob("*") if p.is_file()]
    assert [p.suffix for p in files if p.suffix != ".lock"] == [".json"]  # one whole result, no temporary file
    config = runspec.run_config("fnet", profile="smoke", **TINY)
    assert store.get(config)["status"] == "done" and not store.checkpoint_path(config).exists()


# ===== round two (issue 31) ==========================================================================

def _store_hash(root=None):
    """A hash of everything stored under the results folder (names and bytes; the empty lock files and the job
    logs left out): equal before and after means nothing stored changed, appeared or went."""
    root = Path(root or ResultsStore().root)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")) if root.exists() else []:
        if path.is_file() and not {".locks", ".batch"} & set(path.parts):
            digest.update(f"{path.relative_to(root)}\n".encode() + path.read_bytes())
    return digest.hexdigest()


def _kept(before, root=None):
    """Whether every file of ``before`` (``_files``) is still there with the same bytes (new files may appear)."""
    after = _files(Path(root or ResultsStore().root))
    return all(after.get(path) == content for path, content in before.items())


@pytest.fixture
def unwritable(monkeypatch):
    """``unwritable(folder, ...)``: creating, replacing or removing a file in those folders fails with EACCES, as in
    a read-only store (the tests run as root, where chmod would not stop a write)."""
    folders = set()
    real_ntf, real_mkstemp, real_unlink = tempfile.NamedTemporaryFile, tempfile.mkstemp, Path.unlink

    def refuse(folder):
        if folder is not None and Path(folder).resolve() in folders:
            raise PermissionError(errno.EACCES, "Permission denied", str(folder))

    def ntf(*args, dir=None, **kwargs):
        refuse(dir)
        return real_ntf(*args, dir=dir, **kwargs)

    def mkstemp(*args, dir=None, **kwargs):
        refuse(dir)
        return real_mkstemp(*args, dir=dir, **kwargs)

    def unlink(self, missing_ok=False):
        refuse(self.parent)
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", ntf)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(Path, "unlink", unlink)
    return lambda *paths: folders.update(Path(p).resolve() for p in paths)


# ----- vixnb batch and the store's folders ----------------------------------------------------------------

def _smoke_job(model="fnet"):
    from vixnb.plan import batch
    from vixnb.plan import plan as planning

    return batch.jobs_from_plan(planning.build("smoke", only=[model], machine=True))[0]


def test_batch_keeps_an_earlier_checkpoint_when_its_job_fails(capsys, monkeypatch, unwritable):
    from vixnb.plan import batch

    job = _smoke_job()
    real = engine.save_checkpoint

    def save_then_stop(path, state):
        real(path, state)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):  # an interrupted training run: its checkpoint is kept
        batch.run_job(job)
    monkeypatch.setattr(engine, "save_checkpoint", real)
    store = ResultsStore()
    checkpoints = _files(store.root / "smoke" / ".checkpoints")
    assert checkpoints
    before = _store_hash()
    unwritable(store.root / "smoke" / ".checkpoints")  # the job starts (its profile folder is writable), then fails
    err = cli(capsys, "batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet", code=1)
    assert "1 of 1 jobs failed: fnet" in err
    assert _files(store.root / "smoke" / ".checkpoints") == checkpoints  # a failed job removes only what it made
    assert _store_hash() == before


def test_batch_on_a_read_only_store_says_not_writable_not_the_cleanups_errno(capsys, unwritable):
    store = ResultsStore()
    (store.root / "smoke").mkdir(parents=True)
    before = _store_hash()
    unwritable(store.root / "smoke", store.root / "smoke" / ".checkpoints")
    code = main(["batch", "--profile", "smoke", "--executor", "inline", "--only", "fnet"])
    out, err = capsys.readouterr()
    assert code == 1 and not out  # found before any job starts, as `vixnb train` finds it
    assert err.strip() == (f"vixnb batch: error: results store folder {store.root / 'smoke'} is not writable "
                           "(Permission denied); fix its permissions or set VIXNB_RESULTS to a writable folder")
    assert _store_hash() == before


@pytest.mark.parametrize("folder", [".checkpoints", ".locks"])
def test_an_unwritable_checkpoint_or_lock_folder_is_found_before_training(cpu_data, capsys, monkeypatch, unwritable,
                                                                           folder):
    where = ResultsStore().root / "cpu" / folder
    where.mkdir(parents=True)
    before = _store_hash()
    unwritable(where)
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained before finding the folder unwritable"))
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"results store folder {where} is not writable (Permission denied); fix its permissions or set " \
           "VIXNB_RESULTS to a writable folder" in err
    assert _store_hash() == before


@pytest.mark.parametrize("what", ["checkpoint", "result"])
def test_a_full_disk_names_the_path_the_bytes_needed_and_free(cpu_data, capsys, monkeypatch, what):
    from collections import namedtuple

    from vixnb import files

    store = ResultsStore()
    store.put(_config(seed=5), {"status": "done", "top1": 50.0})  # stored earlier: must stay whole
    before = _files(store.root)
    real = files.flush

    def full(f):
        if (what == "checkpoint") == (".pt." in os.readlink(f"/proc/self/fd/{f.fileno()}")):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(f)

    monkeypatch.setattr(files, "flush", full)
    monkeypatch.setattr(files.shutil, "disk_usage", lambda p: namedtuple("usage", "total used free")(10, 10, 4096))
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    path = store.checkpoint_path(_config()) if what == "checkpoint" else store.path(_config())
    assert f"no space left to write {path} (needs about " in err  # issue 57, class 8: one message, every writer
    needed = float(err.split("(needs about ")[1].split(" MB")[0])
    assert needed >= 0.01 and "MB, 0.01 MB free); free some space" in err
    assert _kept(before) and store.get(_config()) is None and not list(store.root.rglob("*.tmp"))


# ----- results stored wrong -----------------------------------------------------------------------------------

def _whole_result(config):
    return {"status": "done", "top1": 81.5, "top5": 99.0, "best_epoch": 2, "epochs_run": 2, "params_paper": 10,
            "params_true": 10, "seconds": 1.0, "history": [], "provenance": {"device": "cpu", "commit": "abc"},
            "config": config}


DAMAGE = {  # how a result file is damaged or edited by hand -> what the message says of it
    "nan": (lambda r: {**r, "top1": float("nan")}, "top1 is nan, not a finite number"),
    "wrong type": (lambda r: {**r, "top1": "81.5"}, "top1 is '81.5', not a finite number"),
    "missing key": (lambda r: {k: v for k, v in r.items() if k != "top1"}, "it has no top1"),
    "list": (lambda r: [r], "it holds a JSON list, not a mapping"),
    "edited status": (lambda r: {**r, "status": "checked by hand"}, "status 'checked by hand', where vixnb stores"),
    "history not a list": (lambda r: {**r, "history": {"1": 2}}, "history is a dict, not a list"),
}


def _damage(path, config, kind):
    change, says = DAMAGE[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(change(_whole_result(config))))
    return says


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_result_is_named_never_printed_and_kept(cpu_data, capsys, monkeypatch, kind):
    path = ResultsStore().path(_config())
    says = _damage(path, _config(), kind)
    before = _store_hash()
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained over a damaged result"))
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"damaged result file {path} ({says}" in err and "delete it and run again to recompute it" in err
    assert "top-1" not in capsys.readouterr().out
    assert _store_hash() == before


def test_an_intact_result_is_still_printed(cpu_data, capsys):
    """A stored result of today's model (its architecture and counts) is read and printed, not trained again."""
    from vixnb.runs.policy import built_today

    config = _config()
    signature, counts = built_today(config["model"], config["dataset"], json.dumps(config["model_overrides"]))
    ResultsStore().put(config, {**_whole_result(config), **counts, "architecture": signature})
    assert main(["train", "vit", "--profile", "cpu", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err and "81.5" in printed.out, printed


@pytest.mark.parametrize("kind", ["nan", "list", "missing key", "edited status"])
def test_vixnb_plan_shows_a_damaged_result_and_goes_on(capsys, kind):
    from vixnb.plan import plan as planning

    entry = next(e for e in planning.build("smoke", machine=True) if e.job == "train")
    path = ResultsStore().path(entry.config)
    says = _damage(path, entry.config, kind)
    before = _store_hash()
    assert main(["plan", "--profile", "smoke", "--json"]) == 0
    shown = [e for e in json.loads(capsys.readouterr().out) if e["status"] == "damaged"]
    assert len(shown) == 1 and f"damaged result file {path} ({says}" in shown[0]["reason"]
    assert _store_hash() == before


def test_a_page_shows_a_damaged_result_as_unreadable(cpu_data):
    path = ResultsStore().path(_config())
    _damage(path, _config(), "nan")
    before = _store_hash()
    results = report.records.collect_runs(["vit"], dataset="cifar10", profile="cpu", seeds=[0], compute="never",
                                          progress=False)
    assert results[0]["status"] == "unreadable" and f"damaged result file {path}" in results[0]["reason"]
    row = report.records.summarize_runs(results).loc["vit"]
    assert row["top1 best"] == "unreadable result file" and _store_hash() == before


def test_a_loss_that_turns_nan_still_names_lr(cpu_data, capsys, monkeypatch):
    monkeypatch.setattr(engine.F, "cross_entropy", lambda *a, **k: torch.tensor(float("nan"), requires_grad=True))
    before = _store_hash()
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert "loss became nan" in err and "--lr" in err and _store_hash() == before


# ----- papermill's parameters -------------------------------------------------------------------------------

PARAMETERS_CELL = 'profile = "auto"\nmodels = []\nseeds = [0]\ncompute = "auto"\n'


def _resolve_in(namespace):
    """Run a notebook's runtime cell (``runtime.resolve``) in ``namespace`` as a kernel runs it."""
    from vixnb.runtime import Runtime

    namespace.update(runtime=Runtime("local", "cpu", "$VIXNB_DATA", "as set", "t", "v"), profile="smoke",
                     compute="never")
    exec("profile, compute = runtime.resolve(profile, compute)", namespace)
    return namespace


def test_a_parameter_the_notebook_does_not_declare_is_refused_naming_it():
    history = ["", "import vixnb", PARAMETERS_CELL, "# Parameters\nseed = 3\n"]
    with pytest.raises(ValueError, match="notebook parameter\\(s\\) 'seed' given \\(papermill -p/-y\\) but not "
                                         "declared in the notebook's parameters cell; its parameters: profile, models, "
                                         "seeds, compute; check the spelling"):
        _resolve_in({"In": history, "seed": 3})


@pytest.mark.parametrize("name, given, expected", [
    ("models", "vit", ["vit"]), ("models", '["vit", "vil"]', ["vit", "vil"]), ("models", "vit,vil", ["vit", "vil"]),
    ("seeds", 3, [3]), ("seeds", "0, 1, 2", [0, 1, 2]), ("seeds", [1, 2], [1, 2]),
], ids=["one name", "json list", "comma separated", "one number", "numbers", "yaml list (-y)"])
def test_a_list_parameter_from_papermill_becomes_a_list(name, given, expected):
    history = ["", "import vixnb", PARAMETERS_CELL, f"# Parameters\n{name} = {given!r}\n"]
    assert _resolve_in({"In": history, name: given})[name] == expected


def test_a_list_parameter_with_elements_of_another_type_is_refused():
    history = ["", PARAMETERS_CELL, "# Parameters\nseeds = 'a,b'\n"]
    with pytest.raises(ValueError, match="parameter 'seeds' takes a list of int, got the element 'a'"):
        _resolve_in({"In": history, "seeds": "a,b"})


def test_a_notebook_run_by_hand_is_not_checked():
    assert _resolve_in({"In": ["", PARAMETERS_CELL], "models": "vit"})["models"] == "vit"


@pytest.mark.parametrize("given, expected", [("vit,vil", ["vit", "vil"]), ('["vit", "vil"]', ["vit", "vil"])])
def test_vixnb_run_takes_a_list_parameter_as_a_string(given, expected):
    from vixnb.book.execute import coerce_parameters

    assert coerce_parameters({"models": given}, {"models": {"default": "[]"}}) == {"models": expected}


def test_plain_papermill_with_a_misspelt_parameter_fails_in_the_notebook(tmp_path):
    import nbformat
    import papermill

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(PARAMETERS_CELL, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import vixnb\n\nruntime = vixnb.env(verbose=False)\n"
                                  "profile, compute = runtime.resolve(profile, compute)"),
        nbformat.v4.new_code_cell("print(models, seeds)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "nb.ipynb")
    with pytest.raises(papermill.PapermillExecutionError, match="'seed' given"):
        papermill.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"), parameters={"seed": 3},
                                   progress_bar=False)
    out = papermill.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"), progress_bar=False,
                                     parameters={"models": "vit,vil", "seeds": 3})
    assert out.cells[-1].outputs[0]["text"] == "['vit', 'vil'] [3]\n"


# ----- numbers and names, round two -----------------------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["measure", "fnet", "--batch-size", "0"], "argument --batch-size: 0 is below 1"),
    (["measure", "fnet", "--iters", "0"], "argument --iters: 0 is below 1"),
    (["measure", "fnet", "--iters", "-2"], "argument --iters: -2 is below 1"),
    (["train", "vit", "--randaugment", "-1", "-1"], "argument --randaugment: -1 is below 0"),
])
def test_bad_numbers_round_two_are_usage_errors(capsys, argv, says):
    before = _store_hash()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and says in err and "Traceback" not in err and _store_hash() == before


def test_a_randaugment_magnitude_out_of_range_is_a_usage_error(capsys):
    err = cli(capsys, "train", "vit", "--randaugment", "2", "31", "--quiet", code=2)
    assert "randaugment=[2, 31]: give [NUM_OPS, MAGNITUDE], whole numbers with NUM_OPS >= 0 and MAGNITUDE from 0 " \
           "to 30" in err


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("YES", True), ("0", False), ("false", False),
                                       ("no", False), ("", False)])
def test_vixnb_debug_values(capsys, monkeypatch, value, on):
    monkeypatch.setenv("VIXNB_DEBUG", value)
    assert main(["train", "vitt"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'vitt'" in err and ("Traceback" in err) == on


def test_vixnb_debug_of_another_value_is_refused(capsys, monkeypatch):
    monkeypatch.setenv("VIXNB_DEBUG", "maybe")
    err = cli(capsys, "train", "vit", code=2)
    assert "vixnb train: error: VIXNB_DEBUG='maybe': use 1, true or yes to show tracebacks, or 0, false, no or " \
           "empty for none" in err


@pytest.mark.parametrize("override, says", [
    ("width=abc", "--override width='abc': model 'vit_small_vanilla' takes a whole number >= 1 (default 96) for width"),
    ("depth=abc", "--override depth='abc': model 'vit_small_vanilla' takes a whole number >= 1"),
    ("width=0", "--override width=0: model 'vit_small_vanilla' takes a whole number >= 1 (default 96) for width"),
    ("width=-8", "--override width=-8: model 'vit_small_vanilla' takes a whole number >= 1 (default 96) for width"),
    ("nosuchkey=1", "--override nosuchkey=1: bad override for model 'vit_small_vanilla': it has no setting "
                    "'nosuchkey'; its settings: "),
])
def test_a_bad_override_is_a_usage_error_naming_the_option_and_the_values(capsys, monkeypatch, override, says):
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained with a bad override"))
    before = _store_hash()
    err = cli(capsys, "train", "vit_small_vanilla", "--override", override, "--quiet", code=2)
    assert says in err and _store_hash() == before


@pytest.mark.parametrize("value", ["[", "{model: vit, settings: [}"])
def test_a_malformed_init_from_is_a_usage_error(capsys, value):
    before = _store_hash()
    err = cli(capsys, "train", "vit", "--init-from", value, "--quiet", code=2)
    assert f"--init-from {value!r}: not a YAML value" in err and "give a name, a number, a list" in err
    assert _store_hash() == before


@pytest.mark.parametrize("call, says", [
    (lambda: __import__("vixnb").create_model("vit", depth="2"), "depth='2': model 'vit' takes a whole number >= 1"),
    (lambda: runs.run(RunSpec.of("vit", lr="1e-3"), progress=False), "lr='1e-3': give a learning rate > 0"),
    (lambda: runs.run(RunSpec.of("vit", epochs="3"), progress=False), "epochs='3': give a whole number >= 1"),
    (lambda: data.load_split("synthetic", "test", size="abc"), "size='abc': give a whole number >= 0"),
    (lambda: runspec.run_config("vit", randaugment=[-1, -1]), "randaugment=\\[-1, -1\\]: give \\[NUM_OPS"),
], ids=["create_model depth", "run lr", "run epochs", "load_split size", "run_config randaugment"])
def test_the_python_api_names_an_argument_of_the_wrong_type(call, says):
    before = _store_hash()
    with pytest.raises((TypeError, ValueError), match=says):
        call()
    assert _store_hash() == before


# ----- paper files --------------------------------------------------------------------------------------

def test_a_paper_file_with_a_yaml_syntax_error_names_the_line_and_column(paper_dir, capsys):
    text = (paper_dir / "vix.yaml").read_text().splitlines()
    assert text[4].startswith("title: ")
    text[4] = 'title: "Resource-efficient Hybrid X-formers for Vision (ViX)" ]'  # line 5, column 63
    (paper_dir / "vix.yaml").write_text("\n".join(text) + "\n")
    before = _store_hash()
    err = cli(capsys, "train", "vit", "--quiet", code=1)
    assert "vixnb/papers/vix.yaml is not valid YAML (expected <block end>, but found ']' at line 5, column 63); fix " \
           "it there or restore it from git" in err
    assert _store_hash() == before


def test_a_table_row_naming_an_unknown_model_names_the_paper_file_and_the_table(paper_dir, capsys):
    text = (paper_dir / "vix.yaml").read_text()
    assert "\n      vit:" in text
    (paper_dir / "vix.yaml").write_text(text.replace("\n      vit:", "\n      vitt:", 1))
    before = _store_hash()
    err = cli(capsys, "plan", "--profile", "smoke", code=1)
    assert "vixnb/papers/vix.yaml: table 'table1', row 'vitt' names unknown model 'vitt'" in err
    assert _store_hash() == before


# ----- checkpoints, round two -------------------------------------------------------------------------------

def test_a_checkpoint_of_another_architecture_is_set_aside(cpu_data, capsys, monkeypatch):
    other = runspec.run_config("vit", dataset="cifar10", profile="cpu", dim=48)
    ckpt = ResultsStore().checkpoint_path(_config())
    real = engine.save_checkpoint

    def save_then_stop(path, state):
        real(path, state)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        engine.train(other, progress=False, checkpoint=ckpt)  # another model's checkpoint at this run's path
    monkeypatch.setattr(engine, "save_checkpoint", real)
    content = ckpt.read_bytes()
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=0)
    assert f"checkpoint {ckpt} is unreadable (ValueError: its weights are another architecture's" in err
    assert "starting the run over" in err
    aside = list(ckpt.parent.glob(f"{ckpt.name}.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content  # kept, under another name
    assert ResultsStore().get(_config())["status"] == "done"


# ----- data on disk, round two ------------------------------------------------------------------------------

def test_an_extra_file_in_a_full_split_is_named(cpu_data, capsys):
    extra = cpu_data / "train" / "cat" / "1001.jpg"
    _jpeg(extra, 42)
    before = _store_hash()
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"{cpu_data / 'train'}: 1 class folder(s) hold more than 2 images (cat: 3); the extra file(s), the newest " \
           f"there: {extra}; move the files that do not belong out of the data folder" in err
    assert "restore the missing files" not in err and _store_hash() == before


def test_an_image_that_is_a_symlink_loop_is_named(cpu_data, capsys):
    loop = cpu_data / "test" / "frog" / "0000.jpg"
    loop.unlink()
    loop.symlink_to(loop)
    before = _store_hash()
    err = cli(capsys, "train", "vit", "--profile", "cpu", "--quiet", code=1)
    assert f"{loop}: the image file is a symbolic link that loops; replace it with the image file" in err
    assert _store_hash() == before


def test_the_data_fingerprint_sees_a_file_added_in_the_same_process(cpu_data):
    first = data.source_fingerprint("cifar10")
    assert data.source_fingerprint("cifar10") == first  # cached
    _jpeg(cpu_data / "train" / "cat" / "0002.jpg", 11)
    assert data.source_fingerprint("cifar10") != first


# ----- benchmarks' output files --------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["under a file", "a folder"])
def test_bench_mixers_json_into_an_impossible_path_fails_before_the_benchmark(capsys, monkeypatch, tmp_path, where):
    import vixnb.bench

    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "out.json" if where == "under a file" else tmp_path
    monkeypatch.setattr(vixnb.bench, "bench_mixers", lambda **k: pytest.fail("ran the benchmark first"))
    before = _store_hash()
    err = cli(capsys, "bench", "mixers", "--json", str(path), code=2)
    assert f"--json {path}: cannot write there (" in err and "give a file path in a writable folder" in err
    assert _store_hash() == before


def test_vixnb_run_errors_are_one_line_and_verbose_adds_the_traceback(capsys):
    """Issue 46: a misspelt notebook parameter under `vixnb run` is one line (no traceback); --verbose, as --debug,
    adds the traceback."""
    from vixnb.cli import main

    assert main(["run", "vix_rope", "--profile", "smoke", "-p", "modles", "['vit']"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown parameter(s) for notebooks/vix_rope.ipynb: modles" in err
    assert "Traceback" not in err
    assert main(["run", "vix_rope", "--profile", "smoke", "-p", "modles", "['vit']", "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("vixnb run: error: unknown parameter(s)")


def test_probe_and_unpack_find_a_read_only_store_before_any_work(capsys, unwritable, monkeypatch, tmp_path):
    """Issue 48, class 6 (writability found first): `vixnb probe` probed for 20 s, then failed with raw errno text
    naming a temporary file; `vixnb unpack` did the same. Both now name the folder before they start."""
    import tarfile

    from vixnb.cli import main
    from vixnb.runs import probe as P

    store = ResultsStore()
    store.root.mkdir(parents=True, exist_ok=True)
    unwritable(store.root)
    monkeypatch.setattr(P, "probe_store", lambda *a, **k: pytest.fail("probed before finding the store read-only"))
    assert main(["probe", "--profile", "budget"]) == 1
    assert f"results store folder {store.root} is not writable (Permission denied)" in capsys.readouterr().err
    pack_file = tmp_path / "p.tar.gz"
    (tmp_path / "r.json").write_text("{}")
    with tarfile.open(pack_file, "w:gz") as tar:
        tar.add(tmp_path / "r.json", arcname="results/budget/r.json")
    assert main(["unpack", str(pack_file)]) == 1
    err = capsys.readouterr().err
    assert f"results store folder {store.root} is not writable" in err and ".tmp" not in err


# ----- issue 57, class 8: a full disk is one error, naming the path, from every writer -------------------------

def _small_notebook(path):
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell('profile = "smoke"', metadata={"tags": ["parameters"]})]
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("writer", ["torch's checkpoint writer", "the probe's ledger", "papermill's notebook writer",
                                    "a full quota"])
def test_a_full_disk_names_the_path_from_every_writer(tmp_path, monkeypatch, writer):
    """Class 8: torch's checkpoint writer said "unexpected pos", the pack's part writer and the notebook writer
    "[Errno 28]", the ledger "needs at least 0 bytes". Each now says ``no space left to write <path> (needs about N
    MB, ...)`` (the pack's parts: ``test_pack.py``)."""
    from vixnb import files
    from vixnb.book import execute

    def full_after(limit, code=errno.ENOSPC):
        real = files.CountedFile.write

        def write(self, data):
            if self.written + len(data) > limit:
                self.written += len(data)
                self.error = OSError(code, os.strerror(code))
                raise self.error
            return real(self, data)
        monkeypatch.setattr(files.CountedFile, "write", write)

    if writer in ("torch's checkpoint writer", "a full quota"):
        full_after(4096, errno.EDQUOT if writer == "a full quota" else errno.ENOSPC)
        path = tmp_path / ".checkpoints" / "run.pt"
        with pytest.raises(StoreError) as raised:
            save_checkpoint(path, {"model": torch.zeros(250_000)})  # 1 MB of tensors
        assert str(raised.value).startswith(f"no space left to write {path} (needs about 1.0 MB, ")
    elif writer == "the probe's ledger":
        full_after(10)
        path = tmp_path / "probe-ledger.json"
        text = json.dumps({"budget/0123": {"equal": True}} | {f"k{i}": {"x": "y" * 100} for i in range(100)})
        with pytest.raises(StoreError, match=re.escape(f"no space left to write {path} (needs about 0.01 MB, ")):
            atomic_write(path, lambda f: f.write(text))
    else:
        source, out = _small_notebook(tmp_path / "nb.ipynb"), tmp_path / "out" / "nb.ipynb"

        def papermill_full(*a, **k):  # papermill wraps the writer's error in its own
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError as e:
                raise RuntimeError("could not write the notebook") from e

        import papermill

        monkeypatch.setattr(papermill, "execute_notebook", papermill_full)
        with pytest.raises(StoreError, match=re.escape(f"no space left to write {out} (")):
            execute.run_notebook(source, profile="smoke", output=out, kernel_name="python3")
        assert list(out.parent.iterdir()) == []  # nothing half-written left beside it
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


# ----- issue 57, class 9: everything a command needs is checked before it works --------------------------------

def test_a_toc_entry_without_a_notebook_is_found_before_any_chapter_runs(tmp_path, monkeypatch):
    """A `_toc.yml` entry naming no notebook was found after the chapters before it had run; a broken `_toc.yml`
    gave "an unexpected error" without the file's name."""
    import yaml

    from vixnb.book import build

    root = build.copy_book_sources(tmp_path / "book")
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if all("/" not in c["file"].split("book/executed/")[-1] for c in p["chapters"]))
    part["chapters"].append({"file": "book/executed/no_such_chapter"})
    (root / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    monkeypatch.setattr(build, "run_notebook", lambda *a, **k: pytest.fail("a chapter ran first"))
    monkeypatch.setattr(build, "write_contents", lambda *a, **k: pytest.fail("the contents were built first"))
    with pytest.raises(ValueError, match=r"_toc\.yml names chapter\(s\) with no notebook in notebooks/: "
                                         "no_such_chapter"):
        build.build_book("smoke", book_root=root)
    (root / "_toc.yml").write_text("root: book/intro\nparts: [\n")
    with pytest.raises(ValueError, match=r"_toc\.yml: not valid YAML at line 3, column 1"):
        build.build_book("smoke", book_root=root)


@pytest.mark.parametrize("argv, says", [
    (["batch", "--folder", "README.md", "--dry-run"], "argument --folder: README.md is a file"),
    (["plan", "--gpus", "300000000"], "argument --gpus: 300000000 is above 4096"),
    (["batch", "--clock-from", "99999999999"], "argument --clock-from: 99999999999 is "),
    (["batch", "--pack-since", "99999999999", "--pack", "x.tar.gz"], "argument --pack-since: 99999999999 is "),
])
def test_an_option_a_command_would_meet_late_is_refused_at_once(argv, says, capsys, monkeypatch):
    """--folder naming a file was found after the plan; --gpus 300000000 ended in a MemoryError after minutes;
    --clock-from in the future printed "trained 4 s of -2306511284 s", --pack-since in the future packed nothing."""
    from vixnb.plan import plan as planning

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(planning, "build", lambda *a, **k: pytest.fail("the plan was built first"))
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and says in capsys.readouterr().err


def test_bench_mixers_fails_when_every_row_failed(capsys, monkeypatch, tmp_path):
    import vixnb.bench as bench

    rows = [{"mechanism": m, "kind": m, "tokens": 8, "batch": 1, "device": "cpu", "dtype": "fp32", "ms": None,
             "peak_mb": None, "memory": None, "params": None, "ratio_vs_materialized_softmax": None,
             "memory_ratio_vs_materialized_softmax": None, "status": "error", "error": "RuntimeError: broken"}
            for m in ("softmax", "nystrom")]
    monkeypatch.setattr(bench, "bench_mixers", lambda **k: rows)
    err = cli(capsys, "bench", "mixers", "--json", str(tmp_path / "m.json"), code=1)
    assert "every mixer failed (2 rows" in err and not (tmp_path / "m.json").exists()


def test_a_model_setting_too_large_for_this_machine_names_the_setting(capsys, monkeypatch):
    from vixnb.runs import make

    monkeypatch.setattr(make, "run", lambda *a, **k: pytest.fail("a model was built"))
    err = cli(capsys, "train", "vit", "--override", "dim=60000", "--override", "mlp_dim=240000", code=2)
    assert "--override dim=60000 --override mlp_dim=240000: model 'vit' would hold " in err
    assert "of memory this machine has available; give smaller settings" in err


def test_vixnb_run_never_writes_over_a_source_notebook(capsys):
    source = Path(__file__).resolve().parents[1] / "notebooks" / "vix_rope.ipynb"
    before = source.read_bytes()
    for out in (source, source.with_name("vix_table1.ipynb")):
        err = cli(capsys, "run", "vix_rope", "-o", str(out), code=2)
        assert "is a source notebook (the one run, or another of notebooks/); give another path" in err
    assert source.read_bytes() == before


def test_an_image_too_large_to_decode_is_named(cpu_data, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # a 32x32 image is then a "decompression bomb"
    path = cpu_data / "test" / "cat" / "0000.jpg"
    with pytest.raises(data.DataError, match=rf"{re.escape(str(path))}: unreadable image \(DecompressionBombError"):
        data.decode_image_files([path], 32, "test", allow_resize=True)


def test_a_stop_signal_during_a_checkpoint_write_waits_for_the_write(tmp_path, monkeypatch):
    """Ctrl-C or a batch's SIGTERM landing inside torch's writer came out as a RuntimeError ("unexpected pos"), a
    failed run, whose job then removed the checkpoints a stopped run keeps: the write ends first, then the signal acts
    (a KeyboardInterrupt), and the checkpoint is whole."""
    import signal

    real = torch.save

    def save_with_a_signal(obj, f):
        os.kill(os.getpid(), signal.SIGINT)  # what a terminal's Ctrl-C sends, in the middle of the save
        real(obj, f)

    monkeypatch.setattr(torch, "save", save_with_a_signal)
    path = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"w": torch.arange(3.0)})
    assert torch.load(path, weights_only=True)["w"].tolist() == [0.0, 1.0, 2.0]
