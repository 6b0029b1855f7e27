"""Speed and memory of the token mixers: one forward + backward of each mechanism on the same input.

``bench_mixers(...)`` builds each mixer in the ViX paper configuration (1025 tokens, dim 128, 4 heads of
32 by default) and times forward + backward of a (batch, tokens, dim) input, against the materialised
softmax reference measured in the same run (``ratio_vs_materialized_softmax`` is time / reference time,
``memory_ratio_vs_materialized_softmax`` the same for memory). ``format_table(rows)`` prints them;
``main(argv)`` is the command line (``python -m vixnb.bench --batch 8``).

What is measured:
- time: median over ``steps`` timed steps after ``warmup`` untimed ones; CUDA events on a GPU,
  ``time.perf_counter`` on a CPU. bf16/fp16 run under ``torch.autocast`` (parameters stay fp32).
- memory on CUDA: ``torch.cuda.max_memory_allocated`` during the timed steps minus what was allocated
  before them (parameters and the input excluded), in MiB.
- memory on CPU: PyTorch keeps no statistics for CPU allocations, so each mechanism runs in a fresh
  Python process (``isolate=True``, the default on CPU) and the figure is the growth of that process's
  peak resident set size (``ru_maxrss``) over its resident size just before the first step, in MiB. It
  includes allocator caching and is coarser than the CUDA figure; with ``isolate=False`` it is not measured
  (``None``).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

from .models import VIX_MIXERS

# (label, kind, options): the ViX paper configurations (vixnb.models.VIX_MIXERS), plus the other kinds.
MECHANISMS = (
    ("softmax-materialized", "softmax", {"materialize": True}),
    ("softmax-fused", "softmax", {}),
    *((VIX_MIXERS[m][0], *VIX_MIXERS[m]) for m in ("vip", "vil", "vin")),
    ("nystrom-unfused", "nystrom", {**VIX_MIXERS["vin"][1], "fused": False}),
    ("linear", "linear", {}),
    ("shaped", "shaped", {}),
    ("fnet", "fnet", {}),
    ("mlp", "mlp", {"expansion_factor": 1}),
)
REFERENCE = "softmax-materialized"
DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16}
MiB = 1024**2


def as_dtype(dtype):
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}") from None


def dtype_name(dtype):
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[as_dtype(dtype)]


def time_calls_ms(fn, device, calls):
    """Milliseconds of each of ``calls`` calls of ``fn``: CUDA events on a GPU (each call synchronised),
    ``time.perf_counter`` on a CPU."""
    times = []
    for _ in range(calls):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure(label, kind, options, *, device, dtype, tokens, dim, heads, dim_head, batch, warmup, steps, cpu_memory,
             threads=None):
    """Time (ms, median) and memory (MiB or None) of forward + backward of one mixer."""
    from . import attention

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    device = torch.device(device)
    mixer = attention.build(kind, dim=dim, heads=heads, dim_head=dim_head, seq_len=tokens, **options).to(device).train()
    x = torch.randn(batch, tokens, dim, device=device, requires_grad=True)
    grad = torch.randn(batch, tokens, dim, device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)
    cuda = device.type == "cuda"

    def step():
        x.grad = None
        mixer.zero_grad(set_to_none=True)
        with autocast:
            out = mixer(x)
        out.backward(grad.to(out.dtype))

    rss_before = _rss_bytes() if cpu_memory else None
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    times = time_calls_ms(step, device, steps)
    if cuda:
        memory, memory_kind = (torch.cuda.max_memory_allocated(device) - base) / MiB, "cuda max_memory_allocated"
    elif cpu_memory:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        memory, memory_kind = max(0, peak - rss_before) / MiB, "cpu peak RSS growth (fresh process)"
    else:
        memory, memory_kind = None, "not measured on cpu (isolate=False)"
    return {"mixer": label, "kind": kind, "options": options, "ms": statistics.median(times), "ms_min": min(times),
            "peak_mib": memory, "memory": memory_kind,
            "params": sum(p.numel() for p in mixer.parameters())}


def _worker():
    """Subprocess entry point: one measurement, config as JSON on stdin, result as JSON on stdout."""
    cfg = json.load(sys.stdin)
    cfg["dtype"] = as_dtype(cfg["dtype"])
    row = _measure(cfg.pop("label"), cfg.pop("kind"), cfg.pop("options"), cpu_memory=True, **cfg)
    print("@@BENCH@@" + json.dumps(row))


def _measure_isolated(label, kind, options, **cfg):
    payload = json.dumps({"label": label, "kind": kind, "options": options, **cfg, "dtype": dtype_name(cfg["dtype"])})
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", "from vixnb.bench import _worker; _worker()"], input=payload,
                          capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("@@BENCH@@"):
            return json.loads(line[len("@@BENCH@@"):])
    raise RuntimeError(f"benchmark of {label} failed:\n{proc.stderr[-2000:]}")


def bench_mixers(*, device=None, dtype=None, tokens=1025, dim=128, heads=4, dim_head=32, batch=64, warmup=2,
                 steps=5, kinds=None, isolate=None, threads=None):
    """Forward + backward time and memory of every mechanism, with ratios to the materialised softmax.

    ``device``: ``"cuda"`` when available, else ``"cpu"``. ``dtype``: ``"fp32"`` (default), ``"bf16"`` or
    ``"fp16"`` (autocast). ``kinds``: labels of ``MECHANISMS`` to run (the reference is always run).
    ``isolate``: one fresh process per mechanism (default on CPU, where it is how memory is measured).
    ``threads``: ``torch.set_num_threads`` for the measurement (CPU; default: PyTorch's own choice).
    Returns one dict per mechanism: mixer, kind, options, device, dtype, tokens, dim, heads, dim_head,
    batch, ms (median), ms_min, peak_mib, memory (what peak_mib is), params, ratio_vs_materialized_softmax,
    memory_ratio_vs_materialized_softmax, error (only when the mechanism failed, e.g. out of memory).
    """
    device = str(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = as_dtype(dtype)
    isolate = torch.device(device).type == "cpu" if isolate is None else isolate
    labels = [m[0] for m in MECHANISMS]
    wanted = labels if kinds is None else [REFERENCE] + [k for k in kinds if k != REFERENCE]
    unknown = [k for k in wanted if k not in labels]
    if unknown:
        raise ValueError(f"unknown mechanisms {unknown}; choose from {', '.join(labels)}")
    cfg = dict(device=device, dtype=dtype, tokens=tokens, dim=dim, heads=heads, dim_head=dim_head, batch=batch,
               warmup=warmup, steps=steps, threads=threads)
    rows = []
    for label, kind, options in MECHANISMS:
        if label not in wanted:
            continue
        try:
            if isolate:
                row = _measure_isolated(label, kind, options, **cfg)
            else:
                row = _measure(label, kind, options, cpu_memory=False, **cfg)
        except RuntimeError as e:  # out of memory included
            row = {"mixer": label, "kind": kind, "options": options, "ms": None, "ms_min": None, "peak_mib": None,
                   "memory": None, "params": None, "error": str(e).strip().splitlines()[-1][:200]}
        finally:
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
        row.update(device=device, dtype=dtype_name(dtype), tokens=tokens, dim=dim, heads=heads, dim_head=dim_head,
                   batch=batch)
        rows.append(row)
    ref = next(r for r in rows if r["mixer"] == REFERENCE)
    for r in rows:
        r["ratio_vs_materialized_softmax"] = r["ms"] / ref["ms"] if r["ms"] and ref["ms"] else None
        r["memory_ratio_vs_materialized_softmax"] = (r["peak_mib"] / ref["peak_mib"]
                                                     if r["peak_mib"] is not None and ref["peak_mib"] else None)
    return rows


def format_table(rows):
    """A plain-text table of ``bench_mixers`` rows."""
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    head = rows[0] if rows else {}
    lines = [f"token mixers, forward + backward: {head.get('batch')} x {head.get('tokens')} tokens, dim {head.get('dim')}, "
             f"{head.get('heads')} heads x {head.get('dim_head')}, {head.get('device')} {head.get('dtype')}; "
             f"ratios vs {REFERENCE}",
             f"{'mixer':<22}{'ms':>10}{'x ref':>8}{'peak MiB':>11}{'x ref':>8}  params"]
    for r in rows:
        lines.append(f"{r['mixer']:<22}{num(r['ms'], '.2f'):>10}{num(r['ratio_vs_materialized_softmax'], '.2f'):>8}"
                     f"{num(r['peak_mib'], '.1f'):>11}{num(r['memory_ratio_vs_materialized_softmax'], '.2f'):>8}  "
                     f"{num(r['params'], ',')}" + (f"  ERROR {r['error']}" if r.get("error") else ""))
    if rows:
        lines.append(f"memory: {next((r['memory'] for r in rows if r.get('memory')), 'n/a')}")
    return "\n".join(lines)


def add_arguments(parser):
    """The options of ``vixnb bench mixers`` (for the command line in ``vixnb.cli``)."""
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="autocast dtype (default fp32)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=1025)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--mixers", nargs="*", default=None, help="subset of: " + " ".join(m[0] for m in MECHANISMS))
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    return parser


def run(args):
    rows = bench_mixers(device=args.device, dtype=args.dtype, batch=args.batch, tokens=args.tokens, steps=args.steps,
                        warmup=args.warmup, kinds=args.mixers, threads=args.threads)
    print(format_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(prog="vixnb bench mixers", description=__doc__.split("\n")[0]))
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()


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
    here in the same run. Includes data handling; ``ratio`` = ours / reference."""
    from .data import load_split, normalize
    from .profiles import run_config
    from .registry import create_model
    from .attention import materialized

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dt = as_dtype(dtype or ("bf16" if device.type == "cuda" else "fp32"))
    workers = (4 if device.type == "cuda" else 0) if workers is None else workers
    rows = []
    for name in models:
        bs = batch or run_config(name, profile="paper")["batch_size"]
        images, labels = load_split("synthetic", "train", size=max(bs * (steps + warmup), bs))
        row = {"model": name, "batch_size": bs, "device": str(device), "dtype": str(dt).removeprefix("torch."),
               "steps": steps, "torch": torch.__version__}
        for path in ("reference", "ours"):
            torch.manual_seed(0)
            model = create_model(name).to(device)
            fused = device.type == "cuda" and path == "ours"
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=fused)
            if path == "ours":
                x_all, y_all = images.to(device), labels.to(device)
                cast = torch.autocast(device.type, dtype=dt, enabled=dt != torch.float32)

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
                    with materialized(model):
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
        config = run_config(name, profile="paper")
        if ours:  # projected paper-protocol time: training images + one test pass (~1/3 of a step) per epoch
            row["projected_paper_minutes"] = config["epochs"] * (50000 + 10000 / 3) / ours / 60
        rows.append(row)
    return rows


def format_train_table(rows):
    head = f"{'model':<18}{'batch':>6}{'reference img/s':>17}{'ours img/s':>12}{'ratio':>8}{'paper protocol (min, projected)':>33}"
    lines = [head, "-" * len(head)]
    fmt = lambda v, f: format(v, f) if v is not None else "—"
    for r in rows:
        lines.append(f"{r['model']:<18}{r['batch_size']:>6}{fmt(r.get('reference_images_per_s'), '.1f'):>17}"
                     f"{fmt(r.get('ours_images_per_s'), '.1f'):>12}{fmt(r.get('ratio'), '.2f'):>8}"
                     f"{fmt(r.get('projected_paper_minutes'), '.1f'):>33}")
    total = [r["projected_paper_minutes"] for r in rows if r.get("projected_paper_minutes")]
    if rows:
        lines.append(f"device {rows[0]['device']}, dtype {rows[0]['dtype']}, torch {rows[0]['torch']}; "
                     f"projected Table 1 total at the paper protocol: {sum(total):.1f} min over {len(total)} models")
    return "\n".join(lines)
