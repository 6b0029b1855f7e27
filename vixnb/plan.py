"""The plan: every training run, measurement and benchmark the book's chapters need in one profile, each
with its status in the results store, an estimate of its GPU minutes, and a priority (``vixnb plan``).

What a chapter needs is read from its paper file's ``book`` section (``vixnb.papers``): the tables whose
every row is trained, on the table's dataset, with each of the profile's ``seeds`` (``profiles.yaml``);
the stored measurements its pages read; the benchmarks it shows; our own studies. The maps chapter's
measurements come from ``vixnb/analysis/study.yaml``.

**Status.** ``stored``; ``missing``; ``stale``: a stored result that no longer answers, because it was made
by other model code (its recorded architecture signature, or for older results its parameter count, differs
from today's model), from other data (its data fingerprint differs from the copy here), or under another
engine version or other settings (a result file of the same model, dataset and seed whose configuration
differs and which no other entry asks for), or a benchmark whose rows a later change superseded.

**Estimate** (``est_gpu_minutes``, with its ``basis``): training runs from the standalone training
throughput that ``vixnb bench train`` measured (``results/bench/train.json``), in the run's precision;
for a model it did not measure, from the model's training FLOPs per image (3x the forward) and the device's
effective rate, the median over the measured models; else from a stored run's epoch times (an upper bound:
they ran beside others). Each epoch trains the training split and evaluates the test split (a forward at
a third of a training step's cost); 20 s per run go to start-up. Measurements and benchmarks: nominal
minutes (their kind's, ``record_kinds.KINDS``). A CPU profile needs no GPU minutes.

**Priority**, in levels (``LEVELS``); within a level the first seeds of the rows a chapter names ``first`` (the
order its paper file asks for), then cheaper first; a measurement that reads trained weights (the maps study's)
comes after the runs it reads. A run that several chapters show is one entry, the first chapter's (so a
chapter's totals count it there only); it keeps its weights where any chapter or the maps study
(``vixnb/analysis/study.yaml``) needs them.
1. one seed (the profile's first) of every published row, and the measurements the pages read, so that
   every table has a number;
2. the runs that decide a claim or a study, and the benchmarks behind the speed targets;
3. further seeds.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import torch

from . import papers
from .analysis.records import kept_rows, study_labels, study_run
from .data import dataset_spec, source_fingerprint
from .files import atomic_write
from .measure.flops import flops
from .models import architecture_signature, create_model, model_cfg
from .profiles import get_profile, gpu_profile, run_config, table_runs
from .record_kinds import chapter_requests, kind_of, record_name, study_requests
from .results import ResultsStore, StoreError, config_key, read_json
from .results.policy import stale_reason
from .results.store import default_root
from .runtime import machine_precision

LEVELS = {
    1: "one seed of every published row, and the measurements the pages read",
    2: "runs that decide a claim or a study, and the benchmarks behind the speed targets",
    3: "further seeds",
}
STATUSES = ("stored", "missing", "stale")
STARTUP_SECONDS = 20
EVAL_COST = 1 / 3  # an evaluation forward, against a training step, per image
@dataclass
class Entry:
    """One thing the book needs: a training run (``kind="train"``), a stored measurement (``"measure"``) or a
    benchmark (``"bench"``)."""
    chapter: str
    paper: str
    kind: str
    name: str              # the run (its table row: the model, or a paper's run name); the record of a measurement or benchmark
    model: str | None
    dataset: str | None
    profile: str
    seed: int | None
    settings: dict = field(default_factory=dict)  # run settings beyond the profile's (a study's)
    status: str = "missing"
    reason: str = ""       # why stale
    blocked: str = ""      # what stands in the way of running it on this machine's data, if anything
    est_gpu_minutes: float = 0.0
    basis: str = ""
    level: int = 1
    priority: int = 0
    purpose: str = ""      # the table, study or target it serves
    command: str = ""
    path: str = ""         # the result file in the store
    key: str = ""          # the run's configuration hash (training runs)
    keep_weights: str = "no"  # what the run keeps of its trained weights (``runs.KEEP_WEIGHTS``)

    def to_dict(self):
        return asdict(self)


def shown_settings(settings):
    """A run's settings as listings show them: a warm start (``init_from``) by the run it starts from."""
    return {k: (v.get("run", v.get("model")) if k == "init_from" and isinstance(v, dict) else v)
            for k, v in settings.items()}


def chapters():
    """``[(paper key, chapter)]``: every chapter of every paper file's ``book`` section
    (``papers.book_chapters``), in ``papers.DOCUMENTS`` order, then the file's."""
    return [(key, chapter) for key in papers.DOCUMENTS if key in papers.list_papers()
            for chapter in papers.book_chapters(key)]


