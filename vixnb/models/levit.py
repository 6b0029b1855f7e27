"""LeViT and the LeViX models (LeViP, LeViL, LeViN) of the `vix` paper, section 5.3, Tables 3 and 4.

The authors' notebooks (Models/LeViN.ipynb, Models/LeViP.ipynb; Tiny ImageNet, August 2021) cut
vit-pytorch's LeViT (May-August 2021) down to one stage: the hybrid 3-conv stem 3->32->64->128 (no
activation, no norm), one stage of 4 layers at 128 channels on the 32 x 32 map, x + attention(x) and x + FF(x)
with no norm at all, a 1x1-conv feed-forward 128->256->128 with GELU (vit-pytorch's Hardswish came later),
global average pooling and a Linear head (no class token, no position embedding, no distillation head). Their
X mixers take the map flattened to 1,024 tokens and give it back as a map (two ``Rearrange`` modules, which
the "Size (MB)" column counts). ``LeViX`` is that model; each registered model is one function below.

LeViT itself has no published script: ``levit`` keeps vit-pytorch's own attention form (``LeViTAttention``:
1x1-conv + BatchNorm projections, GELU before a 1x1-conv + BatchNorm output, dim_key = dim_value = 32 as in
the authors' copy) without its relative position-bias table, which the paper says it removed (section 3);
that reproduces Table 3's 624,970, and ``mixer_options={"pos_bias": True}`` adds the table (641,354).
LeViP, LeViL and LeViN use the ViX mixers with the settings of ViP, ViL and ViN (``vix.paper_mixer``), at
seq_len 1,024, as the notebooks configure LeViP and LeViN; LeViL has no script either, so it takes ViL's
Linformer (k 64, one shared key/value head) in the same skeleton, which gives Table 3's 506,186.

Where the paper and the code differ: Table 3 prints LeViP as 662,410, 40,000 above the architecture's 622,410
(a typo: Table 4's 646,920, which the authors' notebook prints, is 622,410 + 24,510). Table 4 prints LeViL's
Size (MB) as 69.89 where the model gives 69.82 (Table 3's 69.69 + 0.13, the step of the other three rows).
The notebooks (Tiny ImageNet) train with batch size 192 in a loop of 150 epochs (LeViN resumed from a
checkpoint), AdamW as in the ViX scripts.

Tiny ImageNet: as in the authors' notebooks, the stem's first conv has stride 2 (64 px -> the same 32 x 32
map), so the inputs add no parameters and Table 4 = Table 3 + 24,510 (the 200-class head). CIFAR-10: stride 1
(the paper's "stride of one").

``levix_model`` applies the ``create_model`` overrides as ``vix.vix_model`` does: ``mixer_options`` merges
into the model's own mixer options, ``mixer=`` swaps the mixer ("levit" or any ``layers`` mixer, which then
starts from no options of the model's), every other key replaces a ``LeViX`` argument.
"""
import torch
import torch.nn.functional as F
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.blocks import mlp, residual_stack
from ..layers.stems import conv_stem, stem_geometry
from .registry import mixer_overrides, register_model
from .vix import PER_HEAD_BEFORE, paper_mixer


class LeViTAttention(nn.Module):
    """LeViT's softmax attention on a (b, dim, s, s) map, as in vit-pytorch of May-August 2021.

    q, k, v: 1x1 conv (no bias) + BatchNorm each; out: GELU, 1x1 conv, BatchNorm (weight zero-initialised),
    Dropout. ``pos_bias``: LeViT's table of one learned bias per head and |dx|, |dy| offset
    (``nn.Embedding(s * s, heads)``), added to the scaled dot products divided by the scale, as vit-pytorch
    does. ``fused=True`` calls ``scaled_dot_product_attention``; ``False`` forms the (s*s)^2 matrix through
    an ``nn.Softmax`` module, the path that reproduces "Size (MB)"."""

    # what the synthesis page groups it under (``report.claims.synthesis``)
    mechanism = layers.SoftmaxAttention.mechanism
    map_description = ("LeViT's exact softmax(QK^T/sqrt(d) [+ position bias]) over the feature map's positions, q and "
                "k by 1x1 conv + BatchNorm; rows sum to 1")

    def __init__(self, *, dim, fmap_size, heads=4, dim_key=32, dim_value=32, dropout=0.0, pos_bias=False, fused=True):
        super().__init__()
        self.heads, self.scale, self.fused = heads, dim_key**-0.5, fused

        def projection(width):
            return nn.Sequential(nn.Conv2d(dim, width, 1, bias=False), nn.BatchNorm2d(width))

        self.to_q, self.to_k = projection(heads * dim_key), projection(heads * dim_key)
        self.to_v = projection(heads * dim_value)
        self.attend = nn.Softmax(dim=-1)
        self.to_out = nn.Sequential(nn.GELU(), nn.Conv2d(heads * dim_value, dim, 1), nn.BatchNorm2d(dim),
                                    nn.Dropout(dropout))
        nn.init.zeros_(self.to_out[2].weight)
        self.pos_bias = nn.Embedding(fmap_size * fmap_size, heads) if pos_bias else None
        if pos_bias:
            side = torch.arange(fmap_size)
            position = torch.cartesian_prod(side, side)  # (s * s, 2), row-major as the flattened map
            offset = (position[:, None] - position[None]).abs()
            self.register_buffer("pos_indices", offset[..., 0] * fmap_size + offset[..., 1], persistent=False)

    def extra_repr(self):
        return f"heads={self.heads}, pos_bias={self.pos_bias is not None}"

    def qkv(self, x):
        return [rearrange(f(x), "b (h d) x y -> b h (x y) d", h=self.heads) for f in (self.to_q, self.to_k, self.to_v)]

    def bias(self):
        """(h, n, n) added to the scaled dot products, or None without the table."""
        if self.pos_bias is None:
            return None
        return rearrange(self.pos_bias(self.pos_indices), "i j h -> h i j") / self.scale

    def logits(self, q, k):
        dots = q @ k.transpose(-1, -2) * self.scale
        bias = self.bias()
        return dots if bias is None else dots + bias

    def attention_map(self, x):
        """(b, h, n, n) over the s*s positions of the map, rows summing to 1."""
        q, k, _ = self.qkv(x)
        return self.logits(q, k).softmax(dim=-1)

    exact_softmax_map = attention_map  # the map is the exact softmax

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.fused:
            bias = self.bias()
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if bias is None else bias.to(q.dtype),
                                                 scale=self.scale)
        else:
            out = self.attend(self.logits(q, k)) @ v
        return self.to_out(rearrange(out, "b h (x y) d -> b (h d) x y", y=x.shape[-1]))


