"""How far the maps of the approximations are from the exact softmax map.

``exact_softmax_map(mixer, x)`` is the softmax of a mixer's own queries and keys; ``performer_map`` and
``nystrom_map`` approximate it from given queries and keys, ``map_distance`` compares two maps,
``approximation_errors`` does all of it on a trained model's softmax layers.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..layers import SoftmaxAttention, moore_penrose_pinv
from ..layers.performer import FastAttention, orthogonal_gaussian
from ..layers.maps import has_attention_map
from .maps import evaluating, recorded_inputs
from ..validate import checked


def _softmax(q, k, scale=None):
    """softmax(q k^T * scale) of (b, h, n, d) queries and keys (scale d^-1/2 by default)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return (q @ k.transpose(-1, -2) * scale).softmax(dim=-1)


@torch.no_grad()
def exact_softmax_map(mixer, x):
    """(B, h, N, N): softmax(Q K^T / sqrt(d_head)) of ``mixer``'s own queries and keys for the input ``x`` (what the
    mixer receives: (B, N, dim) tokens, or a (B, c, h, w) map for the image and map mixers), the exact map an
    approximation replaces. A mixer whose exact map is not the softmax of its ``qkv`` gives it by its own
    ``exact_softmax_map`` method (Linformer: the keys before the sequence projection; Nystrom: the real tokens' q, k;
    LeViT's, CvT's and vit_small's attentions, exact already: their ``attention_map``). Any other mixer with ``qkv``
    (softmax, Performer, linear, image linear and shaped attention): softmax of its q, k (rotated where the mixer has
    RoPE), scaled by the mixer's ``scale`` where it has one (so shaped attention gives its ``softmax_map``), else
    d^-1/2. A wrapper (``TokenMixer2d``) gives its inner mixer's. FNet and the token MLP have no queries and keys:
    ``TypeError``."""
    own = getattr(mixer, "exact_softmax_map", None)
    if own is not None:
        return own(x)
    if callable(getattr(mixer, "qkv", None)):
        q, k, _ = mixer.qkv(x)
        return _softmax(q, k, getattr(mixer, "scale", None))
    if isinstance(mixer, nn.Sequential):  # a wrapper: reshape, mixer, reshape back
        for inner in mixer:
            if has_attention_map(inner):
                return exact_softmax_map(inner, x)
            x = inner(x)
    raise TypeError(f"{type(mixer).__name__} has no queries and keys to form an exact softmax map from")


def map_distance(a, b):
    """{"tv", "frobenius"}: how far map ``a`` is from the reference ``b`` (e.g. ``exact_softmax_map``), both
    (..., N, N): "tv" the total variation 0.5 sum_j |a_ij - b_ij| averaged over rows (0 to 1 for distributions),
    "frobenius" ||a - b||_F / ||b||_F of each N x N map; both averaged over the leading (batch, head) dims, floats."""
    diff = (a - b).to(torch.float64)
    tv = 0.5 * diff.abs().sum(dim=-1).mean()
    frob = diff.flatten(-2).norm(dim=-1) / b.to(torch.float64).flatten(-2).norm(dim=-1)
    return {"tv": float(tv), "frobenius": float(frob.mean())}


