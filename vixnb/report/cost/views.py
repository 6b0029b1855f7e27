"""Page pieces for cost measurements: the parameters, FLOPs, memory and time of models (``vixnb.measure``
records; the efficiency measurement is read or made by ``report.records.record("efficiency", ...)``); narrow tables of
them; Pareto fronts of accuracy against any cost; correlations between costs beside a paper's; a line fit of one cost
against another; and the token-mixer scaling sweep (time, memory, crossovers). Plain functions of records and
DataFrames."""
from __future__ import annotations

import math
import numbers

import matplotlib.pyplot as plt
import pandas as pd

from ... import measure
from ...measure.costs import shape_records  # noqa: F401  (the pages' counts from shapes)
from ...escape import plain_text
from ..figures.charts import PAGE_WIDTH, TEXT_PT, palette

FAVOR_GFLOPS = "GFLOPs (favor convention)"  # the favor paper's FLOP convention (one FLOP per MAC, element-wise ops)
MISSING = "not yet run"
TRAINING_MEMORY = {"GPU GB reserved": "train GB ({path})", "GPU GB allocated": "train GB alloc ({path})"}
# The narrow views of ``cost_frame``: page label -> frame column; "{path}" columns come once per execution path.
VIEWS = {
    "size": {"params (ViX convention)": "params (paper)", "params (true)": "params (true)", "Size MB": "Size MB",
             "GMACs": "GMACs", "GFLOPs": "GFLOPs", "GFLOPs (favor convention)": FAVOR_GFLOPS},
    "training": {"GB reserved": "train GB ({path})", "GB allocated": "train GB alloc ({path})",
                 "step ms": "train step ms ({path})"},
    "inference": {"GB @64": "infer GB @64 ({path})", "img/s": "img/s ({path})", "at batch": "img/s batch ({path})"},
}
SWEEP_LABELS = {"ms": "ms per step", "peak_mb": "peak MB", "gflops": "GFLOPs", "estimate_gb": "estimate GB"}


# --------------------------------------------------------------------------------------------------
# the records as narrow tables

def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _whole(v):
    return int(v) if _is_number(v) else v


def _counts(column):
    """Whether every number of ``column`` is whole (parameter counts, batch sizes: shown without decimals)."""
    numbers = [v for v in column if _is_number(v)]
    return bool(numbers) and all(float(v).is_integer() for v in numbers)


def _has_numbers(frame, columns):
    return any(_is_number(v) for c in columns if c in frame for v in frame[c])


def cost_frame(records, *, training_memory=None):
    """One row per model of ``records`` (``measure.records_frame``; the favor FLOP column named
    ``FAVOR_GFLOPS``). Where the records hold no training-memory number (nothing measured on a GPU), the
    training-memory columns come from ``training_memory``, a stored ``measure.gpu_memory_column`` record
    (``{"rows", "provenance"}``, e.g. ``report.records.gpu_memory``): GB only, its step times are not taken.
    ``frame.attrs["training_memory"]``: the records those columns come from (for ``report.records.provenance_line``)."""
    frame = measure.records_frame(records)
    frame = frame.rename(columns={measure.FAVOR_GFLOPS_COLUMN: FAVOR_GFLOPS})
    columns = [c.format(path=p) for c in TRAINING_MEMORY.values() for p in measure.PATHS]
    sources = [r for r in records if r.get("training")]
    if not _has_numbers(frame, columns) and training_memory:
        frame = frame.astype(object)
        for model, row in training_memory["rows"].items():
            for key, value in row.items():
                what, _, label = key.partition(", ")  # "GPU GB reserved", "authors (fp32)"
                if what in TRAINING_MEMORY and model in frame.index:
                    frame.loc[model, TRAINING_MEMORY[what].format(path=label.split(" ")[0])] = value
        sources = [training_memory]
    frame.attrs["training_memory"] = sources
    return frame


