"""The results store's layout, and the one check of its files that every reader makes.

Where each file goes: a training run's result at ``result_path`` (its profile's folder, a name of its model, data
set, seed and ``config_key``), and the other shapes of the store's files (``STORE_SHAPES``: measurements, benchmarks,
kept weights, paused runs' checkpoints, the probe's ledger), which ``store_kind`` tells apart and the pack carries
(``pack``: what it writes, ``unpack`` takes, and nothing else). ``read_json`` reads a file strictly (a key given twice
is an error) and checks it (``check_file``): a result must be where its configuration puts it and its numbers
within their meaning (``damage``: a share in percent within 0-100, seconds and counts >= 0), every provenance's dates
dates no later than now (``undated``). A file that fails is an ``UnusableFile`` naming it and why: the store lists it
once as not used and every reader (the listing, ``get``, the pages, results.csv, the plan, the probe) goes on
without it.
"""
import datetime
import errno
import hashlib
import json
import math
import numbers
import re
import time
from pathlib import Path

from ..errors import StoreError

RECORD_GROUPS = ("measure", "bench")  # where a record lives: a profile's measure/ folder, or bench/ (RecordKind.group)
LEDGER = "probe-ledger.json"  # the behavioural probe's ledger, in the store's root (``runs.probe``)

#: the shapes of the store's files (``store_kind``), by their path in the store: a profile's folder is named in
#: lower case (letters, digits, ``_``, ``-``); a training run's file is ``result_path``'s name; a record's name is
#: letters, digits, ``_``, ``.`` and ``-``; weights and a paused run's checkpoint are named after their run
_PROFILE = r"(?!bench/)[a-z0-9][a-z0-9_-]*"
_RESULT = r"[A-Za-z0-9_.-]+-seed\d+-[0-9a-f]{16}"
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
STORE_SHAPES = {
    "result": re.compile(rf"^{_PROFILE}/{_RESULT}\.json$"),
    "measurement": re.compile(rf"^{_PROFILE}/measure/{_NAME}\.json$"),
    "benchmark": re.compile(rf"^bench/{_NAME}\.json$"),
    "weights": re.compile(rf"^{_PROFILE}/weights/{_RESULT}\.pt$"),
    "checkpoint": re.compile(rf"^{_PROFILE}/\.checkpoints/{_RESULT}(\.previous)?\.pt$"),
    "ledger": re.compile(rf"^{re.escape(LEDGER)}$"),
}


def store_kind(relative):
    """What the file at ``relative`` (its path in the store, with ``/``) is by its shape (``STORE_SHAPES``): a
    training run's ``result``, a ``measurement``, a ``benchmark``, kept ``weights``, a paused run's ``checkpoint``,
    the probe's ``ledger``; None for any other path (nothing of the store's)."""
    return next((kind for kind, shape in STORE_SHAPES.items() if shape.match(relative)), None)


class UnusableFile(StoreError):
    """A file of the store that cannot be used, with why (``why``): unreadable, or what ``check_file`` finds."""

    def __init__(self, message, why):
        super().__init__(message)
        self.why = why


