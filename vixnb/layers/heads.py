"""Attention heads: the one place where projected queries, keys and values are split into heads and RoPE
is applied to the queries and keys.

Every mixer with queries and keys (softmax, performer, linformer, nystrom, linear, shaped, and the image
form of linear attention) projects with its own ``nn.Linear`` (or ``nn.Conv2d``) modules, since the papers'
parameter counts and "Size (MB)" depend on exactly which modules exist and are called, and then calls
``split_heads`` on the projections. ``merge_heads`` is the inverse, before the output projection.
"""
from einops import rearrange

from .rope import apply_rope


def split_heads(q, k, v, *, heads, kv_heads=None, rope=None, start=0):
    """Projected (b, n, heads * d) queries and (b, n, kv_heads * e) keys and values -> q (b, heads, n, d),
    k and v (b, kv_heads, n, e).

    ``kv_heads`` defaults to ``heads`` (Linformer's single key/value head shared by all query heads: 1).
    ``rope``: a ``Rotary`` that rotates q and k (never v), from token ``start`` on (``apply_rope``: Nystrom's
    front padding stays unrotated, so the real tokens keep positions 0..n-1).
    """
    kv_heads = heads if kv_heads is None else kv_heads
    q = rearrange(q, "b n (h d) -> b h n d", h=heads)
    k, v = (rearrange(t, "b n (h d) -> b h n d", h=kv_heads) for t in (k, v))
    if rope is not None:
        q, k = apply_rope(q, rope, start=start), apply_rope(k, rope, start=start)
    return q, k, v


def merge_heads(t):
    """(b, h, n, d) -> (b, n, h * d), the heads side by side."""
    return rearrange(t, "b h n d -> b n (h d)")
