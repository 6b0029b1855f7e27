"""Performer attention (FAVOR+, Choromanski et al.) as the ViX authors ran it.

Kernels:
- ``softmax`` (default, what the authors' scripts run): positive orthogonal random features for the
  softmax kernel, ``nb_features = int(dim_head * ln(dim_head))`` (110 for dim_head 32).
- ``relu``: the generalized kernel with random projection and ReLU, as the ViX paper states.
- ``relu-deterministic`` / ``exp-deterministic``: phi applied to the (scaled) queries and keys with no
  random projection (seed 002's deterministic ReLU and EXP variants).
The projection is a buffer (not a parameter); ``feature_redraw_interval=N`` redraws it every N training
calls, ``None`` keeps it fixed as in the authors' code.
"""
import math

import torch
from einops import rearrange
from torch import nn

from .rope import apply_rope

KERNELS = ("softmax", "relu", "relu-deterministic", "exp-deterministic")


def orthogonal_gaussian(rows, cols, *, generator=None, device=None):
    """Rows drawn in orthogonal blocks of ``cols``, each row rescaled to a chi-distributed norm."""
    blocks = []
    for start in range(0, rows, cols):
        q, _ = torch.linalg.qr(torch.randn(cols, cols, generator=generator, device=device))
        blocks.append(q.T[: min(cols, rows - start)])
    norms = torch.randn(rows, cols, generator=generator, device=device).norm(dim=1)
    return norms[:, None] * torch.cat(blocks)


def softmax_features(x, projection, *, is_query, eps=1e-4):
    """phi(x) = exp(w.x - |x|^2/2) / sqrt(m), stabilised by a max (per row for queries, global for keys)."""
    x = x * x.shape[-1] ** -0.25
    dash = x @ projection.T.to(x.dtype)
    diag = (x**2).sum(dim=-1, keepdim=True) / 2
    shift = dash.amax(dim=-1, keepdim=True) if is_query else dash.amax()
    return projection.shape[0] ** -0.5 * (torch.exp(dash - diag - shift) + eps)


class FastAttention(nn.Module):
    """Kernelised attention: softmax(QK^T)V approximated by phi(Q) (phi(K)^T V), normalised."""

    def __init__(self, *, dim_head, nb_features=None, kernel="softmax", feature_redraw_interval=None, kernel_eps=1e-3):
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"unknown Performer kernel {kernel!r}; choose one of {KERNELS}")
        self.kernel, self.kernel_eps = kernel, kernel_eps
        self.nb_features = nb_features or int(dim_head * math.log(dim_head))
        self.dim_head, self.feature_redraw_interval = dim_head, feature_redraw_interval
        if kernel.startswith("relu"):
            self.kernel_fn = nn.ReLU()
        self.register_buffer("projection", orthogonal_gaussian(self.nb_features, dim_head))
        self.register_buffer("calls_since_redraw", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def redraw(self):
        self.projection.copy_(orthogonal_gaussian(self.nb_features, self.dim_head, device=self.projection.device))
        self.calls_since_redraw.zero_()

    def features(self, q, k):
        if self.kernel == "softmax":
            return softmax_features(q, self.projection, is_query=True), softmax_features(k, self.projection, is_query=False)
        scale = q.shape[-1] ** -0.25
        if self.kernel == "exp-deterministic":
            return torch.exp(q * scale), torch.exp(k * scale)
        if self.kernel == "relu":
            q, k = q @ self.projection.T.to(q.dtype), k @ self.projection.T.to(k.dtype)
        return self.kernel_fn(q * scale) + self.kernel_eps, self.kernel_fn(k * scale) + self.kernel_eps

    def attention_map(self, q, k):
        qf, kf = self.features(q, k)
        a = qf @ kf.transpose(-1, -2)
        return a / a.sum(dim=-1, keepdim=True)

    def forward(self, q, k, v):
        if self.training and self.feature_redraw_interval is not None:
            if self.calls_since_redraw >= self.feature_redraw_interval:
                self.redraw()
            self.calls_since_redraw += 1
        qf, kf = self.features(q, k)
        normaliser = qf @ kf.sum(dim=-2).unsqueeze(-1)
        return (qf @ (kf.transpose(-1, -2) @ v)) / normaliser


class PerformerAttention(nn.Module):
    def __init__(self, *, dim, heads=4, dim_head=32, dropout=0.0, nb_features=None, kernel="softmax",
                 feature_redraw_interval=None, local_heads=0, local_window=256, qkv_bias=True, rope=None, seq_len=None):
        super().__init__()
        if local_heads:
            raise NotImplementedError("local-window Performer heads are not implemented yet (issue 4); use local_heads=0")
        inner = heads * dim_head
        self.heads, self.rope = heads, rope
        self.fast_attention = FastAttention(dim_head=dim_head, nb_features=nb_features, kernel=kernel,
                                            feature_redraw_interval=feature_redraw_interval)
        self.to_q = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_k = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_v = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_out = nn.Linear(inner, dim)
        self.dropout = nn.Dropout(dropout)

    def qkv(self, x):
        q, k, v = (rearrange(f(x), "b n (h d) -> b h n d", h=self.heads) for f in (self.to_q, self.to_k, self.to_v))
        if self.rope is not None:
            q, k = apply_rope(q, self.rope), apply_rope(k, self.rope)
        return q, k, v

    def attention_map(self, x):
        q, k, _ = self.qkv(x)
        return self.fast_attention.attention_map(q, k)

    def forward(self, x):
        out = self.fast_attention(*self.qkv(x))
        return self.dropout(self.to_out(rearrange(out, "b h n d -> b n (h d)")))
