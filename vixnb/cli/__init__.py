"""Command line: ``vixnb models | train | run | book | measure | bench (mixers | train | fill) | plan | batch |
unpack``.

Building the parser imports nothing heavy (no torch, pandas or matplotlib): each subcommand's module is
imported when that subcommand runs (``commands``); its text tables are in ``tables``. The choices below are
those of the modules the commands run (tests check that they agree)."""
import argparse
import os
import sys

from . import batch, commands
from .. import errors
from ..validate import COUNT_MAX, FOLDER, NON_NEGATIVE, POSITIVE, SEED, Distinct, Past, Whole, option

DTYPE_NAMES = ("bf16", "bfloat16", "float16", "float32", "fp16", "fp32")  # vixnb.measure.DTYPES
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # vixnb.layers.nystrom
PROTOCOLS, OPTIMIZERS = ("paper", "fixed"), ("adamw", "dualopt", "sgd")  # vixnb.runs.profiles
PRECISIONS, STOPS = ("fp32", "bf16", "fp16"), ("epochs", "patience")  # vixnb.runs.profiles
ORDERS = ("chapters", "rows", "claims")  # vixnb.plan.plan.ORDERS (a test checks they agree)
GPUS = ("h100", "a100", "l4", "t4", "p100")  # vixnb.measure.flops.GPUS
TRAVEL_MB = 60  # vixnb.results.pack
#: the most GPUs ``vixnb plan --gpus`` shares the plan out to (a GPU beyond the plan's entries would take none): the
#: bound of its consumer, ``plan.hours_on``, which keeps a clock per GPU
GPUS_MAX = 4096
PROFILE_NAME, DATASET_NAME = commands.profile_name, commands.dataset_name  # every command's, by one rule each


def whole_number(least):
    """An argparse type: a whole number >= ``least`` (so 0 is not silently the profile's default) and at most
    ``validate.COUNT_MAX`` (the range of its narrowest consumer)."""
    return option(Whole(least=least, most=COUNT_MAX))


positive_float = option(POSITIVE)  # an argparse type: a number > 0


