"""The plan: every training run, measurement and benchmark the book's chapters need in one profile, each
with its status in the results store, an estimate of its GPU minutes, and a priority (``vixnb plan``).

What a chapter needs is read from its paper file's ``book`` section (``vixnb.papers``): the tables whose
every row is trained, on the table's dataset, with each of the profile's ``seeds`` (``profiles.yaml``);
the stored measurements its pages read; the benchmarks it shows; the questions of our own it asks (its
``questions``: a setting beside the profile's own runs). The maps chapter's measurements come from
``vixnb/analysis/study.yaml``.

**Status** (``STATUSES``; ``count`` is the one count every page shows). ``stored``: current (its source hashes are
today's, or the behavioural probe found today's code making it bitwise the same: ``runs.probe``);
``unverified``: its code changed and the probe has not run on today's code or could not (shown; not made again;
``vixnb probe`` decides); ``weights wanted``:
stored and current, but a chapter or study needs its trained weights and none are kept here (the batch trains it
again for them; its numbers stay shown meanwhile); ``stale``: a stored result that no longer answers, still shown
with the reason, because it was made by other model code (its recorded architecture signature, or for older
results its parameter count, differs from today's model), by another engine version
(``results.provenance.ENGINE_VERSION``), from other data (its data fingerprint differs from the copy here), or under
other settings (a result file of the same model, dataset and seed whose configuration differs and which no other entry
asks for), or a benchmark whose rows a later change superseded, or one the behavioural probe found today's code making
other numbers for; ``missing``; ``damaged``: a result file that cannot be read (named, kept).

**Estimate** (``est_gpu_minutes``, with its ``basis``): ``vixnb.plan.estimates`` (a stored run of the model, the
``bench train`` throughput, or its FLOPs at a rate fitted to the work of one step; measurements and benchmarks
at their kind's nominal minutes), for the H100 of the stored figures or another GPU (``gpu``).

**Priority**, in levels (``LEVELS``); within a level the first seeds of the rows a chapter names ``first`` (the
order its paper file asks for), then cheaper first; a measurement that reads trained weights (the maps study's)
comes after the runs it reads. A run that several chapters show is one entry, the first chapter's (so a
chapter's totals count it there only); it keeps its weights where any chapter or the maps study
(``vixnb/analysis/study.yaml``) needs them.
1. one seed (the profile's first) of every published row, and the measurements the pages read, so that
   every table has a number;
2. the runs that decide a claim or answer a question, and the benchmarks behind the speed targets;
3. further seeds.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import replace

from .. import papers
from ..runs.asked import question_specs, study, study_own_specs, table_specs
from ..data import source_fingerprint
from .entries import BenchEntry, MeasureEntry, TrainEntry
from .estimates import bench_rates, check_gpu, fitted_rate, measured_points, mode_speeds, step_gflop, stored_timings
from ..engine.ensemble import member_shape
from ..runs.make import can_ensemble_run
from ..runs.profiles import get_profile, gpu_profile
from ..runs.spec import run_model_settings
from ..record_kinds import chapter_requests, kind_of, record_name, study_requests, weights_read
from ..results import ResultsStore
from ..results.pack import TRAVEL_MB
from ..runs.policy import architecture_today
from ..runs.spec import Keep
from ..engine.precision import machine_precision

LEVELS = {
    1: "one seed of every published row, and the measurements the pages read",
    2: "runs that decide a claim or answer a question, and the benchmarks behind the speed targets",
    3: "further seeds",
}
STATUSES = ("stored", "unverified", "weights wanted", "stale", "missing", "damaged")
#: the statuses of entries the batch makes (``todo``)
TO_MAKE = ("weights wanted", "stale", "missing", "damaged")


def shown_settings(settings):
    """A run's settings as listings show them: a warm start (``init_from``) by the run it starts from."""
    return {k: (v.get("run", v.get("model")) if k == "init_from" and isinstance(v, dict) else v)
            for k, v in settings.items()}


