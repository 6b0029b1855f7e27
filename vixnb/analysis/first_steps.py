"""The first optimizer steps of a run and of its variants, one change at a time: where a run stalls, what changes it.

A chapter's question may name ``arms`` (paper file, ``book: questions:``): each a change of one setting of a table's
row (``rows``: the run its table defines). ``first_steps_record`` trains the row's run and each arm for the question's
``first_steps`` optimizer steps with the engine itself (``train.training_steps``: the run's own data order,
augmentation, schedule, autocast and optimizer), on the device at hand, and keeps every step's training loss and
accuracy. Nothing is stored as a run: a short run on a CPU is not the run its config names. The record says which
device and precision made it; each arm's ``vixnb train`` command trains it whole.

What it can decide: whether a change lets the run leave the plateau it stalls on within those steps. What it cannot:
the run's final accuracy (a whole run at the budget protocol, on a GPU: the plan's entries of the question).
"""
from __future__ import annotations

import time

import pandas as pd
import torch

from .. import papers
from ..data import dataset_spec
from ..results.provenance import provenance
from ..runs.spec import run_command
from ..engine.train import STEP, STEPS_DONE, splits, training_steps
from ..runs.asked import question_arms, question_spec

#: steps averaged into one point of a curve and into the table's windows (a batch's loss is noisy)
WINDOW = 20


