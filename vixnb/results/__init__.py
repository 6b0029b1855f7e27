"""The results store: training runs, measurements and benchmarks, each with its provenance."""
from .store import ResultsStore, atomic_write, config_key, default_root

__all__ = ["ResultsStore", "atomic_write", "config_key", "default_root"]
