"""Nystromformer attention (Xiong et al.) as in lucidrains' nystrom-attention, used by ViX's ViN.

Landmarks are segment means of queries and keys; the softmax matrix is rebuilt as
softmax(Q Lk^T) pinv(softmax(Lq Lk^T)) softmax(Lq K^T), the pseudo-inverse by Moore-Penrose iterations;
a depthwise (kernel x 1) convolution over the values is added as a residual. The sequence is padded at
the front to a multiple of the landmark count and the padding cut off at the end (the padded tokens are
zero inputs, so their keys and values are zero: they take part in the softmaxes, as in the authors' code).

Two evaluation orders of the same product (``fused=``):
- ``True`` (default): out = softmax(Q Lk^T) [pinv(A2) (softmax(Lq K^T) V)], both softmax-times-matrix
  products through ``scaled_dot_product_attention``, so neither n x m factor is materialised (flash /
  memory-efficient kernels on a GPU);
- ``False``: the straightforward order of the reference code, (A1 pinv(A2)) (A3 V).
They agree to float rounding. Modules called (and so the paper counts) are the same either way.

The residual convolution (``TokenConv``, an ``nn.Conv2d``) can be evaluated two ways (``res_conv_impl=``),
with the same weights: ``"conv"`` runs it as a convolution,
``"toeplitz"`` multiplies the values by the banded n x n matrix that the filter defines, one per head
(T[i, j] = w[j - i + k // 2] for |j - i| <= k // 2, else 0), a plain matrix product that is exactly the
same linear map (odd k). ``"auto"`` (default) picks ``"toeplitz"`` for fp32 values on a GPU (odd k) and
``"conv"`` otherwise, by what tools/profile_nystrom.py measured on an H100 (64 x 1025 tokens, forward +
backward of the mixer): fp32 6.96 ms with the band against 7.73 ms with the convolution, bf16 6.29 ms
against 5.67 ms; on a CPU the band costs n / k times the convolution's arithmetic.
The pseudo-inverse iteration's c*I - Y steps are fused into batched matrix products (``baddbmm``), and its
backward is written by hand (``PinvIterations``, ``pinv_backward="manual"``, the default): the same exact
gradient as autograd's (``"autograd"``) in about 75 fewer operators per step at 6 iterations, for a GPU
step that is bound by kernel launches (``vixnb bench mixers`` counts them).
"""
from contextlib import nullcontext
from functools import cache, partial
from math import ceil

import torch.nn.functional as F
import torch
from einops import rearrange
from torch import nn
from torch.autograd.function import once_differentiable

from .heads import merge_heads, split_heads


PINV_BACKWARDS = ("manual", "autograd")  # PinvIterations' hand-written backward, or autograd's


def moore_penrose_pinv(x, iters=6, *, compiled=False, backward="manual"):
    """Iterative Moore-Penrose pseudo-inverse (Razavi et al., as in Nystromformer), batched over leading dims.

    z0 = x^T / (max row sum * max column sum) over the whole batch; z <- z (13I - xz(15I - xz(7I - xz))) / 4.
    The iteration runs in at least fp32, also under bf16/fp16 autocast (it amplifies rounding), and the
    result is cast back to the input's dtype. ``compiled``: on a GPU, run the iteration through
    ``torch.compile`` (True, or a mode such as "reduce-overhead", which replays it as a CUDA graph: its 6
    iterations are about 30 small products, and their backward about 50, each costing more to launch than
    to compute, and compilation alone fuses the additions but not the products); elsewhere it is ignored.
    ``backward``: ``"manual"`` (default) differentiates the iterations with ``PinvIterations``' hand-written
    backward, ``"autograd"`` lets autograd record them (the same gradient, in about 75 more operators).
    """
    if backward not in PINV_BACKWARDS:
        raise ValueError(f"pinv backward={backward!r}: use 'manual' or 'autograd'")
    dtype, device_type = x.dtype, x.device.type
    if compiled and device_type == "cuda":
        pinv = _compiled_pinv("default" if compiled is True else compiled)
    else:
        pinv = partial(_pinv, manual_backward=backward == "manual")
    with _no_autocast(device_type):
        return pinv(x.to(torch.promote_types(dtype, torch.float32)), iters).to(dtype)


