"""Attention maps across layers: collect them from any model, say what they are, roll them out and measure them.

- Collecting: ``attention_maps(model, x)`` runs the model once and returns {layer name: (B, heads, N, N)}, one map
  per mixer call, from each mixer's own ``attention_map`` on the input it received (``collect_attention_maps``: a
  list, by type or method, raising where a mixer has no map). Like vit-pytorch's ``Recorder`` it finds the mixers by type (every module whose class
  defines ``attention_map``), so it needs no knowledge of the model's layout. ``map_kind(model)`` says in one line
  what the maps are, from the ``map_kind`` each mixer declares on its class (the exact softmax, or the documented
  equivalent of each approximation), or why a model has none (FNet, MLP-Mixer, the convolutional baselines);
  ``has_skip`` whether blocks add a residual.
- Rollout (Abnar & Zuidema, 2020): ``attention_rollout(maps)`` fuses the heads of each layer, optionally discards
  the weakest links, adds the residual identity, renormalises the rows and multiplies the layers:
  A_L ... A_2 A_1, row i giving how much each input token reaches output token i. ``rollout`` reads it out on the
  patch grid (the class token's row, or the mean row), ``class_token_map`` does so for one map.
- Measures, (layers, heads) each: ``row_entropy``, ``diagonal_prominence`` (how much each token attends to
  itself: the `shaped` paper's Fig. 11 question), ``attention_distance`` (pixels); ``centre_query`` shows one
  query patch through the layers.
- Exact and approximate: ``exact_softmax_map(mixer, x)`` is the softmax of a mixer's own queries and keys;
  ``performer_map`` and ``nystrom_map`` approximate it from given queries and keys, ``map_distance`` compares two
  maps, ``approximation_errors`` does all of it on a trained model's softmax layers.
- ``randomisation_check``: the map must change when the weights do (Adebayo et al., 2018).
"""
import math
from contextlib import contextmanager
from copy import deepcopy

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import SoftmaxAttention, moore_penrose_pinv
from ..layers.performer import FastAttention, orthogonal_gaussian

HEAD_FUSIONS = ("mean", "max", "min")


def _fuse(a, head_fusion):
    if a.dim() == 3:  # already one map per sample
        return a
    if head_fusion == "mean":
        return a.mean(dim=1)
    if head_fusion == "max":
        return a.amax(dim=1)
    if head_fusion == "min":
        return a.amin(dim=1)
    raise ValueError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")


def _discard(a, ratio):
    """Zero the ``ratio`` fraction of smallest entries of each (n, n) map; the diagonal is always kept."""
    b, n, _ = a.shape
    count = int(n * n * ratio)
    if count <= 0:
        return a
    ranked = a.masked_fill(torch.eye(n, dtype=torch.bool, device=a.device), float("inf")).flatten(1)
    idx = ranked.topk(min(count, n * n - n), dim=-1, largest=False).indices
    return a.flatten(1).scatter(-1, idx, 0.0).view(b, n, n)


def attention_rollout(maps, *, head_fusion="mean", discard_ratio=0.0, add_residual=True):
    """Attention rollout over per-layer maps (first layer first), each (b, h, n, n) or (b, n, n).

    Per layer: fuse heads (``mean``/``max``/``min``), zero the ``discard_ratio`` fraction of smallest
    entries (diagonal kept), add the identity for the residual stream (``add_residual``), divide each row
    by its sum. Returns (b, n, n) = A_L ... A_1. With row-stochastic maps and the residual, each layer's
    factor is (A + I) / 2 as in Abnar & Zuidema.
    """
    maps = list(maps)
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")
    if not maps:
        raise ValueError("attention_rollout needs at least one layer's map")
    if not 0.0 <= discard_ratio < 1.0:
        raise ValueError(f"discard_ratio must be in [0, 1), got {discard_ratio}")
    rollout = None
    for m in maps:
        a = _discard(_fuse(m, head_fusion), discard_ratio)
        if add_residual:
            a = a + torch.eye(a.shape[-1], device=a.device, dtype=a.dtype)
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
        rollout = a if rollout is None else a @ rollout
    return rollout