def _run_command(model, dataset, profile, seed, settings, keep_weights="no"):
    run_options = inspect.signature(run_config).parameters  # the rest are model settings: --override KEY=VALUE
    def option(key, value):  # a run option as the CLI takes it (a list as its items: --randaugment 1 1)
        shown = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        if isinstance(value, dict):  # a warm start: the row's name, or a chapter's run as '{"run": ..., "model": ...}'
            rows = papers.paper_runs(model_cfg(model)["paper"])
            as_row = rows.get(value.get("run")) == (value.get("model"), value.get("settings"))
            shown = value["run"] if as_row else shlex.quote(json.dumps(value, separators=(",", ":")))
        return f" --{key.replace('_', '-')} {shown}"

    extra = "".join(option(k, v) if k in run_options else f" --override {k}={v if isinstance(v, str) else json.dumps(v)}"
                    for k, v in settings.items())
    keep = {"no": "", "store": " --keep-weights", "local": " --keep-weights local"}[keep_weights]
    return f"vixnb train {model} --dataset {dataset} --profile {profile} --seed {seed}{extra}{keep}"


def _train_entries(key, book, profile, seeds, store, runs, machine=False):
    """The training runs of chapter ``book`` not yet in ``runs`` (``{config key: Entry}``, shared by the chapters and
    filled here): a run already there (another table's or an earlier chapter's) stays one entry, at the lowest level
    asked for, keeping its weights if any table asks for them. ``machine``: each run in the precision this machine
    trains it in (``runtime.machine_precision``: a T4's fp16 run of a bf16 row)."""
    entries = []
    for table in book.get("train", []):
        dataset = papers.table(key, table)["dataset"]
        keep = kept_rows(key, book, table, profile)
        for row, model, settings, table_seeds in table_runs(key, book, table, profile, seeds):
            for i, seed in enumerate(table_seeds):
                entries.append((1 if i == 0 else 3, f"{key} {table}", row, model, dataset, seed, settings,
                                row in keep and i == 0))
    for study, spec in (book.get("studies") or {}).items():
        if profile not in spec.get("profiles", []):
            continue
        dataset = papers.table(key, spec["table"])["dataset"]
        for model in spec["models"]:
            for seed in seeds:
                entries.append((2, f"study: {study}", model, model, dataset, seed, dict(spec.get("settings") or {}),
                                False))
    out = []
    for level, purpose, name, model, dataset, seed, settings, kept in entries:
        keep = "store" if kept else "no"
        config = run_config(model, dataset=dataset, profile=profile, seed=seed, **settings)
        if machine and (precision := machine_precision(config["precision"])) != config["precision"]:
            settings = {**settings, "precision": precision}
            config = run_config(model, dataset=dataset, profile=profile, seed=seed, **settings)
        k = config_key(config)
        if k in runs:  # e.g. smoke: every dataset is the synthetic one; or a run two tables or chapters show
            first = runs[k]
            first.level = min(first.level, level)
            if keep != "no" and first.keep_weights == "no":
                first.keep_weights = keep
                first.command = _run_command(model, dataset, profile, seed, first.settings, keep)
            continue
        runs[k] = Entry(chapter=book["notebook"], paper=key, kind="train", name=name, model=model,
                       dataset=config["dataset"], profile=profile, seed=seed, settings=settings, level=level,
                       purpose=purpose, command=_run_command(model, dataset, profile, seed, settings, keep),
                       path=str(store.path(config).relative_to(store.root)), key=k, keep_weights=keep)
        runs[k]._config = config
        if config.get("init_from"):  # a warm start runs after the run it starts from
            runs[k]._needs = {config["init_from"]["key"]}
        out.append(runs[k])
    return out


