"""Warm starts: the weights of one trained model carried into another (``transfer``), with a report of every tensor.

The `linattn` paper trains its Linformer and Performer forms of ViT-B/16 "from a ViT checkpoint". What carries over
is every tensor whose name and shape agree (patch embedding, class token, positions, LayerNorms, MLPs, head, output
projections), and the attention's query, key and value maps, which a softmax ViT keeps as one fused ``to_qkv`` map
and the Linformer and Performer as ``to_q``, ``to_k``, ``to_v`` (split or joined here, in either direction). A layer
wrapped in an ``nn.Sequential`` on one side only (softmax's ``to_out.0`` beside the others' ``to_out``) is the same
layer. What
the target has and the source lacks is new: Linformer's sequence projections E and F are initialised as at
construction, and the Performer's random features are a buffer drawn at construction (the ReLU and EXP maps add no
tensor). Nothing is skipped silently: ``TransferReport`` lists every tensor of both sides as loaded, new or unused.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

LOADED, NEW, UNUSED = "loaded", "new", "unused"
_QKV = re.compile(r"^(?P<prefix>.*)\.to_(?P<part>q|k|v)\.(?P<param>weight|bias)$")
_FUSED = re.compile(r"^(?P<prefix>.*)\.to_qkv\.(?P<param>weight|bias)$")


@dataclass
class TransferReport:
    """One row per tensor: ``{"tensor", "status", "source", "shape", "note"}``. ``tensor`` is the target's name
    (the source's for an unused tensor); ``source`` what it was loaded from (a slice of a fused map is written
    ``name[rows a:b]``)."""

    rows: list = field(default_factory=list)

    def names(self, status):
        return [r["tensor"] for r in self.rows if r["status"] == status]

    @property
    def loaded(self):
        return self.names(LOADED)

    @property
    def new(self):
        return self.names(NEW)

    @property
    def unused(self):
        return self.names(UNUSED)

    def counts(self):
        """``{"loaded": n, "new": n, "unused": n}``: tensors."""
        return {status: len(self.names(status)) for status in (LOADED, NEW, UNUSED)}

    def summary(self):
        """One line: how many tensors (and parameters) were loaded, new and unused."""
        numel = {status: sum(r["numel"] for r in self.rows if r["status"] == status)
                 for status in (LOADED, NEW, UNUSED)}
        return "; ".join(f"{n} {status} ({numel[status]:,} values)" for status, n in self.counts().items())

    def to_dict(self):
        """What a stored result keeps: the counts, and the names (with notes) of the new and unused tensors."""
        return {"counts": self.counts(), "summary": self.summary(),
                "new": {r["tensor"]: r["note"] for r in self.rows if r["status"] == NEW},
                "unused": {r["tensor"]: r["note"] for r in self.rows if r["status"] == UNUSED}}

    def frame(self):
        """The rows as a pandas DataFrame (tensor, status, source, shape, note)."""
        import pandas as pd  # `vixnb models` imports vixnb.models and stays free of pandas (tests/test_cli.py)

        return pd.DataFrame([{k: r[k] for k in ("tensor", "status", "source", "shape", "note")} for r in self.rows])

    def __str__(self):
        return f"TransferReport: {self.summary()}"


def _same_layer(state, name, target_shape):
    """The name in ``state`` of target ``name``'s tensor where one side wraps the layer in an ``nn.Sequential`` as its
    first module (``a.to_out.0.weight`` and ``a.to_out.weight``) and the shapes agree, else None."""
    head, _, leaf = name.rpartition(".")
    candidates = [f"{head}.0.{leaf}"] + ([f"{head[:-2]}.{leaf}"] if head.endswith(".0") else [])
    for other in candidates:
        if other in state and tuple(state[other].shape) == tuple(target_shape):
            return other
    return None


def _fused_slices(state, name, target_shape):
    """``(source name, slice)`` where target ``name`` (``….to_q|to_k|to_v.weight|bias``) is one third of a fused
    ``….to_qkv`` map of ``state`` with matching shape, else None."""
    m = _QKV.match(name)
    if not m:
        return None
    fused = f"{m['prefix']}.to_qkv.{m['param']}"
    if fused not in state or state[fused].shape[0] % 3:
        return None
    rows = state[fused].shape[0] // 3
    if (rows, *state[fused].shape[1:]) != tuple(target_shape):
        return None
    i = "qkv".index(m["part"])
    return fused, slice(i * rows, (i + 1) * rows)


def _joined(state, name, target_shape):
    """``(source names, tensor)`` where target ``name`` (``….to_qkv.weight|bias``) is the concatenation of separate
    ``to_q``, ``to_k``, ``to_v`` maps of ``state`` with matching shapes, else None."""
    m = _FUSED.match(name)
    if not m:
        return None
    parts = [f"{m['prefix']}.to_{p}.{m['param']}" for p in "qkv"]
    if not all(p in state for p in parts):
        return None
    joined = torch.cat([state[p] for p in parts])
    return (parts, joined) if tuple(joined.shape) == tuple(target_shape) else None


def transfer(state_dict, model) -> TransferReport:
    """Load into ``model`` every tensor of ``state_dict`` (a trained model's ``state_dict()``, any floating dtype)
    that fits it (``module`` doc), in place, and return the ``TransferReport`` of every tensor of both sides. A
    tensor of the same name but another shape is not loaded: the target's stays new and the source's unused, with
    both shapes in the note. Floating tensors are cast to the target's dtype; the target keeps its device."""
    target = model.state_dict()
    buffers = {name for name, _ in model.named_buffers()}
    used, rows, update = set(), [], {}

    def row(name, status, source, tensor, note=""):
        rows.append({"tensor": name, "status": status, "source": source, "shape": tuple(tensor.shape),
                     "numel": tensor.numel(), "note": note})

    for name, tensor in target.items():
        if name in state_dict and tuple(state_dict[name].shape) == tuple(tensor.shape):
            update[name] = state_dict[name]
            used.add(name)
            row(name, LOADED, name, tensor)
        elif (other := _same_layer(state_dict, name, tensor.shape)) is not None:
            update[name] = state_dict[other]
            used.add(other)
            row(name, LOADED, other, tensor, "the same layer, wrapped in an nn.Sequential on one side")
        elif (split := _fused_slices(state_dict, name, tensor.shape)) is not None:
            fused, part = split
            update[name] = state_dict[fused][part]
            used.add(fused)
            row(name, LOADED, f"{fused}[rows {part.start}:{part.stop}]", tensor, "one third of the fused q/k/v map")
        elif (joined := _joined(state_dict, name, tensor.shape)) is not None:
            parts, value = joined
            update[name] = value
            used.update(parts)
            row(name, LOADED, " + ".join(parts), tensor, "the separate q, k, v maps joined")
        elif name in state_dict:
            row(name, NEW, "", tensor, f"source has shape {tuple(state_dict[name].shape)}: kept as initialised")
        else:
            row(name, NEW, "", tensor,
                "buffer, as at construction" if name in buffers else "initialised as at construction")
    for name, tensor in state_dict.items():
        if name not in used:
            note = f"target has shape {tuple(target[name].shape)}" if name in target else "no such tensor in the target"
            row(name, UNUSED, name, tensor, note)
    with torch.no_grad():
        for name, value in update.items():
            dest = target[name]
            dest.copy_(value.to(dest.dtype) if value.is_floating_point() else value)
    return TransferReport(rows)
