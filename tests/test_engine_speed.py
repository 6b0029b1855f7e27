"""The engine's speed work, checked on the CPU: no host read inside an epoch, the graphed step's code path (run
eagerly) bitwise the eager one and the engine before it, several runs at once each bitwise its solo run, and the
engine benchmark's smoke run. Timings themselves are the benchmark's (``vixnb bench train --engine``) and
``tools/gpu_check.sh``'s, never a test's."""
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import traceback

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from vixnb.engine import train as engine
from vixnb.bench.equivalence import execution_equivalence
from vixnb.engine.concurrent import sync_checked, train_concurrently
from vixnb.runs.spec import run_config
from vixnb.runs.probe import code_at

TINY = dict(width=16, depth=2, heads=2, patch=8)  # vit_small_* at 32 x 32: 16 patch tokens, two blocks
FNET = dict(patch_size=4, dim=32, heads=2, dim_head=16, mlp_dim=64)
# short runs whose history (timings left out) and selected weights must come out bitwise as the engine of commit
# 4c96be8 (before the step was recorded on the device and graphed) makes them, run on this machine: the engine must
# keep giving the bits that every stored result's engine gives. Both sides run here, on this CPU, torch and thread
# count (a digest pinned on one machine is another machine's failure: BLAS kernels and threads round differently)
PINNED_COMMIT = "4c96be8"
PINNED = {
    # block="sequential": the simplified block of 4c96be8 (its default then; SAS-P is the default now)
    "blog": ("vit_small_simplified", dict(epochs=2, batch_size=6, schedule="cosine", block="sequential",
                                          augment={"hflip": True, "vflip": True, "rotate": 15}, **TINY)),
    "dualopt": ("fnet", dict(epochs=3, batch_size=8, optimizer="dualopt", randaugment=[1, 1], post_train_epochs=1,
                             **FNET)),
}
#: the pinned commit's engine, run in its own process on the code ``git archive`` gives (``probe.code_at``)
PINNED_SCRIPT = """
import hashlib, json, sys
import torch
try:  # the pinned commit's engine, a module of its own (an editable install would lend it today's vixnb.engine)
    from vixnb import train as engine
except ImportError:
    from vixnb.engine import train as engine
torch.set_num_threads(int(sys.argv[1]))
result = engine.train(json.load(sys.stdin), progress=False, with_weights=True)
h = hashlib.sha256(json.dumps(engine.without_timings(result["history"]), sort_keys=True).encode())
for name, tensor in sorted(result["best_state"].items()):
    h.update(name.encode())
    h.update(tensor.contiguous().numpy().tobytes())
print(h.hexdigest()[:16])
"""


def _pinned_config(name):
    model, settings = PINNED[name]
    config = run_config(model, profile="smoke", **settings)
    config["train_size"] = 22  # three steps an epoch, the last one short
    config["test_size"] = 32  # the smoke profile's test set when the digests were pinned
    return config


def digest(result):
    """16 hex digits of SHA-256 over a result's history without timings and its selected weights."""
    h = hashlib.sha256(json.dumps(engine.without_timings(result["history"]), sort_keys=True).encode())
    for name, tensor in sorted(result["best_state"].items()):
        h.update(name.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@functools.cache
def pinned_digest(name):
    """The digest of ``PINNED[name]`` made by the engine of ``PINNED_COMMIT`` on this machine, at this process's
    thread count; skips where this clone lacks the commit (a shallow clone) and fails naming the error where that
    code does not run."""
    with code_at(PINNED_COMMIT) as old:
        if old is None:
            pytest.skip(f"commit {PINNED_COMMIT} is not in this clone (a shallow clone?): `git fetch --unshallow` "
                        "to compare the engine's bits with it")
        done = subprocess.run([sys.executable, "-c", PINNED_SCRIPT, str(torch.get_num_threads())],
                              input=json.dumps(_pinned_config(name)), capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(old), "CUDA_VISIBLE_DEVICES": ""},
                              cwd=tempfile.gettempdir(), timeout=600)
    assert done.returncode == 0, f"the engine of {PINNED_COMMIT} did not run: {done.stderr[-1500:]}"
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphed-path"])
def test_the_engine_gives_the_bits_it_gave_before(graphs):
    _check_pinned("blog", graphs)


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphed-path"])
def test_dualopt_randaugment_and_post_training_give_the_bits_they_gave_before(graphs):
    _check_pinned("dualopt", graphs)


def _check_pinned(name, graphs):
    result = engine.train(_pinned_config(name), progress=False, with_weights=True, graphs=graphs)
    assert digest(result) == pinned_digest(name)
    # the mode names the code path: the graphed one runs eagerly on a CPU (nothing captured: ``cuda_graphs``);
    # RandAugment (the dualopt run's) draws on the host, which keeps its steps eager
    graphed = graphs and not _pinned_config(name)["randaugment"]
    assert result["provenance"]["execution"] == {"cuda_graphs": [], "concurrent_runs": 1, "compile": False,
                                                 "attention": "auto", "mode": "graphed" if graphed else "eager"}


