"""CvT (Wu et al., Convolutional vision Transformer) and its X-formers CvP, CvL, CvN, as the `vix` paper
configures them (section 5.3, Tables 3 and 4).

The skeleton is vit-pytorch's cvt.py of 2021, which the authors adapted (Models/CvN.ipynb, Models/CvP.ipynb):
three stages, each a strided convolutional embedding (3x3, padding 1) + channel LayerNorm, then transformer
layers on the (b, c, h, w) feature map: x + PreNorm(attention)(x), x + PreNorm(1x1-conv MLP)(x), with a
channel LayerNorm before each; then average pooling and a Linear head (no class token, no position
embedding). The paper's configuration (the authors' notebooks): dim 128 in every stage, depths 1/1/2
(4 layers, as in ViX), 4 heads, MLP 128 -> 256 -> 128 (mlp_mult 2), embedding kernels 3, strides s/1/1,
kv projection stride 1 (no key/value downsampling).

- CvT: vit-pytorch's own attention (``ConvAttention``): queries, keys and values by depthwise-separable
  convolutions (3x3 depthwise, BatchNorm, bias-free 1x1), softmax over all tokens, 1x1-conv output. Its
  heads are 64 wide: vit-pytorch's ``Transformer`` never passes ``dim_head`` on, so its default 64 holds
  (there is no CvT notebook; 64 is what reproduces Table 3's 1,099,786, 32 would give 837,642).
- CvP, CvL, CvN: the attention replaced by ViX's Performer, Linformer and Nystrom mixers with their ViX
  settings (``vix.paper_mixer``), heads of 32 (the authors' ``Transformer`` sets ``dim_head = 32``), on the
  flattened tokens of the feature map (``TokenMixer2d``: flatten, mixer, unflatten). CvL has no notebook: it
  is the ViL mixer at each stage's sequence length.

Geometry: the token grid is 32 x 32 in every stage for both datasets, as the authors' attention hard-codes
(``Rearrange(..., h=32, w=32)``): the first embedding has stride image_size / 32, 2 on Tiny ImageNet (their
notebooks: ``s1_emb_stride = 2`` on 64 px) and 1 on CIFAR-10 (Table 3's Size, 100.17 MB, is the Tiny ImageNet
100.30 MB less the larger input and the 200-class head, which fixes the same 32 x 32 maps). The stride adds
no parameters, so Table 4 = Table 3 + 24,510 (the 200-class head).

Counting (torchsummary convention): the channel LayerNorms' ``g`` and ``b`` are plain parameters and are not
counted; BatchNorm statistics are buffers. The module structure follows the authors' code so that torchsummary's
Size (MB) is theirs: ``SepConv2d``, ``FeedForward2d`` and the stage ``Transformer2d`` are hooked modules
around their layers, ``TokenMixer2d`` is an ``nn.Sequential`` (not hooked, as the authors' attention wrapper
is replaced by the mixer module itself), and ``ConvAttention`` forms its ((b h), n, n) attention through an
``nn.Softmax`` on the materialising path (``fused=False``), whose output torchsummary counts once per head
batch (it replaces the leading b*h by -1). Where the code and the paper differ: the paper describes CvT
stages that down-sample; the authors' configuration keeps every stage at 32 x 32. The authors' channel
LayerNorm divides by (std + eps), as vit-pytorch did before 2022; so does ours.

Overrides given to ``create_model`` work as for ViX: ``mixer_options`` is merged into the model's own mixer
options, every other key replaces an argument (``depth=(1, 1, 1)``, ``mixer="shaped"``). ``depth`` is the layers
of each stage, a tuple, or one int for every stage (so the smoke profile's ``depth=1`` gives (1, 1, 1)).
"""
import torch
import torch.nn.functional as F
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.blocks import mlp, residual_stack
from ..layers.stems import GRID_SIDE
from .registry import mixer_overrides, register_model
from .vix import PER_HEAD_BEFORE, paper_mixer

CONV_ATTENTION = "cvt"  # the mixer name naming CvT's own convolutional-projection softmax attention


