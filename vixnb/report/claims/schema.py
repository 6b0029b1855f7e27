"""How a paper file states its claims (the schema, read and checked by ``parse_claim``). The claims ledger
checks every quantitative claim of a paper's text against the paper's own tables and against our results
(``vixnb.report.claims``).

A paper file (``vixnb/papers/<key>.yaml``) ends with a ``claims:`` list, one mapping per claim:

``id``
    unique in the file, starting with the paper key (``vix-5.1-vin-vs-vit``).
``section``, ``text``
    where the claim is made, and a short paraphrase of it (never the paper's sentence).
``op``, ``value``, ``tolerance``
    the claimed figure: ``op`` is ``approx`` (within ``tolerance``, required), ``at_least`` (>=),
    ``at_most`` (<=), ``greater`` (>) or ``less`` (<); ``value`` and ``tolerance`` are numbers in the
    figure's units, or fractions written as text (``"1/3"``).
``spread`` (optional)
    the paper's own reported run-to-run spread of the metric, in points: one seed of ours whose verdict that much
    noise would turn decides nothing (``rules``; 1 point where the paper reports none).
``method``
    how the figure is computed from per-model metrics:

    - ``relative_gain``: (a - b) / b, in %;
    - ``point_gain``: a - b, in the metric's units (points for top-1/top-5);
    - ``ratio``: a / b;
    - ``value``: a itself;
    - ``correlation``: Pearson's r of metrics ``x`` and ``y`` over ``models``.
``metric``
    the per-model metric of ``relative_gain`` / ``point_gain`` / ``ratio`` / ``value``: a column of the
    paper's table (``top1``, ``top5``, ``params``, ``size_mb``, ``gpu_gb``) or another metric of ours
    (``metrics.METRICS``).
``metric_b``
    the metric of the ``b`` side where it is not ``metric`` (a row's top-1 after post-training against its own
    top-1 before it: ``metric: top1``, ``metric_b: top1_main``, ``a`` and ``b`` the same rows); ``point_gain``,
    ``relative_gain`` and ``ratio`` only.
``a``, ``b``
    a model or a list of models. With one model on a side it pairs with each model of the other; with
    lists on both sides ``pairs`` says how: ``zip`` (in order: a[i] with b[i]) or ``cross`` (every a with
    every b). With more than one pair ``over`` says what the figure is: ``mean`` (the mean over the pairs),
    ``all`` (every pair must satisfy the claim; the figure shown is the pair farthest from it), ``max`` or
    ``min`` (the largest / smallest pair, e.g. "up to").
``x``, ``y``, ``models``
    for ``correlation``: the two metrics and the models, a list or ``{paper: KEY, table: NAME}`` (that
    table's models, in printed order).
``dataset`` without ``table``
    the paper prints no numbers for the claim (Table 6 has no Parameters column, yet the text says RoPE
    leaves the count as it was): the paper side reads "—", ours is computed on ``dataset``.
``table``
    the paper's table whose printed rows give the paper-side figure; its ``dataset`` is the dataset of
    our runs. A list of tables on one dataset reads their rows together (a claim comparing Table 6's RoPE
    models with Table 1's: ``[table6, table1]``). ``dataset`` names our dataset where no table gives it
    (``models: {paper, table}`` does too).
``printed``
    the paper-side figure is printed rather than computed from rows: ``{table, row, column}`` (a cell of a
    table whose rows are lists under ``columns``, or mappings) or ``{path: [key, ...]}`` into the paper file
    (``[ram_fit, slope_gb_per_gflop]``). The paper-side check then compares the text with the paper's table.
``reading``
    how an ambiguous text was read (relative % or points, which models "all" means, what "negligible" is).
``not_testable``
    why this study cannot test the claim; it is listed, with no verdict on our side.
``also`` (optional)
    the claim's further parts, each ``{op, value[, tolerance]}`` on the same figure: a claim is judged on every part
    it states ("nearly identical, the simplified ahead by a small margin": ``op: greater, value: 0`` and ``also:
    [{op: at_most, value: 2}]``). A sign part that fails decides "does not hold" under a shorter protocol, a
    magnitude part only at the paper's.
``predicts_failure`` (optional)
    the runs (rows of ``a``/``b``) whose failure the claim predicts ("without skips the model does not train"): their
    failing or not learning is the claim's measure, not a reason to decide nothing (``rules``).
``rests_on`` (optional)
    the ids of the claims (of the same file) that state the sentence's other parts, each judged on its own ("more
    accurate, with fewer parameters": the parameter part is its own claim): this claim holds only where they all hold
    too; where one does not, is not yet run or decides nothing, so does this claim, saying which.
``exceeds`` (optional)
    the ids of the claims (of the same file) whose figures this claim's figure must exceed in size (absolute value):
    a part of the sentence that orders it above them ("the strongest link": r of FLOPs and training memory above
    every other correlation of a theoretical metric with a measured cost), on the paper's side and on ours.
``authors_build`` (optional)
    the claim is about the authors' build of its models, which ours differs from: ``how`` (text: what differs) and,
    where ours can be built their way, ``settings`` (``{model: create_model settings}``: the authors' build of each
    model that differs; the figure is then ours on their build, our build's beside it). Without ``settings``: "not
    decided: our build differs", saying how, our build's figure beside it. Counted metrics only (parameters, size):
    no run is made of the authors' build.
``question`` (optional, true)
    a question of ours set beside the paper's claims (the same correlation on our fused path), not a claim the paper
    makes: listed apart, with its own status words (``QUESTION_WORDS``), and counted in no tally of the paper's
    claims.

Each claim is evaluated three ways (``claims``): (a) on the paper's own printed numbers: the figure and
whether they bear the claim out; (b) on ours: "holds", "does not hold", "not yet run" (with what is missing)
or "not testable here"; (c) how it was read. A claim the evaluator cannot read raises ``ClaimError``, naming
the paper file and the claim id. Later papers add their claims in the same form; a paper whose models need
a configuration other than the registry's default (e.g. the ViX paper's Table 6, with RoPE) needs its own
model names before claims on it can be checked against our runs.

``ours`` is ``{model: {metric: value}}`` (our figures on the claim's dataset), or, for several datasets,
``{dataset: {model: {metric: value}}}``; a value that is not a number (None, a reason) counts as missing.
``ours_from_store`` builds it from the results store (``metrics.METRICS`` says where each metric comes from).
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction

from ... import papers
from ..records.metrics import METRICS, metric_unit

#: op -> symbol on the page
OPS = {"approx": "≈", "at_least": "≥", "at_most": "≤", "greater": ">", "less": "<"}
PAIRWISE = ("relative_gain", "point_gain", "ratio", "value")
METHODS = (*PAIRWISE, "correlation")
PAIRINGS = ("zip", "cross")
OVERS = ("mean", "all", "max", "min")
FIELDS = {"id", "section", "text", "op", "value", "tolerance", "method", "metric", "metric_b", "a", "b", "pairs",
          "over", "x", "y", "models", "table", "dataset", "printed", "reading", "not_testable", "spread", "also",
          "predicts_failure", "question", "rests_on", "exceeds", "authors_build"}

PAPER_YES, PAPER_NO, PAPER_NONE = "yes", "no", "—"
HOLDS, FAILS, NOT_RUN, NOT_TESTABLE = "holds", "does not hold", "not yet run", "not testable here"
#: our figure is shown but cannot decide the claim: synthetic data, or a shorter protocol than the paper's
UNDECIDED = "not decided here"
COLUMNS = ["section", "claim", "claimed", "paper figure", "paper bears it out", "our figure", "our verdict",
           "seeds", "why no verdict", "reading"]


class ClaimError(papers.PaperFileError):
    """A claim of a paper file that cannot be evaluated as written."""


class MissingFigures(Exception):
    """Our figures lack what a claim needs (the figures named in ``args[0]``)."""


# --------------------------------------------------------------------------------------------------
# reading a claim


def _fail(key, claim, problem):
    cid = claim.get("id") if isinstance(claim, dict) else None
    raise ClaimError(f"vixnb/papers/{key}.yaml, claim {cid!r}: {problem}")


def _number(key, claim, field):
    """A claim's number: int/float, or a fraction written as text ("1/3")."""
    raw = claim.get(field)
    if isinstance(raw, bool):
        _fail(key, claim, f"`{field}` must be a number or a fraction like \"1/3\", not {raw!r}")
    if isinstance(raw, numbers.Real):
        if not math.isfinite(raw):
            _fail(key, claim, f"`{field}` is {raw!r}; give a finite number (a claim is judged on it)")
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(Fraction(raw.replace(" ", "")))
        except (ValueError, ZeroDivisionError):
            pass
    _fail(key, claim, f"`{field}` must be a number or a fraction like \"1/3\", not {raw!r}")