class HostReads(TorchDispatchMode):
    """Counts the operators that read a tensor's value on the host, outside ``torch.optim`` (whose CPU AdamW reads
    its step count; on a GPU the fused, capturable one does not)."""
    READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default,
             torch.ops.aten.item.default, torch.ops.aten.lift_fresh.default}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.READS and not any("torch/optim/" in f.filename.replace("\\", "/")
                                           for f in traceback.extract_stack()):
            self.count += 1
        return func(*args, **(kwargs or {}))


def _host_reads(steps_an_epoch):
    config = run_config("vit_small_simplified", profile="smoke", epochs=2, batch_size=2, augment=False, **TINY)
    config["train_size"] = 2 * steps_an_epoch
    engine.train(config, progress=False)  # data and constants made once, outside the count
    with HostReads() as reads:
        engine.train(config, progress=False)
    return reads.count


def test_host_reads_grow_with_epochs_not_steps():
    extra = (_host_reads(16) - _host_reads(4)) / (2 * 12)  # two epochs, 12 more steps each
    assert extra <= 0.5, f"{extra} host reads per extra training step"


def test_a_non_finite_loss_is_named_by_its_step_at_the_epochs_end(monkeypatch):
    config = {**run_config("vit_small_simplified", profile="smoke", epochs=1, batch_size=6, augment=False, **TINY),
              "train_size": 16}
    real, calls = engine.F.cross_entropy, []

    def second_step_nan(logits, labels):
        calls.append(1)
        loss = real(logits, labels)
        return loss * float("nan") if len(calls) == 2 else loss

    monkeypatch.setattr(engine.F, "cross_entropy", second_step_nan)
    with pytest.raises(FloatingPointError, match=r"loss became nan at epoch 1, step 2; no result stored"):
        engine.train(config, progress=False)
    assert len(calls) == 3  # the epoch ran to its end, then was read once


def test_runs_at_once_each_give_their_solo_run_bitwise():
    jobs = [_pinned_config("blog"), {**_pinned_config("blog"), "seed": 1}, _pinned_config("dualopt")]
    solo = [engine.train(c, progress=False, with_weights=True) for c in jobs]
    together = train_concurrently([{"config": c, "with_weights": True} for c in jobs], graphs=True)
    for alone, interleaved in zip(solo, together):
        assert digest(interleaved) == digest(alone)
        assert interleaved["provenance"]["execution"]["concurrent_runs"] == 3


def test_a_failing_run_among_several_is_its_outcome_and_the_others_finish():
    good = run_config("vit_small_simplified", profile="smoke", epochs=1, batch_size=8, augment=False, **TINY)
    bad = {**good, "model_overrides": {**good["model_overrides"], "no_such_setting": 1}}
    outcomes = train_concurrently([{"config": bad}, {"config": good}])
    assert isinstance(outcomes[0], Exception) and "no_such_setting" in str(outcomes[0])
    assert outcomes[1]["status"] == "done"
    assert engine.without_timings(outcomes[1]["history"]) == engine.without_timings(
        engine.train(good, progress=False)["history"])


def test_sync_checked_trains_the_run_as_train_does():
    config = run_config("vit_small_simplified", profile="smoke", epochs=2, batch_size=8, augment=False, **TINY)
    assert engine.without_timings(sync_checked(config)["history"]) == engine.without_timings(
        engine.train(config, progress=False)["history"])


def test_the_attention_kernels_train_as_the_explicit_softmax_path_over_100_steps_and_3_seeds():
    """The attention kernel is an execution choice (not in the key): torch's pick (the CPU's flash kernel) and SDPA's
    math kernel against the materialising path the authors' code takes, per step and in the final top-1."""
    configs = []
    for seed in range(3):
        config = run_config("vit_small_simplified", profile="smoke", epochs=4, batch_size=8, augment=False, seed=seed,
                            **TINY)
        config["train_size"] = 8 * 25  # 25 steps an epoch: 100 steps
        configs.append(config)
    rows = execution_equivalence(configs, {"explicit": {"attention": "explicit"}, "math": {"attention": "math"}})
    assert [r["choice"] for r in rows] == ["explicit", "math"]
    for row in rows:
        assert row["max_loss_diff"] <= 1e-4 and row["within_spread"], row


@pytest.mark.parametrize("attention, why", [("cudnn", "is a CUDA kernel"), ("fast", "use one of auto, math, flash")])
def test_an_attention_kernel_that_cannot_run_is_named(attention, why):
    config = run_config("vit_small_simplified", profile="smoke", epochs=1, batch_size=8, augment=False, **TINY)
    with pytest.raises(ValueError, match=rf"^attention={attention!r}.*{why}"):
        engine.train(config, progress=False, attention=attention)
