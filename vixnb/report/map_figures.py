"""Figures of maps: grids of attention maps (``map_grid``), the class token's attention per layer of a run
(``attention_map_panels``), and diagonal prominence and the learned identity share per layer
(``prominence_figures``). Colours and text sizes are ``figures``' (one palette for the book)."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ..escape import plain_text
from .figures import TEXT_PT, per_layer_lines

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
                ax.imshow(np.asarray(shown), interpolation="nearest", cmap=None if images is not None and c == 0 else "viridis")
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
