"""Whether a training run learned: a run at chance (``failed_reason``) and a run that did not learn
(``not_learned_reason``), by thresholds set from the stored runs. The verdict rules (``report.claims.rules``) and
the pages' tables read them."""
from __future__ import annotations

CHANCE_MARGIN = 2.0  # points of accuracy around 100 / classes
#: a run learned where, over at least LEARN_EPOCHS epochs, its training accuracy gained at least LEARN_POINTS points
#: from the first epoch to the last and its training loss fell by at least LEARN_LOSS_DROP of the first epoch's. Set
#: from the stored budget runs (10 epochs, 2026-11-28): the 25 that learned gained 12.8 to 42.3 points (FNet the
#: least) and their loss fell 16 % to 66 %; the 12 that did not gained at most 1.5 points and their loss fell at
#: most 1.8 % (the two-LayerNorm vanilla at width 128: 21.2 -> 20.4 % and 19.5 -> 21.1 %). The thresholds lie
#: well inside the gap, three points and three percent from the nearest stalled run
LEARN_EPOCHS, LEARN_POINTS, LEARN_LOSS_DROP = 3, 5.0, 0.05


def at_chance(record, num_classes, margin=CHANCE_MARGIN):
    """Whether one done training record ended at chance: its last epoch's training accuracy and test top-1 both
    within ``margin`` points of 100 / ``num_classes`` (the one test of it: the verdict rules, the chapters' "what
    died" tables and the intro's count read it)."""
    history = record.get("history") or []
    if not history:
        return False
    train, top1 = history[-1].get("train_acc"), history[-1].get("select_top1")
    chance = 100.0 / num_classes
    return train is not None and top1 is not None and abs(train - chance) <= margin and abs(top1 - chance) <= margin


def failed_reason(record, num_classes):
    """Why one done training record decides nothing ("training accuracy 9.83 %, test top-1 9.97 %: at chance";
    "gradients all zero from epoch 2"), or "" for a run that learned."""
    history = record.get("history") or []
    dead = next((h["epoch"] for h in history if h.get("grad_norms") and not any(h["grad_norms"])), None)
    if dead is not None:
        return f"gradients all zero from epoch {dead}"
    if not history:
        return ""
    if at_chance(record, num_classes):
        train, top1 = history[-1]["train_acc"], history[-1]["select_top1"]
        return f"training accuracy {train:.2f} %, test top-1 {top1:.2f} %: at chance ({100.0 / num_classes:g} %)"
    return ""


def not_learned_reason(record):
    """Why one done training record did not learn ("training accuracy 21.2 -> 20.4 %, loss 2.07 -> 2.10 over 10
    epochs"), or "" for a run that learned or trained too few epochs to tell (``LEARN_EPOCHS``)."""
    history = record.get("history") or []
    if len(history) < LEARN_EPOCHS:
        return ""
    first, last = history[0], history[-1]
    try:
        gain = last["train_acc"] - first["train_acc"]
        drop = (first["train_loss"] - last["train_loss"]) / first["train_loss"]
    except (KeyError, TypeError, ZeroDivisionError):
        return ""
    if gain >= LEARN_POINTS and drop >= LEARN_LOSS_DROP:
        return ""
    return (f"training accuracy {first['train_acc']:.1f} -> {last['train_acc']:.1f} %, loss {first['train_loss']:.2f} "
            f"-> {last['train_loss']:.2f} over {len(history)} epochs (seed {record['config'].get('seed')})")