def _mapping(pairs):
    """A JSON object read strictly: a key given twice is an error (JSON keeps the last one, silently)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} is given twice")
        out[key] = value
    return out


def read_json(path, *, check=True):
    """A stored JSON file, read strictly (a key given twice is an error) and, with ``check``, checked against its
    place and meaning (``check_file``); else an ``UnusableFile`` (a ``StoreError``) naming it and why: truncated,
    not JSON, a folder, a link to nothing, or what ``check_file`` says."""
    path = Path(path)
    if path.is_dir():
        raise UnusableFile(f"unreadable result file {path} (a folder, not a file); move it out of the results store",
                           "not a file")
    try:
        record = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_mapping)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UnusableFile(f"unreadable result file {path} ({type(e).__name__}: {e}); delete it and run again to "
                           "recompute it, or restore it from git", "not JSON") from None
    except ValueError as e:  # a key given twice (``_mapping``)
        raise UnusableFile(f"unreadable result file {path} ({e}); delete it and run again to recompute it, or "
                           "restore it from git", str(e)) from None
    except OSError as e:  # a link to nothing, a loop of links, no permission
        why = ("a link to nothing" if path.is_symlink() and e.errno == errno.ENOENT else
               "a loop of links" if e.errno == errno.ELOOP else e.strerror or type(e).__name__)
        raise UnusableFile(f"unreadable result file {path} ({why}); remove it, or restore it from git", why) from None
    if check and (why := check_file(path, record)) is not None:
        raise damaged_result(path, why)
    return record


#: what a stored training run's fields hold where present (``damage``); ``top1`` must be there
RESULT_NUMBERS = ("top1", "top5", "final_top1", "seconds")
RESULT_TYPES = {"config": dict, "history": list, "provenance": dict, "weights": dict, "source_hash": dict,
                "transfer": dict, "architecture": str}
#: the numbers of a stored run and of each epoch in its history, by their meaning: a share in percent (0 to 100),
#: seconds (>= 0), a count (a whole number >= 0)
PERCENT = re.compile(r"(^|_)(top1|top5|acc)$")
SECONDS = re.compile(r"(^|_)seconds$")
COUNTS = ("best_epoch", "epochs_run", "params_paper", "params_true")
#: the dates of a provenance (``provenance.now``): each must be a date no later than now, give or take a clock's
#: skew between the machine that made a result and this one
DATES, CLOCK_SKEW_S = ("finished", "date", "measured", "started"), 24 * 3600


def _number(value):
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def _meaningless(fields, where=""):
    """Why one of ``fields`` (a result's, or an epoch's of its history) is a number outside its meaning, or None."""
    for key, value in fields.items():
        if PERCENT.search(key) and _number(value) and not 0 <= value <= 100:
            return f"{where}{key} is {value!r}, not a share in percent (0 to 100)"
        if SECONDS.search(key) and _number(value) and value < 0:
            return f"{where}{key} is {value!r}, not a number of seconds (>= 0)"
    return None


def damage(result):
    """Why a stored training run's JSON (``result``, read back) cannot be a result vixnb wrote, or None: not a
    mapping, a ``status`` other than ``"done"``, no ``top1``, a metric that is not a finite number (NaN from a
    damaged or hand-edited file), a field of the wrong type, a number outside its meaning (a share in percent
    outside 0-100, negative seconds or counts, in the result or an epoch of its history)."""
    if not isinstance(result, dict):
        return f"it holds a JSON {type(result).__name__}, not a mapping"
    if result.get("status") != "done":
        return f"status {result.get('status')!r}, where vixnb stores only 'done'"
    if "top1" not in result:
        return "it has no top1"
    for key in RESULT_NUMBERS:
        value = result.get(key)
        if key in result and not _number(value):
            return f"{key} is {value!r}, not a finite number"
    for key, expected in RESULT_TYPES.items():
        if key in result and not isinstance(result[key], expected):
            return f"{key} is a {type(result[key]).__name__}, not a {expected.__name__}"
    for key in COUNTS:
        value = result.get(key)
        if key in result and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return f"{key} is {value!r}, not a whole number >= 0"
    if why := _meaningless(result):
        return why
    for epoch in result.get("history", []):
        if not isinstance(epoch, dict):
            return f"an epoch of its history is a {type(epoch).__name__}, not a mapping"
        if why := _meaningless(epoch, f"epoch {epoch.get('epoch', '?')}'s "):
            return why
    return None


def undated(provenance):
    """Why a provenance's dates (``DATES``) are not a date no later than now (``CLOCK_SKEW_S`` allowed), or None."""
    if provenance is None:
        return None
    if not isinstance(provenance, dict):
        return f"provenance is a {type(provenance).__name__}, not a mapping"
    for key in DATES:
        if key not in provenance:
            continue
        value = provenance[key]
        try:
            when = datetime.datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            when = None
        if when is None:
            return f"its provenance's {key} {value!r} is not a date (e.g. 2026-11-22T19:59:54Z)"
        when = when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
        if when.timestamp() > time.time() + CLOCK_SKEW_S:
            return f"its provenance's {key} {value} is later than now"
    return None


def misplaced(path, result):
    """Why a training run's file at ``path`` is not where its configuration puts it (``result_path``: the folder of
    its profile, the name of its model, data set, seed and key), or None."""
    config = result.get("config")
    if not isinstance(config, dict):
        return "it has no config"
    try:
        expected = result_path(config)
    except (KeyError, TypeError, ValueError):
        return "its config names no model, dataset, seed and profile"
    profile, name = expected.split("/", 1)
    if (folder := Path(path).parent.name) != profile:
        return f"its config's profile is {config.get('profile')!r}, and it is in the folder of {folder!r}"
    if Path(path).name != name:
        return f"it holds a different configuration than its name says (its config is stored as {name})"
    return None


def check_file(path, record):
    """The one check of a file of the store (every reader's, through ``read_json``): why ``record``, read from
    ``path``, cannot be used, or None. By its place (``store_kind`` of its last parts): a training run must be
    undamaged (``damage``: its numbers within their meaning) and in the place its configuration gives
    (``misplaced``); a measurement or benchmark must be a mapping, a measurement of the profile whose folder it is
    in; every file's provenance dates must be dates, no later than now (``undated``)."""
    path = Path(path)
    group = path.parent.name if path.parent.name in RECORD_GROUPS else None
    if path.name == LEDGER:
        return None
    if group is None:
        return damage(record) or misplaced(path, record) or undated(record.get("provenance"))
    if not isinstance(record, dict):
        return f"it holds a JSON {type(record).__name__}, not a mapping"
    prov = record.get("provenance")
    folder = path.parent.parent.name
    if group == "measure" and isinstance(prov, dict) and "profile" in prov and prov["profile"] != folder:
        return f"its provenance's profile is {prov['profile']!r}, and it is in the folder of {folder!r}"
    return undated(prov)


def config_key(config):
    """A training run's key in the store: 16 hex digits of SHA-256 over its whole configuration (``runs.spec``'s
    ``run_config``), which names its result file."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def result_path(config):
    """The path in the store of run config ``config``'s result: ``<profile>/<model>-<dataset>-seed<seed>-<key>.json``
    (``ResultsStore.path`` is the store's root joined with it)."""
    return f"{config['profile']}/{config['model']}-{config['dataset']}-seed{config['seed']}-{config_key(config)}.json"


def damaged_result(path, why):
    """The ``StoreError`` (an ``UnusableFile``) of a damaged result file: it names the file and keeps it (never
    deleted nor used)."""
    return UnusableFile(f"damaged result file {path} ({why}); it is kept as it is and not used: delete it and run "
                        "again to recompute it, or restore it from git", why)