class ChannelNorm(nn.Module):
    """LayerNorm over the channels of a (b, c, h, w) map; ``g`` and ``b`` are plain parameters (uncounted)."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))
        self.b = nn.Parameter(torch.zeros(1, dim, 1, 1))

    def forward(self, x):
        std = x.var(dim=1, unbiased=False, keepdim=True).sqrt()
        return (x - x.mean(dim=1, keepdim=True)) / (std + self.eps) * self.g + self.b


class PreNorm2d(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = ChannelNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x))


class FeedForward2d(nn.Module):
    def __init__(self, dim, mult=2, dropout=0.0):
        super().__init__()
        self.net = mlp(dim, dim * mult, dropout=dropout, dense=lambda i, o: nn.Conv2d(i, o, 1))

    def forward(self, x):
        return self.net(x)


class SepConv2d(nn.Module):
    """Depthwise k x k conv, BatchNorm, pointwise 1 x 1 conv."""

    def __init__(self, dim_in, dim_out, kernel_size, *, stride=1, bias=False):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(dim_in, dim_in, kernel_size, padding=kernel_size // 2, groups=dim_in, stride=stride, bias=bias),
            nn.BatchNorm2d(dim_in), nn.Conv2d(dim_in, dim_out, 1, bias=bias))

    def forward(self, x):
        return self.net(x)


class ConvAttention(nn.Module):
    """CvT's softmax attention on a (b, c, h, w) map: q, k, v by ``SepConv2d`` (k and v with stride
    ``kv_proj_stride``), output by a 1x1 conv. ``fused=True`` calls ``scaled_dot_product_attention``;
    ``fused=False`` forms the ((b h), n, n) matrix through ``self.attend`` (``nn.Softmax``) as the authors'
    code does."""

    # what the synthesis page groups it under (``report.claims.synthesis``)
    mechanism = layers.SoftmaxAttention.mechanism
    map_description = ("CvT's exact softmax(QK^T/sqrt(d)) over the feature map's tokens, q, k and v by depthwise-"
                "separable convs; rows sum to 1")

    def __init__(self, dim, *, heads=4, dim_head=64, proj_kernel=3, kv_proj_stride=1, dropout=0.0, fused=True):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.fused = heads, dim_head**-0.5, fused
        self.attend = nn.Softmax(dim=-1)
        self.to_q = SepConv2d(dim, inner, proj_kernel)
        self.to_kv = SepConv2d(dim, inner * 2, proj_kernel, stride=kv_proj_stride)
        self.to_out = nn.Sequential(nn.Conv2d(inner, dim, 1), nn.Dropout(dropout))

    def qkv(self, x):
        q, k, v = self.to_q(x), *self.to_kv(x).chunk(2, dim=1)
        return [rearrange(t, "b (h d) x y -> (b h) (x y) d", h=self.heads) for t in (q, k, v)]

    def attention_map(self, x):
        """(b, h, n, n): softmax(Q K^T / sqrt(d)) over the (possibly strided) key tokens."""
        q, k, _ = self.qkv(x)
        a = (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1)
        return rearrange(a, "(b h) i j -> b h i j", h=self.heads)

    exact_softmax_map = attention_map  # the map is the exact softmax

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            out = self.attend(q @ k.transpose(-1, -2) * self.scale) @ v
        return self.to_out(rearrange(out, "(b h) (x y) d -> b (h d) x y", h=self.heads, y=x.shape[-1]))


class TokenMixer2d(nn.Sequential):
    """A token mixer of ``layers`` on a (b, c, h, w) map: flatten to (b, h*w, c), mix, unflatten. Its map, and what
    the map is (``map_description``), are its mixer's."""

    def __init__(self, mixer, side):
        super().__init__(Rearrange("b c h w -> b (h w) c"), mixer, Rearrange("b (h w) c -> b c h w", h=side))

    def attention_map(self, x):
        return self[1].attention_map(self[0](x))


class Transformer2d(nn.Module):
    def __init__(self, dim, mixers, *, mlp_mult=2, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleList([PreNorm2d(dim, mixer), PreNorm2d(dim, FeedForward2d(dim, mlp_mult, dropout=dropout))])
            for mixer in mixers)

    def forward(self, x):
        return residual_stack(self.layers, x)


def _conv_out(side, stride):
    return (side - 1) // stride + 1  # a k x k conv with padding k // 2, odd k


