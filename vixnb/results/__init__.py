"""The results store (training runs, measurements, benchmarks), the one provenance function, and the one
compute policy (``compute="never" | "missing" | "always"``)."""
from .provenance import device_name, git_commit, made_on, provenance
from .store import COMPUTE, ResultsStore, atomic_write, check_compute, config_key, default_root

__all__ = ["COMPUTE", "ResultsStore", "atomic_write", "check_compute", "config_key", "default_root", "device_name",
           "git_commit", "made_on", "provenance"]
