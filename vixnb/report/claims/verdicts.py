"""Claims evaluated: each claim of a paper file (``vixnb.report.claims.schema``) checked against the paper's
own printed numbers and against ours, and the ledger's table for the page (``claims``, ``summary``,
``page``)."""
from __future__ import annotations

import math
import numbers
import statistics

import pandas as pd

from ... import papers
from ...escape import html_text
from ...runs.profiles import get_profile
from .schema import (COLUMNS, FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, PAPER_NO, PAPER_NONE, PAPER_YES, PAIRWISE,
                           UNDECIDED, MissingFigures, printed_figure, claim_unit, claim_table, in_sections,
                           paper_claims, parse_claim)
from ..records.metrics import MODEL_METRICS, STEP_METRICS, metric_label, metric_unit
from ..tables.pages import label as _model_label
from ..tables.pages import page_table
from . import rules
from .parts import authors_claim, authors_label, authors_verdict, run_label, with_other_parts


# --------------------------------------------------------------------------------------------------
# evaluating a claim


def _satisfies(claim, figure):
    return rules.satisfies(claim, figure)


def _distance(claim, figure):
    """How far a figure is from satisfying the claim (larger = worse), on the worst of its parts (``also``: every
    bound it states); picks the pair shown for ``over: all``, the one that decides."""
    def part(op, value, tolerance):
        if op == "approx":
            return abs(figure - value) - tolerance
        return value - figure if op in ("at_least", "greater") else figure - value

    return max(part(p["op"], p["value"], p.get("tolerance") or 0.0) for p in rules.claim_parts(claim))


def _evaluate(claim, get):
    """(figure, holds, shown pair) of a claim, with ``get(model, metric)`` giving a number or raising
    ``_Missing``. Every missing figure is collected before ``_Missing`` is raised."""
    missing = []

    def value(model, metric):
        try:
            return get(model, metric)
        except MissingFigures as e:
            missing.extend(e.args[0])
            return None

    if claim["method"] == "correlation":
        xs = [value(m, claim["x"]) for m in claim["models"]]
        ys = [value(m, claim["y"]) for m in claim["models"]]
        if missing:
            raise MissingFigures(missing)
        try:
            figure = statistics.correlation(xs, ys)
        except statistics.StatisticsError:  # a constant metric: no correlation
            figure = math.nan
        return figure, (not math.isnan(figure)) and _satisfies(claim, figure), None
    metric, figures = claim["metric"], []
    metric_b = claim.get("metric_b", metric)
    for a, b in claim["pair_list"]:
        va, vb = value(a, metric), (value(b, metric_b) if b is not None else None)
        if va is None or (b is not None and vb is None):
            continue
        if claim["method"] in ("relative_gain", "ratio") and vb == 0:
            figures.append(((a, b), math.nan))
            continue
        figures.append(((a, b), rules.pair_figure(claim["method"], va, vb)))
    if missing:
        raise MissingFigures(missing)
    if any(math.isnan(f) for _, f in figures):
        pair = next(p for p, f in figures if math.isnan(f))
        return math.nan, False, pair
    if len(figures) == 1:
        (pair, figure), = figures
        return figure, _satisfies(claim, figure), None
    over = claim["over"]
    if over == "mean":
        figure = statistics.fmean(f for _, f in figures)
        return figure, _satisfies(claim, figure), None
    if over in ("max", "min"):
        pair, figure = (max if over == "max" else min)(figures, key=lambda pf: pf[1])
        return figure, _satisfies(claim, figure), pair
    pair, figure = max(figures, key=lambda pf: _distance(claim, pf[1]))
    return figure, all(_satisfies(claim, f) for _, f in figures), pair


def _sign_failed(claim, get):
    """Whether a sign or ordering part of a claim with parts (``also``) fails on our figures, pair by pair."""
    if not claim.get("also") or claim.get("method") == "correlation":
        return False
    metric_b = claim.get("metric_b", claim["metric"])
    figures = [rules.pair_figure(claim["method"], get(a, claim["metric"]), get(b, metric_b) if b is not None else None)
               for a, b in claim["pair_list"]]
    if claim.get("over") == "mean" and len(figures) > 1:
        figures = [statistics.fmean(figures)]
    return any(rules.sign_fails(claim, f) for f in figures)


