"""PiT (Pooling-based vision Transformer, Heo et al.) and the `vix` paper's PiX: PiN (Nystrom) and PiP (Performer)
attention in PiT, and their Hybrid (3-conv stem) forms (Table 5).

The authors published no Pi* script; the skeleton is lucidrains' vit-pytorch ``pit.py`` of 2021, from which
their other families were adapted, at the paper's ViX sizes: two stages of two layers (section 5.3: "a
4-layer transformer, down-sampling the sequence after every two layers"), dim 128 then 256, 4 heads of 32 in
both stages (so the stage-2 attention works at inner width 128), MLP hidden 256 in both stages, and the
class-token LayerNorm + Linear head at dim 256. Between the stages ``Pool`` halves the token grid with a
depthwise 3x3 conv of stride 2 that doubles the channels (128 -> 256, groups 128) followed by a 1x1 conv, and
maps the class token with a Linear(128, 256). Every count of Table 5 follows exactly; with 10 classes:
PiT 897,034, PiN = PiT + 528 (the Nystrom residual convs, 4 x 33 per layer, as in ViN), PiP = PiN + 1,008
(the Performer's q/k/v biases), Hybrid = plain + 92,736.

Tokens: vit-pytorch's PiT embeds overlapping patches with ``nn.Unfold(patch_size, stride=patch_size // 2)``,
``Rearrange`` and a Linear, which cannot run at patch size 1 (stride 0). The paper's PiT embeds every pixel
(the counts need a Linear(3, 128)), and its Size (MB) needs the Unfold module: with ViT's Rearrange + Linear
alone PiT/PiN/PiP come out 0.02 MB (one 3 x 1024 output) below the printed 129.74/65.81/64.09, with the
Unfold exactly on them. So ``unfold_embedding`` keeps vit-pytorch's three modules with non-overlapping
patches (stride = patch size): 1024 tokens + class token (seq_len 1025), pooled to 16 x 16 = 256 tokens +
class token (seq_len 257). The hybrids use the ViX 3-conv stem unchanged. Size (MB) also needs vit-pytorch's
``DepthWiseConv2d`` wrapper module (``DepthwiseConv``; without it 0.50 MB less).

Mixers: the ViX models' (``vix.paper_mixer``), each built with its stage's seq_len: PiT the plain softmax
attention (``nn.Softmax`` on the materialised path, which Size (MB) counts), PiN ViN's Nystrom (64
landmarks; stage 2's 257 tokens are front-padded to 320), PiP ViP's Performer (softmax-kernel FAVOR+, as the
ViP script runs it). A learned position embedding (not counted by the paper's convention) is added to the
1025 tokens, as in vit-pytorch; after the pooling there is none.

Tiny ImageNet (64 px): as the ViX models do (``stem_geometry``), 2 x 2 non-overlapping patches
(Linear(12, 128); vit-pytorch's half stride would give 63 x 63 overlapping ones) or the stem's first conv
at stride 2, so the token grid and every later layer are those of CIFAR-10; only the
patch Linear (+1,152) and the 200-class head (+48,830 at dim 256) change the count. The paper has no Tiny
ImageNet PiT table.

``PiX``'s defaults are the paper's. ``depth`` is the layers of each stage, a tuple, or one int for both
stages (so the smoke profile's ``depth=1`` gives (1, 1)). ``create_model`` overrides replace arguments
(``depth=(1, 1)``, ``dropout=0.1``); ``mixer_options`` is merged into the model's own mixer options;
``mixer="shaped"`` swaps the mixer, starting from no options of the model's.

Training: the authors published no Pi* script, so no batch size or epochs of theirs. Table 5 states no batch
size; its GPU (GB) for PiT, 14.7, is near ViT's 14.1 at Table 1's batch 64. The ViX scripts run 40 epochs.
"""
from functools import partial

import torch
from einops import rearrange, repeat
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.blocks import Transformer
from ..layers.stems import conv_stem, stem_geometry
from .registry import mixer_overrides, register_model
from .vix import PER_HEAD_BEFORE, paper_mixer


def unfold_embedding(channels, dim, *, patch_size=1):
    """vit-pytorch PiT's patch embedding (Unfold, Rearrange, Linear) with non-overlapping patches."""
    return nn.Sequential(nn.Unfold(patch_size, stride=patch_size), Rearrange("b c n -> b n c"),
                         nn.Linear(channels * patch_size * patch_size, dim))


class DepthwiseConv(nn.Module):
    """A depthwise (``groups=dim_in``) conv to ``dim_out`` channels, then a 1x1 conv (vit-pytorch's
    ``DepthWiseConv2d``; kept as its own module, whose output torchsummary records, for Size (MB))."""

    def __init__(self, dim_in, dim_out, *, kernel_size=3, stride=2, padding=1):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(dim_in, dim_out, kernel_size, stride=stride, padding=padding, groups=dim_in),
                                 nn.Conv2d(dim_out, dim_out, 1))

    def forward(self, x):
        return self.net(x)


