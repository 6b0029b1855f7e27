"""The schema of a paper file (``vixnb/papers/<key>.yaml``): the keys of each of its sections, their types, and the
names they must refer to. ``check`` runs when a file is first read (``papers.load``) and raises ``PaperFileError``
with one line naming the file, the place and the fix; ``README.md`` beside this module says what each key means.
A claim has its own schema (``vixnb.report.claims.schema``): here ``claims`` is only checked to be a list of mappings.
"""
from __future__ import annotations

import math
import re

from typing import NamedTuple


class PaperFileError(RuntimeError):
    """A paper file is missing, malformed, or lacks what was asked of it."""


class Key(NamedTuple):
    """A key of a section: the types its value may take (``items``: of a list's items or a mapping's values), the
    form an error asks for, whether the section needs it, and the values it may take (``choices``, where only a few)."""
    types: tuple
    what: str
    required: bool = False
    items: tuple = ()
    choices: tuple = ()


_TEXT, _NUMBER, _WHOLE, _LIST, _MAPPING = (str,), (int, float), (int,), (list,), (dict,)


def _names(what):
    return Key(_LIST, f"a list of {what}", items=_TEXT)


_REQUIRED_NUMBER = Key(_NUMBER, "a number", required=True)
_NUMBERS = Key(_LIST, "a list of numbers", items=_NUMBER)
_PER_MODEL = Key((int, dict), "a whole number or a mapping {model: number, default: number}", required=True)
_SETTINGS = Key(_MAPPING, "a mapping of create_model settings")


#: section -> {key: Key}: every key a paper file may hold, per section, in the order README.md gives them
SECTIONS = {
    "file": {
        "title": Key(_TEXT, "text", required=True),
        "document": Key(_TEXT, "text"),
        "params_convention": Key(_TEXT, "'paper' or 'true'", choices=("paper", "true")),
        "tables": Key(_MAPPING, "a mapping {table name: table}"),
        "protocol": Key(_MAPPING, "a mapping of training settings"),
        "claims": Key(_LIST, "a list of claims (mappings; vixnb/report/claims/schema.py)", items=_MAPPING),
        "book": Key(_LIST, "a list of chapters, each `- notebook: NAME ...`"),
        "training": Key(_MAPPING, "a mapping {run: per-epoch curves}"),
        "notes": Key(_LIST, "a list of text", items=_TEXT),
        "ram_fit": Key(_MAPPING, "a mapping {slope_gb_per_gflop, intercept_gb}"),
    },
    "table": {
        "caption": Key(_TEXT, "text", required=True),
        "dataset": Key(_TEXT, "a dataset name"),
        "rows": Key(_MAPPING, "a mapping {row: {column: value}} (or {row: [values]} under `columns`)", required=True),
        "model_config": _SETTINGS,
        "runs": Key(_WHOLE, "a whole number"),
        "first_seed_only": Key((bool,), "true or false"),
        "columns": _names("column names"),
    },
    # the keys of a row that are not columns (a row's other keys are its columns, free)
    "row": {
        "model": Key(_TEXT, "a model name"),
        "settings": _SETTINGS,
        "label": Key(_TEXT, "text"),
    },
    "protocol": {
        "lr": _REQUIRED_NUMBER,
        "weight_decay": _REQUIRED_NUMBER,
        "betas": Key(_LIST, "a list of two numbers", required=True, items=_NUMBER),
        "eps": _REQUIRED_NUMBER,
        "epochs": _PER_MODEL,
        "batch_size": _PER_MODEL,
        "model_overrides": Key(_MAPPING, "a mapping {model: {setting: value}}", required=True, items=_MAPPING),
        "optimizer": Key(_TEXT, "an optimizer name"),
        "schedule": Key(_TEXT, "a schedule name"),
        "augment": Key((dict, bool), "a mapping {hflip, vflip, rotate} or false"),
        "grad_norm_every": Key(_WHOLE, "a whole number"),
        "dualopt": Key(_MAPPING, "a mapping {patience, sgd_lr, sgd_momentum, max_epochs}"),
        "gpu_batch_size": Key(_WHOLE, "a whole number"),
        "no_script": _names("model names"),
        "dropout": Key(_MAPPING, "a mapping {model: {rate: modules}}", items=_MAPPING),
        "no_eval_mode": _names("model names"),
    },
    "chapter": {
        "notebook": Key(_TEXT, "a notebook name (notebooks/<name>.ipynb)", required=True),
        "part": Key(_TEXT, "a name"),
        "train": _names("table names"),
        "keep_weights": _names("table names (of `train`)"),
        "first": _names("row names (of the `train` tables)"),
        "measure": Key(_MAPPING, "a mapping {measurement: dataset}", items=_TEXT),
        "references": _names("model names"),
        "bench": _names("benchmark names"),
        "profile_settings": Key(_MAPPING, "a mapping {profile: {setting: value}}", items=_MAPPING),
        "questions": Key(_MAPPING, "a mapping {question name: question}"),
    },
    "question": {
        "question": Key(_TEXT, "text: the question asked", required=True),
        "table": Key(_TEXT, "a table name", required=True),
        # models with ``settings`` beside the profile's own runs, or rows of the table with ``arms`` (one change each)
        "models": Key(_LIST, "a list of model names", items=_TEXT),
        "settings": _SETTINGS,
        "rows": _names("row names (of the question's table)"),
        "arms": Key(_MAPPING, "a mapping {arm: settings that change the row's run}", items=_MAPPING),
        "first_steps": Key(_WHOLE, "a whole number of optimizer steps (each arm's first steps, on the CPU)"),
        "arm_steps": Key(_MAPPING, "a mapping {arm: steps} of arms read further than `first_steps`", items=_WHOLE),
        "gpu_arms": _names("arm names (of `arms`): trained whole, every seed, at the profile's protocol"),
        "profiles": _names("profile names"),
    },
    "training": {
        "table": Key(_TEXT, "the printed table's name", required=True),
        "train_acc": _NUMBERS,
        "train_loss": _NUMBERS,
        "epoch_s": _NUMBERS,
    },
    "ram_fit": {
        "slope_gb_per_gflop": _REQUIRED_NUMBER,
        "intercept_gb": _REQUIRED_NUMBER,
    },
}