def _together(text):
    """An argparse type: ``auto`` (any case) or a whole number >= 1 (``vixnb batch --together``); a refusal says
    both."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return whole_number(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give 'auto' or a whole number of runs >= 1 (at most "
                                         f"{COUNT_MAX})") from None


def _models_arguments(sub):
    s = sub.add_parser("models", help="list registered models with their label, paper and parameter counts")
    s.add_argument("pattern", nargs="?", default="*", help="glob over model names, e.g. 'hybrid_*'")
    s.add_argument("--dataset", type=DATASET_NAME, default="cifar10")
    s.set_defaults(fn=commands.models)


def _train_arguments(sub):
    s = sub.add_parser("train", help="train one model (or load its stored result)")
    s.add_argument("model")
    s.add_argument("--dataset", type=DATASET_NAME, default="cifar10")
    s.add_argument("--profile", type=PROFILE_NAME, default="smoke")
    s.add_argument("--seed", type=option(SEED), default=0)
    s.add_argument("--epochs", type=whole_number(1), help="default: the profile's, else the paper protocol's")
    s.add_argument("--batch-size", type=whole_number(1), help="default: the profile's, else the paper protocol's")
    s.add_argument("--lr", type=positive_float, help="learning rate (default: the paper protocol's)")
    s.add_argument("--protocol", choices=PROTOCOLS, help="paper: best test epoch (authors); fixed: validation split")
    s.add_argument("--optimizer", choices=OPTIMIZERS, help="dualopt: the cxv paper's AdamW-then-SGD rule (DualOpT); "
                   "sgd: SGD alone, with DualOpT's SGD settings")
    s.add_argument("--stop", choices=STOPS, help="how SGD alone ends: epochs (default: after --epochs) or patience "
                   "(by DualOpT's patience rule, at most DualOpT's length: the budget DualOpT gets)")
    s.add_argument("--precision", choices=PRECISIONS, help="fp16: autocast with a gradient scaler (GPUs without "
                   "native bfloat16: a T4, a P100)")
    s.add_argument("--randaugment", type=whole_number(0), nargs=2, metavar=("NUM_OPS", "MAGNITUDE"),
                   help="augment training batches")
    s.add_argument("--post-train-epochs", type=whole_number(0),
                   help="then train on un-augmented data from the best weights")
    s.add_argument("--allow-resize", action="store_true",
                   help="resize images of another size than the data set's instead of refusing them")
    s.add_argument("--warmup-steps", type=whole_number(0), metavar="N",
                   help="a linear warm-up of the learning rate over the first N optimizer steps (default: none)")
    s.add_argument("--loss-fp32", action="store_true",
                   help="the cross-entropy of float32 logits (under bf16/fp16 autocast it is otherwise half precision)")
    s.add_argument("--authors-amp", action="store_true", help="the authors' AMP: autocast around the loss only")
    s.add_argument("--no-eval-mode", action="store_true", help="the authors' scripts' missing model.eval()")
    s.add_argument("--compile", action="store_true", help="torch.compile the model")
    s.add_argument("--channels-last", action="store_true")
    s.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="model setting, VALUE parsed as YAML (e.g. --override width=128 --override skips=false)")
    s.add_argument("--init-from", metavar="RUN", help="start from another run's trained weights: a run of the model's "
                   "paper file (e.g. vit_scratch), or its {model, settings} as YAML")
    s.add_argument("--keep-weights", nargs="?", const=True, choices=["local"], metavar="local",
                   help="store the trained weights (float16) beside the result; `--keep-weights local`: on this "
                   "machine only, never committed")
    s.add_argument("--recompute", action="store_true", help="train even if a stored result exists")
    s.add_argument("--download", action="store_true", help="download the dataset into $VIXNB_DATA if it is missing")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    s.set_defaults(fn=commands.train)


def _notebook_arguments(sub):
    s = sub.add_parser("run", help="execute a notebook with papermill after validating its parameters")
    s.add_argument("notebook", help="notebook stem in notebooks/ (e.g. vix_table1) or a path")
    s.add_argument("--profile", type=PROFILE_NAME, default="smoke")
    s.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="notebook parameter; VALUE is parsed as YAML (e.g. -p seeds '[0, 1, 2]')")
    s.add_argument("-o", "--output", metavar="FILE.ipynb",
                   help="where the executed copy goes (default: book/executed/<stem>.ipynb)")
    s.set_defaults(fn=commands.run_notebook)

    s = sub.add_parser("book", help="run every chapter of _toc.yml and build the Jupyter Book")
    s.add_argument("--profile", type=PROFILE_NAME, default="smoke",
                   help="smoke: _toc.yml as it stands (the pipeline check, and the GPU chapters from the store); "
                        "budget or paper: the published book, every chapter in that profile from the committed "
                        "results store, nothing trained or measured")
    s.add_argument("--jobs", type=whole_number(1), default=min(2, os.cpu_count() or 1),
                   help="chapters run at once, each in its own kernel (default: 2, or 1 on a one-core machine)")
    s.set_defaults(fn=commands.book)


def _measure_arguments(sub):
    s = sub.add_parser("measure", help="efficiency figures of models by the favor paper's protocol")
    s.add_argument("models", nargs="+", action=Distinct, help="registered model names (see `vixnb models`)")
    s.add_argument("--dataset", type=DATASET_NAME, default="cifar10")
    s.add_argument("--json", action="store_true", help="print the records as JSON (one object per model)")
    s.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    s.add_argument("--batch-size", type=whole_number(1), default=None,
                   help="training batch (default 64 on GPU, 4 on CPU)")
    s.add_argument("--dtype", default="fp32", choices=DTYPE_NAMES, help="dtype of the fused path")
    s.add_argument("--iters", type=whole_number(1), default=None, help="throughput iterations (default 100 GPU, 3 CPU)")
    s.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, VALUE parsed as YAML (e.g. --override depth=1)")
    s.set_defaults(fn=commands.measure)


def _bench_arguments(sub):
    bench = sub.add_parser("bench", help="benchmarks that print ratios measured in one run").add_subparsers(
        dest="what", required=True)
    s = bench.add_parser("mixers", help="forward+backward time and memory of every token mixer")
    s.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    s.add_argument("--dtype", default="fp32", choices=DTYPE_NAMES, help="autocast dtype (default fp32)")
    s.add_argument("--batch", type=whole_number(1), default=64)
    s.add_argument("--tokens", type=whole_number(1), default=1025)
    s.add_argument("--steps", type=whole_number(1), default=5)
    s.add_argument("--warmup", type=whole_number(0), default=2)
    s.add_argument("--threads", type=whole_number(1), default=None,
                   help="CPU threads (torch.set_num_threads, restored after)")
    s.add_argument("--compile", nargs="?", const="default", default=None, choices=COMPILE_MODES,
                   help="time every mechanism through torch.compile, optionally in a mode "
                        "(reduce-overhead: CUDA graphs)")
    s.add_argument("--mixers", nargs="*", default=None, action=Distinct,
                   help="labels of the mechanisms to run (default: all; an unknown label lists the valid ones)")
    s.add_argument("--in-process", action="store_true",
                   help="measure every mechanism in this process, as on a GPU (on a CPU, whose memory is measured in a "
                        "fresh process per mechanism, memory is then not measured)")
    s.add_argument("--json", default=None,
                   help="also write the rows with their provenance to this JSON file "
                        "(e.g. results/bench/mixers-bf16.json)")
    s.set_defaults(fn=commands.bench_mixers)

    s = bench.add_parser("train", help="training images/s of the Table 1 models, ours vs a straightforward loop")
    s.add_argument("models", nargs="*", action=Distinct, help="default: the twelve Table 1 models")
    s.add_argument("--device")
    s.add_argument("--dtype", help="autocast dtype for our path (default bf16 on a GPU, fp32 on a CPU)")
    s.add_argument("--batch", type=whole_number(1), help="default: each model's paper batch size")
    s.add_argument("--steps", type=whole_number(1), default=10)
    s.add_argument("--warmup", type=whole_number(0), default=3)
    s.add_argument("--workers", type=option(NON_NEGATIVE), help="DataLoader workers of the reference loop")
    s.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    s.add_argument("--save", help="also write the rows with their provenance to this JSON file "
                   "(e.g. results/bench/train.json)")
    s.add_argument("--engine", action="store_true",
                   help="the engine's modes instead, as a lent machine's probe runs them: eager, graphed, ensemble, "
                        "graphed ensemble, streams, each checked against eager and timed, with its share of the FLOP "
                        "floor (default models vit, vit_small_simplified, cvt at their budget batch; twice --steps "
                        "steps)")
    s.add_argument("--members", type=whole_number(2), default=15, metavar="K",
                   help="with --engine: the runs of one shape the ensemble and streams modes train at once (default "
                        "15: the blog's width-128 runs)")
    s.add_argument("--smoke", action="store_true", help="with --engine: a tiny model and a few steps (a CPU check)")
    s.set_defaults(fn=commands.bench_train)

    s = bench.add_parser("fill", help="training images/s of one seed, of several seeds as one ensemble, and compiled")
    s.add_argument("--models", nargs="+", action=Distinct, help="default: the twelve Table 1 models")
    s.add_argument("--seeds", type=whole_number(1), default=3, metavar="K",
                   help="seeds the ensemble trains at once (default 3)")
    s.add_argument("--device")
    s.add_argument("--dtype", choices=DTYPE_NAMES, help="autocast dtype (default bf16 on a GPU, fp32 on a CPU)")
    s.add_argument("--batch", type=whole_number(1), help="batch per seed (default: each model's paper batch size)")
    s.add_argument("--steps", type=whole_number(1), default=10)
    s.add_argument("--warmup", type=whole_number(0), default=3)
    s.add_argument("--no-compile", action="store_true",
                   help="skip the torch.compile approaches (slow to compile on a CPU)")
    s.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    s.add_argument("--save", help="also write the rows with their provenance to this JSON file "
                   "(e.g. results/bench/fill.json)")
    s.set_defaults(fn=commands.bench_fill)


def _order_argument(s):
    s.add_argument("--order", choices=ORDERS, default="chapters",
                   help="chapters: whole chapters (every seed, runs and measurements), the cheapest first; rows: one "
                        "seed of every row of the book first; claims (a lent GPU's): the blog chapter first (its stall "
                        "question's GPU arms, then the rest), then each level by claims decided per GPU-minute")


def _plan_arguments(sub):
    s = sub.add_parser("plan", help="every run and measurement the book needs: status, GPU minutes, priority")
    s.add_argument("--profile", type=PROFILE_NAME, default="budget")
    s.add_argument("--json", action="store_true", help="one JSON object per entry (a JSON list)")
    s.add_argument("--all", action="store_true", help="list stored entries too (default: what is left to run)")
    s.add_argument("--gpu", choices=GPUS, help="estimate the GPU minutes for this GPU (the stored figures are an "
                   "H100's, scaled by peak throughput at the precision it would use)")
    s.add_argument("--gpus", type=option(Whole(least=1, most=GPUS_MAX)), default=1, metavar="N",
                   help="also the wall-clock hours of what is left on N such GPUs (a local batch, a Slurm array)")
    _order_argument(s)
    s.set_defaults(fn=commands.plan)

    s = sub.add_parser("batch", help="run the plan's missing entries in priority order (submitit: local or Slurm)")
    s.add_argument("--profile", type=PROFILE_NAME, default="budget")
    _order_argument(s)
    s.add_argument("--budget", type=positive_float, metavar="SECONDS",
                   help="stop training at an epoch boundary when time is up (checkpoint kept; the next call resumes)")
    s.add_argument("--executor", choices=("local", "slurm", "inline"), default="local",
                   help="local: one job per visible GPU (or one CPU job); slurm: a job array; inline: this process")
    s.add_argument("--dry-run", action="store_true", help="print what would run; submit and run nothing")
    s.add_argument("--device", choices=("auto", "cpu"), default="auto",
                   help="cpu: only the entries a CPU makes as a GPU would (records that time nothing: attention maps "
                        "of stored weights, a question's first steps), on the CPU, on any machine")
    s.add_argument("--rehearse", action="store_true", help="the dress rehearsal: every model, protocol, measurement "
                   "and benchmark of the plan for a couple of steps on this machine, into a scratch store (nothing "
                   "enters results/); a table, and exit 1 on a failure")
    s.add_argument("--only", nargs="+", action=Distinct, metavar="NAME", help="only these models or records")
    s.add_argument("--chapter", nargs="+", action=Distinct, metavar="NOTEBOOK",
                   help="only these chapters' entries (and the runs whose weights their measurements read)")
    s.add_argument("--max-jobs", type=whole_number(1), help="run at most this many jobs")
    s.add_argument("--ensemble", choices=("auto", "never", "always"), default="auto",
                   help="runs of one shape (the plan's group: seeds, learning rates, alpha/beta schemes) as one "
                        "vectorised ensemble job (auto: where the plan expects one, small steps; always: any step)")
    s.add_argument("--download", action="store_true", help="jobs download a missing dataset into $VIXNB_DATA")
    s.add_argument("--together", type=_together, default="auto", metavar="auto|N",
                   help="small runs (a step of at most 128 GFLOP) trained at once in one process, each its solo run: "
                        "auto, up to 8 on a CUDA GPU with the inline or local executor; N, at most N anywhere (1: "
                        "one at a time)")
    s.add_argument("--pack", metavar="FILE.tar.gz", help="afterwards, pack results and paused checkpoints into one "
                   "archive, in parts of at most 16 MiB (FILE.tar.gz.part1of3, ...) where it is larger; `vixnb unpack` "
                   "takes it in")
    s.add_argument("--pack-limit-mb", type=positive_float, default=TRAVEL_MB,
                   help=f"the largest paused checkpoint sure to travel back (default {TRAVEL_MB}); a run whose "
                        "checkpoint is larger starts only where its whole estimate fits")
    s.add_argument("--pack-total-mb", type=positive_float, default=None,
                   help="the most the pack holds in all (default: 6 parts of 16 MiB, two files left for the log and "
                        "the engine probe's record)")
    s.add_argument("--probe", metavar="FILE.json",
                   help="before the batch, in the same process (at most 90 s): check every engine mode (eager, "
                        "graphed, ensemble, graphed ensemble, streams) against eager on the first runs, time those "
                        "that pass, write the table and the choice to FILE.json, and train each job in the fastest "
                        "mode that passed (a failed check switches its mode off, never the batch)")
    s.add_argument("--probe-steps", type=whole_number(8), default=20, metavar="N",
                   help="the optimizer steps each mode trains in the probe (default 20; the CPU's dry run takes fewer)")
    s.add_argument("--engine-choice", metavar="FILE.json",
                   help="train in the modes an earlier probe chose (its FILE.json), without probing again")
    s.add_argument("--clock-from", type=option(Past()), default=None, metavar="EPOCH_S",
                   help="the time the `trained N s of M s` line counts M from (default: the batch's start)")
    s.add_argument("--pack-since", type=option(Past()), default=None, metavar="EPOCH_S",
                   help="pack only files written from this time on "
                        "(seconds since the epoch; default: the batch's start)")
    s.add_argument("--partition", help="slurm: partition")
    s.add_argument("--time-min", type=whole_number(1),
                   help="slurm: time limit per job in minutes (default: from the estimates)")
    s.add_argument("--gpus-per-job", type=whole_number(0), help="slurm: GPUs per job (default 1 for a GPU profile)")
    s.add_argument("--max-parallel", type=whole_number(1), help="slurm: jobs of the array running at once")
    s.add_argument("--folder", type=option(FOLDER), help="submitit's folder for job logs (default "
                   "results/<profile>/.batch/<job id>)")
    s.set_defaults(fn=batch.batch)

    s = sub.add_parser("probe", help="the behavioural probe: whether today's code still makes each stored result "
                       "whose code changed (a few CPU fp32 steps at its commit and today, compared bitwise)")
    s.add_argument("--profile", type=PROFILE_NAME, default="budget")
    s.add_argument("--all", action="store_true", help="every stored result, not only those whose source changed")
    s.add_argument("--check", action="store_true", help="write no ledger; exit 1 where a result is not current (CI)")
    s.set_defaults(fn=commands.probe)

    s = sub.add_parser("unpack", help="take in what a lent machine sent back (a pack, or all its parts); never "
                       "replaces a result here silently")
    s.add_argument("files", nargs="+", metavar="FILE", help="results.tar.gz, or every results.tar.gz.partKofN")
    s.set_defaults(fn=commands.unpack)


def _papers_arguments(sub):
    s = sub.add_parser("papers", help="the paper files (vixnb/papers/<key>.yaml)")
    verbs = s.add_subparsers(dest="verb", required=True)
    c = verbs.add_parser("check", help="every problem of every paper file, in one run (schema, claims, models, "
                                       "record kinds); exit 1 where there is one")
    c.add_argument("keys", nargs="*", action=Distinct, metavar="KEY", help="only these papers (default: all)")
    c.set_defaults(fn=commands.papers_check)


def parser():
    p = argparse.ArgumentParser(prog="vixnb", description="A reproducible study of efficient vision transformers.",
                                epilog="Errors are one line; --verbose (--debug, or VIXNB_DEBUG=1) shows the "
                                       "traceback.")
    p.add_argument("--verbose", "--debug", dest="debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_models_arguments, _train_arguments, _notebook_arguments, _measure_arguments, _bench_arguments,
                _plan_arguments, _papers_arguments):
        add(sub)
    for command in sub.choices.values():  # `vixnb train ... --debug` as well as `vixnb --debug train ...`
        command.add_argument("--verbose", "--debug", dest="debug", action="store_true", default=argparse.SUPPRESS,
                             help=argparse.SUPPRESS)
        for nested in (getattr(command, "_subparsers", None)
                       and command._subparsers._group_actions[0].choices.values() or ()):
            nested.add_argument("--verbose", "--debug", dest="debug", action="store_true", default=argparse.SUPPRESS,
                                help=argparse.SUPPRESS)
    return p


def main(argv=None):
    """Run one command. Every failure ends here: one line ``vixnb <command>: error: <what>; <what to do>`` and
    exit 1 (2 for a usage error: a bad name or value given; 130 when interrupted, by Ctrl-C, SIGTERM or SIGHUP,
    saying how to resume);
    ``--verbose`` (``--debug``) or ``VIXNB_DEBUG=1`` also prints the traceback (``vixnb.errors``)."""
    args = parser().parse_args(argv)
    try:
        debug = args.debug or errors.debug_flag(os.environ)
    except ValueError as e:
        return errors.report(args.command, e)
    try:
        with errors.stopped_by_signals():  # SIGTERM and SIGHUP end every command as Ctrl-C does
            args.fn(args)
    except SystemExit:
        raise
    except BrokenPipeError:  # the reader went away (`vixnb plan | head`): nothing more to say
        sys.stderr.close()
        return 0
    except (KeyboardInterrupt, Exception) as e:  # noqa: BLE001  (the one error boundary)
        return errors.report(args.command, e, debug=debug)
    return 0
