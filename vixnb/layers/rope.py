"""Rotary position embedding (RoPE, Su et al.) for the queries and keys of any mechanism that has them.

The `vix` paper (Table 6) swaps ViT's learnable 1-D position embedding for RoPE. ``Rotary(dim_head, seq_len)``
holds the cos/sin tables (buffers, no parameters) for positions 0..seq_len-1, base 10000; ``apply_rope(t,
rotary)`` rotates a (b, h, n, d) tensor with them. Pair j of channels turns by position x base^(-2j/d). The
pairs are adjacent channels (2j, 2j+1) by default (``interleaved=True``: RoFormer's form, and the ViX
authors' RoPE scripts' ``rotate_every_two``), or channel j with channel j + d/2 (``interleaved=False``, the
"rotate half" form of GPT-NeoX and LLaMA code). The two are the same rotation up to a fixed permutation of
the channels. One ``Rotary`` may be shared by every layer of a model. Mixers apply it through
``heads.split_heads``.

Where each mechanism applies it (always to q and k, never to v):
- softmax, performer (global and local heads), nystrom, shaped: to q and k before the scores;
- linformer: to q and k before the sequence projection of the keys (positions no longer exist after it);
- linear (token form): to q and k before the feature map phi.
Nystrom pads the sequence at the front; ``start`` lets it rotate only the real tokens, which then keep
positions 0..n-1 (the padding rows are zero and stay unrotated). The authors' ViN-RoPE script rotates the
padded sequence instead (the class token then sits at the padding's length); ``NystromAttention`` offers that
as ``rope_over_padding=True``.
"""
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim_head, seq_len, *, base=10000.0, interleaved=True):
        super().__init__()
        if dim_head % 2:
            raise ValueError(f"RoPE needs an even dim_head, got {dim_head}")
        self.interleaved = interleaved
        inv_freq = base ** (-torch.arange(0, dim_head, 2).float() / dim_head)
        angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
        angles = angles.repeat_interleave(2, dim=-1) if interleaved else torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def extra_repr(self):
        return f"dim_head={self.cos.shape[1]}, seq_len={self.cos.shape[0]}, interleaved={self.interleaved}"


def apply_rope(t, rotary, *, start=0):
    """Rotate (..., n, d) ``t``; tokens before index ``start`` are left as they are (front padding)."""
    if start:
        return torch.cat((t[..., :start, :], apply_rope(t[..., start:, :], rotary)), dim=-2)
    n = t.shape[-2]
    if n > rotary.cos.shape[0]:
        raise ValueError(f"RoPE tables cover {rotary.cos.shape[0]} tokens, input has {n}: build with seq_len >= {n}")
    if rotary.interleaved:
        x1, x2 = t[..., 0::2], t[..., 1::2]
        rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)
    else:
        x1, x2 = t.chunk(2, dim=-1)
        rotated = torch.cat((-x2, x1), dim=-1)
    return t * rotary.cos[:n].to(t.dtype) + rotated * rotary.sin[:n].to(t.dtype)
