"""Tables for the page: ours beside the paper's with deltas, and a styled table that fits the text column."""
from __future__ import annotations

import math
import numbers
import re

import pandas as pd
from IPython.display import Markdown

from ... import papers
from ...escape import html_text, markdown_text
from ...models import list_models, model_cfg

NOT_YET_RUN = "**Not yet run** for this profile on this machine."
NOT_YET_RUN_SHORT = "not yet run"


def not_yet_run(command):
    """The Markdown line of a section nothing has measured yet, naming the command that measures it."""
    return f"**Not yet run.** {command} measures it and stores it in the results store."


# Compact, right-aligned tables with a rule under the header (scoped to each table by pandas' Styler). Long
# headers and labels wrap at their spaces instead of widening the table past the column; numbers hold no spaces.
PAGE_TABLE_STYLE = [
    {"selector": "", "props": "border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0 1em 0; max-width: 100%;"},
    {"selector": "th, td", "props": "padding: 0.2em 0.6em; text-align: right;"},
    {"selector": "td, th.row_heading", "props": "white-space: normal;"},
    {"selector": "th.col_heading", "props": "white-space: normal; vertical-align: bottom;"},
    {"selector": "th.row_heading", "props": "text-align: left;"},
    {"selector": "thead tr:last-child th", "props": "border-bottom: 1px solid currentColor;"},
    {"selector": "thead tr:not(:last-child) th", "props": "text-align: center;"},
    {"selector": "tbody tr:nth-child(even)", "props": "background: rgba(127, 127, 127, 0.08);"},
    {"selector": "caption", "props": "caption-side: top; text-align: left; font-weight: bold; padding: 0.3em 0;"},
]
OURS, PAPER, DELTA = "ours", "paper", "Δ"