def has_attention_map(module):
    """Whether ``module``'s class defines ``attention_map``: every token mixer of ``layers.MIXERS`` and the families'
    own attentions (LeViT's, CvT's, the `shaped` paper's one-map attention), whatever wraps them."""
    return callable(getattr(type(module), "attention_map", None))


def _outermost_mappers(model):
    """(name, module) of the outermost submodules whose class defines ``attention_map``, in module order (a
    Performer's inner ``FastAttention`` and a ``TokenMixer2d``'s inner mixer are inside their wrapper's map)."""
    named = [(n, m) for n, m in model.named_modules() if m is not model and has_attention_map(m)]
    outer = [n for n, _ in named]
    return [(n, m) for n, m in named if not any(n.startswith(o + ".") for o in outer)]


@contextmanager
def _evaluating(model):
    """``model`` in eval mode for the block, its mode restored after (also on an error)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def _recorded_inputs(model, images, mixers):
    """[(mixer, input)]: every call of a module of ``mixers`` in one forward pass of ``model`` on ``images``, in
    call order, each with the input it received (recorded by a forward pre-hook; the caller sets the mode)."""
    calls = []
    handles = [m.register_forward_pre_hook(lambda module, args: calls.append((module, args[0]))) for m in mixers]
    try:
        model(images)
    finally:
        for h in handles:
            h.remove()
    return calls


@torch.no_grad()
def collect_attention_maps(model, images, *, types=None, method="attention_map"):
    """Run ``model`` on ``images`` once (eval mode, restored after) and return one (b, h, n, n) map per mixer
    call, in call order (for a ViX model: one per layer, first layer first). ``method``: the mixer method that
    makes each map (``softmax_map``: shaped attention's learned part alone, without alpha I; a mixer without
    that method gives its ``attention_map``).

    Mixers are found by type, not by where they sit in the model: every submodule that is an instance of
    ``types`` (a class or a tuple of classes; default: every class that defines ``attention_map``,
    ``has_attention_map``, outermost ones only) gets a forward pre-hook that records its input; each map is then
    ``mixer.attention_map(input)`` on the recorded input. A mixer without a map (FNet, the token MLP) raises
    ``NotImplementedError``; a model with no mixer gives ``ValueError``.
    """
    if types is None:
        mixers = [m for _, m in _outermost_mappers(model)]
        wanted = "type with an attention_map"
    else:
        types = (types,) if isinstance(types, type) else tuple(types)
        mixers = [m for m in model.modules() if isinstance(m, types)]
        wanted = f"type {', '.join(t.__name__ for t in types)}"
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no module of {wanted}")
    with _evaluating(model):  # the maps too are made in eval mode (LeViT's and CvT's BatchNorms)
        calls = _recorded_inputs(model, images, mixers)
        return [getattr(mixer, method, mixer.attention_map)(x) for mixer, x in calls]


def class_token_map(rollout, *, cls_index=0):
    """(b, side, side): the class token's row of a (b, n, n) rollout (or a (b, h, n, n) map, heads
    averaged) without the class token's own column, reshaped to the square patch grid."""
    if rollout.dim() == 4:
        rollout = rollout.mean(dim=1)
    row = rollout[:, cls_index]
    row = torch.cat((row[:, :cls_index], row[:, cls_index + 1:]), dim=-1)
    side = math.isqrt(row.shape[-1])
    if side * side != row.shape[-1]:
        raise ValueError(f"{row.shape[-1]} patch tokens do not form a square grid")
    return row.view(-1, side, side)


def diagonal_prominence(maps):
    """(layers, heads): for each map of ``maps`` (one (b, h, n, n) map per layer, as ``collect_attention_maps``
    returns, or the dict of ``attention_maps``), the mean over samples and tokens of the attention a token pays to itself, times n: 1 where
    attention is uniform, n where each token attends only to itself, below 1 where tokens avoid themselves.
    Layers must have the same number of heads (their token counts may differ)."""
    return torch.stack([m.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1)) * m.shape[-1] for m in _layers(maps)])


# ---------------------------------------------------------------- what each mechanism's map is

NO_MAP = "no attention map"  # how a declared map_kind starts where the mixer has none


