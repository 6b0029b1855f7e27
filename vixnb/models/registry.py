"""A small model registry in the manner of timm: ``register_model``, ``create_model``, ``list_models``.

A model is a function ``fn(*, image_size, num_classes, channels, **config) -> nn.Module`` registered with
the paper it comes from and its display label (``@register_model(paper="vix", label="ViT")``), one function
in its family's file under ``vixnb.models``. ``create_model`` resolves the dataset into those plain
arguments before it calls the function, and attaches one ``default_cfg`` dict to the model it returns.

The family files register their models when they are imported; ``vixnb.models`` imports them all, so use the
registry through ``vixnb.models`` (or ``vixnb.create_model``). This module imports no family file.
"""
import fnmatch
import hashlib
import importlib
import inspect
import json
import numbers
from contextlib import contextmanager
from functools import cache, lru_cache, reduce

import torch

from .. import papers
from ..data import dataset_spec
from .facts import kept_fact

MODELS = {}  # every registered model: {name: its builder function}
CFGS = {}  # every registered model's {"paper", "label"}
_CHANGED_DEFAULTS = {}


def register_model(fn=None, *, paper, label, changed_defaults=None):
    """Register ``fn`` under its function name; registering a name again replaces it (notebook reload).

    ``paper``: the key of the paper file whose tables and protocol the model belongs to; ``label``: how
    tables and figures name it. ``changed_defaults``: ``{setting: earlier default}`` for each setting whose
    default changed after runs were stored; a run's key leaves that earlier value out, so a stored config without
    the setting still means it (``settings_in_key``, ``settings_from_key``)."""
    def register(f):
        MODELS[f.__name__] = f
        CFGS[f.__name__] = {"paper": paper, "label": label}
        _CHANGED_DEFAULTS[f.__name__] = dict(changed_defaults or {})
        return f

    return register(fn) if fn is not None else register


def mixer_overrides(config, mixer, mixer_options=None):
    """``(mixer, options, rest)`` of a family's ``create_model`` overrides ``config``, one rule for every family:
    ``mixer=`` swaps the model's mixer ``mixer`` (and then starts from none of its ``mixer_options``),
    ``mixer_options`` is merged into the model's own, and every other key is left in ``rest``."""
    rest = dict(config)
    chosen = rest.pop("mixer", mixer)
    own = (mixer_options or {}) if chosen == mixer else {}
    return chosen, {**own, **(rest.pop("mixer_options", None) or {})}, rest


def architecture_signature(model):
    """A short hash of a model's structure: each submodule's path, class and settings, and each parameter's and
    buffer's name, shape and dtype. Edits that keep the structure (docstrings, refactors) keep it; a changed
    layer, width or option changes it. A training result records it, and ``vixnb plan`` calls a stored result
    stale when today's model no longer has it.

    A torch layer's settings are the values of its ``__constants__`` (LayerNorm's shape, eps and affine flag;
    Conv2d's kernel, stride, padding ...), not its ``extra_repr``, which changes between torch releases (2.14's
    LayerNorm adds "bias=True" that 2.11's lacks): the same model has the same signature on a GPU machine's
    torch and a CPU's. vixnb's own modules are described by their ``extra_repr``."""
    digest = hashlib.sha256()
    for name, module in model.named_modules():
        if type(module).__module__.startswith("torch."):
            settings = ", ".join(f"{k}={getattr(module, k, None)!r}"
                                 for k in sorted(getattr(module, "__constants__", ())))
        else:
            settings = module.extra_repr()
        digest.update(f"{name}|{type(module).__name__}|{settings}\n".encode())
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        digest.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}\n".encode())
    return digest.hexdigest()[:16]


def _default_of(name, setting):
    default = inspect.signature(MODELS[name]).parameters[setting].default
    if default is inspect.Parameter.empty:
        raise TypeError(f"model {name!r}: a changed default ({setting!r}) must be a keyword of its function")
    return default


