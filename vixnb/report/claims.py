"""The claims ledger: every quantitative claim of a paper's text, checked against the paper's own tables and
against our results.

A paper file (``vixnb/papers/<key>.yaml``) ends with a ``claims:`` list, one mapping per claim:

``id``
    unique in the file, starting with the paper key (``vix-5.1-vin-vs-vit``).
``section``, ``text``
    where the claim is made, and a short paraphrase of it (never the paper's sentence).
``op``, ``value``, ``tolerance``
    the claimed figure: ``op`` is ``approx`` (within ``tolerance``, required), ``at_least`` (>=),
    ``at_most`` (<=), ``greater`` (>) or ``less`` (<); ``value`` and ``tolerance`` are numbers in the
    figure's units, or fractions written as text (``"1/3"``).
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
    (``METRICS``).
``a``, ``b``
    a model or a list of models. With one model on a side it pairs with each model of the other; with
    lists on both sides ``pairs`` says how: ``zip`` (in order: a[i] with b[i]) or ``cross`` (every a with
    every b). With more than one pair ``over`` says what the figure is: ``mean`` (the mean over the pairs),
    ``all`` (every pair must satisfy the claim; the figure shown is the pair farthest from it), ``max`` or
    ``min`` (the largest / smallest pair, e.g. "up to").
``x``, ``y``, ``models``
    for ``correlation``: the two metrics and the models, a list or ``{paper: KEY, table: NAME}`` (that
    table's models, in printed order).
``table``
    the paper's table whose printed rows give the paper-side figure; its ``dataset`` is the dataset of
    our runs. ``dataset`` names our dataset where no table gives it (``models: {paper, table}`` does too).
``printed``
    the paper-side figure is printed rather than computed from rows: ``{table, row, column}`` (a cell of a
    table whose rows are lists under ``columns``, or mappings) or ``{path: [key, ...]}`` into the paper file
    (``[ram_fit, slope_gb_per_gflop]``). The paper-side check then compares the text with the paper's table.
``reading``
    how an ambiguous text was read (relative % or points, which models "all" means, what "negligible" is).
``not_testable``
    why this study cannot test the claim; it is listed, with no verdict on our side.

Each claim is evaluated three ways (``claims``): (a) on the paper's own printed numbers: the figure and
whether they bear the claim out; (b) on ours: "holds", "does not hold", "not yet run" (with what is missing)
or "not testable here"; (c) how it was read. A claim the evaluator cannot read raises ``ClaimError``, naming
the paper file and the claim id. Later papers add their claims in the same form; a paper whose models need
a configuration other than the registry's default (e.g. the ViX paper's Table 6, with RoPE) needs its own
model names before claims on it can be checked against our runs.

``ours`` is ``{model: {metric: value}}`` (our figures on the claim's dataset), or, for several datasets,
``{dataset: {model: {metric: value}}}``; a value that is not a number (None, a reason) counts as missing.
``ours_from_store`` builds it from the results store (``METRICS`` says where each metric comes from).
"""
from __future__ import annotations

import math
import numbers
import statistics
from fractions import Fraction

import pandas as pd

from .. import papers
from . import page_table, short_name

#: op -> symbol on the page
OPS = {"approx": "≈", "at_least": "≥", "at_most": "≤", "greater": ">", "less": "<"}
PAIRWISE = ("relative_gain", "point_gain", "ratio", "value")
METHODS = (*PAIRWISE, "correlation")
PAIRINGS = ("zip", "cross")
OVERS = ("mean", "all", "max", "min")
FIELDS = {"id", "section", "text", "op", "value", "tolerance", "method", "metric", "a", "b", "pairs", "over", "x",
          "y", "models", "table", "dataset", "printed", "reading", "not_testable"}

