"""Figures for the page: accuracy against a cost (the paper's panel beside ours, on the same axes), training
curves with a band over random seeds, values per layer, and grids of attention maps."""
from __future__ import annotations

import math

MARKERS = ("s", "^", "o", "D", "v", "P")
COLORS = ("tab:blue", "tab:green", "tab:orange", "tab:purple", "tab:red", "tab:brown")


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
    import matplotlib.pyplot as plt
    import pandas as pd

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
    missing = [label for label in paper.index if label not in frames[1].index]
    if missing:
        fig.text(0.5, 0.01, "Not in our panel (no result of ours yet): " + ", ".join(missing), fontsize=9,
                 ha="center", va="bottom")
    if title:
        fig.suptitle(title, y=0.995)
    fig.tight_layout(rect=(0, 0.05 if missing else 0, 1, 0.93))
    return fig


def training_curves(results, *, metric="select_top1", labels=None, title=None, y_label="test top-1 (%)", band="range",
                    ax=None):
    """One line per model over epochs: the mean of ``metric`` over the random seeds done, with a band over the
    seeds (none for a single seed): ``band="range"`` from the lowest to the highest seed, ``"std"`` mean ± one
    standard deviation. ``results``: training records (``train.run``), grouped by model, or a mapping
    ``{name: [records]}`` (one line per name: a paper's runs of one model in several settings). ``ax``: draw
    there (the figure is then the caller's); returns the figure."""
    import matplotlib.pyplot as plt

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
    curves = {name: runs for name, runs in curves.items() if runs}
    fig, ax = (plt.subplots(figsize=(8, 4.2)) if ax is None else (ax.figure, ax))
    if not curves:
        ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
    for i, (model, runs) in enumerate(curves.items()):
        epochs = min(len(c) for c in runs)
        per_epoch = [[c[e] for c in runs] for e in range(epochs)]
        mean = [math.fsum(v) / len(v) for v in per_epoch]
        xs = range(1, epochs + 1)
        color = COLORS[i % len(COLORS)] if len(curves) <= len(COLORS) else plt.cm.tab20(i % 20)
        name = labels.get(model, model) if labels else model
        ax.plot(xs, mean, color=color, lw=1.3, label=f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})")
        if len(runs) > 1:
            if band == "std":
                std = [math.sqrt(math.fsum((x - m) ** 2 for x in v) / (len(v) - 1)) for v, m in zip(per_epoch, mean)]
                low, high = [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)]
            else:
                low, high = [min(v) for v in per_epoch], [max(v) for v in per_epoch]
            ax.fill_between(xs, low, high, color=color, alpha=0.2)
    ax.set_xlabel("epoch")
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7, ncol=2 if len(curves) > 3 else 1, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def per_layer_lines(series, *, y_label, title=None, reference=None, ax=None, log=False):
    """One line per name over layers 1..L: ``series`` is ``{name: [value per layer]}`` (a name without values is
    left out and named in the title's place when none has any); ``reference``: a horizontal line (e.g. 1, the
    uniform map's diagonal prominence). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = (plt.subplots(figsize=(6.5, 3.6)) if ax is None else (ax.figure, ax))
    drawn = {name: values for name, values in series.items() if values}
    if not drawn:
        ax.text(0.5, 0.5, "not yet run", ha="center", va="center", transform=ax.transAxes)
    for i, (name, values) in enumerate(drawn.items()):
        ax.plot(range(1, len(values) + 1), values, marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.2,
                color=COLORS[i % len(COLORS)], label=name)
    if reference is not None:
        ax.axhline(reference, color="grey", lw=0.8, ls="--")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def map_grid(rows, *, columns, images=None, title=None):
    """A grid of square maps, nearest interpolation: ``rows`` is ``{row label: [map per column]}`` (each map a
    2-D array-like; None leaves the cell empty), ``columns`` the column titles; ``images``: an image per row
    (h, w, 3 uint8) drawn in a first column. Returns the figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    titles = (["image"] if images is not None else []) + list(columns)
    n_rows, n_cols = len(rows), len(titles)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(0.95 * n_cols + 0.6, 0.95 * n_rows + 0.5), squeeze=False)
    for r, (label, maps) in enumerate(rows.items()):
        cells = ([images[r]] if images is not None else []) + list(maps)
        for c, cell in enumerate(cells):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            if cell is not None:
                ax.imshow(np.asarray(cell), interpolation="nearest", cmap=None if images is not None and c == 0 else "viridis")
            if r == 0:
                ax.set_title(titles[c], fontsize=7)
        axes[r][0].set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
