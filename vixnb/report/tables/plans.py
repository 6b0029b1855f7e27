"""Page pieces of the plan (``vixnb.plan.plan``): GPU-hours per chapter and profile, the entries left to run, and
the answer to a chapter's question (a setting beside the profile's own runs, with the seed spread)."""
from dataclasses import replace

import pandas as pd

from ...plan.entries import TrainEntry
from ...plan.plan import shown_settings, todo, totals
from ...runs.asked import question_spec, question_specs
from ...runs.make import run
from ...data import dataset_spec
from ..records.collect import mean_std
from ..records.learning import failed_reason, not_learned_reason


def plan_totals_frame(plans):
    """``{profile: plan entries}`` -> one row per chapter and the book, per profile: entries, stored, left,
    GPU-hours left and in all (estimates; the plan's ``basis`` says where each comes from)."""
    rows = {}
    for profile, entries in plans.items():
        for chapter, t in totals(entries).items():
            rows[(profile, chapter)] = {"entries": t["entries"], "stored": t["stored"], "left": t["to_run"],
                                        "GPU-h left": t["to_run_gpu_hours"], "GPU-h all": t["all_gpu_hours"]}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["profile", "chapter"])
    return frame


def plan_todo_frame(entries, limit=15):
    """The first ``limit`` entries left to run, in priority order: what, why it matters, status, minutes."""
    rows = []
    for e in todo(entries)[:limit]:
        what = (f"{e.model}, {e.dataset}, seed {e.seed}" + "".join(f", {k}={v}" for k, v in shown_settings(
            e.settings).items()) if isinstance(e, TrainEntry) else f"{e.job}: {e.name}")
        rows.append({"#": e.priority, "what": what, "for": e.purpose.replace("question: ", ""), "status": e.status,
                     "GPU min": round(e.est_gpu_minutes, 1), "estimate from": e.basis.split(" (")[0].split(":")[0]})
    return pd.DataFrame(rows).set_index("#") if rows else pd.DataFrame()


def question_frame(paper, question, profile, compute="never"):
    """The answer to one of a chapter's questions (its paper file entry's ``questions``): per model, top-1 (mean ± std
    over stored seeds) in the profile's own settings and in the question's, their difference, and whether it lies
    within the seed spread (the larger of the two standard deviations). Seeds not yet run are counted, never filled
    in. ``compute``: as the page's (``runs.make.run``; the smoke profile trains what is missing)."""
    spec = question_spec(paper, question)
    asked = question_specs(paper, spec, profile)  # {model: [its run in the question's settings, per seed]}
    seeds = len(next(iter(asked.values())))
    if spec.get("rows"):
        return _arms_frame(spec, asked, seeds, compute)
    rows = {}
    for model in spec["models"]:
        got = {}
        for name, runs in (("profile", [replace(r, settings={}) for r in asked[model]]), ("question", asked[model])):
            results = [run(r, compute=compute) for r in runs]
            got[name] = [r["top1"] for r in results if r["status"] == "done"]
        label = ", ".join(f"{k} {v}" for k, v in spec["settings"].items())
        row = {f"{profile} profile": _mean_sd(got["profile"], seeds), label: _mean_sd(got["question"], seeds)}
        if min(len(got["profile"]), len(got["question"])) >= 2:
            diff = mean_std(got["question"])[0] - mean_std(got["profile"])[0]
            spread = max(mean_std(got["profile"])[1], mean_std(got["question"])[1])
            row.update({"Δ top-1": f"{diff:+.2f}", "seed spread": f"{spread:.2f}",
                        "answer": "within the spread" if abs(diff) <= spread else "beyond the spread"})
        else:
            row.update({"Δ top-1": "not yet run", "seed spread": "not yet run", "answer": "not yet run"})
        rows[model] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def _mean_sd(values, asked):
    if not values:
        return f"not yet run ({asked} seeds)"
    mean, std = mean_std(values)
    return f"{mean:.2f}" + (f" ± {std:.2f}" if len(values) > 1 else "") + f" ({len(values)} of {asked})"


def _arms_frame(spec, asked, seeds, compute):
    """A question of rows and arms (``rows``, ``gpu_arms``; ``asked``: their runs, ``asked.question_specs``): per
    row's run and per arm trained whole, its seeds stored of those asked, the last epoch's training accuracy and the
    best test top-1 (mean ± sd over the seeds), and how many of its seeds did not learn
    (``claims.rules.not_learned_reason``) or failed at chance."""
    out = {}
    for row in spec["rows"]:
        for arm in [None, *(spec.get("gpu_arms") or [])]:
            runs = asked[f"{row}: {arm}" if arm else row]
            classes = dataset_spec(runs[0].dataset).num_classes
            done = [r for r in (run(s, compute=compute) for s in runs) if r["status"] == "done"]
            stalled = sum(bool(not_learned_reason(r) or failed_reason(r, classes)) for r in done)
            label = f"{row}" + (f": {arm}" if arm else " (the row's own run)")
            out[label] = {"seeds": f"{len(done)} of {seeds}",
                          "last training accuracy (%)": _mean_sd([r["history"][-1]["train_acc"] for r in done], seeds),
                          "test top-1 (%)": _mean_sd([r["top1"] for r in done], seeds),
                          "did not learn": f"{stalled} of {len(done)}" if done else "not yet run"}
    return pd.DataFrame.from_dict(out, orient="index")