"""Benchmarks that print ratios measured in one run: ``vixnb bench mixers`` and ``vixnb bench train``.

``bench_mixers(...)`` times forward + backward of every token mixer of ``measure.sweep_mechanisms`` (labels
and options as in the efficiency chapter's scaling sweep) in the ViX paper configuration (1025 tokens, dim
128, 4 heads of 32, batch 64 by default) against the materialised softmax measured in the same run
(``ratio_vs_materialized_softmax`` is time / reference time, ``memory_ratio_vs_materialized_softmax`` the
same for memory). Each mechanism is one ``measure.sweep_row``; ``format_table(rows)`` prints them.

What is measured (``measure.sweep_row``):
- time: median over ``steps`` timed steps after ``warmup`` untimed ones; CUDA events on a GPU,
  ``time.perf_counter`` on a CPU. bf16/fp16 run under ``torch.autocast`` (parameters stay fp32).
- memory on CUDA: ``torch.cuda.max_memory_allocated`` during the timed steps minus what was allocated
  before them (parameters and the input excluded), in MiB (``peak_mb``).
- memory on CPU: PyTorch keeps no statistics for CPU allocations, so each mechanism runs in a fresh
  Python process (``isolate=True``, the default on CPU) and the figure is the growth of that process's
  peak resident set size (``ru_maxrss``) over its resident size just before the first step, in MiB. It
  includes allocator caching and is coarser than the CUDA figure; with ``isolate=False`` it is not measured
  (``None``; the row's ``estimate_gb`` is the shape-based estimate the scaling sweep uses on a CPU).
  The benchmark runs what it is asked to: no CPU budget guard.

``bench_train(...)`` compares training images/s of our engine's path with a straightforward reference loop.
"""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from .layers.nystrom import COMPILE_MODES
from .measure import DTYPES, FUSED_SOFTMAX, MATERIALISED_SOFTMAX, jsonable, sweep_row, as_dtype, dtype_name, sweep_mechanisms, text_cell

REFERENCE = MATERIALISED_SOFTMAX


def _measure_mixer(label, kind, options, *, device, dtype, tokens, dim, heads, dim_head, batch, warmup, steps,
                   cpu_memory=False, threads=None, compile=False):
    """Forward + backward of one mechanism (``measure.sweep_row``, no CPU budget guard), with the operators
    one step dispatches (``dispatched_ops``; not counted through ``torch.compile``)."""
    if threads:
        torch.set_num_threads(threads)
    mode = compile_mode(compile)
    if mode == "reduce-overhead":  # CUDA graphs: the first calls run eagerly and record, later ones replay
        warmup = max(warmup, 3)
    row = sweep_row(label, kind, options, tokens, dim=dim, heads=heads, dim_head=dim_head, batch=batch,
                     device=torch.device(device), dt=as_dtype(dtype), backward=True, warmup=warmup, steps=steps,
                     budget_gb=math.inf, budget_gflop=math.inf, cpu_memory=cpu_memory, compile=mode or False)
    if not mode and row.get("ms") is not None:
        row.update(dispatched_ops(kind, options, device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads,
                                  dim_head=dim_head))
    return row


def compile_mode(compile):
    """``compile`` (False/None, True = "default", or a ``torch.compile`` mode) as a mode name, or None."""
    if compile in (None, False):
        return None
    mode = "default" if compile is True else compile
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={compile!r}: use one of {', '.join(COMPILE_MODES)}")
    return mode


