"""vixnb: a reproducible study of efficient vision transformers.

``import vixnb`` is cheap: the registry (``vixnb.models``: ``create_model``, ``list_models``,
``register_model``; ``transfer``, a warm start from another model's weights), ``count_params`` /
``summary_size_mb`` (``vixnb.models.counting``) and ``env`` (``vixnb.runtime``: Colab, Kaggle or local) are
imported on first use, since they need torch."""
from importlib import import_module

__version__ = "0.1.0"
#: the project's public repository and the tag of this release: the book's launch links and the notebooks'
#: install cell point there (``_config.yml``'s ``repository`` says the same; a test checks that they agree)
REPOSITORY_URL = "https://github.com/vixnb/vixnb"
RELEASE_TAG = f"v{__version__}"

_LAZY = {"create_model": "models", "list_models": "models", "register_model": "models",
         "count_params": "models.counting", "summary_size_mb": "models.counting", "env": "runtime",
         "transfer": "models", "TransferReport": "models"}
__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
