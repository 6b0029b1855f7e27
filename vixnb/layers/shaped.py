"""Shaped attention of the simplified transformer block (He & Hofmann 2023), as the `shaped` paper uses it.

The attention matrix is reshaped to alpha * I + beta * softmax(Q K^T / sqrt(d)) and applied directly to
the input: there are no value or output projections (W_V = W_O = I), so the values of head j are the
input channels j*dim/heads .. (j+1)*dim/heads and the heads' outputs are concatenated back to dim
channels. alpha and beta are learnable scalars (shared by the heads of a layer), initialised by a named
scheme (``init=``, ``SCHEMES``):

- ``uniform``: alpha = beta = 0.5 (the `shaped` paper's experiments 1-3)
- ``identity``, the blog's reading: alpha = 1, beta = 0 (the `shaped` paper's experiment 4, which calls it He &
  Hofmann's; their code starts otherwise, ``hehofmann``)
- ``attention``: alpha = 0, beta = 1
- ``dynamic``: alpha_i = 1/i, beta_i = 1 - 1/i for layer i = 1..L (the `shaped` paper, experiment 5)
- ``inverse-dynamic``: alpha_i = 1 - 1/i, beta_i = 1/i (experiment 6)
- ``hehofmann``, He & Hofmann's code: alpha = beta = gamma = 1 with the centring term (below) always on, and the
  query projection's weights (and bias, where there is one) zero. The queries are then zero, the softmax is the
  uniform matrix C, and the centred map alpha I + beta C - gamma C is exactly the identity at initialisation, while
  beta multiplies a live matrix and takes gradient (the blog's ``identity`` has beta = 0 and keeps the softmax of
  random queries). Their gains are per head and their blocks have no biases; here the gains are shared by a layer's
  heads, and the query bias (which the blog's counts give it) starts at zero.

The layer-wise schemes need ``layer_index`` (1-based) and accept ``depth`` (checked: 1 <= i <= depth);
the ``Transformer`` (``layers.blocks``), ``layers.build_stack`` and ``layers.build(..., layer_index=, depth=)``
pass both, so ``create_model("vit", mixer="shaped", mixer_options={"init": "dynamic"})`` gives alpha_i = 1/i.
Explicit ``alpha=``/``beta=`` override the scheme. ``centering=True`` adds He & Hofmann's third term,
minus gamma * C with C the uniform 1/T matrix and gamma initialised to beta (the `shaped` paper leaves it out;
off by default, always on under ``hehofmann``). ``fused=True`` (default) mixes through
``scaled_dot_product_attention``, ``fused=False`` forms the softmax matrix (``layers.fused_attn`` switches it).

Departures from the blog's snippet, which is a sketch: it scales the scores by sqrt(d) instead of
1/sqrt(d) and returns the T x T matrix; we scale by 1/sqrt(d_head) and return the mixed tokens.
"""
import torch
import torch.nn.functional as F
from torch import nn

from .heads import merge_heads, split_heads

#: the alpha/beta schemes (``init=``), each with its label
SCHEMES = {"uniform": "0.5 / 0.5", "identity": "the blog's reading: 1 / 0", "attention": "0 / 1",
           "dynamic": "1/i and 1 - 1/i per layer", "inverse-dynamic": "1 - 1/i and 1/i per layer",
           "hehofmann": "He and Hofmann's code: 1 / 1, centred, zero queries"}
INIT_SCHEMES = tuple(SCHEMES)
#: the scheme of He and Hofmann's code: it centres the map and zeroes the queries (``ShapedAttention``)
CENTRED_IDENTITY = "hehofmann"


def shaped_init(scheme, *, layer_index=None, depth=None):
    """(alpha, beta) at initialisation for ``scheme``; ``layer_index`` is 1-based."""
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"unknown shaped-attention init {scheme!r}; choose one of: "
                         + ", ".join(f"{name} ({label})" for name, label in SCHEMES.items()))
    fixed = {"uniform": (0.5, 0.5), "identity": (1.0, 0.0), "attention": (0.0, 1.0), CENTRED_IDENTITY: (1.0, 1.0)}
    if scheme in fixed:
        return fixed[scheme]
    if layer_index is None:
        raise ValueError(f"init {scheme!r} depends on the layer: pass layer_index (1-based) and depth")
    if layer_index < 1 or (depth is not None and layer_index > depth):
        raise ValueError(f"layer_index must be in 1..depth, got layer_index={layer_index}, depth={depth}")
    a = 1.0 / layer_index
    return (a, 1.0 - a) if scheme == "dynamic" else (1.0 - a, a)


