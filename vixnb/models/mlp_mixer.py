"""MLP-Mixer (Tolstikhin et al.) in the `vix` paper's configuration: token MLP by kernel-1 Conv1d, channel MLP
by Linear, no class token, final LayerNorm, mean over tokens, Linear head. Hybrid: the 3-conv stem.

``MLPMixer``'s defaults are the paper's (dim 128, depth 4, expansion factor 1). Each registered model is one
function below; overrides given to ``create_model`` replace its arguments."""
from einops.layers.torch import Reduce
from torch import nn

from .. import layers
from ..layers.blocks import PreNorm, mlp, residual_stack
from ..layers.stems import embedding, stem_geometry
from .registry import register_model


class MLPMixer(nn.Module):
    def __init__(self, *, image_size, num_classes, patch_size=1, hybrid=False, stem_stride=1, dim=128, depth=4,
                 expansion_factor=1, channels=3, dropout=0.0):
        super().__init__()
        side = image_size // (stem_stride if hybrid else patch_size)
        tokens = side * side
        self.to_patch_embedding = embedding(channels, dim, hybrid=hybrid, patch_size=patch_size, stem_stride=stem_stride)
        self.layers = nn.ModuleList(
            nn.ModuleList([
                PreNorm(dim, layers.build("mlp", dim=dim, heads=None, dim_head=None, seq_len=tokens,
                                          expansion_factor=expansion_factor, dropout=dropout)),
                PreNorm(dim, mlp(dim, dim * expansion_factor, dropout=dropout)),
            ])
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.pool = Reduce("b n c -> b c", "mean")
        self.head = nn.Linear(dim, num_classes)

    def forward(self, img):
        x = residual_stack(self.layers, self.to_patch_embedding(img))
        return self.head(self.pool(self.norm(x)))


def mixer_model(image_size, num_classes, channels, config, *, hybrid=False):
    """An ``MLPMixer`` with the patch embedding or (``hybrid``) the conv stem at the paper's geometry for
    ``image_size`` (``stem_geometry``), the ``create_model`` overrides ``config`` applied."""
    arguments = {"hybrid": hybrid, **stem_geometry(image_size, hybrid=hybrid), **config}
    return MLPMixer(image_size=image_size, num_classes=num_classes, channels=channels, **arguments)


@register_model(paper="vix", label="MLP Mixer")
def mlp_mixer(*, image_size, num_classes, channels, **config):
    """MLP-Mixer: an MLP across the tokens (expansion factor 1) instead of attention."""
    return mixer_model(image_size, num_classes, channels, config)


@register_model(paper="vix", label="Hybrid MLP Mixer")
def hybrid_mlp_mixer(*, image_size, num_classes, channels, **config):
    """MLP-Mixer with the 3-conv stem."""
    return mixer_model(image_size, num_classes, channels, config, hybrid=True)
