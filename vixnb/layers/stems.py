"""Stems: an image -> a token sequence (or a feature map) before the transformer layers.

- ``patch_embedding``: patches (1x1 pixels for CIFAR in the ViX papers) through one Linear.
- ``conv_stem``: ViX's hybrid stem, three 3x3 convs channels->32->64->dim, padding 1, with no activation
  or norm between them.
``embedding`` picks one of the two, as the ViX models do.
"""
from einops.layers.torch import Rearrange
from torch import nn


def patch_embedding(channels, dim, *, patch_size=1):
    return nn.Sequential(Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size),
                         nn.Linear(channels * patch_size * patch_size, dim))


def conv_stem(channels, dim, *, stride=1):
    return nn.Sequential(nn.Conv2d(channels, 32, 3, stride=stride, padding=1), nn.Conv2d(32, 64, 3, padding=1),
                         nn.Conv2d(64, dim, 3, padding=1), Rearrange("b c h w -> b (h w) c"))


def embedding(channels, dim, *, hybrid=False, patch_size=1, stem_stride=1):
    """Image -> token sequence: ``conv_stem`` when ``hybrid``, else ``patch_embedding``."""
    if hybrid:
        return conv_stem(channels, dim, stride=stem_stride)
    return patch_embedding(channels, dim, patch_size=patch_size)