def chapters():
    """``[(paper key, chapter)]``: every chapter of every paper file's ``book`` section
    (``papers.book_chapters``), in ``papers.DOCUMENTS`` order, then the file's."""
    return [(key, chapter) for key in papers.DOCUMENTS if key in papers.list_papers()
            for chapter in papers.book_chapters(key)]


def _train_entries(key, chapter, profile, seeds, store, runs, machine=False):
    """The training runs of ``chapter`` (its entry in paper ``key``'s ``book`` list) not yet in ``runs`` (``{config
    key: TrainEntry}``, shared by the chapters and filled here): a run already there (another table's or an earlier
    chapter's) stays one entry, at the lowest level asked for, keeping its weights if any table asks for them
    (``runs.asked.table_specs``, the one keep decision). ``machine``: each run in the precision this machine
    trains it in (``engine.precision.machine_precision``: a T4's fp16 run of a bf16 row)."""
    entries = []
    for table in chapter.get("train", []):
        for row, specs in table_specs(key, chapter, table, profile, seeds):
            entries += [(1 if i == 0 else 3, f"{key} {table}", row, spec) for i, spec in enumerate(specs)]
    for question, spec in (chapter.get("questions") or {}).items():
        if profile in spec.get("profiles", []):  # its models, and its rows' runs with their GPU arms, every seed
            entries += [(2, f"question: {question}", name, run)
                        for name, runs in question_specs(key, spec, profile, seeds).items() for run in runs]
    return _entries_of(entries, key, chapter["notebook"], profile, runs, machine)


def _entries_of(asked, key, notebook, profile, runs, machine):
    """The ``TrainEntry`` s of ``asked`` (``[(level, purpose, name, RunSpec)]``) not yet in ``runs`` (``{config key:
    TrainEntry}``, shared by the chapters and the study, filled here): a run already there stays one entry, at the
    lowest level asked for, keeping its weights if any asks for them. ``machine``: as ``_train_entries``."""
    out = []
    for level, purpose, name, spec in asked:
        if machine and (precision := machine_precision(spec.config["precision"])) != spec.config["precision"]:
            spec = replace(spec, settings={**spec.settings, "precision": precision})
        k = spec.key
        if k in runs:  # e.g. smoke: every dataset is the synthetic one; or a run two tables or chapters show
            first = runs[k]
            first.level = min(first.level, level)
            if spec.keep != Keep.NONE and first.keep_weights == Keep.NONE:
                first.keeping(spec.keep, spec.dataset)
            continue
        needs = {spec.config["init_from"]["key"]} if spec.config.get("init_from") else set()  # after its source
        runs[k] = TrainEntry(chapter=notebook, paper=key, name=name, profile=profile, level=level,
                             purpose=purpose, spec=spec, needs=frozenset(needs))
        out.append(runs[k])
    return out


def _record_entries(requests, profile, store, runs):
    """One entry per record asked for (``record_kinds.Request``): its kind's name in the store, its nominal minutes,
    and, for a record that reads trained weights, the runs it reads (``needs``: keys in ``runs``, the plan's run map;
    the maps study's, from ``study.yaml``). A dress rehearsal's benchmark runs its kind's rehearsal command."""
    out, rehearsal = [], bool(get_profile(profile).get("rehearsal"))
    for request in requests:
        kind, name = kind_of(request), record_name(request, store)
        needs = _needs(request, profile, runs) if kind.reads_weights else frozenset()
        if kind.group == "bench":
            path = f"bench/{name}.json"
            command = ((kind.rehearsal if rehearsal else kind.command) or "").format(path=_shown(store.root / path))
            out.append(BenchEntry(chapter=request.chapter, paper=request.paper, name=request.name, profile=profile,
                                  level=2, purpose="speed targets (benchmarks)", command=command, path=path,
                                  request=request, nominal_minutes=kind.minutes, needs=needs))
        else:
            purpose = (f"question: {request.name}" if kind.question else
                       f"{request.paper} pages: {request.kind}" if request.paper else
                       f"maps pages: {request.kind.removeprefix('maps-')}")
            device = " --device cpu" if kind.cpu_ok else ""
            level = 2 if kind.question else 1  # a question's record: it answers a question
            out.append(MeasureEntry(chapter=request.chapter, paper=request.paper, name=name, profile=profile,
                                    level=level, purpose=purpose,
                                    command=f"vixnb batch --profile {profile}{device} --only {name}",
                                    path=f"{profile}/measure/{name}.json", dataset=request.dataset, request=request,
                                    nominal_minutes=kind.minutes, needs=needs))
    return out


