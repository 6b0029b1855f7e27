"""The book's dashboard: one row per source document, what is established without a GPU (its tables transcribed,
its printed parameter counts rebuilt, its claims checked on its own tables) beside what the results store holds
of the published profile (runs and measurements stored of those asked, the GPU-hours left)."""
import numbers

import pandas as pd

from ... import papers
from ...models import list_models
from ...plan.plan import counts
from .verdicts import claims
from ..records.collect import current_counts
from .rules import NOT_DECIDED

#: the keys of a table row that are not printed numbers
NOT_PRINTED = ("label", "model", "settings", "note", "notes")


def printed_numbers(key):
    """How many numbers the tables of paper ``key``'s file hold as printed (every numeric cell, null excluded)."""
    def count(value):
        if isinstance(value, bool):
            return 0
        if isinstance(value, numbers.Real):
            return 1
        if isinstance(value, dict):
            return sum(count(v) for k, v in value.items() if k not in NOT_PRINTED)
        if isinstance(value, (list, tuple)):
            return sum(count(v) for v in value)
        return 0

    return sum(count(t.get("rows") or {}) for t in papers.load(key)["tables"].values())


def count_checks(key):
    """``(exact, printed)``: of the whole-number parameter counts printed in paper ``key``'s tables (a row's
    ``params``), how many the registered models rebuild exactly, counted in the paper's convention
    (``papers.params_convention``) on the table's data set (``collect.current_counts``)."""
    column = {"paper": "params_paper", "true": "params_true"}[papers.params_convention(key)]
    exact = printed = 0
    for name, spec in papers.load(key)["tables"].items():
        rows = spec.get("rows") or {}
        if not isinstance(rows, dict):
            continue
        for row, entry in rows.items():
            count = entry.get("params") if isinstance(entry, dict) else None
            if not isinstance(count, numbers.Integral) or isinstance(count, bool):
                continue
            model, settings = papers.row_run(key, name, row)
            if model not in list_models():
                continue
            printed += 1
            exact += current_counts(model, spec.get("dataset", "cifar10"), **settings)[column] == count
    return exact, printed


def dashboard(plans, profile="budget", *, frames=None):
    """One row per document (``papers.DOCUMENTS`` order): tables and numbers transcribed, parameter counts rebuilt
    exactly of those printed, claims the paper's own tables bear out / do not, the ``profile`` plan's entries
    stored, stale and asked, and its GPU-hours left (``plan.counts``, the one count every page prints) (``plans``:
    ``{profile: plan entries}``, as ``provenance.book_plans`` builds them). ``frames``: ``{paper: claims frame}`` of the
    claims ledger (``ours.ledger``), for a column of our verdicts: hold / do not hold / not decided."""
    entries = plans.get(profile, [])
    rows = {}
    for key in papers.DOCUMENTS:
        data = papers.load(key)
        exact, printed = count_checks(key)
        verdicts = claims(key)["paper bears it out"].value_counts() if data["claims"] else pd.Series(dtype=int)
        mine = counts([e for e in entries if e.paper == key])
        rows[data.get("title", key)] = {
            "tables (numbers) transcribed": f"{len(data['tables'])} ({printed_numbers(key):,})",
            "parameter counts rebuilt exactly": f"{exact} of {printed}" if printed else "none printed",
            "claims the paper's tables bear out / do not": f"{verdicts.get('yes', 0)} / {verdicts.get('no', 0)}",
            **({"ours: hold / do not / not decided": _ours(frames.get(key))} if frames is not None else {}),
            f"{profile} results stored / stale / asked": f"{mine['stored']} / {mine['stale']} / {mine['entries']}",
            "GPU-hours left": round(mine["gpu_hours_left"], 1),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def _ours(frame):
    """"hold / do not hold / not decided" of our verdicts in a claims frame ("—" where none)."""
    if frame is None:
        return "—"
    counts = frame["our verdict"].value_counts()
    return (f"{int(counts.get('holds', 0))} / {int(counts.get('does not hold', 0))} / "
            f"{sum(int(counts.get(v, 0)) for v in NOT_DECIDED)}")
