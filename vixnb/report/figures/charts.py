"""Figures for the page: accuracy against a cost (the paper's panel beside ours, on the same axes), training
curves with a band over random seeds, values per layer, grids of maps, and curves with a band over images."""
from __future__ import annotations

import math
from html import escape

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython import get_ipython
from IPython.display import HTML, display
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator, ScalarFormatter

from ...analysis.first_steps import ordered_arms, windows
from ...data import dataset_spec
from ...escape import plain_text
from .colors import BLACK, CHANCE_GREY, palette

MARKERS = ("s", "^", "o", "D", "v", "P")
#: a figure's width at the page's column width (inches at the figures' 100 dpi: about 690 px, shown unscaled), and
#: the least size of its text (points): 9 pt at the column width
PAGE_WIDTH, TEXT_PT = 6.9, 9
def chance_level(records) -> float | None:
    """100 / classes of the data set the ``records`` (training records) ran on, or None where none says."""
    dataset = next((r.get("config", {}).get("dataset") for r in records if r.get("config", {}).get("dataset")), None)
    try:
        return 100.0 / dataset_spec(dataset).num_classes if dataset else None
    except (KeyError, ValueError):
        return None


def chance_line(ax, level):
    """A dashed grey line at the chance accuracy ``level`` (%), in the legend as "chance"."""
    if level is not None:
        ax.axhline(level, color=CHANCE_GREY, lw=0.9, ls="--", label=f"chance ({level:g} %)", zorder=1)


class MissingPanel:
    """What a figure function gives where there is nothing to draw: an admonition on the page (HTML), not an image
    of text, shown once (``_ipython_display_``) where the figure would have been. ``text`` says what is missing."""

    def __init__(self, text):
        self.text, self.shown = text, False

    def html(self):
        return f'<div class="admonition note"><p class="admonition-title">No figure</p><p>{escape(self.text)}</p></div>'

    def _ipython_display_(self):
        if not self.shown:
            self.shown = True
            display(HTML(self.html()))


def _drawn(ax):
    """Whether ``ax`` shows data: a line with points, a filled band, an image or a bar of some height."""
    return (any(len(line.get_xdata()) for line in ax.lines) or any(
        len(c.get_offsets()) or len(c.get_paths()) for c in ax.collections) or bool(ax.images)
        or any(getattr(p, "get_height", lambda: 0)() for p in ax.patches))


#: words of an axis label that name a cost (time, memory): such an axis starts at 0
COST_UNITS = ("seconds", "(s)", " ms", "GB", "MB", "memory")


@plain_text
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
    if len(empty) == len(shown):  # an admonition in the figure's place, not an image of text
        plt.close(fig)
        panel = MissingPanel(missing[:1].upper() + missing[1:] + ".")
        if get_ipython() is not None:  # where the figure would have been shown (the caller may bind it to a name)
            panel._ipython_display_()
        return panel
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
        if not fig.legends:  # a figure legend keeps the page's width: its columns need it
            fig.set_size_inches(max(width * len(kept) / len(shown), 4.5), height)
    note = fig.text(0.5, 0.005, missing, ha="center", va="bottom", fontsize=TEXT_PT)
    fit_around(fig, [note])
    return fig


#: matplotlib's codes of the figure legends ``fit_around`` places: under the axes, and above them
_LOWER_CENTER, _UPPER_CENTER = 8, 9


def fit_around(fig, notes=()):
    """Lay ``fig``'s axes out between what sits outside them, measured as drawn: from the bottom up, the ``notes``
    (texts at the figure's foot), then each lower-centre figure legend; from the top down, the title, then each
    upper-centre figure legend. Nothing of these overlaps an axis, a tick label or another."""
    fig.canvas.draw()
    renderer, height = fig.canvas.get_renderer(), fig.bbox.height
    share = lambda artist: artist.get_window_extent(renderer).height / height  # noqa: E731
    bottom = 0.005
    for note in notes:
        note.set_y(bottom)
        bottom += share(note) + 0.01
    for legend in [lg for lg in fig.legends if lg._loc == _LOWER_CENTER]:
        legend.set_bbox_to_anchor((0.5, bottom), transform=fig.transFigure)
        bottom += share(legend) + 0.005
    top = 0.995
    if fig._suptitle is not None:
        fig._suptitle.set_y(top)
        fig._suptitle.set_va("top")
        top -= share(fig._suptitle) + 0.01
    for legend in [lg for lg in fig.legends if lg._loc == _UPPER_CENTER]:
        legend.set_bbox_to_anchor((0.5, top), transform=fig.transFigure)
        top -= share(legend) + 0.005
    fig.tight_layout(rect=(0, min(bottom, 0.6), 1, max(top, bottom + 0.3)))


