"""CCT (Compact Convolutional Transformer, Hassani et al.) and its X-former forms CCP, CCL, CCN, as the `vix` paper
configures them (section 5.3, Tables 3 and 4).

The authors' scripts (Models/CCT.py, Models/ccp.py, Models/CCN.py of pranavphoenix/VisionXformer; CCL has none)
are vit-pytorch's ``cct.py`` of July 2021 with a stride per tokenizer conv, and the attention swapped for
performer-pytorch's (qkv bias on) or nystrom-attention's. ``CCX`` follows them module for module, because the
paper's "Parameters" and "Size (MB)" (torchsummary) depend on which modules exist and are called:

- tokenizer: three bias-free 3x3 convs 3->64->64->128 (padding 1), each followed by ReLU and max-pool 3/1/1,
  flattened to one token per pixel; no class token;
- a learned position embedding (an ``nn.Parameter``: not in the paper count), embedding dropout;
- 4 layers of x + DropPath(mixer(LayerNorm(x))), then x = LayerNorm(x) on the residual stream itself (CCT's
  layer, not ViT's pre-norm feed-forward), then x + DropPath(Linear 128->512, GELU, Linear 512->128); GELU is
  a function, not a module (so torchsummary sees none). Feed-forward 512: the scripts pass ``mlp_radio=1.``, a
  misspelling that ``**kwargs`` swallows, so CCT's default mlp_ratio 4 applies;
- stochastic depth rising linearly from 0 (first layer) to 0.1 (last), one ``DropPath`` per layer called on
  both branches (the authors' first layer has an ``nn.Identity`` there; same output, same count);
- sequence pooling: LayerNorm, softmax over the tokens of Linear(128, 1), the weighted mean of the tokens,
  Linear head. As in vit-pytorch, tokenizer and the rest (``SeqPoolTransformer``) are two modules.

Token mixers: CCP, CCL, CCN take the ViX models' mixers and options (``vix.paper_mixer``: ViP, ViL, ViN) at
the family's own sequence length (1024 tokens, no class token). CCT's attention is ViT's softmax attention
(the same Linear modules, so T = N - 528 holds) plus the authors' dropout of 0.1 on the attention weights
(``CCTAttention``); in the authors' code the hooked module with the n x n output is that dropout (softmax is
a tensor method), here the ``nn.Softmax`` of the materialised path: the same size. CCL has no script: its
mixer is ViL's (k=64, one shared key/value head and projection), at 1024 tokens.

Geometry: on CIFAR (32 px) every conv has stride 1 (the paper's text; this reproduces Table 3's Size (MB));
on Tiny ImageNet (64 px) the first conv has stride 2 (the scripts: ``stride=(2,1,1)``, ``img_size=64``), so
both datasets give 32 x 32 = 1024 tokens (``stem_geometry``) and the 64 px input adds no parameter.

Initialisation as vit-pytorch's CCT: Kaiming-normal tokenizer convs, truncated-normal (std 0.02) Linear
weights with zero biases and unit LayerNorms everywhere after the tokenizer (mixers included), position
embedding truncated normal with std 0.2. Overrides given to ``create_model`` work as in ``vix``:
``mixer_options`` merges into the model's own mixer options, ``mixer=`` swaps the mixer (dropping the model's
options), any other key replaces a ``CCX`` argument (``depth=1``, ``drop_path=0.0``).
"""
import torch
import torch.nn.functional as F
from torch import nn

from .. import layers
from ..layers.blocks import DropPath
from ..layers.heads import merge_heads
from ..layers.softmax import SoftmaxAttention
from ..layers.stems import stem_geometry
from .registry import mixer_overrides, register_model
from .vix import PER_HEAD_BEFORE, paper_mixer


