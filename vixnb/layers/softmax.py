"""Exact softmax attention (ViT), fused or materialised.

The fused path calls ``scaled_dot_product_attention``; the materialised path forms the N x N matrix
through an ``nn.Softmax`` module, as the authors' code (vit-pytorch, 2021) does. The two give the same
output; only the materialised path can return the attention matrix and reproduces the papers' memory
and "Size (MB)" figures.
"""
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .rope import qkv_heads


class SoftmaxAttention(nn.Module):
    def __init__(self, *, dim, heads=4, dim_head=32, dropout=0.0, materialize=False, rope=None, seq_len=None):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.materialize, self.rope = heads, dim_head**-0.5, materialize, rope
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.attend = nn.Softmax(dim=-1)
        project_out = not (heads == 1 and dim_head == dim)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout)) if project_out else nn.Identity()

    def qkv(self, x):
        return qkv_heads(self.to_qkv(x), self.heads, self.rope)

    def attention_map(self, x):
        q, k, _ = self.qkv(x)
        return (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.materialize:
            out = self.attend(q @ k.transpose(-1, -2) * self.scale) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))