def legend_below(fig, *, ncol=None, notes=()):
    """One legend under the figure's axes, outside its data: the entries of every axis's legend (each label once),
    each axis's own legend removed; then the figure laid out around it (``fit_around``)."""
    keys = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if not label.startswith("_"):
                keys.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if keys:
        fig.legend(list(keys.values()), list(keys), loc="lower center", ncol=ncol or min(3, len(keys)),
                   frameon=False, fontsize=TEXT_PT)
    fit_around(fig, notes)
    return fig

def _limits(values, pad=0.12):
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(hi), 1.0)
    return lo - pad * span, hi + pad * span


@plain_text
def accuracy_against_cost(paper, ours, *, x, y, groups, x_label, y_label="top-1 (%)", title=None,
                          panel_titles=("paper", "ours")):
    """Two panels, the paper's points and ours, on the same axis ranges: ``paper`` and ``ours`` are DataFrames
    indexed by display label with numeric columns ``x`` and ``y``; ``groups`` maps a label to its group (one
    marker per group, the first legend). Each model keeps its colour (``palette``) and is named in the second
    legend, not beside its point (labels of close points would overlap). Models without a number of ours are
    named under our panel."""
    frames = [f[[x, y]].apply(pd.to_numeric, errors="coerce").dropna() for f in (paper, ours)]
    every = pd.concat(frames)
    models = list(dict.fromkeys(every.index))
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.4 + 0.22 * math.ceil(len(models) / 3)), sharex=True,
                             sharey=True)
    names = list(dict.fromkeys(groups.get(m) for m in models if groups.get(m) is not None))
    marker = {g: MARKERS[i % len(MARKERS)] for i, g in enumerate(names)}
    colors = palette(models)
    if not every.empty:
        xlim, ylim = _limits(every[x]), _limits(every[y])
    for ax, frame, name in zip(axes, frames, panel_titles):
        ax.set_title(name, fontsize=TEXT_PT + 1)
        ax.set_xlabel(x_label)
        ax.grid(alpha=0.3)
        if frame.empty:
            continue
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        for label, (px, py) in frame.iterrows():
            ax.scatter(px, py, marker=marker.get(groups.get(label), "o"), color=colors[label], s=40, zorder=3,
                       edgecolors="black", linewidths=0.3)
    axes[0].set_ylabel(y_label)
    shapes = [plt.Line2D([], [], ls="", marker=marker[g], color="grey", label=g) for g in names]
    fig.legend(handles=shapes, loc="upper center", ncol=max(len(shapes), 1), frameon=False, fontsize=TEXT_PT)
    keys = [plt.Line2D([], [], ls="", marker=marker.get(groups.get(m), "o"), color=colors[m], markeredgecolor="black",
                       markeredgewidth=0.3, label=m) for m in models]
    missing = [label for label in paper.index if label not in frames[1].index] if not frames[1].empty else []
    fig.legend(handles=keys, loc="lower center", ncol=3, frameon=False, fontsize=TEXT_PT)
    notes = [fig.text(0.5, 0.005, "Not in our panel (no result of ours yet): " + ", ".join(missing),
                      fontsize=TEXT_PT, ha="center", va="bottom", wrap=True)] if missing else []
    if title:
        fig.suptitle(title)
    fit_around(fig, notes)
    return without_empty_panels(fig)


@plain_text
def training_curves(results, *, metric="select_top1", labels=None, title=None, y_label="test top-1 (%)", band="range",
                    ax=None):
    """One line per model over epochs: the mean of ``metric`` over the random seeds done, with a band over the
    seeds (none for a single seed): ``band="range"`` from the lowest to the highest seed, ``"std"`` mean ± one
    standard deviation. ``results``: training records (``runs.make.run``), grouped by model, or a mapping
    ``{name: [records]}`` (one line per name: a paper's runs of one model in several settings). ``ax``: draw
    there (the figure is then the caller's); returns the figure."""
    if band not in ("range", "std"):
        raise ValueError(f"band must be 'range' or 'std', got {band!r}")
    if isinstance(results, dict):
        groups = list(results.items())
    else:
        groups = {}
        for r in results:
            groups.setdefault(r.get("config", {}).get("model"), []).append(r)
        groups = list(groups.items())
    curves = {name: [[h[metric] for h in r["history"]] for r in runs if r.get("status") == "done" and r.get("history")]
              for name, runs in groups}
    owned = ax is None
    fig, ax = (plt.subplots(figsize=(PAGE_WIDTH, 3.8)) if ax is None else (ax.figure, ax))
    named = {model: labels.get(model, model) if labels else model for model in curves}
    colors = palette(named.values(), runs={named[m]: runs for m, runs in groups},  # a run's colour on every page
                     avoid=(CHANCE_GREY,))
    for model, runs in curves.items():  # a model without a run has no line and no legend entry
        color, name = colors[named[model]], named[model]
        if not runs:
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
        if any(w in metric for w in ("acc", "top1", "top5")):  # accuracy: the chance level of the runs' data set
            chance_line(ax, chance_level([r for runs in dict(groups).values() for r in runs]))
        ax.legend(fontsize=TEXT_PT, ncol=2 if sum(map(bool, curves.values())) > 3 else 1, loc="best")
    return finish_figure(fig, ax, title, owned)


