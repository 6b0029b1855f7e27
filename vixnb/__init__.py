"""vixnb: a reproducible study of efficient vision transformers.

``import vixnb`` is cheap: the registry is light, and ``count_params`` / ``summary_size_mb``
(``vixnb.measure.counting``, which needs torch) are imported on first use."""
from .registry import create_model, list_models, register_model

__all__ = ["create_model", "list_models", "register_model", "count_params", "summary_size_mb"]
__version__ = "0.1.0"

_COUNTING = ("count_params", "summary_size_mb")


def __getattr__(name):
    if name in _COUNTING:
        from .measure import counting

        return getattr(counting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_COUNTING))
