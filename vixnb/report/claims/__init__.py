"""The papers' claims and what our results say of them: the claims schema (``schema``), the rules that decide a
verdict (``rules``), the verdicts and the claims pages (``verdicts``), the ledger of every paper's claims with our
figures read from the store (``ours``), the dashboard of where each paper stands (``standing``), the mechanisms
compared across the papers (``synthesis``) and the intro's findings and the results page (``found``); a claim's parts
that its own figure does not carry (``parts``: the authors' build, parts stated by other claims)."""
from .found import (contradicted_claims, contradicted_markdown, csv_link, findings, results_frame, results_table,
                    runs_table)
from .ours import claim_list, claims_overview, claims_section, collapsible, ledger, ours_from_store, questions_section
from .rules import NOT_DECIDED, rules_statement, why_not_decided
from .standing import dashboard
from .synthesis import (comparisons, conv_embedding_gain, fused_costs, left_out_note, mechanism, mechanism_claims,
                        mechanism_summary, median_memory_ratio, practitioners_answer)
from .verdicts import claims, claims_page, claims_readings, claims_summary

__all__ = ["NOT_DECIDED", "claim_list", "claims", "claims_overview", "claims_page", "claims_readings", "claims_section",
           "claims_summary", "collapsible", "comparisons", "contradicted_claims", "contradicted_markdown",
           "conv_embedding_gain", "csv_link", "dashboard", "findings", "fused_costs", "ledger", "left_out_note",
           "mechanism", "mechanism_claims", "mechanism_summary", "median_memory_ratio", "ours_from_store",
           "practitioners_answer", "questions_section", "results_frame", "results_table", "rules_statement",
           "runs_table", "why_not_decided"]
