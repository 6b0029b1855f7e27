"""Figures for the page, one palette and one text size for the book: accuracy against a cost beside the paper's,
training curves with a band over seeds, values per layer, curves with a band over images, grids of maps and the
panels of predictions."""
from .charts import (PAGE_WIDTH, TEXT_PT, MissingPanel, accuracy_against_cost, accuracy_points, band_curves,
                     bars_beside_paper, curves_beside_paper, first_steps_curves, legend_below, training_curves,
                     training_panels)
from .per_layer import identity_share_trajectories, per_layer_lines, per_layer_panels
from .colors import model_color, palette, run_color
from .maps import attention_map_panels, chosen_predictions, map_grid, prediction_grid, prominence_figures

__all__ = ["PAGE_WIDTH", "TEXT_PT", "MissingPanel", "accuracy_against_cost", "accuracy_points", "attention_map_panels",
           "band_curves", "bars_beside_paper", "chosen_predictions", "curves_beside_paper", "first_steps_curves",
           "identity_share_trajectories", "legend_below",
           "map_grid", "model_color", "palette", "run_color", "per_layer_lines", "per_layer_panels", "prediction_grid",
           "prominence_figures", "training_curves", "training_panels"]
