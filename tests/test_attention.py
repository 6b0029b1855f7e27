"""Checks of the token mixers in ``vixnb.layers`` (issue 4).

Exactness where the math is exact, the Performer's approximation trend, parity with the libraries the
authors adapted (weights copied across; skipped when those test-only libraries are absent), attention
maps and rollout, gradients, option grids, and the benchmark's plumbing. Small shapes throughout.
"""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from vixnb import layers as A
from vixnb.layers.linear import ImageLinearAttention, linear_attention
from vixnb.layers.performer import KEY_MAX, FastAttention, local_window_attention, softmax_features
from vixnb.layers.blocks import PreNorm

B, N, DIM, HEADS, DH = 2, 65, 32, 4, 8


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def x_input(n=N, dtype=torch.float32):
    return torch.randn(B, n, DIM, dtype=dtype)


def paper_count(module, *inputs):
    """torchsummary's convention on a bare module: weight + bias of every called leaf, per call."""
    total = []

    def hook(m, _i, _o):
        total.append(sum(getattr(m, a).numel() for a in ("weight", "bias")
                         if isinstance(getattr(m, a, None), torch.Tensor)))

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if m is not module and not isinstance(m, (nn.Sequential, nn.ModuleList))]
    with torch.no_grad():
        module(*inputs)
    for h in handles:
        h.remove()
    return sum(total)


def true_count(module):
    return sum(p.numel() for p in module.parameters())


def heads_split(t, h=HEADS):
    return rearrange(t, "b n (h d) -> b h n d", h=h)


def heads_merge(t):
    return rearrange(t, "b h n d -> b n (h d)")


def exact_softmax(q, k, v, scale):
    return (q @ k.transpose(-1, -2) * scale).softmax(dim=-1) @ v


# ---------------------------------------------------------------- exactness


def test_softmax_fused_and_materialised_agree():
    m = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
    x = x_input()
    assert m.fused
    fused = m(x)
    m.fused = False
    torch.testing.assert_close(m(x), fused, atol=1e-6, rtol=1e-5)
    with A.fused_attn(m, True):
        assert m.fused
    assert not m.fused


def test_nystrom_with_one_landmark_per_token_is_softmax_attention():
    n = 48
    soft = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH).double()
    for fused in (True, False):
        nys = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=n, pinv_iterations=40,
                      residual=False, fused=fused).double()
        nys.load_state_dict(soft.state_dict())  # same names: to_qkv, to_out.0
        x = x_input(n, torch.float64) * 3  # peaked enough for a well-conditioned landmark matrix
        torch.testing.assert_close(nys(x), soft(x), atol=1e-7, rtol=1e-6)
        torch.testing.assert_close(nys.attention_map(x), soft.attention_map(x), atol=1e-7, rtol=1e-6)