def _paper_getter(key, claim):
    rows = claim_table(key, claim)["rows"]
    return lambda model, metric: float(rows[model][metric])


def _ours_for(ours, dataset):
    """Our figures on ``dataset``: ``ours`` itself when flat (``{model: {metric: value}}``), else ``ours[dataset]``."""
    if not ours:
        return {}
    nested = any(isinstance(v, dict) and any(isinstance(w, dict) for w in v.values()) for v in ours.values())
    return (ours.get(dataset) or {}) if nested else ours


def _ours_getter(figures):
    def get(model, metric):
        value = (figures.get(model) or {}).get(metric)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise MissingFigures([(metric, model)])
        return float(value)
    return get


def _model_order(key, claim):
    """The models of a claim in the order of its table (else as named), for listing what is missing."""
    if claim.get("models"):
        return list(claim["models"])
    named = [m for pair in claim["pair_list"] for m in pair if m is not None]
    tabled = list(claim_table(key, claim)["rows"]) if claim.get("table") else []
    return [*tabled, *(m for m in named if m not in tabled)]


def _missing_text(missing, order=(), key=None):
    by_metric = {}
    for metric, model in missing:
        by_metric.setdefault(metric, [])
        if model not in by_metric[metric]:
            by_metric[metric].append(model)
    rank = {m: i for i, m in enumerate(order)}
    for models in by_metric.values():
        models.sort(key=lambda m: rank.get(m, len(rank)))
    def who(models):
        if len(models) > 3 and set(models) == set(order):
            return f"all {len(models)} models"
        return ", ".join(run_label(m, key) for m in models)

    return "missing: " + "; ".join(f"{metric_label(metric)} of {who(models)}"
                                   for metric, models in by_metric.items())


def _pair_text(pair, key=None):
    a, b = pair
    return run_label(a, key) if b is None else f"{run_label(a, key)} vs {run_label(b, key)}"


def _table_text(key, name):
    if isinstance(name, list):
        return " and ".join(_table_text(key, n) for n in name)
    entry = papers.table(key, name)
    caption = str(entry.get("caption", name)).split(":")[0]
    return f"{key} {caption}" + (f", {entry['dataset']}" if entry.get("dataset") else "")