def _mechanism(module):
    """(class name, ``map_kind``) of the module whose map ``module``'s is: itself, or the first module inside a wrapper
    (a ``TokenMixer2d``'s mixer) that declares ``map_kind``; ``module``'s class name and None where none does."""
    declared = next((m for m in module.modules() if isinstance(getattr(m, "map_kind", None), str)), None)
    return (type(module).__name__, None) if declared is None else (type(declared).__name__, declared.map_kind)


def _mappers(model):
    """(name, module) of the outermost modules with a map that can be made (those declaring ``NO_MAP`` left out)."""
    return [(n, m) for n, m in _outermost_mappers(model) if not (_mechanism(m)[1] or "").startswith(NO_MAP)]


def map_kind(model):
    """One line saying what ``model``'s attention maps are: the mechanism classes it has (each class's own
    ``map_kind``, and how many layers have it), e.g. "vit: 4 layers of SoftmaxAttention (exact softmax ...)". A model
    without a map (FNet, MLP-Mixer, ResNet, ConvMixer, WaveMix: no module with a map that can be made) gives a
    sentence starting "no attention map" that says why: its mixers' own line (Fourier mixing, token MLP), or, with no
    mixer, what the model mixes by (its class's ``mixes_by``, else convolutions). Never raises."""
    name = type(model).__name__
    try:
        name = (getattr(model, "default_cfg", None) or {}).get("name", name)
        counts, sentences = {}, {}
        for _, module in _mappers(model):
            kind, sentence = _mechanism(module)
            counts[kind] = counts.get(kind, 0) + 1
            sentences.setdefault(kind, sentence or "its own attention_map")
        if counts:
            return f"{name}: " + "; ".join(
                f"{c} layer{'s' * (c > 1)} of {k} ({sentences[k]})" for k, c in counts.items())
        missing = [_mechanism(m)[1] for _, m in _outermost_mappers(model)]
        if missing:
            return f"{missing[0]} ({name})"
        how = getattr(model, "mixes_by", "convolutions only")
        return f"{NO_MAP}: {name} has no attention layer (it mixes by {how})"
    except Exception as e:  # a description must never stop a page
        return f"{name}: its attention maps could not be described ({type(e).__name__}: {e})"


@torch.no_grad()
def attention_maps(model, x):
    """{layer name: (B, heads, N, N)}: every map of ``model`` on the input ``x`` (eval mode, restored after), in
    call order, each ``mixer.attention_map(input)`` (the materialised map, never a fused kernel) of the input the
    mixer received, as ``collect_attention_maps`` records it. Keys are the mixers' names in ``named_modules()``
    (the outermost module with a map: a ``TokenMixer2d`` rather than its inner mixer), with ``#2``, ``#3`` for
    repeated calls of one module. What each map is: ``map_kind(model)``. A model without a map raises
    ``ValueError`` whose message is ``map_kind``'s sentence."""
    named = _mappers(model)
    if not named:
        raise ValueError(map_kind(model))
    names = {id(m): n for n, m in named}
    with _evaluating(model):
        calls = _recorded_inputs(model, x, [m for _, m in named])
        out, seen = {}, {}
        for mixer, inp in calls:
            n = names[id(mixer)]
            seen[n] = seen.get(n, 0) + 1
            out[n if seen[n] == 1 else f"{n}#{seen[n]}"] = mixer.attention_map(inp)
    return out


def has_skip(model):
    """Whether ``model``'s blocks add a skip connection around the attention: False where a block says it has
    none (a ``skips`` attribute that is False: the `shaped` paper's simplified ViT, whose alpha I plays the
    residual's role, and ``vit_small_vanilla(skips=False)``), True otherwise (every other family's blocks add
    x + mixer(x)). Rollout adds the residual identity only where this is True (``rollout(..., residual=)``)."""
    return not any(getattr(m, "skips", None) is False for m in model.modules())


# ---------------------------------------------------------------- rollout and measures

def rounded(t, digits=5):
    """A tensor as nested lists of floats rounded to ``digits``, for a stored record (one copy off the device)."""
    import numpy as np

    return np.round(t.detach().to("cpu", torch.float64).numpy(), digits).tolist()