#: metric -> (label on the page, unit of a difference, where ``ours_from_store`` takes it from)
METRICS = {
    "top1": ("top-1", "points", "best top-1 over the stored seeds of the run (train.run)"),
    "top5": ("top-5", "points", "top-5 of the run with the best top-1"),
    "params": ("parameters", "parameters", "the paper's parameter convention, as recorded by that run"),
    "size_mb": ("Size (MB)", "MB", "the paper's Size (MB) convention, as recorded by that run"),
    "gpu_gb": ("GPU GB", "GB", "GPU GB reserved, authors (fp32): the stored batch-64 training step on the "
                               "authors' execution path, the paper-comparable figure"),
    "gpu_gb_fused": ("GPU GB (fused)", "GB", "GPU GB reserved, fused (fp32) of the batch-64 measurement"),
    "train_gb": ("training memory", "GB", "GPU GB allocated, authors (fp32) of the batch-64 measurement "
                                          "(max_memory_allocated, the favor paper's training memory)"),
    "train_gb_fused": ("training memory (fused)", "GB", "GPU GB allocated, fused (fp32) of the batch-64 measurement"),
    "gflops": ("GFLOPs", "GFLOPs", "counted from the model definition in the favor paper's convention "
                                   "(vixnb.measure.flops, seed003_gflops)"),
    "train_step_ms": ("training-step time", "ms", "train step ms (authors) of the stored efficiency measurement"),
    "ms_per_image": ("inference time", "ms", "ms per image (authors) of the stored efficiency measurement"),
    "infer_gb": ("inference memory", "GB", "infer GB @64 (authors) of the stored efficiency measurement"),
}
RUN_METRICS = ("top1", "top5", "params", "size_mb")
#: metric -> column of the stored batch-64 GPU-memory measurement (``vix-gpu-memory-<dataset>-b64``)
GPU_MEMORY_COLUMNS = {"gpu_gb": "GPU GB reserved, authors (fp32)", "gpu_gb_fused": "GPU GB reserved, fused (fp32)",
                      "train_gb": "GPU GB allocated, authors (fp32)", "train_gb_fused": "GPU GB allocated, fused (fp32)"}
#: metric -> column of ``vixnb.measure.records_frame`` of the stored efficiency measurement
EFFICIENCY_COLUMNS = {"train_step_ms": "train step ms (authors)", "ms_per_image": "ms per image (authors)",
                      "infer_gb": "infer GB @64 (authors)"}
GPU_MEMORY_RECORD = "vix-gpu-memory-{dataset}-b64"
EFFICIENCY_RECORD = "efficiency"

PAPER_YES, PAPER_NO, PAPER_NONE = "yes", "no", "—"
HOLDS, FAILS, NOT_RUN, NOT_TESTABLE = "holds", "does not hold", "not yet run", "not testable here"
COLUMNS = ["section", "claim", "claimed", "paper figure", "paper bears it out", "our figure", "our verdict",
           "why no verdict", "reading"]


class ClaimError(papers.PaperFileError):
    """A claim of a paper file that cannot be evaluated as written."""


class _Missing(Exception):
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
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(Fraction(raw.replace(" ", "")))
        except (ValueError, ZeroDivisionError):
            pass
    _fail(key, claim, f"`{field}` must be a number or a fraction like \"1/3\", not {raw!r}")


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


def _correlation_models(key, claim):
    spec = claim.get("models")
    if isinstance(spec, dict):
        if set(spec) != {"paper", "table"}:
            _fail(key, claim, f"`models` as a mapping needs exactly `paper` and `table`, not {sorted(spec)}")
        try:
            return papers.table_models(spec["paper"], spec["table"]), papers.table(spec["paper"], spec["table"]).get("dataset")
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
        _printed(key, claim)  # checked now: a bad cell is an error of the file, not of the evaluation
    if claim.get("table") is not None:
        table = _table_of(key, claim, claim["table"])
        out["dataset"] = out["dataset"] or table.get("dataset")
    if method in PAIRWISE:
        if not isinstance(claim.get("metric"), str):
            _fail(key, claim, f"`{method}` needs a `metric` (e.g. {', '.join(METRICS)})")
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
        if "printed" not in claim:
            if claim.get("table") is None:
                _fail(key, claim, "needs the `table` its figures are printed in (or `printed`)")
            rows = table["rows"]
            for model in {m for pair in pairs for m in pair if m is not None}:
                if model not in rows:
                    _fail(key, claim, f"model {model!r} is not in {claim['table']} (its models: {', '.join(rows)})")
                if not isinstance(rows[model].get(claim["metric"]), numbers.Real):
                    _fail(key, claim, f"{claim['table']} prints no {claim['metric']!r} for {model!r}")
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
    out["claimed"] = _claimed(out)
    return out