def _is(value, types):
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _shown(value):
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _section(where, at, entry, name, *, closed=True):
    """Check mapping ``entry`` (at ``at`` of file ``where``; "" for the top level) against section ``name``: its keys
    (``closed``: no others) and their types."""
    keys, place = SECTIONS[name], at or "the file"
    if not isinstance(entry, dict):
        raise PaperFileError(f"{where}: {place} must be a mapping ({', '.join(keys)}), not {_shown(entry)}")
    unknown = [k for k in entry if k not in keys] if closed else []
    if unknown:
        raise PaperFileError(f"{where}: {place} has an unknown key {unknown[0]!r}; allowed: {', '.join(keys)}")
    missing = [k for k, key in keys.items() if key.required and k not in entry]
    if missing:
        raise PaperFileError(f"{where}: {place} lacks {missing[0]!r}; add it ({keys[missing[0]].what})")
    for k, value in entry.items():
        key, path = keys.get(k), f"{at}.{k}" if at else k
        if key is None:
            continue
        if not _is(value, key.types) or (key.choices and value not in key.choices):
            raise PaperFileError(f"{where}: {path} must be {key.what}, not {_shown(value)}")
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for i, item in items if key.items else ():
            if not _is(item, key.items):
                shown = f"[{i}]" if isinstance(value, list) else f".{i}"
                raise PaperFileError(f"{where}: {path}{shown} is {_shown(item)}; {path} must be {key.what}")


def _refer(where, at, names, known, what, listed):
    """Each of ``names`` (the list at ``at``) must be one of ``known``: ``what`` (``listed``: those, in an error)."""
    for name in names:
        if name not in known:
            raise PaperFileError(f"{where}: {at} names {name!r}, which is not {what}; {listed}: "
                                 f"{', '.join(map(str, known)) or 'none'}")


def check(data, where, problems=None):
    """Check the parsed paper file ``data`` (``where``: its path as errors name it) against ``SECTIONS``. Nothing is
    changed. Without ``problems``, raise ``PaperFileError`` at the first problem; with a list, append the first problem
    of each part (the file's own keys, each table, each row, the protocol, each training entry, each chapter) and go
    on, so that one pass names every part that is wrong (``vixnb papers check``)."""
    def part(fn, *args):
        if problems is None:
            return fn(*args)
        try:
            fn(*args)
        except PaperFileError as e:
            problems.append(str(e))

    if not isinstance(data, dict):
        return part(_fail, f"{where} must be a mapping of {', '.join(SECTIONS['file'])}; restore it from git")
    if isinstance(data.get("book"), dict):
        return part(_fail, f"{where}: `book` must be a list of chapters, not one mapping; write its chapter as a list "
                           "item (`- notebook: ...`)")
    part(_section, where, "", data, "file")
    tables = {name: table for name, table in (data.get("tables") or {}).items()
              if isinstance(table, dict) and isinstance(table.get("rows"), dict)}
    for name, table in (data.get("tables") or {}).items():
        part(_section, where, f"tables.{name}", table, "table")
        for row, entry in tables.get(name, {}).get("rows", {}).items():
            part(_row, where, f"tables.{name}.rows.{row}", entry, name, table)
    if "protocol" in data:
        part(_section, where, "protocol", data["protocol"], "protocol")
    if "ram_fit" in data:
        part(_section, where, "ram_fit", data["ram_fit"], "ram_fit")
    rows = {row: None for table in tables.values() for row in table["rows"]}
    for run, entry in (data.get("training") or {}).items() if isinstance(data.get("training"), dict) else ():
        part(_refer, where, "training", [run], rows, "a row of the file's tables", "its rows")
        part(_section, where, f"training.{run}", entry, "training")
    for i, chapter in enumerate(data.get("book") or []):
        part(_chapter, where, f"book[{i}]", chapter, tables)
    for at, value in _not_finite(data):
        part(_fail, f"{where}: {at} is {value!r}; a number of a paper file is finite (a printed figure, never .nan "
                    "or .inf): write the figure, or leave the key out")