class Pool(nn.Module):
    """Class token through a Linear(dim, 2 dim); the square token grid through ``DepthwiseConv`` at stride 2."""

    def __init__(self, dim):
        super().__init__()
        self.downsample = DepthwiseConv(dim, dim * 2)
        self.cls_ff = nn.Linear(dim, dim * 2)

    def forward(self, x):
        cls_token, tokens = x[:, :1], x[:, 1:]
        side = int(tokens.shape[1] ** 0.5)
        tokens = self.downsample(rearrange(tokens, "b (h w) c -> b c h w", h=side))
        return torch.cat((self.cls_ff(cls_token), rearrange(tokens, "b c h w -> b (h w) c")), dim=1)


class PiX(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, patch_size=1, hybrid=False,
                 stem_stride=1, dim=128, depth=(2, 2), heads=4, dim_head=32, mlp_dim=256, channels=3, dropout=0.0,
                 emb_dropout=0.0):
        super().__init__()
        if image_size % patch_size or image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by patch_size {patch_size} and stem_stride "
                             f"{stem_stride}")
        side = image_size // (stem_stride if hybrid else patch_size)
        self.mixer_name, self.mixer_options, self.hybrid = mixer, dict(mixer_options or {}), hybrid
        self.to_patch_embedding = (conv_stem(channels, dim, stride=stem_stride) if hybrid
                                   else unfold_embedding(channels, dim, patch_size=patch_size))
        self.pos_embedding = nn.Parameter(torch.randn(1, side * side + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)
        depth = (depth, depth) if isinstance(depth, int) else tuple(depth)
        stages = []
        for i, stage_depth in enumerate(depth):
            if i:
                stages.append(Pool(dim))
                dim, side = dim * 2, (side + 1) // 2  # 3x3 conv, stride 2, padding 1
            stages.append(Transformer(
                dim=dim, depth=stage_depth, mlp_dim=mlp_dim, dropout=dropout,
                make_mixer=partial(layers.build, mixer, dim=dim, heads=heads, dim_head=dim_head,
                                   seq_len=side * side + 1, **self.mixer_options),
            ))
        self.layers = nn.Sequential(*stages)
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def forward(self, img):
        x = self.to_patch_embedding(img)
        x = torch.cat((repeat(self.cls_token, "1 n d -> b n d", b=x.shape[0]), x), dim=1)
        x = self.layers(self.dropout(x + self.pos_embedding[:, : x.shape[1]]))
        return self.mlp_head(x[:, 0])


def pix_model(image_size, num_classes, channels, config, mixer, mixer_options=None, *, hybrid=False):
    """A ``PiX`` with token mixer ``mixer`` (options ``mixer_options``; the ViX models', ``vix.paper_mixer``), the
    patch embedding or (``hybrid``) the conv stem at the ViX geometry for ``image_size``, and the
    ``create_model`` overrides ``config`` applied (see the module doc)."""
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    arguments = {"hybrid": hybrid, **stem_geometry(image_size, hybrid=hybrid), **config}
    return PiX(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **arguments)


@register_model(paper="vix", label="PiT")
def pit(*, image_size, num_classes, channels, **config):
    """PiT: softmax attention (ViT's)."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vit"))


@register_model(paper="vix", label="PiN")
def pin(*, image_size, num_classes, channels, **config):
    """PiN: ViN's Nystrom attention in both stages."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vin"))


@register_model(paper="vix", label="PiP", changed_defaults=PER_HEAD_BEFORE)
def pip(*, image_size, num_classes, channels, key_max="global", **config):
    """PiP: ViP's Performer (softmax-kernel FAVOR+, biased q/k/v; ``key_max`` as ``vip``) in both stages."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vip", key_max=key_max))


@register_model(paper="vix", label="Hybrid PiT")
def hybrid_pit(*, image_size, num_classes, channels, **config):
    """PiT with the 3-conv stem."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vit"), hybrid=True)


@register_model(paper="vix", label="Hybrid PiN")
def hybrid_pin(*, image_size, num_classes, channels, **config):
    """PiN with the 3-conv stem."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vin"), hybrid=True)


@register_model(paper="vix", label="Hybrid PiP", changed_defaults=PER_HEAD_BEFORE)
def hybrid_pip(*, image_size, num_classes, channels, key_max="global", **config):
    """PiP with the 3-conv stem (``key_max`` as ``vip``)."""
    return pix_model(image_size, num_classes, channels, config, *paper_mixer("vip", key_max=key_max), hybrid=True)
