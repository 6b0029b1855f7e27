"""Figures for the page: accuracy against a cost (the paper's panel beside ours, on the same axes), training
curves with a band over random seeds, values per layer, grids of maps, and curves with a band over images."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, LogFormatter, MaxNLocator, NullLocator, ScalarFormatter

from ..layers import shaped_init

MARKERS = ("s", "^", "o", "D", "v", "P")
COLORS = ("tab:blue", "tab:green", "tab:orange", "tab:purple", "tab:red", "tab:brown")



def _drawn(ax):
    """Whether ``ax`` shows data: a line with points, a filled band, an image or a bar of some height."""
    return (any(len(line.get_xdata()) for line in ax.lines) or any(
        len(c.get_offsets()) or len(c.get_paths()) for c in ax.collections) or bool(ax.images)
        or any(getattr(p, "get_height", lambda: 0)() for p in ax.patches))


#: words of an axis label that name a cost (time, memory): such an axis starts at 0
COST_UNITS = ("seconds", "(s)", " ms", "GB", "MB", "memory")


def without_empty_panels(fig, *, missing="ours: not yet run (no result of ours is stored; the plan lists the runs)"):
    """``fig`` with no empty axes: panels without data leave it (a single row of panels closes up; the others are
    hidden) and one line under it says ``missing``; a figure with no data at all becomes that line alone. An axis of
    a cost (its label names a unit of ``COST_UNITS``, on a linear scale) starts at 0."""
    for ax in fig.axes:
        if ax.get_yscale() == "linear" and any(u in ax.get_ylabel() for u in COST_UNITS) and ax.get_ylim()[0] > 0:
            ax.set_ylim(bottom=0)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    empty = [ax for ax in shown if not _drawn(ax)]
    if not empty:
        return fig
    width, height = fig.get_size_inches()
    if len(empty) == len(shown):  # one line of text on an axes without axis (a figure with no axes at all would
        fig.clf()                    # show as its repr, "<Figure size ... with 0 Axes>", on a page)
        fig.set_size_inches(width, 0.4)
        line = fig.add_axes((0, 0, 1, 1))
        line.set_axis_off()
        line.text(0.01, 0.5, missing[:1].upper() + missing[1:] + ".", va="center", fontsize=9)
        return fig
    kept = [ax for ax in shown if ax not in empty]
    y_label = next((ax.get_ylabel() for ax in shown if ax.get_ylabel()), "")
    for ax in kept:  # a panel that shared its y axis with a removed one gets its ticks and label back
        ax.tick_params(axis="y", labelleft=True)
        if not ax.get_ylabel():
            ax.set_ylabel(y_label)
    specs = [ax.get_subplotspec() for ax in shown]
    one_row = all(spec is not None and spec.get_gridspec().nrows == 1 for spec in specs)
    for ax in empty:
        fig.delaxes(ax) if one_row else ax.set_visible(False)
    if one_row:
        grid = fig.add_gridspec(1, len(kept))
        for i, ax in enumerate(kept):
            ax.set_subplotspec(grid[0, i])
        fig.set_size_inches(max(width * len(kept) / len(shown), 4.5), height)
    fig.text(0.5, 0.005, missing, ha="center", va="bottom", fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 0.9 if fig.legends or fig._suptitle else 1))
    return fig

def _spread_labels(points, *, x_span, y_span, gap=0.05, char=0.017, pad=0.015):
    """Label positions (data coordinates) for ``[(label, x, y)]``, each label written to the right of its
    point: going up from the lowest point, a label whose box would overlap one already placed is moved up
    until it does not (boxes are estimated from the label's length)."""
    placed = []
    for label, x, y in sorted(points, key=lambda p: (p[2], p[1])):
        left, right, ly = x + pad * x_span, x + (pad + char * len(label)) * x_span, y
        while any(left < r and l < right and abs(py - ly) < gap * y_span for _, l, r, py in placed):
            ly += gap * y_span / 2
        placed.append((label, left, right, ly))
    return {label: (left, ly) for label, left, _, ly in placed}


def _limits(values, pad=0.12):
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(hi), 1.0)
    return lo - pad * span, hi + pad * span


