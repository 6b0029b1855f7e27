"""Exact softmax attention (ViT), fused or materialised.

``fused=True`` (default) calls ``scaled_dot_product_attention``; ``fused=False`` forms the N x N matrix
through an ``nn.Softmax`` module, as the authors' code (vit-pytorch, 2021) does. The two give the same
output; only the materialised path reproduces the papers' memory and "Size (MB)" figures (the Softmax
module's output is what torchsummary counts). ``layers.fused_attn(model, enabled)`` switches ``fused``.
``qkv_bias=True`` gives the q/k/v projection a bias (ViT-B/16 as Dosovitskiy et al. and timm build it).
"""
import torch.nn.functional as F
from torch import nn

from .heads import merge_heads, split_heads


class SoftmaxAttention(nn.Module):
    mechanism = "softmax attention"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = "exact softmax(QK^T/sqrt(d)) over all tokens; rows sum to 1"

    def __init__(self, *, dim, heads=4, dim_head=32, dropout=0.0, fused=True, rope=None, seq_len=None,
                 qkv_bias=False):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.fused, self.rope = heads, dim_head**-0.5, fused, rope
        self.to_qkv = nn.Linear(dim, inner * 3, bias=qkv_bias)
        self.attend = nn.Softmax(dim=-1)
        project_out = not (heads == 1 and dim_head == dim)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout)) if project_out else nn.Identity()

    def qkv(self, x):
        return split_heads(*self.to_qkv(x).chunk(3, dim=-1), heads=self.heads, rope=self.rope)

    def attention_map(self, x):
        """(b, h, n, n): softmax(Q K^T / sqrt(d)), rows summing to 1."""
        q, k, _ = self.qkv(x)
        return (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            out = self.attend(q @ k.transpose(-1, -2) * self.scale) @ v
        return self.to_out(merge_heads(out))
