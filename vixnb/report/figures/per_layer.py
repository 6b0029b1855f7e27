"""Figures of values per layer: one line per run over the layers (``per_layer_lines``, side by side in
``per_layer_panels``) and the identity's share of shaped attention in every layer over training
(``identity_share_trajectories``). Colours, text sizes and legends are ``charts``' (one palette for the book)."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.ticker import LogFormatter, MaxNLocator

from ...escape import plain_text
from ...layers import shaped_init
from .charts import (MARKERS, PAGE_WIDTH, TEXT_PT, finish_figure, label_axes, fit_around, legend_below,
                     without_empty_panels)
from .colors import CHANCE_GREY, palette


@plain_text
def per_layer_lines(series, *, y_label, title=None, reference=None, ax=None, log=False, runs=None, colours_of=None,
                    styles=None):
    """One line per name over layers 1..L: ``series`` is ``{name: [value per layer]}`` (a name without values is
    left out and named in the title's place when none has any); ``reference``: a horizontal line (e.g. 1, the
    uniform map's diagonal prominence); ``runs``: ``{name: [records]}`` of the runs the names are, for their colour
    (``palette``); ``colours_of(name)``: the colour instead (two lines of one run); ``styles(name)``: true for a
    dashed line. The legend sits under the axes where the figure is this function's. Returns the figure."""
    owned = ax is None
    fig, ax = (plt.subplots(figsize=(PAGE_WIDTH, 3.6)) if ax is None else (ax.figure, ax))
    drawn = {name: values for name, values in series.items() if values}
    colours = palette(series, runs=runs, avoid=(CHANCE_GREY,) if reference is not None else ())
    for i, (name, values) in enumerate(drawn.items()):
        ax.plot(range(1, len(values) + 1), values, marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.2,
                color=(colours[name] if colours_of is None else colours_of(name)), label=name,
                ls="--" if styles and styles(name) else "-")
    if reference is not None:
        ax.axhline(reference, color=CHANCE_GREY, lw=0.8, ls="--")
    if log:  # plain tick labels (matplotlib's default 10^k ones need TeX fonts the book's machines may lack)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if drawn:
        ax.set_xlim(0.5, max(len(v) for v in drawn.values()) + 0.5)
    if drawn and all(0 <= v <= 1 for values in drawn.values() for v in values) and "/" in y_label:
        ax.set_ylim(0, 1)  # a fraction, on its range
    label_axes(ax, "layer", y_label, legend=bool(drawn))
    return finish_figure(fig, ax, title, owned)


@plain_text
def per_layer_panels(panels, *, title=None, log=False, runs=None):
    """Side by side, one ``per_layer_lines`` panel per entry of ``panels`` ``{y label: {name: [value per layer]}}``
    (e.g. row entropy, diagonal prominence and attention distance, one line per mechanism), one legend under them
    (outside the data); ``log`` and ``runs`` as ``per_layer_lines``'. Returns the figure."""
    fig, axes = plt.subplots(1, len(panels), figsize=(PAGE_WIDTH, 3.4), squeeze=False)
    for ax, (y_label, series) in zip(axes[0], panels.items()):
        per_layer_lines(series, y_label=y_label, ax=ax, log=log, runs=runs)
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 1)
    legend_below(fig)
    return without_empty_panels(fig)


@plain_text
def identity_share_trajectories(groups):
    """One panel per name of ``groups`` (``{name: [records]}`` of shaped-attention runs): the identity's share
    |alpha|/(|alpha|+|beta|) of every layer over training (a fraction, drawn on 0 to 1: alpha and beta may change
    sign), mean over the seeds, epoch 0 being the initialisation (the scheme in each run's ``alpha_beta`` setting,
    ``layers.shaped_init``), one line per layer from dark (first) to light (last)."""
    cols = min(3, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PAGE_WIDTH, 2.5 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, (name, records) in zip(axes.flat, groups.items()):
        done = [r for r in records if r.get("status") == "done" and r["history"][0].get("alpha_beta")]
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if not done:
            continue
        scheme = done[0]["config"]["model_overrides"].get("alpha_beta", "uniform")
        depth, epochs = len(done[0]["history"][0]["alpha_beta"]), min(len(r["history"]) for r in done)
        for layer in range(depth):
            a0, b0 = shaped_init(scheme, layer_index=layer + 1, depth=depth)
            share = [_share(a0, b0)] + [math.fsum(_share(*r["history"][e]["alpha_beta"][layer]) for r in done)
                                        / len(done) for e in range(epochs)]
            ax.plot(range(epochs + 1), share, color=plt.cm.viridis(layer / max(depth - 1, 1)), lw=1.1,
                    label=f"layer {layer + 1}" if layer in (0, depth - 1) else None)
        ax.set_ylim(0, 1)
    for ax in axes[:, 0]:
        ax.set_ylabel("|α| / (|α| + |β|)")
    shown = [ax for ax in axes.flat if ax.get_visible() and ax.lines]
    if shown:  # one key under the panels (outside the curves): the first layer dark, the last light
        keys = [plt.Line2D([], [], color=plt.cm.viridis(0.0), lw=1.1, label="the first layer"),
                plt.Line2D([], [], color=plt.cm.viridis(1.0), lw=1.1, label="the last layer")]
        fig.legend(handles=keys, loc="lower center", ncol=2, frameon=False, fontsize=TEXT_PT,
                   title="each line one layer, dark to light from the first to the last", title_fontsize=TEXT_PT)
    fit_around(fig)
    return without_empty_panels(fig)


def _share(alpha, beta):
    """The identity's share of shaped attention, |alpha| / (|alpha| + |beta|) (0.5 where both are 0)."""
    total = abs(alpha) + abs(beta)
    return abs(alpha) / total if total else 0.5
