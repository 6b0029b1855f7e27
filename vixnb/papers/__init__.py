"""The source documents ("papers"), one YAML file each: published tables, protocol, and claims.

A paper is named by a short key (``vix``, ``favor``, ...). ``DOCUMENTS`` is the one place that ties a key
to its source document's file name. A paper file holds:

- ``title`` and ``document``;
- ``tables``: each published table exactly as printed, ``{caption, dataset, rows: {model: {column: value}}}``.
  A table's rows, in printed order, are its list of models (``table_models``); nothing else repeats it. A table
  may give the ``create_model`` settings of its runs (``model_config``), and a row may name its ``model`` and
  ``settings`` (``row_run``), where the paper shows one model in several configurations;
- ``protocol``: the authors' optimizer, epochs, batch sizes and per-model overrides (``protocol``);
- ``claims``: the quantitative claims of its text (``vixnb.report.claims`` evaluates them);
- ``book``: the book's chapters on it, a list (``book_chapters``);
- sections of its own that its chapter reads, e.g. `linattn`'s ``training`` (per-epoch curves of its runs) and
  ``notes`` (the document's inconsistencies and how they were read).

Files are read on first use and checked against ``schema.SECTIONS`` (``README.md`` here documents every key): a
malformed file, an unknown key or a missing table raises ``PaperFileError``, one line that names the file.
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import cache
from importlib import resources

import yaml

from .schema import PaperFileError, check

#: paper key -> the source document's file name (in the project's shared seeds folder)
DOCUMENTS = {
    "vix": "000_7227881f4cc056af.txt",
    "cxv": "001_dbfc9606106289e7.txt",
    "linattn": "002_2f25928595f7209b.txt",
    "favor": "003_c6ce1cffb68d8d33.txt",
    "shaped": "004_25ebfe602588d699.txt",
}


def paper_file(key):
    """The path of paper file ``key`` (``papers/<key>.yaml`` in the package)."""
    return resources.files("vixnb").joinpath("papers", f"{key}.yaml")


def list_papers():
    """Keys of the papers that have a paper file, sorted."""
    return sorted(k for k in DOCUMENTS if paper_file(k).is_file())


class DuplicateKey(yaml.YAMLError):
    """A mapping of a paper file names one key twice (PyYAML would keep the last without a word)."""

    def __init__(self, key, line, first):
        super().__init__(f"key {key!r} is given twice in one mapping (line {line}; first at line {first})")
        self.key, self.line, self.first = key, line, first


def _unique_mapping(loader, node, deep=False):
    """A YAML mapping whose keys are all different, else ``DuplicateKey`` naming the key and both lines."""
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise DuplicateKey(key, line, seen[key])
        seen.setdefault(key, line) if isinstance(key, (str, int, float, bool)) else None
    return loader.construct_mapping(node, deep=deep)


def _strict(base):
    """``base`` (a PyYAML loader) refusing a mapping that names a key twice."""
    loader = type(f"Strict{base.__name__}", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
    return loader


#: libyaml's parser where PyYAML was built with it (about ten times faster on the paper files), else PyYAML's own;
#: both refuse a key given twice in one mapping
FAST_LOADER = _strict(getattr(yaml, "CSafeLoader", yaml.SafeLoader))
SAFE_LOADER = _strict(yaml.SafeLoader)


def parse(key):
    """The paper file of ``key`` as YAML gives it, unchecked; a file that is missing or not YAML raises
    ``PaperFileError`` naming the file (and the line and column)."""
    if key not in DOCUMENTS:
        raise PaperFileError(f"unknown paper {key!r}; valid keys: {', '.join(sorted(DOCUMENTS))}")
    path = paper_file(key)
    where = f"vixnb/papers/{key}.yaml"
    if not path.is_file():
        raise PaperFileError(f"paper {key!r} has no paper file yet ({where}); add one to give it tables and claims")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise PaperFileError(f"{where}: byte {raw[e.start]:#04x} at line {line} is not UTF-8; save the file as "
                             "UTF-8 (or restore it from git)") from None
    try:
        return yaml.load(text, Loader=FAST_LOADER)
    except DuplicateKey as e:
        raise PaperFileError(f"{where}: line {e.line}: {e}; a pasted row can replace a printed one unseen: keep one "
                             "of them") from None
    except yaml.YAMLError:
        pass
    try:  # the pure-Python parser's message names the problem better than libyaml's
        return yaml.load(text, Loader=SAFE_LOADER)
    except DuplicateKey as e:
        raise PaperFileError(f"{where}: line {e.line}: {e}; a pasted row can replace a printed one unseen: keep one "
                             "of them") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise PaperFileError(f"{where} is not valid YAML ({what}{at}); fix it there or restore it from git") from None


_UNCHECKED = {}  # key -> parsed data read as it is (``unchecked``)


@contextmanager
def unchecked(key, data):
    """Within the block, ``load(key)`` returns ``data`` as it is, checked or not: ``vixnb papers check`` reads the
    claims and models of a file whose schema has problems, to name all of them in one pass."""
    _UNCHECKED[key] = data
    try:
        yield data
    finally:
        _UNCHECKED.pop(key, None)


def load(key):
    """The parsed paper file of ``key``, checked (``schema.check``; cached; treat it as read-only)."""
    if key in _UNCHECKED:
        return _UNCHECKED[key]
    return _load_checked(key)


@cache
def _load_checked(key):
    data = parse(key)
    check(data, f"vixnb/papers/{key}.yaml")
    data.setdefault("tables", {})
    data.setdefault("claims", [])
    return data


load.cache_clear, load.cache_info = _load_checked.cache_clear, _load_checked.cache_info


def table(key, name):
    """Published table ``name`` of paper ``key``: ``{caption, dataset, rows}`` (rows in printed order)."""
    tables = load(key)["tables"]
    if name not in tables:
        raise PaperFileError(f"vixnb/papers/{key}.yaml has no table {name!r}; its tables: "
                             f"{', '.join(tables) or 'none'}")
    return tables[name]


def table_models(key, name):
    """The models of a published table, in printed order: the one list of them."""
    return list(table(key, name)["rows"])


def row_run(key, name, row):
    """``(model, settings)`` of row ``row`` of table ``name``: the model (the row's ``model``, else the row's name)
    and its ``create_model`` settings (the table's ``model_config``, then the row's ``settings``). A paper whose
    tables show one model in several configurations (the blog's experiments) names its rows by run and gives
    each a ``model``; a row name then means the same run in every table of the file."""
    entry = table(key, name)["rows"].get(row)
    if entry is None:
        raise PaperFileError(f"vixnb/papers/{key}.yaml: table {name!r} has no row {row!r}")
    entry = entry if isinstance(entry, dict) else {}
    return entry.get("model", row), {**(table(key, name).get("model_config") or {}), **(entry.get("settings") or {})}


def table_runs(key, name):
    """``[(row, model, settings)]`` of a table, in printed order (``row_run``)."""
    return [(row, *row_run(key, name, row)) for row in table_models(key, name)]


def paper_runs(key):
    """``{row: (model, settings)}`` over every table of paper ``key``: the runs its rows name."""
    return {row: (model, settings) for name in load(key)["tables"] for row, model, settings in table_runs(key, name)}


def params_convention(key):
    """How paper ``key``'s tables count parameters: ``paper`` (the ViX convention of ``models.counting``) unless
    its file says ``params_convention: "true"`` (every trainable parameter once)."""
    return load(key).get("params_convention", "paper")


def table_for(key, dataset, *, among=None):
    """The name of the table of ``key`` reported on ``dataset`` (the first such, or the first of ``among``)."""
    names = among or list(load(key)["tables"])
    for name in names:
        if table(key, name).get("dataset") == dataset:
            return name
    datasets = sorted({table(key, n).get("dataset") for n in names} - {None})
    raise PaperFileError(f"paper {key!r} reports {', '.join(names)} on {', '.join(datasets)}, not dataset={dataset!r}")


def caption(key, name):
    return f"{load(key)['title']}, {table(key, name)['caption']}"


def protocol(key):
    """The authors' training protocol of paper ``key`` (optimizer, epochs, batch sizes, overrides)."""
    data = load(key)
    if "protocol" not in data:
        raise PaperFileError(f"vixnb/papers/{key}.yaml has no `protocol`; add the authors' training settings")
    return data["protocol"]


def stated_dropout(protocol, model):
    """``[[rate, modules], ...]`` by rate: the dropout a paper file's ``protocol`` (its ``dropout``: the authors'
    scripts) states for ``model``; none where it names no such table or not the model."""
    stated = (protocol.get("dropout") or {}).get(model) or {}
    return [[float(rate), stated[rate]] for rate in sorted(stated)]


def gpu_batch_size(key):
    """The batch size of paper ``key``'s "GPU (GB)" column (its protocol's ``gpu_batch_size``; 64, the ViX paper's,
    where it gives none): the batch of our GPU-memory measurement beside it."""
    return int(protocol(key).get("gpu_batch_size", 64))


def per_model(setting, model):
    """A protocol setting that is either one value or ``{model: value, default: value}``."""
    if isinstance(setting, dict):
        return setting.get(model, setting.get("default"))
    return setting


def book_chapters(key):
    """The book's chapters on paper ``key``: its file's ``book`` list, one mapping per chapter, each with its
    ``notebook`` (see ``vixnb.plan.plan``). Empty when it has none."""
    return list(load(key).get("book") or [])


def book_chapter(key, notebook):
    """The chapter of paper ``key``'s ``book`` section that ``notebook`` renders."""
    for chapter in book_chapters(key):
        if chapter["notebook"] == notebook:
            return chapter
    names = ", ".join(c["notebook"] for c in book_chapters(key)) or "none"
    raise PaperFileError(f"vixnb/papers/{key}.yaml: no chapter {notebook!r} in `book`; its chapters: {names}")


def training_chapter(key, table):
    """The chapter of paper ``key``'s ``book`` section that trains ``table`` (the first that lists it in ``train``)."""
    for chapter in book_chapters(key):
        if table in (chapter.get("train") or []):
            return chapter
    raise PaperFileError(f"vixnb/papers/{key}.yaml: no chapter of `book` trains table {table!r}")


def claims(key):
    """The quantitative claims of paper ``key``'s text (list of mappings; see ``vixnb.report.claims``)."""
    return list(load(key)["claims"])


def claim_rows(key):
    """``[(claim id, {row, ...})]``: the table rows (runs) each testable claim of paper ``key`` compares (its ``a``,
    ``b`` and ``models``), for the plan's order of decisions (``vixnb.plan.plan``); what each figure is, and every check
    of a claim, is ``report.claims.schema``'s."""
    out = []
    for claim in claims(key):
        if claim.get("not_testable"):
            continue
        rows = set()
        for field in ("a", "b", "models"):
            value = claim.get(field) or []
            rows |= {value} if isinstance(value, str) else set(value)
        out.append((claim.get("id"), rows))
    return out


__all__ = ["DOCUMENTS", "PaperFileError", "book_chapter", "book_chapters", "training_chapter", "list_papers", "load",
           "table", "table_models", "row_run", "table_runs", "paper_runs", "params_convention", "table_for", "caption",
           "protocol", "gpu_batch_size", "per_model", "claims", "claim_rows"]
