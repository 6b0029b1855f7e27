"""ConvMixer (Trockman & Kolter, "Patches Are All You Need?"), the `cxv` paper's ConvMixer-16 (Table 1).

ConvMixer-``dim``/``depth``: a patch embedding (a ``patch_size`` x ``patch_size`` conv of that stride, GELU,
BatchNorm), then ``depth`` layers of x + BN(GELU(depthwise ``kernel_size`` x ``kernel_size`` conv(x))) followed by
BN(GELU(pointwise 1 x 1 conv)), then average pooling and a Linear head.

The paper's settings: 256-dimensional embeddings, 16 layers. Kernel and patch size are not stated and the
authors' repositories hold no ConvMixer script; they are chosen to fit Table 1 (1.3 M parameters, 1.37 GMACs):
patch size 1 (a 32 x 32 map; patch 2 would give about 0.34 GMACs) and kernel 8: 1,339,402 parameters (paper
convention = true count). Kernel 7 gives 1,277,962 (1.28 GMACs) and kernel 9 1,409,034 (1.4 M, 1.41 GMACs).
MACs of the convs and the Linear: 1.343 G. No kernel meets both 1.3 M and 1.37 G under that convention (with
patch 1 the MACs are about 1,024 x the conv weights, so 1.37 G needs about 1.37 M parameters); the table's
1.37 G is met if the BatchNorms (2 per output element, ptflops' rule for an affine norm) and the GELUs (1 per
element) are counted too: 1.369 G. That is a guess at the authors' counter: the `cxv` models' and the ResNets'
MACs round to the table under either convention and do not tell them apart.

The original ConvMixer has no dropout; the paper's "dropout of 0.5 across all models" is applied as a ``Dropout(0.5)``
before the head (no parameters; ``dropout=0`` gives the original). On Tiny ImageNet the patch
size is image_size / 32 (2 x 2 patches of stride 2, a 32 x 32 map: the paper's adjusted stride of the initial
conv), which adds 2,304 weights to the patch embedding: 1,390,536 parameters with the 200-class head.
"""
from torch import nn

from ..layers.stems import GRID_SIDE
from .registry import register_model


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


class ConvMixer(nn.Module):
    mixes_by = "convolutions only"  # no attention map (``analysis.map_description``)

    def __init__(self, *, image_size, num_classes, channels=3, dim=256, depth=16, kernel_size=8, patch_size=None,
                 dropout=0.5):
        super().__init__()
        patch_size = patch_size or max(image_size // GRID_SIDE, 1)
        self.patch_embedding = nn.Sequential(nn.Conv2d(channels, dim, patch_size, stride=patch_size), nn.GELU(),
                                             nn.BatchNorm2d(dim))
        self.layers = nn.Sequential(*[
            nn.Sequential(
                # "same" padding written out (torch pads an even kernel's extra row and column at the end, and warns)
                Residual(nn.Sequential(nn.ZeroPad2d(((kernel_size - 1) // 2, kernel_size // 2) * 2),
                                       nn.Conv2d(dim, dim, kernel_size, groups=dim), nn.GELU(), nn.BatchNorm2d(dim))),
                nn.Conv2d(dim, dim, 1), nn.GELU(), nn.BatchNorm2d(dim))
            for _ in range(depth)])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout),
                                  nn.Linear(dim, num_classes))

    def forward(self, img):
        return self.head(self.layers(self.patch_embedding(img)))


@register_model(paper="cxv", label="ConvMixer-16")
def convmixer_16(*, image_size, num_classes, channels, **config):
    """ConvMixer-256/16, kernel 8, patch 1 (on CIFAR): the paper's 1.3 M parameters."""
    return ConvMixer(image_size=image_size, num_classes=num_classes, channels=channels, **config)
