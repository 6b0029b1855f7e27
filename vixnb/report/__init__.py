"""Generic page pieces: ours beside the paper's with deltas, training runs and measurements collected under
the compute policy, figures (accuracy against cost, training curves with seed bands), provenance lines.
No module here belongs to one chapter: a chapter is a notebook plus its paper file."""
from .claim_verdicts import claims, claims_page, claims_readings, claims_summary
from .compare import (PAPER_COMPARABLE_GPU, cost_changes, labelled_runs, relative_change, results_beside_paper, row_labels,
                      rows_beside_paper)
from .collect import (accuracy_text, attention_maps, collect_runs, compare_pairs, current_counts, gpu_memory, runs_at_chance, runs_done, runs_overview, seed_comparison,
                      predictions, record, records_section, speed, speed_name, speed_table, study_measurement,
                      summarize_runs, table_results)
from .claim_figures import claim_list, claims_overview, claims_section, collapsible, ledger, ours_from_store
from .metrics import mean_per_layer, seed_statistic
from .cost import not_yet_run
from .figures import (MissingPanel, accuracy_against_cost, band_curves, bars_beside_paper, curves_beside_paper,
                      identity_share_trajectories, model_color, palette, per_layer_lines, per_layer_panels,
                      training_curves, training_panels)
from .map_figures import attention_map_panels, map_grid, prominence_figures
from .dashboard import dashboard
from .plans import plan_todo_frame, plan_totals_frame, study_frame
from .protocol import protocol_table
from .provenance import (banner, book_plans, book_totals, counts_sentence, gpu_profiles, measured_runs_frame, missing_line,
                         missing_runs_frame, page_counts, provenance_line, stale_note, status_counts, stored_results_frame)
from .tables import (NOT_YET_RUN, NOT_YET_RUN_SHORT, PAGE_TABLE_STYLE, beside_paper, cell_text, differences, glue, label, page_table,
                     paper_frame)


__all__ = ["NOT_YET_RUN", "NOT_YET_RUN_SHORT", "dashboard", "PAGE_TABLE_STYLE", "PAPER_COMPARABLE_GPU", "accuracy_against_cost", "accuracy_text", "banner",
           "beside_paper", "cell_text", "claim_list", "claims", "claims_section", "claims_page", "claims_readings", "claims_summary", "collect_runs", "current_counts", "runs_at_chance", "attention_maps", "predictions", "compare_pairs", "seed_comparison", "seed_statistic", "table_results", "map_grid", "per_layer_lines", "attention_map_panels", "identity_share_trajectories", "prominence_figures", "training_panels", "differences", "glue", "gpu_memory",
           "label", "ledger", "ours_from_store", "page_table", "paper_frame", "plan_todo_frame", "plan_totals_frame", "protocol_table", "provenance_line", "results_beside_paper", "rows_beside_paper",
           "record", "records_section", "study_frame", "study_measurement", "summarize_runs", "training_curves", "band_curves", "per_layer_panels", "measured_runs_frame", "not_yet_run",
           "book_plans", "book_totals", "counts_sentence", "gpu_profiles", "missing_line", "missing_runs_frame", "page_counts", "status_counts",
           "stored_results_frame", "speed", "speed_name", "speed_table", "curves_beside_paper", "bars_beside_paper",
           "model_color", "palette", "runs_done", "runs_overview", "MissingPanel", "claims_overview", "collapsible", "cost_changes",
           "labelled_runs", "relative_change", "mean_per_layer", "stale_note", "row_labels"]