def cost_view(frame, view, *, order=None, labels=None, missing=MISSING):
    """One narrow table of ``cost_frame``: ``view`` is "size" (parameters, Size MB, FLOPs), "training" (memory
    and step time of a training step) or "inference" (inference memory, throughput and its batch), the last
    two with (path, label) columns. Rows follow ``order`` (default: the frame's), named by ``labels``. A
    column without any value is left out; an empty cell reads ``missing``, or the record's status (an
    error, "not measured: ..."). With no column left: the statuses, or an empty frame."""
    order = list(order) if order is not None else list(frame.index)
    rows = frame.reindex(order)
    if view == "size":
        columns = {label: col for label, col in VIEWS[view].items()}
    else:
        columns = {(p, label): col.format(path=p) for p in measure.PATHS for label, col in VIEWS[view].items()}
    kept = {key: col for key, col in columns.items() if col in rows and rows[col].notna().any()}
    status = rows["status"] if "status" in rows else pd.Series(None, index=rows.index, dtype=object)
    names = [labels.get(m, m) if labels else m for m in order]
    if not kept:
        if status.notna().any():
            return pd.DataFrame({"status": status.fillna(missing).tolist()}, index=names)
        return pd.DataFrame()
    out = pd.DataFrame({key: rows[col].map(_whole) if _counts(rows[col]) else rows[col]
                        for key, col in kept.items()}).astype(object)
    for model in order:
        why = status.get(model)
        out.loc[model] = out.loc[model].where(out.loc[model].notna(), why if isinstance(why, str) else missing)
    if view != "size":
        out.columns = pd.MultiIndex.from_tuples(list(out.columns))
    out.index = names
    return out


# --------------------------------------------------------------------------------------------------
# accuracy against cost: Pareto fronts

def _label_points(ax, pts, labels, *, fontsize=9):
    """Name each point of ``pts`` (columns x, y; index: model) to its right; going up from the lowest point,
    a label whose box (estimated from its length, in points) would overlap one already placed moves up
    until it does not. Call it once the axis scales and limits are set."""
    ax.autoscale_view()
    to_points = 72 / ax.figure.dpi
    placed = []
    for name, (x, y) in pts.sort_values(["y", "x"]).iterrows():
        text = labels.get(name, name) if labels else name
        px, py = ax.transData.transform((x, y)) * to_points
        left, right, dy = px + 3, px + 3 + 0.55 * fontsize * len(text), -fontsize / 2
        while any(left < r and l < right and abs(py + dy - b) < fontsize for l, r, b in placed):
            dy += fontsize / 2
        placed.append((left, right, py + dy))
        ax.annotate(text, (x, y), xytext=(3, dy), textcoords="offset points", fontsize=fontsize)


def pareto_front(xs, ys, *, x_lower_is_better=True, y_higher_is_better=True):
    """Indices of the points no other point beats in both coordinates (missing values are never on it)."""
    pts = [(i, float(x), float(y)) for i, (x, y) in enumerate(zip(xs, ys)) if _is_number(x) and _is_number(y)]
    sx, sy = (1 if x_lower_is_better else -1), (1 if y_higher_is_better else -1)

    def dominates(a, b):
        return (sx * a[1] <= sx * b[1] and sy * a[2] >= sy * b[2]) and (sx * a[1] < sx * b[1] or sy * a[2] > sy * b[2])

    return sorted(p[0] for p in pts if not any(dominates(q, p) for q in pts if q[0] != p[0]))


