"""Attention rollout and the measures of attention maps, on the maps ``maps.attention_maps`` collects.

- Rollout (Abnar & Zuidema, 2020): ``attention_rollout(maps)`` fuses the heads of each layer, optionally discards
  the weakest links, adds the residual identity, renormalises the rows and multiplies the layers:
  A_L ... A_2 A_1, row i giving how much each input token reaches output token i. ``rollout`` reads it out on the
  patch grid (the class token's row, or the mean row), ``class_token_map`` does so for one map.
- Measures, (layers, heads) each: ``row_entropy``, ``diagonal_prominence`` (how much each token attends to
  itself: the `shaped` paper's Fig. 11 question), ``attention_distance`` (pixels); ``centre_query`` shows one
  query patch through the layers. ``class_token_entropy``, per layer: how spread the class token's attention over
  the patches is (the `shaped` paper's Fig. 8 question, localised or chaotic). ``rounded``: a tensor as a stored
  record keeps it.
"""
import math

import numpy as np
import torch
from ..validate import checked

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


@checked("discard_ratio")
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


@checked("cls_index")
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
    returns, or the dict of ``attention_maps``), the mean over samples and tokens of the attention a token pays to
    itself, times n: 1 where attention is uniform, n where each token attends only to itself, below 1 where tokens avoid
    themselves. Layers must have the same number of heads (their token counts may differ)."""
    return torch.stack([m.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1)) * m.shape[-1] for m in layer_maps(maps)])


def rounded(t, digits=5):
    """A tensor as nested lists of floats rounded to ``digits``, for a stored record (one copy off the device)."""
    return np.round(t.detach().to("cpu", torch.float64).numpy(), digits).tolist()


def layer_maps(maps):
    """The per-layer maps of a dict (in its order) or of a sequence."""
    return list(maps.values()) if isinstance(maps, dict) else list(maps)


def _trailing(maps):
    """The trailing run of layers with the last layer's token count (the last stage of CvT / PiT / LeViT)."""
    maps = layer_maps(maps)
    if not maps:
        raise ValueError("no maps given")
    n = maps[-1].shape[-1]
    run = []
    for m in reversed(maps):
        if m.shape[-1] != n:
            break
        run.append(m)
    return run[::-1]


def _side(patches):
    side = math.isqrt(patches)
    if side * side != patches:
        raise ValueError(f"{patches} patch tokens do not form a square grid")
    return side


def class_token_count(n, cls_tokens=None):
    """How many class tokens lead an n-token sequence: ``cls_tokens`` if given, else 0 when n is a square and
    1 when n - 1 is (the only two layouts of the families)."""
    if cls_tokens is not None:
        return cls_tokens
    if math.isqrt(n) ** 2 == n:
        return 0
    if n > 1 and math.isqrt(n - 1) ** 2 == n - 1:
        return 1
    raise ValueError(f"{n} tokens form no square grid, with or without a class token")


def _distribution(a):
    """|a| with each row divided by its sum: a map made a distribution (Linformer's and Nystrom's can be negative)."""
    a = a.abs()
    return a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)


@checked("discard_ratio", "cls_index")
def rollout(maps, *, head_fusion="mean", start="cls", discard_ratio=0.0, residual=True, cls_index=0):
    """(B, side, side): attention rollout (``attention_rollout``: heads fused, the ``discard_ratio`` weakest links
    dropped, the residual identity added when ``residual``, rows renormalised, A_L ... A_1) of ``maps`` (the dict of
    ``attention_maps`` or a list of (B, h, N, N), first layer first) read out on the square patch grid:
    ``start="cls"`` the class token's row (token ``cls_index``) without its own column (ViX, PiT, vit_small);
    ``start="mean"`` the mean of all rows, for models without a class token (CXV, LeViT, CCT, CvT).

    Maps are taken in absolute value first (Linformer's lifted map and Nystrom's product can have negative entries;
    the others are unchanged). Where the token count changes between layers (the stages of PiT), only the trailing
    run of layers that share the last layer's N is rolled out. Pass ``residual=has_skip(model)``: the simplified
    ViT has no skip (its alpha I is already in the map). A grid that is not square raises ``ValueError``."""
    if start not in ("cls", "mean"):
        raise ValueError(f"start must be 'cls' or 'mean', got {start!r}")
    r = attention_rollout([m.abs() for m in _trailing(maps)], head_fusion=head_fusion, discard_ratio=discard_ratio,
                          add_residual=residual)
    if start == "cls":
        return class_token_map(r, cls_index=cls_index)
    side = _side(r.shape[-1])
    return r.mean(dim=1).view(-1, side, side)