def test_linformer_with_identity_projection_is_softmax_attention():
    lin = A.build("linformer", dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, k=N, share_kv=False, one_kv_head=False)
    with torch.no_grad():
        lin.proj_k.copy_(torch.eye(N))
        lin.proj_v.copy_(torch.eye(N))
    soft = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
    soft.load_state_dict({
        "to_qkv.weight": torch.cat([lin.to_q.weight, lin.to_k.weight, lin.to_v.weight]),
        "to_out.0.weight": lin.to_out.weight, "to_out.0.bias": lin.to_out.bias,
    })
    x = x_input()
    torch.testing.assert_close(lin(x), soft(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lin.attention_map(x), soft.attention_map(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(lin.projected_attention_map(x), soft.attention_map(x), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("feature_map", ["elu", "softmax"])
def test_linear_attention_equals_its_closed_form(feature_map):
    m = A.build("linear", dim=DIM, heads=HEADS, dim_head=DH, feature_map=feature_map, eps=0.0).double()
    x = x_input(dtype=torch.float64)
    q, k, v = (heads_split(t) for t in m.to_qkv(x).chunk(3, dim=-1))
    if feature_map == "elu":  # Katharopoulos: sim(q, k) = (elu(q)+1).(elu(k)+1), normalised over the keys
        sim = torch.einsum("bhid,bhjd->bhij", F.elu(q) + 1, F.elu(k) + 1)
        weights = sim / sim.sum(dim=-1, keepdim=True)
    else:  # efficient attention: softmax over channels (q) and over tokens (k), both scaled by d^-1/4
        s = DH**-0.25
        weights = torch.einsum("bhid,bhjd->bhij", (q * s).softmax(dim=-1), (k * s).softmax(dim=-2))
    naive = torch.einsum("bhij,bhjd->bhid", weights, v)
    torch.testing.assert_close(m(x), m.to_out(heads_merge(naive)), atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(m.attention_map(x), weights, atol=1e-10, rtol=1e-8)


def test_fnet_is_the_real_part_of_the_2d_dft():
    m = A.build("fnet", dim=DIM, heads=HEADS, dim_head=DH)
    x = x_input(dtype=torch.float64)

    def dft(n):
        i = torch.arange(n, dtype=torch.float64)
        return torch.exp(-2j * math.pi * torch.outer(i, i) / n)

    expected = (dft(N) @ x.to(torch.complex128) @ dft(DIM)).real  # DFT over tokens and over hidden
    torch.testing.assert_close(m(x), expected, atol=1e-9, rtol=1e-9)
    assert true_count(m) == 0
    with pytest.raises(NotImplementedError):
        m.attention_map(x)


def test_shaped_attention_closed_form():
    m = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="uniform")
    with torch.no_grad():
        m.alpha.fill_(0.3)
        m.beta.fill_(1.7)
    x = x_input()
    a = (heads_split(m.to_q(x)) @ heads_split(m.to_k(x)).transpose(-1, -2) * DH**-0.5).softmax(dim=-1)
    expected = 0.3 * x + 1.7 * heads_merge(a @ heads_split(x))
    torch.testing.assert_close(m(x), expected, atol=1e-6, rtol=1e-5)
    m.fused = False
    torch.testing.assert_close(m(x), expected, atol=1e-6, rtol=1e-5)
    amap = m.attention_map(x)
    torch.testing.assert_close(heads_merge(amap @ heads_split(x)), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(amap.sum(-1), torch.full((B, HEADS, N), 2.0), atol=1e-5, rtol=1e-5)
    assert true_count(m) == 2 * (DIM * HEADS * DH + HEADS * DH) + 2  # q, k and two scalars: no W_V, W_O


def test_shaped_centering_term():
    m = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="attention", centering=True)
    x = x_input()
    amap = m.attention_map(x)  # beta A - gamma / n with gamma = beta at init: rows sum to 0
    torch.testing.assert_close(amap.sum(-1), torch.zeros(B, HEADS, N), atol=1e-5, rtol=0)
    torch.testing.assert_close(m(x), heads_merge(amap @ heads_split(x)), atol=1e-5, rtol=1e-5)


# ------------------------------------------ Nystrom: the faster code against a straightforward reference


def reference_pinv(x, iters):
    eye = torch.eye(x.shape[-1], dtype=x.dtype)
    z = x.transpose(-1, -2) / (x.abs().sum(-1).max() * x.abs().sum(-2).max())
    for _ in range(iters):
        xz = x @ z
        z = 0.25 * z @ (13 * eye - xz @ (15 * eye - xz @ (7 * eye - xz)))
    return z


def reference_nystrom(m, x):
    """Nystromformer written out plainly: pad in front, segment-mean landmarks, three softmaxes, explicit I."""
    n, lm = x.shape[1], m.num_landmarks
    pad = (lm - n % lm) % lm
    xp = torch.cat([x.new_zeros(x.shape[0], pad, x.shape[2]), x], dim=1)
    q, k, v = (heads_split(t) for t in m.to_qkv(xp).chunk(3, dim=-1))
    q = q * m.scale
    seg = xp.shape[1] // lm
    ql = torch.stack([q[:, :, i * seg:(i + 1) * seg].mean(2) for i in range(lm)], dim=2)
    kl = torch.stack([k[:, :, i * seg:(i + 1) * seg].mean(2) for i in range(lm)], dim=2)
    a1 = torch.softmax(q @ kl.transpose(-1, -2), -1)
    a2 = torch.softmax(ql @ kl.transpose(-1, -2), -1)
    a3 = torch.softmax(ql @ k.transpose(-1, -2), -1)
    out = a1 @ reference_pinv(a2, m.pinv_iterations) @ a3 @ v
    if m.residual:
        w = m.res_conv.weight
        out = out + torch.nn.functional.conv2d(v, w, padding=(w.shape[2] // 2, 0), groups=w.shape[0])
    return m.to_out(heads_merge(out))[:, -n:]


@pytest.mark.parametrize("n,landmarks,fused,impl", [(65, 16, True, "conv"), (65, 16, False, "conv"),
                                                    (64, 16, True, "conv"), (33, 8, True, "conv"),
                                                    (65, 16, True, "toeplitz"), (65, 16, False, "toeplitz")])
def test_nystrom_matches_straightforward_reference(n, landmarks, fused, impl):
    m = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=landmarks, residual_conv_kernel=5,
                fused=fused, res_conv_impl=impl)
    x = x_input(n)
    torch.testing.assert_close(m(x), reference_nystrom(m, x), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("kernel,n", [(33, 70), (5, 9), (1, 4), (33, 10)])
def test_nystrom_residual_as_banded_matrix_equals_the_convolution(kernel, n):
    """The Toeplitz evaluation of the residual conv is the same linear map, values and gradients (float64)."""
    from vixnb.layers.nystrom import TokenConv

    torch.manual_seed(0)
    conv, band = TokenConv(3, kernel, impl="conv").double(), TokenConv(3, kernel, impl="toeplitz").double()
    band.load_state_dict(conv.state_dict())
    v = torch.randn(2, 3, n, 4, dtype=torch.float64, requires_grad=True)
    a, b = conv(v), band(v)
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    g = torch.randn_like(a)
    for ga, gb in zip(torch.autograd.grad(a, [v, conv.weight], g), torch.autograd.grad(b, [v, band.weight], g)):
        torch.testing.assert_close(ga, gb, atol=1e-10, rtol=0)


def test_nystrom_residual_impl_is_checked():
    with pytest.raises(ValueError, match="'auto', 'conv' or 'toeplitz'"):
        A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, res_conv_impl="fft")
    with pytest.raises(ValueError, match="odd residual_conv_kernel"):
        A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, residual_conv_kernel=4, res_conv_impl="toeplitz")


@pytest.mark.parametrize("iters", [0, 1, 6])
def test_pinv_hand_written_backward_is_autograds_gradient(iters):
    """PinvIterations' backward is the exact gradient of the iterations: equal to autograd's through the same
    iterations (float64, to rounding), for ill-conditioned landmark matrices where the iterations are far
    from a true inverse, and through the whole Nystrom mixer."""
    torch.manual_seed(0)
    x = torch.softmax(torch.randn(3, 2, 16, 16, dtype=torch.float64) * 4, dim=-1).requires_grad_()
    g = torch.randn(3, 2, 16, 16, dtype=torch.float64)
    outs = {}
    for backward in ("manual", "autograd"):
        z = A.moore_penrose_pinv(x, iters, backward=backward)
        outs[backward] = (z, *torch.autograd.grad(z, x, g))
    for a, b in zip(outs["manual"], outs["autograd"]):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-9)
    assert outs["manual"][1].abs().max() > 1  # a gradient that is not trivially small
    y = (torch.rand(2, 5, 5, dtype=torch.float64) + torch.eye(5)).requires_grad_()  # no ties in the norms
    assert torch.autograd.gradcheck(lambda a: A.moore_penrose_pinv(a, 3), (y,))


def test_pinv_hand_written_backward_keeps_fp32_under_autocast():
    """Its backward runs in the forward's precision (fp32) also when called inside an autocast region."""
    torch.manual_seed(0)
    x = torch.softmax(torch.randn(2, 8, 8), dim=-1).requires_grad_()
    g = torch.randn(2, 8, 8)
    (plain,) = torch.autograd.grad(A.moore_penrose_pinv(x, 6), x, g)
    z = A.moore_penrose_pinv(x, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (under,) = torch.autograd.grad(z, x, g)
    assert under.dtype == torch.float32
    torch.testing.assert_close(under, plain, atol=0, rtol=0)


def test_nystrom_pinv_backward_options_agree():
    torch.manual_seed(0)
    mixers = {b: A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=8, residual_conv_kernel=5,
                         pinv_backward=b).double() for b in ("manual", "autograd")}
    mixers["autograd"].load_state_dict(mixers["manual"].state_dict())
    x = torch.randn(2, 33, DIM, dtype=torch.float64)
    grads = {}
    for b, m in mixers.items():
        xb = x.clone().requires_grad_()
        m(xb).square().sum().backward()
        grads[b] = [xb.grad] + [p.grad for p in m.parameters()]
    for a, b in zip(grads["manual"], grads["autograd"]):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)
    with pytest.raises(ValueError, match="'manual' or 'autograd'"):
        A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, pinv_backward="implicit")
    with pytest.raises(ValueError, match="reduce-overhead"):
        A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, compile_pinv="cudagraphs")


