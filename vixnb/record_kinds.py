"""What the book measures and keeps besides training runs, by kind: the measurements a chapter's pages read, the
maps study's records, and the benchmarks. Training runs are the other kind of result; ``vixnb.runs.make`` makes them.

Each ``RecordKind`` says how its record is named, how it is made, whether making it needs a GPU (whatever the
profile), its nominal GPU minutes (what the plan counts until a stored timing says more), what makes a stored
one stale, and whether it reads trained weights (the plan puts it after the runs it reads). A chapter asks for
a measurement in its paper file (``book: measure: {KIND: DATASET}``); the maps study's come from
``vixnb/analysis/study.yaml``; the benchmarks from ``book: bench: [NAME]``. The plan lists them (``requests``),
the batch makes them and the pages read them (``obtain``, under the compute policy; ``report.records.record``), each
page showing a kind's record as its ``show`` makes it (``report.tables.records_section``), and the claims ledger reads
its ``metrics`` (``stored_figures``): none of them knows a kind by its name. A new kind of measurement is its maker (in
``vixnb.measure`` or ``vixnb.analysis``), its entry in ``KINDS`` here, and its line in a paper file.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd

from . import measure, papers
from .analysis import attention_record, class_token_entropy, maps_record_stale, prediction_record, record_stale
from .analysis.first_steps import arm_steps, arms_frame, first_steps_record
from .analysis.records import STUDY_RECORDS, study_labels, study_record
from .runs.asked import kept_specs, question_arms, question_spec, row_specs, study, study_run
from .measure import FAVOR_GFLOPS_COLUMN, records_frame
from .measure.costs import configuration_speeds, efficiency_record, speed_table
from .measure.latency import latency_record, latency_table
from .runs.spec import run_model_settings
from .runs.profiles import small_sizes
from .errors import StoreError
from .results import ResultsStore
from .runs.policy import obtain_record, training_policy, weights_changed


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


class ClaimMetric(NamedTuple):
    """A figure the claims ledger reads from a kind's record: its label in the ledger, the unit of a difference of
    it, where our figure comes from, and the ``column`` of a model's values (``RecordKind.per_model``) holding it.
    ``decided_by`` (``report.records.metrics``): a step ("step", the default: a run of any length decides it), or
    the epochs trained, for a figure of trained weights ("epochs": judged as the runs' epochs allow)."""
    label: str
    unit: str
    source: str
    column: str
    decided_by: str = "step"


@dataclass(frozen=True)
class RecordKind:
    """How one kind of record is named (``record_name(request) -> str``), made (``make(request, *, profile, compute,
    train, store) -> record``; None for a benchmark, which ``command`` makes), where the store keeps it (``group``:
    ``measure``, per profile, or ``bench``), whether making it needs a GPU in any profile, its nominal GPU minutes,
    what makes a stored one stale (``stale(record, store) -> why or None``), the runs whose kept weights it reads
    (``runs_read(request, profile) -> [(model, settings, seed, dataset)]``; None: it reads none), its page table
    (``show(record) -> DataFrame``; None: its pages draw it otherwise), and what the claims ledger reads of it
    (``metrics``: ``{metric: ClaimMetric}``, from ``per_model(record, dataset, models) -> ({model: (values, provenance,
    precision)}, records shown)``; default: a record ``{"rows": {model: values}, "provenance"}``; a measurement of
    trained weights adds a fourth item, the config of the training run it measured: the ledger reads that run's
    epochs and whether it failed)."""
    record_name: Callable
    make: Callable | None = None
    group: str = "measure"
    needs_gpu: bool = False
    # it times nothing: a CPU makes it as a GPU would, in any profile (``vixnb batch --device cpu``)
    cpu_ok: bool = False
    question: bool = False  # it answers a question of ours (its request's ``name``): the plan's level 2
    minutes: float = 5.0
    stale: Callable | None = None
    runs_read: Callable | None = None
    show: Callable | None = None
    metrics: dict = field(default_factory=dict, compare=False)
    per_model: Callable | None = None
    command: str = ""
    rehearsal: str | None = None  # a benchmark's command in a dress rehearsal (tiny sizes); None: not rehearsed
    numbered: bool = False  # each making is kept as <name>-N: the stored record is the newest (``store.newest_record``)
    description: str = field(default="", compare=False)

    @property
    def reads_weights(self):
        """Whether it reads trained weights (the plan puts it after the runs it reads)."""
        return self.runs_read is not None


# ----- the makers: what each chapter's record holds -------------------------------------------------------

def _chapter_specs(request, profile):
    """``[(row, [RunSpec per seed])]`` of the chapter's tables trained on the request's dataset."""
    chapter = papers.book_chapter(request.paper, request.chapter)
    return [run for table in chapter.get("train") or []
            if papers.table(request.paper, table).get("dataset") == request.dataset
            for run in row_specs(request.paper, chapter, table, profile)]


def _gpu_memory_name(request):
    batch = papers.gpu_batch_size(request.paper)
    return f"{request.paper}{'-' + request.part if request.part else ''}-gpu-memory-{request.dataset}-b{batch}"


def _make_gpu_memory(request, *, profile, **_):
    """The GPU memory of one training step at the paper's GPU batch, of every model of the chapter's tables on the
    dataset, on the authors' path and ours (``measure.gpu_memory_column``)."""
    models = list(dict.fromkeys(specs[0].model for _, specs in _chapter_specs(request, profile) if specs))
    frame = measure.gpu_memory_column(models, dataset=request.dataset, batch_size=papers.gpu_batch_size(request.paper))
    return {"rows": frame.to_dict(orient="index"), "provenance": frame.attrs["provenance"]}


def _make_speed(request, *, profile, **_):
    """Every efficiency figure of each model configuration the chapter trains on the dataset (a warm start is the
    same architecture as its scratch run: measured once): ``measure.configuration_speeds``."""
    configs = {}
    for row, specs in _chapter_specs(request, profile):
        model, config = specs[0].model, specs[0].config
        configs.setdefault((model, json.dumps(run_model_settings(config), sort_keys=True)), (row, model, config))
    return configuration_speeds(list(configs.values()), cpu=small_sizes(profile))


def _kept_weights_read(request, profile):
    """The runs whose kept weights a chapter's record reads: its ``keep_weights`` tables' first seeds."""
    return list(kept_runs(request, profile).values())


def _study_weights_read(request, profile):
    """The runs whose kept weights a maps study's record reads (``study.yaml``)."""
    return [study_run(label, profile) for label in study_labels(request.kind.removeprefix("maps-"), profile)]


def kept_runs(request, profile):
    """``{row: RunSpec}``: the runs whose weights the chapter keeps (``asked.kept_specs``: its ``keep_weights``
    tables, first seed)."""
    return kept_specs(request.paper, request.chapter, profile)


def _of_kept_weights(measure):
    """A maker measuring the chapter's kept weights with ``measure(runs, dataset=, profile=, compute=, store=)``
    (``analysis.attention_record``, ``analysis.prediction_record``); a record some of whose runs have no weights
    here is a ``PartialRecord``."""
    def make(request, *, profile, train, store, **_):
        record = measure(kept_runs(request, profile), dataset=request.dataset, profile=profile, compute=train,
                         store=store)
        missing = [f"{name} ({run['reason']})" for name, run in record["runs"].items() if run["status"] != "done"]
        if missing:
            raise PartialRecord(f"{record_name(request)}: no trained weights of {'; '.join(missing)}", record)
        return record

    make.__doc__ = f"``analysis.{measure.__name__}`` of the runs whose weights the chapter keeps."
    return make


def efficiency_models(request):
    """The models a cost measurement of a chapter measures: the ViX paper's Table 1 models, in its order, and the
    chapter's ``references`` (timm models at 224 px)."""
    chapter = papers.book_chapter(request.paper, request.chapter)
    return papers.table_models("vix", "table1") + (chapter.get("references") or [])


def _make_efficiency(request, *, profile, **_):
    """Every cost of ``efficiency_models`` and the token-mixer scaling sweep, at the sizes of the profile's device
    (``measure.costs.efficiency_record``)."""
    return efficiency_record(efficiency_models(request), profile=profile, dataset=request.dataset)


def _efficiency_per_model(record, dataset, models):
    """The ledger's reading of an efficiency record: each measured model's ``records_frame`` row (numbers where
    they are numbers), its provenance and the dtype it timed."""
    used = [r for r in record.get("records", []) if r.get("dataset", "cifar10") == dataset
            and r.get("model") in models and "flops" in r]
    frame = records_frame(used)
    found = {r["model"]: ({column: pd.to_numeric(frame.loc[r["model"], column], errors="coerce")
                           for column in frame.columns}, r["provenance"], str(r.get("dtype", "fp32"))) for r in used}
    return found, [{"provenance": r["provenance"]} for r in used]


#: the column of the class token's attention entropy in the ledger's reading of an attention-map record
_ENTROPY_COLUMN = "class token entropy (nats)"


def _attention_per_model(record, dataset, models):
    """The ledger's reading of an attention-map record (``analysis.attention_record``): each measured run's entropy
    of the class token's attention over the patches (``analysis.class_token_entropy``), mean over the panel's images
    and the layers, with the config of the training run whose weights it measured. Only a record measured on
    ``dataset`` itself is read: never the smoke profile's, made on its synthetic images."""
    if record.get("dataset") != dataset or (record.get("provenance") or {}).get("profile") == "smoke":
        return {}, []
    found = {name: ({_ENTROPY_COLUMN: float(class_token_entropy(run["class_token"]).mean())}, record.get("provenance"),
                    "fp32", run.get("config"))
             for name, run in (record.get("runs") or {}).items()
             if name in models and run.get("status") == "done" and run.get("class_token")}
    return found, [record] if found else []


def _rows_per_model(record, dataset, models):
    """The ledger's reading of a record ``{"rows": {model: values}, "provenance"}`` (of one dataset, fp32 unless its
    provenance says otherwise)."""
    rows = {m: row for m, row in (record.get("rows") or {}).items() if m in models}
    precision = str((record.get("provenance") or {}).get("dtype") or "fp32")
    return {m: (row, record.get("provenance"), precision) for m, row in rows.items()}, [record] if rows else []


def _rows_table(record):
    """A record ``{"rows": {model: values}}`` as a page table, one row per model."""
    return pd.DataFrame.from_dict(record.get("rows") or {}, orient="index")


def _make_study(measurement):
    def make(request, *, profile, train, store, **_):
        record = study_record(measurement, profile, train=train, store=store)
        missing = [f"{label} ({run['reason']})" for label, run in record["runs"].items()
                   if run["status"] == "not yet run"]
        if missing:
            raise PartialRecord(f"{record_name(request)}: no trained weights of {'; '.join(missing)}", record)
        return record

    make.__doc__ = f"The maps study's {measurement} record (``analysis.records.study_record``)."
    return make


def _make_first_steps(request, *, profile, compute="missing", store=None, **_):
    """``analysis.first_steps_record`` of the request's question (its ``name``), on the CPU; a profile of small sizes
    (smoke, a CPU rehearsal) takes ``REHEARSED_STEPS`` steps. The stored record's arms that still answer are kept as
    they were made (not under ``compute="always"``): a new arm costs its own steps only, and each arm made is
    stored as it ends (a run stopped part way keeps the arms it made)."""
    earlier, keep = None, None
    if compute != "always" and store is not None:  # "always" replaces the stored record only once it is whole
        name = record_name(request, store)
        keep = lambda record: store.save_record("measure", name, record, profile=profile)  # noqa: E731
        try:
            earlier = store.load_record("measure", name, profile=profile)
        except StoreError:  # a damaged record is no evidence: every arm is made again
            earlier = None
    return first_steps_record(request.paper, request.name, profile, device="cpu",
                              steps=REHEARSED_STEPS if small_sizes(profile) else None, earlier=earlier, keep=keep)


REHEARSED_STEPS = 3


def _first_steps_stale(record, store):
    """Why a stored first-steps record no longer answers its question: an arm asked for now that it lacks, one it
    holds under another run key (its settings or the row's run changed), or another number of steps."""
    key, question, profile = (record.get("paper"), record.get("question"),
                              (record.get("provenance") or {}).get("profile"))
    try:
        arms, spec = question_arms(key, question, profile), question_spec(key, question)
    except (ValueError, KeyError) as e:
        return f"its question is no longer asked as it was ({e})"
    held = record.get("arms") or {}
    changed = [arm for arm, run in arms.items() if (held.get(arm) or {}).get("key") != run.key]
    if changed:
        return f"arms {', '.join(changed)} are asked for with other settings than it holds (or not at all)"
    if not small_sizes(profile):
        short = [arm for arm in arms if len(held[arm].get("loss") or []) < arm_steps(spec, arm)]
        if record.get("steps") != spec.get("first_steps") or short:
            return (f"it has {record.get('steps')} steps an arm; the question asks for {spec.get('first_steps')}" +
                    (f" ({', '.join(f'{a}: {arm_steps(spec, a)}' for a in short)})" if short else ""))
    return None


def _bench(command, minutes, rehearsal=None, numbered=False):
    return RecordKind(record_name=lambda request: request.name, group="bench", needs_gpu=True, minutes=minutes,
                      stale=weights_changed,  # a benchmark's rows superseded by a later change
                      command=command, rehearsal=rehearsal, numbered=numbered)


#: a benchmark's mixers in a dress rehearsal: two, at 65 tokens, in the benchmark's own process as on a GPU (on a CPU
#: each would start a process of its own to measure its memory: 15 of the 21 s each of these rehearsals took)
_REHEARSED_MIXERS = ("--batch 2 --tokens 65 --warmup 0 --steps 1 --mixers 'softmax (fused)' nystrom --in-process "
                     "--json {path}")


#: what the claims ledger reads of the GPU-memory measurement at the paper's GPU batch
_GPU_MEMORY_METRICS = {
    "gpu_gb": ClaimMetric("GPU GB", "GB", "GPU GB reserved, authors (fp32): the stored training step at the paper's "
                          "GPU batch (64; cxv: 32) on the authors' execution path, the paper-comparable figure",
                          "GPU GB reserved, authors (fp32)"),
    "gpu_gb_fused": ClaimMetric("GPU GB (fused)", "GB", "GPU GB reserved, fused (fp32) of that measurement",
                                "GPU GB reserved, fused (fp32)"),
    "train_gb": ClaimMetric("training memory", "GB", "GPU GB allocated, authors (fp32) of the batch-64 measurement "
                            "(max_memory_allocated, the favor paper's training memory)",
                            "GPU GB allocated, authors (fp32)"),
    "train_gb_fused": ClaimMetric("training memory (fused)", "GB", "GPU GB allocated, fused (fp32) of the batch-64 "
                                  "measurement", "GPU GB allocated, fused (fp32)"),
}
#: what the claims ledger reads of the efficiency measurement (its GFLOPs: the favor paper's convention)
_EFFICIENCY_METRICS = {
    "train_step_ms": ClaimMetric("training-step time", "ms", "train step ms (authors) of the stored efficiency "
                                 "measurement", "train step ms (authors)"),
    "ms_per_image": ClaimMetric("inference time", "ms", "ms per image (authors) of the stored efficiency measurement",
                                "ms per image (authors)"),
    "infer_gb": ClaimMetric("inference memory", "GB", "infer GB @64 (authors) of the stored efficiency measurement",
                            "infer GB @64 (authors)"),
    "gflops": ClaimMetric("GFLOPs", "GFLOPs", "the favor paper's convention, of the stored efficiency measurement",
                          FAVOR_GFLOPS_COLUMN),
}

KINDS = {
    "gpu_memory": RecordKind(_gpu_memory_name, _make_gpu_memory, needs_gpu=True, minutes=3, show=_rows_table,
                             metrics=_GPU_MEMORY_METRICS,
                             description="GPU memory of one training step at the paper's GPU batch"),
    "speed": RecordKind(lambda r: f"{r.paper}-speed-{r.dataset}", _make_speed, minutes=15, show=speed_table,
                        description="training memory and step time, inference images/s"),
    "attention_maps": RecordKind(lambda r: f"{r.paper}-attention-maps-{r.dataset}", _of_kept_weights(attention_record),
                                 minutes=5, cpu_ok=True, stale=maps_record_stale, runs_read=_kept_weights_read,
                                 metrics={"class_token_entropy": ClaimMetric(
                                     "class token's attention entropy", "nats", "the entropy of the class token's "
                                     "attention over the patches, per layer, mean over the panel's images and the "
                                     "layers, of the stored attention-map record of the chapter's kept weights",
                                     _ENTROPY_COLUMN, decided_by="epochs")},
                                 per_model=_attention_per_model,
                                 description="attention maps and diagonal prominence of kept weights"),
    # the linattn models are ViT-B/16 at 224 px (their kept weights stay on the GPU machine: runs.make.keep_where)
    "predictions": RecordKind(lambda r: f"{r.paper}-predictions-{r.dataset}", _of_kept_weights(prediction_record),
                              needs_gpu=True, minutes=2, stale=record_stale, runs_read=_kept_weights_read,
                              description="each kept model's predicted label of the panel's test images"),
    "efficiency": RecordKind(lambda r: "efficiency", _make_efficiency, minutes=8,
                             show=lambda record: records_frame(record.get("records") or []),
                             metrics=_EFFICIENCY_METRICS, per_model=_efficiency_per_model,
                             description="every cost of the ViX Table 1 models, and the token-mixer sweep"),
    "latency": RecordKind(lambda r: f"{r.paper}-latency-{r.dataset}", minutes=2, show=latency_table,
                          make=lambda request, *, profile, **_: latency_record(
                              efficiency_models(request), profile=profile, dataset=request.dataset),
                          metrics={"latency_ms": ClaimMetric(
                              "batch-1 inference latency", "ms", "ms (authors) of the stored latency measurement: the "
                              "median time of one no-grad forward of one image, authors' path, fp32", "ms (authors)")},
                          description="batch-1 inference latency: one no-grad forward of one image"),
    "maps-attention": RecordKind(lambda r: f"maps-attention-{r.dataset}", _make_study("attention"), minutes=3,
                                 stale=record_stale, runs_read=_study_weights_read,
                                 description="the maps study's maps"),
    "maps-attribution": RecordKind(lambda r: f"maps-attribution-{r.dataset}", _make_study("attribution"), minutes=5,
                                   stale=record_stale, runs_read=_study_weights_read,
                                   description="the maps study's attributions"),
    "first_steps": RecordKind(lambda r: f"{r.paper}-first-steps-{r.name}", _make_first_steps, minutes=15, cpu_ok=True,
                              question=True,
                              stale=_first_steps_stale, show=arms_frame,
                              description="a question's arms, each for its first optimizer steps: loss and accuracy "
                                          "by step"),
    # benchmarks: a command writes results/bench/<name>.json ({path}); generous minutes: a benchmark cannot pause
    "bench:train": _bench("vixnb bench train --save {path}", 5,
                          "vixnb bench train vit --batch 2 --steps 1 --warmup 0 --save {path}"),
    "bench:fill": _bench("vixnb bench fill --save {path}", 20,
                         "vixnb bench fill --models vit --seeds 2 --batch 2 --steps 1 --warmup 0 --no-compile "
                         "--save {path}"),
    "bench:mixers-bf16": _bench("vixnb bench mixers --dtype bf16 --warmup 10 --steps 30 --json {path}", 3,
                                f"vixnb bench mixers --dtype bf16 {_REHEARSED_MIXERS}"),
    "bench:mixers-fp32": _bench("vixnb bench mixers --dtype fp32 --warmup 10 --steps 30 --json {path}", 3,
                                f"vixnb bench mixers --dtype fp32 {_REHEARSED_MIXERS}"),
    "bench:mixers-bf16-compiled": _bench("vixnb bench mixers --dtype bf16 --compile --warmup 10 --steps 30 "
                                         "--json {path}", 8),
    "bench:mixers-bf16-cudagraphs": _bench("vixnb bench mixers --dtype bf16 --compile reduce-overhead --warmup 10 "
                                           "--steps 30 --mixers 'softmax (fused)' nystrom --json {path}", 6),
    "bench:nystrom-variants": _bench("python tools/profile_nystrom.py {path}", 3, numbered=True),
}


def kind_of(request):
    """The ``RecordKind`` of ``request``, or a one-line error listing the kinds."""
    name = request.kind if isinstance(request, Request) else request
    if name not in KINDS:
        raise ValueError(f"unknown record kind {name!r}; the kinds: {', '.join(KINDS)}")
    return KINDS[name]


def record_name(request, store=None):
    """The name of ``request``'s record in the store; of a ``numbered`` kind, the newest of ``store`` where given."""
    kind, name = kind_of(request), kind_of(request).record_name(request)
    return store.newest_record(kind.group, name) if kind.numbered and store is not None else name


def missing_script(command):
    """The script of the checkout that a benchmark's ``command`` (``python <script> ...``) runs, where it is not here
    (run from elsewhere than the checkout's root); None where it is, or the command runs no script."""
    argv = shlex.split(command or "")
    script = argv[1] if len(argv) > 1 and argv[0] == "python" else None
    return script if script and not Path(script).is_file() else None


def chapter_requests(key, chapter):
    """The records ``chapter`` (its entry in paper ``key``'s ``book`` list) asks for: its ``measure`` (one per kind
    and dataset) and its ``bench`` entries, as ``Request`` objects."""
    asked = [Request(kind, paper=key, chapter=chapter["notebook"], dataset=dataset, part=chapter.get("part"))
             for kind, dataset in (chapter.get("measure") or {}).items()]
    asked += [Request(f"bench:{bench}", paper=key, chapter=chapter["notebook"], name=bench)
              for bench in chapter.get("bench") or []]
    asked += [Request("first_steps", paper=key, chapter=chapter["notebook"], name=question,
                      dataset=papers.table(key, spec["table"])["dataset"], part=chapter.get("part"))
              for question, spec in (chapter.get("questions") or {}).items() if spec.get("first_steps")]
    for request in asked:
        if request.kind not in KINDS:
            what = f"benchmark {request.name!r}" if request.name else f"measurement {request.kind!r}"
            known = [k.removeprefix("bench:") for k in KINDS if k.startswith("bench:") == bool(request.name)]
            raise papers.PaperFileError(f"vixnb/papers/{key}.yaml: chapter {chapter['notebook']!r} asks for an unknown "
                                        f"{what}; the known ones: {', '.join(known)} (vixnb/record_kinds.py)")
    return asked


def study_requests():
    """The maps study's records (``vixnb/analysis/study.yaml``), as ``Request`` objects."""
    s = study()
    return [Request(f"maps-{kind}", chapter=s["notebook"], dataset=s["dataset"]) for kind in STUDY_RECORDS]


def weights_read(request, profile):
    """``[RunSpec]``: the runs whose kept weights ``request``'s record reads in ``profile``
    (its kind's ``runs_read``; the plan puts the record after them)."""
    kind = kind_of(request)
    return kind.runs_read(request, profile) if kind.runs_read else []


def all_requests():
    """Every record the chapters of every paper file and the maps study ask for (``Request`` objects)."""
    return [request for key in papers.list_papers() for chapter in papers.book_chapters(key)
            for request in chapter_requests(key, chapter)] + study_requests()


def stored_figures(kind, dataset, models, *, owner, profile, store):
    """``({model: (values, provenance, precision)}, records)``: what the stored records of ``kind`` on ``dataset``
    hold of ``models`` (the kind's ``per_model``), the records of paper ``owner``'s chapters where it asks for the
    kind (a model's first record that has it), and the records (or provenances) they come from. Only read."""
    asked = [r for r in all_requests() if r.kind == kind and r.dataset == dataset]
    asked = [r for r in asked if r.paper == owner] or asked
    read = kind_of(kind).per_model or _rows_per_model
    found, shown = {}, []
    for name in dict.fromkeys(record_name(r, store) for r in asked):
        record = store.load_record(kind_of(kind).group, name, profile=profile)
        if record is not None:
            figures, records = read(record, dataset, models)
            for model, figure in figures.items():
                found.setdefault(model, figure)
            shown += records
    return found, shown


def obtain(request, *, profile, compute="missing", store=None, train=None, required=False):
    """``request``'s record under the compute policy (``runs.policy.obtain_record``): read, or made and stored; None
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
        return obtain_record(store, kind.group, record_name(request), make, profile=profile, compute=compute,
                             stale=stale, needs_gpu=kind.needs_gpu, cpu_ok=kind.cpu_ok)
    except PartialRecord as e:
        if required:
            raise RuntimeError(str(e)) from None
        return {**partial[0], "stored": False}
