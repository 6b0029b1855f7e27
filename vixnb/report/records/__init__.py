"""Training runs and records for a page, read from the results store (or made under the compute policy): runs
collected and summarised per model, the records of a chapter, the one metric table, and the provenance lines."""
from .collect import (accuracy_text, attention_maps, collect_runs, compare_pairs, current_counts, gpu_memory,
                      learning_flags, mean_std, predictions, record, runs_at_chance, runs_done, runs_overview,
                      seed_comparison, speed, speed_name, study_measurement, summarize_runs, table_compute,
                      table_results)
from .metrics import METRICS, mean_per_layer, metric_label, metric_unit, seed_statistic
from .provenance import (banner, book_plans, book_totals, counts_sentence, gpu_profiles, measured_runs_frame,
                         missing_line, missing_runs_frame, page_counts, provenance_line, short_device, stale_note,
                         status_counts, stored_results_frame, totals_frame)

__all__ = ["METRICS", "accuracy_text", "attention_maps", "banner", "book_plans", "book_totals", "collect_runs",
           "compare_pairs", "counts_sentence", "current_counts", "gpu_memory", "gpu_profiles", "learning_flags",
           "mean_per_layer",
           "mean_std", "measured_runs_frame", "metric_label", "metric_unit", "missing_line", "missing_runs_frame",
           "page_counts", "predictions", "provenance_line", "record", "runs_at_chance", "runs_done", "runs_overview",
           "seed_comparison", "seed_statistic", "short_device", "speed", "speed_name", "stale_note", "status_counts",
           "stored_results_frame", "study_measurement", "summarize_runs", "table_compute", "table_results",
           "totals_frame"]