def first_steps(config, steps, *, device="cpu"):
    """``{"loss": [...], "acc": [...], "seconds"}``: the training loss and accuracy (%) of each of the first ``steps``
    optimizer steps of the run ``config`` describes, on ``device``, eagerly; the caller's random states are kept."""
    device = torch.device(device)
    made, rows, start = [], [], time.perf_counter()
    data = splits(config, device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        run = training_steps([config], progress=False, device=device, checkpoint=None, download=False, deadline=None,
                             with_weights=False, init_state=None, init_sha256=None, graphs=False, interleave=True,
                             data=data, on_step=made.append)
        try:
            for what in run:
                step = made[-1] if made else None
                if what == STEP and len(rows) + step.steps >= steps:
                    rows += step.end_epoch()[:steps - len(rows)]
                    break
                if what == STEPS_DONE:
                    rows += step.end_epoch()
        finally:
            run.close()
    return {"loss": [r[0] for r in rows], "acc": [100.0 * r[1] for r in rows],
            "seconds": time.perf_counter() - start}


def arm_steps(spec, arm, steps=None):
    """The steps an arm of a question trains for: the question's ``first_steps`` (``steps``: fewer, a dress
    rehearsal's, for every arm), or more where its ``arm_steps`` reads that arm further (the warm-up past its peak)."""
    if steps is not None:
        return int(steps)
    return max(int(spec["first_steps"]), int((spec.get("arm_steps") or {}).get(arm, 0)))


def first_steps_record(key, question, profile, *, device="cpu", steps=None, earlier=None, keep=None):
    """The question's arms (``question_arms``) each trained for its steps (``arm_steps``; ``steps``: fewer, a dress
    rehearsal's) on ``device`` (``first_steps``): ``{"question", "steps", "window", "chance", "arms": {arm: {"key",
    "settings", "command", "steps", "loss", "acc", "seconds", "provenance"}}, "provenance"}``. ``earlier``: a stored
    record of the question, whose arms of the same run and at least as many steps are kept as they were made (with
    their own provenance: the first N steps of a run are the N steps of a shorter one), so that a new arm costs only
    its own steps. ``keep``: called with the record so far (the arms made, and the earlier record's arms not yet
    reached) after each arm it makes, so that a run stopped part way loses only the arm it was making."""
    spec = question_spec(key, question)
    arms, out = question_arms(key, question, profile), {}
    held = (earlier or {}).get("arms") or {}
    common = int(steps or spec["first_steps"])  # the record's steps: every arm's, or more (``arm_steps``)
    dataset = papers.table(key, spec["table"])["dataset"]

    def record(arms_now):
        return {"paper": key, "question": question, "text": spec["question"], "steps": common, "window": WINDOW,
                "chance": 100.0 / dataset_spec(dataset).num_classes, "arms": arms_now,
                "provenance": provenance(device, stamp="measured", profile=profile, dataset=dataset,
                                         threads=torch.get_num_threads())}

    for arm, run in arms.items():
        want, old = arm_steps(spec, arm, steps), held.get(arm) or {}
        if old.get("key") == run.key and len(old.get("loss") or []) >= want:
            out[arm] = {**old, "steps": want, "loss": old["loss"][:want], "acc": old["acc"][:want],
                        "provenance": old.get("provenance") or earlier.get("provenance")}
            continue
        made = first_steps(run.config, want, device=device)
        out[arm] = {"key": run.key, "seed": run.seed, "settings": dict(run.settings), "command": run_command(run),
                    "steps": want, **made, "provenance": provenance(device, stamp="measured", profile=profile,
                                                                    threads=torch.get_num_threads())}
        if keep is not None:
            keep(record({**held, **out}))
    return record(out)


def windows(values, window=WINDOW):
    """The means of ``values`` over consecutive windows of ``window`` steps (the last one may be shorter)."""
    return [sum(values[i:i + window]) / len(values[i:i + window]) for i in range(0, len(values), window)]


def ordered_arms(record):
    """A record's arms in the question's order, the row's own run (``base``) first: a stored record's JSON keeps
    its mappings sorted by name, so the order is taken from the question where it still asks for them."""
    arms = dict(record.get("arms") or {})
    try:
        asked = list(question_arms(record["paper"], record["question"], (record.get("provenance") or {})["profile"]))
    except (KeyError, ValueError, TypeError):
        asked = []
    names = ["base", *asked, *sorted(arms)]
    return {name: arms[name] for name in dict.fromkeys(names) if name in arms}


def arm_change(arm, base):
    """What an arm of a first-steps record changes of the base run, as ``key=value`` words ("the blog's run" for
    the base itself); ``arm``/``base``: the record's ``arms`` entries."""
    if arm is base:
        return "none: the row's own run"
    changed = {k: v for k, v in arm["settings"].items() if base["settings"].get(k) != v}
    words = [f"{k}={v}" for k, v in changed.items()]
    if arm.get("seed") != base.get("seed"):
        words.append(f"seed={arm.get('seed')}")
    return ", ".join(words) or "none"


def arms_frame(record, points=3):
    """A first-steps record as a page table: one row per arm (the base first), what it changes, and its mean training
    loss and accuracy over ``WINDOW`` steps at the start, the middle and the end of its ``steps``."""
    arms = ordered_arms(record)
    if not arms:
        return pd.DataFrame()
    base = next(iter(arms.values()))
    steps = common_steps(record, arms)
    window = min(record.get("window", WINDOW), max(steps, 1))
    starts = sorted({0, max(0, steps // 2 - window), max(0, steps - window)})[:points]
    rows = {}
    for name, arm in arms.items():
        row = {("change", ""): arm_change(arm, base)}
        for metric, label in (("loss", "training loss"), ("acc", "training accuracy (%)")):
            values = arm[metric]
            for start in starts:
                part = values[start:start + window]
                row[(label, f"steps {start + 1}–{start + len(part)}")] = sum(part) / len(part) if part else None
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


#: points of training accuracy, over the last ``WINDOW`` steps, by which an arm must lead the row's own run to count
#: as one that leaves its plateau (``LEARN_POINTS`` of the verdict rules: the least gain of a run that learns)
LEAD_POINTS = 5.0


def common_steps(record, arms=None):
    """The steps every arm of a first-steps record reached (the question's ``first_steps``; an arm read further has
    more: ``arm_steps``; a short run ends before its steps): where the page's table compares them (each arm's lead
    over the row's own run: ``report.tables.questions.arm_outcomes``)."""
    arms = ordered_arms(record) if arms is None else arms
    return min([record["steps"], *(len(a["loss"]) for a in arms.values())])
