"""Linformer attention (Wang et al.): keys and values projected along the sequence to length k.

``share_kv`` uses one projection (and one key/value map) for both; ``one_kv_head`` shares a single
key/value head across all query heads. ViX's ViL uses k=64, share_kv=True, one_kv_head=True.
The (seq_len, k) projections are plain parameters, so the torchsummary "paper" count leaves them out.
As in the linformer package, a shorter input (n < seq_len) uses the first n rows of the projections.
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

    def _split(self, t):  # (b, n, h*d) -> (b, h, n, d); a single shared key/value head stays (b, 1, n, d)
        return rearrange(t, "b n (h d) -> b h n d", d=self.dim_head)

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
        q, k, v = self._split(self.to_q(x)), self._split(keys), self._split(values)
        if self.rope is not None:  # rotate q and k (never v) before the sequence projection
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        pk = torch.einsum("bhnd,nk->bhkd", k, proj_k.to(k.dtype))
        # a shared map and projection, and no rotation: the projected values are the projected keys
        pv = pk if (self.share_kv and self.rope is None) else torch.einsum("bhnd,nk->bhkd", v, proj_v.to(v.dtype))
        k, v = pk, pv
        return q, self._expand(k), self._expand(v)

    def attention_map(self, x, space="projected"):
        """``space="projected"``: (b, h, n, k), each token's softmax attention over the k projected keys
        (rows sum to 1). ``space="tokens"``: (b, h, n, n), that map times the value projection's transpose,
        the token-to-token operator actually applied to the values (rows need not sum to 1)."""
        q, k, _ = self.qk_v(x)
        attn = (q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1)
        if space == "projected":
            return attn
        if space == "tokens":
            return attn @ self.projections(x.shape[1])[1].T.to(attn.dtype)
        raise ValueError(f"space must be 'projected' or 'tokens', got {space!r}")

    def forward(self, x):
        q, k, v = self.qk_v(x)
        attn = self.dropout((q @ k.transpose(-1, -2) * self.dim_head**-0.5).softmax(dim=-1))
        return self.to_out(rearrange(attn @ v, "b h n d -> b n (h d)"))