def test_nystrom_hand_written_pinv_backward_dispatches_fewer_operators():
    from vixnb.bench import dispatched_ops

    shape = dict(device="cpu", dtype="fp32", tokens=65, dim=DIM, heads=HEADS, dim_head=DH)
    manual, autograd = (dispatched_ops("nystrom", {"num_landmarks": 16, "pinv_backward": b}, **shape)
                        for b in ("manual", "autograd"))
    assert manual["aten_ops_compute"] < autograd["aten_ops_compute"] - 60  # six iterations, > 10 fewer each


def test_pinv_without_identity_matches_reference():
    x = torch.softmax(torch.randn(3, 16, 16) * 2, dim=-1)
    torch.testing.assert_close(A.moore_penrose_pinv(x, 6), reference_pinv(x, 6), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- approximation


def test_performer_error_falls_as_features_grow():
    q, k, v = (torch.randn(2, 2, 128, 16) * 0.7 for _ in range(3))
    exact = exact_softmax(q, k, v, 16**-0.5)
    sizes, errors = (8, 32, 128, 512), []
    for m in sizes:
        draws = []
        for seed in range(4):
            torch.manual_seed(seed)
            fa = FastAttention(dim_head=16, nb_features=m)
            draws.append(((fa(q, k, v) - exact).norm() / exact.norm()).item())
        errors.append(sum(draws) / len(draws))
    assert all(a > b for a, b in zip(errors, errors[1:])), dict(zip(sizes, errors))
    assert errors[-1] < errors[0] / 3, dict(zip(sizes, errors))


def test_deterministic_exp_kernel_is_exact_exp_attention():
    q, k, v = (torch.randn(2, 2, 40, 8, dtype=torch.float64) for _ in range(3))
    fa = FastAttention(dim_head=8, kernel="exp-deterministic")
    s = 8**-0.25
    w = torch.exp(q * s) @ torch.exp(k * s).transpose(-1, -2)
    torch.testing.assert_close(fa(q, k, v), (w / w.sum(-1, keepdim=True)) @ v)


def test_feature_redraw_every_n_training_calls():
    m = A.build("performer", dim=DIM, heads=HEADS, dim_head=DH, feature_redraw_interval=2)
    x = x_input()
    seen = [m.fast_attention.projection.clone()]
    for _ in range(5):
        m(x)
        seen.append(m.fast_attention.projection.clone())
    changed = [not torch.equal(a, b) for a, b in zip(seen, seen[1:])]
    assert changed == [False, False, True, False, True]
    m.eval()
    before = m.fast_attention.projection.clone()
    for _ in range(4):
        m(x)
    assert torch.equal(before, m.fast_attention.projection)
    fixed = A.build("performer", dim=DIM, heads=HEADS, dim_head=DH)
    before = fixed.fast_attention.projection.clone()
    for _ in range(4):
        fixed(x)
    assert torch.equal(before, fixed.fast_attention.projection)
    assert A.build("performer", dim=128, heads=4, dim_head=32).fast_attention.nb_features == 110


# ---------------------------------------------------------------- performer local heads


def dense_local_reference(q, k, v, window):
    n = q.shape[-2]
    block = torch.arange(n) // window
    allowed = (block[:, None] - block[None, :]).abs() <= 1
    sim = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).masked_fill(~allowed, float("-inf"))
    return sim.softmax(-1) @ v, sim.softmax(-1)