def dispatched_ops(kind, options, *, device, dtype, tokens, dim, heads, dim_head):
    """How many aten operators one forward + backward of the mixer dispatches (batch 1: the count does not
    depend on the batch), on ``device`` in ``dtype`` (autocast): ``aten_ops`` all of them, ``aten_ops_compute``
    those that are not views (the kernels a GPU launches, about). A mixer made of many small operations is
    bound by their launches rather than by arithmetic; this is that count, device-independent up to the
    kernels the device picks (e.g. the fused attention variant)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from .layers import build

    class Count(TorchDispatchMode):
        total = compute = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.total += 1  # _unsafe_view is a view in all but its flag
            self.compute += not (func.is_view or func.overloadpacket is torch.ops.aten._unsafe_view)
            return func(*args, **(kwargs or {}))

    dev, dt = torch.device(device), as_dtype(dtype)
    torch.manual_seed(0)
    mixer = build(kind, dim=dim, heads=heads, dim_head=dim_head, seq_len=tokens, **options).to(dev)
    x = torch.randn(1, tokens, dim, device=dev, requires_grad=True)
    with Count() as count:
        with torch.autocast(dev.type, dtype=dt, enabled=dt != torch.float32):
            out = mixer(x)
        out.float().sum().backward()
    return {"aten_ops": count.total, "aten_ops_compute": count.compute}


def operator_table(*, device="cpu", dtype="fp32", tokens=1025, dim=128, heads=4, dim_head=32):
    """aten operators one forward + backward of each mechanism dispatches (``dispatched_ops``), in the
    configuration of ``bench_mixers``, with the Nystrom mixer also with autograd's backward of its
    pseudo-inverse iterations (``pinv_backward="autograd"``); the ratio is of non-view operators to the fused
    softmax's. A page table with ``attrs["provenance"]`` (``measure.provenance``): counting computes one
    small step per mechanism on ``device`` (batch 1), it times nothing."""
    import pandas as pd

    from .measure import provenance

    mechanisms = sweep_mechanisms()
    nystrom = next(options for label, _, options in mechanisms if label == "nystrom")
    after = max(i for i, (_, kind, _) in enumerate(mechanisms) if kind == "nystrom")
    autograd = {**nystrom, "pinv_backward": "autograd"}
    mechanisms.insert(after + 1, ("nystrom, autograd pinv backward", "nystrom", autograd))
    shape = dict(device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads, dim_head=dim_head)
    counts = {label: dispatched_ops(kind, options, **shape) for label, kind, options in mechanisms}
    fused = counts[FUSED_SOFTMAX]["aten_ops_compute"]
    frame = pd.DataFrame({"aten ops": [c["aten_ops"] for c in counts.values()],
                          "non-view": [c["aten_ops_compute"] for c in counts.values()],
                          "x fused softmax (non-view)": [c["aten_ops_compute"] / fused for c in counts.values()]},
                         index=list(counts))
    frame.attrs["provenance"] = provenance(device, dtype=dtype, batch_size=1)
    return frame


def _worker():
    """Subprocess entry point: one measurement, config as JSON on stdin, result as JSON on stdout."""
    cfg = json.load(sys.stdin)
    row = _measure_mixer(cfg.pop("label"), cfg.pop("kind"), cfg.pop("options"), cpu_memory=True, **cfg)
    print("@@BENCH@@" + json.dumps(jsonable(row)))


def _measure_isolated(label, kind, options, **cfg):
    """``_measure_mixer`` in a fresh Python process, where peak RSS growth is this mechanism's alone."""
    payload = json.dumps({"label": label, "kind": kind, "options": options, **cfg, "dtype": dtype_name(cfg["dtype"])})
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding this package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", "from vixnb.bench import _worker; _worker()"], input=payload,
                          capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("@@BENCH@@"):
            return json.loads(line[len("@@BENCH@@"):])
    raise RuntimeError(f"benchmark of {label} failed:\n{proc.stderr[-2000:]}")


