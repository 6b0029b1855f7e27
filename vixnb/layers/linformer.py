"""Linformer attention (Wang et al.): keys and values projected along the sequence to length k.

``share_kv`` uses one projection (and one key/value map) for both; ``one_kv_head`` shares a single
key/value head across all query heads. ViX's ViL uses k=64, share_kv=True, one_kv_head=True. ``qkv_bias`` gives the
q/k/v maps a bias (ViT-B/16's, so that its weights transfer whole).
The (seq_len, k) projections are plain parameters, so the torchsummary "paper" count leaves them out.
As in the linformer package, a shorter input (n < seq_len) uses the first n rows of the projections.
``attention_map(x)`` is the (n x n) token-to-token operator applied to the values, as for every mixer;
``projected_attention_map(x)`` the (n x k) softmax over the projected keys.
"""
import math

import torch
from torch import nn

from .heads import merge_heads, split_heads


def _uniform(rows, cols):
    bound = 1 / math.sqrt(cols)
    return nn.Parameter(torch.empty(rows, cols).uniform_(-bound, bound))


class LinformerAttention(nn.Module):
    mechanism = "Linformer"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("Linformer's softmax over the k projected keys (n x k), lifted to n x n through the value "
                "projection: the operator applied to the values, whose rows need not sum to 1 and whose "
                "entries can be negative")

    def __init__(self, *, dim, seq_len, heads=4, dim_head=32, k=64, share_kv=True, one_kv_head=True,
                 dropout=0.0, rope=None, qkv_bias=False):
        super().__init__()
        if seq_len is None:
            raise ValueError("linformer needs seq_len (the number of tokens, class token included)")
        inner = heads * dim_head
        kv_dim = dim_head if one_kv_head else inner
        self.heads, self.dim_head, self.seq_len, self.k, self.share_kv, self.rope = (heads, dim_head, seq_len, k,
                                                                                     share_kv, rope)
        self.kv_heads = 1 if one_kv_head else heads
        self.to_q = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_k = nn.Linear(dim, kv_dim, bias=qkv_bias)
        self.proj_k = _uniform(seq_len, k)
        if not share_kv:
            self.to_v = nn.Linear(dim, kv_dim, bias=qkv_bias)
            self.proj_v = _uniform(seq_len, k)
        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner, dim)

    def _expand(self, t):
        return t.expand(-1, self.heads, -1, -1) if t.shape[1] == 1 else t

    def projections(self, n):
        """The (n, k) sequence projections of keys and values actually used for an n-token input."""
        if n > self.seq_len:
            raise ValueError(f"linformer was built for seq_len={self.seq_len} tokens, got {n}: pass seq_len={n}")
        proj_v = self.proj_k if self.share_kv else self.proj_v
        return self.proj_k[:n], proj_v[:n]

    def qk_v(self, x):
        """Queries (b, h, n, d) and the projected keys and values (b, h, k, d)."""
        proj_k, proj_v = self.projections(x.shape[1])
        keys = self.to_k(x)
        values = keys if self.share_kv else self.to_v(x)
        # rotate q and k (never v) before the sequence projection: positions no longer exist after it
        q, k, v = split_heads(self.to_q(x), keys, values, heads=self.heads, kv_heads=self.kv_heads, rope=self.rope)
        pk = torch.einsum("bhnd,nk->bhkd", k, proj_k.to(k.dtype))
        # a shared map and projection, and no rotation: the projected values are the projected keys
        pv = pk if (self.share_kv and self.rope is None) else torch.einsum("bhnd,nk->bhkd", v, proj_v.to(v.dtype))
        return q, self._expand(pk), self._expand(pv)

    def projected_attention_map(self, x):
        """(b, h, n, k): each token's softmax attention over the k projected keys (rows sum to 1)."""
        q, k, _ = self.qk_v(x)
        return (q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1)

    def attention_map(self, x):
        """(b, h, n, n): ``projected_attention_map`` times the value projection's transpose, the token-to-token
        operator actually applied to the values (rows need not sum to 1)."""
        attn = self.projected_attention_map(x)
        return attn @ self.projections(x.shape[1])[1].T.to(attn.dtype)

    def exact_softmax_map(self, x):
        """(b, h, n, n): softmax(Q K^T / sqrt(d)) of the keys before the sequence projection (the key head shared by
        the query heads where there is one), the map ``attention_map`` approximates."""
        keys = self.to_k(x)
        q, k, _ = split_heads(self.to_q(x), keys, keys, heads=self.heads, kv_heads=self.kv_heads, rope=self.rope)
        return (q @ self._expand(k).transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1)

    def forward(self, x):
        q, k, v = self.qk_v(x)
        attn = self.dropout((q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1))
        return self.to_out(merge_heads(attn @ v))
