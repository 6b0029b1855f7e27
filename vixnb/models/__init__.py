"""Model families, one file each, and the registry that names them (``registry``): importing this package
registers every model.

- ``vix``: ViT, ViP, ViL, ViN, FNet and their Hybrid forms (class ``ViX``);
- ``mlp_mixer``: MLP-Mixer and Hybrid MLP-Mixer (class ``MLPMixer``);
- ``pit``: PiT, PiN, PiP and their Hybrid forms (class ``PiX``).
"""
from . import pit  # noqa: F401
from .mlp_mixer import MLPMixer
from .registry import architecture_signature, create_model, list_models, model_cfg, model_entrypoint, register_model
from .vix import ViX, paper_mixers

__all__ = ["MLPMixer", "ViX", "architecture_signature", "create_model", "list_models", "model_cfg", "model_entrypoint", "paper_mixers",
           "register_model"]
