"""The results store (training runs, measurements, benchmarks, keyed by ``config_key``), checkpoints, the one
provenance function and the pack that carries results between machines. It stores; whether a stored result
answers, and whether to make one, is the compute policy's (``runs.policy``)."""
from .provenance import device_name, git_commit, made_on, provenance
from .checkpoints import (has_checkpoint, load_checkpoint, previous_path, remove_checkpoints,
                          remove_failed_checkpoints, save_checkpoint)
from ..errors import StoreError
from .layout import config_key, read_json
from .store import ResultsStore, default_root

__all__ = ["ResultsStore", "StoreError", "read_json", "load_checkpoint", "previous_path", "remove_checkpoints",
           "has_checkpoint", "remove_failed_checkpoints",
           "save_checkpoint", "config_key", "default_root", "device_name", "git_commit", "made_on",
           "provenance"]