@pytest.mark.parametrize("n,window", [(64, 16), (65, 16), (10, 16), (33, 1)])
def test_local_window_attention_matches_dense_banded_softmax(n, window):
    q, k, v = (torch.randn(2, 3, n, 8) for _ in range(3))
    out, amap = dense_local_reference(q, k, v, window)
    torch.testing.assert_close(local_window_attention(q, k, v, window), out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(local_window_attention(q, k, v, window, return_map=True), amap, atol=1e-6, rtol=1e-5)


def test_performer_local_heads_split():
    m = A.build("performer", dim=DIM, heads=HEADS, dim_head=DH, local_heads=1, local_window=16)
    x = x_input()
    q, k, v = m.qkv(x)
    glob = m.fast_attention(q[:, :3], k[:, :3], v[:, :3])
    loc, _ = dense_local_reference(q[:, 3:], k[:, 3:], v[:, 3:], 16)
    expected = m.to_out(heads_merge(torch.cat([glob, loc], dim=1)))
    torch.testing.assert_close(m(x), expected, atol=1e-6, rtol=1e-5)
    amap = m.attention_map(x)
    assert amap.shape == (B, HEADS, N, N)
    assert (amap[:, 3, 0, 32:] == 0).all()  # outside the first token's window and its neighbour
    with pytest.raises(ValueError):
        A.build("performer", dim=DIM, heads=HEADS, dim_head=DH, local_heads=5)


# ---------------------------------------------------------------- maps: the map is the operator


def _values(m, x):
    return heads_split(m.to_qkv(x).chunk(3, dim=-1)[2])


@pytest.mark.parametrize("mixer,options", [
    ("softmax", {}), ("linear", {}), ("linear", {"feature_map": "softmax"}),
    ("performer", {}), ("performer", {"kernel": "relu"}), ("performer", {"kernel": "relu-deterministic"}),
    ("performer", {"kernel": "exp-deterministic"}), ("performer", {"local_heads": 2, "local_window": 16}),
    ("nystrom", {"num_landmarks": 16, "residual": False}), ("nystrom", {"num_landmarks": 13, "residual": False}),
    ("linformer", {"k": 16}), ("linformer", {"k": 16, "share_kv": False, "one_kv_head": False}),
])
def test_attention_map_reproduces_the_output(mixer, options):
    m = A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, **options).double()
    x = x_input(dtype=torch.float64)
    if mixer == "performer":
        v = heads_split(m.to_v(x))
        amap = m.attention_map(x)
        expected = m.to_out(heads_merge(amap @ v))
    elif mixer == "linformer":
        vals = m.to_k(x) if m.share_kv else m.to_v(x)
        v = rearrange(vals, "b n (h d) -> b h n d", d=DH)
        amap = m.attention_map(x)
        expected = m.to_out(heads_merge(amap @ v))
        assert m.projected_attention_map(x).shape == (B, HEADS, N, m.k)
    else:
        amap = m.attention_map(x)
        expected = m.to_out(heads_merge(amap @ _values(m, x)))
    assert amap.shape == (B, HEADS, N, N)
    torch.testing.assert_close(m(x), expected, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("mixer,options", [
    ("softmax", {}), ("linear", {}), ("linear", {"feature_map": "softmax"}), ("performer", {}),
    ("performer", {"kernel": "relu"}), ("performer", {"local_heads": 4, "local_window": 8}),
    ("linformer", {"k": 16}), ("shaped", {}), ("nystrom", {"num_landmarks": 13}),
])
def test_attention_map_rows_sum_to_one(mixer, options):
    n = 65
    m = A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=n, **options)
    # Linformer: its softmax over the projected keys (the token-space operator's rows need not sum to 1)
    amap = (m.projected_attention_map if mixer == "linformer" else m.attention_map)(x_input(n))
    assert amap.shape[:3] == (B, HEADS, n)
    tol = 2e-2 if mixer == "nystrom" else 1e-5  # Nystrom's rows sum to 1 only approximately
    torch.testing.assert_close(amap.sum(-1), torch.ones(B, HEADS, n), atol=tol, rtol=0)
    if mixer != "nystrom":
        assert (amap >= 0).all()


@pytest.mark.parametrize("mixer", ["fnet", "mlp"])
def test_mixers_without_a_map_say_so(mixer):
    m = A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=N)
    with pytest.raises(NotImplementedError, match="no attention map"):
        m.attention_map(x_input())


# ---------------------------------------------------------------- heads


def test_split_heads_and_merge_heads():
    q, k, v = torch.randn(B, N, HEADS * DH), torch.randn(B, N, DH), torch.randn(B, N, DH)
    sq, sk, sv = A.split_heads(q, k, v, heads=HEADS, kv_heads=1)
    assert sq.shape == (B, HEADS, N, DH) and sk.shape == sv.shape == (B, 1, N, DH)
    torch.testing.assert_close(A.merge_heads(sq), q)
    torch.testing.assert_close(sq, heads_split(q))
    rope = A.Rotary(DH, N)
    rq, rk, rv = A.split_heads(q, q, q, heads=HEADS, rope=rope, start=3)
    torch.testing.assert_close(rq, A.apply_rope(heads_split(q), rope, start=3))
    torch.testing.assert_close(rk, rq)
    torch.testing.assert_close(rv, heads_split(q))  # values are never rotated


# ---------------------------------------------------------------- one switch between fused and materialising


def test_fused_attn_switches_every_mixer_with_both_paths():
    mixers = nn.ModuleList([A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH),
                            A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, fused=False),
                            A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=16),
                            A.build("performer", dim=DIM, heads=HEADS, dim_head=DH)])
    assert [A.has_both_paths(m) for m in mixers] == [True, True, True, False]
    with A.fused_attn(mixers, False):
        assert [m.fused for m in mixers[:3]] == [False, False, False]
    assert [m.fused for m in mixers[:3]] == [True, False, True]  # restored
    with A.fused_attn(mixers, True):
        assert all(m.fused for m in mixers[:3])
    assert not hasattr(mixers[3], "fused")


def test_materialised_softmax_goes_through_its_softmax_module():
    m = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
    seen = []
    m.attend.register_forward_hook(lambda _m, _i, out: seen.append(out.shape))
    m(x_input())
    assert seen == []
    with A.fused_attn(m, False):
        m(x_input())
    assert seen == [(B, HEADS, N, N)]


# ---------------------------------------------------------------- RoPE


def test_rope_offset_and_relative_positions():
    rope = A.Rotary(DH, 32)
    t = torch.randn(2, HEADS, 20, DH)
    padded = torch.cat([torch.zeros(2, HEADS, 5, DH), t], dim=2)
    torch.testing.assert_close(A.apply_rope(padded, rope, start=5)[:, :, 5:], A.apply_rope(t, rope))
    # scores depend only on the offset between positions
    q, k = torch.randn(DH), torch.randn(DH)
    rq, rk = (A.apply_rope(v.expand(1, 1, 32, DH), rope)[0, 0] for v in (q, k))
    torch.testing.assert_close(rq[3] @ rk[1], rq[13] @ rk[11], atol=1e-5, rtol=1e-5)