def changed_defaults(name):
    """``{setting: earlier default}`` of model ``name``: its settings whose default changed after runs were stored
    (``register_model(changed_defaults=...)``; empty for most models)."""
    return dict(_CHANGED_DEFAULTS.get(name, {}))


def settings_in_key(name, settings):
    """``settings`` of model ``name`` as a run's key holds them: a setting whose default changed
    (``register_model(changed_defaults=...)``) is written out at today's default where not given, and left out where
    it is the earlier default, which is what a config stored before the change means without it."""
    keyed = dict(settings)
    for setting, earlier in _CHANGED_DEFAULTS.get(name, {}).items():
        value = keyed.pop(setting, _default_of(name, setting))
        if value != earlier:
            keyed[setting] = value
    return keyed


def settings_from_key(name, keyed):
    """The ``create_model`` settings of a run's keyed settings (``settings_in_key``): the earlier default of each
    changed default that the key leaves out."""
    return {**_CHANGED_DEFAULTS.get(name, {}), **keyed}


def list_models(pattern="*"):
    """The registered models' names whose name matches ``pattern`` (fnmatch; all by default), sorted."""
    return sorted(MODELS) if pattern == "*" else sorted(n for n in MODELS if fnmatch.fnmatch(n, pattern))


def _check(name):
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(list_models())}")


def model_entrypoint(name):
    """The registered function of model ``name`` (as timm names it)."""
    _check(name)
    return MODELS[name]


def model_modules(name, model):
    """The modules that make a built ``model``: those defining its module classes and, for a registered ``name``,
    the family file that registers it (what its source hash digests: ``results.provenance.source_hashes``)."""
    modules = {type(m).__module__ for m in model.modules()}
    if name in list_models():
        modules.add(model_entrypoint(name).__module__)
    return sorted(modules)


def model_family(name):
    """The family file model ``name`` is registered in (``"vix"``, ``"levit"``, ...): what its tables and
    figures group it by."""
    _check(name)
    return MODELS[name].__module__.rsplit(".", 1)[-1]


def model_cfg(name):
    """The model's ``default_cfg``: ``name``, ``paper`` key, display ``label``, and the paper protocol's
    ``batch_size`` and ``epochs`` for it (read from the paper file)."""
    _check(name)
    cfg = dict(CFGS[name], name=name)
    protocol = papers.protocol(cfg["paper"])
    cfg["batch_size"] = papers.per_model(protocol["batch_size"], name)
    cfg["epochs"] = papers.per_model(protocol["epochs"], name)
    return cfg


#: what ``create_model`` gives every model function from the data set: no override may set them as well
FROM_DATASET = ("image_size", "num_classes", "channels")


class InputSize:
    """A forward pre-hook that refuses images of another shape than the model was built for (channels x size x
    size), naming both: a ViT built for 32 x 32 would otherwise take 28 x 28 silently, its position table cut."""

    def __init__(self, name, dataset, channels, size):
        self.name, self.dataset, self.shape = name, dataset, (channels, size, size)

    def __call__(self, module, args):
        image = args[0] if args else None
        if isinstance(image, torch.Tensor) and image.dim() >= 3 and tuple(image.shape[-3:]) != self.shape:
            c, h, w = image.shape[-3:]
            raise ValueError(f"model {self.name!r} was built for {self.shape[1]}x{self.shape[2]} images with "
                             f"{self.shape[0]} channels ({self.dataset}), got {h}x{w} with {c}; resize the images to "
                             f"{self.shape[1]}x{self.shape[2]} (--allow-resize) or build the model for their data set "
                             "(create_model(name, dataset=...))")


