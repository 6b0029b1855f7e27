"""Training runs under the compute policy: ``run(spec)`` reads the stored result of a ``RunSpec`` or trains it
(``engine.train``), keeps its weights where its spec says, and finds a warm start's source; ``trained_model(spec)``
gives a run's trained module; ``run_ensemble`` trains the seeds of one run as one vectorised job.

What a run does with its selected weights is its spec's ``keep`` (a ``spec.Keep``), the same from the paper file's
chapter to the store (``asked.table_specs`` decides it): ``"no"``; ``"store"``, float16 beside the result in the
store (committed with it; at most ``WEIGHTS_LIMIT_MB``, checked once, before training: ``weights_too_large``);
``"local"``, in the profile's ``.weights-local/`` folder on this machine only (never committed nor packed, no cap: a
warm start's large source).
"""
import json
import sys
from contextlib import ExitStack
from dataclasses import dataclass, replace

import torch

from .. import papers
from ..models import model_cfg, model_fact
from ..results import ResultsStore, config_key, remove_checkpoints
from .policy import decide, stale_reason
from .spec import Keep, run_beside, run_model_settings, warm_start_spec
from ..engine.ensemble import can_ensemble
from ..engine.precision import machine_precision
from ..engine.train import build_model, train, train_ensemble, without_timings

WEIGHTS_LIMIT_MB = 16  # the most a run's weights kept in the store (float16) may take


def weights_bytes(config):
    """The bytes of ``config``'s model state in float16 (floating tensors 2 bytes an element, integer buffers as
    they are), from a build on the meta device (no memory, no random numbers)."""
    return model_fact(float16_bytes, config["model"], config["dataset"],
                      json.dumps(run_model_settings(config), sort_keys=True))


def float16_bytes(model):
    """The bytes of ``model``'s state in float16 (floating tensors 2 bytes an element, integer buffers as they are)."""
    return sum(v.numel() * (2 if v.is_floating_point() else v.element_size()) for v in model.state_dict().values())


def weights_too_large(config):
    """Why ``config``'s weights cannot be kept in the store (over ``WEIGHTS_LIMIT_MB`` in float16), or None."""
    size = weights_bytes(config) / 2**20
    if size > WEIGHTS_LIMIT_MB:
        return (f"{config['model']}: its weights take {size:.1f} MiB in float16, over the {WEIGHTS_LIMIT_MB} MiB cap "
                "on weights kept in the store (runs.make.WEIGHTS_LIMIT_MB)")
    return None


def keep_where(config):
    """Where ``config``'s kept weights go: ``"store"`` where they fit its cap, else ``"local"`` (``weights_too_large``:
    a ViT-B/16's 172 MB stay on the machine that trains it)."""
    return Keep.LOCAL if weights_too_large(config) else Keep.STORE


def run(spec, *, compute="missing", store=None, progress=True, download=False, deadline=None, graphs=None):
    """The training run ``spec`` (a ``RunSpec``: the run's identity and what it keeps of its weights) under the
    compute policy (``policy.decide``): the stored result, or trained now (``"always"`` trains anew from epoch 1),
    or a ``{"status": "not yet run"}`` record with the reason.

    A stored result that no longer answers for its configuration (``policy.stale_reason``: other model code,
    other data, a warm start's source retrained) is never reused silently: ``"missing"`` trains it again where
    the profile can train here; read anyway (``"never"``, or a machine that cannot train it), it says why under
    ``"stale"``. Where it keeps weights (``spec.keep``: ``"store"``, ``"local"``) a stored result whose weights are
    missing is trained again to keep them; read anyway, it says why under ``"weights_missing"``. Two processes on one
    run: the second waits for the first's result (a lock per run). ``deadline``: see ``train.train`` (a run stopped by
    it raises ``TrainingPaused`` and keeps its checkpoint).

    A run with ``init_from`` first gets its source run (the stored result if its weights are here, else trained,
    keeping them) and starts from its weights; a run that some row of its paper file starts from
    (``warm_start_source``) keeps its weights locally when trained and asked for none, so the warm starts find
    them. Several runs trained at once in one process: ``pending`` for each, then ``Pending.train_options`` and
    ``Pending.keep`` around ``concurrent.train_concurrently`` (``vixnb.plan.groups``). ``graphs``: the engine's mode
    for a run (``train.train``'s: None, the graphed step on a GPU; False, eager), an execution choice (the batch's
    probe makes it: ``engine.modes``) that its provenance records."""
    todo = pending(spec, compute=compute, store=store, progress=progress, download=download, deadline=deadline)
    if not isinstance(todo, Pending):
        return todo
    todo.graphs = graphs
    with todo.store.lock(todo.config) as waited:
        if (done := todo.done_meanwhile(waited)) is not None:
            return done
        return todo.keep(train(todo.config, progress=progress, download=download, deadline=deadline,
                               **todo.train_options()))