@plain_text
def curves_beside_paper(groups, printed, *, metric="train_acc", y_label="training accuracy (%)", title=None,
                        panel_titles=("ours", "paper"), sharey=True):
    """Our curves beside the paper's, one panel each (on the same y range unless ``sharey=False``: seconds on
    other hardware), one colour per name in both:
    ``groups`` is ``{name: [records]}`` (``training_curves``: mean over the seeds done, band from the lowest to the
    highest), ``printed`` ``{name: [value per epoch]}`` as the paper prints them (a name it lacks is left out there).
    Returns the figure."""
    fig, (ours, paper) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6), sharey=sharey)
    colours = palette([*groups, *printed], runs=groups, avoid=(CHANCE_GREY,))
    done = {name: runs for name, runs in groups.items()
            if any(r.get("status") == "done" and r.get("history") for r in runs)}
    for name, runs in done.items():  # drawn one by one so that a name keeps its colour in both panels
        bands = len(ours.collections)
        training_curves({name: runs}, metric=metric, y_label=y_label, ax=ours)
        ours.lines[-1].set_color(colours[name])
        for band in ours.collections[bands:]:  # none where one seed is done
            band.set_color(colours[name])
    for name, values in printed.items():
        paper.plot(range(1, len(values) + 1), values, color=colours[name], lw=1.3, label=name)
    if "acc" in metric and printed:
        chance_line(paper, chance_level([r for runs in groups.values() for r in runs]))
    for ax, heading in zip((ours, paper), panel_titles):
        ax.set_title(heading, fontsize=TEXT_PT + 1)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    drawn = [n for n in colours if n in done or n in printed]  # one legend under both panels: no absent run
    keys = [plt.Line2D([], [], color=colours[n], lw=1.3, label=n) for n in drawn]
    keys += [plt.Line2D([], [], color="grey", lw=0.9, ls="--", label=line.get_label()) for line in paper.lines
             if line.get_label().startswith("chance")]
    if keys:
        fig.legend(handles=keys, loc="lower center", ncol=3, frameon=False, fontsize=TEXT_PT)
    ours.set_ylabel(y_label)
    if not sharey:
        paper.set_ylabel(y_label)
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 2)
    fit_around(fig)
    return without_empty_panels(fig)


@plain_text
def bars_beside_paper(ours, printed, *, y_label, title=None, panel_titles=("ours", "paper"), sharey=False):
    """One bar per name, ours beside the paper's in two panels (separate y ranges unless ``sharey``: seconds on
    other hardware): ``ours`` and ``printed`` are ``{name: value}``; a name without a number of ours reads "not yet
    run" under its place. Returns the figure."""
    names = list(dict.fromkeys([*printed, *ours]))
    colours = palette(names)
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 4.2), sharey=sharey)
    for ax, values, heading in zip(axes, (ours, printed), panel_titles):
        xs = range(len(names))
        heights = [values.get(n) if isinstance(values.get(n), (int, float)) else 0 for n in names]
        ax.bar(xs, heights, color=[colours[n] for n in names])
        ax.set_xticks(list(xs), names, rotation=45, ha="right", fontsize=TEXT_PT)
        for x, n in zip(xs, names):
            if not isinstance(values.get(n), (int, float)):
                ax.text(x, 0, "not yet run", rotation=90, ha="center", va="bottom", fontsize=TEXT_PT)
        ax.set_title(heading, fontsize=TEXT_PT + 1)
        ax.set_ylabel(y_label)
        ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 2)
    fig.tight_layout()
    return without_empty_panels(fig)


def label_axes(ax, x_label, y_label, *, legend):
    """Axis labels, a light grid, and the legend where anything was drawn."""
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=TEXT_PT)