def _needs(request, profile, runs):
    """The keys of the plan's runs (``runs``) whose kept weights the record ``request`` reads
    (``record_kinds.weights_read``)."""
    keys = {spec.key for spec in weights_read(request, profile)}
    return frozenset(k for k in keys if k in runs and runs[k].keep_weights != Keep.NONE)


# ----- estimates ------------------------------------------------------------------------------------------

# ----- the plan -----------------------------------------------------------------------------------------

ORDERS = ("chapters", "rows", "claims")
#: the chapters a lent GPU finishes first under ``order="claims"``: the blog's, whose answer the book lacks most (its
#: stall question's GPU arms first, then the rest of its entries)
LOAN_FIRST = ("simplified",)


def build(profile, *, store=None, only=None, chapter=None, machine=False, order="chapters", gpu=None):
    """Every entry the book needs in ``profile``, in priority order (``entries.TrainEntry``, ``MeasureEntry`` and
    ``BenchEntry`` objects). ``only``: names (models or records) to keep. ``chapter``: notebooks whose entries to keep,
    with the training runs whose weights their measurements read (the maps chapter's come from other chapters); their
    priorities are then ranks among those entries. ``machine``: the runs this machine makes (``vixnb plan``,
    ``vixnb batch``), in the precision it trains them in; the pages ask for the profile's own. ``order``: ``chapters``
    (whole chapters, every seed, runs and measurements together, the cheapest chapter first:
    ``_chapters_cheapest_first``), ``rows`` (the levels across the book: one seed of every row first, ``LEVELS``) or
    ``claims`` (a lent GPU's: ``LOAN_FIRST`` chapters first, then each level by claims decided per GPU-minute:
    ``_decisions_first``).
    ``gpu``: estimate the minutes for that GPU (``measure.flops.GPUS``) instead of the H100 of the stored figures."""
    check_gpu(gpu)
    if order not in ORDERS:
        raise ValueError(f"order={order!r}: use one of {', '.join(ORDERS)}")
    prof = get_profile(profile)
    store = store if store is not None else ResultsStore()
    seeds = list(prof.get("seeds") or [0])
    entries = []
    # a chapter's `first` rows, on the dataset of its first table: their first seed runs before the rest of their
    # level, in the chapters' order
    listed = [(key, chapter_entry, row) for key, chapter_entry in chapters()
              for row in chapter_entry.get("first") or []]
    firsts = {(chapter_entry["notebook"], row, papers.table(key, chapter_entry["train"][0])["dataset"]): i
              for i, (key, chapter_entry, row) in enumerate(listed)}
    runs = {}  # a run that several chapters show (a paper's reference run) is one entry, the first chapter's

    records = gpu_profile(profile) or bool(prof.get("rehearsal"))
    for key, chapter_entry in chapters():  # ``chapter`` (the argument) names the notebooks to keep
        entries += _train_entries(key, chapter_entry, profile, seeds, store, runs, machine)
        if records:  # a CPU profile's pages measure as they render
            entries += _record_entries(chapter_requests(key, chapter_entry), profile, store, runs)
    study_runs = [(1, "maps study", label, spec) for label, spec in study_own_specs(profile)]
    entries += _entries_of(study_runs, "maps", study()["notebook"], profile, runs, machine)
    if records:
        entries += _record_entries(study_requests(), profile, store, runs)
    needed = {e.path for e in entries}  # of the whole plan: a file another chapter needs is not "other settings"
    if chapter:  # before the statuses and estimates, which are the costly part (a page's banner asks for one)
        unknown = sorted(set(chapter) - {e.chapter for e in entries})
        if unknown:
            names = ", ".join(dict.fromkeys(e.chapter for e in entries))
            raise ValueError(f"chapter={unknown}: not in the {profile!r} plan; its chapters: {names}")
        needs = set().union(*(e.needs for e in entries if e.chapter in chapter))
        entries = [e for e in entries if e.chapter in chapter or (isinstance(e, TrainEntry) and e.key in needs)]
    rates, device = bench_rates(store)
    timings = stored_timings(store, profile)
    rate = fitted_rate(measured_points(rates, timings[1]))
    speeds, _ = mode_speeds(store)
    for e in entries:
        e.status, e.reason = e.stored_status(store, needed)
    _group_and_mode(entries)
    for e in entries:
        e.est_gpu_minutes, e.basis = e.estimate(rates=rates, device=device, timings=timings, rate=rate, gpu=gpu,
                                                speeds=speeds)
        if not isinstance(e, TrainEntry):
            continue
        if e.dataset != "synthetic" and not data_here(e.dataset):
            e.blocked = f"no {e.dataset} copy here: `{e.command} --download` fetches it where online"
        if machine and e.status in TO_MAKE and (mb := checkpoint_mb(e.config)) > TRAVEL_MB:
            minutes = math.ceil(e.est_gpu_minutes) if e.est_gpu_minutes == e.est_gpu_minutes else "unknown"
            e.basis += (f"; from a lent machine it runs whole or not at all: {minutes} minutes in one call (its "
                        f"{mb:.0f} MiB checkpoint cannot travel back)")
    book_order = {chapter["notebook"]: i for i, (_, chapter) in enumerate(chapters())}
    entries.sort(key=lambda e: (e.level, _first_rank(e, firsts), finite(e.est_gpu_minutes),
                                book_order.get(e.chapter, len(book_order)), e.seed or 0))
    entries = after_needs(entries)
    if order == "chapters":
        entries = _chapters_cheapest_first(entries)
    elif order == "claims":
        entries = _decisions_first(entries)
    for rank, e in enumerate(entries, 1):
        e.priority = rank
    if only:
        unknown = sorted(set(only) - {e.name for e in entries} - {e.model for e in entries})
        if unknown:
            names = sorted({e.name for e in entries})
            raise ValueError(f"only={unknown}: not in the {profile!r} plan; its names: {', '.join(names)}")
        entries = [e for e in entries if e.name in only or e.model in only]
    return entries


