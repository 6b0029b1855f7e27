"""The shared pre-norm transformer block, into which every family injects its token mixer.

Module structure follows vit-pytorch (2021), which the ViX authors adapted: ``PreNorm`` wraps both the
mixer and the feed-forward, residuals are added outside, and ``FeedForward`` wraps an
``nn.Sequential``. The papers' "Size (MB)" column depends on exactly which modules are called.
``DropPath`` is stochastic depth (CCT's layers use it); ``residual_stack`` runs (mixer, feed-forward) pairs.
"""
from torch import nn


def mlp(dim, hidden_dim, *, dropout=0.0, dense=nn.Linear):
    return nn.Sequential(dense(dim, hidden_dim), nn.GELU(), nn.Dropout(dropout), dense(hidden_dim, dim),
                         nn.Dropout(dropout))


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, *, dropout=0.0):
        super().__init__()
        self.net = mlp(dim, hidden_dim, dropout=dropout)

    def forward(self, x):
        return self.net(x)


class DropPath(nn.Module):
    """Stochastic depth: in training, zero a sample's branch with probability ``p`` (rescaling the rest)."""

    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def extra_repr(self):
        return f"p={self.p}"

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = x.new_empty(x.shape[0], *(1,) * (x.dim() - 1)).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


def residual_stack(layers, x):
    for mix, ff in layers:
        x = mix(x) + x
        x = ff(x) + x
    return x


class Transformer(nn.Module):
    """``depth`` layers of x + PreNorm(mixer)(x), x + PreNorm(ff)(x).

    ``make_mixer(layer_index=i, depth=depth)`` builds layer i's mixer, i = 1..depth (e.g. a
    ``functools.partial`` of ``layers.build``, which hands both to the mixers whose initialisation depends on
    the layer)."""

    def __init__(self, *, dim, depth, mlp_dim, make_mixer, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleList([PreNorm(dim, make_mixer(layer_index=i, depth=depth)),
                           PreNorm(dim, FeedForward(dim, mlp_dim, dropout=dropout))])
            for i in range(1, depth + 1)
        )

    def forward(self, x):
        return residual_stack(self.layers, x)
