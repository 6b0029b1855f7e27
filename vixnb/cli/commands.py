"""What each subcommand of ``vixnb`` does; each imports the modules it needs when it runs, so that building
the parser (``vixnb.cli.parser``) imports none of them."""
import json
from pathlib import Path

from ..errors import StoreError, printable
from ..validate import option


def profile_name(text):
    """The argparse type of every command's --profile: the one rule of a profile's name (``parameters.PROFILE``, read
    when a value is checked: the parser imports no torch); a refusal is argparse's usage error, naming the option."""
    from .. import parameters

    return option(parameters.PROFILE)(text)


def dataset_name(text):
    """The argparse type of every command's --dataset: ``parameters.DATASET``, as ``profile_name``."""
    from .. import parameters
    return option(parameters.DATASET)(text)


def models(args):
    """``vixnb models [PATTERN]``: name, label, paper and both parameter counts of each registered model."""
    from ..models.counting import count_params
    from ..models import create_model, list_models, model_cfg

    names = list_models(args.pattern)
    if not names:
        raise SystemExit(f"no model matches {args.pattern!r}; try `vixnb models` for the full list")
    print(f"{'name':<18}{'label':<18}{'paper':<7}{'paper params':>14}{'true params':>14}")
    for name in names:
        model, cfg = create_model(name, dataset=args.dataset), model_cfg(name)
        print(f"{name:<18}{cfg['label']:<18}{cfg['paper']:<7}{count_params(model, 'paper'):>14,}"
              f"{count_params(model, 'true'):>14,}")


def train(args):
    """``vixnb train MODEL``: train one model (or load its stored result) and print a summary."""
    from ..runs.make import run
    from ..runs.asked import run_of
    from ..runs.spec import Keep

    options = {"epochs": args.epochs, "batch_size": args.batch_size, "protocol": args.protocol,
               "optimizer": args.optimizer, "precision": args.precision, "randaugment": args.randaugment,
               "post_train_epochs": args.post_train_epochs,
               "amp_loss_only": True if args.authors_amp else None, "eval_mode": False if args.no_eval_mode else None,
               "compile": args.compile, "channels_last": args.channels_last, "lr": args.lr, "stop": args.stop,
               "allow_resize": args.allow_resize, "warmup_steps": args.warmup_steps, "loss_fp32": args.loss_fp32,
               "init_from": _yaml_values([("--init-from", args.init_from)])["--init-from"]
               if args.init_from else None}
    overrides = {k: v for k, v in options.items() if v is not None and v is not False}
    keep = {True: "store", "local": "local"}[args.keep_weights] if args.keep_weights else "no"
    settings = parse_overrides(args.override)
    if clash := sorted(set(settings) & (set(options) | {"keep_weights", "seed", "profile", "dataset"})):
        raise ValueError(f"--override {clash[0]}=...: {clash[0]} is a training option; pass "
                         f"--{clash[0].replace('_', '-')} instead")
    _check_overrides(args.model, settings, args.dataset)
    spec = run_of(args.model, {**overrides, **settings}, dataset=args.dataset, profile=args.profile, seed=args.seed,
                  keep=Keep.of(keep))  # a run named on the command line
    result = run(spec, compute="always" if args.recompute else "missing", progress=not args.quiet,
                 download=args.download)
    if result["status"] != "done":
        raise RuntimeError(f"{args.model}: {result['status']}: {result['reason']}")
    summary = {"model": args.model, "dataset": result["config"]["dataset"], "profile": args.profile, "seed": args.seed,
               "top1": result["top1"], "top5": result["top5"], "best_epoch": result["best_epoch"],
               "params_paper": result["params_paper"], "params_true": result["params_true"],
               "epochs": result["config"]["epochs"], "seconds": result["seconds"],
               "device": result["provenance"]["device"], "commit": result["provenance"]["commit"]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{args.model} on {summary['dataset']} ({args.profile}, seed {args.seed}): top-1 {summary['top1']:.2f}%, "
              f"top-5 {summary['top5']:.2f}% (best of {summary['epochs']} epochs at epoch {summary['best_epoch']}), "
              f"{summary['seconds']:.1f} s")


