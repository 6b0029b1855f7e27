"""What the book measures and keeps besides training runs, by kind: the measurements a chapter's pages read, the
maps study's records, and the benchmarks. Training runs are the other kind of result; ``vixnb.runs`` makes them.

Each ``RecordKind`` says how its record is named, how it is made, whether making it needs a GPU (whatever the
profile), its nominal GPU minutes (what the plan counts until a stored timing says more), what makes a stored
one stale, and whether it reads trained weights (the plan puts it after the runs it reads). A chapter asks for
a measurement in its paper file (``book: measure: {KIND: DATASET}``); the maps study's come from
``vixnb/analysis/study.yaml``; the benchmarks from ``book: bench: [NAME]``. The plan lists them (``requests``),
the batch makes them and the pages read them (``obtain``, under the compute policy): none of them knows a kind by
its name. A new kind of measurement is its maker (in ``vixnb.measure`` or ``vixnb.analysis``), its entry in
``KINDS`` here, and its line in a paper file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from . import measure, papers
from .analysis import attention_record, prediction_record, record_stale
from .analysis.records import STUDY_RECORDS, study, study_labels, study_record, study_run
from .measure.costs import configuration_speeds, efficiency_record
from .profiles import run_model_settings, small_sizes, table_runs
from .results import ResultsStore
from .results.policy import training_policy, weights_changed
from .runspec import RunSpec


class PartialRecord(RuntimeError):
    """A record some of whose runs have no trained weights: not stored (``record`` holds what was measured)."""

    def __init__(self, message, record):
        super().__init__(message)
        self.record = record


@dataclass(frozen=True)
class Request:
    """One record asked for: its ``kind`` and what it is of (a chapter's: ``paper``, ``chapter``, ``dataset`` and
    the chapter's ``part``; the maps study's: the study's dataset; a benchmark's: its ``name``)."""
    kind: str
    paper: str = ""
    chapter: str = ""
    dataset: str = ""
    part: str | None = None
    name: str = ""


@dataclass(frozen=True)
class RecordKind:
    """How one kind of record is named (``record_name(request) -> str``), made (``make(request, *, profile, compute,
    train, store) -> record``; None for a benchmark, which ``command`` makes), where the store keeps it (``group``:
    ``measure``, per profile, or ``bench``), whether making it needs a GPU in any profile, its nominal GPU minutes,
    what makes a stored one stale (``stale(record, store) -> why or None``) and whether it reads trained weights."""
    record_name: Callable
    make: Callable | None = None
    group: str = "measure"
    needs_gpu: bool = False
    minutes: float = 5.0
    stale: Callable | None = None
    reads_weights: bool = False
    command: str = ""
    rehearsal: str | None = None  # a benchmark's command in a dress rehearsal (tiny sizes); None: not rehearsed
    description: str = field(default="", compare=False)


# ----- the makers: what each chapter's record holds -------------------------------------------------------

def _chapter_runs(request, profile):
    """``[(row, model, settings, seeds)]`` of the chapter's tables trained on the request's dataset."""
    book = papers.book_chapter(request.paper, request.chapter)
    return [run for table in book.get("train") or [] if papers.table(request.paper, table).get("dataset") == request.dataset
            for run in table_runs(request.paper, book, table, profile)]


def _gpu_memory_name(request):
    batch = papers.gpu_batch_size(request.paper)
    return f"{request.paper}{'-' + request.part if request.part else ''}-gpu-memory-{request.dataset}-b{batch}"


def _make_gpu_memory(request, *, profile, **_):
    """The GPU memory of one training step at the paper's GPU batch, of every model of the chapter's tables on the
    dataset, on the authors' path and ours (``measure.gpu_memory_column``)."""
    models = list(dict.fromkeys(model for _, model, _, _ in _chapter_runs(request, profile)))
    frame = measure.gpu_memory_column(models, dataset=request.dataset, batch_size=papers.gpu_batch_size(request.paper))
    return {"rows": frame.to_dict(orient="index"), "provenance": frame.attrs["provenance"]}


def _make_speed(request, *, profile, **_):
    """Every efficiency figure of each model configuration the chapter trains on the dataset (a warm start is the
    same architecture as its scratch run: measured once): ``measure.configuration_speeds``."""
    configs = {}
    for row, model, settings, seeds in _chapter_runs(request, profile):
        config = RunSpec.of(model, dataset=request.dataset, profile=profile, seed=seeds[0], **settings).config
        configs.setdefault((model, json.dumps(run_model_settings(config), sort_keys=True)), (row, model, config))
    return configuration_speeds(list(configs.values()), cpu=small_sizes(profile))