def _reading(key, claim, paper_pair, our_pair):
    """How the claim was read: the computation, the models and pairs, the other reading of a gain, the note."""
    method = claim.get("method")
    parts = []
    if method in PAIRWISE:
        label = metric_label(claim["metric"])
        if claim.get("metric_b"):
            label = f"{label} (a) and {metric_label(claim['metric_b'])} (b)"
        what = {"relative_gain": f"relative gain (a − b) / b of {label}, in %",
                "point_gain": f"difference a − b of {label}" + claim_unit(claim).replace(" ", ", in ", 1),
                "ratio": f"ratio a / b of {label}", "value": label}[method]
        pairs = claim["pair_list"]
        if len(pairs) == 1:
            who = _pair_text(pairs[0], key)
        elif claim.get("pairs") == "zip":
            who = "pairs " + ", ".join(_pair_text(p, key) for p in pairs)
        else:
            a = list(dict.fromkeys(p[0] for p in pairs))
            b = list(dict.fromkeys(p[1] for p in pairs))
            who = (f"each of {', '.join(run_label(m, key) for m in a)}" if len(a) > 1 else run_label(a[0], key))
            if method != "value":
                who += " vs " + (f"each of {', '.join(run_label(m, key) for m in b)}" if len(b) > 1
                                 else run_label(b[0], key))
        parts.append(f"{what}: {who}")
        over = claim.get("over") if len(pairs) > 1 else None
        shown = "; ".join(f"{side}: {_pair_text(p, key)}" for side, p in (("paper", paper_pair), ("ours", our_pair))
                          if p)
        if over == "mean":
            parts.append(f"the mean over the {len(pairs)} pairs")
        elif over == "all":
            parts.append(f"all {len(pairs)} pairs must satisfy it; shown: the pair farthest from it"
                         + (f" ({shown})" if shown else ""))
        elif over in ("max", "min"):
            parts.append(f"the {'largest' if over == 'max' else 'smallest'} of the {len(pairs)} pairs"
                         + (f" ({shown})" if shown else ""))
    elif method == "correlation":
        source = claim["models_from"]
        who = (f"the {len(claim['models'])} models of {_table_text(source['paper'], source['table'])}" if source
               else ", ".join(map(_model_label, claim["models"])))
        parts.append(f"Pearson r of {metric_label(claim['x'])} and {metric_label(claim['y'])} over {who}")
    if "printed" in claim:
        spec = claim["printed"]
        where = (f"{spec['table']}, row {spec['row']}, column {spec['column']}" if "table" in spec
                 else ".".join(map(str, spec["path"])))
        parts.append(f"the paper's figure as printed ({where})")
    elif claim.get("table") and method:
        parts.append(f"from {_table_text(key, claim['table'])}")
    elif not method:
        parts.append("not computed: the paper file holds none of the numbers behind it")
    else:
        parts.append("the paper prints none of the numbers behind it: ours only")
    # "% better" is ambiguous (relative or in points) only for a metric in points (accuracy)
    if method in ("relative_gain", "point_gain") and claim.get("table") and "printed" not in claim \
            and metric_unit(claim["metric"]) == "points" \
            and (len(claim["pair_list"]) == 1 or claim.get("over") == "mean"):
        other = dict(claim, method="point_gain" if method == "relative_gain" else "relative_gain")
        figure, _, _ = _evaluate(other, _paper_getter(key, claim))
        parts.append(f"as {'points' if method == 'relative_gain' else 'relative %'} the paper's figure "
                     f"would be {figure:.2f}")
    text = "; ".join(parts)
    text = text[:1].upper() + text[1:] + ("." if text else "")
    if claim.get("reading"):
        text = f"{text} {claim['reading']}".strip()
    return text


#: the methods that compare two of our own figures (A against B): a shortened protocol, the same for both, can
#: decide their sign or ordering (``rules.is_magnitude``), and the verdict names it
RELATIVE_METHODS = ("point_gain", "relative_gain", "ratio")


def protocol_note(key, claim, profile):
    """``(decided, note)``: whether figures of ``profile`` can decide ``claim`` (as its paper file writes it) of paper
    ``key``, and what the verdict must say of them, where the runs themselves are not known (``evaluate`` without
    ``rules.Figures``). The model's own metrics (``metrics.MODEL_METRICS``) are exact everywhere, but the
    ``smoke`` profile, a pipeline check on synthetic images, decides nothing at all; a GPU profile that trains fewer
    epochs than the paper's protocol (``budget``) decides the metrics that do not depend on the number of epochs
    (``metrics.STEP_METRICS``), and the sign or ordering of a comparison of two of our runs, the verdict giving each
    side's fraction of the paper's epochs ("FNet 10 of 100 epochs, ViT 10 of 40"); never a magnitude.
    ``profile=None`` or ``"paper"``: the paper's protocol."""
    if profile is None or profile == "paper":
        return True, ""
    if profile == "smoke":  # a pipeline check's page gives no verdict at all, not even on exact counts
        return False, "smoke profile: a pipeline check on synthetic images"
    claim = parse_claim(key, claim)
    metrics = [claim["x"], claim["y"]] if claim.get("method") == "correlation" else \
        [claim.get("metric"), claim.get("metric_b", claim.get("metric"))]
    if all(m in MODEL_METRICS or m in STEP_METRICS for m in metrics):
        return True, ""
    ours = get_profile(profile).get("epochs")
    if ours is None:
        return True, ""
    models = rules.claim_models(claim) if claim.get("method") else []
    facts = {m: rules.Facts(epochs=ours) for m in models}
    fractions = rules.protocol_label(key, models, facts, lambda m: run_label(m, key))
    if not fractions:
        return True, ""
    if claim.get("method") in RELATIVE_METHODS and claim.get("b") and not rules.is_magnitude(claim):
        return True, fractions
    return False, f"a magnitude is judged only at the paper's epochs ({fractions})"