def _record_entries(requests, profile, store, runs=None):
    """One entry per record asked for (``record_kinds.Request``): its kind's name in the store, its nominal minutes,
    and, for a record that reads trained weights, the runs it reads (``_needs``: keys in ``runs``, the plan's run map;
    the maps study's, from ``study.yaml``)."""
    out = []
    for request in requests:
        kind, name = kind_of(request), record_name(request)
        if kind.group == "bench":
            if request.name == "nystrom-variants":
                name = store.newest_record("bench", request.name)
            path = f"bench/{name}.json"
            command = kind.command.format(path=_shown(store.root / path))
            level, purpose, dataset = 2, "speed targets (benchmarks)", None
        else:
            path, command = f"{profile}/measure/{name}.json", f"vixnb batch --profile {profile} --only {name}"
            level, dataset = 1, request.dataset
            purpose = (f"{request.paper} pages: {request.kind}" if request.paper else
                       f"maps pages: {request.kind.removeprefix('maps-')}")
        e = Entry(chapter=request.chapter, paper=request.paper, kind="bench" if kind.group == "bench" else "measure",
                  name=request.name if kind.group == "bench" else name, model=None, dataset=dataset, profile=profile,
                  seed=None, level=level, purpose=purpose, command=command, path=path)
        e._nominal, e._request = kind.minutes, request
        if kind.reads_weights and runs is not None and request.kind.startswith("maps-"):
            e._needs = _study_needs(request, profile, runs)
        out.append(e)
    return out


def _study_needs(request, profile, runs):
    """The keys of the plan's runs (``runs``) whose kept weights the maps study's record ``request`` reads."""
    needs = set()
    for label in study_labels(request.kind.removeprefix("maps-")):
        model, settings, seed, dataset = study_run(label, profile)
        k = config_key(run_config(model, dataset=dataset, profile=profile, seed=seed, **settings))
        if k in runs and runs[k].keep_weights != "no":
            needs.add(k)
    return needs


# ----- status -------------------------------------------------------------------------------------------

def _run_status(entry, store, needed_paths):
    config = entry._config
    stored = store.get(config)
    if stored is not None:
        why = stale_reason(stored, store) or (entry.keep_weights != "no" and store.weights_missing(config, stored))
        return ("stale", why) if why else ("stored", "")
    folder = store.root / entry.profile
    for other in sorted(folder.glob(f"{config['model']}-{config['dataset']}-seed{config['seed']}-*.json")):
        if str(other.relative_to(store.root)) in needed_paths:
            continue
        try:
            old = read_json(other)["config"]
        except (StoreError, KeyError):  # an unreadable file is no evidence either way
            continue
        changed = [f"{k} {old.get(k)!r} -> {config.get(k)!r}" for k in sorted(set(config) | set(old))
                   if old.get(k) != config.get(k)]
        return "stale", f"{other.name} was made with other settings ({'; '.join(changed)})"
    return "missing", ""


def _record_status(entry, store):
    record = store.load_record(kind_of(entry._request).group, entry.path.rsplit("/", 1)[1][:-len(".json")],
                               profile=entry.profile)
    if record is None:
        return "missing", ""
    stale = kind_of(entry._request).stale
    why = stale(record, store) if stale else None
    return ("stale", why) if why else ("stored", "")


# ----- estimates ------------------------------------------------------------------------------------------

def _bench_rates(store):
    """``{model: {precision: training images/s}}`` and the device, from ``bench/train.json`` (superseded
    rows left out)."""
    record = store.load_record("bench", "train")
    if not record:
        return {}, None
    stale = set((record.get("superseded") or {}).get("rows", []))
    rates = {r["model"]: {"bf16": r.get("ours_images_per_s"), "fp32": r.get("ours_paper_dtype_images_per_s")}
             for r in record["rows"] if r["model"] not in stale}
    return rates, record.get("provenance", {}).get("device")


#: where counted training GFLOP are kept between processes, under the results store (git-ignored)
GFLOP_CACHE = Path(".cache") / "training-gflop.json"


@cache
def _training_gflop(model, dataset, overrides_json="{}"):
    """Training GFLOP per image (3x the forward, ``measure.flops``) of a model in its paper configuration, with
    the run's model settings (``overrides_json``: JSON of ``model_overrides``). Counting takes about 0.1 s a
    model and a plan counts over a hundred, in every process that builds one (the book's intro, the plan and
    provenance pages), so counts are kept in ``<results store>/.cache/training-gflop.json``, keyed by the
    model's architecture signature and the counting code's hash: another architecture or counting rule is
    another key, never a stale count."""
    with torch.random.fork_rng(), torch.device("meta"):  # shapes only: no weights drawn or copied
        built = create_model(model, dataset=dataset, **json.loads(overrides_json))
    signature = architecture_signature(built)
    rule = hashlib.sha256(inspect.getsource(sys.modules[flops.__module__]).encode()).hexdigest()[:12]
    key = f"{model}|{dataset}|{overrides_json}|{signature}|{rule}"
    path = default_root() / GFLOP_CACHE
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    if key not in kept:
        kept[key] = 3 * flops(built)["gflops"]
        try:
            atomic_write(path, lambda f: json.dump(kept, f, indent=0, sort_keys=True))
        except OSError:  # a read-only store: count again next time
            pass
    return kept[key]


