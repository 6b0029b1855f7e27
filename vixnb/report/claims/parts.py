"""A claim's parts that its own figure does not carry: the authors' build it is about (``authors_build``: judged on
their build, ours beside it, or "not decided: our build differs"), the parts of its sentence that other claims state
(``rests_on``: it holds only where they hold) and the claims whose figures it must exceed in size (``exceeds``: "the
strongest link"). ``verdicts.evaluate`` and ``verdicts.claims`` apply them; the schema is ``schema``'s."""
from __future__ import annotations

import numbers

from ... import papers
from ...models import list_models
from ..tables.pages import label as _model_label
from . import rules
from .schema import FAILS, HOLDS, NOT_RUN, PAPER_NO, PAPER_YES, MissingFigures

AUTHORS = "@authors"  # a model's name with this suffix: the authors' build of it (a claim's ``authors_build``)


def authors_label(name, key=None):
    """A model's label (``run_label``), or for the authors' build of one (``AUTHORS``) its label and "authors'
    build"."""
    if name.endswith(AUTHORS):
        return f"{run_label(name[:-len(AUTHORS)], key)} (authors' build)"
    return run_label(name, key)


def authors_claim(claim):
    """A claim with ``authors_build`` settings as judged on the authors' build: each model it builds otherwise
    (``settings``) read as its ``AUTHORS`` twin, whose figures ``ours.ours_from_store`` counts."""
    built = set(claim["authors_build"]["settings"])
    twin = lambda m: f"{m}{AUTHORS}" if m in built else m  # noqa: E731
    return {**claim, "pair_list": [(twin(a), twin(b) if b is not None else None) for a, b in claim["pair_list"]]}


def authors_verdict(claim, judged, evaluate, verdict, why):
    """``(verdict, why)`` of a claim about the authors' build (``authors_build``): on their build where ``judged``
    is it (our build's figure beside it), else "not decided: our build differs" with our build's figure; each says
    how the builds differ. ``evaluate(claim)``: ``(figure, holds, pair)`` of a claim on our figures."""
    build = claim["authors_build"]
    if judged is claim:  # ours cannot be built their way: our build's figure is shown, and decides nothing
        ours = f"our build's figure: {verdict}"
        return rules.BUILD, "; ".join(t for t in (build["how"], ours, why) if t)
    try:
        figure, holds, _ = evaluate(claim)
        beside = f"our build: {_text(figure)}, {HOLDS if holds else FAILS}"
    except MissingFigures:
        beside = "our build: not counted"
    return verdict, "; ".join(t for t in (f"judged on the authors' build ({build['how']})", beside, why) if t)


def with_other_parts(chosen, rows, other):
    """``rows`` (``verdicts.evaluate`` of the claims ``chosen``) with each claim's parts stated by other claims
    applied: its ``rests_on`` claims must hold too (the verdict is the first that does not, saying which), and its
    figure must exceed in size each figure of its ``exceeds`` claims, on the paper's side and on ours. ``other(id)``:
    the evaluation of another claim of the file."""
    if not any(c.get("rests_on") or c.get("exceeds") for c in chosen):
        return rows
    out = []
    for claim, row in zip(chosen, rows):
        row = dict(row)
        for cid in claim.get("rests_on") or []:
            _rest_on(row, other(cid))
        if claim.get("exceeds"):
            _exceed(row, [other(cid) for cid in claim["exceeds"]])
        out.append(row)
    return out


def _note(row, text):
    row["why"] = "; ".join(t for t in (row["why"], text) if t)


def _rest_on(row, part):
    """``row`` holds only where its other part (``part``, another claim's evaluation) holds too."""
    if row["paper_verdict"] == PAPER_YES and part["paper_verdict"] == PAPER_NO:
        row["paper_verdict"] = PAPER_NO
    said = f"its other part, {part['id']}: {part['our_verdict']}"
    if row["our_verdict"] == HOLDS and part["our_verdict"] != HOLDS:
        row["our_verdict"] = FAILS if part["our_verdict"] == FAILS else part["our_verdict"]
        said += f" ({part['why']})" if part["why"] else ""
    _note(row, said)


def _exceed(row, others):
    """``row``'s figure must exceed in size every figure of ``others`` (the claims its ``exceeds`` names): the
    paper's figures on its side, ours on ours."""
    names = ", ".join(o["id"] for o in others)
    if row["paper_verdict"] == PAPER_YES and any(o["paper_figure"] is not None and
                                                 abs(o["paper_figure"]) >= abs(row["paper_figure"]) for o in others):
        row["paper_verdict"] = PAPER_NO
    if row["our_verdict"] != HOLDS:
        return
    figures = [o["our_figure"] for o in others]
    if any(f is None for f in figures):
        missing = [o["id"] for o, f in zip(others, figures) if f is None]
        row["our_verdict"] = NOT_RUN
        _note(row, f"its ordering part (above each of the {len(others)} claims it names) needs {len(missing)} of their "
                   "figures, not yet run: " + ", ".join(missing))
    elif any(abs(f) >= abs(row["our_figure"]) for f in figures):
        larger = [f"{o['id']} ({_text(f)})" for o, f in zip(others, figures) if abs(f) >= abs(row["our_figure"])]
        row["our_verdict"] = FAILS
        _note(row, "its ordering part does not hold: larger in size: " + ", ".join(larger))
    else:
        _note(row, f"its ordering part holds: above each of {names}")


def _text(figure):
    return f"{figure:,.2f}" if isinstance(figure, numbers.Real) else str(figure)


def run_label(name, key=None):
    """A model's label, or for a run that paper ``key``'s tables name (a row with a ``model`` and ``settings``), the
    label of its first row with its name beside it ("no padding in the embedding (cnv_no_pad)")."""
    if key is not None and name not in list_models():
        for table in papers.load(key)["tables"]:
            entry = papers.table(key, table)["rows"].get(name)
            if isinstance(entry, dict) and entry.get("label"):
                return f"{entry['label']} ({name})"
    return _model_label(name)
