"""Figures of maps: grids of attention maps (``map_grid``), the class token's attention per layer of a run
(``attention_map_panels``), and diagonal prominence and the learned identity share per layer
(``prominence_figures``), and a predictions record as a grid (``chosen_predictions``, ``prediction_grid``).
Colours and text sizes are ``charts``' (one palette for the book)."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ...analysis.records import panel_images, panel_labels
from ...data import CIFAR10_CLASSES, dataset_spec
from ...escape import plain_text
from .charts import TEXT_PT, fit_around
from .colors import CHANCE_GREY, palette
from .per_layer import per_layer_lines

#: the least size of a map's tile, in inches at the figure's 100 dpi: at least 96 pixels on the page
MAP_TILE = 1.2


@plain_text
def map_grid(rows, *, columns, images=None, title=None, cell=MAP_TILE, scale=None):
    """A grid of square maps, nearest interpolation: ``rows`` is ``{row label: [map per column]}`` (each map a
    2-D array-like; None leaves the cell empty; a string is written in the cell instead, e.g. "no attention
    map"), ``columns`` the column titles; ``images``: an image per row (h, w, 3 uint8) drawn in a first column;
    ``cell``: inches per cell (never under ``MAP_TILE``); ``scale``: the label of one colour scale for every map of the
    grid (from 0 to the largest value), drawn beside it (None: each map on its own scale, no colour bar). Returns
    the figure."""
    cell = max(cell, MAP_TILE)
    titles = (["image"] if images is not None else []) + list(columns)
    n_rows, n_cols = len(rows), len(titles)
    maps = [np.asarray(m, dtype=float) for values in rows.values() for m in values
            if m is not None and not isinstance(m, str)]
    top = max((float(m.max()) for m in maps), default=1.0) if scale else None
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(cell * n_cols + 0.6 + (0.9 if scale else 0),
                                                      cell * n_rows + 0.5), squeeze=False, dpi=100)
    shown = None
    for r, (label, values) in enumerate(rows.items()):
        cells = ([images[r]] if images is not None else []) + list(values)
        for c, drawn in enumerate(cells):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            if isinstance(drawn, str):  # a word a line: the cell is small
                ax.text(0.5, 0.5, "\n".join(drawn.split()), ha="center", va="center", fontsize=TEXT_PT,
                        transform=ax.transAxes)
            elif drawn is not None:
                image = images is not None and c == 0
                made = ax.imshow(np.asarray(drawn), interpolation="nearest", cmap=None if image else "viridis",
                                 **({} if image or not scale else {"vmin": 0.0, "vmax": top}))
                shown = shown if image else made
            if r == 0:
                ax.set_title(titles[c], fontsize=TEXT_PT)
        axes[r][0].set_ylabel(label, fontsize=TEXT_PT, rotation=0, ha="right", va="center")
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 1)
    width = fig.get_size_inches()[0]
    fig.tight_layout(rect=(0, 0, 1 - 0.9 / width, 1) if scale else (0, 0, 1, 1))
    if scale and shown is not None:  # one bar in the 0.9 inch kept at the right, as tall as the grid
        top, bottom = axes[0][0].get_position().y1, axes[-1][0].get_position().y0
        bar = fig.colorbar(shown, cax=fig.add_axes((1 - 0.75 / width, bottom, 0.15 / width, top - bottom)))
        bar.set_label(scale, fontsize=TEXT_PT)
        bar.ax.tick_params(labelsize=TEXT_PT)
    return fig


def attention_map_panels(record, *, labels=None, images=None, flags=None):
    """One ``map_grid`` per run of an attention record (``vixnb.analysis.attention_record``): the class token's
    attention over the patch grid in the first, a quarter, half, three quarters and the last layer, for each
    panel image, every map of a run on one colour scale (its bar beside the grid), each row named by its image's class
    (``analysis.panel_labels``); ``images``: the panel's images (h, w, 3), drawn first where given; ``flags``: ``{row:
    why}`` of a run that did not learn (``records.learning_flags``), said in its title: its maps are an untrained
    model's. Returns the figures."""
    figures = []
    names = CIFAR10_CLASSES if record.get("dataset") == "cifar10" else None
    classes = panel_labels(record)
    for row, run in record["runs"].items():
        depth = len(run["class_token"][0])
        shown = sorted({1, max(1, depth // 4), max(1, depth // 2), max(1, 3 * depth // 4), depth})
        side = math.isqrt(len(run["class_token"][0][0]))
        rows = [names[c] if names else f"class {c}" for c in classes[:len(run["class_token"])]]
        rows = [f"{name} ({k + 1})" if rows.count(name) > 1 else name for k, name in enumerate(rows)]
        grid = {rows[k]: [[run["class_token"][k][layer - 1][i * side:(i + 1) * side] for i in range(side)]
                          for layer in shown] for k in range(len(run["class_token"]))}
        name = labels.get(row, row) if labels else row
        flag = (flags or {}).get(row)
        title = f"{name} (depth {depth}), seed {run['seed']}" + (
            f"\ndid not learn, its maps are an untrained model's:\n{flag}" if flag else "")
        figures.append(map_grid(grid, columns=[f"layer {l}" for l in shown], images=images, title=title,
                                scale="class token's attention"))
    return figures


def prominence_figures(record, *, labels=None):
    """Diagonal prominence per layer (heads averaged) of every run of an attention record: the applied map (a solid
    line), and for shaped attention its softmax part (dashed, the run's colour: the run palette, ``palette``); then the
    learned alpha/(alpha+beta) per layer (of the kept weights: the selected epoch's). Under the first, what is so by
    construction: the applied map of shaped attention, alpha I + beta A with its rows divided by alpha + beta, has a
    diagonal prominence of n s + (1 - s) p, n the tokens (class token and patches), s its identity share and p its
    softmax part's: about n s, whatever attention learned. Returns the figures."""
    def over_heads(rows):
        return [math.fsum(heads) / len(heads) for heads in rows]

    name = (lambda row: labels.get(row, row)) if labels else (lambda row: row)
    runs = {name(row): [{"config": run["config"]}] for row, run in record["runs"].items() if run.get("config")}
    colours = palette(list(runs) or [name(row) for row in record["runs"]], runs=runs, avoid=(CHANCE_GREY,))
    series, share, of_run = {}, {}, {}
    for row, run in record["runs"].items():
        series[f"{name(row)}: applied map"] = over_heads(run["prominence"])
        of_run[f"{name(row)}: applied map"] = name(row)
        if run["identity_share"]:
            series[f"{name(row)}: softmax part"] = over_heads(run["prominence_softmax"])
            of_run[f"{name(row)}: softmax part"] = name(row)
            share[name(row)] = run["identity_share"]
    figure = per_layer_lines(series, y_label="diagonal prominence", reference=1, log=True,
                             colours_of=lambda line: colours.get(of_run[line]),
                             styles=lambda line: line.endswith("softmax part"),
                             title=f"diagonal prominence, {record['prominence_images']} test images")
    patch = next((run.get("settings", {}).get("patch") for run in record["runs"].values()), None)
    if share and patch and hasattr(figure, "axes"):
        n = (dataset_spec(record["dataset"]).image_size // patch) ** 2 + 1
        note = figure.text(0.5, 0.005, f"By construction, shaped attention's applied map (αI + βA)/(α + β) has a "
                           f"prominence of {n} s + (1 − s) p, s = α/(α + β) its identity share and p its softmax "
                           f"part's: about {n} × s whatever attention learned. 1 (grey) is a uniform map, {n} a map "
                           "of each token to itself.", ha="center", va="bottom", fontsize=TEXT_PT, wrap=True)
        fit_around(figure, [note])  # under the legend ``per_layer_lines`` put under the axes
    figures = [figure]
    if share:
        figures.append(per_layer_lines(share, y_label="α / (α + β)", title="learned identity share, selected epoch",
                                       colours_of=lambda run: colours.get(run)))
    return figures


def chosen_predictions(predicted, selection="first"):
    """A predictions record (None stays None) on the panel ``selection`` names: "first", the first test images as
    measured; "per_class", one test image of each class (the record's ``per_class`` part)."""
    if predicted is None or selection == "first":
        return predicted
    if selection != "per_class":
        raise ValueError(f"selection={selection!r}: use 'first' or 'per_class'")
    per_class = predicted["per_class"]
    return {**predicted, "panel": per_class["panel"], "labels": per_class["labels"],
            "runs": {n: {**r, "predicted": per_class["predicted"].get(n)} for n, r in predicted["runs"].items()}}


def prediction_grid(predicted, labels):
    """``(rows, columns)`` for ``map_grid``: the panel's test images ("not on this machine" where its dataset is
    not here), then per done run (labelled by ``labels``) its prediction of each image, ✓ where right, ✗ where
    wrong; the columns are the true labels (CIFAR-10's class names, "class k" otherwise)."""
    names = CIFAR10_CLASSES if predicted["dataset"] == "cifar10" else [f"class {k}" for k in range(10)]
    truth = predicted["labels"]
    rows = {"test image": panel_images(predicted) or ["not on this machine"] * len(truth)}
    rows.update({labels[n]: [f"{names[p]} {'✓' if p == t else '✗'}" for p, t in zip(r["predicted"], truth)]
                 for n, r in predicted["runs"].items() if r["status"] == "done"})
    return rows, [names[t] for t in truth]
