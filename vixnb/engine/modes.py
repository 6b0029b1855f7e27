"""The engine's modes, and the probe that picks the fastest correct one on the machine at hand (``probe_modes``).

A mode is how a run's steps execute, never what the run is (no mode enters a run's key; each result's
``provenance["execution"]["mode"]`` names the one that made it):

- ``eager``: one run, each operation dispatched from Python;
- ``graphed``: one run, the whole step (gather, augmentation, forward, backward, gradient norms, clipping, AdamW) one
  CUDA graph, replayed (``steps.Step``);
- ``ensemble``: runs of one shape as one vmapped ensemble (``ensemble.Ensemble``), eager;
- ``graphed ensemble``: the ensemble's step as one CUDA graph;
- ``streams``: several runs at once on their own CUDA streams (``concurrent.train_concurrently``): kept only where the
  probe measures it faster than the ensemble on the same runs.

The probe (at most ``PROBE_SECONDS``) trains ``PROBE_STEPS`` steps of the batch's first runs in float32 in every mode
and compares each mode's per-step losses with eager's. The tolerance comes from two correct implementations measured
in the same probe: the same eager run in float64 and in float32 (their largest loss difference is float32's rounding
over those steps, ``TOLERANCE_FACTOR`` times it allowed). Where the two paths run the same operations (the graphed path
on a CPU, which runs eagerly), equal bits are owed. The modes that pass are timed (member images per second), and
``choose`` picks the fastest passing mode for one run and for runs of one shape. A mode that fails is switched off and
said why; eager is never switched off: a probe never stops training.
"""
from __future__ import annotations

import json
import math
import time

import torch

from .concurrent import train_concurrently
from ..models import default_dtype
from .train import EPOCH_START, STEPS_DONE, splits, training_device, training_steps

MODES = ("eager", "graphed", "ensemble", "graphed ensemble", "streams")
SINGLE_MODES, GROUP_MODES = ("eager", "graphed"), ("ensemble", "graphed ensemble", "streams")
PROBE_STEPS = 20  # optimizer steps each mode trains in the probe
PROBE_SECONDS = 90  # the most the probe spends; modes left unchecked are off
#: how far a mode may stray from eager, in units of float32's own rounding over the probe's steps (float64 against
#: float32): two correct float32 paths differ by rounding amplified step by step, measured on a CPU at 2.8 to 12.7
#: times it (ensembles of 3 and 5 members against their runs, equal in float64 to 1e-10: tests/test_ensemble.py); a
#: wrong step (a learning rate, a draw, a missed clip) strays by orders of magnitude more
TOLERANCE_FACTOR = 32.0


