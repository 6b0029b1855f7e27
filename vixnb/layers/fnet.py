"""FNet token mixing (Lee-Thorp et al.): the real part of a 2-D FFT over (tokens, hidden). No parameters.

There is no attention map: the mixing is a fixed linear operator that also mixes channels,
Re(F_n X F_d) = Re(F_n) X Re(F_d) - Im(F_n) X Im(F_d), so no single input-dependent token-to-token matrix
describes it. ``attention_map`` raises; use gradient attributions (Integrated Gradients, occlusion) for
FNet's maps.
"""
import torch
from torch import nn


class FourierMixer(nn.Module):
    mechanism = "FNet (Fourier mixing)"  # what the synthesis page groups it under (``report.claims.synthesis``)
    draws_map = False  # a declaration the maps' code reads (``layers.maps.draws_map``); map_description says why
    map_description = ("no attention map: FNet's Fourier mixing (the real part of a 2-D FFT over tokens and channels) "
                "is a fixed operator with no token-to-token matrix")

    def __init__(self, *, dim=None, heads=None, dim_head=None, seq_len=None):
        super().__init__()

    def attention_map(self, x):
        raise NotImplementedError(f"{self.map_description}; use gradient attributions instead")

    def forward(self, x):
        # FFTs run in fp32 (or fp64): half-precision FFTs are limited to power-of-two sizes
        y = x if x.dtype in (torch.float32, torch.float64) else x.float()
        return torch.fft.fft2(y, dim=(-2, -1)).real.to(x.dtype)