def _not_finite(node, at=""):
    """``[(place, value)]``: every NaN or infinite number in the parsed file ``node``, by its place
    (``claims[3].value``)."""
    if isinstance(node, float) and not math.isfinite(node):
        return [(at or "the file", node)]
    if isinstance(node, dict):
        return [found for k, v in node.items() for found in _not_finite(v, f"{at}.{k}" if at else str(k))]
    if isinstance(node, list):
        return [found for i, v in enumerate(node) for found in _not_finite(v, f"{at}[{i}]")]
    return []


def _fail(message):
    raise PaperFileError(message)


def _row(where, at, entry, name, table):
    if isinstance(entry, dict):
        _section(where, at, entry, "row", closed=False)
    elif not isinstance(entry, list):
        raise PaperFileError(f"{where}: {at} must be a mapping {{column: value}} or a list of values under "
                             f"`columns`, not {_shown(entry)}")
    elif "columns" not in table:
        raise PaperFileError(f"{where}: {at} is a list of values; give tables.{name} its `columns`")


#: a name that becomes part of a file's name in the results store (a chapter's ``part``, a question's name: its records)
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def _file_name(where, at, name):
    if not isinstance(name, str) or not FILE_NAME.match(name):
        raise PaperFileError(f"{where}: {at} {name!r} names a file of the results store: use letters, digits, '_' "
                             "and '-' (no spaces, dots or slashes)")


def _chapter(where, at, chapter, tables):
    _section(where, at, chapter, "chapter")
    if "part" in chapter:
        _file_name(where, f"{at}.part", chapter["part"])
    for name in chapter.get("questions") or {}:
        _file_name(where, f"{at}.questions: the question", name)
    train = chapter.get("train") or []
    _refer(where, f"{at}.train", train, list(tables), "a table of the file", "its tables")
    _refer(where, f"{at}.keep_weights", chapter.get("keep_weights") or [], train, f"in {at}.train", "it lists")
    rows = {row: None for name in train if name in tables for row in tables[name]["rows"]}
    _refer(where, f"{at}.first", chapter.get("first") or [], rows, f"a row of {at}.train's tables", "their rows")
    for name, study in (chapter.get("questions") or {}).items():
        here = f"{at}.questions.{name}"
        _section(where, here, study, "question")
        _refer(where, f"{here}.table", [study["table"]], list(tables), "a table of the file", "its tables")
        if ("models" in study) == ("rows" in study):
            raise PaperFileError(f"{where}: {here} names neither or both of `models` (with `settings`) and `rows` "
                                 "(with `arms`); give one of them")
        if "models" in study and "settings" not in study:
            raise PaperFileError(f"{where}: {here} names `models` without `settings`; give the settings its runs "
                                 "change beside the profile's own")
        if "rows" in study:
            _refer(where, f"{here}.rows", study["rows"], tables.get(study["table"], {}).get("rows", {}),
                   f"a row of table {study['table']}", "its rows")
            _refer(where, f"{here}.gpu_arms", study.get("gpu_arms") or [], study.get("arms") or {},
                   f"an arm of {here}.arms", "its arms")
            _refer(where, f"{here}.arm_steps", list(study.get("arm_steps") or {}), study.get("arms") or {},
                   f"an arm of {here}.arms", "its arms")
            if "first_steps" in study and not study.get("arms"):
                raise PaperFileError(f"{where}: {here} asks for `first_steps` with no `arms`; give the changes to try")


__all__ = ["Key", "PaperFileError", "SECTIONS", "check"]