def undecided_reason(key, claim, profile):
    """Why figures of ``profile`` cannot decide ``claim`` (``protocol_note``), or None where they can."""
    decided, note = protocol_note(key, claim, profile)
    return None if decided else note


def evaluate(key, claim, ours=None, *, profile=None):
    """One claim of paper ``key`` (a mapping from its paper file) evaluated three ways: a dict with
    ``paper_figure`` (from the paper's printed numbers, None where the paper file has none) and
    ``paper_verdict`` ("yes" / "no" / "—"), ``our_figure``, ``our_verdict`` ("holds", "does not hold", one of
    ``rules.NOT_DECIDED``, "not decided here" (smoke), "not yet run", "not testable here"), ``why`` (what is
    missing, why it is not testable, why the figure cannot decide it, or the shorter protocol a verdict was reached
    at), ``seeds`` (the fewest seeds behind a run figure, None where none is a run's) and ``reading``. Where ``ours``
    is a ``rules.Figures`` (the store's, with the runs behind each figure), ``rules.judge`` applies
    every rule; else only the profile's (``protocol_note``)."""
    raw, claim = claim, parse_claim(key, claim)
    # (a) the paper's printed numbers
    paper_figure, paper_verdict, paper_pair = None, PAPER_NONE, None
    if "printed" in claim:
        paper_figure = printed_figure(key, claim)
        paper_verdict = PAPER_YES if _satisfies(claim, paper_figure) else PAPER_NO
    elif claim.get("method") and claim.get("table"):
        paper_figure, holds, paper_pair = _evaluate(claim, _paper_getter(key, claim))
        paper_verdict = PAPER_YES if holds else PAPER_NO
    # (b) ours
    our_figure, our_pair, why, seeds = None, None, "", None
    facts = rules.facts_for(ours, claim.get("dataset"))
    label = lambda m: authors_label(m, key)  # noqa: E731
    if not claim["testable"]:
        our_verdict, why = NOT_TESTABLE, claim["not_testable"]
    else:
        get = _ours_getter(_ours_for(ours, claim["dataset"]))
        build = claim.get("authors_build")
        judged = authors_claim(claim) if build and build.get("settings") else claim
        try:
            our_figure, holds, our_pair = _evaluate(judged, get)
            our_verdict = HOLDS if holds else FAILS
            if isinstance(our_figure, float) and math.isnan(our_figure):
                our_figure, our_verdict, why = None, FAILS, "the figure is undefined (a zero or constant metric)"
            elif profile == "smoke" or facts is None:
                decided, why = protocol_note(key, raw, profile)
                our_verdict = our_verdict if decided else (UNDECIDED if profile == "smoke" else rules.PROTOCOL)
            else:
                our_verdict, why, seeds = rules.judge(key, judged, our_verdict, get, facts, label=label,
                                                      seed_spread=claim.get("spread"),
                                                      sign_failed=_sign_failed(judged, get))
            if build and our_verdict != UNDECIDED:
                our_verdict, why = authors_verdict(claim, judged, lambda c: _evaluate(c, get), our_verdict, why)
        except MissingFigures as e:
            unlearned = rules.unlearned_figures(e.args[0], facts, label) if facts else ""
            our_verdict, why = (rules.NOT_LEARNED, unlearned) if unlearned else \
                (NOT_RUN, _missing_text(e.args[0], _model_order(key, claim), key))
    return {"id": claim["id"], "section": claim["section"], "text": claim["text"], "claimed": claim["claimed"],
            "paper_figure": paper_figure, "paper_verdict": paper_verdict, "our_figure": our_figure,
            "our_verdict": our_verdict, "why": why, "seeds": seeds,
            "reading": _reading(key, claim, paper_pair, our_pair)}



