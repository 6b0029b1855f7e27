"""The results store (training runs, measurements, benchmarks), the one provenance function, and the one
compute policy (``compute="never" | "missing" | "always"``: ``policy``)."""
from .provenance import device_name, git_commit, made_on, provenance
from .checkpoints import (has_checkpoint, load_checkpoint, previous_path, remove_checkpoints,
                          remove_failed_checkpoints, save_checkpoint)
from .policy import COMPUTE, check_compute
from ..errors import StoreError
from ..profiles import config_key
from .store import ResultsStore, default_root, read_json

__all__ = ["COMPUTE", "ResultsStore", "StoreError", "read_json", "load_checkpoint", "previous_path", "remove_checkpoints",
           "has_checkpoint", "remove_failed_checkpoints",
           "save_checkpoint", "check_compute", "config_key", "default_root", "device_name", "git_commit", "made_on",
           "provenance"]