def _layers(maps):
    """The per-layer maps of a dict (in its order) or of a sequence."""
    return list(maps.values()) if isinstance(maps, dict) else list(maps)


def _trailing(maps):
    """The trailing run of layers with the last layer's token count (the last stage of CvT / PiT / LeViT)."""
    maps = _layers(maps)
    if not maps:
        raise ValueError("no maps given")
    n = maps[-1].shape[-1]
    run = []
    for m in reversed(maps):
        if m.shape[-1] != n:
            break
        run.append(m)
    return run[::-1]


def _side(patches):
    side = math.isqrt(patches)
    if side * side != patches:
        raise ValueError(f"{patches} patch tokens do not form a square grid")
    return side


def _cls_tokens(n, cls_tokens=None):
    """How many class tokens lead an n-token sequence: ``cls_tokens`` if given, else 0 when n is a square and
    1 when n - 1 is (the only two layouts of the families)."""
    if cls_tokens is not None:
        return cls_tokens
    if math.isqrt(n) ** 2 == n:
        return 0
    if n > 1 and math.isqrt(n - 1) ** 2 == n - 1:
        return 1
    raise ValueError(f"{n} tokens form no square grid, with or without a class token")


def _distribution(a):
    """|a| with each row divided by its sum: a map made a distribution (Linformer's and Nystrom's can be negative)."""
    a = a.abs()
    return a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)


def rollout(maps, *, head_fusion="mean", start="cls", discard_ratio=0.0, residual=True, cls_index=0):
    """(B, side, side): attention rollout (``attention_rollout``: heads fused, the ``discard_ratio`` weakest links
    dropped, the residual identity added when ``residual``, rows renormalised, A_L ... A_1) of ``maps`` (the dict of
    ``attention_maps`` or a list of (B, h, N, N), first layer first) read out on the square patch grid:
    ``start="cls"`` the class token's row (token ``cls_index``) without its own column (ViX, PiT, vit_small);
    ``start="mean"`` the mean of all rows, for models without a class token (CXV, LeViT, CCT, CvT).

    Maps are taken in absolute value first (Linformer's lifted map and Nystrom's product can have negative entries;
    the others are unchanged). Where the token count changes between layers (the stages of PiT), only the trailing
    run of layers that share the last layer's N is rolled out. Pass ``residual=has_skip(model)``: the simplified
    ViT has no skip (its alpha I is already in the map). A grid that is not square raises ``ValueError``."""
    if start not in ("cls", "mean"):
        raise ValueError(f"start must be 'cls' or 'mean', got {start!r}")
    r = attention_rollout([m.abs() for m in _trailing(maps)], head_fusion=head_fusion, discard_ratio=discard_ratio,
                          add_residual=residual)
    if start == "cls":
        return class_token_map(r, cls_index=cls_index)
    side = _side(r.shape[-1])
    return r.mean(dim=1).view(-1, side, side)


def row_entropy(maps):
    """(layers, heads): the entropy of each row of each layer's (B, h, N, N) map divided by log N (1: uniform
    attention, 0: one token), averaged over samples and query rows. Each row is first made a distribution: its
    absolute values divided by their sum (Linformer's lifted map can be negative, Nystrom's a little; for the
    row-stochastic maps this changes nothing). Layers must have the same number of heads."""
    out = []
    for m in _layers(maps):
        p = _distribution(m)
        h = -torch.special.xlogy(p, p).sum(dim=-1)
        out.append(h.mean(dim=(0, -1)) / max(math.log(m.shape[-1]), torch.finfo(h.dtype).tiny))
    return torch.stack(out)


def _grid_distances(side, image_size, device=None):
    """(side^2, side^2): Euclidean distances in pixels between the centres of the patches of a side x side grid
    over an image_size-pixel image (row-major), patch centres image_size / side pixels apart."""
    step = image_size / side
    centre = (torch.arange(side, dtype=torch.float64, device=device) + 0.5) * step
    pos = torch.cartesian_prod(centre, centre)
    return torch.cdist(pos, pos)