def _printed(key, claim):
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
            _fail(key, claim, f"{spec['table']} has no row {spec['row']!r} (rows: {', '.join(map(str, table['rows']))})")
        if isinstance(row, list):
            columns = table.get("columns") or []
            if spec["column"] not in columns:
                _fail(key, claim, f"{spec['table']} has no column {spec['column']!r} (columns: {', '.join(map(str, columns))})")
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


def _unit(claim, value=None):
    method = claim.get("method")
    if method == "relative_gain":
        return " %"
    if method in ("point_gain", "value"):
        unit = METRICS.get(claim["metric"], (None, ""))[1]
        if unit == "points" and value is not None and abs(value) == 1:
            unit = "point"
        return f" {unit}" if unit else ""
    return ""


def _claimed(claim):
    """The claimed figure as text: "≈ 16 % (± 4)", "ratio < 1/3", "r ≈ 0.85 (± 0.1)"."""
    prefix = {"ratio": "ratio ", "correlation": "r "}.get(claim.get("method"), "")
    raw = claim["raw"]
    text = f"{prefix}{OPS[claim['op']]} {_fraction_text(raw['value'])}{_unit(claim, claim['value'])}"
    if claim["op"] == "approx":
        text += f" (± {_fraction_text(raw['tolerance'])})"
    return text


# --------------------------------------------------------------------------------------------------
# evaluating a claim


def _satisfies(claim, figure):
    op, value = claim["op"], claim["value"]
    if op == "approx":
        return abs(figure - value) <= claim["tolerance"] + 1e-9 * max(1.0, abs(value))
    return {"at_least": figure >= value, "at_most": figure <= value, "greater": figure > value,
            "less": figure < value}[op]


def _distance(claim, figure):
    """How far a figure is from satisfying the claim (larger = worse); picks the pair shown for ``over: all``."""
    op, value = claim["op"], claim["value"]
    if op == "approx":
        return abs(figure - value)
    return value - figure if op in ("at_least", "greater") else figure - value


def _pair_figure(method, va, vb):
    if method == "relative_gain":
        return (va - vb) / vb * 100.0
    if method == "point_gain":
        return va - vb
    if method == "ratio":
        return va / vb
    return va


def _evaluate(claim, get):
    """(figure, holds, shown pair) of a claim, with ``get(model, metric)`` giving a number or raising
    ``_Missing``. Every missing figure is collected before ``_Missing`` is raised."""
    missing = []

    def value(model, metric):
        try:
            return get(model, metric)
        except _Missing as e:
            missing.extend(e.args[0])
            return None

    if claim["method"] == "correlation":
        xs = [value(m, claim["x"]) for m in claim["models"]]
        ys = [value(m, claim["y"]) for m in claim["models"]]
        if missing:
            raise _Missing(missing)
        try:
            figure = statistics.correlation(xs, ys)
        except statistics.StatisticsError:  # a constant metric: no correlation
            figure = math.nan
        return figure, (not math.isnan(figure)) and _satisfies(claim, figure), None
    metric, figures = claim["metric"], []
    for a, b in claim["pair_list"]:
        va, vb = value(a, metric), (value(b, metric) if b is not None else None)
        if va is None or (b is not None and vb is None):
            continue
        if claim["method"] in ("relative_gain", "ratio") and vb == 0:
            figures.append(((a, b), math.nan))
            continue
        figures.append(((a, b), _pair_figure(claim["method"], va, vb)))
    if missing:
        raise _Missing(missing)
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