def in_sections(claim, sections):
    """Whether ``claim`` is made in one of ``sections`` (None: any); "5.2" takes "5.2 (Figure 4)" too."""
    if sections is None:
        return True
    section = str(claim.get("section", ""))
    return any(section == str(s) or section.startswith(f"{s} ") for s in sections)


def _models(key, claim, field):
    value = claim.get(field)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(m, str) for m in value):
        return list(value)
    _fail(key, claim, f"`{field}` must be a model name or a non-empty list of them, not {value!r}")


def _table_of(key, claim, name):
    try:
        return papers.table(key, name)
    except papers.PaperFileError as e:
        _fail(key, claim, f"table {name!r}: {e}")


def claim_table(key, claim):
    """The table a claim reads: ``{"rows": {model: row}, "dataset": ...}``, the rows of every table its ``table``
    names (one name or a list of tables on one dataset), in printed order."""
    names = claim["table"] if isinstance(claim["table"], list) else [claim["table"]]
    if not names or not all(isinstance(n, str) for n in names):
        _fail(key, claim, f"`table` must be a table name or a list of them, not {claim['table']!r}")
    tables = [_table_of(key, claim, name) for name in names]
    datasets = {t.get("dataset") for t in tables}
    if len(datasets) > 1:
        _fail(key, claim, f"the tables {', '.join(names)} are on different datasets ({', '.join(map(str, datasets))})")
    rows = {}
    for table in tables:
        for model, row in table["rows"].items():
            if model in rows:
                _fail(key, claim, f"model {model!r} is in more than one of the tables {', '.join(names)}")
            rows[model] = row
    return {"rows": rows, "dataset": datasets.pop()}


