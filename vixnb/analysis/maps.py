"""Attention maps of any model: collect them and say what they are.

- Collecting: ``attention_maps(model, x)`` runs the model once and returns {layer name: (B, heads, N, N)}, one map
  per mixer call, from each mixer's own ``attention_map`` on the input it received (``collect_attention_maps``: a
  list, by type or method, raising where a mixer has no map). Like vit-pytorch's ``Recorder`` it finds the mixers by
  type (every module whose class defines ``attention_map``), so it needs no knowledge of the model's layout.
- What they are: every mixer declares it, ``map_description`` on its class (one line: the exact softmax, or the
  documented equivalent of an approximation; a property where it depends on the layer's settings, as the Performer's
  kernel); a mixer without a token-to-token matrix declares ``draws_map = False`` and a line starting "no attention map"
  that says why (FNet, the token MLP): code reads the declaration (``draws_map``), a reader the line.
  ``map_description(model)`` gathers them in one line, or says why a model has no map (no mixer: a model class may say
  what it mixes by, ``mixes_by``); ``has_skip`` whether blocks add a residual.
"""
from contextlib import contextmanager

import torch

from ..layers.maps import NO_MAP, declaring, mappers, outermost_mappers


@contextmanager
def evaluating(model):
    """``model`` in eval mode for the block, its mode restored after (also on an error)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def recorded_inputs(model, images, mixers):
    """[(mixer, input)]: every call of a module of ``mixers`` in one forward pass of ``model`` on ``images``, in
    call order, each with the input it received (recorded by a forward pre-hook; the caller sets the mode)."""
    calls = []
    handles = [m.register_forward_pre_hook(lambda module, args: calls.append((module, args[0]))) for m in mixers]
    try:
        model(images)
    finally:
        for h in handles:
            h.remove()
    return calls


@torch.no_grad()
def collect_attention_maps(model, images, *, types=None, method="attention_map"):
    """Run ``model`` on ``images`` once (eval mode, restored after) and return one (b, h, n, n) map per mixer
    call, in call order (for a ViX model: one per layer, first layer first). ``method``: the mixer method that
    makes each map (``softmax_map``: shaped attention's learned part alone, without alpha I; a mixer without
    that method gives its ``attention_map``).

    Mixers are found by type, not by where they sit in the model: every submodule that is an instance of
    ``types`` (a class or a tuple of classes; default: every class that defines ``attention_map``,
    ``has_attention_map``, outermost ones only) gets a forward pre-hook that records its input; each map is then
    ``mixer.attention_map(input)`` on the recorded input. A mixer without a map (FNet, the token MLP) raises
    ``NotImplementedError``; a model with no mixer gives ``ValueError``.
    """
    if types is None:
        mixers = [m for _, m in outermost_mappers(model)]
        wanted = "type with an attention_map"
    else:
        types = (types,) if isinstance(types, type) else tuple(types)
        mixers = [m for m in model.modules() if isinstance(m, types)]
        wanted = f"type {', '.join(t.__name__ for t in types)}"
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no module of {wanted}")
    with evaluating(model):  # the maps too are made in eval mode (LeViT's and CvT's BatchNorms)
        calls = recorded_inputs(model, images, mixers)
        return [getattr(mixer, method, mixer.attention_map)(x) for mixer, x in calls]


# ---------------------------------------------------------------- what each mechanism's map is

def mechanism(module):
    """(class name, ``map_description``) of the module whose map ``module``'s is (``declaring``); ``module``'s class
    name and None where none declares one."""
    declared = declaring(module)
    return (type(module).__name__, None) if declared is None else (type(declared).__name__, declared.map_description)


def map_description(model):
    """One line saying what ``model``'s attention maps are: the mechanism classes it has (each class's own
    ``map_description``, and how many layers have it), e.g. "vit: 4 layers of SoftmaxAttention (exact softmax ...)". A
    model without a map (FNet, MLP-Mixer, ResNet, ConvMixer, WaveMix: no module with a map that can be made) gives a
    sentence starting "no attention map" that says why: its mixers' own line (Fourier mixing, token MLP), or, with no
    mixer, what the model mixes by (its class's ``mixes_by``, else convolutions). Never raises."""
    name = type(model).__name__
    try:
        name = (getattr(model, "default_cfg", None) or {}).get("name", name)
        counts, sentences = {}, {}
        for _, module in mappers(model):
            mech, sentence = mechanism(module)
            counts[mech] = counts.get(mech, 0) + 1
            sentences.setdefault(mech, sentence or "its own attention_map")
        if counts:
            return f"{name}: " + "; ".join(
                f"{c} layer{'s' * (c > 1)} of {k} ({sentences[k]})" for k, c in counts.items())
        missing = [mechanism(m)[1] for _, m in outermost_mappers(model)]
        if missing:
            return f"{missing[0]} ({name})"
        how = getattr(model, "mixes_by", "convolutions only")
        return f"{NO_MAP}: {name} has no attention layer (it mixes by {how})"
    except Exception as e:  # a description must never stop a page
        return f"{name}: its attention maps could not be described ({type(e).__name__}: {e})"


@torch.no_grad()
def attention_maps(model, x, *, method="attention_map"):
    """{layer name: (B, heads, N, N)}: every map of ``model`` on the input ``x`` (eval mode, restored after), in
    call order, each ``mixer.attention_map(input)`` (the materialised map, never a fused kernel) of the input the
    mixer received, as ``collect_attention_maps`` records it. Keys are the mixers' names in ``named_modules()``
    (the outermost module with a map: a ``TokenMixer2d`` rather than its inner mixer), with ``#2``, ``#3`` for
    repeated calls of one module. What each map is: ``map_description(model)``. A model without a map raises
    ``ValueError`` whose message is ``map_description``'s sentence. ``method``: the mixer method that makes each map, as
    in ``collect_attention_maps`` (``softmax_map``: shaped attention's learned part alone)."""
    named = mappers(model)
    if not named:
        raise ValueError(map_description(model))
    names = {id(m): n for n, m in named}
    with evaluating(model):
        calls = recorded_inputs(model, x, [m for _, m in named])
        out, seen = {}, {}
        for mixer, inp in calls:
            n = names[id(mixer)]
            seen[n] = seen.get(n, 0) + 1
            out[n if seen[n] == 1 else f"{n}#{seen[n]}"] = getattr(mixer, method, mixer.attention_map)(inp)
    return out


def has_skip(model):
    """Whether ``model``'s blocks add a skip connection around the attention: False where a block says it has
    none (a ``skips`` attribute that is False: the `shaped` paper's simplified ViT, whose alpha I plays the
    residual's role, and ``vit_small_vanilla(skips=False)``), True otherwise (every other family's blocks add
    x + mixer(x)). Rollout adds the residual identity only where this is True (``rollout(..., residual=)``)."""
    return not any(getattr(m, "skips", None) is False for m in model.modules())
