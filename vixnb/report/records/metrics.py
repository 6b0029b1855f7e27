"""The metrics of our results, one table (``METRICS``): each metric's label and unit on the page, where our figure
comes from, how it is computed from one stored training record (one seed's) and over the stored seeds of one
configuration, and what decides it (the model, a step, or the epochs trained). The claims ledger
(``ours.ours_from_store``), the statistics over seeds (``seed_statistic``) and the per-seed comparisons
(``collect.compare_pairs``) read it."""
from __future__ import annotations

import numbers
import statistics
from typing import Callable, NamedTuple

from ...layers import shaped_init
from ...record_kinds import KINDS
from ...results.provenance import made_alone

#: ``Metric.decided_by``: the model as built (exact in every profile); a step's or an epoch's time or memory, or the
#: first epoch's gradients (a run of any length decides it); or a figure that depends on how many epochs were trained
MODEL, STEP, EPOCHS = "model", "step", "epochs"


class Metric(NamedTuple):
    """One metric of ``METRICS``.

    ``label``, ``unit``, ``source``: its name in the claims ledger, the unit of a difference of it, and where our
    figure comes from. ``decided_by``: ``MODEL``, ``STEP`` or ``EPOCHS``. ``origin``: ``runs`` (the stored training
    records, over seeds), ``counted`` (``collect.current_counts``'s ``column``, on the model as built today), a
    record kind (``column`` of its stored record: the kind's ``metrics``, ``record_kinds.KINDS``) or ``flops``
    (the efficiency measurement's, else counted).
    ``per_seed``: one done training record -> the figure or None. ``over_seeds``: how the done records of one
    configuration make the figure: ``mean`` / ``max`` / ``std`` of the per-seed figures, or ``at_best_top1`` (the
    record with the best top-1). ``heading``: the column heading of a per-seed table (``compare_pairs``). ``note``: the
    done records of one configuration -> what the figure was read on, where that is not all of it (the layers a trend
    over layers was read on), or "" (the verdict rules print it: ``claims.rules``)."""
    label: str
    unit: str
    source: str
    decided_by: str
    origin: str
    column: str | None = None
    per_seed: Callable | None = None
    over_seeds: str | None = None
    heading: str | None = None
    note: Callable | None = None

    def statistic(self, runs):
        """The figure over the done training records ``runs`` (every seed of one configuration)."""
        if self.over_seeds == "at_best_top1":
            return self.per_seed(max(runs, key=lambda r: r["top1"])) if runs else None
        values = [v for v in map(self.per_seed, runs) if isinstance(v, numbers.Real)]  # None: not recorded
        if self.over_seeds == "std":
            return statistics.stdev(values) if len(values) > 1 else None
        if self.over_seeds == "max":
            return max(values, default=None)
        return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------------------
# one stored training record -> a figure


def _top1(run):
    return run["top1"]


def _top5(run):
    return run.get("top5")


def _final_train_acc(run):
    return run["history"][-1]["train_acc"]


def _last_top1(run):
    return run["history"][-1]["select_top1"]


def _main_top1(run):
    """The best top-1 of the main stage (before post-training)."""
    return max(h["select_top1"] for h in run["history"] if h.get("stage", "main") == "main")


def _adamw_top1(run):
    """The best top-1 of the main stage's AdamW phase (DualOpT's first optimizer); None where it has none."""
    return max((h["select_top1"] for h in run["history"] if h.get("phase", "adamw") == "adamw"
                and h.get("stage", "main") == "main"), default=None)


def _seconds_after_first(run, key):
    """Mean of the history's ``key`` seconds (epoch 1 left out: start-up; all of them for a one-epoch run); None
    where an entry lacks it (runs stored before it was recorded) or for a run that shared its device
    (``made_alone``: a member of an ensemble or of a group trained at once), whose seconds are not its own."""
    if not made_alone(run):
        return None
    times = [h.get(key) for h in run["history"]]
    later = times[1:] or times
    return None if not later or None in later else sum(later) / len(later)


def _epoch_seconds(run):
    return _seconds_after_first(run, "seconds")


def _test_seconds(run):
    return _seconds_after_first(run, "eval_seconds")


def _grad_ratio(run):
    """The first layer's gradient norm over the last layer's, in the last epoch trained (where a failure the claim
    predicts is read: the blog's Fig. 14 shows it at its last epoch)."""
    norms = run["history"][-1].get("grad_norms")
    return norms[0] / norms[-1] if norms and norms[-1] else None


#: points of share a layer's alpha/(alpha+beta) must move from its initialisation to count as learned: the layers
#: that did not learn stay within about one point of it (the depth-12 simplified run at 10 epochs, 2026-11-25: 9 of
#: its 12 layers end within 0.8 points of 50, the other 3 between 9 and 15 points from it)
LEARNED_SHARE = 2.0