def bench_mixers(*, device=None, dtype=None, tokens=1025, dim=128, heads=4, dim_head=32, batch=64, warmup=2,
                 steps=5, kinds=None, isolate=None, threads=None, compile=False):
    """Forward + backward time and memory of every mechanism, with ratios to the materialised softmax.

    ``device``: ``"cuda"`` when available, else ``"cpu"``. ``dtype``: ``"fp32"`` (default), ``"bf16"`` or
    ``"fp16"`` (autocast). ``kinds``: labels of ``measure.sweep_mechanisms()`` to run, in that order (the
    reference, ``REFERENCE``, always runs first). ``isolate``: one fresh process per mechanism (default on
    CPU, where it is how memory is measured). ``threads``: ``torch.set_num_threads`` for the measurement
    (CPU; default: PyTorch's own choice). ``compile``: every mechanism, the reference included, through
    ``torch.compile`` (True or a mode of ``COMPILE_MODES``; "reduce-overhead" replays CUDA graphs; compiled in
    the untimed warm-up steps). Each row also counts the aten operators of one step (``dispatched_ops``). Returns one
    ``measure.sweep_row`` row per mechanism (mechanism, kind, options, tokens, batch, dim, heads, dim_head, device, dtype, ms (median), ms_min, peak_mb, memory
    (what peak_mb is), params, gflops, estimate_gb, status, ...) plus ratio_vs_materialized_softmax and
    memory_ratio_vs_materialized_softmax; ``error`` when the mechanism failed (e.g. out of memory).
    """
    device = str(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype, compile = as_dtype(dtype), compile_mode(compile) or False
    isolate = torch.device(device).type == "cpu" if isolate is None else isolate
    mechanisms = {label: (label, kind, options) for label, kind, options in sweep_mechanisms()}
    wanted = list(mechanisms) if kinds is None else list(kinds)
    wanted = [REFERENCE] + [k for k in dict.fromkeys(wanted) if k != REFERENCE]
    unknown = [k for k in wanted if k not in mechanisms]
    if unknown:
        raise ValueError(f"unknown mechanisms {unknown}; choose from {', '.join(mechanisms)}")
    cfg = dict(device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads, dim_head=dim_head, batch=batch,
               warmup=warmup, steps=steps, threads=threads, compile=compile)
    rows = []
    for label in wanted:
        label, kind, options = mechanisms[label]
        try:
            row = _measure_isolated(label, kind, options, **cfg) if isolate else _measure_mixer(label, kind, options, **cfg)
        except RuntimeError as e:  # a failure other than out of memory (which sweep_row records)
            row = {"mechanism": label, "kind": kind, "options": options, "tokens": tokens, "batch": batch, "dim": dim,
                   "heads": heads, "dim_head": dim_head, "device": device, "dtype": dtype_name(dtype), "ms": None,
                   "ms_min": None, "peak_mb": None, "memory": None, "params": None, "status": "error",
                   "error": str(e).strip().splitlines()[-1][:200]}
        finally:
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return with_ratios(rows)


def with_ratios(rows):
    """Set each row's ``ratio_vs_materialized_softmax`` and ``memory_ratio_vs_materialized_softmax`` (to the
    first row, the reference) and ``ratio_vs_fused_softmax`` (time, to the ``FUSED_SOFTMAX`` row when it ran:
    issue 4's target for the Nystrom mixer is at most 2); returns ``rows``."""
    ref = rows[0] if rows else {}
    fused = next((r["ms"] for r in rows if r["mechanism"] == FUSED_SOFTMAX), None)
    for r in rows:
        r["ratio_vs_materialized_softmax"] = r["ms"] / ref["ms"] if r["ms"] and ref["ms"] else None
        r["memory_ratio_vs_materialized_softmax"] = (r["peak_mb"] / ref["peak_mb"]
                                                     if r["peak_mb"] is not None and ref["peak_mb"] else None)
        r["ratio_vs_fused_softmax"] = r["ms"] / fused if r["ms"] and fused else None
    return rows


def format_table(rows):
    """A plain-text table of ``bench_mixers`` rows."""
    head = rows[0] if rows else {}
    lines = [f"token mixers, forward + backward: {head.get('batch')} x {head.get('tokens')} tokens, dim {head.get('dim')}, "
             f"{head.get('heads')} heads x {head.get('dim_head')}, {head.get('device')} {head.get('dtype')}"
             f"{_compiled_label(head.get('compiled'))}; "
             f"ratios vs {REFERENCE} (x ref) and {FUSED_SOFTMAX} (x fused)",
             f"{'mechanism':<24}{'ms':>10}{'x ref':>8}{'x fused':>9}{'peak MiB':>11}{'x ref':>8}{'aten ops':>10}  params"]
    for r in rows:
        lines.append(f"{r['mechanism']:<24}{text_cell(r['ms'], '.2f'):>10}"
                     f"{text_cell(r['ratio_vs_materialized_softmax'], '.2f'):>8}"
                     f"{text_cell(r.get('ratio_vs_fused_softmax'), '.2f'):>9}{text_cell(r['peak_mb'], '.1f'):>11}"
                     f"{text_cell(r['memory_ratio_vs_materialized_softmax'], '.2f'):>8}{_ops_cell(r):>10}"
                     f"  {text_cell(r['params'], ',')}"
                     + (f"  ERROR {r['error']}" if r.get("error") else ""))
    if rows:
        lines.append(f"memory: {next((r['memory'] for r in rows if r.get('memory')), 'n/a')}")
        lines.append("aten ops: operators one forward + backward dispatches, views excluded / all (batch 1)")
    return "\n".join(lines)


def _compiled_label(compiled):
    if not compiled:
        return ""
    return ", torch.compile" + ("" if compiled in (True, "default") else f" (mode {compiled})")


def _ops_cell(row):
    return f"{row['aten_ops_compute']}/{row['aten_ops']}" if row.get("aten_ops") else "-"


def add_arguments(parser):
    """The options of ``vixnb bench mixers`` (for the command line in ``vixnb.cli``)."""
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="autocast dtype (default fp32)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=1025)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--compile", nargs="?", const="default", default=None, choices=COMPILE_MODES,
                        help="time every mechanism through torch.compile, optionally in a mode "
                             "(reduce-overhead: CUDA graphs)")
    parser.add_argument("--mixers", nargs="*", default=None,
                        help="subset of: " + "; ".join(m[0] for m in sweep_mechanisms()))
    parser.add_argument("--json", default=None,
                        help="also write the rows with their provenance to this JSON file (e.g. results/bench/mixers-bf16.json)")
    return parser


