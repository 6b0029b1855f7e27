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

Ablations (section 5.1, on CNV-5/4 and CIFAR-10; the paper file's tables ``table2`` and ``ablations`` give each
as the ``create_model`` settings of a run). The
defaults build the models above exactly; an ablation adds or removes modules under new names and renames
none (the sequences keep the default children's names "0", "1", "2"), so a checkpoint's other keys stay.

- ``embed_layers`` (2): stem convs; each doubles the channels up to dim / 2: 1 = 3->64, 2 = 3->32->64,
  3 = 3->16->32->64 (our choice: the code has only two, and this keeps the stem's output and the layers
  as they are). Table 2: 89.45 / 89.93 / 89.56, best at 2.
- ``embed_padding`` (True): False drops the stem's padding, the map shrinks (32 -> 30 -> 28) and the
  attention runs on the smaller grid. Paper: ~17% less GPU memory, under 2 points less accuracy.
- ``embed_gelu`` (False): a GELU between consecutive stem convs. Paper: about 2 points lower.
- ``embed_pool`` (False): CCT's tokenizer pooling, a 3x3 max-pool (stride 1, padding 1) after every stem
  conv (after its GELU if any). Paper: a similar decrease.
- ``conv_gelu`` (False): a GELU after each layer's conv sub-layer. Paper: lower accuracy.
- ``conv_every`` (1): the conv sub-layer only in layers 1, 1 + k, 1 + 2k, ... (the first layer keeps its
  64 -> 128 conv). Paper, k = 2: worse; "placement of a convolutional sub-layer is essential".
- ``extra_residual`` (None): "conv" adds x + conv(x), "conv_norm" x + norm(conv(x)) (the conv's GELU
  included), in every layer with a conv but the first (whose conv changes the channels). No parameters.
  Paper: no gain (shallow networks).
- ``pos_embedding`` (None): "learned" adds one learnable 1-D embedding (ViT's: randn, one row per token)
  to the flattened stem output, once; the authors' CNV.py keeps a commented-out per-attention one instead.
  "rope": RoPE on q and k in every attention (``layers.Rotary`` over the row-major token index, one table
  shared by the layers); CLTV's image attention has no token mixer to pass it to (ValueError). Paper:
  neither helps.
- ``norm`` ("layer"): "batch" puts BatchNorm2d in place of each layer's channel LayerNorm. Paper: over 4
  points lower.
- ``norm_every`` (1): the norm sub-layer only in layers 1, 1 + k, ... Paper, k = 2: the loss does not
  converge.
- ``prenorm`` (False): a channel LayerNorm before the attention and before the feed-forward in each layer,
  on top of the layer's norm. Paper: "degrade[s] the performance considerably".
"""
from collections import OrderedDict

import torch
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.blocks import residual_stack
from ..layers.stems import GRID_SIDE
from .cvt import ChannelNorm, FeedForward2d, TokenMixer2d
from .registry import mixer_overrides, register_model
from .vix import PER_HEAD_BEFORE, paper_mixer

IMAGE_LINEAR = "image_linear"  # the mixer name naming CLTV's ``ImageLinearAttention`` (conv projections)


def _check(name, value, valid):
    """``value`` is one of ``valid`` (and of its type: 1 is not True), or with ``valid=int`` an int >= 1."""
    if valid is int:
        ok = type(value) is int and value >= 1
    else:
        ok = any(type(value) is type(v) and value == v for v in valid)
    if not ok:
        expected = "an int >= 1" if valid is int else "one of " + ", ".join(map(repr, valid))
        raise ValueError(f"{name} must be {expected}, got {value!r}")


class Transformer2d(nn.Module):
    """The authors' one-layer ``Transformer`` on a (b, c, h, w) map: x + mixer(x), x + ff(x), no norms;
    ``prenorm``: x + mixer(norm(x)), x + ff(norm(x)) (the ablation)."""

    def __init__(self, dim, mixer, *, mlp_mult=2, dropout=0.0, prenorm=False):
        super().__init__()
        self.layers = nn.ModuleList([nn.ModuleList([mixer, FeedForward2d(dim, mlp_mult, dropout=dropout)])])
        self.prenorm = nn.ModuleList([ChannelNorm(dim), ChannelNorm(dim)]) if prenorm else None

    def forward(self, x):
        if self.prenorm is None:
            return residual_stack(self.layers, x)
        (mix, ff), (mix_norm, ff_norm) = self.layers[0], self.prenorm
        x = mix(mix_norm(x)) + x
        return ff(ff_norm(x)) + x


class CXV(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, channels=3, dim=128, depth=5,
                 heads=4, dim_head=32, mlp_mult=2, kernel=3, dropout=0.5, embed_layers=2, embed_padding=True,
                 embed_gelu=False, embed_pool=False, conv_gelu=False, conv_every=1, extra_residual=None,
                 pos_embedding=None, norm="layer", norm_every=1, prenorm=False):
        super().__init__()
        if image_size % GRID_SIDE:
            raise ValueError(f"image_size {image_size} must be a multiple of {GRID_SIDE} (the 32 x 32 map)")
        flags, every = (False, True), int
        for name, value, valid in [("embed_layers", embed_layers, every), ("embed_padding", embed_padding, flags),
                                   ("embed_gelu", embed_gelu, flags), ("embed_pool", embed_pool, flags),
                                   ("conv_gelu", conv_gelu, flags), ("conv_every", conv_every, every),
                                   ("extra_residual", extra_residual, (None, "conv", "conv_norm")),
                                   ("pos_embedding", pos_embedding, (None, "learned", "rope")),
                                   ("norm", norm, ("layer", "batch")), ("norm_every", norm_every, every),
                                   ("prenorm", prenorm, flags)]:
            _check(name, value, valid)
        if pos_embedding == "rope" and mixer == IMAGE_LINEAR:
            raise ValueError("pos_embedding='rope' needs a token mixer; CLTV's image linear attention has none: "
                             "use pos_embedding='learned' or None")
        self.mixer_name, self.mixer_options = mixer, dict(mixer_options or {})

        # stem: each conv doubles the channels up to dim / 2; the first has the stride giving 32 x 32 (padded)
        stem, side, pad, dim_in, embed = dim // 2, image_size, int(embed_padding), channels, OrderedDict()
        for j in range(embed_layers):
            stride, width = image_size // GRID_SIDE if j == 0 else 1, stem >> (embed_layers - 1 - j)
            embed[str(j)] = nn.Conv2d(dim_in, width, 3, stride=stride, padding=pad)
            side, dim_in = (side + 2 * pad - 3) // stride + 1, width
            if embed_gelu and j < embed_layers - 1:
                embed[f"gelu{j}"] = nn.GELU()
            if embed_pool:
                embed[f"pool{j}"] = nn.MaxPool2d(3, stride=1, padding=1)
        self.stem = nn.Sequential(embed)
        self.pos_embedding = nn.Parameter(torch.randn(1, side * side, stem)) if pos_embedding == "learned" else None

        options = dict(self.mixer_options)
        if pos_embedding == "rope":
            options["rope"] = layers.Rotary(dim_head, side * side)
        blocks, self.residual_spans = [], []
        for i in range(1, depth + 1):
            if mixer == IMAGE_LINEAR:
                attn = layers.ImageLinearAttention(dim, heads=heads, dim_head=dim_head, **options)
            else:
                attn = TokenMixer2d(layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=side * side,
                                                 layer_index=i, depth=depth, **options), side)
            block = OrderedDict()  # "0" conv, "1" norm, "2" transformer, as nn.Sequential would name them
            if (i - 1) % conv_every == 0:
                block["0"] = nn.Conv2d(dim_in, dim, kernel, padding=kernel // 2)
                if conv_gelu:
                    block["gelu"] = nn.GELU()
            if (i - 1) % norm_every == 0:
                block["1"] = ChannelNorm(dim) if norm == "layer" else nn.BatchNorm2d(dim)
            # the extra residual spans the leading sub-layers: conv (+ GELU) (+ norm for "conv_norm")
            spanned = {"conv": ("0", "gelu"), "conv_norm": ("0", "gelu", "1")}.get(extra_residual, ())
            self.residual_spans.append(sum(k in spanned for k in block) if i > 1 and "0" in block else 0)
            block["2"] = Transformer2d(dim, attn, mlp_mult=mlp_mult, dropout=dropout, prenorm=prenorm)
            blocks.append(nn.Sequential(block))
            dim_in = dim
        self.layers = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), Rearrange("b c 1 1 -> b c"), nn.Linear(dim, num_classes))

    def forward(self, img):
        x = self.stem(img)
        if self.pos_embedding is not None:
            x = x + rearrange(self.pos_embedding, "1 (h w) c -> 1 c h w", w=x.shape[-1])
        for layer, span in zip(self.layers, self.residual_spans):
            x = layer[span:](layer[:span](x) + x) if span else layer(x)
        return self.head(x)


def cxv_model(image_size, num_classes, channels, config, mixer, mixer_options=None):
    """A ``CXV`` with ``mixer`` (options ``mixer_options``) and the ``create_model`` overrides ``config``."""
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    return CXV(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **config)


def _with_dropout(name, dropout=0.5, **settings):
    mixer, options = paper_mixer(name, **settings)
    return mixer, {**options, "dropout": dropout}


@register_model(paper="cxv", label="CNV-5/4")
def cnv_5_4(*, image_size, num_classes, channels, **config):
    """CXV with ViN's Nystrom attention (64 landmarks), output dropout 0.5."""
    return cxv_model(image_size, num_classes, channels, config, *_with_dropout("vin"))


@register_model(paper="cxv", label="CPV-5/4", changed_defaults=PER_HEAD_BEFORE)
def cpv_5_4(*, image_size, num_classes, channels, key_max="global", **config):
    """CXV with ViP's Performer attention (softmax kernel; ``key_max`` as ``vip``: CPV.py's is the same one max over
    the batch), output dropout 0.5."""
    return cxv_model(image_size, num_classes, channels, config, *_with_dropout("vip", key_max=key_max))


@register_model(paper="cxv", label="CLTV-5/4")
def cltv_5_4(*, image_size, num_classes, channels, **config):
    """CXV with the image linear attention, 1x1 q/k/v/out projections: the paper's ~1.3 M parameters."""
    return cxv_model(image_size, num_classes, channels, config, IMAGE_LINEAR, {"kernel_size": 1})


@register_model(paper="cxv", label="CLTV-5/4 (repository)")
def cltv_repo(*, image_size, num_classes, channels, **config):
    """CXV with the image linear attention, 3x3 q/k/v/out projections as the authors' CLTV.py."""
    return cxv_model(image_size, num_classes, channels, config, IMAGE_LINEAR, {"kernel_size": 3})
