"""Command line: ``vixnb models | train | run | book | measure | bench``."""
import argparse
import json
import sys

import yaml


def cmd_models(args):
    from . import count_params, create_model, list_models

    names = list_models(args.pattern)
    if not names:
        raise SystemExit(f"no model matches {args.pattern!r}; try `vixnb models` for the full list")
    rows = [(n, count_params(m := create_model(n, dataset=args.dataset), "paper"), count_params(m, "true")) for n in names]
    print(f"{'name':<18}{'paper params':>14}{'true params':>14}")
    for name, paper, true in rows:
        print(f"{name:<18}{paper:>14,}{true:>14,}")


def cmd_train(args):
    from .train import run

    options = {"epochs": args.epochs, "batch_size": args.batch_size, "protocol": args.protocol, "optimizer": args.optimizer,
               "precision": args.precision, "randaugment": args.randaugment, "post_train_epochs": args.post_train_epochs,
               "amp_loss_only": True if args.authors_amp else None, "eval_mode": False if args.no_eval_mode else None,
               "compile": args.compile, "channels_last": args.channels_last}
    overrides = {k: v for k, v in options.items() if v not in (None, False)}
    result = run(args.model, dataset=args.dataset, profile=args.profile, seed=args.seed, compute="always" if args.recompute else "missing",
                 progress=not args.quiet, download=args.download, **overrides)
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


def _parameters(pairs):
    return {name: yaml.safe_load(value) for name, value in pairs or []}


def cmd_run(args):
    from .notebooks import run_notebook

    out = run_notebook(args.notebook, profile=args.profile, parameters=_parameters(args.parameter))
    print(f"executed notebook written to {out}")


def cmd_book(args):
    from .notebooks import build_book

    print(f"book built in {build_book(args.profile)}")


def cmd_bench_mixers(args):
    from . import bench

    bench.run(args)


def cmd_bench_train(args):
    from . import bench

    models = args.models or bench.TABLE1_MODELS
    rows = bench.bench_train(models, device=args.device, dtype=args.dtype, batch=args.batch, steps=args.steps,
                             warmup=args.warmup, workers=args.workers)
    print(bench.format_train_table(rows))
    if args.save:
        bench.save(args.save, "train", rows, device=rows[0]["device"], dtype=rows[0]["dtype"])
    if args.json:
        print(json.dumps(rows))


def cmd_measure(args):
    from . import measure

    measure.run(args)


def parser():
    from .profiles import OPTIMIZERS, PROTOCOLS

    p = argparse.ArgumentParser(prog="vixnb", description="A reproducible study of efficient vision transformers.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("models", help="list registered models with their parameter counts")
    s.add_argument("pattern", nargs="?", default="*", help="glob over model names, e.g. 'hybrid_*'")
    s.add_argument("--dataset", default="cifar10")
    s.set_defaults(fn=cmd_models)

    s = sub.add_parser("train", help="train one model (or load its stored result)")
    s.add_argument("model")
    s.add_argument("--dataset", default="cifar10")
    s.add_argument("--profile", default="smoke")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--epochs", type=int)
    s.add_argument("--batch-size", type=int)
    s.add_argument("--protocol", choices=PROTOCOLS, help="paper: best test epoch (authors); fixed: validation split")
    s.add_argument("--optimizer", choices=OPTIMIZERS, help="dualopt: seed 001's AdamW-then-SGD rule")
    s.add_argument("--precision", choices=["fp32", "bf16"])
    s.add_argument("--randaugment", type=int, nargs=2, metavar=("NUM_OPS", "MAGNITUDE"), help="augment training batches")
    s.add_argument("--post-train-epochs", type=int, help="then train on un-augmented data from the best weights")
    s.add_argument("--authors-amp", action="store_true", help="the authors' AMP: autocast around the loss only")
    s.add_argument("--no-eval-mode", action="store_true", help="the authors' scripts' missing model.eval()")
    s.add_argument("--compile", action="store_true", help="torch.compile the model")
    s.add_argument("--channels-last", action="store_true")
    s.add_argument("--recompute", action="store_true", help="train even if a stored result exists")
    s.add_argument("--download", action="store_true", help="download the dataset into $VIXNB_DATA if it is missing")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    s.set_defaults(fn=cmd_train)

    s = sub.add_parser("run", help="execute a notebook with papermill after validating its parameters")
    s.add_argument("notebook", help="notebook stem in notebooks/ (e.g. vix_table1) or a path")
    s.add_argument("--profile", default="smoke")
    s.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="notebook parameter; VALUE is parsed as YAML (e.g. -p seeds '[0, 1, 2]')")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("book", help="run every chapter of _toc.yml and build the Jupyter Book")
    s.add_argument("--profile", default="smoke",
                   help="profile of the book/executed/<stem> chapters (book/executed/<profile>/<stem> "
                        "chapters run in their own profile, from stored results)")
    s.set_defaults(fn=cmd_book)

    from .measure import add_arguments as measure_arguments

    s = measure_arguments(sub.add_parser("measure", help="efficiency figures of models by seed 003's protocol"))
    s.set_defaults(fn=cmd_measure)

    bench = sub.add_parser("bench", help="benchmarks that print ratios measured in one run").add_subparsers(
        dest="what", required=True)
    from .bench import add_arguments

    s = add_arguments(bench.add_parser("mixers", help="forward+backward time and memory of every token mixer"))
    s.set_defaults(fn=cmd_bench_mixers)
    s = bench.add_parser("train", help="training images/s of the Table 1 models, ours vs a straightforward loop")
    s.add_argument("models", nargs="*", help="default: the twelve Table 1 models")
    s.add_argument("--device")
    s.add_argument("--dtype", help="autocast dtype for our path (default bf16 on a GPU, fp32 on a CPU)")
    s.add_argument("--batch", type=int, help="default: each model's paper batch size")
    s.add_argument("--steps", type=int, default=10)
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--workers", type=int, help="DataLoader workers of the reference loop")
    s.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    s.add_argument("--save", help="also write the rows with their provenance to this JSON file (e.g. results/bench/train.json)")
    s.set_defaults(fn=cmd_bench_train)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        args.fn(args)
    except (ValueError, FileNotFoundError, RuntimeError, ArithmeticError) as e:
        print(f"vixnb {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
