"""Hybrid ViLT (Hybrid Vision Linear Transformer), the `cxv` paper's transformer baseline of section 5.1 and Fig. 3.

No code of the authors' exists for it: this is a reconstruction from the paper's description. What the paper says:
it is the hybrid X-former architecture of the ViX paper (the three 3x3 convs 3 -> 32 -> 64 -> 128, stride 1, padding
1) with a Linear Transformer as the attention; its Q, K and V are made by convolutions (base code: lucidrains'
linear-attention-transformer, whose image form is ``layers.ImageLinearAttention``), so the attention takes the 2-D
map and the model needs no class token and no position embedding; 6 layers, 8 heads, dim 128, MLP 2 x dim,
dropout 0.5, about 1.3 M parameters. What is chosen here (say so wherever its numbers appear):

- the stem keeps the map: ``conv_stem(..., tokens=False)``, no activation or norm between its convs (as ViX's);
- each layer is the hybrid X-formers' pre-norm layer on the map: x + attention(LayerNorm(x)), then
  x + feed-forward(LayerNorm(x)), the LayerNorms channel-wise (``cvt.PreNorm2d``/``ChannelNorm``; their ``g`` and
  ``b`` are plain parameters, not in the paper count), the feed-forward a 1x1-conv MLP 128 -> 256 -> 128 with GELU
  and dropout 0.5 (``cvt.Transformer2d``);
- the attention: ``ImageLinearAttention`` with 8 heads of 32 and 1x1 q/k/v/out projections (with bias), which gives
  ~1.3 M parameters (3x3 projections, as the repository's CLTV, would give 7,573,322); its feature map is
  lucidrains' (softmax over the query channels and over the key tokens, as CLTV), not Katharopoulos' elu + 1
  (``mixer_options={"feature_map": "elu"}``);
- average pooling over the map and a Linear head, no final norm.

Counts (CIFAR-10): 1,281,866 (paper convention), 1,284,938 (true: the channel norms' g and b). Paper MACs 1.30 G on
the 32 x 32 map, against the printed 0.33 G. The printed figure is what a 16 x 16 map gives (``stem_stride=2`` on
CIFAR: 0.33 G, same parameters), but section 4.1 gives the hybrid stem stride 1 and the printed GPU memory (2.6 GB,
more than CLTV's 1.8 GB on its 32 x 32 map) does not look like a map of a quarter the size; the 32 x 32 map is built.
On Tiny ImageNet the first stem conv has stride 2 (``stem_geometry``), giving the same 32 x 32 map.

Overrides given to ``create_model`` work as for the other families: ``mixer_options`` merges into the attention's
own options (``{"kernel_size": 3}``), ``mixer=`` swaps in a token mixer of ``layers`` (on the flattened map,
``cvt.TokenMixer2d``), every other key replaces a ``ViLT`` argument (``depth=1``, ``dropout=0.1``, ``stem_stride=2``).
"""
from einops.layers.torch import Rearrange
from torch import nn

from .. import layers
from ..layers.stems import conv_stem, stem_geometry
from .cvt import TokenMixer2d, Transformer2d
from .cxv import IMAGE_LINEAR
from .registry import mixer_overrides, register_model


class ViLT(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer=IMAGE_LINEAR, mixer_options=None, channels=3, dim=128,
                 depth=6, heads=8, dim_head=32, mlp_mult=2, stem_stride=1, dropout=0.5):
        super().__init__()
        if image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by stem_stride {stem_stride}")
        side = image_size // stem_stride
        self.mixer_name, self.mixer_options = mixer, dict(mixer_options or {})
        self.stem = conv_stem(channels, dim, stride=stem_stride, tokens=False)
        mixers = []
        for i in range(1, depth + 1):
            if mixer == IMAGE_LINEAR:
                mixers.append(layers.ImageLinearAttention(dim, heads=heads, dim_head=dim_head, **self.mixer_options))
            else:
                mixers.append(TokenMixer2d(layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head,
                                                        seq_len=side * side, layer_index=i, depth=depth,
                                                        **self.mixer_options), side))
        self.transformer = Transformer2d(dim, mixers, mlp_mult=mlp_mult, dropout=dropout)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), Rearrange("b c 1 1 -> b c"), nn.Linear(dim, num_classes))

    def forward(self, img):
        return self.head(self.transformer(self.stem(img)))


@register_model(paper="cxv", label="Hybrid ViLT-6/8")
def hybrid_vilt_6_8(*, image_size, num_classes, channels, **config):
    """Hybrid ViLT, reconstructed from the paper's Fig. 3 (module doc): the 3-conv stem, 6 pre-norm layers of image
    linear attention (8 heads of 32, 1x1 conv projections) and 1x1-conv feed-forward, average pool, Linear head."""
    mixer, options, config = mixer_overrides(config, IMAGE_LINEAR, {"kernel_size": 1})
    arguments = {**stem_geometry(image_size, hybrid=True), **config}
    return ViLT(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
                **arguments)
