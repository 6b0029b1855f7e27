"""Rotary position embedding (RoPE, Su et al.) for the queries and keys of any mechanism that has them.

The `vix` paper (Table 6) swaps ViT's learnable 1-D position embedding for RoPE. ``Rotary(dim_head, seq_len)``
holds the cos/sin tables (buffers, no parameters); ``apply_rope(t, rotary)`` rotates a (b, h, n, d)
tensor with them, pairing channel i with channel i + d/2 (the "rotate half" form). One ``Rotary`` may be
shared by every layer of a model. Mixers apply it through ``heads.split_heads``.

Where each mechanism applies it (always to q and k, never to v):
- softmax, performer (global and local heads), nystrom, shaped: to q and k before the scores;
- linformer: to q and k before the sequence projection of the keys (positions no longer exist after it);
- linear (token form): to q and k before the feature map phi.
Nystrom pads the sequence at the front; ``start`` lets it rotate only the real tokens, which then keep
positions 0..n-1 (the padding rows are zero and stay unrotated).
"""
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim_head, seq_len, *, base=10000.0):
        super().__init__()
        if dim_head % 2:
            raise ValueError(f"RoPE needs an even dim_head, got {dim_head}")
        inv_freq = base ** (-torch.arange(0, dim_head, 2).float() / dim_head)
        angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)


def apply_rope(t, rotary, *, start=0):
    """Rotate (..., n, d) ``t``; tokens before index ``start`` are left as they are (front padding)."""
    if start:
        return torch.cat((t[..., :start, :], apply_rope(t[..., start:, :], rotary)), dim=-2)
    n = t.shape[-2]
    if n > rotary.cos.shape[0]:
        raise ValueError(f"RoPE tables cover {rotary.cos.shape[0]} tokens, input has {n}: build with seq_len >= {n}")
    x1, x2 = t.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return t * rotary.cos[:n].to(t.dtype) + rotated * rotary.sin[:n].to(t.dtype)
