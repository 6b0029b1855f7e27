"""Performer attention (FAVOR+, Choromanski et al.) as the ViX authors ran it, plus the variants the
documents name.

Kernels (``kernel=``):
- ``softmax`` (default, what the authors' scripts run): positive orthogonal random features for the
  softmax kernel, ``nb_features = int(dim_head * ln(dim_head))`` (110 for dim_head 32), as in
  performer-pytorch: phi(x) = m^-1/2 (exp(w.x - |x|^2/2 - c) + 1e-4) on x scaled by d^-1/4, the
  stabiliser c a max per query row and, for the keys, as ``key_max`` says (below).
- ``relu``: the generalized kernel with random projection and ReLU, as the ViX paper states:
  phi(x) = ReLU(W x d^-1/4) + 1e-3.
- ``relu-deterministic`` / ``exp-deterministic``: phi applied to the scaled queries and keys with no
  random projection (the `linattn` paper's deterministic ReLU and EXP variants). The EXP features are stabilised by
  constants that cancel in the normalisation, so the output is exactly that of exp(q.k / sqrt(d)).
The projection is a buffer (not a parameter); ``feature_redraw_interval=N`` redraws it every N training
calls, ``None`` keeps it fixed as in the authors' code.

The keys' stabiliser of the softmax kernel (``key_max=``, ``KEY_MAX``): it cancels in the normalisation except
through the kernel's 1e-4, so the two readings are two functions (logits 2e-3 to 5e-3 apart at initialisation):
- ``per_head`` (default here, performer-pytorch's today): a max per (sample, head), detached, as is the queries'
  max per row; a sample's output is independent of the rest of its batch;
- ``global`` (the ViX and CXV authors' code, ``softmax_kernel`` of their model files: ``torch.max(data_dash)``):
  one max over the whole batch x heads x tokens x features tensor of the keys' projections, and neither it nor the
  queries' max per row detached (their kernel detaches none; only the gradients see that). A sample's output then
  depends on the other samples of its batch. The `vix` and `cxv` Performer models take it by default.

``local_heads=L`` makes the last L heads local-window heads (as performer-pytorch orders them): exact
softmax attention of each token over its own window of ``local_window`` tokens and the windows on either
side (look-around 1 backward, 1 forward), the sequence padded at the end to a multiple of the window and
the padding masked out. This is the paper's "local window 256" configuration; the authors' scripts set
``local_attn_heads=0``. (performer-pytorch's local heads also add their own rotary embedding and let
queries attend to the zero padding; ours do neither: use ``rope=`` for positions.)
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .heads import merge_heads, split_heads

FEATURES = {"softmax": "phi: positive orthogonal random features of the softmax kernel",  # each kernel's phi
            "relu": "phi: ReLU of an orthogonal random projection",
            "relu-deterministic": "phi: ReLU of q and k", "exp-deterministic": "phi: exp of q and k"}
KERNELS = tuple(FEATURES)
#: the keys' stabilisers of the softmax kernel (``key_max=``): what each is, and whose it is
KEY_MAX = {"per_head": "a max per (sample, head), detached (performer-pytorch)",
           "global": "one max over the whole batch, not detached (the ViX and CXV authors' code)"}


def check_key_max(key_max):
    """``key_max`` if it names a stabiliser of ``KEY_MAX``, else a ``ValueError`` naming both."""
    if key_max not in KEY_MAX:
        raise ValueError(f"key_max={key_max!r}: choose 'global' (the ViX and CXV authors' code) or 'per_head' "
                         "(performer-pytorch's)")
    return key_max


def orthogonal_gaussian(rows, cols, *, generator=None, device=None):
    """Rows drawn in orthogonal blocks of ``cols``, each row rescaled to a chi-distributed norm. On the meta device
    (a model's shapes alone: ``models.meta_model``) there is nothing to draw, and the shape is returned at once (torch
    draws and factorises meta tensors in Python: a third of the plan's model builds went there)."""
    if torch.empty(0, device=device).is_meta:
        return torch.empty(rows, cols, device=device)
    blocks = []
    for start in range(0, rows, cols):
        q, _ = torch.linalg.qr(torch.randn(cols, cols, generator=generator, device=device))
        blocks.append(q.T[: min(cols, rows - start)])
    norms = torch.randn(rows, cols, generator=generator, device=device).norm(dim=1)
    return norms[:, None] * torch.cat(blocks)


def softmax_features(x, projection, *, is_query, eps=1e-4, key_max="per_head"):
    """phi(x) = exp(w.x - |x|^2/2 - c) / sqrt(m) + eps / sqrt(m), x scaled by d^-1/4.

    c is a max per row for queries; for keys, per (batch, head) (``key_max="per_head"``: both maxima detached, as
    performer-pytorch has them) or one over the whole tensor (``"global"``: neither detached, as the ViX and CXV
    authors' kernel has them). It cancels in the normalisation except through ``eps``.
    """
    x = x * x.shape[-1] ** -0.25
    dash = x @ projection.T.to(x.dtype)
    diag = (x**2).sum(dim=-1, keepdim=True) / 2
    if check_key_max(key_max) == "global":
        shift = dash.amax(dim=-1, keepdim=True) if is_query else dash.amax()
    else:
        dims = (-1,) if is_query else (-1, -2)
        shift = dash.amax(dim=dims, keepdim=True).detach()
    return projection.shape[0] ** -0.5 * (torch.exp(dash - diag - shift) + eps)


def local_window_attention(q, k, v, window, *, scale=None, look_backward=1, look_forward=1, return_map=False):
    """Exact softmax attention of each token over its window and ``look_backward``/``look_forward``
    neighbouring windows (non-overlapping windows of ``window`` tokens, sequence padded at the end and
    the padding masked). q, k, v: (b, h, n, d). Returns (b, h, n, d), or the dense (b, h, n, n) map."""
    b, h, n, d = q.shape
    scale = d**-0.5 if scale is None else scale
    pad = -n % window
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    w = (n + pad) // window
    span = look_backward + 1 + look_forward
    bq = q.reshape(b, h, w, window, d) * scale

    def around(t):  # (b, h, w, window, d) -> (b, h, w, span * window, d), zero-padded at the ends
        t = F.pad(t.reshape(b, h, w, window, -1), (0, 0, 0, 0, look_backward, look_forward))
        return torch.cat([t[:, :, i:i + w] for i in range(span)], dim=3)

    bk, bv = around(k), around(v)
    pos = torch.arange(n + pad, device=q.device)
    key_pos = F.pad(pos.view(w, window), (0, 0, look_backward, look_forward), value=-1)
    key_pos = torch.cat([key_pos[i:i + w] for i in range(span)], dim=1)  # (w, span * window)
    invalid = (key_pos < 0) | (key_pos >= n)
    sim = (bq @ bk.transpose(-1, -2)).masked_fill(invalid[:, None, :], float("-inf"))
    attn = sim.softmax(dim=-1)
    if return_map:
        dense = attn.new_zeros(b, h, w, window, n + pad + 1)  # last column collects the masked slots
        index = torch.where(invalid, n + pad, key_pos)[None, None, :, None, :].expand(b, h, w, window, -1)
        dense.scatter_(-1, index, attn)
        return dense.reshape(b, h, n + pad, n + pad + 1)[:, :, :n, :n]
    out = attn @ bv
    return out.reshape(b, h, n + pad, d)[:, :, :n]


class FastAttention(nn.Module):
    """Kernelised attention: softmax(QK^T)V approximated by phi(Q) (phi(K)^T V), normalised."""

    mechanism = "Performer"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("Performer's phi(Q) phi(K)^T with rows normalised to sum 1 (random-feature, ReLU or "
                "deterministic exp kernel)")

    def __init__(self, *, dim_head, nb_features=None, kernel="softmax", feature_redraw_interval=None, kernel_eps=1e-3,
                 key_max="per_head"):
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"unknown Performer kernel {kernel!r}; choose one of {KERNELS}")
        self.kernel, self.kernel_eps, self.key_max = kernel, kernel_eps, check_key_max(key_max)
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
            return (softmax_features(q, self.projection, is_query=True, key_max=self.key_max),
                    softmax_features(k, self.projection, is_query=False, key_max=self.key_max))
        scale = q.shape[-1] ** -0.25
        q, k = q * scale, k * scale
        if self.kernel == "exp-deterministic":  # the shifts cancel between numerator and normaliser
            return (torch.exp(q - q.amax(dim=-1, keepdim=True).detach()),
                    torch.exp(k - k.amax(dim=(-1, -2), keepdim=True).detach()))
        if self.kernel == "relu":
            q, k = q @ self.projection.T.to(q.dtype), k @ self.projection.T.to(k.dtype)
        return self.kernel_fn(q) + self.kernel_eps, self.kernel_fn(k) + self.kernel_eps

    def attention_map(self, q, k):
        """(b, h, n, n): phi(Q) phi(K)^T with rows normalised to sum to 1 (the implied attention matrix)."""
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
    mechanism = "Performer"  # what the synthesis page groups it under (``report.claims.synthesis``)

    def __init__(self, *, dim, heads=4, dim_head=32, dropout=0.0, nb_features=None, kernel="softmax",
                 feature_redraw_interval=None, local_heads=0, local_window=256, qkv_bias=True, rope=None, seq_len=None,
                 key_max="per_head"):
        super().__init__()
        if not 0 <= local_heads <= heads:
            raise ValueError(f"local_heads must be between 0 and heads={heads}, got {local_heads}")
        if local_heads and local_window < 1:
            raise ValueError(f"local_window must be positive, got {local_window}")
        inner = heads * dim_head
        self.heads, self.rope = heads, rope
        self.local_heads, self.local_window = local_heads, local_window
        self.fast_attention = FastAttention(dim_head=dim_head, nb_features=nb_features, kernel=kernel,
                                            feature_redraw_interval=feature_redraw_interval, key_max=key_max)
        self.to_q = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_k = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_v = nn.Linear(dim, inner, bias=qkv_bias)
        self.to_out = nn.Linear(inner, dim)
        self.dropout = nn.Dropout(dropout)

    @property
    def map_description(self):
        """What ``attention_map`` is, with this layer's kernel."""
        phi = FEATURES[self.fast_attention.kernel]
        return (f"Performer's phi(Q) phi(K)^T with rows normalised to sum 1 ({phi}); local heads, where there are "
                "any, give their exact windowed softmax")

    def qkv(self, x):
        return split_heads(self.to_q(x), self.to_k(x), self.to_v(x), heads=self.heads, rope=self.rope)

    def attention_map(self, x):
        """(b, h, n, n), rows summing to 1: global heads phi(Q) phi(K)^T normalised; local heads their exact
        windowed softmax (zero outside the window)."""
        q, k, _ = self.qkv(x)
        g = self.heads - self.local_heads
        maps = []
        if g:
            maps.append(self.fast_attention.attention_map(q[:, :g], k[:, :g]))
        if self.local_heads:
            maps.append(local_window_attention(q[:, g:], k[:, g:], k[:, g:], self.local_window, return_map=True))
        return torch.cat(maps, dim=1) if len(maps) > 1 else maps[0]

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.local_heads:
            g = self.heads - self.local_heads
            outs = [self.fast_attention(q[:, :g], k[:, :g], v[:, :g])] if g else []
            outs.append(local_window_attention(q[:, g:], k[:, g:], v[:, g:], self.local_window))
            out = torch.cat(outs, dim=1) if len(outs) > 1 else outs[0]
        else:
            out = self.fast_attention(q, k, v)
        return self.dropout(self.to_out(merge_heads(out)))