def _paper_getter(key, claim):
    rows = papers.table(key, claim["table"])["rows"]
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
            raise _Missing([(metric, model)])
        return float(value)
    return get


def _model_order(key, claim):
    """The models of a claim in the order of its table (else as named), for listing what is missing."""
    if claim.get("models"):
        return list(claim["models"])
    named = [m for pair in claim["pair_list"] for m in pair if m is not None]
    tabled = papers.table_models(key, claim["table"]) if claim.get("table") else []
    return [*tabled, *(m for m in named if m not in tabled)]


def _missing_text(missing, order=()):
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
        return ", ".join(map(short_name, models))

    return "missing: " + "; ".join(f"{METRICS.get(metric, (metric,))[0]} of {who(models)}"
                                   for metric, models in by_metric.items())


def _pair_text(pair):
    a, b = pair
    return short_name(a) if b is None else f"{short_name(a)} vs {short_name(b)}"


def _table_text(key, name):
    entry = papers.table(key, name)
    caption = str(entry.get("caption", name)).split(":")[0]
    return f"{key} {caption}" + (f", {entry['dataset']}" if entry.get("dataset") else "")


def _reading(key, claim, paper_pair, our_pair):
    """How the claim was read: the computation, the models and pairs, the other reading of a gain, the note."""
    method = claim.get("method")
    parts = []
    if method in PAIRWISE:
        label = METRICS.get(claim["metric"], (claim["metric"],))[0]
        what = {"relative_gain": f"relative gain (a − b) / b of {label}, in %",
                "point_gain": f"difference a − b of {label}" + _unit(claim).replace(" ", ", in ", 1),
                "ratio": f"ratio a / b of {label}", "value": label}[method]
        pairs = claim["pair_list"]
        if len(pairs) == 1:
            who = _pair_text(pairs[0])
        elif claim.get("pairs") == "zip":
            who = "pairs " + ", ".join(_pair_text(p) for p in pairs)
        else:
            a = list(dict.fromkeys(p[0] for p in pairs))
            b = list(dict.fromkeys(p[1] for p in pairs))
            who = (f"each of {', '.join(map(short_name, a))}" if len(a) > 1 else short_name(a[0]))
            if method != "value":
                who += " vs " + (f"each of {', '.join(map(short_name, b))}" if len(b) > 1 else short_name(b[0]))
        parts.append(f"{what}: {who}")
        over = claim.get("over") if len(pairs) > 1 else None
        shown = "; ".join(f"{side}: {_pair_text(p)}" for side, p in (("paper", paper_pair), ("ours", our_pair)) if p)
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
               else ", ".join(map(short_name, claim["models"])))
        parts.append(f"Pearson r of {METRICS.get(claim['x'], (claim['x'],))[0]} and "
                     f"{METRICS.get(claim['y'], (claim['y'],))[0]} over {who}")
    if "printed" in claim:
        spec = claim["printed"]
        where = (f"{spec['table']}, row {spec['row']}, column {spec['column']}" if "table" in spec
                 else ".".join(map(str, spec["path"])))
        parts.append(f"the paper's figure as printed ({where})")
    elif claim.get("table") and method:
        parts.append(f"from {_table_text(key, claim['table'])}")
    elif not method:
        parts.append("not computed: the paper file holds none of the numbers behind it")
    if method in ("relative_gain", "point_gain") and claim.get("table") and "printed" not in claim \
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


