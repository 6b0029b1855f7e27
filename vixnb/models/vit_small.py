"""The small ViTs of the `shaped` paper (the blog "Optimizations of Transformers for Small-scale Performance"):
a vanilla ViT and the simplified (shaped-attention) ViT of He & Hofmann (2023), on CIFAR-10 with 4 x 4 patches
(64 patch tokens and a class token: 65).

``create_model("vit_small_vanilla" | "vit_small_simplified", width=96, depth=8, heads=4, patch=4,
alpha_beta="uniform", layout="blog", blog_scale=False, block="parallel")``.

``layout="blog"`` (default) is the layout that the blog's text states and its six parameter counts fix exactly
(Tables 2, 4, 5):

- stem: a ``patch`` x ``patch`` Conv2d patch embedding with bias, 65 learned position vectors (the first is the
  class token's: a separate class-token parameter would be the same learnable vector counted twice), one
  LayerNorm before the encoder;
- vanilla block, "the stanford transformer block ... using layer normalizations before the multi-headed attention
  (MHA) and multi-level perceptron (MLP) blocks": x + O(A V(LN1(x))), then x + MLP(LN2(x)), with full-width value
  and output Linear layers (bias). The counts fix 2 x width LayerNorm parameters a block; two LayerNorms before the
  two branches fit them only without bias (``nn.LayerNorm(width, bias=False)``: a gain each), which is what this
  builds. ``skips=False`` removes both residuals (the blog's Fig. 14, "vanishing gradients");
- simplified block, SAS-P, "the final transformer block (referred to as SAS-P)" of the blog's Fig. 4 (He & Hofmann's
  parallel block): the shaped attention and the MLP both read the same LN(x) and are summed,
  (alpha I + beta A) LN(x) + MLP(LN(x)), no value/output projections and no skips: the alpha I term carries the
  signal past every MLP. The counts force the one LayerNorm (with bias) inside each block, besides the one before
  the encoder the blog names. Scalar alpha and beta are initialised by ``alpha_beta`` (``layers.shaped``: uniform,
  identity (the blog's reading of He & Hofmann), attention, dynamic, inverse-dynamic, and hehofmann (their code:
  centred, zero queries); the per-layer schemes get each block's ``layer_index`` and the ``depth``);
- in both, the queries and keys project to width/heads channels in total, so there is one attention map per layer,
  applied to every channel; the MLP is width -> width -> width (GELU);
- head: a width x width Linear with tanh on the class token (the original ViT's pre-logits layer; the counts fix
  only its size) and the 10-way Linear.

That is width^2 + 127 width + 10 outside the blocks, and per block 2(width x width/heads + width/heads) for q and k,
2 width for the LayerNorm(s), 2(width^2 + width) for the MLP, plus 2(width^2 + width) for V and O (vanilla) or 2 for
alpha and beta (simplified).

Our earlier readings, kept as named variants with their stored runs (the chapter's "our earlier reading" table):

- ``layout="one-norm"`` (vanilla): one LayerNorm with bias per block, at its input, and none before the MLP:
  x + O(A V(LN(x))), then x + MLP(x). Same parameter count.
- ``block="sequential"`` (simplified): the blog's formula ``Output = MLP(S(X))`` read literally as the block,
  MLP(shaped(LN(x))) with no skip. Its stored runs end at chance at width 128; the formula describes the standard
  block's flow, not the block the blog evaluates.

Runs stored before these defaults changed keep their keys: a run config leaves out the earlier default
(``register_model(changed_defaults=...)``), so a stored config without ``layout``/``block`` is the earlier reading.

``norm_bias=True`` (vanilla, ``layout="blog"``): the same block with both LayerNorms given a bias (2 x width more
parameters a block than the blog's counts): an arm of the chapter's stall question.

``layout="standard"``: a textbook pre-LN multi-head block for comparison: x + MHA(LN(x)), x + MLP(LN(x)) with
``heads`` maps of width/heads channels (vanilla), and LN -> multi-head shaped attention -> LN -> MLP without
skips (simplified); the same stem and head.

The blog's code is a sketch with bugs; this implements the intended mathematics (the page lists the bugs). It
divides the scores by ``head_dim ** -0.5``, i.e. multiplies them by sqrt(d): ``blog_scale=True`` reproduces that
as an ablation (it changes only the scale), never by default.
"""
import torch
import torch.nn.functional as F
from torch import nn

