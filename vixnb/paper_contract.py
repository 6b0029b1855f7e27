"""The paper-file contract, checked in one pass: ``vixnb papers check`` names every problem of every paper file at
once, where loading a file stops at its first.

A paper file (``vixnb/papers/<key>.yaml``) must be YAML that ``papers.schema`` accepts (its keys and their types,
tables, rows, protocol, chapters); its claims must parse (``report.claims.schema``: operator, method, metric, the rows
and tables they name); every row of its tables must name a registered model; every chapter's ``measure`` and
``bench`` must name a record kind (``record_kinds``); and where the protocol states the authors' dropout
(``protocol.dropout``), every model of the tables, built under the protocol, must apply exactly that. Each check goes
on past a problem, so three mistakes in three places are three lines of one run."""
from __future__ import annotations

import json
import numbers

from . import papers
from .models import list_models, model_fact
from .models.counting import dropout_rates, dropout_text
from .papers.schema import check
from .record_kinds import chapter_requests
from .report.claims.schema import parse_claim


def problems(key):
    """Every problem of paper ``key``'s file, one line each (empty: the file keeps the contract)."""
    where = f"vixnb/papers/{key}.yaml"
    try:
        data = papers.parse(key)
    except papers.PaperFileError as e:
        return [str(e)]
    found = []
    check(data, where, found)
    if not isinstance(data, dict):
        return found
    with papers.unchecked(key, {"tables": {}, "claims": [], **data}):
        found += (_models(key, data, where) + _claims(key, data, where) + _kinds(key, data, where)
                  + _dropout(key, data, where))
    return list(dict.fromkeys(found))


def _models(key, data, where):
    known, found = set(list_models()), []
    for name, table in (data.get("tables") or {}).items():
        rows = table.get("rows") if isinstance(table, dict) else None
        for row, entry in (rows or {}).items() if isinstance(rows, dict) else ():
            model = entry.get("model", row) if isinstance(entry, dict) else row
            if model not in known and (isinstance(entry, dict) and "model" in entry):
                found.append(f"{where}: table {name!r}, row {row!r} names unknown model {model!r}; "
                             "give it a registered model's name (`vixnb models` lists them)")
    return found


def _claims(key, data, where):
    found, seen = [], set()
    for i, claim in enumerate(data.get("claims") or []):
        name = claim.get("id", f"claims[{i}]") if isinstance(claim, dict) else f"claims[{i}]"
        try:
            parse_claim(key, claim)
        except papers.PaperFileError as e:
            found.append(str(e))
        except Exception as e:  # noqa: BLE001  (a claim over a malformed table: named, and the check goes on)
            found.append(f"{where}: claim {name!r} cannot be read ({type(e).__name__}: {e}); fix the claim or the "
                         "table it names")
        if name in seen:
            found.append(f"{where}: claim {name!r}: the id is used twice in the file")
        seen.add(name)
    return found


def _kinds(key, data, where):
    found = []
    for chapter in data.get("book") or [] if isinstance(data.get("book"), list) else ():
        try:
            chapter_requests(key, chapter)
        except (papers.PaperFileError, KeyError, TypeError, AttributeError) as e:
            found.append(str(e) if isinstance(e, papers.PaperFileError) else f"{where}: a chapter cannot be read ({e})")
    return found


def built_dropout(model, protocol):
    """``[[rate, modules], ...]``: where model ``model`` applies dropout when built under ``protocol`` (a paper file's:
    its ``model_overrides``), read from the model (``models.counting.dropout_rates``, on the meta device, kept between
    processes)."""
    settings = papers.per_model(protocol.get("model_overrides") or {}, model) or {}
    return model_fact(dropout_rates, model, "cifar10", json.dumps(settings, sort_keys=True))


def _dropout(key, data, where):
    protocol = data.get("protocol")
    if not isinstance(protocol, dict) or not isinstance(protocol.get("dropout"), dict):
        return []
    try:
        runs = papers.paper_runs(key).values()
    except (papers.PaperFileError, AttributeError, TypeError):  # malformed tables: named by the schema's check
        return []
    found, known = [], set(list_models())
    models = sorted({model for model, _ in runs if model in known})
    for model, rates in protocol["dropout"].items():
        if model not in models:
            found.append(f"{where}: protocol.dropout names {model!r}, which is no model of the file's tables; "
                         "name the models of its tables")
        elif not isinstance(rates, dict) or not all(
                isinstance(r, numbers.Real) and not isinstance(r, bool) and 0 < r <= 1
                and isinstance(n, int) and not isinstance(n, bool) and n >= 1 for r, n in rates.items()):
            found.append(f"{where}: protocol.dropout.{model} must map each rate (above 0, at most 1) to how many "
                         f"modules apply it (a whole number >= 1), not {rates!r}")
    if found:
        return found
    for model in models:
        built, stated = built_dropout(model, protocol), papers.stated_dropout(protocol, model)
        if built != stated:
            found.append(f"{where}: model {model!r} applies dropout {dropout_text(built)} under the protocol, where "
                         f"the authors' scripts apply {dropout_text(stated)} (protocol.dropout); give it their rates "
                         "in protocol.model_overrides, or correct protocol.dropout")
    return found


def all_problems():
    """``{key: [problem, ...]}`` over every paper file."""
    return {key: problems(key) for key in papers.list_papers()}
