"""vixnb: a reproducible study of efficient vision transformers."""
from .counting import count_params, summary_size_mb
from .registry import create_model, list_models, register_model

__all__ = ["create_model", "list_models", "register_model", "count_params", "summary_size_mb"]
__version__ = "0.1.0"