def run(args):
    rows = bench_mixers(device=args.device, dtype=args.dtype, batch=args.batch, tokens=args.tokens, steps=args.steps,
                        warmup=args.warmup, kinds=args.mixers, threads=args.threads, compile=args.compile)
    print(format_table(rows))
    if args.json:
        save(args.json, "mixers", rows, device=rows[0]["device"], dtype=args.dtype)
    return rows


# ----- stored benchmark results (results/bench/, committed): what the book shows of GPU benchmarks ------

def save(path, benchmark, rows, *, device, dtype, note=None, command=None, extra=None):
    """Write ``rows`` of ``benchmark`` ("mixers", "train", "nystrom-variants") to ``path`` as JSON with their
    provenance (device, dtype, torch, commit, date; ``vixnb.measure.provenance``), the command line that made
    them (default: ``vixnb`` and this process's arguments) and any ``extra`` fields."""
    from .measure import provenance
    from .results import atomic_write

    command = command or ("vixnb " + " ".join(sys.argv[1:]) if sys.argv[1:] else None)
    data = {"benchmark": benchmark, "provenance": provenance(device, dtype=dtype), "command": command,
            "note": note, **(extra or {}), "rows": jsonable(rows)}
    return atomic_write(path, lambda f: f.write(json.dumps(data, indent=1)))


def stored_path(name, root=None):
    """``results/bench/<name>.json`` of the checkout (``store.default_root``), or under ``root``."""
    from .results import default_root

    return Path(root or default_root()) / "bench" / f"{name}.json"


def newest(prefix, root=None):
    """The saved benchmark named ``prefix-N`` with the largest N (e.g. the latest ``nystrom-variants-N`` run),
    or ``prefix`` itself when there is none (``stored_table`` then reads "not yet run")."""
    found = {int(p.stem.rsplit("-", 1)[1]): p.stem for p in stored_path(prefix, root).parent.glob(f"{prefix}-*.json")
             if p.stem.rsplit("-", 1)[1].isdigit()}
    return found[max(found)] if found else prefix


def load(name, root=None):
    """A saved benchmark (``save``) by name, or None when there is none."""
    path = stored_path(name, root)
    return json.loads(path.read_text()) if path.exists() else None


def _with_provenance(frame, saved):
    """``frame.attrs["provenance"]``: the saved provenance, with the saved note (for ``report.provenance_line``)."""
    note = saved.get("note")
    frame.attrs["provenance"] = {**saved["provenance"], **({"note": note} if note else {})}
    return frame


def stored_table(name, root=None):
    """The saved benchmark ``name`` (``results/bench/<name>.json``) as a page table (``mixers_frame``,
    ``train_frame`` or ``variants_frame`` by its kind), or a one-cell "not yet run" table; ``attrs["provenance"]``
    is the saved provenance with the saved note (None when not run)."""
    import pandas as pd

    saved = load(name, root)
    if saved is None:
        frame = pd.DataFrame({"status": [f"not yet run (no results/bench/{name}.json)"]}, index=[name])
        frame.attrs["provenance"] = None
        return frame
    make = {"mixers": mixers_frame, "train": train_frame, "nystrom-variants": variants_frame}[saved["benchmark"]]
    return make(saved)


