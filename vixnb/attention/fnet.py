"""FNet token mixing (Lee-Thorp et al.): the real part of a 2-D FFT over (tokens, hidden). No parameters."""
import torch
from torch import nn


class FourierMixer(nn.Module):
    def __init__(self, *, dim=None, heads=None, dim_head=None, seq_len=None):
        super().__init__()

    def forward(self, x):
        return torch.fft.fft2(x.float(), dim=(-2, -1)).real.to(x.dtype)
