"""One training run's identity, made once (from a paper row, a chapter's table, the maps study or the command line)
and carried unchanged to the batch, the store and the page: ``RunSpec``.

A ``RunSpec`` is its model, dataset, profile, seed and settings (a paper row's, a chapter's profile settings, a
study's: ``FrozenSettings``) and where its trained weights are kept (``Keep``). Its ``config`` is the resolved
configuration (``profiles.run_config``), its ``key`` the store key (``profiles.config_key``) and its ``path`` the
result file's path in the store. Where the weights are kept is not part of the identity: the same run keeps them or
not, under the same key.
"""
from __future__ import annotations

import copy
import inspect
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property

from . import papers
from .models import model_cfg
from .profiles import config_key, run_config


class Keep(str, Enum):
    """What a run keeps of its selected weights: ``NONE`` nothing; ``STORE`` float16 beside the result in the store
    (committed with it; at most ``runs.WEIGHTS_LIMIT_MB``); ``LOCAL`` in the profile's ``.weights-local/`` folder on
    this machine only (never committed nor packed, no cap). The values are the command line's and the plan's
    (``vixnb plan --json``'s ``keep_weights``)."""
    NONE = "no"
    STORE = "store"
    LOCAL = "local"

    @classmethod
    def of(cls, value):
        """``value`` (a ``Keep`` or one of its values) as a ``Keep``, or a one-line error naming it and the values."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"keep_weights={value!r}: use one of {', '.join(repr(k.value) for k in cls)}") from None

    def __str__(self):
        return self.value


class FrozenSettings(Mapping):
    """A run's settings beyond its profile's, read-only: each value is a copy (a warm start's ``init_from`` is a
    mapping of its own), the order given is kept (commands show it), and equal settings hash alike."""
    __slots__ = ("_items",)

    def __init__(self, settings=None):
        object.__setattr__(self, "_items", copy.deepcopy(dict(settings or {})))

    def __setattr__(self, name, value):
        raise AttributeError("FrozenSettings are read-only: make another RunSpec with dataclasses.replace")

    def __getstate__(self):
        return self._items

    def __setstate__(self, state):
        object.__setattr__(self, "_items", state)

    def __getitem__(self, key):
        return copy.deepcopy(self._items[key])

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(json.dumps(self._items, sort_keys=True, default=str))

    def __repr__(self):
        return f"FrozenSettings({self._items!r})"


@dataclass(frozen=True)
class RunSpec:
    """One training run: ``model`` on ``dataset`` (as asked: the profile may train another, ``config["dataset"]``)
    in ``profile`` with ``seed`` and ``settings`` (``run_config``'s options and model settings), keeping its weights
    as ``keep`` says. Make it with ``RunSpec.of``."""
    model: str
    dataset: str
    profile: str
    seed: int
    settings: FrozenSettings = field(default_factory=FrozenSettings)
    keep: Keep = Keep.NONE

    def __post_init__(self):
        if not isinstance(self.settings, FrozenSettings):
            object.__setattr__(self, "settings", FrozenSettings(self.settings))
        object.__setattr__(self, "keep", Keep.of(self.keep))

    @classmethod
    def of(cls, model, *, dataset="cifar10", profile="smoke", seed=0, keep=Keep.NONE, **settings):
        """The run of ``model`` as ``profiles.run_config`` takes it (its defaults too), keeping weights as ``keep``."""
        return cls(model, dataset, profile, seed, FrozenSettings(settings), keep)

    @cached_property
    def config(self):
        """The resolved configuration (``profiles.run_config``): the run's whole identity."""
        return run_config(self.model, dataset=self.dataset, profile=self.profile, seed=self.seed, **self.settings)

    @cached_property
    def key(self):
        """The store key: 16 hex digits of the configuration's hash (``profiles.config_key``; computed once: the
        plan asks it of every entry many times)."""
        return config_key(self.config)

    @property
    def path(self):
        """The result file's path in the store (``<profile>/<model>-<dataset>-seed<seed>-<key>.json``)."""
        return result_path(self.config)


def result_path(config):
    """The path in the store of run config ``config``'s result: ``<profile>/<model>-<dataset>-seed<seed>-<key>.json``
    (``ResultsStore.path`` is the store's root joined with it)."""
    return f"{config['profile']}/{config['model']}-{config['dataset']}-seed{config['seed']}-{config_key(config)}.json"


def run_command(spec):
    """The ``vixnb train`` command line of ``spec`` (its settings as the command line takes them: run options as
    options, model settings as ``--override KEY=VALUE``; its ``keep`` as ``--keep-weights``)."""
    run_options = inspect.signature(run_config).parameters  # the rest are model settings: --override KEY=VALUE

    def option(key, value):  # a run option as the CLI takes it (a list as its items: --randaugment 1 1)
        shown = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        if isinstance(value, dict):  # a warm start: the row's name, or a chapter's run as '{"run": ..., "model": ...}'
            rows = papers.paper_runs(model_cfg(spec.model)["paper"])
            as_row = rows.get(value.get("run")) == (value.get("model"), value.get("settings"))
            shown = value["run"] if as_row else shlex.quote(json.dumps(value, separators=(",", ":")))
        if value is True:  # a switch: --loss-fp32
            return f" --{key.replace('_', '-')}"
        return f" --{key.replace('_', '-')} {shown}"

    extra = "".join(option(k, v) if k in run_options else f" --override {k}={v if isinstance(v, str) else json.dumps(v)}"
                    for k, v in spec.settings.items())
    keep = {Keep.NONE: "", Keep.STORE: " --keep-weights", Keep.LOCAL: " --keep-weights local"}[spec.keep]
    dataset = spec.dataset
    trained_on = spec.config["dataset"]  # a profile's own data (the smoke profile's synthetic images)
    if trained_on != dataset and replace(spec, dataset=trained_on).key == spec.key:
        dataset = trained_on  # the same run, named by the data it trains on
    return (f"vixnb train {spec.model} --dataset {dataset} --profile {spec.profile} --seed {spec.seed}"
            f"{extra}{keep}")
