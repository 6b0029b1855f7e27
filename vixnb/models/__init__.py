"""Model families, registered by name. Importing this module fills the registry."""
from ..registry import register_model
from .mlp_mixer import MLPMixer
from .vix import ViX

# Per-mixer options that reproduce the ViX paper's counts (notes section 2; authors' scripts).
VIX_MIXERS = {
    "vit": ("softmax", {}),
    "vip": ("performer", {"kernel": "softmax", "qkv_bias": True}),
    "vil": ("linformer", {"k": 64, "share_kv": True, "one_kv_head": True}),
    "vin": ("nystrom", {"num_landmarks": 64, "pinv_iterations": 6, "residual_conv_kernel": 33}),
    "fnet": ("fnet", {}),
}


LABELS = {"vit": "ViT", "vip": "ViP", "vil": "ViL", "vin": "ViN", "fnet": "FNet"}


def _geometry(image_size, hybrid):
    """CIFAR: patch 1 / stride 1 (1024 tokens). 64x64 data: patch 2, or first-conv stride 2 for hybrids."""
    factor = image_size // 32
    return {"stem_stride": factor} if hybrid else {"patch_size": factor}


def _vix(short, hybrid):
    kind, defaults = VIX_MIXERS[short]

    def build(*, image_size, num_classes, channels, mixer_options=None, **overrides):
        options = {**defaults, **(mixer_options or {})}
        cfg = dict(image_size=image_size, num_classes=num_classes, channels=channels,
                   hybrid=hybrid, **_geometry(image_size, hybrid))
        cfg.update(overrides)
        return ViX(mixer=kind, mixer_options=options, **cfg)

    build.__name__ = f"hybrid_{short}" if hybrid else short
    build.__doc__ = f"{'Hybrid ' if hybrid else ''}{short} ({kind} token mixer), ViX paper configuration."
    return build


for _short in VIX_MIXERS:
    for _hybrid in (False, True):
        register_model(_vix(_short, _hybrid), paper="vix", label=("Hybrid " if _hybrid else "") + LABELS[_short])


def _mixer(hybrid):
    def build(*, image_size, num_classes, channels, **overrides):
        cfg = dict(image_size=image_size, num_classes=num_classes, channels=channels,
                   hybrid=hybrid, **_geometry(image_size, hybrid))
        cfg.update(overrides)
        return MLPMixer(**cfg)

    build.__name__ = "hybrid_mlp_mixer" if hybrid else "mlp_mixer"
    return build


register_model(_mixer(False), paper="vix", label="MLP Mixer")
register_model(_mixer(True), paper="vix", label="Hybrid MLP Mixer")

__all__ = ["ViX", "MLPMixer", "VIX_MIXERS"]
