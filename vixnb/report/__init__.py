"""Generic page pieces, in five packages by what they compute: ``records`` (training runs and records read from the
results store under the compute policy, the metrics, provenance lines), ``tables`` (ours beside the paper's, the
protocol, the plan, measurements and maps as page tables, the models as built today), ``claims`` (the claims, their
verdicts and the ledger, the dashboard, the synthesis across papers, the intro's findings), ``figures`` (accuracy
against cost, training curves with seed bands, values per layer, grids of maps) and ``cost`` (cost records as
tables, fronts, fits and sweeps). No module here belongs to one chapter: a chapter is a notebook plus its paper
file. The packages import downwards only: ``figures`` < ``cost``; ``records`` < ``tables`` < ``claims``."""
from . import figures, cost, records, tables, claims

__all__ = ["claims", "cost", "figures", "records", "tables"]