@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_preserves_norms_and_position_zero_is_the_identity(interleaved):
    rope = A.Rotary(DH, 50, interleaved=interleaved)
    t = torch.randn(2, HEADS, 50, DH, dtype=torch.float64)
    rotated = A.apply_rope(t, rope)
    torch.testing.assert_close(rotated.norm(dim=-1), t.norm(dim=-1))
    torch.testing.assert_close(rotated[:, :, 0], t[:, :, 0])
    assert not torch.allclose(rotated[:, :, 1:], t[:, :, 1:])
    # q . k depends only on the offset between the two positions, at every offset
    q, k = torch.randn(DH, dtype=torch.float64), torch.randn(DH, dtype=torch.float64)
    rq, rk = (A.apply_rope(v.expand(1, 1, 50, DH), rope)[0, 0] for v in (q, k))
    scores = rq @ rk.T  # scores[i, j] = f(i - j)
    for offset in (-7, 0, 3, 20):
        diagonal = torch.diagonal(scores, offset=-offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-6, rtol=1e-6)  # fp32 tables


def test_rope_pairs_adjacent_channels_at_roformer_frequencies():
    """Interleaved (the default, RoFormer's and the ViX authors' rotate_every_two): channels 2j and 2j+1 turn by
    position x 10000^(-2j/d); rotate-half pairs channel j with j + d/2 at the same frequencies."""
    d, n = 8, 6
    t = torch.randn(n, d, dtype=torch.float64)
    expected = t.clone()
    for pos in range(n):
        for j in range(d // 2):
            angle = torch.tensor(pos * 10000.0 ** (-2 * j / d), dtype=torch.float64)
            x, y = t[pos, 2 * j], t[pos, 2 * j + 1]
            expected[pos, 2 * j], expected[pos, 2 * j + 1] = (x * angle.cos() - y * angle.sin(),
                                                              x * angle.sin() + y * angle.cos())
    torch.testing.assert_close(A.apply_rope(t, A.Rotary(d, n).double()), expected)
    half = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))  # adjacent pairs -> (j, j + d/2)
    torch.testing.assert_close(A.apply_rope(t[:, half], A.Rotary(d, n, interleaved=False).double()), expected[:, half])


def test_nystrom_rope_over_padding_is_the_authors_form():
    """rope_over_padding=True rotates the front-padded sequence from its first row (the authors' ViN-RoPE): the
    real tokens then take positions pad..pad+n-1, which is the default form applied to a longer padded input."""
    n, m = 20, 8  # padded to 24: 4 zero rows in front
    rope = A.Rotary(DH, 32)
    ours = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=m, rope=rope)
    authors = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=m, rope=rope, rope_over_padding=True)
    authors.load_state_dict(ours.state_dict())
    x = x_input(n)
    q_ours, k_ours = ours.qkv_landmarks(x)[:2]
    q_auth, k_auth = authors.qkv_landmarks(x)[:2]
    unrotated = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=m)
    unrotated.load_state_dict(ours.state_dict())
    q_plain, k_plain = unrotated.qkv_landmarks(x)[:2]
    torch.testing.assert_close(q_auth, A.apply_rope(q_plain, rope))  # every padded row rotated from 0
    torch.testing.assert_close(q_ours[:, :, 4:], A.apply_rope(q_plain[:, :, 4:], rope))  # real tokens from 0
    assert not torch.allclose(authors(x), ours(x))

def test_rope_nystrom_padding_and_exactness():
    n = 40
    rope = A.Rotary(DH, n)
    soft = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH, rope=rope).double()
    nys = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=n, pinv_iterations=40, residual=False,
                  rope=rope).double()
    nys.load_state_dict(soft.state_dict())
    x = x_input(n, torch.float64) * 3
    torch.testing.assert_close(nys(x), soft(x), atol=1e-7, rtol=1e-6)
    padded = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=16, rope=A.Rotary(DH, N))
    assert padded(x_input()).shape == (B, N, DIM)  # 65 tokens padded to 80 with a 65-entry table
    with pytest.raises(ValueError, match="RoPE"):
        A.build("fnet", dim=DIM, heads=HEADS, dim_head=DH, rope=rope)


# ---------------------------------------------------------------- shaped initialisation


def test_shaped_init_schemes_and_stack():
    assert A.shaped_init("uniform") == (0.5, 0.5)
    assert A.shaped_init("identity") == (1.0, 0.0)
    assert A.shaped_init("attention") == (0.0, 1.0)
    stack = A.build_stack("shaped", 4, dim=DIM, heads=HEADS, dim_head=DH, init="dynamic")
    assert [round(m.alpha.item(), 6) for m in stack] == [1.0, 0.5, round(1 / 3, 6), 0.25]
    assert [round(m.beta.item(), 6) for m in stack] == [0.0, 0.5, round(2 / 3, 6), 0.75]
    inv = A.build_stack("shaped", 3, dim=DIM, heads=HEADS, dim_head=DH, init="inverse-dynamic")
    assert [round(m.beta.item(), 6) for m in inv] == [1.0, 0.5, round(1 / 3, 6)]
    assert all(m.depth == 3 for m in inv) and [m.layer_index for m in inv] == [1, 2, 3]
    assert len(A.build_stack("softmax", 2, dim=DIM, heads=HEADS, dim_head=DH)) == 2
    with pytest.raises(ValueError, match="layer_index"):
        A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="dynamic")
    with pytest.raises(ValueError):
        A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="dynamic", layer_index=5, depth=4)
    with pytest.raises(ValueError):
        A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="nope")
    m = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="identity")
    x = x_input()
    torch.testing.assert_close(m(x), x)  # identity init: the layer starts as the identity map