def _stored_epoch_seconds(store, profile):
    """``{model: median training seconds per epoch}`` of each model's first stored run in the profile."""
    epochs = {}
    for result in store.results(profile):
        if result.get("history") and result.get("config", {}).get("model") not in epochs:
            epochs[result["config"]["model"]] = statistics.median(h["seconds"] for h in result["history"])
    return epochs


#: epochs a DualOpT run without a cap is taken to last (it stops on patience, twice; the ceiling is far above): a
#: nominal figure until stored runs say more
DUALOPT_NOMINAL_EPOCHS = 150


def expected_epochs(config):
    """``(epochs, note)``: the epochs a run is expected to train (main stage and post-training), and a note for the
    estimate's basis where it is nominal: a DualOpT run without a cap (the paper profile) stops on patience, so its
    ``epochs`` (a ceiling) would overstate it; post-training likewise stops on patience."""
    epochs, post, dualopt = config["epochs"], config["post_train_epochs"], config["dualopt"]
    uncapped = dualopt is not None and "adamw_epochs" not in dualopt
    nominal = config["optimizer"] == "dualopt" and uncapped
    if nominal:
        epochs = min(epochs, DUALOPT_NOMINAL_EPOCHS)
    if post and uncapped:
        post = min(post, 2 * dualopt["patience"])
    note = f"; DualOpT: nominal {epochs} epochs (stops on patience)" if nominal else ""
    return epochs + post, note


def _estimate(entry, rates, device, epoch_seconds):
    """(GPU minutes, basis) of one entry, from the benchmark's ``rates`` on ``device`` (``_bench_rates``),
    else from FLOPs at their median effective rate, else from the stored runs' ``epoch_seconds``."""
    if not gpu_profile(entry.profile):
        return 0.0, "CPU profile: no GPU time"
    if entry.kind != "train":
        return float(entry._nominal), "nominal (no stored timing)"
    config = entry._config
    spec = dataset_spec(config["dataset"])
    n_train, n_test = config["train_size"] or spec.train_images, config["test_size"] or spec.test_images
    epochs, note = expected_epochs(config)
    images = epochs * (n_train + EVAL_COST * n_test)
    precision = config["precision"]
    rate = (rates.get(config["model"]) or {}).get(precision) if config["dataset"] == "cifar10" else None
    if rate:
        seconds = images / rate + STARTUP_SECONDS
        return seconds / 60, f"bench train: {rate:,.0f} img/s ({precision}, {device}){note}"
    effective = [r[precision] * _training_gflop(m, "cifar10") for m, r in rates.items() if r.get(precision)]
    if effective:
        tflops = statistics.median(effective) / 1e3
        gflop = _training_gflop(config["model"], config["dataset"],
                                json.dumps(config["model_overrides"], sort_keys=True))
        seconds = images * gflop / (tflops * 1e3) + STARTUP_SECONDS
        return seconds / 60, f"FLOPs: {gflop:.2f} GFLOP/img at {tflops:.1f} TFLOP/s ({precision}, median of bench train){note}"
    if (per_epoch := epoch_seconds.get(config["model"])) is not None:
        return (epochs * per_epoch + STARTUP_SECONDS) / 60, \
            f"stored run: {per_epoch:.0f} s/epoch (shared GPU: an upper bound){note}"
    return float("nan"), "no throughput measured yet: run `vixnb bench train` first"


# ----- the plan -----------------------------------------------------------------------------------------