def probe_config(config, steps=PROBE_STEPS):
    """``config`` reduced to the probe's run: two epochs of ``steps`` / 2 full batches each and two evaluation batches
    (the second epoch's evaluation replays its graph, where a mode has one), in float32 (the modes are compared in
    float32: a half precision's own rounding would hide a wrong step)."""
    bs = config["batch_size"]
    return {**config, "epochs": 2, "train_size": bs * max(steps // 2, 1), "test_size": bs * 2, "precision": "fp32",
            "amp_loss_only": False, "post_train_epochs": 0, "compile": False}


def _trained_losses(configs, *, device, graphs, data, streams=False):
    """Each run's losses over the probe's two epochs (``configs`` several: one ensemble, or with ``streams`` several
    runs at once): every step's training loss, then each epoch's selection loss; and the member images per second of
    the second epoch, its evaluation included (the first builds, warms up and captures)."""
    cuda, made, marks = device.type == "cuda", [], []

    def mark():
        if cuda:
            torch.cuda.synchronize(device)
        marks.append(time.perf_counter())

    if streams:
        outcomes = train_concurrently([{"config": c, "data": data, "graphs": graphs} for c in configs], device=device)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        seconds = sum(o["history"][-1]["seconds"] + o["history"][-1]["eval_seconds"] for o in outcomes) / len(outcomes)
        # each run's epoch means and selection losses (its steps' losses are its history's means)
        losses = [[v for h in o["history"] for v in (h["train_loss"], h["select_loss"])] for o in outcomes]
        return losses, sum(c["train_size"] for c in configs) / seconds
    rows = []
    with torch.random.fork_rng(devices=[device] if cuda else []):
        run = training_steps(configs, progress=False, device=device, checkpoint=None, download=False, deadline=None,
                             with_weights=False, init_state=None, init_sha256=None, graphs=graphs, interleave=True,
                             data=data, on_step=made.append)
        while True:
            try:
                what = next(run)
            except StopIteration as done:
                outcomes = done.value
                break
            if what == EPOCH_START:
                mark()
            elif what == STEPS_DONE:
                rows.append(made[-1].end_epoch())
        mark()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    images = configs[0]["train_size"] * len(configs)
    losses = []
    for m, outcome in enumerate(outcomes):
        steps = [r[0] if len(configs) == 1 else r[m][0] for epoch in rows for r in epoch]
        losses.append(steps + [h["select_loss"] for h in outcome["history"]])
    return losses, images / (marks[-1] - marks[1])


def _epoch_means(losses, epochs):
    """A probe run's losses (``_trained_losses``: every step's, then each epoch's selection loss) as each epoch's mean
    training loss and its selection loss, interleaved (what a run's history holds)."""
    steps, selects = losses[:-epochs], losses[-epochs:]
    per = len(steps) // epochs
    return [v for e in range(epochs) for v in (sum(steps[e * per:(e + 1) * per]) / per, selects[e])]


def _gap(a, b):
    """The largest |difference| of two loss curves (inf where either is not finite or their lengths differ)."""
    if len(a) != len(b) or not all(map(math.isfinite, a + b)):
        return math.inf
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def _members(configs, count):
    """``count`` probe members of runs of one shape: the job's own (``configs``), and where it has fewer, copies of its
    first with other seeds, learning rates, a warm-up and clipping (the settings each member keeps its own)."""
    first, out = configs[0], list(configs[:count])
    extra = [{"seed": first["seed"] + 101, "lr": first["lr"] * 0.5},
             {"seed": first["seed"] + 102, "warmup_steps": 5, "grad_clip": 1.0}]
    for i in range(count - len(out)):
        out.append({**first, **extra[i % len(extra)], "seed": first["seed"] + 101 + i})
    return out


def probe_modes(single, group=None, *, device=None, steps=PROBE_STEPS, limit_s=PROBE_SECONDS, members=None,
                modes=MODES, progress=print):
    """The probe: check and time every mode of ``modes`` on ``single`` (a run config: the batch's first run) and, for
    the group modes, ``group`` (the configs of the batch's first runs of one shape; None: ``single`` with generated
    members), within ``limit_s`` seconds. Returns ``{"device", "steps", "spread", "rows": [{"mode", "model",
    "members", "max_dloss", "tolerance", "images_per_s", "passed", "why", "seconds"}], "chosen": choose(rows),
    "seconds"}``; each row is printed as it is made (``progress``). The caller's random states and default float type
    are kept."""
    start = time.time()
    device = training_device(single, device)
    cuda = device.type == "cuda"
    group = [probe_config(c, steps) for c in (group or _members([single], members or 3))]
    if members:
        group = _members(group, members)
    single = probe_config(single, steps)
    rows, spreads = [], {}

    def left():
        return limit_s - (time.time() - start)

    def reference(config):
        """(float32 eager losses, images/s, float64-vs-float32 spread) of one run, made once."""
        key = json.dumps(config, sort_keys=True, default=str)
        if key not in spreads:
            data = splits(config, device)
            losses, rate = _trained_losses([config], device=device, graphs=False, data=data)
            with default_dtype(torch.float64):  # the same initial values (drawn in float32), trained in float64
                exact, _ = _trained_losses([config], device=device, graphs=False, data=data)
            spreads[key] = (losses[0], rate, _gap(losses[0], exact[0]), data)
        return spreads[key]

    def row(mode, configs, **fields):
        fields = {"mode": mode, "model": configs[0]["model"], "members": len(configs), "max_dloss": None,
                  "tolerance": None, "images_per_s": None, "passed": False, "why": "", "seconds": 0.0, **fields}
        rows.append(fields)
        progress(probe_line(fields))
        return fields

    for mode in modes:
        t0 = time.time()
        configs = [single] if mode in SINGLE_MODES else group
        if left() <= 0:
            row(mode, configs, why=f"not checked: the probe's {limit_s} s were spent")
            continue
        try:
            eager, eager_rate, spread, data = reference(configs[0])
            tolerance = TOLERANCE_FACTOR * spread
            if mode == "eager":
                row(mode, configs, max_dloss=0.0, tolerance=tolerance, images_per_s=eager_rate, passed=True,
                    why=f"the reference (float64 against float32: {spread:.1e})", seconds=time.time() - t0)
                continue
            graphs = mode.startswith("graphed")
            losses, rate = _trained_losses(configs, device=device, graphs=graphs, data=data,
                                           streams=mode == "streams")
            ours = losses[0]
            if mode == "streams":  # each epoch's mean training loss and its selection loss, as the runs record them
                eager = _epoch_means(eager, len(ours) // 2)
            gap = _gap(ours, eager)
            same_ops = not cuda and mode in ("graphed", "streams")  # on a CPU these run eager's own operations
            ok = gap == 0.0 if same_ops else gap <= tolerance
            why = ("" if ok else
                   f"member 0 strays from eager by {gap:.1e} (tolerance {tolerance:.1e}"
                   f"{', bitwise: the same operations on a CPU' if same_ops else ''})")
            row(mode, configs, max_dloss=gap, tolerance=0.0 if same_ops else tolerance,
                images_per_s=rate if ok else None, passed=ok, why=why, seconds=time.time() - t0)
        except Exception as e:  # noqa: BLE001  (a mode that cannot run is switched off, never the probe)
            row(mode, configs, why=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
                seconds=time.time() - t0)
    return {"device": str(torch.cuda.get_device_name(device) if cuda else "cpu"), "torch": torch.__version__,
            "steps": steps, "tolerance_factor": TOLERANCE_FACTOR, "rows": rows, "chosen": choose(rows),
            "seconds": time.time() - start}


def choose(rows):
    """``{"single": mode, "group": mode}``: the fastest passing mode (member images per second) for one run, and for
    runs of one shape (a group mode, or the single choice run after run where none is faster); eager where nothing
    else passed."""
    passed = {r["mode"]: r["images_per_s"] for r in rows if r["passed"] and r["images_per_s"] == r["images_per_s"]
              and r["images_per_s"] is not None}
    single = max((m for m in SINGLE_MODES if m in passed), key=passed.get, default="eager")
    group = max((m for m in GROUP_MODES if m in passed), key=passed.get, default=None)
    if group is None or passed.get(single, 0.0) >= passed[group]:
        group = single
    return {"single": single, "group": group}


def probe_line(row):
    """One row of the probe's table as the session log prints it."""
    dloss = "-" if row["max_dloss"] is None else f"{row['max_dloss']:.1e}"
    tol = "-" if row["tolerance"] is None else f"{row['tolerance']:.1e}"
    rate = "-" if row["images_per_s"] is None else f"{row['images_per_s']:,.0f}"
    state = "pass" if row["passed"] else "off"
    return (f"  {row['mode']:<17} {row['model']:<22} x{row['members']:<3} |dloss| {dloss:>8}  tol {tol:>8}  "
            f"{rate:>10} img/s  {state}{'  ' + row['why'] if row['why'] else ''}")


def probe_table(record):
    """The probe's table with its header and the choice, as text."""
    head = (f"engine probe on {record['device']} ({record['steps']} steps in float32, {record['seconds']:.0f} s): "
            "mode, model, members, max |dloss| against eager, tolerance, member images/s")
    chosen = record["chosen"]
    return "\n".join([head, *map(probe_line, record["rows"]),
                      f"  chosen: {chosen['single']} for a run, {chosen['group']} for runs of one shape"])