def evaluate(key, claim, ours=None):
    """One claim of paper ``key`` (a mapping from its paper file) evaluated three ways: a dict with
    ``paper_figure`` (from the paper's printed numbers, None where the paper file has none) and
    ``paper_verdict`` ("yes" / "no" / "—"), ``our_figure``, ``our_verdict`` ("holds", "does not hold",
    "not yet run", "not testable here"), ``why`` (what is missing, or why it is not testable) and
    ``reading``."""
    claim = parse_claim(key, claim)
    # (a) the paper's printed numbers
    paper_figure, paper_verdict, paper_pair = None, PAPER_NONE, None
    if "printed" in claim:
        paper_figure = _printed(key, claim)
        paper_verdict = PAPER_YES if _satisfies(claim, paper_figure) else PAPER_NO
    elif claim.get("method") and claim.get("table"):
        paper_figure, holds, paper_pair = _evaluate(claim, _paper_getter(key, claim))
        paper_verdict = PAPER_YES if holds else PAPER_NO
    # (b) ours
    our_figure, our_pair, why = None, None, ""
    if not claim["testable"]:
        our_verdict, why = NOT_TESTABLE, claim["not_testable"]
    else:
        try:
            our_figure, holds, our_pair = _evaluate(claim, _ours_getter(_ours_for(ours, claim["dataset"])))
            our_verdict = HOLDS if holds else FAILS
            if isinstance(our_figure, float) and math.isnan(our_figure):
                our_figure, our_verdict, why = None, FAILS, "the figure is undefined (a zero or constant metric)"
        except _Missing as e:
            our_verdict, why = NOT_RUN, _missing_text(e.args[0], _model_order(key, claim))
    return {"id": claim["id"], "section": claim["section"], "text": claim["text"], "claimed": claim["claimed"],
            "paper_figure": paper_figure, "paper_verdict": paper_verdict, "our_figure": our_figure,
            "our_verdict": our_verdict, "why": why, "reading": _reading(key, claim, paper_pair, our_pair)}



def paper_claims(key):
    """The claims of paper ``key``'s file, each checked (``parse_claim``); ids must be unique."""
    entries = papers.claims(key)
    seen = set()
    for claim in entries:
        parsed = parse_claim(key, claim)
        if parsed["id"] in seen:
            _fail(key, claim, "the id is used twice in the file")
        seen.add(parsed["id"])
    return entries


def claims(paper_key, ours=None):
    """Every claim of paper ``paper_key`` evaluated against the paper's printed numbers and against ``ours``
    (see the module docstring; None: nothing of ours yet): a DataFrame indexed by claim id with ``COLUMNS``,
    for ``page`` / ``page_table``. Missing figures of ours give "not yet run" and what is missing."""
    rows = [evaluate(paper_key, claim, ours) for claim in paper_claims(paper_key)]
    frame = pd.DataFrame([{"id": r["id"], "section": r["section"], "claim": r["text"], "claimed": r["claimed"],
                           "paper figure": r["paper_figure"], "paper bears it out": r["paper_verdict"],
                           "our figure": r["our_figure"], "our verdict": r["our_verdict"],
                           "why no verdict": r["why"], "reading": r["reading"]} for r in rows],
                         columns=["id", *COLUMNS])
    frame = frame.set_index("id").astype(object)
    return frame.where(frame.notna(), None)


def _paper_keys():
    """The papers with a paper file, in the order of ``papers.DOCUMENTS``."""
    have = set(papers.list_papers())
    return [key for key in papers.DOCUMENTS if key in have]


def claim_list():
    """Every claim of every paper with a paper file (``papers.list_papers``), unevaluated: a DataFrame with
    the paper key, claim id, section, paraphrase, claimed figure and whether this study can test it."""
    rows = []
    for key in _paper_keys():
        for claim in paper_claims(key):
            parsed = parse_claim(key, claim)
            rows.append({"paper": key, "id": parsed["id"], "section": parsed["section"], "claim": parsed["text"],
                         "claimed": parsed["claimed"], "testable here": "yes" if parsed["testable"] else "no"})
    return pd.DataFrame(rows, columns=["paper", "id", "section", "claim", "claimed", "testable here"])


