"""The efficiency chapter (notebooks/efficiency.ipynb): its settings per profile, its measurements (measured
by ``vixnb.measure``, or read back from the results store), and what the page shows of them: tables, notes,
Pareto fronts, seed 003's correlation table and memory fit, and the token-mixer scaling figure.

Measuring is ``vixnb.measure``'s; this module only decides what to measure for a profile and presents it
(called through the module, ``measure.measure_many`` ..., so that what measures is one place).
"""
from __future__ import annotations

import math

import torch

from . import measure, papers
from .measure import (PATHS, short_status, metric_value, crossover_frame, crossovers,
                      fit_line, provenance, records_frame)
from .report import NOT_YET_RUN, page_table, provenance_line, short_name

# --------------------------------------------------------------------------------------------------
# analysis and figures: Pareto fronts, seed 003's correlations and memory fit, the scaling sweep


def pareto_front(xs, ys, *, x_lower_is_better=True, y_higher_is_better=True):
    """Indices of the points no other point beats in both coordinates (None values are never on the front)."""
    pts = [(i, float(x), float(y)) for i, (x, y) in enumerate(zip(xs, ys)) if x is not None and y is not None
           and not (isinstance(x, float) and math.isnan(x)) and not (isinstance(y, float) and math.isnan(y))]
    sx = 1 if x_lower_is_better else -1
    sy = 1 if y_higher_is_better else -1

    def dominates(a, b):
        better_eq = sx * a[1] <= sx * b[1] and sy * a[2] >= sy * b[2]
        strictly = sx * a[1] < sx * b[1] or sy * a[2] > sy * b[2]
        return better_eq and strictly

    return sorted(i for i, *p in pts if not any(dominates(q, (i, *p)) for q in pts if q[0] != i))


def seed003_table2():
    """Seed 003's Table 2 (correlations between efficiency metrics) as a DataFrame, as printed."""
    import pandas as pd

    printed = papers.table("favor", "table2")
    return pd.DataFrame(list(printed["rows"].values()), index=list(printed["rows"]), columns=printed["columns"])


CORRELATION_COLUMNS = {  # seed 003's Table 2 label -> our column (training-step time stands in for FT Time)
    "FLOPS": "GFLOPs (seed 003 conv.)",
    "θ": "params (true)",
    "FT Time": "train step ms ({path})",
    "FFwd Time": "ms per image ({path})",
    "FFwd Mem": "infer GB @64 ({path})",
    "Train Mem": "train GB alloc ({path})",
}


def correlation_table(frame, *, path="fused", min_points=3):
    """Pearson correlations between our efficiency metrics under seed 003's Table 2 labels (upper triangle).
    Columns with fewer than ``min_points`` numeric values (e.g. GPU memory on a CPU) are left out;
    "FT Time" is our training-step time (seed 003 measured fine-tuning time), "FFwd Time" is 1 / throughput."""
    import pandas as pd

    data = {}
    for label, col in CORRELATION_COLUMNS.items():
        col = col.format(path=path)
        values = pd.to_numeric(frame[col], errors="coerce") if col in frame else None
        if values is not None and values.notna().sum() >= min_points:
            data[label] = values
    corr = pd.DataFrame(data).astype(float).corr()
    labels = list(corr.columns)
    rows = {a: {b: (round(corr.loc[a, b], 2) if labels.index(b) > labels.index(a) else None) for b in labels[1:]}
            for a in labels[:-1]}
    return pd.DataFrame.from_dict(rows, orient="index")


def _label(name):
    """The short model name of a figure or table (ViT, Hybrid ViN); reference architectures keep theirs."""
    return short_name(str(name))