from .. import layers
from ..layers.blocks import mlp
from .registry import register_model

LAYOUTS = ("blog", "one-norm", "standard")


class OneMapAttention(nn.Module):
    """Softmax attention with one map per layer: q, k project to ``dim_head`` channels (bias), the map applies
    to full-width values V(x), then O (both Linear with bias)."""

    # what the synthesis page groups it under (``report.claims.synthesis``)
    mechanism = layers.SoftmaxAttention.mechanism
    map_description = ("vit_small's one softmax(QK^T/sqrt(d)) per layer (q, k of width/heads channels), applied to "
                "every channel (h = 1); rows sum to 1")

    def __init__(self, *, dim, dim_head, fused=True):
        super().__init__()
        self.scale, self.fused = dim_head**-0.5, fused
        self.to_q, self.to_k = nn.Linear(dim, dim_head), nn.Linear(dim, dim_head)
        self.to_v, self.to_out = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.attend = nn.Softmax(dim=-1)

    def attention_map(self, x):
        """(b, 1, n, n): the one map of the layer."""
        return self.attend(self.to_q(x) @ self.to_k(x).transpose(-1, -2) * self.scale).unsqueeze(1)

    exact_softmax_map = attention_map  # the map is the exact softmax

    def forward(self, x):
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        if self.fused:
            mixed = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            mixed = self.attend(q @ k.transpose(-1, -2) * self.scale) @ v
        return self.to_out(mixed)


BLOCKS = ("sequential", "parallel")


class Block(nn.Module):
    """Sequential: norm -> mixer (+ x where ``skips``) -> norm2 -> MLP (+ x where ``skips``).
    Parallel: mixer(norm(x)) + MLP(norm2(norm(x))), no skips (He & Hofmann's SAS-P; norm2 is the identity).
    ``norms``: ``"two-bias-free"`` (a bias-free LayerNorm before each branch), ``"one"`` (one LayerNorm with bias at
    the input, ``norm2`` the identity) or ``"two"`` (two LayerNorms with bias)."""

    def __init__(self, dim, mixer, *, skips, norms, parallel=False):
        super().__init__()
        bias = norms != "two-bias-free"
        self.norm, self.mixer, self.skips, self.parallel = nn.LayerNorm(dim, bias=bias), mixer, skips, parallel
        self.norm2 = nn.Identity() if norms == "one" else nn.LayerNorm(dim, bias=bias)
        self.mlp = mlp(dim, dim)  # hidden size = width (the counts fix it)

    def extra_repr(self):
        return "parallel" if self.parallel else ""  # the architecture signature tells the two blocks apart

    def forward(self, x):
        if self.parallel:
            x = self.norm(x)
            return self.mixer(x) + self.mlp(self.norm2(x))
        x = self.mixer(self.norm(x)) + (x if self.skips else 0)
        return self.mlp(self.norm2(x)) + (x if self.skips else 0)