@pytest.mark.parametrize("fused", [True, False])
def test_hehofmann_init_is_the_centred_identity_and_its_beta_and_queries_take_gradient(fused):
    """He and Hofmann's code: alpha = beta = gamma = 1, zero queries, centred: the map alpha I + beta C - gamma C is
    exactly the identity at initialisation, yet beta (and the queries behind its softmax) take gradient. The blog's
    ``identity`` (alpha = 1, beta = 0) is the identity too, but its zero beta leaves the queries and keys none."""
    m = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="hehofmann", fused=fused)
    assert (m.alpha.item(), m.beta.item(), m.gamma.item()) == (1.0, 1.0, 1.0)
    assert not m.to_q.weight.any() and not m.to_q.bias.any() and m.to_k.weight.any()
    x = x_input().requires_grad_()
    torch.testing.assert_close(m.attention_map(x), torch.eye(N).expand(B, HEADS, N, N), atol=1e-6, rtol=0)
    out = m(x)
    torch.testing.assert_close(out, x, atol=1e-6, rtol=0)
    (out * torch.randn_like(out)).sum().backward()
    assert m.beta.grad.abs() > 1e-3 and m.gamma.grad.abs() > 1e-3 and m.to_q.weight.grad.abs().sum() > 0
    blog = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="identity", fused=fused)
    assert blog.gamma is None and (blog.alpha.item(), blog.beta.item()) == (1.0, 0.0)
    y = blog(x)
    torch.testing.assert_close(y, x, atol=1e-6, rtol=0)
    (y * torch.randn_like(y)).sum().backward()
    assert not blog.to_q.weight.grad.any() and not blog.to_k.weight.grad.any()


def test_hehofmann_init_through_the_blogs_simplified_vit():
    """``alpha_beta="hehofmann"`` gives every block of the simplified ViT the centred identity map at
    initialisation; an unknown scheme names every scheme with its label, the blog's 1/0 as its reading."""
    import vixnb

    model = vixnb.create_model("vit_small_simplified", width=32, depth=3, alpha_beta="hehofmann")
    mixers = [m for m in model.modules() if isinstance(m, A.ShapedAttention)]
    assert len(mixers) == 3 and A.alpha_beta(model) == [[1.0, 1.0]] * 3
    x = torch.randn(2, 65, 32)
    for m in mixers:
        torch.testing.assert_close(m(x), x, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=r"identity \(the blog's reading: 1 / 0\)"):
        A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH, init="He & Hofmann")


def test_transformer_passes_the_layer_position_to_every_mixer():
    from vixnb.layers.blocks import Transformer

    calls = []

    def make_mixer(**position):
        calls.append(position)
        return A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH, **position)

    Transformer(dim=DIM, depth=3, mlp_dim=64, make_mixer=make_mixer)
    assert calls == [{"layer_index": 1, "depth": 3}, {"layer_index": 2, "depth": 3}, {"layer_index": 3, "depth": 3}]


@pytest.mark.parametrize("init,alphas", [("dynamic", [1.0, 0.5, 1 / 3, 0.25]),
                                         ("inverse-dynamic", [0.0, 0.5, 2 / 3, 0.75])])
def test_layerwise_shaped_init_through_create_model(init, alphas):
    import vixnb

    model = vixnb.create_model("vit", mixer="shaped", mixer_options={"init": init})
    mixers = [layer[0].fn for layer in model.transformer.layers]
    assert all(isinstance(m, A.ShapedAttention) for m in mixers)
    assert [(m.layer_index, m.depth) for m in mixers] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    torch.testing.assert_close(torch.stack([m.alpha for m in mixers]), torch.tensor(alphas))
    torch.testing.assert_close(torch.stack([m.beta for m in mixers]), 1 - torch.tensor(alphas))


# ---------------------------------------------------------------- gradients and option grids


def _grid(**axes):
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*axes.values())]


ROPE = A.Rotary(DH, N)
GRIDS = {
    "softmax": _grid(fused=[True, False], rope=[None, ROPE]),
    "performer": _grid(kernel=["softmax", "relu", "relu-deterministic", "exp-deterministic"], local_heads=[0, 2, 4],
                       feature_redraw_interval=[None, 1], nb_features=[None, 12], qkv_bias=[True, False],
                       rope=[None, ROPE]),
    "linformer": _grid(k=[8, N], share_kv=[True, False], one_kv_head=[True, False], rope=[None, ROPE]),
    "nystrom": _grid(num_landmarks=[8, 13, N], residual=[True, False], fused=[True, False], pinv_iterations=[1, 6],
                     res_conv_impl=["auto", "toeplitz"], pinv_backward=["manual", "autograd"],
                     rope=[None, ROPE]),
    "linear": _grid(feature_map=["elu", "softmax"], qkv_bias=[False, True], rope=[None, ROPE]),
    "shaped": _grid(init=["uniform", "identity", "attention", "dynamic", "inverse-dynamic"], centering=[False, True],
                    fused=[True, False], qk_bias=[True, False], rope=[None, ROPE]),
    "fnet": [{}],
    "mlp": _grid(expansion_factor=[1, 2]),
}


def test_every_kind_has_a_grid():
    assert sorted(GRIDS) == A.list_mixers()


@pytest.mark.parametrize("mixer", sorted(GRIDS))
def test_every_option_combination_constructs_and_runs(mixer):
    x = x_input(N)
    for options in GRIDS[mixer]:
        # every mixer takes the layer position (a stack passes it to all); only shaped attention uses it
        extra = {"layer_index": 2, "depth": 4, **({"local_window": 16} if options.get("local_heads") else {})}
        m = A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, **options, **extra)
        y = m(x)
        assert y.shape == x.shape and torch.isfinite(y).all(), (mixer, options)
        if mixer not in ("fnet", "mlp"):
            assert torch.isfinite(m.attention_map(x)).all(), (mixer, options)