def attention_distance(maps, *, image_size, cls_tokens=None):
    """(layers, heads): the mean attention distance in input pixels: for each query patch i, sum_j a_ij ||p_i - p_j||
    with p the patch centres on the side x side grid (image_size / side pixels apart), averaged over query patches
    and samples. The ``cls_tokens`` leading class-token rows and columns are dropped (default: 1 when N - 1 is a
    square, 0 when N is) and each row is then made a distribution (absolute values over their sum, as in
    ``row_entropy``). Layers may differ in N (each gets its own grid); they must have the same heads."""
    out = []
    for m in _layers(maps):
        c = _cls_tokens(m.shape[-1], cls_tokens)
        side = _side(m.shape[-1] - c)
        dist = _grid_distances(side, image_size, m.device).to(m.dtype)
        p = _distribution(m[..., c:, c:])
        out.append((p * dist).sum(dim=-1).mean(dim=(0, -1)))
    return torch.stack(out)


def centre_query(maps, *, cls_tokens=None):
    """(B, layers, side, side): for each layer, the row of the image-centre patch (grid cell (side // 2, side // 2))
    of its map, heads averaged, over the patch columns (class-token columns dropped, no renormalisation), as a
    grid: one query pixel followed through the layers. Only the trailing run of layers that share the last layer's
    N is shown (as in ``rollout``). ``cls_tokens`` as in ``attention_distance``."""
    run = _trailing(maps)
    c = _cls_tokens(run[-1].shape[-1], cls_tokens)
    side = _side(run[-1].shape[-1] - c)
    query = c + (side // 2) * side + side // 2
    rows = [(m.mean(dim=1) if m.dim() == 4 else m)[:, query, c:] for m in run]
    return torch.stack(rows, dim=1).reshape(rows[0].shape[0], len(rows), side, side)


# ---------------------------------------------------------------- exact softmax and its approximations


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


@torch.no_grad()
def approximation_errors(model, x, *, features=(16, 32, 64, 110, 256), landmarks=(16, 32, 64, 128), seed=0):
    """How far the Performer's and Nystromformer's maps are from the exact softmax map on a (trained) model's own
    queries and keys: for every ``SoftmaxAttention`` of ``model`` (CCT's included), the q, k it computes on ``x``
    (inputs recorded as ``collect_attention_maps`` does, eval mode), the ``map_distance`` of ``performer_map(q, k, m,
    seed=seed)`` for each m of ``features`` and of ``nystrom_map(q, k, m)`` for each m of ``landmarks`` to
    softmax(q k^T / sqrt(d)), averaged over the layers.

    Returns {"performer": {m: {"tv", "frobenius", "per_layer": {"tv": [...], "frobenius": [...]}}}, "nystrom": {m: {...}}, "layers": count, "tokens": [N of each
    layer], "omitted": {"nystrom": [landmark counts above the smallest layer's token count, skipped]}}. A model
    without softmax attention raises ``ValueError``."""
    mixers = [m for m in model.modules() if isinstance(m, SoftmaxAttention)]
    if not mixers:
        raise ValueError(f"{type(model).__name__} has no SoftmaxAttention to compare approximations with")
    with _evaluating(model):
        qks = [mixer.qkv(inp)[:2] for mixer, inp in _recorded_inputs(model, x, mixers)]
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


# ---------------------------------------------------------------- sanity check: randomised weights


def _spearman(a, b):
    """(B,): Spearman's rank correlation of the rows of two (B, P) tensors (ranks by sorting; ties broken by
    position)."""
    ra, rb = (t.flatten(1).argsort(dim=-1).argsort(dim=-1).to(torch.float64) for t in (a, b))
    ra, rb = ra - ra.mean(dim=-1, keepdim=True), rb - rb.mean(dim=-1, keepdim=True)
    return (ra * rb).sum(dim=-1) / (ra.norm(dim=-1) * rb.norm(dim=-1)).clamp_min(1e-300)


def _blocks(names):
    """The block holding each of two or more mixers named in ``names`` (dotted module paths): the child of the
    mixers' deepest common ancestor that contains it (one mixer: ``_single_block``)."""
    parts = [n.split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 and p[common] == parts[0][common] for p in parts):
        common += 1
    return [".".join(p[:common + 1]) for p in parts]


def _single_block(model, name):
    """One mixer's block: its nearest ancestor (or itself) whose parent is a ModuleList or Sequential."""
    modules = dict(model.named_modules())
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        parent = modules[".".join(parts[:end - 1])]
        if isinstance(parent, (nn.ModuleList, nn.Sequential)):
            return ".".join(parts[:end])
    return name


@torch.no_grad()
def _reinitialise(module, generator):
    """Re-draw ``module``'s own parameters: normalisation layers reset (weight 1, bias 0, running statistics);
    any other parameter of 2 or more dims, and a bias beside such a weight, uniform in +-1/sqrt(fan_in) (PyTorch's
    default scale for Linear and Conv) from ``generator``; other 0/1-dim parameters (shaped attention's alpha and
    beta, channel-norm gains) keep their values."""
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)):
        module.reset_parameters()
        return
    own = dict(module.named_parameters(recurse=False))
    weight = own.get("weight")
    for key, p in own.items():
        if p.dim() >= 2:
            fan_in = p[0].numel()
        elif key == "bias" and weight is not None and weight.dim() >= 2:
            fan_in = weight[0].numel()
        else:
            continue
        bound = fan_in**-0.5
        p.copy_(torch.empty(p.shape, dtype=torch.float64).uniform_(-bound, bound, generator=generator))


