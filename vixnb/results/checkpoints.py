"""Per-epoch checkpoints of a training run: saved atomically with the previous one kept, loaded without
unpickling arbitrary objects (``weights_only=True``), and set aside, never trusted, when unreadable."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import torch

from ..files import atomic_write, signals_held

#: what every checkpoint of the training engine holds
CHECKPOINT_KEYS = ("model", "optimizer", "scaler", "shuffle", "cpu_rng", "history", "best_state", "elapsed", "switch")


def previous_path(path):
    """Where the checkpoint before ``path``'s latest is kept."""
    path = Path(path)
    return path.with_name(path.stem + ".previous" + path.suffix)


def save_checkpoint(path, state):
    """Write ``state`` to ``path`` (atomically), keeping the checkpoint it replaces at ``previous_path``."""
    # straight into the file: no copy in memory (a ViT-B/16's state with AdamW's moments is about 1 GB; serialising
    # it into a buffer first took about twice as long); a full disk (which torch's writer reports as "unexpected
    # pos") names the path and about the size of its tensors (``files.atomic_write``)
    # the checkpoint it replaces moves to previous_path only once the new one is whole; a stop signal (Ctrl-C, a
    # batch's SIGTERM) waits for the write to end (``signals_held``): raised inside torch's writer it came out as a
    # RuntimeError, a failed run, whose job then removed the checkpoints a stopped run keeps
    with signals_held():
        atomic_write(path, lambda f: torch.save(state, f), binary=True, keep_previous=previous_path(path),
                     size=tensor_bytes(state))


def tensor_bytes(state):
    """The bytes of the tensors in ``state`` (nested in mappings, lists and tuples): about a checkpoint's size."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(v) for v in state)
    return 0


def _say(message):
    print(f"vixnb: {message}", file=sys.stderr, flush=True)


def load_checkpoint(path, check=None):
    """The newest readable checkpoint state at ``path`` (else its previous one), or None when there is none.

    A file that cannot be read as a checkpoint (truncated, garbage, wrong keys, or anything that is not plain
    tensors and containers: ``torch.load(weights_only=True)`` refuses to run code), or whose state ``check(state)``
    refuses (it returns why: another architecture's weights, ``other_architecture``), is moved aside to
    ``<name>.unreadable-<time>``, and the message names both paths."""
    path = Path(path)
    for candidate in (path, previous_path(path)):
        if not candidate.exists():
            continue
        try:
            state = torch.load(candidate, map_location="cpu", weights_only=True)
            missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
            if missing:
                raise KeyError(f"no {', '.join(missing)}")
            if check is not None and (why := check(state)):
                raise ValueError(why)
        except Exception as e:  # noqa: BLE001  (any failure to read means: do not trust this file)
            aside = candidate.with_name(f"{candidate.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
            os.replace(candidate, aside)
            then = ("resuming from the previous checkpoint" if candidate == path and previous_path(path).exists()
                    else "starting the run over")
            _say(f"checkpoint {candidate} is unreadable ({type(e).__name__}: {_why(e)}); moved aside to {aside}; "
                 f"{then}")
            continue
        return state
    return None


def _why(error):
    """The part of a load error that says what is wrong with the file: never torch's advice to load it with
    ``weights_only=False`` (that would run whatever code the file holds)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if any("weights_only" in line for line in lines):
        lines = [f"it holds objects other than tensors: {line}" for line in lines
                 if not re.search(r"weights_only|trusted source|documentation|https?://", line)] or \
                ["it holds objects other than tensors"]
    return (lines or [type(error).__name__])[0][:200]


def other_architecture(model, weights):
    """Why ``weights`` (a state dict) are not ``model``'s (names or shapes differ: another model's checkpoint at
    this run's path), or None."""
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = {k: tuple(getattr(v, "shape", ())) for k, v in weights.items()} if isinstance(weights, dict) else {}
    if own == theirs:
        return None
    differ = sorted(set(own) ^ set(theirs)) or sorted(k for k in own if own[k] != theirs[k])
    return (f"its weights are another architecture's ({len(differ)} tensor(s) differ from this run's model, e.g. "
            f"{differ[0]})")


def remove_checkpoints(path):
    """Remove a finished run's checkpoint and its previous one."""
    for p in (Path(path), previous_path(path)):
        p.unlink(missing_ok=True)


def has_checkpoint(path):
    """Whether a run's checkpoint, or its previous one, is on disk (a run that already saved an epoch)."""
    return Path(path).exists() or previous_path(path).exists()


def remove_failed_checkpoints(path):
    """``remove_checkpoints`` after a failed run: on a read-only store the run's own error says so, not the
    cleanup's, so an ``OSError`` here is let pass."""
    try:
        remove_checkpoints(path)
    except OSError:
        pass
