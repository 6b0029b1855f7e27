"""Nystromformer attention (Xiong et al.) as in lucidrains' nystrom-attention, used by ViX's ViN.

Landmarks are segment means of queries and keys; the softmax matrix is rebuilt as
softmax(Q Lk^T) pinv(softmax(Lq Lk^T)) softmax(Lq K^T), the pseudo-inverse by Moore-Penrose iterations;
a depthwise (kernel x 1) convolution over the values is added as a residual. The sequence is padded at
the front to a multiple of the landmark count and the padding cut off at the end.
"""
from math import ceil

import torch
import torch.nn.functional as F
from einops import rearrange, reduce
from torch import nn

from .rope import apply_rope


def moore_penrose_pinv(x, iters=6):
    abs_x = x.abs()
    z = x.transpose(-1, -2) / (abs_x.sum(dim=-1).amax() * abs_x.sum(dim=-2).amax())
    eye = torch.eye(x.shape[-1], device=x.device, dtype=x.dtype)
    for _ in range(iters):
        xz = x @ z
        z = 0.25 * z @ (13 * eye - xz @ (15 * eye - xz @ (7 * eye - xz)))
    return z


class NystromAttention(nn.Module):
    def __init__(self, *, dim, heads=4, dim_head=32, num_landmarks=64, pinv_iterations=6, residual=True,
                 residual_conv_kernel=33, dropout=0.0, rope=None, seq_len=None):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.rope = heads, dim_head**-0.5, rope
        self.num_landmarks, self.pinv_iterations = num_landmarks, pinv_iterations
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout))
        self.residual = residual
        if residual:
            self.res_conv = nn.Conv2d(heads, heads, (residual_conv_kernel, 1), padding=(residual_conv_kernel // 2, 0),
                                      groups=heads, bias=False)

    def factors(self, x):
        """Pad, project, and return (attn1, pinv(attn2), attn3, v) for the padded sequence."""
        n, m = x.shape[1], self.num_landmarks
        if n % m:
            x = F.pad(x, (0, 0, m - n % m, 0))
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        if self.rope is not None:
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        q = q * self.scale
        l = ceil(n / m)
        q_land = reduce(q, "... (n l) d -> ... n d", "sum", l=l) / l
        k_land = reduce(k, "... (n l) d -> ... n d", "sum", l=l) / l
        attn1 = (q @ k_land.transpose(-1, -2)).softmax(dim=-1)
        attn2 = (q_land @ k_land.transpose(-1, -2)).softmax(dim=-1)
        attn3 = (q_land @ k.transpose(-1, -2)).softmax(dim=-1)
        return attn1, moore_penrose_pinv(attn2, self.pinv_iterations), attn3, v

    def attention_map(self, x):
        """(b, h, n, n): the product of the three Nystrom factors, padding removed."""
        n = x.shape[1]
        a1, a2_inv, a3, _ = self.factors(x)
        return (a1 @ a2_inv @ a3)[..., -n:, -n:]

    def forward(self, x):
        n = x.shape[1]
        attn1, attn2_inv, attn3, v = self.factors(x)
        out = (attn1 @ attn2_inv) @ (attn3 @ v)
        if self.residual:
            out = out + self.res_conv(v)
        out = self.to_out(rearrange(out, "b h n d -> b n (h d)"))
        return out[:, -n:]
