"""Training runs for a page: collect them under the compute policy and summarise them per model."""
from __future__ import annotations

import json
import os
import statistics

import pandas as pd
from tqdm.auto import tqdm

from ... import papers
from ...analysis.records import STUDY_RECORDS
from ...runs.asked import runs_of, table_specs
from ...data import DatasetNotFoundError, dataset_spec
from ...models import model_fact
from ...models.counting import recorded_counts
from ...record_kinds import Request, kind_of, obtain, record_name, study_requests
from ...results import ResultsStore, StoreError, made_on
from ...runs.policy import other_code
from ...runs.make import run
from ...runs.spec import Keep
from .learning import CHANCE_MARGIN, at_chance, failed_reason, not_learned_reason
from .metrics import METRICS, PER_SEED
from .provenance import short_device

#: the columns of ``summarize_runs``, present whether or not any run is done
SUMMARY_COLUMNS = ["seeds", "asked", "top1 best", "top1 mean", "top1 std", "top5 best", "top5 mean", "top5 std",
                   "epochs", "batch", "precision", "run peak GB", "device", "commit", "date", "note"]


def collect_runs(models, *, dataset, profile, seeds, compute="missing", progress=True, store=None, keep_weights="no",
                 **settings):
    """One result per (model, seed) under the compute policy (``runs.policy``): stored, freshly trained, or
    marked "not yet run" (also when the data set is not on this machine: the reason says how to get it).
    ``settings``: run and ``create_model`` settings beyond the profile's (``spec.run_config``);
    ``keep_weights``: as ``runs.make.run``."""
    specs = [spec for m in models for spec in runs_of(m, settings, dataset=dataset, profile=profile, seeds=seeds,
                                                        keep=Keep.of(keep_weights))]  # the runs a notebook names
    return results_of(specs, compute=compute, progress=progress, store=store)


def results_of(specs, *, compute="missing", progress=True, store=None):
    """One result per run of ``specs`` (``RunSpec`` s) under the compute policy: stored, freshly trained, or marked
    "not yet run" (also when the data set is not on this machine: the reason says how to get it)."""
    results = []
    bar = tqdm(specs, desc=f"{specs[0].profile} runs" if specs else "runs", disable=not progress)
    for spec in bar:
        model, dataset, profile = spec.model, spec.dataset, spec.profile
        bar.set_postfix(model=model, seed=spec.seed)
        try:
            results.append(run(spec, compute=compute, progress=False, store=store))
        except StoreError as e:  # a truncated or foreign result file: the page says which, and still builds
            results.append({"status": "unreadable", "config": spec.config, "reason": str(e)})
        except DatasetNotFoundError as e:
            results.append({"status": "not yet run", "config": spec.config,
                            "reason": f"{dataset} is not on this machine; `vixnb train {model} --dataset {dataset} "
                                      f"--profile {profile} --download` fetches it ({str(e).splitlines()[0]})"})
    return results


def mean_std(values):
    """The mean and sample standard deviation of ``values`` (0 for one value; (None, None) for none)."""
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def current_counts(model, dataset, **settings):
    """What the current code builds for ``model`` on ``dataset`` (with ``create_model`` ``settings``): its paper
    and true parameter counts and Size (MB), as stored with every training run (``models.counting.recorded_counts``,
    kept between processes: ``models.model_fact``)."""
    counts = model_fact(recorded_counts, model, dataset, json.dumps(settings, sort_keys=True))
    return {k: counts[k] for k in ("params_paper", "params_true", "size_mb")}


def summarize_runs(results):
    """One row per model (a DataFrame indexed by model name): seeds done of seeds asked, top-1 / top-5 best and
    mean ± std over the seeds done, the best seed's epochs, batch size and training-run peak GPU memory, and
    its provenance (commit, date, device), with a note when the run was made by other model code than today's
    (``runs.policy.other_code``). A model with no seed done has ``seeds`` 0 and nothing else."""
    by_model = {}
    for r in results:
        by_model.setdefault(r["config"]["model"], []).append(r)
    rows = {}
    for model, runs in by_model.items():
        done = [r for r in runs if r["status"] == "done"]
        row = {"seeds": len(done), "asked": len(runs)}
        if done:
            best = max(done, key=lambda r: r["top1"])
            for metric in ("top1", "top5"):
                values = [r[metric] for r in done]
                mean, std = mean_std(values)
                row.update({f"{metric} best": best[metric], f"{metric} mean": mean, f"{metric} std": std})
            prov = best["provenance"]
            row.update({"epochs": best["config"]["epochs"], "batch": best["config"]["batch_size"],
                        "precision": best["config"]["precision"],
                        "run peak GB": best.get("gpu_gb_reserved"), "device": prov.get("device"),
                        "commit": str(prov.get("commit", "unknown"))[:7], "date": made_on(prov),
                        "note": other_code(best)
                        or best.get("stale")})
        elif unreadable := [r["reason"] for r in runs if r["status"] == "unreadable"]:
            row.update({"top1 best": "unreadable result file", "top5 best": "unreadable result file",
                        "note": "; ".join(unreadable)})
        else:
            row["note"] = None
        rows[model] = row
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=SUMMARY_COLUMNS)


