"""WaveMix (Jeevan & Sethi, "WaveMix: Multi-Resolution Token Mixing for Images"), the `cxv` paper's WaveMix-5.

The layout is that of the WaveMix repository's code at the time of the `cxv` paper (pranavphoenix/WaveMix,
``Code.py`` of November 2021, whose ``mult_dim`` default is the paper's "32 as MLP dimension"; a form with a
reduction conv and ``mult`` replaced it in late January 2022, with or after the paper's first version): a stem of
two 3 x 3 convs (channels -> dim/2 -> dim, no activation between them), ``depth`` residual wave blocks, average
pooling and a Linear head. A wave block takes the 2-D Haar DWT of its input at ``levels`` = 4 levels (each level
the DWT of the previous level's LL); at each level the LL and the three detail maps are concatenated (4 dim
channels) and go through one shared feed-forward of 1 x 1 convs (4 dim -> ``mlp_dim``, GELU, dropout,
-> ``ff_channel``, dropout), then a transposed conv of that level (kernel 2^j + 2, stride 2^j, padding 1) back to
the full map with dim/4 channels; the four are concatenated (dim channels), then a depthwise 5 x 5 conv, GELU and
BatchNorm.

The DWT is ``ptwt``'s (Haar, zero padding; the authors' code uses pytorch_wavelets' ``DWTForward`` with
``db1``, "zero"): ``haar_dwt``. Its detail maps follow pywt's sign convention and (horizontal, vertical,
diagonal) order, which may differ from pytorch_wavelets' by a sign or an order; the following 1 x 1 conv is
learned, so the model is the same up to a permutation and sign of its weights.

The paper's settings: dim 64, MLP dimension 32 (the code's ``mult_dim``), dropout 0.5, 5 layers. ``ff_channel``
is not stated: 32 gives 1,433,482 parameters in the paper convention (Table 1: 1.4 M; the shared feed-forward
is called four times per block, and torchsummary counts it four times), 1,294,282 true; 16 would give 0.8 M and
64 2.7 M. The stem has stride 1 on CIFAR (the November 2021 script had stride 2; the code of January 2022 and
later has 1), image_size / 32 elsewhere (2 on Tiny ImageNet: 32 x 32 maps, the paper's adjusted stride).

MACs (convs, transposed convs counted as output elements x input channels x kernel area, and the Linear):
1.291 G, about half of Table 1's 2.59 G, which no ``ff_channel`` or stem stride of this layout meets together
with 1.4 M (``ff_channel`` 64 gives 2.54 G at 2.7 M; stride 2 gives 0.32 G). Counting the transposed convs per
input element (what they compute; torch's flop counter, and so ``vixnb.measure``, does so) gives 0.067 G.
"""
import torch
from einops.layers.torch import Rearrange
from torch import nn

from ..layers.stems import GRID_SIDE
from .registry import register_model


def haar_dwt(x):
    """One level of the 2-D Haar DWT of a (b, c, h, w) map (``ptwt``, zero padding): (LL, H, V, D), each
    (b, c, h/2, w/2). For a 2 x 2 block [[a, b], [c, d]]: LL = (a+b+c+d)/2, H = (a+b-c-d)/2, V = (a-b+c-d)/2,
    D = (a-b-c+d)/2. ``ptwt`` takes float32 and float64 only: a half-precision map (bf16 autocast) is
    transformed in float32 and the bands returned in its dtype. ``ptwt`` is imported here, on first use, so that
    the other models need it not."""
    try:
        import ptwt  # optional at import: only WaveMix needs it (the docstring above)
    except ImportError:
        raise ImportError("WaveMix needs the ptwt package (a vixnb dependency): pip install ptwt") from None
    dtype = x.dtype
    wide = x if dtype in (torch.float32, torch.float64) else x.float()
    low, (horizontal, vertical, diagonal) = ptwt.wavedec2(wide, "haar", level=1, mode="zero")
    return tuple(band.to(dtype) for band in (low, horizontal, vertical, diagonal))


class WaveBlock(nn.Module):
    def __init__(self, dim, *, mlp_dim=32, ff_channel=32, levels=4, kernel_size=5, dropout=0.5):
        super().__init__()
        if dim % levels:
            raise ValueError(f"dim {dim} must be a multiple of levels {levels}")
        self.feedforward = nn.Sequential(nn.Conv2d(4 * dim, mlp_dim, 1), nn.GELU(), nn.Dropout(dropout),
                                         nn.Conv2d(mlp_dim, ff_channel, 1), nn.Dropout(dropout))
        self.upsample = nn.ModuleList(nn.ConvTranspose2d(ff_channel, dim // levels, 2**j + 2, stride=2**j, padding=1)
                                      for j in range(1, levels + 1))
        self.depthconv = nn.Sequential(nn.Conv2d(dim, dim, kernel_size, groups=dim, padding=kernel_size // 2),
                                       nn.GELU(), nn.BatchNorm2d(dim))

    def forward(self, x):
        outs, low = [], x
        for upsample in self.upsample:
            low, *details = haar_dwt(low)
            outs.append(upsample(self.feedforward(torch.cat((low, *details), dim=1))))
        return self.depthconv(torch.cat(outs, dim=1))


class WaveMix(nn.Module):
    mixes_by = "wavelet transforms and convolutions only"  # no attention map (``analysis.map_description``)

    def __init__(self, *, image_size, num_classes, channels=3, dim=64, depth=5, mlp_dim=32, ff_channel=32, levels=4,
                 dropout=0.5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, dim // 2, 3, stride=max(image_size // GRID_SIDE, 1), padding=1),
                                  nn.Conv2d(dim // 2, dim, 3, padding=1))
        self.layers = nn.ModuleList(WaveBlock(dim, mlp_dim=mlp_dim, ff_channel=ff_channel, levels=levels,
                                              dropout=dropout) for _ in range(depth))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), Rearrange("b c 1 1 -> b c"), nn.Linear(dim, num_classes))

    def forward(self, img):
        x = self.stem(img)
        for block in self.layers:
            x = block(x) + x
        return self.head(x)


@register_model(paper="cxv", label="WaveMix-5")
def wavemix_5(*, image_size, num_classes, channels, **config):
    """WaveMix, dim 64, MLP 32, ff_channel 32, 4 DWT levels, 5 layers, dropout 0.5."""
    return WaveMix(image_size=image_size, num_classes=num_classes, channels=channels, **config)