def _no_autocast(device_type):
    return (torch.autocast(device_type, enabled=False) if device_type in ("cpu", "cuda")
            else nullcontext())  # not on "meta"


def _pinv(x, iters, *, manual_backward=False):
    shape, m = x.shape, x.shape[-1]
    x = x.reshape(-1, m, m)
    abs_x = x.abs()
    z = x.transpose(-1, -2) / (abs_x.sum(dim=-1).amax() * abs_x.sum(dim=-2).amax())
    # under torch.compile the iterations are traced as they are (the compiler derives and fuses the backward)
    if manual_backward and torch.is_grad_enabled() and x.requires_grad and not torch.compiler.is_compiling():
        return PinvIterations.apply(x, z, iters).reshape(shape)
    return _iterate(x, z, iters).reshape(shape)


def _iterate(x, z, iters, keep=None):
    """``iters`` steps z <- z (13I - Y (15I - Y (7I - Y))) / 4, Y = x z, on (B, m, m) batches; ``keep`` (a list)
    collects each step's z, Y, E = 7I - Y, P = 15I - Y E and Q = 13I - Y P for ``PinvIterations``' backward."""
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    eye7, eye13, eye15 = 7 * eye, 13 * eye, 15 * eye
    for _ in range(iters):
        y = torch.bmm(x, z)
        e = eye7 - y
        p = torch.baddbmm(eye15, y, e, alpha=-1)  # 15I - Y E
        q = torch.baddbmm(eye13, y, p, alpha=-1)  # 13I - Y P
        if keep is not None:
            keep += [z, y, e, p, q]
        z = torch.baddbmm(z, z, q, beta=0, alpha=0.25)  # z Q / 4
    return z


class PinvIterations(torch.autograd.Function):
    """The iteration z <- z Q / 4, Q = 13I - Y P, P = 15I - Y E, E = 7I - Y, Y = x z, run ``iters`` times from
    ``z`` (batched (B, m, m)), with a hand-written backward: the exact gradient of these iterations (not the
    implicit gradient of a true inverse, which six iterations do not reach for ill-conditioned landmark
    matrices), by the chain rule step by step in reverse:
    dQ = Z^T G / 4, dP = -Y^T dQ, dE = -Y^T dP, dY = -dE - dQ P^T - dP E^T, dx += dY Z^T, dZ = G Q^T / 4 + x^T dY
    (computed transposed, so that no factor needs a transposed view). That is 8 batched products per step
    (scalars folded into ``baddbmm``) where autograd dispatches about 20 operators (products plus the scaling,
    negation and accumulation of their gradients): the mixer is bound by kernel launches on a GPU (issue 4).
    Values equal autograd's to float rounding (tests/test_attention.py)."""

    @staticmethod
    def forward(ctx, x, z, iters):
        saved = []
        z = _iterate(x, z, iters, keep=saved)
        ctx.save_for_backward(x, *saved)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, *saved = ctx.saved_tensors
        with _no_autocast(x.device.type):  # in the forward's precision also when backward runs under autocast
            return PinvIterations._backward(x, saved, g.to(x.dtype))

    @staticmethod
    def _backward(x, saved, g):
        # transposed gradients (gt = dL/dz^T ...): every product then takes the saved factors as they are, no
        # transposed views: dQ^T = G^T Z / 4, dP^T = -dQ^T Y, dE^T = -dP^T Y, dY^T = -dE^T - P dQ^T - E dP^T,
        # dx^T += Z dY^T, dZ^T = Q G^T / 4 + dY^T x
        gt, dxt = g.transpose(-1, -2), torch.zeros_like(x)
        for i in reversed(range(0, len(saved), 5)):
            z, y, e, p, q = saved[i:i + 5]
            dqt = torch.baddbmm(gt, gt, z, beta=0, alpha=0.25)
            dpt = torch.baddbmm(dqt, dqt, y, beta=0, alpha=-1)
            det = torch.baddbmm(dpt, dpt, y, beta=0, alpha=-1)
            dyt = torch.baddbmm(det, p, dqt, beta=-1, alpha=-1).baddbmm_(e, dpt, alpha=-1)
            dxt.baddbmm_(z, dyt)
            gt = torch.baddbmm(gt, q, gt, beta=0, alpha=0.25).baddbmm_(dyt, x)
        return dxt.transpose(-1, -2), gt.transpose(-1, -2), None


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # of torch.compile


