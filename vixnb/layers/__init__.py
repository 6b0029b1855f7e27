"""Token mixers: every attention mechanism of the study behind one interface.

``build(kind, *, dim, heads, dim_head, seq_len=None, **options)`` returns a module mapping
(batch, tokens, dim) -> (batch, tokens, dim). ``list_kinds()`` names the kinds. ``build_stack`` builds one
mixer per layer, passing ``layer_index`` (1-based) and ``depth`` to the kinds whose initialisation depends
on the layer (``LAYERWISE_KINDS``: shaped attention). Every mixer has ``attention_map(x)``
(see ``maps`` for collecting maps from a model and attention rollout). RoPE: pass ``rope=Rotary(dim_head,
seq_len)`` to any kind with queries and keys (``ROPE_KINDS``).

The image form of CLTV's linear attention (``ImageLinearAttention``) works on (b, c, h, w) feature maps
and is exported separately.
"""
from contextlib import contextmanager

from .fnet import FourierMixer
from .linear import ImageLinearAttention, LinearAttention, linear_attention
from .linformer import LinformerAttention
from .maps import attention_rollout, class_token_map, collect_attention_maps, mixer_attention_map
from .mlp import TokenMLP
from .nystrom import NystromAttention, moore_penrose_pinv
from .performer import PerformerAttention, local_window_attention
from .rope import Rotary, apply_rope
from .shaped import ShapedAttention, shaped_init
from .softmax import SoftmaxAttention

MIXERS = {
    "softmax": SoftmaxAttention,
    "performer": PerformerAttention,
    "linformer": LinformerAttention,
    "nystrom": NystromAttention,
    "linear": LinearAttention,
    "shaped": ShapedAttention,
    "fnet": FourierMixer,
    "mlp": TokenMLP,
}
ROPE_KINDS = ("softmax", "performer", "linformer", "nystrom", "linear", "shaped")
LAYERWISE_KINDS = ("shaped",)


def list_kinds():
    return sorted(MIXERS)


def build(kind, *, dim, heads, dim_head, seq_len=None, **options):
    try:
        cls = MIXERS[kind]
    except KeyError:
        raise ValueError(f"unknown token mixer {kind!r}; valid kinds: {', '.join(list_kinds())}") from None
    if options.get("rope") is not None and kind not in ROPE_KINDS:
        raise ValueError(f"{kind!r} has no queries and keys to apply RoPE to; RoPE kinds: {', '.join(ROPE_KINDS)}")
    if cls is TokenMLP:
        return cls(seq_len=seq_len, **options)
    return cls(dim=dim, heads=heads, dim_head=dim_head, seq_len=seq_len, **options)


def build_stack(kind, depth, *, dim, heads, dim_head, seq_len=None, **options):
    """``depth`` mixers of ``kind``, one per layer; layer-wise kinds get ``layer_index`` = 1..depth and ``depth``."""
    layerwise = kind in LAYERWISE_KINDS
    return [build(kind, dim=dim, heads=heads, dim_head=dim_head, seq_len=seq_len,
                  **({"layer_index": i, "depth": depth} if layerwise else {}), **options)
            for i in range(1, depth + 1)]


@contextmanager
def fused_attn(model, enabled):
    """Temporarily run every mixer of ``model`` on the fused path (``enabled=True``) or on the materialising
    one that forms each attention matrix as the authors' code does (``enabled=False``); restored on exit.
    The one switch between the two paths."""
    switches = [(m, "fused", enabled) for m in model.modules() if isinstance(m, NystromAttention)]
    switches += [(m, "materialize", not enabled) for m in model.modules()
                 if isinstance(m, (SoftmaxAttention, ShapedAttention))]
    before = [getattr(m, attr) for m, attr, _ in switches]
    for m, attr, value in switches:
        setattr(m, attr, value)
    try:
        yield model
    finally:
        for (m, attr, _), value in zip(switches, before):
            setattr(m, attr, value)


__all__ = [
    "build", "build_stack", "list_kinds", "fused_attn", "MIXERS", "ROPE_KINDS", "LAYERWISE_KINDS",
    "Rotary", "apply_rope", "SoftmaxAttention", "PerformerAttention", "LinformerAttention", "NystromAttention",
    "LinearAttention", "ImageLinearAttention", "ShapedAttention", "FourierMixer", "TokenMLP", "shaped_init",
    "linear_attention", "local_window_attention", "moore_penrose_pinv", "attention_rollout",
    "collect_attention_maps", "mixer_attention_map", "class_token_map",
]