def _correlation_models(key, claim):
    spec = claim.get("models")
    if isinstance(spec, dict):
        if set(spec) != {"paper", "table"}:
            _fail(key, claim, f"`models` as a mapping needs exactly `paper` and `table`, not {sorted(spec)}")
        try:
            return (papers.table_models(spec["paper"], spec["table"]),
                    papers.table(spec["paper"], spec["table"]).get("dataset"))
        except papers.PaperFileError as e:
            _fail(key, claim, f"`models`: {e}")
    if isinstance(spec, list) and len(spec) >= 3 and all(isinstance(m, str) for m in spec):
        return list(spec), None
    _fail(key, claim, f"`models` must be a list of at least three models or {{paper, table}}, not {spec!r}")


def parse_claim(key, claim):
    """One claim of paper ``key``, checked and resolved: a dict with the claim's fields plus ``value`` and
    ``tolerance`` as floats, ``claimed`` (the figure as text), ``pair_list`` ((a, b) of each pair of a
    pairwise claim), ``models`` (correlation), ``dataset`` (of our figures) and ``testable``. Raises ``ClaimError``
    naming the paper file and the claim id."""
    if not isinstance(claim, dict):
        raise ClaimError(f"vixnb/papers/{key}.yaml: a claim must be a mapping, not {claim!r}")
    if not isinstance(claim.get("id"), str) or not claim["id"]:
        _fail(key, claim, "every claim needs an `id`")
    unknown = set(claim) - FIELDS
    if unknown:
        _fail(key, claim, f"unknown field(s) {', '.join(sorted(unknown))}; the fields are {', '.join(sorted(FIELDS))}")
    for field in ("section", "text"):
        if not isinstance(claim.get(field), (str, int, float)) or claim.get(field) == "":
            _fail(key, claim, f"needs a `{field}`")
    if claim.get("op") not in OPS:
        _fail(key, claim, f"`op` must be one of {', '.join(OPS)}, not {claim.get('op')!r}")
    also = claim.get("also")
    if also is not None:
        if not isinstance(also, list) or not also or not all(
                isinstance(p, dict) and p.get("op") in OPS and set(p) <= {"op", "value", "tolerance"} for p in also):
            _fail(key, claim, "`also` must be a list of {op, value[, tolerance]} conditions on the same figure")
        parts = []
        for part in also:
            checked = {"op": part["op"], "value": _number(key, part | {"id": claim["id"]}, "value")}
            if part["op"] == "approx":
                if "tolerance" not in part:
                    _fail(key, claim, "an `approx` part of `also` needs a `tolerance`")
                checked["tolerance"] = _number(key, part | {"id": claim["id"]}, "tolerance")
            parts.append(checked)
        claim = {**claim, "also": parts}
    if claim.get("question") not in (None, True):
        _fail(key, claim, "`question` is true (a question of ours beside the paper's claims), or left out")
    out = dict(claim, section=str(claim["section"]), value=_number(key, claim, "value"), tolerance=None, pair_list=None,
               models=None, models_from=None, dataset=claim.get("dataset"), raw=dict(claim))
    if claim["op"] == "approx":
        if "tolerance" not in claim:
            _fail(key, claim, "an `approx` claim needs a `tolerance` (in the figure's units)")
        out["tolerance"] = _number(key, claim, "tolerance")
        if out["tolerance"] < 0:
            _fail(key, claim, "`tolerance` must not be negative")
    elif "tolerance" in claim:
        _fail(key, claim, f"`tolerance` applies to `approx` claims only, not to `{claim['op']}`")
    not_testable = claim.get("not_testable")
    if not_testable is not None and (not isinstance(not_testable, str) or not not_testable):
        _fail(key, claim, "`not_testable` must say why, as text")
    out["testable"] = not_testable is None
    method = claim.get("method")
    if method is None:
        if out["testable"]:
            _fail(key, claim, f"needs `method` ({', '.join(METHODS)}) unless it is `not_testable`")
    elif method not in METHODS:
        _fail(key, claim, f"`method` must be one of {', '.join(METHODS)}, not {method!r}")
    if "printed" in claim:
        printed_figure(key, claim)  # checked now: a bad cell is an error of the file, not of the evaluation
    if claim.get("table") is not None:
        table = claim_table(key, claim)
        out["dataset"] = out["dataset"] or table.get("dataset")
    if method in PAIRWISE:
        if not isinstance(claim.get("metric"), str):
            _fail(key, claim, f"`{method}` needs a `metric` (e.g. {', '.join(METRICS)})")
        if "metric_b" in claim and (method == "value" or not isinstance(claim["metric_b"], str)):
            _fail(key, claim, "`metric_b` (a metric name) applies to `point_gain`, `relative_gain` and `ratio` only")
        a = _models(key, claim, "a")
        if method == "value":
            if "b" in claim:
                _fail(key, claim, "`value` takes `a` only")
            pairs = [(m, None) for m in a]
        else:
            b = _models(key, claim, "b")
            if len(a) > 1 and len(b) > 1:
                if claim.get("pairs") not in PAIRINGS:
                    _fail(key, claim, f"with lists for both `a` and `b`, `pairs` must be one of {', '.join(PAIRINGS)}")
                if claim["pairs"] == "zip":
                    if len(a) != len(b):
                        _fail(key, claim, f"`pairs: zip` needs lists of the same length ({len(a)} and {len(b)})")
                    pairs = list(zip(a, b))
                else:
                    pairs = [(x, y) for x in a for y in b]
            else:
                if "pairs" in claim:
                    _fail(key, claim, "`pairs` applies only when both `a` and `b` are lists")
                pairs = [(x, y) for x in a for y in b]
        if len(pairs) > 1 and claim.get("over") not in OVERS:
            _fail(key, claim, f"{len(pairs)} pairs: `over` must be one of {', '.join(OVERS)}")
        if len(pairs) == 1 and "over" in claim:
            _fail(key, claim, "`over` applies only to more than one pair")
        out["pair_list"] = pairs
        if "printed" not in claim and (claim.get("table") is not None or not claim.get("dataset")):
            if claim.get("table") is None:
                _fail(key, claim, "needs the `table` its figures are printed in (or `printed`, or only the "
                                  "`dataset` of ours where the paper prints none)")
            rows = table["rows"]
            sides = [(m, claim["metric"]) for m, _ in pairs] + [(m, claim.get("metric_b", claim["metric"]))
                                                                for _, m in pairs if m is not None]
            for model, metric in dict.fromkeys(sides):
                if model not in rows:
                    _fail(key, claim, f"model {model!r} is not in {claim['table']} (its models: {', '.join(rows)})")
                if not isinstance(rows[model].get(metric), numbers.Real):
                    _fail(key, claim, f"{claim['table']} prints no {metric!r} for {model!r}")
    elif method == "correlation":
        for field in ("x", "y"):
            if not isinstance(claim.get(field), str):
                _fail(key, claim, "`correlation` needs metrics `x` and `y`")
        models, dataset = _correlation_models(key, claim)
        out["models"], out["dataset"] = models, out["dataset"] or dataset
        out["models_from"] = claim["models"] if isinstance(claim["models"], dict) else None
        if "printed" not in claim:
            if claim.get("table") is None:
                _fail(key, claim, "needs `printed` (the printed coefficient) or the `table` to compute it from")
            rows = table["rows"]
            for model in models:
                for metric in (claim["x"], claim["y"]):
                    if not isinstance((rows.get(model) or {}).get(metric), numbers.Real):
                        _fail(key, claim, f"{claim['table']} prints no {metric!r} for {model!r}")
    if out["testable"] and not out["dataset"]:
        _fail(key, claim, "names no dataset for our figures: give a `table` with a dataset, or `dataset`")
    predicted = claim.get("predicts_failure")
    if predicted is not None:
        named = {m for pair in out["pair_list"] or [] for m in pair if m is not None} | set(out["models"] or [])
        if not isinstance(predicted, list) or not predicted or not set(predicted) <= named:
            _fail(key, claim, f"`predicts_failure` must list runs the claim compares ({', '.join(sorted(named))}), "
                              f"not {predicted!r}")
    for field in ("rests_on", "exceeds"):
        ids = claim.get(field)
        if ids is not None and (not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids)
                                or claim["id"] in ids):
            _fail(key, claim, f"`{field}` must be a list of the ids of other claims of the file, not {ids!r}")
    build = claim.get("authors_build")
    if build is not None:
        named = {m for pair in out["pair_list"] or [] for m in pair if m is not None} | set(out["models"] or [])
        settings = build.get("settings") if isinstance(build, dict) else None
        if not isinstance(build, dict) or set(build) - {"how", "settings"} or not isinstance(build.get("how"), str) \
                or not build["how"] or (settings is not None and not (
                    isinstance(settings, dict) and settings and set(settings) <= named
                    and all(isinstance(v, dict) for v in settings.values()))):
            _fail(key, claim, "`authors_build` must be {how: what differs[, settings: {model: settings}]}, the models "
                              f"among those the claim compares ({', '.join(sorted(named))})")
        if method == "correlation" or any(METRICS[m].origin != "counted" for m in
                                          {claim.get("metric"), claim.get("metric_b", claim.get("metric"))} - {None}):
            _fail(key, claim, "`authors_build` applies to counted metrics (parameters, size) of pairwise claims only")
    out["claimed"] = _claimed(out)
    return out