def accuracy_text(summary, model, metric):
    """"52.38" for one seed, "52.38 ± 0.41" (mean ± std) for several; None when no seed is done."""
    if model not in summary.index or not summary.at[model, "seeds"]:
        return None
    n, mean, std = summary.at[model, "seeds"], summary.at[model, f"{metric} mean"], summary.at[model, f"{metric} std"]
    return f"{mean:.2f}" if n == 1 else f"{mean:.2f} ± {std:.2f}"


def _chapter_request(kind, paper, dataset, *, part=None, notebook=None, name=""):
    """The ``record_kinds.Request`` of ``kind`` that a chapter of ``paper`` (``notebook``, else the one whose ``part``
    is ``part``) asks for on ``dataset`` (``name``: of several of one kind, the one of that name: a question's)."""
    if notebook is None:
        found = [c for c in papers.book_chapters(paper) if c.get("part") == part]
        if not found:
            raise ValueError(f"part={part!r}: no chapter of vixnb/papers/{paper}.yaml has it")
        notebook = found[0]["notebook"]
    chapter = papers.book_chapter(paper, notebook)
    return Request(kind, paper=paper, chapter=notebook, dataset=dataset, part=chapter.get("part"), name=name)


def record(kind, *, paper=None, notebook=None, dataset=None, part=None, profile, compute="missing", train=None,
           store=None, required=False, empty=None, name=""):
    """The record of ``kind`` (``record_kinds.KINDS``) that the chapter of ``paper`` (``notebook``, else the one whose
    ``part`` is ``part``) asks for on ``dataset``, or the maps study's (``maps-attention``, ``maps-attribution``), under
    the compute policy (``record_kinds.obtain``: read, or made and stored; ``train``: the policy for training the runs
    whose weights it reads), with ``"source"``: "stored" or "measured". A record some of whose runs have no weights is
    shown unstored (``"stored": False``; with ``required`` a ``RuntimeError`` names the runs); ``empty`` where
    nothing is stored and nothing can be made here. ``kind_of(kind).show(record)`` is its page table. ``name``: the
    record's own name among several of the kind (a question's first steps: the question)."""
    store = store if store is not None else ResultsStore()
    if kind.startswith("maps-"):
        if kind.removeprefix("maps-") not in STUDY_RECORDS:
            raise ValueError(f"kind={kind!r}: the maps study's records are "
                             f"{', '.join(f'maps-{k}' for k in STUDY_RECORDS)}")
        request = next(r for r in study_requests() if r.kind == kind)
    else:
        kind_of(kind)  # an unknown kind: the one-line error listing the kinds
        request = _chapter_request(kind, paper, dataset, part=part, notebook=notebook, name=name)
    before = _record_mtime(store, request, profile)
    data = obtain(request, profile=profile, compute=compute, train=train, store=store, required=required)
    if data is None:
        return empty
    return {**data, "source": "stored" if _record_mtime(store, request, profile) == before else "measured"}


def _record_mtime(store, request, profile):
    path = store.record_path(kind_of(request).group, record_name(request), profile=profile)
    return path.stat().st_mtime_ns if path.exists() else None


# the readers of one kind each, as the pages call them (``record``)

def gpu_memory(models, *, paper, dataset, profile, compute="missing", part=None):
    """The ``gpu_memory`` record (``record``) of the chapter of ``paper`` whose ``part`` is ``part``, its rows narrowed
    to ``models``; None when nothing is stored and nothing can be measured here."""
    found = record("gpu_memory", paper=paper, dataset=dataset, part=part, profile=profile, compute=compute)
    return None if found is None else {**found, "rows": {m: row for m, row in (found.get("rows") or {}).items()
                                                         if m in models}}


def speed(paper, notebook, dataset, *, profile, compute="missing", store=None):
    """The ``speed`` record (``record``) of a chapter on ``dataset``."""
    return record("speed", paper=paper, notebook=notebook, dataset=dataset, profile=profile, compute=compute,
                  store=store)