def _yaml_values(pairs):
    """{name: value parsed as YAML} of (name, value) pairs; a value that is not YAML is a usage error naming it."""
    import yaml

    values = {}
    for name, value in pairs or []:
        try:
            values[name] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            where = f", column {e.problem_mark.column + 1}" if getattr(e, "problem_mark", None) else ""
            raise ValueError(f"{name} {value!r}: not a YAML value ({getattr(e, 'problem', None) or 'malformed'}"
                             f"{where}); give a name, a number, a list [a, b] or a mapping {{key: value}}") from None
    return values


def _check_overrides(model, settings, dataset="cifar10"):
    """``--override`` settings checked against what ``model`` takes (``models.registry.check_settings``), and the
    model they make against this machine's memory (``_check_memory``), before any work."""
    from ..models import list_models
    from ..models.registry import check_settings

    if model in list_models():
        check_settings(model, settings, option="--override", build=True)
        if settings:
            _check_memory(model, settings, dataset)


TRAINING_COPIES = 4  # what training keeps per parameter, in float32: the weight, its gradient, AdamW's two moments


def _check_memory(model, settings, dataset):
    """A usage error naming the ``--override`` settings where the model they make (built on the meta device: no
    memory) needs more memory to train (``TRAINING_COPIES`` float32 copies of its parameters) than this machine has
    available (``MemAvailable``), rather than an allocator's error that names none."""
    import torch

    from ..data import dataset_spec
    from ..models.registry import MODELS

    spec = dataset_spec(dataset)
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        built = MODELS[model](image_size=spec.image_size, num_classes=spec.num_classes, channels=spec.channels,
                              **settings)
    count = sum(p.numel() for p in built.parameters())
    try:
        available = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                         if line.startswith("MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):  # not Linux: not checked
        return
    if TRAINING_COPIES * 4 * count > available:
        raise ValueError(f"{' '.join(f'--override {k}={v}' for k, v in settings.items())}: model {model!r} would hold "
                         f"{count:,} parameters, about {TRAINING_COPIES * 4 * count / 1e9:.1f} GB to train, more than "
                         f"the {available / 1e9:.1f} GB of memory this machine has available; give smaller settings")


def parse_overrides(items):
    """``--override KEY=VALUE`` options as {key: value parsed as YAML}."""
    pairs = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--override takes KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return _yaml_values(pairs)


def run_notebook(args):
    """``vixnb run NOTEBOOK``: execute a notebook with papermill."""
    from ..book.execute import run_notebook as execute

    from ..validate import writable_file

    if args.output:  # a path that cannot be written fails now, not after the notebook ran
        writable_file(args.output, "--output")
    out = execute(args.notebook, profile=args.profile, parameters=_yaml_values(args.parameter), output=args.output)
    print(f"executed notebook written to {out}")


def book(args):
    """``vixnb book``: run every chapter and build the Jupyter Book."""
    from ..book.build import build_book
    from ..files import check_writable_file
    from ..paths import repo_root

    for folder in ("_build/html", "book/executed"):  # where it writes: found before the first chapter runs
        check_writable_file(repo_root() / folder / "index.html", f"the book's folder {folder}:")
    print(f"book built in {build_book(args.profile, jobs=args.jobs)}")


def measure(args):
    """``vixnb measure MODEL...``: every efficiency figure of each model, as a table or JSON records."""
    from ..measure import measure_many
    from ..models import list_models
    from .tables import measure_table

    unknown = [m for m in args.models if m not in list_models()]
    if unknown:
        raise ValueError(f"unknown model(s) {', '.join(unknown)}; valid names: {', '.join(list_models())}")
    for name in args.models:
        _check_overrides(name, parse_overrides(args.override), args.dataset)
    records = measure_many(args.models, dataset=args.dataset, device=args.device, batch_size=args.batch_size,
                           dtype=args.dtype, iters=args.iters, **parse_overrides(args.override))
    if args.json:
        for rec in records:
            print(json.dumps(rec))
    else:
        print(measure_table(records))
    failed = [r["model"] for r in records if _failed(r)]
    if failed:
        raise RuntimeError(f"measuring failed for {', '.join(failed)} (see the rows above); run with --debug "
                           "for details, or measure those models alone")
    return records


def _failed(record):
    """Whether a measurement record failed (``measure_many`` records ``status = "error: ..."``)."""
    return str(record.get("status", "")).startswith("error")


def bench_mixers(args):
    """``vixnb bench mixers``: time and memory of every token mixer against the materialised softmax."""
    from ..bench import benchmark_record, bench_mixers as run, write
    from ..files import check_writable_file
    from .tables import mixers_table

    if args.json:  # an impossible path fails now, not after the benchmark
        check_writable_file(args.json, "--json")
    rows = run(device=args.device, dtype=args.dtype, batch=args.batch, tokens=args.tokens, steps=args.steps,
               warmup=args.warmup, mechanisms=args.mixers, threads=args.threads, compile=args.compile,
               isolate=False if args.in_process else None)
    print(mixers_table(rows))
    if rows and not any(str(r.get("status", "")).startswith("ok") for r in rows):  # every row failed (error, oom)
        raise RuntimeError(f"every mixer failed ({len(rows)} rows; see the table above): nothing is written; run "
                           "with --verbose, or fewer --mixers, a smaller --batch or --tokens")
    if args.json:
        write(args.json, benchmark_record("mixers", rows, device=rows[0]["device"], dtype=args.dtype))
    return rows


def bench_train(args):
    """``vixnb bench train``: training images/s of our path against a reference loop."""
    from ..bench import bench_train as run
    from ..files import check_writable_file
    from .tables import train_table

    if args.save:
        check_writable_file(args.save, "--save")
    if args.engine:
        return _bench_engine(args)
    rows = run(args.models or None, device=args.device, dtype=args.dtype, batch=args.batch, steps=args.steps,
               warmup=args.warmup, workers=args.workers)
    return _show_benchmark("train", rows, train_table, args)


def _bench_engine(args):
    """``vixnb bench train --engine``: every engine mode checked against eager and timed per model, as the probe of a
    lent machine runs them (``bench.training.bench_engine``)."""
    from ..bench.training import ENGINE_MODELS, SMOKE, bench_engine, engine_table

    smoke = SMOKE if args.smoke else {}
    rows = bench_engine(args.models or smoke.get("models", ENGINE_MODELS), device=args.device,
                        batch=args.batch or smoke.get("batch"), steps=smoke.get("steps", max(args.steps, 8) * 2),
                        members=smoke.get("members", args.members), overrides=smoke.get("overrides"))
    return _show_benchmark("train-engine", rows, engine_table, args)


def _show_benchmark(name, rows, table, args):
    """Print a benchmark's rows as ``table``; with ``--save``, write them with their provenance; with
    ``--json``, print them as one JSON line too."""
    from ..bench import benchmark_record, write

    print(table(rows))
    if args.save:
        write(args.save, benchmark_record(name, rows, device=rows[0]["device"], dtype=rows[0]["dtype"]))
    if args.json:
        print(json.dumps(rows))
    return rows


def papers_check(args):
    """``vixnb papers check``: every problem of every paper file, one line each; exit 1 where there is one."""
    from .. import paper_contract, papers

    unknown = [k for k in args.keys if k not in papers.DOCUMENTS]
    if unknown:
        raise ValueError(f"unknown paper {unknown[0]!r}; valid keys: {', '.join(sorted(papers.DOCUMENTS))}")
    found = {key: paper_contract.problems(key) for key in args.keys or papers.list_papers()}
    for lines in found.values():
        for line in lines:
            print(line)
    bad = {key: lines for key, lines in found.items() if lines}
    if bad:
        raise papers.PaperFileError(f"{sum(map(len, bad.values()))} problem(s) in {len(bad)} paper file(s) "
                                    f"({', '.join(bad)}); fix each line above")
    print(f"{len(found)} paper file(s) keep the contract: {', '.join(found)}")


def plan(args):
    """``vixnb plan``: what the book needs in a profile, what is stored, what is left, in GPU-hours."""
    from ..plan import plan as planning
    from .tables import plan_table, plan_totals

    entries = planning.build(args.profile, machine=True, order=args.order, gpu=args.gpu)
    name_unusable_files(args.profile)
    if args.json:
        print(json.dumps(planning.as_json(entries), indent=1))
        return entries
    shown = entries if args.all else planning.todo(entries)
    print(plan_table(shown) if shown else f"nothing left to run in profile {args.profile!r}")
    print()
    print(plan_totals(planning.totals(entries, gpus=args.gpus), args.profile, gpu=args.gpu, gpus=args.gpus))
    print("\nPriority levels: " + "; ".join(f"{k}. {v}" for k, v in planning.LEVELS.items()))
    return entries


def name_unusable_files(profile):
    """One line on stderr for each file of the store that cannot be used (``ResultsStore.unusable_files``): the
    rest goes on, and nothing is deleted."""
    import sys

    from ..errors import printable
    from ..results import ResultsStore
    from ..runs.policy import unusable

    store = ResultsStore()
    for path, why in store.unusable_files(profile, unusable=unusable):  # a name of one line: it forges no other
        print(f"vixnb: not used: {printable(path)}: {printable(why)}; it is left as it is (move or delete it to "
              "silence this)", file=sys.stderr)


def probe(args):
    """``vixnb probe``: probe the stored results whose code changed (``--all``: every one) and write the ledger;
    ``--check``: write nothing, fail where one is not current."""
    from ..results import ResultsStore
    from ..runs.probe import ledger_path, probe_store
    from ..results.store import writable_folder

    store = ResultsStore()
    if not args.check:  # the ledger it writes: found before probing, not after it
        writable_folder(store.root)
        if ledger_path(store).exists() and not ledger_path(store).is_file():
            raise StoreError(f"{ledger_path(store)} is a folder; the probe writes its ledger there: move it away")
    entries = probe_store(store, args.profile, only_changed=not args.all, write=not args.check)
    for entry in entries.values():
        state = {True: "current", False: "stale", None: "unverified"}[entry["equal"]]
        print(f"{state:<10}  {printable(entry['file'])}" + (f"  ({entry['why']})" if entry["why"] else ""))
    bad = [e["file"] for e in entries.values() if e["equal"] is not True]
    print(f"vixnb probe: {len(entries) - len(bad)} of {len(entries)} current" +
          ("" if args.check else f"; ledger {ResultsStore().root.name}/probe-ledger.json"))
    if args.check and bad:
        raise RuntimeError(f"{len(bad)} stored results are not current with today's code: {', '.join(bad)}")
    return entries


def unpack(args):
    """``vixnb unpack FILE...``: a pack (or its parts) into the results store; a differing result is kept beside the
    one here, both named."""
    from ..results.pack import unpack as take_in

    report = take_in(args.files)
    print(f"vixnb unpack: {len(report['written'])} written, {len(report['same'])} the same, "
          f"{len(report['replaced'])} older checkpoints replaced, {len(report['conflicts'])} kept beside the one here")
    for _, _, message in report["conflicts"]:
        print(f"  {message}")
    return report


def bench_fill(args):
    """``vixnb bench fill``: training images/s of one seed, of several seeds as one ensemble, and compiled."""
    from ..bench import bench_fill as run
    from ..files import check_writable_file
    from .tables import fill_table

    if args.save:
        check_writable_file(args.save, "--save")
    rows = run(args.models, seeds=args.seeds, device=args.device, dtype=args.dtype, batch=args.batch, steps=args.steps,
               warmup=args.warmup, compile=not args.no_compile)
    return _show_benchmark("fill", rows, fill_table, args)