def cell_text(v, decimals=None):
    """A cell for the page: thousands separators, about three significant digits (``decimals`` fixed
    decimals instead, for numbers that are not whole), text as it is."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return str(v)
    if isinstance(v, numbers.Integral) or (abs(v) >= 1000 and float(v).is_integer()):
        return f"{v:,.0f}"
    if not math.isfinite(v):
        return "oom" if v > 0 else str(v)
    if decimals is not None:
        text = f"{v:,.{decimals}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text  # never "-0.00"
    a = abs(v)
    if a == 0:
        return "0"
    return f"{v:,.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:#.3g}"


#: a cell that says a result of ours is missing ("not yet run", "not yet run (3 seeds)", "not yet measured", ...)
MISSING_CELL = re.compile(r"^\s*(\*\*)?(not yet run|not yet measured|no run of this configuration)", re.IGNORECASE)
MISSING_MARK = "·"


def _missing(v):
    return isinstance(v, str) and bool(MISSING_CELL.match(v))


def _heading(column):
    return " ".join(str(p) for p in column) if isinstance(column, tuple) else str(column)


def compact_missing(frame):
    """``(frame, note)``: ``frame`` without the columns in which nothing of ours exists yet (every cell "not yet
    run" or alike; a Δ column goes with its "ours" column), its other missing cells shown as ``MISSING_MARK``,
    and one line that says what was left out (None when nothing was). A table of ours without one number stays
    one line, not a grid of "not yet run"."""
    cells = frame.map(_missing)
    gone = [c for c in frame.columns if cells[c].all()]
    gone += [c for c in frame.columns if isinstance(c, tuple) and str(c[-1]).startswith(DELTA) and c not in gone
             and (*c[:-1], OURS) in gone]
    if gone:  # with ours gone, a column of blanks beside them (a difference of the missing runs) says nothing
        gone += [c for c in frame.columns if c not in gone and frame[c].isna().all()]
    marked = int(cells.drop(columns=gone).to_numpy().sum())
    if not gone and not marked:
        return frame, None
    kept = frame.drop(columns=gone)
    kept = kept.where(~cells.drop(columns=gone), MISSING_MARK)
    said = []
    if gone:
        shown = [_heading(c) for c in gone if not (isinstance(c, tuple) and str(c[-1]).startswith(DELTA))]
        said.append("not yet run, so not shown: " + ", ".join(shown))
    if marked:
        said.append(f"{MISSING_MARK} marks {marked} cell{'s' if marked != 1 else ''} not yet run"
                    if not gone else f"{MISSING_MARK} marks {marked} more")
    return kept, "; ".join(said)


def page_table(frame, *, caption=None, blank="—", empty=NOT_YET_RUN, decimals=None, wrap=()):
    """A DataFrame ready for the page: a ``Styler`` with thousands separators, about three significant
    digits (``decimals`` fixes the decimals of numbers that are not whole instead, e.g. 2 beside a paper's
    two-decimal numbers), ``blank`` for NaN/None, and ``caption`` above it; an empty ``frame`` gives the
    markdown ``empty`` instead. Columns named in ``wrap`` (e.g. notes) wrap their text instead of widening
    the table. Results of ours not yet run are compacted (``compact_missing``): their columns leave the table
    and the caption says so in one line; a table with nothing left is that line alone."""
    if frame is None or frame.empty:
        return Markdown(empty)
    frame = frame.copy()
    if _missing(blank):  # a blank that says "not yet run": the cells it fills are results of ours not yet run
        frame = frame.astype(object).where(frame.notna(), blank)
    frame, note = compact_missing(frame)
    if frame.shape[1] == 0:
        return Markdown(f"{markdown_text(caption) + ': ' if caption else ''}{NOT_YET_RUN_SHORT} ({len(frame)} rows).")
    if note:
        caption = f"{caption} ({note})" if caption else note[:1].upper() + note[1:] + "."
    frame.index.name = None
    # every cell, heading and the caption escaped: text from a paper file or a result is printed, never markup
    styler = frame.style.format(lambda v: cell_text(v, decimals), na_rep=html_text(blank), escape="html") \
        .format_index(escape="html", axis=0).format_index(escape="html", axis=1).set_table_styles(PAGE_TABLE_STYLE)
    wrapped = [c for c in wrap if c in frame.columns]
    if wrapped:
        styler = styler.set_properties(subset=wrapped, **{"white-space": "normal !important",
                                                          "text-align": "left !important",
                                                          "min-width": "12em", "max-width": "26em"})
    return styler.set_caption(html_text(caption)) if caption else styler


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def beside_paper(ours, paper, metrics, *, order=None, labels=None, missing="not yet run", delta=True):
    """Ours beside the paper's: one row per model, for each metric the columns (heading, "ours"),
    (heading, "paper") and (heading, "Δ") = ours - paper where both are numbers.

    ``ours`` and ``paper`` are DataFrames indexed by model name; ``metrics`` maps a column heading to
    ``(ours_column, paper_column)`` (a ``None`` paper column: the paper has no such number). Rows follow
    ``order`` (default: the paper's rows, then ours), are named by ``labels`` (model -> display label), and a
    model without a value of ours reads ``missing``."""
    order = list(order) if order is not None else list(dict.fromkeys([*paper.index, *ours.index]))
    columns, data = [], {m: [] for m in order}
    for heading, (ours_col, paper_col) in metrics.items():
        parts = [OURS] + ([PAPER] if paper_col else []) + ([DELTA] if paper_col and delta else [])
        columns += [(heading, p) for p in parts]
        for m in order:
            mine = ours.at[m, ours_col] if m in ours.index and ours_col in ours.columns else None
            mine = missing if mine is None or (isinstance(mine, float) and math.isnan(mine)) else mine
            theirs = paper.at[m, paper_col] if paper_col and m in paper.index and paper_col in paper.columns else None
            theirs = None if isinstance(theirs, float) and math.isnan(theirs) else theirs
            row = [mine] + ([theirs] if paper_col else [])
            if paper_col and delta:
                row.append(mine - theirs if _is_number(mine) and _is_number(theirs) else None)
            data[m] += row
    frame = pd.DataFrame.from_dict(data, orient="index", columns=pd.MultiIndex.from_tuples(columns)).astype(object)
    frame.index = [labels.get(m, m) if labels else m for m in frame.index]
    return frame.where(frame.notna(), None)


def differences(frame, pairs, column, *, by="first"):
    """``frame[column]`` of the second model of each pair minus that of the first (e.g. hybrid minus plain),
    one entry per pair, named by its ``by`` ("first" or "second") model; None where either is missing."""
    if by not in ("first", "second"):
        raise ValueError(f"by must be 'first' or 'second', got {by!r}")
    rows = {}
    for first, second in pairs:
        a = frame.at[first, column] if first in frame.index else None
        b = frame.at[second, column] if second in frame.index else None
        rows[first if by == "first" else second] = b - a if _is_number(a) and _is_number(b) else None
    return rows


def paper_frame(paper, table):
    """A published table as a DataFrame indexed by our model names, rows in printed order."""
    return pd.DataFrame.from_dict(papers.table(paper, table)["rows"], orient="index")


def glue(name, value):
    """myst-nb's ``glue`` (not displayed here; the Markdown cites it with ``{glue:text}``), where myst-nb is
    installed (the book's environment); elsewhere (a Colab or Kaggle session) the value is only returned."""
    try:
        from myst_nb import glue as myst_glue  # optional dependency: the book's environment only
    except ImportError:
        return value
    myst_glue(name, value, display=False)
    return value


def label(model):
    """A model's display label ("Hybrid ViN"), or the name itself for what is not a registered model."""
    return model_cfg(model)["label"] if model in list_models() else str(model)