@dataclass
class Pending:
    """A run that ``run`` trains (``pending`` decided it): its ``config``, ``store``, ``compute``, what it keeps of
    its weights, and a warm start's source weights."""
    config: dict
    store: object
    compute: str
    keep_weights: Keep
    init_state: dict | None = None
    init_sha256: str | None = None
    graphs: bool | None = None  # the engine's mode (``train.train``'s ``graphs``)

    def done_meanwhile(self, waited):
        """The result another process stored while this one waited for the run's lock (``waited``), where it
        serves (not under ``compute="always"``, its weights kept where asked); else None."""
        if not waited or self.compute == "always" or (done := self.store.get(self.config)) is None:
            return None
        return None if self.keep_weights != Keep.NONE and self.store.weights_missing(self.config, done) else done

    def train_options(self):
        """``train``'s keyword arguments for the run beyond ``config``, ``progress``, ``download`` and ``deadline``
        (under the run's lock: ``compute="always"`` removes its checkpoint here, to train anew)."""
        checkpoint = self.store.checkpoint_path(self.config)
        if self.compute == "always":
            remove_checkpoints(checkpoint)
        return {"checkpoint": checkpoint, "with_weights": self.keep_weights != Keep.NONE, "init_state": self.init_state,
                "init_sha256": self.init_sha256, "graphs": self.graphs}

    def keep(self, result):
        """Store a finished run's ``result`` (its weights first, where kept) and remove its checkpoint; the
        result with its config, as ``run`` returns it."""
        # the weights first: a stored result's weights record always names a written file
        if self.keep_weights != Keep.NONE:
            result["weights"] = self.store.save_weights(self.config, result.pop("best_state"),
                                                        local=self.keep_weights == Keep.LOCAL)
        self.store.put(self.config, result)
        remove_checkpoints(self.store.checkpoint_path(self.config))
        return {**result, "config": self.config}


def pending(spec, *, compute, store, progress, download, deadline):
    """What ``run`` decides before training the run ``spec``: the result it returns without training (stored, stale,
    ``not yet run``), or a ``Pending`` run to train (a warm start's source trained and loaded first)."""
    keep_weights, config, profile = spec.keep, spec.config, spec.profile
    store = store if store is not None else ResultsStore()
    stored = store.get(config)
    stale = stale_reason({**stored, "config": config}, store) if stored is not None else None
    unkept = store.weights_missing(config, stored) if keep_weights != Keep.NONE and stored is not None else None
    decision = decide(compute, stored=stored, profile=profile, stale=stale or unkept)
    if decision.action == "skip":
        return {"status": "not yet run", "config": config, "reason": decision.reason}
    if decision.action == "read":
        if not decision.reason:
            return stored
        return {**stored, "stale" if stale else "weights_missing": decision.reason}
    if (precision := machine_precision(config["precision"])) != config["precision"]:  # this GPU's own run of it
        print(f"vixnb: {config['model']}: this GPU has no native bfloat16; training the {precision} run instead "
              f"(another run than the {config['precision']} one)", file=sys.stderr, flush=True)
        return pending(replace(spec, settings={**spec.settings, "precision": precision}), compute=compute,
                       store=store, progress=progress, download=download, deadline=deadline)
    if decision.reason:
        print(f"vixnb: {store.path(config).name} was {stale}; training it again" if stale else
              f"vixnb: {store.path(config).name} {unkept}; training it again to keep them", file=sys.stderr, flush=True)
    if keep_weights == Keep.STORE and (too_large := weights_too_large(config)):
        raise ValueError(f"{too_large}; run it with keep_weights 'no' or 'local'")
    store.check_writable(config)
    init_state = init_sha256 = None
    # a warm start needs its source's weights unless it resumes from its own checkpoint
    if config.get("init_from") and (compute == "always" or not store.checkpoint_path(config).exists()):
        init_state, init_sha256, why = _source_weights(config, store, progress=progress, download=download,
                                                       deadline=deadline)
        if init_state is None:
            return {"status": "not yet run", "config": config, "reason": why}
    if keep_weights == Keep.NONE and warm_start_source(config):
        keep_weights = Keep.LOCAL
    return Pending(config, store, compute, keep_weights, init_state, init_sha256)


