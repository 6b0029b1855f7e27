"""Linear attention: softmax(QK^T) replaced by a kernel phi(Q) phi(K)^T, evaluated right to left in O(n).

Feature maps (``feature_map=``):
- ``elu`` (default for the token form): Katharopoulos et al.'s "Transformers are RNNs",
  phi(x) = elu(x) + 1, out_i = phi(q_i) sum_j phi(k_j) v_j^T / (phi(q_i) . sum_j phi(k_j) + eps).
- ``softmax``: the efficient-attention form of lucidrains' linear-attention-transformer that the CXV
  authors' CLTV runs: q and k scaled by d^-1/4, softmax of q over its channels, softmax of k over the
  tokens; out = phi(Q) (phi(K)^T V), already normalised (every row of phi(Q) phi(K)^T sums to 1).

Two forms:
- ``LinearAttention``: the token form behind ``build("linear", ...)``, (b, n, dim) -> (b, n, dim), fused
  bias-free q/k/v Linear and an output Linear, as the other token mixers; RoPE rotates q and k before phi.
- ``ImageLinearAttention``: the image form of CLTV (the `cxv` paper), (b, c, h, w) -> (b, c, h, w), with
  convolutional q/k/v/out projections (with bias). ``kernel_size=3`` (padding 1) is the authors'
  repository (3,966,154 paper-convention parameters for CLTV-5/4); ``kernel_size=1`` gives the ~1.3 M
  parameters the paper states. Its defaults are those of the repository (softmax feature map,
  normalised queries).
"""
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .heads import merge_heads, split_heads

FEATURE_MAPS = ("elu", "softmax")


def linear_features(q, k, feature_map="elu", *, norm_queries=True):
    """phi(q), phi(k) for (..., n, d) queries and keys."""
    if feature_map == "elu":
        return F.elu(q) + 1, F.elu(k) + 1
    if feature_map == "softmax":
        scale = q.shape[-1] ** -0.25
        q, k = q * scale, k * scale
        return (q.softmax(dim=-1) if norm_queries else q), k.softmax(dim=-2)
    raise ValueError(f"unknown feature map {feature_map!r}; choose one of {FEATURE_MAPS}")


def linear_attention(q, k, v, feature_map="elu", *, eps=1e-6, norm_queries=True):
    """Non-causal linear attention of (b, h, n, d) q, k and (b, h, n, e) v, in O(n d e)."""
    qf, kf = linear_features(q, k, feature_map, norm_queries=norm_queries)
    out = qf @ (kf.transpose(-1, -2) @ v)
    if feature_map == "elu":
        out = out / (qf @ kf.sum(dim=-2).unsqueeze(-1) + eps)
    return out


def linear_attention_map(q, k, feature_map="elu", *, eps=1e-6, norm_queries=True):
    """(b, h, n, n): the normalised kernel product the output is made of (rows sum to 1, up to ``eps``)."""
    qf, kf = linear_features(q, k, feature_map, norm_queries=norm_queries)
    a = qf @ kf.transpose(-1, -2)
    return a / (a.sum(dim=-1, keepdim=True) + eps) if feature_map == "elu" else a


class LinearAttention(nn.Module):
    mechanism = "linear attention"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("linear attention's normalised kernel product phi(Q) phi(K)^T, phi = elu + 1 (feature map "
                "'softmax': softmax of q over channels times softmax of k over tokens); rows sum to 1")

    def __init__(self, *, dim, heads=4, dim_head=32, feature_map="elu", eps=1e-6, qkv_bias=False, dropout=0.0,
                 rope=None, seq_len=None):
        super().__init__()
        if feature_map not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map {feature_map!r}; choose one of {FEATURE_MAPS}")
        inner = heads * dim_head
        self.heads, self.feature_map, self.eps, self.rope = heads, feature_map, eps, rope
        self.to_qkv = nn.Linear(dim, inner * 3, bias=qkv_bias)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout))

    def qkv(self, x):
        return split_heads(*self.to_qkv(x).chunk(3, dim=-1), heads=self.heads, rope=self.rope)

    def attention_map(self, x):
        """(b, h, n, n): phi(Q) phi(K)^T, rows normalised to sum to 1."""
        q, k, _ = self.qkv(x)
        return linear_attention_map(q, k, self.feature_map, eps=self.eps)

    def forward(self, x):
        out = linear_attention(*self.qkv(x), self.feature_map, eps=self.eps)
        return self.to_out(merge_heads(out))


class ImageLinearAttention(nn.Module):
    """CLTV's linear attention on (b, dim, height, width) feature maps (not a token mixer: use directly)."""

    mechanism = "linear attention"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("CLTV's image linear attention over the feature map's pixels: softmax of q over channels "
                "times softmax of k over pixels; rows sum to 1")

    def __init__(self, dim, *, heads=4, dim_head=32, dim_out=None, kernel_size=3, feature_map="softmax",
                 norm_queries=True, eps=1e-6):
        super().__init__()
        if feature_map not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map {feature_map!r}; choose one of {FEATURE_MAPS}")
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same-size output), got {kernel_size}")
        inner, padding = heads * dim_head, kernel_size // 2
        self.heads, self.dim_head, self.feature_map, self.norm_queries, self.eps = (heads, dim_head, feature_map,
                                                                                     norm_queries, eps)
        self.to_q = nn.Conv2d(dim, inner, kernel_size, padding=padding)
        self.to_k = nn.Conv2d(dim, inner, kernel_size, padding=padding)
        self.to_v = nn.Conv2d(dim, inner, kernel_size, padding=padding)
        self.to_out = nn.Conv2d(inner, dim_out or dim, kernel_size, padding=padding)

    def qkv(self, x):
        """q, k, v as (b, heads, h*w, dim_head) token sequences (row-major over the image)."""
        tokens = (rearrange(f(x), "b c y x -> b (y x) c") for f in (self.to_q, self.to_k, self.to_v))
        return split_heads(*tokens, heads=self.heads)

    def attention_map(self, x):
        """(b, heads, h*w, h*w): the kernel product over the image's pixels (rows sum to 1 unless the
        softmax map runs with ``norm_queries=False``)."""
        q, k, _ = self.qkv(x)
        return linear_attention_map(q, k, self.feature_map, eps=self.eps, norm_queries=self.norm_queries)

    def forward(self, x):
        out = linear_attention(*self.qkv(x), self.feature_map, eps=self.eps, norm_queries=self.norm_queries)
        return self.to_out(rearrange(out, "b h (y x) d -> b (h d) y x", y=x.shape[-2]))