@contextmanager
def default_dtype(dtype):
    """While it holds, ``dtype`` is torch's default float type (restored after: the caller's state is kept). A run's
    model is built in float32 whatever it is (``engine.train.build_model``, ``meta_model``); under float64 the engine
    trains in float64 (the engine probe's reference, the tests' exact comparisons)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@cache
def meta_model(name, dataset="cifar10", settings_json="{}"):
    """Model ``name`` as ``create_model`` builds it for ``dataset`` with the model settings ``settings_json`` (JSON),
    on the meta device, in float32 as a run builds it: shapes only, no memory, no random numbers drawn (the caller's
    generators untouched). Built once per process and shared by the plan's counts (parameters, weights' bytes, FLOPs):
    read it, never change it."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"), default_dtype(torch.float32):
        return create_model(name, dataset=dataset, **json.loads(settings_json))


def model_fact(compute, name, dataset="cifar10", settings_json="{}", *, built=None):
    """``compute(meta_model(name, dataset, settings_json))``, a JSON value (a tuple comes back as a list), kept
    between processes (``facts.kept_fact``: for today's code only) under the name of ``compute``, a module-level
    function of the model alone: the plan reads its counts, signatures and FLOPs this way without building the
    model in every process. ``built``: that model already built (a training run's), computed on instead of a meta
    build where the fact is not kept yet."""
    if "<" in compute.__qualname__:
        raise ValueError(f"model_fact: {compute.__qualname__} has no name that stays the same between processes; "
                         "give a module-level function")
    made = lambda: compute(built if built is not None else meta_model(name, dataset, settings_json))  # noqa: E731
    if not _packaged(name):  # a model registered elsewhere (a notebook's) may change with no change to the package
        return json.loads(json.dumps(made()))
    return kept_fact([f"{compute.__module__}.{compute.__qualname__}", name, dataset, settings_json], made)


def _packaged(name):
    """Whether model ``name`` is registered by a file of this package (whose code ``facts.code_version`` covers)."""
    return name in MODELS and MODELS[name].__module__.startswith(f"{__package__.split('.')[0]}.")