class CvX(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer=CONV_ATTENTION, mixer_options=None, channels=3, dim=128,
                 depth=(1, 1, 2), emb_kernel=3, emb_strides=(1, 1, 1), heads=4, dim_head=32, mlp_mult=2,
                 proj_kernel=3, kv_proj_stride=1, dropout=0.0):
        super().__init__()
        depths = (depth,) * len(emb_strides) if isinstance(depth, int) else tuple(depth)
        if len(depths) != len(emb_strides):
            raise ValueError(f"depths {depths} and emb_strides {emb_strides} must name the same stages")
        self.mixer_name, self.mixer_options = mixer, dict(mixer_options or {})
        total, done, side, stages, dim_in = sum(depths), 0, image_size, [], channels
        for stage_depth, stride in zip(depths, emb_strides):
            side = _conv_out(side, stride)
            mixers = []
            for i in range(done + 1, done + stage_depth + 1):
                if mixer == CONV_ATTENTION:
                    mixers.append(ConvAttention(dim, heads=heads, dim_head=dim_head, proj_kernel=proj_kernel,
                                                kv_proj_stride=kv_proj_stride, dropout=dropout, **self.mixer_options))
                else:
                    mixers.append(TokenMixer2d(layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head,
                                                            seq_len=side * side, layer_index=i, depth=total,
                                                            **self.mixer_options), side))
            done += stage_depth
            stages.append(nn.Sequential(nn.Conv2d(dim_in, dim, emb_kernel, stride=stride, padding=emb_kernel // 2),
                                        ChannelNorm(dim),
                                        Transformer2d(dim, mixers, mlp_mult=mlp_mult, dropout=dropout)))
            dim_in = dim
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), Rearrange("b c 1 1 -> b c"), nn.Linear(dim, num_classes))

    def forward(self, img):
        return self.head(self.stages(img))


def cvx_model(image_size, num_classes, channels, config, mixer, mixer_options=None, *, dim_head=32):
    """A ``CvX`` with token mixer ``mixer`` (options ``mixer_options``), the first embedding's stride giving a
    32 x 32 grid for ``image_size``, and the ``create_model`` overrides ``config`` applied (module doc)."""
    if image_size % GRID_SIDE:
        raise ValueError(f"image_size {image_size} must be a multiple of {GRID_SIDE} (the 32 x 32 token grid)")
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    arguments = {"emb_strides": (image_size // GRID_SIDE, 1, 1), "dim_head": dim_head, **config}
    return CvX(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **arguments)


@register_model(paper="vix", label="CvT")
def cvt(*, image_size, num_classes, channels, **config):
    """CvT: softmax attention with depthwise-separable conv projections, heads of 64 (vit-pytorch's default)."""
    return cvx_model(image_size, num_classes, channels, config, CONV_ATTENTION, dim_head=64)


@register_model(paper="vix", label="CvP", changed_defaults=PER_HEAD_BEFORE)
def cvp(*, image_size, num_classes, channels, key_max="global", **config):
    """CvT with ViP's Performer attention on each stage's tokens (``key_max``: the keys' stabiliser, as ``vip``)."""
    return cvx_model(image_size, num_classes, channels, config, *paper_mixer("vip", key_max=key_max))


@register_model(paper="vix", label="CvL")
def cvl(*, image_size, num_classes, channels, **config):
    """CvT with ViL's Linformer attention at each stage's sequence length (no authors' notebook)."""
    return cvx_model(image_size, num_classes, channels, config, *paper_mixer("vil"))


@register_model(paper="vix", label="CvN")
def cvn(*, image_size, num_classes, channels, **config):
    """CvT with ViN's Nystrom attention on each stage's tokens."""
    return cvx_model(image_size, num_classes, channels, config, *paper_mixer("vin"))


@register_model(paper="cxv", label="CvT-5/4")
def cvt_5_4(*, image_size, num_classes, channels, **config):
    """CvT at the `cxv` paper's size: two layers in the first and second stages and one in the third (depths 2/2/1),
    dim 128 in every stage, 3x3 embedding convs without down-sampling, 4 heads of 64 (vit-pytorch's default, as
    ``cvt``), MLP 256 (2 x dim), dropout 0.5 (attention output and feed-forward): 1,299,722 parameters, 1.32 G paper
    MACs (its Table 1: 1.3 M, 1.32 G). With heads of 32 it would count 972,042 and 0.99 G."""
    return cvx_model(image_size, num_classes, channels, {"depth": (2, 2, 1), "dropout": 0.5, **config},
                     CONV_ATTENTION, dim_head=64)
