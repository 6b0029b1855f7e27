"""Measurements as JSON (``jsonable``) and in the results store (``results/<profile>/measure/<name>.json``),
so that a GPU profile's measurements can be read back on a CPU."""
from __future__ import annotations

import math

import torch

from ..results import ResultsStore
from .runtime import dtype_name


def jsonable(obj):
    """Plain JSON types: dicts with string keys, lists, finite floats (non-finite -> None), str for the rest."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, torch.dtype):
        return dtype_name(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return jsonable(obj.item())
    return str(obj)


def measurement_path(profile, name, root=None):
    """Where the measurement ``name`` of ``profile`` is stored (``ResultsStore.record_path``)."""
    return ResultsStore(root).record_path("measure", name, profile=profile)


def save_measurements(obj, profile, name, root=None):
    """Store ``obj`` (made ``jsonable``) as the measurement ``name`` of ``profile``; returns its path."""
    return ResultsStore(root).save_record("measure", name, jsonable(obj), profile=profile)


def load_measurements(profile, name, root=None):
    """The stored measurement ``name`` of ``profile``, or None when there is none."""
    return ResultsStore(root).load_record("measure", name, profile=profile)