#: our verdict of a question of ours (a claim entry with ``question: true``) in its own words: a question is
#: answered, not held
QUESTION_WORDS = {HOLDS: "yes", FAILS: "no"}


def claims(paper_key, ours=None, *, sections=None, profile=None, questions=False):
    """Every claim of paper ``paper_key`` evaluated against the paper's printed numbers and against ``ours``
    (see the module docstring; None: nothing of ours yet): a DataFrame indexed by claim id with ``COLUMNS``,
    for ``page`` / ``page_table``. Missing figures of ours give "not yet run" and what is missing.
    ``sections``: only the claims made in these sections of the paper (``["5.3"]``; a chapter's own;
    ``schema.in_sections``). ``profile``: where ``ours`` comes from; a profile that cannot decide a claim
    gives it "not decided here" (``undecided_reason``). ``questions``: instead of the paper's claims, the questions
    of ours its file sets beside them (``question: true``), answered "yes" / "no" (``QUESTION_WORDS``); they are in
    no count of the paper's claims."""
    chosen = [c for c in paper_claims(paper_key) if in_sections(c, sections) and bool(c.get("question")) == questions]
    if sections is not None and not chosen and not questions:
        raise ValueError(f"sections={list(sections)}: paper {paper_key!r} makes no claim there; its sections: "
                         f"{', '.join(dict.fromkeys(str(c.get('section')) for c in paper_claims(paper_key)))}")
    rows = [evaluate(paper_key, claim, ours, profile=profile) for claim in chosen]
    done = {r["id"]: r for r in rows}

    def other(cid):  # a claim another claim's parts name, evaluated once
        if cid not in done:
            done[cid] = evaluate(paper_key, next(c for c in paper_claims(paper_key) if c["id"] == cid), ours,
                                 profile=profile)
        return done[cid]

    rows = with_other_parts(chosen, rows, other)
    if questions:
        rows = [{**r, "our_verdict": QUESTION_WORDS.get(r["our_verdict"], r["our_verdict"])} for r in rows]
    frame = pd.DataFrame([{"id": r["id"], "section": r["section"], "claim": r["text"], "claimed": r["claimed"],
                           "paper figure": r["paper_figure"], "paper bears it out": r["paper_verdict"],
                           "our figure": r["our_figure"], "our verdict": r["our_verdict"], "seeds": r["seeds"],
                           "why no verdict": r["why"], "reading": r["reading"]} for r in rows],
                         columns=["id", *COLUMNS])
    frame = frame.set_index("id").astype(object)
    return frame.where(frame.notna(), None)


# --------------------------------------------------------------------------------------------------
# the page


#: our verdicts in the order a count lists them, with their plural
VERDICT_PLURALS = {HOLDS: "hold", FAILS: "do not hold", **{v: v for v in rules.NOT_DECIDED}, UNDECIDED: UNDECIDED,
                   NOT_RUN: NOT_RUN, NOT_TESTABLE: NOT_TESTABLE}


def claims_summary(frame):
    """One line of Markdown counting the verdicts of a ``claims`` frame; then, where some of ours decide nothing,
    why, one line per reason present (``rules.why_not_decided``)."""
    paper = frame["paper bears it out"].value_counts()
    ours = frame["our verdict"].value_counts()
    checked = int(paper.get(PAPER_YES, 0) + paper.get(PAPER_NO, 0))
    parts = [f"{len(frame)} claims. The paper's own numbers bear out {int(paper.get(PAPER_YES, 0))} of the "
             f"{checked} they can check."]
    counts = [f"{int(ours[v])} {v if ours[v] == 1 else VERDICT_PLURALS[v]}" for v in VERDICT_PLURALS if ours.get(v)]
    parts.append("Ours: " + ", ".join(counts) + ".")
    undecided = [v for v in rules.NOT_DECIDED if ours.get(v)]
    line = " ".join(parts)
    return line + ("\n\nWhy a figure of ours decides nothing here:\n\n" + rules.why_not_decided(undecided)
                   if undecided else "")


