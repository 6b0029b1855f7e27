"""What the plan reads of a model's build on the meta device (its class, parameter counts, architecture signature,
FLOPs, whether it has an attention map), kept between processes.

Every process that builds a plan (each notebook kernel of the book, ``vixnb plan``, ``vixnb batch``) read these of
about a hundred models built on the meta device: about 4 s a process, most of it torch drawing meta tensors in
Python. A fact is kept in ``model-facts.json`` of the cache folder (``paths.cache_root``: ``$VIXNB_CACHE``, else
``~/.cache/vixnb``; never the results store, which a dry run leaves as it was) for one version of the package's
code and of torch (``code_version``): any edit to a file of the package, or another torch, starts the file over, so
a kept fact is never one that today's code would not give. The file is a cache only: unreadable, missing or
read-only, every fact is computed as before."""
from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import torch

from ..errors import StoreError, say_once
from ..files import atomic_write
from ..paths import cache_root

#: where facts are kept, in the cache folder (``paths.cache_root``)
FACTS_FILE = "model-facts.json"
PACKAGE = Path(__file__).resolve().parents[1]


@cache
def code_version():
    """16 hex digits of SHA-256 over torch's version and every ``.py`` and ``.yaml`` file of the package (names and
    contents): what a kept fact is valid for."""
    digest = hashlib.sha256(torch.__version__.encode())
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml")]):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def shape(value):
    """The JSON shape of ``value``: its types all the way down (a list's as the set of its items' shapes), kept with
    each fact so that a fact of another shape than it was written with (a damaged or hand-edited file) is not used."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return ["list", sorted({json.dumps(shape(v), sort_keys=True) for v in value})]
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


@cache
def kept_facts(root):
    """``{key: fact}`` kept in the cache folder ``root`` for today's ``code_version`` (read once a process;
    ``{}`` where the file is missing, unreadable or of other code); a fact whose value is not of the shape it was
    kept with is left out, and the file is named once. ``kept_facts.cache_clear()`` reads it again."""
    path = Path(root) / FACTS_FILE
    if Path(root).exists() and not Path(root).is_dir():
        say_once(f"cache {root}", f"VIXNB_CACHE={root} is a file, not a folder: no model fact is kept between "
                                  "processes (each is computed again); point VIXNB_CACHE at a folder")
        return {}
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict) or kept.get("code") != code_version() or not isinstance(kept.get("facts"), dict):
        return {}
    sound = {name: entry["value"] for name, entry in kept["facts"].items()
             if isinstance(entry, dict) and set(entry) == {"value", "shape"}
                and shape(entry["value"]) == entry["shape"]}
    if len(sound) < len(kept["facts"]):
        say_once(f"facts {path}", f"{path}: {len(kept['facts']) - len(sound)} kept model facts are not of the shape "
                                  "they were written with; they are computed again (the file is a cache only)")
    return sound


def kept_fact(key, compute):
    """The fact ``key`` (a list of strings naming it) from the file, else ``compute()`` (a JSON value), kept there for
    the next process. The value is returned as JSON gives it back (a tuple as a list), first time or not."""
    root = str(cache_root())
    facts, name = kept_facts(root), json.dumps(key)
    if name not in facts:
        facts[name] = json.loads(json.dumps(compute()))
        _write(Path(root) / FACTS_FILE, name, facts[name])
    return facts[name]


def _write(path, name, value):
    """Add one fact to the file, keeping what another process wrote there meanwhile (for the same code); a store
    that cannot be written keeps nothing (the fact is computed again next time)."""
    try:
        on_disk = json.loads(path.read_text())
    except (OSError, ValueError):
        on_disk = {}
    same = (isinstance(on_disk, dict) and on_disk.get("code") == code_version()
            and isinstance(on_disk.get("facts"), dict))
    facts = {**(on_disk["facts"] if same else {}), name: {"value": value, "shape": shape(value)}}
    text = json.dumps({"code": code_version(), "facts": facts}, sort_keys=True)
    try:
        atomic_write(path, lambda f: f.write(text))
    except (OSError, StoreError):
        pass