# --------------------------------------------------------------------------------------------------
# our figures from the results store


def _needs(paper_key):
    """{dataset: {"models": [...], "metrics": set}} that the testable claims of a paper need from our results;
    the models are every model of each table the claims read (in printed order), plus those they name."""
    needs = {}
    for claim in paper_claims(paper_key):
        claim = parse_claim(paper_key, claim)
        if not claim["testable"]:
            continue
        need = needs.setdefault(claim["dataset"], {"models": [], "metrics": set()})
        named = claim["models"] or [m for pair in claim["pair_list"] for m in pair if m is not None]
        tabled = papers.table_models(paper_key, claim["table"]) if claim.get("table") else []
        for model in [*tabled, *named]:
            if model not in need["models"]:
                need["models"].append(model)
        metrics = {claim["x"], claim["y"]} if claim["method"] == "correlation" else {claim["metric"]}
        need["metrics"] |= metrics
    return needs


def _best_runs(models, *, dataset, profile, compute, store, stored):
    """{model: best run} over the stored seeds (seed 0 where none is stored), and every record looked at."""
    from ..profiles import run_config
    from ..registry import list_models
    from ..train import run

    best, records = {}, []
    for model in models:
        if model not in list_models():
            records.append({"status": "not yet run", "reason": f"{model!r} is not a vixnb model"})
            continue
        used = run_config(model, dataset=dataset, profile=profile)["dataset"]
        seeds = sorted({r["config"]["seed"] for r in stored if isinstance(r.get("config"), dict)
                        and r["config"].get("model") == model and r["config"].get("dataset") == used}) or [0]
        runs = [run(model, dataset=dataset, profile=profile, seed=seed, compute=compute, store=store, progress=False)
                for seed in seeds]
        records.extend(runs)
        done = [r for r in runs if r.get("status") == "done" and isinstance(r.get("top1"), numbers.Real)]
        if done:
            best[model] = max(done, key=lambda r: r["top1"])
    return best, records


def _number_or_none(value):
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def ours_from_store(paper_key, profile, *, compute="never", store=None, count_flops=True):
    """Our figures for the claims of ``paper_key`` in ``profile``, from the results store: ``(ours, records)``.

    ``ours`` is ``{dataset: {model: {metric: value}}}`` for every dataset the claims read (see ``METRICS``):
    for every model of the tables the claims read, the stored training runs on that table's dataset
    (``train.run`` under ``compute``; default "never": only read the store) and the best top-1 over the stored
    seeds, with top-5, parameters and Size (MB) of that run; the stored batch-64 GPU-memory measurement
    (``vix-gpu-memory-<dataset>-b64``), whose "GPU GB reserved, authors (fp32)" column is ``gpu_gb`` (the
    paper-comparable figure: the authors' execution path, reserved memory being what nvidia-smi shows); the
    stored efficiency measurement (``efficiency``) for times; and GFLOPs counted from the model definition
    (``count_flops``; only where a stored measurement gives them a partner metric). Measurements are only
    read, never made. ``records`` are the runs and measurements used, for ``report.provenance_line``."""
    from ..results import ResultsStore, check_compute

    check_compute(compute)
    store = store if store is not None else ResultsStore()
    stored = store.results(profile) if (store.root / profile).is_dir() else []
    ours, records, seen = {}, [], set()

    def keep(record):
        config = record.get("config")
        ident = (config.get("model"), config.get("dataset"), config.get("seed")) if isinstance(config, dict) else id(record)
        if ident not in seen:
            seen.add(ident)
            records.append(record)

    for dataset, need in _needs(paper_key).items():
        figures = ours.setdefault(dataset, {m: {} for m in need["models"]})
        metrics, models = need["metrics"], need["models"]
        if metrics & set(RUN_METRICS):
            best, runs = _best_runs(models, dataset=dataset, profile=profile, compute=compute, store=store,
                                    stored=stored)
            for record in runs:
                keep(record)
            for model, record in best.items():
                figures[model].update(top1=_number_or_none(record.get("top1")), top5=_number_or_none(record.get("top5")),
                                      params=_number_or_none(record.get("params_paper")),
                                      size_mb=_number_or_none(record.get("size_mb")))
        measured = False
        if metrics & (set(GPU_MEMORY_COLUMNS) | {"gflops"}):
            record = store.load_record("measure", GPU_MEMORY_RECORD.format(dataset=dataset), profile=profile)
            if record is not None:
                keep(record)
                measured = True
                for model in models:
                    row = record.get("rows", {}).get(model) or {}
                    for metric, column in GPU_MEMORY_COLUMNS.items():
                        figures[model][metric] = _number_or_none(row.get(column))
        if metrics & (set(EFFICIENCY_COLUMNS) | {"gflops"}):
            record = store.load_record("measure", EFFICIENCY_RECORD, profile=profile)
            used = [r for r in (record or {}).get("records", []) if r.get("dataset", "cifar10") == dataset
                    and r.get("model") in models and "flops" in r]
            if used:
                from ..measure import records_frame

                frame = records_frame(used)
                measured = True
                for model in frame.index:
                    for metric, column in EFFICIENCY_COLUMNS.items():
                        if column in frame:
                            figures[model][metric] = _number_or_none(pd.to_numeric(frame.loc[model, column], errors="coerce"))
                    figures[model]["gflops"] = _number_or_none(frame.loc[model, "GFLOPs (seed 003 conv.)"])
                    keep({"provenance": next(r for r in used if r["model"] == model)["provenance"]})
        if "gflops" in metrics and count_flops and measured:
            from ..measure import flops
            from ..registry import create_model, list_models

            for model in models:
                if figures[model].get("gflops") is None and model in list_models():
                    figures[model]["gflops"] = flops(create_model(model, dataset=dataset), path="fused")["seed003_gflops"]
    return ours, records