#: a run joins an ensemble where its training step is at most this much work (GFLOP: bound by the host, whose
#: dispatches an ensemble shares), and an ensemble holds at most ``MAX_MEMBERS`` runs and ``ENSEMBLE_STEP_GFLOP`` of
#: work a step (the batch cuts a larger group into jobs of that size)
MEMBER_STEP_GFLOP, MAX_MEMBERS, ENSEMBLE_STEP_GFLOP = 128, 16, 2048


def ensemble_group(config):
    """The group of runs of one shape that ``config``'s run may train with as one ensemble (``engine.ensemble``: the
    same forward and protocol; a short hash of ``member_shape``), or "" where its members would not equal separate runs
    (``runs.make.can_ensemble_run``: dropout, DualOpT, a warm start...)."""
    if not can_ensemble_run(config)[0]:
        return ""
    return hashlib.sha256(member_shape(config).encode()).hexdigest()[:12]


def _group_and_mode(entries):
    """Each training entry's ``group`` (``ensemble_group``) and the ``mode`` it is expected to train in: an ensemble
    where two or more runs of its group are to make and its step is small enough to gain (``MEMBER_STEP_GFLOP``), else
    alone; graphed on a GPU profile (``engine.modes``: the probe of a lent machine may choose otherwise, and each
    result's provenance says which mode made it)."""
    train = [e for e in entries if isinstance(e, TrainEntry)]
    for e in train:
        e.group = ensemble_group(e.config)
    together = {}
    for e in train:
        if e.group and e.status in TO_MAKE:
            together[e.group] = together.get(e.group, 0) + 1
    for e in train:
        grouped = together.get(e.group, 0) > 1 and step_gflop(e.config) <= MEMBER_STEP_GFLOP
        e.mode = ("graphed " if gpu_profile(e.profile) else "") + "ensemble" if grouped else \
            ("graphed" if gpu_profile(e.profile) else "eager")
        e.members = min(together[e.group], MAX_MEMBERS,
                        max(1, ENSEMBLE_STEP_GFLOP // max(step_gflop(e.config), 1e-9))) if grouped else 1


def _decisions_first(entries):
    """``entries`` (in the rows order) for a lent GPU: first the ``LOAN_FIRST`` chapters' question runs (a question's
    GPU arms and the rows beside them), then the rest of those chapters, then each level (``LEVELS``) by the claims its
    runs decide per GPU-minute: a run scores, for each testable claim that compares its row (``papers.claim_rows``),
    one over the minutes left of all that claim's runs, so that cheap decisions come first; ties keep the rows
    order. A measurement stays after the runs it reads (``after_needs``)."""
    naming = {}
    for key in {e.paper for e in entries if e.paper in papers.list_papers()}:
        for claim, rows in papers.claim_rows(key):
            for row in rows:
                naming.setdefault((key, row), set()).add((key, claim))
    left = {}
    for e in entries:
        if isinstance(e, TrainEntry) and e.status in TO_MAKE:
            for claim in naming.get((e.paper, e.name), ()):
                left[claim] = left.get(claim, 0.0) + finite(e.est_gpu_minutes)

    def score(e):
        if not isinstance(e, TrainEntry):
            return 0.0
        return sum(1 / max(left.get(c, 0.0), 0.1) for c in naming.get((e.paper, e.name), ()))

    def bucket(e):
        if e.chapter in LOAN_FIRST:
            return 0 if e.purpose.startswith("question:") else 1
        return 1 + e.level

    rank = {id(e): i for i, e in enumerate(entries)}
    return after_needs(sorted(entries, key=lambda e: (bucket(e), -score(e), rank[id(e)])))


def _chapters_cheapest_first(entries):
    """``entries`` (in the rows order) regrouped by chapter, the chapter with the fewest estimated GPU minutes left
    first, so that a short GPU window completes whole chapters; each chapter's entries keep their order. A
    measurement that reads runs of other chapters (the maps study reads the tables' runs) waits for them
    (``after_needs``): a cheap chapter never pulls a costly chapter's runs forward."""
    groups = {}
    for e in entries:
        groups.setdefault(e.chapter, []).append(e)

    def left(chapter):
        return sum(finite(e.est_gpu_minutes) for e in groups[chapter] if e.status in TO_MAKE)

    ordered = sorted(groups, key=lambda c: (left(c), list(groups).index(c)))
    return after_needs([e for chapter in ordered for e in groups[chapter]])


def after_needs(entries):
    """``entries`` with each entry that reads trained weights (``needs``: run keys; a measurement, a warm start) moved
    just after the last of those runs where it stood before it; the order otherwise kept."""
    out = list(entries)
    for e in [e for e in entries if e.needs]:
        last = max((i for i, x in enumerate(out) if isinstance(x, TrainEntry) and x.key in e.needs), default=-1)
        if out.index(e) < last:
            out.remove(e)
            out.insert(last, e)  # the last run it needs moved up by one: just after it
    return out


def _first_rank(entry, firsts):
    """Where ``entry`` stands among the chapters' ``first`` rows (level 1 only: the first seed; on the dataset of the
    chapter's first table), after them if not one."""
    if not isinstance(entry, TrainEntry) or entry.level != 1:
        return len(firsts)
    return firsts.get((entry.chapter, entry.name, entry.dataset), len(firsts))


def _shown(path):
    """``path`` relative to the working directory where it lies below it (commands shown and run), else as is."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def finite(x):
    """``x``, or infinity where it is NaN (an estimate that cannot be made sorts last)."""
    return x if x == x else float("inf")


def data_here(dataset):
    """Whether ``dataset``'s files are on this machine (its source fingerprint can be read)."""
    return source_fingerprint(dataset) is not None


def checkpoint_mb(config, members=1):
    """About how large a training run's checkpoint is, in MiB: 16 bytes per parameter (weights, AdamW's two
    moments, the best weights), per member of an ensemble."""
    _, params = architecture_today(config["model"], config["dataset"],
                                   json.dumps(run_model_settings(config), sort_keys=True))
    return 16 * params * members / 2**20


def todo(entries):
    """The entries still to make (``TO_MAKE``: missing, stale, damaged, or wanting their weights), in priority
    order."""
    return [e for e in entries if e.status in TO_MAKE]


def hours_on(minutes, gpus=1):
    """Wall-clock hours until the last of jobs of ``minutes`` (estimated GPU minutes, in the order a batch takes
    them) ends on ``gpus`` GPUs, each GPU taking the next job as it frees (a local batch with one job per GPU, or a
    Slurm array of ``gpus`` at once); an estimate that cannot be made counts 0."""
    free = [0.0] * max(1, int(gpus))
    for m in minutes:
        at = free.index(min(free))
        free[at] += m if m == m else 0.0
    return max(free) / 60


def counts(entries):
    """The one count of plan entries that every page prints (the intro and its dashboard, a chapter's banner and
    footer, the plan and provenance pages): ``{"entries", <each of STATUSES>, "to_run", "gpu_hours_left",
    "reasons"}``, by the plan's own statuses (``stored`` being current results only); ``to_run`` is every entry the
    batch makes (``TO_MAKE``), ``gpu_hours_left`` their estimated GPU-hours (the entries without an estimate count 0),
    and ``reasons`` ``{result path: why}`` of each entry that is unverified, stale, wants its weights or is damaged."""
    entries = list(entries)
    out = {"entries": len(entries), **{s: sum(e.status == s for e in entries) for s in STATUSES}}
    left = [e.est_gpu_minutes for e in entries if e.status in TO_MAKE and e.est_gpu_minutes == e.est_gpu_minutes]
    reasons = {e.path: e.reason for e in entries if e.status in ("unverified", "weights wanted", "stale", "damaged")}
    return {**out, "to_run": sum(e.status in TO_MAKE for e in entries), "gpu_hours_left": sum(left) / 60,
            "reasons": reasons}


def totals(entries, gpus=1):
    """``{chapter: {entries, stored, to_run, to_run_gpu_hours, all_gpu_hours, hours_on_gpus}}`` (and ``counts``'s
    statuses) and the book's, under ``"book"``, in the entries' order (``vixnb plan``: the cheapest chapter first);
    ``hours_on_gpus``: the wall-clock hours of what is left on ``gpus`` GPUs (``hours_on``)."""
    out = {}
    for group, members in [*((c, [e for e in entries if e.chapter == c])
                             for c in dict.fromkeys(e.chapter for e in entries)),
                           ("book", entries)]:
        known = [e for e in members if e.est_gpu_minutes == e.est_gpu_minutes]
        counted, left = counts(members), [e for e in known if e.status in TO_MAKE]
        out[group] = {**{k: v for k, v in counted.items() if k != "reasons"},
                      "to_run_gpu_hours": counted["gpu_hours_left"],
                      "all_gpu_hours": sum(e.est_gpu_minutes for e in known) / 60,
                      "hours_on_gpus": hours_on([e.est_gpu_minutes for e in left], gpus),
                      "unestimated": len(members) - len(known)}
    return out


def as_json(entries):
    """The plan as JSON-ready dicts, one per entry (an estimate that could not be made is null)."""
    return [{**e.to_dict(), "est_gpu_minutes": e.est_gpu_minutes if e.est_gpu_minutes == e.est_gpu_minutes else None}
            for e in entries]
