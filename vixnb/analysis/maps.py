"""Attention maps across layers: collect them from a model, and roll them out (Abnar & Zuidema, 2020).

``collect_attention_maps(model, images)`` runs the model once and returns one (b, h, n, n) map per mixer
call, from each mixer's own ``attention_map`` (for Linformer its token-space operator, for the approximate
mechanisms their documented equivalents; see each mixer). Like vit-pytorch's ``Recorder`` it finds the
mixers by type, so it needs no knowledge of the model's layout. ``attention_rollout(maps)`` fuses the heads of
each layer, optionally discards the weakest links, adds the residual identity, renormalises the rows and
multiplies the layers: rollout = A_L ... A_2 A_1, row i giving how much each input token reaches output
token i. ``class_token_map`` turns the class-token row into an image-shaped map. ``diagonal_prominence``
measures how much each token attends to itself, per layer and head (the `shaped` paper's Fig. 11 question).
"""
import math

import torch

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


def has_attention_map(module):
    """Whether ``module``'s class defines ``attention_map``: every token mixer of ``layers.MIXERS`` and the families'
    own attentions (LeViT's, CvT's, the `shaped` paper's one-map attention), whatever wraps them."""
    return callable(getattr(type(module), "attention_map", None))


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
    if types is None:  # the outermost modules with a map (a Performer's inner FastAttention has its own)
        named = [(n, m) for n, m in model.named_modules() if m is not model and has_attention_map(m)]
        outer = [n for n, _ in named]
        mixers = [m for n, m in named if not any(n.startswith(o + ".") for o in outer)]
        wanted = "type with an attention_map"
    else:
        types = (types,) if isinstance(types, type) else tuple(types)
        mixers = [m for m in model.modules() if isinstance(m, types)]
        wanted = f"type {', '.join(t.__name__ for t in types)}"
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no module of {wanted}")
    calls = []
    handles = [m.register_forward_pre_hook(lambda module, args: calls.append((module, args[0]))) for m in mixers]
    was_training = model.training
    model.eval()
    try:
        try:
            model(images)
        finally:
            for h in handles:
                h.remove()
        return [getattr(mixer, method, mixer.attention_map)(x) for mixer, x in calls]  # still in eval mode
    finally:
        model.train(was_training)


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


def diagonal_prominence(maps):
    """(layers, heads): for each map of ``maps`` (one (b, h, n, n) map per layer, as ``collect_attention_maps``
    returns), the mean over samples and tokens of the attention a token pays to itself, times n: 1 where
    attention is uniform, n where each token attends only to itself, below 1 where tokens avoid themselves.
    Layers must have the same number of heads (their token counts may differ)."""
    return torch.stack([m.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1)) * m.shape[-1] for m in maps])