@checked("seed")
@torch.no_grad()
def performer_map(q, k, nb_features, *, seed=0, kernel="softmax"):
    """(b, h, n, n): the Performer's approximation of softmax(q k^T / sqrt(d)) from (b, h, n, d) queries and keys:
    ``FastAttention``'s map phi(q) phi(k)^T, rows normalised, with ``nb_features`` orthogonal random features drawn
    from a local generator seeded by ``seed`` (the global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):  # the module draws a projection as it is built: discarded
        fast = FastAttention(dim_head=q.shape[-1], nb_features=nb_features, kernel=kernel)
    projection = orthogonal_gaussian(fast.nb_features, q.shape[-1], generator=torch.Generator().manual_seed(seed))
    fast.projection.copy_(projection)
    return fast.to(q.device).attention_map(q, k)


@checked("pinv_iterations")
@torch.no_grad()
def nystrom_map(q, k, landmarks, *, pinv_iterations=6):
    """(b, h, n, n): Nystromformer's approximation of softmax(q k^T / sqrt(d)) from unscaled (b, h, n, d) queries and
    keys, as ``NystromAttention`` forms it: the sequence padded at the front with zero queries and keys to a multiple
    of ``landmarks``, q scaled by d^-1/2, landmarks the means of consecutive segments, the product
    softmax(Q L_k^T) pinv(softmax(L_q L_k^T)) softmax(L_q K^T) (``moore_penrose_pinv``, ``pinv_iterations``), and the
    real tokens' n x n block of it."""
    n, d = q.shape[-2:]
    pad = -n % landmarks
    q = F.pad(q, (0, 0, pad, 0)) * d**-0.5
    k = F.pad(k, (0, 0, pad, 0))
    q_land, k_land = (t.unflatten(-2, (landmarks, -1)).mean(dim=-2) for t in (q, k))
    a1, a2, a3 = _softmax(q, k_land, 1.0), _softmax(q_land, k_land, 1.0), _softmax(q_land, k, 1.0)
    return (a1 @ moore_penrose_pinv(a2, pinv_iterations) @ a3)[..., -n:, -n:]


def _mean_distances(rows):
    """The layers' mean distances, and each layer's under ``per_layer``."""
    keys = ("tv", "frobenius")
    return {**{key: sum(r[key] for r in rows) / len(rows) for key in keys},
            "per_layer": {key: [r[key] for r in rows] for key in keys}}


@checked("seed")
@torch.no_grad()
def approximation_errors(model, x, *, features=(16, 32, 64, 110, 256), landmarks=(16, 32, 64, 128), seed=0):
    """How far the Performer's and Nystromformer's maps are from the exact softmax map on a (trained) model's own
    queries and keys: for every ``SoftmaxAttention`` of ``model`` (CCT's included), the q, k it computes on ``x``
    (inputs recorded as ``collect_attention_maps`` does, eval mode), the ``map_distance`` of ``performer_map(q, k, m,
    seed=seed)`` for each m of ``features`` and of ``nystrom_map(q, k, m)`` for each m of ``landmarks`` to
    softmax(q k^T / sqrt(d)), averaged over the layers.

    Returns {"performer": {m: {"tv", "frobenius", "per_layer": {"tv": [...], "frobenius": [...]}}}, "nystrom": {m:
    {...}}, "layers": count, "tokens": [N of each layer], "omitted": {"nystrom": [landmark counts above the smallest
    layer's token count, skipped]}}. A model without softmax attention raises ``ValueError``."""
    mixers = [m for m in model.modules() if isinstance(m, SoftmaxAttention)]
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no SoftmaxAttention to compare approximations with")
    with evaluating(model):
        qks = [mixer.qkv(inp)[:2] for mixer, inp in recorded_inputs(model, x, mixers)]
    tokens = [q.shape[-2] for q, _ in qks]
    kept = [m for m in landmarks if m <= min(tokens)]
    errors = {"performer": {m: [] for m in features}, "nystrom": {m: [] for m in kept}}
    for q, k in qks:
        exact = _softmax(q, k)
        for m in features:
            errors["performer"][m].append(map_distance(performer_map(q, k, m, seed=seed), exact))
        for m in kept:
            errors["nystrom"][m].append(map_distance(nystrom_map(q, k, m), exact))
    return {"performer": {m: _mean_distances(r) for m, r in errors["performer"].items()},
            "nystrom": {m: _mean_distances(r) for m, r in errors["nystrom"].items()},
            "layers": len(qks), "tokens": tokens, "omitted": {"nystrom": [m for m in landmarks if m not in kept]}}
