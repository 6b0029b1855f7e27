"""Model families, one file each; importing this package registers their models (``vixnb.registry``).

- ``vix``: ViT, ViP, ViL, ViN, FNet and their Hybrid forms (class ``ViX``);
- ``mlp_mixer``: MLP-Mixer and Hybrid MLP-Mixer (class ``MLPMixer``).
"""
from .mlp_mixer import MLPMixer
from .vix import ViX, paper_mixers

__all__ = ["ViX", "MLPMixer", "paper_mixers"]