def verdict_text(row):
    """Our verdict of one ``claims`` row as the page shows it: figure, mark, verdict, seeds and what it rests on
    ("-15.85: ✗ does not hold (1 seed; Hybrid FNet 10 of 100 epochs, Hybrid ViL 10 of 40)")."""
    if row["our verdict"] == NOT_RUN and row["our figure"] is None:  # the table marks it; the to-run list says what
        return NOT_RUN  # (a figure of ours with a part not yet run is shown, with what its other part waits for)
    verdict = f"{MARKS.get(row['our verdict'], '')}{row['our verdict']}"
    text = f"{_figure_text(row['our figure'])}: {verdict}" if row["our figure"] is not None else verdict
    seeds = row.get("seeds")
    notes = [f"{int(seeds)} seed{'s' if seeds != 1 else ''}"] if seeds is not None and seeds == seeds else []
    if row["why no verdict"]:
        notes.append(row["why no verdict"])
    return text + (f" ({'; '.join(notes)})" if notes else "")


#: the compact page table's columns and their share of the text column
PAGE_COLUMNS = {"claim": "38%", "claimed": "14%", "paper's tables": "18%", "ours": "30%"}


def _figure_text(figure, missing="not computable"):
    if figure is None or (isinstance(figure, float) and math.isnan(figure)):
        return missing
    return f"{figure:,.2f}" if isinstance(figure, numbers.Real) else str(figure)


#: a verdict's mark on the page, so that a column of them can be scanned
MARKS = {HOLDS: "✓ ", PAPER_YES: "✓ ", FAILS: "✗ ", PAPER_NO: "✗ "}


def claim_anchor(claim_id):
    """The HTML id of a claim's row in ``claims_page`` ("claim-vix-5.1-vin-vs-vit"): the results page links to it."""
    return f"claim-{claim_id}"


def claims_page(frame, *, caption=None):
    """A ``claims`` frame as a table that fits the text column: one numbered row per claim with the claim
    (and its section), the claimed figure, the paper's own figure and whether it bears the claim out, and
    ours with our verdict (and what is missing, if anything); each row's number carries the claim's anchor
    (``claim_anchor``). ``claims_readings`` gives, under the same numbers, how each claim was read."""
    rows = {}
    for number, (_, row) in enumerate(frame.iterrows(), 1):
        ours = verdict_text(row)
        paper = f"{_figure_text(row['paper figure'])}: {MARKS.get(row['paper bears it out'], '')}" \
                f"{row['paper bears it out']}" if row["paper bears it out"] != PAPER_NONE \
            else _figure_text(row["paper figure"], "not printed: its tables hold no figure for it")
        rows[number] = {"claim": f"{row['claim']} (§{row['section']})", "claimed": row["claimed"],
                        "paper's tables": paper, "ours": ours}
    styler = page_table(pd.DataFrame.from_dict(rows, orient="index", columns=list(PAGE_COLUMNS)), caption=caption)
    if not hasattr(styler, "set_table_styles"):
        return styler
    ids = dict(enumerate(frame.index, 1))
    styler = styler.format_index(lambda n: f'<span id="{html_text(claim_anchor(ids[n]))}">{n}</span>', axis=0,
                                 escape=None)
    return styler.set_table_styles(
        {c: [{"selector": "td", "props": f"white-space: normal; text-align: left; width: {w};"}]
         for c, w in PAGE_COLUMNS.items()}, overwrite=False)


def claims_readings(frame):
    """Markdown: how each claim of a ``claims`` frame was read, numbered as in ``claims_page``."""
    return "\n".join(f"{number}. {html_text(row['reading'], quote=False)}"
                     for number, (_, row) in enumerate(frame.iterrows(), 1))