def speed_name(paper, dataset):
    """The name of the stored speed measurement of a paper's chapter on ``dataset`` (``speed``)."""
    return record_name(Request("speed", paper=paper, dataset=dataset))


def attention_maps(paper, notebook, dataset, *, profile, compute="missing", store=None):
    """The ``attention_maps`` record (``record``) of a chapter on ``dataset``."""
    return record("attention_maps", paper=paper, notebook=notebook, dataset=dataset, profile=profile, compute=compute,
                  store=store)


def predictions(paper, notebook, dataset, *, profile, compute="missing", store=None):
    """The ``predictions`` record (``record``) of a chapter on ``dataset``."""
    return record("predictions", paper=paper, notebook=notebook, dataset=dataset, profile=profile, compute=compute,
                  store=store)


def study_measurement(measurement, *, profile, compute="missing", train=None, store=None, required=False):
    """The maps study's ``maps-<measurement>`` record (``record``; ``measurement``: ``attention`` or
    ``attribution``)."""
    if measurement not in STUDY_RECORDS:
        raise ValueError(f"measurement must be one of {STUDY_RECORDS}, got {measurement!r}")
    return record(f"maps-{measurement}", profile=profile, compute=compute, train=train, store=store, required=required)


def table_results(paper, notebook, table, *, profile, compute="missing", store=None, progress=False):
    """``{row: [result per seed]}`` of one table of a chapter (``asked.table_runs``: the table's settings and the
    profile's seeds, more where the paper made more runs) under the compute policy; the first seed of the
    chapter's ``keep_weights`` tables and of the maps study's runs keeps its weights where
    ``runs.asked.table_specs`` (the plan's own keep decision) says."""
    chapter = papers.book_chapter(paper, notebook)
    options = dict(compute=compute, store=store, progress=progress)
    out = {}
    for row, specs in table_specs(paper, chapter, table, profile):
        out[row] = results_of(specs, **options)
    return out


