"""MLP-Mixer (Tolstikhin et al.) in the ViX configuration: token MLP by kernel-1 Conv1d, channel MLP by
Linear, no class token, final LayerNorm, mean over tokens, Linear head. Hybrid: the 3-conv stem."""
from einops.layers.torch import Reduce
from torch import nn

from .. import layers
from ..layers.blocks import PreNorm, mlp, residual_stack
from ..layers.stems import embedding


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
