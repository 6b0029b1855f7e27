"""Model families, one file each, and the registry that names them (``registry``): importing this package
registers every model.

- ``vix``: ViT, ViP, ViL, ViN, FNet, their Hybrid forms and their RoPE forms (class ``ViX``), the `cxv`
  paper's ViT-10/4, FNet-10, Hybrid ViN-6/8 and Hybrid ViP-6/8, and the `linattn` paper's ViT-B/16 with softmax,
  Linformer and Performer attention;
- ``mlp_mixer``: MLP-Mixer and Hybrid MLP-Mixer, and the `cxv` paper's MLP Mixer-5 (class ``MLPMixer``);
- ``levit``: LeViT, LeViP, LeViL, LeViN (class ``LeViX``);
- ``cct``: CCT, CCP, CCL, CCN (class ``CCX``), and the `cxv` paper's CCT-6/4;
- ``cvt``: CvT, CvP, CvL, CvN (class ``CvX``), and the `cxv` paper's CvT-5/4;
- ``cxv``: the `cxv` paper's CNV, CPV and CLTV (class ``CXV``);
- ``vilt``: the `cxv` paper's Hybrid ViLT (class ``ViLT``), a reconstruction from its figure;
- ``resnet_cifar``, ``convmixer``, ``wavemix``: the `cxv` paper's baselines ResNet-18/34 (torchvision's
  ``ResNet``), ConvMixer-16 (class ``ConvMixer``) and WaveMix-5 (class ``WaveMix``);
- ``pit``: PiT, PiN, PiP and their Hybrid forms (class ``PiX``);
- ``vit_small``: the `shaped` paper's vanilla and simplified small ViTs (class ``SmallViT``).

``warm_start.transfer`` carries a trained model's weights into another (a ViT checkpoint into its Linformer or
Performer form) and reports every tensor as loaded, new or unused (``TransferReport``).
"""
# importing the family files registers their models
from . import cct, convmixer, cvt, cxv, levit, pit, resnet_cifar, vilt, vit_small, wavemix  # noqa: F401
from .mlp_mixer import MLPMixer
from .registry import (architecture_signature, create_model, default_dtype, list_models, meta_model, model_cfg,
                       model_entrypoint, model_fact, model_modules, model_family, register_model, settings_from_key,
                       settings_in_key)
from .vix import ViX, paper_mixers
from .warm_start import TransferReport, transfer

__all__ = ["MLPMixer", "ViX", "architecture_signature", "create_model", "default_dtype", "list_models", "meta_model",
           "model_cfg",
           "model_entrypoint", "model_fact", "model_family", "model_modules", "paper_mixers", "register_model",
           "settings_from_key", "settings_in_key", "TransferReport", "transfer"]
