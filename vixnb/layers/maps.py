"""What a layer declares about its attention map, read by code (never its sentence): which modules have one
(``has_attention_map``: their class defines ``attention_map``), which module's declaration a wrapper's map is
(``declaring``: the first inside it whose class says ``map_description``), and whether it can be drawn (``draws_map``: a
mixer without a token-to-token matrix declares ``draws_map = False``, FNet's Fourier mixing and the token MLP). The keep
decision (``runs.asked``) and the maps study (``analysis.maps``) read these."""


def has_attention_map(module):
    """Whether ``module``'s class defines ``attention_map``: every token mixer of ``layers.MIXERS`` and the families'
    own attentions (LeViT's, CvT's, the `shaped` paper's one-map attention), whatever wraps them."""
    return callable(getattr(type(module), "attention_map", None))


def outermost_mappers(model):
    """(name, module) of the outermost submodules whose class defines ``attention_map``, in module order (a
    Performer's inner ``FastAttention`` and a ``TokenMixer2d``'s inner mixer are inside their wrapper's map)."""
    named = [(n, m) for n, m in model.named_modules() if m is not model and has_attention_map(m)]
    outer = [n for n, _ in named]
    return [(n, m) for n, m in named if not any(n.startswith(o + ".") for o in outer)]


NO_MAP = "no attention map"  # how a declared map_description starts where the mixer has none


def declaring(module):
    """The module whose map ``module``'s is: itself, or the first module inside a wrapper (a ``TokenMixer2d``'s
    mixer) that declares ``map_description``; None where none does."""
    return next((m for m in module.modules() if isinstance(getattr(m, "map_description", None), str)), None)


def draws_map(module):
    """Whether ``module``'s map can be made: what the declaring class says (``draws_map = False`` on a mixer with no
    token-to-token matrix: FNet's Fourier mixing, MLP-Mixer's token MLP), True where it says nothing."""
    declared = declaring(module)
    return bool(getattr(declared, "draws_map", True)) if declared is not None else True


def mappers(model):
    """(name, module) of the outermost modules with a map that can be made (``draws_map``)."""
    return [(n, m) for n, m in outermost_mappers(model) if draws_map(m)]


def model_draws_map(model):
    """Whether any layer of ``model`` has a map that can be made (``mappers``)."""
    return bool(mappers(model))