def variants_frame(saved):
    """tools/profile_nystrom.py output: one row per variant, ms and ratio to the fused softmax per dtype."""
    import pandas as pd

    frame = pd.DataFrame(saved["rows"]).pivot(index="mechanism", columns="dtype", values=["ms", "x_fused_softmax"])
    frame.columns = [f"{'ms' if what == 'ms' else 'x fused softmax'} ({dt})" for what, dt in frame.columns]
    order = list(dict.fromkeys(r["mechanism"] for r in saved["rows"]))
    frame = frame.loc[order]
    return _with_provenance(frame, saved)


def mixers_frame(saved):
    """A saved ``vixnb bench mixers`` run as a page table: ms (median), ratios to the fused and the
    materialised softmax, peak MiB; ``attrs["provenance"]`` as saved (``_with_provenance``)."""
    import pandas as pd

    rows = with_ratios([dict(r) for r in saved["rows"]])  # runs saved before the fused ratio was stored
    frame = pd.DataFrame({
        "ms (fwd+bwd)": [r["ms"] for r in rows],
        "x fused softmax": [r["ratio_vs_fused_softmax"] for r in rows],
        "x materialised softmax": [r["ratio_vs_materialized_softmax"] for r in rows],
        "peak MiB": [r["peak_mb"] for r in rows],
        "params": [r["params"] for r in rows]}, index=[r["mechanism"] for r in rows])
    if any(r.get("aten_ops") for r in rows):  # runs saved before the count was added have none
        frame.insert(3, "aten ops (non-view)", [r.get("aten_ops_compute") for r in rows])
    return _with_provenance(frame, saved)


def train_frame(saved):
    """A saved ``vixnb bench train`` run as a page table (one row per model)."""
    import pandas as pd

    rows = saved["rows"]
    frame = pd.DataFrame({
        "batch": [r["batch_size"] for r in rows],
        "reference img/s": [r.get("reference_images_per_s") for r in rows],
        f"ours img/s ({rows[0]['dtype'] if rows else ''})": [r.get("ours_images_per_s") for r in rows],
        "ratio": [r.get("ratio") for r in rows],
        "ours img/s (fp32)": [r.get("ours_paper_dtype_images_per_s") for r in rows],
        "paper protocol, min (projected, fp32)": [r.get("projected_paper_minutes") for r in rows]},
        index=[r["model"] for r in rows])
    return _with_provenance(frame, saved)


# ----- training throughput: the engine's path against a straightforward reference loop -----------------

TABLE1_MODELS = ("vit", "vip", "vil", "vin", "fnet", "mlp_mixer",
                 "hybrid_vit", "hybrid_vip", "hybrid_vil", "hybrid_vin", "hybrid_fnet", "hybrid_mlp_mixer")


def _reference_loader(images, labels, batch_size, workers):
    """What the authors' scripts do: a torchvision-style dataset (PIL image -> ToTensor -> Normalize per
    item) behind a shuffling DataLoader."""
    from PIL import Image
    from torchvision import transforms

    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    pil = [Image.fromarray(img.permute(1, 2, 0).numpy()) for img in images]

    class PILDataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(pil)

        def __getitem__(self, i):
            return to_tensor(pil[i]), int(labels[i])

    return torch.utils.data.DataLoader(PILDataset(), batch_size=batch_size, shuffle=True, num_workers=workers,
                                       drop_last=True, persistent_workers=workers > 0)


def _time_steps(step, steps, warmup, device):
    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / steps


