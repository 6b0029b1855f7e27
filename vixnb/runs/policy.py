"""The one compute policy: whether a caller reads a stored result or makes it, whether this machine can make a
profile's results, and why a stored result no longer answers for its configuration.

``compute`` is ``"never"`` (only read the store), ``"missing"`` (make what the store lacks, or holds stale) or
``"always"`` (make again). ``decide`` turns it, a stored result (or None), why that result is stale (or None) and
the profile into a ``Decision``: ``read``, ``make`` or ``skip`` (nothing stored and nothing can be made here, with
the reason). Every caller that reads or makes results asks ``decide``; none re-derives it.

Staleness of a training result (``stale_reason``): made by other model code (``other_code``: its recorded
architecture signature, or for a result older than signatures its parameter counts, differs from today's model),
from other data (``other_data``: its data fingerprint differs from the copy here), or, for a warm start, from other
weights of its source than those stored now (``source_changed``), or by another engine version (``other_engine``).
``code_changed``: where a result's source hashes changed since, what the behavioural probe's ledger says
(``runs.probe``): current, stale (other numbers), or unverified. Staleness of a measurement
of trained weights (``weights_changed``): a run it measured keeps other weights now."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from functools import cache

import torch

from ..data import source_fingerprint
from ..errors import StoreError, say_once
from ..models import architecture_signature, list_models, model_fact, model_modules
from ..models.counting import count_params
from ..paths import results_root
from .profiles import get_profile, gpu_profile
from .spec import config_keys, run_model_settings, warm_start_spec
from ..results.provenance import ENGINE_VERSION, source_hashes
from ..results.layout import LEDGER, config_key, damage

COMPUTE = ("never", "missing", "always")
ACTIONS = ("read", "make", "skip")


def check_compute(compute):
    """``compute`` as given, or a one-line error naming the parameter and its values."""
    if compute not in COMPUTE:
        raise ValueError(f"compute={compute!r}: use one of {', '.join(map(repr, COMPUTE))}")
    return compute


def cannot_make_here(profile, *, needs_gpu=False, cpu_ok=False):
    """Why this machine cannot make results of ``profile`` (a GPU profile, or with ``needs_gpu`` any profile, where
    no CUDA GPU is visible), or None. ``cpu_ok``: a result that times nothing (attention maps of stored weights, the
    first steps of runs), which a CPU makes as a GPU would, in any profile."""
    if get_profile(profile).get("rehearsal") or (cpu_ok and not needs_gpu):  # a rehearsal: the device at hand
        return None
    if (needs_gpu or gpu_profile(profile)) and not torch.cuda.is_available():
        return f"profile {profile!r} needs a CUDA GPU" if not needs_gpu else "it needs a CUDA GPU"
    return None


@dataclass(frozen=True)
class Decision:
    """What to do about one result: ``action`` is ``read`` (the stored one), ``make`` (compute it now) or ``skip``
    (nothing stored, nothing made here); ``reason`` says why it is made again (the stored one is stale) or why
    it is not made (``skip``, or ``read`` of a stale result that cannot be made again here)."""
    action: str
    reason: str = ""


def decide(compute, *, stored, profile, stale=None, needs_gpu=False, cpu_ok=False):
    """The ``Decision`` for one result under ``compute``: ``stored`` is the stored result (None: none), ``stale``
    why it no longer answers (None: it does), ``profile`` the profile it belongs to and ``needs_gpu`` whether making
    it needs a GPU in any profile, ``cpu_ok`` whether a CPU makes it in every profile (``cannot_make_here``)."""
    check_compute(compute)
    if stored is not None and (compute == "never" or (compute == "missing" and not stale)):
        return Decision("read", stale or "")
    if compute == "never":
        return Decision("skip", "no stored result for this configuration")
    why_not = cannot_make_here(profile, needs_gpu=needs_gpu, cpu_ok=cpu_ok)
    if why_not:
        if stored is not None:
            return Decision("read", f"{stale}; {why_not} to make it again" if stale else "")
        return Decision("skip", f"{why_not}; no stored result for this configuration")
    return Decision("make", stale or "")


def obtain_record(store, group, name, make, *, profile=None, compute="missing", stale=None, needs_gpu=False,
                  cpu_ok=False):
    """Record ``name`` under the compute policy (``decide``): read from ``store``, or made (``make()``
    returns the record) and saved. ``stale(record)``: why a stored record no longer answers (None: it does);
    a stale one read anyway says why under ``"stale"``. ``needs_gpu``: making it needs a CUDA GPU whatever the
    profile (a GPU-memory measurement); ``cpu_ok``: a CPU makes it in any profile (it times nothing). None where
    nothing is stored and nothing can be made here."""
    # a file that cannot be used is named and never made over: where a record would be made (``strict``)
    stored = store.load_record(group, name, profile=profile, strict=check_compute(compute) != "never")
    why = stale(stored) if stale is not None and stored is not None else None
    decision = decide(compute, stored=stored, profile=profile, stale=why, needs_gpu=needs_gpu, cpu_ok=cpu_ok)
    if decision.action == "read":
        return {**stored, "stale": decision.reason} if decision.reason else stored
    if decision.action == "skip":
        return None
    record = make()
    store.save_record(group, name, record, profile=profile)
    return record


def training_policy(compute):
    """The compute policy for training the runs whose weights a measurement reads: ``compute``, except that
    measuring again (``"always"``) never trains again (``"missing"``)."""
    return "missing" if check_compute(compute) == "always" else compute


# ----- whether this vixnb can use a stored run -----------------------------------------------------------------

def unusable(result):
    """Why a stored training run (``result``, read back) cannot be used by this vixnb, or None: ``damage``, a model
    no longer registered, a newer engine version than this one, or a configuration key this vixnb does not
    write. Such a file is listed as "not used" (``ResultsStore.unusable_files``) and left as it is."""
    if (why := damage(result)) is not None:
        return why
    config = result.get("config")
    if not isinstance(config, dict):
        return "it has no config"
    if config.get("model") not in list_models():
        return f"model {config.get('model')!r} is not registered in this vixnb (renamed or removed)"
    version = config.get("engine_version")
    if isinstance(version, int) and version > ENGINE_VERSION:
        return (f"made by a newer vixnb (engine version {version}, this one has {ENGINE_VERSION}); upgrade vixnb "
                "to use it")
    unknown = sorted(set(config) - config_keys())
    if unknown:
        return f"configuration key(s) {', '.join(unknown)} unknown to this vixnb (made by another version?)"
    return None


# ----- why a stored training result is stale ------------------------------------------------------------------

def config_overrides_json(config):
    """A run config's model settings as sorted JSON (the ``overrides_json`` that ``built_today`` and
    ``source_today`` cache on)."""
    return json.dumps(run_model_settings(config), sort_keys=True)


@cache
def architecture_today(model, dataset, overrides_json="{}"):
    """``(architecture signature, true parameter count)`` of a configured model as today's code builds it
    (``overrides_json``: JSON of its ``model_overrides``), on the meta device: no memory, no random numbers, and no
    forward pass (the paper's count, ``built_today``, traces one)."""
    signature, true = model_fact(signature_and_count, model, dataset, overrides_json)
    return signature, true


def signature_and_count(model):
    """``[architecture signature, true parameter count]`` of a built model."""
    return [architecture_signature(model), count_params(model, "true")]


def paper_count(model):
    """The paper's parameter count of a built model (torchsummary's convention: one traced forward)."""
    return count_params(model, "paper")


@cache
def built_today(model, dataset, overrides_json="{}"):
    """``(architecture signature, {"params_paper", "params_true"})`` of a configured model as today's code builds
    it: ``architecture_today`` and the paper's count (torchsummary's convention: one traced forward on the meta
    device)."""
    signature, true = architecture_today(model, dataset, overrides_json)
    paper = model_fact(paper_count, model, dataset, overrides_json)
    return signature, {"params_paper": paper, "params_true": true}


def other_code(stored):
    """Why a stored run was made by other model code than today's, or None: its recorded architecture
    signature differs from today's model in the same configuration; for a result older than signatures, its
    parameter counts differ."""
    config = stored["config"]
    if "architecture" in stored:  # the signature alone decides: no traced forward for the paper's count
        signature, _ = architecture_today(config["model"], config["dataset"], config_overrides_json(config))
        return None if stored["architecture"] == signature else \
            f"made by other model code (architecture {stored['architecture']}, today {signature})"
    _, counts = built_today(config["model"], config["dataset"], config_overrides_json(config))
    changed = [f"{k} {stored[k]:,}, today {counts[k]:,}" for k in counts if k in stored and stored[k] != counts[k]]
    return f"made by other model code ({'; '.join(changed)})" if changed else None


def other_data(stored):
    """Why a stored run was made from other data than the copy here (its data fingerprint differs), or None
    (the same data, no copy here to compare with, or a run that recorded no fingerprint)."""
    recorded = stored.get("provenance", {}).get("data_fingerprint")
    here = source_fingerprint(stored["config"]["dataset"]) if recorded else None
    if recorded and here and recorded != here:
        return f"made from other data than the copy here (data fingerprint {recorded}, here {here})"
    return None


def source_changed(stored, store):
    """Why a stored warm start no longer matches its source, or None: the source run's stored result now keeps other
    weights (SHA-256) than those the warm start was made from (the source was trained again), or is gone."""
    made_from = (stored.get("transfer") or {}).get("source_weights_sha256")
    init = (stored.get("config") or {}).get("init_from")
    if not made_from or not init:
        return None
    try:
        source = store.get(warm_start_spec(stored["config"]).config)
    except StoreError:
        source = None
    now = ((source or {}).get("weights") or {}).get("sha256")
    if now == made_from:
        return None
    return (f"made from other weights of {init['run']!r} than those stored now" if now else
            f"made from weights of {init['run']!r} that no stored result keeps now")


def other_engine(stored):
    """Why a stored run was made by another version of the engine than today's (``results.provenance.ENGINE_VERSION``,
    recorded in its provenance; a result older than that record: its config's ``engine_version``), or None."""
    recorded = (stored.get("provenance") or {}).get("engine_version", stored["config"].get("engine_version"))
    if recorded == ENGINE_VERSION:
        return None
    return f"made by engine version {recorded}, today {ENGINE_VERSION} (bumped for a change the CPU probe cannot see)"


def stale_reason(stored, store=None):
    """Why a stored training result no longer answers for its configuration, or None: ``other_code``,
    ``other_engine``, ``other_data``, and with ``store`` also ``source_changed``."""
    return other_code(stored) or other_engine(stored) or other_data(stored) or \
        (source_changed(stored, store) if store is not None else None)


@cache
def source_today(model, dataset, overrides_json="{}"):
    """``results.provenance.source_hashes`` of today's model in that configuration (built on the meta device)."""
    return model_fact(model_source_hashes, model, dataset, overrides_json)


def model_source_hashes(model):
    """``results.provenance.source_hashes`` of a model built by ``create_model`` (its ``default_cfg`` names it)."""
    return source_hashes(model_modules(model.default_cfg["name"], model))


#: the behavioural probe's committed ledger, in the results store's folder (``runs.probe``): ``results.store.LEDGER``


def ledger_key(config):
    """A stored run's entry in the probe's ledger: ``<profile>/<config key>``."""
    return f"{config['profile']}/{config_key(config)}"


def read_ledger(root=None):
    """The probe's ledger ``{ledger_key: entry}`` in the results store ``root`` (default the results store's
    folder, ``paths.results_root``); {} where there is none."""
    path = Path(root if root is not None else results_root()) / LEDGER
    if not path.exists():
        return {}
    try:
        ledger = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(ledger, dict) or not all(isinstance(v, dict) for v in ledger.values()):
            raise ValueError("not a mapping of ledger entries")
        return ledger
    except (OSError, ValueError) as e:  # a derived file: named once, and read as empty (the probe writes it anew)
        say_once(f"ledger {path}", f"{path} cannot be read ({type(e).__name__}: {str(e)[:120]}); it is not used: "
                                   "results whose code changed read 'unverified' until `vixnb probe` writes it again")
        return {}


def code_changed(stored, root=None):
    """Why a stored run's code may not make it any more, or None where it does: None where its recorded
    ``source_hash`` equals today's (``source_hashes`` of today's model in the same configuration), or where the
    committed probe ledger (``runs.probe``) found today's code (the same source hashes) making it bitwise the
    same; else the ledger's reason (the probe differs: other numbers), or ``unverified: ...`` where the probe has
    not run on today's code or could not. None too for a result stored before source hashes were recorded.
    ``root``: the results store whose ledger to read (default the results store's folder)."""
    recorded = stored.get("source_hash")
    if not recorded:
        return None
    config = stored["config"]
    today = source_today(config["model"], config["dataset"], config_overrides_json(config))
    if all(recorded.get(part) == today[part] for part in ("model", "engine")):
        return None
    entry = read_ledger(root).get(ledger_key(config))
    if entry and entry.get("code") == today and entry.get("equal") in (True, False):  # else: not a sound entry
        return None if entry["equal"] else str(entry.get("why") or "the behavioural probe differs")
    parts = " and ".join(part for part in ("model", "engine") if recorded.get(part) != today[part])
    return f"unverified: its {parts} code changed since it was stored and the behavioural probe has not run on " \
           "today's code (`vixnb probe`)"


# ----- why a stored measurement is stale -----------------------------------------------------------------------

def weights_changed(record, store):
    """Why a stored measurement of trained weights no longer answers, or None: a run it measured (``record["runs"]``,
    each with the ``config`` and ``weights_sha256`` it was measured from) keeps other weights now (retrained), or
    none; or the record's rows were superseded by a later change (``record["superseded"]``)."""
    superseded = record.get("superseded")
    if superseded:
        return f"rows {', '.join(superseded['rows'])} superseded: {superseded['reason']}"
    for name, run in (record.get("runs") or {}).items():
        if "config" not in run:
            continue
        stored = store.get(run["config"])
        sha = ((stored or {}).get("weights") or {}).get("sha256")
        if sha != run.get("weights_sha256"):
            return f"{name}'s weights changed since it was measured ({'retrained' if sha else 'no weights stored now'})"
    return None