@cache
def _compiled_pinv(mode):
    return torch.compile(_pinv, mode=None if mode == "default" else mode, dynamic=False, fullgraph=True)


def banded_toeplitz(weight, n):
    """(heads, n, n) matrices T with T[i, j] = weight[h, j - i + k // 2] inside the band, 0 outside: T @ v is
    the zero-padded cross-correlation of v with ``weight`` (heads, k), odd k, along the token axis.

    Built as sliding windows over the zero-padded taps (a strided view, then one copy), so the backward pass
    sums windows (``unfold``'s gather kernel) instead of scattering n^2 gradients onto k taps with atomics."""
    k = weight.shape[-1]
    side = n - 1 - k // 2
    if side >= 0:
        line = F.pad(weight, (side, side))  # (heads, 2n - 1): line[n - 1 + t] = weight[t + k // 2]
    else:  # fewer tokens than the kernel reaches: only the central 2n - 1 taps touch them
        line = weight[:, -side:k + side]
    return line.unfold(-1, n, 1).flip(-2)  # window a holds line[a .. a + n - 1]; row i is window n - 1 - i


class TokenConv(nn.Conv2d):
    """The depthwise (k x 1) convolution over the tokens of (b, heads, n, d) values, as ``nn.Conv2d`` (same
    weights, same module for counting hooks), evaluated as a convolution or as a banded matrix product
    (``impl``: "conv", "toeplitz", or "auto" = "toeplitz" for fp32 values on a GPU, else "conv")."""

    def __init__(self, heads, kernel, *, impl="auto"):
        if impl not in ("auto", "conv", "toeplitz"):
            raise ValueError(f"res_conv_impl={impl!r}: use 'auto', 'conv' or 'toeplitz'")
        if impl == "toeplitz" and kernel % 2 == 0:
            raise ValueError(f"res_conv_impl='toeplitz' needs an odd residual_conv_kernel (got {kernel}); use 'conv'")
        super().__init__(heads, heads, (kernel, 1), padding=(kernel // 2, 0), groups=heads, bias=False)
        self.impl = impl

    def forward(self, v):
        impl = self.impl
        if impl == "auto":
            fp32_gpu = v.device.type == "cuda" and v.dtype == torch.float32
            impl = "toeplitz" if fp32_gpu and self.kernel_size[0] % 2 else "conv"
        if impl == "conv":
            return super().forward(v)
        b, _, n, _ = v.shape
        band = banded_toeplitz(self.weight[:, 0, :, 0], n).to(v.dtype)
        # one (n x n) @ (n x b*d) product per head: the band's gradient is summed over the batch inside it
        out = band @ rearrange(v, "b h n d -> h n (b d)")
        return rearrange(out, "h n (b d) -> b h n d", b=b)


class NystromAttention(nn.Module):
    mechanism = "Nyströmformer"  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("Nystromformer's factor product softmax(Q L_k^T) pinv(softmax(L_q L_k^T)) softmax(L_q K^T) "
                "(L: segment-mean landmarks, pinv by Moore-Penrose iterations) on the real tokens; rows sum to "
                "about 1 (less where the sequence is front-padded), entries can be negative; the residual "
                "conv over the values is not in it")

    def __init__(self, *, dim, heads=4, dim_head=32, num_landmarks=64, pinv_iterations=6, residual=True,
                 residual_conv_kernel=33, dropout=0.0, rope=None, seq_len=None, fused=True, res_conv_impl="auto",
                 compile_pinv=False, pinv_backward="manual", rope_over_padding=False):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.rope, self.fused = heads, dim_head**-0.5, rope, fused
        self.num_landmarks, self.pinv_iterations, self.compile_pinv = num_landmarks, pinv_iterations, compile_pinv
        if compile_pinv not in (False, True, *COMPILE_MODES):
            raise ValueError(f"compile_pinv={compile_pinv!r}: use False, True or one of {', '.join(COMPILE_MODES)}")
        if pinv_backward not in PINV_BACKWARDS:
            raise ValueError(f"pinv_backward={pinv_backward!r}: use 'manual' or 'autograd'")
        self.pinv_backward, self.rope_over_padding = pinv_backward, rope_over_padding
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout))
        self.residual = residual
        if residual:
            self.res_conv = TokenConv(heads, residual_conv_kernel, impl=res_conv_impl)

    def qkv_landmarks(self, x):
        """Pad at the front, project; return q (scaled), k, v (b, h, N, d) and the landmarks (b, h, m, d)."""
        n, m = x.shape[1], self.num_landmarks
        pad = -n % m
        if pad:
            x = F.pad(x, (0, 0, pad, 0))
        # real tokens keep positions 0..n-1 under RoPE and the zero padding stays zero; or (the authors' ViN-RoPE)
        # the padded sequence is rotated from its first row, so the real tokens take positions pad..pad+n-1
        start = 0 if self.rope_over_padding else pad
        q, k, v = split_heads(*self.to_qkv(x).chunk(3, dim=-1), heads=self.heads, rope=self.rope, start=start)
        q = q * self.scale
        b, h, length, d = q.shape
        l = ceil(n / m)
        q_land = q.reshape(b, h, length // l, l, d).mean(dim=-2)
        k_land = k.reshape(b, h, length // l, l, d).mean(dim=-2)
        return q, k, v, q_land, k_land

    def _pinv(self, attn2):
        return moore_penrose_pinv(attn2, self.pinv_iterations, compiled=self.compile_pinv, backward=self.pinv_backward)

    def factors(self, x):
        """(attn1, pinv(attn2), attn3, v) for the front-padded sequence."""
        q, k, v, q_land, k_land = self.qkv_landmarks(x)
        attn1 = (q @ k_land.transpose(-1, -2)).softmax(dim=-1)
        attn2 = (q_land @ k_land.transpose(-1, -2)).softmax(dim=-1)
        attn3 = (q_land @ k.transpose(-1, -2)).softmax(dim=-1)
        return attn1, self._pinv(attn2), attn3, v

    def attention_map(self, x):
        """(b, h, n, n): the product of the three Nystrom factors restricted to the real tokens. Because the
        padded tokens' values are zero, this is exactly the operator applied to the values (the residual
        conv aside); its rows sum to about 1 over the padded sequence, so slightly less here when padded."""
        n = x.shape[1]
        a1, a2_inv, a3, _ = self.factors(x)
        return (a1 @ a2_inv @ a3)[..., -n:, -n:]

    def exact_softmax_map(self, x):
        """(b, h, n, n): softmax(Q K^T / sqrt(d)) of the real tokens' queries (scaled already) and keys, the map
        ``attention_map`` approximates."""
        n = x.shape[1]
        q, k, *_ = self.qkv_landmarks(x)
        return (q[..., -n:, :] @ k[..., -n:, :].transpose(-1, -2)).softmax(dim=-1)

    def forward(self, x):
        n = x.shape[1]
        if self.fused:
            q, k, v, q_land, k_land = self.qkv_landmarks(x)
            attn2 = (q_land @ k_land.transpose(-1, -2)).softmax(dim=-1)
            attn2_inv = self._pinv(attn2)
            context = F.scaled_dot_product_attention(q_land, k, v, scale=1.0)  # softmax(Lq K^T) V: (b, h, m, d)
            out = F.scaled_dot_product_attention(q, k_land, attn2_inv @ context, scale=1.0)
        else:
            attn1, attn2_inv, attn3, v = self.factors(x)
            out = (attn1 @ attn2_inv) @ (attn3 @ v)
        if self.residual:
            out = out + self.res_conv(v)
        out = self.to_out(merge_heads(out))
        return out[:, -n:]
