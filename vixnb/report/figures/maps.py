"""Figures of maps: grids of attention maps (``map_grid``), the class token's attention per layer of a run
(``attention_map_panels``), and diagonal prominence and the learned identity share per layer
(``prominence_figures``), and a predictions record as a grid (``chosen_predictions``, ``prediction_grid``).
Colours and text sizes are ``charts``' (one palette for the book)."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ...analysis.records import panel_images
from ...data import CIFAR10_CLASSES
from ...escape import plain_text
from .charts import TEXT_PT, per_layer_lines

#: the least size of a map's tile, in inches at the figure's 100 dpi: at least 96 pixels on the page
MAP_TILE = 1.2


@plain_text
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
                ax.text(0.5, 0.5, "\n".join(shown.split()), ha="center", va="center", fontsize=TEXT_PT,
                        transform=ax.transAxes)
            elif shown is not None:
                ax.imshow(np.asarray(shown), interpolation="nearest",
                          cmap=None if images is not None and c == 0 else "viridis")
            if r == 0:
                ax.set_title(titles[c], fontsize=TEXT_PT)
        axes[r][0].set_ylabel(label, fontsize=TEXT_PT, rotation=0, ha="right", va="center")
    if title:
        fig.suptitle(title, fontsize=TEXT_PT + 1)
    fig.tight_layout()
    return fig


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
