"""GPU minutes of the plan's entries (``vixnb.plan.plan``), with where each estimate comes from (its ``basis``).

A training run's minutes come, in that order of trust, from
1. a stored run of the same model in the profile: its measured seconds per training epoch and per test pass (the
   same settings if stored, else any), on the GPU that made it;
2. the standalone training throughput that ``vixnb bench train`` measured (``results/bench/train.json``);
3. the run's training FLOPs per image (3x the forward) at an effective rate fitted to the measured runs and
   benchmark rows against the work of one step (FLOPs per image times the batch): small models are bound by
   kernel launches, large ones by the matrix units, so a ViT-B/16 at 224 px is not estimated at the rate of the
   tiny ViX models. The rate is kept within what was measured and ``RATE_CAP`` of the GPU's peak.
Each epoch trains the training split and evaluates the test split (a forward at ``EVAL_COST`` of a training step
where no test pass was measured); ``STARTUP_SECONDS`` per run go to the job's start (process, CUDA, data). A
measurement or benchmark has its kind's nominal minutes (``record_kinds.KINDS``). A CPU profile needs no GPU.

**Engine modes** (``engine.modes``): each entry is estimated in the mode it is expected to train in (the plan's
``mode``). A stored run's seconds are those of the mode that made it (its provenance; runs from before the modes were
eager); an ensemble member's are the ensemble's divided among its members. Where the expected mode is another, the
training part is scaled by the two modes' speeds as the newest probe of a lent GPU measured them
(``bench/engine-probe-*.json``, written by ``vixnb batch --probe`` on a GPU: ``mode_speeds``), and the basis says so;
with no probe stored, the eager figures stand and the basis says the mode is not measured yet.

``gpu``: the figures were measured on an H100; for another GPU (``GPUS``) the training part is scaled by the ratio
of their peak matrix throughput at the precision that GPU would use (bf16 where it has it natively, else fp16),
and the basis says so. A launch-bound small model gains less from a larger GPU and loses less on a smaller one than
that ratio says: an upper bound on a slower GPU.
"""
from __future__ import annotations

import json
import math
import statistics
from functools import cache


from ..data import dataset_spec
from ..measure.flops import GPUS, RATE_CAP, flops
from ..models import model_cfg, model_fact
from ..runs.profiles import gpu_profile
from ..runs.spec import run_model_settings
from ..results.provenance import made_alone
from ..runs.policy import unusable

STARTUP_SECONDS = 25  # measured on an H100: a batch job's process, CUDA context and data (2026-11-25, vit_small)
EVAL_COST = 1 / 3  # an evaluation forward, against a training step, per image
MEASURED_ON = "h100"  # the GPU of the stored figures (results and benchmarks)


def check_gpu(gpu):
    """``gpu`` as given (lower case), or a one-line error naming the parameter and the known GPUs."""
    if gpu is None or gpu.lower() in GPUS:
        return gpu and gpu.lower()
    raise ValueError(f"gpu={gpu!r}: use one of {', '.join(GPUS)}")


def gpu_factor(gpu):
    """How many times longer the training part takes on ``gpu`` than on the H100 of the stored figures."""
    return GPUS[MEASURED_ON][0] / GPUS[gpu][0] if gpu else 1.0


def bench_rates(store):
    """``{model: {precision: training images/s}}`` and the device, from ``bench/train.json`` (superseded rows left
    out)."""
    record = store.load_record("bench", "train")
    if not record:
        return {}, None
    stale = set((record.get("superseded") or {}).get("rows", []))
    rates = {r["model"]: {"bf16": r.get("ours_images_per_s"), "fp32": r.get("ours_paper_dtype_images_per_s")}
             for r in record["rows"] if r["model"] not in stale}
    return rates, record.get("provenance", {}).get("device")


@cache
def training_gflop(model, dataset, overrides_json="{}"):
    """Training GFLOP per image (3x the forward, ``measure.flops``) of a model in its paper configuration, with
    the run's model settings (``overrides_json``: JSON of ``model_overrides``). Counting takes about 0.1 s a
    model and a plan counts over a hundred, in every process that builds one (the book's intro, the plan and
    provenance pages), so counts are kept between processes (``models.model_fact``: for today's code only)."""
    return model_fact(forward_gflop_x3, model, dataset, overrides_json)


def forward_gflop_x3(model):
    """Three times the GFLOP of one forward of a built model (``measure.flops``), per image: the training count."""
    return 3 * flops(model)["gflops"]


def _overrides(config):
    return json.dumps(run_model_settings(config), sort_keys=True)


def step_gflop(config):
    """The training GFLOP of one step of ``config``'s run: its model's per image (``training_gflop``) times its
    batch."""
    return training_gflop(config["model"], config["dataset"], _overrides(config)) * config["batch_size"]