def initialise(model, std):
    """He and Hofmann's initial weights (their recipe, ``init_std``): every linear and convolution weight drawn from a
    normal of standard deviation ``std`` truncated at +-2 (``trunc_normal_``'s bounds, as timm's ViTs draw it: at
    0.02 a normal of standard deviation 0.02 in practice), its bias zero; norms, gains, embeddings and
    tokens keep the model's own (a position embedding of the blog's ViTs is drawn at 0.02 already). A model's own
    special initial values of those weights (``hehofmann``'s zero queries) are drawn over: set one or the other."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)):
                torch.nn.init.trunc_normal_(module.weight, std=std)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
    return model


def create_model(name, *, dataset="cifar10", init_std=None, **overrides):
    """Build model ``name`` for ``dataset`` (image size, classes, channels), with config overrides. The model
    refuses images of another size than the data set's (``InputSize``), unless it resizes them itself (a model
    with a ``resize_to``: the `linattn` paper's ViT-B/16 at 224 on CIFAR). ``init_std``: every model's initial weights
    as He and Hofmann's recipe draws them (``initialise``; None: the model's own)."""
    _check(name)
    if init_std is not None and (isinstance(init_std, bool) or not isinstance(init_std, numbers.Real)
                                 or not init_std > 0):
        raise SettingError(f"init_std={init_std!r}: give a standard deviation > 0 (He and Hofmann's: 0.02), or leave "
                           "it out for the model's own initial weights")
    spec = dataset_spec(dataset)
    if given := [k for k in FROM_DATASET if k in overrides]:
        raise SettingError(f"{given[0]}={overrides[given[0]]!r}: model {name!r} takes its image size, classes and "
                           f"channels from its data set ({spec.name}: {spec.image_size}x{spec.image_size}, "
                           f"{spec.num_classes} classes, {spec.channels} channels); choose another dataset= instead")
    check_settings(name, overrides)
    try:
        model = MODELS[name](image_size=spec.image_size, num_classes=spec.num_classes, channels=spec.channels,
                              **overrides)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise SettingError(f"bad override for model {name!r}: {e}") from e
    if init_std is not None:
        initialise(model, init_std)
    model.default_cfg = {**model_cfg(name), "dataset": spec.name,
                         "input_size": (spec.channels, spec.image_size, spec.image_size)}
    if getattr(model, "resize_to", None) is None:
        model.register_forward_pre_hook(InputSize(name, spec.name, spec.channels, spec.image_size))
    return model


class SettingError(ValueError, TypeError):
    """A model setting that the model does not take, or of the wrong type or range (a usage error)."""


def built_type(name):
    """The module class model ``name``'s function builds (one build on the meta device: no memory, the caller's RNG
    untouched), or None where that build fails."""
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            return type(MODELS[name](image_size=32, num_classes=10, channels=3))
    except Exception:  # noqa: BLE001  (a model that cannot be built on the meta device is checked when built)
        return None


def _class_path(name):
    cls = built_type(name)
    return None if cls is None else f"{cls.__module__}:{cls.__qualname__}"


def _built_class(name):
    """``built_type``, its name kept between processes (``facts.kept_fact``): imported by that name, not built."""
    path = kept_fact(["built_type", name], lambda: _class_path(name)) if _packaged(name) else _class_path(name)
    if path is None:
        return None
    module, _, qualified = path.partition(":")
    try:
        return reduce(getattr, qualified.split("."), importlib.import_module(module))
    except (ImportError, AttributeError):  # a class that cannot be imported by its name (made inside a function)
        return built_type(name)


@lru_cache(maxsize=None)
def settings_of(name):
    """``{setting: default}`` of model ``name``: the keyword arguments of the module class its function builds
    (``built_type``, its name kept between processes) and of the function itself, or None where that build fails or
    the class takes any keyword (then nothing is checked before the real build)."""
    cls = _built_class(name)
    if cls is None:
        return None
    parameters = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    own = [p for p in inspect.signature(MODELS[name]).parameters.values() if p.kind is p.KEYWORD_ONLY]
    return {p.name: p.default for p in [*parameters, *own]  # the function's own keywords (``kernel=``) too
            if p.name not in ("self", "image_size", "num_classes", "channels") and p.kind is not p.VAR_POSITIONAL}


def check_settings(name, settings, *, option=None, build=False):
    """Raise ``SettingError`` (a ``ValueError`` and a ``TypeError``) naming the setting, ``option`` (e.g.
    ``--override``) where given, and the allowed values, where a setting of ``settings`` that model ``name``'s class
    or function declares (``settings_of``) has another type than its default (a whole number >= 1 where the
    default is one, >= 0 where it is 0; a number; true or false; a string). ``build``: also build the model on the
    meta device, so a setting that no layer of it takes is refused now (its settings listed)."""
    known = settings_of(name) or {}
    prefix = f"{option} " if option else ""
    for key, value in settings.items():
        if key not in known:
            continue
        default, allowed = known[key], None
        if isinstance(default, bool):
            allowed = None if isinstance(value, bool) else "true or false"
        elif isinstance(default, int):
            least = 1 if default >= 1 else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                allowed = f"a whole number >= {least} (default {default})"
        elif isinstance(default, float):
            allowed = None if isinstance(value, numbers.Real) and not isinstance(value, bool) else \
                f"a number (default {default})"
        elif isinstance(default, str) and not isinstance(value, str):
            allowed = f"a name (default {default!r})"
        if allowed:
            raise SettingError(f"{prefix}{key}={value!r}: model {name!r} takes {allowed} for {key}")
    if build:
        try:
            with torch.random.fork_rng(devices=[]), torch.device("meta"):
                MODELS[name](image_size=32, num_classes=10, channels=3, **settings)
        except TypeError as e:
            if "unexpected keyword argument" not in str(e):
                raise
            key = str(e).rsplit("argument", 1)[-1].strip(" '\"")
            raise SettingError(f"{prefix}{key}={settings.get(key)!r}: bad override for model {name!r}: it has no "
                               f"setting {key!r}; its settings: {', '.join(sorted(known)) or 'see its family file'}") \
                from None
