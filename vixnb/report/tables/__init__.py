"""Tables for the page: the styled page table and ours beside the paper's with deltas (``pages``, ``compare``), the
authors' protocol beside ours, the plan's frames, the measurements a chapter asks for, the maps study's tables, and
the models as built today (``architecture``: parameters, MACs, the printed counts it explains, weight transfers),
every stored run beside its paper row with the record behind it (``glance``), and what a chapter's questions have
found so far (``questions``)."""
from .architecture import levit_anomalies, model_costs, parameter_counts, softmax_of, transfer_counts, transfer_preview
from .compare import (PAPER_COMPARABLE_GPU, alone_frame, cost_changes, labelled_runs, model_trios, optimizer_pairs,
                      printed_change, ratio, relative_change, results_beside_paper, rope_deltas, row_labels,
                      rows_beside_paper, same_model_rows, times_against)
from .glance import glance_frame, glance_page, record_href, run_columns
from .maps import (ATTRIBUTION_METHODS, MAP_MEASURES, approximation_panels, attribution_agreement,
                   attribution_areas, attribution_curves, attribution_rows, centre_query_rows, map_cell, map_groups,
                   not_measured, over_heads, per_layer_groups, randomisation_checks, rollout_rows)
from .measurements import first_steps_section, records_section, speed_table
from .pages import (NOT_YET_RUN, NOT_YET_RUN_SHORT, PAGE_TABLE_STYLE, beside_paper, cell_text, differences, glue, label,
                    not_yet_run, page_table, paper_frame)
from .plans import plan_todo_frame, plan_totals_frame, question_frame
from .questions import arm_outcomes, known_so_far
from .protocol import protocol_table, tested_with_dropout

__all__ = ["arm_outcomes", "known_so_far", "ATTRIBUTION_METHODS", "MAP_MEASURES", "NOT_YET_RUN", "NOT_YET_RUN_SHORT",
           "PAGE_TABLE_STYLE",
           "PAPER_COMPARABLE_GPU", "alone_frame", "approximation_panels", "attribution_agreement", "attribution_areas",
           "attribution_curves", "attribution_rows", "beside_paper", "cell_text", "centre_query_rows", "cost_changes",
           "differences", "glue", "label", "labelled_runs", "levit_anomalies", "map_cell", "map_groups", "model_costs",
           "model_trios", "not_measured", "not_yet_run", "optimizer_pairs", "over_heads", "page_table", "paper_frame",
           "parameter_counts", "per_layer_groups", "plan_todo_frame", "plan_totals_frame", "printed_change",
           "first_steps_section", "glance_frame", "glance_page", "protocol_table", "record_href", "run_columns",
           "randomisation_checks", "ratio", "records_section",
           "relative_change", "results_beside_paper",
           "rollout_rows", "rope_deltas", "row_labels", "rows_beside_paper", "same_model_rows", "softmax_of",
           "speed_table", "question_frame", "tested_with_dropout", "times_against", "transfer_counts",
           "transfer_preview"]