def run_mode(result):
    """The engine mode that made a stored result (``provenance["execution"]["mode"]``; eager before the modes) and
    how many runs shared its step (an ensemble's members, else 1)."""
    execution = (result.get("provenance") or {}).get("execution")
    if not isinstance(execution, dict):
        return "eager", 1
    return execution.get("mode", "eager"), int(execution.get("members", 1))


def stored_timings(store, profile):
    """``{(model, overrides JSON): timing}`` and ``{model: timing}`` of the profile's stored runs, a timing being
    ``{"epoch_s", "test_s", "device", "images", "mode"}``: the mean training seconds per epoch and per test pass (epoch
    1 left out where there are more: start-up) of the first stored run (an ensemble member's: the ensemble's over its
    members), its device, the training images of an epoch and the engine mode that made it (``run_mode``). Only runs
    that had the device to themselves (``made_alone``), or an ensemble's members."""
    by_config, by_model = {}, {}
    for result in store.results(profile, unusable=unusable):
        history, config = result.get("history"), result.get("config") or {}
        mode, members = run_mode(result)
        if not history or (members == 1 and not made_alone(result)):
            continue  # a shared device's seconds are not a run's own
        steady = history[1:] or history
        spec = dataset_spec(config["dataset"])
        timing = {"epoch_s": statistics.fmean(h["seconds"] for h in steady) / members,
                  "test_s": statistics.fmean(h.get("eval_seconds", 0.0) for h in steady) / members,
                  "device": (result.get("provenance") or {}).get("device", "a GPU"),
                  "images": config.get("train_size") or spec.train_images, "mode": mode}
        by_config.setdefault((config["model"], _overrides(config)), timing)
        by_model.setdefault(config["model"], timing)
    return by_config, by_model


#: a lent GPU's probe of the engine's modes, stored in the results store (``bench/<name>-<GPU>.json``)
PROBE_RECORD = "engine-probe"


def mode_speeds(store):
    """``({mode: member images/s over eager's}, device)`` of the newest stored probe of a GPU (``PROBE_RECORD``):
    each passing mode's speed relative to eager on the probe's runs; ``({}, None)`` where no GPU was probed yet."""
    found = []
    for path in sorted((store.root / "bench").glob(f"{PROBE_RECORD}-*.json")):
        try:
            record = json.loads(path.read_text())
            rates = {r["mode"]: r["images_per_s"] for r in record["rows"] if r["passed"] and r["images_per_s"]}
            found.append(((record.get("provenance") or {}).get("finished", ""), rates, record["device"]))
        except (OSError, ValueError, KeyError, TypeError):  # an unreadable record is no evidence
            continue
    for _, rates, device in sorted(found, reverse=True):
        if rates.get("eager"):
            return {mode: rate / rates["eager"] for mode, rate in rates.items()}, device
    return {}, None


def _mode_scale(mode, timed_mode, speeds):
    """``(factor on the training seconds, note)`` of an entry expected in ``mode`` from a timing made in
    ``timed_mode`` (``mode_speeds``' ``speeds``)."""
    if not mode or mode == timed_mode:
        return 1.0, f"; {mode or timed_mode}"
    if mode in speeds and timed_mode in speeds:
        return speeds[timed_mode] / speeds[mode], f"; {mode}: {speeds[mode] / speeds[timed_mode]:.1f}x {timed_mode} " \
                                                  "as a GPU's probe measured it"
    return 1.0, f"; {mode} expected, timed {timed_mode} (no GPU's probe of the modes stored yet)"