def _layer_shares(run):
    """``[(layer, share, learned)]`` after the last epoch: each shaped layer's alpha/(alpha+beta) in points and
    whether it moved at least ``LEARNED_SHARE`` points from its initialisation (the run's ``alpha_beta`` scheme,
    ``layers.shaped_init``); None where the run records no alpha and beta, or its scheme is not known here."""
    pairs = run["history"][-1].get("alpha_beta")
    if not pairs or not all(a + b for a, b in pairs):
        return None
    scheme = ((run.get("config") or {}).get("model_overrides") or {}).get("alpha_beta", "uniform")
    out = []
    for layer, (a, b) in enumerate(pairs, 1):
        try:
            a0, b0 = shaped_init(scheme, layer_index=layer, depth=len(pairs))
        except ValueError:
            return None
        start = 100 * a0 / (a0 + b0) if a0 + b0 else 50.0
        share = 100 * a / (a + b)
        out.append((layer, share, abs(share - start) >= LEARNED_SHARE))
    return out


def _identity_share(run):
    """alpha/(alpha+beta) of the first learned layer minus that of the last learned one after the last epoch, in
    points: a trend over depth read on the layers that moved from their initialisation (``_layer_shares``), never on
    a layer that sits at it; None where fewer than two layers moved."""
    learned = [share for _, share, moved in _layer_shares(run) or [] if moved]
    return learned[0] - learned[-1] if len(learned) >= 2 else None


def _identity_share_note(runs):
    """Which layers ``_identity_share`` read, per seed: "layers 1, 2 and 4 of 12 moved at least 2 points of share
    from their initialisation (seed 0); the 9 others sit at it and are left out"."""
    texts = []
    for run in runs:
        shares = _layer_shares(run)
        if not shares:
            continue
        learned = [layer for layer, _, moved in shares if moved]
        seed = f"(seed {(run.get('config') or {}).get('seed')})"
        if not learned:
            texts.append(f"none of its {len(shares)} layers moved {LEARNED_SHARE:g} points of share from its "
                         f"initialisation {seed}")
            continue
        names = ", ".join(map(str, learned[:-1])) + (" and " if len(learned) > 1 else "") + str(learned[-1])
        texts.append(f"{'layer' if len(learned) == 1 else 'layers'} {names} of {len(shares)} moved at least "
                     f"{LEARNED_SHARE:g} points of share from their initialisation {seed}"
                     + (f"; the {len(shares) - len(learned)} others sit at it and are left out"
                        if len(learned) < len(shares) else ""))
    return "; ".join(texts)


def _run_gpu_gb(run):
    return run.get("gpu_gb_reserved")


def _transfer_top1(run):
    return (run.get("transfer") or {}).get("top1")


def _best_epoch_loss(run):
    """The test loss of the epoch whose top-1 the run reports (``best_epoch``), where the history records it."""
    entry = next((h for h in run["history"] if h["epoch"] == run.get("best_epoch")), None)
    return entry.get("select_loss") if entry else None


# --------------------------------------------------------------------------------------------------
# the table

