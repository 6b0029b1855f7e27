"""Token mixers: every attention mechanism of the study behind one interface.

``build(mixer, *, dim, heads, dim_head, seq_len=None, layer_index=None, depth=None, **options)`` returns the token
mixer named ``mixer``, a module mapping (batch, tokens, dim) -> (batch, tokens, dim); ``list_mixers()`` names them.
Every mixer has ``forward(x)`` and ``attention_map(x)``, the (b, h, n, n) token-to-token map (FNet and the token MLP
have none and raise ``NotImplementedError``), and says on its class what that map is: ``map_description``, one line (a
property where it depends on the layer's settings; starting "no attention map" and saying why where there is
none, the class then declaring ``draws_map = False``: what code reads, ``maps``), and beside it the ``mechanism``
it implements ("softmax attention", "Linformer", ...: a model family with its own attention class declares it too;
the synthesis page groups the models by it). ``vixnb.analysis`` collects the maps of any model by mixer type,
describes them by their ``map_description`` and measures them.

Layer-wise initialisation: ``build`` takes the layer's ``layer_index`` (1-based) and the ``depth`` of the
stack from whoever builds a stack (the ``Transformer`` of ``blocks``, ``build_stack``) and passes them on only
to the mixers whose initialisation depends on the layer (``LAYERWISE_MIXERS``: shaped attention); the other
mixers' constructors take only options they use.

Fused or materialising: the mixers that have both paths (softmax, shaped, nystrom) have one bool attribute
``fused`` (constructor argument ``fused=True``); ``fused_attn(model, enabled)`` sets it on every module of a
model for the duration of a ``with`` block.

RoPE: pass ``rope=Rotary(dim_head, seq_len)`` to any mixer with queries and keys (``ROPE_MIXERS``); they all
split heads and rotate through ``heads.split_heads``. The image form of CLTV's linear attention
(``ImageLinearAttention``) works on (b, c, h, w) feature maps and is exported separately.
"""
from contextlib import contextmanager

from .fnet import FourierMixer
from .heads import merge_heads, split_heads
from .linear import ImageLinearAttention, LinearAttention, linear_attention
from .linformer import LinformerAttention
from .mlp import TokenMLP
from .nystrom import NystromAttention, moore_penrose_pinv
from .performer import PerformerAttention, local_window_attention
from .rope import Rotary, apply_rope
from .shaped import ShapedAttention, alpha_beta, shaped_init, shaped_ratios
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
ROPE_MIXERS = ("softmax", "performer", "linformer", "nystrom", "linear", "shaped")
LAYERWISE_MIXERS = ("shaped",)


def list_mixers():
    return sorted(MIXERS)


def build(mixer, *, dim, heads, dim_head, seq_len=None, layer_index=None, depth=None, **options):
    """The token mixer named ``mixer``; ``layer_index`` (1-based) and ``depth`` reach only the ``LAYERWISE_MIXERS``."""
    try:
        cls = MIXERS[mixer]
    except KeyError:
        raise ValueError(f"unknown token mixer {mixer!r}; valid mixers: {', '.join(list_mixers())}") from None
    if options.get("rope") is not None and mixer not in ROPE_MIXERS:
        raise ValueError(f"{mixer!r} has no queries and keys to apply RoPE to; RoPE mixers: {', '.join(ROPE_MIXERS)}")
    if mixer in LAYERWISE_MIXERS:
        options.update(layer_index=layer_index, depth=depth)
    if cls is TokenMLP:
        return cls(seq_len=seq_len, **options)
    return cls(dim=dim, heads=heads, dim_head=dim_head, seq_len=seq_len, **options)


def build_stack(mixer, depth, *, dim, heads, dim_head, seq_len=None, **options):
    """``depth`` token mixers named ``mixer``, one per layer, built with ``layer_index`` = 1..depth and ``depth``."""
    return [build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=seq_len, layer_index=i, depth=depth,
                  **options) for i in range(1, depth + 1)]


def has_both_paths(module):
    """Whether ``module`` has a fused and a materialising path, switched by its bool ``fused`` attribute."""
    return isinstance(getattr(module, "fused", None), bool)


@contextmanager
def fused_attn(model, enabled):
    """Temporarily run every mixer of ``model`` on the fused path (``enabled=True``) or on the materialising
    one that forms each attention matrix as the authors' code does (``enabled=False``): sets ``fused`` on
    every module that has it (``has_both_paths``); restored on exit."""
    switched = [m for m in model.modules() if has_both_paths(m)]
    before = [m.fused for m in switched]
    for m in switched:
        m.fused = bool(enabled)
    try:
        yield model
    finally:
        for m, value in zip(switched, before):
            m.fused = value


__all__ = [
    "build", "build_stack", "list_mixers", "fused_attn", "has_both_paths", "MIXERS", "ROPE_MIXERS", "LAYERWISE_MIXERS",
    "Rotary", "apply_rope", "split_heads", "merge_heads", "SoftmaxAttention", "PerformerAttention",
    "LinformerAttention", "NystromAttention", "LinearAttention", "ImageLinearAttention", "ShapedAttention",
    "FourierMixer", "TokenMLP", "shaped_init", "linear_attention", "local_window_attention", "moore_penrose_pinv",
    "alpha_beta", "shaped_ratios",
]