def _model_rollout(model, x):
    """The rollout of ``model``'s maps on ``x`` read out as the model reads: from the class token where the last
    layers' grid has one, else the mean row; residual as ``has_skip``."""
    maps = attention_maps(model, x)
    start = "cls" if _cls_tokens(_layers(maps)[-1].shape[-1]) else "mean"
    return rollout(maps, start=start, residual=has_skip(model))


@torch.no_grad()
def randomisation_check(model, x, *, layers=1, seed=0):
    """{"rank_correlation", "changed"}: the model-randomisation sanity check of Adebayo et al. (2018): a map must
    change when the weights that make it do. A deep copy of ``model`` gets the parameters of its last ``layers``
    attention blocks and of every module called after them (later norms, pooling, the head) re-drawn
    (``_reinitialise``, from a local generator seeded by ``seed``); the rollout maps (``rollout``, from the class
    token or the mean row, residual as ``has_skip``) of the two models on ``x`` are compared by Spearman's rank
    correlation per image, averaged over images. "changed": correlation < 0.9.

    Models read by the mean row (no class token: CvT, CXV, LeViT, CCT) see a re-drawn last layer only through its
    column sums, which an initialised layer keeps nearly flat: one layer barely moves their rollout (CvT and CNV at
    initialisation: correlation about 0.97), so randomise more layers (or all) for them.

    A block is the child of the mixers' deepest common ancestor that holds a mixer (ViX: a layer's [attention,
    feed-forward] pair; CvT: a stage); with one mixer, its ancestor that sits in a ModuleList or Sequential."""
    if layers < 1:
        raise ValueError(f"layers must be at least 1, got {layers}")
    named = _mappers(model)
    if not named:
        raise ValueError(map_kind(model))
    copy = deepcopy(model)
    modules = dict(copy.named_modules())
    order, mixers = {}, []
    names = {id(m): n for n, m in copy.named_modules()}
    mapped = {n for n, _ in named}

    def first_call(module, _args):
        n = names[id(module)]
        order.setdefault(n, len(order))
        if n in mapped and n not in mixers:
            mixers.append(n)

    handles = [m.register_forward_pre_hook(first_call) for m in copy.modules()]
    try:
        with _evaluating(copy):
            copy(x)
    finally:
        for h in handles:
            h.remove()
    blocks = _blocks(mixers) if len(mixers) > 1 else [_single_block(copy, mixers[0])]
    last = list(dict.fromkeys(blocks))[-layers:]
    inside = {n for b in last for n in modules if n == b or n.startswith(b + ".")}
    start = min(order[n] for n in inside if n in order)
    generator = torch.Generator().manual_seed(seed)
    for n, module in copy.named_modules():  # module order: the same draws for the same model every time
        if n and (n in inside or order.get(n, -1) >= start):
            _reinitialise(module, generator)
    before, after = _model_rollout(model, x), _model_rollout(copy, x)
    rho = float(_spearman(before, after).mean())
    return {"rank_correlation": rho, "changed": rho < 0.9}