def seed_comparison(a, b):
    """Whether the difference of two runs' means survives their spread over seeds: ``a``, ``b`` are the values
    per seed; returns ``{"difference", "standard_error", "survives"}``: mean(a) - mean(b), the standard error
    of that difference (Welch: sqrt(var_a/n_a + var_b/n_b)), and whether |difference| > 2 standard errors (None
    with fewer than two seeds on a side)."""
    if not a or not b:
        return {"difference": None, "standard_error": None, "survives": None}
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return {"difference": diff, "standard_error": None, "survives": None}
    se = (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5
    return {"difference": diff, "standard_error": se, "survives": abs(diff) > 2 * se}


def compare_pairs(pairs, runs, *, metrics=("train_acc_final", "top1"), names=("a", "b")):
    """A page table of pairs of runs over their seeds: ``pairs`` is ``[(row label, a, b)]`` of names in ``runs``
    (``{name: [records]}``); one row per pair and metric (a key of ``PER_SEED``, ``report.records.metrics``; per pair
    where there is one metric): a's and b's mean ± std (seeds), a − b, and whether it survives the spread
    (``seed_comparison``: beyond two standard errors). ``names``: the headings of a's and b's columns ("DualOpT",
    "AdamW")."""
    not_run = "not yet run"

    def text(values):
        if not values:
            return not_run
        std = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
        return f"{statistics.fmean(values):.2f}{std} ({len(values)})"

    rows = {}
    for label, a, b in pairs:
        for metric in metrics:
            heading, value = PER_SEED[metric]
            va, vb = ([value(r) for r in runs.get(n, []) if r.get("status") == "done" and r.get("history")]
                      for n in (a, b))
            cmp = seed_comparison(va, vb)
            rows[(label, heading) if len(metrics) > 1 else label] = {
                names[0]: text(va), names[1]: text(vb),
                f"{names[0]} − {names[1]}": "—" if cmp["difference"] is None else f"{cmp['difference']:+.2f}",
                "beyond 2 SE": {None: "—", True: "yes", False: "no"}[cmp["survives"]]}
    return pd.DataFrame.from_dict(rows, orient="index")


def runs_done(runs):
    """How many of ``runs`` (records of ``collect_runs``) are done and current: a stale result read from the store
    (made by other code, data or settings: ``"stale"``) is not done, as the plan does not count it stored."""
    return sum(r.get("status") == "done" and not r.get("stale") for r in runs)


def runs_at_chance(runs, labels, *, num_classes=10, margin=CHANCE_MARGIN):
    """The rows of ``runs`` (``{row: [records]}``) whose done seeds ended at chance: the last epoch's training
    accuracy and test top-1 both within ``margin`` points of 100 / ``num_classes``. One row each: the label
    (``labels``), how many of its done seeds, the last training accuracy (mean), and the first epoch after which every
    layer's recorded gradient norm was exactly zero (a dead network; "—" where the norms never all vanished or were not
    recorded). Empty where every run learned."""
    train_acc = METRICS["train_acc_final"].per_seed
    rows = {}
    for row, results in runs.items():
        done = [r for r in results if r.get("status") == "done" and r.get("history")]
        stuck = [r for r in done if at_chance(r, num_classes, margin)]
        if not stuck:
            continue
        dead = [next((h["epoch"] for h in r["history"] if h.get("grad_norms") and not any(h["grad_norms"])), None)
                for r in stuck]
        name = labels.get(row, row)
        rows[name if name not in rows else f"{name} ({row})"] = {
            "seeds at chance": f"{len(stuck)} of {len(done)}",
            "last training accuracy (%)": round(statistics.fmean(train_acc(r) for r in stuck), 2),
            "gradients all zero from epoch": ", ".join(str(e) for e in dead if e is not None) or "—"}
    return pd.DataFrame.from_dict(rows, orient="index")


def learning_flags(record, *, store=None):
    """``{row: why}`` of each run a measurement of trained weights read (``record["runs"]``, each with its training
    ``config``) whose stored training run failed or did not learn (``learning.failed_reason``,
    ``learning.not_learned_reason``): its maps are an untrained model's, and a figure of them says so."""
    store = store if store is not None else ResultsStore()
    flags = {}
    for row, entry in (record or {}).get("runs", {}).items():
        config = entry.get("config")
        try:
            trained = store.get(config) if isinstance(config, dict) else None
        except StoreError:
            trained = None
        if trained and trained.get("status") == "done":
            classes = dataset_spec(config["dataset"]).num_classes
            why = failed_reason(trained, classes) or not_learned_reason(trained)
            if why:
                flags[row] = why
    return flags


def runs_overview(runs):
    """``(frame, caption)``: the training runs behind a page, for ``page_table``, one row per entry of ``runs``
    (``{row: [records]}``): model, settings, seeds done of those asked, epochs and device. What every row shares
    (a model, settings, the epochs, a device) is said once in ``caption`` instead of in every row, models that
    share a prefix ("vit_small_") are shown without it and a device by its short name ("H100"; the provenance line
    names it in full): the table fits the text column."""
    rows, settings = {}, {}
    for row, results in runs.items():
        done = [r for r in results if r.get("status") == "done"]
        config = results[0]["config"]
        settings[row] = {(k, f"{v}") for k, v in (config.get("model_overrides") or {}).items()}
        rows[row] = {"model": config["model"], "settings": "", "seeds done": f"{len(done)} of {len(results)}",
                     "epochs": config["epochs"],
                     "device": short_device(done[0]["provenance"]["device"]) if done else "not yet run"}
    frame = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=["model", "settings", "seeds done", "epochs", "device"])
    if frame.empty:
        return frame, None
    shared = set.intersection(*settings.values())
    frame["settings"] = [", ".join(f"{k} {v}" for k, v in sorted(settings[row] - shared)) or "—" for row in frame.index]
    said = []
    models = sorted(set(frame["model"]))
    prefix = os.path.commonprefix(models).rpartition("_")[0] + "_" if len(models) > 1 else ""
    if len(models) > 1 and len(prefix) > 1:
        said.append("models " + ", ".join(models))
        frame["model"] = frame["model"].str[len(prefix):]
    said += [", ".join(f"{k} {v}" for k, v in sorted(shared))] if shared else []
    for column, name in (("model", "model {}"), ("epochs", "{} epochs"), ("device", "device {}")):
        values = set(frame[column])
        if len(frame) > 1 and len(values) == 1:
            said.append(name.format(values.pop()))
            frame = frame.drop(columns=column)
    return frame, ("Every run: " + "; ".join(said) + ".") if said else None


def table_compute(paper, table, profile, compute):
    """The compute policy for ``paper``'s ``table``: ``compute``, but "never" for a table not on CIFAR-10 in the
    smoke profile (a pipeline check takes the same path on CIFAR-10; the other data sets cannot be had on the
    machines the book is built on)."""
    return compute if profile != "smoke" or papers.table(paper, table)["dataset"] == "cifar10" else "never"