def on_map(mixer, side):
    """A token mixer applied to a (b, c, side, side) map: flattened to tokens and back by two ``Rearrange``
    modules, as the authors' LeViX attentions do (a ``Sequential``, which torchsummary does not hook)."""
    return nn.Sequential(Rearrange("b c h w -> b (h w) c"), mixer, Rearrange("b (h w) c -> b c h w", h=side))


class ConvFeedForward(nn.Module):
    """1x1 conv dim -> hidden, GELU, Dropout, 1x1 conv hidden -> dim, Dropout, on a map."""

    def __init__(self, dim, hidden_dim, *, dropout=0.0):
        super().__init__()
        self.net = mlp(dim, hidden_dim, dropout=dropout, dense=lambda i, o: nn.Conv2d(i, o, 1))

    def forward(self, x):
        return self.net(x)


class Stage(nn.Module):
    """``depth`` layers of x + mixer(x), x + FF(x) on the map, no norm (the authors' ``Transformer``)."""

    def __init__(self, *, dim, depth, mlp_dim, make_mixer, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(nn.ModuleList([make_mixer(), ConvFeedForward(dim, mlp_dim, dropout=dropout)])
                                    for _ in range(depth))

    def forward(self, x):
        return residual_stack(self.layers, x)


class LeViX(nn.Module):
    """The authors' one-stage LeViT with token mixer ``mixer``: "levit" (``LeViTAttention``) or a
    ``layers.build`` mixer run on the flattened map. Defaults are the paper's (dim 128, depth 4, 4 heads of 32,
    FF 256)."""

    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, stem_stride=1, dim=128, depth=4,
                 heads=4, dim_head=32, mlp_dim=256, channels=3, dropout=0.0):
        super().__init__()
        if image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by stem_stride {stem_stride}")
        side = image_size // stem_stride
        self.mixer_name, self.mixer_options = mixer, dict(mixer_options or {})

        def make_mixer():
            if mixer == "levit":
                return LeViTAttention(dim=dim, fmap_size=side, heads=heads, dim_key=dim_head, dim_value=dim_head,
                                      **self.mixer_options)
            return on_map(layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=side * side,
                                       **self.mixer_options), side)

        self.conv_embedding = conv_stem(channels, dim, stride=stem_stride)[:-1]  # the map, not tokens
        self.backbone = Stage(dim=dim, depth=depth, mlp_dim=mlp_dim, make_mixer=make_mixer, dropout=dropout)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        return self.mlp_head(self.pool(self.backbone(self.conv_embedding(img))))


def levix_model(image_size, num_classes, channels, config, mixer, mixer_options=None):
    """A ``LeViX`` with mixer ``mixer`` (options ``mixer_options``), the stem stride that gives the 32 x 32
    map for ``image_size`` (``stem_geometry``), and the ``create_model`` overrides ``config`` (module doc)."""
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    arguments = {**stem_geometry(image_size, hybrid=True), **config}
    return LeViX(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
                 **arguments)


@register_model(paper="vix", label="LeViT")
def levit(*, image_size, num_classes, channels, **config):
    """LeViT: LeViT's attention without the position-bias table, as the paper ran it (624,970; with
    ``mixer_options={"pos_bias": True}`` 641,354)."""
    return levix_model(image_size, num_classes, channels, config, "levit", dict(pos_bias=False))


@register_model(paper="vix", label="LeViP", changed_defaults=PER_HEAD_BEFORE)
def levip(*, image_size, num_classes, channels, key_max="global", **config):
    """LeViP: ViP's Performer (``key_max`` as ``vip``). 622,410; the paper prints 662,410, 40,000 more (a typo: its
    Table 4 gives 646,920 = 622,410 + 24,510, as the authors' notebook prints)."""
    return levix_model(image_size, num_classes, channels, config, *paper_mixer("vip", key_max=key_max))


@register_model(paper="vix", label="LeViL")
def levil(*, image_size, num_classes, channels, **config):
    """LeViL: ViL's Linformer (k 64, shared one-head keys and values) over the 1,024 tokens (no script)."""
    return levix_model(image_size, num_classes, channels, config, *paper_mixer("vil"))


@register_model(paper="vix", label="LeViN")
def levin(*, image_size, num_classes, channels, **config):
    """LeViN: ViN's Nystromformer (64 landmarks, 1,024 tokens: no padding)."""
    return levix_model(image_size, num_classes, channels, config, *paper_mixer("vin"))
