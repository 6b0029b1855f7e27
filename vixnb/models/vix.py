"""ViT and the Vision X-formers (ViP, ViL, ViN), FNet, and their Hybrid (convolutional-embedding) forms.

One class: pixels or patches (or a 3-conv stem) -> tokens, class token, learnable 1-D position
embedding (or RoPE inside the mixer), the shared transformer with an injected token mixer, and a
LayerNorm + Linear head on the class token.
"""
import torch
from einops import repeat
from torch import nn

from .. import layers
from ..layers.blocks import Transformer
from ..layers.stems import embedding


class ViX(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, patch_size=1, hybrid=False,
                 stem_stride=1, dim=128, depth=4, heads=4, dim_head=32, mlp_dim=256, channels=3, dropout=0.0,
                 emb_dropout=0.0, pos_embedding="learned"):
        super().__init__()
        if image_size % patch_size or image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by patch_size {patch_size} and stem_stride {stem_stride}")
        side = image_size // (stem_stride if hybrid else patch_size)
        num_patches = side * side
        self.to_patch_embedding = embedding(channels, dim, hybrid=hybrid, patch_size=patch_size, stem_stride=stem_stride)
        if pos_embedding not in ("learned", "rope"):
            raise ValueError(f"pos_embedding must be 'learned' or 'rope', got {pos_embedding!r}")
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim)) if pos_embedding == "learned" else None
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)
        options = dict(mixer_options or {})
        if pos_embedding == "rope":
            options["rope"] = layers.Rotary(dim_head, num_patches + 1)
        self.transformer = Transformer(
            dim=dim, depth=depth, mlp_dim=mlp_dim, dropout=dropout,
            make_mixer=lambda: layers.build(mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=num_patches + 1, **options),
        )
        self.to_latent = nn.Identity()
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def tokens(self, img):
        """Embedded token sequence (class token first) fed to the transformer."""
        x = self.to_patch_embedding(img)
        x = torch.cat((repeat(self.cls_token, "1 n d -> b n d", b=x.shape[0]), x), dim=1)
        if self.pos_embedding is not None:
            x = x + self.pos_embedding[:, : x.shape[1]]
        return self.dropout(x)

    def forward(self, img):
        x = self.transformer(self.tokens(img))
        return self.mlp_head(self.to_latent(x[:, 0]))
