"""Stems: an image -> a token sequence (or a feature map) before the transformer layers.

- ``patch_embedding``: patches (1x1 pixels for CIFAR in the ViX papers) through one Linear, or (``conv=True``)
  through a Conv2d of kernel and stride ``patch_size`` (ViT-B/16's form; the same parameters, laid out as a conv).
- ``conv_stem``: ViX's hybrid stem, three 3x3 convs channels->32->64->dim, padding 1, with no activation
  or norm between them (flattened to tokens, or kept as a feature map for Hybrid ViLT).
``embedding`` picks one of the two, as the ViX models do; ``stem_geometry`` gives the patch size or stem
stride for an image size.
"""
from einops.layers.torch import Rearrange
from torch import nn

GRID_SIDE = 32  # the ViX papers' token grid: 32 x 32 (every CIFAR pixel a token)


def patch_embedding(channels, dim, *, patch_size=1, conv=False):
    if conv:
        return nn.Sequential(nn.Conv2d(channels, dim, patch_size, stride=patch_size), Rearrange("b c h w -> b (h w) c"))
    return nn.Sequential(Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
                         nn.Linear(channels * patch_size * patch_size, dim))


def conv_stem(channels, dim, *, stride=1, tokens=True):
    """The three convs, then the map flattened to tokens (``tokens=False``: the (b, dim, h, w) map itself)."""
    convs = [nn.Conv2d(channels, 32, 3, stride=stride, padding=1), nn.Conv2d(32, 64, 3, padding=1),
             nn.Conv2d(64, dim, 3, padding=1)]
    return nn.Sequential(*convs, *([Rearrange("b c h w -> b (h w) c")] if tokens else []))


def embedding(channels, dim, *, hybrid=False, patch_size=1, stem_stride=1, patch_conv=False):
    """Image -> token sequence: ``conv_stem`` when ``hybrid``, else ``patch_embedding``."""
    if hybrid:
        return conv_stem(channels, dim, stride=stem_stride)
    return patch_embedding(channels, dim, patch_size=patch_size, conv=patch_conv)


def stem_geometry(image_size, *, hybrid):
    """The stem argument that gives a 32 x 32 token grid, as the ViX papers do: ``{"patch_size": s}`` for the
    patch embedding, ``{"stem_stride": s}`` (the first conv's stride) for the hybrid stem, s = image_size / 32:
    1 on CIFAR (32 px), 2 on Tiny ImageNet (64 px)."""
    factor = image_size // GRID_SIDE
    return {"stem_stride": factor} if hybrid else {"patch_size": factor}
