"""The cost records on the page: parameters, FLOPs, memory and time as narrow tables (``cost_view``), Pareto fronts,
the printed correlations and line fits, and the token-mixer sweep's tables and figures."""
from .views import (FAVOR_GFLOPS, SWEEP_LABELS, correlation_pairs, cost_frame, cost_view, crossover_table, fits_frame,
                    line_fit, line_formula, pareto_front, plot_line_fit, plot_pareto_fronts, plot_scaling,
                    printed_accuracy_table, printed_correlations, relative_memory, shape_records, sweep_table)

__all__ = ["FAVOR_GFLOPS", "SWEEP_LABELS", "correlation_pairs", "cost_frame", "cost_view", "crossover_table",
           "fits_frame", "line_fit", "line_formula", "pareto_front", "plot_line_fit", "plot_pareto_fronts",
           "plot_scaling", "printed_accuracy_table", "printed_correlations", "relative_memory", "shape_records",
           "sweep_table"]