class SmallViT(nn.Module):
    def __init__(self, *, image_size, num_classes, channels=3, simplified, width=96, depth=8, heads=4, patch=4,
                 alpha_beta="uniform", layout="blog", blog_scale=False, skips=None, block=None, norm_bias=False):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r}: use one of {', '.join(LAYOUTS)}")
        if width % heads or image_size % patch:
            raise ValueError(f"width {width} must be divisible by heads {heads}, image_size {image_size} by patch "
                             f"{patch}")
        block = block or ("parallel" if simplified else "sequential")
        if block not in BLOCKS:
            raise ValueError(f"block={block!r}: use one of {', '.join(BLOCKS)}")
        if block == "parallel" and not simplified:
            raise ValueError("block='parallel' is the simplified ViT's SAS-P block; pass it only to "
                             "vit_small_simplified")
        if layout == "one-norm" and simplified:
            raise ValueError("layout='one-norm' is our earlier reading of the vanilla block; the simplified block's "
                             "'blog' layout already has one LayerNorm: pass it only to vit_small_vanilla")
        if norm_bias and (simplified or layout != "blog"):
            raise ValueError("norm_bias=True gives the vanilla 'blog' layout's two LayerNorms a bias (the counts fix "
                             "them bias-free); pass it only to vit_small_vanilla with layout='blog'")
        if simplified and skips:
            raise ValueError("skips=True: the simplified block has none; pass skips only to vit_small_vanilla")
        self.simplified, self.layout = simplified, layout
        skips = (not simplified) if skips is None else skips
        tokens = (image_size // patch) ** 2 + 1
        self.to_patch_embedding = nn.Conv2d(channels, width, patch, stride=patch)
        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, width) * 0.02)
        self.norm = nn.LayerNorm(width)
        blog = layout != "standard"  # the blog's one map per layer
        dim_head, map_heads = (width // heads, 1) if blog else (width // heads, heads)
        norms = "two" if not blog or norm_bias else "one" if simplified or layout == "one-norm" else "two-bias-free"

        def mixer(i):
            if simplified:
                m = layers.build("shaped", dim=width, heads=map_heads, dim_head=dim_head, layer_index=i, depth=depth,
                                 init=alpha_beta)
            elif blog:
                m = OneMapAttention(dim=width, dim_head=dim_head)
            else:
                m = layers.build("softmax", dim=width, heads=heads, dim_head=dim_head)
            if blog_scale:  # the blog's bug: scores times sqrt(d) instead of divided by it
                m.scale = dim_head**0.5
            return m

        self.blocks = nn.Sequential(*(Block(width, mixer(i), skips=skips, norms=norms, parallel=block == "parallel")
                                      for i in range(1, depth + 1)))
        self.pre_logits = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, num_classes)

    def forward(self, img):
        x = self.to_patch_embedding(img).flatten(2).transpose(1, 2)
        x = torch.cat((x.new_zeros(x.shape[0], 1, x.shape[2]), x), dim=1) + self.pos_embedding  # class token first
        x = self.blocks(self.norm(x))
        return self.head(self.pre_logits(x[:, 0]))


def small_vit(image_size, num_classes, channels, config, *, simplified):
    return SmallViT(image_size=image_size, num_classes=num_classes, channels=channels, simplified=simplified, **config)


@register_model(paper="shaped", label="Vanilla ViT", changed_defaults={"layout": "one-norm"})
def vit_small_vanilla(*, image_size, num_classes, channels, layout="blog", **config):
    """The blog's vanilla ViT (width 96, depth 8, 4 heads, 4 x 4 patches by default; a bias-free LayerNorm before the
    attention and before the MLP; ``skips=False``: Fig. 14; ``layout="one-norm"``: our earlier reading)."""
    return small_vit(image_size, num_classes, channels, dict(config, layout=layout), simplified=False)


@register_model(paper="shaped", label="Simplified ViT", changed_defaults={"block": "sequential"})
def vit_small_simplified(*, image_size, num_classes, channels, block="parallel", **config):
    """The blog's simplified ViT, SAS-P: shaped attention alpha I + beta A beside the MLP, no V/O, no skips
    (``alpha_beta`` scheme; ``block="sequential"``: our earlier reading, the formula MLP(S(X)) as the block)."""
    return small_vit(image_size, num_classes, channels, dict(config, block=block), simplified=True)