def bench_train(models=TABLE1_MODELS, *, device=None, dtype=None, batch=None, steps=10, warmup=3, workers=None):
    """Training images/s of each model at its paper batch size: the engine's path (uint8 data resident on
    the device, normalised there, fused attention, ``dtype`` autocast, fused AdamW on a GPU) against a
    reference loop (DataLoader over PIL images, materialised softmax, fp32 forward, eager), both measured
    here in the same run. Includes data handling; ``ratio`` = ours / reference.

    ``projected_paper_minutes``: the ``paper`` profile's epochs x (its training images + a third of its test
    images, a test pass costing about a third of a training step) at our path's speed in the paper profile's
    precision (``projected_dtype``). When ``dtype`` is not that precision (bf16 on a GPU; the paper profile
    trains in fp32) our path is timed a second time in it (``ours_paper_dtype_images_per_s``)."""
    from .layers import fused_attn
    from .data import dataset_spec, load_split, normalize
    from .profiles import run_config
    from .registry import create_model

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dt = as_dtype(dtype or ("bf16" if device.type == "cuda" else "fp32"))
    workers = (4 if device.type == "cuda" else 0) if workers is None else workers
    rows = []
    for name in models:
        paper = run_config(name, profile="paper")
        paper_dt = as_dtype(paper["precision"])
        bs = batch or paper["batch_size"]
        images, labels = load_split("synthetic", "train", size=max(bs * (steps + warmup), bs))
        row = {"model": name, "batch_size": bs, "device": str(device), "dtype": str(dt).removeprefix("torch."),
               "steps": steps, "torch": torch.__version__}
        paths = {"reference": None, "ours": dt, **({"ours_paper_dtype": paper_dt} if paper_dt != dt else {})}
        for path, path_dt in paths.items():
            torch.manual_seed(0)
            model = create_model(name).to(device)
            fused = device.type == "cuda" and path != "reference"
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=fused)
            if path != "reference":
                x_all, y_all = images.to(device), labels.to(device)
                cast = torch.autocast(device.type, dtype=path_dt, enabled=path_dt != torch.float32)

                def step():
                    idx = torch.randint(len(x_all), (bs,), device=device)
                    with cast:
                        loss = torch.nn.functional.cross_entropy(model(normalize(x_all[idx])), y_all[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
            else:
                loader = _reference_loader(images, labels, bs, workers)
                batches = iter(())

                def step():
                    nonlocal batches
                    try:
                        x, y = next(batches)
                    except StopIteration:
                        batches = iter(loader)
                        x, y = next(batches)
                    with fused_attn(model, False):
                        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
            try:
                seconds = _time_steps(step, steps, warmup, device)
                row[f"{path}_images_per_s"] = bs / seconds
            except torch.OutOfMemoryError:
                row[f"{path}_images_per_s"] = None
                row[f"{path}_status"] = "oom"
            model = opt = step = None  # free this path's memory before the next
            if device.type == "cuda":
                torch.cuda.empty_cache()
        ours, ref = row.get("ours_images_per_s"), row.get("reference_images_per_s")
        row["ratio"] = ours / ref if ours and ref else None
        at_paper_dtype = row.get("ours_paper_dtype_images_per_s", ours)
        spec = dataset_spec(paper["dataset"])
        train_images = paper["train_size"] or spec.train_images
        test_images = paper["test_size"] or spec.test_images
        row.update(projected_dtype=dtype_name(paper_dt), paper_epochs=paper["epochs"],
                   paper_train_images=train_images, paper_test_images=test_images)
        if at_paper_dtype:
            row["projected_paper_minutes"] = paper["epochs"] * (train_images + test_images / 3) / at_paper_dtype / 60
        rows.append(row)
    return rows


def format_train_table(rows):
    head = (f"{'model':<18}{'batch':>6}{'reference img/s':>17}{'ours img/s':>12}{'ratio':>8}"
            f"{'paper protocol (min, projected)':>33}{'at':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:<18}{r['batch_size']:>6}{text_cell(r.get('reference_images_per_s'), '.1f', blank='—'):>17}"
                     f"{text_cell(r.get('ours_images_per_s'), '.1f', blank='—'):>12}"
                     f"{text_cell(r.get('ratio'), '.2f', blank='—'):>8}"
                     f"{text_cell(r.get('projected_paper_minutes'), '.1f', blank='—'):>33}{r['projected_dtype']:>6}")
    total = [r["projected_paper_minutes"] for r in rows if r.get("projected_paper_minutes")]
    if rows:
        r0 = rows[0]
        lines.append(f"device {r0['device']}, dtype {r0['dtype']}, torch {r0['torch']}; "
                     f"projected Table 1 total at the paper protocol: {sum(total):.1f} min over {len(total)} models")
        lines.append(f"projection: epochs x ({r0['paper_train_images']:,} training + {r0['paper_test_images']:,} / 3 test "
                     f"images) at our path's speed in the paper profile's precision ({r0['projected_dtype']}"
                     + (f", timed separately from the {r0['dtype']} column" if "ours_paper_dtype_images_per_s" in r0
                        else "") + ")")
    return "\n".join(lines)
