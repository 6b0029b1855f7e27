"""Token mixers: every attention mechanism of the study behind one interface.

``build(kind, *, dim, heads, dim_head, seq_len=None, **options)`` returns a module mapping
(batch, tokens, dim) -> (batch, tokens, dim). ``list_kinds()`` names the kinds.
"""
from contextlib import contextmanager

from .fnet import FourierMixer
from .linformer import LinformerAttention
from .mlp import TokenMLP
from .nystrom import NystromAttention
from .performer import PerformerAttention
from .rope import Rotary, apply_rope
from .softmax import SoftmaxAttention

MIXERS = {
    "softmax": SoftmaxAttention,
    "performer": PerformerAttention,
    "linformer": LinformerAttention,
    "nystrom": NystromAttention,
    "fnet": FourierMixer,
    "mlp": TokenMLP,
}


def list_kinds():
    return sorted(MIXERS)


def build(kind, *, dim, heads, dim_head, seq_len=None, **options):
    try:
        cls = MIXERS[kind]
    except KeyError:
        raise ValueError(f"unknown token mixer {kind!r}; valid kinds: {', '.join(list_kinds())}") from None
    if cls is TokenMLP:
        return cls(seq_len=seq_len, **options)
    return cls(dim=dim, heads=heads, dim_head=dim_head, seq_len=seq_len, **options)


@contextmanager
def materialized(model, value=True):
    """Temporarily switch every softmax mixer in ``model`` to the materialised (authors') path."""
    mixers = [m for m in model.modules() if isinstance(m, SoftmaxAttention)]
    before = [m.materialize for m in mixers]
    for m in mixers:
        m.materialize = value
    try:
        yield model
    finally:
        for m, b in zip(mixers, before):
            m.materialize = b


__all__ = ["build", "list_kinds", "materialized", "MIXERS", "Rotary", "apply_rope"]