def build(profile, *, store=None, only=None, chapter=None, machine=False):
    """Every entry the book needs in ``profile``, in priority order (``Entry`` objects). ``only``: names
    (models or records) to keep. ``chapter``: notebooks whose entries to keep, with the training runs whose
    weights their measurements read (the maps chapter's come from other chapters); their priorities are then
    ranks among those entries. ``machine``: the runs this machine makes (``vixnb plan``, ``vixnb batch``), in the
    precision it trains them in; the pages ask for the profile's own."""
    prof = get_profile(profile)
    store = store if store is not None else ResultsStore()
    seeds = list(prof.get("seeds") or [0])
    entries = []
    # a chapter's `first` rows, on the dataset of its first table: their first seed runs before the rest of their
    # level, in the chapters' order
    firsts = {(book["notebook"], row, papers.table(key, book["train"][0])["dataset"]): i for i, (key, book, row) in
              enumerate((key, book, row) for key, book in chapters() for row in book.get("first") or [])}
    runs = {}  # a run that several chapters show (a paper's reference run) is one entry, the first chapter's

    for key, book in chapters():
        entries += _train_entries(key, book, profile, seeds, store, runs, machine)
        if gpu_profile(profile):  # a CPU profile's pages measure as they render
            entries += _record_entries(chapter_requests(key, book), profile, store)
    if gpu_profile(profile):
        entries += _record_entries(study_requests(), profile, store, runs)
    needed = {e.path for e in entries}  # of the whole plan: a file another chapter needs is not "other settings"
    if chapter:  # before the statuses and estimates, which are the costly part (a page's banner asks for one)
        unknown = sorted(set(chapter) - {e.chapter for e in entries})
        if unknown:
            names = ", ".join(dict.fromkeys(e.chapter for e in entries))
            raise ValueError(f"chapter={unknown}: not in the {profile!r} plan; its chapters: {names}")
        needs = set().union(*(getattr(e, "_needs", set()) for e in entries if e.chapter in chapter))
        entries = [e for e in entries if e.chapter in chapter or (e.kind == "train" and e.key in needs)]
    rates, device = _bench_rates(store)
    epoch_seconds = _stored_epoch_seconds(store, profile)
    for e in entries:
        e.status, e.reason = _run_status(e, store, needed) if e.kind == "train" else _record_status(e, store)
        e.est_gpu_minutes, e.basis = _estimate(e, rates, device, epoch_seconds)
        if e.kind == "train" and e.dataset != "synthetic" and not _data_here(e.dataset):
            e.blocked = f"no {e.dataset} copy here: `{e.command} --download` fetches it where online"
    order = {chapter["notebook"]: i for i, (_, chapter) in enumerate(chapters())}
    entries.sort(key=lambda e: (e.level, _first_rank(e, firsts), _finite(e.est_gpu_minutes), order.get(e.chapter, len(order)),
                                e.seed or 0))
    entries = _after_needs(entries)
    for rank, e in enumerate(entries, 1):
        e.priority = rank
    if only:
        unknown = sorted(set(only) - {e.name for e in entries} - {e.model for e in entries})
        if unknown:
            names = sorted({e.name for e in entries})
            raise ValueError(f"only={unknown}: not in the {profile!r} plan; its names: {', '.join(names)}")
        entries = [e for e in entries if e.name in only or e.model in only]
    return entries


def _after_needs(entries):
    """``entries`` with each measurement that reads trained weights (``_needs``: run keys) moved just after the last
    of those runs where it stood before it; the order otherwise kept."""
    out = list(entries)
    for e in [e for e in entries if getattr(e, "_needs", None)]:
        last = max((i for i, x in enumerate(out) if x.kind == "train" and x.key in e._needs), default=-1)
        if out.index(e) < last:
            out.remove(e)
            out.insert(last, e)  # the last run it needs moved up by one: just after it
    return out


def _first_rank(entry, firsts):
    """Where ``entry`` stands among the chapters' ``first`` rows (level 1 only: the first seed; on the dataset of the
    chapter's first table), after them if not one."""
    if entry.kind != "train" or entry.level != 1:
        return len(firsts)
    return firsts.get((entry.chapter, entry.name, entry.dataset), len(firsts))


def _shown(path):
    """``path`` relative to the working directory where it lies below it (commands shown and run), else as is."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _finite(x):
    return x if x == x else float("inf")


def _data_here(dataset):
    return source_fingerprint(dataset) is not None


def todo(entries):
    """The entries still to run (missing or stale), in priority order."""
    return [e for e in entries if e.status != "stored"]


def totals(entries):
    """``{chapter: {entries, stored, to_run, to_run_gpu_hours, all_gpu_hours}}`` and the book's, under ``"book"``."""
    out = {}
    for group, members in [*((c, [e for e in entries if e.chapter == c]) for c in dict.fromkeys(e.chapter for e in entries)),
                           ("book", entries)]:
        known = [e for e in members if e.est_gpu_minutes == e.est_gpu_minutes]
        out[group] = {"entries": len(members), "stored": sum(e.status == "stored" for e in members),
                      "to_run": sum(e.status != "stored" for e in members),
                      "to_run_gpu_hours": sum(e.est_gpu_minutes for e in known if e.status != "stored") / 60,
                      "all_gpu_hours": sum(e.est_gpu_minutes for e in known) / 60,
                      "unestimated": len(members) - len(known)}
    return out


def as_json(entries):
    """The plan as JSON-ready dicts, one per entry (an estimate that could not be made is null)."""
    return [{**e.to_dict(), "est_gpu_minutes": e.est_gpu_minutes if e.est_gpu_minutes == e.est_gpu_minutes else None}
            for e in entries]