class CCTAttention(SoftmaxAttention):
    """ViT's softmax attention (``layers.SoftmaxAttention``: fused qkv Linear without bias, output Linear with
    bias) with dropout ``attn_dropout`` on the attention weights, as CCT's own ``Attention`` class has."""

    mechanism = SoftmaxAttention.mechanism  # what the synthesis page groups it under (``report.claims.synthesis``)
    map_description = ("CCT's exact softmax(QK^T/sqrt(d)) over all tokens (its dropout on the weights acts only in "
                "training); rows sum to 1")

    def __init__(self, *, attn_dropout=0.0, **options):
        super().__init__(**options)
        self.attn_dropout = attn_dropout

    def extra_repr(self):
        return f"attn_dropout={self.attn_dropout}, fused={self.fused}"

    def forward(self, x):
        q, k, v = self.qkv(x)
        p = self.attn_dropout if self.training else 0.0
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, scale=self.scale)
        else:
            out = F.dropout(self.attend(q @ k.transpose(-1, -2) * self.scale), p) @ v
        return self.to_out(merge_heads(out))


class Tokenizer(nn.Module):
    """Bias-free 3x3 convs (the first with ``stride``), each followed by ReLU and max-pool 3/1/1; one token per
    output pixel."""

    def __init__(self, channels, dim, *, hidden=64, depth=3, stride=1):
        super().__init__()
        widths = [channels] + [hidden] * (depth - 1) + [dim]
        self.convs = nn.Sequential(*(
            m for i in range(depth)
            for m in (nn.Conv2d(widths[i], widths[i + 1], 3, stride=stride if i == 0 else 1, padding=1, bias=False),
                      nn.ReLU(), nn.MaxPool2d(3, stride=1, padding=1))
        ))
        self.flatten = nn.Flatten(2)

    def forward(self, img):
        return self.flatten(self.convs(img)).transpose(1, 2)


class EncoderLayer(nn.Module):
    """CCT's layer: x + DropPath(mixer(LayerNorm(x))), LayerNorm of the sum, + DropPath(feed-forward)."""

    def __init__(self, dim, mixer, *, mlp_dim, dropout=0.0, drop_path=0.0):
        super().__init__()
        self.pre_norm, self.self_attn = nn.LayerNorm(dim), mixer
        self.drop_path = DropPath(drop_path)
        self.norm1 = nn.LayerNorm(dim)
        self.linear1, self.dropout1 = nn.Linear(dim, mlp_dim), nn.Dropout(dropout)
        self.linear2, self.dropout2 = nn.Linear(mlp_dim, dim), nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.drop_path(self.self_attn(self.pre_norm(x))))
        return x + self.drop_path(self.dropout2(self.linear2(self.dropout1(F.gelu(self.linear1(x))))))


