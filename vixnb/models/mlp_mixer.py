"""MLP-Mixer (Tolstikhin et al.) in the `vix` paper's configuration: token MLP by kernel-1 Conv1d, channel MLP
by Linear, no class token, final LayerNorm, mean over tokens, Linear head. Hybrid: the 3-conv stem.

``MLPMixer``'s defaults are the paper's (dim 128, depth 4, expansion factor 1). ``channel_expansion`` sets the
channel MLP's factor apart from the token MLP's ``expansion_factor`` (by default both are ``expansion_factor``,
as in the `vix` authors' script); lucidrains' later mlp-mixer-pytorch has the two, with 0.5 for the channel MLP.

MLP Mixer-5 of the `cxv` paper (Table 1: 21.3 M parameters, 3.02 GMACs): dim 256, 5 layers, patch 1 (1,024
tokens), dropout 0.5, as its section 4.1 says. The expansion factors are not stated; of factors 0.5, 1, 2, 4 for
each MLP, only token 2 (1024 -> 2048 -> 1024, "double the input dimension") with channel 0.5 (256 -> 128 -> 256,
lucidrains' default) gives 21.3 M: 21,325,706 (paper convention = true count), the registered ``mlp_mixer_5``;
its MACs (Linear and Conv1d layers) are 5.705 G. The table's 3.02 G is what token factor 1 with channel 0.5 gives
(3.021 G), but that model has 10,834,826 parameters: no one configuration fits both cells. ResNet-34's count
(21,282,122) also rounds to 21.3 M, so the parameter cell may not be a copy error.

Each registered model is one function below; overrides given to ``create_model`` replace its arguments."""
from einops.layers.torch import Reduce
from torch import nn

from .. import layers
from ..layers.blocks import PreNorm, mlp, residual_stack
from ..layers.stems import embedding, stem_geometry
from .registry import register_model


class MLPMixer(nn.Module):
    def __init__(self, *, image_size, num_classes, patch_size=1, hybrid=False, stem_stride=1, dim=128, depth=4,
                 expansion_factor=1, channel_expansion=None, channels=3, dropout=0.0):
        super().__init__()
        side = image_size // (stem_stride if hybrid else patch_size)
        tokens = side * side
        channel_hidden = int(dim * (expansion_factor if channel_expansion is None else channel_expansion))
        self.to_patch_embedding = embedding(channels, dim, hybrid=hybrid, patch_size=patch_size,
                                            stem_stride=stem_stride)
        self.layers = nn.ModuleList(
            nn.ModuleList([
                PreNorm(dim, layers.build("mlp", dim=dim, heads=None, dim_head=None, seq_len=tokens,
                                          expansion_factor=expansion_factor, dropout=dropout)),
                PreNorm(dim, mlp(dim, channel_hidden, dropout=dropout)),
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


@register_model(paper="cxv", label="MLP Mixer-5")
def mlp_mixer_5(*, image_size, num_classes, channels, **config):
    """The `cxv` paper's MLP-Mixer: dim 256, 5 layers, token MLP factor 2, channel MLP factor 0.5, dropout 0.5."""
    config = {"dim": 256, "depth": 5, "expansion_factor": 2, "channel_expansion": 0.5, "dropout": 0.5, **config}
    return mixer_model(image_size, num_classes, channels, config)
