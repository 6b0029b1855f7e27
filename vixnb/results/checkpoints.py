"""Per-epoch checkpoints of a training run: saved atomically with the previous one kept, loaded without
unpickling arbitrary objects (``weights_only=True``), and set aside, never trusted, when unreadable."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

from ..files import atomic_write

#: what every checkpoint of the training engine holds
CHECKPOINT_KEYS = ("model", "optimizer", "scaler", "shuffle", "cpu_rng", "history", "best_state", "elapsed", "switch")


def previous_path(path):
    """Where the checkpoint before ``path``'s latest is kept."""
    path = Path(path)
    return path.with_name(path.stem + ".previous" + path.suffix)


def save_checkpoint(path, state):
    """Write ``state`` to ``path`` (atomically), keeping the checkpoint it replaces at ``previous_path``."""
    path = Path(path)
    if path.exists():
        os.replace(path, previous_path(path))
    atomic_write(path, lambda f: torch.save(state, f), binary=True)


def _say(message):
    print(f"vixnb: {message}", file=sys.stderr, flush=True)


def load_checkpoint(path):
    """The newest readable checkpoint state at ``path`` (else its previous one), or None when there is none.

    A file that cannot be read as a checkpoint (truncated, garbage, wrong keys, or anything that is not plain
    tensors and containers: ``torch.load(weights_only=True)`` refuses to run code) is moved aside to
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
        except Exception as e:  # noqa: BLE001  (any failure to read means: do not trust this file)
            aside = candidate.with_name(f"{candidate.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
            os.replace(candidate, aside)
            then = ("resuming from the previous checkpoint" if candidate == path and previous_path(path).exists()
                    else "starting the run over")
            _say(f"checkpoint {candidate} is unreadable ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                 f"moved aside to {aside}; {then}")
            continue
        return state
    return None


def remove_checkpoints(path):
    """Remove a finished run's checkpoint and its previous one."""
    for p in (Path(path), previous_path(path)):
        p.unlink(missing_ok=True)