@pytest.mark.parametrize("mixer,options", [
    ("softmax", {}), ("softmax", {"fused": False}), ("performer", {}), ("performer", {"kernel": "relu"}),
    ("performer", {"kernel": "exp-deterministic"}), ("performer", {"local_heads": 2, "local_window": 16}),
    ("linformer", {"k": 16}), ("linformer", {"k": 16, "share_kv": False, "one_kv_head": False}),
    ("nystrom", {"num_landmarks": 16}), ("nystrom", {"num_landmarks": 16, "fused": False}),
    ("linear", {}), ("linear", {"feature_map": "softmax"}), ("shaped", {}), ("shaped", {"centering": True}),
    ("fnet", {}), ("mlp", {}), ("softmax", {"rope": ROPE}), ("nystrom", {"num_landmarks": 16, "rope": ROPE}),
])
def test_gradients_flow(mixer, options):
    m = A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, **options)
    x = x_input().requires_grad_()
    (m(x) ** 2).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if not name.startswith("proj_"):  # Linformer's projections get gradient too, checked below
            assert p.grad.abs().sum() > 0, name
    if mixer == "linformer":
        assert m.proj_k.grad.abs().sum() > 0


def test_image_linear_attention():
    m = ImageLinearAttention(DIM, heads=HEADS, dim_head=DH)
    x = torch.randn(2, DIM, 6, 7, requires_grad=True)
    y = m(x)
    assert y.shape == x.shape
    amap = m.attention_map(x)
    assert amap.shape == (2, HEADS, 42, 42)
    torch.testing.assert_close(amap.sum(-1), torch.ones(2, HEADS, 42), atol=1e-5, rtol=0)
    y.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    elu = ImageLinearAttention(DIM, heads=HEADS, dim_head=DH, kernel_size=1, feature_map="elu")
    q, k, v = elu.qkv(x)
    out = elu.to_out(rearrange(linear_attention(q, k, v, "elu"), "b h (y x) d -> b (h d) y x", y=6))
    torch.testing.assert_close(elu(x), out)
    # CLTV-5/4, dim 128: 3x3 vs 1x1 q/k/v/out convs differ by 4 * 128 * 128 * 8 per layer, i.e.
    # (3,966,154 - 1,344,714) / 5 layers (notes section 3)
    big, small = ImageLinearAttention(128, kernel_size=3), ImageLinearAttention(128, kernel_size=1)
    assert true_count(big) - true_count(small) == (3_966_154 - 1_344_714) // 5


# ---------------------------------------------------------------- parity with the authors' sources


def test_parity_vit_pytorch_attention():
    vit = pytest.importorskip("vit_pytorch.vit")
    ref = vit.Attention(DIM, heads=HEADS, dim_head=DH).eval()
    for fused in (True, False):
        ours = PreNorm(DIM, A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH, fused=fused))
        ours.load_state_dict({
            "norm.weight": ref.norm.weight, "norm.bias": ref.norm.bias, "fn.to_qkv.weight": ref.to_qkv.weight,
            "fn.to_out.0.weight": ref.to_out[0].weight, "fn.to_out.0.bias": ref.to_out[0].bias,
        })
        x = x_input()
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
        assert true_count(ours) == true_count(ref)
    assert paper_count(ours.fn, ours.norm(x)) == paper_count(ref, x) - 2 * DIM  # the LayerNorm lives in PreNorm


@pytest.mark.parametrize("kernel", ["softmax", "relu"])
def test_parity_performer_pytorch(kernel):
    pp = pytest.importorskip("performer_pytorch")
    ref = pp.SelfAttention(dim=DIM, heads=HEADS, dim_head=DH, nb_features=24, qkv_bias=True,
                           generalized_attention=kernel == "relu", kernel_fn=nn.ReLU()).eval()
    ours = A.build("performer", dim=DIM, heads=HEADS, dim_head=DH, nb_features=24, kernel=kernel, qkv_bias=True)
    mapping = {"fast_attention.projection": "fast_attention.projection_matrix"}
    state = ref.state_dict()
    ours.load_state_dict({k: state[mapping.get(k, k)] for k in ours.state_dict()
                          if k != "fast_attention.calls_since_redraw"}, strict=False)
    torch.testing.assert_close(ours.fast_attention.projection, ref.fast_attention.projection_matrix)
    x = x_input()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    assert true_count(ours) == true_count(ref)
    assert paper_count(ours, x) == paper_count(ref, x)