def row_entropy(maps):
    """(layers, heads): the entropy of each row of each layer's (B, h, N, N) map divided by log N (1: uniform
    attention, 0: one token), averaged over samples and query rows. Each row is first made a distribution: its
    absolute values divided by their sum (Linformer's lifted map can be negative, Nystrom's a little; for the
    row-stochastic maps this changes nothing). Layers must have the same number of heads."""
    out = []
    for m in layer_maps(maps):
        p = _distribution(m)
        h = -torch.special.xlogy(p, p).sum(dim=-1)
        out.append(h.mean(dim=(0, -1)) / max(math.log(m.shape[-1]), torch.finfo(h.dtype).tiny))
    return torch.stack(out)



def class_token_entropy(class_token):
    """(layers,): the entropy in nats of the class token's attention over the patches, per layer, mean over the
    images. ``class_token`` is (images, layers, patches): the class token's row of each layer's map without its own
    column, heads averaged (what ``records.model_maps`` stores), each row first made a distribution (absolute values
    over their sum, as in ``row_entropy``). 0 where the class token attends to one patch, log n where it spreads
    evenly over n patches: the lower, the more localised its attention."""
    a = torch.as_tensor(class_token, dtype=torch.float64)
    if a.dim() != 3 or not a.numel():
        raise ValueError(f"class_token must be (images, layers, patches), got shape {tuple(a.shape)}")
    p = _distribution(a)
    return -torch.special.xlogy(p, p).sum(dim=-1).mean(dim=0)

def _grid_distances(side, image_size, device=None):
    """(side^2, side^2): Euclidean distances in pixels between the centres of the patches of a side x side grid
    over an image_size-pixel image (row-major), patch centres image_size / side pixels apart."""
    step = image_size / side
    centre = (torch.arange(side, dtype=torch.float64, device=device) + 0.5) * step
    pos = torch.cartesian_prod(centre, centre)
    return torch.cdist(pos, pos)


def attention_distance(maps, *, image_size, cls_tokens=None):
    """(layers, heads): the mean attention distance in input pixels: for each query patch i, sum_j a_ij ||p_i - p_j||
    with p the patch centres on the side x side grid (image_size / side pixels apart), averaged over query patches
    and samples. The ``cls_tokens`` leading class-token rows and columns are dropped (default: 1 when N - 1 is a
    square, 0 when N is) and each row is then made a distribution (absolute values over their sum, as in
    ``row_entropy``). Layers may differ in N (each gets its own grid); they must have the same heads."""
    out = []
    for m in layer_maps(maps):
        c = class_token_count(m.shape[-1], cls_tokens)
        side = _side(m.shape[-1] - c)
        dist = _grid_distances(side, image_size, m.device).to(m.dtype)
        p = _distribution(m[..., c:, c:])
        out.append((p * dist).sum(dim=-1).mean(dim=(0, -1)))
    return torch.stack(out)


def centre_query(maps, *, cls_tokens=None):
    """(B, layers, side, side): for each layer, the row of the image-centre patch (grid cell (side // 2, side // 2))
    of its map, heads averaged, over the patch columns (class-token columns dropped, no renormalisation), as a
    grid: one query pixel followed through the layers. Only the trailing run of layers that share the last layer's
    N is shown (as in ``rollout``). ``cls_tokens`` as in ``attention_distance``."""
    run = _trailing(maps)
    c = class_token_count(run[-1].shape[-1], cls_tokens)
    side = _side(run[-1].shape[-1] - c)
    query = c + (side // 2) * side + side // 2
    rows = [(m.mean(dim=1) if m.dim() == 4 else m)[:, query, c:] for m in run]
    return torch.stack(rows, dim=1).reshape(rows[0].shape[0], len(rows), side, side)