def accuracy_against_cost(paper, ours, *, x, y, groups, x_label, y_label="top-1 (%)", title=None,
                          panel_titles=("paper", "ours")):
    """Two panels, the paper's points and ours, on the same axis ranges: ``paper`` and ``ours`` are DataFrames
    indexed by display label with numeric columns ``x`` and ``y``; ``groups`` maps a label to its group (one
    marker and colour per group, shown in a legend). Models without a number of ours are named under our
    panel."""
    frames = [f[[x, y]].apply(pd.to_numeric, errors="coerce").dropna() for f in (paper, ours)]
    every = pd.concat(frames)
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 5.0), sharex=True, sharey=True)
    names = list(dict.fromkeys(groups.values()))
    style = {g: (MARKERS[i % len(MARKERS)], COLORS[i % len(COLORS)]) for i, g in enumerate(names)}
    if not every.empty:
        xlim, ylim = _limits(every[x]), _limits(every[y])
        xlim = (xlim[0], xlim[1] + 0.25 * (xlim[1] - xlim[0]))  # room for the labels right of the points
    for ax, frame, name in zip(axes, frames, panel_titles):
        ax.set_title(name)
        ax.set_xlabel(x_label)
        ax.grid(alpha=0.3)
        if frame.empty:
            ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
            continue
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        for label, (px, py) in frame.iterrows():
            marker, color = style.get(groups.get(label), ("o", "grey"))
            ax.scatter(px, py, marker=marker, color=color, s=36, zorder=3)
        spots = _spread_labels([(lab, px, py) for lab, (px, py) in frame.iterrows()],
                               x_span=xlim[1] - xlim[0], y_span=ylim[1] - ylim[0])
        for label, (px, py) in frame.iterrows():
            lx, ly = spots[label]
            ax.annotate(label, (px, py), xytext=(lx, ly), textcoords="data", fontsize=7.5, ha="left",
                        va="center", arrowprops=None if abs(ly - py) < 1e-9 else
                        {"arrowstyle": "-", "lw": 0.4, "color": "grey", "shrinkA": 0, "shrinkB": 2})
    axes[0].set_ylabel(y_label)
    handles = [plt.Line2D([], [], ls="", marker=style[g][0], color=style[g][1], label=g) for g in names]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False, fontsize=9)
    missing = [label for label in paper.index if label not in frames[1].index] if not frames[1].empty else []
    if missing:
        fig.text(0.5, 0.01, "Not in our panel (no result of ours yet): " + ", ".join(missing), fontsize=9,
                 ha="center", va="bottom")
    if title:
        fig.suptitle(title, y=0.995)
    fig.tight_layout(rect=(0, 0.05 if missing else 0, 1, 0.93))
    return without_empty_panels(fig)


def training_curves(results, *, metric="select_top1", labels=None, title=None, y_label="test top-1 (%)", band="range",
                    ax=None):
    """One line per model over epochs: the mean of ``metric`` over the random seeds done, with a band over the
    seeds (none for a single seed): ``band="range"`` from the lowest to the highest seed, ``"std"`` mean ± one
    standard deviation. ``results``: training records (``runs.run``), grouped by model, or a mapping
    ``{name: [records]}`` (one line per name: a paper's runs of one model in several settings). ``ax``: draw
    there (the figure is then the caller's); returns the figure."""
    if band not in ("range", "std"):
        raise ValueError(f"band must be 'range' or 'std', got {band!r}")
    if isinstance(results, dict):
        groups = results.items()
    else:
        groups = {}
        for r in results:
            groups.setdefault(r.get("config", {}).get("model"), []).append(r)
        groups = groups.items()
    curves = {name: [[h[metric] for h in r["history"]] for r in runs if r.get("status") == "done" and r.get("history")]
              for name, runs in groups}
    owned = ax is None
    fig, ax = (plt.subplots(figsize=(8, 4.2)) if ax is None else (ax.figure, ax))
    if not any(curves.values()):
        ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
    for i, (model, runs) in enumerate(curves.items()):  # a line keeps its colour whether or not the others ran
        color = COLORS[i % len(COLORS)] if len(curves) <= len(COLORS) else plt.cm.tab20(i % 20)
        name = labels.get(model, model) if labels else model
        if not runs:
            if any(curves.values()):
                ax.plot([], [], color=color, lw=1.3, ls=":", label=f"{name} (not yet run)")
            continue
        epochs = min(len(c) for c in runs)
        per_epoch = [[c[e] for c in runs] for e in range(epochs)]
        mean = [math.fsum(v) / len(v) for v in per_epoch]
        xs = range(1, epochs + 1)
        ax.plot(xs, mean, color=color, lw=1.3, label=f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})")
        if len(runs) > 1:
            if band == "std":
                std = [math.sqrt(math.fsum((x - m) ** 2 for x in v) / (len(v) - 1)) for v, m in zip(per_epoch, mean)]
                low, high = [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)]
            else:
                low, high = [min(v) for v in per_epoch], [max(v) for v in per_epoch]
            ax.fill_between(xs, low, high, color=color, alpha=0.2)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if any(curves.values()):
        ax.legend(fontsize=7, ncol=2 if len(curves) > 3 else 1, loc="best")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return without_empty_panels(fig) if owned else fig


