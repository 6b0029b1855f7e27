"""Sanity checks of attention maps: ``randomisation_check``, the map must change when the weights do (Adebayo et
al., 2018)."""
from copy import deepcopy

import torch
from torch import nn

from .map_measures import class_token_count, layer_maps, rollout
from ..layers.maps import mappers
from .maps import evaluating, attention_maps, has_skip, map_description
from ..validate import checked


def spearman(a, b):
    """(B,): Spearman's rank correlation of the rows of two (B, P) tensors (ranks by sorting; ties broken by
    position)."""
    ra, rb = (t.flatten(1).argsort(dim=-1).argsort(dim=-1).to(torch.float64) for t in (a, b))
    ra, rb = ra - ra.mean(dim=-1, keepdim=True), rb - rb.mean(dim=-1, keepdim=True)
    return (ra * rb).sum(dim=-1) / (ra.norm(dim=-1) * rb.norm(dim=-1)).clamp_min(1e-300)


def _blocks(names):
    """The block holding each of two or more mixers named in ``names`` (dotted module paths): the child of the
    mixers' deepest common ancestor that contains it (one mixer: ``_single_block``)."""
    parts = [n.split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    return [".".join(p[:common + 1]) for p in parts]


def _single_block(model, name):
    """One mixer's block: its nearest ancestor (or itself) whose parent is a ModuleList or Sequential."""
    modules = dict(model.named_modules())
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        parent = modules[".".join(parts[:end - 1])]
        if isinstance(parent, (nn.ModuleList, nn.Sequential)):
            return ".".join(parts[:end])
    return name


@torch.no_grad()
def _reinitialise(module, generator):
    """Re-draw ``module``'s own parameters: normalisation layers reset (weight 1, bias 0, running statistics);
    any other parameter of 2 or more dims, and a bias beside such a weight, uniform in +-1/sqrt(fan_in) (PyTorch's
    default scale for Linear and Conv) from ``generator``; other 0/1-dim parameters (shaped attention's alpha and
    beta, channel-norm gains) keep their values."""
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)):
        module.reset_parameters()
        return
    own = dict(module.named_parameters(recurse=False))
    weight = own.get("weight")
    for key, p in own.items():
        if p.dim() >= 2:
            fan_in = p[0].numel()
        elif key == "bias" and weight is not None and weight.dim() >= 2:
            fan_in = weight[0].numel()
        else:
            continue
        bound = fan_in**-0.5
        p.copy_(torch.empty(p.shape, dtype=torch.float64).uniform_(-bound, bound, generator=generator))


def _model_rollout(model, x, method="attention_map"):
    """The rollout of ``model``'s maps on ``x`` (``method``: ``attention_maps``') read out as the model reads: from the
    class token where the last layers' grid has one, else the mean row; residual as ``has_skip``."""
    maps = attention_maps(model, x, method=method)
    start = "cls" if class_token_count(layer_maps(maps)[-1].shape[-1]) else "mean"
    return rollout(maps, start=start, residual=has_skip(model))


@checked("layers", "seed")
@torch.no_grad()
def randomisation_check(model, x, *, layers=1, seed=0, method="attention_map"):
    """{"rank_correlation", "changed"}: the model-randomisation sanity check of Adebayo et al. (2018): a map must
    change when the weights that make it do. A deep copy of ``model`` gets the parameters of its last ``layers``
    attention blocks and of every module called after them (later norms, pooling, the head) re-drawn
    (``_reinitialise``, from a local generator seeded by ``seed``); the rollout maps (``rollout``, from the class
    token or the mean row, residual as ``has_skip``) of the two models on ``x`` are compared by Spearman's rank
    correlation per image, averaged over images. "changed": correlation < 0.9.

    Models read by the mean row (no class token: CvT, CXV, LeViT, CCT) see a re-drawn last layer only through its
    column sums, which an initialised layer keeps nearly flat: one layer barely moves their rollout (CvT and CNV at
    initialisation: correlation about 0.97), so randomise more layers (or all) for them.

    A block is the child of the mixers' deepest common ancestor that holds a mixer (ViX: a layer's [attention,
    feed-forward] pair; CvT: a stage); with one mixer, its ancestor that sits in a ModuleList or Sequential.

    ``method="softmax_map"`` checks shaped attention's learned part alone (beta softmax(QK^T/sqrt(d)), without alpha I):
    alpha and beta are kept (0-dim), so where alpha I dominates the map (the simplified block at initialisation) the
    whole map's rollout barely moves whatever the weights, and only the learned part can show that it follows them."""
    if layers < 1:
        raise ValueError(f"layers must be at least 1, got {layers}")
    named = mappers(model)
    if not named:
        raise ValueError(map_description(model))
    copy = deepcopy(model)
    modules = dict(copy.named_modules())
    order, mixers = {}, []
    names = {id(m): n for n, m in copy.named_modules()}
    mapped = {n for n, _ in named}

    def first_call(module, _args):
        n = names[id(module)]
        order.setdefault(n, len(order))
        if n in mapped and n not in mixers:
            mixers.append(n)

    handles = [m.register_forward_pre_hook(first_call) for m in copy.modules()]
    try:
        with evaluating(copy):
            copy(x)
    finally:
        for h in handles:
            h.remove()
    blocks = _blocks(mixers) if len(mixers) > 1 else [_single_block(copy, mixers[0])]
    last = list(dict.fromkeys(blocks))[-layers:]
    inside = {n for b in last for n in modules if n == b or n.startswith(b + ".")}
    start = min(order[n] for n in inside if n in order)
    generator = torch.Generator().manual_seed(seed)
    for n, module in copy.named_modules():  # module order: the same draws for the same model every time
        if n and (n in inside or order.get(n, -1) >= start):
            _reinitialise(module, generator)
    before, after = _model_rollout(model, x, method), _model_rollout(copy, x, method)
    rho = float(spearman(before, after).mean())
    return {"rank_correlation": rho, "changed": rho < 0.9}