def _kept_runs(request, profile):
    """``{row: (model, settings, seed)}``: the runs whose weights the chapter keeps (its ``keep_weights`` tables,
    first seed)."""
    book = papers.book_chapter(request.paper, request.chapter)
    return {row: (model, settings, seeds[0]) for table in book.get("keep_weights") or []
            for row, model, settings, seeds in table_runs(request.paper, book, table, profile)}


def _of_kept_weights(measure):
    """A maker measuring the chapter's kept weights with ``measure(runs, dataset=, profile=, compute=, store=)``
    (``analysis.attention_record``, ``analysis.prediction_record``); a record some of whose runs have no weights
    here is a ``PartialRecord``."""
    def make(request, *, profile, train, store, **_):
        record = measure(_kept_runs(request, profile), dataset=request.dataset, profile=profile, compute=train,
                         store=store)
        missing = [f"{name} ({run['reason']})" for name, run in record["runs"].items() if run["status"] != "done"]
        if missing:
            raise PartialRecord(f"{record_name(request)}: no trained weights of {'; '.join(missing)}", record)
        return record

    make.__doc__ = f"``analysis.{measure.__name__}`` of the runs whose weights the chapter keeps."
    return make


def _make_efficiency(request, *, profile, **_):
    """Every cost of the ViX paper's Table 1 models and the chapter's ``references`` (timm models at 224 px), and
    the token-mixer scaling sweep, at the sizes of the profile's device (``measure.costs.efficiency_record``)."""
    book = papers.book_chapter(request.paper, request.chapter)
    return efficiency_record(papers.table_models("vix", "table1") + (book.get("references") or []),
                             profile=profile, dataset=request.dataset)


def _make_study(kind):
    def make(request, *, profile, train, store, **_):
        record = study_record(kind, profile, train=train, store=store)
        missing = [f"{label} ({run['reason']})" for label, run in record["runs"].items()
                   if run["status"] == "not yet run"]
        if missing:
            raise PartialRecord(f"{record_name(request)}: no trained weights of {'; '.join(missing)}", record)
        return record

    make.__doc__ = f"The maps study's {kind} record (``analysis.records.study_record``)."
    return make


def _bench(command, minutes, rehearsal=None):
    return RecordKind(record_name=lambda request: request.name, group="bench", needs_gpu=True, minutes=minutes,
                      stale=weights_changed,  # a benchmark's rows superseded by a later change
                      command=command, rehearsal=rehearsal)


#: a benchmark's mixers in a dress rehearsal: two, at 65 tokens
_REHEARSED_MIXERS = "--batch 2 --tokens 65 --warmup 0 --steps 1 --mixers 'softmax (fused)' nystrom --json {path}"


KINDS = {
    "gpu_memory": RecordKind(_gpu_memory_name, _make_gpu_memory, needs_gpu=True, minutes=3,
                             description="GPU memory of one training step at the paper's GPU batch"),
    "speed": RecordKind(lambda r: f"{r.paper}-speed-{r.dataset}", _make_speed, minutes=15,
                        description="training memory and step time, inference images/s"),
    "attention_maps": RecordKind(lambda r: f"{r.paper}-attention-maps-{r.dataset}", _of_kept_weights(attention_record),
                                 minutes=5, stale=record_stale, reads_weights=True,
                                 description="attention maps and diagonal prominence of kept weights"),
    # the linattn models are ViT-B/16 at 224 px (their kept weights stay on the GPU machine: runs.keep_where)
    "predictions": RecordKind(lambda r: f"{r.paper}-predictions-{r.dataset}", _of_kept_weights(prediction_record),
                              needs_gpu=True, minutes=2, stale=record_stale, reads_weights=True,
                              description="each kept model's predicted label of the panel's test images"),
    "efficiency": RecordKind(lambda r: "efficiency", _make_efficiency, minutes=8,
                             description="every cost of the ViX Table 1 models, and the token-mixer sweep"),
    "maps-attention": RecordKind(lambda r: f"maps-attention-{r.dataset}", _make_study("attention"), minutes=3,
                                 stale=record_stale, reads_weights=True, description="the maps study's maps"),
    "maps-attribution": RecordKind(lambda r: f"maps-attribution-{r.dataset}", _make_study("attribution"), minutes=5,
                                   stale=record_stale, reads_weights=True,
                                   description="the maps study's attributions"),
    # benchmarks: a command writes results/bench/<name>.json ({path}); generous minutes: a benchmark cannot pause
    "bench:train": _bench("vixnb bench train --save {path}", 5,
                          "vixnb bench train vit --batch 2 --steps 1 --warmup 0 --save {path}"),
    "bench:fill": _bench("vixnb bench fill --save {path}", 20,
                         "vixnb bench fill --models vit --seeds 2 --batch 2 --steps 1 --warmup 0 --no-compile --save {path}"),
    "bench:mixers-bf16": _bench("vixnb bench mixers --dtype bf16 --warmup 10 --steps 30 --json {path}", 3,
                                f"vixnb bench mixers --dtype bf16 {_REHEARSED_MIXERS}"),
    "bench:mixers-fp32": _bench("vixnb bench mixers --dtype fp32 --warmup 10 --steps 30 --json {path}", 3,
                                f"vixnb bench mixers --dtype fp32 {_REHEARSED_MIXERS}"),
    "bench:mixers-bf16-compiled": _bench("vixnb bench mixers --dtype bf16 --compile --warmup 10 --steps 30 "
                                         "--json {path}", 8),
    "bench:mixers-bf16-cudagraphs": _bench("vixnb bench mixers --dtype bf16 --compile reduce-overhead --warmup 10 "
                                           "--steps 30 --mixers 'softmax (fused)' nystrom --json {path}", 6),
    "bench:nystrom-variants": _bench("python tools/profile_nystrom.py {path}", 3),
}