def plot_pareto_fronts(frame, accuracy, *, path="fused", title=None):
    """Seed 003's Pareto fronts: accuracy against throughput, inference memory, training memory and
    parameters, two by two. ``accuracy``: model -> top-1 (or None), or ``accuracy_records`` output. Panels
    without numbers say why ("not measured on this device"); an empty ``frame`` (not yet run) draws nothing
    and returns None."""
    import matplotlib.pyplot as plt
    import pandas as pd

    if frame.empty:
        return None

    if not isinstance(accuracy, dict):
        accuracy = {a["model"]: a["top1"] for a in accuracy}
    panels = [(f"img/s ({path})", "throughput (images/s)", False), (f"infer GB @64 ({path})", "inference memory @64 (GB)", True),
              (f"train GB alloc ({path})", "training memory (GB allocated)", True), ("params (true)", "parameters", True)]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    acc = pd.Series({m: accuracy.get(m) for m in frame.index}, dtype="float64")
    for ax, (col, label, lower) in zip(axes.flat, panels):
        xs = pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(dtype="float64")
        pts = pd.DataFrame({"x": xs, "y": acc}).dropna()
        ax.set_xlabel(label)
        ax.set_ylabel("top-1 (%)")
        if pts.empty:
            why = "not measured on this device" if xs.isna().all() else "no accuracy yet"
            ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        front = pareto_front(list(pts["x"]), list(pts["y"]), x_lower_is_better=lower)
        on = pts.iloc[front].sort_values("x")
        ax.scatter(pts["x"], pts["y"], s=18, color="tab:blue")
        ax.scatter(on["x"], on["y"], s=60, facecolors="none", edgecolors="tab:red")
        if len(on) > 1:
            ax.step(on["x"], on["y"], where="post" if lower else "pre", color="tab:red", lw=1)
        if col == "params (true)":
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        for name, (x, y) in pts.iterrows():
            ax.annotate(_label(name), (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax.margins(x=0.12, y=0.12)
        if "img/s" in col and frame.get("device") is not None and str(frame["device"].iloc[0]).startswith("cpu"):
            ax.set_title("CPU timing, fixed batch", fontsize=9)
    fig.suptitle(title or "accuracy against efficiency (red circles: the Pareto front)", fontsize=11)
    fig.tight_layout()
    return fig


def plot_memory_fit(frame, *, path="authors", title=None):
    """Training memory (GB allocated) against GFLOPs (seed 003 convention) with our least-squares line and
    seed 003's RAM[GB] ~ 25.43 GFLOPs + 25.50. Returns (figure, fit dict or None); (None, None) for an
    empty ``frame`` (not yet run)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    if frame.empty:
        return None, None

    column = "GFLOPs (seed 003 conv.)"
    x = pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(dtype="float64")
    y = pd.to_numeric(frame.get(f"train GB alloc ({path})"), errors="coerce") if f"train GB alloc ({path})" in frame else None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    fit = None
    grid = [0, float(x.max()) * 1.1] if x.notna().any() else [0, 1]
    fit_theirs = papers.load("favor")["ram_fit"]
    ax.plot(grid, [fit_theirs["slope_gb_per_gflop"] * g + fit_theirs["intercept_gb"] for g in grid],
            color="grey", ls="--", label="seed 003: 25.43 x + 25.50")
    if y is None or y.notna().sum() < 2:
        ax.text(0.5, 0.3, "our training memory is not measured on this device", ha="center", va="center",
                transform=ax.transAxes)
    else:
        pts = pd.DataFrame({"x": x, "y": y}).dropna()
        slope, intercept = fit_line(pts["x"], pts["y"])
        r = float(pts["x"].corr(pts["y"])) if len(pts) > 2 else None
        fit = {"slope_gb_per_gflop": slope, "intercept_gb": intercept, "pearson_r": r, "points": len(pts)}
        ax.scatter(pts["x"], pts["y"], s=18)
        for name, (px, py) in pts.iterrows():
            ax.annotate(_label(name), (px, py), fontsize=7, xytext=(2, 2), textcoords="offset points")
        ax.plot(grid, [slope * g + intercept for g in grid], color="tab:red", label=f"ours: {slope:.2f} x + {intercept:.2f}")
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_xlabel("GFLOPs per image (seed 003 convention)")
    ax.set_ylabel(f"training memory, GB allocated ({path} path)")
    ax.set_title(title or "training memory against FLOPs", fontsize=10)
    fig.tight_layout()
    return fig, fit


def plot_scaling(rows, *, metrics=("ms", "peak_mb", "estimate_gb"), title=None):
    """Log-log curves of each mechanism against tokens, one panel per metric with any values (None without
    ``rows``: not yet run)."""
    import matplotlib.pyplot as plt

    if not rows:
        return None

    labels = {"ms": "time per step (ms)", "peak_mb": "peak memory (MB, measured)",
              "estimate_gb": "memory estimate (GB, from shapes)", "gflops": "forward GFLOPs"}
    panels = [m for m in metrics if any(r.get(m) is not None for r in rows)]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5.2 * max(len(panels), 1), 4), squeeze=False)
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    colors = plt.get_cmap("tab20").colors
    for ax, metric in zip(axes[0], panels):
        for i, mech in enumerate(mechs):
            pts = [(r["tokens"], r[metric]) for r in rows if r["mechanism"] == mech and r.get(metric) is not None]
            if pts:
                style = "--" if "materialised" in mech or "unfused" in mech else "-"
                ax.plot(*zip(*pts), style, marker="os^Dv"[i % 5], ms=3, color=colors[(2 * i) % 20 + (i >= 10)],
                        label=mech)
            oom = [r["tokens"] for r in rows if r["mechanism"] == mech and r.get("status") == "oom"]
            for n in oom:
                ax.axvline(n, color="grey", lw=0.5, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel(labels.get(metric, metric))
    if not panels:
        axes[0][0].text(0.5, 0.5, "nothing measured", ha="center", va="center",
                        transform=axes[0][0].transAxes)
        axes[0][0].set_xticks([])
        axes[0][0].set_yticks([])
    else:
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if rows:
        r0 = rows[0]
        fig.suptitle(title or f"token mixers, {r0['mode']}, batch {r0['batch']}, dim {r0['dim']}, "
                     f"{r0['provenance']['device']} {r0['dtype']}", fontsize=10)
    fig.tight_layout()
    return fig


def accuracy_records(models, *, dataset="cifar10", profile="smoke", seed=0, train=False, root=None):
    """Top-1 of each model from the results store at ``root`` (default: ``store.default_root``), looked up by
    ``train.run``: ``{"model", "top1", "status"}``. Missing runs are trained only when ``train`` (and the
    profile can run here); otherwise they are "not yet run"."""
    from .results import ResultsStore
    from .train import run

    store = ResultsStore(root)
    out = []
    for name in models:
        res = run(name, dataset=dataset, profile=profile, seed=seed, store=store, progress=False, compute="missing" if train else "never")
        if res.get("status") != "done":
            out.append({"model": name, "top1": None, "status": "not yet run"})
        else:
            out.append({"model": name, "top1": res["top1"], "status": "done", "dataset": res["config"]["dataset"],
                        "device": res["provenance"]["device"], "commit": res["provenance"]["commit"]})
    return out


# --------------------------------------------------------------------------------------------------
# the efficiency chapter (notebooks/efficiency.ipynb): settings, measurements and display-ready tables

NOT_ON_CPU = "**not measured on this device** (CUDA memory statistics need a GPU)"
# Efficiency views: (column label on the page, column of ``records_frame``); "{path}" columns come once per path.
VIEWS = {
    "size": [("params (ViX conv.)", "params (paper)"), ("params (true)", "params (true)"), ("Size MB", "Size MB"),
             ("GMACs", "GMACs"), ("GFLOPs", "GFLOPs"), ("GFLOPs (seed 003)", "GFLOPs (seed 003 conv.)")],
    "memory": [("train GB", "train GB ({path})"), ("train GB alloc", "train GB alloc ({path})"),
               ("infer GB @64", "infer GB @64 ({path})")],
    "speed": [("train step ms", "train step ms ({path})"), ("img/s", "img/s ({path})"),
              ("img/s batch", "img/s batch ({path})")],
    "paths": [("train GB", "train GB ({path})"), ("train step ms", "train step ms ({path})")],
}
SWEEP_LABELS = {"ms": "ms per step", "peak_mb": "peak MB", "gflops": "GFLOPs", "estimate_gb": "estimate GB"}


def chapter_settings(profile="smoke", *, models=None, batch_size=None, tokens=None, iters=None,
                                accuracy_models=None, gpu=None):
    """The efficiency chapter's parameters resolved from ``profile``: a dict of ``profile``, ``smoke``,
    ``device`` ("cuda" for a GPU profile on a machine with a GPU (``gpu``, default: detected), else "cpu"),
    ``models`` (default every registered model), ``overrides`` (the smoke profile's one-block models),
    ``batch_size`` (training memory: 2 in smoke, else 64, the ViX paper's Figure 4), ``tokens`` of the scaling
    sweep (256 and 1024 on a CPU; up to 16384 on a GPU), ``iters`` (throughput forwards: 2 on a CPU, None =
    seed 003's 100 on a GPU) and ``accuracy_models`` (default all; smoke: vit and fnet, to stay fast)."""
    from .profiles import get_profile
    from .models import list_models

    prof = get_profile(profile)
    smoke = profile == "smoke"
    gpu = torch.cuda.is_available() if gpu is None else gpu
    device = "cuda" if gpu and not smoke else "cpu"
    models = list(models or list_models())
    return {"profile": profile, "smoke": smoke, "device": device, "models": models,
            "overrides": dict(prof.get("model_overrides", {})) if smoke else {},
            "batch_size": batch_size or (2 if smoke else 64),
            "tokens": tuple(tokens or ((256, 1024) if device == "cpu" else (256, 1024, 4096, 16384))),
            "iters": iters or (2 if device == "cpu" else None),
            "accuracy_models": list(accuracy_models or (["vit", "fnet"] if smoke else models))}


def load_or_measure(settings, *, dataset="cifar10", remeasure=False, measure_missing=True, name="efficiency",
                    root=None):
    """The chapter's measurements: ``settings`` (``chapter_settings``) plus ``records``
    (``measure_many``), ``sweep`` (``scaling_sweep``), ``frame`` (``records_frame``), ``source``, ``root``
    (the results store the measurements, and ``chapter_accuracy``'s training runs, are read from) and
    ``measure_missing``.

    A GPU profile reads its stored measurements (``load_measurements``) unless ``remeasure``; without them
    it measures when it runs on a GPU and saves them (``save_measurements``), and on a CPU it measures
    nothing: ``source`` starts with "not yet run". The smoke profile always measures, on the CPU, and saves
    nothing. Stored measurements bring their own device, batch size and sweep sizes.
    ``measure_missing=False`` measures nothing on any device (``remeasure`` is ignored): stored measurements,
    else "not yet run"; ``chapter_accuracy`` then trains nothing either."""
    run = dict(settings)
    smoke, device = run["smoke"], run["device"]
    stored = None if smoke or (remeasure and measure_missing) else measure.load_measurements(run["profile"], name, root)
    if stored is not None:
        records, sweep = stored["records"], stored["sweep"]
        run.update(device=stored["device"], batch_size=stored["batch_size"],
                   tokens=tuple(sorted({r["tokens"] for r in sweep})) or run["tokens"],
                   source="stored measurements of this profile (results store)")
    elif measure_missing and (smoke or device == "cuda"):
        cpu = device == "cpu"
        records = measure.measure_many(run["models"], dataset=dataset, device=device, batch_size=run["batch_size"],
                               iters=run["iters"], steps=1 if cpu else 2, cpu_batch=2 if cpu else None,
                               **run["overrides"])
        sweep = measure.scaling_sweep(tokens=run["tokens"], device=device, steps=2 if cpu else 10, warmup=1 if cpu else 3)
        if not smoke:
            measure.save_measurements({"records": records, "sweep": sweep, "device": device,
                               "batch_size": run["batch_size"]}, run["profile"], name, root)
        run["source"] = "measured in this run"
    else:
        records, sweep = [], []
        why = "this profile needs a GPU" if measure_missing else "this page measures nothing"
        run["source"] = f"not yet run: {why} and no stored measurements exist"
    run.update(records=records, sweep=sweep, frame=records_frame(records), root=root, measure_missing=measure_missing)
    return run


def measure_references(names, settings, *, cpu_only=False):
    """Seed 003's kind of model beside ours: the ``timm`` architectures ``names`` (random weights, 224 x 224),
    measured like ``load_or_measure``'s models (on a CPU parameters and FLOPs only). ``cpu_only`` runs on the
    CPU whatever ``settings["device"]``, so nothing is measured on a GPU (pages rendered from stored results).
    Returns a dict like ``load_or_measure``'s; ``source`` says when ``timm`` is not installed."""
    import importlib.util

    device = "cpu" if cpu_only else settings["device"]
    run = {**settings, "device": device, "names": list(names), "sweep": []}
    if importlib.util.find_spec("timm") is None:
        records = []
        run["source"] = (f"`timm` is not installed here: the reference architectures ({', '.join(names)}) are "
                         "**not measured** on this page.")
    else:
        import timm

        cpu = device == "cpu"
        records = [measure.measure_model(timm.create_model(n, pretrained=False), name=n, input_size=(3, 224, 224),
                                 device=device, batch_size=settings["batch_size"], iters=settings["iters"],
                                 paths=() if cpu else ("fused",), cpu_batch=2) for n in names]
        run["source"] = "measured in this run" + (": on a CPU only parameters and FLOPs" if cpu else "")
    run.update(records=records, frame=records_frame(records))
    return run


def _device_of(run):
    prov = next((r["provenance"] for r in run["records"] if r.get("provenance")), None)
    return prov["device"] if prov else provenance(run["device"])["device"]


def _empty_note(run):
    return NOT_YET_RUN if run["source"].startswith("not yet run") else run["source"]


def measurement_note(run):
    """Markdown: where the chapter's numbers come from (measured, stored, not yet run), device, batch, sweep
    (only the first when nothing was measured: no device, batch or sweep is behind the page)."""
    if run["source"].startswith("not yet run"):
        return f"Measurements: {run['source']}."
    note = (f"Measurements: {run['source']}; device: **{_device_of(run)}**; training batch {run['batch_size']}; "
            f"sweep tokens {list(run['tokens'])}.")
    if run["overrides"]:
        note += f" Model overrides {run['overrides']}: the smoke profile's one-block models."
    return note


def provenance_note(run, part="records"):
    """Markdown: ``report.provenance_line`` of a run's ``records`` or ``sweep`` (it says so when nothing was
    measured)."""
    return provenance_line(run[part], profile=run["profile"])


def _has_number(frame):
    import pandas as pd

    return bool(frame.apply(pd.to_numeric, errors="coerce").notna().to_numpy().any())


def view_frame(run, view):
    """One narrow view of ``run["frame"]`` with short model names: ``view`` is "size" (parameters, Size MB,
    FLOPs), "memory" (training and inference GB per path), "speed" (training step and throughput per path),
    "paths" (training GB and step time, authors' path against fused) or "all" (every column, flat labels,
    for a few models shown transposed); per-path views have (path, metric) columns. Columns the records do
    not have are left out."""
    import pandas as pd

    frame = run["frame"]
    if view == "all":
        parts = [view_frame(run, v) for v in ("size", "memory", "speed")]
        for part in parts[1:]:
            part.columns = [f"{metric} ({path})" for path, metric in part.columns]
        return pd.concat(parts, axis=1)
    spec = VIEWS[view]
    if view == "size":
        cols = {label: col for label, col in spec if col in frame}
    else:
        order = [(p, label, col.format(path=p)) for p in PATHS for label, col in spec]
        if view == "paths":  # metric over path: both paths of one metric side by side
            order = [(label, p, col.format(path=p)) for label, col in spec for p in PATHS]
        cols = {(a, b): col for a, b, col in order if col in frame}
    out = pd.DataFrame({key: frame[col] for key, col in cols.items()}, index=frame.index)
    if view != "size":
        out.columns = pd.MultiIndex.from_tuples(list(out.columns), names=[None, None])
    out.index = [_label(m) for m in frame.index]
    return out


def table(run, view, *, caption=None, transpose=False):
    """``view_frame`` for the page (``page_table``; ``transpose``: one column per model): "not yet run"
    when nothing was measured, and a one-line note instead of a table of "n/a (cpu)" when this device
    measured none of its numbers."""
    table = view_frame(run, view)
    table = table.T if transpose else table
    if run["frame"].empty:
        return page_table(table, empty=_empty_note(run))
    if not _has_number(table):
        what = {"memory": f"Training and inference memory: {NOT_ON_CPU}.",
                "speed": "Training-step time and throughput: **not measured** for these models on this device."}
        return page_table(None, empty=what.get(view, f"{view}: **not measured on this device**."))
    return page_table(table, caption=caption)


def memory_note(run):
    """Markdown: what fills the GPU-memory columns when this device cannot; else the provenance line."""
    if run["frame"].empty or run["device"] != "cpu":
        return provenance_note(run)
    return (f"GPU memory is {NOT_ON_CPU}; run the `budget` or `paper` profile on a GPU to fill these columns "
            "(and Table 1's GPU (GB) column via `vixnb.measure.gpu_memory_column`).")


def chapter_accuracy(run, *, dataset="cifar10"):
    """``accuracy_records`` of ``run["accuracy_models"]`` in the run's results store: stored runs of the profile;
    the smoke profile trains the missing ones (a few batches of synthetic data) unless the run measures
    nothing (``load_or_measure(..., measure_missing=False)``), other profiles mark them "not yet run"."""
    train = run["smoke"] and run.get("measure_missing", True)
    return accuracy_records(run["accuracy_models"], dataset=dataset, profile=run["profile"], train=train,
                            root=run.get("root"))


def accuracy_note(run, accuracy):
    """Markdown: how many models have an accuracy for the Pareto fronts, which are missing, and provenance."""
    missing = [a["model"] for a in accuracy if a["status"] != "done"]
    note = (f"Accuracy: {len(accuracy) - len(missing)} of {len(accuracy)} models have a stored `{run['profile']}` run"
            + (f"; not yet run: {', '.join(map(_label, missing))}" if missing else "") + ".")
    if run["smoke"]:
        note += " (In smoke, models not listed in `accuracy_models` are not trained, to keep the page fast.)"
    return note + " " + provenance_note(run)


def our_correlation_table(run, *, path="fused"):
    """``correlation_table`` of the run for the page, or a note when too few metrics were measured."""
    if run["frame"].empty:
        return page_table(None, empty=NOT_YET_RUN)
    ours = correlation_table(run["frame"], path=path)
    caption = f"Ours ({len(run['frame'])} models, {path} path)"
    return page_table(ours, caption=caption, blank="", decimals=2,
                      empty="Not enough measured metrics on this device for a correlation table.")


def correlation_note(run):
    """Markdown: the provenance line, and what CPU timings in the correlation table are worth."""
    note = provenance_note(run)
    if run["frame"].empty or run["device"] != "cpu":
        return note
    return ("On a CPU the timings are wall-clock times of tiny batches on a shared machine: their correlations "
            "say more about the machine's load than about the models. " + note)


def memory_fit_note(run, fit):
    """Markdown: our fit of training memory against GFLOPs (``plot_memory_fit``) beside seed 003's, and why
    there is none when there is none."""
    theirs = "Seed 003's line is RAM[GB] ≈ 25.43 · GFLOPs + 25.50"
    if run["frame"].empty:
        return f"{NOT_YET_RUN} {theirs}."
    if fit is None:
        note = f"Training memory is {NOT_ON_CPU}: no fit is made. {theirs}."
    else:
        note = (f"Ours (batch {run['batch_size']}, authors' path, {fit['points']} models): RAM[GB] ≈ "
                f"{fit['slope_gb_per_gflop']:.2f} · GFLOPs + {fit['intercept_gb']:.2f}"
                + (f", Pearson r = {fit['pearson_r']:.2f}" if fit["pearson_r"] is not None else "")
                + ". Seed 003: RAM[GB] ≈ 25.43 · GFLOPs + 25.50 (correlation 0.85).")
    return note + " " + provenance_note(run)


def _sweep_cell(row, metric):
    v = metric_value(row, metric)
    if v is None:
        return short_status(row.get("status")) if not str(row.get("status", "ok")).startswith("ok") else None
    return "oom" if math.isinf(v) else v


def sweep_table(run, metrics=("ms", "peak_mb")):
    """The scaling sweep for the page: one row per mechanism, (metric, tokens) columns; "oom" and "skipped
    (budget)" where a step did not run, metrics without any value (GPU memory on a CPU) left out."""
    import pandas as pd

    rows = run["sweep"]
    metrics = [m for m in metrics if any(metric_value(r, m) is not None and math.isfinite(metric_value(r, m)) for r in rows)]
    columns = [(SWEEP_LABELS.get(m, m), n) for m in metrics for n in sorted({int(r["tokens"]) for r in rows})]
    cells = {}
    for metric in metrics:
        for r in rows:
            key = (SWEEP_LABELS.get(metric, metric), int(r["tokens"]))
            cells.setdefault(r["mechanism"], {})[key] = _sweep_cell(r, metric)
    frame = pd.DataFrame.from_dict(cells, orient="index")
    if not frame.empty:
        frame = frame[columns]
        frame.columns = pd.MultiIndex.from_tuples(columns, names=["", "tokens"])
    caption = f"batch {rows[0]['batch']}, dim {rows[0]['dim']}, {rows[0]['mode']}" if rows else None
    return page_table(frame, caption=caption, empty=_empty_note(run) if not rows else "Nothing measured.")


def crossover_table(run, reference="softmax (fused)"):
    """``crossover_frame`` against one ``reference`` for the page: time and shape-based metrics, and measured
    peak memory where the sweep ran on a GPU."""
    metrics = ["ms", "peak_mb", "gflops", "estimate_gb"] if run["device"] == "cuda" else ["ms", "gflops", "estimate_gb"]
    xs = crossovers(run["sweep"], references=(reference,))
    frame = crossover_frame(xs, metrics=metrics) if xs else None
    if frame is not None and not frame.empty:
        frame.columns = [SWEEP_LABELS.get(m, m) for _, m in frame.columns]
    return page_table(frame, caption=f"cheaper than {reference}", empty=_empty_note(run))


def _fused_memory(run):
    """Each mechanism at the sweep size nearest the ViX sequence length, relative to both softmax forms."""
    import pandas as pd

    if not run["sweep"]:
        return pd.DataFrame(), {}
    near = min(run["tokens"], key=lambda n: abs(n - 1025))
    at = {r["mechanism"]: r for r in run["sweep"] if r["tokens"] == near}
    gpu = run["device"] == "cuda"
    metric, column = ("peak_mb", "peak MB") if gpu else ("estimate_gb", "estimate GB")
    what = "measured peak memory (MB)" if gpu else "shape-based memory estimate (GB)"
    def measured(r, m):  # a finite number, None where the step did not run or ran out of memory
        v = metric_value(r, m)
        return v if v is not None and math.isfinite(v) else None

    mat, fus = (measured(at.get(f"softmax ({f})"), metric) for f in ("materialised", "fused"))
    rows = {}
    for mech, r in at.items():
        v = measured(r, metric)
        rows[mech] = {column: v, "ms per step": measured(r, "ms"),
                      "× materialised softmax": v / mat if v and mat else None,
                      "× fused softmax": v / fus if v and fus else None}
    meta = {"tokens": near, "batch": run["sweep"][0]["batch"], "what": what,
            "device": run["sweep"][0]["provenance"]["device"]}
    return pd.DataFrame.from_dict(rows, orient="index"), meta


def fused_memory_table(run):
    """The ViX memory claim with fused attention: each mechanism's memory at the sweep size nearest 1,025
    tokens, relative to the materialised and to the fused softmax."""
    table, meta = _fused_memory(run)
    caption = f"{meta['tokens']} tokens, batch {meta['batch']}, {meta['what']}" if meta else None
    return page_table(table, caption=caption, empty=_empty_note(run))


def fused_memory_note(run):
    """Markdown: how much memory the materialised softmax costs over the fused one, and where the
    linear-attention mechanisms fall against each; then the sweep's provenance line."""
    table, meta = _fused_memory(run)
    note = provenance_note(run, "sweep")
    if table.empty:
        return note
    rel = table["× fused softmax"]
    linear = rel[[m for m in table.index if m.startswith(("performer", "linformer", "nystrom", "linear"))]].dropna()
    ratio = rel.get("softmax (materialised)")
    if linear.empty or not ratio or math.isnan(ratio):
        return note
    return (f"At this size the materialised softmax needs {ratio:.1f}× the memory of the fused one "
            f"({meta['what']}, {meta['device']}). Relative to the materialised softmax the linear-attention "
            f"mechanisms need {linear.min() / ratio:.2f}–{linear.max() / ratio:.2f}×; relative to the fused "
            f"softmax, {linear.min():.2f}× ({linear.idxmin()}) to {linear.max():.2f}× ({linear.idxmax()}). " + note)