class SeqPoolTransformer(nn.Module):
    """Position embedding, the encoder layers, LayerNorm, sequence pooling and the Linear head."""

    def __init__(self, *, num_tokens, num_classes, dim, depth, mlp_dim, make_mixer, dropout=0.0, emb_dropout=0.0,
                 drop_path=0.1):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, num_tokens, dim))
        self.dropout = nn.Dropout(emb_dropout)
        rates = [drop_path * i / (depth - 1) if depth > 1 else 0.0
                 for i in range(depth)]  # linspace(0, drop_path, depth)
        self.layers = nn.ModuleList(
            EncoderLayer(dim, make_mixer(layer_index=i + 1, depth=depth), mlp_dim=mlp_dim, dropout=dropout,
                         drop_path=rates[i])
            for i in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.attention_pool = nn.Linear(dim, 1)
        self.fc = nn.Linear(dim, num_classes)
        self.apply(_init_weights)
        nn.init.trunc_normal_(self.pos_embedding, std=0.2)

    def forward(self, x):
        x = self.dropout(x + self.pos_embedding)
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        weights = self.attention_pool(x).softmax(dim=1)  # (b, n, 1): one weight per token
        return self.fc((weights.transpose(1, 2) @ x).squeeze(1))


def _init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


class CCX(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, stem_stride=1, dim=128, depth=4,
                 heads=4, dim_head=32, mlp_dim=512, conv_channels=64, conv_layers=3, channels=3, dropout=0.0,
                 emb_dropout=0.0, drop_path=0.1):
        super().__init__()
        if image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by stem_stride {stem_stride}")
        num_tokens = (image_size // stem_stride) ** 2
        self.mixer_name, self.mixer_options = mixer, dict(mixer_options or {})

        def make_mixer(layer_index, depth):
            common = dict(dim=dim, heads=heads, dim_head=dim_head, seq_len=num_tokens, **self.mixer_options)
            if mixer == "softmax":
                return CCTAttention(**common)
            return layers.build(mixer, layer_index=layer_index, depth=depth, **common)

        self.tokenizer = Tokenizer(channels, dim, hidden=conv_channels, depth=conv_layers, stride=stem_stride)
        for m in self.tokenizer.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
        self.classifier = SeqPoolTransformer(num_tokens=num_tokens, num_classes=num_classes, dim=dim, depth=depth,
                                             mlp_dim=mlp_dim, make_mixer=make_mixer, dropout=dropout,
                                             emb_dropout=emb_dropout, drop_path=drop_path)

    def forward(self, img):
        return self.classifier(self.tokenizer(img))


def ccx_model(image_size, num_classes, channels, config, mixer, mixer_options=None):
    """A ``CCX`` with token mixer ``mixer`` (options ``mixer_options``), the first conv's stride for ``image_size``
    (``stem_geometry``: 1 at 32 px, 2 at 64 px), and the ``create_model`` overrides ``config`` applied (see the
    module doc)."""
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    arguments = {**stem_geometry(image_size, hybrid=True), **config}
    return CCX(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **arguments)


@register_model(paper="vix", label="CCT")
def cct(*, image_size, num_classes, channels, **config):
    """Compact Convolutional Transformer: softmax attention with dropout 0.1 on the weights (``CCTAttention``)."""
    mixer, options = paper_mixer("vit")
    return ccx_model(image_size, num_classes, channels, config, mixer, {**options, "attn_dropout": 0.1})


@register_model(paper="vix", label="CCP", changed_defaults=PER_HEAD_BEFORE)
def ccp(*, image_size, num_classes, channels, key_max="global", **config):
    """Compact Convolutional Performer: ViP's mixer (FAVOR+, softmax kernel, biased q/k/v; ``key_max`` as ``vip``)."""
    return ccx_model(image_size, num_classes, channels, config, *paper_mixer("vip", key_max=key_max))


@register_model(paper="vix", label="CCL")
def ccl(*, image_size, num_classes, channels, **config):
    """Compact Convolutional Linformer: ViL's mixer (no script of the authors'; k=64, one shared key/value head)."""
    return ccx_model(image_size, num_classes, channels, config, *paper_mixer("vil"))


@register_model(paper="vix", label="CCN")
def ccn(*, image_size, num_classes, channels, **config):
    """Compact Convolutional Nystromformer: ViN's mixer (64 landmarks, 6 iterations, residual conv of kernel 33)."""
    return ccx_model(image_size, num_classes, channels, config, *paper_mixer("vin"))


@register_model(paper="cxv", label="CCT-6/4")
def cct_6_4(*, image_size, num_classes, channels, **config):
    """CCT at the `cxv` paper's size: 6 layers, 4 heads of 32, dim 128, learned positions, the 3x3 convs and 3x3
    max-pools of stride 1 (padding 1) above; 1,301,323 parameters, 1.32 G paper MACs (its Table 1: 1.3 M, 1.32 G).

    Feed-forward 512, not the paper's "2 x dim" (256): at 256 CCT-6/4 counts 906,571 and 0.92 G MACs, while 512 (the
    vix paper's CCT script's mlp_ratio 4, its ``mlp_radio`` typo) fits both printed figures. Dropout 0.5 (cxv
    section 4.1) where CCT's one ``dropout_rate`` acts: after the position embedding, after the attention's output
    projection and in the feed-forward (``dropout=`` sets all three); CCT's attention-weight dropout and stochastic
    depth stay at 0.1."""
    config = {"depth": 6, "heads": 4, "dim_head": 32, "mlp_dim": 512, "dropout": 0.5, **config}
    config.setdefault("emb_dropout", config["dropout"])
    mixer, options = paper_mixer("vit")
    return ccx_model(image_size, num_classes, channels, config, mixer,
                     {**options, "attn_dropout": 0.1, "dropout": config["dropout"]})