def ledger(profile, *, compute="never", store=None, count_flops=True):
    """Every paper with a paper file and claims: ``{paper key: {"frame": claims(...), "records": [...]}}``,
    our figures from the results store (``ours_from_store``)."""
    out = {}
    for key in _paper_keys():
        if not papers.claims(key):
            continue
        ours, records = ours_from_store(key, profile, compute=compute, store=store, count_flops=count_flops)
        out[key] = {"frame": claims(key, ours), "records": records}
    return out


# --------------------------------------------------------------------------------------------------
# the page


def summary(frame):
    """One line of Markdown counting the verdicts of a ``claims`` frame."""
    paper = frame["paper bears it out"].value_counts()
    ours = frame["our verdict"].value_counts()
    checked = int(paper.get(PAPER_YES, 0) + paper.get(PAPER_NO, 0))
    parts = [f"{len(frame)} claims. The paper's own numbers bear out {int(paper.get(PAPER_YES, 0))} of the "
             f"{checked} they can check."]
    plural = {HOLDS: "hold", FAILS: "do not hold", NOT_RUN: NOT_RUN, NOT_TESTABLE: NOT_TESTABLE}
    counts = [f"{int(ours[v])} {v if ours[v] == 1 else plural[v]}" for v in plural if ours.get(v)]
    parts.append("Ours: " + ", ".join(counts) + ".")
    return " ".join(parts)


#: columns whose text wraps on the page (the others stay on one line)
TEXT_COLUMNS = ("claim", "why no verdict", "reading")


def page(frame, *, caption=None):
    """``page_table`` of a ``claims`` frame, with the long text columns wrapping and left-aligned."""
    styler = page_table(frame, caption=caption)
    if not hasattr(styler, "set_table_styles"):
        return styler
    wrap = [{"selector": "td", "props": "white-space: normal; text-align: left; min-width: 14em; max-width: 28em;"}]
    return styler.set_table_styles({c: wrap for c in TEXT_COLUMNS if c in frame.columns}, overwrite=False)