def curves_beside_paper(groups, printed, *, metric="train_acc", y_label="training accuracy (%)", title=None,
                        panel_titles=("ours", "paper"), sharey=True):
    """Our curves beside the paper's, one panel each (on the same y range unless ``sharey=False``: seconds on
    other hardware), one colour per name in both:
    ``groups`` is ``{name: [records]}`` (``training_curves``: mean over the seeds done, band from the lowest to the
    highest), ``printed`` ``{name: [value per epoch]}`` as the paper prints them (a name it lacks is left out there).
    Returns the figure."""
    fig, (ours, paper) = plt.subplots(1, 2, figsize=(10, 3.6), sharey=sharey)
    names = list(dict.fromkeys([*groups, *printed]))
    colours = {name: COLORS[i % len(COLORS)] for i, name in enumerate(names)}
    done = {name: runs for name, runs in groups.items()
            if any(r.get("status") == "done" and r.get("history") for r in runs)}
    for name, runs in done.items():  # drawn one by one so that a name keeps its colour in both panels
        bands = len(ours.collections)
        training_curves({name: runs}, metric=metric, y_label=y_label, ax=ours)
        ours.lines[-1].set_color(colours[name])
        for band in ours.collections[bands:]:  # none where one seed is done
            band.set_color(colours[name])
    if not done:
        ours.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ours.transAxes)
    for name, values in printed.items():
        paper.plot(range(1, len(values) + 1), values, color=colours[name], lw=1.3, label=name)
    for ax, heading in zip((ours, paper), panel_titles):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7, loc="best")
    ours.set_ylabel(y_label)
    if not sharey:
        paper.set_ylabel(y_label)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return without_empty_panels(fig)


def bars_beside_paper(ours, printed, *, y_label, title=None, panel_titles=("ours", "paper"), sharey=False):
    """One bar per name, ours beside the paper's in two panels (separate y ranges unless ``sharey``: seconds on
    other hardware): ``ours`` and ``printed`` are ``{name: value}``; a name without a number of ours reads "not yet
    run" under its place. Returns the figure."""
    names = list(dict.fromkeys([*printed, *ours]))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=sharey)
    for ax, values, heading in zip(axes, (ours, printed), panel_titles):
        xs = range(len(names))
        heights = [values.get(n) if isinstance(values.get(n), (int, float)) else 0 for n in names]
        ax.bar(xs, heights, color=[COLORS[i % len(COLORS)] for i in xs])
        ax.set_xticks(list(xs), names, rotation=35, ha="right", fontsize=7)
        for x, n in zip(xs, names):
            if not isinstance(values.get(n), (int, float)):
                ax.text(x, 0, "not yet run", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_title(heading, fontsize=10)
        ax.set_ylabel(y_label)
        ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return without_empty_panels(fig)


def per_layer_lines(series, *, y_label, title=None, reference=None, ax=None, log=False):
    """One line per name over layers 1..L: ``series`` is ``{name: [value per layer]}`` (a name without values is
    left out and named in the title's place when none has any); ``reference``: a horizontal line (e.g. 1, the
    uniform map's diagonal prominence). Returns the figure."""
    owned = ax is None
    fig, ax = (plt.subplots(figsize=(6.5, 3.6)) if ax is None else (ax.figure, ax))
    drawn = {name: values for name, values in series.items() if values}
    if not drawn:
        ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
    for i, (name, values) in enumerate(drawn.items()):
        ax.plot(range(1, len(values) + 1), values, marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.2,
                color=COLORS[i % len(COLORS)], label=name)
    if reference is not None:
        ax.axhline(reference, color="grey", lw=0.8, ls="--")
    if log:  # plain tick labels (matplotlib's default 10^k ones need TeX fonts the book's machines may lack)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if drawn:
        ax.set_xlim(0.5, max(len(v) for v in drawn.values()) + 0.5)
    _label(ax, "layer", y_label, legend=bool(drawn))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return without_empty_panels(fig) if owned else fig


def _label(ax, x_label, y_label, *, legend):
    """Axis labels, a light grid, and the legend where anything was drawn."""
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7)


