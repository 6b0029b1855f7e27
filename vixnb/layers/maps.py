"""Attention maps across layers: collect them from a model, and roll them out (Abnar & Zuidema, 2020).

``collect_attention_maps(model, images)`` runs the model once and returns one (b, h, n, n) map per layer
from each mixer's own ``attention_map`` (for Linformer its token-space operator, for the approximate
mechanisms their documented equivalents; see each mixer). ``attention_rollout(maps)`` fuses the heads of
each layer, optionally discards the weakest links, adds the residual identity, renormalises the rows and
multiplies the layers: rollout = A_L ... A_2 A_1, row i giving how much each input token reaches output
token i. ``class_token_map`` turns the class-token row into an image-shaped map.
"""
import math

import torch

from .linformer import LinformerAttention

HEAD_FUSIONS = ("mean", "max", "min")


def _fuse(a, head_fusion):
    if a.dim() == 3:  # already one map per sample
        return a
    if head_fusion == "mean":
        return a.mean(dim=1)
    if head_fusion == "max":
        return a.amax(dim=1)
    if head_fusion == "min":
        return a.amin(dim=1)
    raise ValueError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")


def _discard(a, ratio):
    """Zero the ``ratio`` fraction of smallest entries of each (n, n) map; the diagonal is always kept."""
    b, n, _ = a.shape
    count = int(n * n * ratio)
    if count <= 0:
        return a
    ranked = a.masked_fill(torch.eye(n, dtype=torch.bool, device=a.device), float("inf")).flatten(1)
    idx = ranked.topk(min(count, n * n - n), dim=-1, largest=False).indices
    return a.flatten(1).scatter(-1, idx, 0.0).view(b, n, n)


def attention_rollout(maps, *, head_fusion="mean", discard_ratio=0.0, add_residual=True):
    """Attention rollout over per-layer maps (first layer first), each (b, h, n, n) or (b, n, n).

    Per layer: fuse heads (``mean``/``max``/``min``), zero the ``discard_ratio`` fraction of smallest
    entries (diagonal kept), add the identity for the residual stream (``add_residual``), divide each row
    by its sum. Returns (b, n, n) = A_L ... A_1. With row-stochastic maps and the residual, each layer's
    factor is (A + I) / 2 as in Abnar & Zuidema.
    """
    maps = list(maps)
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")
    if not maps:
        raise ValueError("attention_rollout needs at least one layer's map")
    if not 0.0 <= discard_ratio < 1.0:
        raise ValueError(f"discard_ratio must be in [0, 1), got {discard_ratio}")
    rollout = None
    for m in maps:
        a = _discard(_fuse(m, head_fusion), discard_ratio)
        if add_residual:
            a = a + torch.eye(a.shape[-1], device=a.device, dtype=a.dtype)
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
        rollout = a if rollout is None else a @ rollout
    return rollout


def mixer_attention_map(mixer, x):
    """The (b, h, n, n) map of ``mixer`` on normalised tokens ``x`` (Linformer: its token-space operator)."""
    if isinstance(mixer, LinformerAttention):
        return mixer.attention_map(x, space="tokens")
    if not hasattr(mixer, "attention_map"):
        raise NotImplementedError(f"{type(mixer).__name__} has no attention_map")
    return mixer.attention_map(x)


def _layers(model):
    for holder in (getattr(model, "transformer", None), model):
        layers = getattr(holder, "layers", None)
        if layers is not None:
            return layers
    raise ValueError(f"{type(model).__name__} has no .transformer.layers or .layers to collect maps from")


@torch.no_grad()
def collect_attention_maps(model, images, *, layers=None):
    """Run ``model`` on ``images`` once (eval mode) and return a list with one (b, h, n, n) map per layer.

    Expects the ViX layout, ``layers[i][0]`` a ``PreNorm`` wrapping the mixer as ``.fn``: a forward
    pre-hook captures the PreNorm's input, and the map is ``mixer.attention_map(prenorm.norm(x))``.
    ``layers`` overrides where the layer list is found (default ``model.transformer.layers``).
    """
    layers = _layers(model) if layers is None else layers
    captured, handles = {}, []
    for i, layer in enumerate(layers):
        def hook(_module, args, i=i):
            captured[i] = args[0]
        handles.append(layer[0].register_forward_pre_hook(hook))
    was_training = model.training
    model.eval()
    try:
        model(images)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    maps = []
    for i, layer in enumerate(layers):
        wrapper = layer[0]
        mixer, norm = getattr(wrapper, "fn", wrapper), getattr(wrapper, "norm", None)
        x = captured[i]
        maps.append(mixer_attention_map(mixer, norm(x) if norm is not None else x))
    return maps


def class_token_map(rollout, *, cls_index=0):
    """(b, side, side): the class token's row of a (b, n, n) rollout (or a (b, h, n, n) map, heads
    averaged) without the class token's own column, reshaped to the square patch grid."""
    if rollout.dim() == 4:
        rollout = rollout.mean(dim=1)
    row = rollout[:, cls_index]
    row = torch.cat((row[:, :cls_index], row[:, cls_index + 1:]), dim=-1)
    side = math.isqrt(row.shape[-1])
    if side * side != row.shape[-1]:
        raise ValueError(f"{row.shape[-1]} patch tokens do not form a square grid")
    return row.view(-1, side, side)