def kept_published(store, configs, published):
    """After a run trained again for its weights (status ``weights wanted``): where it repeated its published
    numbers exactly, nothing to say; where not, its new result records the published one under ``"retrained"``
    (top-1 and history, date, commit) so the pages can flag it, and the note says so."""
    changed = []
    for config in configs:
        old, new = published.get(store.path(config)), store.get(config)
        if not old or not new:
            continue
        same = old["top1"] == new["top1"] and without_timings(old["history"]) == without_timings(new["history"])
        if not same:
            prov = old.get("provenance") or {}
            store.put(config, {**{k: v for k, v in new.items() if k != "config"},
                               "retrained": {"reason": "trained again for its weights; not an exact repeat of the "
                                             "published numbers", "top1": old["top1"], "history": old["history"],
                                             "finished": prov.get("finished"), "commit": prov.get("commit")}})
            changed.append(f"seed {config['seed']}: top-1 {old['top1']:.2f} published, {new['top1']:.2f} now")
    return ("trained again for its weights, not an exact repeat (the published numbers are kept under "
            f"'retrained'): {'; '.join(changed)}") if changed else ""


def warm_start_source(config):
    """Whether a row of ``config``'s paper file starts from ``config``'s run: a row named by an ``init_from`` whose
    run, with ``config``'s model settings added (a chapter's profile settings), is ``config`` itself. Such a run
    keeps its weights locally (``run``), so that the warm starts find them."""
    if config.get("init_from"):
        return False
    runs = papers.paper_runs(model_cfg(config["model"])["paper"])
    sources = {s["init_from"] for _, s in runs.values() if isinstance(s.get("init_from"), str)}
    for row in sources & set(runs):
        model, settings = runs[row]
        if model != config["model"]:
            continue
        if run_beside(config, model, {**run_model_settings(config), **settings}).key == config_key(config):
            return True
    return False


def _source_weights(config, store, **options):
    """``(state, sha256, None)``: the weights of ``config``'s ``init_from`` run (its stored ones, else trained now and
    kept: in the store where they fit, else locally) and their SHA-256, or ``(None, None, why)`` where they cannot
    be had."""
    init, source = config["init_from"], warm_start_spec(config)
    if source.key != init["key"]:
        raise RuntimeError(f"{config['model']}: init_from {init['run']!r} resolved to another run than its config "
                           "records; rebuild the config (spec.run_config)")
    result = run(replace(source, keep=keep_where(source.config)), compute="missing", store=store, **options)
    source = source.config
    if result["status"] != "done":
        return None, None, f"its source run {init['run']!r} is {result['status']}: {result.get('reason', '')}"
    state = store.load_weights(source)
    if state is None:
        return None, None, f"its source run {init['run']!r} {store.weights_missing(source, result)}"
    return state, result["weights"]["sha256"], None


def trained_model(spec, *, compute="never", store=None):
    """``(module, result)``: the trained model of the run ``spec`` (``run`` under ``compute``, its weights kept where
    they fit: ``keep_where``),
    built as the engine builds it (under a forked, seeded RNG: the caller's is untouched), its kept weights loaded
    (cast back to float32), in eval mode; or ``(None, record)`` where there are no stored weights and ``compute``
    does not allow training them (a ``{"status": "not yet run", "reason": ...}`` record)."""
    store = store if store is not None else ResultsStore()
    result = run(replace(spec, keep=keep_where(spec.config)), compute=compute, store=store)
    if result["status"] == "done" and result.get("stale"):  # weights of other model code or data: never loaded
        return None, {"status": "not yet run", "config": result["config"],
                      "reason": f"the stored result was {result['stale']}; train it again with compute='missing'"}
    state = store.load_weights(result["config"]) if result["status"] == "done" else None
    if state is None:
        return None, result if result["status"] != "done" else {
            "status": "not yet run", "config": result["config"],
            "reason": f"the stored result {store.weights_missing(result['config'], result)}; train it again with "
                      "compute='missing' (it keeps the weights)"}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(result["config"]["seed"])
        module, _ = build_model(result["config"])
    module.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    return module.eval(), result