#: the least size of a map's tile, in inches at the figure's 100 dpi: at least 96 pixels on the page
MAP_TILE = 1.2


def map_grid(rows, *, columns, images=None, title=None, cell=MAP_TILE):
    """A grid of square maps, nearest interpolation: ``rows`` is ``{row label: [map per column]}`` (each map a
    2-D array-like; None leaves the cell empty; a string is written in the cell instead, e.g. "no attention
    map"), ``columns`` the column titles; ``images``: an image per row (h, w, 3 uint8) drawn in a first column;
    ``cell``: inches per cell (never under ``MAP_TILE``). Returns the figure."""
    cell = max(cell, MAP_TILE)
    titles = (["image"] if images is not None else []) + list(columns)
    n_rows, n_cols = len(rows), len(titles)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(cell * n_cols + 0.6, cell * n_rows + 0.5), squeeze=False,
                             dpi=100)
    for r, (label, maps) in enumerate(rows.items()):
        cells = ([images[r]] if images is not None else []) + list(maps)
        for c, shown in enumerate(cells):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            if isinstance(shown, str):  # a word a line: the cell is small
                ax.text(0.5, 0.5, "\n".join(shown.split()), ha="center", va="center", fontsize=5.5,
                        transform=ax.transAxes)
            elif shown is not None:
                ax.imshow(np.asarray(shown), interpolation="nearest", cmap=None if images is not None and c == 0 else "viridis")
            if r == 0:
                ax.set_title(titles[c], fontsize=7)
        axes[r][0].set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def training_panels(groups, *, title):
    """Training accuracy and test top-1 per epoch side by side, one line per name of ``groups``
    (``{name: [records]}``), mean ± one standard deviation over the seeds. Returns the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, metric, y_label in [(axes[0], "train_acc", "training accuracy (%)"), (axes[1], "select_top1", "test top-1 (%)")]:
        training_curves(groups, metric=metric, y_label=y_label, band="std", ax=ax, title=f"{title}: {y_label[:-4]}")
    fig.tight_layout()
    return without_empty_panels(fig)


def identity_share_trajectories(groups):
    """One panel per name of ``groups`` (``{name: [records]}`` of shaped-attention runs): alpha/(alpha+beta) of every
    layer over training, mean over the seeds, epoch 0 being the initialisation (the scheme in each run's
    ``alpha_beta`` setting, ``layers.shaped_init``), one line per layer from dark (first) to light (last)."""
    cols = min(3, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.8 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, (name, records) in zip(axes.flat, groups.items()):
        done = [r for r in records if r.get("status") == "done" and r["history"][0].get("alpha_beta")]
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if not done:
            ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
            continue
        scheme = done[0]["config"]["model_overrides"].get("alpha_beta", "uniform")
        depth, epochs = len(done[0]["history"][0]["alpha_beta"]), min(len(r["history"]) for r in done)
        for layer in range(depth):
            a0, b0 = shaped_init(scheme, layer_index=layer + 1, depth=depth)
            share = [a0 / (a0 + b0)] + [math.fsum(a / (a + b) for a, b in (r["history"][e]["alpha_beta"][layer]
                                                                           for r in done)) / len(done)
                                        for e in range(epochs)]
            ax.plot(range(epochs + 1), share, color=plt.cm.viridis(layer / max(depth - 1, 1)), lw=1.1,
                    label=f"layer {layer + 1}" if layer in (0, depth - 1) else None)
        ax.legend(fontsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("α / (α + β)")
    fig.tight_layout()
    return without_empty_panels(fig)


def attention_map_panels(record, *, labels=None, images=None):
    """One ``map_grid`` per run of an attention record (``vixnb.analysis.attention_record``): the class token's
    attention over the patch grid in the first, a quarter, half, three quarters and the last layer, for each
    panel image; ``images``: the panel's images (h, w, 3), drawn first where given. Returns the figures."""
    figures = []
    for row, run in record["runs"].items():
        depth = len(run["class_token"][0])
        shown = sorted({1, max(1, depth // 4), max(1, depth // 2), max(1, 3 * depth // 4), depth})
        side = math.isqrt(len(run["class_token"][0][0]))
        grid = {f"image {k + 1}": [[run["class_token"][k][layer - 1][i * side:(i + 1) * side] for i in range(side)]
                                   for layer in shown] for k in range(len(record["panel"]))}
        name = labels.get(row, row) if labels else row
        figures.append(map_grid(grid, columns=[f"layer {l}" for l in shown], images=images,
                                title=f"{name} (depth {depth}), seed {run['seed']}"))
    return figures


def prominence_figures(record, *, labels=None):
    """Diagonal prominence per layer (heads averaged) of every run of an attention record: the applied map, and
    for shaped attention its softmax part; then the learned alpha/(alpha+beta) per layer (of the kept weights:
    the selected epoch's). Returns the figures."""
    def over_heads(rows):
        return [math.fsum(heads) / len(heads) for heads in rows]

    name = (lambda row: labels.get(row, row)) if labels else (lambda row: row)
    series, share = {}, {}
    for row, run in record["runs"].items():
        series[f"{name(row)}: applied map"] = over_heads(run["prominence"])
        if run["identity_share"]:
            series[f"{name(row)}: softmax part"] = over_heads(run["prominence_softmax"])
            share[name(row)] = run["identity_share"]
    figures = [per_layer_lines(series, y_label="diagonal prominence", reference=1, log=True,
                               title=f"diagonal prominence, {record['prominence_images']} test images")]
    if share:
        figures.append(per_layer_lines(share, y_label="α / (α + β)", title="learned identity share, selected epoch"))
    return figures


def per_layer_panels(panels, *, title=None):
    """Side by side, one ``per_layer_lines`` panel per entry of ``panels`` ``{y label: {name: [value per layer]}}``
    (e.g. row entropy, diagonal prominence and attention distance, one line per mechanism). Returns the figure."""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.3), squeeze=False)
    for ax, (y_label, series) in zip(axes[0], panels.items()):
        per_layer_lines(series, y_label=y_label, ax=ax)
        if ax.get_legend() is not None and ax is not axes[0][0]:
            ax.get_legend().remove()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return without_empty_panels(fig)


def band_curves(panels, *, x_label, title=None, log_x=False):
    """Curves with a band of one standard deviation: ``panels`` is ``{y label: {name: (x, [curve per sample])}}``
    (e.g. the top-1 probability against the fraction of pixels deleted, one curve per image; or a distance against
    the number of features, one value per layer), the line the mean over the samples. Returns the figure."""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.8 * len(panels), 3.3), squeeze=False)
    for ax, (y_label, series) in zip(axes[0], panels.items()):
        drawn = {name: v for name, v in series.items() if v and len(v[1])}
        if not drawn:
            ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
        for i, (name, (x, curves)) in enumerate(drawn.items()):
            values = np.asarray(curves, dtype=float)
            mean, std = values.mean(axis=0), values.std(axis=0)
            color = COLORS[i % len(COLORS)]
            ax.plot(x, mean, marker=MARKERS[i % len(MARKERS)], ms=3, lw=1.2, color=color, label=name)
            if len(values) > 1:
                ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.15, lw=0)
        if log_x:  # ticks at the drawn x values, in plain digits (the default 2^k labels need TeX fonts)
            ax.set_xscale("log", base=2)
            ticks = sorted({float(v) for _, (x, _) in drawn.items() for v in x})
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_locator(NullLocator())
            ax.tick_params(axis="x", labelrotation=90, labelsize=7)  # neighbours such as 110 and 128 apart
        _label(ax, x_label, y_label, legend=bool(drawn))
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return without_empty_panels(fig)
