"""A small model registry in the manner of timm: ``register_model``, ``create_model``, ``list_models``."""
import fnmatch

from .data import dataset_spec

_MODELS = {}


def register_model(fn):
    """Register ``fn(*, dataset, **overrides) -> nn.Module`` under its function name."""
    if fn.__name__ in _MODELS:
        raise ValueError(f"model {fn.__name__!r} is registered twice")
    _MODELS[fn.__name__] = fn
    return fn


def _ensure_registered():
    from . import models  # noqa: F401  (registers the families on first use, not at package import)


def list_models(pattern="*"):
    _ensure_registered()
    return sorted(n for n in _MODELS if fnmatch.fnmatch(n, pattern))


def create_model(name, *, dataset="cifar10", **overrides):
    """Build model ``name`` for ``dataset`` (image size, patching/stride, classes), with config overrides."""
    _ensure_registered()
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(list_models())}")
    spec = dataset_spec(dataset)
    try:
        model = _MODELS[name](spec=spec, **overrides)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise TypeError(f"bad override for model {name!r}: {e}") from e
    model.input_size = (spec.channels, spec.image_size, spec.image_size)
    model.model_name, model.dataset = name, spec.name
    return model