def _double_fast_attention(key_max, b, h, n=N):
    """Our ``FastAttention`` with ``key_max`` and performer-pytorch's, in float64, one projection, and (q, k, v) of
    shape (b, h, n, DH) that take gradients."""
    pp = pytest.importorskip("performer_pytorch")
    ref = pp.FastAttention(DH, nb_features=24).double()
    ours = FastAttention(dim_head=DH, nb_features=24, key_max=key_max).double()
    with torch.no_grad():
        ours.projection.copy_(ref.projection_matrix)
    qkv = [torch.randn(b, h, n, DH, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    return ours, ref, qkv


@pytest.mark.parametrize("key_max,b,h", [("per_head", 3, HEADS), ("per_head", 1, 1), ("global", 1, 1)])
def test_performer_key_max_is_performer_pytorchs_kernel_where_it_should_be(key_max, b, h):
    """``per_head`` is performer-pytorch's kernel on any batch, gradients included (both detach the maxima);
    ``global`` (the ViX and CXV authors' one max over the batch) is the same function on a batch of one with one
    head, where one max over everything is the max of the one (sample, head)."""
    ours, ref, (q, k, v) = _double_fast_attention(key_max, b, h)
    out, expected = ours(q, k, v), ref(q, k, v)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-12)
    if key_max == "per_head":
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        for g, e in zip(grads, torch.autograd.grad(expected.square().sum(), (q, k, v))):
            torch.testing.assert_close(g, e, atol=1e-12, rtol=1e-12)


def test_performer_global_key_max_differs_from_performer_pytorch_on_a_batch():
    """On a batch of several samples and heads the authors' global max is another function than performer-pytorch's
    per-head one (the kernel's 1e-4 does not cancel)."""
    ours, ref, (q, k, v) = _double_fast_attention("global", 2, HEADS)
    k.data[1] *= 3  # the second sample's keys hold the batch's max
    assert (ours(q, k, v) - ref(q, k, v)).abs().max() > 1e-4


@pytest.mark.parametrize("key_max", KEY_MAX)
def test_performer_global_key_max_makes_a_samples_output_depend_on_its_batch(key_max):
    """``global``: a sample's output changes with the other samples of its batch; ``per_head``: it does not."""
    fa = FastAttention(dim_head=DH, nb_features=24, key_max=key_max).double()
    q, k, v = (torch.randn(2, HEADS, N, DH, dtype=torch.float64) for _ in range(3))
    k[1] *= 3  # the other sample's keys hold the batch's max
    alone, in_batch = fa(q[:1], k[:1], v[:1]), fa(q, k, v)[:1]
    if key_max == "per_head":
        torch.testing.assert_close(alone, in_batch, atol=1e-12, rtol=1e-12)
    else:
        assert (alone - in_batch).abs().max() > 1e-4


def test_performer_global_key_max_takes_the_true_gradient_as_the_authors_kernel_does():
    """The authors' kernel detaches neither stabiliser, so its gradients are the derivative of its output: checked
    against finite differences (float64), with a kernel epsilon large enough that the maxima matter."""
    projection = torch.randn(6, 4, dtype=torch.float64)
    x = torch.randn(2, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    for is_query in (True, False):
        assert torch.autograd.gradcheck(
            lambda t, q=is_query: softmax_features(t, projection, is_query=q, eps=0.5, key_max="global"), (x,))


def test_performer_key_max_is_checked():
    with pytest.raises(ValueError, match="key_max='batch': choose 'global'"):
        FastAttention(dim_head=DH, key_max="batch")


def test_parity_performer_local_heads_core():
    la = pytest.importorskip("local_attention")
    ref = la.LocalAttention(window_size=16, causal=False, look_backward=1, look_forward=1, autopad=True,
                            use_rotary_pos_emb=False)
    q, k, v = (torch.randn(2, 2, 64, DH) for _ in range(3))  # a multiple of the window (padding differs, see doc)
    torch.testing.assert_close(local_window_attention(q, k, v, 16), ref(q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("share_kv,one_kv_head", [(True, True), (False, False), (False, True)])
def test_parity_linformer(share_kv, one_kv_head):
    lf = pytest.importorskip("linformer")
    ref = lf.LinformerSelfAttention(DIM, seq_len=N, k=16, heads=HEADS, dim_head=DH, one_kv_head=one_kv_head,
                                    share_kv=share_kv).eval()
    ours = A.build("linformer", dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, k=16, share_kv=share_kv,
                   one_kv_head=one_kv_head)
    ours.load_state_dict(ref.state_dict())  # same names: to_q, to_k, (to_v), proj_k, (proj_v), to_out
    x = x_input()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    assert true_count(ours) == true_count(ref)
    assert paper_count(ours, x) == paper_count(ref, x)


@pytest.mark.parametrize("n,landmarks", [(65, 16), (64, 16)])
def test_parity_nystrom_attention(n, landmarks):
    na = pytest.importorskip("nystrom_attention")
    ref = na.NystromAttention(dim=DIM, dim_head=DH, heads=HEADS, num_landmarks=landmarks, pinv_iterations=6,
                              residual=True, residual_conv_kernel=33).eval()
    for fused in (True, False):
        ours = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=landmarks, fused=fused)
        ours.load_state_dict(ref.state_dict())  # same names: to_qkv, to_out.0, res_conv
        x = x_input(n)
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
        _, ref_map = ref(x, return_attn=True)
        torch.testing.assert_close(ours.attention_map(x), ref_map[..., -n:, -n:], atol=1e-5, rtol=1e-5)
    assert true_count(ours) == true_count(ref)
    assert paper_count(ours, x) == paper_count(ref, x)


@pytest.mark.parametrize("kernel_size", [3, 1])
def test_parity_image_linear_attention(kernel_size):
    lat = pytest.importorskip("linear_attention_transformer.images")
    ref = lat.ImageLinearAttention(chan=DIM, kernel_size=kernel_size, padding=kernel_size // 2, key_dim=DH,
                                   value_dim=DH, heads=HEADS, norm_queries=True)
    ours = ImageLinearAttention(DIM, heads=HEADS, dim_head=DH, kernel_size=kernel_size)
    ours.load_state_dict(ref.state_dict())  # same names: to_q, to_k, to_v, to_out
    x = torch.randn(2, DIM, 6, 6)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    assert true_count(ours) == true_count(ref)


def test_vix_counts_unchanged():
    """The mixers' module structure still gives the ViX paper's counts (spot check; notes section 2)."""
    import vixnb

    for name, params in [("vit", 530_442), ("vip", 531_978), ("vil", 415_754), ("vin", 530_970), ("fnet", 267_786)]:
        assert vixnb.count_params(vixnb.create_model(name)) == params, name


# ---------------------------------------------------------------- benchmark plumbing


def test_bench_mixers_small():
    from vixnb.bench import bench_mixers
    from vixnb.cli.tables import mixers_table as format_table
    from vixnb.measure import sweep_mechanisms

    rows = bench_mixers(device="cpu", tokens=33, dim=16, heads=2, dim_head=8, batch=2, warmup=0, steps=1,
                        isolate=False, mechanisms=["nystrom", "fnet"])
    assert [r["mechanism"] for r in rows] == ["softmax (materialised)", "nystrom", "fnet"]
    assert rows[0]["ratio_vs_materialized_softmax"] == 1.0
    assert all(r["ms"] > 0 and r["peak_mb"] is None for r in rows)
    assert "nystrom" in format_table(rows)
    assert {m[1] for m in sweep_mechanisms()} == set(A.list_mixers())
    iso = bench_mixers(device="cpu", tokens=33, dim=16, heads=2, dim_head=8, batch=2, warmup=0, steps=1,
                       mechanisms=["softmax (fused)"])
    assert iso[0]["peak_mb"] is not None and iso[1]["ratio_vs_materialized_softmax"] > 0
