"""Linformer attention (Wang et al.): keys and values projected along the sequence to length k.

``share_kv`` uses one projection (and one key/value map) for both; ``one_kv_head`` shares a single
key/value head across all query heads. ViX's ViL uses k=64, share_kv=True, one_kv_head=True.
The (seq_len, k) projections are plain parameters, so the torchsummary "paper" count leaves them out.
"""
import math

import torch
from einops import rearrange
from torch import nn

from .rope import apply_rope


def _uniform(rows, cols):
    bound = 1 / math.sqrt(cols)
    return nn.Parameter(torch.empty(rows, cols).uniform_(-bound, bound))


class LinformerAttention(nn.Module):
    def __init__(self, *, dim, seq_len, heads=4, dim_head=32, k=64, share_kv=True, one_kv_head=True,
                 dropout=0.0, rope=None):
        super().__init__()
        if seq_len is None:
            raise ValueError("linformer needs seq_len (the number of tokens, class token included)")
        inner = heads * dim_head
        kv_dim = dim_head if one_kv_head else inner
        self.heads, self.dim_head, self.seq_len, self.k, self.share_kv, self.rope = heads, dim_head, seq_len, k, share_kv, rope
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_k = nn.Linear(dim, kv_dim, bias=False)
        self.proj_k = _uniform(seq_len, k)
        if not share_kv:
            self.to_v = nn.Linear(dim, kv_dim, bias=False)
            self.proj_v = _uniform(seq_len, k)
        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner, dim)

    def _heads(self, t):
        t = rearrange(t, "b n (h d) -> b h n d", d=self.dim_head)
        return t.expand(-1, self.heads, -1, -1) if t.shape[1] == 1 else t

    def qk_v(self, x):
        n = x.shape[1]
        if n != self.seq_len:
            raise ValueError(f"linformer was built for seq_len={self.seq_len} tokens, got {n}: pass seq_len={n}")
        keys = self.to_k(x)
        values = keys if self.share_kv else self.to_v(x)
        proj_v = self.proj_k if self.share_kv else self.proj_v
        q, k, v = self._heads(self.to_q(x)), self._heads(keys), self._heads(values)
        if self.rope is not None:  # rotate before the sequence projection, where positions still exist
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        k = torch.einsum("bhnd,nk->bhkd", k, self.proj_k)
        v = torch.einsum("bhnd,nk->bhkd", v, proj_v)
        return q, k, v

    def attention_map(self, x):
        """(b, h, n, k): attention of each token over the k projected keys."""
        q, k, _ = self.qk_v(x)
        return (q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qk_v(x)
        attn = self.dropout((q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1))
        return self.to_out(rearrange(attn @ v, "b h n d -> b n (h d)"))