# ----- the seeds of one run as one ensemble --------------------------------------------------------------------

def can_ensemble_run(config, *, exact=True):
    """``engine.ensemble.can_ensemble`` for a run the book asks for: also refused where a paper row's warm start
    begins from this run's weights (``warm_start_source``), which each seed keeps as a separate run."""
    if warm_start_source(config):
        return False, "warm starts begin from each seed's weights of this run, which an ensemble does not keep; " \
                      "train the seeds separately"
    return can_ensemble(config, exact=exact)


def checkpoint_path(store, configs):
    """Where an unfinished ensemble of ``configs`` keeps its checkpoint in ``store``: beside the members' own
    (``<profile>/.checkpoints/``), named by the first member and the seeds."""
    first = store.checkpoint_path(configs[0])
    seeds = "-".join(str(c["seed"]) for c in configs)
    return first.with_name(first.name.replace(f"-seed{configs[0]['seed']}-", f"-seeds{seeds}-"))


def run_ensemble(configs, *, store=None, deadline=None, progress=True, download=False, exact=True, keep_weights="no",
                 graphs=None):
    """Train the members of ``configs`` (runs of one shape: ``engine.ensemble.check_members``) that ``store`` lacks
    (or holds stale) as one ensemble and store each member's result where ``runs.make.run`` stores a separate run
    (each member holds its run's lock meanwhile); returns the stored results in the order of ``configs``. A member
    whose loss stopped being finite is stored by no one: the others are stored, then a ``RuntimeError`` names it. A
    paused ensemble (``deadline``) keeps its checkpoint, and the next call with the same members resumes it.
    ``keep_weights``: a ``runs.spec.Keep`` (or its value) for every member, or a list of them parallel to ``configs``
    (each member's selected weights stored beside its result; a stored result whose weights are missing counts as
    lacking). ``graphs``: the ensemble's step as one CUDA graph (``train.train_ensemble``'s; None: on a GPU)."""
    store = store if store is not None else ResultsStore()
    keep = dict(zip(map(id, configs), [keep_weights] * len(configs) if isinstance(keep_weights, str) else keep_weights))
    for c in configs:
        Keep.of(keep[id(c)])
        if keep[id(c)] == Keep.STORE and (too_large := weights_too_large(c)):
            raise ValueError(f"{too_large}; train it with keep_weights 'no' or 'local'")

    def lacking(c):  # not stored, or stale (as `run` decides), or without the weights it should keep
        stored = store.get(c)
        return stored is None or stale_reason(stored, store) is not None or \
            bool(keep[id(c)] != "no" and store.weights_missing(c, stored))

    todo = [c for c in configs if lacking(c)]
    if todo:
        ok, reason = can_ensemble_run(todo[0], exact=exact)  # what it would train: stored members are read as before
        if not ok:
            raise ValueError(f"{todo[0]['model']}: cannot train seeds as an ensemble: {reason}")
        for c in todo:
            store.check_writable(c)
        with ExitStack() as locks:
            for c in sorted(todo, key=lambda c: str(store.path(c))):
                locks.enter_context(store.lock(c))
            todo = [c for c in todo if lacking(c)]  # another process may have stored some meanwhile
            if todo:
                checkpoint = checkpoint_path(store, todo)
                results = train_ensemble(todo, progress=progress, checkpoint=checkpoint, deadline=deadline,
                                         download=download, exact=exact, graphs=graphs,
                                         with_weights=any(keep[id(c)] != "no" for c in todo))
                failed = []
                for c, result in zip(todo, results):
                    if isinstance(result, BaseException):  # stopped alone: nothing stored for it
                        failed.append(str(result))
                        continue
                    best_state = result.pop("best_state", None)
                    if keep[id(c)] != "no":  # the weights first, as run does
                        result["weights"] = store.save_weights(c, best_state, local=keep[id(c)] == "local")
                    store.put(c, result)
                remove_checkpoints(checkpoint)
                if failed:
                    raise RuntimeError(f"{len(failed)} of {len(todo)} members failed (the others are stored): "
                                       + "; ".join(failed))
    return [store.get(c) for c in configs]
