"""Execution choices that change no run's identity, checked against the default execution (issue 37): the attention
kernel (``steps.ATTENTION``) and ``torch.compile``. ``execution_equivalence`` trains one small configuration over
a few seeds the default way and each other way, and compares the per-step training loss curves (the largest
|difference| over every step and seed) and the final top-1 (the difference of the seeds' means against the
seed-to-seed spread of the default's, max - min). The CPU suite checks the kernels it has
(tests/test_engine_speed.py); ``tools/gpu_check.sh`` the GPU's kernels and ``torch.compile``."""
from contextlib import contextmanager

from ..engine import train as engine
from ..engine.steps import TrainStep


@contextmanager
def _step_losses(into):
    """While it holds, every training epoch's per-step losses (``TrainStep.end_epoch``'s rows) are appended to
    ``into``; the method is restored on exit."""
    real = TrainStep.end_epoch

    def recorded(step):
        rows = real(step)
        into.extend(loss for loss, _ in rows)
        return rows

    TrainStep.end_epoch = recorded
    try:
        yield into
    finally:
        TrainStep.end_epoch = real


def curve_and_top1(config, **execution):
    """``(per-step training losses, final top-1)`` of ``config`` trained with ``train``'s execution choices."""
    with _step_losses([]) as losses:
        result = engine.train(config, progress=False, **execution)
    return losses, result["final_top1"]


def execution_equivalence(configs, choices, *, device=None):
    """Rows comparing each of ``choices`` (``{label: train's execution keyword arguments}``) with the default
    execution over ``configs`` (one per seed): ``{"choice", "max_loss_diff", "top1_mean", "default_top1_mean",
    "spread", "within_spread"}``, or ``{"choice", "error"}`` where that execution cannot run here."""
    default = [curve_and_top1(c, device=device) for c in configs]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    base_top1 = [top1 for _, top1 in default]
    spread = max(base_top1) - min(base_top1)
    rows = []
    for label, execution in choices.items():
        try:
            other = [curve_and_top1(c, device=device, **execution) for c in configs]
        except Exception as e:  # noqa: BLE001  (a kernel this device lacks is a row, not the end of the check)
            rows.append({"choice": label, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"})
            continue
        diff = max(abs(a - b) for (x, _), (y, _) in zip(default, other) for a, b in zip(x, y, strict=True))
        top1 = mean([t for _, t in other])
        rows.append({"choice": label, "max_loss_diff": diff, "top1_mean": top1, "default_top1_mean": mean(base_top1),
                     "spread": spread, "within_spread": abs(top1 - mean(base_top1)) <= spread})
    return rows


def equivalence_lines(rows, steps, tolerance):
    """One line per row: the loss curves' largest difference against ``tolerance`` and the top-1 against the spread."""
    lines = []
    for r in rows:
        if "error" in r:
            lines.append(f"  {r['choice']:<18} cannot run here: {r['error']}")
            continue
        ok = "ok" if r["max_loss_diff"] <= tolerance and r["within_spread"] else "DIFFERS"
        lines.append(f"  {r['choice']:<18} {ok}: max |dloss| over {steps} steps {r['max_loss_diff']:.2e} (tolerance "
                     f"{tolerance:.0e}); final top-1 {r['top1_mean']:.2f} vs default {r['default_top1_mean']:.2f}, "
                     f"seed spread {r['spread']:.2f}")
    return lines