def printed_figure(key, claim):
    """The paper's printed figure of a claim with ``printed``."""
    spec = claim["printed"]
    if isinstance(spec, dict) and set(spec) == {"path"} and isinstance(spec["path"], list) and spec["path"]:
        node = papers.load(key)
        for step in spec["path"]:
            if isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
                node = node[step]
            else:
                _fail(key, claim, f"`printed.path` {spec['path']!r}: no {step!r} in the paper file")
        value = node
    elif isinstance(spec, dict) and set(spec) == {"table", "row", "column"}:
        table = _table_of(key, claim, spec["table"])
        row = table["rows"].get(spec["row"])
        if row is None:
            _fail(key, claim, f"{spec['table']} has no row {spec['row']!r} (rows: "
                              f"{', '.join(map(str, table['rows']))})")
        if isinstance(row, list):
            columns = table.get("columns") or []
            if spec["column"] not in columns:
                _fail(key, claim, f"{spec['table']} has no column {spec['column']!r} (columns: "
                                  f"{', '.join(map(str, columns))})")
            value = row[columns.index(spec["column"])] if columns.index(spec["column"]) < len(row) else None
        else:
            value = row.get(spec["column"])
    else:
        _fail(key, claim, "`printed` must be {table, row, column} or {path: [key, ...]}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(key, claim, f"`printed` points at {value!r}, not a number")
    return float(value)


def _fraction_text(raw):
    return raw.replace(" ", "") if isinstance(raw, str) else f"{raw:g}"


def claim_unit(claim, value=None):
    """The unit a claim's figure is printed with (" %", " points", " point" for a ``value`` of one), or ""."""
    method = claim.get("method")
    if method == "relative_gain":
        return " %"
    if method in ("point_gain", "value"):
        unit = metric_unit(claim["metric"])
        if unit == "points" and value is not None and abs(value) == 1:
            unit = "point"
        return f" {unit}" if unit else ""
    return ""


def _claimed(claim):
    """The claimed figure as text: "≈ 16 % (± 4)", "ratio < 1/3", "r ≈ 0.85 (± 0.1)"."""
    prefix = {"ratio": "ratio ", "correlation": "r "}.get(claim.get("method"), "")
    raw = claim["raw"]
    text = f"{prefix}{OPS[claim['op']]} {_fraction_text(raw['value'])}{claim_unit(claim, claim['value'])}"
    if claim["op"] == "approx":
        text += f" (± {_fraction_text(raw['tolerance'])})"
    for part in claim.get("also") or []:
        text += f" and {OPS[part['op']]} {part['value']:g}{claim_unit(claim, part['value'])}"
        if part["op"] == "approx":
            text += f" (± {part['tolerance']:g})"
    return text


def paper_claims(key):
    """The claims of paper ``key``'s file, each checked (``parse_claim``); ids must be unique."""
    entries = papers.claims(key)
    seen = set()
    for claim in entries:
        parsed = parse_claim(key, claim)
        if parsed["id"] in seen:
            _fail(key, claim, "the id is used twice in the file")
        seen.add(parsed["id"])
    for claim in entries:
        for field in ("rests_on", "exceeds"):
            unknown = [i for i in claim.get(field) or [] if i not in seen]
            if unknown:
                _fail(key, claim, f"`{field}` names {', '.join(unknown)}, no claim of the file")
    return entries
