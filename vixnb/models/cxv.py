"""CXV (Jeevan & Sethi, "Convolutional Xformers for Vision"): CNV, CPV and CLTV, the `cxv` paper's Table 1.

The authors' code (pranavphoenix/CXV: CNV.py, CPV.py, CLTV.py, all three built alike): a stem of two 3x3 convs
(3 -> 32 -> 64, padding 1, no activation or norm between them), then ``depth`` = 5 layers, each an
``nn.Sequential`` of a 3x3 conv (padding 1; 64 -> 128 in the first layer, 128 -> 128 after), a channel
LayerNorm, and a one-layer ``Transformer``: x + attention(x), x + 1x1-conv feed-forward(x) (128 -> 256 -> 128,
GELU), with no norm inside it; then average pooling and a Linear head. No class token, no position embedding;
the attention works on the flattened 32 x 32 map (``TokenMixer2d``). 4 heads of 32, dropout 0.5 in the
feed-forward.

- CNV: Nystrom attention with ViN's settings (64 landmarks, 6 pseudo-inverse iterations, the 33-tap residual
  conv of the values), its output dropout the model's dropout (0.5);
- CPV: Performer attention with ViP's settings (softmax kernel, qkv bias, no local heads, features never
  redrawn), its output dropout hard-coded to 0.5 in the authors' ``Transformer`` (here the model's dropout);
- CLTV: the image form of lucidrains' linear attention (``layers.ImageLinearAttention``: softmax feature
  maps, normalised queries), no dropout. The repository's q/k/v/out projections are 3x3 convs, which give
  3,966,154 parameters (``cltv_repo``); with 1x1 projections CLTV counts 1,344,714, the paper's ~1.3 M and
  1.38 GMACs (``cltv_5_4``, the paper-size form that Table 1's CLTV-5/4 is taken to be).

Where the paper differs from the code: it states a Performer with local window 256 and a ReLU kernel (the code
runs neither, as in ViX), and it says nothing of the attention dropout or of the stem's channels. On Tiny
ImageNet the paper adjusts "the stride of the initial convolution layer" to keep 32 x 32 maps: here the first
stem conv has stride image_size / 32 (the authors' attention hard-codes the 32 x 32 grid).

Counting (torchsummary convention): the channel LayerNorms' ``g`` and ``b`` are plain parameters, not counted.
CNV-5/4 1,343,454; CPV-5/4 and CLTV-5/4 (1x1) 1,344,714; CLTV-5/4 (3x3, repository) 3,966,154.

Overrides given to ``create_model`` work as for the other families: ``mixer_options`` is merged into the
model's own (``mixer_options={"kernel_size": 3}`` turns ``cltv_5_4`` into ``cltv_repo``), every other key
replaces an argument (``depth=1`` gives one layer, as the smoke profile asks).
"""
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.blocks import residual_stack
from ..layers.stems import GRID_SIDE
from .cvt import ChannelNorm, FeedForward2d, TokenMixer2d
from .registry import mixer_overrides, register_model
from .vix import paper_mixer

IMAGE_LINEAR = "image_linear"  # the mixer kind naming CLTV's ``ImageLinearAttention`` (conv projections)


class Transformer2d(nn.Module):
    """The authors' one-layer ``Transformer`` on a (b, c, h, w) map: x + mixer(x), x + ff(x), no norms."""

    def __init__(self, dim, mixer, *, mlp_mult=2, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList([nn.ModuleList([mixer, FeedForward2d(dim, mlp_mult, dropout=dropout)])])

    def forward(self, x):
        return residual_stack(self.layers, x)


class CXV(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, channels=3, dim=128, depth=5,
                 heads=4, dim_head=32, mlp_mult=2, kernel=3, dropout=0.5):
        super().__init__()
        if image_size % GRID_SIDE:
            raise ValueError(f"image_size {image_size} must be a multiple of {GRID_SIDE} (the 32 x 32 map)")
        self.mixer_kind, self.mixer_options = mixer, dict(mixer_options or {})
        stem = dim // 2
        self.stem = nn.Sequential(nn.Conv2d(channels, stem // 2, 3, stride=image_size // GRID_SIDE, padding=1),
                                  nn.Conv2d(stem // 2, stem, 3, padding=1))
        blocks, dim_in = [], stem
        for i in range(1, depth + 1):
            if mixer == IMAGE_LINEAR:
                attn = layers.ImageLinearAttention(dim, heads=heads, dim_head=dim_head, **self.mixer_options)
            else:
                attn = TokenMixer2d(layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=GRID_SIDE**2,
                                                 layer_index=i, depth=depth, **self.mixer_options), GRID_SIDE)
            blocks.append(nn.Sequential(nn.Conv2d(dim_in, dim, kernel, padding=kernel // 2), ChannelNorm(dim),
                                        Transformer2d(dim, attn, mlp_mult=mlp_mult, dropout=dropout)))
            dim_in = dim
        self.layers = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), Rearrange("b c 1 1 -> b c"), nn.Linear(dim, num_classes))

    def forward(self, img):
        return self.head(self.layers(self.stem(img)))


def cxv_model(image_size, num_classes, channels, config, mixer, mixer_options=None):
    """A ``CXV`` with ``mixer`` (options ``mixer_options``) and the ``create_model`` overrides ``config``."""
    kind, options, config = mixer_overrides(config, mixer, mixer_options)
    return CXV(image_size=image_size, num_classes=num_classes, channels=channels, mixer=kind, mixer_options=options,
               **config)


def _with_dropout(name, dropout=0.5):
    kind, options = paper_mixer(name)
    return kind, {**options, "dropout": dropout}


@register_model(paper="cxv", label="CNV-5/4")
def cnv_5_4(*, image_size, num_classes, channels, **config):
    """CXV with ViN's Nystrom attention (64 landmarks), output dropout 0.5."""
    return cxv_model(image_size, num_classes, channels, config, *_with_dropout("vin"))


@register_model(paper="cxv", label="CPV-5/4")
def cpv_5_4(*, image_size, num_classes, channels, **config):
    """CXV with ViP's Performer attention (softmax kernel), output dropout 0.5."""
    return cxv_model(image_size, num_classes, channels, config, *_with_dropout("vip"))


@register_model(paper="cxv", label="CLTV-5/4")
def cltv_5_4(*, image_size, num_classes, channels, **config):
    """CXV with the image linear attention, 1x1 q/k/v/out projections: the paper's ~1.3 M parameters."""
    return cxv_model(image_size, num_classes, channels, config, IMAGE_LINEAR, {"kernel_size": 1})


@register_model(paper="cxv", label="CLTV-5/4 (repository)")
def cltv_repo(*, image_size, num_classes, channels, **config):
    """CXV with the image linear attention, 3x3 q/k/v/out projections as the authors' CLTV.py."""
    return cxv_model(image_size, num_classes, channels, config, IMAGE_LINEAR, {"kernel_size": 3})
