"""Generic page pieces: ours beside the paper's with deltas, training runs and measurements collected under
the compute policy, figures (accuracy against cost, training curves with seed bands), provenance lines.
No module here belongs to one chapter: a chapter is a notebook plus its paper file."""
from .compare import PAPER_COMPARABLE_GPU, results_beside_paper
from .collect import accuracy_text, collect_runs, current_counts, gpu_memory, older_code, summarize_runs
from .figures import accuracy_against_cost, training_curves
from .provenance import banner, provenance_line
from .tables import NOT_YET_RUN, PAGE_TABLE_STYLE, beside_paper, cell_text, differences, page_table


def paper_frame(paper, table):
    """A published table as a DataFrame indexed by our model names, rows in printed order."""
    import pandas as pd

    from .. import papers

    return pd.DataFrame.from_dict(papers.table(paper, table)["rows"], orient="index")


def glue(name, value):
    """myst-nb's ``glue`` (not displayed here; the Markdown cites it with ``{glue:text}``), where myst-nb is
    installed (the book's environment); elsewhere (a Colab or Kaggle session) the value is only returned."""
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return value
    myst_glue(name, value, display=False)
    return value


def label(model):
    """A model's display label ("Hybrid ViN"), or the name itself for what is not a registered model."""
    from ..registry import list_models, model_cfg

    return model_cfg(model)["label"] if model in list_models() else str(model)


__all__ = ["NOT_YET_RUN", "PAGE_TABLE_STYLE", "PAPER_COMPARABLE_GPU", "results_beside_paper", "accuracy_against_cost", "accuracy_text", "banner", "beside_paper",
           "cell_text", "collect_runs", "current_counts", "differences", "glue", "gpu_memory", "label", "older_code",
           "page_table", "paper_frame", "provenance_line", "summarize_runs", "training_curves"]
