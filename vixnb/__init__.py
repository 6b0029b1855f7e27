"""vixnb: a reproducible study of efficient vision transformers.

``import vixnb`` is cheap: the registry (``vixnb.models``: ``create_model``, ``list_models``,
``register_model``) and ``count_params`` / ``summary_size_mb`` (``vixnb.measure.counting``) are imported on
first use, since they need torch."""
__version__ = "0.1.0"

_LAZY = {"create_model": "models", "list_models": "models", "register_model": "models",
         "count_params": "measure.counting", "summary_size_mb": "measure.counting"}
__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