METRICS = {
    "top1": Metric("top-1", "points", "best top-1 over the stored seeds of the run (runs.make.run)", EPOCHS, "runs",
                   per_seed=_top1, over_seeds="max", heading="best test top-1 (%)"),
    "top5": Metric("top-5", "points", "top-5 of the run with the best top-1", EPOCHS, "runs",
                   per_seed=_top5, over_seeds="at_best_top1"),
    "params": Metric("parameters", "parameters", "the paper's parameter convention, counted on the model as built "
                     "today", MODEL, "counted", column="params_paper"),
    "size_mb": Metric("Size (MB)", "MB", "the paper's Size (MB) convention, measured on the model as built today",
                      MODEL, "counted", column="size_mb"),
    "gflops": Metric("GFLOPs", "GFLOPs", "counted from the model definition in the favor paper's convention "
                     "(vixnb.measure.flops, favor_gflops)", MODEL, "flops"),
    "top1_mean": Metric("mean top-1", "points", "the mean over the stored seeds of each run's top-1", EPOCHS, "runs",
                        per_seed=_top1, over_seeds="mean"),
    "train_acc_final": Metric("final training accuracy", "points", "training accuracy of the last epoch (the "
                              "batches' mean while training, augmented), mean over the stored seeds", EPOCHS, "runs",
                              per_seed=_final_train_acc, over_seeds="mean", heading="final train acc. (%)"),
    "train_acc_final_std": Metric("spread of the final training accuracy", "points", "standard deviation over the "
                                  "stored seeds of the last epoch's training accuracy", EPOCHS, "runs",
                                  per_seed=_final_train_acc, over_seeds="std"),
    "epoch_s": Metric("epoch time", "s", "training seconds per epoch (epoch 1 left out: start-up), mean over the "
                      "stored seeds trained alone on their device (an ensemble's or a group's seconds are shared)",
                      STEP, "runs", per_seed=_epoch_seconds, over_seeds="mean"),
    "grad_norm_first_last": Metric("first-to-last-layer gradient norm", "ratio", "the first layer's gradient norm "
                                   "over the last layer's in the last epoch (sampled steps), mean over the stored "
                                   "seeds", EPOCHS, "runs", per_seed=_grad_ratio, over_seeds="mean"),
    "identity_share_first_last": Metric("identity share, first minus last learned layer", "points of share",
                                        "alpha/(alpha+beta) of the first layer minus that of the last, after the "
                                        "last epoch, among the layers that moved at least 2 points of share from "
                                        "their initialisation, mean over the stored seeds", EPOCHS, "runs",
                                        per_seed=_identity_share, over_seeds="mean", note=_identity_share_note),
    "run_gpu_gb": Metric("the run's peak GPU memory", "GB", "GPU GB reserved at the peak of the training run itself "
                         "(the protocol's batch size, the run's precision), mean over the stored seeds", STEP, "runs",
                         per_seed=_run_gpu_gb, over_seeds="mean"),
    "top1_main": Metric("top-1 before post-training", "points", "the best top-1 of the main stage (before "
                        "post-training), best over the stored seeds", EPOCHS, "runs", per_seed=_main_top1,
                        over_seeds="max", heading="best test top-1 before post-training (%)"),
    "top1_adamw": Metric("top-1 of the AdamW phase", "points", "the best top-1 of the main stage's AdamW phase "
                         "(DualOpT's first optimizer), best over the stored seeds", EPOCHS, "runs",
                         per_seed=_adamw_top1, over_seeds="max", heading="best test top-1 of the AdamW phase (%)"),
    "test_s": Metric("test-pass time", "s", "seconds of one evaluation pass over the test set (epoch 1 left out), "
                     "mean over the stored seeds trained alone on their device", STEP, "runs", per_seed=_test_seconds,
                     over_seeds="mean"),
    "test_loss": Metric("test loss", "loss", "cross-entropy on the test set at the reported (best) epoch, mean over "
                        "the stored seeds", EPOCHS, "runs", per_seed=_best_epoch_loss, over_seeds="mean"),
    "top1_last": Metric("last epoch's test top-1", "points", "test top-1 after the last epoch, mean over the stored "
                        "seeds", EPOCHS, "runs", per_seed=_last_top1, over_seeds="mean"),
    "delta": Metric("top-1 gain of a pipeline", "points", "a printed difference of top-1 between two training "
                    "pipelines of one model (the favor paper's Table 1: its pipeline minus the original paper's); "
                    "ImageNet-1k, so only the paper's side is read", EPOCHS, "printed"),
    "top1_transfer": Metric("top-1 right after the transfer", "points", "test top-1 of a warm-started model before "
                            "any training (models.warm_start.transfer), mean over the stored seeds", EPOCHS, "runs",
                            per_seed=_transfer_top1, over_seeds="mean"),
}

# a measured figure: what a record kind declares the ledger reads of its record (``RecordKind.metrics``), a step's
# unless the kind says it depends on the epochs trained (a measure of trained weights)
METRICS |= {key: Metric(m.label, m.unit, m.source, m.decided_by, name, column=m.column)
            for name, kind in KINDS.items() for key, m in kind.metrics.items() if key not in METRICS}


def _where(**fields):
    return [key for key, m in METRICS.items() if all(getattr(m, f) == v for f, v in fields.items())]


#: metrics computed from the stored training records of every seed of a configuration
SEED_METRICS = tuple(_where(origin="runs"))
#: metric -> its figure from the done records (every stored seed) of one configuration
RUN_STATISTICS = {key: METRICS[key].statistic for key in SEED_METRICS}
#: metric -> (column heading, its figure from one done record), for ``compare_pairs``
PER_SEED = {key: (m.heading, m.per_seed) for key, m in METRICS.items() if m.heading}
#: metric -> ``collect.current_counts`` key (``params``: the paper's convention is chosen by ``ours_from_store``)
COUNTED_METRICS = {key: METRICS[key].column for key in _where(origin="counted")}
MODEL_METRICS = tuple(_where(decided_by=MODEL))
STEP_METRICS = tuple(_where(decided_by=STEP))


def metric_label(key):
    """A metric's label on the page; the key itself for a metric not in ``METRICS``."""
    return METRICS[key].label if key in METRICS else key


def metric_unit(key):
    """The unit of a difference of a metric; "" for a metric not in ``METRICS``."""
    return METRICS[key].unit if key in METRICS else ""


def number_or_none(value):
    """``value`` as a float where it is a number (not a bool), else None."""
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def seed_statistic(metric, runs):
    """One of ``RUN_STATISTICS`` (``epoch_s``, ``train_acc_final``, ...) over the done training records ``runs``
    (every seed of one configuration), or None where it cannot be had."""
    if metric not in RUN_STATISTICS:
        raise ValueError(f"metric={metric!r}: use one of {', '.join(RUN_STATISTICS)}")
    done = [r for r in runs if r.get("status") == "done" and r.get("history")]
    return number_or_none(RUN_STATISTICS[metric](done)) if done else None


def mean_per_layer(runs, epoch, key):
    """A per-layer history value (``key``, e.g. ``grad_norms``) at ``epoch`` (an index into the history: 0 the
    first, -1 the last), the mean over the done seeds of ``runs`` that record it; ``[]`` where none does."""
    values = [r["history"][epoch][key] for r in runs if r["status"] == "done" and r["history"][epoch].get(key)]
    return [sum(v) / len(v) for v in zip(*values)] if values else []