def kind_of(request):
    """The ``RecordKind`` of ``request``, or a one-line error listing the kinds."""
    name = request.kind if isinstance(request, Request) else request
    if name not in KINDS:
        raise ValueError(f"unknown record kind {name!r}; the kinds: {', '.join(KINDS)}")
    return KINDS[name]


def record_name(request):
    """The name of ``request``'s record in the store."""
    return kind_of(request).record_name(request)


def chapter_requests(key, book):
    """The records chapter ``book`` of paper ``key`` asks for: its ``measure`` (one per kind and dataset) and its
    ``bench`` entries, as ``Request`` objects."""
    asked = [Request(kind, paper=key, chapter=book["notebook"], dataset=dataset, part=book.get("part"))
             for kind, dataset in (book.get("measure") or {}).items()]
    asked += [Request(f"bench:{bench}", paper=key, chapter=book["notebook"], name=bench) for bench in book.get("bench") or []]
    for request in asked:
        if request.kind not in KINDS:
            what = f"benchmark {request.name!r}" if request.name else f"measurement {request.kind!r}"
            known = [k.removeprefix("bench:") for k in KINDS if k.startswith("bench:") == bool(request.name)]
            raise papers.PaperFileError(f"vixnb/papers/{key}.yaml: chapter {book['notebook']!r} asks for an unknown "
                                        f"{what}; the known ones: {', '.join(known)} (vixnb/record_kinds.py)")
    return asked


def study_requests():
    """The maps study's records (``vixnb/analysis/study.yaml``), as ``Request`` objects."""
    s = study()
    return [Request(f"maps-{kind}", chapter=s["notebook"], dataset=s["dataset"]) for kind in STUDY_RECORDS]


def weights_read(request, profile):
    """``[(model, settings, seed, dataset)]``: the runs whose kept weights ``request``'s record reads in ``profile``
    (the plan puts the record after them): a chapter's attention maps and predictions read its ``keep_weights`` tables'
    first seeds, the maps study its runs (``study.yaml``); other kinds read none."""
    if request.kind in ("attention_maps", "predictions"):
        return [(model, settings, seed, request.dataset) for model, settings, seed in _kept_runs(request, profile).values()]
    if request.kind.startswith("maps-"):
        return [study_run(label, profile) for label in study_labels(request.kind.removeprefix("maps-"), profile)]
    return []


def obtain(request, *, profile, compute="missing", store=None, train=None, required=False):
    """``request``'s record under the compute policy (``ResultsStore.obtain``): read, or made and stored; None
    where nothing is stored and nothing can be made here. A stored record that has gone stale (its kind's
    ``stale``) is made again where it can be, else read with the reason under ``"stale"``. ``train``: the
    compute policy for training the runs whose weights a record reads (default ``compute``, but "always"
    measures again without training again). A record some of whose runs have no weights is not stored: it is
    returned with ``"stored": False``, or with ``required`` a ``RuntimeError`` names the runs."""
    kind = kind_of(request)
    if kind.make is None:
        raise ValueError(f"{request.kind}: a benchmark is made by its command ({kind.command}), not obtained")
    store = store if store is not None else ResultsStore()
    train = train if train is not None else training_policy(compute)
    partial = []

    def make():
        try:
            return kind.make(request, profile=profile, compute=compute, train=train, store=store)
        except PartialRecord as e:
            partial.append(e.record)
            raise

    stale = (lambda record: kind.stale(record, store)) if kind.stale else None
    try:
        return store.obtain(kind.group, record_name(request), make, profile=profile, compute=compute, stale=stale,
                            needs_gpu=kind.needs_gpu)
    except PartialRecord as e:
        if required:
            raise RuntimeError(str(e)) from None
        return {**partial[0], "stored": False}