@plain_text
def training_panels(groups, *, title):
    """Training accuracy and test top-1 per epoch side by side, one line per name of ``groups``
    (``{name: [records]}``), mean ± one standard deviation over the seeds. Returns the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.9))
    for ax, metric, y_label in [(axes[0], "train_acc", "training accuracy (%)"),
                                (axes[1], "select_top1", "test top-1 (%)")]:
        training_curves(groups, metric=metric, y_label=y_label, band="std", ax=ax, title=y_label[:-4])
    keys = {}
    for ax in axes:  # one legend under both panels
        for handle, label in zip(*ax.get_legend_handles_labels()):
            keys.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if keys:
        fig.legend(list(keys.values()), list(keys), loc="lower center", ncol=2, frameon=False, fontsize=TEXT_PT)
    fig.suptitle(title, fontsize=TEXT_PT + 2)
    fit_around(fig)
    return without_empty_panels(fig)


@plain_text
def band_curves(panels, *, x_label, title=None, log_x=False):
    """Curves with a band of one standard deviation: ``panels`` is ``{y label: {name: (x, [curve per sample])}}``
    (e.g. the top-1 probability against the fraction of pixels deleted, one curve per image; or a distance against
    the number of features, one value per layer), the line the mean over the samples. Returns the figure."""
    fig, axes = plt.subplots(1, len(panels), figsize=(PAGE_WIDTH, 3.4), squeeze=False)
    for ax, (y_label, series) in zip(axes[0], panels.items()):
        drawn = {name: v for name, v in series.items() if v and len(v[1])}
        colours = palette(series)
        for i, (name, (x, curves)) in enumerate(drawn.items()):
            values = np.asarray(curves, dtype=float)
            mean, std = values.mean(axis=0), values.std(axis=0)
            color = colours[name]
            ax.plot(x, mean, marker=MARKERS[i % len(MARKERS)], ms=3, lw=1.2, color=color, label=name)
            if len(values) > 1:
                ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.15, lw=0)
        if log_x:  # ticks at the drawn x values, in plain digits (the default 2^k labels need TeX fonts)
            ax.set_xscale("log", base=2)
            ticks = sorted({float(v) for _, (x, _) in drawn.items() for v in x})
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_locator(NullLocator())
            ax.tick_params(axis="x", labelrotation=90, labelsize=TEXT_PT)  # neighbours such as 110 and 128 apart
        label_axes(ax, x_label, y_label, legend=bool(drawn))
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 1)
    legend_below(fig)
    return without_empty_panels(fig)


def accuracy_points(memory, top1, labels):
    """A DataFrame of ("GB", "top-1") points indexed by label (``labels``: ``{model: label}``), from ``memory`` and
    ``top1`` (Series indexed by model; None where not had), for ``accuracy_against_cost``."""
    return pd.DataFrame({"GB": memory, "top-1": top1}).rename(index=labels)


def finish_figure(fig, ax, title, owned):
    """A one-axes figure finished: its ``title``; where the figure is ours (``owned``), its legend under the axes
    (outside the data: ``legend_below``), laid out and its empty panels dropped; left to the caller where the caller
    passed its own axes."""
    if title:
        ax.set_title(title, fontsize=TEXT_PT + 1)
    if not owned:  # the caller's figure: its layout is the caller's
        return fig
    legend_below(fig)
    return without_empty_panels(fig)


@plain_text
def first_steps_curves(record, *, title=None):
    """A first-steps record (``analysis.first_steps_record``) as two panels: each arm's training loss and accuracy
    by optimizer step, each point the mean of ``record["window"]`` steps (a batch's figures are noisy), the row's own
    run in black, the chance accuracy dashed. Returns the figure (a note where the record has no arm)."""
    arms = ordered_arms(record)
    window = record.get("window", 20)
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6))
    colours = palette([a for a in arms if a != "base"], avoid=(BLACK, CHANCE_GREY))
    for ax, metric, y_label in ((axes[0], "loss", "training loss"), (axes[1], "acc", "training accuracy (%)")):
        for i, (name, arm) in enumerate(arms.items()):
            values = windows(arm[metric], window)
            xs = [window * (k + 0.5) for k in range(len(values))]
            base = name == "base"
            ax.plot(xs, values, color="black" if base else colours[name], lw=1.8 if base else 1.1,
                    marker="o" if len(values) < 5 else None, ms=3, ls="-" if base or i < 8 else "--",
                    label=name if not base else "the row's run (base)")
        if metric == "acc" and record.get("chance") is not None:
            chance_line(ax, record["chance"])
        label_axes(ax, "optimizer step", y_label, legend=False)
    keys = {}
    for handle, label in zip(*axes[1].get_legend_handles_labels()):
        keys.setdefault(label, handle)
    if keys:
        fig.legend(list(keys.values()), list(keys), loc="lower center", ncol=3, frameon=False, fontsize=TEXT_PT)
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 1)
    fit_around(fig)
    return without_empty_panels(fig, missing="the record holds no arm")