@torch.no_grad()
def alpha_beta(model):
    """[[alpha, beta], ...] of every ``ShapedAttention`` of ``model`` in module order (first layer first; one
    device sync), or None where it has none."""
    shaped = [m for m in model.modules() if isinstance(m, ShapedAttention)]
    return torch.stack([torch.stack([m.alpha, m.beta]) for m in shaped]).tolist() if shaped else None


def shaped_ratios(model):
    """alpha / (alpha + beta) of every ``ShapedAttention`` of ``model``, in module order (first layer first): the
    weight of the identity in each layer's map (1: the token keeps itself; 0: pure attention)."""
    return [a / (a + b) for a, b in alpha_beta(model) or []]


class ShapedAttention(nn.Module):
    mechanism = "shaped attention"  # what the synthesis page groups it under (``report.claims.synthesis``)
    init_only = ("init",)  # its scheme sets alpha's and beta's initial values only (``ensemble.forward_signature``)
    map_description = ("shaped attention alpha I + beta softmax(QK^T/sqrt(d)) [- gamma/n]: rows sum to alpha + beta "
                "[- gamma], the identity playing the skip connection's role")

    def __init__(self, *, dim, heads=4, dim_head=32, init="uniform", layer_index=None, depth=None, alpha=None,
                 beta=None, qk_bias=True, centering=False, fused=True, rope=None, seq_len=None):
        super().__init__()
        if dim % heads:
            raise ValueError(f"shaped attention applies each head to dim/heads input channels: dim={dim} is not "
                             f"divisible by heads={heads}")
        a, b = shaped_init(init, layer_index=layer_index, depth=depth)
        a, b = a if alpha is None else alpha, b if beta is None else beta
        inner = heads * dim_head
        self.heads, self.scale, self.rope, self.fused = heads, dim_head**-0.5, rope, fused
        self.init, self.layer_index, self.depth = init, layer_index, depth
        self.to_q = nn.Linear(dim, inner, bias=qk_bias)
        self.to_k = nn.Linear(dim, inner, bias=qk_bias)
        if init == CENTRED_IDENTITY:  # He & Hofmann's zero queries: softmax(0) = C, cancelled by gamma C
            nn.init.zeros_(self.to_q.weight)
            if self.to_q.bias is not None:
                nn.init.zeros_(self.to_q.bias)
        self.alpha = nn.Parameter(torch.tensor(float(a)))
        self.beta = nn.Parameter(torch.tensor(float(b)))
        centred = centering or init == CENTRED_IDENTITY
        self.gamma = nn.Parameter(torch.tensor(float(b))) if centred else None

    def qkv(self, x):
        """q, k (b, h, n, dim_head) and the values, which are the input itself split into heads (W_V = I)."""
        return split_heads(self.to_q(x), self.to_k(x), x, heads=self.heads, rope=self.rope)

    def softmax_map(self, x):
        """(b, h, n, n): softmax(Q K^T / sqrt(d)), the learnable part of the map."""
        q, k, _ = self.qkv(x)
        return (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1)

    def attention_map(self, x):
        """(b, h, n, n): alpha I + beta softmax(QK^T/sqrt(d)) [- gamma/n]: rows sum to alpha + beta [- gamma]."""
        a = self.beta * self.softmax_map(x)
        a = a + self.alpha * torch.eye(x.shape[1], device=x.device, dtype=a.dtype)
        return a - self.gamma / x.shape[1] if self.gamma is not None else a

    def forward(self, x):
        q, k, v = self.qkv(x)
        if self.fused:
            mixed = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        else:
            mixed = (q @ k.transpose(-1, -2) * self.scale).softmax(dim=-1) @ v
        out = self.alpha * x + self.beta * merge_heads(mixed)
        return out - self.gamma * x.mean(dim=1, keepdim=True) if self.gamma is not None else out