@plain_text
def plot_pareto_fronts(frame, accuracy, panels, *, labels=None, title=None, y_label="top-1 (%)"):
    """Accuracy against each cost of ``panels`` (``{column: (axis label, lower is better)}``), one panel per
    cost with points, its Pareto front circled and joined in red. ``accuracy`` maps a model (the frame's
    index) to its top-1; a model without one, or without the cost, has no point. Costs without any point
    are named under the figure. None when no panel has a point."""
    acc = pd.to_numeric(pd.Series({m: (accuracy.get(m) if accuracy is not None else None) for m in frame.index},
                                  dtype=object), errors="coerce")
    data = {}
    for col, spec in panels.items():
        xs = pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(dtype="float64")
        pts = pd.DataFrame({"x": xs, "y": acc}).dropna()
        if not pts.empty:
            data[col] = (pts, *spec)
    if not data:
        return None
    ncols = min(len(data), 2)
    nrows = math.ceil(len(data) / ncols)
    fig = plt.figure(figsize=(PAGE_WIDTH, 3.4 * nrows))
    grid = fig.add_gridspec(nrows, ncols)
    # two panels a row; an odd last one spans its row (no empty panel beside it)
    axes = [fig.add_subplot(grid[i // ncols, i % ncols] if i < len(data) - 1 or len(data) % ncols == 0
                            else grid[i // ncols, :]) for i in range(len(data))]
    for ax, (pts, x_label, lower) in zip(axes, data.values()):
        on = pts.iloc[pareto_front(list(pts["x"]), list(pts["y"]), x_lower_is_better=lower)].sort_values("x")
        ax.scatter(pts["x"], pts["y"], s=16, color="tab:blue", zorder=3)
        ax.scatter(on["x"], on["y"], s=70, facecolors="none", edgecolors="tab:red", zorder=4)
        if len(on) > 1:
            ax.step(on["x"], on["y"], where="post" if lower else "pre", color="tab:red", lw=1)
        if pts["x"].max() > 20 * max(pts["x"].min(), 1e-12):
            ax.set_xscale("log")
        ax.set_xlabel(x_label, fontsize=9)
        ax.set_ylabel(y_label, fontsize=9)
        ax.tick_params(labelsize=TEXT_PT)
        ax.margins(x=0.15, y=0.12)
        ax.grid(alpha=0.3)
        _label_points(ax, pts, labels)
    left = [spec[0] for col, spec in panels.items() if col not in data]
    if left:
        fig.text(0.5, 0.005, f"No points yet ({MISSING}): " + ", ".join(left), ha="center", va="bottom",
                 fontsize=TEXT_PT)
    fig.suptitle(title or "accuracy against each cost (red: the Pareto front)", fontsize=TEXT_PT + 1)
    fig.tight_layout(rect=(0, 0.04 if left else 0, 1, 1))
    return fig


# --------------------------------------------------------------------------------------------------
# which cost predicts which: correlations, and a line fit

def printed_correlations(printed):
    """A paper's correlation table as printed (``papers.table``'s ``columns`` and ``rows`` of an upper
    triangle) as a DataFrame; blanks are NaN."""
    return pd.DataFrame(list(printed["rows"].values()), index=list(printed["rows"]),
                        columns=printed["columns"]).astype(float)


def printed_accuracy_table(printed):
    """The ``favor`` paper's Table 1 (``papers.table("favor", "table1")``) as printed: one row per model (its printed
    label) with the ✓ of "DeiT based", the original paper's top-1 with its printed mark (↑ 384 px, ↓ 112 px,
    * distillation), the top-1 with the paper's pipeline and the printed difference, signed."""
    rows = {entry["label"]: {"DeiT based": "✓" if entry["deit_based"] else "",
                             "orig. top-1": f"{float(entry['orig_top1'])}{entry.get('orig_mark', '')}",
                             "new top-1": f"{entry['top1']:.2f}",
                             "Δ": f"{entry['delta']:+.2f}"}
            for entry in printed["rows"].values()}
    return pd.DataFrame.from_dict(rows, orient="index")


def correlation_pairs(frame, columns, paper, *, min_points=3):
    """Pearson correlations of costs of ``frame`` beside a paper's, one row per pair the paper prints
    (``paper``: ``printed_correlations``): "paper", "ours" and "models" (how many models have both
    numbers). ``columns`` maps the paper's labels to columns of ``frame``; "ours" reads "not yet run" where
    fewer than ``min_points`` models have both."""
    def numbers(label):
        col = columns.get(label)
        return pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(dtype="float64")

    rows = {}
    for a in paper.index:
        for b in paper.columns:
            if pd.isna(paper.at[a, b]):
                continue
            both = pd.DataFrame({"a": numbers(a), "b": numbers(b)}).dropna()
            ours = float(both["a"].corr(both["b"])) if len(both) >= min_points else None
            rows[f"{a} – {b}"] = {"paper": float(paper.at[a, b]),
                                  "ours": MISSING if ours is None or math.isnan(ours) else ours,
                                  "models": len(both)}
    return pd.DataFrame.from_dict(rows, orient="index").astype(object)


def line_fit(frame, x, y, *, min_points=2):
    """The least-squares line of column ``y`` against ``x`` over the rows with both numbers:
    ``{"slope", "intercept", "pearson_r", "points"}`` (``pearson_r`` None under 3 points); None under
    ``min_points`` rows."""
    pts = pd.DataFrame({"x": pd.to_numeric(frame.get(x), errors="coerce") if x in frame else None,
                        "y": pd.to_numeric(frame.get(y), errors="coerce") if y in frame else None},
                       index=frame.index).dropna()
    if len(pts) < min_points:
        return None
    slope, intercept = measure.fit_line(list(pts["x"]), list(pts["y"]))
    return {"slope": slope, "intercept": intercept, "points": len(pts),
            "pearson_r": float(pts["x"].corr(pts["y"])) if len(pts) > 2 else None}


def line_formula(slope, intercept, x="x"):
    """A fitted line as a formula: ``4.27 x − 0.86`` (never ``+ -0.86``)."""
    sign = "−" if intercept < 0 else "+"
    return f"{slope:.2f} {x} {sign} {abs(intercept):.2f}"


def fits_frame(fits):
    """Line fits side by side, one row each (``{name: line_fit or None}``); a fit not made reads "not yet run"."""
    keys = {"slope": "slope", "intercept": "intercept", "pearson_r": "Pearson r", "points": "models"}
    rows = [[fit.get(k) if fit else MISSING for k in keys] for fit in fits.values()]
    return pd.DataFrame(rows, index=list(fits), columns=list(keys.values()), dtype=object)


@plain_text
def plot_line_fit(frame, x, y, fit, *, reference=None, labels=None, x_label=None, y_label=None, title=None):
    """Column ``y`` against ``x`` of ``frame``, one labelled point per model, with ``fit`` (``line_fit``) and a
    ``reference`` line ``(slope, intercept, legend)`` dashed, on a log y axis. The points are absent (and the
    figure says so) where ``fit`` is None."""
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 4))
    ax.set_yscale("log")
    xs = pd.to_numeric(frame[x], errors="coerce") if x in frame else pd.Series(dtype="float64")
    top = float(xs.max()) * 1.1 if xs.notna().any() else 1.0
    grid = [top * i / 100 for i in range(101)]
    if reference:
        slope, intercept, legend = reference
        ax.plot(grid, [slope * g + intercept for g in grid], color="grey", ls="--", label=legend)
    if fit is None:
        ax.text(0.5, 0.3, f"ours: {MISSING}", ha="center", va="center", transform=ax.transAxes)
    else:
        pts = pd.DataFrame({"x": xs, "y": pd.to_numeric(frame[y], errors="coerce")}).dropna()
        ax.scatter(pts["x"], pts["y"], s=16, zorder=3)
        line = [(g, fit["slope"] * g + fit["intercept"]) for g in grid if g >= 0.9 * pts["x"].min()]
        ax.plot(*zip(*[(g, v) for g, v in line if v > 0]), color="tab:red",  # over our points' range
                label=f"ours: {line_formula(fit['slope'], fit['intercept'])}")
        _label_points(ax, pts, labels)
    ax.legend(fontsize=TEXT_PT)
    ax.grid(alpha=0.3)
    ax.set_xlabel(x_label or x)
    ax.set_ylabel(y_label or y)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------
# the token-mixer scaling sweep

@plain_text
def plot_scaling(rows, *, metrics=("ms", "peak_mb", "estimate_gb"), title=None):
    """Log-log curves of each mechanism of ``rows`` (``measure.scaling_sweep``) against tokens, one panel per
    metric with values (dotted verticals: out of memory). None without rows."""
    panels = [m for m in metrics if any(r.get(m) is not None for r in rows)]
    if not panels:
        return None
    labels = {"ms": "time per step (ms)", "peak_mb": "peak memory (MB, measured)",
              "estimate_gb": "memory estimate (GB, from shapes)", "gflops": "forward GFLOPs"}
    fig, axes = plt.subplots(1, len(panels),
                             figsize=(PAGE_WIDTH, 3.4 + 0.3 * math.ceil(len(set(r['mechanism'] for r in rows)) / 3)),
                             squeeze=False)
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    colors = palette(mechs)
    for ax, metric in zip(axes[0], panels):
        for i, mech in enumerate(mechs):
            pts = [(r["tokens"], r[metric]) for r in rows if r["mechanism"] == mech and r.get(metric) is not None]
            if pts:
                ax.plot(*zip(*pts), "--" if "materialised" in mech else "-", marker="os^Dv"[i % 5], ms=3,
                        color=colors[mech], label=mech)
            for n in [r["tokens"] for r in rows if r["mechanism"] == mech and r.get("status") == "oom"]:
                ax.axvline(n, color="grey", lw=0.5, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens", fontsize=9)
        ax.set_ylabel(labels.get(metric, metric), fontsize=9)
        ax.tick_params(labelsize=TEXT_PT)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=3, frameon=False, fontsize=TEXT_PT)
    r0 = rows[0]
    fig.suptitle(title or f"token mixers, {r0['mode']}, batch {r0['batch']}, dim {r0['dim']}, "
                 f"{r0['provenance']['device']}, {r0['dtype']}", fontsize=TEXT_PT)
    fig.tight_layout(rect=(0, 0.3 * math.ceil(len(mechs) / 3) / fig.get_size_inches()[1], 1, 1))
    return fig


def _sweep_cell(row, metric):
    v = measure.metric_value(row, metric)
    if v is None:
        status = row.get("status") or "ok"
        return None if status.startswith("ok") else measure.short_status(status)
    return "oom" if math.isinf(v) else v


def sweep_table(rows, metric):
    """One ``metric`` of the scaling sweep: one row per mechanism, one column per token count; "oom" and
    "skipped (budget)" where a step did not run. Empty when no row has a value of ``metric``."""
    if not any(_is_number(measure.metric_value(r, metric)) for r in rows):
        return pd.DataFrame()
    cells = {}
    for r in rows:
        cells.setdefault(r["mechanism"], {})[int(r["tokens"])] = _sweep_cell(r, metric)
    frame = pd.DataFrame.from_dict(cells, orient="index").astype(object)
    frame = frame[sorted(frame.columns)]
    frame.columns = pd.Index(list(frame.columns), name="tokens")
    return frame


def crossover_table(rows, reference, metrics=("ms", "peak_mb", "gflops", "estimate_gb")):
    """Where each mechanism becomes cheaper than ``reference`` (``measure.crossovers``), one column per metric
    of ``metrics`` that the sweep measured; empty without rows."""
    metrics = [m for m in metrics if any(_is_number(measure.metric_value(r, m)) for r in rows)]
    found = measure.crossovers(rows, references=(reference,)) if rows and metrics else []
    if not found:
        return pd.DataFrame()
    frame = measure.crossover_frame(found, metrics=metrics)
    frame.columns = [SWEEP_LABELS.get(m, m) for _, m in frame.columns]
    return frame


def relative_memory(rows, *, tokens, metric="peak_mb"):
    """Each mechanism's ``metric`` (and time per step) at the token count of ``rows`` nearest ``tokens``,
    relative to the materialised and to the fused softmax (``measure.MATERIALISED_SOFTMAX``,
    ``measure.FUSED_SOFTMAX``); None where a step did not run. Empty without rows."""
    if not rows:
        return pd.DataFrame()
    near = min({r["tokens"] for r in rows}, key=lambda n: abs(n - tokens))
    at = {r["mechanism"]: r for r in rows if r["tokens"] == near}

    def value(row, m):
        v = measure.metric_value(row, m) if row else None
        return v if _is_number(v) else None

    materialised, fused = (value(at.get(name), metric) for name in (measure.MATERIALISED_SOFTMAX,
                                                                    measure.FUSED_SOFTMAX))
    out = {}
    for mech, row in at.items():
        v = value(row, metric)
        out[mech] = {SWEEP_LABELS.get(metric, metric): v, "ms per step": value(row, "ms"),
                     "× materialised softmax": v / materialised if v and materialised else None,
                     "× fused softmax": v / fused if v and fused else None}
    frame = pd.DataFrame.from_dict(out, orient="index").astype(object)
    frame.attrs["tokens"] = near
    return frame