def fitted_rate(points):
    """``rate(work)``: training TFLOP/s against the work of one step (GFLOP), a power law fitted by least squares to
    ``points`` (``[(work, TFLOP/s)]``, at least two distinct works), kept within the measured rates' range widened to
    ``RATE_CAP`` of the H100's peak above; None with too few points."""
    points = [(w, r) for w, r in points if w > 0 and r > 0]
    if len({w for w, _ in points}) < 2:
        return None
    xs, ys = [math.log(w) for w, _ in points], [math.log(r) for _, r in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    low, high = min(r for _, r in points), RATE_CAP * GPUS[MEASURED_ON][0]
    return lambda work: min(high, max(low, math.exp(my + slope * (math.log(work) - mx))))


def measured_points(rates, timings):
    """``[(work per step in GFLOP, TFLOP/s)]`` of the benchmark's rows (bf16) and the stored runs (``timings``: per
    model), for ``fitted_rate``."""
    points = []
    for model, r in rates.items():
        if r.get("bf16"):
            gflop = training_gflop(model, "cifar10")
            points.append((gflop * model_cfg(model).get("batch_size", 64), r["bf16"] * gflop / 1e3))
    for model, t in timings.items():
        gflop = training_gflop(model, "cifar10")
        points.append((gflop * model_cfg(model).get("batch_size", 64), t["images"] / t["epoch_s"] * gflop / 1e3))
    return points


def estimate_record(profile, minutes, gpu=None):
    """``(GPU minutes, basis)`` of a measurement or benchmark in ``profile``: its kind's nominal ``minutes``, scaled
    to ``gpu`` (None: the H100 of the figures)."""
    if not gpu_profile(profile):
        return 0.0, "CPU profile: no GPU time"
    on = f"; scaled to a {gpu.upper()} by peak throughput" if gpu else ""
    return float(minutes) * gpu_factor(gpu), "nominal (no stored timing)" + on


def estimate_run(config, *, rates, device, timings, rate, gpu=None, mode=None, speeds=None, members=1):
    """``(GPU minutes, basis)`` of the training run of ``config`` (see the module's docstring): ``rates``/``device``
    from ``bench_rates``, ``timings`` from ``stored_timings``, ``rate`` from ``fitted_rate`` (or None), ``gpu`` the
    GPU to estimate for (None: the H100 of the figures), ``mode`` the engine mode it is expected to train in,
    ``speeds`` the modes' speeds a GPU's probe measured (``mode_speeds``: the training and the evaluation run in that
    mode) and ``members`` the runs its job trains at once (an ensemble's: they share its start-up)."""
    if not gpu_profile(config["profile"]):
        return 0.0, "CPU profile: no GPU time"
    factor, on = gpu_factor(gpu), f"; scaled to a {gpu.upper()} by peak throughput" if gpu else ""
    spec = dataset_spec(config["dataset"])
    n_train, n_test = config["train_size"] or spec.train_images, config["test_size"] or spec.test_images
    epochs, note = expected_epochs(config)
    by_config, by_model = timings
    timing = by_config.get((config["model"], _overrides(config))) or by_model.get(config["model"])
    if timing is not None and config["dataset"] == "cifar10" and config["precision"] == "bf16":
        same = (config["model"], _overrides(config)) in by_config
        scale, how = _mode_scale(mode, timing.get("mode", "eager"), speeds or {})
        train_s = timing["epoch_s"] * n_train / timing["images"] * scale
        test_s = timing["test_s"] * scale or EVAL_COST * train_s * n_test / n_train
        seconds = epochs * (train_s + test_s) * factor + STARTUP_SECONDS / members
        which = "this run's settings" if same else "another setting of it"
        return seconds / 60, (f"stored run ({which}): {timing['epoch_s']:.1f} s/epoch + {timing['test_s']:.1f} s/test "
                              f"on {timing['device']}{how}{note}{on}")
    images = epochs * (n_train + EVAL_COST * n_test)
    precision = config["precision"]
    bench = (rates.get(config["model"]) or {}).get(precision) if config["dataset"] == "cifar10" else None
    scale, how = _mode_scale(mode, "eager", speeds or {})  # the benchmark and the fitted rate: eager steps
    if bench:
        seconds = images / bench * factor * scale + STARTUP_SECONDS / members
        return seconds / 60, f"bench train: {bench:,.0f} img/s ({precision}, {device}){how}{note}{on}"
    if rate is not None:
        gflop = training_gflop(config["model"], config["dataset"], _overrides(config))
        tflops = rate(step_gflop(config))
        seconds = images * gflop / (tflops * 1e3) * factor * scale + STARTUP_SECONDS / members
        return seconds / 60, (f"FLOPs: {gflop:.2f} GFLOP/img at {tflops:.1f} TFLOP/s, the rate fitted to measured runs "
                              f"at {gflop * config['batch_size']:,.0f} GFLOP a step{how}{note}{on}")
    return float("nan"), "no throughput measured yet: run `vixnb bench train` first"


#: epochs a DualOpT run without a cap is taken to last (it stops on patience, twice; the ceiling is far above): a
#: nominal figure until stored runs say more. SGD alone under ``stop: patience`` (DualOpT's budget) is taken to last
#: as long
DUALOPT_NOMINAL_EPOCHS = 150


def expected_epochs(config):
    """``(epochs, note)``: the epochs a run is expected to train (main stage and post-training), and a note for the
    estimate's basis where it is nominal: a DualOpT run without a cap (the paper profile) stops on patience, so its
    ``epochs`` (a ceiling) would overstate it, as SGD alone's under ``stop: patience``; post-training likewise stops
    on patience."""
    epochs, post, dualopt = config["epochs"], config["post_train_epochs"], config["dualopt"]
    uncapped = dualopt is not None and "adamw_epochs" not in dualopt
    rule = "DualOpT" if config["optimizer"] == "dualopt" else "SGD alone" if config.get("stop") == "patience" else None
    nominal = rule is not None and epochs >= dualopt["max_epochs"]  # no cap below the ceiling: patience ends it
    if nominal:
        epochs = min(epochs, DUALOPT_NOMINAL_EPOCHS)
    if post and uncapped:
        post = min(post, 2 * dualopt["patience"])
    note = f"; {rule}: nominal {epochs} epochs (stops on patience)" if nominal else ""
    return epochs + post, note
